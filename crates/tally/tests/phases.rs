//! Method-level phases (MonitorMethod) end to end: a run that times every method, the
//! choice of phases, and a run that counts at them in every tier, with each phase's
//! activations all counted (non-local returns included) and the program's output unchanged;
//! files that do not fit are refused with the reason.

mod common;

use std::path::Path;
use std::process::Output;

use common::{run_in as tally, text};

/// Rounds of three phases: `build:` allocates, `walk:` computes, `find:` is left by a
/// non-local return from its block.
const PHASED: &str = r#"
Phased = (
    build: n = (
        | a |
        a := Array new: n.
        1 to: n do: [:i | a at: i put: (Array new: 4)].
        ^a
    )
    walk: a = (
        | s |
        s := 0.
        a do: [:e | s := s + e length].
        1 to: 3000 do: [:k | s := s + (k rem: 7)].
        ^s
    )
    find: a = (
        1 to: a length do: [:i | i = 50 ifTrue: [^i]].
        ^0
    )
    round: i = (
        | a |
        a := self build: 2000.
        ^(self walk: a) + (self find: a)
    )
    run = (
        | total |
        total := 0.
        1 to: 40 do: [:i | total := total + (self round: i)].
        ('total ' + total asString) println
    )
)
"#;

fn stderr(o: &Output) -> String {
    text(&o.stderr)
}

fn stdout(o: &Output) -> String {
    text(&o.stdout)
}

/// Where perf_event_open is refused (a container's seccomp policy, perf_event_paranoid 3)
/// counting cannot run; the refusal must say so.
fn counters_refused(o: &Output) -> bool {
    !o.status.success() && stderr(o).contains("cannot open perf_events counters")
}

