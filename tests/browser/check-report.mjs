#!/usr/bin/env node
// Checks the self-contained HTML report of `tally report --html` in headless Chromium.
//
//   node tests/browser/check-report.mjs REPORT.html [--screenshots DIR] [--timeout-ms N]
//
// Opens REPORT.html through a file:// URL (viewport 1400x900), waits until the page says it is
// rendered, then drives every tab the way a reader would (click the tabs, click a call-graph node,
// search and zoom the flame graph, pick a method in the source view) and checks the page contract
// below. Prints one JSON object on stdout:
//   { ok, load_ms, console_errors, page_errors, requests, checks: [{name, ok, detail}], screenshots }
// Exit status: 0 when every check passed, 1 when one failed (or the run timed out), 2 when the
// check could not run: bad arguments, missing report file, missing playwright-core or Chromium.
//
// Page contract:
// - rendered: body[data-ready="1"] and window.__tallyReadyMs = performance.now() at that moment;
//   on failure body[data-ready="error"] and a message in #fatal.
// - tabs: button[data-tab] = overview|graph|flame|timeline|vm|source; a click shows
//   section#tab-<name> and hides the other sections; overview is shown first.
// - #tab-graph: svg#graph-svg with g.node[data-key][data-color in blue|green|red|grey][data-name];
//   a click on a node shows #diagram holding an <svg> and an <h3> whose text is the node's data-name.
// - #tab-flame: svg#flame-svg with g.frame[data-name][data-tier], input#flame-search, #flame-match,
//   button#flame-reset; typing part of a frame's name fills #flame-match and marks g.frame.match;
//   a click on a frame zooms to it (the svg is redrawn); the reset button redraws it again.
// - #tab-timeline: svg#timeline-svg with at least one child element.
// - #tab-vm: table#vm-components with at least one tbody tr.
// - #tab-source: select#source-method with options; choosing one fills #source-lines with tr rows.
// - self-contained: the page requests nothing but itself (no http(s), no other file).
//
// The browser is Debian's Chromium at /usr/bin/chromium (TALLY_CHROMIUM overrides the path); it is
// started with background networking off so that it makes no connections of its own, and every
// request the page makes other than for file: URLs is recorded and aborted.

import { existsSync, mkdirSync, statSync } from "node:fs";
import { resolve, join } from "node:path";
import { pathToFileURL } from "node:url";

const USAGE = "usage: node tests/browser/check-report.mjs REPORT.html [--screenshots DIR] [--timeout-ms N]";
const TABS = ["overview", "graph", "flame", "timeline", "vm", "source"];
const COLORS = ["blue", "green", "red", "grey"];
const CHROMIUM_ARGS = [
  "--headless",
  "--no-sandbox",
  "--disable-gpu",
  "--disable-quic",
  "--no-first-run",
  "--disable-background-networking",
  "--disable-component-update",
  "--disable-sync",
  "--disable-dev-shm-usage",
];

function usageError(message) {
  process.stderr.write(`check-report: ${message}\n${USAGE}\n`);
  process.exit(2);
}

function setupError(message) {
  process.stderr.write(`check-report: ${message}\n`);
  process.exit(2);
}

function parseArgs(argv) {
  const opts = { report: null, screenshots: null, timeoutMs: 60000 };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    const takeValue = (name) => {
      const eq = a.indexOf("=");
      if (eq >= 0) return a.slice(eq + 1);
      if (i + 1 >= argv.length) usageError(`${name} needs a value`);
      return argv[++i];
    };
    if (a === "-h" || a === "--help") {
      process.stdout.write(`${USAGE}\n`);
      process.exit(0);
    } else if (a === "--screenshots" || a.startsWith("--screenshots=")) {
      opts.screenshots = takeValue("--screenshots");
      if (!opts.screenshots) usageError("--screenshots needs a directory");
    } else if (a === "--timeout-ms" || a.startsWith("--timeout-ms=")) {
      const v = takeValue("--timeout-ms");
      if (!/^[0-9]+$/.test(v) || Number(v) < 1000) usageError(`--timeout-ms must be a whole number of milliseconds, at least 1000 (got "${v}")`);
      opts.timeoutMs = Number(v);
    } else if (a.startsWith("-") && a !== "-") {
      usageError(`unknown option ${a}`);
    } else if (opts.report === null) {
      opts.report = a;
    } else {
      usageError(`more than one report given ("${opts.report}", "${a}")`);
    }
  }
  if (opts.report === null) usageError("no report file given");
  const path = resolve(opts.report);
  if (!existsSync(path)) usageError(`report file not found: ${path}`);
  if (!statSync(path).isFile()) usageError(`report is not a file: ${path}`);
  opts.report = path;
  return opts;
}

