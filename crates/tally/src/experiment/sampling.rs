//! `tally experiment sampling`: Buytaert et al. (OOPSLA 2007), Figs. 4.8–4.10, on Tally.
//!
//! Method sampling has two design axes: what triggers a sample (a CPU-time timer, a
//! wall-clock timer, setitimer, perf_events) and how it is taken (immediately in the signal
//! handler, or by polling at the next yieldpoint). Each combination is judged by how well its
//! hot methods match a detailed reference profile (accuracy), how much its runs agree with one
//! another (stability), how many samples it delivers, and what it costs (CPU-time overhead
//! against profiling off).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use clap::{Args, ValueEnum};
use serde::{Deserialize, Serialize};
use tally_bench::suite::Suite;
use tally_vm::tally_profile::metrics::{self, TopN};

use super::output::{self, MeanCi, Overhead, RunHeader, NONE};
use super::plan::{self, Step, Task};
use super::profiles;
use super::runner::{EtaKey, Runner, Stop, Timing};
use super::{CommonArgs, Ending, Error, Setup};

pub const AFTER_HELP: &str = "\
What it does:
  For each benchmark, --reference-runs runs at --reference-rate with --reference-sampler and
  --reference-mechanism (default: a 10 kHz wall-clock timer, immediate) are merged into the
  reference (\"detailed\") profile: self samples per method (the innermost frame of each
  sample). Then, for each trigger x mechanism and each of -n invocations, a run with
  `--sampler TRIGGER --mechanism MECHANISM --rate HZ`, and runs with profiling off (the
  baseline), interleaved round by round so that machine noise spreads over all of them.

What the numbers mean (methods are matched by name; \"hot\" = the top set chosen by --top):
  weighted %    of the reference's hot methods, the share of their reference weight that the
                run also finds hot (missing a 40 % method costs more than missing a 2 % one).
                Mean over runs with a Student-t interval.
  unweighted %  the fraction of the reference's hot methods the run also finds hot.
  stability %   the weighted accuracy of each run against each other run of the same
                configuration (every ordered pair), averaged: a profiler that finds different
                hot methods every run is not accurate, just lucky.
  taken / recorded / dropped   samples per run: ticks that asked for a sample, samples
                written, and samples lost (ring full, ring busy, or polling ticks that
                coalesced); taken = recorded + dropped.
  samples/s     recorded samples per second of the profiled run (the profile's own span, wall
                clock, without VM start-up): the rate actually achieved, to compare with
                --rate (CPU-time timers are capped near the kernel tick and do not tick while
                the process waits for a CPU; a wall-clock trigger does).
  overhead %    (mean CPU time of the run / mean CPU time of the baseline runs - 1) x 100, CPU
                time being user + system time of the whole process (wait4), with Fieller's
                interval for a ratio of means; it includes everything profiling costs in the
                process, writing the profile file too.
  average       accuracy and stability: the mean of the benchmarks' means, interval over
                benchmarks; overhead: the geometric mean of the CPU-time ratios.
  A trigger the machine does not allow (perf_events) falls back to the CPU-time timer; the
  report says so under each benchmark.

--top: N (the N heaviest methods), N%methods (the heaviest N % of the methods) or N%samples
(the fewest heaviest methods that hold N % of the samples).

Output (in -o DIR): sampling.md (the tables, also printed on stdout), sampling.json (settings,
the reference profiles, every run's CPU and wall time, sample counts, per-method self samples
and accuracy, the summary), sampling.csv (one line per benchmark x configuration, and the
averages). Ctrl-C stops and writes what was measured; a failing run stops the experiment with
its error output and exit status 1.

Examples:
  SOM=/path/to/SOM tally experiment sampling -n 10 -o sampling
  SOM=/path/to/SOM tally experiment sampling --triggers timer,perf --mechanisms polling \\
      --top 70%samples -o sampling-polling
  tally experiment sampling --suite bench/smoke.toml --benchmarks Fibonacci \\
      --triggers timer-wall --mechanisms immediate,polling -n 2 --reference-runs 1 -o /tmp/s";

/// What triggers a sample: the values of tally's --sampler.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum TriggerKind {
    /// Tally's default: the thread CPU-time timer up to the kernel tick, perf_events above it.
    Auto,
    /// Thread CPU-time timer (timer_create on the VM thread).
    Timer,
    /// Wall-clock timer.
    TimerWall,
    /// setitimer(ITIMER_PROF).
    Itimer,
    /// perf_events (hardware cycles or the task clock).
    Perf,
}

impl TriggerKind {
    fn flag(self) -> &'static str {
        match self {
            TriggerKind::Auto => "auto",
            TriggerKind::Timer => "timer",
            TriggerKind::TimerWall => "timer-wall",
            TriggerKind::Itimer => "itimer",
            TriggerKind::Perf => "perf",
        }
    }
}

/// How a sample is taken: the values of tally's --mechanism.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum MechanismKind {
    /// In the signal handler, from the published VM state.
    Immediate,
    /// At the next yieldpoint.
    Polling,
}

impl MechanismKind {
    fn flag(self) -> &'static str {
        match self {
            MechanismKind::Immediate => "immediate",
            MechanismKind::Polling => "polling",
        }
    }
}

