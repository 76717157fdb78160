//! Input checks shared by the public entry points, so that every function
//! rejects the same degenerate input in the same way.

use crate::error::{Result, StatsError};

pub(crate) fn finite(xs: &[f64]) -> Result<()> {
    if xs.iter().all(|x| x.is_finite()) {
        Ok(())
    } else {
        Err(StatsError::NonFinite)
    }
}

pub(crate) fn at_least(xs: &[f64], needed: usize) -> Result<()> {
    if xs.len() < needed {
        Err(StatsError::TooFewObservations {
            needed,
            got: xs.len(),
        })
    } else {
        Ok(())
    }
}

/// A sample usable for a statistic that needs `needed` finite observations.
pub(crate) fn sample(xs: &[f64], needed: usize) -> Result<()> {
    at_least(xs, needed)?;
    finite(xs)
}

pub(crate) fn level(level: f64) -> Result<()> {
    if level > 0.0 && level < 1.0 {
        Ok(())
    } else {
        Err(StatsError::InvalidParameter(
            "confidence level must lie strictly between 0 and 1",
        ))
    }
}

pub(crate) fn probability(p: f64) -> Result<()> {
    if p > 0.0 && p < 1.0 {
        Ok(())
    } else {
        Err(StatsError::InvalidParameter(
            "probability must lie strictly between 0 and 1",
        ))
    }
}
