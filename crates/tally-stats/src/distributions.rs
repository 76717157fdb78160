//! Student's t and Fisher's F distributions, built on statrs's special
//! functions so that nothing panics, hangs or silently loses precision.
//!
//! statrs is used for what it does well, the regularized incomplete beta
//! function behind both CDFs, which agrees with SciPy to about 1e-10. Its
//! distribution objects are not used: their CDFs turn a huge `x` into NaN
//! and then panic inside the beta function, and their quantiles rest on the
//! inverse incomplete beta function, which loses accuracy
//! for large degrees of freedom (t quantiles off by 3e-7 at df = 3·10⁴ and
//! 3e-4 at 10⁶), never returns for F with a denominator df of 10⁸, and
//! panics for probabilities such as 1e-300. Quantiles are instead found by
//! root finding on the CDF, to the CDF's own precision. For t with
//! `df ≥ 10⁵`, where statrs's CDF starts to drift too, Fisher's large-df
//! expansion to second order in `1/df` is used; `df = ∞` (the normal
//! distribution) is allowed, since Welch's approximation can approach it.
//! F degrees of freedom are capped at 10⁷, beyond which statrs's incomplete
//! beta function is no longer trustworthy (at 10²⁰ it returns
//! probabilities above one); no benchmark comes near that.

use crate::error::{Result, StatsError};
use crate::{roots, validate};
use statrs::function::beta::checked_beta_reg;
use statrs::function::erf::{erfc, erfc_inv};

/// From here on the t distribution is computed by its large-df expansion.
const LARGE_DF: f64 = 1e5;
/// Largest F degrees of freedom accepted (see the module documentation).
const MAX_F_DF: f64 = 1e7;

/// `P(T ≤ x)` for Student's t with `df` degrees of freedom (`f64::INFINITY`
/// allowed, giving the standard normal).
///
/// # Errors
/// [`StatsError::InvalidParameter`] if `df` is NaN or not positive;
/// [`StatsError::NonFinite`] if `x` is NaN.
pub fn t_cdf(x: f64, df: f64) -> Result<f64> {
    not_nan(x)?;
    Ok(StudentT::new(df)?.cdf(x))
}

/// `P(T > x)`, computed directly so small p-values keep their precision.
///
/// # Errors
/// As [`t_cdf`].
pub fn t_sf(x: f64, df: f64) -> Result<f64> {
    not_nan(x)?;
    Ok(StudentT::new(df)?.sf(x))
}

/// The `x` with `P(T ≤ x) = p`; `t_quantile(0.975, df)` is the multiplier of
/// a two-sided 95 % interval.
///
/// # Errors
/// [`StatsError::InvalidParameter`] if `p` is not strictly between 0 and 1 or
/// `df` is NaN or not positive.
pub fn t_quantile(p: f64, df: f64) -> Result<f64> {
    validate::probability(p)?;
    let t = StudentT::new(df)?;
    let guess = t.approximate_quantile(p);
    let scale = guess.abs().max(1.0);
    let residual = |x: f64| log_residual(p, || t.cdf(x), || t.sf(x));
    Ok(roots::solve_increasing(
        residual,
        guess,
        0.05 * scale,
        1e-15 * scale,
    ))
}

/// `P(F ≤ x)` for Fisher's F with `df1` (numerator) and `df2` (denominator)
/// degrees of freedom.
///
/// # Errors
/// [`StatsError::InvalidParameter`] if either degree of freedom is not
/// positive and at most 10⁷; [`StatsError::NonFinite`] if `x` is NaN.
pub fn f_cdf(x: f64, df1: f64, df2: f64) -> Result<f64> {
    not_nan(x)?;
    Ok(FisherF::new(df1, df2)?.cdf(x))
}

/// `P(F > x)`: the p-value of an ANOVA whose statistic is `x`.
///
/// # Errors
/// As [`f_cdf`].
pub fn f_sf(x: f64, df1: f64, df2: f64) -> Result<f64> {
    not_nan(x)?;
    Ok(FisherF::new(df1, df2)?.sf(x))
}

/// The `x` with `P(F ≤ x) = p`.
///
/// # Errors
/// [`StatsError::InvalidParameter`] if `p` is not strictly between 0 and 1,
/// or for the degree-of-freedom errors of [`f_cdf`].
pub fn f_quantile(p: f64, df1: f64, df2: f64) -> Result<f64> {
    validate::probability(p)?;
    let f = FisherF::new(df1, df2)?;
    // Solved for ln x, which keeps the search inside F's positive support;
    // F's median is near 1 for all but tiny degrees of freedom, so ln x = 0
    // is a starting point from which the bracket grows quickly enough.
    let residual = |log_x: f64| {
        let x = log_x.exp();
        log_residual(p, || f.cdf(x), || f.sf(x))
    };
    Ok(roots::solve_increasing(residual, 0.0, 0.1, 1e-15).exp())
}

