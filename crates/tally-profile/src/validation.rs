//! Checking a sampler against slowdowns of known size at known places (after Burchell & Marr,
//! OOPSLA 2023): what a profile credits to a method, and how far the extra it credits when
//! the method is slowed down is from the slowdown.
//!
//! A sample of a CPU-time trigger stands for one period (`1 / rate`) of the sampled thread's
//! CPU time, part of which the sample itself cost (taking a signal is tens of microseconds
//! of the thread's CPU in a virtual machine), and that part falls where the samples fall. So
//! the program time a profile credits to a method is its self samples times the period less
//! the cost of a sample, which the caller measures (profiled against unprofiled CPU time,
//! over the samples). Samples of the VM's own work (collections, compiling) are not the
//! program's: they are left out. The attribution error of a run with an injected delay is
//! `(credited − credited without the delay − injected) / injected`: 0 for a sampler that
//! credits exactly the injected time to the place, −1 for one that credits none of it.

use std::collections::{BTreeMap, BTreeSet};

use crate::ids::VmState;
use crate::Profile;

/// Program CPU time credited to each method (its self samples, program states only, times
/// the sample period less `sample_cost_ns`, what taking one sample cost the thread), in
/// nanoseconds, by name. Empty when the profile took no method samples.
pub fn credited_ns(profile: &Profile, sample_cost_ns: f64) -> BTreeMap<String, f64> {
    let rate = profile.header.sampler.rate_hz;
    let mut out = BTreeMap::new();
    if rate == 0 {
        return out;
    }
    let period_ns = (1e9 / f64::from(rate) - sample_cost_ns.max(0.0)).max(0.0);
    let symbols = profile.symbols();
    for s in &profile.samples {
        if matches!(s.state, VmState::Gc | VmState::Compiling) {
            continue;
        }
        if let Some(top) = symbols.resolve_stack(&s.frames).first() {
            *out.entry(symbols.method_name(top.method)).or_insert(0.0) += period_ns;
        }
    }
    out
}

/// The attribution error of each delayed run: `credited` is what each delayed run credited
/// the place, `injected` what was injected in it (both ns, one per run), `baseline` what
/// the runs without the delay credited the place (their mean is subtracted). `None` when
/// there is no baseline run or a run injected nothing.
pub fn attribution_errors(
    credited: &[f64],
    injected: &[f64],
    baseline: &[f64],
) -> Option<Vec<f64>> {
    if baseline.is_empty() || credited.len() != injected.len() {
        return None;
    }
    let base = baseline.iter().sum::<f64>() / baseline.len() as f64;
    credited
        .iter()
        .zip(injected)
        .map(|(&c, &i)| (i > 0.0).then(|| (c - base - i) / i))
        .collect()
}

/// The ranking a correct profile of the delayed run has: the baseline's credited times with
/// `injected_ns` added to `place`, heaviest first, ties by name.
pub fn expected_ranking(
    baseline: &BTreeMap<String, f64>,
    place: &str,
    injected_ns: f64,
) -> Vec<String> {
    let mut expected = baseline.clone();
    *expected.entry(place.to_string()).or_insert(0.0) += injected_ns;
    ranking(&expected)
}

/// Methods by credited time, heaviest first, ties by name.
pub fn ranking(credited: &BTreeMap<String, f64>) -> Vec<String> {
    let mut v: Vec<(&String, f64)> = credited.iter().map(|(m, &t)| (m, t)).collect();
    v.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(b.0)));
    v.into_iter().map(|(m, _)| m.clone()).collect()
}

/// Whether `place` has the same rank among the first `n` of `observed` as in `expected`
/// (both in or both out of the top `n`, and at the same position when in): the one ranking
/// question an injected delay answers for certain.
pub fn place_ranked_as_expected(
    observed: &[String],
    expected: &[String],
    place: &str,
    n: usize,
) -> bool {
    let rank = |r: &[String]| r.iter().take(n).position(|m| m == place);
    rank(observed) == rank(expected)
}

/// Calls per method of an exhaustive profile, by name; `None` without exact counts.
pub fn exact_calls_by_name(profile: &Profile) -> Option<BTreeMap<String, u64>> {
    let exact = profile.exact.as_ref()?;
    let symbols = profile.symbols();
    let mut out = BTreeMap::new();
    for (i, &n) in exact.calls.iter().enumerate() {
        if n > 0 {
            *out.entry(symbols.method_name(crate::ids::MethodId(i as u32)))
                .or_insert(0) += n;
        }
    }
    Some(out)
}

