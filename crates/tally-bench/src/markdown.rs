//! `tally bench report --markdown`: the report as GitHub-flavoured Markdown, for a README or
//! a paper's notes: what ran where as a list, the table as a pipe table, then the geometric
//! means, failures and warnings as lists. No heading: where it goes decides its level.
//!
//! The same pieces as the terminal table ([`crate::table`]), so the two never disagree; only
//! the failed invocations' output is left out (it is for debugging, not for publishing).

use std::fmt::Write;

use crate::analysis::Report;
use crate::results::Results;
use crate::table::{self, Align};

/// The whole report in Markdown.
pub(crate) fn render(results: &Results, report: &Report) -> String {
    let mut out = String::new();
    for line in table::run_lines(results) {
        let _ = writeln!(out, "- {}", escape(&line));
    }
    for e in &results.executors {
        let _ = writeln!(out, "- executor {}: {}", code(&e.name), code(&e.describe()));
    }
    for line in table::legend_lines(report) {
        let _ = writeln!(out, "- {}", escape(&line));
    }
    out.push('\n');
    let (headers, rows) = table::grid(report);
    out.push_str(&pipe_table(&headers, &rows));
    if let Some(line) = table::anova_line(report) {
        let _ = writeln!(out, "\n{}", escape(&line));
    }
    out.push('\n');
    for (line, details) in table::geomean_lines(report) {
        let _ = writeln!(out, "- {}", escape(&line));
        for d in details {
            let _ = writeln!(out, "  - {}", escape(&d));
        }
    }
    let compiles = table::compile_lines(report);
    if let Some((first, rest)) = compiles.split_first() {
        let _ = writeln!(out, "\n{}\n", escape(first));
        for line in rest {
            let _ = writeln!(out, "- {}", escape(line));
        }
    }
    if let Some(line) = table::steady_note(report) {
        let _ = writeln!(out, "\n{}", escape(&line));
    }
    if !report.failures.is_empty() {
        let _ = writeln!(
            out,
            "\n**Failed invocations ({})**\n",
            report.failures.len()
        );
        for f in &report.failures {
            let _ = writeln!(out, "- {}", escape(&table::failure_line(f)));
        }
    }
    let warnings = crate::warnings::collect(results, report);
    if !warnings.is_empty() {
        let _ = writeln!(out, "\n**Warnings ({})**\n", warnings.len());
        for w in &warnings {
            let _ = writeln!(
                out,
                "- **{}**: {}. {}",
                escape(&w.subject()),
                escape(&w.finding),
                escape(&w.advice)
            );
        }
    }
    out
}

/// A GitHub pipe table; the alignment row follows the terminal table's.
fn pipe_table(headers: &[(&str, Align)], rows: &[Vec<String>]) -> String {
    let mut out = String::new();
    let cells = |row: Vec<String>| format!("| {} |\n", row.join(" | "));
    out.push_str(&cells(headers.iter().map(|(h, _)| escape(h)).collect()));
    out.push_str(&cells(
        headers
            .iter()
            .map(|(_, a)| match a {
                Align::Left => ":--".to_string(),
                Align::Right => "--:".to_string(),
            })
            .collect(),
    ));
    for row in rows {
        out.push_str(&cells(row.iter().map(|c| escape(c)).collect()));
    }
    out
}

/// Text with Markdown's active characters escaped: a `|` would end a table cell, `*` and `_`
/// start emphasis, `<` a tag, `#` a heading; backquoted spans are kept as they are (only the
/// list items under the table hold any).
fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut in_code = false;
    for ch in text.chars() {
        if ch == '`' {
            in_code = !in_code;
        } else if !in_code && matches!(ch, '\\' | '|' | '*' | '_' | '<' | '>' | '[' | ']' | '#') {
            out.push('\\');
        }
        out.push(ch);
    }
    out
}

/// `text` as a code span, with a fence long enough for any backquotes it holds.
fn code(text: &str) -> String {
    let longest = text.split(|c| c != '`').map(str::len).max().unwrap_or(0);
    let fence = "`".repeat(longest + 1);
    let pad = if text.starts_with('`') || text.ends_with('`') {
        " "
    } else {
        ""
    };
    format!("{fence}{pad}{text}{pad}{fence}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::AnalysisSettings;
    use crate::results::Outcome;
    use crate::test_support::{record, results};

    #[test]
    fn escapes_what_markdown_would_act_on() {
        assert_eq!(escape("a | b * c_d"), r"a \| b \* c\_d");
        assert_eq!(escape("p < 0.001 *"), r"p \< 0.001 \*");
        assert_eq!(
            escape("run `--metric cpu_x` now"),
            "run `--metric cpu_x` now"
        );
        assert_eq!(code("a`b"), "``a`b``");
        assert_eq!(code("--tally x"), "`--tally x`");
    }

    #[test]
    fn the_table_is_a_pipe_table_with_the_warnings_listed_under_it() {
        let mut inv = Vec::new();
        for k in 1..=2 {
            for b in ["A", "B"] {
                inv.push(record(b, "base", k, &[100.0 * k as f64; 6], Outcome::Ok));
                inv.push(record(b, "new", k, &[50.0; 6], Outcome::Ok));
            }
        }
        let r = results(inv);
        let report = Report::new(&r, &AnalysisSettings::default()).unwrap();
        let md = render(&r, &report);
        let lines: Vec<&str> = md.lines().collect();
        let header = lines
            .iter()
            .position(|l| l.starts_with("| benchmark | executor |"))
            .expect(&md);
        let columns = lines[header].matches(" | ").count() + 1;
        assert!(lines[header + 1].starts_with("| :-- | :-- | --: |"), "{md}");
        // One row per benchmark × executor, each with as many cells as the header.
        for row in &lines[header + 2..header + 6] {
            assert_eq!(row.matches(" | ").count() + 1, columns, "{row}");
        }
        assert!(lines[header + 2].starts_with("| A | base | 2/2 |"), "{md}");
        assert_eq!(lines[header + 6], "", "{md}");
        // base's invocations took 100 and 200 µs: a wide interval, listed under the table.
        assert!(md.contains("**Warnings ("), "{md}");
        assert!(
            md.contains("- **A × base**: its 95% confidence interval is ±"),
            "{md}"
        );
        assert!(md.contains("geometric mean of ratios new / base"), "{md}");
    }
}
