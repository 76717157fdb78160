//! End-to-end tests of `tally bench`: the smoke suite through the whole
//! pipeline (run, JSON, CSV, SVG, `report` round trip), and its bad-input
//! behaviour (failing benchmark, missing executor, Ctrl-C).

mod common;

use std::process::{Command, Stdio};

use common::{read_json, repo, run, smoke_suite, tally, text};

#[test]
fn smoke_suite_runs_end_to_end_and_the_report_round_trips() {
    let d = tempfile::tempdir().unwrap();
    let out = d.path().join("run");
    let command = format!(
        "ext@{}={{vm}} -cp {{classpath}} {{harness}} {{bench}} {{iterations}} {{inner}}",
        tally()
    );
    let o = run(&[
        "bench",
        smoke_suite().as_str(),
        "-n",
        "3",
        "-i",
        "3",
        "--tally",
        "base",
        "--command",
        &command,
        "--out",
        out.to_str().unwrap(),
    ]);
    let table = text(&o.stdout);
    assert!(
        o.status.success(),
        "stdout:\n{table}\nstderr:\n{}",
        text(&o.stderr)
    );
    for needle in [
        "benchmark",
        "mean ± CI",
        "Fibonacci",
        "Collatz",
        "QuickSort",
        "TreeNodes",
        "Phases",
        "1 (baseline)",
    ] {
        assert!(table.contains(needle), "{needle:?} missing from:\n{table}");
    }
    assert!(
        table.contains("geometric mean of ratios ext / base over 5 benchmark(s)"),
        "{table}"
    );
    assert!(
        table.contains("paired by invocation round:") && table.contains("interval over 3 rounds"),
        "{table}"
    );
    assert!(
        table.contains("paired, robust (Hodges-Lehmann per benchmark):")
            && table.contains("bootstrap interval over 3 rounds"),
        "{table}"
    );

    let json = read_json(&out.join("results.json"));
    assert_eq!(json["format"], "tally-bench/1");
    assert_eq!(json["complete"], true);
    let invocations = json["invocations"].as_array().unwrap();
    assert_eq!(invocations.len(), 5 * 2 * 3);
    for inv in invocations {
        assert_eq!(inv["outcome"], "ok", "{inv}");
        let times = inv["iterations_us"].as_array().unwrap();
        assert_eq!(times.len(), 3);
        assert!(times.iter().all(|t| t.as_f64().unwrap() > 0.0));
        assert!(inv["max_rss_kib"].as_u64().unwrap() > 0);
        assert!(inv["wall_s"].as_f64().unwrap() > 0.0);
    }
    // Each (round, benchmark) runs both executors back to back, the first one rotating:
    // base first in round 1 on the first benchmark, ext on the second, and so on.
    let order: Vec<&str> = invocations
        .iter()
        .map(|i| i["executor"].as_str().unwrap())
        .collect();
    for (k, pair) in order.chunks(2).enumerate() {
        let (round, bench) = (k / 5, k % 5);
        let want = if (round + bench) % 2 == 0 {
            ["base", "ext"]
        } else {
            ["ext", "base"]
        };
        assert_eq!(pair, want, "pair {k} of {order:?}");
    }
    // The external command got the template filled in.
    let ext = invocations.iter().find(|i| i["executor"] == "ext").unwrap();
    let argv: Vec<&str> = ext["argv"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap())
        .collect();
    assert_eq!(argv[0], tally());
    assert_eq!(&argv[argv.len() - 4..], ["Harness", "Fibonacci", "3", "1"]);

    let iterations_csv = std::fs::read_to_string(out.join("iterations.csv")).unwrap();
    assert_eq!(iterations_csv.lines().count(), 1 + 5 * 2 * 3 * 3);
    assert!(iterations_csv.starts_with("benchmark,executor,invocation,iteration,time_us"));
    let summary_csv = std::fs::read_to_string(out.join("summary.csv")).unwrap();
    // 5 benchmarks × 2 executors, the geometric mean, and the same paired by round, plainly
    // and robustly.
    assert_eq!(summary_csv.lines().count(), 1 + 5 * 2 + 3);
    assert!(summary_csv.contains("\"(geometric mean, paired by round)\",ext,mean,3,"));
    assert!(summary_csv.contains("\"(geometric mean, paired by round, robust)\",ext,mean,3,"));
    for svg in ["ratios.svg", "warmup.svg"] {
        let s = std::fs::read_to_string(out.join(svg)).unwrap();
        assert!(
            s.starts_with("<svg") && s.trim_end().ends_with("</svg>"),
            "{svg}"
        );
    }
    assert!(std::fs::read_to_string(out.join("ratios.svg"))
        .unwrap()
        .contains("QuickSort"));

    // The report recomputes the same table, CSV and plots from the JSON alone.
    let again = d.path().join("again");
    let r = run(&[
        "bench",
        "report",
        out.join("results.json").to_str().unwrap(),
        "--out",
        again.to_str().unwrap(),
    ]);
    assert!(r.status.success(), "{}", text(&r.stderr));
    assert_eq!(text(&r.stdout), table);
    for f in [
        "table.txt",
        "iterations.csv",
        "invocations.csv",
        "summary.csv",
        "ratios.svg",
        "warmup.svg",
    ] {
        assert_eq!(
            std::fs::read(out.join(f)).unwrap(),
            std::fs::read(again.join(f)).unwrap(),
            "{f} differs between run and report"
        );
    }
    // Other analysis settings apply without re-running.
    let r = run(&[
        "bench",
        "report",
        out.join("results.json").to_str().unwrap(),
        "--out",
        again.to_str().unwrap(),
        "--baseline",
        "ext",
        "--metric",
        "startup",
    ]);
    assert!(r.status.success(), "{}", text(&r.stderr));
    let t = text(&r.stdout);
    assert!(
        t.contains("first-iteration time") && t.contains("geometric mean of ratios base / ext"),
        "{t}"
    );
}

