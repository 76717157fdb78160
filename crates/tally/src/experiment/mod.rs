//! `tally experiment …`: classic profiling-accuracy experiments, each reproduced by one command.
//!
//! A profiler's accuracy and cost are claims, and claims drift as the VM changes. These
//! commands re-run two published experiments on Tally end to end (run the benchmarks, read the
//! profiles, compare them with a reference, time the runs against profiling off) so that any
//! change to the VM or the profiler can be judged by the same numbers:
//!
//! - [`cbs`]: Arnold & Grove (CGO 2005), Table 2 — counter-based sampling of the call graph,
//!   accuracy (overlap with the exact graph) and overhead over a STRIDE × SAMPLES grid.
//! - [`sampling`]: Buytaert et al. (OOPSLA 2007), Figs. 4.8–4.10 — method-sampling accuracy,
//!   stability and overhead per trigger × mechanism.
//! - [`gc_hints`]: Buytaert et al. (HiPEAC 2005) — GC time, full collections and pauses with
//!   and without GC hints.
//! - [`inlining`]: Arnold & Grove (CGO 2005), Table 3 / Figure 5 — steady-state speed with
//!   inlining directed by CBS, by samples, by the exhaustive graph, by size alone, and none.
//!
//! Both measure child processes the way `tally bench` does (its suite files, its process
//! runner with `wait4` CPU times, its interleaving of alternatives), so [`runner`] is a thin
//! layer over `tally_bench`; [`plan`] decides the run order, [`profiles`] turns profile files
//! into name-keyed weights, and [`output`] holds the statistics and table helpers both share.

mod cbs;
mod gc_hints;
mod inlining;
pub(crate) mod output;
mod plan;
mod profiles;
mod runner;
mod sampling;

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand};
use tally_bench::suite::{Suite, SuiteOptions};

use runner::{Runner, Stop};

const AFTER_HELP: &str = "\
Every experiment runs benchmarks from a `tally bench` suite file (default bench/awfy.toml, which
needs SOM=/path/to/SOM-st/SOM in the environment) as separate Tally processes, and writes a
Markdown report (also printed on stdout), a JSON file with every raw measurement and a summary
into the output directory. See `tally experiment cbs --help`, `tally experiment sampling
--help`, `tally experiment gc-hints --help` and `tally experiment inlining --help` for what
they measure and how to read the numbers.

Examples:
  SOM=/path/to/SOM tally experiment cbs -o cbs-results
  SOM=/path/to/SOM tally experiment cbs --config 3:16 -n 10 \\
      --benchmarks DeltaBlue,Richards,Havlak,Json,CD,Towers -o cbs-default
  SOM=/path/to/SOM tally experiment sampling -n 10 -o sampling-results
  SOM=/path/to/SOM tally experiment inlining -o inlining-results
  tally experiment cbs --suite bench/smoke.toml --benchmarks Fibonacci --strides 1,3 --samples 1,4 -n 1";

/// Profiling experiments on Tally: CBS call graphs and the inlining they direct (Arnold &
/// Grove, CGO 2005), method sampling (Buytaert et al., OOPSLA 2007), GC hints.
#[derive(Parser, Debug)]
#[command(name = "tally experiment", version, after_help = AFTER_HELP)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Counter-based sampling of the call graph: overlap with the exact graph and overhead
    /// over a STRIDE × SAMPLES grid (Arnold & Grove, CGO 2005, Table 2).
    #[command(after_help = cbs::AFTER_HELP)]
    Cbs(cbs::CbsArgs),
    /// Method sampling: accuracy against a detailed reference profile, stability and overhead
    /// per trigger × mechanism (Buytaert et al., OOPSLA 2007, Figs. 4.8-4.10).
    #[command(after_help = sampling::AFTER_HELP)]
    Sampling(sampling::SamplingArgs),
    /// GC hints: GC time, full collections, longest pause and total time with and without
    /// the hints a recording run found, per benchmark and heap size (Buytaert et al.,
    /// HiPEAC 2005).
    #[command(after_help = gc_hints::AFTER_HELP)]
    GcHints(gc_hints::GcHintsArgs),
    /// Inlining directed by call graphs: steady-state speedup over no inlining with the
    /// adaptive tier's inliner reading CBS's graph, the samples', the exhaustive one, or
    /// none (size limits alone), and what collecting each costs (Arnold & Grove, CGO 2005,
    /// Table 3 / Figure 5).
    #[command(after_help = inlining::AFTER_HELP)]
    Inlining(inlining::InliningArgs),
}

/// Options both experiments share: what to run, with which Tally, and where results go.
#[derive(Args, Debug, Clone)]
pub struct CommonArgs {
    /// Suite file (.toml) or Are We Fast Yet directory, as for `tally bench`
    /// [default: bench/awfy.toml, looked up in the current directory and above this binary].
    #[arg(long, value_name = "SUITE")]
    suite: Option<PathBuf>,

