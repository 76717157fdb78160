//! `tally calibrate`: measures, on this machine, what the adaptive controller weighs — how
//! much faster each compiling tier runs code than the interpreter and how long it takes to
//! compile a method — and stores it where `--tier=adaptive` finds it.
//!
//! Method: each calibration program (ours, embedded in the binary) runs in child processes
//! under `--tier=interp` and under each compiling tier, timing its iterations in CPU time.
//! The baseline runs as `--tier=baseline` (everything compiled at its first call); each
//! level of the optimizing tier (quick, opt) as the adaptive controller uses it, compiling
//! from what the interpreter saw (its speculation needs the sites' feedback, which a compile
//! at the first call has not got): `--tier=adaptive --adaptive-tiers LEVEL` with a cost
//! model in which compiling costs nothing (`FREE_COMPILES`), so every sampled method goes
//! straight to that level, the only one the controller may choose. A tier's speedup is the
//! geometric mean over the programs of the interpreter's median steady iteration (the
//! second half of the iterations) over the tier's. Compile times come from the same runs'
//! `--tier-log`: a least-squares line through (bytecodes compiled, inlined ones included,
//! microseconds) of every compile. `--suite` calibrates on a benchmark suite's programs
//! instead (`bench/awfy.toml`: programs the size of real ones, whose methods inline more and
//! whose compiled code is further from the toys' speedups), each through its harness.

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};
use std::time::{Duration, Instant};

use clap::Parser;
use tally_vm::tally_controller::{CostModel, Provenance, TierCost};

/// The calibration programs: (class name, source).
const PROGRAMS: [(&str, &str); 4] = [
    (
        "CalibrationLoops",
        include_str!("../calibration/CalibrationLoops.som"),
    ),
    (
        "CalibrationSends",
        include_str!("../calibration/CalibrationSends.som"),
    ),
    (
        "CalibrationBlocks",
        include_str!("../calibration/CalibrationBlocks.som"),
    ),
    (
        "CalibrationRecursion",
        include_str!("../calibration/CalibrationRecursion.som"),
    ),
];

/// The compiling tiers calibrated, as `--tier` spells them.
const TIERS: [&str; 3] = ["baseline", "quick", "opt"];

/// The cost model the optimizing levels are calibrated under: compiling costs nothing and
/// pays for itself at once, so the controller compiles every method it samples at the one
/// level `--adaptive-tiers` leaves it.
const FREE_COMPILES: &str = "[baseline]\nspeedup = 1000.0\ncompile_fixed_ns = 0.0\n\
compile_per_bytecode_ns = 0.0\n\n[quick]\nspeedup = 1000.0\ncompile_fixed_ns = 0.0\n\
compile_per_bytecode_ns = 0.0\n\n[optimizing]\nspeedup = 1000.0\ncompile_fixed_ns = 0.0\n\
compile_per_bytecode_ns = 0.0\n";

/// A child run that takes longer than this is stopped and the calibration fails.
const RUN_TIMEOUT: Duration = Duration::from_secs(300);

/// Measure this machine's tier speedups and compile rates for `--tier=adaptive`.
///
/// Runs Tally's calibration programs in child processes in every tier, prints what it
/// measured, and writes the cost model the adaptive controller decides with.
#[derive(Parser)]
#[command(
    name = "tally calibrate",
    after_help = "The model is written to $XDG_DATA_HOME/tally/calibration.toml (else \
~/.local/share/tally/calibration.toml) unless -o says otherwise; `tally --tier=adaptive` reads \
it from there, or from `--calibration FILE`. A calibration names the machine it was measured \
on; on another machine the built-in figures are used instead.\n\nExamples:\n  tally calibrate\n  \
tally calibrate --runs 5 --iterations 20 --force\n  tally calibrate -o here.toml\n  \
SOM=~/SOM tally calibrate --suite bench/awfy.toml --bench Richards,DeltaBlue -o awfy.toml"
)]
struct CalibrateArgs {
    /// Where to write the model [default: this machine's calibration file].
    #[arg(short, long, value_name = "FILE")]
    output: Option<PathBuf>,
    /// Replace an existing calibration file.
    #[arg(long)]
    force: bool,
    /// Child processes per program and tier.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..))]
    runs: u32,
    /// Iterations per child process (the second half is the steady state).
    #[arg(long, default_value_t = 12, value_parser = clap::value_parser!(u32).range(2..))]
    iterations: u32,
    /// Calibrate on the benchmarks of this suite (a `tally bench` suite file, such as
    /// bench/awfy.toml, its variables from the environment) run through its harness at its
    /// sizes, instead of the built-in calibration programs.
    #[arg(long, value_name = "FILE")]
    suite: Option<PathBuf>,
    /// With --suite: only these benchmarks (comma-separated).
    #[arg(long, value_delimiter = ',', value_name = "NAMES", requires = "suite")]
    bench: Vec<String>,
}

