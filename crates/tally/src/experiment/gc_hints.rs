//! `tally experiment gc-hints`: what GC hints (Buytaert et al., HiPEAC 2005) do to garbage
//! collection, per benchmark and heap size.
//!
//! For each benchmark one interpreted run records the hints (`--gc-hints-record`); then, for
//! each heap size, runs without and with them (`--gc-hints`) alternate, each printing its
//! collector's statistics (`--gc-stats`). The report gives, with and without hints, the total
//! GC time, the full collections, the longest pause and the total time, each a mean with its
//! confidence interval, and the ratio of the GC times.

use std::path::{Path, PathBuf};

use clap::Args;
use serde::{Deserialize, Serialize};

use super::output::{self, mean_with_ci, MeanCi, RunHeader, NONE};
use super::runner::{EtaKey, Stop, Timing};
use super::{ending, CommonArgs, Ending, Error, Setup};

const FORMAT: &str = "tally-experiment-gc-hints/1";

pub const AFTER_HELP: &str = "\
Each benchmark is first run once, interpreted, to record its GC hints (DIR/hints/NAME.hints);
then, for each heap size, -n rounds each run it without and with the hints, in alternating
order. Heap sizes are fixed (--heap-size), so collections come when the heap fills, as in the
GCH paper's experiments; `default` keeps the growing heap.

Reading the report: `GC ms` is the collector's total pause time in a run (from --gc-stats),
`full` its full-heap collections, `longest` its longest pause, `total s` the run's wall-clock
time, each a mean over the rounds with its confidence interval. `GC ×` is the GC time without
hints over the GC time with them (above 1: hints saved GC time). `hinted` counts the
collections the hints made (nursery + full) in a run. A benchmark whose recording found no
favorable point runs the same both ways.

Examples:
  SOM=/path/to/SOM tally experiment gc-hints -o gch
  tally experiment gc-hints --suite bench/smoke.toml -b Phases --heap-sizes 24M,48M -n 5";

#[derive(Args, Debug)]
pub struct GcHintsArgs {
    /// Suite file (.toml), as for `tally bench` [default: bench/awfy.toml].
    #[arg(long, value_name = "SUITE")]
    suite: Option<PathBuf>,

    /// Benchmarks to run, in this order (names from the suite).
    #[arg(
        long,
        short = 'b',
        value_name = "NAME,…",
        value_delimiter = ',',
        default_value = "Storage,Json,Havlak,CD"
    )]
    benchmarks: Vec<String>,

    /// Heap sizes to measure at (`--heap-size` values), or `default` for the growing heap.
    #[arg(
        long,
        value_name = "SIZE,…",
        value_delimiter = ',',
        default_value = "32M,64M"
    )]
    heap_sizes: Vec<String>,

    /// The collector of the measured runs (`--gc`).
    #[arg(long = "gc", value_name = "PLAN", default_value = "genimmix")]
    gc_plan: String,

    /// Rounds per benchmark and heap size (one run without hints and one with each).
    #[arg(long, short = 'n', value_name = "N", default_value_t = 5, value_parser = clap::value_parser!(u32).range(1..))]
    invocations: u32,

    /// Outer iterations of the harness per process (the suite's inner sizes are kept).
    #[arg(long, short = 'i', value_name = "N", default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..))]
    iterations: u32,

    /// The tier of the measured runs (the recording run is always interpreted).
    #[arg(long, value_name = "TIER", default_value = "adaptive", value_parser = ["interp", "baseline", "opt", "adaptive"])]
    tier: String,

    /// The tally binary to measure [default: this one].
    #[arg(long, value_name = "PATH")]
    tally: Option<PathBuf>,

    /// Output directory [default: tally-experiment-gc-hints-DATE-TIME].
    #[arg(long, short = 'o', value_name = "DIR")]
    out: Option<PathBuf>,

    /// Write into an output directory that is not empty.
    #[arg(long)]
    force: bool,

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

/// What one run's `--gc-stats` said.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct GcFigures {
    pub collections: u64,
    pub full: u64,
    pub gc_ms: f64,
    pub longest_ms: f64,
    /// Collections the hints made (nursery, full); none without hints.
    pub hinted_nursery: u64,
    pub hinted_full: u64,
}

