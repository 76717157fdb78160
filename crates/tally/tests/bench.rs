//! End-to-end tests of `tally bench`: the smoke suite through the whole
//! pipeline (run, JSON, CSV, SVG, `report` round trip), and its bad-input
//! behaviour (failing benchmark, missing executor, Ctrl-C).

mod common;

use std::path::Path;
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
    let header: Vec<&str> = table
        .lines()
        .find(|l| l.starts_with("benchmark "))
        .unwrap_or_else(|| panic!("{table}"))
        .split_whitespace()
        .collect();
    assert!(
        header
            .windows(4)
            .any(|w| w == ["median", "min", "max", "outliers"]),
        "{header:?}"
    );
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
    assert!(summary_csv
        .lines()
        .next()
        .unwrap()
        .ends_with(",max_rss_kib,min_us,max_us,outliers"));
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
    let r = report_again(&out, &again, &[]);
    assert_eq!(text(&r.stdout), table);
    for f in [
        "table.txt",
        "iterations.csv",
        "invocations.csv",
        "summary.csv",
        "warnings.csv",
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
    let r = report_again(&out, &again, &["--baseline", "ext", "--metric", "startup"]);
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
    let h = text(&o.stdout);
    assert!(o.status.success(), "{}", text(&o.stderr));
    for needle in ["RESULTS.json", "--markdown", "--force", "exit status 1"] {
        assert!(h.contains(needle), "{needle:?} missing from:\n{h}");
    }
}

/// A stand-in VM for `--command NAME@SCRIPT={vm} NAME {bench} {iterations}`: it prints the
/// iteration times each benchmark is scripted to, counting its own invocations per executor
/// and benchmark in files next to it, so each warning can be made to fire for certain.
const FAKE_VM: &str = r#"#!/bin/sh
dir=$(dirname "$0")
exe=$1 bench=$2 iterations=$3
count="$dir/count-$exe-$bench"
n=$(cat "$count" 2>/dev/null || echo 0)
n=$((n + 1))
echo "$n" > "$count"
first=""
case $bench in
  # Invocations whose means are 2, 3, 4, … ms: a wide interval.
  Spread) t=$((1001 + n * 1000)) ;;
  # A first iteration four times as long as the rest.
  Warm) t=5003; first=20011 ;;
  # b is 10 % faster than a, except in its fourth invocation, three times slower: with it
  # the two are not distinguishable, without it b is faster.
  Outlier) if [ "$exe" = a ]; then t=$((5000 + n)); else t=$((4500 + n)); [ "$n" -eq 4 ] && t=15001; fi ;;
  # A VM that sleeps most of its wall time (b only).
  Waits) [ "$exe" = b ] && sleep 0.3; t=5003 ;;
esac
i=1
while [ "$i" -le "$iterations" ]; do
  v=$t
  [ "$i" -eq 1 ] && [ -n "$first" ] && v=$first
  echo "$bench: iterations=1 runtime: ${v}us"
  i=$((i + 1))
done
"#;

/// Writes the fake VM and a suite of `benchmarks` for it into `dir`; answers the suite file
/// and the `--command` specifications of executors a and b.
fn fake_vm_suite(dir: &std::path::Path, benchmarks: &[&str]) -> (String, [String; 2]) {
    use std::os::unix::fs::PermissionsExt;
    let vm = dir.join("fake-vm");
    std::fs::write(&vm, FAKE_VM).unwrap();
    std::fs::set_permissions(&vm, std::fs::Permissions::from_mode(0o755)).unwrap();
    let mut suite = format!(
        "classpath = [{:?}]\niterations = 5\n",
        repo().join("bench/smoke").display().to_string()
    );
    for b in benchmarks {
        suite.push_str(&format!("[[benchmark]]\nname = \"{b}\"\n"));
    }
    let file = dir.join("fake.toml");
    std::fs::write(&file, suite).unwrap();
    let command = |name: &str| {
        format!(
            "{name}@{}={{vm}} {name} {{bench}} {{iterations}}",
            vm.display()
        )
    };
    (file.display().to_string(), [command("a"), command("b")])
}

/// The warning lines of a report, without the list's dashes.
fn warning_lines(table: &str) -> Vec<String> {
    let Some((_, list)) = table.split_once("\nwarnings (") else {
        return Vec::new();
    };
    list.lines()
        .filter_map(|l| l.strip_prefix("  - "))
        .map(String::from)
        .collect()
}