/// One calibration program: its name and the arguments that run it (after the tier's
/// flags), the iteration count last.
struct Program {
    name: String,
    args: Vec<std::ffi::OsString>,
}

/// The programs to calibrate on: the built-in ones, written into `dir`, or the suite's.
fn programs(args: &CalibrateArgs, dir: &Path) -> Result<Vec<Program>, String> {
    let iterations = args.iterations.to_string();
    let Some(path) = &args.suite else {
        let mut out = Vec::new();
        for (name, source) in PROGRAMS {
            let file = dir.join(format!("{name}.som"));
            scratch(&file, source)?;
            out.push(Program {
                name: name.to_string(),
                args: vec![file.into_os_string(), iterations.clone().into()],
            });
        }
        return Ok(out);
    };
    let options = tally_bench::suite::SuiteOptions {
        only: args.bench.clone(),
        ..Default::default()
    };
    let suite = tally_bench::suite::Suite::load(path, &options).map_err(|e| e.to_string())?;
    Ok(suite
        .benchmarks
        .iter()
        .map(|b| Program {
            name: b.name.clone(),
            args: [
                "-cp".to_string(),
                suite.classpath_string(),
                suite.harness.clone(),
                b.name.clone(),
                iterations.clone(),
                b.inner.to_string(),
            ]
            .into_iter()
            .map(Into::into)
            .collect(),
        })
        .collect())
}

/// This machine, as calibrations name it: host name, processor and CPU count.
pub fn machine() -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|_| "unknown host".into());
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split_once(':'))
                .map(|(_, v)| v.trim().to_string())
        })
        .unwrap_or_else(|| std::env::consts::ARCH.to_string());
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    format!("{host}; {cpu}; {cpus} CPUs")
}

/// This machine's calibration file.
pub fn default_path() -> Option<PathBuf> {
    let data = std::env::var_os("XDG_DATA_HOME")
        .filter(|d| !d.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".local/share")))?;
    Some(data.join("tally").join("calibration.toml"))
}

/// The model `--tier=adaptive` decides with, and a line saying where it came from: the file
/// given (which must exist and be valid), else this machine's calibration, else the
/// built-in figures.
pub fn load_model(explicit: Option<&Path>) -> Result<(CostModel, String), String> {
    let read = |path: &Path| -> Result<CostModel, String> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("cannot read the calibration {}: {e}", path.display()))?;
        CostModel::from_toml(&text).map_err(|e| format!("{}: {e}", path.display()))
    };
    if let Some(path) = explicit {
        let model = read(path)?;
        return Ok((model, format!("{}", path.display())));
    }
    let builtin = || (CostModel::default(), "built-in figures".to_string());
    let Some(path) = default_path().filter(|p| p.exists()) else {
        return Ok(builtin());
    };
    let model = read(&path)?;
    let here = machine();
    if model.provenance.machine != here {
        let (m, _) = builtin();
        return Ok((
            m,
            format!(
                "built-in figures ({} was measured on {}, not on this machine, {here})",
                path.display(),
                model.provenance.machine
            ),
        ));
    }
    Ok((
        model,
        format!("{} (this machine's calibration)", path.display()),
    ))
}

pub fn main(args: Vec<std::ffi::OsString>) -> ExitCode {
    let argv = std::iter::once(std::ffi::OsString::from("tally calibrate")).chain(args);
    let args = CalibrateArgs::parse_from(argv);
    match calibrate(&args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            say!("error: {e}");
            ExitCode::from(1)
        }
    }
}

/// One child run's results.
struct Run {
    /// Microseconds of each iteration.
    iterations: Vec<f64>,
    /// Each compile's figures.
    compiles: Vec<Compile>,
}

