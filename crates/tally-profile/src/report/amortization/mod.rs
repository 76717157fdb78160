//! Did each recompilation pay for itself? Zimmer & Diehl's post-mortem amortization analysis.
//!
//! From a profile with exact calls per method per tier ([`EventKind::TierCallCounts`]):
//! - the time a sample stands for, `t_unit`: the profiled time less what the call counting
//!   itself cost, spread over the samples. Under a CPU-time trigger the profiled time is the
//!   ticks' CPU time (ticks the kernel merged included) plus the collections' waits, which a
//!   busy machine does not stretch as it does the wall-clock duration other triggers use; an
//!   estimate of the counting's cost above half the run is dropped as not believable;
//! - per (method, tier) its exclusive time `T(m,i)`: the samples whose innermost frame is
//!   that method running in that tier (inlined frames resolved as if they were on the stack,
//!   in the tier of the code they were inlined into), summed over all contexts, times
//!   `t_unit`; and its cost per call `t(m,i) = T(m,i) / N(m,i)`;
//! - per recompilation `j → i` of a method, with `C(m,i)` the compile time (the compiling
//!   thread's CPU time, every compile of the method into tier `i`): it paid off when
//!   `C(m,i) + N(m,i)·t(m,i) < N(m,i)·t(m,j)`, gaining `N(m,i)·(t(m,j) − t(m,i)) − C(m,i)`.
//!
//! The test assumes every call of a method costs the same, before and after the
//! recompilation; where the profile shows otherwise the verdict is "unclear", with the
//! reason ([`judge`]): the cost per call changing within a tier over the run (the counts are
//! read every decision period, [`spread`]), a change across the move far beyond what the
//! controller's model expects of the tiers (either way), a tier left after fewer than
//! [`MIN_CALLS`] calls. The tier a method left is priced by the later half of its calls
//! there, which stand in best for what the calls after the move would have cost (the first
//! calls pay for warm-up). A verdict stands only when the gain keeps its sign over its
//! error, which covers how each cost per call varied within the run as well as the samples'
//! Poisson error (two standard errors either way, Student's t where the variation is
//! estimated from few stretches); otherwise the report gives the range and how many more
//! samples would tell. What varies within a run also varies between runs: a verdict judged
//! against the Poisson error alone changed sign from one run to the next.

use std::collections::BTreeMap;

use crate::code::Symbols;
use crate::event::EventKind;
use crate::ids::{MethodId, Tier};
use crate::profile::Profile;

mod judge;
mod render;
mod spread;

/// Fewer samples than this on either side of a move are too few to judge how far its cost
/// per call moved against the model.
pub const MIN_SAMPLES: u64 = 10;

/// Fewer calls than this in the tier a method left make its cost per call there the cost of
/// a few activations (a main loop moved on by on-stack replacement, say), not a price.
pub const MIN_CALLS: u64 = 10;

/// A cost per call that falls from one tier to the next by more than this factor beyond the
/// speedup the controller's model expects of the move (its decision's past time over its
/// predicted time), or rises by more than this factor beyond it, is not the same calls made
/// faster: the calls before and after the recompilation did different work (another phase
/// of the program), which breaks the analysis' assumption.
pub const BEYOND_MODEL: f64 = 8.0;

/// One method in one tier.
#[derive(Clone, Debug, PartialEq)]
pub struct TierCost {
    pub method: MethodId,
    pub name: String,
    pub tier: Tier,
    /// N(m,i).
    pub calls: u64,
    /// Samples with the method innermost in this tier.
    pub samples: u64,
    /// T(m,i), ns.
    pub time_ns: f64,
    /// Compiles into this tier and their summed time, C(m,i).
    pub compiles: u64,
    pub compile_ns: u64,
}

impl TierCost {
    /// t(m,i), ns; `None` without calls.
    pub fn per_call_ns(&self) -> Option<f64> {
        (self.calls > 0).then(|| self.time_ns / self.calls as f64)
    }
}

#[derive(Clone, Debug, PartialEq)]
pub enum Verdict {
    /// `C + N·t_i < N·t_j`, by `gain_ns`.
    PaidOff { gain_ns: f64 },
    /// It did not: `loss_ns` lost against staying in the lower tier.
    DidNotPay { loss_ns: f64 },
    /// No verdict, and why.
    Unclear { why: String },
}

impl Verdict {
    pub fn label(&self) -> &'static str {
        match self {
            Verdict::PaidOff { .. } => "paid off",
            Verdict::DidNotPay { .. } => "did not pay",
            Verdict::Unclear { .. } => "unclear",
        }
    }
}

