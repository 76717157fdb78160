//! Method-level phases (Buytaert's MonitorMethod, thesis chapter 3, after Huang et al.): the
//! methods to read counters at, chosen offline from a first run's per-method inclusive times.
//!
//! A method is a phase when it is heavy and coarse: its calls together take at least
//! θ_weight of the run, and one call takes at least θ_grain on average. Reading counters at a
//! phase's entry and exit costs a fixed amount per call, so the estimated overhead of a
//! selection is its calls times that cost, over the run's time.

/// One method as the first run measured it.
#[derive(Clone, Debug, PartialEq)]
pub struct MethodTime {
    pub name: String,
    /// Calls, and their inclusive time (a recursive method's nested calls counted once, in
    /// the outermost).
    pub calls: u64,
    pub inclusive_ns: u64,
}

/// θ_weight (share of the run) and θ_grain (nanoseconds per call).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Thresholds {
    pub weight: f64,
    pub grain_ns: f64,
}

/// A selection of phases and what reading counters there is expected to cost.
#[derive(Clone, Debug, PartialEq)]
pub struct Selection {
    pub thresholds: Thresholds,
    /// Selected methods, heaviest first.
    pub phases: Vec<MethodTime>,
    /// Calls of the selected methods, each read twice (entry and exit).
    pub probed_calls: u64,
    /// `probed_calls × 2 × probe_ns` over the run's time.
    pub estimated_overhead: f64,
    /// Share of the run the phases cover (the top-level ones' inclusive time; nested phases
    /// are not subtracted, so this can exceed 1 when phases nest).
    pub coverage: f64,
}

/// The methods of `methods` that are phases under `t`, for a run of `run_ns`, with the
/// overhead a probe of `probe_ns` per reading gives.
pub fn select(methods: &[MethodTime], run_ns: u64, probe_ns: f64, t: Thresholds) -> Selection {
    let run = run_ns.max(1) as f64;
    let mut phases: Vec<MethodTime> = methods
        .iter()
        .filter(|m| {
            m.calls > 0
                && m.inclusive_ns as f64 >= t.weight * run
                && m.inclusive_ns as f64 / m.calls as f64 >= t.grain_ns
        })
        .cloned()
        .collect();
    phases.sort_by(|a, b| {
        b.inclusive_ns
            .cmp(&a.inclusive_ns)
            .then(a.name.cmp(&b.name))
    });
    let probed_calls: u64 = phases.iter().map(|m| m.calls).sum();
    Selection {
        thresholds: t,
        estimated_overhead: probed_calls as f64 * 2.0 * probe_ns / run,
        coverage: phases.iter().map(|m| m.inclusive_ns as f64).sum::<f64>() / run,
        probed_calls,
        phases,
    }
}

/// Selections over a grid of thresholds, for choosing θ from the estimated overhead: the
/// finest grain (most phases) whose overhead stays within `budget` is the one to use.
pub fn sweep(
    methods: &[MethodTime],
    run_ns: u64,
    probe_ns: f64,
    weights: &[f64],
    grains_ns: &[f64],
) -> Vec<Selection> {
    let mut out = Vec::new();
    for &weight in weights {
        for &grain_ns in grains_ns {
            out.push(select(
                methods,
                run_ns,
                probe_ns,
                Thresholds { weight, grain_ns },
            ));
        }
    }
    out
}

/// Of `selections`, the one with the most phases whose estimated overhead is within
/// `budget`; among equals the lower overhead, then the earlier in `selections` (the grid's
/// lower thresholds).
pub fn best_within(selections: &[Selection], budget: f64) -> Option<&Selection> {
    let mut best: Option<&Selection> = None;
    for s in selections
        .iter()
        .filter(|s| s.estimated_overhead <= budget && !s.phases.is_empty())
    {
        let better = match best {
            None => true,
            Some(b) => {
                s.phases.len() > b.phases.len()
                    || (s.phases.len() == b.phases.len()
                        && s.estimated_overhead < b.estimated_overhead)
            }
        };
        if better {
            best = Some(s);
        }
    }
    best
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(name: &str, calls: u64, inclusive_ns: u64) -> MethodTime {
        MethodTime {
            name: name.into(),
            calls,
            inclusive_ns,
        }
    }

    /// A run of 1 s: `run` once (all of it), `solve` 10 times (60 %), `step` 10,000 times
    /// (30 %), `tiny` a million times (20 %), `rare` once for 1 ms.
    fn run() -> Vec<MethodTime> {
        vec![
            m("App>>run", 1, 1_000_000_000),
            m("App>>solve", 10, 600_000_000),
            m("App>>step", 10_000, 300_000_000),
            m("App>>tiny", 1_000_000, 200_000_000),
            m("App>>rare", 1, 1_000_000),
        ]
    }

    #[test]
    fn phases_are_heavy_and_coarse_methods() {
        let s = select(
            &run(),
            1_000_000_000,
            50.0,
            Thresholds {
                weight: 0.1,
                grain_ns: 10_000.0,
            },
        );
        let names: Vec<&str> = s.phases.iter().map(|p| p.name.as_str()).collect();
        // tiny is heavy but 200 ns a call; rare is coarse but 0.1 % of the run.
        assert_eq!(names, ["App>>run", "App>>solve", "App>>step"]);
        assert_eq!(s.probed_calls, 10_011);
        // 10,011 calls × 2 readings × 50 ns over 1 s.
        assert!((s.estimated_overhead - 10_011.0 * 100.0 / 1e9).abs() < 1e-12);
        assert!((s.coverage - 1.9).abs() < 1e-12);
    }

    #[test]
    fn the_finest_selection_within_the_budget_is_chosen() {
        let all = sweep(
            &run(),
            1_000_000_000,
            50.0,
            &[0.05, 0.1],
            &[100.0, 10_000.0, 1_000_000.0],
        );
        assert_eq!(all.len(), 6);
        // With grain 100 ns, tiny (1 M calls) costs 10 %: over a 3 % budget.
        let best = best_within(&all, 0.03).unwrap();
        assert_eq!(best.phases.len(), 3);
        assert_eq!(best.thresholds.grain_ns, 10_000.0);
        // A generous budget takes tiny too.
        assert_eq!(best_within(&all, 0.2).unwrap().phases.len(), 4);
        assert!(best_within(&all, 0.0).is_none());
        // Weights 0.05 and 0.1 both give the three coarse phases at grain 10 µs: the first
        // (lower) thresholds are kept.
        assert_eq!(best.thresholds.weight, 0.05);
    }
}
