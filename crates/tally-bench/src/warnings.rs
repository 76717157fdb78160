//! Warnings where a report's numbers mislead, each naming the benchmark × executor, what is
//! wrong and what to do about it (hyperfine's habit, for a suite).
//!
//! Every check reads the results file and the analysis only, so `tally bench report` warns
//! exactly as the run did. The checks and their thresholds:
//!
//! - **busy machine**: the 1-minute load average, less the run's own share of it, plus the
//!   CPUs the run kept busy, exceeds the CPUs online: other work competed with it;
//! - **clock resolution**: the harness's times come in steps (1 µs for the Are We Fast Yet
//!   format, coarser if every time is a multiple of 10 µs, 1 ms, …) and one step is more than
//!   1 % of the median iteration the metric uses;
//! - **one invocation**, **wide interval**: no interval at all, or one wider than ±5 % of
//!   the mean;
//! - **CPU share**: the child ran on a CPU for less than 90 % of its wall time (it waited for
//!   a CPU or for I/O) while the metric counts wall-clock time;
//! - **warm-up included**: the mean metric includes the first iterations of each invocation
//!   and they differ from the rest;
//! - **outliers**: invocations flagged by [`crate::outliers`], and whether a comparison's
//!   verdict changes without them.

use tally_stats::{mean_ci, median, t_quantile};

use crate::analysis::{AnalysisSettings, Cell, Metric, Report};
use crate::executor::{Executor, ExecutorKind};
use crate::results::{InvocationRecord, Outcome, Results};
use crate::table::{format_level as percent, ms};

/// Largest share of an iteration one step of the clock may be.
pub(crate) const MAX_RESOLUTION_SHARE: f64 = 0.01;
/// Widest acceptable confidence half-width, as a share of the mean.
pub(crate) const MAX_HALF_WIDTH: f64 = 0.05;
/// Smallest CPU time over wall time of a child that did not wait.
pub(crate) const MIN_CPU_SHARE: f64 = 0.9;
/// Smallest shift of the metric by the first iterations worth a warning.
pub(crate) const MIN_WARMUP_SHIFT: f64 = 0.01;
/// Iterations an invocation needs for its first ones to be compared with the rest.
const MIN_WARMUP_ITERATIONS: usize = 3;
/// Times below which a clock coarser than 1 µs is not inferred: with few values, all being
/// multiples of 10 may be chance.
const MIN_TIMES_FOR_COARSE_CLOCK: usize = 5;
/// The step the clock's resolution is aimed at when advising a longer iteration: 0.1 %.
const ADVISED_RESOLUTION_SHARE: f64 = 0.001;
/// Processes shorter than this are not judged by their CPU share: the runner's polling
/// ([`crate::measure::POLL`]) and process start-up weigh too much in their wall time.
const MIN_WALL_FOR_SHARE_S: f64 = 0.05;

/// What is wrong; also the order of a cell's warnings.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Kind {
    /// The machine had other work than the run.
    BusyMachine,
    /// Iterations too short for the clock's resolution.
    Resolution,
    /// One invocation: no interval, no test.
    OneInvocation,
    /// The confidence interval is wider than ±5 % of the mean.
    WideInterval,
    /// The child waited for much of its wall time.
    CpuShare,
    /// The first iterations differ from the rest and the metric includes them.
    Warmup,
    /// Outlying invocations.
    Outliers,
}

impl Kind {
    /// A short name, for the CSV file.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Kind::BusyMachine => "busy-machine",
            Kind::Resolution => "clock-resolution",
            Kind::OneInvocation => "one-invocation",
            Kind::WideInterval => "wide-interval",
            Kind::CpuShare => "cpu-share",
            Kind::Warmup => "warm-up-included",
            Kind::Outliers => "outliers",
        }
    }
}

/// One warning.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Warning {
    /// What is wrong.
    pub(crate) kind: Kind,
    /// The benchmark, or none for the machine as a whole.
    pub(crate) benchmark: Option<String>,
    /// The executor, or none for the machine as a whole.
    pub(crate) executor: Option<String>,
    /// What the numbers show, without a final full stop.
    pub(crate) finding: String,
    /// What to do about it, a sentence.
    pub(crate) advice: String,
}

impl Warning {
    /// "Fibonacci × tally", or "the machine".
    pub(crate) fn subject(&self) -> String {
        match (&self.benchmark, &self.executor) {
            (Some(b), Some(e)) => format!("{b} × {e}"),
            _ => "the machine".into(),
        }
    }

    /// The warning as one line of text.
    pub(crate) fn line(&self) -> String {
        format!("{}: {}. {}", self.subject(), self.finding, self.advice)
    }
}

