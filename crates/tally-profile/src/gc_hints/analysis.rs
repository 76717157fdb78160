//! Finding favorable collection points in a profiling run's live-data measurements.
//!
//! The run measures, at method entries and exits picked along its allocation (a full
//! collection there, and the bytes still in use after it), how much of the heap is live. A
//! point is favorable when the live data measured there is, again and again, a local minimum
//! of the run's live-data curve, and lower than usual (than the median over the allocation):
//! collecting there finds mostly garbage.

use std::collections::BTreeMap;

use super::file::{HintPoint, PointKind};

/// One measurement: at `method`'s entry or exit, after the run had allocated
/// `allocated_bytes`, a full collection left `live_bytes` in use.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LiveMeasurement {
    pub method: String,
    pub kind: PointKind,
    pub allocated_bytes: u64,
    pub live_bytes: u64,
}

/// What makes a point favorable.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct AnalysisSettings {
    /// A measurement is a local minimum when no measurement within this many on either side
    /// (in allocation order) is lower.
    pub window: usize,
    /// Points measured fewer times than this are not trusted.
    pub min_seen: u32,
    /// The share of a point's measurements that must be local minima.
    pub min_minima_share: f64,
    /// A point's median live data, as a share of the run's (allocation-weighted) median, at
    /// most.
    pub max_live_share: f64,
}

impl Default for AnalysisSettings {
    fn default() -> Self {
        AnalysisSettings {
            window: 2,
            min_seen: 3,
            min_minima_share: 0.5,
            max_live_share: 0.8,
        }
    }
}

fn median(values: &mut [u64]) -> u64 {
    values.sort_unstable();
    match values.len() {
        0 => 0,
        n if n % 2 == 1 => values[n / 2],
        n => (values[n / 2 - 1] + values[n / 2]) / 2,
    }
}

/// The live data the run typically had, per byte allocated: the median of the measurements,
/// each weighted by the allocation it stands for (half the way to each neighbour). A run
/// measures many points at once at a phase boundary and few in between, so a plain median
/// would be the boundaries' own live data.
fn allocation_weighted_median(ordered: &[&LiveMeasurement]) -> u64 {
    let n = ordered.len();
    if n == 0 {
        return 0;
    }
    if n == 1 {
        return ordered[0].live_bytes;
    }
    let at = |i: usize| ordered[i].allocated_bytes;
    let mut weighted: Vec<(u64, u64)> = (0..n)
        .map(|i| {
            let before = if i == 0 { 0 } else { at(i) - at(i - 1) };
            let after = if i + 1 == n { 0 } else { at(i + 1) - at(i) };
            (ordered[i].live_bytes, before + after)
        })
        .collect();
    let total: u64 = weighted.iter().map(|&(_, w)| w).sum();
    if total == 0 {
        return median(&mut weighted.iter().map(|&(l, _)| l).collect::<Vec<_>>());
    }
    weighted.sort_unstable();
    let mut seen = 0;
    for &(live, w) in &weighted {
        seen += w;
        if 2 * seen >= total {
            return live;
        }
    }
    weighted[n - 1].0
}

