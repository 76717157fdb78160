//! From raw measurements to the figures a report shows.
//!
//! Following Georges et al., the *invocation* is the unit of sampling:
//! iterations inside one process are not independent (they share a heap, a
//! JIT's decisions, a CPU's caches), so each invocation is boiled down to
//! one number (its mean iteration time, first iteration, steady-state mean
//! or process wall time: the *metric*) and intervals and tests are computed
//! over those numbers.

use serde::{Deserialize, Serialize};
use tally_stats::{
    analyse_invocation, bootstrap_ci, geometric_mean_ratio_ci, hodges_lehmann, median,
    one_way_anova, ratio_ci, tukey_hsd, welch_t_test, Bootstrap, ConfidenceInterval, StatsError,
    Summary,
};

use crate::results::{Outcome, Results};

/// Which per-invocation number is compared.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum Metric {
    /// Mean iteration time (after `warmup` iterations are dropped).
    Mean,
    /// Fastest iteration (after `warmup` iterations are dropped): on a shared
    /// machine noise only ever adds time, so the minimum is the estimator least
    /// disturbed by it (Chen & Revels, 2016); for small differences between
    /// builds of one VM.
    Min,
    /// First iteration time: start-up performance.
    Startup,
    /// Mean of the steady-state window; invocations that never settle are left out.
    Steady,
    /// Whole-process wall time, VM start-up included (what hyperfine measures).
    Wall,
    /// Whole-process user+system CPU time, start-up included: on a shared
    /// machine it does not count time spent waiting for a CPU, which the
    /// harness's wall-clock iteration times do.
    Cpu,
}

impl Metric {
    /// How the metric is described in a report heading.
    pub fn describe(self, warmup: u32) -> String {
        match self {
            Metric::Mean if warmup == 0 => "mean iteration time per invocation".into(),
            Metric::Mean => {
                format!("mean iteration time per invocation, first {warmup} iteration(s) dropped")
            }
            Metric::Min if warmup == 0 => "fastest iteration per invocation".into(),
            Metric::Min => {
                format!("fastest iteration per invocation, first {warmup} iteration(s) dropped")
            }
            Metric::Startup => "first-iteration time (start-up)".into(),
            Metric::Steady => "steady-state mean per invocation".into(),
            Metric::Wall => "process wall time per invocation".into(),
            Metric::Cpu => "process CPU time (user+sys) per invocation".into(),
        }
    }
}

/// How raw measurements are analysed; stored in the results file and
/// overridable by `tally bench report`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AnalysisSettings {
    /// Confidence level of every interval and test, e.g. 0.95.
    pub level: f64,
    /// Steady state: window length k.
    pub steady_window: usize,
    /// Steady state: coefficient-of-variation threshold.
    pub steady_cov: f64,
    /// The compared number.
    pub metric: Metric,
    /// Iterations dropped from the mean metric.
    pub warmup: u32,
    /// Executor everything is compared to; the first one if unset.
    pub baseline: Option<String>,
}

impl Default for AnalysisSettings {
    fn default() -> Self {
        AnalysisSettings {
            level: 0.95,
            steady_window: 5,
            steady_cov: 0.02,
            metric: Metric::Mean,
            warmup: 0,
            baseline: None,
        }
    }
}

/// The analysed run.
#[derive(Debug, Clone)]
pub struct Report {
    /// The settings used.
    pub settings: AnalysisSettings,
    /// Executor names, in results order.
    pub executors: Vec<String>,
    /// Index of the baseline executor.
    pub baseline: usize,
    /// One entry per benchmark, in suite order.
    pub benchmarks: Vec<BenchmarkReport>,
    /// Per non-baseline executor: the geometric mean of its ratios to the baseline.
    pub geomeans: Vec<GeomeanRow>,
    /// Every failed invocation, for the report's failure list.
    pub failures: Vec<Failure>,
    /// Largest iteration count of any benchmark (to explain "not reached").
    pub max_iterations: usize,
}

/// One benchmark across executors.
#[derive(Debug, Clone)]
pub struct BenchmarkReport {
    /// Benchmark name.
    pub name: String,
    /// One cell per executor, in executor order.
    pub cells: Vec<Cell>,
    /// One-way ANOVA p-value, with three or more executors.
    pub anova_p: Option<f64>,
}