    /// Benchmarks to run, in this order (names from the suite).
    #[arg(
        long,
        short = 'b',
        value_name = "NAME,…",
        value_delimiter = ',',
        default_value = "DeltaBlue,Richards,Havlak,Json"
    )]
    benchmarks: Vec<String>,

    /// Outer iterations of the harness per process (the suite's inner sizes are kept).
    #[arg(long, short = 'i', value_name = "N", default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..))]
    iterations: u32,

    /// Ticks per second of the profiler's trigger in the profiled runs (default: tally's).
    #[arg(long, value_name = "HZ", default_value_t = 250, value_parser = clap::value_parser!(u32).range(1..))]
    rate: u32,

    /// Runs with profiling off per benchmark and round, spread among the profiled runs
    /// [default: one per profiled run, i.e. the number of configurations].
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    baselines: Option<u32>,

    /// The tally binary to measure [default: this one].
    #[arg(long, value_name = "PATH")]
    tally: Option<PathBuf>,

    /// The tier of the measured runs (profiled and baseline); the exhaustive reference runs
    /// are always interpreted. Under `adaptive` the measured runs keep the default method
    /// sampler (it feeds the controller) where the others take `--sampler none`.
    #[arg(long, value_name = "TIER", default_value = "interp", value_parser = ["interp", "baseline", "opt", "adaptive"])]
    tier: String,

    /// Output directory [default: tally-experiment-NAME-DATE-TIME].
    #[arg(long, short = 'o', value_name = "DIR")]
    out: Option<PathBuf>,

    /// Write into an output directory that is not empty (files of the same name are replaced).
    #[arg(long)]
    force: bool,

    /// Keep every profile file under DIR/profiles (by default each is deleted once read).
    #[arg(long)]
    keep_profiles: bool,

    /// Kill a run after this many seconds; that counts as a failure and stops the experiment.
    #[arg(long, value_name = "SECONDS")]
    timeout: Option<f64>,

    /// Confidence level of the intervals.
    #[arg(long, default_value_t = 0.95)]
    level: f64,

    /// No progress on stderr.
    #[arg(long, short = 'q')]
    quiet: bool,
}

/// Why an experiment did not complete.
#[derive(Debug)]
pub enum Error {
    /// The command line or the environment is wrong; nothing was measured.
    Usage(String),
    /// A run failed or a profile was unusable; what was measured so far is written.
    Failed(String),
}

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Error::Usage(m) | Error::Failed(m) => f.write_str(m),
        }
    }
}

/// How a measuring loop ended; partial results are written in every case.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ending {
    Complete,
    Interrupted,
}

/// Entry point: `args` are the words after `tally experiment`; `this` is the running binary.
pub fn main(args: Vec<OsString>, this: PathBuf) -> ExitCode {
    let argv = std::iter::once(OsString::from("tally experiment")).chain(args);
    let cli = Cli::parse_from(argv);
    let result = match cli.command {
        Command::Cbs(a) => cbs::run(a, &this),
        Command::Sampling(a) => sampling::run(a, &this),
        Command::GcHints(a) => gc_hints::run(a, &this),
        Command::Inlining(a) => inlining::run(a, &this),
    };
    match result {
        Ok(Ending::Complete) => ExitCode::SUCCESS,
        Ok(Ending::Interrupted) => ExitCode::from(130),
        Err(e @ Error::Usage(_)) => {
            say!("tally experiment: error: {e}");
            ExitCode::from(2)
        }
        Err(e @ Error::Failed(_)) => {
            say!("tally experiment: error: {e}");
            ExitCode::from(1)
        }
    }
}

/// Everything a measuring loop needs once the command line has been checked.
pub struct Setup {
    pub suite: Suite,
    pub out: PathBuf,
    pub runner: Runner,
    pub started: String,
    pub tally: PathBuf,
}

impl CommonArgs {
    /// Checks the options, loads the suite, prepares the output directory and the runner.
    /// Fails before anything runs if something is wrong.
    fn setup(&self, experiment: &str, this: &Path) -> Result<Setup, Error> {
        if !(self.level > 0.0 && self.level < 1.0) {
            return Err(Error::Usage(
                "--level must be between 0 and 1, e.g. 0.95".into(),
            ));
        }
        let timeout = match self.timeout {
            Some(t) if t.is_finite() && t > 0.0 => Some(std::time::Duration::from_secs_f64(t)),
            Some(_) => {
                return Err(Error::Usage(
                    "--timeout must be a positive number of seconds".into(),
                ))
            }
            None => None,
        };
        let suite = self.load_suite(this)?;
        let tally = self.tally.clone().unwrap_or_else(|| this.to_path_buf());
        if tally_bench::executor::resolve_program(&tally.display().to_string()).is_none() {
            return Err(Error::Usage(format!(
                "--tally {}: not found or not executable",
                tally.display()
            )));
        }
        let started = tally_bench::now_rfc3339();
        let out = self.out.clone().unwrap_or_else(|| {
            PathBuf::from(format!(
                "tally-experiment-{experiment}-{}",
                started
                    .replace(['-', ':'], "")
                    .replace('T', "-")
                    .trim_end_matches('Z')
            ))
        });
        prepare_output_dir(&out, self.force)?;
        let runner = Runner::new(
            suite.clone(),
            tally.clone(),
            out.join("profiles"),
            runner::RunnerOptions {
                timeout,
                keep_profiles: self.keep_profiles,
                quiet: self.quiet,
                tool: format!("tally experiment {experiment}"),
                tier: self.tier.clone(),
            },
        );
        Ok(Setup {
            suite,
            out,
            runner,
            started,
            tally,
        })
    }