/// The favorable points among `measurements` (in any order), most reliable first: most local
/// minima, then least live data.
pub fn favorable_points(
    measurements: &[LiveMeasurement],
    settings: &AnalysisSettings,
) -> Vec<HintPoint> {
    let mut ordered: Vec<&LiveMeasurement> = measurements.iter().collect();
    ordered.sort_by_key(|m| m.allocated_bytes);
    let lives: Vec<u64> = ordered.iter().map(|m| m.live_bytes).collect();
    let run_median = allocation_weighted_median(&ordered);

    #[derive(Default)]
    struct Tally {
        seen: u32,
        minima: u32,
        lives: Vec<u64>,
    }
    let mut by_point: BTreeMap<(&str, PointKind), Tally> = BTreeMap::new();
    for (i, m) in ordered.iter().enumerate() {
        let from = i.saturating_sub(settings.window);
        let to = (i + settings.window).min(lives.len() - 1);
        let is_minimum = lives[from..=to].iter().all(|&l| m.live_bytes <= l);
        let t = by_point.entry((m.method.as_str(), m.kind)).or_default();
        t.seen += 1;
        t.minima += u32::from(is_minimum);
        t.lives.push(m.live_bytes);
    }

    let mut points: Vec<HintPoint> = by_point
        .into_iter()
        .filter_map(|((method, kind), mut t)| {
            let live = median(&mut t.lives);
            let favorable = t.seen >= settings.min_seen
                && f64::from(t.minima) >= settings.min_minima_share * f64::from(t.seen)
                && live as f64 <= settings.max_live_share * run_median as f64;
            favorable.then(|| HintPoint {
                method: method.to_string(),
                kind,
                expected_live_bytes: live,
                seen: t.seen,
                minima: t.minima,
            })
        })
        .collect();
    points.sort_by(|a, b| {
        b.minima
            .cmp(&a.minima)
            .then(a.expected_live_bytes.cmp(&b.expected_live_bytes))
            .then(a.method.cmp(&b.method))
    });
    points
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(method: &str, kind: PointKind, allocated: u64, live: u64) -> LiveMeasurement {
        LiveMeasurement {
            method: method.into(),
            kind,
            allocated_bytes: allocated,
            live_bytes: live,
        }
    }

    /// A program that builds a structure in `build` and drops it before `round` starts again:
    /// live data is lowest at every entry of `round`, highest inside `build`.
    fn sawtooth() -> Vec<LiveMeasurement> {
        let mut out = Vec::new();
        let mut at = 0;
        for _ in 0..6 {
            out.push(m("App>>round", PointKind::Entry, at, 100));
            for step in 1..=4 {
                at += 10;
                out.push(m("App>>build", PointKind::Exit, at, 100 + 200 * step));
            }
            at += 10;
        }
        out
    }

    #[test]
    fn entries_at_the_bottom_of_the_sawtooth_are_favorable() {
        let points = favorable_points(&sawtooth(), &AnalysisSettings::default());
        assert_eq!(
            points,
            vec![HintPoint {
                method: "App>>round".into(),
                kind: PointKind::Entry,
                expected_live_bytes: 100,
                seen: 6,
                minima: 6,
            }]
        );
    }

    #[test]
    fn the_order_of_the_measurements_does_not_matter() {
        let mut shuffled = sawtooth();
        shuffled.reverse();
        shuffled.swap(3, 17);
        assert_eq!(
            favorable_points(&shuffled, &AnalysisSettings::default()),
            favorable_points(&sawtooth(), &AnalysisSettings::default())
        );
    }

    #[test]
    fn many_points_measured_at_one_boundary_do_not_make_it_the_usual_live_data() {
        // Each boundary is measured at six points (all at the same allocation), the curve
        // between boundaries twice: most measurements are boundary ones, but the run spends
        // its allocation between them.
        let mut ms = Vec::new();
        let mut at = 0;
        for _ in 0..5 {
            for k in 0..6 {
                ms.push(m(&format!("App>>step{k}"), PointKind::Exit, at, 100));
            }
            at += 100;
            ms.push(m("App>>inner", PointKind::Entry, at, 900));
            at += 100;
            ms.push(m("App>>inner", PointKind::Exit, at, 1000));
            at += 100;
        }
        let points = favorable_points(&ms, &AnalysisSettings::default());
        let names: Vec<&str> = points.iter().map(|p| p.method.as_str()).collect();
        assert_eq!(names.len(), 6, "{points:?}");
        assert!(
            names.iter().all(|n| n.starts_with("App>>step")),
            "{names:?}"
        );
    }

    #[test]
    fn rare_points_and_points_with_usual_live_data_are_not_favorable() {
        let mut ms = sawtooth();
        // Seen twice only, at minima.
        ms.push(m("App>>rare", PointKind::Entry, 5, 100));
        ms.push(m("App>>rare", PointKind::Entry, 25, 100));
        let points = favorable_points(&ms, &AnalysisSettings::default());
        assert!(points.iter().all(|p| p.method != "App>>rare"), "{points:?}");
        // A flat curve: every point is a minimum, none is below the usual live data.
        let flat: Vec<_> = (0..10)
            .map(|i| m("App>>tick", PointKind::Exit, i * 10, 500))
            .collect();
        assert_eq!(
            favorable_points(&flat, &AnalysisSettings::default()),
            vec![]
        );
        assert_eq!(favorable_points(&[], &AnalysisSettings::default()), vec![]);
    }
}
