//! MonitorMethod's report: the counters read at phase boundaries, as per-interval metrics per
//! phase, with their variation within each phase (CoV) and an analysis of variance across
//! phases (Buytaert, thesis chapter 3: if phases are real, a metric varies little within a
//! phase and much between phases, so the phases explain most of its variance).
//!
//! An *interval* is one activation of a phase, the time the program spent in it while no
//! phase nested in it ran (a nested phase's time is its own). Between phases the program is
//! in the *rest*, itself a phase. Collections and compilations are phases too, counted on the
//! threads that do them.

use serde::Serialize;
use tally_stats::anova::one_way_anova;

use crate::counters::CountedEvent;

/// What a phase is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum PhaseKind {
    /// A selected method, from its entry to its exit.
    Method,
    /// The program outside every selected method.
    Rest,
    /// A garbage collection, counted on the collector's threads.
    Gc,
    /// A compilation, counted on the compiler thread.
    Compilation,
}

impl PhaseKind {
    pub fn name(self) -> &'static str {
        match self {
            PhaseKind::Method => "method",
            PhaseKind::Rest => "rest",
            PhaseKind::Gc => "GC",
            PhaseKind::Compilation => "compile",
        }
    }
}

/// One interval's counts.
#[derive(Clone, Debug, PartialEq)]
pub struct Interval {
    pub wall_ns: u64,
    /// One per counted event, in the order of [`PhaseData::events`].
    pub counts: Vec<u64>,
    /// Bytes the program allocated in it, where that is known (the mutator's phases).
    pub allocated_bytes: Option<u64>,
}

/// A phase's intervals.
#[derive(Clone, Debug, PartialEq)]
pub struct PhaseData {
    pub name: String,
    pub kind: PhaseKind,
    pub events: Vec<CountedEvent>,
    pub intervals: Vec<Interval>,
}

/// Rate metrics of intervals shorter than this are left out: a few microseconds hold too few
/// events (and too much of the reading's own cost) for a rate.
pub const MIN_RATE_INTERVAL_NS: u64 = 20_000;

/// A per-interval metric.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Metric {
    /// The interval's length, in milliseconds.
    Duration,
    /// CPU time over wall time (below 1 when the thread waited).
    CpuUse,
    /// Page faults per millisecond.
    FaultsPerMs,
    /// Context switches per millisecond.
    SwitchesPerMs,
    /// Megabytes allocated per second of the interval.
    AllocationRate,
    /// Instructions per cycle.
    Ipc,
    /// Cache misses per thousand instructions.
    CacheMissesPerKi,
    /// Branch misses per thousand instructions.
    BranchMissesPerKi,
}

impl Metric {
    pub const ALL: [Metric; 8] = [
        Metric::Duration,
        Metric::CpuUse,
        Metric::FaultsPerMs,
        Metric::SwitchesPerMs,
        Metric::AllocationRate,
        Metric::Ipc,
        Metric::CacheMissesPerKi,
        Metric::BranchMissesPerKi,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Metric::Duration => "ms",
            Metric::CpuUse => "CPU use",
            Metric::FaultsPerMs => "faults/ms",
            Metric::SwitchesPerMs => "switches/ms",
            Metric::AllocationRate => "alloc MB/s",
            Metric::Ipc => "IPC",
            Metric::CacheMissesPerKi => "cache miss/ki",
            Metric::BranchMissesPerKi => "branch miss/ki",
        }
    }

    /// The events it needs.
    fn needs(self) -> &'static [CountedEvent] {
        match self {
            Metric::Duration | Metric::AllocationRate => &[],
            Metric::CpuUse => &[CountedEvent::TaskClock],
            Metric::FaultsPerMs => &[CountedEvent::PageFaults],
            Metric::SwitchesPerMs => &[CountedEvent::ContextSwitches],
            Metric::Ipc => &[CountedEvent::Instructions, CountedEvent::Cycles],
            Metric::CacheMissesPerKi => &[CountedEvent::CacheMisses, CountedEvent::Instructions],
            Metric::BranchMissesPerKi => &[CountedEvent::BranchMisses, CountedEvent::Instructions],
        }
    }

    /// Its value for `iv`, when its events were counted and the interval is long enough.
    pub fn value(self, iv: &Interval, events: &[CountedEvent]) -> Option<f64> {
        let count = |e: CountedEvent| {
            let i = events.iter().position(|&x| x == e)?;
            iv.counts.get(i).map(|&c| c as f64)
        };
        let needed: Option<Vec<f64>> = self.needs().iter().map(|&e| count(e)).collect();
        let n = needed?;
        if self == Metric::Duration {
            return Some(iv.wall_ns as f64 / 1e6);
        }
        if iv.wall_ns < MIN_RATE_INTERVAL_NS {
            return None;
        }
        let ms = iv.wall_ns as f64 / 1e6;
        let v = match self {
            Metric::Duration => unreachable!("answered above"),
            Metric::CpuUse => n[0] / iv.wall_ns as f64,
            Metric::FaultsPerMs | Metric::SwitchesPerMs => n[0] / ms,
            Metric::AllocationRate => iv.allocated_bytes? as f64 / 1e6 / (ms / 1e3),
            Metric::Ipc | Metric::CacheMissesPerKi | Metric::BranchMissesPerKi => {
                if n[1] == 0.0 {
                    return None;
                }
                let ratio = n[0] / n[1];
                if self == Metric::Ipc {
                    ratio
                } else {
                    ratio * 1e3
                }
            }
        };
        v.is_finite().then_some(v)
    }
}