/// Methods of an exhaustive profile that ran bytecodes in a frame of their own. The others
/// cannot be slowed down at their entry: primitives run no bytecodes, and trivial methods
/// (getters, setters, constants) are answered without a frame. Empty without exact counts.
pub fn methods_with_frames(profile: &Profile) -> BTreeSet<String> {
    let Some(exact) = profile.exact.as_ref() else {
        return BTreeSet::new();
    };
    let symbols = profile.symbols();
    exact
        .bytecodes
        .iter()
        .enumerate()
        .filter(|(_, &n)| n > 0)
        .map(|(i, _)| symbols.method_name(crate::ids::MethodId(i as u32)))
        .collect()
}

/// Methods of an exhaustive profile that called anything (a method, a primitive or a trivial
/// method: every send is a yieldpoint). A method that called nothing reaches no yieldpoint
/// between its entry and its return, which is where a polling sampler takes the samples of a
/// delay at its entry. Empty without exact counts.
pub fn methods_that_call(profile: &Profile) -> BTreeSet<String> {
    let Some(exact) = profile.exact.as_ref() else {
        return BTreeSet::new();
    };
    let symbols = profile.symbols();
    exact
        .edges
        .iter()
        .filter(|(_, &n)| n > 0)
        .map(|(e, _)| symbols.method_name(e.caller))
        .collect()
}

/// The share of all calls that a profile's CBS call graph estimates went into `method` (its
/// edges' weights estimate calls); `None` when CBS recorded no edge at all.
pub fn cbs_call_share(profile: &Profile, method: &str) -> Option<f64> {
    let edges = profile.cbs_edges.by_name(&profile.symbols());
    let total: u64 = edges.values().sum();
    if total == 0 {
        return None;
    }
    let into: u64 = edges
        .iter()
        .filter(|((_, _, callee), _)| callee == method)
        .map(|(_, &w)| w)
        .sum();
    Some(into as f64 / total as f64)
}

/// What taking one sample costs the sampled program, in ns, from two sets of profiled runs
/// of the same program at different rates: their extra CPU time over their extra samples.
/// The fixed costs of profiling (setting up, the drain thread, writing the file) are the same
/// at both rates and cancel, which comparing against an unprofiled run would not. `None`
/// when the sample counts do not differ; never negative.
pub fn sample_cost_ns(cpu_s: (f64, f64), samples: (f64, f64)) -> Option<f64> {
    let extra_samples = samples.1 - samples.0;
    if extra_samples.abs() < 1.0 {
        return None;
    }
    Some(((cpu_s.1 - cpu_s.0) * 1e9 / extra_samples).max(0.0))
}

/// Why a place was chosen.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PlaceRole {
    /// The method with the most self time.
    Hot,
    /// A method with a few percent of it (nearest 5 %).
    Warm,
    /// A method called often with the least self time: what a sampler barely sees. One that
    /// calls nothing is preferred: a polling sampler finds no yieldpoint in it after the
    /// delay, so its samples go elsewhere.
    Cold,
}

/// A method to slow down, with its share of the reference run's self time and its calls.
#[derive(Clone, Debug, PartialEq)]
pub struct Place {
    pub role: PlaceRole,
    pub method: String,
    pub share: f64,
    pub calls: u64,
}

