//! The tiers against each other: generated SOM programs (the differential fuzzer's short run)
//! and hand-written ones run interpreted and in every compiled tier must behave the same;
//! errors, stack traces, perf maps, jitdumps and samples of compiled code.

use std::process::Command;
use std::time::Duration;

use tally_tierfuzz::{fuzz, Settings};

mod common;
use common::{eager_opt_calibration, run_in, run_main, state_share};

/// Method samples at a high rate and nothing else. CBS windows send every call of compiled
/// code through the stubs (they must count each one), which is native code; without them the
/// time is the compiled code's.
const METHOD_SAMPLES_ONLY: [&str; 6] = ["--cbs", "off", "--sampler", "perf", "--rate", "5000"];

fn run(dir: &std::path::Path, flags: &[&str]) -> (String, String, Option<i32>) {
    let out = Command::new(env!("CARGO_BIN_EXE_tally"))
        .args(flags)
        .arg(dir.join("Gen.som"))
        .output()
        .expect("run tally");
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
        out.status.code(),
    )
}

/// Programs to run in the short fuzzing run below: seeds 0 to 15, which give each of the
/// configurations that run one program in eight (`Tally::extra_configs`) two programs.
const FUZZ_PROGRAMS: u64 = 16;

/// The differential fuzzer's short run (`crates/tally-tierfuzz`): programs generated from
/// fixed seeds (classes and subclasses whose sends turn polymorphic and megamorphic, blocks
/// kept, passed and escaping, non-local returns, doubles with their special values, integers
/// overflowing into big integers, strings, symbols, arrays, recursion, SOM errors) must print,
/// fail and exit in every compiled tier, collector and stress setting as they do in the
/// interpreter, and compile without a failure. A divergence is shrunk and saved, with the
/// command that shows it, under `target/tmp/tierfuzz`.
#[test]
fn generated_programs_behave_alike_in_every_tier() {
    let out = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("tierfuzz");
    let settings = Settings {
        tally: env!("CARGO_BIN_EXE_tally").into(),
        first_seed: 0,
        programs: Some(FUZZ_PROGRAMS),
        time: None,
        out: Some(out),
        shrink_time: Duration::from_secs(180),
        only: Vec::new(),
        max_divergences: 1,
    };
    let summary = fuzz(&settings, &mut |_| {}).expect("run the fuzzer");
    if let Some(d) = summary.divergences.first() {
        panic!(
            "seed {} diverges in {} ({}): {}\nsaved in {:?}; shrunk program:\n{}",
            d.seed,
            d.config.name,
            d.config.flags.join(" "),
            d.detail,
            d.saved_to,
            d.program.listing()
        );
    }
    assert_eq!(summary.progress.programs, FUZZ_PROGRAMS);
    // The programs reach what the fuzzer is for: the optimizing tier speculated on them,
    // and deoptimized.
    let (compiles, deopts) = summary.progress.compiled["opt"];
    assert!(
        compiles >= 200 && deopts >= 20,
        "{compiles} compiles, {deopts} deopts"
    );
}

/// An operation whose result is unused still raises its error in every tier: the optimizing
/// tier removes unused arithmetic, but not a division, a shift or an element read whose
/// general path reports a zero divisor, a shift too big or an index out of bounds.
#[test]
fn an_unused_operation_that_fails_raises_its_error_in_every_tier() {
    let dir = tempfile::tempdir().expect("temp dir");
    for (expr, error) in [
        ("10 / 0", "Division by zero."),
        ("7 % 0", "Division by zero."),
        ("1 << (1 << 200)", "Shift too big."),
        ("1 >>> -1", "Negative shift."),
        ("(Array new: 2) at: 3", "not valid for array"),
    ] {
        std::fs::write(
            dir.path().join("Gen.som"),
            format!("Gen = ( run = ( 'before' println. {expr}. 'after' println ) )\n"),
        )
        .unwrap();
        for tier in ["--tier=interp", "--tier=baseline", "--tier=opt"] {
            let (out, err, status) = run(dir.path(), &[tier]);
            assert_eq!(out, "before\n", "{tier} {expr}: {err}");
            assert!(err.contains(error), "{tier} {expr}: {err}");
            assert_ne!(status, Some(0), "{tier} {expr}");
        }
    }
}

/// The optimizing compiler's quick level prints what the interpreter prints, compiling every
/// method at its first call under `--tier=quick`; and the adaptive controller, given it as a
/// choice, sends a hot method there first and on to the full level once the method's time
/// there pays for that compile (a recompile from one level to the other).
#[test]
fn the_quick_level_runs_programs_and_methods_move_on_from_it() {
    let dir = tempfile::tempdir().expect("temp dir");
    std::fs::write(
        dir.path().join("Gen.som"),
        "Gen = (\n  fib: n = ( n < 2 ifTrue: [^n]. ^(self fib: n - 1) + (self fib: n - 2) )\n  \
         run = ( | sum | sum := 0. 1 to: 300 do: [:i | sum := sum + (self fib: 20)]. sum println ) )\n",
    )
    .unwrap();
    let expected = "2029500\n";
    let (out, err, code) = run(dir.path(), &["--tier=quick", "--tier-log"]);
    assert_eq!((out.as_str(), code), (expected, Some(0)), "{err}");
    assert!(err.contains("[tier] quick Gen>>fib: ("), "{err}");
    assert!(!err.contains("[tier] opt "), "{err}");

    let model = dir.path().join("levels.toml");
    std::fs::write(
        &model,
        "[baseline]\nspeedup = 1000.0\ncompile_fixed_ns = 0.0\ncompile_per_bytecode_ns = 0.0\n\n\
         [quick]\nspeedup = 1500.0\ncompile_fixed_ns = 0.0\ncompile_per_bytecode_ns = 0.0\n\n\
         [optimizing]\nspeedup = 3000.0\ncompile_fixed_ns = 3000000.0\ncompile_per_bytecode_ns = 0.0\n",
    )
    .unwrap();
    let mut flags = vec![
        "--tier=adaptive",
        "--tier-log",
        "--adaptive-tiers",
        "baseline,quick,opt",
        "--calibration",
        model.to_str().unwrap(),
    ];
    flags.extend(METHOD_SAMPLES_ONLY);
    let (out, err, code) = run(dir.path(), &flags);
    assert_eq!((out.as_str(), code), (expected, Some(0)), "{err}");
    assert!(
        err.contains("[tier] decide Gen>>fib: interpreter -> quick"),
        "{err}"
    );
    // Decided from samples alone; the compile may finish after the program has.
    assert!(
        err.contains("[tier] decide Gen>>fib: quick -> optimizing"),
        "{err}"
    );

    // Without `quick` among the choices the controller never compiles there.
    flags[3] = "baseline,opt";
    let (out, err, _) = run(dir.path(), &flags);
    assert_eq!(out, expected);
    assert!(!err.contains("-> quick"), "{err}");
    let (_, err, code) = run(dir.path(), &["--tier=opt", "--adaptive-tiers", "quick"]);
    assert_eq!(code, Some(2));
    assert!(err.contains("need --tier=adaptive"), "{err}");
}

/// A method longer than the optimizing tier compiles (`MAX_OPTIMIZED_BYTECODES`) stays
/// where it is, with the reason in the tier log, and runs as the interpreter runs it.
#[test]
fn a_method_beyond_the_optimizing_bound_stays_where_it_is() {
    let dir = tempfile::tempdir().expect("temp dir");
    let body: String = (0..900).map(|_| "x := x + 1. ").collect();
    std::fs::write(
        dir.path().join("Gen.som"),
        format!("Gen = (\n  run = ( | x | x := 0. {body}x println ) )\n"),
    )
    .unwrap();
    for tier in ["--tier=opt", "--tier=quick"] {
        let (out, err, code) = run(dir.path(), &[tier, "--tier-log"]);
        assert_eq!((out.as_str(), code), ("900\n", Some(0)), "{err}");
        assert!(
            err.contains("failed for Gen>>run, stays where it was: ")
                && err.contains("beyond the 2500 the optimizing tier compiles"),
            "{err}"
        );
    }
}

/// Runs `Fib.som` (written into `dir`; `fib:` on lines 3 and 4) in the baseline tier with
/// `flag`, checks its output and answers the process id (which names perf's files).
fn run_fib(dir: &std::path::Path, flag: &str) -> u32 {
    run_fib_in(dir, "--tier=baseline", flag)
}