/// One benchmark on one executor.
#[derive(Debug, Clone)]
pub struct Cell {
    /// Invocations recorded (interrupted ones excluded).
    pub attempted: usize,
    /// Invocations that succeeded.
    pub ok: usize,
    /// The metric of each usable invocation, microseconds.
    pub samples: Vec<f64>,
    /// `samples` with the invocation (round) number each came from, to pair executors
    /// measured in the same round.
    pub by_round: Vec<(u32, f64)>,
    /// Mean, median, deviation and interval of `samples` (needs two).
    pub summary: Option<Summary>,
    /// Mean of `samples` when there is at least one.
    pub mean: Option<f64>,
    /// Median of `samples`.
    pub median: Option<f64>,
    /// Smallest of `samples`.
    pub min: Option<f64>,
    /// Largest of `samples`.
    pub max: Option<f64>,
    /// The invocations whose value is an outlier among `samples` (see [`crate::outliers`]),
    /// in invocation order; empty also when there are too few samples to tell.
    pub outliers: Vec<crate::outliers::Outlier>,
    /// What the cell and the comparisons come to without those outliers (absent without
    /// outliers).
    pub without_outliers: Option<crate::outliers::Effect>,
    /// Mean first-iteration time across invocations, microseconds.
    pub startup: Option<f64>,
    /// Steady state across invocations.
    pub steady: SteadyCell,
    /// Mean user+sys CPU seconds per invocation.
    pub cpu_s: Option<f64>,
    /// Mean wall seconds per invocation.
    pub wall_s: Option<f64>,
    /// Largest peak RSS of any invocation, KiB.
    pub max_rss_kib: Option<u64>,
    /// Mean compile time per invocation, microseconds per tier, for executors that log their
    /// compiles (empty otherwise).
    pub compile_us: std::collections::BTreeMap<String, f64>,
    /// Comparison with the baseline (absent for the baseline itself).
    pub ratio: Option<RatioCell>,
}

/// Steady state of one benchmark on one executor.
#[derive(Debug, Clone, Default)]
pub struct SteadyCell {
    /// Invocations whose iterations settled.
    pub reached: usize,
    /// Invocations examined.
    pub of: usize,
    /// Mean of the steady-state means of those that settled, microseconds.
    pub mean: Option<f64>,
    /// Earliest and latest iteration (0-based) at which a window started.
    pub start_range: Option<(usize, usize)>,
    /// Every invocation had fewer iterations than the window, so steady
    /// state could not have been detected however stable the VM was.
    pub too_short: bool,
}

/// An executor's time relative to the baseline's on one benchmark.
#[derive(Debug, Clone)]
pub struct RatioCell {
    /// mean(executor) / mean(baseline): below 1 is faster.
    pub estimate: f64,
    /// Fieller interval, when both sides have two samples and it is bounded.
    pub ci: Option<ConfidenceInterval>,
    /// Both sides had enough samples but the interval is unbounded: the
    /// baseline's mean is not distinguishable from zero at this noise.
    pub unbounded: bool,
    /// p-value of the test against the baseline.
    pub p_value: Option<f64>,
    /// Whether the test says the two differ at the chosen level.
    pub significant: Option<bool>,
    /// Which test: "Welch" or "Tukey HSD".
    pub test: Option<&'static str>,
}

/// What a comparison with the baseline concludes: the verdict the table's `*` shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Significantly faster than the baseline.
    Faster,
    /// Significantly slower than the baseline.
    Slower,
    /// Not distinguishable from the baseline at the chosen level.
    NotSignificant,
    /// No test was possible (fewer than two samples on a side, or no spread at all).
    Untested,
}

impl Verdict {
    /// The verdict in words, as warnings say it.
    pub fn describe(self) -> &'static str {
        match self {
            Verdict::Faster => "significantly faster",
            Verdict::Slower => "significantly slower",
            Verdict::NotSignificant => "not significantly different",
            Verdict::Untested => "untested",
        }
    }
}

impl RatioCell {
    /// The comparison's verdict.
    pub fn verdict(&self) -> Verdict {
        match self.significant {
            Some(true) if self.estimate < 1.0 => Verdict::Faster,
            Some(true) => Verdict::Slower,
            Some(false) => Verdict::NotSignificant,
            None => Verdict::Untested,
        }
    }
}

