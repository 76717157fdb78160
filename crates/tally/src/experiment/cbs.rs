//! `tally experiment cbs`: Arnold & Grove (CGO 2005), Table 2, on Tally.
//!
//! Counter-based sampling (CBS) lets a timer tick only open a window in which every STRIDE-th
//! call is sampled, SAMPLES times. The question the table answers is which (STRIDE, SAMPLES)
//! buys the most call-graph accuracy for the least overhead. Accuracy is the overlap of each
//! run's sampled graph with the exact graph of an exhaustive run of the same benchmark;
//! overhead is the CPU time of CBS runs against runs with profiling off, interleaved with them.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use clap::Args;
use serde::{Deserialize, Serialize};
use tally_bench::suite::Suite;
use tally_vm::tally_profile::metrics;

use super::output::{self, MeanCi, Overhead, RunHeader, NONE};
use super::plan::{self, Step, Task};
use super::profiles::{self, EdgeKey};
use super::runner::{EtaKey, Runner, Stop, Timing};
use super::{CommonArgs, Ending, Error, Setup};

pub const AFTER_HELP: &str = "\
What it does:
  For each benchmark, one exhaustive run (`tally --profile=F --sampler none --cbs off --exhaustive`)
  records the exact call graph: how often each call edge (caller, call site, callee) was taken.
  Then, for each cell and each of -n invocations, a run with `--sampler none --cbs STRIDE:SAMPLES`
  (ticks at --rate open the CBS windows, from the trigger Tally picks for that rate: the thread
  CPU-time timer up to the kernel tick, perf_events' CPU clock above it) and runs with
  profiling off (the baseline), interleaved round by round so that machine noise spreads over
  all of them. cbs.md names the trigger the runs used.

What the numbers mean:
  overlap %   Arnold & Grove's overlap of the CBS call graph with the exact one: both graphs
              are normalised to sum to 100 % and the overlap is the sum over edges of the
              smaller of the two shares. 100 means the sampled edge frequencies are exactly
              the true ones; edges CBS never saw count as missing. Mean over invocations
              (the detail tables also show the minimum). Edges are matched by method names
              and call-site bytecode index, so graphs of different runs compare.
  overhead %  (mean CPU time of the CBS runs / mean CPU time of the baseline runs - 1) x 100,
              CPU time being user + system time of the whole process (wait4). The interval is
              Fieller's for a ratio of means. It includes all that profiling costs in the
              process: active hooks, the timer, CBS, writing the profile file.
  average     overlap: the mean of the benchmarks' means; overhead: the geometric mean of the
              benchmarks' CPU-time ratios, with an interval over benchmarks.
  †           STRIDE 1, SAMPLES 1: each tick samples just the next call, i.e. timer-based
              call-edge sampling without CBS, the baseline CBS improves on.
  windows/run timer ticks that opened a CBS window: the tick rate achieved (ticks during a
              window extend it; a CPU-time timer fires at most once per kernel tick, and
              loses ticks while the VM shares its CPU).
  The grid cells read \"overlap % / overhead %\".

Output (in -o DIR): cbs.md (the tables, also printed on stdout), cbs.json (settings, every
run's CPU time, wall time and overlap, the summary), cbs.csv (one line per benchmark x cell,
and the averages). Ctrl-C stops and writes what was measured; a failing run stops the
experiment with its error output and exit status 1.

Examples:
  SOM=/path/to/SOM tally experiment cbs -o cbs-table2
  SOM=/path/to/SOM tally experiment cbs --config 3:16 -n 10 \\
      --benchmarks DeltaBlue,Richards,Havlak,Json,CD,Towers -o cbs-3-16
  tally experiment cbs --suite bench/smoke.toml --benchmarks Fibonacci,QuickSort \\
      --strides 1,3 --samples 1,4 -n 1 -o /tmp/cbs-smoke";

#[derive(Args, Debug)]
pub struct CbsArgs {
    /// STRIDE values of the grid: every STRIDE-th call in a window is sampled.
    #[arg(
        long,
        value_name = "N,…",
        value_delimiter = ',',
        default_value = "1,3,7,15,31,63",
        value_parser = clap::value_parser!(u32).range(1..)
    )]
    strides: Vec<u32>,

    /// SAMPLES values of the grid: calls sampled per window.
    #[arg(
        long,
        value_name = "N,…",
        value_delimiter = ',',
        default_value = "1,2,4,8,16,32,64",
        value_parser = clap::value_parser!(u32).range(1..)
    )]
    samples: Vec<u32>,

    /// Measure these STRIDE:SAMPLES configurations instead of the grid (e.g. 3:16 or
    /// 1:1,3:16,7:32).
    #[arg(long, value_name = "S:N,…", value_delimiter = ',', value_parser = parse_cell, conflicts_with_all = ["strides", "samples"])]
    config: Vec<Cell>,

    /// Invocations (processes) per benchmark and cell.
    #[arg(long = "invocations", short = 'n', value_name = "N", default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..))]
    invocations: u32,

    #[command(flatten)]
    common: CommonArgs,
}