/// One method's move from tier `from` to tier `to`.
#[derive(Clone, Debug, PartialEq)]
pub struct Recompilation {
    pub method: MethodId,
    pub name: String,
    pub from: Tier,
    pub to: Tier,
    /// When the first compile into `to` was installed, ns since the profile started.
    pub at_ns: u64,
    /// C(m,to): all compiles of the method into `to`.
    pub compile_ns: u64,
    /// N(m,to).
    pub calls: u64,
    /// t(m,to) and t(m,from), ns.
    pub per_call_to_ns: Option<f64>,
    pub per_call_from_ns: Option<f64>,
    pub verdict: Verdict,
    /// The gain's range over the samples' error (lowest, highest), ns, when it was priced
    /// from samples (or exactly, for code never called: minus its compile time).
    pub gain_range_ns: Option<(f64, f64)>,
}

/// The whole analysis.
#[derive(Clone, Debug, PartialEq)]
pub struct Amortization {
    /// T_main, T_instr and the samples they were spread over.
    pub run_ns: u64,
    pub instrumentation_ns: u64,
    pub samples: u64,
    pub t_unit_ns: f64,
    /// Every (method, tier) with calls or samples, heaviest first.
    pub costs: Vec<TierCost>,
    /// In the order they happened.
    pub recompilations: Vec<Recompilation>,
}

impl Amortization {
    /// The analysis, or `None` when the profile has no call counts per tier (a run without
    /// the counting instrumentation).
    pub fn new(p: &Profile) -> Option<Amortization> {
        let snapshots: Vec<(u64, &Vec<crate::event::TierCalls>, u64)> = p
            .events
            .iter()
            .filter_map(|e| match &e.kind {
                EventKind::TierCallCounts {
                    counts,
                    instrumentation_ns,
                } => Some((e.time_ns, counts, *instrumentation_ns)),
                _ => None,
            })
            .collect();
        let &(_, last, instrumentation_ns) = snapshots.last()?;
        let symbols = p.symbols();
        let samples = p.samples.len() as u64;
        let run_ns = profiled_ns(p);
        // An estimate of the counting's cost above half the run is not believable (a
        // debug build times its counting loop unoptimized): the run's time is used whole.
        let instrumentation_ns = if instrumentation_ns.saturating_mul(2) > run_ns {
            0
        } else {
            instrumentation_ns
        };
        let t_unit_ns = if samples == 0 {
            0.0
        } else {
            run_ns.saturating_sub(instrumentation_ns) as f64 / samples as f64
        };
        // The speedup the controller's model expected of each move it decided.
        let mut expected: BTreeMap<(MethodId, Tier, Tier), f64> = BTreeMap::new();
        for e in &p.events {
            if let EventKind::TierDecision {
                method,
                from,
                to,
                past_ns,
                predicted_future_ns,
                ..
            } = e.kind
            {
                if predicted_future_ns > 0 {
                    expected
                        .entry((method, from, to))
                        .or_insert(past_ns as f64 / predicted_future_ns as f64);
                }
            }
        }
        let mut costs: BTreeMap<(MethodId, Tier), TierCost> = BTreeMap::new();
        for c in last {
            cost_entry(&mut costs, &symbols, c.method, c.tier).calls = c.calls;
        }
        // Sample times of each (method, tier), in time order, for how its calls spread.
        let mut sample_times: BTreeMap<(MethodId, Tier), Vec<u64>> = BTreeMap::new();
        for s in &p.samples {
            let frames = symbols.resolve_sample(s);
            let Some(top) = frames.first() else { continue };
            let e = cost_entry(&mut costs, &symbols, top.method, top.tier);
            e.samples += 1;
            e.time_ns += t_unit_ns;
            sample_times
                .entry((top.method, top.tier))
                .or_default()
                .push(s.time_ns);
        }
        for times in sample_times.values_mut() {
            times.sort_unstable();
        }
        let groups = |m: MethodId, tier: Tier| {
            let readings: Vec<spread::Reading> = snapshots
                .iter()
                .map(|(time, counts, _)| {
                    let row = counts.iter().find(|c| c.method == m && c.tier == tier);
                    // A reading without a row for the method counts nothing yet; one of a
                    // file that counted no back-edges leaves them unknown.
                    let counted = counts.iter().all(|c| c.loops.is_some());
                    spread::Reading {
                        time_ns: *time,
                        calls: row.map_or(0, |c| c.calls),
                        loops: if counted {
                            Some(row.and_then(|c| c.loops).unwrap_or(0))
                        } else {
                            None
                        },
                    }
                })
                .collect();
            let times = sample_times.get(&(m, tier)).map_or(&[][..], |t| &t[..]);
            spread::groups(&readings, times)
        };
        // Installs, in time order: each moves its method to the version's tier; a
        // deoptimization that invalidates moves it back.
        let mut tier_now: BTreeMap<MethodId, Tier> = BTreeMap::new();
        let mut moves: Vec<(MethodId, Tier, Tier, u64)> = Vec::new();
        for e in &p.events {
            match &e.kind {
                EventKind::CodeInstalled(v) => {
                    let c = cost_entry(&mut costs, &symbols, v.method, v.tier);
                    c.compiles += 1;
                    c.compile_ns += v.compile_time_ns;
                    let from = tier_now
                        .insert(v.method, v.tier)
                        .unwrap_or(Tier::Interpreter);
                    if from != v.tier && !moves.iter().any(|m| (m.0, m.2) == (v.method, v.tier)) {
                        moves.push((v.method, from, v.tier, e.time_ns));
                    }
                }
                EventKind::Deoptimized {
                    method,
                    now: Some(t),
                    ..
                } => {
                    tier_now.insert(*method, *t);
                }
                _ => {}
            }
        }
        let start = p.header.start_time_ns;
        let rate_hz = p.header.sampler.rate_hz;
        let recompilations = moves
            .into_iter()
            .map(|(m, from, to, at)| {
                let judged = judge::judge(&judge::Move {
                    from: judge::Side::before(from, costs.get(&(m, from)), groups(m, from)),
                    to: judge::Side::after(to, costs.get(&(m, to)), groups(m, to)),
                    compile_ns: costs.get(&(m, to)).map_or(0, |c| c.compile_ns),
                    model: expected.get(&(m, from, to)).copied(),
                    t_unit_ns,
                    rate_hz,
                });
                let cost = |t: Tier| costs.get(&(m, t));
                Recompilation {
                    method: m,
                    name: symbols.method_name(m),
                    from,
                    to,
                    at_ns: at.saturating_sub(start),
                    compile_ns: cost(to).map_or(0, |c| c.compile_ns),
                    calls: cost(to).map_or(0, |c| c.calls),
                    per_call_to_ns: cost(to).and_then(TierCost::per_call_ns),
                    per_call_from_ns: cost(from).and_then(TierCost::per_call_ns),
                    verdict: judged.verdict,
                    gain_range_ns: judged.gain_range_ns,
                }
            })
            .collect();
        let mut costs: Vec<TierCost> = costs.into_values().collect();
        costs.sort_by(|a, b| {
            b.samples
                .cmp(&a.samples)
                .then(b.calls.cmp(&a.calls))
                .then(a.name.cmp(&b.name))
        });
        Some(Amortization {
            run_ns,
            instrumentation_ns,
            samples,
            t_unit_ns,
            costs,
            recompilations,
        })
    }

