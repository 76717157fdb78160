//! `tally experiment inlining`: Arnold & Grove (CGO 2005), Table 3 / Figure 5 — what the
//! call graph that directs inlining is worth.
//!
//! Every benchmark runs under the adaptive tier with its inlining directed by CBS's call
//! graph, by the caller–callee pairs of the method samples, by the exhaustive graph (every
//! call counted: a perfect profile, recorded by an earlier run so that it measures the
//! graph's accuracy and not its cost), by static size heuristics alone, and not at all; each
//! against no inlining in steady state. The same runs with `--inline=off` and a graph
//! collected but not read give what collecting each graph costs. The executors of a
//! benchmark run in lockstep (`tally bench --lockstep`), so machine noise lands on all of
//! them alike, and the raw results are `tally bench`'s (`results.json`, which `tally bench
//! report` reads too).

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::time::Duration;

use clap::Args;
use serde::Serialize;
use tally_bench::analysis::{AnalysisSettings, Metric, Report};
use tally_bench::executor::{Executor, ExecutorKind};
use tally_bench::measure::run_process;
use tally_bench::results::{
    InvocationRecord, LockstepSettings, Machine, Outcome, Results, Settings, FORMAT,
};
use tally_bench::runner::RunOptions;
use tally_bench::suite::Suite;
use tally_stats::ConfidenceInterval;

use super::{command_line, load_suite, prepare_output_dir, Ending, Error};

pub const AFTER_HELP: &str = "\
Runs each benchmark of the suite (default bench/awfy.toml, all of it; needs SOM=/path/to/SOM)
as one process per executor and invocation, the executors of a benchmark in lockstep on one
CPU, every process under --tier=adaptive:

  none                 --inline=off: the denominator
  cbs, samples, static --inline-by=cbs | samples | static: inlining directed by the call
                       graph the run collects (static: none, size limits alone)
  exhaustive           --inline-by=exhaustive --inline-graph=DIR/profiles/BENCH.tprof: the
                       perfect call graph, recorded first by an interpreted --exhaustive
                       run of each benchmark (--reference-iterations), so that the measured
                       runs pay nothing for it
  cbs-only, …          --inline=off --inline-by=…: the graph collected and not read (for
                       exhaustive: every call counted as the program runs); --overhead
                       says which

Speed is the mean of the iterations after --warmup (steady state), per benchmark as the
ratio none / config (above 1: inlining pays) with Fieller's interval, and over the suite as
the geometric mean paired by invocation with its t-interval. CBS against exhaustive is the
time ratio cbs / exhaustive over the suite (above 1: CBS-directed code is slower): the
paper's claim is that CBS comes within a few percent of a perfect profile. Overhead is the mean of all iterations of X-only against
none. Writes inlining.md (also printed), inlining.json, inlining.svg, results.json and
tally bench's ratios.svg / warmup.svg.

Examples:
  SOM=/path/to/SOM tally experiment inlining -o inlining-results
  SOM=/path/to/SOM tally experiment inlining -b DeltaBlue,Richards -n 2 -i 12 --warmup 6
  tally experiment inlining --suite bench/smoke.toml -b Fibonacci -n 1 -i 4 --warmup 2";

/// The graphs the experiment compares, as `--inline-by` names them.
const CONFIGS: [&str; 4] = ["cbs", "samples", "exhaustive", "static"];

#[derive(Args, Debug, Clone)]
pub struct InliningArgs {
    /// Suite file (.toml) or Are We Fast Yet directory, as for `tally bench`
    /// [default: bench/awfy.toml, looked up in the current directory and above this binary].
    #[arg(long, value_name = "SUITE")]
    suite: Option<PathBuf>,

    /// Benchmarks to run, in this order [default: every benchmark of the suite].
    #[arg(long, short = 'b', value_name = "NAME,…", value_delimiter = ',')]
    benchmarks: Vec<String>,