/// Suite-wide comparison of one executor with the baseline.
#[derive(Debug, Clone)]
pub struct GeomeanRow {
    /// Executor index.
    pub executor: usize,
    /// Benchmarks that contributed a ratio.
    pub benchmarks: usize,
    /// Geometric mean of the ratios.
    pub estimate: f64,
    /// Interval over benchmarks (needs two).
    pub ci: Option<ConfidenceInterval>,
    /// The same geometric mean paired by invocation round (needs two complete rounds).
    pub paired: Option<PairedGeomean>,
    /// The paired geometric mean estimated robustly: per benchmark the Hodges–Lehmann ratio
    /// over rounds, with a bootstrap interval over rounds. On a machine whose speed changes
    /// in phases, the few rounds measured across a change set the width of the t-interval
    /// of `paired`; here they count as what they are, outliers.
    pub robust: Option<PairedGeomean>,
    /// Benchmarks where the executor was significantly faster / slower.
    pub faster: usize,
    /// See `faster`.
    pub slower: usize,
}

/// The suite's geometric mean of ratios measured round by round.
///
/// The runner interleaves executors round by round, so the two invocations of one round ran
/// seconds apart on the same machine state. Each round gives one suite-wide ratio (the
/// geometric mean over benchmarks of that round's ratios); the interval is over rounds. It
/// answers "how precisely is this suite's geomean known", where the interval over benchmarks
/// answers "how much does the ratio vary between benchmarks": a 1 % overhead that some
/// benchmarks show as −8 % and others as +15 % (code layout) cannot be bounded over
/// benchmarks, but can over rounds. Slow drifts of the machine cancel within a round.
#[derive(Debug, Clone, Copy)]
pub struct PairedGeomean {
    /// Rounds in which every contributing benchmark has a value on both sides.
    pub rounds: usize,
    /// Geometric mean over rounds of the per-round ratios, with its t-interval.
    pub ci: ConfidenceInterval,
}

/// A failed invocation, for the failure list.
#[derive(Debug, Clone)]
pub struct Failure {
    /// Benchmark name.
    pub benchmark: String,
    /// Executor name.
    pub executor: String,
    /// Invocation number.
    pub invocation: u32,
    /// Why.
    pub reason: String,
    /// Output tail.
    pub output_tail: Option<String>,
}

impl Report {
    /// Analyses `results` with `settings`.
    pub fn new(results: &Results, settings: &AnalysisSettings) -> Result<Report, String> {
        let executors: Vec<String> = results.executors.iter().map(|e| e.name.clone()).collect();
        let baseline = match &settings.baseline {
            Some(name) => executors.iter().position(|e| e == name).ok_or_else(|| {
                format!(
                    "baseline {name:?} is not one of the executors ({})",
                    executors.join(", ")
                )
            })?,
            None => 0,
        };
        let level = settings.level;
        let mut benchmarks = Vec::new();
        for bench in &results.suite.benchmarks {
            let mut cells: Vec<Cell> = executors
                .iter()
                .map(|e| cell(results, &bench.name, e, settings))
                .collect();
            let anova_p = compare(&mut cells, baseline, level);
            crate::outliers::flag(&mut cells, baseline, level);
            benchmarks.push(BenchmarkReport {
                name: bench.name.clone(),
                cells,
                anova_p,
            });
        }
        let geomeans = (0..executors.len())
            .filter(|&e| e != baseline)
            .filter_map(|e| {
                let ratios: Vec<&RatioCell> = benchmarks
                    .iter()
                    .filter_map(|b| b.cells[e].ratio.as_ref())
                    .collect();
                let values: Vec<f64> = ratios.iter().map(|r| r.estimate).collect();
                if values.is_empty() {
                    return None;
                }
                let ci = geometric_mean_ratio_ci(&values, level).ok();
                let estimate = ci.map(|c| c.estimate).unwrap_or(values[0]);
                let logs = paired_log_ratios(&benchmarks, e, baseline);
                let paired = logs.as_deref().and_then(|l| paired_geomean(l, level));
                let robust = logs
                    .as_deref()
                    .and_then(|l| robust_paired_geomean(l, level));
                let significant_where = |faster: bool| {
                    ratios
                        .iter()
                        .filter(|r| r.significant == Some(true) && (r.estimate < 1.0) == faster)
                        .count()
                };
                Some(GeomeanRow {
                    executor: e,
                    benchmarks: values.len(),
                    estimate,
                    ci,
                    paired,
                    robust,
                    faster: significant_where(true),
                    slower: significant_where(false),
                })
            })
            .collect();
        let failures = results
            .invocations
            .iter()
            .filter(|i| i.outcome == Outcome::Failed)
            .map(|i| Failure {
                benchmark: i.benchmark.clone(),
                executor: i.executor.clone(),
                invocation: i.invocation,
                reason: i.failure.clone().unwrap_or_default(),
                output_tail: i.output_tail.clone(),
            })
            .collect();
        let max_iterations = results
            .suite
            .benchmarks
            .iter()
            .map(|b| b.iterations as usize)
            .max()
            .unwrap_or(0);
        Ok(Report {
            settings: AnalysisSettings {
                baseline: Some(executors[baseline].clone()),
                ..settings.clone()
            },
            executors,
            baseline,
            benchmarks,
            geomeans,
            failures,
            max_iterations,
        })
    }

