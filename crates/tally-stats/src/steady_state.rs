//! Start-up versus steady-state performance of one VM invocation.
//!
//! Georges et al. separate the two because they answer different questions:
//! the first iteration measures start-up (loading, interpretation before
//! the JIT has warmed), while steady state is reached once consecutive
//! iterations stop changing. Their criterion is the first window of `k`
//! consecutive iterations whose coefficient of variation drops below a
//! threshold; the mean of that window is the invocation's steady-state
//! figure, and invocations (not iterations) are then the sample for
//! confidence intervals, since iterations within one invocation are not
//! independent.

use std::ops::Range;

use crate::descriptive::{mean_unchecked, variance_unchecked};
use crate::error::{Result, StatsError};
use crate::validate;

/// The first window that satisfied the steady-state criterion.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SteadyState {
    /// Index of the first iteration of the window.
    pub start: usize,
    /// Number of iterations in the window.
    pub window: usize,
    /// Mean iteration time over the window: the invocation's steady-state
    /// performance.
    pub mean: f64,
    /// Coefficient of variation over the window (below the threshold).
    pub coefficient_of_variation: f64,
}

impl SteadyState {
    /// Indices of the window's iterations.
    pub fn iterations(&self) -> Range<usize> {
        self.start..self.start + self.window
    }
}

/// What one invocation's iteration times say.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Invocation {
    /// Time of the first iteration: the start-up figure.
    pub startup: f64,
    /// The steady-state window, or `None` if the invocation never settled
    /// (too few iterations, or too noisy for the threshold).
    pub steady_state: Option<SteadyState>,
}

/// The start-up figure: the first iteration's time.
///
/// # Errors
/// [`StatsError::TooFewObservations`] if there are no iterations;
/// [`StatsError::NonFinite`] if the first time is NaN or infinite;
/// [`StatsError::NonPositive`] if it is zero or negative.
pub fn startup_time(iterations: &[f64]) -> Result<f64> {
    match iterations.first() {
        None => Err(StatsError::TooFewObservations { needed: 1, got: 0 }),
        Some(x) if !x.is_finite() => Err(StatsError::NonFinite),
        Some(&x) if x <= 0.0 => Err(StatsError::NonPositive),
        Some(&x) => Ok(x),
    }
}

/// The first window of `window` consecutive iterations whose coefficient of
/// variation is strictly below `max_cov` (e.g. 10 and 0.02), or `Ok(None)`
/// if none is ("not reached", including when there are fewer iterations
/// than `window`).
///
/// # Errors
/// [`StatsError::InvalidParameter`] if `window < 2` (a coefficient of
/// variation needs two values) or `max_cov` is not finite and positive;
/// [`StatsError::NonFinite`] on NaN or infinite times;
/// [`StatsError::NonPositive`] if a time is zero or negative (the
/// coefficient of variation of such a window means nothing).
pub fn find_steady_state(
    iterations: &[f64],
    window: usize,
    max_cov: f64,
) -> Result<Option<SteadyState>> {
    if window < 2 {
        return Err(StatsError::InvalidParameter(
            "steady-state window must span at least 2 iterations",
        ));
    }
    if !(max_cov.is_finite() && max_cov > 0.0) {
        return Err(StatsError::InvalidParameter(
            "coefficient-of-variation threshold must be finite and positive",
        ));
    }
    validate::finite(iterations)?;
    if iterations.iter().any(|&x| x <= 0.0) {
        return Err(StatsError::NonPositive);
    }
    let found = iterations
        .windows(window)
        .enumerate()
        .find_map(|(start, times)| {
            let mean = mean_unchecked(times);
            let cov = variance_unchecked(times, mean).sqrt() / mean;
            (cov < max_cov).then_some(SteadyState {
                start,
                window,
                mean,
                coefficient_of_variation: cov,
            })
        });
    Ok(found)
}

/// Start-up figure and steady-state window of one invocation together.
///
/// # Errors
/// As [`startup_time`] and [`find_steady_state`].
pub fn analyse_invocation(iterations: &[f64], window: usize, max_cov: f64) -> Result<Invocation> {
    let steady_state = find_steady_state(iterations, window, max_cov)?;
    Ok(Invocation {
        startup: startup_time(iterations)?,
        steady_state,
    })
}
