//! `tally bench …` and `tally bench report …`: argument parsing and the
//! top-level flow (check everything, measure, write, print).

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use clap::{ArgMatches, Args, CommandFactory, FromArgMatches, Parser};

use crate::analysis::{AnalysisSettings, Metric, Report};
use crate::error::BenchError;
use crate::executor::{Executor, PLACEHOLDERS};
use crate::results::{LockstepSettings, Machine, Results, Settings, FORMAT};
use crate::runner::{self, RunOptions};
use crate::suite::{Suite, SuiteOptions};

const RUN_AFTER_HELP: &str = "\
Executors (in the order given; the first is the baseline unless --baseline says otherwise):
  --tally NAME[@PATH][=FLAGS]     Tally with extra FLAGS; PATH defaults to this tally binary;
                                  {bench} in FLAGS becomes the benchmark's name
  --command NAME[@VM]=TEMPLATE    any command; {placeholders} in TEMPLATE are filled in:
PLACEHOLDERS
  With no executor, `--tally tally` is used. A Tally executor given `--tier-log` has its compile
  time per tier (and its share of the CPU time) in the table.

Suites:
  a directory in the Are We Fast Yet layout: every `Name = Benchmark (` class is a benchmark,
  the directory and its sub-directories are the class path; or a suite file (TOML):
      name = \"smoke\"                 # optional
      harness = \"Harness\"            # optional, the default
      classpath = [\"smoke\", \"${SOM}/Smalltalk\"]   # relative to the file; ${VAR} from the environment
      iterations = 10                # default iterations per invocation (outer)
      inner = 1                      # default inner count
      [[benchmark]]
      name = \"Fibonacci\"
      inner = 20                     # per-benchmark iterations/inner override the defaults

Output (in --out): results.json (every raw measurement), iterations.csv, invocations.csv,
summary.csv, warnings.csv, ratios.svg, warmup.svg, table.txt; the table is also printed on stdout.
The table's mean ± CI, median, min and max are over invocations (one value each: the metric).
Outliers are invocations whose value has a modified Z-score beyond ±3.5 (median absolute
deviation, five invocations or more); `!` marks a row where a comparison's verdict changes
without them. Warnings follow the table where its numbers mislead: iterations within 100 steps
of the harness's clock, a confidence interval wider than ±5 % (or none), a busy machine (load
average) or a child on a CPU for under 90 % of its wall time, warm-up iterations in the mean.
The suite-wide geometric mean of ratios gets three intervals: over benchmarks (how much the
ratio varies between benchmarks); paired by invocation round (how precisely the geomean
itself is known: executors run interleaved, each round gives one suite-wide ratio, and what
a round shares, a slow or busy machine, cancels); and the same paired estimate made robust
(per benchmark the Hodges-Lehmann ratio over rounds, a bootstrap interval over rounds), for
machines whose speed changes in phases: the few rounds measured across a change are outliers
there instead of the width of the interval. Within each round and benchmark the executors'
order rotates, so that none always runs first or next to the same neighbour.
With --lockstep[=MS], each round's executors of a benchmark start together, pinned to one CPU,
and run one at a time, MS milliseconds each (default 50), round-robin: the others are stopped
(SIGSTOP) meanwhile. Every executor then sees the same phases of a machine whose speed changes
several times a second, which pairs them far more closely than invocations one after the other
can, however long an iteration is. Tally executors run with --cpu-clock, so their harness times
process CPU time and not the time they were stopped; that is why only Tally executors can run
in lockstep. An invocation's wall time is then the sum of its turns. A lockstep run takes the
last CPU it may use that no other lockstep run holds (a lock file per CPU in the temporary
directory), and waits, saying so, when every one is held.
Ctrl-C stops after writing everything measured so far (press twice to quit at once).

Examples:
  tally bench bench/smoke.toml -n 5 -i 5
  tally bench bench/smoke.toml --tally base --tally 'small-heap=--heap-size 64M'
  AWFY=$SOM/Examples/AreWeFastYet tally bench bench/awfy.toml --classpath $SOM/Smalltalk \\
      --tally tally --command 'som-rs@/path/som-interpreter-bc={vm} -c {classpath_args} -- {harness} {bench} {iterations} {inner}'
  tally bench report tally-bench-smoke-20260101-120000/results.json --metric startup";

