//! Root finding for inverting distribution functions that have no closed
//! form inverse (the studentized range).

/// Finds `x` in `[lo, hi]` with `f(x) = 0`, given that `f(lo)` and `f(hi)`
/// have opposite signs, by Brent's method.
///
/// Brent rather than plain bisection because each evaluation of `f` is a
/// double integral: inverse quadratic interpolation converges superlinearly
/// on smooth monotone functions, while the bisection fallback still
/// guarantees termination if the integrand's rounding makes `f` ragged.
pub(crate) fn brent(
    mut f: impl FnMut(f64) -> f64,
    lo: f64,
    hi: f64,
    tolerance: f64,
    max_iterations: usize,
) -> f64 {
    let (mut a, mut b) = (lo, hi);
    let (mut fa, mut fb) = (f(a), f(b));
    if fa == 0.0 {
        return a;
    }
    if fb == 0.0 {
        return b;
    }
    let (mut c, mut fc) = (a, fa);
    let mut d = b - a;
    let mut e = d;
    for _ in 0..max_iterations {
        if fb.signum() == fc.signum() {
            c = a;
            fc = fa;
            d = b - a;
            e = d;
        }
        // Keep b the best estimate.
        if fc.abs() < fb.abs() {
            a = b;
            b = c;
            c = a;
            fa = fb;
            fb = fc;
            fc = fa;
        }
        let tol = 2.0 * f64::EPSILON * b.abs() + 0.5 * tolerance;
        let m = 0.5 * (c - b);
        if m.abs() <= tol || fb == 0.0 {
            return b;
        }
        if e.abs() >= tol && fa.abs() > fb.abs() {
            let s = fb / fa;
            let (mut p, mut q) = if a == c {
                (2.0 * m * s, 1.0 - s)
            } else {
                let q = fa / fc;
                let r = fb / fc;
                (
                    s * (2.0 * m * q * (q - r) - (b - a) * (r - 1.0)),
                    (q - 1.0) * (r - 1.0) * (s - 1.0),
                )
            };
            if p > 0.0 {
                q = -q;
            } else {
                p = -p;
            }
            if 2.0 * p < (3.0 * m * q - (tol * q).abs()).min((e * q).abs()) {
                e = d;
                d = p / q;
            } else {
                d = m;
                e = m;
            }
        } else {
            d = m;
            e = m;
        }
        a = b;
        fa = fb;
        b += if d.abs() > tol { d } else { tol.copysign(m) };
        fb = f(b);
    }
    b
}

/// Root of an increasing function `f` on the whole real line, searched
/// outward from `guess`: steps of `step`, doubling each time, until the sign
/// changes, then [`brent`] to `tolerance`.
///
/// Used to turn a good but imprecise starting value (statrs's quantile, an
/// approximation) into a root accurate to the precision of `f` itself.
pub(crate) fn solve_increasing(
    mut f: impl FnMut(f64) -> f64,
    guess: f64,
    step: f64,
    tolerance: f64,
) -> f64 {
    // Log-probability residuals are ±∞ where a probability under- or
    // overflows; keep them finite so Brent's interpolation stays defined.
    let mut f = |x: f64| f(x).clamp(-f64::MAX, f64::MAX);
    let at_guess = f(guess);
    if at_guess == 0.0 {
        return guess;
    }
    let direction = if at_guess < 0.0 { 1.0 } else { -1.0 };
    let mut near = guess;
    let mut far = guess + direction * step;
    let mut stride = step;
    for _ in 0..1100 {
        let value = f(far);
        if value.is_nan() || (value < 0.0) != (at_guess < 0.0) || value == 0.0 {
            break;
        }
        near = far;
        stride *= 2.0;
        far += direction * stride;
    }
    let (lo, hi) = if direction > 0.0 {
        (near, far)
    } else {
        (far, near)
    };
    brent(f, lo, hi, tolerance, 200)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_cube_root() {
        let mut calls = 0;
        let x = brent(
            |x| {
                calls += 1;
                x * x * x - 2.0
            },
            0.0,
            4.0,
            1e-14,
            200,
        );
        assert!((x - 2f64.cbrt()).abs() < 1e-13, "{x}");
        assert!(calls < 30, "{calls} evaluations");
    }

    #[test]
    fn brackets_from_a_poor_guess() {
        let x = solve_increasing(|x| x.powi(3) - 1000.0, -3.0, 0.1, 1e-13);
        assert!((x - 10.0).abs() < 1e-11, "{x}");
        let x = solve_increasing(|x| x - 2.5, 7.0, 0.1, 1e-13);
        assert!((x - 2.5).abs() < 1e-12, "{x}");
    }

    #[test]
    fn finds_root_of_steep_function() {
        let x = brent(|x| (x - 0.3).tanh() * 1e-12, -50.0, 50.0, 1e-12, 200);
        assert!((x - 0.3).abs() < 1e-10, "{x}");
    }
}