const opts = parseArgs(process.argv.slice(2));

let chromium;
try {
  ({ chromium } = await import("playwright-core"));
} catch (e) {
  setupError(`cannot load playwright-core (${e.message.split("\n")[0]}); run: npm ci --prefix tests/browser`);
}
const executablePath = process.env.TALLY_CHROMIUM || "/usr/bin/chromium";
if (!existsSync(executablePath)) {
  setupError(`Chromium not found at ${executablePath}; install Debian's chromium package (apt-get install chromium) or set TALLY_CHROMIUM`);
}

// Bounds: the whole run, one wait for the page to become ready, and any other single step.
const started = Date.now();
const READY_TIMEOUT = Math.min(30000, Math.floor(opts.timeoutMs * 0.6));
const STEP_TIMEOUT = Math.min(5000, Math.floor(opts.timeoutMs / 4));
const remaining = () => opts.timeoutMs - (Date.now() - started);
const bound = (ms) => Math.max(100, Math.min(ms, remaining() - 500));

const result = {
  ok: false,
  load_ms: null,
  console_errors: [],
  page_errors: [],
  requests: [],
  checks: [],
  screenshots: [],
};
const otherFiles = [];
let browser = null;
let finished = false;

function check(name, ok, detail = "") {
  // Once the result is being written, steps still running (cut short by the timeout) add nothing.
  if (finished) return false;
  result.checks.push({ name, ok: Boolean(ok), detail: String(detail) });
  return Boolean(ok);
}

async function closeBrowser() {
  if (!browser) return;
  const b = browser;
  browser = null;
  await Promise.race([b.close().catch(() => {}), new Promise((r) => setTimeout(r, 5000))]);
}

async function finish(code) {
  if (finished) return;
  if (code === undefined) {
    check("no_console_errors", result.console_errors.length === 0, `${result.console_errors.length} console error(s)`);
    check("no_page_errors", result.page_errors.length === 0, `${result.page_errors.length} uncaught exception(s)`);
    const extra = [...result.requests, ...otherFiles];
    check("self_contained", extra.length === 0, extra.length === 0 ? "no request but the report itself" : `requested ${extra.join(", ")}`);
  }
  finished = true;
  clearTimeout(overall);
  result.ok = code === undefined && result.checks.every((c) => c.ok);
  const out = JSON.stringify(result, null, 2) + "\n";
  await closeBrowser();
  process.stdout.write(out, () => process.exit(result.ok ? 0 : 1));
}

const overall = setTimeout(() => {
  check("overall_timeout", false, `the check did not finish within ${opts.timeoutMs} ms`);
  finish(1);
  // Should closing the browser itself hang, leave anyway.
  setTimeout(() => process.exit(1), 8000).unref();
}, opts.timeoutMs);

// Polls `cond` (an async function returning a truthy value when done) until it holds or `ms` pass.
async function until(cond, ms = STEP_TIMEOUT) {
  const deadline = Date.now() + bound(ms);
  let last;
  for (;;) {
    try {
      last = await cond();
      if (last) return last;
    } catch (e) {
      last = null;
    }
    if (Date.now() >= deadline) return last;
    await new Promise((r) => setTimeout(r, 50));
  }
}