const REPORT_AFTER_HELP: &str = "\
Recomputes the table, CSV files and plots from a results file without running anything.
Analysis options given here replace those the run was reported with.
With --markdown it writes only the report in GitHub-flavoured Markdown (the table, then the
geometric means, failures and warnings as lists), to stdout or to the file -o names.
A file that is not a tally bench results file, or is damaged, is refused: the reason on
stderr, exit status 1, nothing written.

Examples:
  tally bench report results.json --baseline som-rs --metric steady --steady-window 3
  tally bench report results.json --markdown -o RESULTS.md";

/// tally bench: statistically rigorous benchmarking of SOM VMs (Georges et al., OOPSLA 2007).
///
/// Runs a suite × executors × invocations × iterations, interleaving the
/// executors, and reports per benchmark the mean with a confidence interval
/// over invocations, start-up and steady-state figures, the ratio to a
/// baseline executor with its interval and a significance test, and the
/// suite's geometric mean ratio.
#[derive(Parser, Debug)]
#[command(
    name = "tally bench",
    version,
    about = "Benchmark SOM VMs with statistical rigour: invocations × iterations, confidence intervals, \
             start-up and steady state, significance tests (Georges et al., OOPSLA 2007)",
    long_about = None
)]
struct RunCli {
    /// Suite file (.toml) or Are We Fast Yet-style directory.
    #[arg(value_name = "SUITE")]
    suite: PathBuf,

    /// A Tally executor: NAME[@PATH][=FLAGS] (repeatable).
    #[arg(long = "tally", short = 't', value_name = "NAME[@PATH][=FLAGS]")]
    tally: Vec<String>,

    /// An external executor: NAME[@VM]=TEMPLATE (repeatable).
    #[arg(long = "command", short = 'c', value_name = "NAME[@VM]=TEMPLATE")]
    command: Vec<String>,

    /// VM invocations per benchmark and executor (the sample size).
    #[arg(long, short = 'n', default_value_t = 10, value_parser = clap::value_parser!(u32).range(1..))]
    invocations: u32,

    /// Iterations per invocation (the harness's outer count); default: the suite's.
    #[arg(long, short = 'i', value_parser = clap::value_parser!(u32).range(1..))]
    iterations: Option<u32>,

    /// Inner count: N for every benchmark, or NAME=N[,NAME=N…] for some (repeatable).
    #[arg(long, value_name = "N|NAME=N,…")]
    inner: Vec<String>,

    /// Run only these benchmarks (comma-separated, repeatable).
    #[arg(long, short = 'b', value_name = "NAME,…", value_delimiter = ',')]
    bench: Vec<String>,

    /// Directories appended to the suite's class path, ':'-separated (repeatable).
    #[arg(long, value_name = "DIR:DIR…")]
    classpath: Vec<String>,

    /// Harness class to run instead of the suite's.
    #[arg(long, value_name = "CLASS")]
    harness: Option<String>,

    /// Kill an invocation after this many seconds and count it as failed.
    #[arg(long, value_name = "SECONDS")]
    timeout: Option<f64>,

    /// Output directory [default: tally-bench-SUITE-DATE-TIME].
    #[arg(long, short = 'o', value_name = "DIR")]
    out: Option<PathBuf>,

    /// No progress bar or messages on stderr.
    #[arg(long, short = 'q')]
    quiet: bool,

    /// Run each round's executors of a benchmark together on one CPU, taking turns of MS
    /// milliseconds, so that they see the same phases of a noisy machine (Tally executors
    /// only; see below).
    #[arg(long, value_name = "MS", num_args = 0..=1, require_equals = true, default_missing_value = "50", value_parser = clap::value_parser!(u64).range(1..=10_000))]
    lockstep: Option<u64>,

    #[command(flatten)]
    analysis: AnalysisArgs,
}

/// tally bench report: recompute a report from a results file.
#[derive(Parser, Debug)]
#[command(
    name = "tally bench report",
    version,
    about = "Recompute the report (table, CSV, plots) of a `tally bench` run from its results.json",
    after_help = REPORT_AFTER_HELP
)]
struct ReportCli {
    /// A results.json written by `tally bench`.
    #[arg(value_name = "RESULTS.json")]
    results: PathBuf,

    /// Where to write the CSV files, plots and table [default: the results file's directory];
    /// with --markdown, the Markdown file [default: stdout].
    #[arg(long, short = 'o', value_name = "DIR|FILE")]
    out: Option<PathBuf>,