/// Which methods count as hot (`tally_profile::TopN`, in a form files can hold).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Top {
    Methods(usize),
    PercentOfMethods(f64),
    PercentOfSamples(f64),
}

impl Top {
    fn top_n(self) -> TopN {
        match self {
            Top::Methods(n) => TopN::Count(n),
            Top::PercentOfMethods(p) => TopN::PercentOfKeys(p),
            Top::PercentOfSamples(p) => TopN::PercentOfWeight(p),
        }
    }

    fn describe(self) -> String {
        match self {
            Top::Methods(n) => format!("the {n} heaviest methods"),
            Top::PercentOfMethods(p) => format!("the heaviest {p} % of the methods"),
            Top::PercentOfSamples(p) => {
                format!("the fewest heaviest methods holding {p} % of the samples")
            }
        }
    }
}

fn parse_top(s: &str) -> Result<Top, String> {
    let bad = || format!("'{s}': use N, N%methods or N%samples (e.g. 10, 20%methods, 70%samples)");
    let percent = |p: &str| {
        p.trim()
            .parse::<f64>()
            .ok()
            .filter(|p| *p > 0.0 && *p <= 100.0)
            .ok_or_else(bad)
    };
    if let Some(p) = s.strip_suffix("%methods") {
        return Ok(Top::PercentOfMethods(percent(p)?));
    }
    if let Some(p) = s.strip_suffix("%samples") {
        return Ok(Top::PercentOfSamples(percent(p)?));
    }
    s.trim()
        .parse::<usize>()
        .ok()
        .filter(|&n| n >= 1)
        .map(Top::Methods)
        .ok_or_else(bad)
}

#[derive(Args, Debug)]
pub struct SamplingArgs {
    /// Triggers to measure.
    #[arg(
        long,
        value_enum,
        value_name = "TRIGGER,…",
        value_delimiter = ',',
        default_value = "timer,timer-wall,itimer,perf"
    )]
    triggers: Vec<TriggerKind>,

    /// Mechanisms to measure with each trigger.
    #[arg(
        long,
        value_enum,
        value_name = "MECHANISM,…",
        value_delimiter = ',',
        default_value = "immediate,polling"
    )]
    mechanisms: Vec<MechanismKind>,

    /// Invocations (processes) per benchmark and configuration.
    #[arg(long = "invocations", short = 'n', value_name = "N", default_value_t = 10, value_parser = clap::value_parser!(u32).range(1..))]
    invocations: u32,

    /// Runs merged into each benchmark's reference profile.
    #[arg(long, value_name = "N", default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..))]
    reference_runs: u32,

    /// Sampling rate of the reference runs.
    #[arg(long, value_name = "HZ", default_value_t = 10_000, value_parser = clap::value_parser!(u32).range(1..))]
    reference_rate: u32,

    /// Trigger of the reference runs.
    #[arg(long, value_enum, value_name = "TRIGGER", default_value = "timer-wall")]
    reference_sampler: TriggerKind,

    /// Mechanism of the reference runs.
    #[arg(
        long,
        value_enum,
        value_name = "MECHANISM",
        default_value = "immediate"
    )]
    reference_mechanism: MechanismKind,

    /// Hot methods for accuracy and stability: N, N%methods or N%samples.
    #[arg(long, value_name = "SET", default_value = "10", value_parser = parse_top)]
    top: Top,

    #[command(flatten)]
    common: CommonArgs,
}

/// One sampler configuration.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Config {
    pub trigger: TriggerKind,
    pub mechanism: MechanismKind,
}

impl Config {
    fn label(self) -> String {
        format!("{}/{}", self.trigger.flag(), self.mechanism.flag())
    }

    fn flags(self, rate: u32) -> Vec<String> {
        vec![
            "--sampler".into(),
            self.trigger.flag().into(),
            "--mechanism".into(),
            self.mechanism.flag().into(),
            "--rate".into(),
            rate.to_string(),
            // Method sampling alone, as in Buytaert et al.: no call-edge sampling on top.
            "--cbs".into(),
            "off".into(),
        ]
    }
}

impl SamplingArgs {
    fn configs(&self) -> Vec<Config> {
        let mut out = Vec::new();
        for &trigger in &self.triggers {
            for &mechanism in &self.mechanisms {
                let c = Config { trigger, mechanism };
                if !out.contains(&c) {
                    out.push(c);
                }
            }
        }
        out
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RunKind {
    /// A run merged into the reference profile.
    Reference,
    /// Profiling off.
    Baseline,
    Sampled,
}

/// What a profile says about its samples.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SampleStats {
    pub taken: u64,
    pub recorded: u64,
    pub dropped: u64,
    pub dropped_full: u64,
    pub dropped_busy: u64,
    pub dropped_coalesced: u64,
    /// taken == recorded + dropped.
    pub balanced: bool,
    /// Samples in the file (should equal `recorded`).
    pub samples_in_profile: usize,
    /// Seconds the profile covers (first to last event or sample, wall clock): the program's
    /// run after the VM started, without its start-up.
    pub profile_s: f64,
    /// What actually ticked, as the VM reported it.
    pub trigger_source: String,
    /// Why the trigger differs from what was asked, if it does.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub trigger_note: String,
    /// Sampled runs: accuracy (0..=1) against the reference.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub weighted: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unweighted: Option<f64>,
    /// Self samples per method.
    pub methods: BTreeMap<String, u64>,
}

/// One process of the experiment.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RunRecord {
    pub benchmark: String,
    /// 1-based invocation round (of the reference runs, for those).
    pub round: u32,
    pub kind: RunKind,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config: Option<Config>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate_hz: Option<u32>,
    #[serde(flatten)]
    pub timing: Timing,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sampling: Option<SampleStats>,
}

