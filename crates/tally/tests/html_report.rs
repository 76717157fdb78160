//! `tally report --html` end to end: the command's errors, and the page itself opened in
//! headless Chromium by `tests/browser/check-report.mjs` (Playwright), which clicks through
//! every view and fails on a console error, an uncaught exception or any request the page
//! makes. `scripts/test` installs Chromium and the check's npm packages.

mod common;

use std::path::Path;
use std::process::{Command, Stdio};

use common::{repo, run_adaptive_profiled, run_in, text};

/// A method with a binary selector made of markup characters, called enough for the adaptive
/// controller to compile it and for the call graph to show it; it allocates, so collections
/// happen on the timeline too.
const MARKUP: &str = "Markup = (
  <&> other = ( | a | a := Array new: 8. a at: 1 put: other. ^(a at: 1) + 1 )
  round = ( | t | t := 0. 1 to: 200 do: [:i | t := t + (self <&> i)]. ^t )
  run = ( | total deadline |
    total := 0. deadline := system ticks + 1500000.
    [system ticks < deadline] whileTrue: [ total := total + self round ].
    total > 0 ifTrue: ['done' println] )
)
";

fn profiled(dir: &Path) {
    std::fs::write(dir.join("Markup.som"), MARKUP).unwrap();
    run_adaptive_profiled(
        dir,
        "markup.tprof",
        &["--count-calls", "--gc-stress", "20000"],
        "Markup.som",
    );
}

#[test]
fn the_html_report_is_written_once_and_never_over_a_file_without_force() {
    let dir = tempfile::tempdir().unwrap();
    profiled(dir.path());
    let no_output = run_in(dir.path(), &["report", "--html", "markup.tprof"]);
    assert!(!no_output.status.success());
    assert!(
        text(&no_output.stderr).contains("--output"),
        "{}",
        text(&no_output.stderr)
    );
    let both = run_in(
        dir.path(),
        &["report", "--html", "--vm", "-o", "r.html", "markup.tprof"],
    );
    assert!(!both.status.success());

    let first = run_in(
        dir.path(),
        &["report", "--html", "-o", "r.html", "markup.tprof"],
    );
    assert!(first.status.success(), "{}", text(&first.stderr));
    assert!(text(&first.stderr).contains("wrote r.html"));
    let page = std::fs::read_to_string(dir.path().join("r.html")).unwrap();
    assert!(page.starts_with("<!DOCTYPE html>"));
    // The selector is in the data, escaped; never as markup.
    assert!(
        page.contains("Markup\\u003e\\u003e\\u003c\\u0026\\u003e"),
        "selector not in the data"
    );
    assert!(!page.contains("<&>"));

    std::fs::write(dir.path().join("mine.html"), "my notes").unwrap();
    let refused = run_in(
        dir.path(),
        &["report", "--html", "-o", "mine.html", "markup.tprof"],
    );
    assert!(!refused.status.success());
    assert!(
        text(&refused.stderr).contains("--force"),
        "{}",
        text(&refused.stderr)
    );
    assert_eq!(
        std::fs::read_to_string(dir.path().join("mine.html")).unwrap(),
        "my notes"
    );
    let forced = run_in(
        dir.path(),
        &[
            "report",
            "--html",
            "-o",
            "mine.html",
            "--force",
            "markup.tprof",
        ],
    );
    assert!(forced.status.success(), "{}", text(&forced.stderr));
}

#[test]
fn the_html_report_works_in_headless_chromium() {
    let check = repo().join("tests/browser/check-report.mjs");
    let packages = repo().join("tests/browser/node_modules/playwright-core");
    assert!(
        packages.exists() && Path::new("/usr/bin/chromium").exists()
            || std::env::var_os("TALLY_CHROMIUM").is_some() && packages.exists(),
        "the browser check needs Debian's chromium and tests/browser's npm packages: run \
         scripts/test, which installs what is missing"
    );
    let dir = tempfile::tempdir().unwrap();
    profiled(dir.path());
    let out = run_in(
        dir.path(),
        &["report", "--html", "-o", "r.html", "markup.tprof"],
    );
    assert!(out.status.success(), "{}", text(&out.stderr));

    let shots = dir.path().join("shots");
    let run = Command::new("node")
        .arg(&check)
        .arg(dir.path().join("r.html"))
        .arg("--screenshots")
        .arg(&shots)
        .stdin(Stdio::null())
        .output()
        .expect("run node");
    let report = text(&run.stdout);
    assert!(
        run.status.success(),
        "the browser check failed:\n{report}\n{}",
        text(&run.stderr)
    );
    let result: serde_json::Value = serde_json::from_str(&report).expect("the check's JSON");
    assert_eq!(result["ok"], true);
    assert_eq!(result["console_errors"].as_array().unwrap().len(), 0);
    assert_eq!(result["requests"].as_array().unwrap().len(), 0);
    let passed: Vec<&str> = result["checks"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["ok"] == true)
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    for needed in [
        "graph_diagram",
        "flame_search",
        "flame_zoom",
        "timeline_svg",
        "vm_components",
        "source_view",
        "self_contained",
    ] {
        assert!(passed.contains(&needed), "{needed} did not pass:\n{report}");
    }
    for shot in [
        "overview", "graph", "diagram", "flame", "timeline", "vm", "source",
    ] {
        let png = std::fs::read(shots.join(format!("{shot}.png"))).unwrap();
        assert!(png.starts_with(b"\x89PNG"), "{shot}.png is not a PNG");
    }
    // A method compiled during the run has a node in its compiled tier, judged by the
    // amortization analysis (the profile counted calls), so not blue.
    let page = std::fs::read_to_string(dir.path().join("r.html")).unwrap();
    let start = page.find("id=\"profile-data\">").unwrap() + "id=\"profile-data\">".len();
    let end = start + page[start..].find("</script>").unwrap();
    let data: serde_json::Value = serde_json::from_str(&page[start..end]).unwrap();
    let methods = data["methods"].as_array().unwrap();
    let judged = data["graph"]["nodes"].as_array().unwrap().iter().any(|n| {
        let name = methods[n["method"].as_u64().unwrap() as usize]["name"].as_str();
        name.is_some_and(|n| n.starts_with("Markup>>")) && n["tier"] != 0 && n["colour"] != "blue"
    });
    assert!(
        judged,
        "no judged node of Markup in a compiled tier: {}",
        data["graph"]
    );
}
