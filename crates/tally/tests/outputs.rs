//! Every file Tally writes is whole or absent (`tally_output`): under a full disk each writer
//! fails with the reason and a non-zero status, and leaves neither a file at its target nor a
//! temporary beside it; runs that share a profile path leave one run's whole profile.
//!
//! A full disk is the process's file-size limit (`RLIMIT_FSIZE`, what `ulimit -f` sets),
//! which needs no root: a write past it fails with EFBIG (Tally ignores SIGXFSZ, which would
//! otherwise kill it). Standard output and error are pipes here, which the limit spares.

use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Output, Stdio};

mod common;
use common::{repo, tally, text};

/// A program that runs long enough to stream several periods of samples.
const LOOP: &str = "Loop = (
  fib: n = ( ^ n < 2 ifTrue: [ n ] ifFalse: [ (self fib: n - 1) + (self fib: n - 2) ] )
  run: args = ( | n | n := (args at: 2) asInteger. (self fib: n) println )
)";

/// A program that runs for two seconds: four periods of the profile's stream.
const BUSY: &str = "Busy = ( run = ( | start | start := system ticks.
  [ (system ticks - start) < 2000000 ] whileTrue: [ 1 to: 1000 do: [ :i | i * i ] ].
  'done' println ) )";

/// `BUSY`'s two seconds, then an error.
const FAILS: &str = "Fails = ( run = ( | start | start := system ticks.
  [ (system ticks - start) < 2000000 ] whileTrue: [ 1 to: 1000 do: [ :i | i * i ] ].
  self error: 'no' ) )";

