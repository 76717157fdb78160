//! `tally vertical phases TIMES`: MonitorMethod's offline step. From the first run's method
//! times, the phases under a grid of thresholds with each selection's estimated overhead;
//! the finest selection within the budget (or the thresholds given) is written for `--phases`.

use std::fmt::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;

use tally_vm::tally_vertical::phase_files::{MethodTimes, Phases};
use tally_vm::tally_vertical::phases::{best_within, select, sweep, Selection, Thresholds};

#[derive(clap::Args, Debug)]
pub(crate) struct PhasesArgs {
    /// The method times of a run with --phases-record.
    times: PathBuf,
    /// The estimated overhead the counting run may have, in percent of the run: the
    /// selection with the most phases within it is chosen. The estimate counts the readings
    /// at their cost on the VM's hook path; what a reading costs the compiled code around it
    /// comes on top (about as much again on the machines of BENCHMARKS.md), hence a default
    /// of a third of the usual 3 %.
    #[arg(long, value_name = "PERCENT", default_value_t = 1.0)]
    budget: f64,
    /// θ_weight values to try: a phase's calls take at least this share of the run.
    #[arg(long, value_name = "LIST", value_delimiter = ',', default_values_t = [0.01, 0.02, 0.05, 0.1])]
    weights: Vec<f64>,
    /// θ_grain values to try: a phase's calls take at least this long on average (ns, or
    /// with us, ms, s).
    #[arg(long, value_name = "LIST", value_delimiter = ',', value_parser = crate::parse_duration_ns,
          default_values = ["1us", "10us", "100us", "1ms", "10ms"])]
    grains: Vec<f64>,
    /// Use exactly this θ_weight (with --grain) instead of choosing.
    #[arg(long, value_name = "SHARE", requires = "grain")]
    weight: Option<f64>,
    /// Use exactly this θ_grain (with --weight).
    #[arg(long, value_name = "DURATION", requires = "weight", value_parser = crate::parse_duration_ns)]
    grain: Option<f64>,
    /// Rows of the chosen phases to print.
    #[arg(long, value_name = "N", default_value_t = 20)]
    top: usize,
    /// Write the chosen phases to FILE, for `tally --phases FILE …`.
    #[arg(short = 'o', long, value_name = "FILE")]
    output: Option<PathBuf>,
    /// Overwrite FILE.
    #[arg(long)]
    force: bool,
}

pub(crate) fn run(a: &PhasesArgs) -> ExitCode {
    if let Some(out) = &a.output {
        if let Err(e) = crate::check_new_file(out, a.force, "the phases") {
            say!("error: {e}");
            return ExitCode::from(2);
        }
    }
    if !(a.budget.is_finite() && a.budget > 0.0) {
        say!("error: --budget {} is not a percentage above 0", a.budget);
        return ExitCode::from(2);
    }
    if let Some(w) = a
        .weights
        .iter()
        .chain(&a.weight)
        .find(|w| !(0.0..=1.0).contains(*w))
    {
        say!("error: θ_weight {w} is not a share of the run (0 to 1)");
        return ExitCode::from(2);
    }
    let text = match std::fs::read_to_string(&a.times) {
        Ok(t) => t,
        Err(e) => {
            say!("error: cannot read {}: {e}", a.times.display());
            return ExitCode::from(2);
        }
    };
    let times = match MethodTimes::parse(&text) {
        Ok(t) => t,
        Err(e) => {
            say!(
                "error: cannot use the method times in {}: {e} (write them with `tally --phases-record FILE …`)",
                a.times.display()
            );
            return ExitCode::from(1);
        }
    };
    let methods = times.method_times();
    let budget = a.budget / 100.0;
    let grid = sweep(
        &methods,
        times.run_ns,
        times.count_probe_ns,
        &a.weights,
        &a.grains,
    );
    let chosen: Option<Selection> = match (a.weight, a.grain) {
        (Some(weight), Some(grain_ns)) => Some(select(
            &methods,
            times.run_ns,
            times.count_probe_ns,
            Thresholds { weight, grain_ns },
        )),
        _ => best_within(&grid, budget).cloned(),
    };
    print!("{}", render(&times, &grid, chosen.as_ref(), budget, a.top));
    let Some(chosen) = chosen.filter(|c| !c.phases.is_empty()) else {
        say!(
            "error: no selection has a phase{}: lower the thresholds or raise --budget",
            if a.weight.is_some() {
                ""
            } else {
                " within the budget"
            }
        );
        return ExitCode::from(1);
    };
    if let Some(out) = &a.output {
        let phases = Phases::from_selection(&times, &chosen);
        let if_exists = tally_output::IfExists::from_force(a.force);
        if let Err(e) = tally_output::write(out, phases.render().as_bytes(), if_exists) {
            say!("error: {e}");
            return ExitCode::from(1);
        }
        say!(
            "tally: {} phase(s) written to {}; count them with `tally --phases {} [--tier {}] …`",
            chosen.phases.len(),
            out.display(),
            out.display(),
            times.tier
        );
    }
    ExitCode::SUCCESS
}

fn render(
    times: &MethodTimes,
    grid: &[Selection],
    chosen: Option<&Selection>,
    budget: f64,
    top: usize,
) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{}: {} methods over {:.3} s ({} tier); a counter reading costs {:.0} ns, two per call of a phase",
        times.program,
        times.methods.len(),
        times.run_ns as f64 / 1e9,
        times.tier,
        times.count_probe_ns
    );
    let _ = writeln!(
        out,
        "\n{:>8} {:>10} {:>7} {:>12} {:>10} {:>9}",
        "θ_weight", "θ_grain", "phases", "calls", "est. ovh", "covered"
    );
    for s in grid {
        let mark = if chosen == Some(s) {
            "  <- chosen"
        } else if s.estimated_overhead > budget {
            "  over budget"
        } else {
            ""
        };
        let _ = writeln!(
            out,
            "{:>7.0}% {:>10} {:>7} {:>12} {:>9.3}% {:>8.0}%{mark}",
            s.thresholds.weight * 100.0,
            duration(s.thresholds.grain_ns),
            s.phases.len(),
            s.probed_calls,
            s.estimated_overhead * 100.0,
            s.coverage * 100.0
        );
    }
    if let Some(c) = chosen {
        let _ = writeln!(
            out,
            "\nphases at θ_weight {:.0} %, θ_grain {} (estimated overhead {:.3} %):",
            c.thresholds.weight * 100.0,
            duration(c.thresholds.grain_ns),
            c.estimated_overhead * 100.0
        );
        let _ = writeln!(
            out,
            "{:<50} {:>10} {:>12} {:>7} {:>12}",
            "method", "calls", "inclusive ms", "share", "per call"
        );
        for p in c.phases.iter().take(top) {
            let _ = writeln!(
                out,
                "{:<50} {:>10} {:>12.1} {:>6.1}% {:>12}",
                p.name,
                p.calls,
                p.inclusive_ns as f64 / 1e6,
                p.inclusive_ns as f64 * 100.0 / times.run_ns.max(1) as f64,
                duration(p.inclusive_ns as f64 / p.calls.max(1) as f64)
            );
        }
        if c.phases.len() > top {
            let _ = writeln!(out, "… and {} more", c.phases.len() - top);
        }
    }
    out
}

fn duration(ns: f64) -> String {
    if ns >= 1e9 {
        format!("{:.3} s", ns / 1e9)
    } else if ns >= 1e6 {
        format!("{:.1} ms", ns / 1e6)
    } else if ns >= 1e3 {
        format!("{:.1} µs", ns / 1e3)
    } else {
        format!("{ns:.0} ns")
    }
}
