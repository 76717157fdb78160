//! End-to-end tests of the profile commands' options and labels: `report --depth`, each
//! subcommand's own `--help`, `-o -`, flame graph options and the differential flame graph,
//! `compare`'s labels, and wall-clock profiles labelled wall in every format.

use std::process::Output;

mod common;
use common::{run_in, text};

const FIB: &[u8] = b"Fib = (
    run = ( 1 to: 2 do: [:i | (self fib: 23) println ] )
    fib: n = ( n < 2 ifTrue: [ ^n ]. ^(self fib: n - 1) + (self fib: n - 2) )
)";

const LOOP: &[u8] = b"Loop = (
    run = ( | s | s := 0. 1 to: 3000000 do: [:i | s := s + i ]. s println )
)";

fn ok(o: &Output) -> String {
    assert!(o.status.success(), "{}{}", text(&o.stdout), text(&o.stderr));
    text(&o.stdout)
}

/// A Fib profile (and the program) in a fresh directory.
fn fib_profile(extra: &[&str]) -> tempfile::TempDir {
    let d = tempfile::tempdir().unwrap();
    std::fs::write(d.path().join("Fib.som"), FIB).unwrap();
    std::fs::write(d.path().join("Loop.som"), LOOP).unwrap();
    let mut args = vec!["--profile=fib.profile", "--rate", "1000"];
    args.extend_from_slice(extra);
    args.push("Fib.som");
    ok(&run_in(d.path(), &args));
    d
}

fn call_tree(report: &str) -> Vec<&str> {
    report
        .split("== Call tree\n")
        .nth(1)
        .expect("a call tree")
        .lines()
        .skip(1)
        .take_while(|l| !l.is_empty())
        .collect()
}

#[test]
fn report_depth_limits_the_call_tree() {
    let d = fib_profile(&[]);
    let deep = ok(&run_in(
        d.path(),
        &["report", "fib.profile", "--min-percent", "0"],
    ));
    assert!(call_tree(&deep).len() > 3, "{deep}");
    let shallow = ok(&run_in(
        d.path(),
        &[
            "report",
            "fib.profile",
            "--min-percent",
            "0",
            "--depth",
            "2",
        ],
    ));
    let rows = call_tree(&shallow);
    // Depth 0 has no indent, depth 1 two spaces; nothing deeper.
    for row in &rows {
        let name = &row[16..];
        assert!(!name.starts_with("    "), "row deeper than 2 levels: {row}");
    }
    assert!(rows.iter().any(|r| r[16..].starts_with("  ")), "{shallow}");
}

#[test]
fn each_subcommand_has_its_own_help() {
    let d = tempfile::tempdir().unwrap();
    let record = ok(&run_in(d.path(), &["record", "--help"]));
    assert!(record.contains("Usage: tally record"), "{record}");
    for (cmd, usage) in [
        ("report", "Usage: tally report"),
        ("compare", "Usage: tally compare"),
        ("export", "Usage: tally export"),
    ] {
        let help = ok(&run_in(d.path(), &[cmd, "--help"]));
        assert!(help.contains(usage), "{cmd}: {help}");
    }
    assert!(!d.path().join("tally.profile").exists());
}

#[test]
fn output_dash_writes_to_stdout() {
    let d = fib_profile(&[]);
    let o = run_in(d.path(), &["export", "folded", "fib.profile", "-o", "-"]);
    let folded = ok(&o);
    assert!(folded.contains("Fib>>fib:"), "{folded}");
    assert!(!d.path().join("-").exists(), "no file named -");
}

