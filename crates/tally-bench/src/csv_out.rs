//! CSV files for spreadsheets, R and pandas: the raw iterations, one row per
//! invocation, the analysed summary, and the warnings.

use std::path::Path;

use crate::analysis::Report;
use crate::error::BenchError;
use crate::results::{Outcome, Results};

fn opt<T: ToString>(x: Option<T>) -> String {
    x.map(|v| v.to_string()).unwrap_or_default()
}

fn write_error(path: &Path, e: csv::Error) -> BenchError {
    BenchError::Write {
        path: path.to_path_buf(),
        source: std::io::Error::other(e.to_string()),
    }
}

/// Writes `iterations.csv`, `invocations.csv`, `summary.csv` and `warnings.csv` into `dir`.
pub fn write_all(dir: &Path, results: &Results, report: &Report) -> Result<(), BenchError> {
    let path = dir.join("iterations.csv");
    let mut rows: Vec<Vec<String>> = vec![[
        "benchmark",
        "executor",
        "invocation",
        "iteration",
        "time_us",
    ]
    .map(String::from)
    .to_vec()];
    for inv in results
        .invocations
        .iter()
        .filter(|i| i.outcome == Outcome::Ok)
    {
        for (k, t) in inv.iterations_us.iter().enumerate() {
            rows.push(vec![
                inv.benchmark.clone(),
                inv.executor.clone(),
                inv.invocation.to_string(),
                (k + 1).to_string(),
                t.to_string(),
            ]);
        }
    }
    write_rows(&path, rows)?;

    let path = dir.join("invocations.csv");
    let mut rows: Vec<Vec<String>> = vec![[
        "benchmark",
        "executor",
        "invocation",
        "sequence",
        "outcome",
        "failure",
        "exit_code",
        "signal",
        "iterations",
        "first_us",
        "mean_us",
        "wall_s",
        "user_s",
        "sys_s",
        "max_rss_kib",
    ]
    .map(String::from)
    .to_vec()];
    for inv in &results.invocations {
        let n = inv.iterations_us.len();
        let mean = (n > 0).then(|| inv.iterations_us.iter().sum::<f64>() / n as f64);
        rows.push(vec![
            inv.benchmark.clone(),
            inv.executor.clone(),
            inv.invocation.to_string(),
            inv.sequence.to_string(),
            format!("{:?}", inv.outcome).to_lowercase(),
            inv.failure.clone().unwrap_or_default(),
            opt(inv.exit_code),
            opt(inv.signal),
            n.to_string(),
            opt(inv.iterations_us.first()),
            opt(mean),
            inv.wall_s.to_string(),
            inv.user_s.to_string(),
            inv.sys_s.to_string(),
            inv.max_rss_kib.to_string(),
        ]);
    }
    write_rows(&path, rows)?;

    let path = dir.join("summary.csv");
    let mut rows: Vec<Vec<String>> = vec![[
        "benchmark",
        "executor",
        "metric",
        "ok",
        "attempted",
        "mean_us",
        "ci_lower_us",
        "ci_upper_us",
        "median_us",
        "std_dev_us",
        "startup_us",
        "steady_us",
        "steady_reached",
        "ratio",
        "ratio_ci_lower",
        "ratio_ci_upper",
        "p_value",
        "test",
        "significant",
        "cpu_s",
        "wall_s",
        "max_rss_kib",
        "min_us",
        "max_us",
        "outliers",
    ]
    .map(String::from)
    .to_vec()];
    let metric = format!("{:?}", report.settings.metric).to_lowercase();
    for b in &report.benchmarks {
        for (i, c) in b.cells.iter().enumerate() {
            let r = c.ratio.as_ref();
            rows.push(vec![
                b.name.clone(),
                report.executors[i].clone(),
                metric.clone(),
                c.ok.to_string(),
                c.attempted.to_string(),
                opt(c.mean),
                opt(c.summary.map(|s| s.ci.lower)),
                opt(c.summary.map(|s| s.ci.upper)),
                opt(c.median),
                opt(c.summary.map(|s| s.std_dev)),
                opt(c.startup),
                opt(c.steady.mean),
                format!("{}/{}", c.steady.reached, c.steady.of),
                if i == report.baseline {
                    "1".into()
                } else {
                    opt(r.map(|r| r.estimate))
                },
                opt(r.and_then(|r| r.ci.map(|c| c.lower))),
                opt(r.and_then(|r| r.ci.map(|c| c.upper))),
                opt(r.and_then(|r| r.p_value)),
                opt(r.and_then(|r| r.test)),
                opt(r.and_then(|r| r.significant)),
                opt(c.cpu_s),
                opt(c.wall_s),
                opt(c.max_rss_kib),
                opt(c.min),
                opt(c.max),
                // Empty where there were too few invocations to look for outliers.
                if c.samples.len() >= crate::outliers::MIN_SAMPLES {
                    c.outliers.len().to_string()
                } else {
                    String::new()
                },
            ]);
        }
    }
    for g in &report.geomeans {
        rows.push(vec![
            "(geometric mean)".into(),
            report.executors[g.executor].clone(),
            metric.clone(),
            g.benchmarks.to_string(),
            String::new(),
            String::new(),
            String::new(),
            String::new(),
            String::new(),
            String::new(),
            String::new(),
            String::new(),
            String::new(),
            g.estimate.to_string(),
            opt(g.ci.map(|c| c.lower)),
            opt(g.ci.map(|c| c.upper)),
            String::new(),
            String::new(),
            opt(g.ci.map(|c| c.excludes(1.0))),
            String::new(),
            String::new(),
            String::new(),
            String::new(),
            String::new(),
            String::new(),
        ]);
        let paired = [
            ("(geometric mean, paired by round)", &g.paired),
            ("(geometric mean, paired by round, robust)", &g.robust),
        ];
        for (label, p) in paired {
            let Some(p) = p else { continue };
            let mut row = vec![String::new(); 25];
            row[0] = label.into();
            row[1] = report.executors[g.executor].clone();
            row[2] = metric.clone();
            row[3] = p.rounds.to_string();
            row[13] = p.ci.estimate.to_string();
            row[14] = p.ci.lower.to_string();
            row[15] = p.ci.upper.to_string();
            row[18] = p.ci.excludes(1.0).to_string();
            rows.push(row);
        }
    }
    write_rows(&path, rows)?;

    let path = dir.join("warnings.csv");
    let mut rows: Vec<Vec<String>> =
        vec![["benchmark", "executor", "warning", "finding", "advice"]
            .map(String::from)
            .to_vec()];
    for warning in crate::warnings::collect(results, report) {
        rows.push(vec![
            warning.benchmark.unwrap_or_default(),
            warning.executor.unwrap_or_default(),
            warning.kind.name().to_string(),
            warning.finding,
            warning.advice,
        ]);
    }
    write_rows(&path, rows)
}

/// Writes a table whole (`tally_output`), replacing the run's own earlier one.
fn write_rows(path: &Path, rows: Vec<Vec<String>>) -> Result<(), BenchError> {
    let mut w = csv::Writer::from_writer(Vec::new());
    for r in rows {
        w.write_record(&r).map_err(|e| write_error(path, e))?;
    }
    let bytes = w
        .into_inner()
        .map_err(|e| write_error(path, csv::Error::from(e.into_error())))?;
    Ok(tally_output::write(
        path,
        &bytes,
        tally_output::IfExists::Replace,
    )?)
}