#[test]
fn lockstep_runs_tally_executors_turn_by_turn_and_refuses_other_vms() {
    let d = tempfile::tempdir().unwrap();
    let out = d.path().join("run");
    let o = run(&[
        "bench",
        smoke_suite().as_str(),
        "-n",
        "2",
        "-i",
        "3",
        "-b",
        "Fibonacci,QuickSort",
        "--lockstep",
        "--tally",
        "base",
        "--tally",
        "stats=--gc-stats",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let json = read_json(&out.join("results.json"));
    assert!(
        json["settings"]["lockstep"]["cpu"].as_u64().is_some(),
        "{json}"
    );
    assert_eq!(json["settings"]["lockstep"]["slice_ms"], 50);
    // The machine is described before pinning: all its CPUs, not the one used.
    assert_eq!(
        json["machine"]["cpus"].as_u64().unwrap() as usize,
        std::thread::available_parallelism().unwrap().get()
    );
    let invocations = json["invocations"].as_array().unwrap();
    assert_eq!(invocations.len(), 2 * 2 * 2);
    for inv in invocations {
        assert_eq!(inv["outcome"], "ok", "{inv}");
        assert_eq!(inv["iterations_us"].as_array().unwrap().len(), 3);
        assert_eq!(inv["argv"][1], "--cpu-clock", "{inv}");
        assert!(inv["wall_s"].as_f64().unwrap() > 0.0);
    }
    let table = text(&o.stdout);
    assert!(table.contains("paired by invocation round:"), "{table}");
    assert!(
        table.contains("ran together on CPU") && table.contains("in turns of 50 ms"),
        "{table}"
    );

    let command = format!(
        "ext@{}={{vm}} -cp {{classpath}} {{harness}} {{bench}} {{iterations}} {{inner}}",
        tally()
    );
    let refused = run(&[
        "bench",
        smoke_suite().as_str(),
        "--lockstep",
        "--tally",
        "base",
        "--command",
        &command,
        "--out",
        d.path().join("refused").to_str().unwrap(),
    ]);
    assert_eq!(refused.status.code(), Some(2), "{}", text(&refused.stderr));
    assert!(
        text(&refused.stderr).contains("executor \"ext\" is not a Tally"),
        "{}",
        text(&refused.stderr)
    );
}

#[test]
fn three_executors_are_compared_with_anova_and_tukey() {
    let d = tempfile::tempdir().unwrap();
    let out = d.path().join("run");
    let o = run(&[
        "bench",
        smoke_suite().as_str(),
        "-b",
        "Fibonacci",
        "-n",
        "2",
        "-i",
        "2",
        "--tally",
        "a",
        "--tally",
        "b=--max-stack-depth 5000",
        "--tally",
        "c=--heap-size 256M",
        "--out",
        out.to_str().unwrap(),
        "--quiet",
    ]);
    let table = text(&o.stdout);
    assert!(o.status.success(), "{table}\n{}", text(&o.stderr));
    assert!(table.contains("Tukey HSD after one-way ANOVA"), "{table}");
    assert!(
        table.contains("one-way ANOVA p per benchmark: Fibonacci"),
        "{table}"
    );
    let json = read_json(&out.join("results.json"));
    let flags = &json["executors"][1]["flags"];
    assert_eq!(flags, &serde_json::json!(["--max-stack-depth", "5000"]));
}

#[test]
fn a_failing_benchmark_is_reported_with_its_output_and_the_run_goes_on() {
    let d = tempfile::tempdir().unwrap();
    let p = d.path();
    std::fs::write(p.join("Broken.som"), "Broken = ( run: inner = ( ^false ) )").unwrap();
    let smoke = repo().join("bench/smoke");
    std::fs::write(
        p.join("suite.toml"),
        format!(
            "classpath = [{:?}, \".\"]\niterations = 2\n[[benchmark]]\nname = \"Broken\"\n[[benchmark]]\nname = \"Fibonacci\"\n",
            smoke.display().to_string()
        ),
    )
    .unwrap();
    let out = p.join("run");
    let o = run(&[
        "bench",
        p.join("suite.toml").to_str().unwrap(),
        "-n",
        "3",
        "--out",
        out.to_str().unwrap(),
    ]);
    let table = text(&o.stdout);
    assert_eq!(o.status.code(), Some(1), "{table}\n{}", text(&o.stderr));
    assert!(table.contains("failed invocations (2):"), "{table}");
    assert!(
        table.contains("Broken on tally, invocation 1: exit status 1"),
        "{table}"
    );
    assert!(
        table.contains("Broken: result did not verify in iteration 1"),
        "{table}"
    );
    assert!(table.contains("FAILED"), "{table}");
    // Failing twice from the start means a deterministic failure: no third try.
    assert!(
        text(&o.stderr).contains("not run again"),
        "{}",
        text(&o.stderr)
    );
    let json = read_json(&out.join("results.json"));
    let invs = json["invocations"].as_array().unwrap();
    let outcomes: Vec<(&str, &str)> = invs
        .iter()
        .map(|i| {
            (
                i["benchmark"].as_str().unwrap(),
                i["outcome"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        outcomes,
        [
            ("Broken", "failed"),
            ("Fibonacci", "ok"),
            ("Broken", "failed"),
            ("Fibonacci", "ok"),
            ("Fibonacci", "ok")
        ]
    );
}

#[test]
fn an_executor_that_cannot_start_is_an_error_before_anything_runs() {
    let d = tempfile::tempdir().unwrap();
    let out = d.path().join("run");
    let o = run(&[
        "bench",
        smoke_suite().as_str(),
        "--tally",
        "t",
        "--command",
        "ghost=/nonexistent/som-vm {bench}",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(2));
    let err = text(&o.stderr);
    assert!(
        err.contains("executor ghost: cannot start \"/nonexistent/som-vm\""),
        "{err}"
    );
    assert!(!out.exists(), "nothing should have been written");

    let o = run(&["bench", "/nonexistent/suite.toml"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(text(&o.stderr).contains("no such suite file or directory"));
}

#[test]
fn ctrl_c_writes_what_was_measured_so_far() {
    let d = tempfile::tempdir().unwrap();
    let out = d.path().join("run");
    let child = Command::new(tally())
        .args([
            "bench",
            smoke_suite().as_str(),
            "-n",
            "100",
            "-i",
            "1",
            "-b",
            "Fibonacci",
        ])
        .args(["--out", out.to_str().unwrap()])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let json = out.join("results.json");
    let o = common::interrupt_once_measured(child, &json, "invocations", 2);
    assert_eq!(o.status.code(), Some(130), "{}", text(&o.stderr));
    let table = text(&o.stdout);
    assert!(table.contains("INTERRUPTED: partial results"), "{table}");
    let v = read_json(&json);
    assert_eq!(v["complete"], false);
    let invs = v["invocations"].as_array().unwrap();
    assert!(invs.len() >= 2 && invs.len() < 100);
    assert!(invs.iter().filter(|i| i["outcome"] == "ok").count() >= 2);
    assert!(out.join("warmup.svg").exists() && out.join("summary.csv").exists());
}

#[test]
fn help_of_both_commands_stays_useful() {
    let o = run(&["--help"]);
    let h = text(&o.stdout);
    assert!(
        o.status.success() && h.contains("--classpath") && h.contains("tally bench"),
        "{h}"
    );
    let o = run(&["bench", "--help"]);
    let h = text(&o.stdout);
    assert!(o.status.success(), "{}", text(&o.stderr));
    for needle in [
        "--invocations",
        "--tally",
        "--command",
        "{classpath_args}",
        "tally bench report",
        "--steady-window",
    ] {
        assert!(h.contains(needle), "{needle:?} missing from:\n{h}");
    }
    let o = run(&["bench", "report", "--help"]);
    assert!(o.status.success() && text(&o.stdout).contains("RESULTS.json"));
}
