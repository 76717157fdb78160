'use strict';
// The report's script. Every name from the profile is put in the page as text (textContent,
// attribute values), never parsed as markup.
(function () {
  const SVGNS = 'http://www.w3.org/2000/svg';
  let D = null;
  const tierNames = new Map();

  // ---- small helpers ------------------------------------------------------------------
  function el(tag, attrs, ...children) {
    const e = document.createElement(tag);
    setAttrs(e, attrs);
    for (const c of children) {
      if (c === null || c === undefined) continue;
      e.append(c instanceof Node ? c : String(c));
    }
    return e;
  }
  function sv(tag, attrs, text) {
    const e = document.createElementNS(SVGNS, tag);
    setAttrs(e, attrs);
    if (text !== undefined) e.textContent = text;
    return e;
  }
  function setAttrs(e, attrs) {
    if (!attrs) return;
    for (const [k, v] of Object.entries(attrs)) {
      if (v === null || v === undefined) continue;
      if (k === 'class') e.setAttribute('class', v);
      else if (k === 'text') e.textContent = v;
      else e.setAttribute(k, String(v));
    }
  }
  function fmtNs(ns) {
    if (ns === null || ns === undefined || !isFinite(ns)) return '–';
    const a = Math.abs(ns);
    if (a >= 1e9) return (ns / 1e9).toFixed(2) + ' s';
    if (a >= 1e6) return (ns / 1e6).toFixed(2) + ' ms';
    if (a >= 1e3) return (ns / 1e3).toFixed(1) + ' µs';
    return ns.toFixed(0) + ' ns';
  }
  function pct(n, total) { return total > 0 ? (100 * n / total) : 0; }
  function fmtPct(n, total) { return pct(n, total).toFixed(2) + ' %'; }
  function fmtBytes(b) {
    if (b >= 1 << 20) return (b / (1 << 20)).toFixed(1) + ' MiB';
    if (b >= 1 << 10) return (b / (1 << 10)).toFixed(1) + ' KiB';
    return b + ' B';
  }
  function tierName(code) { return tierNames.get(code) || ('tier ' + code); }
  function tierColour(code, inlined) {
    if (inlined) return 'var(--inlined)';
    switch (code) {
      case 0: return 'var(--interp)';
      case 1: return 'var(--baseline)';
      case 2: return 'var(--opt)';
      default: return 'var(--other)';
    }
  }
  function shortTier(code) { return code === 0 ? 'interp' : code === 2 ? 'opt' : tierName(code); }
  function name(m) { return D.methods[m] ? D.methods[m].name : '?'; }
  function where(m) {
    const r = D.methods[m];
    return r && r.file ? r.file + ':' + r.line : '';
  }
  function clear(e) { while (e.firstChild) e.removeChild(e.firstChild); }
  function truncate(text, px) {
    const fit = Math.floor(px / 6.6);
    if (fit <= 1) return '';
    return text.length <= fit ? text : text.slice(0, fit - 1) + '…';
  }

  const tooltip = () => document.getElementById('tooltip');
  function tip(e, text) {
    const t = tooltip();
    t.textContent = text;
    t.hidden = false;
    const x = Math.min(e.clientX + 14, window.innerWidth - t.offsetWidth - 8);
    const y = e.clientY + 16 + t.offsetHeight > window.innerHeight ? e.clientY - t.offsetHeight - 8 : e.clientY + 16;
    t.style.left = Math.max(4, x) + 'px';
    t.style.top = Math.max(4, y) + 'px';
  }
  function untip() { tooltip().hidden = true; }
  function withTip(node, text) {
    node.addEventListener('mousemove', (e) => tip(e, typeof text === 'function' ? text() : text));
    node.addEventListener('mouseleave', untip);
  }

  // ---- tabs ---------------------------------------------------------------------------
  function showTab(name) {
    for (const b of document.querySelectorAll('button[data-tab]')) {
      b.classList.toggle('active', b.dataset.tab === name);
    }
    for (const s of document.querySelectorAll('main > section')) {
      s.hidden = s.id !== 'tab-' + name;
    }
    untip();
    if (name === 'graph' && !graphState.placed) fitGraph();
    if (name === 'flame') renderFlame();
    if (name === 'timeline') renderTimeline();
  }

  // ---- overview -----------------------------------------------------------------------
  function card(big, small) {
    return el('div', { class: 'card' }, el('div', { class: 'big' }, big), el('div', { class: 'small' }, small));
  }
  function table(headers, rows, attrs) {
    const t = el('table', attrs);
    const head = el('tr');
    for (const h of headers) head.append(el('th', { class: h.num ? 'num' : null }, h.text));
    t.append(el('thead', null, head));
    const body = el('tbody');
    for (const r of rows) {
      const tr = el('tr');
      r.forEach((cell, i) => {
        const td = el('td', { class: headers[i].num ? 'num' : null });
        td.append(cell instanceof Node ? cell : String(cell));
        tr.append(td);
      });
      body.append(tr);
    }
    t.append(body);
    return t;
  }
  function bar(n, max, colour) {
    const w = max > 0 ? Math.max(1, Math.round(160 * n / max)) : 0;
    return el('span', { class: 'bar', style: 'width:' + w + 'px;background:' + (colour || 'var(--blue)') });
  }
  function methodLink(m, label) {
    const a = el('a', { href: '#' }, label || name(m));
    a.addEventListener('click', (e) => { e.preventDefault(); focusMethod(m); });
    return a;
  }

  function flatProfile() {
    const f = D.flame;
    const n = f.method.length;
    const self = new Map();
    const total = new Map();
    const path = [];
    const onPath = new Map();
    for (let i = 1; i < n; i++) {
      const d = f.depth[i];
      while (path.length >= d) {
        const m = path.pop();
        onPath.set(m, onPath.get(m) - 1);
      }
      const m = f.method[i];
      self.set(m, (self.get(m) || 0) + f.self_value[i]);
      if (!onPath.get(m)) total.set(m, (total.get(m) || 0) + f.value[i]);
      path.push(m);
      onPath.set(m, (onPath.get(m) || 0) + 1);
    }
    return { self, total };
  }

  function renderOverview() {
    const o = document.getElementById('overview');
    const s = D.summary;
    const cards = el('div', { class: 'cards' },
      card(fmtNs(D.duration_ns), 'run'),
      card(String(D.samples), 'samples (' + D.sampler + ')'),
      card(String(s.compiles), 'compiles, ' + fmtNs(s.compile_ns)),
      card(String(s.deopts), 'deoptimizations'),
      card(String(s.gcs), 'collections, ' + fmtNs(s.gc_ns)));
    if (s.counted) {
      cards.append(card(s.paid + ' / ' + s.red + ' / ' + s.unclear,
        'recompilations paid off / did not / no verdict'));
      cards.append(card('≥ ' + fmtNs(s.won_least_ns) + ' won', 'at least, over the samples\' error (point estimate ' + fmtNs(s.won_ns) + ')'));
      cards.append(card('≥ ' + fmtNs(s.lost_least_ns) + ' lost', 'in red ones (point estimate ' + fmtNs(s.lost_ns) + ')'));
    } else {
      cards.append(card(String(s.recompilations), 'recompilations (no verdicts: not counted)'));
    }
    o.append(cards);
    if (D.notes.length) {
      const ul = el('ul', { class: 'notes' });
      for (const n of D.notes) ul.append(el('li', null, n));
      o.append(ul);
    }
    o.append(el('h2', null, 'VM states'));
    const maxState = Math.max(1, ...D.states.map((r) => r[1]));
    o.append(table([{ text: 'state' }, { text: 'samples', num: true }, { text: 'share', num: true }, { text: '' }],
      D.states.map((r) => [r[0], r[1], fmtPct(r[1], D.samples), bar(r[1], maxState)])));

    const recomps = [];
    for (const h of D.histories) for (const r of h.recompilations) recomps.push([h.method, r]);
    const rank = (r) => (r.verdict === 'did not pay' ? 0 : r.verdict === 'paid off' ? 1 : 2);
    recomps.sort((a, b) => rank(a[1]) - rank(b[1]) || (a[1].gain_ns || 0) - (b[1].gain_ns || 0) || a[1].at_ns - b[1].at_ns);
    o.append(el('h2', null, 'Recompilations (' + recomps.length + ')'));
    if (recomps.length) {
      o.append(table([{ text: 'method' }, { text: 'tiers' }, { text: 'at', num: true }, { text: 'verdict' }, { text: 'gain', num: true }, { text: 'over the samples\' error', num: true }, { text: 'why' }],
        recomps.map(([m, r]) => [methodLink(m), tierName(r.from) + ' → ' + tierName(r.to), fmtNs(r.at_ns),
          verdictSpan(r.verdict), r.gain_ns === null ? '–' : fmtNs(r.gain_ns), gainRange(r), r.why || ''])));
    } else {
      o.append(el('p', { class: 'note' }, 'Nothing was recompiled.'));
    }

    o.append(el('h2', null, 'Hottest methods'));
    const flat = flatProfile();
    const rows = [...flat.self.keys()].map((m) => [m, flat.self.get(m) || 0, flat.total.get(m) || 0]);
    rows.sort((a, b) => b[1] - a[1] || b[2] - a[2]);
    const maxSelf = rows.length ? rows[0][1] : 1;
    o.append(table([{ text: 'self', num: true }, { text: 'total', num: true }, { text: '' }, { text: 'method' }, { text: 'source' }],
      rows.slice(0, 25).map(([m, self, total]) => [fmtPct(self, D.samples), fmtPct(total, D.samples), bar(self, maxSelf), methodLink(m), where(m)])));
  }
  function gainRange(r) {
    if (!r.gain_range_ns) return '–';
    const [lo, hi] = r.gain_range_ns;
    return lo === hi ? fmtNs(lo) : fmtNs(lo) + ' … ' + fmtNs(hi);
  }
  function verdictSpan(v) {
    const c = v === 'paid off' ? 'verdict-green' : v === 'did not pay' ? 'verdict-red' : 'verdict-grey';
    return el('span', { class: c }, v);
  }

  // ---- call graph ---------------------------------------------------------------------
  const graphState = { k: 1, tx: 0, ty: 0, placed: false, selected: null };
  function colourVar(c) { return 'var(--' + c + ')'; }
  function renderGraph() {
    const g = D.graph;
    const svg = document.getElementById('graph-svg');
    const note = document.getElementById('graph-note');
    note.textContent = (g.nodes.length ? g.nodes.length + ' nodes with at least ' + g.min_percent + ' % of samples on the stack' : 'No samples, so no call graph.') +
      (g.left_out ? '; ' + g.left_out + ' smaller nodes left out.' : '.');
    const vp = sv('g', { id: 'graph-viewport' });
    svg.append(vp);
    const maxEdge = Math.max(1, ...g.edges.map((e) => e.samples));
    const h = g.node_height;
    for (const e of g.edges) {
      const a = g.nodes[e.from], b = g.nodes[e.to];
      const x1 = a.x + a.w / 2, x2 = b.x + b.w / 2;
      let d, up = false;
      if (b.y > a.y) {
        const y1 = a.y + h, y2 = b.y, my = (y1 + y2) / 2;
        d = `M${x1},${y1} C${x1},${my} ${x2},${my} ${x2},${y2}`;
      } else {
        // A call up the layers (recursion, a cycle) or within one: a loop out to the side.
        up = true;
        const xa = a.x + a.w, xb = b.x + b.w, ya = a.y + h / 2, yb = b.y + h / 2;
        const out = Math.max(xa, xb) + 40 + Math.abs(ya - yb) / 4;
        d = e.from === e.to ? `M${xa},${ya - 6} C${xa + 40},${ya - 30} ${xa + 40},${ya + 30} ${xa},${ya + 6}`
          : `M${xa},${ya} C${out},${ya} ${out},${yb} ${xb},${yb}`;
      }
      const path = sv('path', { d, class: 'edge' + (up ? ' up' : ''), 'stroke-width': (1 + 5 * Math.sqrt(e.samples / maxEdge)).toFixed(2) });
      withTip(path, () => name(a.method) + ' [' + tierName(a.tier) + '] → ' + name(b.method) + ' [' + tierName(b.tier) + ']\n' + e.samples + ' samples (' + fmtPct(e.samples, D.samples) + ') with this call on the stack');
      vp.append(path);
    }
    g.nodes.forEach((n, i) => {
      const label = name(n.method);
      const node = sv('g', { class: 'node', transform: `translate(${n.x},${n.y})`, 'data-key': n.method + ':' + tierName(n.tier), 'data-color': n.colour, 'data-name': label, 'data-index': i });
      node.append(sv('rect', { width: n.w, height: h, fill: colourVar(n.colour) }));
      node.append(sv('text', { x: 6, y: 14 }, truncate(label, n.w - 10)));
      const share = (k) => pct(k, D.samples).toFixed(1) + ' %';
      node.append(sv('text', { x: 6, y: 28, 'fill-opacity': 0.9 }, truncate(shortTier(n.tier) + ' · ' + share(n.total_samples) + ' · self ' + share(n.self_samples), n.w - 10)));
      withTip(node, () => label + ' [' + tierName(n.tier) + ']\n' + where(n.method) + '\n' + n.total_samples + ' samples on the stack, ' + n.self_samples + ' self' + (n.verdict ? '\n' + n.verdict : ''));
      node.addEventListener('click', (e) => { e.stopPropagation(); selectNode(i); });
      vp.append(node);
    });
    enablePanZoom(svg, vp);
  }
  function applyGraphTransform() {
    const vp = document.getElementById('graph-viewport');
    if (vp) vp.setAttribute('transform', `translate(${graphState.tx},${graphState.ty}) scale(${graphState.k})`);
  }
  function fitGraph() {
    const view = document.getElementById('graph-view');
    const w = view.clientWidth, h = view.clientHeight;
    if (!w || !h) return;
    graphState.placed = true;
    const g = D.graph;
    const k = Math.min(1, w / g.width, h / g.height);
    if (k >= 0.55 || !g.nodes.length) {
      graphState.k = k;
      graphState.tx = (w - g.width * k) / 2;
      graphState.ty = 0;
    } else {
      // Too large to read whole: full size, the heaviest node at the top centre.
      const top = g.nodes[0];
      graphState.k = 1;
      graphState.tx = w / 2 - (top.x + top.w / 2);
      graphState.ty = 0;
    }
    applyGraphTransform();
  }
  function enablePanZoom(svg, vp) {
    const view = document.getElementById('graph-view');
    let drag = null;
    svg.addEventListener('mousedown', (e) => { drag = { x: e.clientX, y: e.clientY, tx: graphState.tx, ty: graphState.ty }; view.classList.add('dragging'); });
    window.addEventListener('mousemove', (e) => {
      if (!drag) return;
      graphState.tx = drag.tx + e.clientX - drag.x;
      graphState.ty = drag.ty + e.clientY - drag.y;
      applyGraphTransform();
    });
    window.addEventListener('mouseup', () => { drag = null; view.classList.remove('dragging'); });
    svg.addEventListener('wheel', (e) => {
      e.preventDefault();
      const r = svg.getBoundingClientRect();
      const px = e.clientX - r.left, py = e.clientY - r.top;
      const k = Math.min(4, Math.max(0.05, graphState.k * Math.exp(-e.deltaY / 400)));
      graphState.tx = px - (px - graphState.tx) * k / graphState.k;
      graphState.ty = py - (py - graphState.ty) * k / graphState.k;
      graphState.k = k;
      applyGraphTransform();
    }, { passive: false });
    document.getElementById('graph-fit').addEventListener('click', () => { graphState.k = 0; fitWhole(); });
    document.getElementById('graph-one').addEventListener('click', () => { graphState.k = 1; applyGraphTransform(); });
    applyGraphTransform();
  }
  function fitWhole() {
    const view = document.getElementById('graph-view');
    const g = D.graph;
    const k = Math.min(1, view.clientWidth / g.width, view.clientHeight / g.height);
    graphState.k = k;
    graphState.tx = (view.clientWidth - g.width * k) / 2;
    graphState.ty = 0;
    applyGraphTransform();
  }
  function selectNode(i) {
    for (const n of document.querySelectorAll('#graph-svg .node.selected')) n.classList.remove('selected');
    const node = document.querySelector('#graph-svg .node[data-index="' + i + '"]');
    if (node) node.classList.add('selected');
    graphState.selected = i;
    openDiagram(D.graph.nodes[i]);
  }
  function focusMethod(m) {
    showTab('graph');
    const i = D.graph.nodes.findIndex((n) => n.method === m && n.colour !== 'blue');
    const j = i >= 0 ? i : D.graph.nodes.findIndex((n) => n.method === m);
    if (j >= 0) {
      const n = D.graph.nodes[j];
      const view = document.getElementById('graph-view');
      graphState.tx = view.clientWidth / 2 - (n.x + n.w / 2) * graphState.k;
      graphState.ty = view.clientHeight / 3 - n.y * graphState.k;
      applyGraphTransform();
      selectNode(j);
    } else {
      openDiagram({ method: m, tier: 0, self_samples: 0, total_samples: 0, colour: 'blue', verdict: 'below the call graph\'s threshold' });
    }
  }

  // ---- the recompilation diagram --------------------------------------------------------
  function openDiagram(node) {
    const box = document.getElementById('diagram');
    clear(box);
    box.hidden = false;
    const close = el('button', { class: 'close' }, 'Close');
    close.addEventListener('click', () => { box.hidden = true; });
    box.append(close, el('h3', null, name(node.method)));
    box.append(el('div', { class: 'note' }, where(node.method)));
    box.append(el('p', null, 'This node: ' + tierName(node.tier) + ', ' + node.total_samples + ' samples on the stack, ' + node.self_samples + ' self.'));
    if (node.verdict) box.append(el('p', null, node.verdict));
    const h = D.histories.find((x) => x.method === node.method);
    if (!h) {
      box.append(el('p', null, 'Never compiled: every call ran in the interpreter.'));
      box.append(diagramSvg({ method: node.method, spans: [[0, 0, D.duration_ns]], tiers: [], recompilations: [] }));
      return;
    }
    box.append(diagramSvg(h));
    box.append(el('h3', null, 'Per tier'));
    box.append(table([{ text: 'tier' }, { text: 'compiles', num: true }, { text: 'compile', num: true }, { text: 'calls', num: true }, { text: 'time', num: true }, { text: 'per call', num: true }, { text: 'if it stayed', num: true }],
      h.tiers.map((t) => [tierName(t.tier), t.compiles, fmtNs(t.compile_ns), t.calls === null ? '–' : t.calls, fmtNs(t.time_ns), fmtNs(t.per_call_ns), fmtNs(t.stayed_ns)])));
    if (h.recompilations.length) {
      box.append(el('h3', null, 'Recompilations'));
      for (const r of h.recompilations) {
        const p = el('p', null, tierName(r.from) + ' → ' + tierName(r.to) + ' at ' + fmtNs(r.at_ns) + ': ');
        p.append(verdictSpan(r.verdict));
        if (r.gain_ns !== null) p.append(' (' + (r.gain_ns >= 0 ? 'gained ' : 'lost ') + fmtNs(Math.abs(r.gain_ns)) + (r.gain_range_ns ? '; between ' + gainRange(r) + ' over the samples\' error' : '') + ')');
        if (r.why) p.append(el('div', { class: 'note' }, r.why));
        box.append(p);
      }
    }
    const lines = D.lines.find((l) => l.method === node.method);
    if (lines) {
      const a = el('a', { href: '#' }, 'Show its source with samples per line');
      a.addEventListener('click', (e) => { e.preventDefault(); showSource(node.method); });
      box.append(el('p', null, a));
    }
  }
  function diagramSvg(h) {
    const W = 510, left = 90;
    const span = W - left - 10;
    const rows = h.tiers.length;
    const H = 52 + rows * 40 + 30;
    const s = sv('svg', { width: W, height: H, viewBox: `0 0 ${W} ${H}` });
    // When the method ran in which tier.
    s.append(sv('text', { x: 0, y: 12, 'font-size': 11, fill: '#666' }, 'Tier over the run'));
    const dur = Math.max(1, D.duration_ns);
    for (const [tier, from, to] of h.spans) {
      const r = sv('rect', { x: left + span * from / dur, y: 18, width: Math.max(1, span * (to - from) / dur), height: 14, fill: tierColour(tier) });
      withTip(r, tierName(tier) + ' from ' + fmtNs(from) + ' to ' + fmtNs(to));
      s.append(r);
    }
    s.append(sv('text', { x: left, y: 44, 'font-size': 10, fill: '#666' }, '0'));
    s.append(sv('text', { x: W - 10, y: 44, 'font-size': 10, fill: '#666', 'text-anchor': 'end' }, fmtNs(dur)));
    if (!rows) return s;
    // Per tier: compile time and execution time stacked, and what the later calls would
    // have cost at this tier (dashed outline).
    const max = Math.max(1, ...h.tiers.map((t) => Math.max(t.compile_ns + t.time_ns, t.stayed_ns || 0)));
    h.tiers.forEach((t, i) => {
      const y = 56 + i * 40;
      s.append(sv('text', { x: 0, y: y + 12, 'font-size': 11 }, tierName(t.tier)));
      const cw = span * t.compile_ns / max, ew = span * t.time_ns / max;
      const c = sv('rect', { x: left, y, width: Math.max(t.compile_ns ? 1 : 0, cw), height: 14, fill: '#555' });
      withTip(c, 'compile time at ' + tierName(t.tier) + ': ' + fmtNs(t.compile_ns) + ' (' + t.compiles + ' compiles)');
      const x = sv('rect', { x: left + cw, y, width: Math.max(t.time_ns ? 1 : 0, ew), height: 14, fill: tierColour(t.tier) });
      withTip(x, 'estimated execution time at ' + tierName(t.tier) + ': ' + fmtNs(t.time_ns) + (t.calls !== null ? ' over ' + t.calls + ' calls' : ''));
      s.append(c, x);
      if (t.stayed_ns) {
        const st = sv('rect', { x: left, y: y + 18, width: Math.max(1, span * t.stayed_ns / max), height: 10, fill: 'none', stroke: tierColour(t.tier), 'stroke-dasharray': '4 2' });
        withTip(st, 'had it stayed at ' + tierName(t.tier) + ', the later calls would have taken ' + fmtNs(t.stayed_ns));
        s.append(st);
      }
    });
    const ly = 56 + rows * 40 + 8;
    s.append(sv('rect', { x: left, y: ly, width: 10, height: 10, fill: '#555' }));
    s.append(sv('text', { x: left + 14, y: ly + 9, 'font-size': 10 }, 'compile'));
    s.append(sv('rect', { x: left + 70, y: ly, width: 10, height: 10, fill: 'var(--opt)' }));
    s.append(sv('text', { x: left + 84, y: ly + 9, 'font-size': 10 }, 'execution'));
    s.append(sv('rect', { x: left + 150, y: ly, width: 10, height: 10, fill: 'none', stroke: '#555', 'stroke-dasharray': '3 2' }));
    s.append(sv('text', { x: left + 164, y: ly + 9, 'font-size': 10 }, 'later calls at this tier'));
    return s;
  }

  // ---- flame graph --------------------------------------------------------------------
  const flameState = { zoom: 0, parent: null, children: null, search: null, width: 0 };
  function flameTree() {
    const f = D.flame;
    const n = f.method.length;
    const parent = new Int32Array(n).fill(-1);
    const children = Array.from({ length: n }, () => []);
    const stack = [];
    for (let i = 0; i < n; i++) {
      while (stack.length && f.depth[stack[stack.length - 1]] >= f.depth[i]) stack.pop();
      if (stack.length) {
        parent[i] = stack[stack.length - 1];
        children[parent[i]].push(i);
      }
      stack.push(i);
    }
    flameState.parent = parent;
    flameState.children = children;
  }
  function frameLabel(i) {
    const f = D.flame;
    if (i === 0) return 'all samples';
    return name(f.method[i]);
  }
  function renderFlame() {
    const svg = document.getElementById('flame-svg');
    const view = document.getElementById('flame-view');
    const W = Math.max(300, view.clientWidth || (document.documentElement.clientWidth - 34));
    flameState.width = W;
    clear(svg);
    const f = D.flame;
    if (!f.method.length) return;
    const rowH = 17;
    const z = flameState.zoom;
    const re = flameState.search;
    let maxDepth = 0;
    // Ancestors of the zoomed frame span the whole width.
    const ancestors = [];
    for (let a = flameState.parent[z]; a >= 0; a = flameState.parent[a]) ancestors.push(a);
    const frames = [];
    for (const a of ancestors) frames.push([a, 0, W]);
    const walk = [[z, 0, W]];
    while (walk.length) {
      const [i, x, w] = walk.pop();
      frames.push([i, x, w]);
      let cx = x;
      for (const c of flameState.children[i]) {
        const cw = w * f.value[c] / f.value[i];
        if (cw >= 0.5) walk.push([c, cx, cw]);
        cx += cw;
      }
    }
    const top = f.depth[z] - ancestors.length;
    const frag = document.createDocumentFragment();
    for (const [i, x, w] of frames) {
      const d = f.depth[i] - top;
      maxDepth = Math.max(maxDepth, d);
      const label = frameLabel(i);
      const g = sv('g', { class: 'frame', transform: `translate(${x.toFixed(2)},${d * rowH})`, 'data-name': label, 'data-tier': i === 0 ? '' : tierName(f.tier[i]), 'data-index': i });
      const isState = i > 0 && D.methods[f.method[i]] && !D.methods[f.method[i]].file && label.startsWith('[');
      const fill = i === 0 ? '#ccc' : isState ? 'var(--vmcode)' : tierColour(f.tier[i], f.inlined[i] === 1);
      g.append(sv('rect', { width: Math.max(0.5, w - 0.5).toFixed(2), height: rowH - 1, fill }));
      if (w > 24) g.append(sv('text', { x: 3, y: 12 }, truncate(label + (i && f.inlined[i] ? ' [inlined]' : ''), w - 6)));
      if (re && i > 0 && re.test(label)) g.classList.add('match');
      if (ancestors.includes(i)) g.classList.add('dim');
      frag.append(g);
    }
    svg.append(frag);
    svg.setAttribute('height', (maxDepth + 1) * rowH + 4);
    svg.setAttribute('viewBox', `0 0 ${W} ${(maxDepth + 1) * rowH + 4}`);
    updateFlameMatch();
  }
  function flameDetails(i) {
    const f = D.flame;
    if (i === 0) return 'all samples: ' + f.value[0];
    const m = f.method[i];
    return name(m) + ' [' + tierName(f.tier[i]) + (f.inlined[i] ? ', inlined' : '') + ']\n' + (where(m) ? where(m) + '\n' : '') +
      f.value[i] + ' samples (' + fmtPct(f.value[i], D.samples) + '), ' + f.self_value[i] + ' self';
  }
  function setupFlame() {
    flameTree();
    const svg = document.getElementById('flame-svg');
    svg.addEventListener('mousemove', (e) => {
      const g = e.target.closest('.frame');
      if (g) tip(e, flameDetails(Number(g.dataset.index))); else untip();
    });
    svg.addEventListener('mouseleave', untip);
    svg.addEventListener('click', (e) => {
      const g = e.target.closest('.frame');
      if (!g) return;
      const i = Number(g.dataset.index);
      flameState.zoom = i;
      showFlameInfo(i);
      renderFlame();
    });
    document.getElementById('flame-reset').addEventListener('click', () => { flameState.zoom = 0; showFlameInfo(null); renderFlame(); });
    const input = document.getElementById('flame-search');
    input.addEventListener('input', () => {
      const text = input.value.trim();
      if (!text) flameState.search = null;
      else {
        try { flameState.search = new RegExp(text, 'i'); } catch (err) { flameState.search = new RegExp(text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&'), 'i'); }
      }
      renderFlame();
    });
    const legend = document.getElementById('flame-legend');
    for (const [code] of D.tiers) legend.append(el('span', { class: 'swatch', style: 'background:' + tierColour(code) }), tierName(code));
    legend.append(el('span', { class: 'swatch', style: 'background:var(--inlined)' }), 'inlined');
    legend.append(el('span', { class: 'swatch', style: 'background:var(--vmcode)' }), 'VM');
  }
  function showFlameInfo(i) {
    const info = document.getElementById('flame-info');
    clear(info);
    if (i === null || i === 0) { info.textContent = 'Click a frame to zoom in; hover for details.'; return; }
    info.append(flameDetails(i).replace(/\n/g, ' · ') + ' ');
    const m = D.flame.method[i];
    if (D.lines.find((l) => l.method === m)) {
      const a = el('a', { href: '#' }, 'source');
      a.addEventListener('click', (e) => { e.preventDefault(); showSource(m); });
      info.append(a, ' ');
    }
    if (D.graph.nodes.some((n) => n.method === m)) {
      const a = el('a', { href: '#' }, 'call graph');
      a.addEventListener('click', (e) => { e.preventDefault(); focusMethod(m); });
      info.append(a);
    }
  }
  function updateFlameMatch() {
    const out = document.getElementById('flame-match');
    const re = flameState.search;
    if (!re) { out.textContent = ''; return; }
    // Samples under matching frames, each counted once (a match inside a match is not added).
    const f = D.flame;
    let matched = 0;
    const stack = [0];
    while (stack.length) {
      const i = stack.pop();
      if (i > 0 && re.test(frameLabel(i))) { matched += f.value[i]; continue; }
      for (const c of flameState.children[i]) stack.push(c);
    }
    out.textContent = 'matched ' + matched + ' samples (' + fmtPct(matched, f.value[0] || 1) + ')';
  }

  // ---- timeline -----------------------------------------------------------------------
  const categoryColours = { interpreter: 'var(--interp)', baseline: 'var(--baseline)', optimizing: 'var(--opt)', gc: '#8c6d62', primitive: '#c9b458', runtime: '#a0a0c0', compiling: '#777' };
  function renderTimeline() {
    const svg = document.getElementById('timeline-svg');
    const view = document.getElementById('timeline-view');
    const W = Math.max(400, view.clientWidth || (document.documentElement.clientWidth - 34));
    clear(svg);
    const t = D.timeline;
    const left = 110, right = 16, span = W - left - right;
    const dur = Math.max(1, D.duration_ns);
    const X = (ns) => left + span * ns / dur;
    let y = 10;
    const lane = (label, h) => {
      svg.append(sv('text', { x: 4, y: y + h / 2 + 4, 'font-size': 11 }, label));
      svg.append(sv('line', { x1: left, x2: W - right, y1: y + h, y2: y + h, stroke: '#ddd' }));
      const top = y;
      y += h + 10;
      return top;
    };
    // Samples per bin, stacked by what they were doing.
    const sh = 90;
    const top = lane('samples', sh);
    const maxBin = Math.max(1, ...t.bins.map((b) => b.reduce((a, c) => a + c, 0)));
    const bw = span / Math.max(1, t.bins.length);
    t.bins.forEach((b, i) => {
      let acc = 0;
      b.forEach((n, c) => {
        if (!n) return;
        const h = sh * n / maxBin;
        const r = sv('rect', { x: left + i * bw, y: top + sh - acc - h, width: Math.max(0.5, bw - 0.3), height: h, fill: categoryColours[t.categories[c]] || 'var(--other)' });
        acc += h;
        svg.append(r);
      });
      const all = b.reduce((a, c) => a + c, 0);
      if (all) {
        const hit = sv('rect', { x: left + i * bw, y: top, width: bw, height: sh, fill: 'transparent' });
        withTip(hit, fmtNs(i * t.bin_ns) + '–' + fmtNs((i + 1) * t.bin_ns) + ': ' + all + ' samples\n' + b.map((n, c) => n ? t.categories[c] + ': ' + n : null).filter(Boolean).join('\n'));
        svg.append(hit);
      }
    });
    // Compiles, one lane per tier that compiled.
    const tiers = [...new Set(t.compiles.map((c) => c.tier))].sort();
    for (const tier of tiers) {
      const ty = lane('compile ' + tierName(tier), 14);
      for (const c of t.compiles.filter((c) => c.tier === tier)) {
        const x0 = X(Math.max(0, c.at_ns - c.compile_ns));
        const r = sv('rect', { x: x0, y: ty, width: Math.max(1.5, X(c.at_ns) - x0), height: 14, fill: tierColour(tier) });
        withTip(r, 'compiled ' + name(c.method) + ' to ' + tierName(tier) + '\ninstalled at ' + fmtNs(c.at_ns) + ', compile time ' + fmtNs(c.compile_ns) + ', ' + fmtBytes(c.bytes));
        svg.append(r);
      }
    }
    const dy = lane('deopts (' + t.deopts.length + ')', 14);
    for (const d of t.deopts) {
      const r = sv('rect', { x: X(d.at_ns) - 1, y: dy, width: 2.5, height: 14, fill: 'var(--red)' });
      withTip(r, 'deoptimized ' + name(d.method) + ' at bytecode ' + d.bci + ' (' + fmtNs(d.at_ns) + ')\n' + d.reason);
      svg.append(r);
    }
    const gy = lane('GC (' + t.gcs.length + ')', 14);
    for (const g of t.gcs) {
      const x0 = X(Math.max(0, g.at_ns - g.duration_ns));
      const r = sv('rect', { x: x0, y: gy, width: Math.max(1.5, X(g.at_ns) - x0), height: 14, fill: categoryColours.gc });
      withTip(r, g.scope + ' collection (' + g.kind + (g.plan ? ', ' + g.plan : '') + ') at ' + fmtNs(g.at_ns) + ', ' + fmtNs(g.duration_ns) + '\n' + fmtBytes(g.bytes_before) + ' → ' + fmtBytes(g.bytes_after));
      svg.append(r);
    }
    // Time axis.
    const steps = [1e3, 2e3, 5e3, 1e4, 2e4, 5e4, 1e5, 2e5, 5e5, 1e6, 2e6, 5e6, 1e7, 2e7, 5e7, 1e8, 2e8, 5e8, 1e9, 2e9, 5e9, 1e10, 2e10, 5e10, 1e11];
    const step = steps.find((s) => dur / s <= 10) || steps[steps.length - 1];
    for (let ns = 0; ns <= dur; ns += step) {
      svg.append(sv('line', { x1: X(ns), x2: X(ns), y1: y, y2: y + 5, stroke: '#888' }));
      svg.append(sv('text', { x: X(ns), y: y + 16, 'font-size': 10, 'text-anchor': 'middle', fill: '#555' }, fmtNs(ns)));
    }
    y += 24;
    svg.setAttribute('height', y);
    svg.setAttribute('viewBox', `0 0 ${W} ${y}`);
  }
  function setupTimelineLegend() {
    const legend = document.getElementById('timeline-legend');
    for (const c of D.timeline.categories) legend.append(el('span', { class: 'swatch', style: 'background:' + (categoryColours[c] || 'var(--other)') }), c);
  }

  // ---- VM breakdown -------------------------------------------------------------------
  function renderVm() {
    const box = document.getElementById('vm');
    const v = D.vm_profile;
    const generated = v.generated.reduce((a, r) => a + r[1], 0);
    box.append(el('p', null, 'Samples in generated code: ' + generated + ' (' + fmtPct(generated, v.total) + '); in the VM\'s own code: ' + (v.total - generated) + ' (' + fmtPct(v.total - generated, v.total) + '). ' +
      v.compiles + ' compiles took ' + fmtNs(v.compile_ns) + ' on the compiler thread.'));
    const rows = v.generated.map((r) => ['generated: ' + r[0], r[1]]).concat(v.vm.map((r) => ['VM: ' + r[0], r[1]]));
    const max = Math.max(1, ...rows.map((r) => r[1]));
    box.append(table([{ text: 'component' }, { text: 'samples', num: true }, { text: 'share', num: true }, { text: '' }],
      rows.map((r) => [r[0], r[1], fmtPct(r[1], v.total), bar(r[1], max)]), { id: 'vm-components' }));
    box.append(el('h2', null, 'Compiled methods by bytecode range'));
    if (!v.methods.length) box.append(el('p', { class: 'note' }, 'No samples in compiled code.'));
    for (const m of v.methods) {
      const d = el('details');
      d.append(el('summary', null, name(m.method) + ' [' + tierName(m.tier) + '] — ' + m.samples + ' samples (' + fmtPct(m.samples, v.total) + '), ' + m.versions + ' version' + (m.versions === 1 ? '' : 's') + ', ' + fmtBytes(m.code_bytes) + (m.unmapped ? ', ' + m.unmapped + ' at pcs of no bytecode' : '')));
      const shown = m.ranges.filter((r) => pct(r.samples, m.samples) >= 0.5);
      const t = table([{ text: 'samples', num: true }, { text: 'of method', num: true }, { text: 'bytecodes' }, { text: 'method (inlined via)' }, { text: 'line', num: true }, { text: 'source' }],
        shown.map((r) => {
          const ops = el('details');
          ops.append(el('summary', null, r.first_bci === r.last_bci ? String(r.first_bci) : r.first_bci + '–' + r.last_bci));
          ops.append(el('pre', { class: 'ops' }, r.bytecodes.map((b) => String(b[0]).padStart(4) + '  ' + String(b[2]).padStart(5) + '  ' + (b[1] || '')).join('\n')));
          const scope = name(r.method) + (r.via.length ? ' ← ' + r.via.slice().reverse().map((s) => name(s[0]) + '@' + s[1]).join(' ← ') : '');
          return [r.samples, fmtPct(r.samples, m.samples), ops, scope, r.line === null ? '–' : r.line, el('span', { class: 'mono' }, r.source || '')];
        }));
      d.append(t);
      if (shown.length < m.ranges.length) d.append(el('div', { class: 'note' }, (m.ranges.length - shown.length) + ' ranges below 0.5 % of the method not shown.'));
      box.append(d);
    }
    const first = box.querySelector('details');
    if (first) first.open = true;
  }

  // ---- source -------------------------------------------------------------------------
  function renderSourceSelect() {
    const select = document.getElementById('source-method');
    D.lines.forEach((l, i) => select.append(el('option', { value: i }, name(l.method) + ' — self ' + fmtPct(l.self_samples, D.samples) + ', total ' + fmtPct(l.total_samples, D.samples))));
    select.addEventListener('change', () => renderSource(Number(select.value)));
    if (D.lines.length) renderSource(0);
    else document.getElementById('source-note').textContent = 'No method has samples.';
  }
  function renderSource(i) {
    const l = D.lines[i];
    const t = document.getElementById('source-lines');
    clear(t);
    document.getElementById('source-summary').textContent = where(l.method) + ' — self ' + fmtPct(l.self_samples, D.samples) + ', total ' + fmtPct(l.total_samples, D.samples);
    document.getElementById('source-note').textContent = l.missing ? 'No source text: ' + l.missing + '.' : '';
    const head = el('tr', null, el('th', { class: 'num' }, 'line'), el('th', { class: 'num' }, 'self'), el('th', { class: 'num' }, 'total'), el('th', null, 'source'));
    t.append(el('thead', null, head));
    const body = el('tbody');
    const max = Math.max(1, ...l.rows.map((r) => r[3]));
    for (const [line, text, self, total] of l.rows) {
      const share = total / max;
      const tr = el('tr', { class: share > 0.5 ? 'hotter' : share > 0.1 ? 'hot' : null });
      tr.append(el('td', { class: 'num' }, line), el('td', { class: 'num' }, self || ''), el('td', { class: 'num' }, total || ''), el('td', { class: 'code' }, text));
      body.append(tr);
    }
    t.append(body);
  }
  function showSource(m) {
    const i = D.lines.findIndex((l) => l.method === m);
    if (i < 0) return;
    showTab('source');
    document.getElementById('source-method').value = String(i);
    renderSource(i);
  }

  // ---- start --------------------------------------------------------------------------
  function start() {
    D = JSON.parse(document.getElementById('profile-data').textContent);
    for (const [code, n] of D.tiers) tierNames.set(code, n);
    document.getElementById('subtitle').textContent = D.title + ' — ' + D.vm + ' — ' + D.sampler;
    document.title = 'Tally profile: ' + D.title;
    for (const b of document.querySelectorAll('button[data-tab]')) b.addEventListener('click', () => showTab(b.dataset.tab));
    renderOverview();
    renderGraph();
    setupFlame();
    renderFlame();
    setupTimelineLegend();
    renderTimeline();
    renderVm();
    renderSourceSelect();
    let pending = null;
    window.addEventListener('resize', () => {
      clearTimeout(pending);
      pending = setTimeout(() => {
        if (!document.getElementById('tab-flame').hidden) renderFlame();
        if (!document.getElementById('tab-timeline').hidden) renderTimeline();
      }, 150);
    });
  }
  try {
    start();
    window.__tallyReadyMs = performance.now();
    document.body.dataset.ready = '1';
  } catch (err) {
    const fatal = document.getElementById('fatal');
    fatal.hidden = false;
    fatal.textContent = 'The report could not be drawn: ' + (err && err.stack ? err.stack : err);
    document.body.dataset.ready = 'error';
    throw err;
  }
})();
