//! Tukey's honestly significant difference test, the post-hoc step after a
//! significant ANOVA: which pairs of alternatives differ?
//!
//! Every pair is compared against the studentized range distribution for
//! *all* `k` groups, which keeps the family-wise error rate at `1 − level`
//! however many pairs there are. Unequal group sizes use the Tukey–Kramer
//! standard error `sqrt(MS_within / 2 · (1/n_i + 1/n_j))`, so a benchmark
//! with a failed invocation still gets analysed.

use crate::anova::{decompose, Anova};
use crate::error::Result;
use crate::interval::ConfidenceInterval;
use crate::studentized_range::{studentized_range_quantile, studentized_range_sf};
use crate::validate;

/// One pair of groups in a [`TukeyHsd`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PairwiseComparison {
    /// Index of the first group (always less than `second`).
    pub first: usize,
    /// Index of the second group.
    pub second: usize,
    /// Simultaneous confidence interval of `mean(first) − mean(second)`;
    /// `ci.estimate` is the observed difference.
    pub ci: ConfidenceInterval,
    /// Family-wise adjusted p-value: `P(Q > |difference| / SE)`.
    pub p_value: f64,
}

impl PairwiseComparison {
    /// Whether the simultaneous interval excludes zero, i.e. the pair differs
    /// at the family-wise level. Equivalent to `p_value < 1 − ci.level` up to
    /// rounding.
    pub fn is_significant(&self) -> bool {
        self.ci.excludes(0.0)
    }
}

/// Outcome of [`tukey_hsd`].
#[derive(Debug, Clone, PartialEq)]
pub struct TukeyHsd {
    /// The ANOVA the comparisons share their error term with; look at its
    /// p-value first.
    pub anova: Anova,
    /// Critical value of the studentized range at the requested level.
    pub q_critical: f64,
    /// Every pair `(i, j)` with `i < j`, ordered by `i` then `j`.
    pub comparisons: Vec<PairwiseComparison>,
}

impl TukeyHsd {
    /// The comparison of groups `i` and `j` (in either order; if given as
    /// `i > j`, the stored comparison of `j` with `i` is returned, whose
    /// difference is `mean(j) − mean(i)`).
    pub fn pair(&self, i: usize, j: usize) -> Option<&PairwiseComparison> {
        let (first, second) = if i < j { (i, j) } else { (j, i) };
        self.comparisons
            .iter()
            .find(|c| c.first == first && c.second == second)
    }
}

/// Tukey HSD (Tukey–Kramer for unequal sizes) over `groups`, with
/// simultaneous intervals at `level`.
///
/// Cost: one studentized-range quantile plus one tail probability per pair,
/// each a double integral of a few milliseconds, so 10 groups (45 pairs)
/// take a fraction of a second and 50 groups several seconds.
///
/// # Errors
/// As [`crate::anova::one_way_anova`] (too few or empty groups, NaN, no
/// within-group degrees of freedom, all groups constant), plus
/// [`crate::StatsError::InvalidParameter`] for a bad `level`.
pub fn tukey_hsd<G: AsRef<[f64]>>(groups: &[G], level: f64) -> Result<TukeyHsd> {
    validate::level(level)?;
    let (anova, stats) = decompose(groups)?;
    let k = stats.len();
    let df = anova.df_within as f64;
    let ms_within = anova.ms_within();
    let q_critical = studentized_range_quantile(level, k, df)?;
    let mut comparisons = Vec::with_capacity(k * (k - 1) / 2);
    for (i, a) in stats.iter().enumerate() {
        for (j, b) in stats.iter().enumerate().skip(i + 1) {
            let difference = a.mean - b.mean;
            let standard_error = (0.5 * ms_within * (1.0 / a.n as f64 + 1.0 / b.n as f64)).sqrt();
            let p_value = studentized_range_sf(difference.abs() / standard_error, k, df)?;
            let half_width = q_critical * standard_error;
            comparisons.push(PairwiseComparison {
                first: i,
                second: j,
                ci: ConfidenceInterval {
                    estimate: difference,
                    lower: difference - half_width,
                    upper: difference + half_width,
                    level,
                },
                p_value,
            });
        }
    }
    Ok(TukeyHsd {
        anova,
        q_critical,
        comparisons,
    })
}

/// Reference values from SciPy 1.17.1 (`scipy.stats.tukey_hsd`: `statistic`,
/// `pvalue`, `confidence_interval(0.95)` and `(0.99)`; and
/// `scipy.stats.studentized_range.ppf` for the critical values), computed
/// independently of this crate; only the numbers are kept here. SciPy's
/// `tukey_hsd` uses the Tukey–Kramer standard error for unequal sizes, as
/// this crate does.
#[cfg(test)]
mod tests {
    use super::*;
    use crate::StatsError;

    const GROUPS: [&[f64]; 4] = [
        &[24.5, 23.9, 25.1, 24.8, 24.2],
        &[25.3, 26.1, 25.8, 26.4, 25.0, 25.9, 26.2],
        &[24.0, 24.7, 23.6, 24.4],
        &[26.8, 27.5, 26.1, 27.9, 27.2, 26.6],
    ];