/// A metric's mean and variation within one phase.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct MetricSummary {
    pub metric: Metric,
    /// Intervals it has a value for.
    pub n: usize,
    pub mean: f64,
    /// Standard deviation over mean; `None` for fewer than two values or a zero mean.
    pub cov: Option<f64>,
}

/// One phase in the report.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct PhaseSummary {
    pub name: String,
    pub kind: PhaseKind,
    pub intervals: usize,
    pub total_ms: f64,
    /// Its time over the run's (collections and compilations run beside the program).
    pub share: f64,
    pub metrics: Vec<MetricSummary>,
}

/// A metric's analysis of variance across phases (each interval one observation).
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct MetricAnova {
    pub metric: Metric,
    /// Phases with at least two values.
    pub groups: usize,
    pub observations: usize,
    pub f: f64,
    pub p_value: f64,
    /// η²: the share of the metric's variance between phases.
    pub eta_squared: f64,
    /// The CoV of all the values together, against which the phases' own CoVs compare.
    pub pooled_cov: Option<f64>,
    /// The within-phase CoVs' mean, weighted by the phases' values.
    pub mean_within_cov: Option<f64>,
}

/// The report of a counting run.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct PhaseReport {
    pub events: Vec<&'static str>,
    pub run_ns: u64,
    /// Counter readings, what one cost (measured in this run), and what they are estimated to
    /// have cost the run.
    pub readings: u64,
    pub reading_ns: f64,
    pub estimated_overhead: f64,
    /// What the selection estimated before the run, from the first run.
    pub selection_estimated_overhead: Option<f64>,
    pub phases: Vec<PhaseSummary>,
    pub anova: Vec<MetricAnova>,
}

/// Everything a report is made of.
pub struct ReportInput<'a> {
    pub phases: &'a [PhaseData],
    pub run_ns: u64,
    pub readings: u64,
    pub reading_ns: f64,
    pub selection_estimated_overhead: Option<f64>,
}

