//! Descriptive statistics of one sample.
//!
//! All functions reject NaN and infinities with [`StatsError::NonFinite`]
//! instead of propagating them, because a single failed timing would
//! otherwise silently poison every downstream figure.

use crate::error::{Result, StatsError};
use crate::interval::{mean_ci, ConfidenceInterval};
use crate::validate;

/// Arithmetic mean.
///
/// # Errors
/// [`StatsError::TooFewObservations`] if `xs` is empty;
/// [`StatsError::NonFinite`] on NaN or infinity.
pub fn mean(xs: &[f64]) -> Result<f64> {
    validate::sample(xs, 1)?;
    checked_mean(xs)
}

/// Median (the mean of the two middle values for an even count).
///
/// # Errors
/// As [`mean`].
pub fn median(xs: &[f64]) -> Result<f64> {
    validate::sample(xs, 1)?;
    let mut sorted = xs.to_vec();
    sorted.sort_by(f64::total_cmp);
    let mid = sorted.len() / 2;
    Ok(if sorted.len() % 2 == 1 {
        sorted[mid]
    } else {
        // Halve before adding so two huge values cannot overflow.
        0.5 * sorted[mid - 1] + 0.5 * sorted[mid]
    })
}

/// Sample variance (divisor `n − 1`), the unbiased estimator that every
/// t-based interval and test in the paper assumes.
///
/// # Errors
/// [`StatsError::TooFewObservations`] if there are fewer than two values;
/// [`StatsError::NonFinite`] on NaN or infinity. Zero variance is a valid
/// result, not an error.
pub fn variance(xs: &[f64]) -> Result<f64> {
    validate::sample(xs, 2)?;
    Ok(mean_and_variance(xs)?.1)
}

/// Sample standard deviation (divisor `n − 1`).
///
/// # Errors
/// As [`variance`].
pub fn std_dev(xs: &[f64]) -> Result<f64> {
    variance(xs).map(f64::sqrt)
}

/// Coefficient of variation: sample standard deviation over the absolute
/// value of the mean. Unitless, which is why Georges et al. use it to decide
/// when iteration times have settled regardless of the benchmark's scale.
///
/// # Errors
/// As [`variance`], plus [`StatsError::ZeroMean`] if the mean is zero.
pub fn coefficient_of_variation(xs: &[f64]) -> Result<f64> {
    validate::sample(xs, 2)?;
    let (m, v) = mean_and_variance(xs)?;
    if m == 0.0 {
        return Err(StatsError::ZeroMean);
    }
    Ok(v.sqrt() / m.abs())
}

/// Geometric mean, computed as the exponential of the mean logarithm so that
/// long products of ratios cannot overflow.
///
/// The right average for ratios (speed-ups): it is symmetric under taking
/// reciprocals, so "A relative to B" and "B relative to A" agree.
///
/// # Errors
/// As [`mean`], plus [`StatsError::NonPositive`] if any value is zero or
/// negative.
pub fn geometric_mean(xs: &[f64]) -> Result<f64> {
    validate::sample(xs, 1)?;
    let logs = logarithms(xs)?;
    Ok(checked_mean(&logs)?.exp())
}

/// The usual one-line description of a sample.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Summary {
    /// Number of observations.
    pub n: usize,
    /// Arithmetic mean.
    pub mean: f64,
    /// Median.
    pub median: f64,
    /// Sample standard deviation (divisor `n − 1`).
    pub std_dev: f64,
    /// Smallest observation.
    pub min: f64,
    /// Largest observation.
    pub max: f64,
    /// Student-t confidence interval of the mean.
    pub ci: ConfidenceInterval,
}

impl Summary {
    /// Summary with a 95 % confidence interval of the mean, the
    /// conventional level.
    ///
    /// # Errors
    /// [`StatsError::TooFewObservations`] for fewer than two values (no
    /// standard deviation or interval exists); [`StatsError::NonFinite`] on
    /// NaN or infinity. Identical values give a zero-width interval.
    pub fn new(xs: &[f64]) -> Result<Self> {
        Self::with_level(xs, 0.95)
    }

    /// Summary with a confidence interval at `level` (for example 0.99).
    ///
    /// # Errors
    /// As [`Summary::new`], plus [`StatsError::InvalidParameter`] if `level`
    /// is not strictly between 0 and 1.
    pub fn with_level(xs: &[f64], level: f64) -> Result<Self> {
        let ci = mean_ci(xs, level)?;
        let (min, max) = xs
            .iter()
            .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), &x| {
                (lo.min(x), hi.max(x))
            });
        Ok(Summary {
            n: xs.len(),
            mean: ci.estimate,
            median: median(xs)?,
            std_dev: std_dev(xs)?,
            min,
            max,
            ci,
        })
    }

    /// Coefficient of variation of the summarised sample, or `None` when
    /// the mean is zero.
    pub fn coefficient_of_variation(&self) -> Option<f64> {
        (self.mean != 0.0).then(|| self.std_dev / self.mean.abs())
    }
}

/// Mean of a non-empty slice of finite values, or
/// [`StatsError::Overflow`] if their sum does not fit in a double.
pub(crate) fn checked_mean(xs: &[f64]) -> Result<f64> {
    let mean = xs.iter().sum::<f64>() / xs.len() as f64;
    if mean.is_finite() {
        Ok(mean)
    } else {
        Err(StatsError::Overflow)
    }
}

