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

use crate::descriptive::mean_and_variance;
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
    for (start, times) in iterations.windows(window).enumerate() {
        let (mean, variance) = mean_and_variance(times)?;
        let cov = variance.sqrt() / mean;
        if cov < max_cov {
            return Ok(Some(SteadyState {
                start,
                window,
                mean,
                coefficient_of_variation: cov,
            }));
        }
    }
    Ok(None)
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

/// Expected windows for the synthetic series were found independently with
/// a NumPy/SciPy 1.17.1 scan (`scipy.stats.variation(window, ddof=1)` over
/// every window, first one below the threshold); only the numbers are kept
/// here.
#[cfg(test)]
mod tests {
    use super::*;

    /// Nine warm-up iterations falling towards 10, then noise of ±0.5 %.
    const WARMING: [f64; 21] = [
        95.0, 61.0, 40.0, 27.5, 20.1, 15.8, 12.9, 11.2, 10.5, // warm-up
        10.02, 9.97, 10.05, 9.99, 10.01, 9.96, 10.03, 10.00, 9.98, 10.04, 10.01, 9.99,
    ];

    fn assert_close(got: f64, want: f64) {
        assert!(
            (got - want).abs() <= 1e-12 * want.abs(),
            "got {got}, want {want}"
        );
    }

    #[test]
    fn finds_the_end_of_warm_up() {
        // (window, threshold, start, window mean, window CoV)
        let table = [
            (5, 0.01, 9, 10.008, 0.003030725597142903),
            (10, 0.01, 9, 10.005, 0.0030261372854547292),
            (5, 0.05, 8, 10.106000000000002, 0.021999662146888546),
            (5, 0.2, 5, 12.084, 0.19418622959560067),
            (3, 0.003, 12, 9.986666666666666, 0.002519971440343988),
        ];
        for (window, threshold, start, mean, cov) in table {
            let found = find_steady_state(&WARMING, window, threshold)
                .unwrap()
                .unwrap_or_else(|| panic!("k={window} t={threshold}: not reached"));
            assert_eq!(found.start, start, "k={window} t={threshold}");
            assert_eq!(found.window, window);
            assert_eq!(found.iterations(), start..start + window);
            assert_close(found.mean, mean);
            assert_close(found.coefficient_of_variation, cov);
        }
    }

    #[test]
    fn reports_not_reached() {
        // Too strict for the noise.
        assert_eq!(find_steady_state(&WARMING, 10, 0.002), Ok(None));
        // Alternating times never settle at 2 % (their CoV is about 10 %).
        let alternating: Vec<f64> = (0..30)
            .map(|i| if i % 2 == 0 { 10.0 } else { 12.0 })
            .collect();
        assert_eq!(find_steady_state(&alternating, 5, 0.02), Ok(None));
        let loose = find_steady_state(&alternating, 5, 0.2).unwrap().unwrap();
        assert_eq!(loose.start, 0);
        assert_close(loose.coefficient_of_variation, 0.10143010324169743);
        // Fewer iterations than the window.
        assert_eq!(find_steady_state(&[10.0, 10.0, 10.0], 5, 0.02), Ok(None));
        assert_eq!(find_steady_state(&[], 5, 0.02), Ok(None));
    }

    #[test]
    fn startup_is_the_first_iteration() {
        assert_eq!(startup_time(&WARMING), Ok(95.0));
        let invocation = analyse_invocation(&WARMING, 5, 0.01).unwrap();
        assert_eq!(invocation.startup, 95.0);
        assert_eq!(invocation.steady_state.map(|s| s.start), Some(9));
        assert_eq!(
            startup_time(&[]),
            Err(StatsError::TooFewObservations { needed: 1, got: 0 })
        );
    }

    #[test]
    fn constant_series_is_steady_from_the_start() {
        let found = find_steady_state(&[7.0; 12], 10, 0.01).unwrap().unwrap();
        assert_eq!(
            (found.start, found.mean, found.coefficient_of_variation),
            (0, 7.0, 0.0)
        );
    }

    #[test]
    fn rejects_bad_parameters_and_data() {
        assert!(find_steady_state(&WARMING, 1, 0.02).is_err());
        assert!(find_steady_state(&WARMING, 5, 0.0).is_err());
        assert!(find_steady_state(&WARMING, 5, f64::NAN).is_err());
        assert!(find_steady_state(&WARMING, 5, f64::INFINITY).is_err());
        assert_eq!(
            find_steady_state(&[1.0, f64::NAN, 1.0], 2, 0.1),
            Err(StatsError::NonFinite)
        );
        assert_eq!(
            find_steady_state(&[1.0, 0.0, 1.0], 2, 0.1),
            Err(StatsError::NonPositive)
        );
        assert_eq!(startup_time(&[-1.0]), Err(StatsError::NonPositive));
    }
}