    /// Time won by the recompilations that paid off and lost by those that did not, ns.
    pub fn won_and_lost_ns(&self) -> (f64, f64) {
        self.recompilations
            .iter()
            .fold((0.0, 0.0), |(won, lost), r| match r.verdict {
                Verdict::PaidOff { gain_ns } => (won + gain_ns, lost),
                Verdict::DidNotPay { loss_ns } => (won, lost + loss_ns),
                Verdict::Unclear { .. } => (won, lost),
            })
    }

    /// The least time the recompilations that paid off won and those that did not lost, ns:
    /// each gain at the end of its range over the samples' error nearest zero. Point
    /// estimates priced from few samples can be far off; these bounds are what the samples
    /// vouch for.
    pub fn won_and_lost_at_least_ns(&self) -> (f64, f64) {
        self.recompilations
            .iter()
            .fold((0.0, 0.0), |(won, lost), r| {
                match (&r.verdict, r.gain_range_ns) {
                    (Verdict::PaidOff { .. }, Some((lowest, _))) => (won + lowest, lost),
                    (Verdict::DidNotPay { .. }, Some((_, highest))) => (won, lost - highest),
                    _ => (won, lost),
                }
            })
    }
}

fn cost_entry<'a>(
    costs: &'a mut BTreeMap<(MethodId, Tier), TierCost>,
    symbols: &Symbols,
    m: MethodId,
    t: Tier,
) -> &'a mut TierCost {
    costs.entry((m, t)).or_insert_with(|| TierCost {
        method: m,
        name: symbols.method_name(m),
        tier: t,
        calls: 0,
        samples: 0,
        time_ns: 0.0,
        compiles: 0,
        compile_ns: 0,
    })
}

/// The time the samples stand for, ns. Under a CPU-time trigger: every tick's period (ticks
/// the kernel merged into a later signal included, which stand for CPU time no sample was
/// taken in) plus the collections' waits, which the profile adds as samples of their own.
/// Otherwise, and for profiles without tick counts, the run's wall-clock duration.
fn profiled_ns(p: &Profile) -> u64 {
    let sampler = &p.header.sampler;
    let cpu_time = matches!(sampler.trigger.as_str(), "timer" | "perf") && !sampler.is_wall_clock();
    let ticks = p.counters.taken + p.counters.ticks_merged;
    if !cpu_time || sampler.rate_hz == 0 || ticks == 0 {
        return p.duration_ns();
    }
    let waits = p
        .samples
        .iter()
        .filter(|s| s.origin == crate::sample::Origin::GcPause)
        .count() as u64;
    (ticks + waits) * 1_000_000_000 / u64::from(sampler.rate_hz)
}
