//! The order runs happen in.
//!
//! As in `tally bench`, rounds are the outer loop: every round runs each benchmark once per
//! configuration, with the baseline runs (profiling off) spread among them. Slow drift of the
//! machine (thermal state, other load) then lands on all configurations and on the baseline
//! alike instead of biasing whichever ran last, and an interrupted experiment has complete
//! rounds for the configurations it reached.

/// What one process does.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Task<T> {
    /// Profiling off: the denominator of the overhead.
    Baseline,
    /// One configuration under test.
    Profiled(T),
}

/// One process to run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Step<T> {
    /// 1-based round (invocation number).
    pub round: u32,
    /// Index into the suite's benchmarks.
    pub bench: usize,
    pub task: Task<T>,
}

/// `rounds` × benchmarks × configurations, with `baselines` baseline runs per benchmark and
/// round spread evenly among the configurations, each baseline just before the configuration
/// it is closest to (so `baselines == configs.len()` alternates B C B C …).
pub fn interleave<T: Clone>(
    rounds: u32,
    benches: usize,
    configs: &[T],
    baselines: usize,
) -> Vec<Step<T>> {
    let m = configs.len().max(1);
    let mut steps = Vec::new();
    for round in 1..=rounds {
        for bench in 0..benches {
            let mut emitted = 0;
            for (j, c) in configs.iter().enumerate() {
                // Baselines due by the end of configuration j: ceil((j + 1) · b / m).
                let due = ((j + 1) * baselines).div_ceil(m);
                while emitted < due {
                    steps.push(Step {
                        round,
                        bench,
                        task: Task::Baseline,
                    });
                    emitted += 1;
                }
                steps.push(Step {
                    round,
                    bench,
                    task: Task::Profiled(c.clone()),
                });
            }
            while emitted < baselines {
                steps.push(Step {
                    round,
                    bench,
                    task: Task::Baseline,
                });
                emitted += 1;
            }
        }
    }
    steps
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shape(steps: &[Step<char>]) -> String {
        steps
            .iter()
            .map(|s| match s.task {
                Task::Baseline => 'B',
                Task::Profiled(c) => c,
            })
            .collect()
    }

    #[test]
    fn one_baseline_per_configuration_alternates() {
        let s = interleave(2, 2, &['a', 'b', 'c'], 3);
        assert_eq!(shape(&s), "BaBbBc".repeat(4));
        assert_eq!(
            s.iter().map(|s| (s.round, s.bench)).collect::<Vec<_>>()[..7],
            [(1, 0), (1, 0), (1, 0), (1, 0), (1, 0), (1, 0), (1, 1)]
        );
        assert_eq!(s.last().unwrap().round, 2);
    }

    #[test]
    fn fewer_or_more_baselines_are_spread() {
        assert_eq!(shape(&interleave(1, 1, &['a', 'b', 'c', 'd'], 1)), "Babcd");
        assert_eq!(shape(&interleave(1, 1, &['a', 'b', 'c', 'd'], 2)), "BabBcd");
        assert_eq!(shape(&interleave(1, 1, &['a', 'b'], 4)), "BBaBBb");
        assert_eq!(shape(&interleave(1, 1, &['a'], 1)), "Ba");
        assert_eq!(shape(&interleave(1, 1, &[], 2)), "BB");
    }
}
