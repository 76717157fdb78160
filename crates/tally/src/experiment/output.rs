//! What both experiments report with: overhead and mean intervals (via `tally_stats`), number
//! formats, Markdown tables that also read well on a terminal, CSV lines, and file writing.

use std::path::Path;

use serde::{Deserialize, Serialize};
use tally_stats::{geometric_mean_ratio_ci, mean_ci, ratio_ci, StatsError};

/// Profiling overhead of one configuration: how much more CPU time its runs took than runs
/// with profiling off, in percent, with a confidence interval.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Overhead {
    /// (mean CPU profiled / mean CPU baseline − 1) × 100; for an average over benchmarks,
    /// (geometric mean of the benchmarks' ratios − 1) × 100.
    pub percent: f64,
    /// Interval bounds in percent, when there were enough runs (two on each side; for an
    /// average, two benchmarks) and the interval is bounded.
    pub lower: Option<f64>,
    pub upper: Option<f64>,
    /// The runs were too noisy for a bounded interval (the baseline's mean is not
    /// distinguishable from zero).
    pub unbounded: bool,
}

/// Overhead of `profiled` CPU times against `baseline` ones. The interval is Fieller's for the
/// ratio of the two means (as `tally bench` uses), which stays honest for a few noisy runs.
pub fn overhead(profiled: &[f64], baseline: &[f64], level: f64) -> Option<Overhead> {
    let (mp, mb) = (mean(profiled)?, mean(baseline)?);
    if mb <= 0.0 {
        return None;
    }
    let mut o = Overhead {
        percent: (mp / mb - 1.0) * 100.0,
        lower: None,
        upper: None,
        unbounded: false,
    };
    if profiled.len() >= 2 && baseline.len() >= 2 {
        match ratio_ci(profiled, baseline, level) {
            Ok(ci) => {
                o.lower = Some((ci.lower - 1.0) * 100.0);
                o.upper = Some((ci.upper - 1.0) * 100.0);
            }
            Err(StatsError::Unbounded) => o.unbounded = true,
            Err(_) => {}
        }
    }
    Some(o)
}

/// The typical overhead over benchmarks: the geometric mean of their CPU-time ratios
/// (profiled / baseline), with the interval over benchmarks (the suite is the sample).
pub fn average_overhead(per_benchmark: &[&Overhead], level: f64) -> Option<Overhead> {
    let ratios: Vec<f64> = per_benchmark
        .iter()
        .map(|o| 1.0 + o.percent / 100.0)
        .filter(|r| r.is_finite() && *r > 0.0)
        .collect();
    if ratios.is_empty() {
        return None;
    }
    if ratios.len() == 1 {
        return Some(Overhead {
            percent: (ratios[0] - 1.0) * 100.0,
            lower: None,
            upper: None,
            unbounded: false,
        });
    }
    let ci = geometric_mean_ratio_ci(&ratios, level).ok()?;
    Some(Overhead {
        percent: (ci.estimate - 1.0) * 100.0,
        lower: Some((ci.lower - 1.0) * 100.0),
        upper: Some((ci.upper - 1.0) * 100.0),
        unbounded: false,
    })
}

/// A mean over runs with its Student-t interval (when there are two runs or more).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MeanCi {
    pub mean: f64,
    pub lower: Option<f64>,
    pub upper: Option<f64>,
}

impl MeanCi {
    /// The interval cut to what the quantity can be (a fraction lies in 0..=1; a t interval
    /// of a mean near 1 can reach past it).
    pub fn clipped(self, lo: f64, hi: f64) -> MeanCi {
        MeanCi {
            mean: self.mean,
            lower: self.lower.map(|l| l.clamp(lo, hi)),
            upper: self.upper.map(|u| u.clamp(lo, hi)),
        }
    }
}

/// The mean of a fraction (0..=1) over runs, its interval clipped to 0..=1.
pub fn fraction_with_ci(xs: &[f64], level: f64) -> Option<MeanCi> {
    mean_with_ci(xs, level).map(|m| m.clipped(0.0, 1.0))
}

pub fn mean_with_ci(xs: &[f64], level: f64) -> Option<MeanCi> {
    let m = mean(xs)?;
    let ci = (xs.len() >= 2).then(|| mean_ci(xs, level).ok()).flatten();
    Some(MeanCi {
        mean: m,
        lower: ci.map(|c| c.lower),
        upper: ci.map(|c| c.upper),
    })
}

pub fn mean(xs: &[f64]) -> Option<f64> {
    (!xs.is_empty()).then(|| xs.iter().sum::<f64>() / xs.len() as f64)
}

