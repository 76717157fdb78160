//! Confidence intervals.
//!
//! Georges et al.'s central point is that a benchmark result is an interval,
//! not a number: two systems differ only if their intervals say so. Every
//! interval here is two-sided with the requested coverage (`level`, e.g.
//! 0.95) and is derived from Student's t, which is exact for normal data and
//! robust for the small sample counts (tens of invocations) benchmarks have.

use crate::descriptive::{logarithms, mean_and_variance};
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
    let (mean, variance) = mean_and_variance(xs)?;
    let standard_error = (variance / n).sqrt();
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
/// nominal coverage under normality, whereas the delta method's symmetric
/// interval `ρ̂ ± t·sqrt(v_x + ρ̂² v_y)/|ȳ|` (which Fieller's approaches as
/// the denominator's relative error shrinks) tends to under-cover exactly
/// when the denominator is noisy. Fieller also says honestly when no finite
/// interval exists. The degrees of freedom are the Welch–Satterthwaite value
/// for `x̄ − ρ̂ȳ`, since the two samples may have different sizes and
/// variances.
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
    let (mx, vx) = mean_and_variance(numerator)?;
    let (my, vy) = mean_and_variance(denominator)?;
    if my == 0.0 {
        return Err(StatsError::ZeroMean);
    }
    let (vx, vy) = (vx / nx, vy / ny);
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

/// Reference values from SciPy 1.17.1, computed independently of this crate
/// (only the numbers are kept here): `scipy.stats.t.interval` with
/// `scipy.stats.sem` for the mean; the same on `numpy.log` of the ratios,
/// exponentiated, with `scipy.stats.gmean` for the geometric mean; and for
/// Fieller's interval the roots (`numpy.roots`) of
/// `(ȳ² − t²v_y)ρ² − 2x̄ȳρ + (x̄² − t²v_x) = 0` with `t` from
/// `scipy.stats.t.ppf` at the Welch–Satterthwaite degrees of freedom.
#[cfg(test)]
mod tests {
    use super::*;

    fn assert_close(got: f64, want: f64, rel: f64) {
        assert!(
            (got - want).abs() <= rel * want.abs(),
            "got {got}, want {want}"
        );
    }

    const NUMERATOR: [f64; 6] = [10.2, 10.8, 9.9, 10.5, 11.1, 10.4];
    const DENOMINATOR: [f64; 5] = [8.1, 7.6, 8.4, 7.9, 8.8];

    #[test]
    fn mean_interval_matches_scipy() {
        let a = [12.1, 11.8, 12.6, 12.3, 11.9, 12.8, 12.2, 12.0];
        let ci = mean_ci(&a, 0.95).unwrap();
        assert_close(ci.estimate, 12.2125, 1e-14);
        assert_close(ci.lower, 11.924839721487457, 1e-12);
        assert_close(ci.upper, 12.500160278512544, 1e-12);
        assert!(ci.contains(12.0) && ci.excludes(12.6));
    }

    #[test]
    fn fieller_interval_matches_reference() {
        let ci = ratio_ci(&NUMERATOR, &DENOMINATOR, 0.95).unwrap();
        assert_close(ci.estimate, 1.284722222222222, 1e-14);
        assert_close(ci.lower, 1.1974529169124017, 1e-10);
        assert_close(ci.upper, 1.3811485223611175, 1e-10);
        // Asymmetric, as a ratio's interval should be.
        assert!(ci.upper - ci.estimate > ci.estimate - ci.lower);
        let ci = ratio_ci(&NUMERATOR, &DENOMINATOR, 0.99).unwrap();
        assert_close(ci.lower, 1.1586658013379927, 1e-10);
        assert_close(ci.upper, 1.4308187916865673, 1e-10);
    }

    #[test]
    fn fieller_endpoints_solve_the_defining_equation() {
        // At each endpoint ρ, (x̄ − ρȳ)² = t²(v_x + ρ²v_y): a check that does
        // not rely on any reference implementation.
        use crate::descriptive::{mean, variance};
        let (mx, my) = (mean(&NUMERATOR).unwrap(), mean(&DENOMINATOR).unwrap());
        let vx = variance(&NUMERATOR).unwrap() / 6.0;
        let vy = variance(&DENOMINATOR).unwrap() / 5.0;
        let ci = ratio_ci(&NUMERATOR, &DENOMINATOR, 0.95).unwrap();
        // Welch–Satterthwaite degrees of freedom from the reference script.
        let df = 7.129122539717778;
        let t = t_quantile(0.975, df).unwrap();
        for rho in [ci.lower, ci.upper] {
            let lhs = (mx - rho * my).powi(2);
            let rhs = t * t * (vx + rho * rho * vy);
            assert!((lhs - rhs).abs() < 1e-6 * rhs, "{lhs} vs {rhs}");
        }
    }

    #[test]
    fn fieller_degenerates_sensibly() {
        // A constant denominator leaves only the numerator's uncertainty: the
        // interval is the numerator's mean interval divided by the constant.
        let ci = ratio_ci(&NUMERATOR, &[4.0, 4.0, 4.0], 0.95).unwrap();
        let numerator = mean_ci(&NUMERATOR, 0.95).unwrap();
        assert_close(ci.lower, numerator.lower / 4.0, 1e-12);
        assert_close(ci.upper, numerator.upper / 4.0, 1e-12);
        // Both constant: a point.
        let ci = ratio_ci(&[3.0, 3.0], &[2.0, 2.0], 0.95).unwrap();
        assert_eq!((ci.lower, ci.estimate, ci.upper), (1.5, 1.5, 1.5));
        // A denominator straddling zero has no finite interval.
        assert_eq!(
            ratio_ci(&NUMERATOR, &[-1.0, 1.5, -0.5, 0.3], 0.95),
            Err(StatsError::Unbounded)
        );
        assert_eq!(
            ratio_ci(&NUMERATOR, &[-1.0, 1.0], 0.95),
            Err(StatsError::ZeroMean)
        );
        assert!(ratio_ci(&NUMERATOR, &[1.0], 0.95).is_err());
        assert!(ratio_ci(&NUMERATOR, &[1.0, f64::NAN], 0.95).is_err());
    }

    #[test]
    fn geometric_mean_of_ratios_matches_scipy() {
        let ratios = [1.12, 0.95, 1.30, 1.05, 1.21, 0.99, 1.17];
        let ci = geometric_mean_ratio_ci(&ratios, 0.95).unwrap();
        assert_close(ci.estimate, 1.1068715979832437, 1e-14);
        assert_close(ci.lower, 0.9977211416834816, 1e-12);
        assert_close(ci.upper, 1.227963088318171, 1e-12);
        // Not significant: the interval contains "no change".
        assert!(ci.contains(1.0));
        // Inverting every ratio inverts the interval.
        let inverted: Vec<f64> = ratios.iter().map(|r| 1.0 / r).collect();
        let inv = geometric_mean_ratio_ci(&inverted, 0.95).unwrap();
        assert_close(inv.lower, 1.0 / ci.upper, 1e-12);
        assert_close(inv.upper, 1.0 / ci.lower, 1e-12);
        assert_eq!(
            geometric_mean_ratio_ci(&[1.0, 0.0], 0.95),
            Err(StatsError::NonPositive)
        );
        assert!(geometric_mean_ratio_ci(&[1.0], 0.95).is_err());
    }

    #[test]
    fn rejects_bad_levels() {
        for level in [0.0, 1.0, -0.5, 1.5, f64::NAN] {
            assert!(mean_ci(&[1.0, 2.0], level).is_err(), "{level}");
        }
    }
}