function errorText(e) {
  return String(e && e.message ? e.message : e).split("\n")[0];
}

async function screenshot(page, name) {
  if (!opts.screenshots) return;
  const path = join(resolve(opts.screenshots), `${name}.png`);
  try {
    await page.screenshot({ path, fullPage: false, timeout: bound(STEP_TIMEOUT * 2) });
    result.screenshots.push(path);
  } catch (e) {
    check(`screenshot:${name}`, false, errorText(e));
  }
}

// Which of the tab sections are visible, as {name: true|false|null (missing)}.
async function sectionVisibility(page) {
  const vis = {};
  for (const t of TABS) {
    const loc = page.locator(`section#tab-${t}`);
    vis[t] = (await loc.count()) === 0 ? null : await loc.first().isVisible();
  }
  return vis;
}

function onlyVisible(vis, name) {
  return TABS.every((t) => (t === name ? vis[t] === true : vis[t] !== true));
}

function describeVisibility(vis) {
  const shown = TABS.filter((t) => vis[t] === true);
  const missing = TABS.filter((t) => vis[t] === null);
  return `visible: [${shown.join(", ")}]` + (missing.length ? `, missing sections: [${missing.join(", ")}]` : "");
}

async function openTab(page, name) {
  const button = page.locator(`button[data-tab="${name}"]`);
  if ((await button.count()) === 0) return check(`tab:${name}`, false, `no button[data-tab="${name}"]`);
  try {
    await button.first().click({ timeout: bound(STEP_TIMEOUT) });
  } catch (e) {
    return check(`tab:${name}`, false, `clicking the tab button failed: ${errorText(e)}`);
  }
  let vis = null;
  const ok = await until(async () => {
    vis = await sectionVisibility(page);
    return onlyVisible(vis, name);
  });
  return check(`tab:${name}`, ok, vis ? describeVisibility(vis) : "could not read the sections");
}

async function checkGraph(page) {
  const nodes = await page.locator("#graph-svg").evaluate((svg) =>
    [...svg.querySelectorAll("g.node")].map((g) => ({
      key: g.getAttribute("data-key"),
      color: g.getAttribute("data-color"),
      name: g.getAttribute("data-name"),
    })),
  { timeout: bound(STEP_TIMEOUT) }).catch((e) => ({ error: errorText(e) }));
  if (!Array.isArray(nodes)) {
    check("graph_nodes", false, `no svg#graph-svg (${nodes.error})`);
    check("graph_diagram", false, "no call graph to click");
    return;
  }
  const bad = nodes.filter((n) => !n.key || !COLORS.includes(n.color) || !n.name);
  const counts = COLORS.map((c) => `${c}=${nodes.filter((n) => n.color === c).length}`).join(" ");
  check(
    "graph_nodes",
    nodes.length > 0 && bad.length === 0,
    nodes.length === 0
      ? "no g.node in #graph-svg"
      : `${nodes.length} node(s), ${counts}` +
          (bad.length ? `; ${bad.length} with a missing data-key/data-name or a data-color not in ${COLORS.join("|")}, first: ${JSON.stringify(bad[0])}` : ""),
  );
  if (nodes.length === 0) {
    check("graph_diagram", false, "no node to click");
    return;
  }
  const first = nodes[0];
  try {
    await page.locator("#graph-svg g.node").first().click({ timeout: bound(STEP_TIMEOUT) });
  } catch (e) {
    check("graph_diagram", false, `clicking node ${first.key} failed: ${errorText(e)}`);
    return;
  }
  const norm = (s) => (s || "").replace(/\s+/g, " ").trim();
  let state = null;
  await until(async () => {
    state = await page.evaluate(() => {
      const d = document.getElementById("diagram");
      if (!d) return { exists: false };
      const h3 = d.querySelector("h3");
      return {
        exists: true,
        visible: d.checkVisibility ? d.checkVisibility() : d.getClientRects().length > 0,
        svg: d.querySelector("svg") !== null,
        h3: h3 ? h3.textContent : null,
      };
    });
    return state.exists && state.visible && state.svg && state.h3 !== null && norm(state.h3) === norm(first.name);
  });
  const problems = [];
  if (!state || !state.exists) problems.push("no #diagram");
  else {
    if (!state.visible) problems.push("#diagram not visible");
    if (!state.svg) problems.push("#diagram has no <svg>");
    if (state.h3 === null) problems.push("#diagram has no <h3>");
    else if (norm(state.h3) !== norm(first.name)) problems.push(`<h3> says "${norm(state.h3)}", node's data-name is "${first.name}"`);
  }
  check("graph_diagram", problems.length === 0, problems.length ? `after clicking node ${first.key}: ${problems.join("; ")}` : `node ${first.key} "${first.name}" opened its diagram`);
}