/// `ln P(X ≤ x) − ln p`, evaluated on whichever tail `p` lies in (so the
/// target is never a difference of numbers near one) and on the log scale
/// (so that tail probabilities down to 1e-300 still resolve); increasing in
/// `x` either way.
fn log_residual(p: f64, cdf: impl FnOnce() -> f64, sf: impl FnOnce() -> f64) -> f64 {
    if p <= 0.5 {
        cdf().ln() - p.ln()
    } else {
        (1.0 - p).ln() - sf().ln()
    }
}

fn not_nan(x: f64) -> Result<()> {
    if x.is_nan() {
        Err(StatsError::NonFinite)
    } else {
        Ok(())
    }
}

/// Student's t: statrs's regularized incomplete beta function below
/// [`LARGE_DF`], the large-df expansion (exact at `df = ∞`) above.
struct StudentT {
    df: f64,
}

impl StudentT {
    fn new(df: f64) -> Result<Self> {
        // `df / 2` must stay positive for the incomplete beta function,
        // which rules out subnormal df as well as zero and negatives.
        if df.is_nan() || df / 2.0 <= 0.0 {
            return Err(StatsError::InvalidParameter(
                "t degrees of freedom must be positive",
            ));
        }
        Ok(StudentT { df })
    }

    fn cdf(&self, x: f64) -> f64 {
        self.sf(-x)
    }

    /// `P(T > x)`. Below [`LARGE_DF`], `P(|T| > |x|) = I_h(df/2, 1/2)` with
    /// `h = df / (df + x²)`, written as `1 / (1 + x²/df)` so that no
    /// intermediate overflows into NaN.
    fn sf(&self, x: f64) -> f64 {
        if x.is_infinite() {
            return if x > 0.0 { 0.0 } else { 1.0 };
        }
        if self.df >= LARGE_DF {
            return self.large_df_sf(x);
        }
        let h = 1.0 / (1.0 + x * x / self.df);
        let two_tailed = incomplete_beta(0.5 * self.df, 0.5, h);
        if x >= 0.0 {
            0.5 * two_tailed
        } else {
            1.0 - 0.5 * two_tailed
        }
    }

    /// `Q(x) + φ(x)[(x³ + x)/(4ν) + (3x⁷ − 7x⁵ − 5x³ − 3x)/(96ν²)]`, from
    /// integrating the density's expansion
    /// `φ(x)[1 + (x⁴ − 2x² − 1)/(4ν) + (3x⁸ − 28x⁶ + 30x⁴ + 12x² + 3)/(96ν²)]`
    /// term by term (Fisher's expansion). The neglected `O(ν⁻³)` term is
    /// below 1e-14 for `ν ≥ 10⁵` at any `x` where the tail is above 1e-300.
    fn large_df_sf(&self, x: f64) -> f64 {
        let normal_sf = 0.5 * erfc(x / std::f64::consts::SQRT_2);
        let normal_pdf = (-0.5 * x * x).exp() / (2.0 * std::f64::consts::PI).sqrt();
        if normal_pdf == 0.0 {
            // Far enough out that the correction underflows (and its
            // polynomial might overflow): the normal tail is the answer.
            return normal_sf;
        }
        let x2 = x * x;
        let first = x * (x2 + 1.0) / 4.0;
        let second = x * (((3.0 * x2 - 7.0) * x2 - 5.0) * x2 - 3.0) / 96.0;
        normal_sf + normal_pdf * (first + second / self.df) / self.df
    }

    /// A starting point for the quantile search: the normal quantile with
    /// the first Cornish–Fisher correction. Poor for small df in the tails,
    /// which only costs the search a few extra bracket doublings.
    fn approximate_quantile(&self, p: f64) -> f64 {
        let z = -std::f64::consts::SQRT_2 * erfc_inv(2.0 * p);
        let guess = z + (z * z * z + z) / (4.0 * self.df);
        if guess.is_finite() {
            guess
        } else {
            0.0
        }
    }
}

/// Fisher's F through statrs's regularized incomplete beta function.
struct FisherF {
    df1: f64,
    df2: f64,
}