/// A benchmark's reference profile: its runs merged.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Reference {
    pub benchmark: String,
    pub runs: usize,
    pub samples: u64,
    /// Self samples per method (what accuracy is judged against).
    pub self_samples: BTreeMap<String, u64>,
    /// Total (inclusive) samples per method: the method anywhere on the stack.
    pub total_samples: BTreeMap<String, u64>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ConfigSummary {
    pub trigger: TriggerKind,
    pub mechanism: MechanismKind,
    /// Runs measured (for an average: over all benchmarks).
    pub runs: usize,
    pub weighted: Option<MeanCi>,
    pub unweighted: Option<MeanCi>,
    pub stability: Option<f64>,
    pub taken_mean: Option<f64>,
    pub recorded_mean: Option<f64>,
    pub dropped_mean: Option<f64>,
    /// Every run's accounting balanced.
    pub balanced: bool,
    /// Recorded samples per second of profiled time: the rate actually achieved.
    pub samples_per_s: Option<f64>,
    pub cpu_s_mean: Option<f64>,
    pub overhead: Option<Overhead>,
    /// The distinct trigger sources and notes the runs reported.
    pub trigger_sources: Vec<String>,
    pub notes: Vec<String>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct BenchSummary {
    pub benchmark: String,
    pub baseline_runs: usize,
    pub baseline_cpu_s_mean: Option<f64>,
    pub configs: Vec<ConfigSummary>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    pub benchmarks: Vec<BenchSummary>,
    pub average: Vec<ConfigSummary>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Settings {
    pub configs: Vec<Config>,
    pub rate_hz: u32,
    pub invocations: u32,
    pub iterations: u32,
    pub reference: Config,
    pub reference_rate_hz: u32,
    pub reference_runs: u32,
    pub top: Top,
    pub baselines_per_round: usize,
    pub level: f64,
    pub tally: PathBuf,
    pub timeout_s: Option<f64>,
}

/// Everything the experiment measured; sampling.json.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SamplingResults {
    #[serde(flatten)]
    pub header: RunHeader,
    pub settings: Settings,
    pub suite: Suite,
    pub references: Vec<Reference>,
    /// Every run in the order it ran.
    pub runs: Vec<RunRecord>,
    pub summary: Summary,
}

pub const FORMAT: &str = "tally-experiment-sampling/1";

pub fn run(args: SamplingArgs, this: &Path) -> Result<Ending, Error> {
    let configs = args.configs();
    let Setup {
        suite,
        out,
        mut runner,
        started,
        tally,
    } = args.common.setup("sampling", this)?;
    let benches = suite.benchmarks.len();
    let baselines = args
        .common
        .baselines
        .map(|b| b as usize)
        .unwrap_or(configs.len());
    let steps = plan::interleave(args.invocations, benches, &configs, baselines);
    let mut keys: Vec<EtaKey> = Vec::new();
    for _ in 0..args.reference_runs {
        keys.extend((0..benches).map(|b| (b, "reference")));
    }
    keys.extend(steps.iter().map(|s| {
        (
            s.bench,
            match s.task {
                Task::Baseline => "baseline",
                Task::Profiled(_) => "sampled",
            },
        )
    }));
    let total = keys.len();
    runner.plan(keys);
    let mut results = SamplingResults {
        header: RunHeader::begin(FORMAT, started),
        settings: Settings {
            configs: configs.clone(),
            rate_hz: args.common.rate,
            invocations: args.invocations,
            iterations: args.common.iterations,
            reference: Config {
                trigger: args.reference_sampler,
                mechanism: args.reference_mechanism,
            },
            reference_rate_hz: args.reference_rate,
            reference_runs: args.reference_runs,
            top: args.top,
            baselines_per_round: baselines,
            level: args.common.level,
            tally,
            timeout_s: args.common.timeout,
        },
        suite,
        references: Vec::new(),
        runs: Vec::new(),
        summary: Summary::default(),
    };
    let json = out.join("sampling.json");
    write_json(&results, &json).map_err(Error::Usage)?;
    runner.say(&format!(
        "tally experiment sampling: {benches} benchmark(s) × {} configuration(s) × {} invocation(s), {} reference run(s), {baselines} baseline(s) per round: {total} runs; writing to {}",
        configs.len(),
        args.invocations,
        args.reference_runs,
        out.display()
    ));
    let stop = measure(&mut results, &mut runner, &steps, &json).err();
    runner.finish();
    results.header.end(stop.as_ref());
    results.summary = summarize(&results);
    let md = render_markdown(&results);
    print!("{md}");
    output::write_file(&out.join("sampling.md"), &md).map_err(Error::Failed)?;
    output::write_file(&out.join("sampling.csv"), &render_csv(&results)).map_err(Error::Failed)?;
    write_json(&results, &json).map_err(Error::Failed)?;
    if !args.common.quiet {
        say!("tally experiment sampling: wrote {}", out.display());
    }
    super::ending(stop)
}

fn write_json(r: &SamplingResults, path: &Path) -> Result<(), String> {
    let text = serde_json::to_string_pretty(r).expect("results serialize");
    output::write_file(path, &(text + "\n"))
}

/// Reads what a profile says about its samples.
fn sample_stats(p: &tally_vm::tally_profile::Profile) -> SampleStats {
    let c = &p.counters;
    SampleStats {
        taken: c.taken,
        recorded: c.recorded,
        dropped: c.dropped(),
        dropped_full: c.dropped_full,
        dropped_busy: c.dropped_busy,
        dropped_coalesced: c.dropped_coalesced,
        balanced: c.balanced(),
        samples_in_profile: p.samples.len(),
        profile_s: p.duration_ns() as f64 / 1e9,
        trigger_source: p.header.sampler.trigger_source.clone(),
        trigger_note: p.header.sampler.trigger_note.clone(),
        weighted: None,
        unweighted: None,
        methods: profiles::self_samples(p),
    }
}

/// The measuring loop: reference runs first (round by round over the benchmarks), then the
/// interleaved sampled and baseline runs. Results are saved after every run.
fn measure(
    r: &mut SamplingResults,
    runner: &mut Runner,
    steps: &[Step<Config>],
    json: &Path,
) -> Result<(), Stop> {
    let s = r.settings.clone();
    let mut refs: Vec<Reference> = r
        .suite
        .benchmarks
        .iter()
        .map(|b| Reference {
            benchmark: b.name.clone(),
            runs: 0,
            samples: 0,
            self_samples: BTreeMap::new(),
            total_samples: BTreeMap::new(),
        })
        .collect();
    let top = s.top.top_n();
    for round in 1..=s.reference_runs {
        for (bench, reference) in refs.iter_mut().enumerate() {
            let path = runner.profile_path(bench, &format!("reference-r{round}.profile"))?;
            let mut flags = vec![format!("--profile={}", path.display()), "--force".into()];
            flags.extend(s.reference.flags(s.reference_rate_hz));
            let label = format!(
                "reference {} at {} Hz",
                s.reference.label(),
                s.reference_rate_hz
            );
            let timing = runner.run(bench, round, &label, flags)?;
            let p = runner.take_profile(&path)?;
            let stats = sample_stats(&p);
            profiles::merge(&mut reference.self_samples, &stats.methods);
            profiles::merge(&mut reference.total_samples, &profiles::total_samples(&p));
            reference.runs += 1;
            reference.samples = profiles::total(&reference.self_samples);
            r.runs.push(RunRecord {
                benchmark: reference.benchmark.clone(),
                round,
                kind: RunKind::Reference,
                config: Some(s.reference),
                rate_hz: Some(s.reference_rate_hz),
                timing,
                sampling: Some(stats),
            });
        }
        r.references = refs.clone();
        checkpoint(r, json)?;
    }
    if let Some(empty) = refs.iter().find(|x| x.samples == 0) {
        return Err(Stop::Failed(format!(
            "the reference runs of {} took no samples: the benchmark is too short for {} Hz \
             (raise --iterations or the suite's inner size, or --reference-rate)",
            empty.benchmark, s.reference_rate_hz
        )));
    }
    for step in steps {
        let name = r.suite.benchmarks[step.bench].name.clone();
        let record = match step.task {
            Task::Baseline => RunRecord {
                benchmark: name,
                round: step.round,
                kind: RunKind::Baseline,
                config: None,
                rate_hz: None,
                timing: runner.run(step.bench, step.round, "baseline", Vec::new())?,
                sampling: None,
            },
            Task::Profiled(config) => {
                let file = format!(
                    "{}-{}-r{}.profile",
                    config.trigger.flag(),
                    config.mechanism.flag(),
                    step.round
                );
                let path = runner.profile_path(step.bench, &file)?;
                let mut flags = vec![format!("--profile={}", path.display()), "--force".into()];
                flags.extend(config.flags(s.rate_hz));
                let timing = runner.run(step.bench, step.round, &config.label(), flags)?;
                let p = runner.take_profile(&path)?;
                let mut stats = sample_stats(&p);
                let reference = &refs[step.bench].self_samples;
                stats.weighted = Some(metrics::weighted_accuracy(reference, &stats.methods, top));
                stats.unweighted =
                    Some(metrics::unweighted_accuracy(reference, &stats.methods, top));
                RunRecord {
                    benchmark: name,
                    round: step.round,
                    kind: RunKind::Sampled,
                    config: Some(config),
                    rate_hz: Some(s.rate_hz),
                    timing,
                    sampling: Some(stats),
                }
            }
        };
        r.runs.push(record);
        checkpoint(r, json)?;
    }
    Ok(())
}

fn checkpoint(r: &mut SamplingResults, json: &Path) -> Result<(), Stop> {
    r.header.finished = tally_bench::now_rfc3339();
    r.summary = summarize(r);
    write_json(r, json).map_err(Stop::Failed)
}

fn distinct(values: impl Iterator<Item = String>) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for v in values {
        if !v.is_empty() && !out.contains(&v) {
            out.push(v);
        }
    }
    out
}

