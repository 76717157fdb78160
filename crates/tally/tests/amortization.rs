//! `--count-calls` and `tally report --amortization` end to end: every call is counted once,
//! in the tier that ran it (interpreted, by compiled code's direct calls, inlined), and each
//! recompilation gets a verdict.

mod common;

use common::{run_adaptive_profiled, run_in, text};

/// `m:` is called from a loop that runs for a second and a half (whatever the build's
/// speed), so it moves from the interpreter to the baseline tier and on to the optimizing
/// one, called directly and, once `round` is optimized, inlined; the program counts its own
/// calls and prints the count.
const COUNT: &str = "Count = (
  m: x = ( | y | y := x * 2. ^y + 1 )
  round: k = ( | t | t := 0. 1 to: 100 do: [:i | t := t + (self m: i)]. ^t )
  run = ( | total calls deadline |
    total := 0. calls := 0.
    deadline := system ticks + 1500000.
    [system ticks < deadline] whileTrue: [
      total := total + (self round: calls). calls := calls + 100 ].
    calls println )
)
";

/// The calls of `method` per tier in the report's table.
fn calls_by_tier(report: &str, method: &str) -> Vec<(String, u64)> {
    let table = report
        .split("by method and tier")
        .nth(1)
        .unwrap_or_else(|| panic!("the per-tier table: {report}"));
    table
        .lines()
        .filter_map(|l| {
            let cols: Vec<&str> = l.split_whitespace().collect();
            (cols.first() == Some(&method)).then(|| (cols[1].to_string(), cols[2].parse().unwrap()))
        })
        .collect()
}

#[test]
fn every_call_is_counted_once_in_the_tier_that_ran_it() {
    let dir = tempfile::tempdir().expect("temp dir");
    std::fs::write(dir.path().join("Count.som"), COUNT).unwrap();
    let (out, err) =
        run_adaptive_profiled(dir.path(), "count.tprof", &["--count-calls"], "Count.som");
    let calls: u64 = out.trim().parse().expect("the program's count");
    let report = run_in(
        dir.path(),
        &["report", "--amortization", "--top", "50", "count.tprof"],
    );
    assert!(report.status.success(), "{}", text(&report.stderr));
    let report = text(&report.stdout);
    let tiers = calls_by_tier(&report, "Count>>m:");
    let counted: u64 = tiers.iter().map(|t| t.1).sum();
    assert_eq!(counted, calls, "{tiers:?}\n{report}\n{err}");
    assert!(
        tiers.iter().any(|(t, n)| t == "optimizing" && *n > 0),
        "{tiers:?}: {report}"
    );
    // Its moves up the tiers, each with a verdict (or the reason for none).
    assert!(report.contains("Count>>m:"), "{report}");
    assert!(
        report.contains("interpreter -> baseline") || report.contains("interpreter -> optimizing"),
        "{report}"
    );
}

#[test]
fn counting_calls_needs_a_profile_and_the_analysis_needs_the_counts() {
    let dir = tempfile::tempdir().expect("temp dir");
    std::fs::write(dir.path().join("Count.som"), COUNT).unwrap();
    let out = run_in(dir.path(), &["--count-calls", "Count.som"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("add --profile"),
        "{}",
        text(&out.stderr)
    );
    let out = run_in(
        dir.path(),
        &["--tier=interp", "--profile=plain.tprof", "Count.som"],
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    let out = run_in(dir.path(), &["report", "--amortization", "plain.tprof"]);
    assert!(!out.status.success());
    assert!(
        text(&out.stderr).contains("record it with --count-calls"),
        "{}",
        text(&out.stderr)
    );
}
