//! End-to-end tests of `tally experiment`: both experiments on the smoke suite (our own small
//! SOM benchmarks, no SOM checkout needed) with tiny grids, and their bad-input behaviour
//! (a failing benchmark, an output directory in use, a missing $SOM, Ctrl-C).

mod common;

use std::process::{Command, Stdio};

use common::{read_json, repo, run, smoke_suite, tally, text};
use serde_json::Value;

fn num(v: &Value) -> f64 {
    v.as_f64().unwrap_or_else(|| panic!("not a number: {v}"))
}

#[test]
fn cbs_experiment_on_the_smoke_suite() {
    let d = tempfile::tempdir().unwrap();
    let out = d.path().join("cbs");
    let o = run(&[
        "experiment",
        "cbs",
        "--suite",
        &smoke_suite(),
        "--benchmarks",
        "Fibonacci,QuickSort",
        "--strides",
        "1,3",
        "--samples",
        "1,4",
        "-n",
        "1",
        "-o",
        out.to_str().unwrap(),
    ]);
    let md = text(&o.stdout);
    assert!(o.status.success(), "{md}\n{}", text(&o.stderr));
    for f in ["cbs.md", "cbs.json", "cbs.csv"] {
        assert!(out.join(f).is_file(), "{f} missing");
    }
    assert_eq!(std::fs::read_to_string(out.join("cbs.md")).unwrap(), md);
    assert!(
        !out.join("profiles").exists(),
        "profiles are deleted once read"
    );
    for needle in [
        "## Average over 2 benchmarks",
        "## Fibonacci",
        "## QuickSort",
        "| STRIDE \\ SAMPLES |",
        "1:1 † (timer only)",
        "overhead % [95 % CI]",
    ] {
        assert!(md.contains(needle), "{needle:?} missing from:\n{md}");
    }

    let json = read_json(&out.join("cbs.json"));
    assert_eq!(json["format"], "tally-experiment-cbs/1");
    assert_eq!(json["complete"], true);
    let exact = json["exact"].as_array().unwrap();
    assert_eq!(exact.len(), 2);
    for e in exact {
        assert!(e["edges"].as_u64().unwrap() > 0, "{e}");
        assert!(e["calls"].as_u64().unwrap() >= e["edges"].as_u64().unwrap());
    }
    let runs = json["runs"].as_array().unwrap();
    // Per benchmark: one exhaustive run, then 4 cells × (baseline + CBS).
    assert_eq!(runs.len(), 2 * (1 + 4 * 2));
    let kinds: Vec<&str> = runs.iter().map(|r| r["kind"].as_str().unwrap()).collect();
    assert_eq!(&kinds[..4], ["exact", "exact", "baseline", "cbs"]);
    for r in runs {
        assert!(num(&r["cpu_s"]) > 0.0 && num(&r["wall_s"]) > 0.0, "{r}");
        if r["kind"] == "cbs" {
            let overlap = num(&r["overlap"]);
            assert!((0.0..=1.0).contains(&overlap), "{r}");
            assert!(r["argv"].as_array().unwrap().iter().any(|a| a == "--cbs"));
        }
    }
    let cells = json["summary"]["average"].as_array().unwrap();
    assert_eq!(cells.len(), 4);
    assert_eq!(cells[0]["timer_only"], true);
    for c in cells {
        let m = num(&c["overlap_mean"]);
        assert!((0.0..=1.0).contains(&m), "{c}");
        assert!(num(&c["overhead"]["percent"]).is_finite(), "{c}");
    }

    let csv = std::fs::read_to_string(out.join("cbs.csv")).unwrap();
    let lines: Vec<&str> = csv.lines().collect();
    assert_eq!(lines.len(), 1 + 2 * 4 + 4, "{csv}");
    assert!(lines[0].starts_with("benchmark,stride,samples,timer_only,runs,overlap_mean_pct"));
    for l in &lines[1..] {
        let overlap: f64 = l.split(',').nth(5).unwrap().parse().unwrap();
        assert!((0.0..=100.0).contains(&overlap), "{l}");
    }

    // The same directory again: refused without --force.
    let again = run(&[
        "experiment",
        "cbs",
        "--suite",
        &smoke_suite(),
        "--benchmarks",
        "Fibonacci",
        "--config",
        "1:1",
        "-o",
        out.to_str().unwrap(),
    ]);
    assert_eq!(again.status.code(), Some(2));
    assert!(
        text(&again.stderr).contains("--force"),
        "{}",
        text(&again.stderr)
    );
}