    /// What directs inlining, among cbs, samples, exhaustive and static (`none`, no
    /// inlining, always runs: it is the denominator).
    #[arg(
        long,
        value_name = "GRAPH,…",
        value_delimiter = ',',
        default_value = "cbs,samples,exhaustive,static"
    )]
    configs: Vec<String>,

    /// The graphs whose collection cost is measured (runs that collect the graph and do not
    /// read it), among cbs, samples and exhaustive; `none` measures none. Counting every
    /// call makes the exhaustive ones the longest runs of the experiment.
    #[arg(
        long,
        value_name = "GRAPH,…",
        value_delimiter = ',',
        default_value = "cbs,samples,exhaustive"
    )]
    overhead: Vec<String>,

    /// Iterations of the interpreted exhaustive run that records each benchmark's perfect
    /// call graph (the `exhaustive` config reads it with `--inline-graph`).
    #[arg(long, value_name = "N", default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..))]
    reference_iterations: u32,

    /// Invocations (processes) per benchmark and executor.
    #[arg(long, short = 'n', value_name = "N", default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..))]
    invocations: u32,

    /// Iterations of the harness per process.
    #[arg(long, short = 'i', value_name = "N", default_value_t = 20, value_parser = clap::value_parser!(u32).range(1..))]
    iterations: u32,

    /// Iterations left out of the steady-state mean (the first ones: interpretation,
    /// compilation).
    #[arg(long, value_name = "N", default_value_t = 10)]
    warmup: u32,

    /// Length of each executor's turn in lockstep, milliseconds; 0 runs the executors one
    /// after another instead.
    #[arg(long, value_name = "MS", default_value_t = 25)]
    lockstep: u64,

    /// The tally binary to measure [default: this one].
    #[arg(long, value_name = "PATH")]
    tally: Option<PathBuf>,

    /// Kill an invocation after this many seconds (it is then a failure).
    #[arg(long, value_name = "SECONDS", default_value_t = 600.0)]
    timeout: f64,

    /// Confidence level of the intervals.
    #[arg(long, default_value_t = 0.95)]
    level: f64,

    /// Output directory [default: tally-experiment-inlining-DATE-TIME].
    #[arg(long, short = 'o', value_name = "DIR")]
    out: Option<PathBuf>,

    /// Write into an output directory that is not empty (files of the same name are replaced).
    #[arg(long)]
    force: bool,

    /// No progress on stderr.
    #[arg(long, short = 'q')]
    quiet: bool,
}

/// One ratio with its interval, as the summary stores it.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Ratio {
    pub estimate: f64,
    pub lower: Option<f64>,
    pub upper: Option<f64>,
}

impl Ratio {
    fn from_ci(estimate: f64, ci: Option<&ConfidenceInterval>) -> Ratio {
        Ratio {
            estimate,
            lower: ci.map(|c| c.lower),
            upper: ci.map(|c| c.upper),
        }
    }

    /// The reciprocal (a time ratio turned into a speedup), bounds swapped; an interval
    /// reaching down to 0 has no reciprocal and is left out.
    fn inverse(&self) -> Ratio {
        let bounded = self.lower.is_some_and(|l| l > 0.0) && self.upper.is_some();
        Ratio {
            estimate: 1.0 / self.estimate,
            lower: self.upper.filter(|_| bounded).map(|u| 1.0 / u),
            upper: self.lower.filter(|_| bounded).map(|l| 1.0 / l),
        }
    }

    fn show(&self) -> String {
        match (self.lower, self.upper) {
            (Some(l), Some(u)) => format!("{:.3} [{l:.3}, {u:.3}]", self.estimate),
            _ => format!("{:.3}", self.estimate),
        }
    }
}

/// What `inlining.json` holds: the figures of the table, recomputable from `results.json`.
#[derive(Debug, Serialize)]
pub struct Summary {
    pub format: &'static str,
    /// Every planned invocation ran.
    pub complete: bool,
    pub command: String,
    pub warmup: u32,
    pub level: f64,
    pub configs: Vec<String>,
    pub benchmarks: Vec<String>,
    /// Per config, per benchmark (suite order): speedup over no inlining, steady state.
    pub speedup: Vec<Vec<Option<Ratio>>>,
    /// Per config: the suite's geometric mean speedup, paired by invocation.
    pub geomean: Vec<Option<Ratio>>,
    /// time(cbs) / time(exhaustive) in steady state over the suite, when both ran.
    pub cbs_over_exhaustive: Option<Ratio>,
    /// Per collected graph: time(X-only) / time(none) over all iterations, geometric mean.
    pub overhead: Vec<(String, Option<Ratio>)>,
}

