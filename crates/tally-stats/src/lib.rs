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
//! - [`welch`]: compare two alternatives (Welch's t-test).
//! - [`anova`] then [`tukey`]: compare several alternatives (one-way ANOVA,
//!   then Tukey–Kramer HSD for the pairs).
//! - [`distributions`] and [`studentized_range`]: the t, F and studentized
//!   range distributions underneath.
//!
//! Nothing panics on degenerate data: every function returns a
//! [`Result`] whose [`StatsError`] says what was wrong (too few values,
//! NaN, zero variance, an empty group, …). Each function documents which
//! errors it can return.

pub mod anova;
pub mod descriptive;
pub mod distributions;
pub mod error;
pub mod interval;
mod quadrature;
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
pub use steady_state::{
    analyse_invocation, find_steady_state, startup_time, Invocation, SteadyState,
};
pub use studentized_range::{
    studentized_range_cdf, studentized_range_quantile, studentized_range_sf,
};
pub use tukey::{tukey_hsd, PairwiseComparison, TukeyHsd};
pub use welch::{welch_t_test, WelchTest};
