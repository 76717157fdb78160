//! One-way analysis of variance: do several systems' mean times differ at
//! all?
//!
//! Georges et al. recommend ANOVA when comparing more than two alternatives,
//! because running every pairwise t-test at 5 % inflates the chance of some
//! false positive; a significant F is then followed by a post-hoc test
//! ([`crate::tukey`]) to find *which* pairs differ.

use crate::descriptive::mean_unchecked;
use crate::distributions::f_sf;
use crate::error::{Result, StatsError};
use crate::validate;

/// Outcome of [`one_way_anova`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Anova {
    /// `MS_between / MS_within`.
    pub f: f64,
    /// Groups minus one.
    pub df_between: usize,
    /// Observations minus groups.
    pub df_within: usize,
    /// `P(F > f)`: the probability of group means at least this far apart if
    /// all true means were equal.
    pub p_value: f64,
    /// Sum of squares of group means about the grand mean, weighted by group
    /// size.
    pub ss_between: f64,
    /// Sum of squares of observations about their own group's mean.
    pub ss_within: f64,
}

impl Anova {
    /// Mean square within groups: the pooled variance estimate that post-hoc
    /// tests reuse.
    pub fn ms_within(&self) -> f64 {
        self.ss_within / self.df_within as f64
    }
}

/// One-way ANOVA over `groups` (each a sample of one alternative; sizes may
/// differ).
///
/// # Errors
/// [`StatsError::TooFewGroups`] for fewer than two groups;
/// [`StatsError::EmptyGroup`] if a group has no observations;
/// [`StatsError::NonFinite`] on NaN or infinity;
/// [`StatsError::TooFewObservations`] if there are not more observations
/// than groups (no within-group degrees of freedom);
/// [`StatsError::ZeroVariance`] if every group is constant (F would be
/// infinite or 0/0).
pub fn one_way_anova<G: AsRef<[f64]>>(groups: &[G]) -> Result<Anova> {
    Ok(decompose(groups)?.0)
}

/// Size and mean of one group, as the post-hoc tests need them.
#[derive(Debug, Clone, Copy)]
pub(crate) struct GroupStats {
    pub(crate) n: usize,
    pub(crate) mean: f64,
}

/// ANOVA plus the per-group statistics it was built from.
pub(crate) fn decompose<G: AsRef<[f64]>>(groups: &[G]) -> Result<(Anova, Vec<GroupStats>)> {
    if groups.len() < 2 {
        return Err(StatsError::TooFewGroups {
            needed: 2,
            got: groups.len(),
        });
    }
    let mut stats = Vec::with_capacity(groups.len());
    for (index, group) in groups.iter().enumerate() {
        let xs = group.as_ref();
        if xs.is_empty() {
            return Err(StatsError::EmptyGroup { index });
        }
        validate::finite(xs)?;
        stats.push(GroupStats {
            n: xs.len(),
            mean: mean_unchecked(xs),
        });
    }
    let total: usize = stats.iter().map(|g| g.n).sum();
    if total <= groups.len() {
        return Err(StatsError::TooFewObservations {
            needed: groups.len() + 1,
            got: total,
        });
    }
    let grand_mean = stats.iter().map(|g| g.n as f64 * g.mean).sum::<f64>() / total as f64;
    let ss_between: f64 = stats
        .iter()
        .map(|g| g.n as f64 * (g.mean - grand_mean).powi(2))
        .sum();
    let ss_within: f64 = groups
        .iter()
        .zip(&stats)
        .map(|(group, g)| {
            group
                .as_ref()
                .iter()
                .map(|x| (x - g.mean).powi(2))
                .sum::<f64>()
        })
        .sum();
    if ss_within == 0.0 {
        return Err(StatsError::ZeroVariance);
    }
    let df_between = groups.len() - 1;
    let df_within = total - groups.len();
    let f = (ss_between / df_between as f64) / (ss_within / df_within as f64);
    let p_value = f_sf(f, df_between as f64, df_within as f64)?;
    Ok((
        Anova {
            f,
            df_between,
            df_within,
            p_value,
            ss_between,
            ss_within,
        },
        stats,
    ))
}