fn calibrate(args: &CalibrateArgs) -> Result<(), String> {
    let output = match &args.output {
        Some(p) => p.clone(),
        None => default_path().ok_or("no home directory for the calibration file; give -o FILE")?,
    };
    if output.exists() && !args.force {
        return Err(format!("{} exists; --force replaces it", output.display()));
    }
    let tally = std::env::current_exe().map_err(|e| format!("cannot find this tally: {e}"))?;
    let dir = std::env::temp_dir().join(format!("tally-calibrate-{}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    let result = measure(args, &tally, &dir);
    let _ = std::fs::remove_dir_all(&dir);
    let (rows, model) = result?;

    println!(
        "{:<22} {:>14} {}",
        "program",
        "interp (us)",
        TIERS
            .map(|t| format!("{:>14} {:>8}", format!("{t} (us)"), "speedup"))
            .join(" ")
    );
    for (name, interp, tiers) in &rows {
        let cells: Vec<String> = tiers
            .iter()
            .map(|t| format!("{t:>14.0} {:>7.2}x", interp / t))
            .collect();
        println!("{name:<22} {interp:>14.0} {}", cells.join(" "));
    }
    println!();
    for (name, t) in [
        ("baseline", &model.baseline),
        ("quick", &model.quick),
        ("opt", &model.optimizing),
    ] {
        println!(
            "{name}: {:.2}x the interpreter; compile {:.0} us + {:.1} us per bytecode compiled, \
             {:.2} bytecodes compiled per bytecode of the method",
            t.speedup,
            t.compile_fixed_ns / 1e3,
            t.compile_per_bytecode_ns / 1e3,
            t.expansion
        );
    }
    if let Some(parent) = output.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent)
            .map_err(|e| format!("cannot create {}: {e}", parent.display()))?;
    }
    tally_output::write(
        &output,
        model.to_toml().as_bytes(),
        tally_output::IfExists::from_force(args.force),
    )
    .map_err(|e| e.to_string())?;
    println!("written to {}", output.display());
    Ok(())
}

type Rows = Vec<(String, f64, Vec<f64>)>;

/// Writes an input of the child runs into calibration's own scratch directory.
fn scratch(path: &Path, text: &str) -> Result<(), String> {
    tally_output::write(path, text.as_bytes(), tally_output::IfExists::Replace)
        .map_err(|e| e.to_string())
}

fn measure(args: &CalibrateArgs, tally: &Path, dir: &Path) -> Result<(Rows, CostModel), String> {
    let mut rows = Vec::new();
    let mut ratios: Vec<Vec<f64>> = vec![Vec::new(); TIERS.len()];
    let mut compiles: Vec<Vec<Compile>> = vec![Vec::new(); TIERS.len()];
    scratch(&dir.join("free-compiles.toml"), FREE_COMPILES)?;
    let programs = programs(args, dir)?;
    let total = programs.len() * (1 + TIERS.len()) * args.runs as usize;
    let mut done = 0;
    for program in &programs {
        let name = program.name.as_str();
        let mut steady = |tier: &str, compiles: Option<&mut Vec<Compile>>| {
            let mut times = Vec::new();
            let mut sink = compiles;
            for _ in 0..args.runs {
                done += 1;
                say!("calibrating [{done}/{total}]: {name} --tier={tier}");
                let run = run_child(tally, program, tier, dir)?;
                let half = run.iterations.len() / 2;
                times.extend_from_slice(&run.iterations[half..]);
                if let Some(c) = sink.as_deref_mut() {
                    c.extend(run.compiles);
                }
            }
            Ok::<f64, String>(median(&mut times))
        };
        let interp = steady("interp", None)?;
        let mut tier_times = Vec::new();
        for (i, tier) in TIERS.iter().enumerate() {
            let t = steady(tier, Some(&mut compiles[i]))?;
            ratios[i].push(interp / t);
            tier_times.push(t);
        }
        rows.push((program.name.clone(), interp, tier_times));
    }
    let geomean = |xs: &[f64]| (xs.iter().map(|x| x.ln()).sum::<f64>() / xs.len() as f64).exp();
    let cost = |i: usize| {
        let points: Vec<(f64, f64)> = compiles[i].iter().map(|c| (c.compiled, c.micros)).collect();
        let (fixed, per) = fit_line(&points);
        let own: f64 = compiles[i].iter().map(|c| c.own).sum();
        let compiled: f64 = compiles[i].iter().map(|c| c.compiled).sum();
        TierCost {
            speedup: geomean(&ratios[i]),
            compile_fixed_ns: fixed * 1e3,
            compile_per_bytecode_ns: per * 1e3,
            expansion: if own > 0.0 {
                (compiled / own).max(1.0)
            } else {
                1.0
            },
        }
    };
    let model = CostModel {
        baseline: cost(0),
        quick: cost(1),
        optimizing: cost(2),
        provenance: Provenance {
            machine: machine(),
            measured_unix_s: std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_secs()),
            method: format!(
                "tally calibrate: {} programs{} x {} runs x {} iterations (median of the second halves, CPU time); {} baseline, {} quick and {} optimizing compiles fitted",
                programs.len(),
                args.suite
                    .as_ref()
                    .map_or(String::new(), |s| format!(" of {}", s.display())),
                args.runs,
                args.iterations,
                compiles[0].len(),
                compiles[1].len(),
                compiles[2].len()
            ),
        },
    };
    CostModel::from_toml(&model.to_toml())
        .map_err(|e| format!("the measured model is not usable: {e}"))?;
    Ok((rows, model))
}

