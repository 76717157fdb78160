//! Statistics for rigorous benchmarking, after Georges, Buytaert &
//! Eeckhout, "Statistically Rigorous Java Performance Evaluation" (OOPSLA
//! 2007).
//!
//! This crate knows nothing about SOM or any VM: it takes timings as `f64`
//! slices, so that the statistics can be tested against independent
//! reference values in isolation and reused by any harness.
//!
//! The pieces, in the order a benchmark run uses them:
//!
//! - [`steady_state`]: split each invocation's iteration times into a
//!   start-up figure and a steady-state window (coefficient-of-variation
//!   criterion).
//! - [`descriptive`]: mean, median, standard deviation, coefficient of
//!   variation, geometric mean, and a [`Summary`] with a 95 % interval.
//! - [`interval`]: confidence intervals of a mean, of a ratio of means
//!   (Fieller), and of a geometric mean of ratios.
//! - [`robust`]: the Hodges–Lehmann estimate and percentile-bootstrap intervals, for paired
//!   ratios on a machine whose speed changes in phases; the modified Z-score, for flagging
//!   outlying invocations.
//! - [`welch`]: compare two alternatives (Welch's t-test).
//! - [`anova`] then [`tukey`]: compare several alternatives (one-way ANOVA,
//!   then Tukey–Kramer HSD for the pairs).
//! - [`distributions`] and [`studentized_range`]: the t, F and studentized
//!   range distributions underneath.
//!
//! ```
//! use tally_stats::{find_steady_state, mean, tukey_hsd, welch_t_test, Summary};
//!
//! // One invocation: warm-up, then steady iterations (milliseconds).
//! let iterations = [41.0, 23.5, 12.4, 10.3, 10.1, 10.0, 10.2, 10.1, 10.0, 10.1];
//! let steady = find_steady_state(&iterations, 5, 0.02)?.expect("settles");
//! assert_eq!(steady.start, 3);
//!
//! // Per-invocation steady-state means of two VMs.
//! let old = [10.1, 10.4, 9.9, 10.2, 10.3];
//! let new = [9.1, 9.4, 9.0, 9.3, 9.2, 9.5];
//! let summary = Summary::new(&new)?;
//! assert!(summary.ci.lower < mean(&new)? && mean(&new)? < summary.ci.upper);
//! let test = welch_t_test(&old, &new, 0.95)?;
//! assert!(test.is_significant() && test.p_value < 0.05);
//!
//! // Three alternatives: which pairs differ?
//! let hsd = tukey_hsd(&[&old[..], &new[..], &[9.9, 10.5, 10.0, 10.2]], 0.95)?;
//! assert!(hsd.pair(0, 1).unwrap().is_significant());
//! assert!(!hsd.pair(0, 2).unwrap().is_significant());
//! # Ok::<(), tally_stats::StatsError>(())
//! ```
//!
//! Nothing panics on degenerate data: every function returns a
//! [`Result`] whose [`StatsError`] says what was wrong (too few values,
//! NaN, zero variance, an empty group, …). Each function documents which
//! errors it can return; in addition, any function that sums observations
//! returns [`StatsError::Overflow`] rather than an infinite or NaN result if
//! they are so large (beyond about 1e150) that the sums overflow.

pub mod anova;
pub mod descriptive;
pub mod distributions;
pub mod error;
pub mod interval;
mod quadrature;
pub mod robust;
mod roots;
pub mod steady_state;
pub mod studentized_range;
pub mod tukey;
mod validate;
pub mod welch;

pub use anova::{one_way_anova, Anova};
pub use descriptive::{
    coefficient_of_variation, geometric_mean, mean, median, std_dev, variance, Summary,
};
pub use distributions::{f_cdf, f_quantile, f_sf, t_cdf, t_quantile, t_sf};
pub use error::{Result, StatsError};
pub use interval::{geometric_mean_ratio_ci, mean_ci, ratio_ci, ConfidenceInterval};
pub use robust::{bootstrap_ci, hodges_lehmann, modified_z_scores, Bootstrap};
pub use steady_state::{
    analyse_invocation, find_steady_state, startup_time, Invocation, SteadyState,
};
pub use studentized_range::{
    studentized_range_cdf, studentized_range_quantile, studentized_range_sf,
};
pub use tukey::{tukey_hsd, PairwiseComparison, TukeyHsd};
pub use welch::{welch_t_test, WelchTest};

#[cfg(test)]
mod test_util;
