//! Outlying invocations, and whether the report's conclusions rest on them.
//!
//! The invocations of one benchmark on one executor should scatter around one value; one far
//! away (a burst of other work on the machine, a page-cache miss, an unlucky collection)
//! pulls the mean, widens the interval and can decide a test. An invocation is an outlier
//! when its value of the metric (the unit everything is computed over) has a modified
//! Z-score beyond ±3.5 (Iglewicz & Hoaglin: distance from the median in units of
//! the median absolute deviation, see [`tally_stats::modified_z_scores`]). Medians, not the
//! mean and standard deviation, because an outlier inflates the standard deviation it would be
//! measured by and so hides itself. hyperfine scores runs the same way but flags only what
//! lies about ten standard deviations out; 3.5 is Iglewicz and Hoaglin's limit for *potential*
//! outliers, which suits a check that flags and weighs them but never drops them.
//!
//! Outliers are flagged, never dropped: they may be how the benchmark really behaves. What
//! the report adds is the answer to "would I conclude otherwise without them?": each
//! comparison with the baseline is made again without the cell's outliers, and any verdict
//! that changes is named.

use tally_stats::modified_z_scores;

use crate::analysis::{compare, Cell, Verdict};

/// Modified Z-scores beyond this (in absolute value) mark an outlier: Iglewicz and
/// Hoaglin's recommendation.
pub(crate) const Z_LIMIT: f64 = 3.5;

/// Fewer invocations than this are not examined: the median absolute deviation of four or
/// fewer values rests on two or three deviations, too few to call any value an outlier.
pub(crate) const MIN_SAMPLES: usize = 5;

/// One outlying invocation.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Outlier {
    /// Its invocation (round) number.
    pub invocation: u32,
    /// Its value of the metric, microseconds.
    pub value: f64,
    /// Its modified Z-score.
    pub z: f64,
}

/// What a cell and the comparisons come to without the cell's outliers.
#[derive(Debug, Clone, PartialEq)]
pub struct Effect {
    /// The cell's mean without them, microseconds.
    pub mean: Option<f64>,
    /// How many comparisons with the baseline the benchmark has (0 with a single executor or
    /// when nothing could be compared): the verdicts that could have changed.
    pub compared: usize,
    /// The comparisons whose verdict is different without them.
    pub changes: Vec<VerdictChange>,
}

/// A comparison with the baseline that concludes otherwise without some outliers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct VerdictChange {
    /// The executor compared with the baseline (an index into the report's executors).
    pub executor: usize,
    /// The verdict with every invocation.
    pub with: Verdict,
    /// The verdict without the outliers.
    pub without: Verdict,
}

/// The outliers among per-invocation values, in invocation order; none below
/// [`MIN_SAMPLES`] values.
pub(crate) fn find(by_round: &[(u32, f64)]) -> Vec<Outlier> {
    if by_round.len() < MIN_SAMPLES {
        return Vec::new();
    }
    let values: Vec<f64> = by_round.iter().map(|&(_, v)| v).collect();
    let Ok(scores) = modified_z_scores(&values) else {
        return Vec::new();
    };
    by_round
        .iter()
        .zip(scores)
        .filter(|(_, z)| z.abs() > Z_LIMIT)
        .map(|(&(invocation, value), z)| Outlier {
            invocation,
            value,
            z,
        })
        .collect()
}

/// Flags the outliers of every cell of one benchmark (already compared with
/// [`compare`]) and works out, cell by cell, what dropping them would change.
pub(crate) fn flag(cells: &mut [Cell], baseline: usize, level: f64) {
    for i in 0..cells.len() {
        let outliers = find(&cells[i].by_round);
        if outliers.is_empty() {
            continue;
        }
        let effect = effect_of_dropping(cells, i, &outliers, baseline, level);
        cells[i].outliers = outliers;
        cells[i].without_outliers = Some(effect);
    }
}

