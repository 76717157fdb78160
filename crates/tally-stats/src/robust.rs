//! Estimates that a few wild observations cannot move: the Hodges–Lehmann location estimate,
//! percentile-bootstrap intervals, and the modified Z-score that tells the wild ones apart.
//!
//! Why: on a shared machine whose speed halves for seconds at a time, a paired difference
//! between two runs is either small (both ran in the same phase) or wild (a phase change fell
//! between them). A mean and its t-interval take the wild ones at face value, so a few of them
//! set the interval's width. The Hodges–Lehmann estimate (the median of all pairwise averages)
//! is as efficient as the mean on normal data (95 %) and ignores up to 29 % of outliers; the
//! bootstrap gives an interval for it, or for any statistic built on it, without assuming a
//! distribution.

use rand::rngs::Xoshiro256PlusPlus;
use rand::{RngExt, SeedableRng};

use crate::error::{Result, StatsError};
use crate::interval::ConfidenceInterval;
use crate::validate;

/// The Hodges–Lehmann estimate of location of a one-sample distribution: the median of the
/// Walsh averages `(x_i + x_j) / 2` over all `i ≤ j`. For paired log ratios it is the
/// typical ratio, robust to the odd pair measured across a change of machine speed.
///
/// # Errors
/// [`StatsError::TooFewObservations`] for an empty slice; [`StatsError::NonFinite`] on NaN or
/// infinity.
pub fn hodges_lehmann(xs: &[f64]) -> Result<f64> {
    validate::sample(xs, 1)?;
    let n = xs.len();
    let mut walsh = Vec::with_capacity(n * (n + 1) / 2);
    for i in 0..n {
        for j in i..n {
            walsh.push(0.5 * xs[i] + 0.5 * xs[j]);
        }
    }
    Ok(median_in_place(&mut walsh))
}

/// The median, reordering `xs` (which must not be empty or hold NaN).
fn median_in_place(xs: &mut [f64]) -> f64 {
    let odd = xs.len() % 2 == 1;
    let mid = xs.len() / 2;
    let (below, upper_mid, _) = xs.select_nth_unstable_by(mid, f64::total_cmp);
    let upper_mid = *upper_mid;
    if odd {
        upper_mid
    } else {
        let lower_mid = below.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        0.5 * lower_mid + 0.5 * upper_mid
    }
}

/// Iglewicz & Hoaglin's modified Z-score of every value (*How to Detect and Handle Outliers*,
/// 1993): `0.6745 · (x − median) / MAD`, MAD being the median absolute deviation from the
/// median. Both centre and scale are medians, so the outliers being looked for cannot hide
/// themselves by inflating the scale, as they do with the ordinary Z-score; Iglewicz and
/// Hoaglin call values scoring above 3.5 in absolute value potential outliers.
///
/// When more than half the values equal the median the MAD is zero; the score then divides
/// by `1.2533 ·` the mean absolute deviation from the median instead (the same authors'
/// fallback; both constants make the scale estimate the standard deviation of normal data),
/// so one odd value among identical ones gets a finite score. All values equal score 0.
///
/// # Errors
/// [`StatsError::TooFewObservations`] for an empty slice; [`StatsError::NonFinite`] on NaN or
/// infinity.
pub fn modified_z_scores(xs: &[f64]) -> Result<Vec<f64>> {
    validate::sample(xs, 1)?;
    let centre = median_in_place(&mut xs.to_vec());
    let mut deviations: Vec<f64> = xs.iter().map(|x| (x - centre).abs()).collect();
    let mean_deviation = deviations.iter().sum::<f64>() / xs.len() as f64;
    let mad = median_in_place(&mut deviations);
    let scale = if mad > 0.0 {
        mad / 0.6745
    } else {
        1.253_314 * mean_deviation
    };
    Ok(xs
        .iter()
        .map(|x| {
            if scale > 0.0 {
                (x - centre) / scale
            } else {
                0.0
            }
        })
        .collect())
}

/// How a bootstrap resamples, and from which seed.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Bootstrap {
    /// Number of resamples; 2,000 or more keeps the percentiles of a 95 % interval steady to
    /// a few parts in a thousand.
    pub resamples: usize,
    /// Seed of the generator: the same data and seed give the same interval.
    pub seed: u64,
}

impl Default for Bootstrap {
    fn default() -> Self {
        Bootstrap {
            resamples: 4000,
            seed: 0x7a11_b007,
        }
    }
}