/// Limits the files `command` writes to `limit` bytes. SIGXFSZ keeps its default action (it
/// kills): Tally (and Python) ignore it themselves, so that the write fails instead.
fn limited(command: &mut Command, limit: u64) {
    // SAFETY: between fork and exec the closure only calls setrlimit, which is
    // async-signal-safe, on a struct on its own stack.
    unsafe {
        command.pre_exec(move || {
            let rlimit = libc::rlimit {
                rlim_cur: limit,
                rlim_max: limit,
            };
            if libc::setrlimit(libc::RLIMIT_FSIZE, &rlimit) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
}

/// Runs tally with `args` in `dir`, its files limited to `limit` bytes.
fn run_limited(dir: &Path, limit: u64, args: &[&str]) -> Output {
    let mut command = Command::new(tally());
    command
        .args(args)
        .current_dir(dir)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    limited(&mut command, limit);
    command.output().expect("run tally")
}

fn run_in(dir: &Path, args: &[&str]) -> Output {
    run_limited(dir, libc::RLIM_INFINITY, args)
}

/// The names in `dir`, sorted, hidden ones included.
fn entries(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

/// A directory holding `Loop.som`.
fn dir_with_loop() -> tempfile::TempDir {
    let d = tempfile::tempdir().unwrap();
    std::fs::write(d.path().join("Loop.som"), LOOP).unwrap();
    d
}

/// Checks that a writer refused by the full disk said so, exited with `status`, and left the
/// directory holding only `before`.
fn assert_failed_cleanly(o: &Output, status: i32, dir: &Path, before: &[&str], what: &str) {
    let stderr = text(&o.stderr);
    assert_eq!(o.status.code(), Some(status), "{what}: {stderr}");
    assert!(
        stderr.contains("the file-size limit (ulimit -f) was reached"),
        "{what}: the reason is not said: {stderr}"
    );
    assert_eq!(entries(dir), before, "{what}: left behind");
}

#[test]
fn a_profile_the_disk_cannot_hold_fails_the_run_and_keeps_what_was_streamed() {
    let d = dir_with_loop();
    // Not even the header fits: the run stops before the program, with nothing left.
    let o = run_limited(d.path(), 0, &["--profile=run.profile", "Loop.som", "20"]);
    assert_failed_cleanly(&o, 74, d.path(), &["Loop.som"], "header");
    assert!(text(&o.stdout).is_empty(), "the program ran");

    // The disk fills mid-run, short of what the profile takes (a tenth, or more where a
    // loaded machine's run took fewer samples than the measured one): the program's output,
    // then the reason and where the part of the run that fitted is kept, readable.
    // Wall-clock samples, so that the runs stream about as much whatever CPU they get.
    let args = [
        "--profile=run.profile",
        "--force",
        "--sampler=timer-wall",
        "--rate",
        "2000",
        "Busy.som",
    ];
    std::fs::write(d.path().join("Busy.som"), BUSY).unwrap();
    let o = run_in(d.path(), &args);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let whole = std::fs::metadata(d.path().join("run.profile"))
        .unwrap()
        .len();
    std::fs::remove_file(d.path().join("run.profile")).unwrap();
    let o = [9, 8, 7]
        .into_iter()
        .map(|tenths| run_limited(d.path(), whole * tenths / 10, &args))
        .find(|o| {
            let fitted = o.status.success();
            if fitted {
                std::fs::remove_file(d.path().join("run.profile")).unwrap();
            }
            !fitted
        })
        .unwrap_or_else(|| panic!("the profile fitted in 70 % of the {whole} bytes it took"));
    let stderr = text(&o.stderr);
    assert_eq!(o.status.code(), Some(74), "{stderr}");
    assert_eq!(text(&o.stdout), "done\n");
    assert!(!d.path().join("run.profile").exists());
    let left = entries(d.path());
    assert_eq!(left.len(), 3, "{left:?}");
    let kept = left
        .iter()
        .find(|n| n.starts_with("run.profile.") && n.ends_with(".partial"))
        .unwrap_or_else(|| panic!("no stream kept: {left:?}"));
    assert!(
        stderr.contains(&format!("is kept in {kept}")) && stderr.contains("samples"),
        "{stderr}"
    );
    let r = run_in(d.path(), &["report", kept]);
    assert!(r.status.success(), "{}", text(&r.stderr));
    assert!(text(&r.stdout).contains("Busy>>run"), "{}", text(&r.stdout));

    // A program that fails keeps its own status.
    std::fs::write(d.path().join("Fails.som"), FAILS).unwrap();
    let o = run_limited(
        d.path(),
        whole / 2,
        &["--profile=f.profile", "--rate", "2000", "Fails.som"],
    );
    let stderr = text(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("ulimit -f") && stderr.contains("Fails>>run"),
        "{stderr}"
    );
    assert!(!d.path().join("f.profile").exists());
}

#[test]
fn run_outputs_under_a_full_disk_fail_the_run_after_its_output() {
    let d = dir_with_loop();
    // Method times for the phases below (the disk is not full yet).
    let o = run_in(
        d.path(),
        &["--phases-record", "times.json", "Loop.som", "18"],
    );
    assert!(o.status.success(), "{}", text(&o.stderr));
    let o = run_in(
        d.path(),
        &[
            "vertical",
            "phases",
            "times.json",
            "--weight",
            "0.01",
            "--grain",
            "1us",
            "-o",
            "chosen.phases",
        ],
    );
    assert!(o.status.success(), "{}", text(&o.stderr));
    let inputs = ["Loop.som", "chosen.phases", "times.json"];
    for (what, args) in [
        (
            "GC hints",
            vec!["--gc-hints-record", "out.hints", "Loop.som", "12"],
        ),
        (
            "method times",
            vec!["--phases-record", "out.json", "Loop.som", "12"],
        ),
        (
            "phase report",
            vec![
                "--phases",
                "chosen.phases",
                "--phases-report",
                "out.json",
                "Loop.som",
                "12",
            ],
        ),
    ] {
        let o = run_limited(d.path(), 0, &args);
        assert_eq!(text(&o.stdout), "144\n", "{what}: the program's output");
        assert_failed_cleanly(&o, 74, d.path(), &inputs, what);
    }
    let o = run_limited(
        d.path(),
        0,
        &[
            "vertical",
            "phases",
            "times.json",
            "--weight",
            "0.01",
            "--grain",
            "1us",
            "-o",
            "out.phases",
        ],
    );
    assert_failed_cleanly(&o, 1, d.path(), &inputs, "vertical phases");
}

#[test]
fn exports_and_reports_under_a_full_disk_leave_nothing() {
    let d = dir_with_loop();
    let o = run_in(d.path(), &["--profile=run.profile", "Loop.som", "22"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let inputs = ["Loop.som", "run.profile"];
    for format in [
        "pprof",
        "folded",
        "flamegraph",
        "speedscope",
        "firefox",
        "chrome",
    ] {
        let o = run_limited(d.path(), 0, &["export", format, "run.profile", "-o", "out"]);
        assert_failed_cleanly(&o, 1, d.path(), &inputs, format);
    }
    let o = run_limited(
        d.path(),
        0,
        &[
            "export",
            "diff-flamegraph",
            "run.profile",
            "run.profile",
            "-o",
            "out.svg",
        ],
    );
    assert_failed_cleanly(&o, 1, d.path(), &inputs, "diff-flamegraph");
    let o = run_limited(
        d.path(),
        0,
        &["report", "--html", "-o", "r.html", "run.profile"],
    );
    assert_failed_cleanly(&o, 1, d.path(), &inputs, "report --html");
}

#[test]
fn instrumented_runs_under_a_full_disk_leave_nothing() {
    let d = dir_with_loop();
    let o = run_limited(
        d.path(),
        0,
        &[
            "vertical",
            "trace",
            "-o",
            "run.trace",
            "--",
            "Loop.som",
            "10",
        ],
    );
    assert_failed_cleanly(&o, 74, d.path(), &["Loop.som"], "trace");
    let o = run_limited(
        d.path(),
        0,
        &[
            "vertical",
            "cache",
            "-o",
            "cache.txt",
            "--",
            "Loop.som",
            "10",
        ],
    );
    assert_failed_cleanly(&o, 74, d.path(), &["Loop.som"], "cache report");
}

#[test]
fn bench_calibrate_and_experiments_under_a_full_disk_leave_nothing() {
    let d = tempfile::tempdir().unwrap();
    let suite = repo().join("bench/smoke.toml");
    let suite = suite.to_str().unwrap();
    // The spawner's few bytes per run fit; the results do not.
    let o = run_limited(
        d.path(),
        256,
        &[
            "bench",
            suite,
            "-b",
            "Fibonacci",
            "-n",
            "1",
            "-i",
            "1",
            "-q",
            "-o",
            "out",
        ],
    );
    assert_ne!(o.status.code(), Some(0), "{}", text(&o.stderr));
    assert!(
        text(&o.stderr).contains("the file-size limit (ulimit -f) was reached"),
        "{}",
        text(&o.stderr)
    );
    assert_eq!(entries(&d.path().join("out")), Vec::<String>::new());

    // Calibration's own inputs of its child runs do not fit: it stops, and its scratch
    // directory goes with it.
    let o = run_limited(
        d.path(),
        0,
        &[
            "calibrate",
            "-o",
            "cal.toml",
            "--runs",
            "1",
            "--iterations",
            "2",
        ],
    );
    assert_failed_cleanly(&o, 1, d.path(), &["out"], "calibrate");

    let o = run_limited(
        d.path(),
        0,
        &[
            "experiment",
            "gc-hints",
            "--suite",
            suite,
            "-b",
            "Phases",
            "--heap-sizes",
            "default",
            "-n",
            "1",
            "-q",
            "-o",
            "exp",
        ],
    );
    assert_ne!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let left: Vec<String> = entries(&d.path().join("exp"));
    assert!(
        left.iter()
            .all(|n| !n.starts_with('.') && !n.ends_with(".partial")),
        "{left:?}"
    );
}

/// The program line of a profile's report, which names the run.
fn program_of(dir: &Path, profile: &str) -> String {
    let r = run_in(dir, &["report", profile]);
    assert!(r.status.success(), "{}", text(&r.stderr));
    assert!(
        !text(&r.stderr).contains("incomplete"),
        "{profile} is not whole: {}",
        text(&r.stderr)
    );
    text(&r.stdout)
        .lines()
        .next()
        .and_then(|l| l.strip_prefix("Profile of "))
        .map(|l| l.split(" (").next().unwrap_or(l).to_string())
        .unwrap_or_else(|| panic!("no program line: {}", text(&r.stdout)))
}

/// Starts `runs` profiled runs of `Loop.som N` at once, each its own N, on one profile path.
fn start_together(dir: &Path, runs: u32, force: bool) -> Vec<(String, Output)> {
    let children: Vec<(String, std::process::Child)> = (0..runs)
        .map(|i| {
            let n = (18 + i).to_string();
            let mut c = Command::new(tally());
            c.arg("--profile=same.profile");
            if force {
                c.arg("--force");
            }
            let child = c
                .args(["Loop.som", &n])
                .current_dir(dir)
                .stdin(Stdio::null())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap();
            (format!("Loop.som {n}"), child)
        })
        .collect();
    children
        .into_iter()
        .map(|(name, c)| (name, c.wait_with_output().unwrap()))
        .collect()
}

#[test]
fn eight_runs_on_one_profile_path_leave_one_runs_whole_profile() {
    let d = dir_with_loop();
    for round in 0..20 {
        let done = start_together(d.path(), 8, true);
        for (name, o) in &done {
            assert!(
                o.status.success(),
                "round {round}, {name}: {}",
                text(&o.stderr)
            );
        }
        let names: Vec<&String> = done.iter().map(|(n, _)| n).collect();
        let program = program_of(d.path(), "same.profile");
        assert!(
            names.contains(&&program),
            "round {round}: the profile names {program:?}, none of {names:?}"
        );
        assert_eq!(
            entries(d.path()),
            ["Loop.som", "same.profile"],
            "round {round}"
        );
    }
}

#[test]
fn without_force_the_first_run_to_finish_wins_and_the_others_keep_theirs() {
    let d = dir_with_loop();
    let done = start_together(d.path(), 4, false);
    let winners: Vec<&String> = done
        .iter()
        .filter(|(_, o)| o.status.success())
        .map(|(n, _)| n)
        .collect();
    assert_eq!(
        winners.len(),
        1,
        "{:?}",
        done.iter()
            .map(|(n, o)| (n, o.status.code(), text(&o.stderr)))
            .collect::<Vec<_>>()
    );
    assert_eq!(&program_of(d.path(), "same.profile"), winners[0]);
    for (name, o) in done.iter().filter(|(_, o)| !o.status.success()) {
        let stderr = text(&o.stderr);
        if text(&o.stdout).is_empty() {
            // Started after the winner finished: refused before the program ran.
            assert!(stderr.contains("exists; pass --force"), "{name}: {stderr}");
            continue;
        }
        // Finished after it: its whole profile is kept in its own stream.
        assert_eq!(o.status.code(), Some(74), "{name}: {stderr}");
        assert!(stderr.contains("appeared while"), "{name}: {stderr}");
        let kept = stderr
            .split("the whole profile is kept in ")
            .nth(1)
            .and_then(|s| s.split(' ').next())
            .unwrap_or_else(|| panic!("{name}: {stderr}"));
        assert_eq!(&program_of(d.path(), kept), name);
    }
}

/// The scripts' writer (`scripts/whole_file.py`, used by `scripts/text-order` and
/// `scripts/rebench`) keeps the same promise.
#[test]
fn the_scripts_writer_under_a_full_disk_leaves_nothing() {
    let d = tempfile::tempdir().unwrap();
    let write = |limit: u64, target: &str| {
        let script = format!(
            "import sys\nsys.path.insert(0, {:?})\nfrom whole_file import write_whole\n\
             try:\n    write_whole({target:?}, 'x' * 10000)\nexcept OSError as e:\n    \
             print(e.strerror)\n    sys.exit(3)\n",
            repo().join("scripts").display().to_string()
        );
        let mut command = Command::new("python3");
        command.args(["-c", &script]).current_dir(d.path());
        limited(&mut command, limit);
        command.output().expect("run python3")
    };
    std::fs::write(d.path().join("kept.txt"), "old").unwrap();
    let o = write(1000, "kept.txt");
    assert_eq!(o.status.code(), Some(3), "{}", text(&o.stderr));
    assert_eq!(text(&o.stdout), "File too large\n");
    assert_eq!(entries(d.path()), ["kept.txt"]);
    assert_eq!(
        std::fs::read_to_string(d.path().join("kept.txt")).unwrap(),
        "old"
    );
    let o = write(libc::RLIM_INFINITY, "kept.txt");
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert_eq!(
        std::fs::read_to_string(d.path().join("kept.txt"))
            .unwrap()
            .len(),
        10000
    );
    assert_eq!(entries(d.path()), ["kept.txt"]);
}