/// One CBS configuration.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Cell {
    pub stride: u32,
    pub samples: u32,
}

impl Cell {
    /// Timer-based edge sampling: the tick samples the very next call, once.
    pub fn timer_only(self) -> bool {
        self.stride == 1 && self.samples == 1
    }

    fn flag(self) -> String {
        format!("{}:{}", self.stride, self.samples)
    }
}

fn parse_cell(s: &str) -> Result<Cell, String> {
    let (a, b) = s
        .split_once(':')
        .ok_or_else(|| format!("'{s}' is not STRIDE:SAMPLES (e.g. 3:16)"))?;
    let parse = |x: &str, what: &str| {
        x.trim()
            .parse::<u32>()
            .ok()
            .filter(|&n| n >= 1)
            .ok_or_else(|| format!("bad {what} in '{s}': a whole number of at least 1"))
    };
    Ok(Cell {
        stride: parse(a, "STRIDE")?,
        samples: parse(b, "SAMPLES")?,
    })
}

impl CbsArgs {
    /// The configurations in order, without repeats: `--config` as given, else the grid
    /// row by row.
    fn cells(&self) -> Vec<Cell> {
        let all: Vec<Cell> = if self.config.is_empty() {
            self.strides
                .iter()
                .flat_map(|&stride| {
                    self.samples
                        .iter()
                        .map(move |&samples| Cell { stride, samples })
                })
                .collect()
        } else {
            self.config.clone()
        };
        let mut cells = Vec::new();
        for c in all {
            if !cells.contains(&c) {
                cells.push(c);
            }
        }
        cells
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RunKind {
    /// The exhaustive run giving the exact graph.
    Exact,
    /// Profiling off.
    Baseline,
    Cbs,
}

/// One process of the experiment.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RunRecord {
    pub benchmark: String,
    /// 1-based invocation round; 0 for the exhaustive run.
    pub round: u32,
    pub kind: RunKind,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cell: Option<Cell>,
    #[serde(flatten)]
    pub timing: Timing,
    /// CBS runs: overlap (0..=1) of the sampled graph with the exact one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub overlap: Option<f64>,
    /// CBS runs: call edges sampled (with repeats).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cbs_samples: Option<u64>,
    /// CBS runs: distinct edges sampled.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub distinct_edges: Option<usize>,
    /// CBS runs: timer ticks that opened (or extended) a window.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cbs_ticks: Option<u64>,
    /// CBS runs: what made the ticks, from the profile's header (e.g.
    /// "timer_create(CLOCK_THREAD_CPUTIME_ID)").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tick_source: Option<String>,
}

/// The exact call graph of one benchmark.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ExactGraph {
    pub benchmark: String,
    /// Distinct call edges.
    pub edges: usize,
    /// Calls along them.
    pub calls: u64,
    /// CPU seconds of the exhaustive run (counting every call and bytecode is slow).
    pub cpu_s: f64,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CellSummary {
    pub stride: u32,
    pub samples: u32,
    pub timer_only: bool,
    /// CBS runs measured (for an average: over all benchmarks).
    pub runs: usize,
    /// Mean overlap (0..=1) over the runs (for an average: mean of the benchmarks' means).
    pub overlap_mean: Option<f64>,
    /// Smallest overlap of any run.
    pub overlap_min: Option<f64>,
    /// Overlap mean with its interval over runs (per benchmark only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub overlap_ci: Option<MeanCi>,
    pub cbs_samples_mean: Option<f64>,
    pub cbs_ticks_mean: Option<f64>,
    pub cpu_s_mean: Option<f64>,
    pub overhead: Option<Overhead>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct BenchSummary {
    pub benchmark: String,
    pub baseline_runs: usize,
    pub baseline_cpu_s_mean: Option<f64>,
    pub cells: Vec<CellSummary>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    pub benchmarks: Vec<BenchSummary>,
    /// Per cell, over the benchmarks that have runs of it.
    pub average: Vec<CellSummary>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Settings {
    pub cells: Vec<Cell>,
    pub invocations: u32,
    pub iterations: u32,
    pub rate_hz: u32,
    pub baselines_per_round: usize,
    pub level: f64,
    pub tally: PathBuf,
    pub timeout_s: Option<f64>,
}

/// Everything the experiment measured; cbs.json.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CbsResults {
    #[serde(flatten)]
    pub header: RunHeader,
    pub settings: Settings,
    pub suite: Suite,
    pub exact: Vec<ExactGraph>,
    /// Every run in the order it ran.
    pub runs: Vec<RunRecord>,
    pub summary: Summary,
}

pub const FORMAT: &str = "tally-experiment-cbs/1";

pub fn run(args: CbsArgs, this: &Path) -> Result<Ending, Error> {
    let cells = args.cells();
    let Setup {
        suite,
        out,
        mut runner,
        started,
        tally,
    } = args.common.setup("cbs", this)?;
    let baselines = args
        .common
        .baselines
        .map(|b| b as usize)
        .unwrap_or(cells.len());
    let steps = plan::interleave(args.invocations, suite.benchmarks.len(), &cells, baselines);
    let mut keys: Vec<EtaKey> = (0..suite.benchmarks.len()).map(|b| (b, "exact")).collect();
    keys.extend(steps.iter().map(|s| {
        (
            s.bench,
            match s.task {
                Task::Baseline => "baseline",
                Task::Profiled(_) => "cbs",
            },
        )
    }));
    let total = keys.len();
    runner.plan(keys);
    let mut results = CbsResults {
        header: RunHeader::begin(FORMAT, started),
        settings: Settings {
            cells: cells.clone(),
            invocations: args.invocations,
            iterations: args.common.iterations,
            rate_hz: args.common.rate,
            baselines_per_round: baselines,
            level: args.common.level,
            tally,
            timeout_s: args.common.timeout,
        },
        suite,
        exact: Vec::new(),
        runs: Vec::new(),
        summary: Summary::default(),
    };
    let json = out.join("cbs.json");
    write_json(&results, &json).map_err(Error::Usage)?;
    runner.say(&format!(
        "tally experiment cbs: {} benchmark(s) × {} cell(s) × {} invocation(s), {} baseline(s) per round: {total} runs; writing to {}",
        results.suite.benchmarks.len(),
        cells.len(),
        args.invocations,
        baselines,
        out.display()
    ));
    let stop = measure(&mut results, &mut runner, &steps, &json).err();
    runner.finish();
    results.header.end(stop.as_ref());
    results.summary = summarize(&results);
    let md = render_markdown(&results);
    print!("{md}");
    output::write_file(&out.join("cbs.md"), &md).map_err(Error::Failed)?;
    output::write_file(&out.join("cbs.csv"), &render_csv(&results)).map_err(Error::Failed)?;
    write_json(&results, &json).map_err(Error::Failed)?;
    if !args.common.quiet {
        say!("tally experiment cbs: wrote {}", out.display());
    }
    super::ending(stop)
}

fn write_json(r: &CbsResults, path: &Path) -> Result<(), String> {
    let text = serde_json::to_string_pretty(r).expect("results serialize");
    output::write_file(path, &(text + "\n"))
}

/// The measuring loop: exhaustive runs first (the reference every CBS run is judged against),
/// then the interleaved CBS and baseline runs. Results are saved after every run.
fn measure(
    r: &mut CbsResults,
    runner: &mut Runner,
    steps: &[Step<Cell>],
    json: &Path,
) -> Result<(), Stop> {
    let rate = r.settings.rate_hz.to_string();
    let mut exact: Vec<BTreeMap<EdgeKey, u64>> = Vec::new();
    for bench in 0..r.suite.benchmarks.len() {
        let name = r.suite.benchmarks[bench].name.clone();
        let path = runner.profile_path(bench, "exact.profile")?;
        let flags = vec![
            format!("--profile={}", path.display()),
            "--force".into(),
            "--sampler".into(),
            "none".into(),
            "--cbs".into(),
            "off".into(),
            "--exhaustive".into(),
        ];
        let timing = runner.run(bench, 0, "exhaustive", flags)?;
        let p = runner.take_profile(&path)?;
        let graph = profiles::exact_graph(&p).unwrap_or_default();
        if graph.is_empty() {
            return Err(Stop::Failed(format!(
                "the exhaustive run of {name} recorded no call edges, so there is nothing to \
                 judge CBS against (is this tally built with profiling?)"
            )));
        }
        r.exact.push(ExactGraph {
            benchmark: name.clone(),
            edges: graph.len(),
            calls: profiles::total(&graph),
            cpu_s: timing.cpu_s,
        });
        r.runs.push(RunRecord {
            benchmark: name,
            round: 0,
            kind: RunKind::Exact,
            cell: None,
            timing,
            overlap: None,
            cbs_samples: None,
            distinct_edges: None,
            cbs_ticks: None,
            tick_source: None,
        });
        exact.push(graph);
        checkpoint(r, json)?;
    }
    for step in steps {
        let name = r.suite.benchmarks[step.bench].name.clone();
        let record = match step.task {
            Task::Baseline => {
                let timing = runner.run(step.bench, step.round, "baseline", Vec::new())?;
                RunRecord {
                    benchmark: name,
                    round: step.round,
                    kind: RunKind::Baseline,
                    cell: None,
                    timing,
                    overlap: None,
                    cbs_samples: None,
                    distinct_edges: None,
                    cbs_ticks: None,
                    tick_source: None,
                }
            }
            Task::Profiled(cell) => {
                let file = format!(
                    "cbs-{}-{}-r{}.profile",
                    cell.stride, cell.samples, step.round
                );
                let path = runner.profile_path(step.bench, &file)?;
                let flags = vec![
                    format!("--profile={}", path.display()),
                    "--force".into(),
                    "--sampler".into(),
                    "none".into(),
                    "--cbs".into(),
                    cell.flag(),
                    "--rate".into(),
                    rate.clone(),
                ];
                let label = format!("CBS {}", cell.flag());
                let timing = runner.run(step.bench, step.round, &label, flags)?;
                let p = runner.take_profile(&path)?;
                let graph = profiles::cbs_graph(&p);
                RunRecord {
                    benchmark: name,
                    round: step.round,
                    kind: RunKind::Cbs,
                    cell: Some(cell),
                    timing,
                    overlap: Some(metrics::overlap(&exact[step.bench], &graph)),
                    cbs_samples: Some(p.cbs_samples),
                    distinct_edges: Some(graph.len()),
                    cbs_ticks: Some(p.counters.cbs_ticks),
                    tick_source: Some(p.header.sampler.trigger_source.clone())
                        .filter(|s| !s.is_empty()),
                }
            }
        };
        r.runs.push(record);
        checkpoint(r, json)?;
    }
    Ok(())
}

/// Saves the raw results so far, so that even a crash keeps them.
fn checkpoint(r: &mut CbsResults, json: &Path) -> Result<(), Stop> {
    r.header.finished = tally_bench::now_rfc3339();
    r.summary = summarize(r);
    write_json(r, json).map_err(Stop::Failed)
}

/// Per benchmark and cell: overlap over the CBS runs, overhead against all of the
/// benchmark's baseline runs (they are the same configuration whichever cell they ran
/// beside); then the averages over benchmarks.
pub fn summarize(r: &CbsResults) -> Summary {
    let level = r.settings.level;
    let mut benchmarks = Vec::new();
    for b in &r.suite.benchmarks {
        let of_bench = |kind: RunKind| {
            r.runs
                .iter()
                .filter(move |x| x.benchmark == b.name && x.kind == kind)
        };
        let baseline: Vec<f64> = of_bench(RunKind::Baseline)
            .map(|x| x.timing.cpu_s)
            .collect();
        let cells = r
            .settings
            .cells
            .iter()
            .map(|&cell| {
                let runs: Vec<&RunRecord> = of_bench(RunKind::Cbs)
                    .filter(|x| x.cell == Some(cell))
                    .collect();
                let overlaps: Vec<f64> = runs.iter().filter_map(|x| x.overlap).collect();
                let cpu: Vec<f64> = runs.iter().map(|x| x.timing.cpu_s).collect();
                let per_run = |f: fn(&RunRecord) -> Option<f64>| {
                    output::mean(&runs.iter().filter_map(|x| f(x)).collect::<Vec<_>>())
                };
                CellSummary {
                    stride: cell.stride,
                    samples: cell.samples,
                    timer_only: cell.timer_only(),
                    runs: runs.len(),
                    overlap_mean: output::mean(&overlaps),
                    overlap_min: output::min(&overlaps),
                    overlap_ci: output::fraction_with_ci(&overlaps, level),
                    cbs_samples_mean: per_run(|x| x.cbs_samples.map(|n| n as f64)),
                    cbs_ticks_mean: per_run(|x| x.cbs_ticks.map(|n| n as f64)),
                    cpu_s_mean: output::mean(&cpu),
                    overhead: output::overhead(&cpu, &baseline, level),
                }
            })
            .collect();
        benchmarks.push(BenchSummary {
            benchmark: b.name.clone(),
            baseline_runs: baseline.len(),
            baseline_cpu_s_mean: output::mean(&baseline),
            cells,
        });
    }
    let average = r
        .settings
        .cells
        .iter()
        .enumerate()
        .map(|(i, &cell)| {
            let per: Vec<&CellSummary> = benchmarks
                .iter()
                .map(|b| &b.cells[i])
                .filter(|c| c.runs > 0)
                .collect();
            let means: Vec<f64> = per.iter().filter_map(|c| c.overlap_mean).collect();
            let mins: Vec<f64> = per.iter().filter_map(|c| c.overlap_min).collect();
            let overheads: Vec<&Overhead> =
                per.iter().filter_map(|c| c.overhead.as_ref()).collect();
            let of = |f: fn(&CellSummary) -> Option<f64>| {
                output::mean(&per.iter().filter_map(|c| f(c)).collect::<Vec<_>>())
            };
            CellSummary {
                stride: cell.stride,
                samples: cell.samples,
                timer_only: cell.timer_only(),
                runs: per.iter().map(|c| c.runs).sum(),
                overlap_mean: output::mean(&means),
                overlap_min: output::min(&mins),
                overlap_ci: None,
                cbs_samples_mean: of(|c| c.cbs_samples_mean),
                cbs_ticks_mean: of(|c| c.cbs_ticks_mean),
                cpu_s_mean: None,
                overhead: output::average_overhead(&overheads, level),
            }
        })
        .collect();
    Summary {
        benchmarks,
        average,
    }
}

/// The grid's rows and columns, if the cells are a full STRIDE × SAMPLES product (always so
/// for --strides/--samples; a --config list may be any set).
fn grid_axes(cells: &[Cell]) -> Option<(Vec<u32>, Vec<u32>)> {
    let mut strides: Vec<u32> = Vec::new();
    let mut samples: Vec<u32> = Vec::new();
    for c in cells {
        if !strides.contains(&c.stride) {
            strides.push(c.stride);
        }
        if !samples.contains(&c.samples) {
            samples.push(c.samples);
        }
    }
    (strides.len() * samples.len() == cells.len()).then_some((strides, samples))
}

/// "overlap % / overhead %", "†" marking the timer-only cell.
fn grid_cell(c: &CellSummary) -> String {
    if c.runs == 0 {
        return NONE.into();
    }
    let overlap = c
        .overlap_mean
        .map(output::pct)
        .unwrap_or_else(|| NONE.into());
    let overhead = c
        .overhead
        .as_ref()
        .map(|o| output::signed(o.percent))
        .unwrap_or_else(|| NONE.into());
    let mark = if c.timer_only { " †" } else { "" };
    format!("{overlap} / {overhead}{mark}")
}

fn grid(cells: &[Cell], summary: &[CellSummary]) -> Option<String> {
    let (strides, samples) = grid_axes(cells)?;
    let mut header = vec!["STRIDE \\ SAMPLES".to_string()];
    header.extend(samples.iter().map(|n| n.to_string()));
    let rows: Vec<Vec<String>> = strides
        .iter()
        .map(|&s| {
            let mut row = vec![s.to_string()];
            for &n in &samples {
                let c = cells
                    .iter()
                    .position(|c| c.stride == s && c.samples == n)
                    .map(|i| grid_cell(&summary[i]))
                    .unwrap_or_else(|| NONE.into());
                row.push(c);
            }
            row
        })
        .collect();
    Some(output::table(&header, &rows))
}

fn detail(summary: &[CellSummary], level: f64, average: bool) -> String {
    let pct_level = format!("{:.0} %", level * 100.0);
    let mut header: Vec<String> = vec![
        "STRIDE:SAMPLES".into(),
        "runs".into(),
        "overlap % (mean)".into(),
        "overlap % (min)".into(),
        "CBS samples/run".into(),
        "windows/run".into(),
    ];
    if !average {
        header.push("CPU s".into());
    }
    header.push(format!("overhead % [{pct_level} CI]"));
    let rows = summary
        .iter()
        .map(|c| {
            let num = |x: Option<f64>, digits: usize| {
                x.map(|v| format!("{v:.digits$}"))
                    .unwrap_or_else(|| NONE.into())
            };
            let mut row = vec![
                format!(
                    "{}:{}{}",
                    c.stride,
                    c.samples,
                    if c.timer_only {
                        " † (timer only)"
                    } else {
                        ""
                    }
                ),
                c.runs.to_string(),
                match (&c.overlap_ci, c.overlap_mean) {
                    (Some(ci), _) => output::pct_with_ci(ci),
                    (None, Some(m)) => output::pct(m),
                    _ => NONE.into(),
                },
                c.overlap_min
                    .map(output::pct)
                    .unwrap_or_else(|| NONE.into()),
                num(c.cbs_samples_mean, 0),
                num(c.cbs_ticks_mean, 0),
            ];
            if !average {
                row.push(num(c.cpu_s_mean, 3));
            }
            row.push(
                c.overhead
                    .as_ref()
                    .map(output::overhead_with_ci)
                    .unwrap_or_else(|| NONE.into()),
            );
            row
        })
        .collect::<Vec<_>>();
    output::table(&header, &rows)
}

/// What made the CBS runs' ticks, as their profiles recorded it.
fn tick_sources(r: &CbsResults) -> String {
    let sources: std::collections::BTreeSet<&str> = r
        .runs
        .iter()
        .filter_map(|run| run.tick_source.as_deref())
        .collect();
    if sources.is_empty() {
        "the trigger Tally chose for the rate (`--sampler auto`)".to_string()
    } else {
        sources.into_iter().collect::<Vec<_>>().join(" and ")
    }
}

/// cbs.md: setup, the average grid, then each benchmark's grid and detail table.
pub fn render_markdown(r: &CbsResults) -> String {
    use std::fmt::Write as _;
    let s = &r.settings;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "# CBS call-graph accuracy and overhead (Arnold & Grove, CGO 2005, Table 2)\n"
    );
    for line in output::setup_lines(&r.header.machine, &r.header.command, &s.tally) {
        let _ = writeln!(out, "{line}");
    }
    let _ = writeln!(
        out,
        "- suite `{}`; each process runs `{} BENCH {} INNER`; {} invocation(s) per cell, \
         {} baseline run(s) (profiling off) per benchmark and round; CBS windows opened by \
         {} at {} Hz",
        r.suite.source,
        r.suite.harness,
        s.iterations,
        s.invocations,
        s.baselines_per_round,
        tick_sources(r),
        s.rate_hz
    );
    let _ = writeln!(
        out,
        "- started {}, finished {}",
        r.header.started, r.header.finished
    );
    if let Some(why) = &r.header.stopped {
        let first = why.lines().next().unwrap_or("");
        let _ = writeln!(out, "- **incomplete**: {first}");
    }
    let _ = writeln!(
        out,
        "\nCells: overlap % of the CBS call graph with the exact one (mean over invocations) / \
         CPU-time overhead % against profiling off. † = STRIDE 1, SAMPLES 1: timer-based edge \
         sampling (no CBS). See `tally experiment cbs --help` for the definitions.\n"
    );
    let n = r.summary.benchmarks.len();
    if n > 1 {
        let _ = writeln!(out, "## Average over {n} benchmarks\n");
        let _ = writeln!(
            out,
            "Overlap: mean of the benchmarks' means (min: smallest of any run); overhead: \
             geometric mean of the benchmarks' CPU-time ratios, interval over benchmarks.\n"
        );
        if let Some(g) = grid(&s.cells, &r.summary.average) {
            let _ = writeln!(out, "{g}");
        }
        let _ = writeln!(out, "{}", detail(&r.summary.average, s.level, true));
    }
    for b in &r.summary.benchmarks {
        let _ = writeln!(out, "## {}\n", b.benchmark);
        if let Some(e) = r.exact.iter().find(|e| e.benchmark == b.benchmark) {
            let _ = writeln!(
                out,
                "Exact call graph: {} edges, {} calls (exhaustive run: {:.3} s CPU).",
                e.edges, e.calls, e.cpu_s
            );
        }
        let _ = writeln!(
            out,
            "Baseline: {} run(s), mean {} s CPU.\n",
            b.baseline_runs,
            b.baseline_cpu_s_mean
                .map(|x| format!("{x:.3}"))
                .unwrap_or_else(|| NONE.into())
        );
        if let Some(g) = grid(&s.cells, &b.cells) {
            let _ = writeln!(out, "{g}");
        }
        let _ = writeln!(out, "{}", detail(&b.cells, s.level, false));
    }
    out
}

/// cbs.csv: one line per benchmark × cell, then one per cell for the average.
pub fn render_csv(r: &CbsResults) -> String {
    let mut out = output::csv_line(
        &[
            "benchmark",
            "stride",
            "samples",
            "timer_only",
            "runs",
            "overlap_mean_pct",
            "overlap_min_pct",
            "cbs_samples_per_run",
            "windows_per_run",
            "cpu_s_mean",
            "baseline_cpu_s_mean",
            "overhead_pct",
            "overhead_lower_pct",
            "overhead_upper_pct",
        ]
        .map(String::from),
    );
    let pct = |x: Option<f64>| output::csv_num(x.map(|v| v * 100.0));
    let mut line = |name: &str, c: &CellSummary, base: Option<f64>| {
        let o = c.overhead.as_ref();
        out.push_str(&output::csv_line(&[
            name.to_string(),
            c.stride.to_string(),
            c.samples.to_string(),
            c.timer_only.to_string(),
            c.runs.to_string(),
            pct(c.overlap_mean),
            pct(c.overlap_min),
            output::csv_num(c.cbs_samples_mean),
            output::csv_num(c.cbs_ticks_mean),
            output::csv_num(c.cpu_s_mean),
            output::csv_num(base),
            output::csv_num(o.map(|o| o.percent)),
            output::csv_num(o.and_then(|o| o.lower)),
            output::csv_num(o.and_then(|o| o.upper)),
        ]));
    };
    for b in &r.summary.benchmarks {
        for c in &b.cells {
            line(&b.benchmark, c, b.baseline_cpu_s_mean);
        }
    }
    for c in &r.summary.average {
        line("average", c, None);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use tally_bench::results::Machine;
    use tally_bench::suite::Benchmark;

    fn timing(cpu_s: f64) -> Timing {
        Timing {
            sequence: 0,
            cpu_s,
            user_s: cpu_s,
            sys_s: 0.0,
            wall_s: cpu_s,
            max_rss_kib: 1,
            argv: vec![],
            stderr: String::new(),
        }
    }

    fn run(
        bench: &str,
        kind: RunKind,
        cell: Option<Cell>,
        cpu: f64,
        overlap: Option<f64>,
    ) -> RunRecord {
        RunRecord {
            benchmark: bench.into(),
            round: 1,
            kind,
            cell,
            timing: timing(cpu),
            overlap,
            cbs_samples: overlap.map(|_| 32),
            distinct_edges: overlap.map(|_| 2),
            cbs_ticks: overlap.map(|_| 2),
            tick_source: overlap.map(|_| "timer_create(CLOCK_THREAD_CPUTIME_ID)".into()),
        }
    }

    fn results(cells: Vec<Cell>, runs: Vec<RunRecord>) -> CbsResults {
        CbsResults {
            header: RunHeader {
                format: FORMAT.into(),
                tool: "test".into(),
                command: "tally experiment cbs".into(),
                started: "s".into(),
                finished: "f".into(),
                complete: true,
                stopped: None,
                machine: Machine::current(),
            },
            settings: Settings {
                cells,
                invocations: 2,
                iterations: 1,
                rate_hz: 1000,
                baselines_per_round: 1,
                level: 0.95,
                tally: PathBuf::from("/t"),
                timeout_s: None,
            },
            suite: Suite {
                name: "s".into(),
                source: "s.toml".into(),
                harness: "Harness".into(),
                classpath: vec![],
                benchmarks: ["A", "B"]
                    .map(|n| Benchmark {
                        name: n.into(),
                        iterations: 1,
                        inner: 1,
                    })
                    .to_vec(),
            },
            exact: vec![],
            runs,
            summary: Summary::default(),
        }
    }

    const T: Cell = Cell {
        stride: 1,
        samples: 1,
    };
    const C: Cell = Cell {
        stride: 3,
        samples: 16,
    };
    const S16: Cell = Cell {
        stride: 1,
        samples: 16,
    };

    #[test]
    fn cells_come_from_the_grid_or_the_config_list() {
        use clap::Parser;
        #[derive(Parser)]
        struct P {
            #[command(flatten)]
            a: CbsArgs,
        }
        let p = P::parse_from(["x"]);
        assert_eq!(p.a.cells().len(), 42);
        assert_eq!(p.a.cells()[0], T);
        let p = P::parse_from(["x", "--strides", "1,3", "--samples", "1,16"]);
        let s3 = Cell {
            stride: 3,
            samples: 1,
        };
        assert_eq!(p.a.cells(), [T, S16, s3, C]);
        let p = P::parse_from(["x", "--config", "3:16,1:1,3:16"]);
        assert_eq!(p.a.cells(), [C, T]);
        assert!(P::try_parse_from(["x", "--config", "3:16", "--strides", "1"]).is_err());
        assert!(P::try_parse_from(["x", "--config", "3"]).is_err());
        assert!(P::try_parse_from(["x", "--config", "0:4"]).is_err());
        assert!(P::try_parse_from(["x", "--strides", "0"]).is_err());
    }

    #[test]
    fn summary_pools_baselines_and_averages_over_benchmarks() {
        let runs = vec![
            run("A", RunKind::Baseline, None, 1.0, None),
            run("A", RunKind::Cbs, Some(T), 1.1, Some(0.5)),
            run("A", RunKind::Cbs, Some(C), 1.2, Some(0.9)),
            run("A", RunKind::Baseline, None, 1.0, None),
            run("A", RunKind::Cbs, Some(T), 1.1, Some(0.7)),
            run("A", RunKind::Cbs, Some(C), 1.2, Some(0.8)),
            run("B", RunKind::Baseline, None, 2.0, None),
            run("B", RunKind::Cbs, Some(T), 2.0, Some(0.3)),
        ];
        let r = results(vec![T, C], runs);
        let s = summarize(&r);
        let a = &s.benchmarks[0];
        assert_eq!(a.baseline_runs, 2);
        let at = &a.cells[0];
        assert!(at.timer_only && !a.cells[1].timer_only);
        assert_eq!(at.runs, 2);
        assert!((at.overlap_mean.unwrap() - 0.6).abs() < 1e-12);
        assert_eq!(at.overlap_min, Some(0.5));
        assert!((at.overhead.as_ref().unwrap().percent - 10.0).abs() < 1e-9);
        assert!((a.cells[1].overhead.as_ref().unwrap().percent - 20.0).abs() < 1e-9);
        // B ran only the timer-only cell, once: no interval, and it has no say in C's average.
        let bt = &s.benchmarks[1].cells[0];
        assert_eq!((bt.runs, bt.overhead.as_ref().unwrap().lower), (1, None));
        assert_eq!(s.benchmarks[1].cells[1].runs, 0);
        let avg_t = &s.average[0];
        assert!((avg_t.overlap_mean.unwrap() - 0.45).abs() < 1e-12);
        assert_eq!((avg_t.overlap_min, avg_t.runs), (Some(0.3), 3));
        // Ratios 1.1 and 1.0: geometric mean sqrt(1.1).
        let g = avg_t.overhead.as_ref().unwrap().percent;
        assert!((g - (1.1f64.sqrt() - 1.0) * 100.0).abs() < 1e-9, "{g}");
        let avg_c = &s.average[1];
        assert_eq!(avg_c.runs, 2);
        assert!((avg_c.overhead.as_ref().unwrap().percent - 20.0).abs() < 1e-9);
    }

    #[test]
    fn markdown_and_csv_show_every_cell_and_mark_the_timer_only_one() {
        let runs = vec![
            run("A", RunKind::Baseline, None, 1.0, None),
            run("A", RunKind::Cbs, Some(T), 1.1, Some(0.5)),
            run("B", RunKind::Baseline, None, 2.0, None),
            run("B", RunKind::Cbs, Some(T), 2.2, Some(0.7)),
        ];
        let mut r = results(vec![T, S16], runs);
        r.summary = summarize(&r);
        let md = render_markdown(&r);
        assert!(md.contains("## Average over 2 benchmarks"), "{md}");
        assert!(
            md.contains("CBS windows opened by timer_create(CLOCK_THREAD_CPUTIME_ID) at"),
            "{md}"
        );
        assert!(md.contains("| STRIDE \\ SAMPLES |"), "{md}");
        // A's timer-only cell: 50 % overlap, +10 % overhead.
        assert!(md.contains("50.0 / +10.0 †"), "{md}");
        assert!(md.contains("60.0 / +10.0 †"), "{md}");
        assert!(md.contains("1:1 † (timer only)"), "{md}");
        // 1 × 2 cells is a grid; 1:16 never ran.
        assert!(md.contains("|   — |"), "{md}");
        let csv = render_csv(&r);
        let lines: Vec<&str> = csv.lines().collect();
        assert_eq!(lines.len(), 1 + 2 * 2 + 2);
        assert!(
            lines[1].starts_with("A,1,1,true,1,50,50,32,2,1.1,1,"),
            "{}",
            lines[1]
        );
        assert!(
            lines[5].starts_with("average,1,1,true,2,60,50,"),
            "{}",
            lines[5]
        );
        // The raw record round-trips through JSON.
        let json = serde_json::to_string(&r).unwrap();
        let back: CbsResults = serde_json::from_str(&json).unwrap();
        assert_eq!(back.runs, r.runs);
    }

    #[test]
    fn grids_need_a_full_product() {
        assert_eq!(grid_axes(&[T, C]), None);
        let full = [T, S16];
        assert_eq!(grid_axes(&full), Some((vec![1], vec![1, 16])));
    }
}