pub fn run(args: InliningArgs, this: &Path) -> Result<Ending, Error> {
    if !(args.level > 0.0 && args.level < 1.0) {
        return Err(Error::Usage("--level must be between 0 and 1".into()));
    }
    if args.warmup >= args.iterations {
        return Err(Error::Usage(format!(
            "--warmup {} leaves none of the {} iterations for the steady state",
            args.warmup, args.iterations
        )));
    }
    if !(args.timeout.is_finite() && args.timeout > 0.0) {
        return Err(Error::Usage(
            "--timeout must be a positive number of seconds".into(),
        ));
    }
    let mut configs: Vec<String> = Vec::new();
    for c in args.configs.iter().map(|c| c.trim()) {
        if !CONFIGS.contains(&c) {
            return Err(Error::Usage(format!(
                "--configs: no graph `{c}` (take cbs, samples, exhaustive, static)"
            )));
        }
        if !configs.iter().any(|x| x == c) {
            configs.push(c.to_string());
        }
    }
    if configs.is_empty() {
        return Err(Error::Usage("--configs names no graph".into()));
    }
    let mut collected: Vec<String> = Vec::new();
    for c in args.overhead.iter().map(|c| c.trim()) {
        match c {
            "none" => {}
            "cbs" | "samples" | "exhaustive" => {
                if !collected.iter().any(|x| x == c) {
                    collected.push(c.to_string());
                }
            }
            _ => {
                return Err(Error::Usage(format!(
                "--overhead: no graph `{c}` is collected (take cbs, samples, exhaustive or none)"
            )))
            }
        }
    }
    let suite = load_suite(
        args.suite.as_deref(),
        &args.benchmarks,
        args.iterations,
        this,
    )?;
    let tally = args.tally.clone().unwrap_or_else(|| this.to_path_buf());
    if tally_bench::executor::resolve_program(&tally.display().to_string()).is_none() {
        return Err(Error::Usage(format!(
            "--tally {}: not found or not executable",
            tally.display()
        )));
    }
    let started = tally_bench::now_rfc3339();
    let out = args.out.clone().unwrap_or_else(|| {
        PathBuf::from(format!(
            "tally-experiment-inlining-{}",
            started
                .replace(['-', ':'], "")
                .replace('T', "-")
                .trim_end_matches('Z')
        ))
    });
    prepare_output_dir(&out, args.force)?;
    let graphs = out.join("profiles");
    let interrupted = tally_bench::runner::install_interrupt_handler("tally experiment inlining");
    let timeout = Duration::from_secs_f64(args.timeout);
    if configs.iter().any(|c| c == "exhaustive") {
        let mut reference = suite.clone();
        for b in &mut reference.benchmarks {
            b.iterations = args.reference_iterations;
        }
        record_graphs(
            &reference,
            &tally,
            &graphs,
            timeout,
            args.quiet,
            &interrupted,
        )?;
        if interrupted.load(Ordering::SeqCst) {
            return Ok(Ending::Interrupted);
        }
    } else {
        let _ = std::fs::remove_dir(&graphs);
    }
    let executors = executors(&tally, &configs, &collected, &graphs);
    let settings = AnalysisSettings {
        level: args.level,
        metric: Metric::Mean,
        warmup: args.warmup,
        baseline: Some("none".into()),
        ..AnalysisSettings::default()
    };
    let mut results = Results {
        format: FORMAT.into(),
        tool: format!("tally experiment inlining {}", env!("CARGO_PKG_VERSION")),
        started: started.clone(),
        finished: started,
        complete: false,
        machine: Machine::current(),
        settings: Settings {
            invocations: args.invocations,
            timeout_s: Some(args.timeout),
            lockstep: None,
            analysis: settings.clone(),
        },
        suite,
        executors,
        invocations: Vec::new(),
    };
    let lockstep = (args.lockstep > 0).then_some(args.lockstep);
    let claim = lockstep
        .map(|_| tally_bench::cpu::claim_and_pin(args.quiet))
        .transpose()
        .map_err(|e| Error::Usage(format!("--lockstep: cannot pin to one CPU: {e}")))?;
    if let (Some(slice_ms), Some(c)) = (lockstep, &claim) {
        results.settings.lockstep = Some(LockstepSettings {
            cpu: c.cpu,
            slice_ms,
        });
    }
    let json = out.join("results.json");
    let write = |r: &Results| {
        r.write(&json)
            .map_err(|e| Error::Failed(format!("cannot write {}: {e}", json.display())))
    };
    write(&results)?;
    if !args.quiet {
        eprintln!(
            "tally experiment inlining: {} benchmark(s) × {} executor(s) × {} invocation(s) × {} iterations; writing to {}",
            results.suite.benchmarks.len(),
            results.executors.len(),
            args.invocations,
            args.iterations,
            out.display()
        );
    }
    let mut write_error = None;
    let complete = tally_bench::runner::run(
        &mut results,
        &RunOptions {
            timeout: Some(timeout),
            quiet: args.quiet,
            lockstep: lockstep.map(Duration::from_millis),
        },
        &interrupted,
        |r| {
            if let Err(e) = write(r) {
                write_error.get_or_insert(e);
            }
        },
    );
    if let Some(e) = write_error {
        return Err(e);
    }
    results.complete = complete && !interrupted.load(Ordering::SeqCst);
    results.finished = tally_bench::now_rfc3339();
    write(&results)?;
    let summary = summarize(&results, &configs, &settings)?;
    let speed = Report::new(&results, &settings).map_err(Error::Failed)?;
    tally_bench::svg::write_all(&out, &results, &speed)
        .map_err(|e| Error::Failed(e.to_string()))?;
    let md = markdown(&summary, &results);
    write_file(&out.join("inlining.md"), &md)?;
    let text = serde_json::to_string_pretty(&summary)
        .map_err(|e| Error::Failed(format!("cannot encode the summary: {e}")))?;
    write_file(&out.join("inlining.json"), &text)?;
    write_file(&out.join("inlining.svg"), &plot(&summary))?;
    print!("{md}");
    if !args.quiet {
        eprintln!("tally experiment inlining: wrote {}", out.display());
    }
    let failed = results
        .invocations
        .iter()
        .any(|i| i.outcome == tally_bench::results::Outcome::Failed);
    if !results.complete {
        Ok(Ending::Interrupted)
    } else if failed {
        Err(Error::Failed(
            "some invocations failed (see results.json and the failures in inlining.md)".into(),
        ))
    } else {
        Ok(Ending::Complete)
    }
}

