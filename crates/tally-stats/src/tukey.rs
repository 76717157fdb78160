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
            let standard_error =
                (0.5 * ms_within * (1.0 / a.n as f64 + 1.0 / b.n as f64)).sqrt();
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