    fn load_suite(&self, this: &Path) -> Result<Suite, Error> {
        if self.benchmarks.iter().all(|b| b.trim().is_empty()) {
            return Err(Error::Usage("--benchmarks names no benchmark".into()));
        }
        load_suite(
            self.suite.as_deref(),
            &self.benchmarks,
            self.iterations,
            this,
        )
    }
}

/// The suite `path` (default bench/awfy.toml), `only` the benchmarks named (all when none),
/// in the order named, `iterations` each.
fn load_suite(
    path: Option<&Path>,
    benchmarks: &[String],
    iterations: u32,
    this: &Path,
) -> Result<Suite, Error> {
    let path = match path {
        Some(p) => p.to_path_buf(),
        None => default_suite(this).ok_or_else(|| {
            Error::Usage(
                "no --suite given and bench/awfy.toml is not in the current directory; \
                 pass --suite FILE (e.g. bench/awfy.toml with SOM set, or bench/smoke.toml)"
                    .into(),
            )
        })?,
    };
    let mut only: Vec<String> = Vec::new();
    for b in benchmarks.iter().map(|b| b.trim()) {
        if !b.is_empty() && !only.iter().any(|x| x == b) {
            only.push(b.to_string());
        }
    }
    let options = SuiteOptions {
        iterations: Some(iterations),
        only: only.clone(),
        ..SuiteOptions::default()
    };
    let mut suite = Suite::load(&path, &options).map_err(|e| {
        let mut m = e.to_string();
        if m.contains("environment variable") {
            m.push_str(
                "\n(bench/awfy.toml finds the Are We Fast Yet sources through $SOM: \
                 run e.g. `SOM=/path/to/SOM-st/SOM tally experiment …`)",
            );
        }
        Error::Usage(m)
    })?;
    // The order given on the command line, not the suite's: it is the order of the report.
    if !only.is_empty() {
        suite
            .benchmarks
            .sort_by_key(|b| only.iter().position(|o| o == &b.name));
    }
    Ok(suite)
}

/// bench/awfy.toml in the current directory, else in a directory above the binary (a build in
/// target/… of a checkout finds the checkout's suite).
fn default_suite(this: &Path) -> Option<PathBuf> {
    let rel = Path::new("bench").join("awfy.toml");
    if rel.is_file() {
        return Some(rel);
    }
    this.ancestors()
        .skip(1)
        .map(|d| d.join(&rel))
        .find(|p| p.is_file())
}

/// Creates `out`, refusing a directory with anything in it unless `force`: results of an
/// earlier experiment are not overwritten by accident.
fn prepare_output_dir(out: &Path, force: bool) -> Result<(), Error> {
    if out.exists() {
        if !out.is_dir() {
            return Err(Error::Usage(format!(
                "{} exists and is not a directory",
                out.display()
            )));
        }
        let non_empty = std::fs::read_dir(out)
            .map_err(|e| Error::Usage(format!("{}: {e}", out.display())))?
            .next()
            .is_some();
        if non_empty && !force {
            return Err(Error::Usage(format!(
                "{} is not empty; choose another -o DIR or pass --force",
                out.display()
            )));
        }
    }
    std::fs::create_dir_all(out.join("profiles"))
        .map_err(|e| Error::Usage(format!("cannot create {}: {e}", out.display())))
}

/// Turns how the measuring loop stopped into the command's result, after the caller has
/// written its (possibly partial) results.
fn ending(stop: Option<Stop>) -> Result<Ending, Error> {
    match stop {
        None => Ok(Ending::Complete),
        Some(Stop::Interrupted) => Ok(Ending::Interrupted),
        Some(Stop::Failed(m)) => Err(Error::Failed(m)),
    }
}

/// The command line as typed, for the reports.
fn command_line() -> String {
    std::env::args()
        .map(|a| {
            if a.is_empty() || a.contains(|c: char| c.is_whitespace() || "'\"$\\".contains(c)) {
                format!("'{}'", a.replace('\'', r"'\''"))
            } else {
                a
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn output_dir_is_not_overwritten_without_force() {
        let d = tempfile::tempdir().unwrap();
        let out = d.path().join("new");
        prepare_output_dir(&out, false).unwrap();
        assert!(out.join("profiles").is_dir());
        // Only our empty profiles directory: still "not empty".
        assert!(prepare_output_dir(&out, false).is_err());
        prepare_output_dir(&out, true).unwrap();
        let file = d.path().join("file");
        std::fs::write(&file, "x").unwrap();
        assert!(prepare_output_dir(&file, true).is_err());
    }
}
