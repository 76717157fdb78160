//! The terminal report: one row per benchmark × executor, then the
//! suite-wide geometric means, then what failed.
//!
//! It is a pure function of the results file and the analysis settings,
//! so `tally bench report` prints exactly what the run printed.

use std::fmt::Write;

use crate::analysis::{Cell, Metric, Report};
use crate::results::Results;

/// The whole text report.
pub fn render(results: &Results, report: &Report) -> String {
    let s = &report.settings;
    let level_pct = format_level(s.level);
    let base = &report.executors[report.baseline];
    let mut out = String::new();
    let iterations: Vec<u32> = results
        .suite
        .benchmarks
        .iter()
        .map(|b| b.iterations)
        .collect();
    let (lo, hi) = (
        iterations.iter().min().copied().unwrap_or(0),
        iterations.iter().max().copied().unwrap_or(0),
    );
    let iter_text = if lo == hi {
        format!("{lo} iteration(s)")
    } else {
        format!("{lo}-{hi} iterations (per benchmark)")
    };
    let _ = writeln!(
        out,
        "suite {} ({} benchmarks) × {} executor(s) × {} invocation(s) × {}{}",
        results.suite.name,
        results.suite.benchmarks.len(),
        results.executors.len(),
        results.settings.invocations,
        iter_text,
        if results.complete {
            ""
        } else {
            "  [INTERRUPTED: partial results]"
        }
    );
    let _ = writeln!(
        out,
        "machine: {} cpus{}{}; started {}",
        results.machine.cpus,
        results
            .machine
            .cpu_model
            .as_ref()
            .map(|m| format!(", {m}"))
            .unwrap_or_default(),
        results
            .machine
            .load_average
            .map(|l| format!(", load {l:.2}"))
            .unwrap_or_default(),
        results.started
    );
    if let Some(l) = &results.settings.lockstep {
        let _ = writeln!(
            out,
            "lockstep: each benchmark's executors ran together on CPU {}, in turns of {} ms; iteration times are process CPU time",
            l.cpu, l.slice_ms
        );
    }
    for e in &results.executors {
        let _ = writeln!(out, "  {:<10} {}", e.name, e.describe());
    }
    let _ = writeln!(
        out,
        "metric: {} (ms); ± is the {level_pct} confidence half-width over invocations (Student t)",
        s.metric.describe(s.warmup)
    );
    let _ = writeln!(
        out,
        "ratio = executor / {base} (below 1: faster than {base}), {level_pct} Fieller interval; p from {}; * = significant",
        report.test_name()
    );
    let _ = writeln!(
        out,
        "startup = first iteration; steady = mean of the first {} iterations with CoV < {}%, [settled/ok invocations, start iteration]",
        s.steady_window,
        s.steady_cov * 100.0
    );
    out.push('\n');

    // A column of compile time where some executor logged its compiles.
    let compiles = report
        .benchmarks
        .iter()
        .any(|b| b.cells.iter().any(|c| !c.compile_us.is_empty()));
    let mut headers = vec![
        ("benchmark", Align::Left),
        ("executor", Align::Left),
        ("ok", Align::Right),
        ("mean ± CI", Align::Right),
        ("median", Align::Right),
        ("startup", Align::Right),
        ("steady", Align::Left),
        ("ratio [CI]", Align::Left),
        ("p", Align::Left),
        ("CPU s", Align::Right),
        ("RSS MiB", Align::Right),
    ];
    if compiles {
        headers.push(("compile ms (share of CPU)", Align::Left));
    }
    let mut t = Table::new(&headers);
    for b in &report.benchmarks {
        for (i, c) in b.cells.iter().enumerate() {
            let name = if i == 0 { b.name.as_str() } else { "" };
            let mut row = vec![
                name.to_string(),
                report.executors[i].clone(),
                format!("{}/{}", c.ok, c.attempted),
                mean_ci_text(c),
                c.median.map(ms).unwrap_or_else(dash),
                c.startup.map(ms).unwrap_or_else(dash),
                steady_text(c, s.metric),
                ratio_text(c, i == report.baseline),
                p_text(c),
                c.cpu_s.map(|x| format!("{x:.2}")).unwrap_or_else(dash),
                c.max_rss_kib
                    .map(|k| format!("{:.0}", k as f64 / 1024.0))
                    .unwrap_or_else(dash),
            ];
            if compiles {
                row.push(compile_text(c));
            }
            t.row(row);
        }
    }
    out.push_str(&t.render());

    let anova: Vec<String> = report
        .benchmarks
        .iter()
        .filter_map(|b| b.anova_p.map(|p| format!("{} {}", b.name, format_p(p))))
        .collect();
    if !anova.is_empty() {
        let _ = writeln!(out, "\none-way ANOVA p per benchmark: {}", anova.join(", "));
    }

    out.push('\n');
    if report.geomeans.is_empty() {
        let _ = writeln!(out, "geometric mean of ratios: needs a second executor");
    }
    for g in &report.geomeans {
        let name = &report.executors[g.executor];
        let ci = match &g.ci {
            Some(ci) => format!(
                "{} [{}, {}]",
                ratio(ci.estimate),
                ratio(ci.lower),
                ratio(ci.upper)
            ),
            None => format!("{} (no interval: needs two benchmarks)", ratio(g.estimate)),
        };
        let verdict = match &g.ci {
            Some(ci) if ci.upper < 1.0 => format!(", faster than {base} (interval excludes 1)"),
            Some(ci) if ci.lower > 1.0 => format!(", slower than {base} (interval excludes 1)"),
            Some(_) => ", not distinguishable from 1".to_string(),
            None => String::new(),
        };
        let _ = writeln!(
            out,
            "geometric mean of ratios {name} / {base} over {} benchmark(s): {ci}{verdict}",
            g.benchmarks
        );
        let _ = writeln!(
            out,
            "  ({level_pct} interval over benchmarks; significantly faster on {}, slower on {})",
            g.faster, g.slower
        );
        let paired = [
            ("paired by invocation round", "interval", &g.paired),
            (
                "paired, robust (Hodges-Lehmann per benchmark)",
                "bootstrap interval",
                &g.robust,
            ),
        ];
        for (label, interval, p) in paired {
            let Some(p) = p else { continue };
            let _ = writeln!(
                out,
                "  {label}: {} [{}, {}] ({level_pct} {interval} over {} rounds)",
                ratio(p.ci.estimate),
                ratio(p.ci.lower),
                ratio(p.ci.upper),
                p.rounds
            );
        }
    }
    if compiles {
        let _ = writeln!(
            out,
            "\ncompile time per invocation, all benchmarks (from the executors' compile logs):"
        );
        for (i, name) in report.executors.iter().enumerate() {
            let cells: Vec<&Cell> = report.benchmarks.iter().map(|b| &b.cells[i]).collect();
            let mut tiers: std::collections::BTreeMap<&str, f64> = Default::default();
            for c in &cells {
                for (tier, us) in &c.compile_us {
                    *tiers.entry(tier.as_str()).or_insert(0.0) += us;
                }
            }
            if tiers.is_empty() {
                continue;
            }
            let total_us: f64 = tiers.values().sum();
            let cpu_s: f64 = cells.iter().filter_map(|c| c.cpu_s).sum();
            let per_tier: Vec<String> = tiers
                .iter()
                .map(|(tier, us)| format!("{tier} {}", ms(*us)))
                .collect();
            let _ = writeln!(
                out,
                "  {name}: {} ms ({}); {:.1}% of its CPU time",
                ms(total_us),
                per_tier.join(", "),
                100.0 * total_us / 1e6 / cpu_s.max(f64::MIN_POSITIVE)
            );
        }
    }
    if report.max_iterations < s.steady_window {
        let _ = writeln!(
            out,
            "steady state cannot be reached: invocations ran {} iteration(s), the window is {}",
            report.max_iterations, s.steady_window
        );
    }

    if !report.failures.is_empty() {
        let _ = writeln!(out, "\nfailed invocations ({}):", report.failures.len());
        let mut shown = std::collections::BTreeSet::new();
        for f in &report.failures {
            let _ = writeln!(
                out,
                "  {} on {}, invocation {}: {}",
                f.benchmark, f.executor, f.invocation, f.reason
            );
            // One tail per benchmark × executor: repeated failures usually repeat the output.
            if shown.insert((f.benchmark.clone(), f.executor.clone())) {
                if let Some(tail) = &f.output_tail {
                    for line in tail.lines() {
                        let _ = writeln!(out, "    | {line}");
                    }
                }
            }
        }
    }
    out
}