/// Percentile-bootstrap interval of `statistic` over `units` independent units (rounds of a
/// benchmark run, say): each resample draws `units` indices with replacement and hands them
/// to `statistic`; the interval is between the `(1 − level)/2` and `(1 + level)/2` quantiles
/// of the resampled values, and the estimate is the statistic of the data as they are.
///
/// `statistic` sees indices, not values, so that one resample can keep several series paired
/// (all benchmarks of the same rounds).
///
/// # Errors
/// [`StatsError::TooFewObservations`] for fewer than two units;
/// [`StatsError::InvalidParameter`] for a bad `level` or no resamples; [`StatsError::NonFinite`]
/// if the statistic is not finite on the data.
pub fn bootstrap_ci(
    units: usize,
    level: f64,
    settings: Bootstrap,
    mut statistic: impl FnMut(&[usize]) -> f64,
) -> Result<ConfidenceInterval> {
    validate::level(level)?;
    if units < 2 {
        return Err(StatsError::TooFewObservations {
            needed: 2,
            got: units,
        });
    }
    if settings.resamples == 0 {
        return Err(StatsError::InvalidParameter(
            "a bootstrap needs at least one resample",
        ));
    }
    let all: Vec<usize> = (0..units).collect();
    let estimate = statistic(&all);
    if !estimate.is_finite() {
        return Err(StatsError::NonFinite);
    }
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(settings.seed);
    let mut drawn = vec![0; units];
    let mut values: Vec<f64> = Vec::with_capacity(settings.resamples);
    for _ in 0..settings.resamples {
        for slot in drawn.iter_mut() {
            *slot = rng.random_range(0..units);
        }
        let v = statistic(&drawn);
        if v.is_finite() {
            values.push(v);
        }
    }
    if values.is_empty() {
        return Err(StatsError::NonFinite);
    }
    values.sort_by(f64::total_cmp);
    let tail = 0.5 * (1.0 - level);
    Ok(ConfidenceInterval {
        estimate,
        lower: quantile_of_sorted(&values, tail),
        upper: quantile_of_sorted(&values, 1.0 - tail),
        level,
    })
}