/// Records each benchmark's exhaustive call graph into `dir/BENCH.tprof`, interpreted.
fn record_graphs(
    suite: &Suite,
    tally: &Path,
    dir: &Path,
    timeout: Duration,
    quiet: bool,
    interrupted: &std::sync::atomic::AtomicBool,
) -> Result<(), Error> {
    for b in &suite.benchmarks {
        let path = dir.join(format!("{}.tprof", b.name));
        let recorder = Executor {
            name: "exhaustive-reference".into(),
            kind: ExecutorKind::Tally {
                program: tally.to_path_buf(),
                flags: vec![
                    "--tier=interp".into(),
                    "--exhaustive".into(),
                    "--sampler=none".into(),
                    "--cbs=off".into(),
                    "--force".into(),
                    format!("--profile={}", path.display()),
                ],
            },
        };
        let argv = recorder.argv(suite, b);
        if !quiet {
            eprintln!(
                "tally experiment inlining: recording the exhaustive call graph of {} ({} iterations, interpreted)",
                b.name, b.iterations
            );
        }
        let run = run_process(&argv, Some(timeout), interrupted)
            .map_err(|e| Error::Failed(format!("cannot start {}: {e}", argv[0])))?;
        if interrupted.load(Ordering::SeqCst) {
            return Ok(());
        }
        let record = InvocationRecord::from_run(b, &recorder.name, 0, 0, argv.clone(), &run);
        if record.outcome != Outcome::Ok || !path.is_file() {
            return Err(Error::Failed(format!(
                "the exhaustive run of {} failed: {}\ncommand: {}\n{}",
                b.name,
                record.failure.as_deref().unwrap_or("no profile written"),
                argv.join(" "),
                record.output_tail.as_deref().unwrap_or("")
            )));
        }
    }
    Ok(())
}