/// Compares the benchmark again with cell `i` stripped of `outliers`. Every comparison is
/// redone, not only cell `i`'s: the baseline's outliers weigh on all of them, and with three
/// or more executors Tukey's test pools every cell's spread.
fn effect_of_dropping(
    cells: &[Cell],
    i: usize,
    outliers: &[Outlier],
    baseline: usize,
    level: f64,
) -> Effect {
    let mut trimmed = cells.to_vec();
    let kept: Vec<(u32, f64)> = cells[i]
        .by_round
        .iter()
        .copied()
        .filter(|(round, _)| !outliers.iter().any(|o| o.invocation == *round))
        .collect();
    trimmed[i].set_samples(kept, level);
    compare(&mut trimmed, baseline, level);
    let verdict = |c: &Cell| c.ratio.as_ref().map(|r| r.verdict());
    let changes = (0..cells.len())
        .filter(|&j| j != baseline)
        .filter_map(|j| {
            let with = verdict(&cells[j]).unwrap_or(Verdict::Untested);
            let without = verdict(&trimmed[j]).unwrap_or(Verdict::Untested);
            (with != without).then_some(VerdictChange {
                executor: j,
                with,
                without,
            })
        })
        .collect();
    Effect {
        mean: trimmed[i].mean,
        compared: cells.iter().filter(|c| c.ratio.is_some()).count(),
        changes,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::{AnalysisSettings, Report};
    use crate::results::Outcome;
    use crate::test_support::{record, results};

    fn rounds(values: &[f64]) -> Vec<(u32, f64)> {
        values
            .iter()
            .enumerate()
            .map(|(k, &v)| (k as u32 + 1, v))
            .collect()
    }

    #[test]
    fn a_wild_invocation_is_flagged_and_ordinary_spread_is_not() {
        let found = find(&rounds(&[100.0, 102.0, 99.0, 101.0, 100.5, 180.0]));
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!((found[0].invocation, found[0].value), (6, 180.0));
        assert!(found[0].z > Z_LIMIT);
        // A fast one is as much an outlier as a slow one.
        let found = find(&rounds(&[100.0, 40.0, 99.0, 101.0, 100.5, 102.0]));
        assert_eq!(found.iter().map(|o| o.invocation).collect::<Vec<_>>(), [2]);
        assert!(found[0].z < -Z_LIMIT);
        // Normal scatter, even a wide one, has none.
        assert!(find(&rounds(&[100.0, 110.0, 92.0, 105.0, 97.0, 103.0, 95.0])).is_empty());
        // Too few invocations to tell.
        assert!(find(&rounds(&[100.0, 101.0, 100.0, 500.0])).is_empty());
    }

    /// Six invocations per cell: `base` on A around 100 µs, `new` on A given by `new_a`; B is
    /// the same on both, without outliers.
    fn report_with(new_a: [f64; 6]) -> Report {
        let base_a = [100.0, 101.0, 99.0, 100.0, 102.0, 100.0];
        let mut inv = Vec::new();
        for k in 0..6 {
            let n = k as u32 + 1;
            inv.push(record("A", "base", n, &[base_a[k]; 6], Outcome::Ok));
            inv.push(record("A", "new", n, &[new_a[k]; 6], Outcome::Ok));
            inv.push(record("B", "base", n, &[base_a[k]; 6], Outcome::Ok));
            inv.push(record("B", "new", n, &[base_a[5 - k]; 6], Outcome::Ok));
        }
        Report::new(&results(inv), &AnalysisSettings::default()).unwrap()
    }

    #[test]
    fn an_outlier_that_decides_the_verdict_is_named() {
        // Five invocations 5 % faster than base, one three times slower: with it, "new" is
        // not distinguishable from base; without it, clearly faster.
        let report = report_with([95.0, 96.0, 94.0, 95.0, 96.0, 300.0]);
        let cell = &report.benchmarks[0].cells[1];
        assert_eq!(cell.outliers.len(), 1);
        assert_eq!(cell.outliers[0].invocation, 6);
        let effect = cell.without_outliers.as_ref().unwrap();
        assert_eq!(effect.mean, Some(95.2));
        assert_eq!(effect.compared, 1);
        assert_eq!(
            effect.changes,
            [VerdictChange {
                executor: 1,
                with: Verdict::NotSignificant,
                without: Verdict::Faster,
            }]
        );
        // The baseline and benchmark B have none.
        assert!(report.benchmarks[0].cells[0].outliers.is_empty());
        assert!(report.benchmarks[1].cells[1].without_outliers.is_none());
    }

    #[test]
    fn an_outlier_that_changes_nothing_says_so() {
        // 20 % faster with or without the one 10 % slower invocation.
        let report = report_with([80.0, 81.0, 79.0, 80.0, 82.0, 90.0]);
        let cell = &report.benchmarks[0].cells[1];
        assert_eq!(cell.outliers.len(), 1);
        assert_eq!(cell.ratio.as_ref().unwrap().verdict(), Verdict::Faster);
        let effect = cell.without_outliers.as_ref().unwrap();
        assert!(effect.changes.is_empty(), "{effect:?}");
        assert_eq!(effect.compared, 1);
        assert_eq!(effect.mean, Some(80.4));
    }

    #[test]
    fn the_baselines_outliers_are_weighed_against_every_comparison() {
        let mut inv = Vec::new();
        let base = [100.0, 101.0, 99.0, 100.0, 101.0, 30.0];
        for (k, b) in base.into_iter().enumerate() {
            let n = k as u32 + 1;
            inv.push(record("A", "base", n, &[b; 6], Outcome::Ok));
            inv.push(record(
                "A",
                "new",
                n,
                &[95.0 + (k % 2) as f64; 6],
                Outcome::Ok,
            ));
        }
        let report = Report::new(&results(inv), &AnalysisSettings::default()).unwrap();
        let base = &report.benchmarks[0].cells[0];
        assert_eq!(base.outliers[0].invocation, 6);
        let effect = base.without_outliers.as_ref().unwrap();
        // With the fast outlier the baseline's mean is 88.5 and its spread hides the
        // difference; without it, "new" is significantly faster.
        assert_eq!(
            effect.changes,
            [VerdictChange {
                executor: 1,
                with: Verdict::NotSignificant,
                without: Verdict::Faster,
            }]
        );
    }
}