impl FisherF {
    fn new(df1: f64, df2: f64) -> Result<Self> {
        let valid = |df: f64| df / 2.0 > 0.0 && df <= MAX_F_DF;
        if valid(df1) && valid(df2) {
            Ok(FisherF { df1, df2 })
        } else {
            Err(StatsError::InvalidParameter(
                "F degrees of freedom must lie in (0, 1e7]",
            ))
        }
    }

    /// `I_z(df1/2, df2/2)` with `z = df1·x / (df1·x + df2)`, written as
    /// `1 / (1 + df2/(df1·x))` so that huge `x` gives `z = 1`, not NaN.
    fn cdf(&self, x: f64) -> f64 {
        if x <= 0.0 {
            return 0.0;
        }
        if x.is_infinite() {
            return 1.0;
        }
        let z = 1.0 / (1.0 + self.df2 / (self.df1 * x));
        incomplete_beta(0.5 * self.df1, 0.5 * self.df2, z)
    }

    /// `I_{1−z}(df2/2, df1/2)`, the upper tail without subtracting from one.
    fn sf(&self, x: f64) -> f64 {
        if x <= 0.0 {
            return 1.0;
        }
        if x.is_infinite() {
            return 0.0;
        }
        let one_minus_z = 1.0 / (1.0 + self.df1 * x / self.df2);
        incomplete_beta(0.5 * self.df2, 0.5 * self.df1, one_minus_z)
    }
}

/// statrs's regularized incomplete beta function, without its panics: the
/// callers guarantee positive parameters and `x` in [0, 1], so the error
/// branch is unreachable, and NaN is a safer answer than aborting a
/// benchmark run if that guarantee were ever broken.
fn incomplete_beta(a: f64, b: f64, x: f64) -> f64 {
    checked_beta_reg(a, b, x).unwrap_or(f64::NAN)
}

/// Reference values from SciPy 1.17.1 (`scipy.stats.t.ppf`, `t.cdf`, `t.sf`,
/// `f.ppf`, `f.cdf`, `f.sf`), computed independently of this crate; only the
/// numbers are kept here. Tolerances are 1e-9 relative (statrs's `erfc`,
/// which everything rests on, is good to about 5e-11).
#[cfg(test)]
mod tests {
    use super::*;

    const INF: f64 = f64::INFINITY;

    use crate::test_util::assert_close;

    #[test]
    fn t_quantiles_match_scipy() {
        // (df, 0.9, 0.95, 0.975, 0.995)
        let table = [
            (
                1.0,
                3.0776835371752544,
                6.313751514675037,
                12.706204736174694,
                63.656741162871526,
            ),
            (
                2.0,
                1.8856180831641272,
                2.9199855803537242,
                4.302652729749462,
                9.924843200918287,
            ),
            (
                3.0,
                1.637744353696209,
                2.3533634348018233,
                3.1824463052837078,
                5.840909309733355,
            ),
            (
                5.0,
                1.4758840488244815,
                2.0150483733330233,
                2.5705818356363146,
                4.032142983555228,
            ),
            (
                7.3,
                1.4089223177480423,
                1.8829300179564308,
                2.345066736547703,
                3.451031655622185,
            ),
            (
                10.0,
                1.372183641110336,
                1.8124611228116756,
                2.228138851986274,
                3.16927267261695,
            ),
            (
                30.0,
                1.3104150253913955,
                1.697260886593957,
                2.0422724563012378,
                2.7499956535672254,
            ),
            (
                100.0,
                1.290074761346516,
                1.6602343260853392,
                1.9839715185235518,
                2.6258905214380173,
            ),
            (
                1e6,
                1.281552412129939,
                1.6448551507220404,
                1.959966356814107,
                2.5758342201053344,
            ),
            (
                INF,
                1.2815515655446006,
                1.6448536269514724,
                1.9599639845400538,
                2.575829303548901,
            ),
        ];
        for (df, q90, q95, q975, q995) in table {
            for (p, want) in [(0.9, q90), (0.95, q95), (0.975, q975), (0.995, q995)] {
                let what = format!("t_quantile({p}, {df})");
                assert_close(t_quantile(p, df).unwrap(), want, 1e-9, &what);
                // Symmetry: the lower quantile is the negated upper one.
                assert_close(t_quantile(1.0 - p, df).unwrap(), -want, 1e-9, &what);
            }
        }
    }