/// Runs `program` in a child tally under `tier` (`quick` and `opt`: adaptive, to that level
/// alone, under the cost model `dir/free-compiles.toml`); its iteration times (the calibration programs' lines or a
/// harness's) and, for compiling tiers, its compiles.
fn run_child(tally: &Path, program: &Program, tier: &str, dir: &Path) -> Result<Run, String> {
    let mut cmd = Command::new(tally);
    cmd.arg("--cpu-clock");
    if tier == "quick" || tier == "opt" {
        cmd.arg("--tier=adaptive")
            .arg("--adaptive-tiers")
            .arg(tier)
            .arg("--calibration")
            .arg(dir.join("free-compiles.toml"));
    } else {
        cmd.arg(format!("--tier={tier}"));
    }
    if tier != "interp" {
        cmd.arg("--tier-log");
    }
    cmd.args(&program.args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd
        .spawn()
        .map_err(|e| format!("cannot run {}: {e}", tally.display()))?;
    let started = Instant::now();
    loop {
        match child.try_wait() {
            Ok(Some(_)) => break,
            Ok(None) if started.elapsed() > RUN_TIMEOUT => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!(
                    "{} --tier={tier} ran longer than {} s",
                    program.name,
                    RUN_TIMEOUT.as_secs()
                ));
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(20)),
            Err(e) => return Err(format!("cannot wait for the child tally: {e}")),
        }
    }
    let out = child
        .wait_with_output()
        .map_err(|e| format!("cannot read the child tally's output: {e}"))?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    if !out.status.success() {
        return Err(format!(
            "{} --tier={tier} failed ({}): {}",
            program.name,
            out.status,
            stderr
                .lines()
                .find(|l| !l.starts_with("[tier]"))
                .unwrap_or("")
        ));
    }
    let mut iterations: Vec<f64> = stdout.lines().filter_map(iteration_time).collect();
    if iterations.is_empty() {
        iterations = tally_bench::results::parse_iteration_times(&stdout);
    }
    if iterations.len() < 2 {
        return Err(format!(
            "{} --tier={tier} printed no iteration times",
            program.name
        ));
    }
    Ok(Run {
        iterations,
        compiles: stderr.lines().filter_map(compile_line).collect(),
    })
}

/// `iteration N: T us` → T.
fn iteration_time(line: &str) -> Option<f64> {
    line.strip_prefix("iteration ")?
        .split_once(": ")?
        .1
        .strip_suffix(" us")?
        .trim()
        .parse()
        .ok()
}

/// One compile, from its `--tier-log` line.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Compile {
    /// The method's own bytecodes.
    own: f64,
    /// The bytecodes the compile translated, inlined ones included: what its time grows
    /// with.
    compiled: f64,
    micros: f64,
}

/// A `--tier-log` compile line, `[tier] TIER NAME (N bytecodes, B bytes, T us[, K
/// bytecodes compiled, …])`; K is N when the line has none.
fn compile_line(line: &str) -> Option<Compile> {
    if !line.starts_with("[tier] ") || line.contains(" failed ") || line.contains(" decide ") {
        return None;
    }
    let figures = line.rsplit_once(" (")?.1.strip_suffix(')')?;
    let mut parts = figures.split(", ");
    let own: f64 = parts.next()?.strip_suffix(" bytecodes")?.parse().ok()?;
    let _bytes = parts.next()?.strip_suffix(" bytes")?;
    let micros = parts.next()?.strip_suffix(" us")?.parse().ok()?;
    let compiled = parts
        .next()
        .and_then(|p| p.strip_suffix(" bytecodes compiled"))
        .and_then(|k| k.parse().ok());
    Some(Compile {
        own,
        compiled: compiled.unwrap_or(own),
        micros,
    })
}

