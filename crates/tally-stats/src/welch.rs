//! Welch's two-sample t-test: are two systems' mean times different?
//!
//! Welch rather than Student's pooled test because two VMs (or two builds)
//! rarely have equal run-to-run variance, and Welch's test does not assume
//! they do. Georges et al. compare two alternatives in exactly this way: the
//! difference is significant when its confidence interval excludes zero.

use crate::descriptive::{mean_unchecked, variance_unchecked};
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
    let (ma, mb) = (mean_unchecked(a), mean_unchecked(b));
    let va = variance_unchecked(a, ma) / na;
    let vb = variance_unchecked(b, mb) / nb;
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