/// Linear interpolation between order statistics (type 7 of Hyndman & Fan, R's default).
fn quantile_of_sorted(sorted: &[f64], p: f64) -> f64 {
    let h = (sorted.len() - 1) as f64 * p;
    let lo = h.floor() as usize;
    let hi = (lo + 1).min(sorted.len() - 1);
    sorted[lo] + (h - lo as f64) * (sorted[hi] - sorted[lo])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hodges_lehmann_of_small_samples_by_hand() {
        assert_eq!(hodges_lehmann(&[3.0]).unwrap(), 3.0);
        // Walsh averages of 1, 2, 10: 1, 1.5, 5.5, 2, 6, 10 → median (2 + 5.5) / 2.
        assert_eq!(hodges_lehmann(&[1.0, 2.0, 10.0]).unwrap(), 3.75);
        // Symmetric samples: the centre.
        assert_eq!(hodges_lehmann(&[-2.0, -1.0, 0.0, 1.0, 2.0]).unwrap(), 0.0);
    }

    #[test]
    fn hodges_lehmann_ignores_a_minority_of_wild_values() {
        // Twenty pairs near 1 % and three measured across a change of machine speed.
        let mut xs: Vec<f64> = (0..20).map(|i| 0.01 + 0.001 * (i % 5) as f64).collect();
        xs.extend([0.7, -0.6, 0.9]);
        let hl = hodges_lehmann(&xs).unwrap();
        assert!((hl - 0.012).abs() < 0.003, "{hl}");
        let mean = xs.iter().sum::<f64>() / xs.len() as f64;
        assert!(mean > 0.05, "the mean is dragged away: {mean}");
    }

    #[test]
    fn modified_z_scores_by_hand() {
        // Median 10, absolute deviations 2, 1, 0, 1, 30: MAD 1, so z = 0.6745 (x − 10).
        let z = modified_z_scores(&[8.0, 9.0, 10.0, 11.0, 40.0]).unwrap();
        let want = [-1.349, -0.6745, 0.0, 0.6745, 20.235];
        for (got, want) in z.iter().zip(want) {
            assert!((got - want).abs() < 1e-9, "{z:?}");
        }
        // MAD 0 (three of four values equal): the mean absolute deviation, 5 / 4, scales.
        let z = modified_z_scores(&[5.0, 5.0, 5.0, 10.0]).unwrap();
        assert!((z[3] - 5.0 / (1.253_314 * 1.25)).abs() < 1e-9, "{z:?}");
        assert_eq!(z[0], 0.0);
        assert_eq!(modified_z_scores(&[7.0; 4]).unwrap(), vec![0.0; 4]);
    }

    #[test]
    fn modified_z_scores_are_not_masked_by_the_outlier_itself() {
        // One wild value among ten: the ordinary Z-score of 50 is below 3 (it inflates the
        // standard deviation it is measured by); the modified one is far above 3.5.
        let xs = [10.0, 10.2, 9.9, 10.1, 10.0, 9.8, 10.3, 10.1, 9.9, 50.0];
        let mean = xs.iter().sum::<f64>() / 10.0;
        let sd = (xs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / 9.0).sqrt();
        assert!((50.0 - mean) / sd < 3.0);
        let z = modified_z_scores(&xs).unwrap();
        assert!(z[9] > 100.0, "{z:?}");
        assert!(z[..9].iter().all(|z| z.abs() < 3.5), "{z:?}");
        assert!(matches!(
            modified_z_scores(&[]),
            Err(StatsError::TooFewObservations { .. })
        ));
    }

    #[test]
    fn hodges_lehmann_rejects_bad_input() {
        assert!(matches!(
            hodges_lehmann(&[]),
            Err(StatsError::TooFewObservations { .. })
        ));
        assert!(matches!(
            hodges_lehmann(&[1.0, f64::NAN]),
            Err(StatsError::NonFinite)
        ));
    }

    #[test]
    fn bootstrap_interval_of_a_mean_is_close_to_the_t_interval() {
        // 40 values of a known spread; the percentile interval of the mean should be near
        // mean ± 1.96 s/√n (slightly narrower, as percentile intervals are).
        let xs: Vec<f64> = (0..40).map(|i| ((i * 37) % 40) as f64 / 10.0).collect();
        let mean = |idx: &[usize]| idx.iter().map(|&i| xs[i]).sum::<f64>() / idx.len() as f64;
        let ci = bootstrap_ci(xs.len(), 0.95, Bootstrap::default(), mean).unwrap();
        let t = crate::mean_ci(&xs, 0.95).unwrap();
        assert!((ci.estimate - t.estimate).abs() < 1e-12);
        let (w_boot, w_t) = (ci.upper - ci.lower, t.upper - t.lower);
        assert!(
            w_boot > 0.85 * w_t && w_boot < 1.05 * w_t,
            "{w_boot} vs {w_t}"
        );
        assert!(ci.lower < ci.estimate && ci.estimate < ci.upper);
    }

    #[test]
    fn bootstrap_is_reproducible_and_the_seed_matters() {
        let xs: Vec<f64> = (0..15).map(|i| (i as f64).sin()).collect();
        let stat = |idx: &[usize]| {
            hodges_lehmann(&idx.iter().map(|&i| xs[i]).collect::<Vec<_>>()).unwrap()
        };
        let a = bootstrap_ci(xs.len(), 0.9, Bootstrap::default(), stat).unwrap();
        let b = bootstrap_ci(xs.len(), 0.9, Bootstrap::default(), stat).unwrap();
        assert_eq!(a, b);
        let other = Bootstrap {
            seed: 1,
            ..Bootstrap::default()
        };
        let c = bootstrap_ci(xs.len(), 0.9, other, stat).unwrap();
        assert_ne!((a.lower, a.upper), (c.lower, c.upper));
    }

    #[test]
    fn bootstrap_rejects_what_it_cannot_resample() {
        let one = |_: &[usize]| 1.0;
        assert!(bootstrap_ci(1, 0.95, Bootstrap::default(), one).is_err());
        let none = Bootstrap {
            resamples: 0,
            ..Bootstrap::default()
        };
        assert!(bootstrap_ci(5, 0.95, none, one).is_err());
        assert!(bootstrap_ci(5, 1.5, Bootstrap::default(), one).is_err());
    }

    #[test]
    fn quantiles_interpolate_between_order_statistics() {
        let s = [1.0, 2.0, 3.0, 4.0];
        assert_eq!(quantile_of_sorted(&s, 0.0), 1.0);
        assert_eq!(quantile_of_sorted(&s, 1.0), 4.0);
        assert!((quantile_of_sorted(&s, 0.5) - 2.5).abs() < 1e-12);
    }
}
