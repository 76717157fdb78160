//! The one error type of the crate.
//!
//! Benchmark data is messy (a crashed run leaves an empty group, a coarse
//! timer produces identical samples), so every entry point reports such
//! input as a value the caller can print instead of panicking in the middle
//! of a long benchmarking session.

/// Why a statistic could not be computed.
#[derive(Debug, Clone, Copy, PartialEq, thiserror::Error)]
pub enum StatsError {
    /// The statistic needs more observations than were given (for example a
    /// sample standard deviation needs two).
    #[error("need at least {needed} observations, got {got}")]
    TooFewObservations {
        /// The minimum the statistic needs.
        needed: usize,
        /// How many there were.
        got: usize,
    },
    /// An analysis of several groups was given too few of them.
    #[error("need at least {needed} groups, got {got}")]
    TooFewGroups {
        /// The minimum the analysis needs.
        needed: usize,
        /// How many there were.
        got: usize,
    },
    /// A group in a multi-group analysis has no observations.
    #[error("group {index} is empty")]
    EmptyGroup {
        /// Position of the empty group in the input.
        index: usize,
    },
    /// An observation is NaN or infinite.
    #[error("input contains NaN or an infinity")]
    NonFinite,
    /// Every observation is identical where the statistic divides by the
    /// spread, so the result would be infinite or NaN.
    #[error("zero variance: the statistic is undefined")]
    ZeroVariance,
    /// A value that must be strictly positive (a time, a ratio) is not;
    /// logarithms and geometric means are undefined for it.
    #[error("value must be strictly positive")]
    NonPositive,
    /// A relative measure (coefficient of variation, ratio) would divide by a
    /// mean of zero.
    #[error("mean is zero")]
    ZeroMean,
    /// Values so large that a sum or sum of squares overflowed to infinity.
    #[error("values too large: an intermediate result overflowed")]
    Overflow,
    /// The confidence region of a ratio is not a finite interval because the
    /// denominator's mean is not significantly different from zero.
    #[error("confidence interval is unbounded: denominator not distinguishable from zero")]
    Unbounded,
    /// A parameter (confidence level, degrees of freedom, probability,
    /// window length, threshold) is outside its domain.
    #[error("invalid parameter: {0}")]
    InvalidParameter(&'static str),
}

/// Result of every fallible function in this crate.
pub type Result<T> = std::result::Result<T, StatsError>;