/// `none`, each config, and each graph of `collected` collected and read by nobody; the
/// exhaustive config reads the graph recorded in `graphs`.
fn executors(
    tally: &Path,
    configs: &[String],
    collected: &[String],
    graphs: &Path,
) -> Vec<Executor> {
    let tally_exec = |name: String, flags: &[&str]| Executor {
        name,
        kind: ExecutorKind::Tally {
            program: tally.to_path_buf(),
            flags: flags.iter().map(|f| f.to_string()).collect(),
        },
    };
    let mut out = vec![tally_exec(
        "none".into(),
        &["--tier=adaptive", "--inline=off"],
    )];
    for c in configs {
        let by = format!("--inline-by={c}");
        if c == "exhaustive" {
            let file = format!("--inline-graph={}/{{bench}}.tprof", graphs.display());
            out.push(tally_exec(c.clone(), &["--tier=adaptive", &by, &file]));
        } else {
            out.push(tally_exec(c.clone(), &["--tier=adaptive", &by]));
        }
    }
    for c in collected {
        let by = format!("--inline-by={c}");
        out.push(tally_exec(
            format!("{c}-only"),
            &["--tier=adaptive", "--inline=off", &by],
        ));
    }
    out
}

fn summarize(
    results: &Results,
    configs: &[String],
    settings: &AnalysisSettings,
) -> Result<Summary, Error> {
    let speed = Report::new(results, settings).map_err(Error::Failed)?;
    let index = |report: &Report, name: &str| report.executors.iter().position(|e| e == name);
    let geomean = |report: &Report, name: &str| -> Option<Ratio> {
        let i = index(report, name)?;
        let row = report.geomeans.iter().find(|g| g.executor == i)?;
        let ci = row.paired.as_ref().map(|p| &p.ci).or(row.ci.as_ref());
        Some(Ratio::from_ci(ci.map_or(row.estimate, |c| c.estimate), ci))
    };
    let mut speedup = Vec::new();
    let mut geomeans = Vec::new();
    for c in configs {
        let i = index(&speed, c);
        speedup.push(
            speed
                .benchmarks
                .iter()
                .map(|b| {
                    let r = b.cells.get(i?)?.ratio.as_ref()?;
                    Some(Ratio::from_ci(r.estimate, r.ci.as_ref()).inverse())
                })
                .collect(),
        );
        geomeans.push(geomean(&speed, c).map(|r| r.inverse()));
    }
    let has = |c: &str| configs.iter().any(|x| x == c);
    let cbs_over_exhaustive = if has("cbs") && has("exhaustive") {
        let s = AnalysisSettings {
            baseline: Some("exhaustive".into()),
            ..settings.clone()
        };
        let r = Report::new(results, &s).map_err(Error::Failed)?;
        geomean(&r, "cbs")
    } else {
        None
    };
    let whole_run = AnalysisSettings {
        warmup: 0,
        ..settings.clone()
    };
    let all = Report::new(results, &whole_run).map_err(Error::Failed)?;
    let overhead = ["cbs", "samples", "exhaustive"]
        .iter()
        .map(|c| format!("{c}-only"))
        .filter(|name| index(&all, name).is_some())
        .map(|name| {
            let r = geomean(&all, &name);
            (name, r)
        })
        .collect();
    Ok(Summary {
        format: "tally-experiment-inlining/1",
        complete: results.complete,
        command: command_line(),
        warmup: settings.warmup,
        level: settings.level,
        configs: configs.to_vec(),
        benchmarks: speed.benchmarks.iter().map(|b| b.name.clone()).collect(),
        speedup,
        geomean: geomeans,
        cbs_over_exhaustive,
        overhead,
    })
}

