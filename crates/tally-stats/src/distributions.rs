//! Student's t and Fisher's F distributions, as thin checked wrappers over
//! statrs.
//!
//! The wrappers exist so that out-of-domain arguments come back as
//! [`StatsError`] values (statrs panics in `inverse_cdf` for probabilities
//! outside [0, 1]) and so that `df = ∞` works for t, which Welch's
//! approximation can produce when one sample has zero variance.

use crate::error::{Result, StatsError};
use crate::validate;
use statrs::distribution::{ContinuousCDF, FisherSnedecor, Normal, StudentsT};

/// `P(T ≤ x)` for Student's t with `df` degrees of freedom (`f64::INFINITY`
/// allowed, giving the standard normal).
///
/// # Errors
/// [`StatsError::InvalidParameter`] if `df` is NaN or not positive;
/// [`StatsError::NonFinite`] if `x` is NaN.
pub fn t_cdf(x: f64, df: f64) -> Result<f64> {
    if x.is_nan() {
        return Err(StatsError::NonFinite);
    }
    Ok(t_distribution(df)?.cdf(x))
}

/// `P(T > x)`, computed directly so small p-values keep their precision.
///
/// # Errors
/// As [`t_cdf`].
pub fn t_sf(x: f64, df: f64) -> Result<f64> {
    if x.is_nan() {
        return Err(StatsError::NonFinite);
    }
    Ok(t_distribution(df)?.sf(x))
}

/// The `x` with `P(T ≤ x) = p`; `t_quantile(0.975, df)` is the multiplier of
/// a two-sided 95 % interval.
///
/// # Errors
/// [`StatsError::InvalidParameter`] if `p` is not strictly between 0 and 1 or
/// `df` is NaN or not positive.
pub fn t_quantile(p: f64, df: f64) -> Result<f64> {
    validate::probability(p)?;
    Ok(t_distribution(df)?.inverse_cdf(p))
}

/// `P(F ≤ x)` for Fisher's F with `df1` (numerator) and `df2` (denominator)
/// degrees of freedom.
///
/// # Errors
/// [`StatsError::InvalidParameter`] if either degree of freedom is not
/// finite and positive; [`StatsError::NonFinite`] if `x` is NaN.
pub fn f_cdf(x: f64, df1: f64, df2: f64) -> Result<f64> {
    if x.is_nan() {
        return Err(StatsError::NonFinite);
    }
    Ok(f_distribution(df1, df2)?.cdf(x))
}

/// `P(F > x)`: the p-value of an ANOVA whose statistic is `x`.
///
/// # Errors
/// As [`f_cdf`].
pub fn f_sf(x: f64, df1: f64, df2: f64) -> Result<f64> {
    if x.is_nan() {
        return Err(StatsError::NonFinite);
    }
    Ok(f_distribution(df1, df2)?.sf(x))
}

/// The `x` with `P(F ≤ x) = p`.
///
/// # Errors
/// [`StatsError::InvalidParameter`] if `p` is not strictly between 0 and 1,
/// or for the degree-of-freedom errors of [`f_cdf`].
pub fn f_quantile(p: f64, df1: f64, df2: f64) -> Result<f64> {
    validate::probability(p)?;
    Ok(f_distribution(df1, df2)?.inverse_cdf(p))
}

/// One type for finite and infinite degrees of freedom, because statrs's
/// t quantile is computed through the incomplete beta function, which has
/// no limit form for `df = ∞`.
enum TDistribution {
    Finite(StudentsT),
    Normal(Normal),
}

impl TDistribution {
    fn cdf(&self, x: f64) -> f64 {
        match self {
            TDistribution::Finite(d) => d.cdf(x),
            TDistribution::Normal(d) => d.cdf(x),
        }
    }

    fn sf(&self, x: f64) -> f64 {
        match self {
            TDistribution::Finite(d) => d.sf(x),
            TDistribution::Normal(d) => d.sf(x),
        }
    }

    fn inverse_cdf(&self, p: f64) -> f64 {
        match self {
            TDistribution::Finite(d) => d.inverse_cdf(p),
            TDistribution::Normal(d) => d.inverse_cdf(p),
        }
    }
}

fn t_distribution(df: f64) -> Result<TDistribution> {
    let invalid = StatsError::InvalidParameter("t degrees of freedom must be positive");
    if df.is_nan() || df <= 0.0 {
        return Err(invalid);
    }
    if df.is_infinite() {
        Normal::new(0.0, 1.0)
            .map(TDistribution::Normal)
            .map_err(|_| invalid)
    } else {
        StudentsT::new(0.0, 1.0, df)
            .map(TDistribution::Finite)
            .map_err(|_| invalid)
    }
}

fn f_distribution(df1: f64, df2: f64) -> Result<FisherSnedecor> {
    FisherSnedecor::new(df1, df2).map_err(|_| {
        StatsError::InvalidParameter("F degrees of freedom must be finite and positive")
    })
}