#[test]
fn warnings_name_wide_intervals_warm_up_outliers_and_a_child_that_waited() {
    let d = tempfile::tempdir().unwrap();
    let (suite, [a, b]) = fake_vm_suite(d.path(), &["Spread", "Warm", "Outlier", "Waits"]);
    let out = d.path().join("run");
    let o = run(&[
        "bench",
        &suite,
        "-n",
        "5",
        "--command",
        &a,
        "--command",
        &b,
        "--out",
        out.to_str().unwrap(),
        "--quiet",
    ]);
    let table = text(&o.stdout);
    assert!(o.status.success(), "{table}\n{}", text(&o.stderr));
    let warnings = warning_lines(&table);
    let about = |subject: &str, what: &str| {
        warnings
            .iter()
            .any(|w| w.starts_with(&format!("{subject}: ")) && w.contains(what))
    };
    // Means of 2, 3, 4, 5 and 6 ms: ±49 %.
    for exe in ["a", "b"] {
        assert!(
            about(
                &format!("Spread × {exe}"),
                "confidence interval is ±49.1% of the mean"
            ),
            "{table}"
        );
        assert!(
            about(
                &format!("Warm × {exe}"),
                "its first iteration takes 300% longer than the rest, outside the rest's 95% interval in 5 of 5 invocations"
            ),
            "{table}"
        );
        assert!(about(&format!("Warm × {exe}"), "--warmup 1"), "{table}");
        assert!(
            !about(&format!("Warm × {exe}"), "confidence interval"),
            "{table}"
        );
        assert!(
            !about(&format!("Spread × {exe}"), "first iteration"),
            "{table}"
        );
    }
    assert!(
        about("Outlier × b", "invocation(s) #4 (15.00 ms, modified Z +")
            && about(
                "Outlier × b",
                "b vs a: not significantly different with them, significantly faster without"
            ),
        "{table}"
    );
    assert!(!about("Outlier × a", "outliers"), "{table}");
    let outlier_row = table
        .lines()
        .skip_while(|l| !l.starts_with("Outlier "))
        .nth(1)
        .expect(&table);
    assert!(outlier_row.contains("1 (#4) !"), "{outlier_row}");
    assert!(about("Waits × b", "it ran on a CPU for only"), "{table}");
    // Warnings come from the results file alone: the report repeats them, and writes them
    // to warnings.csv.
    let again = d.path().join("again");
    let r = report_again(&out, &again, &[]);
    assert_eq!(warning_lines(&text(&r.stdout)), warnings);
    let csv = std::fs::read_to_string(again.join("warnings.csv")).unwrap();
    assert!(
        csv.starts_with("benchmark,executor,warning,finding,advice\n"),
        "{csv}"
    );
    assert!(csv.contains("Outlier,b,outliers,"), "{csv}");
    assert!(csv.contains("Warm,a,warm-up-included,"), "{csv}");
    // Dropping the warm-up as advised silences that warning.
    let r = report_again(&out, &again, &["--warmup", "1"]);
    assert!(
        !warning_lines(&text(&r.stdout))
            .iter()
            .any(|w| w.contains("first iteration")),
        "{}",
        text(&r.stdout)
    );
}

