//! One-way analysis of variance: do several systems' mean times differ at
//! all?
//!
//! Georges et al. recommend ANOVA when comparing more than two alternatives,
//! because running every pairwise t-test at 5 % inflates the chance of some
//! false positive; a significant F is then followed by a post-hoc test
//! ([`crate::tukey`]) to find *which* pairs differ.

use crate::descriptive::checked_mean;
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
            mean: checked_mean(xs)?,
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
    if !(ss_between.is_finite() && ss_within.is_finite()) {
        return Err(StatsError::Overflow);
    }
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

/// Reference values from SciPy 1.17.1 (`scipy.stats.f_oneway`: `statistic`
/// and `pvalue`), computed independently of this crate; only the numbers
/// are kept here.
#[cfg(test)]
mod tests {
    use super::*;

    fn assert_close(got: f64, want: f64, rel: f64, what: &str) {
        assert!(
            (got - want).abs() <= rel * want.abs(),
            "{what}: got {got}, want {want}"
        );
    }

    #[test]
    fn four_unequal_groups_match_scipy() {
        let groups: [&[f64]; 4] = [
            &[24.5, 23.9, 25.1, 24.8, 24.2],
            &[25.3, 26.1, 25.8, 26.4, 25.0, 25.9, 26.2],
            &[24.0, 24.7, 23.6, 24.4],
            &[26.8, 27.5, 26.1, 27.9, 27.2, 26.6],
        ];
        let a = one_way_anova(&groups).unwrap();
        assert_eq!((a.df_between, a.df_within), (3, 18));
        assert_close(a.f, 30.516620328684354, 1e-12, "F");
        assert_close(a.p_value, 2.8392871302403834e-07, 1e-8, "p");
    }

    #[test]
    fn three_groups_not_significant_match_scipy() {
        let groups = vec![
            vec![3.1, 2.9, 3.4, 3.0],
            vec![3.3, 3.6, 3.2, 3.5, 3.8],
            vec![3.0, 3.7, 3.2],
        ];
        let a = one_way_anova(&groups).unwrap();
        assert_eq!((a.df_between, a.df_within), (2, 9));
        assert_close(a.f, 2.301353503184714, 1e-12, "F");
        assert_close(a.p_value, 0.155875279663274, 1e-9, "p");
    }

    #[test]
    fn degenerate_input() {
        let one: [&[f64]; 1] = [&[1.0, 2.0]];
        assert_eq!(
            one_way_anova(&one),
            Err(StatsError::TooFewGroups { needed: 2, got: 1 })
        );
        let empty: [&[f64]; 3] = [&[1.0, 2.0], &[], &[3.0]];
        assert_eq!(
            one_way_anova(&empty),
            Err(StatsError::EmptyGroup { index: 1 })
        );
        let singletons: [&[f64]; 2] = [&[1.0], &[2.0]];
        assert_eq!(
            one_way_anova(&singletons),
            Err(StatsError::TooFewObservations { needed: 3, got: 2 })
        );
        let constant: [&[f64]; 2] = [&[1.0, 1.0], &[2.0, 2.0]];
        assert_eq!(one_way_anova(&constant), Err(StatsError::ZeroVariance));
        let nan: [&[f64]; 2] = [&[1.0, f64::NAN], &[2.0, 3.0]];
        assert_eq!(one_way_anova(&nan), Err(StatsError::NonFinite));
        // A singleton group is fine as long as others supply within-group
        // degrees of freedom.
        let mixed: [&[f64]; 2] = [&[1.0], &[2.0, 3.0]];
        assert_eq!(one_way_anova(&mixed).unwrap().df_within, 1);
    }
}