/// Per benchmark and configuration: accuracy and sample counts over its runs, stability
/// between them, overhead against all of the benchmark's baseline runs; then the averages.
pub fn summarize(r: &SamplingResults) -> Summary {
    let level = r.settings.level;
    let top = r.settings.top.top_n();
    let mut benchmarks = Vec::new();
    for b in &r.suite.benchmarks {
        let baseline: Vec<f64> = r
            .runs
            .iter()
            .filter(|x| x.benchmark == b.name && x.kind == RunKind::Baseline)
            .map(|x| x.timing.cpu_s)
            .collect();
        let configs = r
            .settings
            .configs
            .iter()
            .map(|&config| {
                let runs: Vec<(&RunRecord, &SampleStats)> = r
                    .runs
                    .iter()
                    .filter(|x| {
                        x.benchmark == b.name
                            && x.kind == RunKind::Sampled
                            && x.config == Some(config)
                    })
                    .filter_map(|x| x.sampling.as_ref().map(|s| (x, s)))
                    .collect();
                let of = |f: &dyn Fn(&(&RunRecord, &SampleStats)) -> Option<f64>| {
                    runs.iter().filter_map(f).collect::<Vec<f64>>()
                };
                let cpu = of(&|(x, _)| Some(x.timing.cpu_s));
                let maps: Vec<BTreeMap<String, u64>> =
                    runs.iter().map(|(_, s)| s.methods.clone()).collect();
                let rates =
                    of(&|(_, s)| (s.profile_s > 0.0).then(|| s.recorded as f64 / s.profile_s));
                ConfigSummary {
                    trigger: config.trigger,
                    mechanism: config.mechanism,
                    runs: runs.len(),
                    weighted: output::fraction_with_ci(&of(&|(_, s)| s.weighted), level),
                    unweighted: output::fraction_with_ci(&of(&|(_, s)| s.unweighted), level),
                    stability: (!maps.is_empty()).then(|| metrics::stability(&maps, top)),
                    taken_mean: output::mean(&of(&|(_, s)| Some(s.taken as f64))),
                    recorded_mean: output::mean(&of(&|(_, s)| Some(s.recorded as f64))),
                    dropped_mean: output::mean(&of(&|(_, s)| Some(s.dropped as f64))),
                    balanced: runs.iter().all(|(_, s)| s.balanced),
                    samples_per_s: output::mean(&rates),
                    cpu_s_mean: output::mean(&cpu),
                    overhead: output::overhead(&cpu, &baseline, level),
                    trigger_sources: distinct(runs.iter().map(|(_, s)| s.trigger_source.clone())),
                    notes: distinct(runs.iter().map(|(_, s)| s.trigger_note.clone())),
                }
            })
            .collect();
        benchmarks.push(BenchSummary {
            benchmark: b.name.clone(),
            baseline_runs: baseline.len(),
            baseline_cpu_s_mean: output::mean(&baseline),
            configs,
        });
    }
    let average = r
        .settings
        .configs
        .iter()
        .enumerate()
        .map(|(i, &config)| {
            let per: Vec<&ConfigSummary> = benchmarks
                .iter()
                .map(|b| &b.configs[i])
                .filter(|c| c.runs > 0)
                .collect();
            let of = |f: fn(&ConfigSummary) -> Option<f64>| {
                per.iter().filter_map(|c| f(c)).collect::<Vec<f64>>()
            };
            let overheads: Vec<&Overhead> =
                per.iter().filter_map(|c| c.overhead.as_ref()).collect();
            ConfigSummary {
                trigger: config.trigger,
                mechanism: config.mechanism,
                runs: per.iter().map(|c| c.runs).sum(),
                weighted: output::fraction_with_ci(
                    &of(|c| c.weighted.as_ref().map(|m| m.mean)),
                    level,
                ),
                unweighted: output::fraction_with_ci(
                    &of(|c| c.unweighted.as_ref().map(|m| m.mean)),
                    level,
                ),
                stability: output::mean(&of(|c| c.stability)),
                taken_mean: output::mean(&of(|c| c.taken_mean)),
                recorded_mean: output::mean(&of(|c| c.recorded_mean)),
                dropped_mean: output::mean(&of(|c| c.dropped_mean)),
                balanced: per.iter().all(|c| c.balanced),
                samples_per_s: output::mean(&of(|c| c.samples_per_s)),
                cpu_s_mean: None,
                overhead: output::average_overhead(&overheads, level),
                trigger_sources: distinct(per.iter().flat_map(|c| c.trigger_sources.clone())),
                notes: distinct(per.iter().flat_map(|c| c.notes.clone())),
            }
        })
        .collect();
    Summary {
        benchmarks,
        average,
    }
}