    #[test]
    fn large_degrees_of_freedom_match_scipy() {
        // (df, t.ppf 0.975, t.ppf 0.9995, t.sf(2.5), f.ppf(0.975; 4, df), f.sf(2.5; 4, df))
        let table = [
            (
                3e4,
                1.9600430633839347,
                3.2908510848860266,
                0.006212313044899922,
                2.7862462586680667,
                0.04045014275324963,
            ),
            (
                1e5,
                1.9599877075346095,
                3.2906240314119137,
                0.0062104595962795255,
                2.7859490566405722,
                0.04043442002569141,
            ),
            (
                1e6,
                1.959966356814107,
                3.2905364612487222,
                0.006209744751081627,
                2.7858344312852674,
                0.04042835579115812,
            ),
            (
                1e7,
                1.959964221767205,
                3.2905277044652532,
                0.006209673268289235,
                2.7858229689719383,
                0.040427749363909055,
            ),
        ];
        for (df, q975, q9995, sf, f975, fsf) in table {
            let what = format!("df={df}");
            assert_close(t_quantile(0.975, df).unwrap(), q975, 1e-9, &what);
            assert_close(t_quantile(0.9995, df).unwrap(), q9995, 1e-9, &what);
            assert_close(t_sf(2.5, df).unwrap(), sf, 1e-9, &what);
            assert_close(f_quantile(0.975, 4.0, df).unwrap(), f975, 1e-8, &what);
            assert_close(f_sf(2.5, 4.0, df).unwrap(), fsf, 1e-8, &what);
        }
    }

    #[test]
    fn t_cdf_matches_scipy() {
        let table = [
            (2.0, 3.0, 0.9303370157205785),
            (-1.5, 7.3, 0.08778154640154305),
            (0.3, 1.0, 0.5927735790777423),
            (4.2, 25.0, 0.9998519980505349),
            (2.5, INF, 0.9937903346742238),
        ];
        for (x, df, want) in table {
            let what = format!("t_cdf({x}, {df})");
            assert_close(t_cdf(x, df).unwrap(), want, 1e-9, &what);
            assert_close(t_sf(x, df).unwrap(), 1.0 - want, 1e-8, &what);
        }
    }

    #[test]
    fn f_quantiles_match_scipy() {
        // (df1, df2, 0.95, 0.99)
        let table = [
            (1.0, 1.0, 161.4476387975882, 4052.1806954768217),
            (1.0, 10.0, 4.964602743730711, 10.04428927339658),
            (2.0, 5.0, 5.786135043349963, 13.273933612004825),
            (3.0, 18.0, 3.1599075898007243, 5.0918895204140115),
            (4.0, 40.0, 2.605974949123867, 3.8282935494048713),
            (10.0, 2.5, 12.022589009960523, 45.420342790958955),
            (30.0, 120.0, 1.5543425963956685, 1.860005283717107),
            (5.0, 1e6, 2.214108473164322, 3.017272727619052),
        ];
        for (df1, df2, q95, q99) in table {
            let what = format!("f_quantile(df1={df1}, df2={df2})");
            assert_close(f_quantile(0.95, df1, df2).unwrap(), q95, 1e-9, &what);
            assert_close(f_quantile(0.99, df1, df2).unwrap(), q99, 1e-9, &what);
        }
    }

    #[test]
    fn f_cdf_and_sf_match_scipy() {
        let table = [
            (3.5, 3.0, 18.0, 0.9630575367283373, 0.03694246327166268),
            (0.5, 2.0, 5.0, 0.36606185473939107, 0.6339381452606089),
            (12.0, 4.0, 40.0, 0.9999983117957314, 1.6882042686430158e-06),
        ];
        for (x, df1, df2, cdf, sf) in table {
            let what = format!("F({x}; {df1}, {df2})");
            assert_close(f_cdf(x, df1, df2).unwrap(), cdf, 1e-9, &what);
            assert_close(f_sf(x, df1, df2).unwrap(), sf, 1e-8, &what);
        }
    }

    #[test]
    fn rejects_bad_arguments() {
        assert!(t_quantile(0.0, 5.0).is_err());
        assert!(t_quantile(1.0, 5.0).is_err());
        assert!(t_quantile(f64::NAN, 5.0).is_err());
        assert!(t_quantile(0.5, 0.0).is_err());
        assert!(t_quantile(0.5, f64::NAN).is_err());
        assert!(t_cdf(f64::NAN, 5.0).is_err());
        assert!(f_quantile(0.95, 0.0, 3.0).is_err());
        assert!(f_quantile(0.95, 3.0, INF).is_err());
        assert!(f_quantile(1.5, 3.0, 3.0).is_err());
        assert!(f_sf(f64::NAN, 3.0, 3.0).is_err());
    }
}
