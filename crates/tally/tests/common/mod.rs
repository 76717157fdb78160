//! Helpers shared by the end-to-end tests that drive the `tally` binary.
#![allow(dead_code)] // each test binary uses its own subset

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

pub fn tally() -> &'static str {
    env!("CARGO_BIN_EXE_tally")
}

pub fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Our own small benchmark suite (no SOM checkout needed).
pub fn smoke_suite() -> String {
    repo().join("bench/smoke.toml").display().to_string()
}

pub fn run(args: &[&str]) -> Output {
    Command::new(tally())
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("run tally")
}

/// Runs tally with `args` in `dir`.
pub fn run_in(dir: &Path, args: &[&str]) -> Output {
    Command::new(tally())
        .args(args)
        .current_dir(dir)
        .stdin(Stdio::null())
        .output()
        .expect("run tally")
}

/// Runs `Main.som` in `dir` (`dir` its class path) with `flags`: (stdout, stderr), after
/// checking it succeeded.
pub fn run_main(dir: &Path, flags: &[&str]) -> (String, String) {
    let out = Command::new(tally())
        .args(flags)
        .arg("-cp")
        .arg(dir)
        .arg(dir.join("Main.som"))
        .stdin(Stdio::null())
        .output()
        .expect("run tally");
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{flags:?}:\n{stderr}");
    (String::from_utf8_lossy(&out.stdout).into_owned(), stderr)
}

/// `Inl`: a small method, `step:`, called `calls` times from a loop in `run`; it prints the
/// sum of `2i + 1`.
pub fn hot_loop_program(calls: u32) -> String {
    format!(
        "Inl = (
    step: i = ( | t | t := i * 2. ^t + 1 )
    run = (
        | s |
        s := 0.
        1 to: {calls} do: [:i | s := s + (self step: i)].
        s println
    )
)
"
    )
}

pub fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

pub fn read_json(path: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).expect("json file")).expect("valid JSON")
}

/// Waits until the JSON file a long run keeps rewriting holds at least `at_least` entries in
/// its array `key`, then interrupts the run (SIGINT, as Ctrl-C does) and returns its output.
pub fn interrupt_once_measured(child: Child, json: &Path, key: &str, at_least: usize) -> Output {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let measured = std::fs::read_to_string(json)
            .ok()
            .and_then(|t| serde_json::from_str::<Value>(&t).ok())
            .map(|v| v[key].as_array().map_or(0, |a| a.len()))
            .unwrap_or(0);
        if measured >= at_least {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "fewer than {at_least} {key} measured in 30 s"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let status = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    child.wait_with_output().unwrap()
}

/// The share of `state` among the samples of `tally report`'s VM-state table, and the count.
pub fn state_share(report: &str, state: &str) -> (f64, u64) {
    let total: u64 = report
        .lines()
        .find_map(|l| l.strip_prefix("VM states: "))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .expect("a VM-state table");
    let count: u64 = report
        .lines()
        .find_map(|l| {
            let mut words = l.split_whitespace();
            let (_share, count, name) = (words.next()?, words.next()?, words.next()?);
            (name == state).then(|| count.parse().ok()).flatten()
        })
        .expect("a row for the state");
    (count as f64 / total.max(1) as f64, total)
}

/// Runs `program` in `dir` under the adaptive tier with the `late_opt_calibration` model,
/// `--tier-log` and `--profile=PROFILE`, plus `extra`; asserts it succeeded and answers its
/// (stdout, stderr).
pub fn run_adaptive_profiled(
    dir: &Path,
    profile: &str,
    extra: &[&str],
    program: &str,
) -> (String, String) {
    let model = late_opt_calibration(dir);
    let profile = format!("--profile={profile}");
    let mut args = vec![
        "--tier=adaptive",
        "--calibration",
        &model,
        "--tier-log",
        &profile,
    ];
    args.extend_from_slice(extra);
    args.push(program);
    let out = run_in(dir, &args);
    let err = text(&out.stderr);
    assert!(out.status.success(), "{args:?}: {err}");
    (text(&out.stdout), err)
}

/// A cost model that makes the adaptive controller compile every method it sees a sample of
/// (no compile cost, a huge speedup, the same for both tiers: the baseline wins the tie),
/// written into `dir`; answers its path.
pub fn eager_calibration(dir: &Path) -> String {
    eager_model(dir, "eager.toml", 1000.0)
}

/// `eager_calibration` with the optimizing tier twice the baseline's speedup, so the
/// controller sends every method it sees straight to the optimizing tier (speculation,
/// deoptimization).
pub fn eager_opt_calibration(dir: &Path) -> String {
    eager_model(dir, "eager-opt.toml", 2000.0)
}

/// A cost model that moves every sampled method to the baseline tier at once and on to the
/// optimizing tier only after it has run a few milliseconds there: long enough for its
/// baseline code to have counted the receivers of its sends (value profiles).
pub fn late_opt_calibration(dir: &Path) -> String {
    let path = dir.join("late-opt.toml");
    std::fs::write(
        &path,
        "[baseline]\nspeedup = 1000.0\ncompile_fixed_ns = 0.0\ncompile_per_bytecode_ns = 0.0\n\n\
         [optimizing]\nspeedup = 2000.0\ncompile_fixed_ns = 3000000.0\n\
         compile_per_bytecode_ns = 0.0\n",
    )
    .expect("write the cost model");
    path.display().to_string()
}

fn eager_model(dir: &Path, name: &str, optimizing_speedup: f64) -> String {
    let path = dir.join(name);
    std::fs::write(
        &path,
        format!(
            "[baseline]\nspeedup = 1000.0\ncompile_fixed_ns = 0.0\ncompile_per_bytecode_ns = 0.0\n\n\
             [optimizing]\nspeedup = {optimizing_speedup:.1}\ncompile_fixed_ns = 0.0\n\
             compile_per_bytecode_ns = 0.0\n"
        ),
    )
    .expect("write the cost model");
    path.display().to_string()
}
