//! How one method's calls in one tier spread over the run, and what that says about its cost
//! per call: an estimate whose error covers how the cost varied within the run, and a test of
//! the analysis' premise that the calls are alike.
//!
//! The VM reads every method's call counts per tier at each decision period under
//! `--count-calls` (`TierCallCounts` events), so the run falls into stretches between two
//! readings, each with the calls a (method, tier) made in it and the samples it had there.
//! Consecutive stretches are merged into *groups* of at least [`MIN_GROUP_CALLS`] calls:
//! a call is counted when it starts, while its samples fall where it runs, so a group of few
//! long calls would be priced by where its boundaries cut them.

/// Fewer calls than this make a group's cost per call the cost of where its boundaries cut
/// long calls, not a price.
pub const MIN_GROUP_CALLS: u64 = 5;

/// A cost per call that differs by more than this factor between two groups of a tier's
/// calls, beyond the samples' error, breaks the analysis' assumption that calls are alike.
pub const COST_DRIFT: f64 = 2.0;

/// Fewer groups than this say too little about how a cost varies for their spread to be
/// used as its error (with one or two degrees of freedom Student's t multiplies it tenfold).
pub const MIN_GROUPS_FOR_SPREAD: usize = 4;

/// Calls and samples of consecutive stretches of the run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Group {
    pub calls: u64,
    pub samples: u64,
    /// The number of the group's first call among the tier's calls (1-based).
    pub first_call: u64,
    /// Loop back-edges the calls took (`None`: not counted).
    pub loops: Option<u64>,
}

impl Group {
    fn last_call(&self) -> u64 {
        self.first_call + self.calls.saturating_sub(1)
    }

    fn middle_call(&self) -> f64 {
        (self.first_call + self.last_call()) as f64 / 2.0
    }
}

/// One reading of a (method, tier)'s counts: when, its calls so far, and its loop
/// back-edges so far (`None`: not counted).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Reading {
    pub time_ns: u64,
    pub calls: u64,
    pub loops: Option<u64>,
}

/// The groups of one (method, tier): `readings` in time order; `samples` the times of its
/// samples, sorted. Samples after the last reading count in the last stretch.
pub fn groups(readings: &[Reading], samples: &[u64]) -> Vec<Group> {
    let counted = !readings.is_empty() && readings.iter().all(|r| r.loops.is_some());
    let empty = |first_call| Group {
        calls: 0,
        samples: 0,
        first_call,
        loops: counted.then_some(0),
    };
    let mut stretches: Vec<Group> = Vec::with_capacity(readings.len());
    let (mut calls_before, mut loops_before, mut taken) = (0u64, 0u64, 0usize);
    for (k, r) in readings.iter().enumerate() {
        let upto = if k + 1 == readings.len() {
            samples.len()
        } else {
            samples.partition_point(|&t| t <= r.time_ns)
        };
        let upto = upto.max(taken);
        let loops = r.loops.unwrap_or(0);
        stretches.push(Group {
            calls: r.calls.saturating_sub(calls_before),
            samples: (upto - taken) as u64,
            loops: counted.then(|| loops.saturating_sub(loops_before)),
            ..empty(0)
        });
        calls_before = calls_before.max(r.calls);
        loops_before = loops_before.max(loops);
        taken = upto;
    }
    if readings.is_empty() && !samples.is_empty() {
        stretches.push(Group {
            samples: samples.len() as u64,
            ..empty(0)
        });
    }
    let add = |a: &mut Group, b: &Group| {
        a.calls += b.calls;
        a.samples += b.samples;
        a.loops = a.loops.zip(b.loops).map(|(x, y)| x + y);
    };
    let mut groups: Vec<Group> = Vec::new();
    let mut open = empty(1);
    for stretch in &stretches {
        add(&mut open, stretch);
        if open.calls >= MIN_GROUP_CALLS {
            let next = open.first_call + open.calls;
            groups.push(open);
            open = empty(next);
        }
    }
    if open.calls > 0 || open.samples > 0 {
        match groups.last_mut() {
            Some(last) => add(last, &open),
            None => groups.push(open),
        }
    }
    groups
}

/// The loop back-edges per call of `groups` together, when they were counted.
pub fn loops_per_call(groups: &[Group]) -> Option<f64> {
    let calls: u64 = groups.iter().map(|g| g.calls).sum();
    let loops = groups.iter().map(|g| g.loops).sum::<Option<u64>>()?;
    (calls > 0).then(|| loops as f64 / calls as f64)
}