    /// Whether any comparison used Tukey HSD (three or more executors).
    pub fn test_name(&self) -> &'static str {
        if self.executors.len() >= 3 {
            "Tukey HSD after one-way ANOVA"
        } else {
            "Welch's t-test"
        }
    }
}

/// Compares every executor's cell of one benchmark with the baseline's: the ratio of means,
/// its Fieller interval and the test (Welch for two executors with samples, Tukey HSD for
/// three or more). Answers the one-way ANOVA p-value when three or more executors have two
/// samples. Any earlier comparison in `cells` is replaced, so the outlier check can run it
/// again on cells without their outliers.
pub(crate) fn compare(cells: &mut [Cell], baseline: usize, level: f64) -> Option<f64> {
    let groups: Vec<usize> = (0..cells.len())
        .filter(|&i| cells[i].samples.len() >= 2)
        .collect();
    let group_samples: Vec<&[f64]> = groups
        .iter()
        .map(|&i| cells[i].samples.as_slice())
        .collect();
    let (tukey, anova_p) = if groups.len() >= 3 {
        (
            tukey_hsd(&group_samples, level).ok(),
            one_way_anova(&group_samples).ok().map(|a| a.p_value),
        )
    } else {
        (None, None)
    };
    let base_samples = cells[baseline].samples.clone();
    let base_mean = cells[baseline].mean;
    for (i, c) in cells.iter_mut().enumerate() {
        c.ratio = None;
        if i == baseline {
            continue;
        }
        let (Some(m), Some(bm)) = (c.mean, base_mean) else {
            continue;
        };
        let mut r = RatioCell {
            estimate: m / bm,
            ci: None,
            unbounded: false,
            p_value: None,
            significant: None,
            test: None,
        };
        if c.samples.len() >= 2 && base_samples.len() >= 2 {
            match ratio_ci(&c.samples, &base_samples, level) {
                Ok(ci) => r.ci = Some(ci),
                Err(StatsError::Unbounded) => r.unbounded = true,
                Err(_) => {}
            }
            if let Some(t) = &tukey {
                let (gi, gb) = (
                    groups.iter().position(|&g| g == i),
                    groups.iter().position(|&g| g == baseline),
                );
                if let (Some(gi), Some(gb)) = (gi, gb) {
                    if let Some(p) = t.pair(gi, gb) {
                        r.p_value = Some(p.p_value);
                        r.significant = Some(p.is_significant());
                        r.test = Some("Tukey HSD");
                    }
                }
            } else if let Ok(w) = welch_t_test(&c.samples, &base_samples, level) {
                r.p_value = Some(w.p_value);
                r.significant = Some(w.is_significant());
                r.test = Some("Welch");
            }
        }
        c.ratio = Some(r);
    }
    anova_p
}

