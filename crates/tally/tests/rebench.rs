//! ReBench, the SOM community's benchmark runner, on rebench.conf through scripts/rebench: the
//! smoke suite run for real on Tally's executors (a measurement per benchmark × executor in the
//! data file), the awfy suite's plan against bench/awfy.toml, the peers chosen by their
//! variables, the som-rs adapter, and the one-line refusals (no SOM checkout, no binary).
//!
//! ReBench is the pinned one that scripts/test installs (scripts/install-rebench) and names in
//! `TALLY_REBENCH`; without it these tests fail, saying so.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use common::{repo, tally, text};

fn rebench() -> String {
    match std::env::var("TALLY_REBENCH") {
        Ok(path) if !path.is_empty() => path,
        _ => panic!(
            "TALLY_REBENCH is not set: run the tests with scripts/test, which installs the pinned \
             ReBench (scripts/install-rebench) and exports TALLY_REBENCH"
        ),
    }
}

/// scripts/rebench with `args`, ReBench from `TALLY_REBENCH`, the test build's tally as TALLY,
/// its generated configuration in `dir`, none of SOM and the peers' variables unless `env`
/// sets them, run from `dir`.
fn launch(dir: &Path, args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut cmd = Command::new(repo().join("scripts/rebench"));
    cmd.args(args)
        .current_dir(dir)
        .env("TALLY_REBENCH", rebench())
        .env("TALLY", tally())
        .env("CARGO_TARGET_DIR", dir.join("target"))
        .env_remove("SOM")
        .env_remove("SOM_RS")
        .env_remove("SOMPP")
        .stdin(Stdio::null());
    for (key, value) in env {
        cmd.env(key, value);
    }
    cmd.output().expect("run scripts/rebench")
}

fn explain(o: &Output) -> String {
    format!(
        "status {:?}\nstdout:\n{}\nstderr:\n{}",
        o.status.code(),
        text(&o.stdout),
        text(&o.stderr)
    )
}

/// The benchmark names and their settings in a `tally bench` suite file of bench/.
fn suite_file(name: &str) -> toml::Value {
    let path = repo().join("bench").join(name);
    toml::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap()
}

fn benchmark_names(suite: &toml::Value) -> BTreeSet<String> {
    suite["benchmark"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b["name"].as_str().unwrap().to_string())
        .collect()
}

/// One measurement row of a ReBench data file: its columns by the header's names.
type Row = BTreeMap<String, String>;

fn data_rows(path: &Path) -> Vec<Row> {
    let data = std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("ReBench's data file {}: {e}", path.display()));
    let mut lines = data.lines().filter(|l| !l.starts_with('#'));
    let header: Vec<&str> = lines.next().expect("a header line").split('\t').collect();
    for column in ["invocation", "iteration", "value", "unit", "criterion"] {
        assert!(header.contains(&column), "{column} missing from {header:?}");
    }
    lines
        .map(|l| {
            let fields: Vec<&str> = l.split('\t').collect();
            assert_eq!(fields.len(), header.len(), "row {l:?}");
            header
                .iter()
                .zip(fields)
                .map(|(h, f)| (h.to_string(), f.to_string()))
                .collect()
        })
        .collect()
}