/// Every warning about `results` as `report` analysed them: the machine's first, then each
/// benchmark × executor's in the table's order.
pub(crate) fn collect(results: &Results, report: &Report) -> Vec<Warning> {
    let cells = subjects(results, report);
    let mut out: Vec<Warning> = busy_machine(results, &cells).into_iter().collect();
    let s = &report.settings;
    for c in &cells {
        let checks = [
            resolution(c, s),
            interval(c, s),
            cpu_share(results, c, s),
            warmup(c, s),
            outliers(c, report),
        ];
        out.extend(checks.into_iter().flatten());
    }
    out
}

/// One benchmark × executor with what the checks read about it.
struct Subject<'a> {
    benchmark: &'a str,
    executor: &'a Executor,
    cell: &'a Cell,
    /// Its successful invocations.
    runs: Vec<&'a InvocationRecord>,
    /// The step of the executor's clock, microseconds.
    resolution_us: f64,
    /// The benchmark's inner count.
    inner: u64,
}

impl Subject<'_> {
    fn warning(&self, kind: Kind, finding: String, advice: String) -> Warning {
        Warning {
            kind,
            benchmark: Some(self.benchmark.to_string()),
            executor: Some(self.executor.name.clone()),
            finding,
            advice,
        }
    }
}

/// The successful invocations of `executor`.
fn ok_runs<'a>(
    results: &'a Results,
    executor: &'a str,
) -> impl Iterator<Item = &'a InvocationRecord> {
    results
        .invocations
        .iter()
        .filter(move |i| i.executor == executor && i.outcome == Outcome::Ok)
}

fn subjects<'a>(results: &'a Results, report: &'a Report) -> Vec<Subject<'a>> {
    let ok = |e: &'a str| ok_runs(results, e);
    let resolutions: Vec<f64> = results
        .executors
        .iter()
        .map(|e| {
            let times: Vec<f64> = ok(&e.name)
                .flat_map(|i| i.iterations_us.iter().copied())
                .collect();
            resolution_us(&times)
        })
        .collect();
    let mut out = Vec::new();
    for b in &report.benchmarks {
        let inner = results
            .suite
            .benchmarks
            .iter()
            .find(|x| x.name == b.name)
            .map_or(1, |x| x.inner);
        for (e, cell) in b.cells.iter().enumerate() {
            let executor = &results.executors[e];
            out.push(Subject {
                benchmark: &b.name,
                executor,
                cell,
                runs: ok(&executor.name)
                    .filter(|i| i.benchmark == b.name)
                    .collect(),
                resolution_us: resolutions[e],
                inner,
            });
        }
    }
    out
}

/// Powers of ten from 1 s down to 1 ns, in microseconds: the steps a clock may have.
const STEPS_US: [f64; 10] = [1e6, 1e5, 1e4, 1e3, 100.0, 10.0, 1.0, 0.1, 0.01, 0.001];

/// The step of the clock behind `times` (microseconds): the coarsest power of ten of which
/// every non-zero time is a whole multiple, but no coarser than 1 µs (the Are We Fast Yet
/// harness's unit) unless there are enough times for that not to be chance. A VM whose
/// clock counts milliseconds shows as 1000 µs; one that prints fractions, finer than 1 µs.
pub(crate) fn resolution_us(times: &[f64]) -> f64 {
    let nonzero: Vec<f64> = times.iter().copied().filter(|t| *t > 0.0).collect();
    let coarsest = STEPS_US
        .into_iter()
        .find(|&q| nonzero.iter().all(|&t| whole_multiple(t, q)))
        .unwrap_or(STEPS_US[STEPS_US.len() - 1]);
    if nonzero.len() < MIN_TIMES_FOR_COARSE_CLOCK {
        coarsest.min(1.0)
    } else {
        coarsest
    }
}

fn whole_multiple(t: f64, step: f64) -> bool {
    let k = t / step;
    (k - k.round()).abs() <= 1e-6 * k.abs().max(1.0)
}

/// The iteration times of one invocation that the metric is computed from; none for the
/// metrics timed from outside (wall, CPU), whose clocks are far finer than a process lasts.
fn metric_iterations<'a>(run: &'a InvocationRecord, s: &AnalysisSettings) -> &'a [f64] {
    let iters = run.iterations_us.as_slice();
    match s.metric {
        Metric::Mean | Metric::Min => iters.get(s.warmup as usize..).unwrap_or(&[]),
        Metric::Startup => &iters[..iters.len().min(1)],
        Metric::Steady => iters,
        Metric::Wall | Metric::Cpu => &[],
    }
}

