//! Each compiled method's life across tiers, for the recompilation diagram a click on a call
//! graph node opens: when it ran in which tier, and per tier its compile time, its estimated
//! execution time there, and what the calls it made after leaving the tier would have cost
//! had it stayed (the other side of the amortization test).

use std::collections::BTreeMap;

use serde::Serialize;

use super::model::{MethodTable, Stacks};
use crate::code::Symbols;
use crate::event::EventKind;
use crate::ids::{MethodId, Tier};
use crate::profile::Profile;
use crate::report::{Amortization, Verdict};

#[derive(Serialize, Debug)]
pub(crate) struct MethodHistory {
    pub method: u32,
    /// (tier, from, to): the tier the method's calls ran in over time, ns since the start.
    pub spans: Vec<(u8, u64, u64)>,
    /// Lowest tier first.
    pub tiers: Vec<TierStay>,
    pub recompilations: Vec<RecompilationRow>,
}

#[derive(Serialize, Debug)]
pub(crate) struct TierStay {
    pub tier: u8,
    pub compiles: u64,
    pub compile_ns: u64,
    /// N(m,i), when the profile counted calls.
    pub calls: Option<u64>,
    /// Samples with the method innermost in this tier.
    pub samples: u64,
    /// Estimated execution time here: the samples' share of the run.
    pub time_ns: f64,
    pub per_call_ns: Option<f64>,
    /// The calls made in higher tiers, priced at this tier's cost per call: the time left at
    /// this tier had the method stayed.
    pub stayed_ns: Option<f64>,
}

#[derive(Serialize, Debug)]
pub(crate) struct RecompilationRow {
    pub from: u8,
    pub to: u8,
    pub at_ns: u64,
    /// "paid off", "did not pay", "unclear", or "not counted".
    pub verdict: String,
    /// Gain (positive) or loss (negative), ns.
    pub gain_ns: Option<f64>,
    /// The gain's range over the samples' error.
    pub gain_range_ns: Option<(f64, f64)>,
    pub why: Option<String>,
}

pub(crate) fn histories(
    p: &Profile,
    symbols: &Symbols,
    stacks: &Stacks,
    amortization: Option<&Amortization>,
    table: &mut MethodTable,
) -> Vec<MethodHistory> {
    let start = p.header.start_time_ns;
    let end = p.duration_ns();
    // The tier changes of each method that was ever compiled, in time order.
    let mut changes: BTreeMap<MethodId, Vec<(u64, Tier)>> = BTreeMap::new();
    let mut compiles: BTreeMap<(MethodId, Tier), (u64, u64)> = BTreeMap::new();
    for e in &p.events {
        let at = e.time_ns.saturating_sub(start);
        match &e.kind {
            EventKind::CodeInstalled(v) => {
                changes.entry(v.method).or_default().push((at, v.tier));
                let c = compiles.entry((v.method, v.tier)).or_default();
                c.0 += 1;
                c.1 += v.compile_time_ns;
            }
            EventKind::Deoptimized {
                method,
                now: Some(t),
                ..
            } => {
                if let Some(list) = changes.get_mut(method) {
                    list.push((at, *t));
                }
            }
            _ => {}
        }
    }
    let mut samples: BTreeMap<(MethodId, Tier), u64> = BTreeMap::new();
    for frames in &stacks.frames {
        if let Some(top) = frames.first() {
            if changes.contains_key(&top.method) {
                *samples.entry((top.method, top.tier)).or_default() += 1;
            }
        }
    }
    let t_unit = amortization.map_or_else(
        || end as f64 / (p.samples.len().max(1)) as f64,
        |a| a.t_unit_ns,
    );
    let cost = |m: MethodId, t: Tier| {
        amortization.and_then(|a| a.costs.iter().find(|c| c.method == m && c.tier == t))
    };
    changes
        .into_iter()
        .map(|(m, list)| {
            let mut spans = Vec::new();
            let (mut at, mut tier) = (0u64, Tier::Interpreter);
            for &(when, to) in &list {
                if to != tier {
                    if when > at {
                        spans.push((tier.to_u8(), at, when));
                    }
                    at = when;
                    tier = to;
                }
            }
            spans.push((tier.to_u8(), at, end.max(at)));
            let mut tiers: Vec<Tier> = list.iter().map(|&(_, t)| t).collect();
            tiers.push(Tier::Interpreter);
            tiers.sort_by_key(|t| t.to_u8());
            tiers.dedup();
            let calls_of = |t: Tier| cost(m, t).map(|c| c.calls);
            let stays = tiers
                .iter()
                .map(|&t| {
                    let n_samples = samples.get(&(m, t)).copied().unwrap_or(0);
                    let time_ns = n_samples as f64 * t_unit;
                    let calls = amortization.map(|_| calls_of(t).unwrap_or(0));
                    let per_call_ns = calls.filter(|&n| n > 0).map(|n| time_ns / n as f64);
                    let later: Option<u64> = amortization.map(|_| {
                        tiers
                            .iter()
                            .filter(|u| u.to_u8() > t.to_u8())
                            .map(|&u| calls_of(u).unwrap_or(0))
                            .sum()
                    });
                    let (n_compiles, compile_ns) = compiles.get(&(m, t)).copied().unwrap_or((0, 0));
                    TierStay {
                        tier: t.to_u8(),
                        compiles: n_compiles,
                        compile_ns,
                        calls,
                        samples: n_samples,
                        time_ns,
                        per_call_ns,
                        stayed_ns: per_call_ns.zip(later).map(|(c, n)| c * n as f64),
                    }
                })
                .collect();
            let recompilations = match amortization {
                Some(a) => a
                    .recompilations
                    .iter()
                    .filter(|r| r.method == m)
                    .map(|r| {
                        let (gain_ns, why) = match &r.verdict {
                            Verdict::PaidOff { gain_ns } => (Some(*gain_ns), None),
                            Verdict::DidNotPay { loss_ns } => (Some(-loss_ns), None),
                            Verdict::Unclear { why } => (None, Some(why.clone())),
                        };
                        RecompilationRow {
                            from: r.from.to_u8(),
                            to: r.to.to_u8(),
                            at_ns: r.at_ns,
                            verdict: r.verdict.label().to_string(),
                            gain_ns,
                            gain_range_ns: r.gain_range_ns,
                            why,
                        }
                    })
                    .collect(),
                None => {
                    let mut seen = Vec::new();
                    let mut from = Tier::Interpreter;
                    let mut rows = Vec::new();
                    for &(at_ns, to) in &list {
                        if to != from && !seen.contains(&to) {
                            seen.push(to);
                            rows.push(RecompilationRow {
                                from: from.to_u8(),
                                to: to.to_u8(),
                                at_ns,
                                verdict: "not counted".to_string(),
                                gain_ns: None,
                                gain_range_ns: None,
                                why: Some("record with --count-calls for a verdict".into()),
                            });
                        }
                        from = to;
                    }
                    rows
                }
            };
            MethodHistory {
                method: table.of(symbols, m),
                spans,
                tiers: stays,
                recompilations,
            }
        })
        .collect()
}