/// Mean and sample variance of at least two finite values. Two-pass (the
/// mean is subtracted first) because the one-pass sum-of-squares formula
/// loses all precision when timings share many leading digits.
pub(crate) fn mean_and_variance(xs: &[f64]) -> Result<(f64, f64)> {
    let mean = checked_mean(xs)?;
    let variance = xs.iter().map(|x| (x - mean) * (x - mean)).sum::<f64>() / (xs.len() - 1) as f64;
    if variance.is_finite() {
        Ok((mean, variance))
    } else {
        Err(StatsError::Overflow)
    }
}

/// Natural logarithms of strictly positive values.
pub(crate) fn logarithms(xs: &[f64]) -> Result<Vec<f64>> {
    xs.iter()
        .map(|&x| {
            if x > 0.0 {
                Ok(x.ln())
            } else {
                Err(StatsError::NonPositive)
            }
        })
        .collect()
}

/// Reference values from NumPy 2.4.6 / SciPy 1.17.1 (`numpy.mean`,
/// `numpy.median`, `numpy.std(ddof=1)`, `numpy.var(ddof=1)`,
/// `scipy.stats.variation(ddof=1)`, `scipy.stats.gmean`,
/// `scipy.stats.t.interval` with `scipy.stats.sem`), computed independently
/// of this crate; only the numbers are kept here.
#[cfg(test)]
mod tests {
    use super::*;

    const A: [f64; 8] = [12.1, 11.8, 12.6, 12.3, 11.9, 12.8, 12.2, 12.0];

    fn assert_close(got: f64, want: f64, rel: f64) {
        assert!(
            (got - want).abs() <= rel * want.abs(),
            "got {got}, want {want}"
        );
    }

    #[test]
    fn match_numpy_and_scipy() {
        assert_close(mean(&A).unwrap(), 12.2125, 1e-14);
        assert_close(median(&A).unwrap(), 12.149999999999999, 1e-14);
        assert_close(
            median(&[13.0, 12.4, 13.9, 12.7, 14.1, 13.3]).unwrap(),
            13.15,
            1e-14,
        );
        assert_eq!(median(&[3.0, 1.0, 2.0]), Ok(2.0));
        assert_close(std_dev(&A).unwrap(), 0.3440826312717007, 1e-13);
        assert_close(variance(&A).unwrap(), 0.11839285714285715, 1e-13);
        assert_close(
            coefficient_of_variation(&A).unwrap(),
            0.02817462692091715,
            1e-13,
        );
        assert_close(geometric_mean(&A).unwrap(), 12.208298239961021, 1e-14);
    }

    #[test]
    fn summary_matches_scipy() {
        let s = Summary::new(&A).unwrap();
        assert_eq!(s.n, 8);
        assert_eq!((s.min, s.max), (11.8, 12.8));
        assert_close(s.mean, 12.2125, 1e-14);
        assert_close(s.median, 12.149999999999999, 1e-14);
        assert_close(s.std_dev, 0.3440826312717007, 1e-13);
        assert_close(s.ci.lower, 11.924839721487457, 1e-12);
        assert_close(s.ci.upper, 12.500160278512544, 1e-12);
        assert_eq!(s.ci.level, 0.95);
        let s99 = Summary::with_level(&A, 0.99).unwrap();
        assert_close(s99.ci.lower, 11.786782324437906, 1e-12);
        assert_close(s99.ci.upper, 12.638217675562094, 1e-12);
        assert_close(
            s.coefficient_of_variation().unwrap(),
            0.02817462692091715,
            1e-13,
        );
    }

    #[test]
    fn degenerate_input_is_an_error_not_a_panic() {
        let too_few = |needed, got| StatsError::TooFewObservations { needed, got };
        assert_eq!(mean(&[]), Err(too_few(1, 0)));
        assert_eq!(median(&[]), Err(too_few(1, 0)));
        assert_eq!(std_dev(&[1.0]), Err(too_few(2, 1)));
        assert_eq!(Summary::new(&[1.0]), Err(too_few(2, 1)));
        assert_eq!(mean(&[1.0, f64::NAN]), Err(StatsError::NonFinite));
        assert_eq!(median(&[1.0, f64::INFINITY]), Err(StatsError::NonFinite));
        assert_eq!(
            coefficient_of_variation(&[-1.0, 1.0]),
            Err(StatsError::ZeroMean)
        );
        assert_eq!(geometric_mean(&[1.0, 0.0]), Err(StatsError::NonPositive));
        assert_eq!(geometric_mean(&[1.0, -2.0]), Err(StatsError::NonPositive));
        assert!(Summary::with_level(&A, 1.0).is_err());
        assert_eq!(mean(&[f64::MAX, f64::MAX]), Err(StatsError::Overflow));
        assert_eq!(variance(&[1e200, -1e200]), Err(StatsError::Overflow));
        // Zero variance is a legitimate answer, with a zero-width interval.
        let flat = Summary::new(&[5.0; 4]).unwrap();
        assert_eq!(
            (flat.std_dev, flat.ci.lower, flat.ci.upper),
            (0.0, 5.0, 5.0)
        );
        assert_eq!(coefficient_of_variation(&[5.0; 4]), Ok(0.0));
    }

    #[test]
    fn variance_survives_large_offsets() {
        // One-pass formulas return garbage (even negative values) here.
        let xs = [1e9 + 4.0, 1e9 + 7.0, 1e9 + 13.0, 1e9 + 16.0];
        assert_close(variance(&xs).unwrap(), 30.0, 1e-9);
    }
}