#[test]
fn flame_graph_options_and_an_empty_profile() {
    let d = fib_profile(&[]);
    let o = run_in(
        d.path(),
        &[
            "export",
            "flamegraph",
            "fib.profile",
            "-o",
            "-",
            "--title",
            "My Fib",
            "--width",
            "800",
            "--inverted",
        ],
    );
    let svg = ok(&o);
    assert!(svg.contains("My Fib"), "title");
    assert!(svg.contains("width=\"800\""), "width");
    assert!(svg.contains("var inverted = true;"), "inverted");

    // A profile with no samples: CBS edges only.
    ok(&run_in(
        d.path(),
        &[
            "--profile=edges.profile",
            "--sampler",
            "none",
            "--exhaustive",
            "Fib.som",
        ],
    ));
    let o = run_in(
        d.path(),
        &["export", "flamegraph", "edges.profile", "-o", "e.svg"],
    );
    assert_eq!(o.status.code(), Some(1));
    let err = text(&o.stderr);
    assert!(err.contains("has no samples"), "{err}");
    assert!(!err.contains("No stack counts found"), "{err}");
}

#[test]
fn diff_flamegraph_and_compare_label_their_inputs() {
    let d = fib_profile(&[]);
    ok(&run_in(
        d.path(),
        &["--profile=loop.profile", "--rate", "1000", "Loop.som"],
    ));
    let o = run_in(
        d.path(),
        &[
            "export",
            "diff-flamegraph",
            "fib.profile",
            "fib.profile",
            "-o",
            "same.svg",
        ],
    );
    ok(&o);
    let svg = std::fs::read_to_string(d.path().join("same.svg")).unwrap();
    assert!(svg.contains("<svg") && svg.contains("Fib&gt;&gt;fib:"));

    let o = run_in(d.path(), &["compare", "fib.profile", "loop.profile"]);
    let out = ok(&o);
    assert!(!out.contains("Count("), "{out}");
    assert!(
        out.contains("A (reference): fib.profile: Fib.som — "),
        "{out}"
    );
    assert!(
        out.contains("B (candidate): loop.profile: Loop.som — "),
        "{out}"
    );
    assert!(
        out.contains(" samples; ") && out.contains("at 1000 Hz"),
        "{out}"
    );
    assert!(out.contains("top 10 methods"), "{out}");
    assert!(
        text(&o.stderr).contains("different programs"),
        "{}",
        text(&o.stderr)
    );
    let same = ok(&run_in(
        d.path(),
        &["compare", "fib.profile", "fib.profile"],
    ));
    assert!(!same.contains("warning"), "{same}");
}

#[test]
fn a_wall_clock_profile_is_labelled_wall() {
    let d = fib_profile(&["--sampler", "timer-wall"]);
    let report = ok(&run_in(d.path(), &["report", "fib.profile"]));
    let sampler = report.lines().find(|l| l.starts_with("sampler:")).unwrap();
    assert!(sampler.starts_with("sampler: timer-wall"), "{sampler}");
    assert!(sampler.contains("wall-clock time"), "{sampler}");
    assert!(!report.contains("CPU-time timer fires"), "{report}");

    ok(&run_in(
        d.path(),
        &["export", "pprof", "fib.profile", "-o", "p.pb.gz"],
    ));
    let gz = std::fs::read(d.path().join("p.pb.gz")).unwrap();
    let mut raw = Vec::new();
    use std::io::Read as _;
    flate2::read::GzDecoder::new(&gz[..])
        .read_to_end(&mut raw)
        .unwrap();
    let raw = String::from_utf8_lossy(&raw);
    assert!(raw.contains("wall"), "pprof string table names wall time");

    let fx = ok(&run_in(
        d.path(),
        &["export", "firefox", "fib.profile", "-o", "-"],
    ));
    let fx: serde_json::Value = serde_json::from_str(&fx).unwrap();
    let product = fx["meta"]["product"].as_str().unwrap();
    assert!(product.contains("wall-clock"), "{product}");

    let ss = ok(&run_in(
        d.path(),
        &["export", "speedscope", "fib.profile", "-o", "-"],
    ));
    assert!(ss.contains("wall-clock time"));

    // A CPU-time profile says CPU.
    let c = fib_profile(&["--sampler", "timer"]);
    let report = ok(&run_in(c.path(), &["report", "fib.profile"]));
    assert!(report.contains("samples measure CPU time"), "{report}");
}