    fn assert_close(got: f64, want: f64, rel: f64, what: &str) {
        assert!(
            (got - want).abs() <= rel * want.abs(),
            "{what}: got {got}, want {want}"
        );
    }

    #[test]
    fn every_pair_matches_scipy() {
        // (i, j, mean_i − mean_j, p, 95 % lower, 95 % upper, 99 % lower, 99 % upper)
        let want = [
            (
                0,
                1,
                -1.3142857142857132,
                0.002915239323781127,
                -2.2041476113613263,
                -0.42442381721010003,
                -2.4484331454976633,
                -0.18013828307376323,
            ),
            (
                0,
                2,
                0.32499999999999574,
                0.804437239742825,
                -0.6944648753515044,
                1.3444648753514958,
                -0.974329113192125,
                1.6243291131921165,
            ),
            (
                0,
                3,
                -2.5166666666666657,
                2.224314621268597e-06,
                -3.436907977725888,
                -1.5964253556074435,
                -3.6895332906482627,
                -1.3438000426850687,
            ),
            (
                1,
                2,
                1.639285714285709,
                0.0006592492148627116,
                0.6867454617166737,
                2.591825966854744,
                0.42525341991794985,
                2.853318008653468,
            ),
            (
                1,
                3,
                -1.2023809523809526,
                0.004076689672372735,
                -2.0478798413623798,
                -0.35688206339952533,
                -2.279986810303603,
                -0.12477509445830215,
            ),
            (
                2,
                3,
                -2.8416666666666615,
                9.857544229774362e-07,
                -3.822647200355923,
                -1.8606861329774,
                -4.091946688778975,
                -1.5913866445543472,
            ),
        ];
        let hsd95 = tukey_hsd(&GROUPS, 0.95).unwrap();
        let hsd99 = tukey_hsd(&GROUPS, 0.99).unwrap();
        assert_close(hsd95.q_critical, 3.996977724446693, 1e-8, "q 95");
        assert_close(hsd99.q_critical, 5.094230951668011, 1e-8, "q 99");
        assert_eq!(hsd95.comparisons.len(), 6);
        for (i, j, diff, p, lo95, hi95, lo99, hi99) in want {
            let what = format!("pair ({i}, {j})");
            let c = hsd95.pair(i, j).unwrap();
            assert_eq!((c.first, c.second), (i, j));
            assert_close(c.ci.estimate, diff, 1e-12, &what);
            assert_close(c.p_value, p, 1e-6, &what);
            assert_close(c.ci.lower, lo95, 1e-8, &what);
            assert_close(c.ci.upper, hi95, 1e-8, &what);
            assert_eq!(c.is_significant(), p < 0.05, "{what}");
            let c = hsd99.pair(j, i).unwrap();
            assert_close(c.ci.lower, lo99, 1e-8, &what);
            assert_close(c.ci.upper, hi99, 1e-8, &what);
            assert_eq!(c.is_significant(), p < 0.01, "{what}");
        }
        assert_close(hsd95.anova.f, 30.516620328684354, 1e-12, "F");
    }

    #[test]
    fn three_groups_none_significant_match_scipy() {
        let groups: [&[f64]; 3] = [
            &[3.1, 2.9, 3.4, 3.0],
            &[3.3, 3.6, 3.2, 3.5, 3.8],
            &[3.0, 3.7, 3.2],
        ];
        let want = [
            (
                0,
                1,
                -0.38000000000000034,
                0.13543824965074447,
                -0.8747446550373295,
                0.11474465503732872,
            ),
            (
                0,
                2,
                -0.20000000000000018,
                0.6001925382115444,
                -0.7632915690987975,
                0.3632915690987971,
            ),
            (
                1,
                2,
                0.18000000000000016,
                0.6343111345977273,
                -0.3586097590269951,
                0.7186097590269954,
            ),
        ];
        let hsd = tukey_hsd(&groups, 0.95).unwrap();
        for (i, j, diff, p, lo, hi) in want {
            let what = format!("pair ({i}, {j})");
            let c = hsd.pair(i, j).unwrap();
            assert_close(c.ci.estimate, diff, 1e-12, &what);
            assert_close(c.p_value, p, 1e-6, &what);
            assert_close(c.ci.lower, lo, 1e-8, &what);
            assert_close(c.ci.upper, hi, 1e-8, &what);
            assert!(!c.is_significant(), "{what}");
        }
    }

    #[test]
    fn degenerate_input() {
        assert!(tukey_hsd(&GROUPS, 1.0).is_err());
        let empty: [&[f64]; 2] = [&[1.0, 2.0], &[]];
        assert_eq!(
            tukey_hsd(&empty, 0.95),
            Err(StatsError::EmptyGroup { index: 1 })
        );
        let constant: [&[f64]; 2] = [&[1.0, 1.0], &[2.0, 2.0]];
        assert_eq!(tukey_hsd(&constant, 0.95), Err(StatsError::ZeroVariance));
    }
}