/// [`run_fib`] in `tier`.
fn run_fib_in(dir: &std::path::Path, tier: &str, flag: &str) -> u32 {
    std::fs::write(
        dir.join("Fib.som"),
        "Fib = (\n  fib: n = (\n    n < 2 ifTrue: [^n].\n    ^(self fib: n - 1) + (self fib: n - 2) )\n  run = ( (self fib: 15) println ) )\n",
    )
    .unwrap();
    let child = Command::new(env!("CARGO_BIN_EXE_tally"))
        .args([tier, flag])
        .arg(dir.join("Fib.som"))
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("run tally");
    let pid = child.id();
    let out = child.wait_with_output().expect("wait");
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "610");
    pid
}

/// `--perf-map` writes `/tmp/perf-PID.map` in perf's format: one `START SIZE NAME` line per
/// compiled function, hexadecimal, the name carrying the tier, ranges disjoint; the
/// optimizing tier's shared functions (send probes, shared adapters) are named too.
#[test]
fn the_perf_map_names_every_compiled_function() {
    for (tier, name) in [("--tier=baseline", "baseline"), ("--tier=opt", "opt")] {
        let dir = tempfile::tempdir().expect("temp dir");
        let pid = run_fib_in(dir.path(), tier, "--perf-map");
        let map_path = format!("/tmp/perf-{pid}.map");
        let map = std::fs::read_to_string(&map_path).expect("the perf map was written");
        std::fs::remove_file(&map_path).ok();
        let suffix = format!(" [{name}]");
        let mut ranges = Vec::new();
        for line in map.lines() {
            let mut parts = line.splitn(3, ' ');
            let start = u64::from_str_radix(parts.next().unwrap(), 16).expect("hex start");
            let size = u64::from_str_radix(parts.next().unwrap(), 16).expect("hex size");
            let name = parts.next().expect("a name");
            assert!(size > 0, "{line}");
            assert!(name.ends_with(&suffix), "{line}");
            ranges.push((start, start + size, name.to_string()));
        }
        for wanted in ["Fib>>fib:", "Fib>>run"] {
            let wanted = format!("{wanted}{suffix}");
            assert!(ranges.iter().any(|(_, _, n)| *n == wanted), "{map}");
        }
        if name == "opt" {
            for shared in ["probe:send1", "probe:send1k", "adapter:method0"] {
                let shared = format!("{shared}{suffix}");
                assert!(ranges.iter().any(|(_, _, n)| *n == shared), "{map}");
            }
        }
        ranges.sort();
        for pair in ranges.windows(2) {
            assert!(pair[0].1 <= pair[1].0, "overlapping: {pair:?}");
        }
    }
}

/// Samples resolve to the right place in compiled code: a loop whose body is one line puts at
/// least 90 % of the method's samples on its two lines (the body; the head, whose bytecodes
/// compare and count `i` every iteration) and most of them on the body, interpreted and
/// compiled alike (compiled code maps the interrupted pc through its code version's pc map
/// to a bytecode index). The rest is the method's entry: its compile, at the first call under
/// `--tier=baseline`, and the print.
#[test]
fn a_hot_loop_body_gets_its_samples_in_every_tier() {
    let dir = tempfile::tempdir().expect("temp dir");
    std::fs::write(
        dir.path().join("Loop.som"),
        "Loop = (\n    run = (\n        | s |\n        s := 0.\n        1 to: 3000000 do: [:i |\n            s := s + (i * 3) - (i as32BitSignedValue // 7) ].\n        s println\n    )\n)\n",
    )
    .unwrap();
    for tier in ["--tier=interp", "--tier=baseline", "--tier=opt"] {
        let profile = dir.path().join("loop.profile");
        let profile_flag = format!("--profile={}", profile.display());
        let out = Command::new(env!("CARGO_BIN_EXE_tally"))
            .args([tier, profile_flag.as_str(), "--force"])
            .args(METHOD_SAMPLES_ONLY)
            .arg(dir.path().join("Loop.som"))
            .output()
            .expect("run tally");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let listing = Command::new(env!("CARGO_BIN_EXE_tally"))
            .args(["report", "--lines", "Loop>>run"])
            .arg(&profile)
            .output()
            .expect("run tally report");
        let text = String::from_utf8_lossy(&listing.stdout).into_owned();
        // Rows: self, total, line number, source.
        let mut selves = std::collections::HashMap::new();
        for row in text.lines().skip(2) {
            let words: Vec<&str> = row.split_whitespace().collect();
            if let [s, _, line, ..] = words[..] {
                if let (Ok(line), Ok(n)) = (line.parse::<u32>(), s.parse::<u64>()) {
                    selves.insert(line, n);
                }
            }
        }
        let all: u64 = selves.values().sum();
        let body = selves.get(&6).copied().unwrap_or(0);
        let head = selves.get(&5).copied().unwrap_or(0);
        assert!(all >= 30, "{tier}: too few samples to judge:\n{text}");
        assert!(
            (body + head) as f64 >= 0.9 * all as f64 && body as f64 >= 0.6 * all as f64,
            "{tier}: {body} on the loop body and {head} on its head of {all} samples:\n{text}"
        );
    }
}

/// `--jitdump=DIR` writes perf's jitdump format: the header, then for each compiled function
/// a debug-info record (machine address → source line) before its code-load record (name with
/// the tier, the machine code itself).
#[test]
fn the_jitdump_holds_every_compiled_function_with_its_lines() {
    let dir = tempfile::tempdir().expect("temp dir");
    let jitdump = format!("--jitdump={}", dir.path().display());
    let pid = run_fib(dir.path(), &jitdump);
    let path = dir.path().join(format!("jit-{pid}.dump"));
    let bytes = std::fs::read(&path).expect("the dump was written");
    let u32_at = |at: usize| u32::from_ne_bytes(bytes[at..at + 4].try_into().unwrap());
    let u64_at = |at: usize| u64::from_ne_bytes(bytes[at..at + 8].try_into().unwrap());
    let c_str = |at: usize| {
        let end = at
            + bytes[at..]
                .iter()
                .position(|&b| b == 0)
                .expect("a terminated name");
        (
            String::from_utf8_lossy(&bytes[at..end]).into_owned(),
            end + 1,
        )
    };
    assert_eq!(u32_at(0), 0x4A69_5444, "magic");
    assert_eq!(u32_at(4), 1, "version");
    let mut at = u32_at(8) as usize;
    let mut loads = Vec::new();
    let mut lines_for: Option<Vec<(u64, u32, String)>> = None;
    while at < bytes.len() {
        let (id, size) = (u32_at(at), u32_at(at + 4) as usize);
        let body = at + 16;
        match id {
            2 => {
                let n = u64_at(body + 8) as usize;
                let mut entries = Vec::new();
                let mut e = body + 16;
                for _ in 0..n {
                    let (file, next) = c_str(e + 16);
                    entries.push((u64_at(e), u32_at(e + 8), file));
                    e = next;
                }
                assert_eq!(e, at + size, "a debug-info record's size");
                lines_for = Some(entries);
            }
            0 => {
                let (address, code_size) = (u64_at(body + 16), u64_at(body + 24));
                let (name, code) = c_str(body + 40);
                assert_eq!(
                    code + code_size as usize,
                    at + size,
                    "{name}: the code follows"
                );
                let lines = lines_for.take().unwrap_or_default();
                for (a, _, _) in &lines {
                    assert!((address..address + code_size).contains(a), "{name}");
                }
                loads.push((name, code_size, lines));
            }
            other => panic!("unexpected record {other}"),
        }
        at += size;
    }
    let (_, size, lines) = loads
        .iter()
        .find(|(n, _, _)| n == "Fib>>fib: [baseline]")
        .expect("fib: was compiled");
    assert!(*size > 0);
    assert!(
        lines.iter().all(|(_, _, f)| f.ends_with("Fib.som")),
        "{lines:?}"
    );
    let lines: std::collections::BTreeSet<u32> = lines.iter().map(|(_, l, _)| *l).collect();
    assert_eq!(lines, [3, 4].into(), "fib:'s code comes from lines 3 and 4");
}

/// Samples interrupted in compiled code count as compiled code, not as native code the
/// interpreter called: the compiled functions' ranges are registered with the profiler.
#[test]
fn immediate_samples_in_compiled_code_count_as_compiled() {
    let d = tempfile::tempdir().unwrap();
    std::fs::write(
        d.path().join("Fib.som"),
        "Fib = (
            run = ( 1 to: 3 do: [:i | (self fib: 31) println ] )
            fib: n = ( n < 2 ifTrue: [ ^n ]. ^(self fib: n - 1) + (self fib: n - 2) )
        )",
    )
    .unwrap();
    let mut args = vec!["--tier=baseline", "--profile=p.profile"];
    args.extend(METHOD_SAMPLES_ONLY);
    args.push("Fib.som");
    let o = run_in(d.path(), &args);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let r = run_in(d.path(), &["report", "p.profile"]);
    let report = String::from_utf8_lossy(&r.stdout).into_owned();
    let (compiled, samples) = state_share(&report, "compiled");
    // Compiling is a state of its own (the template compiler's compiles take microseconds:
    // often no sample lands on one).
    let (compiling, _) = state_share(&report, "compiling");
    assert!(samples >= 10, "too few samples to judge: {report}");
    assert!(compiled / (1.0 - compiling) > 0.8, "{report}");
}

