//! The verdict on one recompilation: first whether the analysis' premises hold for it (the
//! calls before and after are alike), then whether its gain keeps its sign over its error.

use super::spread::{self, fewest, most, Group};
use super::{TierCost, Verdict, BEYOND_MODEL, MIN_CALLS, MIN_SAMPLES};
use crate::ids::Tier;

/// The coverage of a gain's range: two standard deviations either way of a normal error.
const COVERAGE: f64 = 0.97725;

/// More samples than this many times the run's would not be a practical advice: the gain is
/// too near zero for sampling to tell.
const MOST_SAMPLES_FACTOR: f64 = 100.0;

/// One side of a move: a tier, the method's figures there and how its calls spread.
pub(super) struct Side<'a> {
    pub tier: Tier,
    pub cost: Option<&'a TierCost>,
    pub groups: Vec<Group>,
    /// The groups whose calls price the side: all of them after the move; before it, the
    /// later half of its calls, which stand in for what the calls after the move would have
    /// cost there: a method's first calls pay for warm-up (lookups, inline caches filling,
    /// code and data not yet in the caches) that later ones no longer need, and how much
    /// of that a tier's price holds depends on when the move happened to come.
    pub priced: Vec<Group>,
}

impl<'a> Side<'a> {
    /// The side after the move.
    pub fn after(tier: Tier, cost: Option<&'a TierCost>, groups: Vec<Group>) -> Side<'a> {
        Side {
            tier,
            cost,
            priced: groups.clone(),
            groups,
        }
    }

    /// The side before the move.
    pub fn before(tier: Tier, cost: Option<&'a TierCost>, groups: Vec<Group>) -> Side<'a> {
        let calls: u64 = groups.iter().map(|g| g.calls).sum();
        let later: Vec<Group> = groups
            .iter()
            .copied()
            .filter(|g| g.first_call > calls / 2)
            .collect();
        Side {
            tier,
            cost,
            priced: if later.is_empty() {
                groups.clone()
            } else {
                later
            },
            groups,
        }
    }

    /// Its cost per call and the error of that.
    fn price(&self, t_unit_ns: f64) -> Option<spread::PerCall> {
        spread::per_call(&self.priced, t_unit_ns)
    }
    fn calls(&self) -> u64 {
        self.cost.map_or(0, |c| c.calls)
    }

    fn samples(&self) -> u64 {
        self.cost.map_or(0, |c| c.samples)
    }
}

/// A method's move from one tier to another, and what prices it.
pub(super) struct Move<'a> {
    pub from: Side<'a>,
    pub to: Side<'a>,
    /// C(m,to).
    pub compile_ns: u64,
    /// The speedup the controller's model expected of the move, when it decided it.
    pub model: Option<f64>,
    pub t_unit_ns: f64,
    /// The profile's sampling rate (0: unknown), for saying what rate would tell.
    pub rate_hz: u32,
}

pub(super) struct Judged {
    pub verdict: Verdict,
    pub gain_range_ns: Option<(f64, f64)>,
}

fn unclear(why: String) -> Judged {
    Judged {
        verdict: Verdict::Unclear { why },
        gain_range_ns: None,
    }
}

pub(super) fn judge(m: &Move) -> Judged {
    let (from, to) = (&m.from, &m.to);
    let calls = to.calls();
    if calls == 0 && to.samples() > 0 {
        return unclear(format!(
            "it ran in {} ({} samples) without a call there: an activation moved in by \
             on-stack replacement, whose cost per call is not defined",
            to.tier.name(),
            to.samples()
        ));
    }
    if calls == 0 {
        let c = m.compile_ns as f64;
        return Judged {
            verdict: Verdict::DidNotPay { loss_ns: c },
            gain_range_ns: Some((-c, -c)),
        };
    }
    if from.calls() < MIN_CALLS {
        return unclear(format!(
            "only {} call(s) in {}: the cost of so few activations is not a cost per call",
            from.calls(),
            from.tier.name()
        ));
    }
    if let Some(why) = work_differs(m) {
        return unclear(why);
    }
    // Calls whose cost grew within a tier did more work as the run went on, unless their
    // loop iterations, counted, say otherwise: what the later ones would have cost in the
    // other tier cannot be priced from the earlier ones, and a verdict either way would rest
    // on that price. A cost that fell, or went up and down, or changed with the work the
    // same, is also what compiled code looks like while its callers move up the tiers, are
    // inlined and deoptimized, what a tier's warm-up and a program's phases look like: the
    // verdict stands when no stretch of the run would turn it.
    let work_alike = spread::loops_per_call(&from.groups).is_some()
        && spread::loops_per_call(&to.groups).is_some();
    let unlike = |s: &Side| spread::unlike(&s.groups, m.t_unit_ns);
    let (unlike_from, unlike_to) = (unlike(from), unlike(to));
    for (side, u) in [(to, unlike_to), (from, unlike_from)] {
        let Some(u) = u else { continue };
        if (u.direction == spread::Direction::Grew && !work_alike)
            || !holds_however_priced(m, unlike_from.as_ref(), unlike_to.as_ref())
        {
            return unclear(u.describe(&side.tier.name(), work_alike));
        }
    }
    if let Some(why) = beyond_model(m) {
        return unclear(why);
    }
    gain(m)
}

/// Where the profile counted loop back-edges, whether the calls did different work: within
/// either tier, or before the move against after it (the later half of the calls before,
/// which price it, against those after).
fn work_differs(m: &Move) -> Option<String> {
    for side in [&m.to, &m.from] {
        if let Some(u) = spread::unlike_in_work(&side.groups) {
            return Some(u.describe(&side.tier.name()));
        }
    }
    let before = spread::loops_per_call(&m.from.priced)?;
    let after = spread::loops_per_call(&m.to.groups)?;
    let (low, high) = (before.min(after) + 1.0, before.max(after) + 1.0);
    (high > spread::COST_DRIFT * low).then(|| {
        format!(
            "calls differ in work: those after the recompilation took {} loop iterations each \
             in {}, those before {} in {}, so their costs do not compare",
            spread::loops_text(after),
            m.to.tier.name(),
            spread::loops_text(before),
            m.from.tier.name()
        )
    })
}

/// Whether the gain keeps its sign with each tier whose calls are unlike priced by its
/// cheapest and by its costliest stretch (of at least [`MIN_SAMPLES`] samples, so that no
/// extreme is a few samples' noise), the others by their average: calls whose cost changed
/// within a tier (a callee of interpreted callers, later called from compiled code or
/// inlined, pays for the transition at first) leave a verdict standing when no part of the
/// run would turn it.
fn holds_however_priced(
    m: &Move,
    unlike_from: Option<&spread::Unlike>,
    unlike_to: Option<&spread::Unlike>,
) -> bool {
    let range = |s: &Side, u: Option<&spread::Unlike>| match u {
        Some(_) => spread::cost_range(&s.groups, m.t_unit_ns, MIN_SAMPLES),
        None => s.price(m.t_unit_ns).map(|p| {
            let half = 2.0 * p.variance.sqrt();
            ((p.ns - half).max(0.0), p.ns + half)
        }),
    };
    let (Some((from_low, from_high)), Some((to_low, to_high))) =
        (range(&m.from, unlike_from), range(&m.to, unlike_to))
    else {
        return false;
    };
    let (calls, compile) = (m.to.calls() as f64, m.compile_ns as f64);
    let worst = calls * (from_low - to_high) - compile;
    let best = calls * (from_high - to_low) - compile;
    worst > 0.0 || best < 0.0
}

/// A cost per call that moved across the recompilation far beyond what the model expects of
/// the tiers, either way, even at the ends of the samples' error nearest the model.
fn beyond_model(m: &Move) -> Option<String> {
    let model = m.model?;
    let (nj, ni) = (m.from.samples(), m.to.samples());
    let (calls_from, calls_to) = (m.from.calls() as f64, m.to.calls() as f64);
    if nj < MIN_SAMPLES || ni < MIN_SAMPLES || calls_from == 0.0 {
        return None;
    }
    let speedup = |from_samples: f64, to_samples: f64| {
        (from_samples / calls_from) / (to_samples / calls_to).max(f64::MIN_POSITIVE)
    };
    let least = speedup(fewest(nj), most(ni));
    let greatest = speedup(most(nj), fewest(ni));
    let point = speedup(nj as f64, ni as f64);
    let (from, to) = (m.from.tier.name(), m.to.tier.name());
    let expects = format!("while the controller's model expects {model:.1}× of the move");
    let differ = "the calls made before and after did different work, so their costs do not \
                  compare";
    if least > BEYOND_MODEL * model {
        Some(format!(
            "its cost per call fell {point:.0}× from {from} to {to}, {expects}: {differ}"
        ))
    } else if greatest * BEYOND_MODEL < model {
        let moved = if point >= 1.0 {
            format!("fell only {point:.1}×")
        } else {
            format!("rose {:.1}×", 1.0 / point.max(f64::MIN_POSITIVE))
        };
        Some(format!(
            "its cost per call {moved} from {from} to {to}, {expects}: {differ} (or the code \
             of {to} is far slower than the model's figures)"
        ))
    } else {
        None
    }
}

/// The gain and its range over its error: the verdict when the range keeps one sign.
fn gain(m: &Move) -> Judged {
    let calls = m.to.calls() as f64;
    let (Some(before), Some(after)) = (m.from.price(m.t_unit_ns), m.to.price(m.t_unit_ns)) else {
        return unclear("no calls to price a side with".into());
    };
    let point = calls * (before.ns - after.ns) - m.compile_ns as f64;
    let sd = calls * (before.variance + after.variance).sqrt();
    let half = multiplier(&before, &after) * sd;
    let (lowest, highest) = (point - half, point + half);
    let verdict = if lowest > 0.0 || highest < 0.0 {
        if let Some(why) = unchecked_price_turns_it(m, before.ns, after.ns, lowest > 0.0) {
            return unclear(why);
        }
        if lowest > 0.0 {
            Verdict::PaidOff { gain_ns: point }
        } else {
            Verdict::DidNotPay { loss_ns: -point }
        }
    } else {
        let (nj, ni) = (m.from.samples(), m.to.samples());
        let varied = if before.dispersion.max(after.dispersion) > 1.5 {
            " and of how its cost per call varied within the run"
        } else {
            ""
        };
        Verdict::Unclear {
            why: format!(
                "within the error of the samples ({nj} in {}, {ni} in {}){varied}: the gain \
                 lies between {:.2} and {:+.2} ms; {}",
                m.from.tier.name(),
                m.to.tier.name(),
                lowest / 1e6,
                highest / 1e6,
                what_would_tell(point, half, m.rate_hz)
            ),
        }
    };
    Judged {
        verdict,
        gain_range_ns: Some((lowest, highest)),
    }
}

/// A price from too few samples for its stretches to show whether its calls cost alike
/// ([`spread::MIN_GROUPS_FOR_SPREAD`] groups of [`MIN_SAMPLES`]) may be off by the factor
/// the premise check would have caught ([`spread::COST_DRIFT`]): a verdict must hold with
/// such a price that far off against it. Costs per call that differed twofold between runs
/// with the same work, on a few dozen samples each, turned verdicts without it.
fn unchecked_price_turns_it(m: &Move, before: f64, after: f64, paid: bool) -> Option<String> {
    let needed = spread::MIN_GROUPS_FOR_SPREAD as u64 * MIN_SAMPLES;
    let priced = |s: &Side| s.priced.iter().map(|g| g.samples).sum::<u64>();
    let off = |s: &Side| {
        if priced(s) < needed {
            spread::COST_DRIFT
        } else {
            1.0
        }
    };
    let (f_before, f_after) = (off(&m.from), off(&m.to));
    if f_before == 1.0 && f_after == 1.0 {
        return None;
    }
    let (calls, compile) = (m.to.calls() as f64, m.compile_ns as f64);
    let turned = if paid {
        calls * (before / f_before - after * f_after) - compile <= 0.0
    } else {
        calls * (before * f_before - after / f_after) - compile >= 0.0
    };
    let fewest = [&m.from, &m.to]
        .into_iter()
        .filter(|s| priced(s) < needed)
        .min_by_key(|s| priced(s))?;
    turned.then(|| {
        format!(
            "too few samples to tell whether its calls cost alike ({} priced its calls in {}): \
             a price half or twice what they say would turn the verdict; about {}× the \
             samples would tell",
            priced(fewest),
            fewest.tier.name(),
            needed.div_ceil(priced(fewest).max(1)).max(2)
        )
    })
}

/// How many standard errors either way the gain's range spans: two for errors that are
/// Poisson counts, Student's t quantile of the same coverage where a side's error is
/// estimated from the spread of a few groups (degrees of freedom by Welch–Satterthwaite).
fn multiplier(before: &spread::PerCall, after: &spread::PerCall) -> f64 {
    let (a, b) = (before.variance, after.variance);
    let share = |v: f64, dof: f64| if dof.is_finite() { v * v / dof } else { 0.0 };
    let denominator = share(a, before.dof) + share(b, after.dof);
    if denominator <= 0.0 {
        return 2.0;
    }
    let dof = (a + b).powi(2) / denominator;
    tally_stats::distributions::t_quantile(COVERAGE, dof).unwrap_or(2.0)
}

/// How many more samples would put the gain `point` beyond its error `half` (half the
/// range): the error shrinks with the square root of the samples.
fn what_would_tell(point: f64, half: f64, rate_hz: u32) -> String {
    let factor = (half / point.abs()).powi(2);
    if !factor.is_finite() || factor > MOST_SAMPLES_FACTOR {
        return "the gain is too near zero for more samples to tell".into();
    }
    let factor = factor.ceil().max(2.0);
    let rate = if rate_hz > 0 {
        format!(
            ": --rate {:.0}, or a run {factor:.0}× as long",
            factor * f64::from(rate_hz)
        )
    } else {
        String::new()
    };
    format!("about {factor:.0}× the samples would tell{rate}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_error_estimated_from_few_groups_widens_the_range() {
        let poisson = spread::PerCall {
            ns: 1.0,
            variance: 1.0,
            dispersion: 1.0,
            dof: f64::INFINITY,
        };
        assert_eq!(multiplier(&poisson, &poisson), 2.0);
        let few = spread::PerCall {
            dof: 4.0,
            ..poisson
        };
        let m = multiplier(&few, &few);
        // Welch–Satterthwaite: 8 degrees of freedom; t at 97.725 % is about 2.37.
        assert!((m - 2.366).abs() < 0.001, "{m}");
        assert!(multiplier(&few, &poisson) < m);
    }

    #[test]
    fn what_would_tell_scales_with_the_square_of_the_error() {
        assert_eq!(
            what_would_tell(1.0, 2.0, 1000),
            "about 4× the samples would tell: --rate 4000, or a run 4× as long"
        );
        assert_eq!(
            what_would_tell(10.0, 2.0, 0),
            "about 2× the samples would tell"
        );
        assert!(what_would_tell(0.0, 2.0, 1000).contains("too near zero"));
        assert!(what_would_tell(0.1, 2.0, 1000).contains("too near zero"));
    }
}