/// Calls of one tier whose loop back-edges per call (the work they did, counted exactly)
/// differ by more than [`COST_DRIFT`] between two groups, a call without loops counting as
/// one iteration's work; the cheapest and the costliest group by that measure.
pub fn unlike_in_work(groups: &[Group]) -> Option<UnlikeWork> {
    let work = |g: &Group| Some((g.loops? + g.calls) as f64 / g.calls.max(1) as f64);
    let counted: Vec<(usize, f64)> = groups
        .iter()
        .enumerate()
        .filter(|(_, g)| g.calls > 0)
        .map(|(k, g)| Some((k, work(g)?)))
        .collect::<Option<_>>()?;
    let &(least, low) = counted.iter().min_by(|a, b| a.1.total_cmp(&b.1))?;
    let &(most, high) = counted.iter().max_by(|a, b| a.1.total_cmp(&b.1))?;
    if high <= COST_DRIFT * low {
        return None;
    }
    let mut runs: Vec<bool> = Vec::new();
    for &(_, w) in &counted {
        let (below, above) = (w * COST_DRIFT < high, w > COST_DRIFT * low);
        if below != above && runs.last() != Some(&above) {
            runs.push(above);
        }
    }
    Some(UnlikeWork {
        direction: direction_of(&runs),
        least: groups[least],
        most: groups[most],
    })
}

/// Calls of one tier that did different work (see [`unlike_in_work`]).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct UnlikeWork {
    pub direction: Direction,
    pub least: Group,
    pub most: Group,
}

impl UnlikeWork {
    /// The reason, in words, for the tier named `tier`.
    pub fn describe(&self, tier: &str) -> String {
        let at = |g: &Group| {
            let per_call = g.loops.unwrap_or(0) as f64 / g.calls.max(1) as f64;
            format!("{} ({})", loops_text(per_call), calls_text(g))
        };
        let (least, most) = (at(&self.least), at(&self.most));
        let moved = match self.direction {
            Direction::Grew => format!("grew from {least} to {most}"),
            Direction::Fell => format!("fell from {most} to {least}"),
            Direction::UpAndDown => format!("went up and down between {least} and {most}"),
        };
        format!(
            "calls differ in work: the loop iterations per call in {tier} {moved}, so the \
             calls before and after the recompilation do not compare"
        )
    }
}

/// Back-edges per call as a person reads them.
pub fn loops_text(per_call: f64) -> String {
    if per_call >= 100.0 {
        format!("{per_call:.0}")
    } else {
        format!("{per_call:.1}")
    }
}

fn calls_text(g: &Group) -> String {
    if g.calls == 1 {
        format!("call {}", g.first_call)
    } else {
        format!("calls {}–{}", g.first_call, g.last_call())
    }
}

/// L (false) then H (true) is growth, H then L a fall, anything longer up and down.
fn direction_of(runs: &[bool]) -> Direction {
    match runs {
        [false, true] => Direction::Grew,
        [true, false] => Direction::Fell,
        _ => Direction::UpAndDown,
    }
}

/// A cost per call priced from samples, ns, and its variance, ns².
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PerCall {
    pub ns: f64,
    pub variance: f64,
    /// The variance over that of a Poisson count of the samples (1 when the groups vary no
    /// more than sampling explains).
    pub dispersion: f64,
    /// Degrees of freedom of the variance: the groups less one where their spread gives
    /// it (an estimate from few groups is itself uncertain), infinite where the Poisson
    /// count does.
    pub dof: f64,
}

/// The cost per call of `groups` at `t_unit_ns` a sample. Its variance is the larger of a
/// Poisson count's and, from [`MIN_GROUPS_FOR_SPREAD`] groups on, what the groups' own
/// spread says (the variance of a ratio estimate over clusters): what varies within the run
/// beyond sampling error — phases, caches, the other thread competing for the core — also
/// varies from run to run, and a verdict judged only against the Poisson error flips
/// between runs.
pub fn per_call(groups: &[Group], t_unit_ns: f64) -> Option<PerCall> {
    let calls: u64 = groups.iter().map(|g| g.calls).sum();
    let samples: u64 = groups.iter().map(|g| g.samples).sum();
    if calls == 0 {
        return None;
    }
    let n = calls as f64;
    let c = samples as f64 / n;
    let poisson = (samples as f64 + 1.0) / (n * n);
    let k = groups.len() as f64;
    let spread = if groups.len() >= MIN_GROUPS_FOR_SPREAD {
        let sum: f64 = groups
            .iter()
            .map(|g| (g.samples as f64 - c * g.calls as f64).powi(2))
            .sum();
        k / (k - 1.0) * sum / (n * n)
    } else {
        0.0
    };
    let variance = poisson.max(spread);
    Some(PerCall {
        ns: c * t_unit_ns,
        variance: variance * t_unit_ns * t_unit_ns,
        dispersion: variance / poisson,
        dof: if spread > poisson {
            k - 1.0
        } else {
            f64::INFINITY
        },
    })
}

