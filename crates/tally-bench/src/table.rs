//! The terminal report: one row per benchmark × executor, then the
//! suite-wide geometric means, then what failed.
//!
//! It is a pure function of the results file and the analysis settings,
//! so `tally bench report` prints exactly what the run printed.

use std::fmt::Write;

use crate::analysis::{Cell, Failure, Metric, Report};
use crate::results::Results;

/// The whole text report, warnings included.
pub fn render(results: &Results, report: &Report) -> String {
    let mut out = String::new();
    for line in run_lines(results) {
        let _ = writeln!(out, "{line}");
    }
    for e in &results.executors {
        let _ = writeln!(out, "  {:<10} {}", e.name, e.describe());
    }
    for line in legend_lines(report) {
        let _ = writeln!(out, "{line}");
    }
    out.push('\n');
    let (headers, rows) = grid(report);
    let mut t = Table::new(&headers);
    for row in rows {
        t.row(row);
    }
    out.push_str(&t.render());
    if let Some(line) = anova_line(report) {
        let _ = writeln!(out, "\n{line}");
    }
    out.push('\n');
    for (line, details) in geomean_lines(report) {
        let _ = writeln!(out, "{line}");
        for d in details {
            let _ = writeln!(out, "  {d}");
        }
    }
    let compiles = compile_lines(report);
    if let Some((first, rest)) = compiles.split_first() {
        let _ = writeln!(out, "\n{first}");
        for line in rest {
            let _ = writeln!(out, "  {line}");
        }
    }
    if let Some(line) = steady_note(report) {
        let _ = writeln!(out, "{line}");
    }
    if !report.failures.is_empty() {
        let _ = writeln!(out, "\nfailed invocations ({}):", report.failures.len());
        let mut shown = std::collections::BTreeSet::new();
        for f in &report.failures {
            let _ = writeln!(out, "  {}", failure_line(f));
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
    let warnings = crate::warnings::collect(results, report);
    if !warnings.is_empty() {
        let _ = writeln!(out, "\nwarnings ({}):", warnings.len());
        for w in &warnings {
            let _ = writeln!(out, "  - {}", w.line());
        }
    }
    out
}

/// What ran where: the suite's shape, the machine, lockstep.
pub(crate) fn run_lines(results: &Results) -> Vec<String> {
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
    let mut lines = vec![format!(
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
    )];
    let m = &results.machine;
    let load = match (m.load_average, m.load_average_end) {
        (Some(start), Some(end)) => format!(", load {start:.2} at the start, {end:.2} at the end"),
        (Some(start), None) => format!(", load {start:.2}"),
        (None, Some(end)) => format!(", load {end:.2} at the end"),
        (None, None) => String::new(),
    };
    lines.push(format!(
        "machine: {} cpus{}{load}; started {}",
        m.cpus,
        m.cpu_model
            .as_ref()
            .map(|model| format!(", {model}"))
            .unwrap_or_default(),
        results.started
    ));
    if let Some(l) = &results.settings.lockstep {
        lines.push(format!(
            "lockstep: each benchmark's executors ran together on CPU {}, in turns of {} ms; iteration times are process CPU time",
            l.cpu, l.slice_ms
        ));
    }
    lines
}

/// What the columns mean.
pub(crate) fn legend_lines(report: &Report) -> Vec<String> {
    let s = &report.settings;
    let level_pct = format_level(s.level);
    let base = &report.executors[report.baseline];
    vec![
        format!(
            "metric: {} (ms); mean ± CI, median, min and max are over these per-invocation values, ± the {level_pct} confidence half-width (Student t)",
            s.metric.describe(s.warmup)
        ),
        format!(
            "outliers: invocations (#k) whose value has a modified Z-score beyond ±{} (median absolute deviation; needs {} invocations); ! = without them a verdict changes",
            crate::outliers::Z_LIMIT,
            crate::outliers::MIN_SAMPLES
        ),
        format!(
            "ratio = executor / {base} (below 1: faster than {base}), {level_pct} Fieller interval; p from {}; * = significant",
            report.test_name()
        ),
        format!(
            "startup = first iteration; steady = mean of the first {} iterations with CoV < {}%, [settled/ok invocations, start iteration]",
            s.steady_window,
            s.steady_cov * 100.0
        ),
    ]
}

/// How a column is aligned.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Align {
    Left,
    Right,
}

/// The table's headers and rows: one row per benchmark × executor, the benchmark named on
/// its first executor's row only.
pub(crate) fn grid(report: &Report) -> (Vec<(&'static str, Align)>, Vec<Vec<String>>) {
    let s = &report.settings;
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
        ("min", Align::Right),
        ("max", Align::Right),
        ("outliers", Align::Left),
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
    let mut rows = Vec::new();
    for b in &report.benchmarks {
        for (i, c) in b.cells.iter().enumerate() {
            let name = if i == 0 { b.name.as_str() } else { "" };
            let mut row = vec![
                name.to_string(),
                report.executors[i].clone(),
                format!("{}/{}", c.ok, c.attempted),
                mean_ci_text(c),
                c.median.map(ms).unwrap_or_else(dash),
                c.min.map(ms).unwrap_or_else(dash),
                c.max.map(ms).unwrap_or_else(dash),
                outliers_text(c),
                c.startup.map(ms).unwrap_or_else(dash),
                steady_text(c, s.metric),
                ratio_text(c, i == report.baseline),
                p_text(c),
                c.cpu_s.map(|x| format!("{x:.2}")).unwrap_or_else(dash),
                // A tenth of a MiB: small VMs differ by less than one.
                c.max_rss_kib
                    .map(|k| format!("{:.1}", k as f64 / 1024.0))
                    .unwrap_or_else(dash),
            ];
            if compiles {
                row.push(compile_text(c));
            }
            rows.push(row);
        }
    }
    (headers, rows)
}

/// The ANOVA p-values, with three or more executors.
pub(crate) fn anova_line(report: &Report) -> Option<String> {
    let anova: Vec<String> = report
        .benchmarks
        .iter()
        .filter_map(|b| b.anova_p.map(|p| format!("{} {}", b.name, format_p(p))))
        .collect();
    (!anova.is_empty()).then(|| format!("one-way ANOVA p per benchmark: {}", anova.join(", ")))
}

/// Per non-baseline executor, its suite-wide geometric mean of ratios and, as details, the
/// intervals behind it.
pub(crate) fn geomean_lines(report: &Report) -> Vec<(String, Vec<String>)> {
    let level_pct = format_level(report.settings.level);
    let base = &report.executors[report.baseline];
    if report.geomeans.is_empty() {
        return vec![(
            "geometric mean of ratios: needs a second executor".into(),
            Vec::new(),
        )];
    }
    let mut out = Vec::new();
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
        let line = format!(
            "geometric mean of ratios {name} / {base} over {} benchmark(s): {ci}{verdict}",
            g.benchmarks
        );
        let mut details = vec![format!(
            "({level_pct} interval over benchmarks; significantly faster on {}, slower on {})",
            g.faster, g.slower
        )];
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
            details.push(format!(
                "{label}: {} [{}, {}] ({level_pct} {interval} over {} rounds)",
                ratio(p.ci.estimate),
                ratio(p.ci.lower),
                ratio(p.ci.upper),
                p.rounds
            ));
        }
        out.push((line, details));
    }
    out
}