fn cell(results: &Results, bench: &str, executor: &str, s: &AnalysisSettings) -> Cell {
    let runs: Vec<_> = results
        .invocations
        .iter()
        .filter(|i| {
            i.benchmark == bench && i.executor == executor && i.outcome != Outcome::Interrupted
        })
        .collect();
    let ok: Vec<_> = runs.iter().filter(|i| i.outcome == Outcome::Ok).collect();
    let mut by_round = Vec::new();
    let mut startups = Vec::new();
    let mut steady = SteadyCell {
        of: ok.len(),
        ..Default::default()
    };
    let mut steady_means = Vec::new();
    for inv in &ok {
        let iters = &inv.iterations_us;
        let analysed = analyse_invocation(iters, s.steady_window.max(2), s.steady_cov).ok();
        if let Some(a) = analysed {
            startups.push(a.startup);
            if let Some(st) = a.steady_state {
                steady.reached += 1;
                steady_means.push(st.mean);
                steady.start_range = Some(match steady.start_range {
                    None => (st.start, st.start),
                    Some((lo, hi)) => (lo.min(st.start), hi.max(st.start)),
                });
            }
        }
        let value = match s.metric {
            Metric::Mean => {
                let kept = iters.get(s.warmup as usize..).unwrap_or(&[]);
                (!kept.is_empty()).then(|| kept.iter().sum::<f64>() / kept.len() as f64)
            }
            Metric::Min => iters
                .get(s.warmup as usize..)
                .unwrap_or(&[])
                .iter()
                .copied()
                .reduce(f64::min),
            Metric::Startup => iters.first().copied(),
            Metric::Steady => analysed.and_then(|a| a.steady_state).map(|st| st.mean),
            Metric::Wall => Some(inv.wall_s * 1e6),
            Metric::Cpu => Some((inv.user_s + inv.sys_s) * 1e6),
        };
        if let Some(v) = value.filter(|v| v.is_finite() && *v > 0.0) {
            by_round.push((inv.invocation, v));
        }
    }
    steady.mean = mean_of(&steady_means);
    steady.too_short = !ok.is_empty()
        && ok
            .iter()
            .all(|i| i.iterations_us.len() < s.steady_window.max(2));
    let cpu: Vec<f64> = ok.iter().map(|i| i.user_s + i.sys_s).collect();
    let wall: Vec<f64> = ok.iter().map(|i| i.wall_s).collect();
    let mut compile_us: std::collections::BTreeMap<String, f64> = Default::default();
    for i in &ok {
        for (tier, us) in &i.compile_us {
            *compile_us.entry(tier.clone()).or_insert(0.0) += us / ok.len() as f64;
        }
    }
    let mut cell = Cell {
        attempted: runs.len(),
        ok: ok.len(),
        samples: Vec::new(),
        by_round: Vec::new(),
        summary: None,
        mean: None,
        median: None,
        min: None,
        max: None,
        outliers: Vec::new(),
        without_outliers: None,
        startup: mean_of(&startups),
        steady,
        cpu_s: mean_of(&cpu),
        wall_s: mean_of(&wall),
        max_rss_kib: ok.iter().map(|i| i.max_rss_kib).max(),
        compile_us,
        ratio: None,
    };
    cell.set_samples(by_round, s.level);
    cell
}

impl Cell {
    /// Sets the per-invocation values and everything computed from them alone (summary,
    /// mean, median, extremes); one place, so that a cell without its outliers is summarised
    /// exactly as the cell was.
    pub(crate) fn set_samples(&mut self, by_round: Vec<(u32, f64)>, level: f64) {
        let samples: Vec<f64> = by_round.iter().map(|&(_, v)| v).collect();
        self.summary = Summary::with_level(&samples, level).ok();
        self.mean = mean_of(&samples);
        self.median = median(&samples).ok();
        self.min = samples.iter().copied().reduce(f64::min);
        self.max = samples.iter().copied().reduce(f64::max);
        self.samples = samples;
        self.by_round = by_round;
    }
}

/// The log ratios executor / baseline of every benchmark with a ratio, round by round: one
/// row per benchmark, one column per round. Benchmarks without a ratio are left out; a round
/// counts only if every remaining benchmark has a value for both executors in it, so each
/// round's geomean is over the same benchmarks.
fn paired_log_ratios(
    benchmarks: &[BenchmarkReport],
    executor: usize,
    baseline: usize,
) -> Option<Vec<Vec<f64>>> {
    let compared: Vec<&BenchmarkReport> = benchmarks
        .iter()
        .filter(|b| b.cells[executor].ratio.is_some())
        .collect();
    if compared.is_empty() {
        return None;
    }
    let value_in = |cell: &Cell, round: u32| {
        cell.by_round
            .iter()
            .find(|(r, _)| *r == round)
            .map(|&(_, v)| v)
    };
    let mut rounds: Vec<u32> = compared[0].cells[executor]
        .by_round
        .iter()
        .map(|&(r, _)| r)
        .collect();
    rounds.sort_unstable();
    rounds.dedup();
    let complete: Vec<Vec<f64>> = rounds
        .into_iter()
        .filter_map(|round| {
            compared
                .iter()
                .map(|b| {
                    let x = value_in(&b.cells[executor], round)?;
                    let y = value_in(&b.cells[baseline], round)?;
                    Some((x / y).ln())
                })
                .collect()
        })
        .collect();
    // Transposed: per benchmark, its log ratios over the complete rounds.
    Some(
        (0..compared.len())
            .map(|b| complete.iter().map(|round| round[b]).collect())
            .collect(),
    )
}

