//! `validate.svg`: per configuration, the attribution error of every delayed run (dots), their
//! median and its 95 % interval (a bar with whiskers), against the band of ±threshold. CBS
//! rows (green) show the change of the estimated calls into the place instead.

use std::fmt::Write as _;

use tally_bench::svg::{colour, esc, header, tick_label};

use super::report::Report;

/// A step of about a fifth of `range` (a fraction), in round percentages.
fn step(range: f64) -> f64 {
    [0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0]
        .into_iter()
        .find(|s| s * 5.0 >= range)
        .unwrap_or(10.0)
}

pub(super) fn errors(report: &Report) -> String {
    let all = report.configs.iter().flat_map(|r| {
        r.places
            .iter()
            .flat_map(|p| p.errors.iter().copied())
            .chain(r.median.into_iter().flat_map(|m| [m.0, m.1, m.2]))
    });
    let extent = all
        .filter(|v| v.is_finite())
        .fold(report.threshold * 2.0, |m, v| m.max(v.abs()));
    let step = step(extent);
    let range = (extent / step).ceil() * step;
    let (left, plot_w, right, top, row) = (250.0, 460.0, 90.0, 60.0, 22.0);
    let plot_h = report.configs.len() as f64 * row + 8.0;
    let (width, height) = (left + plot_w + right, top + plot_h + 64.0);
    let x = |v: f64| left + (v.clamp(-range, range) + range) / (2.0 * range) * plot_w;

    let mut out = String::new();
    header(&mut out, width, height);
    let _ = writeln!(
        out,
        r##"<text x="{left}" y="22" font-size="15" font-weight="bold">Attribution error of an injected delay</text>"##
    );
    let _ = writeln!(
        out,
        r##"<text x="{left}" y="40" fill="#555">{}: dots are runs, bars medians with 95 % intervals; band ±{:.0} %</text>"##,
        esc(&program_without_class_path(&report.program)),
        report.threshold * 100.0
    );
    let legend = [
        (colour(0), "immediate"),
        (colour(1), "polling"),
        (colour(2), "CBS: change of calls into the place"),
        (colour(6), "broken"),
    ];
    let mut lx = left;
    for (c, label) in legend {
        let _ = writeln!(
            out,
            r##"<rect x="{lx:.1}" y="{:.1}" width="10" height="10" fill="{c}"/><text x="{:.1}" y="{:.1}">{label}</text>"##,
            top + plot_h + 44.0,
            lx + 14.0,
            top + plot_h + 53.0
        );
        lx += 24.0 + 7.0 * label.chars().count() as f64;
    }
    let _ = writeln!(
        out,
        r##"<rect x="{:.1}" y="{top}" width="{:.1}" height="{plot_h:.1}" fill="#e8f4ea"/>"##,
        x(-report.threshold),
        x(report.threshold) - x(-report.threshold)
    );
    let ticks = (range / step).round() as i64;
    for k in -ticks..=ticks {
        let v = k as f64 * step;
        let stroke = if k == 0 { "#333" } else { "#ddd" };
        let _ = writeln!(
            out,
            r##"<line x1="{0:.1}" x2="{0:.1}" y1="{top}" y2="{1:.1}" stroke="{stroke}"/>"##,
            x(v),
            top + plot_h
        );
        let _ = writeln!(
            out,
            r##"<text x="{:.1}" y="{:.1}" text-anchor="middle">{}{} %</text>"##,
            x(v),
            top + plot_h + 16.0,
            if v > 0.0 { "+" } else { "" },
            tick_label(v * 100.0)
        );
    }
    let _ = writeln!(
        out,
        r##"<text x="{:.1}" y="{:.1}" text-anchor="middle">(credited extra − injected) / injected</text>"##,
        left + plot_w / 2.0,
        top + plot_h + 34.0
    );
    for (i, r) in report.configs.iter().enumerate() {
        let y = top + 4.0 + i as f64 * row + row / 2.0;
        let c = if r.config.broken {
            colour(6)
        } else if r.config.is_cbs() {
            colour(2)
        } else if r.config.mechanism == "polling" {
            colour(1)
        } else {
            colour(0)
        };
        let _ = writeln!(
            out,
            r##"<text x="{:.1}" y="{:.1}" text-anchor="end">{}</text>"##,
            left - 8.0,
            y + 4.0,
            esc(&r.config.name())
        );
        for e in r.places.iter().flat_map(|p| &p.errors) {
            let _ = writeln!(
                out,
                r##"<circle cx="{:.1}" cy="{y:.1}" r="2.5" fill="{c}" fill-opacity="0.35"/>"##,
                x(*e)
            );
        }
        if let Some((m, lo, hi)) = r.median {
            let _ = writeln!(
                out,
                r##"<line x1="{:.1}" x2="{:.1}" y1="{y:.1}" y2="{y:.1}" stroke="{c}" stroke-width="2"/>"##,
                x(lo),
                x(hi)
            );
            for v in [lo, hi] {
                let _ = writeln!(
                    out,
                    r##"<line x1="{0:.1}" x2="{0:.1}" y1="{1:.1}" y2="{2:.1}" stroke="{c}" stroke-width="2"/>"##,
                    x(v),
                    y - 5.0,
                    y + 5.0
                );
            }
            let _ = writeln!(
                out,
                r##"<rect x="{:.1}" y="{:.1}" width="4" height="14" fill="{c}"/>"##,
                x(m) - 2.0,
                y - 7.0
            );
            let _ = writeln!(
                out,
                r##"<text x="{:.1}" y="{:.1}">{:+.1} %</text>"##,
                left + plot_w + 8.0,
                y + 4.0,
                m * 100.0
            );
        }
    }
    out.push_str("</svg>\n");
    out
}

/// The program without its class path, which is long and says little in a title.
fn program_without_class_path(program: &[String]) -> String {
    let mut out = Vec::new();
    let mut args = program.iter();
    while let Some(a) = args.next() {
        if a == "-cp" || a == "-classpath" || a == "--classpath" {
            args.next();
        } else {
            out.push(a.as_str());
        }
    }
    out.join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_title_leaves_the_class_path_out() {
        let p: Vec<String> = ["-cp", "a:b:c", "Harness", "DeltaBlue", "80", "500"]
            .map(String::from)
            .to_vec();
        assert_eq!(program_without_class_path(&p), "Harness DeltaBlue 80 500");
    }

    #[test]
    fn the_axis_steps_in_round_percentages() {
        assert_eq!(step(0.2), 0.05);
        assert_eq!(step(0.3), 0.1);
        assert_eq!(step(1.0), 0.25);
        assert_eq!(step(40.0), 10.0);
    }
}