/// With no `--tier`, programs run under the adaptive controller; `--exhaustive`, and a profile
/// that takes no method samples (the controller's food), run interpreted instead.
#[test]
fn the_default_tier_is_adaptive_unless_the_run_cannot_feed_it() {
    let dir = tempfile::tempdir().expect("temp dir");
    run_fib(dir.path(), "--tier-log");
    let logged = |args: &[&str]| {
        let out = run_in(dir.path(), args);
        assert!(out.status.success(), "{args:?}");
        assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "610");
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    let adaptive = logged(&["--tier-log", "Fib.som"]);
    assert!(adaptive.contains("[tier] cost model:"), "{adaptive}");
    for interpreted in [
        &["--exhaustive", "--profile=x.profile", "Fib.som"][..],
        &[
            "--sampler=none",
            "--cbs=3:32",
            "--profile=y.profile",
            "Fib.som",
        ],
    ] {
        let err = logged(interpreted);
        assert!(!err.contains("[tier]"), "{interpreted:?}: {err}");
        // A flag about compiled code is refused there: the run is interpreted.
        let mut with_log = vec!["--tier-log", "--force"];
        with_log.extend_from_slice(interpreted);
        let refused = run_in(dir.path(), &with_log);
        assert_eq!(refused.status.code(), Some(2), "{with_log:?}");
        let err = String::from_utf8_lossy(&refused.stderr);
        assert!(
            err.contains("needs a compiling tier"),
            "{with_log:?}: {err}"
        );
    }
    // Named, the adaptive tier refuses a profile without samples instead.
    let refused = run_in(
        dir.path(),
        &[
            "--tier=adaptive",
            "--sampler=none",
            "--profile=z.profile",
            "Fib.som",
        ],
    );
    assert_ne!(refused.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&refused.stderr).contains("driven by method samples"));
}

/// `--print-code=PATTERN` prints the compiled code of the methods it names, and only those, as
/// they are compiled; flags about compiled code are refused in the interpreter tier.
#[test]
fn print_code_shows_the_methods_it_names() {
    let dir = tempfile::tempdir().expect("temp dir");
    run_fib(dir.path(), "--tier-log");
    let out = run_in(
        dir.path(),
        &["--tier=baseline", "--print-code=Fib>>fib", "Fib.som"],
    );
    assert!(out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.matches("=== ").count(), 1, "{err}");
    assert!(err.contains("=== Fib>>fib: [baseline]"), "{err}");
    assert!(err.contains("--- baseline: machine code"), "{err}");
    for flag in ["--print-code=Fib", "--no-speculation", "--no-osr"] {
        let refused = run_in(dir.path(), &["--tier=interp", flag, "Fib.som"]);
        assert_eq!(refused.status.code(), Some(2), "{flag}");
        let err = String::from_utf8_lossy(&refused.stderr);
        assert!(err.contains("needs a compiling tier"), "{flag}: {err}");
    }
}

/// Runs `Loop>>count` (one long loop whose body compiled code does inline, entered once, and
/// no call after it: an activation that returns from a call may resume in compiled code) under
/// `--tier=adaptive` with method samples and `flags`; answers its `--tier-log`, its report
/// and its samples per tier (interpreter, baseline, quick, optimizing) from the report's tier table.
fn run_hot_loop(flags: &[&str]) -> (String, String, [u64; 4]) {
    let dir = tempfile::tempdir().expect("temp dir");
    std::fs::write(
        dir.path().join("Loop.som"),
        "Loop = (\n    run = ( self count println )\n    count = (\n        | s |\n        s := 0.\n        1 to: 20000000 do: [:i |\n            s := s + (i * 3) - (i - 7) ].\n        ^s\n    )\n)\n",
    )
    .unwrap();
    let profile = dir.path().join("loop.profile");
    let out = Command::new(env!("CARGO_BIN_EXE_tally"))
        .args(["--tier=adaptive", "--tier-log", "--force"])
        .args(flags)
        .arg(format!("--profile={}", profile.display()))
        .args(METHOD_SAMPLES_ONLY)
        .arg(dir.path().join("Loop.som"))
        .output()
        .expect("run tally");
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{stderr}");
    assert_eq!(String::from_utf8_lossy(&out.stdout), "400000160000000\n");
    let report = Command::new(env!("CARGO_BIN_EXE_tally"))
        .arg("report")
        .arg(&profile)
        .output()
        .expect("run tally report");
    let text = String::from_utf8_lossy(&report.stdout).into_owned();
    let row = text
        .lines()
        .find(|l| l.ends_with("Loop>>count (1 version)"))
        .unwrap_or_else(|| panic!("no tier row for Loop>>count:\n{text}"));
    // Interpreter, baseline, quick, optimizing.
    let mut counts = [0u64; 4];
    for (slot, word) in counts.iter_mut().zip(row.split_whitespace()) {
        *slot = word.parse().unwrap();
    }
    assert!(
        text.contains("Loop>>count interpreter -> "),
        "the decision is in the report:\n{text}"
    );
    (stderr, text, counts)
}

/// Under `--tier=adaptive` a method that runs long enough is compiled by the controller's
/// decision, and a loop that was started interpreted moves into the compiled code at a
/// back-edge (`Loop>>count` is called once, so only on-stack replacement can get its samples
/// into compiled code). The decision and the compile are in the log and the report. The
/// body is what the compiled tiers do inline (a division would call a stub, whose samples
/// count as native code).
#[test]
fn the_adaptive_tier_compiles_a_hot_method_and_moves_its_running_loop() {
    let (stderr, report, counts) = run_hot_loop(&[]);
    // The built-in cost model picks the tier; either compiled tier proves the move.
    let to = ["baseline", "optimizing"]
        .into_iter()
        .find(|t| {
            stderr.contains(&format!(
                "[tier] decide Loop>>count interpreter -> {t}: ran "
            ))
        })
        .unwrap_or_else(|| panic!("no decision for Loop>>count:\n{stderr}"));
    let (log_name, column) = if to == "baseline" {
        ("baseline", 1)
    } else {
        ("opt", 3)
    };
    assert!(
        stderr.contains(&format!("[tier] {log_name} Loop>>count (")),
        "{stderr}"
    );
    // `count` is entered once: samples of it in compiled code are samples after the move.
    assert!(
        counts[column] >= 10,
        "the running loop moved into compiled code: {counts:?}"
    );
    assert!(
        report.contains(&format!("Loop>>count interpreter -> {to}: ran")),
        "the decision is in the report:\n{report}"
    );
}

/// `--no-osr`: the same hot loop, started interpreted, stays interpreted after its method is
/// compiled (it makes no call to return from), and prints the same.
#[test]
fn without_on_stack_replacement_a_running_loop_stays_interpreted() {
    let (stderr, _, counts) = run_hot_loop(&["--no-osr"]);
    assert!(
        stderr.contains("[tier] decide Loop>>count interpreter -> "),
        "{stderr}"
    );
    assert!(counts[0] >= 10, "the loop ran interpreted: {counts:?}");
    assert_eq!(
        counts[1] + counts[2] + counts[3],
        0,
        "nothing of the running loop moved into compiled code: {counts:?}"
    );
}