/// `--tier baseline` runs the measured runs compiled; the exhaustive reference still
/// interprets (exact bytecode counts come from the interpreter).
#[test]
fn cbs_experiment_measures_the_chosen_tier() {
    let d = tempfile::tempdir().unwrap();
    let out = d.path().join("cbs");
    let o = run(&[
        "experiment",
        "cbs",
        "--suite",
        &smoke_suite(),
        "--benchmarks",
        "Fibonacci",
        "--config",
        "3:4",
        "-n",
        "1",
        "--tier",
        "baseline",
        "-o",
        out.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let json = read_json(&out.join("cbs.json"));
    for r in json["runs"].as_array().unwrap() {
        let argv = r["argv"].as_array().unwrap();
        let compiled = argv.iter().any(|a| a == "--tier=baseline");
        assert_eq!(compiled, r["kind"] != "exact", "{r}");
        if r["kind"] == "cbs" {
            assert!((0.0..=1.0).contains(&num(&r["overlap"])), "{r}");
        }
    }
}

#[test]
fn sampling_experiment_on_the_smoke_suite() {
    let d = tempfile::tempdir().unwrap();
    let out = d.path().join("sampling");
    let o = run(&[
        "experiment",
        "sampling",
        "--suite",
        &smoke_suite(),
        "--benchmarks",
        "QuickSort,Fibonacci",
        "--triggers",
        "timer-wall",
        "--mechanisms",
        "immediate,polling",
        "-n",
        "2",
        "--reference-runs",
        "1",
        "--keep-profiles",
        "-o",
        out.to_str().unwrap(),
    ]);
    let md = text(&o.stdout);
    assert!(o.status.success(), "{md}\n{}", text(&o.stderr));
    for f in ["sampling.md", "sampling.json", "sampling.csv"] {
        assert!(out.join(f).is_file(), "{f} missing");
    }
    // The order given, not the suite's.
    let q = md.find("## QuickSort").expect("QuickSort section");
    let f = md.find("## Fibonacci").expect("Fibonacci section");
    assert!(q < f, "{md}");
    for needle in [
        "| timer-wall/immediate |",
        "| timer-wall/polling   |",
        "Reference: 1 run(s)",
        "stability %",
    ] {
        assert!(md.contains(needle), "{needle:?} missing from:\n{md}");
    }
    // --keep-profiles: every profile stays.
    let kept = std::fs::read_dir(out.join("profiles/QuickSort"))
        .unwrap()
        .count();
    assert_eq!(kept, 1 + 2 * 2);

    let json = read_json(&out.join("sampling.json"));
    assert_eq!(json["format"], "tally-experiment-sampling/1");
    assert_eq!(json["complete"], true);
    for r in json["references"].as_array().unwrap() {
        assert!(r["samples"].as_u64().unwrap() > 0, "{r}");
    }
    let runs = json["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 2 * (1 + 2 * 2 * 2));
    let mut sampled = 0;
    for r in runs {
        if r["kind"] == "baseline" {
            assert!(r.get("sampling").is_none());
            continue;
        }
        let s = &r["sampling"];
        let (taken, recorded, dropped) = (
            s["taken"].as_u64().unwrap(),
            s["recorded"].as_u64().unwrap(),
            s["dropped"].as_u64().unwrap(),
        );
        assert_eq!(taken, recorded + dropped, "accounting: {r}");
        assert_eq!(s["balanced"], true);
        assert_eq!(s["samples_in_profile"].as_u64().unwrap(), recorded);
        if r["kind"] == "sampled" {
            sampled += 1;
            for m in ["weighted", "unweighted"] {
                assert!((0.0..=1.0).contains(&num(&s[m])), "{m}: {r}");
            }
        }
    }
    assert_eq!(sampled, 2 * 2 * 2);
    for c in json["summary"]["average"].as_array().unwrap() {
        let st = num(&c["stability"]);
        assert!((0.0..=1.0).contains(&st), "{c}");
        assert!((0.0..=1.0).contains(&num(&c["weighted"]["mean"])), "{c}");
    }
    let csv = std::fs::read_to_string(out.join("sampling.csv")).unwrap();
    assert_eq!(csv.lines().count(), 1 + 2 * 2 + 2, "{csv}");
}

#[test]
fn a_failing_run_stops_the_experiment_with_its_output() {
    let d = tempfile::tempdir().unwrap();
    let p = d.path();
    std::fs::write(p.join("Broken.som"), "Broken = ( run: inner = ( ^false ) )").unwrap();
    std::fs::write(
        p.join("suite.toml"),
        format!(
            "classpath = [{:?}, \".\"]\n[[benchmark]]\nname = \"Broken\"\n",
            repo().join("bench/smoke").display().to_string()
        ),
    )
    .unwrap();
    let out = p.join("out");
    let o = run(&[
        "experiment",
        "cbs",
        "--suite",
        p.join("suite.toml").to_str().unwrap(),
        "--benchmarks",
        "Broken",
        "--config",
        "3:16",
        "-o",
        out.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(1));
    let err = text(&o.stderr);
    assert!(
        err.contains("Broken exhaustive failed: exit status 1"),
        "{err}"
    );
    assert!(err.contains("result did not verify"), "{err}");
    let json = read_json(&out.join("cbs.json"));
    assert_eq!(json["complete"], false);
    assert!(json["stopped"].as_str().unwrap().contains("exit status 1"));
    assert!(out.join("cbs.md").is_file());

    let o = run(&[
        "experiment",
        "sampling",
        "--suite",
        &smoke_suite(),
        "--benchmarks",
        "Nope",
        "-o",
        p.join("x").to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        text(&o.stderr).contains("no benchmark Nope"),
        "{}",
        text(&o.stderr)
    );
}

#[test]
fn the_awfy_suite_names_som_when_it_is_unset() {
    let d = tempfile::tempdir().unwrap();
    let o = Command::new(tally())
        .args(["experiment", "cbs", "--suite"])
        .arg(repo().join("bench/awfy.toml"))
        .arg("-o")
        .arg(d.path().join("x"))
        .env_remove("SOM")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    let err = text(&o.stderr);
    assert!(err.contains("environment variable SOM"), "{err}");
    assert!(
        !d.path().join("x").exists(),
        "nothing is written before the suite loads"
    );
}

#[test]
fn ctrl_c_keeps_what_was_measured() {
    let d = tempfile::tempdir().unwrap();
    let out = d.path().join("run");
    let child = Command::new(tally())
        .args(["experiment", "cbs", "--suite", &smoke_suite()])
        .args(["--benchmarks", "Fibonacci", "--config", "1:1", "-n", "100"])
        .args(["-o", out.to_str().unwrap()])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let json = out.join("cbs.json");
    let o = common::interrupt_once_measured(child, &json, "runs", 3);
    assert_eq!(o.status.code(), Some(130), "{}", text(&o.stderr));
    assert!(text(&o.stdout).contains("**incomplete**: interrupted"));
    let v = read_json(&json);
    assert_eq!(v["complete"], false);
    let runs = v["runs"].as_array().unwrap().len();
    assert!((3..201).contains(&runs), "{runs}");
    assert!(out.join("cbs.csv").is_file() && out.join("cbs.md").is_file());
}

#[test]
fn help_explains_the_metrics() {
    let o = run(&["experiment", "cbs", "--help"]);
    let h = text(&o.stdout);
    assert!(o.status.success());
    for needle in [
        "overlap %",
        "overhead %",
        "--strides",
        "--config",
        "Examples:",
        "timer",
    ] {
        assert!(h.contains(needle), "{needle:?} missing from:\n{h}");
    }
    let o = run(&["experiment", "sampling", "--help"]);
    let h = text(&o.stdout);
    assert!(o.status.success());
    for needle in [
        "weighted %",
        "unweighted %",
        "stability %",
        "--reference-rate",
        "--top",
        "Examples:",
    ] {
        assert!(h.contains(needle), "{needle:?} missing from:\n{h}");
    }
    let o = run(&["experiment", "--help"]);
    assert!(o.status.success() && text(&o.stdout).contains("sampling"));
}

#[test]
fn inlining_experiment_on_the_smoke_suite() {
    let d = tempfile::tempdir().unwrap();
    let out = d.path().join("inl");
    let o = run(&[
        "experiment",
        "inlining",
        "--suite",
        &smoke_suite(),
        "-b",
        "Fibonacci",
        "-n",
        "2",
        "-i",
        "3",
        "--warmup",
        "1",
        "--reference-iterations",
        "1",
        "--lockstep",
        "0",
        "-q",
        "-o",
        out.to_str().unwrap(),
    ]);
    let md = text(&o.stdout);
    assert!(o.status.success(), "{md}\n{}", text(&o.stderr));
    for f in [
        "inlining.md",
        "inlining.json",
        "inlining.svg",
        "results.json",
        "ratios.svg",
    ] {
        assert!(out.join(f).is_file(), "{f} missing");
    }
    // The perfect graph the exhaustive config read, recorded first.
    assert!(out.join("profiles/Fibonacci.tprof").is_file());
    for needle in [
        "| benchmark | cbs | samples | exhaustive | static |",
        "| Fibonacci |",
        "CBS-directed against exhaustive-directed",
        "| exhaustive |",
    ] {
        assert!(md.contains(needle), "{needle:?} missing from:\n{md}");
    }
    let json = read_json(&out.join("inlining.json"));
    assert_eq!(json["format"], "tally-experiment-inlining/1");
    assert_eq!(json["complete"], true);
    assert_eq!(json["configs"].as_array().unwrap().len(), 4);
    let speedup = num(&json["speedup"][0][0]["estimate"]);
    assert!(speedup > 0.2 && speedup < 5.0, "{speedup}");
    let raw = read_json(&out.join("results.json"));
    // none, 4 configs, 3 collected alone; 2 invocations each.
    assert_eq!(raw["executors"].as_array().unwrap().len(), 8);
    assert_eq!(raw["invocations"].as_array().unwrap().len(), 16);
    // Bad input: an unknown graph, and a warm-up that leaves nothing.
    let o = run(&[
        "experiment",
        "inlining",
        "--suite",
        &smoke_suite(),
        "--configs",
        "cbs,oracle",
    ]);
    assert_eq!(o.status.code(), Some(2));
    assert!(text(&o.stderr).contains("no graph `oracle`"));
    let o = run(&[
        "experiment",
        "inlining",
        "--suite",
        &smoke_suite(),
        "-i",
        "5",
        "--warmup",
        "5",
    ]);
    assert_eq!(o.status.code(), Some(2));
    assert!(text(&o.stderr).contains("leaves none of the 5 iterations"));
}
