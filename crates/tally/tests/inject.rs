//! `--inject-delay`: a delay of known size at every entry of a method, in every tier, with
//! the program's output unchanged, and credited to that method by the profile.

mod common;

use std::process::Output;

use common::{hot_loop_program, run_in as tally, text};

fn stderr(o: &Output) -> String {
    text(&o.stderr)
}

#[test]
fn every_entry_is_delayed_in_every_tier_and_the_profile_credits_the_method() {
    let d = tempfile::tempdir().unwrap();
    std::fs::write(d.path().join("Inl.som"), hot_loop_program(100_000)).unwrap();
    for tier in ["interp", "baseline", "opt", "adaptive"] {
        let o = tally(
            d.path(),
            &[
                &format!("--tier={tier}"),
                "--inject-delay",
                "Inl>>step:=5us",
                "--profile=p.profile",
                "--force",
                "Inl.som",
            ],
        );
        assert!(o.status.success(), "{tier}: {}", stderr(&o));
        assert_eq!(
            String::from_utf8_lossy(&o.stdout),
            "10000200000\n",
            "{tier}"
        );
        let e = stderr(&o);
        assert!(
            e.contains("injected 100000 delay(s) of 5000 ns into Inl>>step:"),
            "{tier}: {e}"
        );
        // 0.5 s of delay against a few milliseconds of program: nearly every sample is in
        // `step:`, whatever the tier.
        let r = tally(d.path(), &["report", "p.profile"]);
        let report = String::from_utf8_lossy(&r.stdout).into_owned();
        let step = report
            .lines()
            .find(|l| l.trim_end().ends_with("Inl>>step:") && l.contains('%'))
            .unwrap_or_else(|| panic!("{tier}: no step: line in\n{report}"));
        let self_share: f64 = step
            .split_whitespace()
            .next()
            .unwrap()
            .trim_end_matches('%')
            .parse()
            .unwrap();
        assert!(self_share > 80.0, "{tier}: {step}");
    }
}

#[test]
fn a_place_or_duration_that_is_not_one_is_refused() {
    let d = tempfile::tempdir().unwrap();
    std::fs::write(d.path().join("Inl.som"), hot_loop_program(100_000)).unwrap();
    for (arg, why) in [
        ("step:=5us", "not a method name"),
        ("Inl>>step:", "not METHOD=DURATION"),
        ("Inl>>step:=3 weeks", "unknown unit"),
        ("Inl>>step:=0", "at least 1 ns"),
    ] {
        let o = tally(d.path(), &["--inject-delay", arg, "Inl.som"]);
        assert_eq!(o.status.code(), Some(2), "{arg}");
        assert!(stderr(&o).contains(why), "{arg}: {}", stderr(&o));
        assert!(o.stdout.is_empty());
    }
    let o = tally(
        d.path(),
        &[
            "--inject-delay",
            "Inl>>step:=1us",
            "--phases",
            "x",
            "Inl.som",
        ],
    );
    assert_eq!(o.status.code(), Some(2));
    // A method that never runs is a warning, not a silent run without a delay.
    let o = tally(d.path(), &["--inject-delay", "Inl>>nothing=1us", "Inl.som"]);
    assert!(o.status.success());
    assert!(
        stderr(&o).contains("no delay was injected: Inl>>nothing never ran"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn the_deliberately_broken_sampler_credits_the_caller() {
    let d = tempfile::tempdir().unwrap();
    std::fs::write(d.path().join("Inl.som"), hot_loop_program(100_000)).unwrap();
    let o = tally(
        d.path(),
        &[
            "--tier=interp",
            "--inject-delay",
            "Inl>>step:=5us",
            "--profile=p.profile",
            "--debug-credit-callers",
            "Inl.som",
        ],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let r = tally(d.path(), &["report", "p.profile"]);
    let report = String::from_utf8_lossy(&r.stdout).into_owned();
    let flat: Vec<&str> = report
        .lines()
        .skip_while(|l| !l.starts_with("== Flat profile"))
        .skip(1)
        .take_while(|l| !l.starts_with("=="))
        .collect();
    // Every sample taken in `step:` went to `run`, its caller; `step:` has no self time.
    // The delay is nearly all of the run, so `run` holds nearly every sample; the rest
    // (loading, printing) may land a sample elsewhere on a slow machine.
    let run = flat
        .iter()
        .find(|l| l.trim_end().ends_with("Inl>>run"))
        .unwrap_or_else(|| panic!("{report}"));
    let self_share: f64 = run
        .split_whitespace()
        .next()
        .and_then(|s| s.trim_end_matches('%').parse().ok())
        .unwrap_or_else(|| panic!("{run}"));
    assert!(self_share >= 95.0, "{report}");
    assert!(
        !flat.iter().any(|l| l.trim_end().ends_with("Inl>>step:")),
        "{report}"
    );
}