/// Mean compile time of a cell over its tiers, with its share of the cell's CPU time.
fn compile_text(c: &Cell) -> String {
    if c.compile_us.is_empty() {
        return dash();
    }
    let us: f64 = c.compile_us.values().sum();
    match c.cpu_s.filter(|s| *s > 0.0) {
        Some(cpu) => format!("{} ({:.1}%)", ms(us), 100.0 * us / 1e6 / cpu),
        None => ms(us),
    }
}

fn dash() -> String {
    "-".into()
}

fn format_level(level: f64) -> String {
    let pct = level * 100.0;
    if (pct - pct.round()).abs() < 1e-9 {
        format!("{pct:.0}%")
    } else {
        format!("{pct}%")
    }
}

/// Milliseconds from microseconds, with about four significant digits.
fn ms(us: f64) -> String {
    let v = us / 1000.0;
    if v >= 1000.0 {
        format!("{v:.0}")
    } else if v >= 100.0 {
        format!("{v:.1}")
    } else if v >= 10.0 {
        format!("{v:.2}")
    } else {
        format!("{v:.3}")
    }
}

fn ratio(x: f64) -> String {
    if x >= 10.0 {
        format!("{x:.1}")
    } else {
        format!("{x:.3}")
    }
}

fn format_p(p: f64) -> String {
    if p < 0.001 {
        "<0.001".into()
    } else {
        format!("{p:.3}")
    }
}

