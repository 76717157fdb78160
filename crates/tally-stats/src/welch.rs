//! Welch's two-sample t-test: are two systems' mean times different?
//!
//! Welch rather than Student's pooled test because two VMs (or two builds)
//! rarely have equal run-to-run variance, and Welch's test does not assume
//! they do. Georges et al. compare two alternatives in exactly this way: the
//! difference is significant when its confidence interval excludes zero.

use crate::descriptive::mean_and_variance;
use crate::distributions::{t_quantile, t_sf};
use crate::error::{Result, StatsError};
use crate::interval::{two_sided, ConfidenceInterval};
use crate::validate;

/// Outcome of [`welch_t_test`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct WelchTest {
    /// `(mean(a) − mean(b)) / sqrt(s_a²/n_a + s_b²/n_b)`.
    pub t: f64,
    /// Welch–Satterthwaite degrees of freedom (generally fractional).
    pub df: f64,
    /// Two-sided p-value for "the means are equal".
    pub p_value: f64,
    /// Confidence interval of `mean(a) − mean(b)`; `ci.estimate` is the
    /// observed difference.
    pub ci: ConfidenceInterval,
}

impl WelchTest {
    /// Whether the confidence interval of the difference excludes zero, the
    /// paper's criterion for a real difference. Equivalent to
    /// `p_value < 1 − ci.level` up to rounding.
    pub fn is_significant(&self) -> bool {
        self.ci.excludes(0.0)
    }
}

/// Welch's unequal-variance t-test of `mean(a) = mean(b)`, with a
/// confidence interval at `level` for `mean(a) − mean(b)`.
///
/// # Errors
/// [`StatsError::TooFewObservations`] if either sample has fewer than two
/// values; [`StatsError::NonFinite`] on NaN or infinity;
/// [`StatsError::ZeroVariance`] if *both* samples are constant (the
/// statistic would be infinite or 0/0); [`StatsError::InvalidParameter`] for
/// a bad `level`. One constant sample is fine: the degrees of freedom then
/// come from the other alone.
pub fn welch_t_test(a: &[f64], b: &[f64], level: f64) -> Result<WelchTest> {
    validate::level(level)?;
    validate::sample(a, 2)?;
    validate::sample(b, 2)?;
    let (na, nb) = (a.len() as f64, b.len() as f64);
    let (ma, va) = mean_and_variance(a)?;
    let (mb, vb) = mean_and_variance(b)?;
    let (va, vb) = (va / na, vb / nb);
    let pooled = va + vb;
    if pooled == 0.0 {
        return Err(StatsError::ZeroVariance);
    }
    let standard_error = pooled.sqrt();
    let difference = ma - mb;
    let t = difference / standard_error;
    let df = pooled * pooled / (va * va / (na - 1.0) + vb * vb / (nb - 1.0));
    let p_value = (2.0 * t_sf(t.abs(), df)?).min(1.0);
    let half_width = t_quantile(two_sided(level), df)? * standard_error;
    Ok(WelchTest {
        t,
        df,
        p_value,
        ci: ConfidenceInterval {
            estimate: difference,
            lower: difference - half_width,
            upper: difference + half_width,
            level,
        },
    })
}

/// Reference values from SciPy 1.17.1
/// (`scipy.stats.ttest_ind(a, b, equal_var=False)`: `statistic`, `df`,
/// `pvalue`, `confidence_interval(0.95)` and `(0.99)`), computed
/// independently of this crate; only the numbers are kept here.
#[cfg(test)]
mod tests {
    use super::*;

    fn assert_close(got: f64, want: f64, rel: f64, what: &str) {
        assert!(
            (got - want).abs() <= rel * want.abs(),
            "{what}: got {got}, want {want}"
        );
    }

    const A: [f64; 8] = [12.1, 11.8, 12.6, 12.3, 11.9, 12.8, 12.2, 12.0];
    const B: [f64; 6] = [13.0, 12.4, 13.9, 12.7, 14.1, 13.3];
    const C: [f64; 5] = [101.2, 99.8, 100.5, 102.3, 98.9];
    const D: [f64; 7] = [100.9, 101.7, 99.5, 103.0, 100.2, 101.1, 102.4];

    #[test]
    fn significant_difference_matches_scipy() {
        let w = welch_t_test(&A, &B, 0.95).unwrap();
        assert_close(w.t, -3.417168701786608, 1e-12, "t");
        assert_close(w.df, 6.988270854480491, 1e-12, "df");
        assert_close(w.p_value, 0.011207148416563076, 1e-9, "p");
        assert_close(w.ci.lower, -1.7274735428720458, 1e-10, "lower");
        assert_close(w.ci.upper, -0.3141931237946186, 1e-10, "upper");
        assert!(w.is_significant());
        // At 99 % the same data no longer shows a difference.
        let w = welch_t_test(&A, &B, 0.99).unwrap();
        assert_close(w.ci.lower, -2.066855061936341, 1e-10, "lower 99");
        assert_close(w.ci.upper, 0.025188395269676533, 1e-8, "upper 99");
        assert!(!w.is_significant());
    }

    #[test]
    fn insignificant_difference_matches_scipy() {
        let w = welch_t_test(&C, &D, 0.95).unwrap();
        assert_close(w.t, -0.9666115321945157, 1e-12, "t");
        assert_close(w.df, 8.383148512176348, 1e-12, "df");
        assert_close(w.p_value, 0.36079343768693023, 1e-9, "p");
        assert_close(w.ci.lower, -2.4144845156692814, 1e-10, "lower");
        assert_close(w.ci.upper, 0.9801988013835883, 1e-10, "upper");
        assert!(!w.is_significant());
        let w = welch_t_test(&C, &D, 0.99).unwrap();
        assert_close(w.ci.lower, -3.173843650385992, 1e-10, "lower 99");
        assert_close(w.ci.upper, 1.739557936100299, 1e-10, "upper 99");
    }

    #[test]
    fn swapping_samples_negates() {
        let ab = welch_t_test(&A, &B, 0.95).unwrap();
        let ba = welch_t_test(&B, &A, 0.95).unwrap();
        assert_close(ba.t, -ab.t, 1e-14, "t");
        assert_close(ba.p_value, ab.p_value, 1e-14, "p");
        assert_close(ba.ci.lower, -ab.ci.upper, 1e-14, "ci");
    }

    #[test]
    fn degenerate_input() {
        assert_eq!(
            welch_t_test(&[1.0, 1.0], &[2.0, 2.0, 2.0], 0.95),
            Err(StatsError::ZeroVariance)
        );
        // One constant sample: df comes from the other alone (n − 1).
        let w = welch_t_test(&[1.0, 1.0, 1.0], &A, 0.95).unwrap();
        assert_close(w.df, 7.0, 1e-12, "df");
        assert!(welch_t_test(&[1.0], &A, 0.95).is_err());
        assert!(welch_t_test(&A, &[], 0.95).is_err());
        assert_eq!(
            welch_t_test(&A, &[1.0, f64::NAN], 0.95),
            Err(StatsError::NonFinite)
        );
        assert!(welch_t_test(&A, &B, 0.0).is_err());
    }
}