    /// Write the report as GitHub-flavoured Markdown (the table, with the warnings as a list
    /// under it) instead of the table, CSV files and plots.
    #[arg(long)]
    markdown: bool,

    /// With --markdown: replace the file -o names if it exists.
    #[arg(long, requires = "markdown")]
    force: bool,

    #[command(flatten)]
    analysis: AnalysisArgs,
}

/// Analysis options shared by a run and a report; unset means "as stored"
/// (for a report) or the default (for a run).
#[derive(Args, Debug, Default)]
struct AnalysisArgs {
    /// Executor the others are compared to [default: the first].
    #[arg(long, value_name = "NAME")]
    baseline: Option<String>,

    /// Per-invocation number to compare [default: mean].
    #[arg(long, value_enum)]
    metric: Option<Metric>,

    /// Iterations dropped from the mean and min metrics [default: 0].
    #[arg(long, value_name = "N")]
    warmup: Option<u32>,

    /// Steady state: window of k iterations [default: 5].
    #[arg(long, value_name = "K", value_parser = clap::value_parser!(u64).range(2..))]
    steady_window: Option<u64>,

    /// Steady state: the window's coefficient of variation must be below this [default: 0.02].
    #[arg(long, value_name = "COV")]
    steady_cov: Option<f64>,

    /// Confidence level of intervals and tests [default: 0.95].
    #[arg(long, value_name = "LEVEL")]
    level: Option<f64>,
}

impl AnalysisArgs {
    fn apply(&self, mut s: AnalysisSettings) -> Result<AnalysisSettings, BenchError> {
        if let Some(b) = &self.baseline {
            s.baseline = Some(b.clone());
        }
        if let Some(m) = self.metric {
            s.metric = m;
        }
        if let Some(w) = self.warmup {
            s.warmup = w;
        }
        if let Some(k) = self.steady_window {
            s.steady_window = k as usize;
        }
        if let Some(c) = self.steady_cov {
            if !(c.is_finite() && c > 0.0) {
                return Err(BenchError::Usage(
                    "--steady-cov must be positive, e.g. 0.02".into(),
                ));
            }
            s.steady_cov = c;
        }
        if let Some(l) = self.level {
            if !(l > 0.0 && l < 1.0) {
                return Err(BenchError::Usage(
                    "--level must be between 0 and 1, e.g. 0.95".into(),
                ));
            }
            s.level = l;
        }
        Ok(s)
    }
}

/// Entry point: `args` are the words after `tally bench`; `tally` is the
/// binary Tally executors run by default (normally the running one).
pub fn main(args: Vec<OsString>, tally: PathBuf) -> ExitCode {
    let result = if args.first().is_some_and(|a| a == "report") {
        report_main(args[1..].to_vec())
    } else {
        run_main(args, &tally)
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("tally bench: error: {e}");
            ExitCode::from(e.exit_code())
        }
    }
}

fn run_command() -> clap::Command {
    RunCli::command()
        .after_help(RUN_AFTER_HELP.replace("PLACEHOLDERS", &indent(PLACEHOLDERS, "      ")))
}

fn indent(text: &str, prefix: &str) -> String {
    text.lines()
        .map(|l| format!("{prefix}{l}"))
        .collect::<Vec<_>>()
        .join("\n")
}

fn parse_or_exit<T: FromArgMatches>(cmd: clap::Command, args: Vec<OsString>) -> (T, ArgMatches) {
    let bin = OsString::from(cmd.get_name().to_string());
    let matches = cmd.get_matches_from(std::iter::once(bin).chain(args));
    let parsed = T::from_arg_matches(&matches).unwrap_or_else(|e| e.exit());
    (parsed, matches)
}

/// Executors in command-line order, `--tally` and `--command` mixed, so the
/// first one written is the baseline whatever its kind.
fn executors_in_order(
    cli: &RunCli,
    matches: &ArgMatches,
    tally: &Path,
) -> Result<Vec<Executor>, BenchError> {
    let mut specs: Vec<(usize, bool, &String)> = Vec::new();
    if let Some(idx) = matches.indices_of("tally") {
        specs.extend(idx.zip(&cli.tally).map(|(i, s)| (i, true, s)));
    }
    if let Some(idx) = matches.indices_of("command") {
        specs.extend(idx.zip(&cli.command).map(|(i, s)| (i, false, s)));
    }
    specs.sort_by_key(|(i, _, _)| *i);
    let mut executors = Vec::new();
    for (_, is_tally, spec) in specs {
        let e = if is_tally {
            Executor::parse_tally(spec, tally)?
        } else {
            Executor::parse_command(spec)?
        };
        if executors.iter().any(|x: &Executor| x.name == e.name) {
            return Err(BenchError::Usage(format!(
                "two executors are named {:?}",
                e.name
            )));
        }
        executors.push(e);
    }
    if executors.is_empty() {
        executors.push(Executor::parse_tally("tally", tally)?);
    }
    Ok(executors)
}