/// Iterations so short that one step of the clock is more than 1 % of them: the times are
/// then mostly rounding.
fn resolution(c: &Subject, s: &AnalysisSettings) -> Option<Warning> {
    let times: Vec<f64> = c
        .runs
        .iter()
        .flat_map(|r| metric_iterations(r, s).iter().copied())
        .collect();
    let typical = median(&times).ok()?;
    let step = c.resolution_us;
    if typical > 0.0 && step <= MAX_RESOLUTION_SHARE * typical {
        return None;
    }
    let target = step / ADVISED_RESOLUTION_SHARE;
    // An iteration of 0 is below one step: take it as half a step.
    let factor = target / typical.max(step / 2.0);
    let suggested = (c.inner as f64 * factor).ceil() as u64;
    let finding = if typical > 0.0 {
        format!(
            "its iterations take {} (median) and the harness's clock counts in steps of {}: \
             one step is {:.1}% of an iteration, so the times are largely rounding",
            human_us(typical),
            human_us(step),
            100.0 * step / typical
        )
    } else {
        format!(
            "its iterations take 0 µs (median): shorter than one step of the harness's clock ({})",
            human_us(step)
        )
    };
    let advice = format!(
        "Give each iteration more work, {} or more, with a larger inner count: e.g. `--inner {}={suggested}`.",
        human_us(target),
        c.benchmark
    );
    Some(c.warning(Kind::Resolution, finding, advice))
}

/// No interval (one invocation) or one wider than ±5 % of the mean.
fn interval(c: &Subject, s: &AnalysisSettings) -> Option<Warning> {
    if c.cell.samples.len() == 1 {
        return Some(c.warning(
            Kind::OneInvocation,
            "one invocation: no confidence interval, and no test against other executors".into(),
            "Run two or more invocations (-n); ten or more is usual.".into(),
        ));
    }
    let summary = c.cell.summary?;
    let half = (summary.ci.upper - summary.mean).max(summary.mean - summary.ci.lower);
    let relative = half / summary.mean;
    if relative.is_nan() || relative <= MAX_HALF_WIDTH {
        return None;
    }
    let spread = summary.std_dev / summary.mean;
    let needed = match invocations_for(spread, s.level, MAX_HALF_WIDTH) {
        Some(n) => format!("about {n} invocations (-n {n})"),
        None => "more invocations than is practical".into(),
    };
    let finding = format!(
        "its {} confidence interval is ±{:.1}% of the mean, over {} invocations whose values vary by {:.1}% (standard deviation)",
        percent(s.level),
        100.0 * relative,
        summary.n,
        100.0 * spread
    );
    let advice = format!(
        "For ±{:.0}% run {needed}, if they keep varying as much; or find what makes them vary.",
        100.0 * MAX_HALF_WIDTH
    );
    Some(c.warning(Kind::WideInterval, finding, advice))
}

/// The smallest number of invocations whose Student-t half-width at `level` is at most
/// `target` of the mean, for values whose standard deviation is `spread` of the mean; none
/// beyond a million.
pub(crate) fn invocations_for(spread: f64, level: f64, target: f64) -> Option<u64> {
    const MOST: f64 = 1e6;
    let quantile = 1.0 - (1.0 - level) / 2.0;
    // n = (t(n − 1) · spread / target)², solved by iterating from n = 2; t only falls as n
    // grows, so this settles within a few steps.
    let mut n = 2.0_f64;
    for _ in 0..50 {
        let t = t_quantile(quantile, (n - 1.0).max(1.0)).ok()?;
        let next = (t * spread / target).powi(2).ceil().max(2.0);
        if next > MOST {
            return None;
        }
        if next == n {
            break;
        }
        n = next;
    }
    Some(n as u64)
}

/// The child's CPU time over its wall time, over its invocations long enough to judge; the
/// runner's polling delay is taken off each wall time, so short processes are not
/// misjudged as waiting.
fn cpu_share_of(runs: &[&InvocationRecord]) -> Option<f64> {
    let poll = crate::measure::POLL.as_secs_f64();
    let judged: Vec<&&InvocationRecord> = runs
        .iter()
        .filter(|r| r.wall_s >= MIN_WALL_FOR_SHARE_S)
        .collect();
    let cpu: f64 = judged.iter().map(|r| r.user_s + r.sys_s).sum();
    let wall: f64 = judged.iter().map(|r| r.wall_s - poll).sum();
    (wall > 0.0).then(|| cpu / wall)
}

