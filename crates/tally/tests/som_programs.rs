//! Runs every SOM test program in `tests/som` (`NameTest.som`, with the expected standard
//! output in `NameTest.expected`, when not 0, the expected exit status in `NameTest.exit`, and
//! optionally a line the standard error must contain in `NameTest.stderr`)
//! through the `tally` binary: once normally and once with the GC collecting every few
//! allocations, so the programs also check that nothing the VM holds is lost when objects move.
//! A program whose size makes stress runs long has `NameTest.stress-scale`: a number (after
//! `#` comments that say why) that multiplies the interval of `--gc-stress` for it.

use std::path::{Path, PathBuf};
use std::process::Command;

mod common;
use common::{eager_calibration, eager_opt_calibration};

fn som_tests_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/som")
}

fn test_programs() -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(som_tests_dir())
        .expect("tests/som exists")
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with("Test.som"))
        .map(|n| n.trim_end_matches(".som").to_string())
        .collect();
    names.sort();
    assert!(
        names.len() >= 30,
        "expected the SOM test programs, found {}",
        names.len()
    );
    names
}

fn run_all(extra_flags: &[&str]) {
    let dir = som_tests_dir();
    let mut failures = Vec::new();
    let programs = test_programs();
    for name in &programs {
        let expected = std::fs::read_to_string(dir.join(format!("{name}.expected")))
            .unwrap_or_else(|_| panic!("{name}.expected is missing"));
        let expected_status: i32 = std::fs::read_to_string(dir.join(format!("{name}.exit")))
            .map(|s| s.trim().parse().expect("exit file holds a number"))
            .unwrap_or(0);
        let flags = scaled_stress(extra_flags, &dir.join(format!("{name}.stress-scale")));
        let out = Command::new(env!("CARGO_BIN_EXE_tally"))
            .args(&flags)
            .arg("-cp")
            .arg(&dir)
            .arg(format!("{name}.som"))
            .current_dir(&dir)
            .output()
            .expect("run tally");
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        let status = out.status.code().unwrap_or(-1);
        let stderr_ok = std::fs::read_to_string(dir.join(format!("{name}.stderr")))
            .map(|want| stderr.contains(want.trim_end()))
            .unwrap_or(true);
        if stdout.trim_end() != expected.trim_end() || status != expected_status || !stderr_ok {
            failures.push(format!(
                "{name}: exit {status} (expected {expected_status})\n--- stdout\n{stdout}\n--- expected\n{expected}\n--- stderr\n{stderr}",
            ));
        }
    }
    println!(
        "{} passed, {} failed",
        programs.len() - failures.len(),
        failures.len()
    );
    assert!(
        failures.is_empty(),
        "{} SOM test program(s) failed:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

/// `flags` with the interval of `--gc-stress` multiplied by the number in `scale_file`, if
/// there is one.
fn scaled_stress(flags: &[&str], scale_file: &Path) -> Vec<String> {
    let scale: u64 = std::fs::read_to_string(scale_file)
        .map(|s| {
            s.lines()
                .find(|l| !l.trim().is_empty() && !l.starts_with('#'))
                .and_then(|l| l.trim().parse().ok())
                .expect("a stress-scale file holds a number (and # comments)")
        })
        .unwrap_or(1);
    let mut out: Vec<String> = flags.iter().map(|f| f.to_string()).collect();
    if let Some(k) = out.iter().position(|f| f == "--gc-stress") {
        let n: u64 = out[k + 1].parse().expect("--gc-stress N");
        out[k + 1] = (n * scale).to_string();
    }
    out
}

#[test]
fn som_programs_produce_expected_output() {
    run_all(&[]);
}

#[test]
fn som_programs_survive_gc_stress() {
    run_all(&["--gc-stress", "400"]);
}

#[test]
fn som_programs_survive_gc_stress_under_semispace() {
    survive_gc_stress_under("--gc=semispace");
}

#[test]
fn som_programs_survive_gc_stress_under_immix() {
    survive_gc_stress_under("--gc=immix");
}

#[test]
fn som_programs_survive_gc_stress_under_marksweep() {
    survive_gc_stress_under("--gc=marksweep");
}

/// Every collector prints what the default prints, in the interpreter and in the optimizing
/// tier, with collections every few allocations: SemiSpace, which moves every object every
/// time (the strictest check of the roots), Immix, which moves objects only to defragment, and
/// MarkSweep, which never moves them and allocates from free lists.
fn survive_gc_stress_under(plan: &str) {
    run_all(&[plan, "--gc-stress", "400"]);
    run_all(&[plan, "--tier=opt", "--gc-stress", "400"]);
}

#[test]
fn som_programs_survive_nursery_collections_under_gencopy() {
    survive_nursery_collections_under("--gc=gencopy");
}

#[test]
fn som_programs_survive_nursery_collections_under_genimmix() {
    survive_nursery_collections_under("--gc=genimmix");
}

/// The generational plans in every tier, with a nursery collection every few allocations
/// (every 8th a full one): the interpreter's and compiled code's write barriers must keep
/// every object that only an old object refers to (`GenerationalStoreTest` loses objects
/// without them).
fn survive_nursery_collections_under(plan: &str) {
    for tier in ["--tier=interp", "--tier=baseline", "--tier=opt"] {
        run_all(&[plan, tier, "--gc-stress", "50"]);
    }
}

/// Compiled code prints what the interpreter prints: every program with every method and block
/// compiled by the baseline tier at its first call.
#[test]
fn som_programs_give_the_same_output_in_the_baseline_tier() {
    run_all(&["--tier=baseline"]);
}

/// The same with objects moving under compiled frames every few allocations.
#[test]
fn som_programs_in_the_baseline_tier_survive_gc_stress() {
    run_all(&["--tier=baseline", "--gc-stress", "400"]);
}

/// The optimizing tier (Tally's IR: values in SSA, references across calls in stack maps)
/// at every first call.
#[test]
fn som_programs_give_the_same_output_in_the_opt_tier() {
    run_all(&["--tier=opt"]);
}

/// The optimizing tier compiles every method and block of the programs: a method it cannot
/// compile stays interpreted and the output stays right, so only `--tier-log`'s lines tell
/// (the Cranelift verifier of debug builds refuses ill-typed code there).
#[test]
fn the_opt_tier_compiles_every_method_of_the_som_programs() {
    let dir = som_tests_dir();
    let mut refused = Vec::new();
    for name in test_programs() {
        let out = Command::new(env!("CARGO_BIN_EXE_tally"))
            .args(["--tier=opt", "--tier-log", "-cp"])
            .arg(&dir)
            .arg(format!("{name}.som"))
            .current_dir(&dir)
            .output()
            .expect("run tally");
        let stderr = String::from_utf8_lossy(&out.stderr);
        refused.extend(
            stderr
                .lines()
                .filter(|l| l.starts_with("[tier] opt failed for"))
                .map(|l| format!("{name}: {l}")),
        );
    }
    assert!(refused.is_empty(), "{}", refused.join("\n"));
}

/// With objects moving under the optimizing tier's native frames every few allocations, and
/// under SemiSpace, where every collection moves every object.
#[test]
fn som_programs_in_the_opt_tier_survive_gc_stress() {
    run_all(&["--tier=opt", "--gc-stress", "400"]);
    run_all(&["--tier=opt", "--gc=semispace", "--gc-stress", "50"]);
}

/// The adaptive tier, with a controller that compiles whatever it sees run (on its compiler
/// thread, while the program goes on) in the optimizing tier, speculating on what the
/// interpreter saw, prints what the interpreter prints; also with objects moving every few
/// allocations.
#[test]
fn som_programs_give_the_same_output_in_the_adaptive_tier() {
    let dir = tempfile::tempdir().expect("temp dir");
    let model = eager_opt_calibration(dir.path());
    run_all(&["--tier=adaptive", "--calibration", &model]);
    run_all(&[
        "--tier=adaptive",
        "--calibration",
        &model,
        "--gc-stress",
        "400",
    ]);
}

/// Profiling never changes what a program prints: every program under each trigger ×
/// mechanism of method sampling at a high rate.
#[test]
fn som_programs_are_unchanged_by_method_sampling() {
    let dir = tempfile::tempdir().expect("temp dir");
    let profile = format!("--profile={}", dir.path().join("run.profile").display());
    for sampler in ["timer", "timer-wall", "itimer", "perf"] {
        for mechanism in ["immediate", "polling"] {
            run_all(&[
                profile.as_str(),
                "--force",
                "--sampler",
                sampler,
                "--rate",
                "10000",
                "--mechanism",
                mechanism,
            ]);
        }
    }
}

/// … nor under counter-based sampling with exhaustive counts, at yieldpoints of compiled code
/// (polled samples at back-edges, CBS windows, drains), under the adaptive controller fed by
/// the recorded profile's samples, nor with calls and loops counted per tier.
#[test]
fn som_programs_are_unchanged_by_cbs_counting_and_the_controller() {
    let dir = tempfile::tempdir().expect("temp dir");
    let profile = format!("--profile={}", dir.path().join("run.profile").display());
    let model = eager_calibration(dir.path());
    let configs: [&[&str]; 6] = [
        &["--sampler", "none", "--cbs", "3:16", "--exhaustive"],
        &["--sampler", "perf", "--cbs", "1:1"],
        &[
            "--tier=baseline",
            "--sampler",
            "timer",
            "--rate",
            "10000",
            "--mechanism",
            "polling",
        ],
        &["--tier=baseline", "--sampler", "perf", "--cbs", "1:1"],
        &[
            "--tier=adaptive",
            "--calibration",
            &model,
            "--sampler",
            "perf",
            "--rate",
            "10000",
        ],
        &["--tier=adaptive", "--calibration", &model, "--count-calls"],
    ];
    for config in configs {
        let mut flags = vec![profile.as_str(), "--force"];
        flags.extend_from_slice(config);
        run_all(&flags);
    }
}
