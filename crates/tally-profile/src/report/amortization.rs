//! Did each recompilation pay for itself? Zimmer & Diehl's post-mortem amortization analysis.
//!
//! From a profile with exact calls per method per tier ([`EventKind::TierCallCounts`]):
//! - the time a sample stands for, `t_unit = (T_main − T_instr) / samples`: the run's
//!   duration less what the call counting itself cost, spread over the samples;
//!   an estimate of the counting's cost above half the run is dropped as not believable;
//! - per (method, tier) its exclusive time `T(m,i)`: the samples whose innermost frame is
//!   that method running in that tier (inlined frames resolved as if they were on the stack,
//!   in the tier of the code they were inlined into), summed over all contexts, times
//!   `t_unit`; and its cost per call `t(m,i) = T(m,i) / N(m,i)`;
//! - per recompilation `j → i` of a method, with `C(m,i)` the compile time (every compile of
//!   the method into tier `i`): it paid off when `C(m,i) + N(m,i)·t(m,i) < N(m,i)·t(m,j)`,
//!   gaining `N(m,i)·(t(m,j) − t(m,i)) − C(m,i)`.
//!
//! Samples price the calls only roughly: a verdict stands only when the gain keeps its sign
//! over the samples' error (each count taken as Poisson, two standard deviations either way);
//! otherwise the report gives the range. The test assumes each call costs the same in a tier.
//! A tier left after fewer than [`MIN_CALLS`] calls gets no verdict (its few activations are
//! not a price). Where the snapshots of the counts
//! show the cost per call in a tier changing over the run (the first and second half of the
//! method's calls there differing by more than [`COST_DRIFT`]), or where too few samples
//! back a cost, the verdict says so instead.

use std::collections::BTreeMap;
use std::fmt::Write;

use crate::code::Symbols;
use crate::event::EventKind;
use crate::ids::{MethodId, Tier};
use crate::profile::Profile;

/// Fewer samples than this in either half of a tier's calls are too few to tell a drift of
/// its cost per call from sampling error.
pub const MIN_SAMPLES: u64 = 10;

/// The fewest and the most samples a count of `n` may stand for: about two standard
/// deviations of a Poisson count either way (a count of 0 may stand for 3).
fn fewest(n: u64) -> f64 {
    let n = n as f64;
    (n - 2.0 * n.sqrt()).max(0.0)
}

fn most(n: u64) -> f64 {
    let n = n as f64;
    n + 2.0 * (n + 1.0).sqrt() + 1.0
}

/// Fewer calls than this in the tier a method left make its cost per call there the cost of
/// a few activations (a main loop moved on by on-stack replacement, say), not a price.
pub const MIN_CALLS: u64 = 10;

/// A cost per call that falls from one tier to the next by more than this factor beyond the
/// speedup the controller's model expects of the move (its decision's past time over its
/// predicted time) is not the same calls made faster: the calls before and after the
/// recompilation did different work (another phase of the program), which breaks the
/// analysis' assumption.
pub const BEYOND_MODEL: f64 = 8.0;