fn markdown(s: &Summary, results: &Results) -> String {
    let mut md = String::new();
    let pct = (s.level * 100.0).round();
    let _ = writeln!(
        md,
        "# Inlining directed by call graphs (Arnold & Grove, CGO 2005)\n"
    );
    let _ = writeln!(
        md,
        "Speedup over no inlining (`--inline=off`) in steady state (mean of the iterations after the first {}), {pct:.0} % intervals; above 1 inlining pays. `{}`\n",
        s.warmup, s.command
    );
    let _ = write!(md, "| benchmark |");
    for c in &s.configs {
        let _ = write!(md, " {c} |");
    }
    let _ = write!(md, "\n|---|");
    for _ in &s.configs {
        let _ = write!(md, "---:|");
    }
    md.push('\n');
    for (b, name) in s.benchmarks.iter().enumerate() {
        let _ = write!(md, "| {name} |");
        for per in &s.speedup {
            let cell = per.get(b).cloned().flatten();
            let _ = write!(md, " {} |", cell.map_or("–".into(), |r| r.show()));
        }
        md.push('\n');
    }
    let _ = write!(md, "| **geomean** (paired by invocation) |");
    for g in &s.geomean {
        let _ = write!(md, " **{}** |", g.as_ref().map_or("–".into(), |r| r.show()));
    }
    md.push_str("\n\n");
    if let Some(r) = &s.cbs_over_exhaustive {
        let verdict = match (r.lower, r.upper) {
            (Some(l), Some(u)) if l >= 0.98 && u <= 1.02 => "within 2 %",
            (Some(l), Some(u)) if u < 0.98 || l > 1.02 => "not within 2 %",
            _ => "not resolved to 2 % at this noise",
        };
        let _ = writeln!(
            md,
            "CBS-directed against exhaustive-directed, time ratio cbs / exhaustive over the suite (steady state): {} — {verdict}.\n",
            r.show()
        );
    }
    if !s.overhead.is_empty() {
        let _ = writeln!(
            md,
            "What collecting each graph costs, time ratio over all iterations of `--inline=off --inline-by=X` against `--inline=off` (geomean, paired):\n"
        );
        let _ = writeln!(md, "| graph | time ratio |\n|---|---:|");
        for (name, r) in &s.overhead {
            let _ = writeln!(
                md,
                "| {} | {} |",
                name.trim_end_matches("-only"),
                r.as_ref().map_or("–".into(), |r| r.show())
            );
        }
        md.push('\n');
    }
    let failed: Vec<String> = results
        .invocations
        .iter()
        .filter(|i| i.outcome == tally_bench::results::Outcome::Failed)
        .map(|i| {
            format!(
                "- {} on {} (invocation {}): {}",
                i.benchmark,
                i.executor,
                i.invocation,
                i.failure.clone().unwrap_or_default()
            )
        })
        .collect();
    if !failed.is_empty() {
        let _ = writeln!(md, "Failed invocations:\n\n{}\n", failed.join("\n"));
    }
    md
}