impl PhaseReport {
    pub fn new(input: &ReportInput) -> PhaseReport {
        let run = input.run_ns.max(1) as f64;
        let events: Vec<CountedEvent> = input
            .phases
            .first()
            .map(|p| p.events.clone())
            .unwrap_or_default();
        let metrics: Vec<Metric> = Metric::ALL
            .into_iter()
            .filter(|m| m.needs().iter().all(|e| events.contains(e)))
            .collect();
        let values = |p: &PhaseData, m: Metric| -> Vec<f64> {
            p.intervals
                .iter()
                .filter_map(|iv| m.value(iv, &p.events))
                .collect()
        };
        let phases: Vec<PhaseSummary> = input
            .phases
            .iter()
            .filter(|p| !p.intervals.is_empty())
            .map(|p| {
                let total: u64 = p.intervals.iter().map(|iv| iv.wall_ns).sum();
                PhaseSummary {
                    name: p.name.clone(),
                    kind: p.kind,
                    intervals: p.intervals.len(),
                    total_ms: total as f64 / 1e6,
                    share: total as f64 / run,
                    metrics: metrics
                        .iter()
                        .filter_map(|&m| {
                            let xs = values(p, m);
                            (!xs.is_empty()).then(|| summarize(m, &xs))
                        })
                        .collect(),
                }
            })
            .collect();
        let anova = metrics
            .iter()
            .filter_map(|&m| {
                let groups: Vec<Vec<f64>> = input
                    .phases
                    .iter()
                    .map(|p| values(p, m))
                    .filter(|xs| xs.len() >= 2)
                    .collect();
                let a = one_way_anova(&groups).ok()?;
                let all: Vec<f64> = groups.iter().flatten().copied().collect();
                let (mut weighted, mut weight) = (0.0, 0.0);
                for g in &groups {
                    if let Some(c) = cov(g) {
                        weighted += c * g.len() as f64;
                        weight += g.len() as f64;
                    }
                }
                Some(MetricAnova {
                    metric: m,
                    groups: groups.len(),
                    observations: all.len(),
                    f: a.f,
                    p_value: a.p_value,
                    eta_squared: a.ss_between / (a.ss_between + a.ss_within),
                    pooled_cov: cov(&all),
                    mean_within_cov: (weight > 0.0).then(|| weighted / weight),
                })
            })
            .collect();
        PhaseReport {
            events: events.iter().map(|e| e.name()).collect(),
            run_ns: input.run_ns,
            readings: input.readings,
            reading_ns: input.reading_ns,
            estimated_overhead: input.readings as f64 * input.reading_ns / run,
            selection_estimated_overhead: input.selection_estimated_overhead,
            phases,
            anova,
        }
    }

    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).expect("plain data serializes") + "\n"
    }

    /// The report as text: the phases with each metric's mean and CoV, then the ANOVA.
    pub fn render(&self) -> String {
        use std::fmt::Write;
        let mut out = String::new();
        let _ = writeln!(
            out,
            "phases: counters {}{}",
            self.events.join(", "),
            if self
                .events
                .iter()
                .any(|e| *e == "cycles" || *e == "instructions")
            {
                ""
            } else {
                " (no hardware counters on this machine)"
            }
        );
        let _ = write!(
            out,
            "readings: {} at {:.0} ns each, {:.2} % of the {:.3} s run",
            self.readings,
            self.reading_ns,
            self.estimated_overhead * 100.0,
            self.run_ns as f64 / 1e9
        );
        if let Some(e) = self.selection_estimated_overhead {
            let _ = write!(out, " (the selection estimated {:.2} %)", e * 100.0);
        }
        out.push('\n');
        let metrics: Vec<Metric> = Metric::ALL
            .into_iter()
            .filter(|m| {
                self.anova.iter().any(|a| a.metric == *m)
                    || self
                        .phases
                        .iter()
                        .any(|p| p.metrics.iter().any(|s| s.metric == *m))
            })
            .collect();
        let _ = write!(
            out,
            "\n{:<40} {:>7} {:>8} {:>10} {:>6}",
            "phase", "kind", "n", "total ms", "share"
        );
        for m in &metrics {
            let _ = write!(out, " {:>20}", format!("{} (CoV)", m.name()));
        }
        out.push('\n');
        for p in &self.phases {
            let _ = write!(
                out,
                "{:<40} {:>7} {:>8} {:>10.1} {:>5.1}%",
                clip(&p.name, 40),
                p.kind.name(),
                p.intervals,
                p.total_ms,
                p.share * 100.0
            );
            for m in &metrics {
                let cell = match p.metrics.iter().find(|s| s.metric == *m) {
                    Some(s) => match s.cov {
                        Some(c) => format!("{} ({:.2})", number(s.mean), c),
                        None => format!("{} (-)", number(s.mean)),
                    },
                    None => "-".into(),
                };
                let _ = write!(out, " {cell:>20}");
            }
            out.push('\n');
        }
        let _ = writeln!(
            out,
            "\nAcross phases (one-way ANOVA, each interval one observation; η² is the share of \
             the variance between phases):"
        );
        let _ = writeln!(
            out,
            "{:<16} {:>6} {:>8} {:>12} {:>10} {:>6} {:>10} {:>12}",
            "metric", "phases", "n", "F", "p", "η²", "CoV all", "CoV within"
        );
        for a in &self.anova {
            let _ = writeln!(
                out,
                "{:<16} {:>6} {:>8} {:>12.2} {:>10.2e} {:>6.2} {:>10} {:>12}",
                a.metric.name(),
                a.groups,
                a.observations,
                a.f,
                a.p_value,
                a.eta_squared,
                a.pooled_cov.map_or("-".into(), |c| format!("{c:.2}")),
                a.mean_within_cov.map_or("-".into(), |c| format!("{c:.2}")),
            );
        }
        if self.anova.is_empty() {
            out.push_str("(fewer than two phases with two intervals: no analysis)\n");
        }
        out
    }
}

fn summarize(metric: Metric, xs: &[f64]) -> MetricSummary {
    MetricSummary {
        metric,
        n: xs.len(),
        mean: xs.iter().sum::<f64>() / xs.len() as f64,
        cov: cov(xs),
    }
}