fn suite_options(cli: &RunCli) -> Result<SuiteOptions, BenchError> {
    let mut o = SuiteOptions {
        iterations: cli.iterations,
        only: cli
            .bench
            .iter()
            .filter(|b| !b.is_empty())
            .cloned()
            .collect(),
        harness: cli.harness.clone(),
        extra_classpath: cli
            .classpath
            .iter()
            .flat_map(|c| c.split(':'))
            .filter(|d| !d.is_empty())
            .map(PathBuf::from)
            .collect(),
        ..Default::default()
    };
    for spec in &cli.inner {
        for part in spec.split(',').filter(|p| !p.is_empty()) {
            let bad =
                || BenchError::Usage(format!("--inner {part:?}: expected N or NAME=N with N ≥ 1"));
            match part.split_once('=') {
                Some((name, n)) => {
                    let n: u64 = n.trim().parse().ok().filter(|n| *n >= 1).ok_or_else(bad)?;
                    o.inner_for.insert(name.trim().to_string(), n);
                }
                None => {
                    o.inner = Some(
                        part.trim()
                            .parse()
                            .ok()
                            .filter(|n| *n >= 1)
                            .ok_or_else(bad)?,
                    )
                }
            }
        }
    }
    Ok(o)
}

fn run_main(args: Vec<OsString>, tally: &Path) -> Result<ExitCode, BenchError> {
    let (cli, matches): (RunCli, ArgMatches) = parse_or_exit(run_command(), args);
    let settings = cli.analysis.apply(AnalysisSettings::default())?;
    let suite = Suite::load(&cli.suite, &suite_options(&cli)?)?;
    let executors = executors_in_order(&cli, &matches, tally)?;
    for e in &executors {
        e.check_can_start(&suite)?;
    }
    if let Some(b) = &settings.baseline {
        if !executors.iter().any(|e| &e.name == b) {
            return Err(BenchError::Usage(format!(
                "--baseline {b:?} is not one of the executors"
            )));
        }
    }
    if cli.lockstep.is_some() {
        if let Some(other) = executors
            .iter()
            .find(|e| !matches!(e.kind, crate::executor::ExecutorKind::Tally { .. }))
        {
            return Err(BenchError::Usage(format!(
                "--lockstep: executor {:?} is not a Tally; only Tally can time its harness by CPU time (tally --cpu-clock)",
                other.name
            )));
        }
    }
    let timeout = match cli.timeout {
        Some(t) if t.is_finite() && t > 0.0 => Some(Duration::from_secs_f64(t)),
        Some(_) => {
            return Err(BenchError::Usage(
                "--timeout must be a positive number of seconds".into(),
            ))
        }
        None => None,
    };
    let started = crate::now_rfc3339();
    let out = cli.out.clone().unwrap_or_else(|| {
        PathBuf::from(format!(
            "tally-bench-{}-{}",
            suite.name,
            started
                .replace(['-', ':'], "")
                .replace('T', "-")
                .trim_end_matches('Z')
        ))
    });
    std::fs::create_dir_all(&out).map_err(|source| BenchError::Write {
        path: out.clone(),
        source,
    })?;
    let json = out.join("results.json");
    if json.exists() {
        return Err(BenchError::Usage(format!(
            "{} already exists; choose another --out (or `tally bench report` it)",
            json.display()
        )));
    }

    let interrupted = runner::install_interrupt_handler("tally bench");
    let mut results = Results {
        format: FORMAT.into(),
        tool: format!("tally {}", env!("CARGO_PKG_VERSION")),
        started: started.clone(),
        finished: started,
        complete: false,
        machine: Machine::current(),
        settings: Settings {
            invocations: cli.invocations,
            timeout_s: cli.timeout,
            lockstep: None,
            analysis: settings.clone(),
        },
        suite,
        executors,
        invocations: Vec::new(),
    };
    // After the machine is described: pinned, this process sees one CPU.
    // Held until the run ends, so that a second lockstep run takes another CPU or waits.
    let cpu_claim = cli
        .lockstep
        .map(|_| crate::cpu::claim_and_pin(cli.quiet))
        .transpose()
        .map_err(|e| BenchError::Usage(format!("--lockstep: cannot pin to one CPU: {e}")))?;
    if let (Some(slice_ms), Some(claim)) = (cli.lockstep, &cpu_claim) {
        results.settings.lockstep = Some(LockstepSettings {
            cpu: claim.cpu,
            slice_ms,
        });
    }

    if !cli.quiet {
        eprintln!(
            "tally bench: {} benchmark(s) × {} executor(s) × {} invocation(s){}; writing to {}",
            results.suite.benchmarks.len(),
            results.executors.len(),
            cli.invocations,
            results
                .settings
                .lockstep
                .as_ref()
                .map(|l| format!(", in lockstep on CPU {} ({} ms turns)", l.cpu, l.slice_ms))
                .unwrap_or_default(),
            out.display()
        );
    }
    results.write(&json)?;
    let mut write_error = None;
    let complete = runner::run(
        &mut results,
        &RunOptions {
            timeout,
            quiet: cli.quiet,
            lockstep: cli.lockstep.map(Duration::from_millis),
        },
        &interrupted,
        |r| {
            if let Err(e) = r.write(&json) {
                write_error.get_or_insert(e);
            }
        },
    );
    if let Some(e) = write_error {
        return Err(e);
    }
    results.complete = complete;
    results.finished = crate::now_rfc3339();
    results.machine.load_average_end = crate::results::load_average();
    results.write(&json)?;
    let any_failed = results
        .invocations
        .iter()
        .any(|i| i.outcome == crate::results::Outcome::Failed);
    write_reports(&results, &settings, &out)?;
    if !cli.quiet {
        eprintln!("tally bench: wrote {}", out.display());
    }
    Ok(if !complete {
        ExitCode::from(130)
    } else if any_failed {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}

fn report_main(args: Vec<OsString>) -> Result<ExitCode, BenchError> {
    let (cli, _): (ReportCli, ArgMatches) = parse_or_exit(ReportCli::command(), args);
    let results = Results::read(&cli.results)?;
    let settings = cli.analysis.apply(results.settings.analysis.clone())?;
    if cli.markdown {
        write_markdown(&results, &settings, cli.out.as_deref(), cli.force)?;
        return Ok(ExitCode::SUCCESS);
    }
    let out = cli.out.clone().unwrap_or_else(|| {
        cli.results
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .map(Path::to_path_buf)
            .unwrap_or_else(|| PathBuf::from("."))
    });
    std::fs::create_dir_all(&out).map_err(|source| BenchError::Write {
        path: out.clone(),
        source,
    })?;
    write_reports(&results, &settings, &out)?;
    Ok(ExitCode::SUCCESS)
}

/// `report --markdown`: the Markdown report on stdout, or in `out`, which is replaced only
/// with `force`. Everything is checked and rendered before anything is written.
fn write_markdown(
    results: &Results,
    settings: &AnalysisSettings,
    out: Option<&Path>,
    force: bool,
) -> Result<(), BenchError> {
    let report = Report::new(results, settings).map_err(BenchError::Usage)?;
    let text = crate::markdown::render(results, &report);
    let Some(path) = out else {
        print!("{text}");
        return Ok(());
    };
    if path.is_dir() {
        return Err(BenchError::Usage(format!(
            "-o {}: a directory; with --markdown, -o names the Markdown file",
            path.display()
        )));
    }
    let if_exists = tally_output::IfExists::from_force(force);
    Ok(tally_output::write(path, text.as_bytes(), if_exists)?)
}

/// Analyses, prints the table on stdout and writes table, CSV and plots.
fn write_reports(
    results: &Results,
    settings: &AnalysisSettings,
    out: &Path,
) -> Result<(), BenchError> {
    let report = Report::new(results, settings).map_err(BenchError::Usage)?;
    let table = crate::table::render(results, &report);
    print!("{table}");
    tally_output::write(
        &out.join("table.txt"),
        table.as_bytes(),
        tally_output::IfExists::Replace,
    )?;
    crate::csv_out::write_all(out, results, &report)?;
    crate::svg::write_all(out, results, &report)
}
