//! SVG plots, written by hand: two chart types do not justify a plotting
//! dependency, and plain SVG opens in any browser and converts with rsvg.
//!
//! - `ratios.svg`: per benchmark, each executor's time ratio to the baseline
//!   as a bar from 1 on a log axis (so 2× slower and 2× faster are equally
//!   long), with the confidence interval as a whisker; the suite's geometric
//!   mean last.
//! - `warmup.svg`: per benchmark, every invocation's iteration times in
//!   order, one line each, coloured by executor: warm-up shows as a falling
//!   start, noise as spread between lines.

use std::fmt::Write;
use std::path::Path;

use crate::analysis::Report;
use crate::error::BenchError;
use crate::results::{Outcome, Results};

/// Colour-blind-safe palette (Okabe–Ito), one colour per executor (per series in other
/// plots: `tally validate` draws with it too).
const PALETTE: [&str; 8] = [
    "#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#000000", "#F0E442",
];

/// The `i`th colour of the palette, cycling.
pub fn colour(i: usize) -> &'static str {
    PALETTE[i % PALETTE.len()]
}

/// `s` escaped for SVG text and attributes.
pub fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// Opens an SVG document of `width` × `height` on a white background.
pub fn header(out: &mut String, width: f64, height: f64) {
    let _ = writeln!(
        out,
        r##"<svg xmlns="http://www.w3.org/2000/svg" width="{width:.0}" height="{height:.0}" viewBox="0 0 {width:.0} {height:.0}" font-family="DejaVu Sans, Helvetica, Arial, sans-serif" font-size="12">"##
    );
    let _ = writeln!(out, r##"<rect width="100%" height="100%" fill="white"/>"##);
}

/// Writes a plot into the run's output directory (which the run owns: an earlier plot there
/// is replaced).
fn write_file(path: &Path, text: &str) -> Result<(), BenchError> {
    Ok(tally_output::write(
        path,
        text.as_bytes(),
        tally_output::IfExists::Replace,
    )?)
}

/// Writes both plots into `dir`.
pub fn write_all(dir: &Path, results: &Results, report: &Report) -> Result<(), BenchError> {
    write_file(&dir.join("ratios.svg"), &ratios(report))?;
    write_file(&dir.join("warmup.svg"), &warmup(results, report))
}

/// Tick values for a log axis spanning `lo..hi` (both positive).
fn log_ticks(lo: f64, hi: f64) -> Vec<f64> {
    let mut ticks = Vec::new();
    let span = (hi / lo).log10();
    let mantissas: &[f64] = if span > 2.5 {
        &[1.0]
    } else if span > 1.2 {
        &[1.0, 2.0, 5.0]
    } else {
        &[1.0, 1.5, 2.0, 3.0, 5.0, 7.0]
    };
    let start = lo.log10().floor() as i32 - 1;
    let end = hi.log10().ceil() as i32 + 1;
    for k in start..=end {
        for m in mantissas {
            let v = m * 10f64.powi(k);
            if v >= lo * 0.999 && v <= hi * 1.001 {
                ticks.push(v);
            }
        }
    }
    ticks
}

/// About `n` round tick values from 0 to at least `max`.
fn linear_ticks(max: f64, n: usize) -> Vec<f64> {
    if max <= 0.0 || !max.is_finite() {
        return vec![0.0, 1.0];
    }
    let raw = max / n as f64;
    let mag = 10f64.powf(raw.log10().floor());
    let step = [1.0, 2.0, 2.5, 5.0, 10.0]
        .iter()
        .map(|m| m * mag)
        .find(|s| s * n as f64 >= max)
        .unwrap_or(10.0 * mag);
    let count = (max / step).ceil() as usize;
    (0..=count).map(|i| i as f64 * step).collect()
}

/// A tick's label: no trailing zeros.
pub fn tick_label(v: f64) -> String {
    if v == 0.0 {
        "0".into()
    } else if v >= 100.0 {
        format!("{v:.0}")
    } else if v >= 1.0 {
        let s = format!("{v:.2}");
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        let s = format!("{v:.3}");
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    }
}

struct Bar {
    label: String,
    executor: usize,
    estimate: Option<f64>,
    lower: Option<f64>,
    upper: Option<f64>,
    significant: bool,
    unbounded: bool,
    first_of_group: bool,
}

fn ratios(report: &Report) -> String {
    let others: Vec<usize> = (0..report.executors.len())
        .filter(|&e| e != report.baseline)
        .collect();
    let base = &report.executors[report.baseline];
    let mut bars = Vec::new();
    for b in &report.benchmarks {
        for (k, &e) in others.iter().enumerate() {
            let r = b.cells[e].ratio.as_ref();
            bars.push(Bar {
                label: if k == 0 {
                    b.name.clone()
                } else {
                    String::new()
                },
                executor: e,
                estimate: r.map(|r| r.estimate),
                lower: r.and_then(|r| r.ci.map(|c| c.lower)),
                upper: r.and_then(|r| r.ci.map(|c| c.upper)),
                significant: r.and_then(|r| r.significant) == Some(true),
                unbounded: r.is_some_and(|r| r.unbounded),
                first_of_group: k == 0,
            });
        }
    }
    let n_bench_bars = bars.len();
    for (k, g) in report.geomeans.iter().enumerate() {
        bars.push(Bar {
            label: if k == 0 {
                "geometric mean".into()
            } else {
                String::new()
            },
            executor: g.executor,
            estimate: Some(g.estimate),
            lower: g.ci.map(|c| c.lower),
            upper: g.ci.map(|c| c.upper),
            significant: g.ci.is_some_and(|c| c.excludes(1.0)),
            unbounded: false,
            first_of_group: k == 0,
        });
    }

    let values = bars
        .iter()
        .flat_map(|b| [b.estimate, b.lower, b.upper])
        .flatten()
        .filter(|v| *v > 0.0 && v.is_finite());
    let (mut lo, mut hi) = values.fold((1.0f64, 1.0f64), |(lo, hi), v| (lo.min(v), hi.max(v)));
    // Room around the data, and never narrower than 0.8–1.25 so noise-sized
    // ratios do not look like large effects.
    lo = (lo / 1.15).min(0.8);
    hi = (hi * 1.15).max(1.25);

    let bar_h = 16.0;
    let group_gap = 10.0;
    let left = 140.0;
    let right = 110.0;
    let plot_w = 560.0;
    let top = 74.0;
    let groups = bars.iter().filter(|b| b.first_of_group).count() as f64;
    let geomean_gap = if report.geomeans.is_empty() {
        0.0
    } else {
        14.0
    };
    let plot_h = bars.len() as f64 * bar_h + groups * group_gap / 2.0 + geomean_gap + 6.0;
    let width = left + plot_w + right;
    let height = top + plot_h + 50.0;
    let x = |v: f64| left + (v.ln() - lo.ln()) / (hi.ln() - lo.ln()) * plot_w;

    let mut out = String::new();
    header(&mut out, width, height);
    let metric = report.settings.metric.describe(report.settings.warmup);
    let level = report.settings.level * 100.0;
    let _ = writeln!(
        out,
        r##"<text x="{:.1}" y="22" font-size="15" font-weight="bold">Time relative to {} (log scale; below 1 = faster)</text>"##,
        left,
        esc(base)
    );
    let _ = writeln!(
        out,
        r##"<text x="{left:.1}" y="40" fill="#444">{}; whiskers: {level:.0}% confidence interval; faded: not significant</text>"##,
        esc(&metric)
    );
    // Legend.
    let mut lx = left;
    for &e in &others {
        let _ = writeln!(
            out,
            r##"<rect x="{lx:.1}" y="50" width="12" height="12" fill="{}"/>"##,
            colour(e)
        );
        let _ = writeln!(
            out,
            r##"<text x="{:.1}" y="60">{} / {}</text>"##,
            lx + 16.0,
            esc(&report.executors[e]),
            esc(base)
        );
        lx += 40.0 + 7.0 * (report.executors[e].len() + base.len()) as f64;
    }
    // Grid and axis.
    for t in log_ticks(lo, hi) {
        let tx = x(t);
        let stroke = if (t - 1.0).abs() < 1e-12 {
            "#000"
        } else {
            "#ddd"
        };
        let _ = writeln!(
            out,
            r##"<line x1="{tx:.1}" y1="{top:.1}" x2="{tx:.1}" y2="{:.1}" stroke="{stroke}"/>"##,
            top + plot_h
        );
        let _ = writeln!(
            out,
            r##"<text x="{tx:.1}" y="{:.1}" text-anchor="middle" fill="#333">{}</text>"##,
            top + plot_h + 16.0,
            tick_label(t)
        );
    }
    let _ = writeln!(
        out,
        r##"<text x="{:.1}" y="{:.1}" text-anchor="middle" fill="#333">time ratio (executor / {})</text>"##,
        left + plot_w / 2.0,
        top + plot_h + 36.0,
        esc(base)
    );

    let mut y = top;
    for (i, b) in bars.iter().enumerate() {
        if b.first_of_group {
            y += group_gap / 2.0;
            if i == n_bench_bars && geomean_gap > 0.0 {
                y += geomean_gap / 2.0;
                let _ = writeln!(
                    out,
                    r##"<line x1="10" y1="{:.1}" x2="{:.1}" y2="{:.1}" stroke="#999" stroke-dasharray="4 3"/>"##,
                    y - 6.0,
                    width - 10.0,
                    y - 6.0
                );
                y += geomean_gap / 2.0;
            }
        }
        let cy = y + bar_h / 2.0;
        if !b.label.is_empty() {
            let weight = if i >= n_bench_bars {
                r##" font-weight="bold""##
            } else {
                ""
            };
            let _ = writeln!(
                out,
                r##"<text x="{:.1}" y="{:.1}" text-anchor="end"{weight}>{}</text>"##,
                left - 8.0,
                cy + 4.0,
                esc(&b.label)
            );
        }
        match b.estimate {
            Some(est) if est > 0.0 => {
                let (x0, x1) = (x(1.0).min(x(est)), x(1.0).max(x(est)));
                let opacity = if b.significant { "1" } else { "0.35" };
                let _ = writeln!(
                    out,
                    r##"<rect x="{x0:.1}" y="{:.1}" width="{:.1}" height="{:.1}" fill="{}" fill-opacity="{opacity}"/>"##,
                    y + 2.0,
                    (x1 - x0).max(1.0),
                    bar_h - 4.0,
                    colour(b.executor)
                );
                if let (Some(l), Some(u)) = (b.lower, b.upper) {
                    // A bound beyond the axis is drawn to the edge without a
                    // cap, so it does not look like an interval that ends there.
                    let (xl, xu) = (x(l.max(lo)), x(u.min(hi)));
                    let mut d = format!("M{xl:.1} {cy:.1}H{xu:.1}");
                    if l >= lo {
                        d += &format!("M{xl:.1} {:.1}V{:.1}", cy - 4.0, cy + 4.0);
                    }
                    if u <= hi {
                        d += &format!("M{xu:.1} {:.1}V{:.1}", cy - 4.0, cy + 4.0);
                    }
                    let _ = writeln!(
                        out,
                        r##"<path d="{d}" stroke="#222" stroke-width="1.3" fill="none"/>"##
                    );
                }
                let label_x = x(b.upper.unwrap_or(est).max(est).max(1.0).min(hi)) + 6.0;
                let mark = if b.significant { "*" } else { "" };
                let note = if b.unbounded {
                    " (interval unbounded)"
                } else {
                    ""
                };
                let _ = writeln!(
                    out,
                    r##"<text x="{label_x:.1}" y="{:.1}" fill="#222">{est:.3}{mark}{note}</text>"##,
                    cy + 4.0
                );
            }
            _ => {
                let _ = writeln!(
                    out,
                    r##"<text x="{:.1}" y="{:.1}" fill="#a00">no data</text>"##,
                    x(1.0) + 6.0,
                    cy + 4.0
                );
            }
        }
        y += bar_h;
    }
    out.push_str("</svg>\n");
    out
}

fn warmup(results: &Results, report: &Report) -> String {
    let benches = &results.suite.benchmarks;
    let cols = if benches.len() <= 4 {
        benches.len().max(1)
    } else {
        4
    };
    let rows = benches.len().div_ceil(cols).max(1);
    let (pw, ph) = (300.0, 210.0);
    let (ml, mr, mt, mb) = (52.0, 12.0, 26.0, 34.0);
    let top = 60.0;
    let width = cols as f64 * pw + 20.0;
    let height = top + rows as f64 * ph + 10.0;
    let mut out = String::new();
    header(&mut out, width, height);
    let _ = writeln!(
        out,
        r##"<text x="12" y="22" font-size="15" font-weight="bold">Iteration times per invocation (ms): warm-up and noise</text>"##
    );
    let mut lx = 12.0;
    for (e, name) in report.executors.iter().enumerate() {
        let _ = writeln!(
            out,
            r##"<rect x="{lx:.1}" y="36" width="12" height="12" fill="{}"/>"##,
            colour(e)
        );
        let _ = writeln!(
            out,
            r##"<text x="{:.1}" y="46">{}</text>"##,
            lx + 16.0,
            esc(name)
        );
        lx += 36.0 + 7.0 * name.len() as f64;
    }
    let _ = writeln!(
        out,
        r##"<text x="{lx:.1}" y="46" fill="#444">one line per invocation; x: iteration; failed invocations not shown</text>"##
    );
    let n_exec = report.executors.len();
    for (bi, bench) in benches.iter().enumerate() {
        let ox = 10.0 + (bi % cols) as f64 * pw;
        let oy = top + (bi / cols) as f64 * ph;
        let (x0, x1, y0, y1) = (ox + ml, ox + pw - mr, oy + mt, oy + ph - mb);
        let runs: Vec<_> = results
            .invocations
            .iter()
            .filter(|i| {
                i.benchmark == bench.name && i.outcome == Outcome::Ok && !i.iterations_us.is_empty()
            })
            .collect();
        let n_iter = runs
            .iter()
            .map(|r| r.iterations_us.len())
            .max()
            .unwrap_or(1)
            .max(1);
        let max_ms = runs
            .iter()
            .flat_map(|r| r.iterations_us.iter())
            .fold(0.0f64, |m, &v| m.max(v / 1000.0));
        let yt = linear_ticks(max_ms * 1.05, 4);
        let ymax = *yt.last().unwrap_or(&1.0);
        let single = n_iter == 1;
        // With one iteration per invocation there is no curve: spread the
        // executors side by side so the invocations form one strip each.
        let (xmin, xmax) = if single {
            (-0.5, n_exec as f64 - 0.5)
        } else {
            (1.0, n_iter as f64)
        };
        let px = |v: f64| x0 + (v - xmin) / (xmax - xmin) * (x1 - x0);
        let py = |ms: f64| y1 - ms / ymax * (y1 - y0);
        let _ = writeln!(
            out,
            r##"<text x="{:.1}" y="{:.1}" font-weight="bold">{}</text>"##,
            x0,
            oy + 16.0,
            esc(&format!("{}  (inner {})", bench.name, bench.inner))
        );
        let _ = writeln!(
            out,
            r##"<rect x="{x0:.1}" y="{y0:.1}" width="{:.1}" height="{:.1}" fill="none" stroke="#bbb"/>"##,
            x1 - x0,
            y1 - y0
        );
        for t in &yt {
            let ty = py(*t);
            let _ = writeln!(
                out,
                r##"<line x1="{x0:.1}" y1="{ty:.1}" x2="{x1:.1}" y2="{ty:.1}" stroke="#eee"/>"##
            );
            let _ = writeln!(
                out,
                r##"<text x="{:.1}" y="{:.1}" text-anchor="end" font-size="10" fill="#333">{}</text>"##,
                x0 - 4.0,
                ty + 3.5,
                tick_label(*t)
            );
        }
        if single {
            for (e, name) in report.executors.iter().enumerate() {
                let _ = writeln!(
                    out,
                    r##"<text x="{:.1}" y="{:.1}" text-anchor="middle" font-size="10" fill="#333">{}</text>"##,
                    px(e as f64),
                    y1 + 13.0,
                    esc(name)
                );
            }
        } else {
            let xt = linear_ticks(n_iter as f64, 5);
            for t in xt.iter().filter(|t| **t >= 1.0 && **t <= n_iter as f64) {
                let tx = px(*t);
                let _ = writeln!(
                    out,
                    r##"<text x="{tx:.1}" y="{:.1}" text-anchor="middle" font-size="10" fill="#333">{}</text>"##,
                    y1 + 13.0,
                    tick_label(*t)
                );
            }
            let _ = writeln!(
                out,
                r##"<text x="{:.1}" y="{:.1}" text-anchor="middle" font-size="10" fill="#666">iteration</text>"##,
                (x0 + x1) / 2.0,
                y1 + 26.0
            );
        }
        if runs.is_empty() {
            let _ = writeln!(
                out,
                r##"<text x="{:.1}" y="{:.1}" text-anchor="middle" fill="#a00">no successful invocation</text>"##,
                (x0 + x1) / 2.0,
                (y0 + y1) / 2.0
            );
        }
        for r in &runs {
            let e = report
                .executors
                .iter()
                .position(|n| *n == r.executor)
                .unwrap_or(0);
            let c = colour(e);
            let points: Vec<(f64, f64)> = if single {
                let spread = 0.5 / (results.settings.invocations.max(1) as f64);
                let jitter = (r.invocation as f64
                    - (results.settings.invocations as f64 + 1.0) / 2.0)
                    * spread;
                vec![(px(e as f64 + jitter), py(r.iterations_us[0] / 1000.0))]
            } else {
                r.iterations_us
                    .iter()
                    .enumerate()
                    .map(|(k, v)| (px(k as f64 + 1.0), py(v / 1000.0)))
                    .collect()
            };
            if points.len() > 1 {
                let d: String = points
                    .iter()
                    .enumerate()
                    .map(|(k, (x, y))| format!("{}{x:.1} {y:.1}", if k == 0 { "M" } else { "L" }))
                    .collect();
                let _ = writeln!(
                    out,
                    r##"<path d="{d}" fill="none" stroke="{c}" stroke-opacity="0.7" stroke-width="1.2"/>"##
                );
            }
            let radius = if points.len() > 40 { 1.0 } else { 2.2 };
            for (x, y) in points {
                let _ = writeln!(
                    out,
                    r##"<circle cx="{x:.1}" cy="{y:.1}" r="{radius}" fill="{c}" fill-opacity="0.8"/>"##
                );
            }
        }
    }
    out.push_str("</svg>\n");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ticks_are_round_and_cover_the_range() {
        assert_eq!(linear_ticks(9.3, 4), vec![0.0, 2.5, 5.0, 7.5, 10.0]);
        assert_eq!(linear_ticks(420.0, 4), vec![0.0, 200.0, 400.0, 600.0]);
        let t = log_ticks(0.4, 2.5);
        assert!(
            t.contains(&0.5) && t.contains(&1.0) && t.contains(&2.0),
            "{t:?}"
        );
        assert_eq!(esc("a<b & \"c\""), "a&lt;b &amp; &quot;c&quot;");
    }
}