/// Sample standard deviation over mean.
fn cov(xs: &[f64]) -> Option<f64> {
    if xs.len() < 2 {
        return None;
    }
    let n = xs.len() as f64;
    let mean = xs.iter().sum::<f64>() / n;
    if mean == 0.0 {
        return None;
    }
    let var = xs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1.0);
    Some(var.sqrt() / mean.abs())
}

fn number(x: f64) -> String {
    if x.abs() >= 100.0 {
        format!("{x:.0}")
    } else if x.abs() >= 1.0 {
        format!("{x:.2}")
    } else {
        format!("{x:.3}")
    }
}

fn clip(s: &str, width: usize) -> String {
    if s.chars().count() <= width {
        s.to_string()
    } else {
        let head: String = s.chars().take(width - 1).collect();
        format!("{head}…")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const EVENTS: [CountedEvent; 3] = CountedEvent::SOFTWARE;

    fn iv(wall_ns: u64, cpu_ns: u64, faults: u64, allocated: u64) -> Interval {
        Interval {
            wall_ns,
            counts: vec![cpu_ns, faults, 0],
            allocated_bytes: Some(allocated),
        }
    }

    fn phase(name: &str, intervals: Vec<Interval>) -> PhaseData {
        PhaseData {
            name: name.into(),
            kind: PhaseKind::Method,
            events: EVENTS.to_vec(),
            intervals,
        }
    }

    #[test]
    fn rates_come_from_counts_over_the_interval() {
        let i = iv(2_000_000, 1_000_000, 10, 4_000_000);
        assert_eq!(Metric::Duration.value(&i, &EVENTS), Some(2.0));
        assert_eq!(Metric::CpuUse.value(&i, &EVENTS), Some(0.5));
        assert_eq!(Metric::FaultsPerMs.value(&i, &EVENTS), Some(5.0));
        // 4 MB in 2 ms.
        assert_eq!(Metric::AllocationRate.value(&i, &EVENTS), Some(2000.0));
        // No hardware events counted: no IPC.
        assert_eq!(Metric::Ipc.value(&i, &EVENTS), None);
        // Too short for a rate, not for its length.
        let short = iv(5_000, 5_000, 0, 0);
        assert_eq!(Metric::CpuUse.value(&short, &EVENTS), None);
        assert_eq!(Metric::Duration.value(&short, &EVENTS), Some(0.005));
    }

    #[test]
    fn phases_that_differ_explain_the_variance() {
        // `build` allocates about 100 MB/s, `walk` about 1 MB/s, each nearly constant.
        let build = phase(
            "A>>build",
            (0..10)
                .map(|k| iv(1_000_000, 1_000_000, 0, 100_000 + k * 1_000))
                .collect(),
        );
        let walk = phase(
            "A>>walk",
            (0..10)
                .map(|k| iv(1_000_000, 1_000_000, 0, 1_000 + k * 10))
                .collect(),
        );
        let r = PhaseReport::new(&ReportInput {
            phases: &[build, walk],
            run_ns: 20_000_000,
            readings: 40,
            reading_ns: 1000.0,
            selection_estimated_overhead: Some(0.001),
        });
        assert_eq!(r.phases.len(), 2);
        assert!((r.phases[0].share - 0.5).abs() < 1e-12);
        let alloc = r
            .anova
            .iter()
            .find(|a| a.metric == Metric::AllocationRate)
            .unwrap();
        assert_eq!((alloc.groups, alloc.observations), (2, 20));
        assert!(alloc.eta_squared > 0.99, "{alloc:?}");
        assert!(alloc.p_value < 1e-10);
        assert!(alloc.mean_within_cov.unwrap() < 0.05);
        assert!(alloc.pooled_cov.unwrap() > 0.9);
        // 40 readings of 1 µs over 20 ms.
        assert!((r.estimated_overhead - 0.002).abs() < 1e-12);
        let text = r.render();
        assert!(text.contains("A>>build"), "{text}");
        assert!(text.contains("alloc MB/s"), "{text}");
        assert!(text.contains("no hardware counters"), "{text}");
        assert!(r.to_json().contains("\"eta_squared\""));
    }

    #[test]
    fn one_phase_alone_has_no_analysis() {
        let only = phase("A>>run", vec![iv(1_000_000, 1_000_000, 0, 0); 3]);
        let r = PhaseReport::new(&ReportInput {
            phases: &[only],
            run_ns: 3_000_000,
            readings: 6,
            reading_ns: 1000.0,
            selection_estimated_overhead: None,
        });
        assert!(r.anova.is_empty());
        assert!(r.render().contains("no analysis"));
    }
}