/// Whether the compared number counts time the child spent waiting: never in lockstep (the
/// harness counts CPU time, the wall time is the sum of the child's turns) or by the CPU
/// metric; always by the wall metric; by the iteration metrics unless the executor's harness
/// times CPU time (a Tally given `--cpu-clock`).
fn counts_waiting(results: &Results, executor: &Executor, metric: Metric) -> bool {
    if results.settings.lockstep.is_some() {
        return false;
    }
    let harness_times_cpu = matches!(&executor.kind,
        ExecutorKind::Tally { flags, .. } if flags.iter().any(|f| f == crate::lockstep::TALLY_FLAG));
    match metric {
        Metric::Cpu => false,
        Metric::Wall => true,
        _ => !harness_times_cpu,
    }
}

/// A child that ran on a CPU for well under its wall time, while the metric counts the
/// waiting.
fn cpu_share(results: &Results, c: &Subject, s: &AnalysisSettings) -> Option<Warning> {
    if !counts_waiting(results, c.executor, s.metric) {
        return None;
    }
    let share = cpu_share_of(&c.runs)?;
    if share >= MIN_CPU_SHARE {
        return None;
    }
    let finding = format!(
        "it ran on a CPU for only {:.0}% of its wall time: the rest it waited, for a CPU (a busy machine) or for I/O, and the metric counts the waiting",
        100.0 * share
    );
    let advice = "Rerun on an idle machine, or compare CPU time without re-running: \
                  `tally bench report results.json --metric cpu`."
        .to_string();
    Some(c.warning(Kind::CpuShare, finding, advice))
}

/// How each invocation's first iterations compare with the rest of those the metric keeps.
struct HeadVsRest {
    /// Iterations in the head.
    head: usize,
    /// The head's mean over the rest's.
    ratio: f64,
    /// The head's mean lies outside the rest's confidence interval.
    outside: bool,
    /// The invocation's value (the mean of all kept iterations) over the rest's mean.
    shift: f64,
}

/// The first fifth (at least one) of the iterations the mean metric keeps, against the
/// others; none with fewer than three kept.
fn head_vs_rest(kept: &[f64], level: f64) -> Option<HeadVsRest> {
    if kept.len() < MIN_WARMUP_ITERATIONS {
        return None;
    }
    let head = (kept.len() / 5).max(1);
    let (first, rest) = kept.split_at(head);
    let ci = mean_ci(rest, level).ok()?;
    if ci.estimate <= 0.0 {
        return None;
    }
    let head_mean = first.iter().sum::<f64>() / head as f64;
    let all_mean = kept.iter().sum::<f64>() / kept.len() as f64;
    Some(HeadVsRest {
        head,
        ratio: head_mean / ci.estimate,
        outside: !ci.contains(head_mean),
        shift: all_mean / ci.estimate - 1.0,
    })
}

/// The mean metric includes the first iterations, and in most invocations they lie outside
/// the interval of the rest, all on the same side, moving the metric by more than 1 %.
fn warmup(c: &Subject, s: &AnalysisSettings) -> Option<Warning> {
    if s.metric != Metric::Mean {
        return None;
    }
    let skip = s.warmup as usize;
    let found: Vec<HeadVsRest> = c
        .runs
        .iter()
        .filter_map(|r| head_vs_rest(r.iterations_us.get(skip..)?, s.level))
        .collect();
    let n = found.len();
    let slower = found.iter().filter(|h| h.outside && h.ratio > 1.0).count();
    let faster = found.iter().filter(|h| h.outside && h.ratio < 1.0).count();
    let (agreeing, is_slower) = if slower >= faster {
        (slower, true)
    } else {
        (faster, false)
    };
    if n == 0 || 2 * agreeing <= n {
        return None;
    }
    let shift = found.iter().map(|h| h.shift).sum::<f64>() / n as f64;
    if shift.abs() <= MIN_WARMUP_SHIFT || (shift > 0.0) != is_slower {
        return None;
    }
    let head = found[0].head;
    let ratio = found.iter().map(|h| h.ratio).sum::<f64>() / n as f64;
    let steady_start = c.cell.steady.start_range.map_or(0, |(_, hi)| hi);
    let drop = (skip + head).max(steady_start);
    let first = if head == 1 {
        "its first iteration".to_string()
    } else {
        format!("its first {head} iterations")
    };
    let differ = if is_slower {
        format!("{:.0}% longer", 100.0 * (ratio - 1.0))
    } else {
        format!("{:.0}% less time", 100.0 * (1.0 - ratio))
    };
    let finding = format!(
        "{first} {} {differ} than the rest, outside the rest's {} interval in {agreeing} of {n} invocations, and the mean metric includes {} ({:+.1}% on its value)",
        if head == 1 { "takes" } else { "take" },
        percent(s.level),
        if head == 1 { "it" } else { "them" },
        100.0 * shift
    );
    let advice = format!(
        "Leave the warm-up out without re-running: `tally bench report results.json --warmup {drop}`, or `--metric steady`."
    );
    Some(c.warning(Kind::Warmup, finding, advice))
}