/// Compile time per executor over all benchmarks, after a heading line; empty when no
/// executor logged its compiles.
pub(crate) fn compile_lines(report: &Report) -> Vec<String> {
    let mut lines = vec![
        "compile time per invocation, all benchmarks (from the executors' compile logs):"
            .to_string(),
    ];
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
        lines.push(format!(
            "{name}: {} ms ({}); {:.1}% of its CPU time",
            ms(total_us),
            per_tier.join(", "),
            100.0 * total_us / 1e6 / cpu_s.max(f64::MIN_POSITIVE)
        ));
    }
    if lines.len() == 1 {
        lines.clear();
    }
    lines
}

/// Why no steady state can show, when the iterations are fewer than the window.
pub(crate) fn steady_note(report: &Report) -> Option<String> {
    let s = &report.settings;
    (report.max_iterations < s.steady_window).then(|| {
        format!(
            "steady state cannot be reached: invocations ran {} iteration(s), the window is {}",
            report.max_iterations, s.steady_window
        )
    })
}

/// One failed invocation, without its output.
pub(crate) fn failure_line(f: &Failure) -> String {
    format!(
        "{} on {}, invocation {}: {}",
        f.benchmark, f.executor, f.invocation, f.reason
    )
}

/// How many outliers a cell has and which invocations, `!` when a verdict rests on them; a
/// dash when there are too few invocations to tell.
fn outliers_text(c: &Cell) -> String {
    const LISTED: usize = 3;
    if c.samples.len() < crate::outliers::MIN_SAMPLES {
        return dash();
    }
    if c.outliers.is_empty() {
        return "0".into();
    }
    let ids: Vec<String> = c
        .outliers
        .iter()
        .take(LISTED)
        .map(|o| format!("#{}", o.invocation))
        .collect();
    let more = if c.outliers.len() > LISTED {
        " …"
    } else {
        ""
    };
    let decides = c
        .without_outliers
        .as_ref()
        .is_some_and(|e| !e.changes.is_empty());
    format!(
        "{} ({}{more}){}",
        c.outliers.len(),
        ids.join(" "),
        if decides { " !" } else { "" }
    )
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

/// "95%", "99.9%".
pub(crate) fn format_level(level: f64) -> String {
    let pct = level * 100.0;
    if (pct - pct.round()).abs() < 1e-9 {
        format!("{pct:.0}%")
    } else {
        format!("{pct}%")
    }
}

/// Milliseconds from microseconds, with about four significant digits.
pub(crate) fn ms(us: f64) -> String {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::AnalysisSettings;
    use crate::results::Outcome;
    use crate::test_support::{record, results};

    #[test]
    fn rows_show_min_max_and_outliers_and_the_warnings_follow() {
        // A on new: five invocations 5 % faster than base, one three times slower, which
        // alone makes the difference insignificant.
        let base = [100.0, 101.0, 99.0, 100.0, 102.0, 100.0];
        let new = [95.0, 96.0, 94.0, 95.0, 96.0, 300.0];
        let mut inv = Vec::new();
        for k in 0..6 {
            let n = k as u32 + 1;
            inv.push(record("A", "base", n, &[base[k] * 100.0; 6], Outcome::Ok));
            inv.push(record("A", "new", n, &[new[k] * 100.0; 6], Outcome::Ok));
        }
        // B ran three times: too few to look for outliers.
        for n in 1..=3 {
            inv.push(record("B", "base", n, &[10000.0; 6], Outcome::Ok));
            inv.push(record("B", "new", n, &[10000.0; 6], Outcome::Ok));
        }
        let r = results(inv);
        let report = Report::new(&r, &AnalysisSettings::default()).unwrap();
        let text = render(&r, &report);
        let header = text
            .lines()
            .find(|l| l.starts_with("benchmark"))
            .expect(&text);
        let columns: Vec<&str> = header.split("  ").filter(|c| !c.is_empty()).collect();
        let at = |name: &str| columns.iter().position(|c| c.trim() == name);
        assert!(
            at("median") < at("min") && at("min") < at("max") && at("max") < at("outliers"),
            "{header}"
        );
        // Rows: A × base, A × new, B × base, B × new; columns 5-7: min, max, outliers.
        let (_, rows) = grid(&report);
        assert_eq!(rows[1][..2], ["", "new"]);
        assert_eq!(rows[1][5..8], ["9.400", "30.00", "1 (#6) !"]);
        assert_eq!(rows[0][5..8], ["9.900", "10.20", "0"]);
        assert_eq!(rows[3][7], "-", "B has three invocations");
        assert!(
            text.contains("mean ± CI, median, min and max are over these per-invocation values"),
            "{text}"
        );
        let warnings = text.split("\nwarnings (").nth(1).expect(&text);
        assert!(
            warnings.contains("- A × new: invocation(s) #6 (30.00 ms"),
            "{warnings}"
        );
    }
}