/// The fewest and the most samples a count of `n` may stand for: about two standard
/// deviations of a Poisson count either way (a count of 0 may stand for 3).
pub fn fewest(n: u64) -> f64 {
    let n = n as f64;
    (n - 2.0 * n.sqrt()).max(0.0)
}

pub fn most(n: u64) -> f64 {
    let n = n as f64;
    n + 2.0 * (n + 1.0).sqrt() + 1.0
}

/// The cheapest and the costliest cost per call, ns, of `groups` merged (in call order) until
/// each has at least `min_samples` samples, so that neither extreme is the noise of a few
/// samples; `None` without calls.
pub fn cost_range(groups: &[Group], t_unit_ns: f64, min_samples: u64) -> Option<(f64, f64)> {
    let mut merged: Vec<(u64, u64)> = Vec::new();
    let mut open = (0u64, 0u64);
    for g in groups {
        open = (open.0 + g.calls, open.1 + g.samples);
        if open.1 >= min_samples && open.0 > 0 {
            merged.push(open);
            open = (0, 0);
        }
    }
    if open != (0, 0) {
        match merged.last_mut() {
            Some(last) => *last = (last.0 + open.0, last.1 + open.1),
            None => merged.push(open),
        }
    }
    merged
        .iter()
        .filter(|m| m.0 > 0)
        .map(|&(calls, samples)| samples as f64 * t_unit_ns / calls as f64)
        .fold(None, |range, c| match range {
            None => Some((c, c)),
            Some((lo, hi)) => Some((f64::min(lo, c), f64::max(hi, c))),
        })
}

/// Which way a cost per call moved within a tier.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Direction {
    Grew,
    Fell,
    UpAndDown,
}

/// Calls of one tier that are not alike: two groups whose costs per call differ by more
/// than [`COST_DRIFT`] even at the ends of their samples' error nearest each other.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Unlike {
    pub direction: Direction,
    /// The cheapest and the costliest group, and their costs per call, ns.
    pub cheap: Group,
    pub cheap_ns: f64,
    pub costly: Group,
    pub costly_ns: f64,
}

impl Unlike {
    /// The reason, in words, for the tier named `tier`; `work_alike` when the calls' loop
    /// iterations were counted and did not change (the cost did, not the work).
    pub fn describe(&self, tier: &str, work_alike: bool) -> String {
        let at = |ns: f64, g: &Group| format!("{} µs ({})", micros(ns), calls_text(g));
        let (cheap, costly) = (
            at(self.cheap_ns, &self.cheap),
            at(self.costly_ns, &self.costly),
        );
        let moved = match self.direction {
            Direction::Grew => format!("grew from {cheap} to {costly}{}", self.rate()),
            Direction::Fell => format!("fell from {costly} to {cheap}{}", self.rate()),
            Direction::UpAndDown => format!("went up and down between {cheap} and {costly}"),
        };
        if work_alike {
            format!(
                "calls differ in cost with the same work: the cost per call in {tier} {moved} \
                 while its loop iterations per call stayed the same (callers moving up the \
                 tiers, a phase of the program), and priced by its cheapest or its costliest \
                 stretch the verdict would turn"
            )
        } else {
            format!(
                "calls differ in work: the cost per call in {tier} {moved}, so the calls \
                 before and after the recompilation do not compare"
            )
        }
    }

    /// ", about F× every call" where the change is steep enough to say so per call.
    fn rate(&self) -> String {
        let (from, to) = match self.direction {
            Direction::Grew => (&self.cheap, &self.costly),
            _ => (&self.costly, &self.cheap),
        };
        let span = (to.middle_call() - from.middle_call()).abs();
        if span <= 0.0 || self.cheap_ns <= 0.0 {
            return String::new();
        }
        let factor = (self.costly_ns / self.cheap_ns).powf(1.0 / span);
        if factor >= 1.1 {
            format!(", about {factor:.1}× every call")
        } else {
            format!(
                ", {:.1}× over {span:.0} calls",
                self.costly_ns / self.cheap_ns
            )
        }
    }
}