fn median(xs: &mut [f64]) -> f64 {
    xs.sort_by(f64::total_cmp);
    let n = xs.len();
    if n % 2 == 1 {
        xs[n / 2]
    } else {
        (xs[n / 2 - 1] + xs[n / 2]) / 2.0
    }
}

/// Least squares `y = a + b·x`, both kept non-negative (a compile never takes negative
/// time); the mean alone when every x is the same.
fn fit_line(points: &[(f64, f64)]) -> (f64, f64) {
    let n = points.len() as f64;
    if points.is_empty() {
        return (0.0, 0.0);
    }
    let mx = points.iter().map(|p| p.0).sum::<f64>() / n;
    let my = points.iter().map(|p| p.1).sum::<f64>() / n;
    let sxx: f64 = points.iter().map(|p| (p.0 - mx).powi(2)).sum();
    let sxy: f64 = points.iter().map(|p| (p.0 - mx) * (p.1 - my)).sum();
    if sxx == 0.0 {
        return (my, 0.0);
    }
    let b = (sxy / sxx).max(0.0);
    let a = (my - b * mx).max(0.0);
    (a, b)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn log_lines_parse_and_others_do_not() {
        assert_eq!(
            compile_line("[tier] baseline Foo>>bar: (12 bytecodes, 800 bytes, 350 us)"),
            Some(Compile {
                own: 12.0,
                compiled: 12.0,
                micros: 350.0
            })
        );
        assert_eq!(
            compile_line("[tier] baseline failed for Foo>>bar, stays where it was: x (1 y)"),
            None
        );
        assert_eq!(
            compile_line(
                "[tier] opt A>>b (30 bytecodes, 5000 bytes, 3370 us, 87 bytecodes compiled, 5 methods inlined)"
            ),
            Some(Compile {
                own: 30.0,
                compiled: 87.0,
                micros: 3370.0
            }),
            "inlined bytecodes count"
        );
        assert_eq!(compile_line("hello"), None);
        assert_eq!(iteration_time("iteration 3: 1234 us"), Some(1234.0));
        assert_eq!(iteration_time("iteration 3 1234 us"), None);
    }

    #[test]
    fn a_suite_gives_each_benchmark_its_harness_command_and_the_toys_their_files() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("Harness.som"), "Harness = ( )\n").unwrap();
        std::fs::write(
            dir.path().join("s.toml"),
            "name = \"s\"\nharness = \"Harness\"\nclasspath = [\".\"]\n\
             [[benchmark]]\nname = \"A\"\ninner = 7\n[[benchmark]]\nname = \"B\"\n",
        )
        .unwrap();
        let suite = dir.path().join("s.toml");
        let args = CalibrateArgs::parse_from([
            "tally calibrate".as_ref(),
            "--suite".as_ref(),
            suite.as_os_str(),
            "--bench".as_ref(),
            "A".as_ref(),
            "--iterations".as_ref(),
            "20".as_ref(),
        ]);
        let got = programs(&args, dir.path()).unwrap();
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].name, "A");
        let words: Vec<String> = got[0]
            .args
            .iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        assert_eq!(words[0], "-cp");
        assert_eq!(words[2..], ["Harness", "A", "20", "7"]);

        let toys = CalibrateArgs::parse_from(["tally calibrate"]);
        let got = programs(&toys, dir.path()).unwrap();
        assert_eq!(got.len(), PROGRAMS.len());
        assert!(dir.path().join("CalibrationLoops.som").exists());
        assert_eq!(got[0].args[1], "12");

        let missing =
            CalibrateArgs::parse_from(["tally calibrate", "--suite", "/nonexistent/suite.toml"]);
        assert!(programs(&missing, dir.path()).is_err());
    }

    #[test]
    fn the_fitted_line_goes_through_exact_points() {
        let (a, b) = fit_line(&[(1.0, 12.0), (2.0, 14.0), (10.0, 30.0)]);
        assert!((a - 10.0).abs() < 1e-9 && (b - 2.0).abs() < 1e-9, "{a} {b}");
        assert_eq!(fit_line(&[(3.0, 5.0), (3.0, 7.0)]), (6.0, 0.0));
        assert_eq!(median(&mut [3.0, 1.0, 2.0]), 2.0);
    }
}