/// See [`PairedGeomean`]: the t-interval over rounds of the per-round geomeans.
fn paired_geomean(logs: &[Vec<f64>], level: f64) -> Option<PairedGeomean> {
    let rounds = logs.first()?.len();
    let round_ratios: Vec<f64> = (0..rounds)
        .map(|r| (logs.iter().map(|b| b[r]).sum::<f64>() / logs.len() as f64).exp())
        .collect();
    let ci = geometric_mean_ratio_ci(&round_ratios, level).ok()?;
    Some(PairedGeomean { rounds, ci })
}

/// See [`PairedGeomean`], `robust`: the geometric mean over benchmarks of each benchmark's
/// Hodges–Lehmann ratio over rounds, with a percentile-bootstrap interval that resamples
/// whole rounds (so the benchmarks of one round stay together).
fn robust_paired_geomean(logs: &[Vec<f64>], level: f64) -> Option<PairedGeomean> {
    let rounds = logs.first()?.len();
    let mut scratch = Vec::with_capacity(rounds);
    let statistic = |picked: &[usize]| {
        let mut sum = 0.0;
        for b in logs {
            scratch.clear();
            scratch.extend(picked.iter().map(|&r| b[r]));
            match hodges_lehmann(&scratch) {
                Ok(v) => sum += v,
                Err(_) => return f64::NAN,
            }
        }
        sum / logs.len() as f64
    };
    let log_ci = bootstrap_ci(rounds, level, Bootstrap::default(), statistic).ok()?;
    Some(PairedGeomean {
        rounds,
        ci: ConfidenceInterval {
            estimate: log_ci.estimate.exp(),
            lower: log_ci.lower.exp(),
            upper: log_ci.upper.exp(),
            level,
        },
    })
}