/// Reads the `gc (…): …` and `gc hints: …` lines `--gc-stats` prints.
pub fn parse_gc_stats(stderr: &str) -> Option<GcFigures> {
    let line = stderr.lines().rev().find(|l| l.starts_with("gc ("))?;
    let after_colon = line.split_once("): ")?.1;
    let number_before = |text: &str, word: &str| -> Option<f64> {
        let i = text.find(word)?;
        text[..i]
            .split_whitespace()
            .last()?
            .trim_start_matches('(')
            .parse()
            .ok()
    };
    let collections = number_before(after_colon, " collections")? as u64;
    // Generational plans name their nursery and full collections; the others collect fully.
    let full = number_before(after_colon, " full)")
        .map(|f| f as u64)
        .unwrap_or(collections);
    let gc_ms = number_before(after_colon, " ms,")?;
    let longest_ms = number_before(after_colon.split_once("longest ")?.1, " ms")?;
    let mut figures = GcFigures {
        collections,
        full,
        gc_ms,
        longest_ms,
        ..GcFigures::default()
    };
    if let Some(h) = stderr.lines().find(|l| l.starts_with("gc hints: ")) {
        let collected = h.split_once("collected ")?.1;
        figures.hinted_nursery = number_before(collected, " nursery")? as u64;
        figures.hinted_full = number_before(collected, " full")? as u64;
    }
    Some(figures)
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Recording {
    pub benchmark: String,
    pub hints: PathBuf,
    pub points: usize,
    pub timing: Timing,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Run {
    pub benchmark: String,
    pub heap: String,
    pub hints: bool,
    pub round: u32,
    pub timing: Timing,
    pub gc: GcFigures,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct GcHintsResults {
    pub header: RunHeader,
    pub tally: PathBuf,
    pub gc_plan: String,
    pub tier: String,
    pub level: f64,
    pub recordings: Vec<Recording>,
    pub runs: Vec<Run>,
}

pub fn run(args: GcHintsArgs, this: &Path) -> Result<Ending, Error> {
    if args.heap_sizes.is_empty() {
        return Err(Error::Usage("--heap-sizes names no size".into()));
    }
    let common = CommonArgs {
        suite: args.suite.clone(),
        benchmarks: args.benchmarks.clone(),
        iterations: args.iterations,
        rate: 250,
        baselines: None,
        tally: args.tally.clone(),
        tier: args.tier.clone(),
        out: args.out.clone(),
        force: args.force,
        keep_profiles: false,
        timeout: args.timeout,
        level: args.level,
        quiet: args.quiet,
    };
    let Setup {
        suite,
        out,
        mut runner,
        started,
        tally,
    } = common.setup("gc-hints", this)?;
    let hints_dir = out.join("hints");
    std::fs::create_dir_all(&hints_dir)
        .map_err(|e| Error::Usage(format!("cannot create {}: {e}", hints_dir.display())))?;
    let benches = suite.benchmarks.len();
    let mut keys: Vec<EtaKey> = (0..benches).map(|b| (b, "record")).collect();
    for b in 0..benches {
        for _ in 0..args.heap_sizes.len() * args.invocations as usize {
            keys.push((b, "without"));
            keys.push((b, "with"));
        }
    }
    runner.plan(keys);
    let mut results = GcHintsResults {
        header: RunHeader::begin(FORMAT, started),
        tally,
        gc_plan: args.gc_plan.clone(),
        tier: args.tier.clone(),
        level: args.level,
        recordings: Vec::new(),
        runs: Vec::new(),
    };
    let json = out.join("gc-hints.json");
    let stop = measure(&args, &suite, &hints_dir, &mut runner, &mut results, &json).err();
    runner.finish();
    results.header.end(stop.as_ref());
    write_json(&results, &json).map_err(Error::Failed)?;
    let report = render(&results, &suite.benchmarks, &args.heap_sizes);
    output::write_file(&out.join("report.md"), &report).map_err(Error::Failed)?;
    print!("{report}");
    ending(stop)
}

fn write_json(r: &GcHintsResults, path: &Path) -> Result<(), String> {
    let text = serde_json::to_string_pretty(r).expect("results serialize");
    output::write_file(path, &(text + "\n"))
}

fn measure(
    args: &GcHintsArgs,
    suite: &tally_bench::suite::Suite,
    hints_dir: &Path,
    runner: &mut super::runner::Runner,
    results: &mut GcHintsResults,
    json: &Path,
) -> Result<(), Stop> {
    for (b, bench) in suite.benchmarks.iter().enumerate() {
        let hints = hints_dir.join(format!("{}.hints", bench.name));
        let flags = vec![
            "--tier=interp".to_string(),
            format!("--gc-hints-record={}", hints.display()),
            "--force".to_string(),
        ];
        let timing = runner.run(b, 0, "recording hints", flags)?;
        let points = std::fs::read_to_string(&hints)
            .map(|t| t.lines().filter(|l| l.starts_with("point ")).count())
            .map_err(|e| Stop::Failed(format!("cannot read {}: {e}", hints.display())))?;
        runner.say(&format!("{}: {points} favorable point(s)", bench.name));
        results.recordings.push(Recording {
            benchmark: bench.name.clone(),
            hints: hints.clone(),
            points,
            timing,
        });
        for heap in &args.heap_sizes {
            for round in 1..=args.invocations {
                // Alternating order: neither variant always runs on a warmer machine.
                let order = if round % 2 == 1 {
                    [false, true]
                } else {
                    [true, false]
                };
                for with_hints in order {
                    let mut flags = vec![format!("--gc={}", args.gc_plan), "--gc-stats".into()];
                    if heap != "default" {
                        flags.push(format!("--heap-size={heap}"));
                    }
                    if with_hints {
                        flags.push(format!("--gc-hints={}", hints.display()));
                    }
                    let label = format!(
                        "{} hints, heap {heap}",
                        if with_hints { "with" } else { "without" }
                    );
                    let timing = runner.run(b, round, &label, flags)?;
                    let gc = parse_gc_stats(&timing.stderr).ok_or_else(|| {
                        Stop::Failed(format!(
                            "{} ({label}): no --gc-stats line in its output",
                            bench.name
                        ))
                    })?;
                    results.runs.push(Run {
                        benchmark: bench.name.clone(),
                        heap: heap.clone(),
                        hints: with_hints,
                        round,
                        timing,
                        gc,
                    });
                    write_json(results, json).map_err(Stop::Failed)?;
                }
            }
        }
    }
    Ok(())
}

fn with_ci(m: Option<MeanCi>, digits: usize) -> String {
    match m {
        None => NONE.into(),
        Some(MeanCi {
            mean,
            lower: Some(l),
            upper: Some(u),
        }) => format!("{mean:.digits$} [{l:.digits$}, {u:.digits$}]"),
        Some(m) => format!("{:.digits$}", m.mean),
    }
}

fn render(
    r: &GcHintsResults,
    benchmarks: &[tally_bench::suite::Benchmark],
    heaps: &[String],
) -> String {
    let mut text = String::from("# GC hints: collections with and without\n\n");
    for line in output::setup_lines(&r.header.machine, &r.header.command, &r.tally) {
        text.push_str(&line);
        text.push('\n');
    }
    text.push_str(&format!(
        "- collector {}, tier {}, {:.0} % confidence intervals\n\n",
        r.gc_plan,
        r.tier,
        r.level * 100.0
    ));
    let header: Vec<String> = [
        "benchmark",
        "heap",
        "points",
        "hints",
        "GC ms",
        "full",
        "longest ms",
        "total s",
        "hinted",
        "GC ×",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let mut rows = Vec::new();
    for b in benchmarks {
        let points = r
            .recordings
            .iter()
            .find(|x| x.benchmark == b.name)
            .map(|x| x.points.to_string())
            .unwrap_or_else(|| NONE.into());
        for heap in heaps {
            let runs = |hints: bool| -> Vec<&Run> {
                r.runs
                    .iter()
                    .filter(|x| x.benchmark == b.name && &x.heap == heap && x.hints == hints)
                    .collect()
            };
            let gc_of = |runs: &[&Run]| -> Vec<f64> { runs.iter().map(|x| x.gc.gc_ms).collect() };
            let (without, with) = (runs(false), runs(true));
            if without.is_empty() && with.is_empty() {
                continue;
            }
            let ratio = match (output::mean(&gc_of(&without)), output::mean(&gc_of(&with))) {
                (Some(a), Some(b)) if b > 0.0 => format!("{:.2}", a / b),
                _ => NONE.into(),
            };
            for (hints, runs) in [(false, &without), (true, &with)] {
                let level = r.level;
                let col = |f: &dyn Fn(&Run) -> f64, digits| {
                    let xs: Vec<f64> = runs.iter().map(|x| f(x)).collect();
                    with_ci(mean_with_ci(&xs, level), digits)
                };
                rows.push(vec![
                    if hints { String::new() } else { b.name.clone() },
                    if hints { String::new() } else { heap.clone() },
                    if hints { String::new() } else { points.clone() },
                    if hints { "with" } else { "without" }.into(),
                    col(&|x| x.gc.gc_ms, 1),
                    col(&|x| x.gc.full as f64, 1),
                    col(&|x| x.gc.longest_ms, 2),
                    col(&|x| x.timing.wall_s, 3),
                    if hints {
                        col(&|x| (x.gc.hinted_nursery + x.gc.hinted_full) as f64, 1)
                    } else {
                        NONE.into()
                    },
                    if hints { ratio.clone() } else { String::new() },
                ]);
            }
        }
    }
    text.push_str(&output::table(&header, &rows));
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gc_stats_lines_are_read() {
        let gen = "x\ngc (genimmix): 12 collections (10 nursery, 2 full) in 34.5 ms, longest 6.25 ms; 5 objects (9 bytes) allocated; heap 1 bytes in use of 2 bytes; write barrier remembered 3 objects\ngc hints: 4 point(s); consulted 7 time(s) near a collection; collected 5 nursery, 1 full\n";
        assert_eq!(
            parse_gc_stats(gen),
            Some(GcFigures {
                collections: 12,
                full: 2,
                gc_ms: 34.5,
                longest_ms: 6.25,
                hinted_nursery: 5,
                hinted_full: 1,
            })
        );
        let flat = "gc (semispace): 3 collections in 1.0 ms, longest 0.50 ms; 5 objects (9 bytes) allocated; heap 1 bytes in use of 2 bytes\n";
        let f = parse_gc_stats(flat).unwrap();
        assert_eq!((f.collections, f.full, f.hinted_full), (3, 3, 0));
        assert_eq!(parse_gc_stats("no statistics here"), None);
    }
}