#[test]
fn smoke_suite_under_rebench_records_a_measurement_per_benchmark_and_executor() {
    let d = tempfile::tempdir().unwrap();
    let data = d.path().join("smoke.data");
    let o = launch(
        d.path(),
        &["smoke", "-D", "-in", "1", "-it", "2", "-df", "smoke.data"],
        &[],
    );
    assert!(o.status.success(), "{}", explain(&o));
    let err = text(&o.stderr);
    assert!(
        err.contains("scripts/rebench: smoke on tally, tally-interp\n"),
        "{err}"
    );

    // The relative data file is the caller's, not the repository root's.
    let rows = data_rows(&data);
    let benchmarks = benchmark_names(&suite_file("smoke.toml"));
    assert_eq!(benchmarks.len(), 5);
    let mut measured: BTreeMap<(String, String), Vec<u32>> = BTreeMap::new();
    for row in &rows {
        assert_eq!(row["suite"], "smoke", "{row:?}");
        assert_eq!(row["invocation"], "1", "{row:?}");
        assert_eq!(row["criterion"], "total", "{row:?}");
        assert_eq!(row["unit"], "ms", "{row:?}");
        let value: f64 = row["value"].parse().unwrap();
        assert!(value > 0.0 && value < 60_000.0, "{row:?}");
        measured
            .entry((row["benchmark"].clone(), row["executor"].clone()))
            .or_default()
            .push(row["iteration"].parse().unwrap());
    }
    let mut want = BTreeMap::new();
    for bench in &benchmarks {
        for executor in ["tally", "tally-interp"] {
            want.insert((bench.clone(), executor.to_string()), vec![1, 2]);
        }
    }
    assert_eq!(
        measured, want,
        "iterations measured per (benchmark, executor)"
    );

    // The runs got the test build's tally through ReBench's env, and the interpreter's its flag.
    let file = std::fs::read_to_string(&data).unwrap();
    assert!(
        file.contains(&format!("\"TALLY\":\"{}\"", tally())),
        "{file}"
    );
    assert!(
        file.contains(r#""cmdline":"\"${TALLY:-target/release/tally}\" --tier=interp -cp bench/smoke Harness "#),
        "{file}"
    );
    // The configuration ReBench ran: rebench.conf with that env added, under the target dir.
    let effective = std::fs::read_to_string(d.path().join("target/rebench/rebench.conf")).unwrap();
    assert!(
        effective.contains("runs:\n  env:\n    TALLY: "),
        "{effective}"
    );
}

/// A directory that looks like a SOM-st/SOM checkout to scripts/rebench (enough for `-p`, which
/// runs nothing).
fn fake_som(dir: &Path) -> PathBuf {
    let som = dir.join("SOM");
    std::fs::create_dir_all(som.join("Examples/AreWeFastYet")).unwrap();
    std::fs::create_dir_all(som.join("Smalltalk")).unwrap();
    std::fs::write(som.join("Examples/AreWeFastYet/Harness.som"), "").unwrap();
    std::fs::write(som.join("Smalltalk/Object.som"), "").unwrap();
    som
}

fn script(path: &Path, body: &str) {
    std::fs::write(path, body).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

/// The runs of ReBench's execution plan (`-p`): per command line, its executable and the
/// harness's arguments after the class path.
fn plan(out: &str) -> Vec<(String, Vec<String>)> {
    out.lines()
        .filter(|l| l.contains(" -cp "))
        .map(|l| {
            let (vm, rest) = l.split_once(" -cp ").unwrap();
            (
                vm.to_string(),
                rest.split_whitespace().map(String::from).collect(),
            )
        })
        .collect()
}

#[test]
fn awfy_suite_runs_bench_awfy_toml_on_tallys_tiers_and_the_peers_that_are_set() {
    let d = tempfile::tempdir().unwrap();
    let som = fake_som(d.path());
    let som_rs = d.path().join("som-rs-bin");
    script(&som_rs, "#!/bin/sh\nexit 0\n");
    let o = launch(
        d.path(),
        &["-p", "-D"],
        &[
            ("SOM", som.to_str().unwrap()),
            ("SOM_RS", som_rs.to_str().unwrap()),
        ],
    );
    assert!(o.status.success(), "{}", explain(&o));
    assert!(
        text(&o.stderr).contains(
            "scripts/rebench: awfy on tally, tally-interp, som-rs; left out: sompp (SOMPP unset)\n"
        ),
        "{}",
        explain(&o)
    );

    let awfy = suite_file("awfy.toml");
    let classpath: Vec<String> = awfy["classpath"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c.as_str().unwrap().replace("${SOM}", "$SOM"))
        .collect();
    let classpath = format!("\"{}\"", classpath.join(":"));
    let default_iterations = awfy["iterations"].as_integer().unwrap();
    // benchmark → [iterations, inner], as bench/awfy.toml gives them.
    let want: BTreeMap<String, [String; 2]> = awfy["benchmark"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| {
            let iterations = b
                .get("iterations")
                .map_or(default_iterations, |i| i.as_integer().unwrap());
            (
                b["name"].as_str().unwrap().to_string(),
                [
                    iterations.to_string(),
                    b["inner"].as_integer().unwrap().to_string(),
                ],
            )
        })
        .collect();
    assert_eq!(want.len(), 14);

    let tally_vm = r#""${TALLY:-target/release/tally}""#;
    let som_rs_vm = repo()
        .canonicalize()
        .unwrap()
        .join("bench/rebench/som-rs")
        .display()
        .to_string();
    let mut seen: BTreeMap<String, BTreeMap<String, [String; 2]>> = BTreeMap::new();
    for (vm, args) in plan(&text(&o.stdout)) {
        let executor = if vm == tally_vm {
            "tally"
        } else if vm == format!("{tally_vm} --tier=interp") {
            "tally-interp"
        } else if vm == som_rs_vm {
            "som-rs"
        } else {
            panic!("unexpected executable {vm:?} in the plan:\n{}", explain(&o))
        };
        assert_eq!(args.len(), 5, "{args:?}");
        assert_eq!(args[0], classpath);
        assert_eq!(args[1], "Harness");
        let previous = seen
            .entry(executor.to_string())
            .or_default()
            .insert(args[2].clone(), [args[3].clone(), args[4].clone()]);
        assert!(previous.is_none(), "{executor} runs {} twice", args[2]);
    }
    let executors: Vec<&String> = seen.keys().collect();
    assert_eq!(executors, ["som-rs", "tally", "tally-interp"]);
    for (executor, benchmarks) in &seen {
        assert_eq!(
            benchmarks, &want,
            "{executor}'s runs against bench/awfy.toml"
        );
    }

    let effective = std::fs::read_to_string(d.path().join("target/rebench/rebench.conf")).unwrap();
    for variable in ["SOM", "SOM_RS", "TALLY"] {
        assert!(
            effective.contains(&format!("\n    {variable}: ")),
            "{variable} not handed on:\n{effective}"
        );
    }
    assert!(!effective.contains("\n    SOMPP: "), "{effective}");
}

/// Asserts that `o` failed with exit status 2 and exactly one line on stderr, which it answers.
fn one_line_refusal(o: &Output) -> String {
    assert_eq!(o.status.code(), Some(2), "{}", explain(o));
    assert!(o.stdout.is_empty(), "{}", explain(o));
    let err = text(&o.stderr);
    assert_eq!(err.lines().count(), 1, "{}", explain(o));
    err
}

#[test]
fn without_a_som_checkout_it_says_in_one_line_to_set_som_and_runs_nothing() {
    let d = tempfile::tempdir().unwrap();
    for args in [
        &["-D", "-df", "x.data"][..],
        &["awfy", "-D", "-df", "x.data"],
        &["all", "-D", "-df", "x.data"],
    ] {
        let o = launch(d.path(), args, &[]);
        assert_eq!(
            one_line_refusal(&o),
            "scripts/rebench: set SOM to a checkout of SOM-st/SOM (suite awfy runs programs \
             from it)\n",
            "{args:?}"
        );
    }

    let not_som = d.path().join("not-som");
    std::fs::create_dir(&not_som).unwrap();
    let o = launch(d.path(), &["-D"], &[("SOM", "not-som")]);
    assert_eq!(
        one_line_refusal(&o),
        format!(
            "scripts/rebench: SOM is set to {}, which is not a checkout of SOM-st/SOM (no \
             Examples/AreWeFastYet/Harness.som); set SOM to one\n",
            not_som.display()
        )
    );

    // Nothing ran and nothing was written.
    assert!(!d.path().join("x.data").exists());
    assert!(!d.path().join("target/rebench/rebench.conf").exists());
}

#[test]
fn a_missing_binary_or_experiment_is_refused_in_one_line() {
    let d = tempfile::tempdir().unwrap();
    let som = fake_som(d.path());
    let som = som.to_str().unwrap();
    let missing = d.path().join("missing");
    let missing = missing.to_str().unwrap();

    let o = launch(d.path(), &["smoke"], &[("TALLY", missing)]);
    assert_eq!(
        one_line_refusal(&o),
        format!("scripts/rebench: TALLY is set to {missing}, which is not an executable\n")
    );
    let o = launch(d.path(), &[], &[("SOM", som), ("SOMPP", missing)]);
    assert_eq!(
        one_line_refusal(&o),
        format!("scripts/rebench: SOMPP is set to {missing}, which is not an executable\n")
    );
    // Asking for a peer by name needs its variable.
    let o = launch(d.path(), &["awfy", "e:som-rs"], &[("SOM", som)]);
    assert_eq!(
        one_line_refusal(&o),
        "scripts/rebench: set SOM_RS to the binary of som-rs, to run executor som-rs\n"
    );
    let o = launch(d.path(), &["fast"], &[]);
    assert_eq!(
        one_line_refusal(&o),
        "scripts/rebench: rebench.conf has no experiment fast (it has awfy, smoke, and all)\n"
    );
}

#[test]
fn som_rs_adapter_turns_the_class_path_into_som_rs_arguments() {
    let d = tempfile::tempdir().unwrap();
    let fake = d.path().join("som-interpreter-bc");
    script(&fake, "#!/bin/sh\nfor a in \"$@\"; do echo \"$a\"; done\n");
    let adapter = repo().join("bench/rebench/som-rs");
    let o = Command::new(&adapter)
        .args(["-cp", "/a/x:/b y:/c", "Harness", "Bounce", "3", "15"])
        .env("SOM_RS", &fake)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", explain(&o));
    assert_eq!(
        text(&o.stdout),
        "-c\n/a/x\n/b y\n/c\n--\nHarness\nBounce\n3\n15\n"
    );

    // Without its binary: ReBench's "command not found", which stops this executor's other runs.
    let o = Command::new(&adapter)
        .args(["-cp", "/a", "Harness", "Bounce"])
        .env_remove("SOM_RS")
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(127), "{}", explain(&o));
    assert_eq!(
        text(&o.stderr),
        "bench/rebench/som-rs: set SOM_RS to som-rs's binary (e.g. som-interpreter-bc)\n"
    );
}
