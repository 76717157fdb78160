//! `tally bench`: statistically rigorous benchmarking of SOM VMs.
//!
//! The methodology is Georges, Buytaert & Eeckhout, "Statistically Rigorous
//! Java Performance Evaluation" (OOPSLA 2007): many VM invocations with
//! in-process iterations, start-up and steady-state figures, confidence
//! intervals over invocations, and tests (Welch; ANOVA then Tukey HSD) for
//! comparing alternatives. The statistics live in `tally-stats`; this crate
//! runs the experiment and reports it.
//!
//! It treats every VM, Tally included, as a process that runs a harness and
//! prints one time per iteration, so it depends on nothing of Tally's and
//! measures other SOM VMs (or anything that prints the same lines) the same way.
//!
//! Flow: [`suite`] and [`executor`] say what to run; [`runner`] interleaves
//! invocations, each measured by [`measure`] (or, with `--lockstep`, the executors of a
//! benchmark together, taking turns iteration by iteration: [`lockstep`]); [`results`] is the raw record
//! (JSON), from which [`analysis`] computes a [`analysis::Report`] (flagging
//! outlying invocations: [`outliers`]) that [`table`], `markdown`, [`csv_out`]
//! and [`svg`] present, with `warnings` where the numbers mislead. `tally bench
//! report` starts again from the JSON, so every report, warnings included, can be
//! recomputed.

pub mod analysis;
pub mod cli;
pub mod cpu;
pub mod csv_out;
pub mod error;
pub mod executor;
pub mod lockstep;
pub(crate) mod markdown;
pub mod measure;
pub mod outliers;
pub mod results;
pub mod runner;
pub mod spawner;
pub mod suite;
pub mod svg;
pub mod table;
#[cfg(test)]
mod test_support;
pub(crate) mod warnings;

pub use cli::main;
pub use error::BenchError;

/// The current time in RFC 3339 (UTC, whole seconds), for results files.
pub fn now_rfc3339() -> String {
    humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string()
}
