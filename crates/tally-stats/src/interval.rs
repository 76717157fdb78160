//! Confidence intervals.
//!
//! Georges et al.'s central point is that a benchmark result is an interval,
//! not a number: two systems differ only if their intervals say so. Every
//! interval here is two-sided with the requested coverage (`level`, e.g.
//! 0.95) and is derived from Student's t, which is exact for normal data and
//! robust for the small sample counts (tens of invocations) benchmarks have.

use crate::descriptive::{logarithms, mean_unchecked, variance_unchecked};
use crate::distributions::t_quantile;
use crate::error::{Result, StatsError};
use crate::validate;

/// A point estimate with a two-sided confidence interval around it.
///
/// The interval need not be symmetric about the estimate (ratios and
/// geometric means are not).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ConfidenceInterval {
    /// The point estimate (mean, ratio, difference, …).
    pub estimate: f64,
    /// Lower bound.
    pub lower: f64,
    /// Upper bound.
    pub upper: f64,
    /// Nominal coverage, e.g. 0.95.
    pub level: f64,
}

impl ConfidenceInterval {
    /// Whether `x` lies in the closed interval.
    pub fn contains(&self, x: f64) -> bool {
        self.lower <= x && x <= self.upper
    }

    /// Whether `x` lies outside the interval: for a difference, "excludes 0"
    /// is the statistically significant outcome; for a ratio, "excludes 1".
    pub fn excludes(&self, x: f64) -> bool {
        !self.contains(x)
    }

    /// `upper − lower`.
    pub fn width(&self) -> f64 {
        self.upper - self.lower
    }
}

/// Student-t confidence interval of the mean of one sample:
/// `x̄ ± t_{(1+level)/2, n−1} · s / √n`.
///
/// # Errors
/// [`StatsError::TooFewObservations`] for fewer than two values;
/// [`StatsError::NonFinite`] on NaN or infinity;
/// [`StatsError::InvalidParameter`] if `level` is not strictly between 0 and
/// 1. Identical values give a zero-width interval rather than an error.
pub fn mean_ci(xs: &[f64], level: f64) -> Result<ConfidenceInterval> {
    validate::level(level)?;
    validate::sample(xs, 2)?;
    let n = xs.len() as f64;
    let mean = mean_unchecked(xs);
    let standard_error = (variance_unchecked(xs, mean) / n).sqrt();
    let t = t_quantile(two_sided(level), n - 1.0)?;
    Ok(ConfidenceInterval {
        estimate: mean,
        lower: mean - t * standard_error,
        upper: mean + t * standard_error,
        level,
    })
}

/// Confidence interval of `mean(numerator) / mean(denominator)` for two
/// independent samples, such as a speed-up `mean(old times) / mean(new times)`.
///
/// Method: **Fieller's theorem**. The interval is the set of ratios `ρ` for
/// which `x̄ − ρȳ` is not significantly different from zero, i.e. the
/// solutions of `(x̄ − ρȳ)² ≤ t² (v_x + ρ² v_y)` with `v = s²/n`. Chosen over
/// the delta method because it does not linearise the ratio: with a few
/// noisy invocations the true sampling distribution of a ratio is skewed,
/// and Fieller's interval is correspondingly asymmetric and keeps its
/// coverage, whereas the delta method's symmetric interval
/// `ρ̂ ± t·sqrt(v_x + ρ̂² v_y)/|ȳ|` (which Fieller's approaches as the
/// denominator's relative error shrinks) under-covers. Fieller also says
/// honestly when no finite interval exists. The degrees of freedom are the
/// Welch–Satterthwaite value for `x̄ − ρ̂ȳ`, since the two samples may have
/// different sizes and variances.
///
/// # Errors
/// [`StatsError::TooFewObservations`] if either sample has fewer than two
/// values; [`StatsError::NonFinite`] on NaN or infinity;
/// [`StatsError::ZeroMean`] if the denominator's mean is zero;
/// [`StatsError::Unbounded`] if the denominator's mean is not significantly
/// different from zero at `level` (the confidence set is then unbounded);
/// [`StatsError::InvalidParameter`] for a bad `level`. If both samples are
/// constant the interval has zero width.
pub fn ratio_ci(numerator: &[f64], denominator: &[f64], level: f64) -> Result<ConfidenceInterval> {
    validate::level(level)?;
    validate::sample(numerator, 2)?;
    validate::sample(denominator, 2)?;
    let (nx, ny) = (numerator.len() as f64, denominator.len() as f64);
    let (mx, my) = (mean_unchecked(numerator), mean_unchecked(denominator));
    if my == 0.0 {
        return Err(StatsError::ZeroMean);
    }
    let vx = variance_unchecked(numerator, mx) / nx;
    let vy = variance_unchecked(denominator, my) / ny;
    let ratio = mx / my;
    let pooled = vx + ratio * ratio * vy;
    if pooled == 0.0 {
        return Ok(ConfidenceInterval {
            estimate: ratio,
            lower: ratio,
            upper: ratio,
            level,
        });
    }
    let df = pooled * pooled / (vx * vx / (nx - 1.0) + ratio.powi(4) * vy * vy / (ny - 1.0));
    let t = t_quantile(two_sided(level), df)?;
    // g is the squared relative half-width of the denominator's own interval;
    // at g ≥ 1 that interval reaches zero and the ratio is unbounded.
    let g = t * t * vy / (my * my);
    if g >= 1.0 {
        return Err(StatsError::Unbounded);
    }
    let half = t / my.abs() * (vx * (1.0 - g) + ratio * ratio * vy).sqrt();
    Ok(ConfidenceInterval {
        estimate: ratio,
        lower: (ratio - half) / (1.0 - g),
        upper: (ratio + half) / (1.0 - g),
        level,
    })
}

/// Geometric mean of per-benchmark ratios (e.g. each benchmark's time on
/// system A over its time on system B) with a confidence interval.
///
/// The interval is the t interval of the mean *log* ratio, exponentiated:
/// log ratios are symmetric around zero ("twice as fast" and "half as fast"
/// are equally far from "same"), so their mean is the quantity a t interval
/// describes well, and the result is invariant under swapping A and B.
/// The benchmarks are treated as the sample, so the interval describes the
/// suite's typical ratio, not the noise of any one benchmark.
///
/// # Errors
/// [`StatsError::TooFewObservations`] for fewer than two ratios;
/// [`StatsError::NonFinite`] on NaN or infinity; [`StatsError::NonPositive`]
/// if a ratio is zero or negative; [`StatsError::InvalidParameter`] for a bad
/// `level`.
pub fn geometric_mean_ratio_ci(ratios: &[f64], level: f64) -> Result<ConfidenceInterval> {
    validate::level(level)?;
    validate::sample(ratios, 2)?;
    let logs = logarithms(ratios)?;
    let log_ci = mean_ci(&logs, level)?;
    Ok(ConfidenceInterval {
        estimate: log_ci.estimate.exp(),
        lower: log_ci.lower.exp(),
        upper: log_ci.upper.exp(),
        level,
    })
}

/// The quantile that leaves `(1 − level)/2` in each tail.
pub(crate) fn two_sided(level: f64) -> f64 {
    0.5 + 0.5 * level
}