async function flameState(page) {
  return page.evaluate(() => {
    const svg = document.getElementById("flame-svg");
    if (!svg) return null;
    const frames = [...svg.querySelectorAll("g.frame")].map((g, index) => {
      const r = g.getBoundingClientRect();
      return { index, name: g.getAttribute("data-name") || "", tier: g.getAttribute("data-tier"), width: r.width, match: g.classList.contains("match") };
    });
    const m = document.getElementById("flame-match");
    return { html: svg.innerHTML, svgWidth: svg.getBoundingClientRect().width, frames, matchText: m ? m.textContent.trim() : null };
  });
}

async function checkFlame(page) {
  const s0 = await flameState(page).catch(() => null);
  if (s0 === null) {
    for (const n of ["flame_frames", "flame_search", "flame_zoom", "flame_reset"]) check(n, false, "no svg#flame-svg");
    await screenshot(page, "flame");
    return;
  }
  const unnamed = s0.frames.filter((f) => !f.name).length;
  check("flame_frames", s0.frames.length > 0 && unnamed === 0,
    s0.frames.length === 0 ? "no g.frame in #flame-svg" : `${s0.frames.length} frame(s)` + (unnamed ? `, ${unnamed} without data-name` : ""));
  if (s0.frames.length === 0) {
    for (const n of ["flame_search", "flame_zoom", "flame_reset"]) check(n, false, "no frame");
    await screenshot(page, "flame");
    return;
  }
  // The widest frame is the root; take the widest of the others (the first of equals).
  const byWidth = [...s0.frames].sort((a, b) => b.width - a.width);
  const target = (byWidth.length > 1 ? byWidth.slice(1) : byWidth).find((f) => f.name) || byWidth[0];
  const query = target.name.slice(0, Math.min(target.name.length, Math.max(4, Math.min(8, target.name.length))));

  const input = page.locator("input#flame-search");
  if ((await input.count()) === 0) {
    check("flame_search", false, "no input#flame-search");
  } else {
    try {
      await input.first().fill("", { timeout: bound(STEP_TIMEOUT) });
      await input.first().pressSequentially(query, { timeout: bound(STEP_TIMEOUT) });
      const s1 = await until(async () => {
        const s = await flameState(page);
        return s && s.matchText && s.frames.some((f) => f.match) ? s : null;
      });
      const last = s1 || (await flameState(page).catch(() => null));
      const nMatch = last ? last.frames.filter((f) => f.match).length : 0;
      check("flame_search", Boolean(s1),
        last === null ? "#flame-svg vanished"
          : `typed "${query}" (from "${target.name}"): #flame-match ${last.matchText === null ? "missing" : `"${last.matchText}"`}, ${nMatch} g.frame.match`);
    } catch (e) {
      check("flame_search", false, `typing "${query}" failed: ${errorText(e)}`);
    }
  }
  await screenshot(page, "flame");

  // Zoom: click the target frame (its rect, so that a label running past it cannot take the click).
  const before = await flameState(page).catch(() => null);
  let zoomed = null;
  try {
    const frame = page.locator("#flame-svg g.frame").nth(target.index);
    const rect = frame.locator("rect");
    await ((await rect.count()) > 0 ? rect.first() : frame).click({ timeout: bound(STEP_TIMEOUT) });
    zoomed = await until(async () => {
      const s = await flameState(page);
      return s && before && s.html !== before.html && s.frames.some((f) => f.name === target.name) ? s : null;
    });
    const z = zoomed && zoomed.frames.find((f) => f.name === target.name);
    check("flame_zoom", Boolean(zoomed),
      zoomed ? `clicked "${target.name}": redrawn, its frame ${Math.round(z.width)} px wide in a ${Math.round(zoomed.svgWidth)} px svg`
        : `clicked "${target.name}": #flame-svg was not redrawn with that frame in it`);
  } catch (e) {
    check("flame_zoom", false, `clicking frame "${target.name}" failed: ${errorText(e)}`);
  }

  const reset = page.locator("button#flame-reset");
  if ((await reset.count()) === 0) {
    check("flame_reset", false, "no button#flame-reset");
    return;
  }
  try {
    const pre = await flameState(page);
    await reset.first().click({ timeout: bound(STEP_TIMEOUT) });
    const after = await until(async () => {
      const s = await flameState(page);
      return s && s.frames.length > 0 && (!zoomed || s.html !== pre.html) ? s : null;
    });
    check("flame_reset", Boolean(after),
      after ? `redrawn with ${after.frames.length} frame(s)` : "#flame-svg was not redrawn after the reset click");
  } catch (e) {
    check("flame_reset", false, `clicking #flame-reset failed: ${errorText(e)}`);
  }
}