/// `tally bench report OUT/results.json --out AGAIN EXTRA…`, which must succeed.
fn report_again(out: &Path, again: &Path, extra: &[&str]) -> std::process::Output {
    let results = out.join("results.json");
    let mut args = vec![
        "bench",
        "report",
        results.to_str().unwrap(),
        "--out",
        again.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    let r = run(&args);
    assert!(r.status.success(), "{}", text(&r.stderr));
    r
}

#[test]
fn iterations_too_short_for_the_clocks_resolution_are_warned_about() {
    let d = tempfile::tempdir().unwrap();
    let p = d.path();
    // An iteration that does nothing: a few microseconds, where the harness counts whole ones.
    std::fs::write(
        p.join("Nothing.som"),
        "Nothing = ( run: inner = ( ^true ) )",
    )
    .unwrap();
    std::fs::write(
        p.join("suite.toml"),
        format!(
            "classpath = [{:?}, \".\"]\niterations = 3\n[[benchmark]]\nname = \"Nothing\"\n[[benchmark]]\nname = \"Fibonacci\"\n",
            repo().join("bench/smoke").display().to_string()
        ),
    )
    .unwrap();
    let out = p.join("run");
    let o = run(&[
        "bench",
        p.join("suite.toml").to_str().unwrap(),
        "-n",
        "2",
        "--out",
        out.to_str().unwrap(),
        "--quiet",
    ]);
    let table = text(&o.stdout);
    assert!(o.status.success(), "{table}\n{}", text(&o.stderr));
    let warnings = warning_lines(&table);
    // A fast build runs `Nothing` in under a microsecond: the warning then says the
    // iterations took no time at all.
    let resolution = |bench: &str| {
        warnings.iter().find(|w| {
            w.starts_with(&format!("{bench} × tally: its iterations take"))
                && (w.contains("steps of 1 µs")
                    || w.contains("one step of the harness's clock (1 µs)"))
        })
    };
    let nothing = resolution("Nothing").unwrap_or_else(|| panic!("{table}"));
    assert!(nothing.contains("`--inner Nothing="), "{nothing}");
    // fib(20) takes milliseconds, even in a debug build on a busy machine.
    assert!(resolution("Fibonacci").is_none(), "{table}");
}

#[test]
fn report_markdown_writes_the_table_and_its_warnings_and_refuses_bad_files() {
    let d = tempfile::tempdir().unwrap();
    let p = d.path();
    let (suite, [a, b]) = fake_vm_suite(p, &["Spread", "Warm"]);
    let out = p.join("run");
    let o = run(&[
        "bench",
        &suite,
        "-n",
        "2",
        "--command",
        &a,
        "--command",
        &b,
        "--out",
        out.to_str().unwrap(),
        "--quiet",
    ]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let json = out.join("results.json");
    let json = json.to_str().unwrap();

    let md = run(&["bench", "report", "--markdown", json]);
    assert!(md.status.success(), "{}", text(&md.stderr));
    let md = text(&md.stdout);
    let lines: Vec<&str> = md.lines().collect();
    let header = lines
        .iter()
        .position(|l| {
            l.starts_with(
                "| benchmark | executor | ok | mean ± CI | median | min | max | outliers |",
            )
        })
        .unwrap_or_else(|| panic!("{md}"));
    assert!(
        lines[header + 1].starts_with("| :-- | :-- | --: | --: |"),
        "{md}"
    );
    assert!(
        lines[header + 2].starts_with("| Spread | a | 2/2 |"),
        "{md}"
    );
    assert!(lines[header + 3].starts_with("|  | b | 2/2 |"), "{md}");
    assert!(lines[header + 4].starts_with("| Warm | a | 2/2 |"), "{md}");
    assert!(md.contains("\n**Warnings ("), "{md}");
    assert!(
        md.contains("- **Spread × a**: its 95% confidence interval is ±"),
        "{md}"
    );
    assert!(
        md.contains("- **Warm × b**: its first iteration takes 300% longer"),
        "{md}"
    );
    // Nothing else was written beside the results.
    assert!(!out.join("summary.md").exists());

    // -o writes the same text to a file, and replaces a file only with --force.
    let file = p.join("RESULTS.md");
    let o = run(&[
        "bench",
        "report",
        json,
        "--markdown",
        "-o",
        file.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert_eq!(std::fs::read_to_string(&file).unwrap(), md);
    std::fs::write(&file, "mine").unwrap();
    let o = run(&[
        "bench",
        "report",
        json,
        "--markdown",
        "-o",
        file.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        text(&o.stderr).contains("pass --force"),
        "{}",
        text(&o.stderr)
    );
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "mine");
    let o = run(&[
        "bench",
        "report",
        json,
        "--markdown",
        "-o",
        file.to_str().unwrap(),
        "--force",
    ]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert_eq!(std::fs::read_to_string(&file).unwrap(), md);

    // Damaged or foreign files: the reason, exit status 1, nothing written.
    let whole = std::fs::read_to_string(json).unwrap();
    let mut no_executors = read_json(std::path::Path::new(json));
    no_executors["executors"] = serde_json::json!([]);
    let bad = [
        (
            "no-executors.json",
            no_executors.to_string(),
            "malformed results: no executors",
        ),
        ("not-json.json", "this is not JSON".to_string(), "not JSON"),
        (
            "truncated.json",
            whole[..whole.len() / 2].to_string(),
            "not JSON",
        ),
        (
            "foreign.json",
            r#"{"name": "a package.json"}"#.to_string(),
            "not a tally bench results file",
        ),
        (
            "other-version.json",
            r#"{"format": "tally-bench/99"}"#.to_string(),
            "results format \"tally-bench/99\"",
        ),
        (
            "wrong-shape.json",
            r#"{"format": "tally-bench/1", "invocations": 3}"#.to_string(),
            "malformed results",
        ),
    ];
    for (name, content, reason) in bad {
        let path = p.join(name);
        std::fs::write(&path, content).unwrap();
        let target = p.join(format!("{name}.md"));
        let o = run(&[
            "bench",
            "report",
            "--markdown",
            path.to_str().unwrap(),
            "-o",
            target.to_str().unwrap(),
        ]);
        assert_eq!(o.status.code(), Some(1), "{name}: {}", text(&o.stderr));
        assert!(
            text(&o.stderr).contains(reason),
            "{name}: {}",
            text(&o.stderr)
        );
        assert!(o.stdout.is_empty(), "{name}");
        assert!(!target.exists(), "{name}: nothing may be written");
        let o = run(&["bench", "report", "--markdown", path.to_str().unwrap()]);
        assert_eq!(o.status.code(), Some(1), "{name}");
        assert!(o.stdout.is_empty(), "{name}");
        // The plain report refuses them the same way, before making its directory.
        let dir = p.join(format!("{name}-report"));
        let o = run(&[
            "bench",
            "report",
            path.to_str().unwrap(),
            "--out",
            dir.to_str().unwrap(),
        ]);
        assert_eq!(o.status.code(), Some(1), "{name}");
        assert!(!dir.exists(), "{name}: nothing may be written");
    }
}