pub fn min(xs: &[f64]) -> Option<f64> {
    xs.iter().copied().reduce(f64::min)
}

/// A fraction (0..=1) as a percentage with one decimal: "87.3".
pub fn pct(fraction: f64) -> String {
    format!("{:.1}", fraction * 100.0)
}

/// An overhead percentage with its sign: "+4.1", "-0.3".
pub fn signed(percent: f64) -> String {
    format!("{percent:+.1}")
}

/// "+4.1 [+2.0, +6.3]", "+4.1 [unbounded]" or "+4.1".
pub fn overhead_with_ci(o: &Overhead) -> String {
    match (o.lower, o.upper) {
        (Some(l), Some(u)) => format!("{} [{}, {}]", signed(o.percent), signed(l), signed(u)),
        _ if o.unbounded => format!("{} [unbounded]", signed(o.percent)),
        _ => signed(o.percent),
    }
}

/// A percentage of a fraction with its interval: "87.3 [85.0, 89.6]" or "87.3".
pub fn pct_with_ci(m: &MeanCi) -> String {
    match (m.lower, m.upper) {
        (Some(l), Some(u)) => format!("{} [{}, {}]", pct(m.mean), pct(l), pct(u)),
        _ => pct(m.mean),
    }
}

/// What a table shows where there is no value.
pub const NONE: &str = "—";

/// A Markdown table padded so that it also lines up on a terminal. The first column is
/// left-aligned, the others right-aligned (they hold numbers).
pub fn table(header: &[String], rows: &[Vec<String>]) -> String {
    let cols = header.len();
    // At least 3: a separator needs room for "--:".
    let mut width: Vec<usize> = header.iter().map(|h| h.chars().count().max(3)).collect();
    for r in rows {
        for (i, c) in r.iter().enumerate().take(cols) {
            width[i] = width[i].max(c.chars().count());
        }
    }
    let cell = |i: usize, text: &str| {
        let pad = width[i].saturating_sub(text.chars().count());
        if i == 0 {
            format!("{text}{}", " ".repeat(pad))
        } else {
            format!("{}{text}", " ".repeat(pad))
        }
    };
    let line = |cells: Vec<String>| format!("| {} |\n", cells.join(" | "));
    let mut out = line(header.iter().enumerate().map(|(i, h)| cell(i, h)).collect());
    out.push_str(&line(
        width
            .iter()
            .enumerate()
            .map(|(i, &w)| {
                let dashes = "-".repeat(w - 1);
                if i == 0 {
                    format!("{dashes}-")
                } else {
                    format!("{dashes}:")
                }
            })
            .collect(),
    ));
    for r in rows {
        out.push_str(&line(
            (0..cols)
                .map(|i| cell(i, r.get(i).map(String::as_str).unwrap_or("")))
                .collect(),
        ));
    }
    out
}

/// One CSV record; fields with a comma, quote or line break are quoted.
pub fn csv_line(fields: &[String]) -> String {
    let quoted: Vec<String> = fields
        .iter()
        .map(|f| {
            if f.contains([',', '"', '\n', '\r']) {
                format!("\"{}\"", f.replace('"', "\"\""))
            } else {
                f.clone()
            }
        })
        .collect();
    format!("{}\n", quoted.join(","))
}

/// A number for CSV: empty when absent.
pub fn csv_num(x: Option<f64>) -> String {
    x.map(|v| format!("{v}")).unwrap_or_default()
}

/// Writes a file of an experiment's output directory whole or not at all (`tally_output`):
/// an interrupted write never leaves a truncated results file. It replaces the
/// experiment's own earlier save.
pub fn write_file(path: &Path, text: &str) -> Result<(), String> {
    tally_output::write(path, text.as_bytes(), tally_output::IfExists::Replace)
        .map_err(|e| e.to_string())
}