/// The geomean speedup of each config with its interval, one bar each.
fn plot(s: &Summary) -> String {
    use tally_bench::svg::{colour, esc, header, tick_label};
    let (w, bar_h, top, left) = (640.0, 28.0, 40.0, 110.0);
    let rows: Vec<(&String, &Ratio)> = s
        .configs
        .iter()
        .zip(&s.geomean)
        .filter_map(|(c, g)| Some((c, g.as_ref()?)))
        .collect();
    let h = top + rows.len() as f64 * (bar_h + 10.0) + 40.0;
    let max = rows
        .iter()
        .map(|(_, r)| r.upper.unwrap_or(r.estimate).max(r.estimate))
        .fold(1.0f64, f64::max)
        * 1.1;
    let x = |v: f64| left + (w - left - 30.0) * v / max;
    let mut out = String::new();
    header(&mut out, w, h);
    let _ = writeln!(
        out,
        r#"<text x="{left}" y="20" font-weight="bold">Speedup over no inlining, steady state (geomean over {} benchmarks)</text>"#,
        s.benchmarks.len()
    );
    for (i, (name, r)) in rows.iter().enumerate() {
        let y = top + i as f64 * (bar_h + 10.0);
        let _ = writeln!(
            out,
            r#"<text x="{}" y="{:.1}" text-anchor="end">{}</text>"#,
            left - 8.0,
            y + bar_h * 0.65,
            esc(name)
        );
        let _ = writeln!(
            out,
            r#"<rect x="{left}" y="{y:.1}" width="{:.1}" height="{bar_h}" fill="{}"/>"#,
            x(r.estimate) - left,
            colour(i)
        );
        if let (Some(l), Some(u)) = (r.lower, r.upper) {
            let mid = y + bar_h / 2.0;
            let _ = writeln!(
                out,
                r#"<line x1="{:.1}" y1="{mid:.1}" x2="{:.1}" y2="{mid:.1}" stroke="black" stroke-width="2"/>"#,
                x(l),
                x(u)
            );
        }
        let _ = writeln!(
            out,
            r#"<text x="{:.1}" y="{:.1}">{}</text>"#,
            x(r.upper.unwrap_or(r.estimate).max(r.estimate)) + 6.0,
            y + bar_h * 0.65,
            tick_label(r.estimate)
        );
    }
    let base = top + rows.len() as f64 * (bar_h + 10.0);
    let _ = writeln!(
        out,
        r#"<line x1="{:.1}" y1="{top}" x2="{:.1}" y2="{base:.1}" stroke="gray" stroke-dasharray="4 3"/>"#,
        x(1.0),
        x(1.0)
    );
    let _ = writeln!(
        out,
        r#"<text x="{:.1}" y="{:.1}" text-anchor="middle" fill="gray">1 (no inlining)</text>"#,
        x(1.0),
        base + 16.0
    );
    out.push_str("</svg>\n");
    out
}

fn write_file(path: &Path, text: &str) -> Result<(), Error> {
    super::output::write_file(path, text).map_err(Error::Failed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_time_ratio_becomes_a_speedup_with_its_bounds_swapped() {
        let r = Ratio {
            estimate: 0.5,
            lower: Some(0.4),
            upper: Some(0.8),
        };
        let s = r.inverse();
        assert_eq!(s.estimate, 2.0);
        assert_eq!(s.lower, Some(1.25));
        assert_eq!(s.upper, Some(2.5));
        let wide = Ratio {
            estimate: 0.9,
            lower: Some(-0.1),
            upper: Some(3.0),
        };
        assert_eq!(wide.inverse().lower, None);
        assert_eq!(wide.inverse().upper, None);
    }

    #[test]
    fn every_config_runs_against_no_inlining_and_collects_alone_for_its_cost() {
        let ex = executors(
            Path::new("/bin/tally"),
            &["cbs".into(), "exhaustive".into(), "static".into()],
            &["cbs".into(), "exhaustive".into()],
            Path::new("/out/profiles"),
        );
        let names: Vec<&str> = ex.iter().map(|e| e.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "none",
                "cbs",
                "exhaustive",
                "static",
                "cbs-only",
                "exhaustive-only"
            ]
        );
        let flags = |i: usize| match &ex[i].kind {
            ExecutorKind::Tally { flags, .. } => flags.clone(),
            _ => panic!("a tally executor"),
        };
        assert_eq!(
            flags(4),
            ["--tier=adaptive", "--inline=off", "--inline-by=cbs"]
        );
        // The perfect profile is read from the run that recorded it, not counted again.
        assert_eq!(
            flags(2),
            [
                "--tier=adaptive",
                "--inline-by=exhaustive",
                "--inline-graph=/out/profiles/{bench}.tprof"
            ]
        );
    }
}