fn micros(ns: f64) -> String {
    let us = ns / 1e3;
    if us >= 100.0 {
        format!("{us:.0}")
    } else if us >= 1.0 {
        format!("{us:.2}")
    } else {
        format!("{us:.3}")
    }
}

/// Whether `groups` hold calls that are not alike (see [`Unlike`]).
pub fn unlike(groups: &[Group], t_unit_ns: f64) -> Option<Unlike> {
    if groups.len() < 2 {
        return None;
    }
    let low = |g: &Group| fewest(g.samples) / g.calls as f64;
    let high = |g: &Group| most(g.samples) / g.calls as f64;
    let costly = (0..groups.len()).max_by(|&a, &b| low(&groups[a]).total_cmp(&low(&groups[b])))?;
    let cheap = (0..groups.len()).min_by(|&a, &b| high(&groups[a]).total_cmp(&high(&groups[b])))?;
    if costly == cheap || low(&groups[costly]) <= COST_DRIFT * high(&groups[cheap]) {
        return None;
    }
    // Each group that is clearly below the costliest (L) or clearly above the cheapest (H),
    // in call order: L then H is growth, H then L a fall, anything longer up and down.
    let (floor, ceiling) = (high(&groups[cheap]), low(&groups[costly]));
    let mut runs: Vec<bool> = Vec::new();
    for g in groups {
        let (below, above) = (high(g) * COST_DRIFT < ceiling, low(g) > COST_DRIFT * floor);
        if below != above && runs.last() != Some(&above) {
            runs.push(above);
        }
    }
    let direction = direction_of(&runs);
    let cost = |g: &Group| g.samples as f64 * t_unit_ns / g.calls as f64;
    Some(Unlike {
        direction,
        cheap: groups[cheap],
        cheap_ns: cost(&groups[cheap]),
        costly: groups[costly],
        costly_ns: cost(&groups[costly]),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn g(calls: u64, samples: u64, first_call: u64) -> Group {
        Group {
            calls,
            samples,
            first_call,
            loops: None,
        }
    }

    fn r(time_ns: u64, calls: u64) -> Reading {
        Reading {
            time_ns,
            calls,
            loops: None,
        }
    }

    #[test]
    fn stretches_merge_into_groups_of_enough_calls_and_a_short_tail_joins_the_last() {
        // Readings at 10, 20, 30, 40 ns with 3, 6, 12, 13 calls so far; samples at 5, 15,
        // 15, 25, 45 (after the last reading: the last stretch's).
        let readings = [r(10, 3), r(20, 6), r(30, 12), r(40, 13)];
        let groups = groups(&readings, &[5, 15, 15, 25, 45]);
        assert_eq!(groups, vec![g(6, 3, 1), g(7, 2, 7)]);
    }

    #[test]
    fn a_tier_with_fewer_calls_than_a_group_is_one_group() {
        assert_eq!(groups(&[r(10, 2), r(20, 3)], &[1, 2, 11]), vec![g(3, 3, 1)]);
        assert_eq!(groups(&[], &[1, 2]), vec![g(0, 2, 1)]);
    }

    #[test]
    fn back_edges_are_summed_per_group_and_tell_calls_that_did_more_work() {
        let counted = |time_ns, calls, loops| Reading {
            time_ns,
            calls,
            loops: Some(loops),
        };
        // 100 back-edges a call for the first 10 calls, then 1,000.
        let readings = [
            counted(10, 5, 500),
            counted(20, 10, 1000),
            counted(30, 15, 6000),
            counted(40, 20, 11000),
        ];
        let groups = groups(&readings, &[]);
        assert_eq!(
            groups.iter().map(|g| g.loops).collect::<Vec<_>>(),
            vec![Some(500), Some(500), Some(5000), Some(5000)]
        );
        assert_eq!(loops_per_call(&groups), Some(550.0));
        let u = unlike_in_work(&groups).unwrap();
        assert_eq!(u.direction, Direction::Grew);
        let text = u.describe("baseline");
        assert!(
            text.contains(
                "iterations per call in baseline grew from 100 (calls 1–5) to 1000 (calls 16–20)"
            ),
            "{text}"
        );
        // Alike calls, and calls whose back-edges were not counted, pass.
        let alike = [counted(10, 5, 500), counted(20, 10, 1100)];
        assert_eq!(unlike_in_work(&super::groups(&alike, &[])), None);
        assert_eq!(unlike_in_work(&[g(5, 1, 1), g(5, 9, 6)]), None);
        assert_eq!(loops_per_call(&[g(5, 1, 1)]), None);
    }

    #[test]
    fn the_variance_covers_groups_that_vary_more_than_sampling_explains() {
        // 100 samples over 1,000 calls, spread evenly: Poisson alone.
        let even = [g(500, 50, 1), g(500, 50, 501)];
        let p = per_call(&even, 1000.0).unwrap();
        assert!((p.ns - 100.0).abs() < 1e-9);
        assert!((p.dispersion - 1.0).abs() < 1e-9);
        assert_eq!(p.dof, f64::INFINITY);
        assert!((p.variance - 101.0 / 1e6 * 1e6).abs() < 1e-6);
        // The same totals, 45, 5, 45, 5: the spread's variance rules.
        let uneven = [
            g(250, 45, 1),
            g(250, 5, 251),
            g(250, 45, 501),
            g(250, 5, 751),
        ];
        let q = per_call(&uneven, 1000.0).unwrap();
        assert!((q.ns - 100.0).abs() < 1e-9);
        assert!(q.dispersion > 10.0, "{q:?}");
        assert_eq!(q.dof, 3.0);
        // Two groups tell too little: Poisson alone.
        let two = per_call(&[g(500, 90, 1), g(500, 10, 501)], 1000.0).unwrap();
        assert_eq!((two.dispersion, two.dof), (1.0, f64::INFINITY));
        assert!(per_call(&[], 1000.0).is_none());
    }

    #[test]
    fn calls_that_grow_fall_or_alternate_in_cost_are_told_apart_and_alike_ones_pass() {
        let grew = [g(10, 10, 1), g(10, 40, 11), g(10, 160, 21)];
        let u = unlike(&grew, 1000.0).unwrap();
        assert_eq!(u.direction, Direction::Grew);
        assert_eq!((u.cheap.first_call, u.costly.first_call), (1, 21));
        let text = u.describe("interpreter", false);
        assert!(
            text.contains("grew from 1.00 µs (calls 1–10) to 16.00 µs (calls 21–30)"),
            "{text}"
        );
        assert!(text.contains("about 1.1× every call"), "{text}");
        let fell: Vec<Group> = grew.iter().rev().copied().collect();
        assert_eq!(unlike(&fell, 1000.0).unwrap().direction, Direction::Fell);
        let alternating = [g(10, 10, 1), g(10, 160, 11), g(10, 10, 21), g(10, 160, 31)];
        let u = unlike(&alternating, 1000.0).unwrap();
        assert_eq!(u.direction, Direction::UpAndDown);
        assert!(u
            .describe("baseline", false)
            .contains("went up and down between"));
        assert!(u
            .describe("baseline", true)
            .starts_with("calls differ in cost with the same work"));
        // Twice the cost, but within what 10 and 20 samples may stand for.
        assert_eq!(unlike(&[g(10, 10, 1), g(10, 20, 11)], 1000.0), None);
        assert_eq!(unlike(&[g(10, 10, 1)], 1000.0), None);
    }

    #[test]
    fn the_cost_range_takes_groups_of_enough_samples() {
        // 1 µs a call, then 3 µs, then a short tail of 2 samples merged into the last.
        let groups = [g(10, 10, 1), g(10, 30, 11), g(10, 2, 21)];
        assert_eq!(cost_range(&groups, 1000.0, 10), Some((1000.0, 1600.0)));
        // Too few samples for two groups: one price.
        assert_eq!(cost_range(&groups, 1000.0, 100), Some((1400.0, 1400.0)));
        assert_eq!(cost_range(&[], 1000.0, 10), None);
    }

    #[test]
    fn a_steep_growth_is_said_per_call() {
        // Doubling every call: 5 calls of 1..16 units, then 5 of 32..512.
        let u = unlike(&[g(5, 31, 1), g(5, 992, 6)], 1000.0).unwrap();
        let text = u.describe("interpreter", false);
        assert!(text.contains("about 2.0× every call"), "{text}");
    }
}