async function checkTimeline(page) {
  const n = await page.evaluate(() => {
    const svg = document.getElementById("timeline-svg");
    return svg && svg.tagName.toLowerCase() === "svg" ? svg.children.length : null;
  });
  check("timeline_svg", n !== null && n > 0, n === null ? "no svg#timeline-svg" : `${n} child element(s)`);
}

async function checkVm(page) {
  const n = await page.evaluate(() => {
    const t = document.querySelector("table#vm-components");
    return t ? t.querySelectorAll("tbody tr").length : null;
  });
  check("vm_components", n !== null && n > 0, n === null ? "no table#vm-components" : `${n} row(s)`);
}

async function checkSource(page) {
  const info = await page.evaluate(() => {
    const s = document.querySelector("select#source-method");
    return s ? { values: [...s.options].map((o) => o.value), current: s.value } : null;
  });
  if (info === null || info.values.length === 0) {
    check("source_view", false, info === null ? "no select#source-method" : "select#source-method has no option");
    return;
  }
  // Prefer an option other than the one shown, so that the change is what fills the lines.
  const choice = info.values.find((v) => v !== info.current) ?? info.values[0];
  try {
    await page.locator("select#source-method").first().selectOption(choice, { timeout: bound(STEP_TIMEOUT) });
  } catch (e) {
    check("source_view", false, `choosing "${choice}" failed: ${errorText(e)}`);
    return;
  }
  const rows = await until(() => page.evaluate(() => {
    const t = document.getElementById("source-lines");
    return t ? t.querySelectorAll("tr").length : 0;
  }));
  check("source_view", rows > 0, `${info.values.length} method(s); chose "${choice}": ${rows || 0} row(s) in #source-lines`);
}