/// A directory with `Phased.som`, its method times and the phases chosen from them (every
/// method that ran, so that the counting run has the four of interest among them).
fn selected() -> Option<tempfile::TempDir> {
    let d = tempfile::tempdir().unwrap();
    std::fs::write(d.path().join("Phased.som"), PHASED).unwrap();
    let o = tally(
        d.path(),
        &["--phases-record", "p.times", "--tier=interp", "Phased.som"],
    );
    if counters_refused(&o) {
        eprintln!("perf_events counters are not allowed here: {}", stderr(&o));
        return None;
    }
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(stdout(&o), "total 681920\n");
    assert!(stderr(&o).contains("written to p.times"), "{}", stderr(&o));
    let times: serde_json::Value =
        serde_json::from_slice(&std::fs::read(d.path().join("p.times")).unwrap()).unwrap();
    let calls = |name: &str| {
        times["methods"]
            .as_array()
            .unwrap()
            .iter()
            .find(|m| m["name"] == name)
            .map(|m| m["calls"].as_u64().unwrap())
    };
    assert_eq!(calls("Phased>>round:"), Some(40));
    assert_eq!(calls("Phased>>find:"), Some(40));
    assert_eq!(calls("Phased>>run"), Some(1));
    let o = tally(
        d.path(),
        &[
            "vertical", "phases", "p.times", "--weight", "0", "--grain", "0", "-o", "p.phases",
        ],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let table = stdout(&o);
    assert!(table.contains("Phased>>build:"), "{table}");
    assert!(table.contains("est. ovh"), "{table}");
    Some(d)
}

#[test]
fn every_activation_of_a_phase_is_counted_in_every_tier() {
    let Some(d) = selected() else {
        return;
    };
    for tier in ["interp", "baseline", "opt", "adaptive"] {
        let report = format!("{tier}.json");
        let o = tally(
            d.path(),
            &[
                "--phases",
                "p.phases",
                "--phases-report",
                &report,
                &format!("--tier={tier}"),
                "Phased.som",
            ],
        );
        assert!(o.status.success(), "{tier}: {}", stderr(&o));
        assert_eq!(stdout(&o), "total 681920\n", "{tier}");
        let text = stderr(&o);
        assert!(
            text.contains("Across phases (one-way ANOVA"),
            "{tier}: {text}"
        );
        let r: serde_json::Value =
            serde_json::from_slice(&std::fs::read(d.path().join(&report)).unwrap()).unwrap();
        let intervals = |name: &str| {
            r["phases"]
                .as_array()
                .unwrap()
                .iter()
                .find(|p| p["name"] == name)
                .map(|p| p["intervals"].as_u64().unwrap())
        };
        for phase in [
            "Phased>>build:",
            "Phased>>walk:",
            "Phased>>find:",
            "Phased>>round:",
        ] {
            assert_eq!(intervals(phase), Some(40), "{tier}: {phase}");
        }
        assert_eq!(intervals("Phased>>run"), Some(1), "{tier}");
        // Allocation separates `build:` from `walk:`: the analysis has it.
        assert!(
            r["anova"]
                .as_array()
                .unwrap()
                .iter()
                .any(|a| a["metric"] == "allocation_rate"),
            "{tier}: {r}"
        );
        let build_rate = |name: &str| {
            r["phases"]
                .as_array()
                .unwrap()
                .iter()
                .find(|p| p["name"] == name)
                .unwrap()["metrics"]
                .as_array()
                .unwrap()
                .iter()
                .find(|m| m["metric"] == "allocation_rate")
                .map(|m| m["mean"].as_f64().unwrap())
        };
        // `walk:` allocates nothing of its own (its blocks' contexts at most); `build:`
        // allocates 2,001 arrays per call.
        let (build, walk) = (build_rate("Phased>>build:"), build_rate("Phased>>walk:"));
        assert!(
            build.unwrap() > 10.0 * walk.unwrap_or(0.0).max(0.1),
            "{tier}: {build:?} {walk:?}"
        );
    }
    if Path::new("/proc/self").exists() {
        // A compiling tier counted its compilations.
        let r: serde_json::Value =
            serde_json::from_slice(&std::fs::read(d.path().join("opt.json")).unwrap()).unwrap();
        assert!(
            r["phases"]
                .as_array()
                .unwrap()
                .iter()
                .any(|p| p["kind"] == "compilation"),
            "{r}"
        );
    }
}

#[test]
fn files_that_do_not_fit_are_refused_with_the_reason() {
    let Some(d) = selected() else {
        return;
    };
    let p = d.path();
    // Method times are not phases, and phases are not method times.
    let o = tally(p, &["--phases", "p.times", "Phased.som"]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("cannot use the phases in p.times"),
        "{}",
        stderr(&o)
    );
    assert!(stdout(&o).is_empty());
    let o = tally(p, &["vertical", "phases", "p.phases"]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("cannot use the method times in p.phases"),
        "{}",
        stderr(&o)
    );
    // Cut short.
    let text = std::fs::read_to_string(p.join("p.phases")).unwrap();
    std::fs::write(p.join("cut.phases"), &text[..text.len() / 2]).unwrap();
    let o = tally(p, &["--phases", "cut.phases", "Phased.som"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).contains("not JSON of the expected shape"),
        "{}",
        stderr(&o)
    );
    // Missing.
    let o = tally(p, &["--phases", "none.phases", "Phased.som"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).contains("cannot read the phases in none.phases"),
        "{}",
        stderr(&o)
    );
    // Never over a file without --force.
    let o = tally(p, &["vertical", "phases", "p.times", "-o", "p.phases"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("pass --force"), "{}", stderr(&o));
    let o = tally(p, &["--phases-record", "p.times", "Phased.som"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stdout(&o).is_empty(), "the program must not have run");
    // Phases and GC hints are one or the other.
    let o = tally(
        p,
        &[
            "--phases",
            "p.phases",
            "--gc-hints",
            "x.hints",
            "Phased.som",
        ],
    );
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("cannot be used with"), "{}", stderr(&o));
}