fn mean_of(xs: &[f64]) -> Option<f64> {
    (!xs.is_empty()).then(|| xs.iter().sum::<f64>() / xs.len() as f64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::{record, results};

    /// Compile times logged by an executor are averaged per cell and shown in the table,
    /// with their share of the CPU time (0.75 s per invocation here); executors that log
    /// none show a dash.
    #[test]
    fn logged_compile_times_reach_the_table() {
        let mut inv = Vec::new();
        for k in 1..=3 {
            for b in ["A", "B"] {
                inv.push(record(b, "base", k, &[100.0; 6], Outcome::Ok));
                let mut r = record(b, "new", k, &[50.0; 6], Outcome::Ok);
                r.compile_us.insert("opt".into(), 1000.0 * k as f64);
                r.compile_us.insert("baseline".into(), 500.0);
                inv.push(r);
            }
        }
        let results = results(inv);
        let report = Report::new(&results, &AnalysisSettings::default()).unwrap();
        let cell = &report.benchmarks[0].cells[1];
        assert_eq!(cell.compile_us["opt"], 2000.0);
        assert_eq!(cell.compile_us["baseline"], 500.0);
        assert!(report.benchmarks[0].cells[0].compile_us.is_empty());
        let table = crate::table::render(&results, &report);
        assert!(table.contains("compile ms (share of CPU)"), "{table}");
        assert!(table.contains("2.500 (0.3%)"), "{table}");
        assert!(
            table.contains("new: 5.000 ms (baseline 1.000, opt 4.000); 0.3% of its CPU time"),
            "{table}"
        );
    }

    #[test]
    fn paired_geomean_cancels_what_a_round_shares() {
        // Each round runs 10 % or 40 % slower for both executors alike (a noisy machine);
        // "new" is exactly 2 % slower than "base" on A and 2 % faster on B in every round.
        let mut inv = Vec::new();
        for (k, machine) in [1.0, 1.4, 1.1, 1.0, 1.4].into_iter().enumerate() {
            let k = k as u32 + 1;
            inv.push(record("A", "base", k, &[100.0 * machine; 6], Outcome::Ok));
            inv.push(record("A", "new", k, &[102.0 * machine; 6], Outcome::Ok));
            inv.push(record("B", "base", k, &[50.0 * machine; 6], Outcome::Ok));
            inv.push(record("B", "new", k, &[49.0 * machine; 6], Outcome::Ok));
        }
        // A round missing one side on one benchmark does not count.
        inv.push(record("A", "base", 6, &[100.0; 6], Outcome::Ok));
        inv.push(record("A", "new", 6, &[102.0; 6], Outcome::Ok));
        inv.push(record("B", "base", 6, &[50.0; 6], Outcome::Ok));
        inv.push(record("B", "new", 6, &[1.0; 6], Outcome::Failed));
        let report = Report::new(&results(inv), &AnalysisSettings::default()).unwrap();
        let g = &report.geomeans[0];
        let paired = g.paired.expect("five complete rounds");
        assert_eq!(paired.rounds, 5);
        let exact = (1.02f64 * 0.98).sqrt();
        assert!((paired.ci.estimate - exact).abs() < 1e-12);
        assert!((paired.ci.upper - paired.ci.lower).abs() < 1e-12);
        let robust = g.robust.expect("five complete rounds");
        assert_eq!(robust.rounds, 5);
        assert!((robust.ci.estimate - exact).abs() < 1e-12);
        assert!((robust.ci.upper - robust.ci.lower).abs() < 1e-12);
        // Unpaired, the per-benchmark ratios carry the machine's noise.
        let a = report.benchmarks[0].cells[1].ratio.as_ref().unwrap();
        let ci = a.ci.unwrap();
        assert!(ci.upper - ci.lower > 0.1);
    }

    #[test]
    fn the_robust_paired_geomean_is_not_moved_by_a_few_rounds_split_by_a_phase_change() {
        // 20 rounds in which "new" is 1 % slower, give or take 0.5 %; in three of them the
        // machine halved its speed between the two invocations, once against each side.
        let mut inv = Vec::new();
        for k in 1..=20u32 {
            let jitter = 1.0 + 0.005 * ((k * 7 % 5) as f64 - 2.0) / 2.0;
            let (base_phase, new_phase) = match k {
                4 | 11 => (1.0, 2.0),
                17 => (2.0, 1.0),
                _ => (1.0, 1.0),
            };
            inv.push(record(
                "A",
                "base",
                k,
                &[100.0 * base_phase; 3],
                Outcome::Ok,
            ));
            inv.push(record(
                "A",
                "new",
                k,
                &[101.0 * jitter * new_phase; 3],
                Outcome::Ok,
            ));
        }
        let report = Report::new(&results(inv), &AnalysisSettings::default()).unwrap();
        let g = &report.geomeans[0];
        let robust = g.robust.expect("20 rounds");
        let paired = g.paired.expect("20 rounds");
        assert!((robust.ci.estimate - 1.01).abs() < 0.003, "{robust:?}");
        assert!(
            robust.ci.lower > 1.0 && robust.ci.upper < 1.02,
            "{robust:?}"
        );
        // The t-interval takes the split rounds at face value.
        assert!(paired.ci.upper - paired.ci.lower > 0.1, "{paired:?}");
    }

    #[test]
    fn the_min_metric_takes_each_invocations_fastest_kept_iteration() {
        let mut inv = Vec::new();
        for k in 1..=3 {
            // A disturbed iteration (x3) and a slow first one in every invocation.
            inv.push(record(
                "A",
                "base",
                k,
                &[500.0, 100.0, 300.0, 100.0, 101.0, 100.0],
                Outcome::Ok,
            ));
            inv.push(record(
                "A",
                "new",
                k,
                &[90.0, 110.0, 330.0, 110.0, 111.0, 110.0],
                Outcome::Ok,
            ));
            inv.push(record("B", "base", k, &[50.0; 6], Outcome::Ok));
            inv.push(record("B", "new", k, &[55.0; 6], Outcome::Ok));
        }
        let r = results(inv);
        let min = |warmup| {
            let settings = AnalysisSettings {
                metric: Metric::Min,
                warmup,
                ..Default::default()
            };
            Report::new(&r, &settings).unwrap()
        };
        let all = min(0);
        assert_eq!(all.benchmarks[0].cells[0].samples, vec![100.0; 3]);
        assert_eq!(all.benchmarks[0].cells[1].samples, vec![90.0; 3]);
        let warm = min(1);
        assert_eq!(warm.benchmarks[0].cells[1].samples, vec![110.0; 3]);
        let g = warm.geomeans[0].paired.expect("three rounds");
        assert!((g.ci.estimate - 1.1).abs() < 1e-12);
    }

    #[test]
    fn paired_geomean_needs_two_rounds() {
        let inv = vec![
            record("A", "base", 1, &[100.0; 6], Outcome::Ok),
            record("A", "new", 1, &[102.0; 6], Outcome::Ok),
            record("B", "base", 1, &[50.0; 6], Outcome::Ok),
            record("B", "new", 1, &[49.0; 6], Outcome::Ok),
        ];
        let report = Report::new(&results(inv), &AnalysisSettings::default()).unwrap();
        assert!(report.geomeans[0].paired.is_none());
    }

    #[test]
    fn ratios_and_geomean_come_from_per_invocation_means() {
        let warm = |x: f64| [3.0 * x, x, x, x, x, x];
        let mut inv = Vec::new();
        for (i, (b, n)) in [(100.0, 50.0), (102.0, 51.0), (98.0, 49.5)]
            .into_iter()
            .enumerate()
        {
            let k = i as u32 + 1;
            inv.push(record("A", "base", k, &warm(b), Outcome::Ok));
            inv.push(record("A", "new", k, &warm(n), Outcome::Ok));
            inv.push(record("B", "base", k, &warm(b), Outcome::Ok));
            inv.push(record("B", "new", k, &warm(b * 2.0), Outcome::Ok));
        }
        // Neither a failed nor an interrupted invocation counts.
        inv.push(record("A", "new", 4, &[1.0; 6], Outcome::Failed));
        inv.push(record("A", "new", 5, &[1.0; 6], Outcome::Interrupted));
        let r = results(inv);
        let settings = AnalysisSettings {
            metric: Metric::Steady,
            ..Default::default()
        };
        let report = Report::new(&r, &settings).unwrap();
        let a_new = &report.benchmarks[0].cells[1];
        assert_eq!((a_new.ok, a_new.attempted, a_new.samples.len()), (3, 4, 3));
        assert_eq!(a_new.steady.reached, 3);
        assert_eq!(a_new.steady.start_range, Some((1, 1)));
        assert_eq!(a_new.startup, Some(150.5));
        let ratio = a_new.ratio.as_ref().unwrap();
        assert!((ratio.estimate - 150.5 / 300.0).abs() < 1e-12);
        assert_eq!((ratio.test, ratio.significant), (Some("Welch"), Some(true)));
        let ci = ratio.ci.unwrap();
        assert!(ci.lower < ratio.estimate && ratio.estimate < ci.upper);
        // Exactly 0.5017 and 2: the geometric mean is their root product.
        let g = &report.geomeans[0];
        assert!((g.estimate - (ratio.estimate * 2.0).sqrt()).abs() < 1e-9);
        assert_eq!((g.benchmarks, g.faster, g.slower), (2, 1, 1));
        assert_eq!(report.failures.len(), 1);

        // The mean metric keeps the warm-up; dropping it gives the steady figure.
        let mean = Report::new(&r, &AnalysisSettings::default()).unwrap();
        assert!((mean.benchmarks[0].cells[0].mean.unwrap() - 800.0 / 6.0).abs() < 1e-9);
        let dropped = AnalysisSettings {
            warmup: 1,
            ..Default::default()
        };
        assert_eq!(
            Report::new(&r, &dropped).unwrap().benchmarks[0].cells[0].mean,
            Some(100.0)
        );
        let base_b = AnalysisSettings {
            baseline: Some("new".into()),
            ..Default::default()
        };
        assert_eq!(Report::new(&r, &base_b).unwrap().baseline, 1);
        assert!(Report::new(
            &r,
            &AnalysisSettings {
                baseline: Some("x".into()),
                ..Default::default()
            }
        )
        .is_err());
    }
}