async function run() {
  if (opts.screenshots) mkdirSync(resolve(opts.screenshots), { recursive: true });
  try {
    browser = await chromium.launch({ executablePath, args: CHROMIUM_ARGS, headless: true, timeout: bound(30000) });
  } catch (e) {
    check("launch", false, `Chromium did not start: ${errorText(e)}`);
    return finish(1);
  }
  const context = await browser.newContext({ viewport: { width: 1400, height: 900 } });
  const reportUrl = pathToFileURL(opts.report).href;
  await context.route((url) => url.protocol !== "file:", (route) => route.abort("blockedbyclient"));
  const page = await context.newPage();
  page.setDefaultTimeout(STEP_TIMEOUT);
  page.on("console", (msg) => {
    // A request this check aborted is listed in `requests`; Chromium's own console line for it is noise.
    if (msg.type() === "error" && !msg.text().includes("net::ERR_BLOCKED_BY_CLIENT")) result.console_errors.push(msg.text());
  });
  page.on("pageerror", (err) => result.page_errors.push(errorText(err)));
  page.on("request", (req) => {
    const url = req.url();
    if (url.startsWith("data:") || url.startsWith("blob:") || url.startsWith("about:")) return;
    if (!url.startsWith("file:")) result.requests.push(url);
    else if (url.split("#")[0] !== reportUrl) otherFiles.push(url);
  });
  page.on("websocket", (ws) => result.requests.push(ws.url()));
  page.on("dialog", (d) => d.dismiss().catch(() => {}));

  // Load and wait for the page to say it is rendered (or failed).
  try {
    await page.goto(reportUrl, { waitUntil: "load", timeout: bound(READY_TIMEOUT) });
  } catch (e) {
    check("ready", false, `loading the report failed: ${errorText(e)}`);
    return finish();
  }
  let ready = null;
  try {
    const h = await page.waitForFunction(
      () => document.body && (document.body.dataset.ready === "1" || document.body.dataset.ready === "error") && document.body.dataset.ready,
      null,
      { timeout: bound(READY_TIMEOUT), polling: 50 },
    );
    ready = await h.jsonValue();
  } catch (e) {
    const now = await page.evaluate(() => document.body && document.body.dataset.ready).catch(() => undefined);
    check("ready", false, `body[data-ready] is ${JSON.stringify(now ?? null)} after ${READY_TIMEOUT} ms, never "1" or "error"`);
    await screenshot(page, "overview");
    return finish();
  }
  if (ready === "error") {
    const fatal = await page.evaluate(() => {
      const f = document.getElementById("fatal");
      return f ? f.textContent.trim() : null;
    });
    check("ready", false, `the page failed to render: ${fatal === null ? "(no #fatal element)" : fatal || "(#fatal is empty)"}`);
    await screenshot(page, "overview");
    return finish();
  }
  const readyMs = await page.evaluate(() => window.__tallyReadyMs);
  const readyOk = typeof readyMs === "number" && Number.isFinite(readyMs) && readyMs >= 0;
  result.load_ms = readyOk ? Math.round(readyMs * 10) / 10 : null;
  check("ready", readyOk, readyOk ? `rendered ${result.load_ms} ms after navigation start` : `data-ready="1" but window.__tallyReadyMs is ${JSON.stringify(readyMs ?? null)}`);

  // Tabs: all present, overview shown first.
  const present = await page.evaluate(() => [...document.querySelectorAll("button[data-tab]")].map((b) => b.dataset.tab));
  const missing = TABS.filter((t) => !present.includes(t));
  check("tab_buttons", missing.length === 0, missing.length ? `missing button[data-tab] for ${missing.join(", ")} (found ${present.join(", ") || "none"})` : `found ${present.join(", ")}`);
  const vis0 = await sectionVisibility(page);
  check("overview_default", onlyVisible(vis0, "overview"), describeVisibility(vis0));
  await screenshot(page, "overview");

  const steps = [
    ["graph", async () => { await screenshot(page, "graph"); await checkGraph(page); await screenshot(page, "diagram"); }],
    ["flame", async () => { await checkFlame(page); }],
    ["timeline", async () => { await checkTimeline(page); await screenshot(page, "timeline"); }],
    ["vm", async () => { await checkVm(page); await screenshot(page, "vm"); }],
    ["source", async () => { await checkSource(page); await screenshot(page, "source"); }],
    ["overview", async () => {}],
  ];
  for (const [tab, body] of steps) {
    await openTab(page, tab);
    try {
      await body();
    } catch (e) {
      check(`${tab}_checks`, false, `stopped by an error: ${errorText(e)}`);
    }
  }
  return finish();
}

run().catch((e) => {
  check("harness", false, `unexpected error: ${errorText(e)}`);
  finish(1);
});