/// Outlying invocations, and whether any comparison concludes otherwise without them.
fn outliers(c: &Subject, report: &Report) -> Option<Warning> {
    let effect = c.cell.without_outliers.as_ref()?;
    let list: Vec<String> = c
        .cell
        .outliers
        .iter()
        .map(|o| {
            format!(
                "#{} ({} ms, modified Z {:+.1})",
                o.invocation,
                ms(o.value),
                o.z
            )
        })
        .collect();
    let moved = match (c.cell.mean, effect.mean) {
        (Some(with), Some(without)) => format!(
            "; without them the mean is {} ms instead of {} ({:+.1}%)",
            ms(without),
            ms(with),
            100.0 * (without / with - 1.0)
        ),
        _ => String::new(),
    };
    let base = &report.executors[report.baseline];
    let changes: Vec<String> = effect
        .changes
        .iter()
        .map(|ch| {
            format!(
                "{} vs {base}: {} with them, {} without",
                report.executors[ch.executor],
                ch.with.describe(),
                ch.without.describe()
            )
        })
        .collect();
    let (verdicts, advice) = if effect.compared == 0 {
        (
            String::new(),
            "Look for what disturbed them (other work on the machine, the benchmark itself)."
                .to_string(),
        )
    } else if changes.is_empty() {
        (
            ", and no comparison's verdict changes".to_string(),
            "The conclusions do not rest on them.".to_string(),
        )
    } else {
        (
            format!(", and the verdict changes: {}", changes.join("; ")),
            "The conclusion rests on them: find what disturbed them and rerun with more invocations."
                .to_string(),
        )
    };
    let finding = format!(
        "invocation(s) {} are outliers (modified Z-score beyond ±{}){moved}{verdicts}",
        list.join(", "),
        crate::outliers::Z_LIMIT
    );
    Some(c.warning(Kind::Outliers, finding, advice))
}

/// The CPUs the run kept busy: one in lockstep (its VMs share one CPU), otherwise the largest
/// CPU share of any benchmark × executor, rounded, at least one.
fn cpus_needed(results: &Results, cells: &[Subject]) -> f64 {
    if results.settings.lockstep.is_some() {
        return 1.0;
    }
    cells
        .iter()
        .filter_map(|c| cpu_share_of(&c.runs))
        .fold(1.0, f64::max)
        .round()
}

/// Seconds from the run's start to its end, when both times read.
fn run_seconds(results: &Results) -> Option<f64> {
    let start = humantime::parse_rfc3339(&results.started).ok()?;
    let end = humantime::parse_rfc3339(&results.finished).ok()?;
    end.duration_since(start).ok().map(|d| d.as_secs_f64())
}

/// Other work on the machine: the load average beside the run's own needs exceeds the CPUs.
///
/// The reading at the end is preferred: it weighs the run's last minute most, where the
/// start's is the minute before the run. It includes the run itself, though, by
/// `needed · (1 − e^(−T/60))` after T seconds (the kernel's average decays with a one-minute
/// time constant), which is taken off.
fn busy_machine(results: &Results, cells: &[Subject]) -> Option<Warning> {
    let m = &results.machine;
    let cpus = m.online_cpus.unwrap_or(m.cpus) as f64;
    let needed = cpus_needed(results, cells);
    let others = match (m.load_average_end, m.load_average) {
        (Some(end), _) => {
            let own = run_seconds(results).map_or(1.0, |t| 1.0 - (-t / 60.0).exp());
            end - needed * own
        }
        (None, Some(start)) => start,
        (None, None) => return None,
    };
    if others + needed <= cpus {
        return None;
    }
    let readings = match (m.load_average, m.load_average_end) {
        (Some(start), Some(end)) => format!("{start:.2} at the start and {end:.2} at the end"),
        (None, Some(end)) => format!("{end:.2} at the end"),
        (Some(start), None) => format!("{start:.2} at the start"),
        (None, None) => unreachable!("checked above"),
    };
    let finding = format!(
        "other work wanted about {:.1} CPUs besides the {needed:.0} the run kept busy, of {cpus:.0} \
         (1-minute load average {readings})",
        others.max(0.0)
    );
    let advice = "Every time may include waiting for a CPU and the disturbance of other work: rerun on an idle machine, \
                  or compare CPU time (`--metric cpu`) or, for Tally executors, in `--lockstep`."
        .to_string();
    Some(Warning {
        kind: Kind::BusyMachine,
        benchmark: None,
        executor: None,
        finding,
        advice,
    })
}