/// A cost per call that differs by more than this factor between the first and the second
/// half of a tier's calls breaks the analysis' assumption.
pub const COST_DRIFT: f64 = 2.0;

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
        let run_ns = p.duration_ns();
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
        // Sample times of each (method, tier), for the drift test.
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
        let recompilations = moves
            .into_iter()
            .map(|(m, from, to, at)| {
                let cost = |t: Tier| costs.get(&(m, t));
                let (to_cost, from_cost) = (cost(to), cost(from));
                let calls = to_cost.map_or(0, |c| c.calls);
                let compile_ns = to_cost.map_or(0, |c| c.compile_ns);
                let per_call_to_ns = to_cost.and_then(TierCost::per_call_ns);
                let per_call_from_ns = from_cost.and_then(TierCost::per_call_ns);
                let drift = |t: Tier| {
                    drift(&snapshots, &sample_times, m, t, t_unit_ns).map(|(a, b)| {
                        format!(
                            "its cost per call in {} changed over the run ({:.2} µs in the first \
                             half of its calls there, {:.2} µs in the second)",
                            t.name(),
                            a / 1e3,
                            b / 1e3
                        )
                    })
                };
                let ran_uncalled = to_cost.map_or(0, |c| c.samples);
                let mut gain_range_ns = None;
                let verdict = if calls == 0 && ran_uncalled > 0 {
                    Verdict::Unclear {
                        why: format!(
                            "it ran in {} ({ran_uncalled} samples) without a call there: an \
                             activation moved in by on-stack replacement, whose cost per call \
                             is not defined",
                            to.name()
                        ),
                    }
                } else if calls == 0 {
                    gain_range_ns = Some((-(compile_ns as f64), -(compile_ns as f64)));
                    Verdict::DidNotPay {
                        loss_ns: compile_ns as f64,
                    }
                } else if let Some(n) =
                    Some(from_cost.map_or(0, |c| c.calls)).filter(|&n| n < MIN_CALLS)
                {
                    Verdict::Unclear {
                        why: format!(
                            "only {n} call(s) in {}: the cost of so few activations is not a \
                             cost per call",
                            from.name()
                        ),
                    }
                } else if let Some(why) = drift(to).or_else(|| drift(from)) {
                    Verdict::Unclear { why }
                } else if let Some(why) = expected.get(&(m, from, to)).and_then(|&model| {
                    // The least speedup the samples allow, against the model's.
                    let (nj, ni) = (
                        from_cost.map_or(0, |c| c.samples),
                        to_cost.map_or(0, |c| c.samples),
                    );
                    let calls_from = from_cost.map_or(0, |c| c.calls);
                    if nj < MIN_SAMPLES || ni < MIN_SAMPLES || calls_from == 0 {
                        return None;
                    }
                    let least = (fewest(nj) / calls_from as f64) / (most(ni) / calls as f64);
                    (least > BEYOND_MODEL * model).then(|| {
                        format!(
                            "its cost per call fell {:.0}× from {} to {}, while the controller's \
                             model expects {:.1}× of the move: the calls made before and after \
                             did different work, so their costs do not compare",
                            (nj as f64 / calls_from as f64) / (ni as f64 / calls as f64),
                            from.name(),
                            to.name(),
                            model
                        )
                    })
                }) {
                    Verdict::Unclear { why }
                } else {
                    let samples = |t: Tier| cost(t).map_or(0, |c| c.samples);
                    let calls_from = from_cost.map_or(1, |c| c.calls) as f64;
                    let gain = |from_samples: f64, to_samples: f64| {
                        calls as f64
                            * t_unit_ns
                            * (from_samples / calls_from - to_samples / calls as f64)
                            - compile_ns as f64
                    };
                    let (nj, ni) = (samples(from), samples(to));
                    let point = gain(nj as f64, ni as f64);
                    let lowest = gain(fewest(nj), most(ni));
                    let highest = gain(most(nj), fewest(ni));
                    gain_range_ns = Some((lowest, highest));
                    if lowest > 0.0 {
                        Verdict::PaidOff { gain_ns: point }
                    } else if highest < 0.0 {
                        Verdict::DidNotPay { loss_ns: -point }
                    } else {
                        Verdict::Unclear {
                            why: format!(
                                "within the samples' error ({nj} in {}, {ni} in {}): the gain \
                                 lies between {:.2} and {:+.2} ms",
                                from.name(),
                                to.name(),
                                lowest / 1e6,
                                highest / 1e6
                            ),
                        }
                    }
                };
                Recompilation {
                    method: m,
                    name: symbols.method_name(m),
                    from,
                    to,
                    at_ns: at.saturating_sub(start),
                    compile_ns,
                    calls,
                    per_call_to_ns,
                    per_call_from_ns,
                    verdict,
                    gain_range_ns,
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

    /// The analysis as text: the recompilations with their verdicts, then the `top`
    /// (method, tier) rows by samples with their calls and costs.
    pub fn render_text(&self, top: usize) -> String {
        let mut out = format!(
            "Amortization (Zimmer & Diehl): {} recompilation(s); t_unit = ({:.1} ms run − {:.1} ms \
             counting) / {} samples = {:.1} µs\n",
            self.recompilations.len(),
            self.run_ns as f64 / 1e6,
            self.instrumentation_ns as f64 / 1e6,
            self.samples,
            self.t_unit_ns / 1e3
        );
        let count = |label: &str| {
            self.recompilations
                .iter()
                .filter(|r| r.verdict.label() == label)
                .count()
        };
        let (won, lost) = self.won_and_lost_ns();
        let (won_least, lost_least) = self.won_and_lost_at_least_ns();
        let _ = writeln!(
            out,
            "paid off: {} (won {:.2} ms); did not pay: {} (lost {:.2} ms); unclear: {}",
            count("paid off"),
            won / 1e6,
            count("did not pay"),
            lost / 1e6,
            count("unclear")
        );
        let _ = writeln!(
            out,
            "  over the samples' error: won at least {:.2} ms, lost at least {:.2} ms",
            won_least / 1e6,
            lost_least / 1e6
        );
        // The red ones first, costliest first: what the controller should not have done.
        let mut red: Vec<(&Recompilation, f64)> = self
            .recompilations
            .iter()
            .filter_map(|r| match r.verdict {
                Verdict::DidNotPay { loss_ns } => Some((r, loss_ns)),
                _ => None,
            })
            .collect();
        red.sort_by(|a, b| b.1.total_cmp(&a.1));
        for (r, loss) in &red {
            let _ = writeln!(
                out,
                "  red: {} {} -> {} lost {:.2} ms ({} call(s) after a {:.2} ms compile)",
                r.name,
                r.from.name(),
                r.to.name(),
                loss / 1e6,
                r.calls,
                r.compile_ns as f64 / 1e6
            );
        }
        out.push_str(
            "  verdict      gain ms  method                            from -> to                   \
             at ms  compile ms      calls  µs/call after  µs/call before\n",
        );
        for r in &self.recompilations {
            let gain = match r.verdict {
                Verdict::PaidOff { gain_ns } => format!("{:+.2}", gain_ns / 1e6),
                Verdict::DidNotPay { loss_ns } => format!("{:+.2}", -loss_ns / 1e6),
                Verdict::Unclear { .. } => "?".into(),
            };
            let us = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{:.3}", v / 1e3));
            let _ = writeln!(
                out,
                "  {:<11} {:>8}  {:<33} {:<26} {:>8.1} {:>11.2} {:>10} {:>14} {:>15}",
                r.verdict.label(),
                gain,
                r.name,
                format!("{} -> {}", r.from.name(), r.to.name()),
                r.at_ns as f64 / 1e6,
                r.compile_ns as f64 / 1e6,
                r.calls,
                us(r.per_call_to_ns),
                us(r.per_call_from_ns)
            );
            if let Verdict::Unclear { why } = &r.verdict {
                let _ = writeln!(out, "              {why}");
            }
        }
        out.push_str(
            "\nby method and tier (exclusive time, inlined frames as if on the stack):\n  \
             method                            tier              calls   samples   time ms  \
             µs/call  compiles\n",
        );
        for c in self.costs.iter().take(top) {
            let _ = writeln!(
                out,
                "  {:<33} {:<12} {:>10} {:>9} {:>9.2} {:>8} {:>9}",
                c.name,
                c.tier.name(),
                c.calls,
                c.samples,
                c.time_ns / 1e6,
                c.per_call_ns()
                    .map_or("-".to_string(), |t| format!("{:.3}", t / 1e3)),
                c.compiles
            );
        }
        out
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

/// The cost per call of `m` in `tier` over the first and the second half of its calls there,
/// when both halves have enough samples and they differ by more than [`COST_DRIFT`].
fn drift(
    snapshots: &[(u64, &Vec<crate::event::TierCalls>, u64)],
    sample_times: &BTreeMap<(MethodId, Tier), Vec<u64>>,
    m: MethodId,
    tier: Tier,
    t_unit_ns: f64,
) -> Option<(f64, f64)> {
    let calls_at = |k: usize| {
        snapshots[k]
            .1
            .iter()
            .find(|c| c.method == m && c.tier == tier)
            .map_or(0, |c| c.calls)
    };
    let total = calls_at(snapshots.len() - 1);
    if total == 0 || snapshots.len() < 2 {
        return None;
    }
    // The first snapshot at which half the calls were made splits the run.
    let k = (0..snapshots.len()).find(|&k| calls_at(k) * 2 >= total)?;
    let (split_ns, first_calls) = (snapshots[k].0, calls_at(k));
    let second_calls = total - first_calls;
    let times = sample_times.get(&(m, tier))?;
    let first_samples = times.iter().filter(|&&t| t <= split_ns).count() as u64;
    let second_samples = times.len() as u64 - first_samples;
    if first_calls == 0
        || second_calls == 0
        || first_samples < MIN_SAMPLES
        || second_samples < MIN_SAMPLES
    {
        return None;
    }
    let a = first_samples as f64 * t_unit_ns / first_calls as f64;
    let b = second_samples as f64 * t_unit_ns / second_calls as f64;
    (a.max(b) > COST_DRIFT * a.min(b)).then_some((a, b))
}