/// Facts about the machine and the run for a report's header.
pub fn setup_lines(
    machine: &tally_bench::results::Machine,
    command: &str,
    tally: &Path,
) -> Vec<String> {
    vec![
        format!("- command: `{command}`"),
        format!("- tally: `{}`", tally.display()),
        format!(
            "- machine: {} ({} CPUs, {}), load average {} at the start",
            machine.cpu_model.as_deref().unwrap_or("unknown CPU"),
            machine.cpus,
            machine.arch,
            machine
                .load_average
                .map(|l| format!("{l:.2}"))
                .unwrap_or_else(|| "unknown".into())
        ),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn overhead_is_the_ratio_of_mean_cpu_times() {
        let o = overhead(&[1.1, 1.1], &[1.0, 1.0], 0.95).unwrap();
        assert!((o.percent - 10.0).abs() < 1e-9);
        // Constant samples: a zero-width interval at the estimate.
        assert!((o.lower.unwrap() - 10.0).abs() < 1e-9);
        let noisy = overhead(&[1.0, 1.2, 1.1], &[1.0, 0.98, 1.02], 0.95).unwrap();
        assert!(noisy.lower.unwrap() < noisy.percent && noisy.percent < noisy.upper.unwrap());
        assert_eq!(overhead_with_ci(&o), "+10.0 [+10.0, +10.0]");
        let single = overhead(&[1.05], &[1.0, 1.0], 0.95).unwrap();
        assert_eq!(
            (single.lower, overhead_with_ci(&single)),
            (None, "+5.0".into())
        );
        assert!(overhead(&[], &[1.0], 0.95).is_none());
        assert!(overhead(&[1.0], &[0.0], 0.95).is_none());
    }

    #[test]
    fn average_overhead_is_a_geometric_mean() {
        let a = overhead(&[2.0], &[1.0], 0.95).unwrap();
        let b = overhead(&[0.5], &[1.0], 0.95).unwrap();
        let avg = average_overhead(&[&a, &b], 0.95).unwrap();
        assert!(avg.percent.abs() < 1e-9, "{avg:?}");
        assert!(avg.lower.unwrap() < 0.0 && avg.upper.unwrap() > 0.0);
        let one = average_overhead(&[&a], 0.95).unwrap();
        assert!((one.percent - 100.0).abs() < 1e-9 && one.lower.is_none());
        assert!(average_overhead(&[], 0.95).is_none());
    }

    #[test]
    fn means_and_formats() {
        let m = mean_with_ci(&[0.8, 0.9, 1.0], 0.95).unwrap();
        assert!((m.mean - 0.9).abs() < 1e-12);
        assert!(m.lower.unwrap() < 0.9 && m.upper.unwrap() > 1.0);
        // The interval of a fraction is clipped to 0..=100 %.
        let f = fraction_with_ci(&[0.8, 0.9, 1.0], 0.95).unwrap();
        assert_eq!((f.mean, f.lower, f.upper), (m.mean, m.lower, Some(1.0)));
        assert!(pct_with_ci(&f).starts_with("90.0 [") && pct_with_ci(&f).ends_with("100.0]"));
        assert_eq!(pct_with_ci(&mean_with_ci(&[0.5], 0.95).unwrap()), "50.0");
        assert_eq!(min(&[3.0, 1.0, 2.0]), Some(1.0));
        assert_eq!((pct(0.8734), signed(-0.25)), ("87.3".into(), "-0.2".into()));
        assert_eq!(
            csv_line(&["a".into(), "b,c".into(), "d\"e".into()]),
            "a,\"b,c\",\"d\"\"e\"\n"
        );
    }

    #[test]
    fn tables_line_up() {
        let t = table(
            &["name".into(), "value".into()],
            &[
                vec!["a".into(), "1.0".into()],
                vec!["long".into(), "22.5".into()],
            ],
        );
        assert_eq!(
            t,
            "| name | value |\n| ---- | ----: |\n| a    |   1.0 |\n| long |  22.5 |\n"
        );
    }
}

/// What every experiment's JSON begins with: the format, what ran, when, on what machine, and
/// whether it ran to the end.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct RunHeader {
    pub format: String,
    pub tool: String,
    pub command: String,
    pub started: String,
    pub finished: String,
    /// False if Ctrl-C or a failure ended the experiment early.
    pub complete: bool,
    /// Why it ended early.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stopped: Option<String>,
    pub machine: tally_bench::results::Machine,
}

impl RunHeader {
    /// The header of an experiment that starts now on this machine.
    pub fn begin(format: &str, started: String) -> RunHeader {
        RunHeader {
            format: format.into(),
            tool: format!("tally {}", env!("CARGO_PKG_VERSION")),
            command: super::command_line(),
            finished: started.clone(),
            started,
            complete: false,
            stopped: None,
            machine: tally_bench::results::Machine::current(),
        }
    }

    /// Records how the experiment ended (`stop` is none when it ran to the end).
    pub fn end(&mut self, stop: Option<&super::runner::Stop>) {
        use super::runner::Stop;
        self.complete = stop.is_none();
        self.stopped = match stop {
            None => None,
            Some(Stop::Interrupted) => Some("interrupted (Ctrl-C)".into()),
            Some(Stop::Failed(m)) => Some(m.clone()),
        };
        self.finished = tally_bench::now_rfc3339();
    }
}