/// The hot, warm and cold places of a reference run, from the time credited to each method,
/// its exact calls, and the methods that call something (`methods_that_call`). Only methods
/// (not blocks, which have no entry hook of their own) called at least `min_calls` times
/// qualify, so that a delay is spread over many entries. A role no method fits is left out.
pub fn choose_places(
    credited: &BTreeMap<String, f64>,
    calls: &BTreeMap<String, u64>,
    callers: &BTreeSet<String>,
    min_calls: u64,
) -> Vec<Place> {
    let total: f64 = credited.values().sum();
    let share = |m: &str| {
        if total > 0.0 {
            credited.get(m).copied().unwrap_or(0.0) / total
        } else {
            0.0
        }
    };
    let candidates: Vec<(&String, u64, f64)> = calls
        .iter()
        .filter(|(m, &n)| n >= min_calls && m.contains(">>") && !m.starts_with("[]"))
        .map(|(m, &n)| (m, n, share(m)))
        .collect();
    let mut places: Vec<Place> = Vec::new();
    let place = |role, c: &(&String, u64, f64)| Place {
        role,
        method: c.0.clone(),
        share: c.2,
        calls: c.1,
    };
    if let Some(hot) = candidates
        .iter()
        .filter(|c| c.2 > 0.0)
        .max_by(|a, b| a.2.total_cmp(&b.2).then(b.0.cmp(a.0)))
    {
        places.push(place(PlaceRole::Hot, hot));
    }
    let taken = |places: &[Place], m: &str| places.iter().any(|p| p.method == m);
    let distance = |s: f64| (s / 0.05).ln().abs();
    if let Some(warm) = candidates
        .iter()
        .filter(|c| (0.005..=0.2).contains(&c.2) && !taken(&places, c.0))
        .min_by(|a, b| distance(a.2).total_cmp(&distance(b.2)).then(a.0.cmp(b.0)))
    {
        places.push(place(PlaceRole::Warm, warm));
    }
    if let Some(cold) = candidates
        .iter()
        .filter(|c| !taken(&places, c.0))
        .min_by(|a, b| {
            (callers.contains(a.0).cmp(&callers.contains(b.0)))
                .then(a.2.total_cmp(&b.2))
                .then(b.1.cmp(&a.1))
                .then(a.0.cmp(b.0))
        })
    {
        places.push(place(PlaceRole::Cold, cold));
    }
    places
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::{ClassId, MethodId, RawFrame};
    use crate::sample::{Origin, Sample, SampleFlags};
    use crate::{Event, EventKind};

    fn profile(rate_hz: u32, samples: &[(VmState, &[u32])]) -> Profile {
        let named = |m: u32, name: &str| Event {
            time_ns: 0,
            kind: EventKind::MethodCompiled {
                method: MethodId(m),
                class: ClassId(0),
                name: name.into(),
                file: String::new(),
                line: 1,
                bytecode_len: 4,
            },
        };
        let mut p = Profile {
            events: vec![named(0, "A>>run"), named(1, "A>>step")],
            samples: samples
                .iter()
                .map(|(state, frames)| Sample {
                    time_ns: 1,
                    state: *state,
                    origin: Origin::Immediate,
                    flags: SampleFlags::NONE,
                    depth: frames.len() as u32,
                    frames: frames
                        .iter()
                        .map(|&m| RawFrame::interpreted(MethodId(m), 0))
                        .collect(),
                })
                .collect(),
            ..Profile::default()
        };
        p.header.sampler.rate_hz = rate_hz;
        p
    }

    #[test]
    fn a_sample_credits_one_period_to_its_innermost_method() {
        let p = profile(
            1000,
            &[
                (VmState::Interpreting, &[1, 0]),
                (VmState::Compiled, &[1, 0]),
                (VmState::Primitive, &[0]),
                // The VM's own work is not the program's.
                (VmState::Gc, &[1, 0]),
                (VmState::Compiling, &[0]),
            ],
        );
        assert!(exact_calls_by_name(&p).is_none());
        let mut exact = crate::ExactCounts::new();
        exact.on_call(None, MethodId(0));
        exact.on_call(Some((MethodId(0), 1)), MethodId(1));
        exact.on_call(Some((MethodId(0), 1)), MethodId(1));
        let with_counts = Profile {
            exact: Some(exact),
            ..p.clone()
        };
        let calls = exact_calls_by_name(&with_counts).unwrap();
        assert_eq!((calls["A>>run"], calls["A>>step"]), (1, 2));
        // `run` called `step`, which called nothing.
        assert_eq!(
            methods_that_call(&with_counts)
                .into_iter()
                .collect::<Vec<_>>(),
            ["A>>run"]
        );
        // `step` was called but ran no bytecodes (answered without a frame).
        assert!(methods_with_frames(&p).is_empty());
        let mut framed = with_counts.clone();
        framed.exact.as_mut().unwrap().on_bytecodes(MethodId(0), 7);
        assert_eq!(
            methods_with_frames(&framed).into_iter().collect::<Vec<_>>(),
            ["A>>run"]
        );
        let c = credited_ns(&p, 0.0);
        assert_eq!(c["A>>step"], 2e6);
        assert_eq!(c["A>>run"], 1e6);
        // A sample that cost the thread 40 µs stands for 960 µs of the program.
        assert_eq!(credited_ns(&p, 40e3)["A>>step"], 2.0 * 960e3);
        assert!(credited_ns(&profile(0, &[(VmState::Interpreting, &[0])]), 0.0).is_empty());
    }

    #[test]
    fn cbs_estimates_a_share_of_the_calls_into_a_method() {
        let mut p = profile(250, &[]);
        assert_eq!(cbs_call_share(&p, "A>>step"), None);
        let edge = |callsite| crate::CallEdge {
            caller: MethodId(0),
            callsite,
            callee: MethodId(1),
        };
        p.cbs_edges.add(edge(1), 30);
        p.cbs_edges.add(edge(5), 10);
        p.cbs_edges.add(
            crate::CallEdge {
                caller: MethodId(1),
                callsite: 2,
                callee: MethodId(0),
            },
            60,
        );
        assert_eq!(cbs_call_share(&p, "A>>step"), Some(0.4));
        assert_eq!(cbs_call_share(&p, "A>>none"), Some(0.0));
    }

    #[test]
    fn a_sample_costs_the_extra_cpu_over_the_extra_samples() {
        // 1,000 samples in 1.04 s, 4,000 in 1.16 s: 40 µs each, whatever the fixed costs.
        let c = sample_cost_ns((1.04, 1.16), (1000.0, 4000.0)).unwrap();
        assert!((c - 40e3).abs() < 1e-6, "{c}");
        // Noise that makes the faster rate cheaper gives no cost, never a negative one.
        assert_eq!(sample_cost_ns((1.1, 1.0), (1000.0, 4000.0)), Some(0.0));
        assert_eq!(sample_cost_ns((1.0, 1.1), (1000.0, 1000.0)), None);
    }

    #[test]
    fn the_error_is_the_extra_credited_against_the_injected() {
        // Baseline credits 10 ms; 50 ms injected; credited 60 (exact), 35 (half), 10 (none).
        let e = attribution_errors(&[60e6, 35e6, 10e6], &[50e6; 3], &[9e6, 11e6]).unwrap();
        assert_eq!(e, [0.0, -0.5, -1.0]);
        assert!(attribution_errors(&[1.0], &[1.0], &[]).is_none());
        assert!(attribution_errors(&[1.0], &[0.0], &[1.0]).is_none());
        assert!(attribution_errors(&[1.0, 2.0], &[1.0], &[1.0]).is_none());
    }

    #[test]
    fn places_are_the_hottest_one_near_five_percent_and_a_busy_unseen_one() {
        let ms = |v: &[(&str, f64)]| -> BTreeMap<String, f64> {
            v.iter().map(|(m, t)| (m.to_string(), *t)).collect()
        };
        let credited = ms(&[
            ("A>>hot", 62.0),
            ("A>>big", 25.0),
            ("A>>warm", 6.0),
            ("A>>mild", 2.0),
            ("A>>rare", 5.0),
            ("[] in A>>hot", 0.0),
        ]);
        let calls: BTreeMap<String, u64> = [
            ("A>>hot", 100),
            ("A>>big", 50),
            ("A>>warm", 40),
            ("A>>mild", 30),
            ("A>>rare", 2),
            ("A>>unseen", 5000),
            ("A>>seldom", 20),
            ("[] in A>>hot", 90000),
        ]
        .into_iter()
        .map(|(m, n)| (m.to_string(), n))
        .collect();
        let callers: BTreeSet<String> = ["A>>unseen".to_string()].into();
        let p = choose_places(&credited, &calls, &BTreeSet::new(), 10);
        let picked: Vec<(PlaceRole, &str)> =
            p.iter().map(|p| (p.role, p.method.as_str())).collect();
        // `rare` is at 5 % exactly but has too few calls; blocks never qualify; of the two
        // unseen methods the busier is cold.
        assert_eq!(
            picked,
            [
                (PlaceRole::Hot, "A>>hot"),
                (PlaceRole::Warm, "A>>warm"),
                (PlaceRole::Cold, "A>>unseen")
            ]
        );
        assert!((p[0].share - 0.62).abs() < 1e-12);
        assert_eq!(p[2].calls, 5000);
        // A cold method that calls nothing is preferred to a busier one that calls.
        let p = choose_places(&credited, &calls, &callers, 10);
        assert_eq!(
            (p[2].role, p[2].method.as_str()),
            (PlaceRole::Cold, "A>>seldom")
        );
        // Nothing sampled: no hot place, no warm one; still a cold one.
        let none = choose_places(&BTreeMap::new(), &calls, &BTreeSet::new(), 10);
        assert_eq!(none.len(), 1);
        assert_eq!(none[0].role, PlaceRole::Cold);
    }

    #[test]
    fn a_delay_moves_its_place_up_the_expected_ranking() {
        let base: BTreeMap<String, f64> = [("A>>a", 50.0), ("A>>b", 30.0), ("A>>c", 10.0)]
            .into_iter()
            .map(|(m, t)| (m.to_string(), t))
            .collect();
        assert_eq!(ranking(&base), ["A>>a", "A>>b", "A>>c"]);
        let expected = expected_ranking(&base, "A>>c", 30.0);
        assert_eq!(expected, ["A>>a", "A>>c", "A>>b"]);
        // A profile that missed the delay ranks c last: wrong within the top 2, and also
        // within the top 3 (position).
        let observed = ranking(&base);
        assert!(!place_ranked_as_expected(&observed, &expected, "A>>c", 2));
        assert!(!place_ranked_as_expected(&observed, &expected, "A>>c", 3));
        // Within the top 1 both leave c out: nothing to tell.
        assert!(place_ranked_as_expected(&observed, &expected, "A>>c", 1));
        // A method the baseline never sampled enters the ranking.
        assert_eq!(expected_ranking(&base, "A>>d", 100.0)[0], "A>>d");
    }
}