fn table(configs: &[ConfigSummary], level: f64, average: bool) -> String {
    let ci = format!("[{:.0} % CI]", level * 100.0);
    let mut header: Vec<String> = vec![
        "trigger/mechanism".into(),
        "runs".into(),
        format!("weighted % {ci}"),
        format!("unweighted % {ci}"),
        "stability %".into(),
        "taken/run".into(),
        "recorded/run".into(),
        "dropped/run".into(),
        "samples/s".into(),
    ];
    if !average {
        header.push("CPU s".into());
    }
    header.push(format!("overhead % {ci}"));
    let num = |x: Option<f64>, digits: usize| {
        x.map(|v| format!("{v:.digits$}"))
            .unwrap_or_else(|| NONE.into())
    };
    let rows: Vec<Vec<String>> = configs
        .iter()
        .map(|c| {
            let mut row = vec![
                format!("{}/{}", c.trigger.flag(), c.mechanism.flag()),
                c.runs.to_string(),
                c.weighted
                    .as_ref()
                    .map(output::pct_with_ci)
                    .unwrap_or_else(|| NONE.into()),
                c.unweighted
                    .as_ref()
                    .map(output::pct_with_ci)
                    .unwrap_or_else(|| NONE.into()),
                c.stability.map(output::pct).unwrap_or_else(|| NONE.into()),
                num(c.taken_mean, 0),
                num(c.recorded_mean, 0),
                format!(
                    "{}{}",
                    num(c.dropped_mean, 1),
                    if c.balanced || c.runs == 0 {
                        ""
                    } else {
                        " (unbalanced!)"
                    }
                ),
                num(c.samples_per_s, 0),
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
        .collect();
    output::table(&header, &rows)
}

/// sampling.md: setup, the averages, then each benchmark's reference and table.
pub fn render_markdown(r: &SamplingResults) -> String {
    use std::fmt::Write as _;
    let s = &r.settings;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "# Method-sampling accuracy, stability and overhead (Buytaert et al., OOPSLA 2007)\n"
    );
    for line in output::setup_lines(&r.header.machine, &r.header.command, &s.tally) {
        let _ = writeln!(out, "{line}");
    }
    let _ = writeln!(
        out,
        "- suite `{}`; each process runs `{} BENCH {} INNER`; {} invocation(s) per \
         configuration at {} Hz, {} baseline run(s) (profiling off) per benchmark and round",
        r.suite.source,
        r.suite.harness,
        s.iterations,
        s.invocations,
        s.rate_hz,
        s.baselines_per_round
    );
    let _ = writeln!(
        out,
        "- reference: {} run(s) per benchmark with {} at {} Hz, self samples merged; hot methods: {}",
        s.reference_runs,
        s.reference.label(),
        s.reference_rate_hz,
        s.top.describe()
    );
    let _ = writeln!(
        out,
        "- started {}, finished {}",
        r.header.started, r.header.finished
    );
    if let Some(why) = &r.header.stopped {
        let _ = writeln!(
            out,
            "- **incomplete**: {}",
            why.lines().next().unwrap_or("")
        );
    }
    let _ = writeln!(
        out,
        "\nAccuracy and stability in % (1.0 = 100 %); taken/recorded/dropped are samples per \
         run; overhead is CPU time against profiling off. See `tally experiment sampling \
         --help` for the definitions.\n"
    );
    let n = r.summary.benchmarks.len();
    if n > 1 {
        let _ = writeln!(out, "## Average over {n} benchmarks\n");
        let _ = writeln!(
            out,
            "Means of the benchmarks' means (intervals over benchmarks); overhead: geometric \
             mean of the CPU-time ratios.\n"
        );
        let _ = writeln!(out, "{}", table(&r.summary.average, s.level, true));
    }
    for b in &r.summary.benchmarks {
        let _ = writeln!(out, "## {}\n", b.benchmark);
        if let Some(reference) = r.references.iter().find(|x| x.benchmark == b.benchmark) {
            let total = reference.samples.max(1) as f64;
            let top = metrics::top_set(&reference.self_samples, TopN::Count(5));
            let hottest: Vec<String> = top
                .iter()
                .map(|m| {
                    format!(
                        "`{m}` {:.1} %",
                        reference.self_samples[m] as f64 * 100.0 / total
                    )
                })
                .collect();
            let _ = writeln!(
                out,
                "Reference: {} run(s), {} samples, {} methods; hottest (self): {}.",
                reference.runs,
                reference.samples,
                reference.self_samples.len(),
                if hottest.is_empty() {
                    NONE.to_string()
                } else {
                    hottest.join(", ")
                }
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
        let _ = writeln!(out, "{}", table(&b.configs, s.level, false));
        let mut notes = Vec::new();
        for c in &b.configs {
            let label = format!("{}/{}", c.trigger.flag(), c.mechanism.flag());
            if !c.notes.is_empty() {
                notes.push(format!("- {label}: {}", c.notes.join("; ")));
            } else if c.trigger_sources.len() > 1 {
                notes.push(format!(
                    "- {label}: runs ticked from different sources: {}",
                    c.trigger_sources.join("; ")
                ));
            }
        }
        if !notes.is_empty() {
            let _ = writeln!(out, "{}\n", notes.join("\n"));
        }
        let sources: Vec<String> = b
            .configs
            .iter()
            .filter(|c| !c.trigger_sources.is_empty())
            .map(|c| {
                format!(
                    "{}/{}: {}",
                    c.trigger.flag(),
                    c.mechanism.flag(),
                    c.trigger_sources.join(", ")
                )
            })
            .collect();
        if !sources.is_empty() {
            let _ = writeln!(out, "Trigger sources: {}.\n", sources.join("; "));
        }
    }
    out
}

/// sampling.csv: one line per benchmark × configuration, then one per configuration for the
/// average.
pub fn render_csv(r: &SamplingResults) -> String {
    let mut out = output::csv_line(
        &[
            "benchmark",
            "trigger",
            "mechanism",
            "runs",
            "weighted_pct",
            "weighted_lower_pct",
            "weighted_upper_pct",
            "unweighted_pct",
            "unweighted_lower_pct",
            "unweighted_upper_pct",
            "stability_pct",
            "taken_per_run",
            "recorded_per_run",
            "dropped_per_run",
            "balanced",
            "samples_per_s",
            "cpu_s_mean",
            "baseline_cpu_s_mean",
            "overhead_pct",
            "overhead_lower_pct",
            "overhead_upper_pct",
        ]
        .map(String::from),
    );
    let pct = |x: Option<f64>| output::csv_num(x.map(|v| v * 100.0));
    let mut line = |name: &str, c: &ConfigSummary, base: Option<f64>| {
        let (w, u, o) = (
            c.weighted.as_ref(),
            c.unweighted.as_ref(),
            c.overhead.as_ref(),
        );
        out.push_str(&output::csv_line(&[
            name.to_string(),
            c.trigger.flag().to_string(),
            c.mechanism.flag().to_string(),
            c.runs.to_string(),
            pct(w.map(|m| m.mean)),
            pct(w.and_then(|m| m.lower)),
            pct(w.and_then(|m| m.upper)),
            pct(u.map(|m| m.mean)),
            pct(u.and_then(|m| m.lower)),
            pct(u.and_then(|m| m.upper)),
            pct(c.stability),
            output::csv_num(c.taken_mean),
            output::csv_num(c.recorded_mean),
            output::csv_num(c.dropped_mean),
            c.balanced.to_string(),
            output::csv_num(c.samples_per_s),
            output::csv_num(c.cpu_s_mean),
            output::csv_num(base),
            output::csv_num(o.map(|o| o.percent)),
            output::csv_num(o.and_then(|o| o.lower)),
            output::csv_num(o.and_then(|o| o.upper)),
        ]));
    };
    for b in &r.summary.benchmarks {
        for c in &b.configs {
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

    const WALL_IMM: Config = Config {
        trigger: TriggerKind::TimerWall,
        mechanism: MechanismKind::Immediate,
    };
    const CPU_POLL: Config = Config {
        trigger: TriggerKind::Timer,
        mechanism: MechanismKind::Polling,
    };

    fn methods(pairs: &[(&str, u64)]) -> BTreeMap<String, u64> {
        pairs.iter().map(|&(k, v)| (k.to_string(), v)).collect()
    }

    fn sampled(bench: &str, config: Config, cpu: f64, m: &[(&str, u64)], w: f64) -> RunRecord {
        let methods = methods(m);
        let taken = profiles::total(&methods) + 1;
        RunRecord {
            benchmark: bench.into(),
            round: 1,
            kind: RunKind::Sampled,
            config: Some(config),
            rate_hz: Some(1000),
            timing: Timing {
                sequence: 0,
                cpu_s: cpu,
                user_s: cpu,
                sys_s: 0.0,
                wall_s: cpu,
                max_rss_kib: 1,
                argv: vec![],
                stderr: String::new(),
            },
            sampling: Some(SampleStats {
                taken,
                recorded: taken - 1,
                dropped: 1,
                dropped_full: 0,
                dropped_busy: 0,
                dropped_coalesced: 1,
                balanced: true,
                samples_in_profile: (taken - 1) as usize,
                profile_s: 0.5,
                trigger_source: "timer_create(CLOCK_MONOTONIC)".into(),
                trigger_note: String::new(),
                weighted: Some(w),
                unweighted: Some(w),
                methods,
            }),
        }
    }

    fn baseline(bench: &str, cpu: f64) -> RunRecord {
        let mut r = sampled(bench, WALL_IMM, cpu, &[], 0.0);
        r.kind = RunKind::Baseline;
        r.config = None;
        r.sampling = None;
        r
    }

    fn results(runs: Vec<RunRecord>) -> SamplingResults {
        SamplingResults {
            header: RunHeader {
                format: FORMAT.into(),
                tool: "test".into(),
                command: "tally experiment sampling".into(),
                started: "s".into(),
                finished: "f".into(),
                complete: true,
                stopped: None,
                machine: Machine::current(),
            },
            settings: Settings {
                configs: vec![WALL_IMM, CPU_POLL],
                rate_hz: 1000,
                invocations: 2,
                iterations: 1,
                reference: WALL_IMM,
                reference_rate_hz: 10_000,
                reference_runs: 1,
                top: Top::Methods(2),
                baselines_per_round: 2,
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
            references: vec![Reference {
                benchmark: "A".into(),
                runs: 1,
                samples: 100,
                self_samples: methods(&[("x", 60), ("y", 30), ("z", 10)]),
                total_samples: methods(&[("x", 100)]),
            }],
            runs,
            summary: Summary::default(),
        }
    }

    #[test]
    fn top_sets_parse() {
        assert_eq!(parse_top("10"), Ok(Top::Methods(10)));
        assert_eq!(parse_top("20%methods"), Ok(Top::PercentOfMethods(20.0)));
        assert_eq!(parse_top("70%samples"), Ok(Top::PercentOfSamples(70.0)));
        for bad in ["0", "x", "120%samples", "5%", "-1"] {
            assert!(parse_top(bad).is_err(), "{bad}");
        }
        assert_eq!(
            Top::PercentOfSamples(70.0).top_n(),
            TopN::PercentOfWeight(70.0)
        );
    }

    #[test]
    fn configurations_are_the_product_in_order() {
        use clap::Parser;
        #[derive(Parser)]
        struct P {
            #[command(flatten)]
            a: SamplingArgs,
        }
        let p = P::parse_from(["x"]);
        assert_eq!(p.a.configs().len(), 8);
        assert_eq!(
            p.a.configs()[0],
            Config {
                trigger: TriggerKind::Timer,
                mechanism: MechanismKind::Immediate
            }
        );
        let p = P::parse_from([
            "x",
            "--triggers",
            "timer-wall,timer",
            "--mechanisms",
            "polling",
        ]);
        assert_eq!(
            p.a.configs(),
            [
                Config {
                    trigger: TriggerKind::TimerWall,
                    mechanism: MechanismKind::Polling
                },
                CPU_POLL
            ]
        );
        assert_eq!(
            WALL_IMM.flags(250),
            [
                "--sampler",
                "timer-wall",
                "--mechanism",
                "immediate",
                "--rate",
                "250",
                "--cbs",
                "off"
            ]
        );
        assert!(P::try_parse_from(["x", "--triggers", "cycles"]).is_err());
    }

    #[test]
    fn summary_has_accuracy_stability_counts_and_overhead() {
        let runs = vec![
            baseline("A", 1.0),
            sampled("A", WALL_IMM, 1.2, &[("x", 6), ("y", 3)], 0.9),
            baseline("A", 1.0),
            sampled("A", WALL_IMM, 1.2, &[("x", 6), ("z", 3)], 0.7),
            sampled("A", CPU_POLL, 1.1, &[("x", 6), ("y", 3)], 1.0),
            baseline("B", 2.0),
            sampled("B", WALL_IMM, 2.0, &[("q", 1)], 0.5),
        ];
        let mut r = results(runs);
        let s = summarize(&r);
        let a = &s.benchmarks[0].configs[0];
        assert_eq!(a.runs, 2);
        let w = a.weighted.as_ref().unwrap();
        assert!((w.mean - 0.8).abs() < 1e-12 && w.lower.unwrap() < 0.8);
        // Top 2 of the two runs: {x, y} and {x, z}; each finds 6 of the other's 9.
        assert!((a.stability.unwrap() - 6.0 / 9.0).abs() < 1e-12);
        assert_eq!(
            (a.taken_mean, a.recorded_mean, a.dropped_mean),
            (Some(10.0), Some(9.0), Some(1.0))
        );
        assert!(a.balanced);
        assert!((a.samples_per_s.unwrap() - 18.0).abs() < 1e-12);
        assert!((a.overhead.as_ref().unwrap().percent - 20.0).abs() < 1e-9);
        // One run: stability is 1 by definition, no interval.
        let p = &s.benchmarks[0].configs[1];
        assert_eq!((p.runs, p.stability), (1, Some(1.0)));
        assert!(p.weighted.as_ref().unwrap().lower.is_none());
        let avg = &s.average[0];
        assert_eq!(avg.runs, 3);
        assert!((avg.weighted.as_ref().unwrap().mean - 0.65).abs() < 1e-12);
        // Ratios 1.2 and 1.0.
        let g = avg.overhead.as_ref().unwrap().percent;
        assert!((g - (1.2f64.sqrt() - 1.0) * 100.0).abs() < 1e-9);
        assert_eq!(s.average[1].runs, 1);

        r.summary = s;
        let md = render_markdown(&r);
        assert!(md.contains("## Average over 2 benchmarks"), "{md}");
        assert!(md.contains("| timer-wall/immediate |"), "{md}");
        assert!(md.contains("`x` 60.0 %"), "{md}");
        assert!(md.contains("+20.0 [+20.0, +20.0]"), "{md}");
        let csv = render_csv(&r);
        assert_eq!(csv.lines().count(), 1 + 2 * 2 + 2);
        assert!(csv
            .lines()
            .nth(1)
            .unwrap()
            .starts_with("A,timer-wall,immediate,2,80,"));
        let back: SamplingResults =
            serde_json::from_str(&serde_json::to_string(&r).unwrap()).unwrap();
        assert_eq!(back.runs, r.runs);
    }
}