/// A duration given in microseconds, in the unit that reads best.
fn human_us(us: f64) -> String {
    if us >= 1e6 {
        format!("{} s", trim(us / 1e6))
    } else if us >= 1e3 {
        format!("{} ms", trim(us / 1e3))
    } else if us >= 1.0 {
        format!("{} µs", trim(us))
    } else {
        format!("{} ns", trim(us * 1e3))
    }
}

/// Up to three significant digits, without trailing zeros.
fn trim(x: f64) -> String {
    let digits = if x >= 100.0 {
        0
    } else if x >= 10.0 {
        1
    } else {
        2
    };
    let s = format!("{x:.digits$}");
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::results::LockstepSettings;
    use crate::test_support::{record, results};

    /// An invocation whose process ran on a CPU for 99 % of its wall time.
    fn run(bench: &str, exec: &str, n: u32, times: &[f64]) -> InvocationRecord {
        let mut r = record(bench, exec, n, times, Outcome::Ok);
        r.user_s = 0.97;
        r.sys_s = 0.02;
        r
    }

    /// Three invocations of A and B on base and new, every iteration taking `us`.
    fn steady_runs(us: f64) -> Vec<InvocationRecord> {
        let mut inv = Vec::new();
        for n in 1..=3 {
            for b in ["A", "B"] {
                for e in ["base", "new"] {
                    inv.push(run(b, e, n, &[us + n as f64; 6]));
                }
            }
        }
        inv
    }

    fn warnings_with(results: &Results, settings: &AnalysisSettings) -> Vec<Warning> {
        let report = Report::new(results, settings).unwrap();
        collect(results, &report)
    }

    fn warnings(results: &Results) -> Vec<Warning> {
        warnings_with(results, &AnalysisSettings::default())
    }

    /// The (kind, subject) of each warning.
    fn found(ws: &[Warning]) -> Vec<(Kind, String)> {
        ws.iter().map(|w| (w.kind, w.subject())).collect()
    }

    /// Gives the invocations of `bench` on `exec`, in order, the iteration times `times`.
    fn replace(inv: &mut [InvocationRecord], bench: &str, exec: &str, times: &[&[f64]]) {
        let runs = inv
            .iter_mut()
            .filter(|r| r.benchmark == bench && r.executor == exec);
        for (r, t) in runs.zip(times) {
            r.iterations_us = t.to_vec();
        }
    }

    #[test]
    fn a_steady_run_on_an_idle_machine_has_no_warnings() {
        assert_eq!(found(&warnings(&results(steady_runs(5000.0)))), []);
    }

    #[test]
    fn the_clocks_step_is_read_from_the_times() {
        assert_eq!(resolution_us(&[1234.0, 20.0, 7.0, 0.0]), 1.0);
        // Every one of five or more times a whole number of milliseconds: a millisecond clock.
        assert_eq!(
            resolution_us(&[3000.0, 5000.0, 12000.0, 3000.0, 4000.0]),
            1000.0
        );
        assert_eq!(
            resolution_us(&[3000.0, 5000.0, 12000.0, 3000.0, 4001.0]),
            1.0
        );
        // Four are too few to tell a coarse clock from chance.
        assert_eq!(resolution_us(&[3000.0, 5000.0, 12000.0, 4000.0]), 1.0);
        // Fractions of a microsecond mean a finer clock.
        assert_eq!(resolution_us(&[12.5, 3.0]), 0.1);
        assert_eq!(resolution_us(&[0.0, 0.0]), 1.0);
        assert_eq!(resolution_us(&[]), 1.0);
    }

    #[test]
    fn iterations_within_a_hundred_clock_steps_are_warned_about() {
        let mut inv = steady_runs(5000.0);
        // A on base: 40 µs iterations, so one 1 µs step is 2.5 %; B on new: 0 µs.
        replace(&mut inv, "A", "base", &[&[40.0; 6], &[41.0; 6], &[39.0; 6]]);
        replace(&mut inv, "B", "new", &[&[0.0; 6], &[0.0; 6], &[1.0; 6]]);
        // A on new: 150 µs, a step is 0.7 %: fine.
        replace(
            &mut inv,
            "A",
            "new",
            &[&[150.0; 6], &[151.0; 6], &[149.0; 6]],
        );
        let r = results(inv);
        let ws: Vec<Warning> = warnings(&r)
            .into_iter()
            .filter(|w| w.kind == Kind::Resolution)
            .collect();
        assert_eq!(
            found(&ws),
            [
                (Kind::Resolution, "A × base".to_string()),
                (Kind::Resolution, "B × new".to_string())
            ]
        );
        assert!(
            ws[0].finding.contains("take 40 µs (median)")
                && ws[0].finding.contains("steps of 1 µs")
                && ws[0].finding.contains("2.5%"),
            "{}",
            ws[0].finding
        );
        // To 1 ms, a thousand steps: 25 times the inner count.
        assert!(ws[0].advice.contains("`--inner A=25`"), "{}", ws[0].advice);
        assert!(ws[1].finding.contains("take 0 µs"), "{}", ws[1].finding);
        // Timed from outside, the harness's clock does not matter.
        let wall = AnalysisSettings {
            metric: Metric::Wall,
            ..Default::default()
        };
        assert!(warnings_with(&r, &wall)
            .iter()
            .all(|w| w.kind != Kind::Resolution));
    }

    #[test]
    fn a_wide_interval_and_a_single_invocation_are_warned_about() {
        let mut inv = steady_runs(5000.0);
        // ±24.8 %: t(2) = 4.303 times 10 / √3.
        replace(
            &mut inv,
            "A",
            "new",
            &[&[5000.0; 6], &[5500.0; 6], &[4500.0; 6]],
        );
        inv.retain(|r| !(r.benchmark == "B" && r.executor == "base" && r.invocation > 1));
        let ws = warnings(&results(inv));
        assert_eq!(
            found(&ws),
            [
                (Kind::WideInterval, "A × new".to_string()),
                (Kind::OneInvocation, "B × base".to_string())
            ]
        );
        assert!(
            ws[0]
                .finding
                .contains("interval is ±24.8% of the mean, over 3 invocations"),
            "{}",
            ws[0].finding
        );
        let n = invocations_for(0.1, 0.95, MAX_HALF_WIDTH).unwrap();
        assert!(
            ws[0].advice.contains(&format!("-n {n}")),
            "{}",
            ws[0].advice
        );
        assert!(ws[1].advice.contains("two or more invocations"));
    }

    #[test]
    fn the_invocations_advised_are_the_fewest_that_reach_the_width() {
        let half = |n: u64| t_quantile(0.975, n as f64 - 1.0).unwrap() * 0.1 / (n as f64).sqrt();
        let n = invocations_for(0.1, 0.95, 0.05).unwrap();
        assert!(half(n) <= 0.05 && half(n - 1) > 0.05, "{n}");
        assert_eq!(invocations_for(0.001, 0.95, 0.05), Some(2));
        assert_eq!(invocations_for(1000.0, 0.95, 0.05), None);
    }

    #[test]
    fn a_child_that_waited_is_warned_about_where_the_metric_counts_waiting() {
        let mut inv = steady_runs(5000.0);
        for r in inv.iter_mut().filter(|r| r.benchmark == "B") {
            r.user_s = 0.5;
            // A process too short to judge does not count.
            if r.executor == "base" {
                r.wall_s = 0.02;
                r.user_s = 0.005;
            }
        }
        let mut r = results(inv);
        let ws = warnings(&r);
        assert_eq!(found(&ws), [(Kind::CpuShare, "B × new".to_string())]);
        assert!(ws[0].finding.contains("only 52%"), "{}", ws[0].finding);
        // CPU time does not count the waiting, nor does lockstep.
        let cpu = AnalysisSettings {
            metric: Metric::Cpu,
            ..Default::default()
        };
        assert_eq!(found(&warnings_with(&r, &cpu)), []);
        r.settings.lockstep = Some(LockstepSettings {
            cpu: 1,
            slice_ms: 50,
        });
        assert_eq!(found(&warnings(&r)), []);
        // A harness that times CPU time does not either, but the wall metric does.
        r.settings.lockstep = None;
        r.executors[1] =
            Executor::parse_tally("new=--cpu-clock", std::path::Path::new("/t")).unwrap();
        assert_eq!(found(&warnings(&r)), []);
        let wall = AnalysisSettings {
            metric: Metric::Wall,
            ..Default::default()
        };
        assert_eq!(
            found(&warnings_with(&r, &wall)),
            [(Kind::CpuShare, "B × new".to_string())]
        );
    }

    #[test]
    fn a_busy_machine_is_warned_about_from_the_load_average() {
        let mut r = results(steady_runs(5000.0));
        // Four CPUs, the run keeps one busy: 3.5 CPUs of other work is too much, 2.9 is not.
        r.machine.load_average_end = Some(4.5);
        let ws = warnings(&r);
        assert_eq!(found(&ws), [(Kind::BusyMachine, "the machine".to_string())]);
        assert!(
            ws[0].finding
                == "other work wanted about 3.5 CPUs besides the 1 the run kept busy, of 4 \
                    (1-minute load average 0.20 at the start and 4.50 at the end)",
            "{}",
            ws[0].finding
        );
        r.machine.load_average_end = Some(3.9);
        assert_eq!(found(&warnings(&r)), []);
        // After a run of six seconds the average has taken in only a tenth of the run's own
        // CPU: most of 4.8 is other work.
        r.finished = "2026-01-01T12:00:06Z".into();
        r.machine.load_average_end = Some(3.9);
        assert_eq!(
            found(&warnings(&r)),
            [(Kind::BusyMachine, "the machine".to_string())]
        );
        // A file without the end's reading is judged by the start's.
        r.machine.load_average_end = None;
        r.machine.load_average = Some(3.5);
        assert_eq!(
            found(&warnings(&r)),
            [(Kind::BusyMachine, "the machine".to_string())]
        );
        r.machine.load_average = Some(2.5);
        assert_eq!(found(&warnings(&r)), []);
    }

    #[test]
    fn a_vm_that_keeps_two_cpus_busy_needs_two() {
        let mut inv = steady_runs(5000.0);
        for r in &mut inv {
            r.user_s = 1.9;
        }
        let mut r = results(inv);
        r.machine.load_average_end = Some(3.9);
        assert_eq!(found(&warnings(&r)), []);
        r.machine.load_average_end = Some(4.6);
        let ws = warnings(&r);
        assert_eq!(found(&ws), [(Kind::BusyMachine, "the machine".to_string())]);
        assert!(
            ws[0].finding.contains("besides the 2 the run kept busy"),
            "{}",
            ws[0].finding
        );
    }

    #[test]
    fn warm_up_in_the_mean_is_warned_about() {
        let mut inv = steady_runs(5000.0);
        let warm: &[f64] = &[15000.0, 5000.0, 5010.0, 4990.0, 5000.0, 5005.0];
        replace(&mut inv, "A", "new", &[warm, warm, warm]);
        // In one invocation of three only: noise, not warm-up.
        let once: &[f64] = &[5300.0, 5000.0, 5010.0, 4990.0, 5000.0, 5005.0];
        replace(&mut inv, "B", "new", &[once, &[5000.0; 6], &[5001.0; 6]]);
        let r = results(inv);
        let ws = warnings(&r);
        assert_eq!(found(&ws), [(Kind::Warmup, "A × new".to_string())]);
        assert!(
            ws[0]
                .finding
                .contains("its first iteration takes 200% longer than the rest")
                && ws[0].finding.contains("in 3 of 3 invocations")
                && ws[0].finding.contains("+33.3% on its value"),
            "{}",
            ws[0].finding
        );
        assert!(ws[0].advice.contains("--warmup 1"), "{}", ws[0].advice);
        // Dropped, or not in the metric: nothing to warn about.
        for settings in [
            AnalysisSettings {
                warmup: 1,
                ..Default::default()
            },
            AnalysisSettings {
                metric: Metric::Steady,
                ..Default::default()
            },
        ] {
            assert_eq!(found(&warnings_with(&r, &settings)), []);
        }
    }

    #[test]
    fn outliers_are_listed_with_whether_a_verdict_changes() {
        let base = [100.0, 101.0, 99.0, 100.0, 102.0, 100.0];
        let new_a = [95.0, 96.0, 94.0, 95.0, 96.0, 300.0];
        let new_b = [80.0, 81.0, 79.0, 80.0, 82.0, 90.0];
        let mut inv = Vec::new();
        for k in 0..6 {
            let n = k as u32 + 1;
            // Long enough iterations for the clock, and six of them to keep the interval narrow.
            let scaled = |x: f64| [x * 100.0; 6];
            inv.push(run("A", "base", n, &scaled(base[k])));
            inv.push(run("A", "new", n, &scaled(new_a[k])));
            inv.push(run("B", "base", n, &scaled(base[k])));
            inv.push(run("B", "new", n, &scaled(new_b[k])));
        }
        let ws: Vec<Warning> = warnings(&results(inv))
            .into_iter()
            .filter(|w| w.kind == Kind::Outliers)
            .collect();
        assert_eq!(
            found(&ws),
            [
                (Kind::Outliers, "A × new".to_string()),
                (Kind::Outliers, "B × new".to_string())
            ]
        );
        assert!(
            ws[0].finding.contains("invocation(s) #6 (30.00 ms, modified Z +")
                && ws[0].finding.contains("the mean is 9.520 ms instead of 12.93")
                && ws[0].finding.contains(
                    "new vs base: not significantly different with them, significantly faster without"
                ),
            "{}",
            ws[0].finding
        );
        assert!(ws[0].advice.contains("rests on them"), "{}", ws[0].advice);
        assert!(
            ws[1].finding.contains("no comparison's verdict changes"),
            "{}",
            ws[1].finding
        );
        assert!(ws[1].advice.contains("do not rest on them"));
    }
}