fn mean_ci_text(c: &Cell) -> String {
    match (&c.summary, c.mean) {
        (Some(s), _) => {
            let half = (s.ci.upper - s.mean).max(s.mean - s.ci.lower);
            format!("{} ± {}", ms(s.mean), ms(half))
        }
        (None, Some(m)) => format!("{} (n=1)", ms(m)),
        (None, None) if c.attempted > 0 && c.ok == 0 => "FAILED".into(),
        (None, None) => dash(),
    }
}

fn steady_text(c: &Cell, metric: Metric) -> String {
    let st = &c.steady;
    if st.of == 0 {
        return dash();
    }
    match (st.mean, st.start_range) {
        (Some(m), Some((lo, hi))) => {
            let at = if lo == hi {
                format!("@{}", lo + 1)
            } else {
                format!("@{}-{}", lo + 1, hi + 1)
            };
            format!("{} [{}/{} {at}]", ms(m), st.reached, st.of)
        }
        _ if st.too_short => "too few iterations".into(),
        _ if metric == Metric::Steady => "not reached (excluded)".into(),
        _ => "not reached".into(),
    }
}

fn ratio_text(c: &Cell, is_baseline: bool) -> String {
    if is_baseline {
        return "1 (baseline)".into();
    }
    match &c.ratio {
        None => dash(),
        Some(r) => match &r.ci {
            // Fieller's lower bound can be negative when the noise is large;
            // a time ratio cannot, so the table shows 0 (the JSON keeps it).
            Some(ci) => format!(
                "{} [{}, {}]",
                ratio(r.estimate),
                ratio(ci.lower.max(0.0)),
                ratio(ci.upper)
            ),
            None if r.unbounded => format!("{} [unbounded]", ratio(r.estimate)),
            None => format!("{} [-]", ratio(r.estimate)),
        },
    }
}

fn p_text(c: &Cell) -> String {
    match c
        .ratio
        .as_ref()
        .and_then(|r| r.p_value.map(|p| (p, r.significant == Some(true))))
    {
        Some((p, true)) => format!("{} *", format_p(p)),
        Some((p, false)) => format_p(p),
        None => String::new(),
    }
}

#[derive(Clone, Copy)]
enum Align {
    Left,
    Right,
}

struct Table {
    headers: Vec<(String, Align)>,
    rows: Vec<Vec<String>>,
}

impl Table {
    fn new(headers: &[(&str, Align)]) -> Table {
        Table {
            headers: headers.iter().map(|(h, a)| (h.to_string(), *a)).collect(),
            rows: Vec::new(),
        }
    }

    fn row(&mut self, cells: Vec<String>) {
        self.rows.push(cells);
    }

    fn render(&self) -> String {
        let width = |i: usize| {
            self.rows
                .iter()
                .map(|r| r[i].chars().count())
                .chain(std::iter::once(self.headers[i].0.chars().count()))
                .max()
                .unwrap_or(0)
        };
        let widths: Vec<usize> = (0..self.headers.len()).map(width).collect();
        let line = |cells: &[String]| {
            let mut s = String::new();
            for (i, c) in cells.iter().enumerate() {
                let pad = widths[i] - c.chars().count();
                if i > 0 {
                    s.push_str("  ");
                }
                match self.headers[i].1 {
                    Align::Left => {
                        s.push_str(c);
                        s.push_str(&" ".repeat(pad));
                    }
                    Align::Right => {
                        s.push_str(&" ".repeat(pad));
                        s.push_str(c);
                    }
                }
            }
            s.trim_end().to_string() + "\n"
        };
        let headers: Vec<String> = self.headers.iter().map(|(h, _)| h.clone()).collect();
        let mut out = line(&headers);
        out.push_str(&line(
            &widths.iter().map(|w| "-".repeat(*w)).collect::<Vec<_>>(),
        ));
        for r in &self.rows {
            out.push_str(&line(r));
        }
        out
    }
}
