//! Composite Gauss–Legendre quadrature.
//!
//! The studentized range needs a double integral of smooth, bell-shaped
//! integrands over finite ranges. Fixed panels of a high-order Gauss rule are
//! accurate to near machine precision there, cost a predictable number of
//! evaluations, and (unlike adaptive schemes) let the outer integral reuse
//! one grid for every evaluation point.

use std::sync::OnceLock;

/// Number of nodes per panel; 20 nodes integrate polynomials of degree 39
/// exactly, which is far beyond what the panel widths used here need.
pub(crate) const ORDER: usize = 20;

/// Nodes and weights on [-1, 1].
struct Rule {
    nodes: [f64; ORDER],
    weights: [f64; ORDER],
}

/// Computed rather than tabulated so that no long list of magic constants has
/// to be trusted; Newton's method on the Legendre polynomial converges to
/// full precision from the Chebyshev-like starting guesses in a few steps.
fn rule() -> &'static Rule {
    static RULE: OnceLock<Rule> = OnceLock::new();
    RULE.get_or_init(|| {
        let n = ORDER;
        let mut nodes = [0.0; ORDER];
        let mut weights = [0.0; ORDER];
        for i in 0..n {
            let mut x = (std::f64::consts::PI * (i as f64 + 0.75) / (n as f64 + 0.5)).cos();
            for _ in 0..100 {
                let (p, dp) = legendre(n, x);
                let step = p / dp;
                x -= step;
                if step.abs() < 1e-16 {
                    break;
                }
            }
            let (_, derivative) = legendre(n, x);
            nodes[i] = x;
            weights[i] = 2.0 / ((1.0 - x * x) * derivative * derivative);
        }
        Rule { nodes, weights }
    })
}

/// Legendre polynomial P_n and its derivative at `x`, by the three-term
/// recurrence.
fn legendre(n: usize, x: f64) -> (f64, f64) {
    let mut p0 = 1.0;
    let mut p1 = x;
    for k in 2..=n {
        let k = k as f64;
        let p2 = ((2.0 * k - 1.0) * x * p1 - (k - 1.0) * p0) / k;
        p0 = p1;
        p1 = p2;
    }
    let dp = n as f64 * (x * p1 - p0) / (x * x - 1.0);
    (p1, dp)
}

/// Calls `visit(x, w)` for every node `x` and weight `w` of a composite rule
/// with `panels` equal panels over `[a, b]`, so that callers can both sum
/// integrands and precompute per-node data.
pub(crate) fn for_each_node(a: f64, b: f64, panels: usize, mut visit: impl FnMut(f64, f64)) {
    let rule = rule();
    let width = (b - a) / panels as f64;
    let half = 0.5 * width;
    for panel in 0..panels {
        let centre = a + (panel as f64 + 0.5) * width;
        for (x, w) in rule.nodes.iter().zip(&rule.weights) {
            visit(centre + half * x, half * w);
        }
    }
}

/// Integral of `f` over `[a, b]` with `panels` equal panels.
pub(crate) fn integrate(a: f64, b: f64, panels: usize, mut f: impl FnMut(f64) -> f64) -> f64 {
    let mut sum = 0.0;
    for_each_node(a, b, panels, |x, w| sum += w * f(x));
    sum
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integrates_polynomials_exactly() {
        // Degree 39 is the highest a 20-point rule integrates exactly.
        let got = integrate(-1.0, 1.0, 1, |x| x.powi(38));
        assert!((got - 2.0 / 39.0).abs() < 1e-14, "{got}");
        let weights: f64 = rule().weights.iter().sum();
        assert!((weights - 2.0).abs() < 1e-14);
    }

    #[test]
    fn integrates_gaussian() {
        let got = integrate(-10.0, 10.0, 8, |x| (-0.5 * x * x).exp());
        let want = (2.0 * std::f64::consts::PI).sqrt();
        assert!((got - want).abs() < 1e-13, "{got}");
    }
}