#[test]
fn adaptive_options_that_cannot_work_are_refused() {
    let dir = tempfile::tempdir().expect("temp dir");
    std::fs::write(
        dir.path().join("Hello.som"),
        "Hello = ( run = ( 'hi' println ) )\n",
    )
    .unwrap();
    let bad = dir.path().join("bad.toml");
    std::fs::write(&bad, "[baseline]\nspeedup = -1.0\n").unwrap();
    let run = |flags: &[&str]| {
        let out = Command::new(env!("CARGO_BIN_EXE_tally"))
            .args(flags)
            .arg(dir.path().join("Hello.som"))
            .current_dir(dir.path())
            .output()
            .expect("run tally");
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let bad_flag = format!("--calibration={}", bad.display());
    let (status, err) = run(&["--tier=adaptive", &bad_flag]);
    assert_eq!(status, Some(2), "{err}");
    assert!(err.contains("bad.toml"), "{err}");
    let (status, err) = run(&["--tier=baseline", &bad_flag]);
    assert_eq!(status, Some(2), "{err}");
    assert!(err.contains("needs --tier=adaptive"), "{err}");
    let (status, err) = run(&[
        "--tier=adaptive",
        "--profile=p.profile",
        "--sampler=none",
        "--cbs=3:16",
    ]);
    assert_eq!(status, Some(1), "{err}");
    assert!(err.contains("driven by method samples"), "{err}");
}

/// The optimizing tiers speculate that arithmetic sites that never saw anything else keep
/// seeing small integers with small-integer results. A sum that overflows into a big
/// integer inside a loop and a double that enters an integer loop both fail that guard:
/// the frame goes back to the interpreter at the send, which gives its answer, and the
/// method is recompiled without the speculation at that site.
#[test]
fn failing_small_integer_guards_deoptimize_and_keep_the_interpreters_answers() {
    let dir = tempfile::tempdir().expect("temp dir");
    std::fs::write(
        dir.path().join("Main.som"),
        "Main = (\n\
         \x20   sum = ( | sum | sum := 0.\n\
         \x20       1 to: 100 do: [:i | sum := sum + (i * 1000000000000000)]. ^sum )\n\
         \x20   power = ( | p | p := 1. 1 to: 70 do: [:i | p := p * 3]. ^p )\n\
         \x20   mixed = ( | x | x := 0.\n\
         \x20       1 to: 10 do: [:i | x := x + (i = 5 ifTrue: [0.5] ifFalse: [1])]. ^x )\n\
         \x20   run = ( self sum println. self power println. self mixed println )\n\
         )\n",
    )
    .unwrap();
    let (want, _) = run_main(dir.path(), &["--tier=interp"]);
    assert_eq!(
        want,
        "5050000000000000000\n2503155504993241601315571986085849\n9.5\n"
    );
    let tier = "--tier=opt";
    let (got, log) = run_main(dir.path(), &[tier, "--tier-log"]);
    assert_eq!(got, want, "{tier}: {log}");
    assert!(
        log.contains("[tier] deopt Main>>sum @") && log.contains("(#+): small-integer overflow"),
        "{tier}: {log}"
    );
    assert!(
        log.contains("(#*): small-integer overflow"),
        "{tier}: {log}"
    );
    assert!(
        log.contains("(#+): small-integer guard failed"),
        "{tier}: {log}"
    );
    let (got, log) = run_main(dir.path(), &[tier, "--gc-stress", "20", "--tier-log"]);
    assert_eq!(got, want, "{tier}: {log}");
    let (got, log) = run_main(dir.path(), &[tier, "--no-speculation", "--tier-log"]);
    assert_eq!(got, want, "{tier}: {log}");
    assert!(
        !log.contains("deopt") && !log.contains("speculating"),
        "{tier}: {log}"
    );
}

/// In the optimizing tier a guard that fails inside a long loop sends the frame to the
/// interpreter; the method's next version gets an entry at each loop head because that
/// frame is still running, and the frame's next back-edge moves the loop into it (with
/// its locals, and the operand stack below the loop). `--no-osr` leaves such entries out.
#[test]
fn after_a_deopt_the_running_loop_enters_the_next_version_at_its_head() {
    let dir = tempfile::tempdir().expect("temp dir");
    std::fs::write(
        dir.path().join("Main.som"),
        "Main = (\n\
         \x20   sum = ( | sum | sum := 0.\n\
         \x20       ^Array with: 3 with: (1 to: 100000 do: [:i |\n\
         \x20           i = 50000 ifTrue: [sum := sum + 0.5].\n\
         \x20           sum := sum + i]) with: sum )\n\
         \x20   run = ( | r | r := self sum. (r at: 1) println. (r at: 3) println )\n\
         )\n",
    )
    .unwrap();
    let (want, _) = run_main(dir.path(), &["--tier=interp"]);
    assert_eq!(want, "3\n5000050000.5\n");
    let (got, log) = run_main(dir.path(), &["--tier=opt", "--tier-log"]);
    assert_eq!(got, want, "{log}");
    assert!(log.contains("[tier] deopt Main>>sum @"), "{log}");
    assert!(
        log.lines()
            .any(|l| l.starts_with("[tier] opt Main>>sum (") && l.contains("entered at loop head")),
        "{log}"
    );
    let (got, log) = run_main(
        dir.path(),
        &["--tier=opt", "--gc-stress", "1", "--tier-log"],
    );
    assert_eq!(got, want, "{log}");
    let (got, log) = run_main(dir.path(), &["--tier=opt", "--no-osr", "--tier-log"]);
    assert_eq!(got, want, "{log}");
    assert!(!log.contains("entered at loop head"), "{log}");
}

/// A guard that fails in the second of two loops sends the frame to the interpreter, whose
/// frame then holds nil in the slots the exit's state did not hold (the first loop's
/// counter, dead from there on). The next version's entry at the second loop's head does
/// not read those slots: the loop moves into it once and stays there, rather than failing
/// the entry's check and going back to the interpreter on every iteration.
#[test]
fn a_loop_entered_after_a_deopt_ignores_the_slots_dead_at_its_head() {
    let dir = tempfile::tempdir().expect("temp dir");
    std::fs::write(
        dir.path().join("Main.som"),
        "Main = (\n\
         \x20   run = ( | r x | r := 0.\n\
         \x20       1 to: 40 do: [ :i | r := r + i ].\n\
         \x20       1 to: 3000 do: [ :k |\n\
         \x20           x := k = 100 ifTrue: [ 100000000000000000000 ] ifFalse: [ 3 ].\n\
         \x20           x < 0 ifTrue: [ r := r - 1 ].\n\
         \x20           r := r + 1 ].\n\
         \x20       r println )\n\
         )\n",
    )
    .unwrap();
    let (want, _) = run_main(dir.path(), &["--tier=interp"]);
    assert_eq!(want, "3820\n");
    let (got, log) = run_main(dir.path(), &["--tier=opt", "--tier-log"]);
    assert_eq!(got, want, "{log}");
    assert!(log.contains("[tier] deopt Main>>run @"), "{log}");
    assert!(
        log.lines()
            .any(|l| l.starts_with("[tier] opt Main>>run (") && l.contains("entered at loop head")),
        "{log}"
    );
    let deopts = log
        .lines()
        .filter(|l| l.starts_with("[tier] deopt"))
        .count();
    assert_eq!(deopts, 1, "{log}");
    let (got, log) = run_main(dir.path(), &["--tier=opt", "--gc-stress", "1"]);
    assert_eq!(got, want, "{log}");
}

/// A Main whose `sum:and:times:` adds the areas of two shapes `n` times through one send
/// site (`area:`'s `shape area`), with `run` as given.
fn sum_of_areas(run: &str) -> String {
    format!(
        "Main = (\n\
         \x20   area: shape = ( ^shape area )\n\
         \x20   sum: a and: b times: n = (\n\
         \x20       | total |\n\
         \x20       total := 0.\n\
         \x20       1 to: n do: [:i | total := total + (self area: a) + (self area: b)].\n\
         \x20       ^total\n\
         \x20   )\n\
         \x20   run = ( {run} )\n\
         )\n"
    )
}

/// Square and Circle, two classes that answer `area` (for the receiver-class tests).
fn write_shapes(dir: &std::path::Path) {
    std::fs::write(
        dir.join("Square.som"),
        "Square = ( | side | side: s = ( side := s ) area = ( ^side * side ) )\n",
    )
    .unwrap();
    std::fs::write(
        dir.join("Circle.som"),
        "Circle = ( | r | r: x = ( r := x ) area = ( ^r * r * 3 ) )\n",
    )
    .unwrap();
}

/// Under the adaptive tier a method compiled while its send has seen one receiver class
/// guards on that class. The loop then meets an instance of a class loaded after the
/// compile: the guard fails, the frame continues in the interpreter, the version is
/// invalidated, and the output is the interpreter's. The profile's report lists the deopt.
#[test]
fn a_receiver_of_a_class_loaded_after_the_compile_deoptimizes() {
    let dir = tempfile::tempdir().expect("temp dir");
    let model = eager_opt_calibration(dir.path());
    std::fs::write(
        dir.path().join("Main.som"),
        "Main = (\n\
         \x20   area: shape = ( ^shape area )\n\
         \x20   sum: shape times: n = (\n\
         \x20       | total |\n\
         \x20       total := 0.\n\
         \x20       1 to: n do: [:i | total := total + (self area: shape)].\n\
         \x20       ^total\n\
         \x20   )\n\
         \x20   run = (\n\
         \x20       (self sum: (Square new side: 3) times: 3000000) println.\n\
         \x20       (self sum: (Circle new r: 2) times: 1000) println\n\
         \x20   )\n\
         )\n",
    )
    .unwrap();
    write_shapes(dir.path());
    let (want, _) = run_main(dir.path(), &["--tier=interp"]);
    assert_eq!(want, "27000000\n12000\n");
    let profile = dir.path().join("run.profile");
    let profile_flag = format!("--profile={}", profile.display());
    let (got, log) = run_main(
        dir.path(),
        &[
            "--tier=adaptive",
            "--calibration",
            &model,
            "--tier-log",
            &profile_flag,
        ],
    );
    assert_eq!(got, want, "{log}");
    // `area:` fails its guard compiled on its own or inlined into `sum:times:`.
    assert!(
        log.lines()
            .any(|l| l.starts_with("[tier] deopt Main>>area: @0 (#area)")
                && l.contains("receiver class guard failed")),
        "{log}"
    );
    let report = Command::new(env!("CARGO_BIN_EXE_tally"))
        .args(["report", "--top", "0"])
        .arg(&profile)
        .output()
        .expect("run tally report");
    let text = String::from_utf8_lossy(&report.stdout);
    assert!(
        text.contains("Main>>area: @0: receiver class guard failed")
            && text.contains("invalidated, runs in"),
        "{text}"
    );
}

/// A send whose cache holds two receiver classes is guarded on both, each target called
/// directly; a third class takes the send stub instead of deoptimizing (a full cache may have
/// lost classes before), so the version stays and the output is the interpreter's.
#[test]
fn a_bimorphic_site_guards_both_classes_and_sends_the_rest() {
    let dir = tempfile::tempdir().expect("temp dir");
    let model = eager_opt_calibration(dir.path());
    std::fs::write(
        dir.path().join("Main.som"),
        sum_of_areas(
            "(self sum: (Square new side: 3) and: (Circle new r: 2) times: 1500000) println.\n\
             (self sum: (Triangle new b: 4 h: 5) and: (Square new side: 1) times: 1000) println",
        ),
    )
    .unwrap();
    write_shapes(dir.path());
    std::fs::write(
        dir.path().join("Triangle.som"),
        "Triangle = ( | b h | b: x h: y = ( b := x. h := y ) area = ( ^b * h / 2 ) )\n",
    )
    .unwrap();
    let (want, _) = run_main(dir.path(), &["--tier=interp"]);
    assert_eq!(want, "31500000\n11000\n");
    // Without inlining `area:` is compiled on its own, its site a class switch.
    for extra in [&[][..], &["--gc-stress", "50"]] {
        let mut args = vec![
            "--tier=adaptive",
            "--calibration",
            &model,
            "--tier-log",
            "--inline=off",
        ];
        args.extend_from_slice(extra);
        let (got, log) = run_main(dir.path(), &args);
        assert_eq!(got, want, "{log}");
        let compiled = log
            .lines()
            .find(|l| l.starts_with("[tier] opt Main>>area: ("))
            .unwrap_or_else(|| panic!("area: compiled: {log}"));
        assert!(compiled.contains("speculating at 1 site"), "{compiled}");
        assert!(!log.contains("deopt Main>>area:"), "{log}");
    }
    // With it, both classes' `area` are inlined behind the switch, the third sent.
    let (got, log) = run_main(
        dir.path(),
        &["--tier=adaptive", "--calibration", &model, "--tier-log"],
    );
    assert_eq!(got, want, "{log}");
    assert!(
        log.contains("#area → Square>>area: inlined")
            && log.contains("#area → Circle>>area: inlined"),
        "{log}"
    );
    assert!(!log.contains("deopt Main>>"), "{log}");
}

/// A site whose one-class guard failed is not speculated on again the deoptimizing way, but
/// once its cache holds two classes it gets the guard chain that sends on a miss (which cannot
/// deoptimize): the recompiled method speculates there again.
#[test]
fn a_site_whose_guard_failed_gets_the_two_class_chain_on_recompile() {
    let dir = tempfile::tempdir().expect("temp dir");
    let model = eager_opt_calibration(dir.path());
    std::fs::write(
        dir.path().join("Main.som"),
        sum_of_areas(
            "| s c |\n\
             s := Square new side: 3. c := Circle new r: 2.\n\
             (self sum: s and: s times: 1000000) println.\n\
             (self sum: s and: c times: 3000000) println",
        ),
    )
    .unwrap();
    write_shapes(dir.path());
    let (want, _) = run_main(dir.path(), &["--tier=interp"]);
    assert_eq!(want, "18000000\n63000000\n");
    // `area:` compiled on its own (inlined, its site is the caller's, recompiled as such).
    let (got, log) = run_main(
        dir.path(),
        &[
            "--tier=adaptive",
            "--calibration",
            &model,
            "--tier-log",
            "--inline=off",
        ],
    );
    assert_eq!(got, want, "{log}");
    let compiles: Vec<&str> = log
        .lines()
        .filter(|l| l.starts_with("[tier] opt Main>>area: ("))
        .collect();
    assert!(
        log.contains("[tier] deopt Main>>area: @0 (#area): receiver class guard failed"),
        "{log}"
    );
    assert!(compiles.len() >= 2, "{log}");
    assert!(
        compiles.iter().all(|l| l.contains("speculating at 1 site")),
        "{log}"
    );
}

/// `nil`, `true` and `false` are immediates: a class guard for them compares the word (a
/// header load would fail on every call, deoptimize, and leave the site to the send stub).
/// Sites that only ever see them stay speculated and never deoptimize; a receiver of another
/// kind afterwards (a number, an object) fails the guard and gets the interpreter's answer.
#[test]
fn guards_on_nil_and_booleans_hold_for_the_immediates() {
    let dir = tempfile::tempdir().expect("temp dir");
    let model = eager_opt_calibration(dir.path());
    let program = |odd: &str| {
        format!(
            "Main = (\n\
             \x20   none: x = ( ^x == nil )\n\
             \x20   flip: b = ( ^b not )\n\
             \x20   run = (\n\
             \x20       | hits b |\n\
             \x20       hits := 0. b := true.\n\
             \x20       1 to: 2000000 do: [:i |\n\
             \x20           (self none: nil) ifTrue: [hits := hits + 1].\n\
             \x20           b := self flip: b].\n\
             \x20       hits println. b println.\n\
             \x20       {odd}\n\
             \x20   )\n\
             )\n"
        )
    };
    // Each method on its own (inlined into `run`, its guard would be `run`'s).
    let adaptive = [
        "--tier=adaptive",
        "--calibration",
        &model,
        "--tier-log",
        "--inline=off",
    ];
    std::fs::write(dir.path().join("Main.som"), program("")).unwrap();
    let (want, _) = run_main(dir.path(), &["--tier=interp"]);
    assert_eq!(want, "2000000\ntrue\n");
    let (got, log) = run_main(dir.path(), &adaptive);
    assert_eq!(got, want, "{log}");
    // Each method is compiled speculating at its one site.
    for method in ["Main>>none:", "Main>>flip:"] {
        let compiled = log
            .lines()
            .find(|l| l.starts_with(&format!("[tier] opt {method} (")))
            .unwrap_or_else(|| panic!("{method} compiled: {log}"));
        assert!(compiled.contains("speculating at 1 site"), "{compiled}");
    }
    assert!(!log.contains("] deopt "), "{log}");
    std::fs::write(
        dir.path().join("Main.som"),
        program(
            "(self none: 3) println. (self none: Object new) println. (self none: nil) println",
        ),
    )
    .unwrap();
    let (want, _) = run_main(dir.path(), &["--tier=interp"]);
    let (got, log) = run_main(dir.path(), &adaptive);
    assert_eq!(got, want, "{log}");
}

/// `isNil` compiled as a comparison with nil (the core library's definitions stood) meets a
/// class loaded mid-loop that redefines it: the version deoptimizes there, the interpreter
/// sends the new method, and the next version sends too.
#[test]
fn a_nil_test_deoptimizes_when_a_class_loaded_later_redefines_it() {
    let dir = tempfile::tempdir().expect("temp dir");
    std::fs::write(
        dir.path().join("Main.som"),
        "Main = (\n\
         \x20   pick: i = ( i = 500 ifTrue: [ ^Odd new ]. ^i % 2 = 0 ifTrue: [ nil ] ifFalse: [ i ] )\n\
         \x20   count: n = (\n\
         \x20       | c |\n\
         \x20       c := 0.\n\
         \x20       1 to: n do: [:i | (self pick: i) isNil ifTrue: [ c := c + 1 ] ].\n\
         \x20       ^c\n\
         \x20   )\n\
         \x20   run = ( (self count: 1000) println. (self count: 1000) println )\n\
         )\n",
    )
    .unwrap();
    std::fs::write(
        dir.path().join("Odd.som"),
        "Odd = ( isNil = ( 'odd' println. ^true ) )\n",
    )
    .unwrap();
    let (want, _) = run_main(dir.path(), &["--tier=interp"]);
    assert_eq!(want, "odd\n500\nodd\n500\n");
    let (got, log) = run_main(dir.path(), &["--tier=opt", "--tier-log"]);
    assert_eq!(got, want, "{log}");
    assert!(
        log.lines()
            .any(|l| l.starts_with("[tier] deopt Main>>count: ")
                && l.contains("(#isNil): isNil or notNil redefined")),
        "{log}"
    );
}

/// A method whose blocks all run inlined keeps its own context virtual (the variable they
/// share stays in a register). A guard that fails in an inlined block makes it for the
/// interpreter with the value the variable holds there; the interpreter then makes a real
/// closure over it, whose `^` must find the method's frame through the context's frame
/// index.
#[test]
fn a_virtual_method_context_is_made_at_a_deopt_with_its_frame_index() {
    let dir = tempfile::tempdir().expect("temp dir");
    let model = eager_opt_calibration(dir.path());
    std::fs::write(
        dir.path().join("Main.som"),
        "Main = (\n\
         \x20   total: arr = (\n\
         \x20       | sum |\n\
         \x20       sum := 0.\n\
         \x20       arr do: [:x | sum := sum + x].\n\
         \x20       arr do: [:x | x = 7 ifTrue: [^sum + 1000]].\n\
         \x20       ^sum\n\
         \x20   )\n\
         \x20   run = (\n\
         \x20       | small big r |\n\
         \x20       small := Array new: 10 withAll: 1.\n\
         \x20       1 to: 1000000 do: [:i | r := self total: small].\n\
         \x20       r println.\n\
         \x20       big := Array new: 10 withAll: 1.\n\
         \x20       big at: 5 put: 0.5.\n\
         \x20       big at: 7 put: 7.\n\
         \x20       (self total: big) println.\n\
         \x20       (self total: small) println\n\
         \x20   )\n\
         )\n",
    )
    .unwrap();
    let (want, _) = run_main(dir.path(), &["--tier=interp"]);
    assert_eq!(want, "10\n1015.5\n10\n");
    for gc in [&[][..], &["--gc=semispace", "--gc-stress", "3"][..]] {
        let mut flags = vec!["--tier=adaptive", "--calibration", &model, "--tier-log"];
        flags.extend_from_slice(gc);
        let (got, log) = run_main(dir.path(), &flags);
        assert_eq!(got, want, "{log}");
        let compiled = log
            .lines()
            .find(|l| l.starts_with("[tier] opt Main>>total: ("))
            .unwrap_or_else(|| panic!("Main>>total: compiled: {log}"));
        assert!(compiled.contains("1 context never made"), "{compiled}");
        assert!(
            log.contains("] deopt [] in Main>>total: @1 (#+) (inlined into Main>>total:)"),
            "{log}"
        );
    }
}

/// Plain objects and Arrays that compiled code allocates in place (the heap's bump pointer,
/// no call) hold what was stored, survive the nursery collections a long list of them
/// forces, keep their identity hash when moved, and Arrays of every length — none, up to
/// the large-object space and beyond it (the stub's way) — are as long as asked.
#[test]
fn objects_and_arrays_allocated_in_place_match_the_interpreter() {
    let dir = tempfile::tempdir().expect("temp dir");
    let model = eager_opt_calibration(dir.path());
    std::fs::write(
        dir.path().join("Main.som"),
        "Main = (\n\
         \x20   build: n = (\n\
         \x20       | head |\n\
         \x20       head := nil.\n\
         \x20       1 to: n do: [:i |\n\
         \x20           | cell |\n\
         \x20           cell := Array new: 3.\n\
         \x20           cell at: 1 put: i.\n\
         \x20           cell at: 2 put: head.\n\
         \x20           cell at: 3 put: (Pair new a: i b: i * 2).\n\
         \x20           head := cell].\n\
         \x20       ^head\n\
         \x20   )\n\
         \x20   sum: list = (\n\
         \x20       | s c |\n\
         \x20       s := 0.\n\
         \x20       c := list.\n\
         \x20       [c notNil] whileTrue: [s := s + (c at: 1) + (c at: 3) b. c := c at: 2].\n\
         \x20       ^s\n\
         \x20   )\n\
         \x20   lengths = (\n\
         \x20       | total |\n\
         \x20       total := 0.\n\
         \x20       0 to: 40 do: [:n | total := total + (Array new: n) length].\n\
         \x20       ^total + (Array new: 20000) length\n\
         \x20   )\n\
         \x20   run = (\n\
         \x20       | p h |\n\
         \x20       1 to: 6 do: [:k | (self sum: (self build: 60000)) println].\n\
         \x20       1 to: 30000 do: [:k | self lengths].\n\
         \x20       self lengths println.\n\
         \x20       p := Pair new a: 1 b: 2.\n\
         \x20       h := p hashcode.\n\
         \x20       self build: 200000.\n\
         \x20       (p hashcode = h) println\n\
         \x20   )\n\
         )\n",
    )
    .unwrap();
    std::fs::write(
        dir.path().join("Pair.som"),
        "Pair = ( | a b | a: x b: y = ( a := x. b := y ) b = ( ^b ) )\n",
    )
    .unwrap();
    let (want, _) = run_main(dir.path(), &["--tier=interp"]);
    assert_eq!(want, "5400090000\n".repeat(6) + "20820\ntrue\n");
    for gc in ["--gc=genimmix", "--gc=semispace", "--gc=immix"] {
        // Nothing inlined into `run`, so that both allocating methods are compiled on their
        // own (`new` and `new:` are still done without their sends).
        let (got, log) = run_main(
            dir.path(),
            &[
                gc,
                "--tier=adaptive",
                "--inline=off",
                "--calibration",
                &model,
                "--print-code=Main>>",
            ],
        );
        assert_eq!(got, want, "{gc}");
        // Both allocating methods were compiled with the in-place path.
        for method in ["Main>>build:", "Main>>lengths"] {
            let listing = log
                .split("=== ")
                .find(|l| l.starts_with(&format!("{method} [opt]")))
                .unwrap_or_else(|| panic!("{gc}: {method} compiled: {log}"));
            assert!(listing.contains("addr:bump_pointer"), "{gc}: {listing}");
        }
    }
}

/// A field read again in the same block is the value read before while nothing may have
/// stored into it: a store to another field keeps it, a store to the same field of an
/// object that may be the same one does not. Run with the two objects distinct and with
/// them the same (the second store then changes what the last read must see).
#[test]
fn a_field_read_twice_is_loaded_once_until_a_store_may_change_it() {
    let dir = tempfile::tempdir().expect("temp dir");
    let model = eager_opt_calibration(dir.path());
    std::fs::write(
        dir.path().join("Main.som"),
        "Main = (\n\
         \x20   step: p with: q = (\n\
         \x20       | s |\n\
         \x20       s := p x + p x.\n\
         \x20       q y: s.\n\
         \x20       s := s + p x.\n\
         \x20       q x: s.\n\
         \x20       ^s + p x\n\
         \x20   )\n\
         \x20   run = (\n\
         \x20       | p q t |\n\
         \x20       p := Pt new x: 1 y: 2.\n\
         \x20       q := Pt new x: 3 y: 4.\n\
         \x20       t := 0.\n\
         \x20       1 to: 1000000 do: [:i | t := t + (self step: p with: q)].\n\
         \x20       t println.\n\
         \x20       t := 0.\n\
         \x20       1 to: 5 do: [:i | p x: 1. t := t + (self step: p with: p)].\n\
         \x20       t println\n\
         \x20   )\n\
         )\n",
    )
    .unwrap();
    std::fs::write(
        dir.path().join("Pt.som"),
        "Pt = (\n\
         \x20   | x y |\n\
         \x20   x = ( ^x )\n\
         \x20   x: v = ( x := v )\n\
         \x20   y: v = ( y := v )\n\
         \x20   x: ax y: ay = ( x := ax. y := ay )\n\
         )\n",
    )
    .unwrap();
    let (want, _) = run_main(dir.path(), &["--tier=interp"]);
    assert_eq!(want, "4000000\n30\n");
    // Not inlined into `run` (the getters and setters are still done in place): compiled on
    // its own, so its listing is there to read.
    let (got, log) = run_main(
        dir.path(),
        &[
            "--tier=adaptive",
            "--inline=off",
            "--calibration",
            &model,
            "--print-code=Main>>step:with:",
        ],
    );
    assert_eq!(got, want, "{log}");
    assert!(log.contains("=== Main>>step:with: [opt]"), "{log}");
    let ir = log
        .rsplit("=== Main>>step:with: [opt]")
        .next()
        .and_then(|l| l.split("--- opt: Cranelift IR").next())
        .expect("a listing of Main>>step:with:");
    // `p x` four times: read once before `q x:` and once after it.
    let loads_of_x = ir
        .lines()
        .filter(|l| l.contains("= load_field") && l.contains(".0:"))
        .count();
    assert_eq!(loads_of_x, 2, "{ir}");
}

/// A send whose receiver takes turns among three classes misses the two-entry inline cache
/// every third time (at least) and takes the send stub: `--tier-log` ends with how often
/// compiled code took the stubs and the busiest sites, with what their caches hold.
#[test]
fn the_tier_log_ends_with_the_sites_that_took_the_send_stubs() {
    let dir = tempfile::tempdir().expect("temp dir");
    std::fs::write(
        dir.path().join("Main.som"),
        "Main = (\n\
         \x20   run = ( | all n |\n\
         \x20       all := Array with: 1 with: 'two' with: #three. n := 0.\n\
         \x20       1 to: 3000 do: [:i | n := n + (all at: i % 3 + 1) asString length].\n\
         \x20       n println )\n\
         )\n",
    )
    .unwrap();
    let (want, _) = run_main(dir.path(), &["--tier=interp"]);
    assert_eq!(want, "9000\n");
    let (got, log) = run_main(dir.path(), &["--tier=opt", "--tier-log"]);
    assert_eq!(got, want, "{log}");
    let report = log
        .split_once("[tier] compiled code took the send stubs ")
        .map(|(_, r)| r)
        .unwrap_or_else(|| panic!("no stub report: {log}"));
    let total: u64 = report
        .split_whitespace()
        .next()
        .and_then(|n| n.parse().ok())
        .expect("the number of stub sends");
    assert!(total >= 1000, "{report}");
    assert!(
        report
            .lines()
            .any(|l| l.contains("(#asString)") && l.contains("Main>>run")),
        "{report}"
    );
}

/// A send that had never run when its method was compiled while the sends around it had (a
/// cold site: the send stub alone) and then turns hot has the version compiled again once
/// the stub's sends pile up there, now with the site's cache filled: the new version calls
/// String's primitive `asSymbol` without the send.
///
/// `check:with:flag:`'s first version, compiled at its first call, speculates that `x +`
/// sees small integers; the big integer of the first call fails that guard (and leaves the
/// site to the send: neither small integers nor doubles only), and the second
/// version is compiled after the interpreter has run the `length` send but not `asSymbol`.
#[test]
fn a_cold_site_that_turns_hot_has_its_method_compiled_again() {
    let dir = tempfile::tempdir().expect("temp dir");
    std::fs::write(
        dir.path().join("Main.som"),
        "Main = (\n\
         \x20   check: x with: s flag: f = (\n\
         \x20       | k |\n\
         \x20       k := x + s length.\n\
         \x20       f ifTrue: [ ^s asSymbol ].\n\
         \x20       ^k > 0\n\
         \x20   )\n\
         \x20   run = ( | n |\n\
         \x20       n := 0.\n\
         \x20       (self check: 100000000000000000000 with: 'ab' flag: false)\n\
         \x20           ifTrue: [n := n + 1].\n\
         \x20       (self check: 1 with: 'ab' flag: false) ifTrue: [n := n + 1].\n\
         \x20       1 to: 3000 do: [:i |\n\
         \x20           (self check: i with: 'ab' flag: true) == #ab ifTrue: [n := n + 1]].\n\
         \x20       n println )\n\
         )\n",
    )
    .unwrap();
    let (want, _) = run_main(dir.path(), &["--tier=interp"]);
    assert_eq!(want, "3002\n");
    let (got, log) = run_main(dir.path(), &["--tier=opt", "--tier-log", "--inline=off"]);
    assert_eq!(got, want, "{log}");
    let recompile = "[tier] recompile Main>>check:with:flag:: its send of #asSymbol took the \
                     send stub 1024 times; invalidated, now interp";
    let (before, after) = log
        .split_once(recompile)
        .unwrap_or_else(|| panic!("no recompile: {log}"));
    let compiles = "[tier] opt Main>>check:with:flag: (";
    assert_eq!(before.matches(compiles).count(), 2, "{log}");
    assert_eq!(after.matches(compiles).count(), 1, "{log}");
    let stub_sends: u64 = log
        .lines()
        .filter(|l| l.contains("(#asSymbol)"))
        .filter_map(|l| l.split_whitespace().nth(1)?.parse::<u64>().ok())
        .sum();
    assert_eq!(stub_sends, 1024, "{log}");
}

/// Compiled code answers `aString = x` without a send only while String's `=` is the core
/// library's primitive: a library on the class path whose String defines `=` in Smalltalk
/// gets its method called in every tier.
#[test]
fn a_library_that_redefines_string_equality_is_sent_to_in_every_tier() {
    let dir = tempfile::tempdir().expect("temp dir");
    let core = std::fs::read_to_string(common::repo().join("crates/tally-vm/stdlib/String.som"))
        .expect("the core library's String");
    let primitive = "= other  = primitive";
    assert!(core.contains(primitive), "String's = moved: {core}");
    let redefined = core.replace(primitive, "= other = ( ^true )");
    std::fs::write(dir.path().join("String.som"), redefined).unwrap();
    std::fs::write(
        dir.path().join("Main.som"),
        "Main = (\n\
         \x20   run = (\n\
         \x20       | n |\n\
         \x20       n := 0.\n\
         \x20       1 to: 3000 do: [:i | ('a' = 'b') ifTrue: [n := n + 1]].\n\
         \x20       n println. ('a' = 'a') println\n\
         \x20   )\n\
         )\n",
    )
    .unwrap();
    for tier in ["interp", "baseline", "opt"] {
        let (got, log) = run_main(dir.path(), &[&format!("--tier={tier}")]);
        assert_eq!(got, "3000\ntrue\n", "{tier}: {log}");
    }
}

/// Primitives the optimizing tier does at a send site without the send stub once the
/// site's cache names them: Double's `sqrt` (an immediate double's root), String's `=` for
/// strings and symbols (a symbol equals only itself), Class's `new` (an allocation, with
/// its error for a class the VM makes), Array's `new:`, and any other primitive (Integer's
/// `asString` here), called without the send's lookup. Each answers what the interpreter
/// does, the edge cases included, and the tier log's report of stub sends shows that they
/// did not go through the stub. Without inlining, so that each method is compiled on its
/// own whenever the run is sampled (inlined into `run`, a method got its own compile only
/// if the sampler caught it interpreted before `run` was compiled).
#[test]
fn primitives_done_without_the_send_answer_what_the_interpreter_answers() {
    let dir = tempfile::tempdir().expect("temp dir");
    let model = eager_opt_calibration(dir.path());
    std::fs::write(
        dir.path().join("Gen.som"),
        "Gen = (\n\
         \x20   root: x = ( ^x sqrt )\n\
         \x20   same: a as: b = ( ^a = b )\n\
         \x20   make: c = ( ^c new )\n\
         \x20   make: c size: n = ( ^c new: n )\n\
         \x20   text: i = ( ^i asString )\n\
         \x20   run = (\n\
         \x20       | n |\n\
         \x20       n := 0.\n\
         \x20       1 to: 1000000 do: [:i |\n\
         \x20           n := n + (self root: 4.0) + ((self same: #a as: #a) ifTrue: [1] ifFalse: [0]).\n\
         \x20           ((self same: 'ab' as: 'ab') and: [(self same: 'ab' as: 'ba') not])\n\
         \x20               ifTrue: [n := n + 1].\n\
         \x20           ((self same: 'a' as: ('xay' charAt: 2)) and: [(self same: 'a' as: 'b') not])\n\
         \x20               ifTrue: [n := n + 1].\n\
         \x20           (self make: Gen) class == Gen ifTrue: [n := n + 1].\n\
         \x20           n := n + (self make: Array size: 2) length + (self text: i % 10) length].\n\
         \x20       n println.\n\
         \x20       (self root: 2.25) println. (self root: -1.0) println.\n\
         \x20       (self root: 1.0e300) println. (self root: 1.0e-300) println.\n\
         \x20       (self root: 0.0) println. (self root: 16) println.\n\
         \x20       (self same: #a as: #b) println. (self same: #a as: 'a') println.\n\
         \x20       (self same: 'a' as: #a) println. (self same: #a as: 3) println.\n\
         \x20       (self same: 'ab' as: 'ab') println. (self same: 'é' as: 'é') println.\n\
         \x20       (self same: 'é' as: 'e') println. (self same: 'a' as: #a) println.\n\
         \x20       (self make: Array) length println. (self make: String) println.\n\
         \x20       (self make: Array size: 0) length println.\n\
         \x20       (self make: Integer) println\n\
         \x20   )\n\
         )\n",
    )
    .unwrap();
    let (want, want_err, status) = run(dir.path(), &["--tier=interp"]);
    assert_eq!(
        want,
        "9000000.0\n1.5\nNaN\n1.0e150\n1.0e-150\n0.0\n4\nfalse\ntrue\ntrue\nfalse\ntrue\ntrue\n\
         false\ntrue\n0\n\n0\n"
    );
    assert!(
        want_err.contains("Cannot create an instance of Integer with new"),
        "{want_err}"
    );
    assert_ne!(status, Some(0));
    let (got, log, status) = run(
        dir.path(),
        &[
            "--tier=adaptive",
            "--calibration",
            &model,
            "--inline=off",
            "--tier-log",
        ],
    );
    assert_eq!(got, want, "{log}");
    assert_ne!(status, Some(0));
    let trace = |err: &str| -> Vec<String> {
        err.lines()
            .filter(|l| !l.starts_with("[tier]"))
            .map(str::to_string)
            .collect()
    };
    assert_eq!(trace(&log), trace(&want_err), "{log}");
    for method in ["root:", "same:as:", "make:", "make:size:", "text:"] {
        assert!(
            log.contains(&format!("[tier] opt Gen>>{method} (")),
            "{log}"
        );
    }
    for selector in ["(#sqrt)", "(#new)", "(#new:)", "(#=)", "(#asString)"] {
        let stub_sends: u64 = log
            .lines()
            .filter(|l| l.contains(selector))
            .filter_map(|l| l.split_whitespace().nth(1)?.parse::<u64>().ok())
            .sum();
        assert!(
            stub_sends < 1000,
            "{selector}: {stub_sends} stub sends\n{log}"
        );
    }
}

/// A super send's target is fixed: the optimizing tier calls the method directly, or does a
/// trivial one (a getter here) or Class's `new` (`super new` on a class side) in place,
/// instead of going through the super-send stub.
#[test]
fn super_sends_call_their_fixed_target_directly() {
    let dir = tempfile::tempdir().expect("temp dir");
    let model = eager_opt_calibration(dir.path());
    std::fs::write(
        dir.path().join("Base.som"),
        "Base = ( | n | value: x = ( ^x + 1 ) n = ( ^n ) setUp = ( n := 5 ) \
         ---- make = ( ^super new setUp ) )\n",
    )
    .unwrap();
    std::fs::write(
        dir.path().join("Main.som"),
        "Main = Base (\n\
         \x20   value: x = ( ^(super value: x) * 2 )\n\
         \x20   n = ( ^super n + 1 )\n\
         \x20   run = ( | s | self setUp. s := 0.\n\
         \x20       1 to: 3000000 do: [:i | s := s + (self value: i) + self n + Base make n].\n\
         \x20       s println )\n\
         )\n",
    )
    .unwrap();
    let (want, _) = run_main(dir.path(), &["--tier=interp"]);
    assert_eq!(want, "9000042000000\n");
    let (got, log) = run_main(
        dir.path(),
        &["--tier=adaptive", "--calibration", &model, "--tier-log"],
    );
    assert_eq!(got, want, "{log}");
    // Compiled on its own, or inlined into `run`.
    assert!(
        log.contains("[tier] opt Main>>value: (")
            || log.contains("#value: → Main>>value:: inlined"),
        "{log}"
    );
    let stub_sends: u64 = log
        .lines()
        .filter(|l| l.contains("(#value:)") || l.contains("(#n)") || l.contains("(#new)"))
        .filter_map(|l| l.split_whitespace().nth(1)?.parse::<u64>().ok())
        .sum();
    assert!(
        stub_sends < 1000,
        "{stub_sends} super sends through the stub\n{log}"
    );
}

/// `==` at a monomorphic site is answered inline by the optimizing tier (identity of the two
/// words); numbers, which compare by value, never take that path: a receiver of another class
/// deoptimizes, and an argument that is a number is simply not identical.
///
/// The hot loop runs for at least 300 ms (however fast the machine), so `is:same:` is compiled
/// before the calls after the loop whatever the compiler thread's pace; without inlining `run`
/// keeps calling it, so the controller always compiles it on its own.
#[test]
fn identity_at_a_monomorphic_site_answers_what_the_interpreter_answers() {
    let dir = tempfile::tempdir().expect("temp dir");
    let model = eager_opt_calibration(dir.path());
    std::fs::write(
        dir.path().join("Main.som"),
        "Main = (\n\
         \x20   is: a same: b = ( ^a == b )\n\
         \x20   run = (\n\
         \x20       | other hits flip n start |\n\
         \x20       other := Main new.\n\
         \x20       hits := 0.\n\
         \x20       n := 0.\n\
         \x20       flip := true.\n\
         \x20       start := system ticks.\n\
         \x20       [n < 2000000 or: [(system ticks - start) < 300000]] whileTrue: [\n\
         \x20           n := n + 1.\n\
         \x20           (self is: self same: (flip ifTrue: [self] ifFalse: [other]))\n\
         \x20               ifTrue: [hits := hits + 1].\n\
         \x20           flip := flip not].\n\
         \x20       (hits = ((n + 1) / 2)) println.\n\
         \x20       (self is: self same: 3) println.\n\
         \x20       (self is: 3 same: 3) println.\n\
         \x20       (self is: 1.5 same: 1.5) println.\n\
         \x20       (self is: (2 raisedTo: 100) same: (2 raisedTo: 100)) println.\n\
         \x20       (self is: 'a' same: ('a' + '')) println.\n\
         \x20       (self is: #a same: #a) println\n\
         \x20   )\n\
         )\n",
    )
    .unwrap();
    let (want, _) = run_main(dir.path(), &["--tier=interp"]);
    assert_eq!(want, "true\nfalse\ntrue\ntrue\ntrue\nfalse\ntrue\n");
    let (got, log) = run_main(
        dir.path(),
        &["--tier=adaptive", "--calibration", &model, "--tier-log"],
    );
    assert_eq!(got, want, "{log}");
    // Compiled on its own, or inlined into `run`.
    assert!(
        log.contains("[tier] opt Main>>is:same: (")
            || log.contains("#is:same: → Main>>is:same:: inlined"),
        "{log}"
    );
    let (got, log) = run_main(
        dir.path(),
        &[
            "--tier=adaptive",
            "--calibration",
            &model,
            "--inline=off",
            "--tier-log",
        ],
    );
    assert_eq!(got, want, "{log}");
    assert!(
        log.lines()
            .any(|l| l.starts_with("[tier] deopt Main>>is:same: @1 (#==)")
                && l.contains("receiver class guard failed")),
        "{log}"
    );
    let (got, log) = run_main(
        dir.path(),
        &[
            "--tier=adaptive",
            "--calibration",
            &model,
            "--gc-stress",
            "50",
            "--tier-log",
        ],
    );
    assert_eq!(got, want, "{log}");
}

/// An error raised in compiled code, inside a block that a method called through `do:` and
/// whose `^` would return from that method, prints every SOM frame with its line, as the
/// interpreter does: a method's frame, the library's `do:`, the block's, the failing one's.
#[test]
fn an_error_in_compiled_code_prints_every_frame_with_its_line() {
    let dir = tempfile::tempdir().expect("temp dir");
    std::fs::write(
        dir.path().join("Main.som"),
        "Main = (\n\
         \x20   a: x = ( ^self b: x + 1 )\n\
         \x20   b: y = ( #(1 2 3) do: [ :e | e = 2 ifTrue: [ ^self c: y ] ]. ^0 )\n\
         \x20   c: z = ( ^z / 0 )\n\
         \x20   run = ( (self a: 5) println )\n\
         )\n",
    )
    .unwrap();
    let run = |flags: &[&str]| {
        let out = Command::new(env!("CARGO_BIN_EXE_tally"))
            .args(flags)
            .arg(dir.path().join("Main.som"))
            .output()
            .expect("run tally");
        assert_eq!(out.status.code(), Some(1), "{flags:?}");
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    let want = run(&["--tier=interp"]);
    for line in [
        "Main>>run",
        "Main>>a:",
        "Main>>b:",
        "Array>>do:",
        "[] in Main>>b:",
        "Main>>c:",
    ] {
        assert!(want.contains(line), "{line} in:\n{want}");
    }
    assert!(want.contains("Division by zero."), "{want}");
    for tier in ["--tier=baseline", "--tier=opt"] {
        assert_eq!(run(&[tier]), want, "{tier}");
    }
}
