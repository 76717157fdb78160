//! The measuring loop: rounds × benchmarks × executors.
//!
//! Rounds are the outer loop and executors the inner one, so the
//! invocations of the alternatives being compared alternate (A B A B …)
//! and every benchmark gets a share of each stretch of the run: slow drift
//! of the machine (thermal state, other load) then spreads over all
//! alternatives instead of biasing whichever ran last, and an interrupted
//! run still has complete rounds for every benchmark.

use std::collections::{BTreeMap, BTreeSet};
use std::io::IsTerminal;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use indicatif::{ProgressDrawTarget, ProgressStyle};

/// The bar [`progress_bar`] makes (indicatif's), named here so users need not depend on indicatif.
pub use indicatif::ProgressBar;

use crate::executor::Executor;
use crate::lockstep::run_in_lockstep;
use crate::measure::run_process;
use crate::results::{InvocationRecord, Outcome, Results};

/// Consecutive failures from the first invocation after which a benchmark ×
/// executor is abandoned.
const GIVE_UP_AFTER: u32 = 2;

/// Options of the loop itself.
pub struct RunOptions {
    /// Per-invocation limit.
    pub timeout: Option<Duration>,
    /// Print nothing while running.
    pub quiet: bool,
    /// Run each (round, benchmark)'s executors together on one CPU, taking turns of this
    /// length ([`crate::lockstep`]); every executor must be a Tally.
    pub lockstep: Option<Duration>,
}

/// Runs every planned invocation not yet in `results`, appending records,
/// until done or `interrupted`. Returns whether it finished. `checkpoint`
/// is called after each invocation so partial results survive a crash too.
pub fn run(
    results: &mut Results,
    options: &RunOptions,
    interrupted: &AtomicBool,
    mut checkpoint: impl FnMut(&Results),
) -> bool {
    let suite = results.suite.clone();
    let executors: Vec<Executor> = results.executors.clone();
    let rounds = results.settings.invocations;
    let total = rounds as u64 * suite.benchmarks.len() as u64 * executors.len() as u64;
    let progress = progress_bar(total, options.quiet);
    let mut ledger = Ledger {
        durations: BTreeMap::new(),
        given_up: BTreeSet::new(),
        failed_from_start: BTreeMap::new(),
        sequence: results.invocations.len() as u32,
        rounds,
    };
    let started = Instant::now();
    let mut last_plain_report = Instant::now();
    for round in 1..=rounds {
        for (bench_index, bench) in suite.benchmarks.iter().enumerate() {
            let mut order = Vec::new();
            for exec in rotated(&executors, round as usize - 1 + bench_index) {
                if ledger
                    .given_up
                    .contains(&(bench.name.clone(), exec.name.clone()))
                {
                    progress.inc(1);
                } else {
                    order.push(exec);
                }
            }
            if interrupted.load(Ordering::SeqCst) {
                progress.abandon();
                return false;
            }
            // In lockstep the whole group runs first; otherwise each executor runs (and is
            // recorded, so a checkpoint holds every finished invocation) in turn.
            let mut together = match options.lockstep {
                Some(slice) if !order.is_empty() => {
                    let eta = ledger.estimate_remaining(&suite, &executors, round, bench, order[0]);
                    progress.set_message(format!(
                        "round {round}/{rounds}: {} on {} executors in lockstep  ETA {}",
                        bench.name,
                        order.len(),
                        format_duration(eta)
                    ));
                    let argvs: Vec<Vec<String>> = order
                        .iter()
                        .map(|e| {
                            // `tally bench` accepts --lockstep with Tally executors only.
                            e.argv_taking_turns(&suite, bench)
                                .unwrap_or_else(|| e.argv(&suite, bench))
                        })
                        .collect();
                    let measured = run_in_lockstep(&argvs, slice, options.timeout, interrupted);
                    Some(argvs.into_iter().zip(measured))
                }
                _ => None,
            };
            for exec in order {
                let (argv, measured) = match together.as_mut().and_then(Iterator::next) {
                    Some(run) => run,
                    None => {
                        if interrupted.load(Ordering::SeqCst) {
                            break;
                        }
                        let eta = ledger.estimate_remaining(&suite, &executors, round, bench, exec);
                        progress.set_message(format!(
                            "round {round}/{rounds}: {} on {}  ETA {}",
                            bench.name,
                            exec.name,
                            format_duration(eta)
                        ));
                        let argv = exec.argv(&suite, bench);
                        let measured = run_process(&argv, options.timeout, interrupted);
                        (argv, measured)
                    }
                };
                let done = (exec, argv, measured);
                if ledger.record(
                    results,
                    bench,
                    round,
                    done,
                    &progress,
                    options,
                    &mut checkpoint,
                ) {
                    return false;
                }
            }
        }
        // Without a terminal there is no bar; say something now and then
        // so a log shows the run is alive.
        if !options.quiet
            && progress.is_hidden()
            && (round == rounds || last_plain_report.elapsed() > Duration::from_secs(30))
        {
            eprintln!(
                "tally bench: round {round}/{rounds} done after {}",
                format_duration(started.elapsed().as_secs_f64())
            );
            last_plain_report = Instant::now();
        }
    }
    progress.finish_and_clear();
    true
}

/// One finished invocation: its executor, its command line and what it did.
type Measured<'a> = (
    &'a Executor,
    Vec<String>,
    std::io::Result<crate::measure::ProcessRun>,
);

/// What the loop keeps about the invocations so far.
struct Ledger {
    /// Wall seconds of each benchmark × executor's invocations, for the ETA.
    durations: BTreeMap<(String, String), Vec<f64>>,
    /// A benchmark × executor whose first two invocations both failed is not
    /// run again: such failures (missing class, unsupported primitive, wrong
    /// result) are deterministic, and repeating them would only burn time.
    /// One failure is not enough to tell, since some VMs crash sporadically;
    /// those runs go on and the failures are reported.
    given_up: BTreeSet<(String, String)>,
    failed_from_start: BTreeMap<(String, String), u32>,
    sequence: u32,
    rounds: u32,
}

impl Ledger {
    /// Appends the record of one invocation (executor, command line, what it did), saves a
    /// checkpoint and moves the bar on; answers whether the run must stop (Ctrl-C), in which
    /// case the bar is abandoned.
    #[allow(clippy::too_many_arguments)]
    fn record(
        &mut self,
        results: &mut Results,
        bench: &crate::suite::Benchmark,
        round: u32,
        (exec, argv, measured): Measured<'_>,
        progress: &ProgressBar,
        options: &RunOptions,
        checkpoint: &mut impl FnMut(&Results),
    ) -> bool {
        self.sequence += 1;
        let sequence = self.sequence;
        let record = match measured {
            Ok(run) => InvocationRecord::from_run(bench, &exec.name, round, sequence, argv, &run),
            Err(e) => InvocationRecord::not_started(bench, &exec.name, round, sequence, argv, &e),
        };
        let key = (bench.name.clone(), exec.name.clone());
        self.durations
            .entry(key.clone())
            .or_default()
            .push(record.wall_s);
        let outcome = record.outcome;
        if outcome == Outcome::Failed {
            let streak = self.failed_from_start.entry(key.clone()).or_insert(0);
            if *streak + 1 == round {
                *streak = round;
            }
            let give_up = *streak == GIVE_UP_AFTER && round < self.rounds;
            let line = format!(
                "{} on {} (invocation {round}) failed: {}{}",
                bench.name,
                exec.name,
                record.failure.as_deref().unwrap_or("?"),
                if give_up {
                    "; failed every time so far, not run again"
                } else {
                    ""
                }
            );
            if !options.quiet {
                progress.suspend(|| eprintln!("{line}"));
            }
            if give_up {
                self.given_up.insert(key);
            }
        }
        results.invocations.push(record);
        results.finished = crate::now_rfc3339();
        checkpoint(results);
        if outcome == Outcome::Interrupted {
            progress.abandon();
            return true;
        }
        progress.inc(1);
        false
    }

    /// Seconds still to go: each remaining invocation is expected to take as
    /// long as that benchmark × executor took on average so far, or, before
    /// its first run, the average of everything measured so far. indicatif's
    /// own ETA assumes equal steps, which benchmarks of very different length
    /// are not.
    fn estimate_remaining(
        &self,
        suite: &crate::suite::Suite,
        executors: &[Executor],
        round: u32,
        current_bench: &crate::suite::Benchmark,
        current_exec: &Executor,
    ) -> f64 {
        let all: Vec<f64> = self.durations.values().flatten().copied().collect();
        if all.is_empty() {
            return f64::NAN;
        }
        let overall = all.iter().sum::<f64>() / all.len() as f64;
        let mut remaining = 0.0;
        let bench_index = suite
            .benchmarks
            .iter()
            .position(|b| b.name == current_bench.name)
            .unwrap_or(0);
        let exec_index = executors
            .iter()
            .position(|e| e.name == current_exec.name)
            .unwrap_or(0);
        for r in round..=self.rounds {
            for (bi, b) in suite.benchmarks.iter().enumerate() {
                for (ei, e) in executors.iter().enumerate() {
                    // Where each executor runs in the current benchmark's rotated order.
                    let n = executors.len();
                    let place = |i: usize| (i + n - (round as usize - 1 + bench_index) % n) % n;
                    if r == round && (bi, place(ei)) < (bench_index, place(exec_index)) {
                        continue;
                    }
                    let key = (b.name.clone(), e.name.clone());
                    if self.given_up.contains(&key) {
                        continue;
                    }
                    remaining += self
                        .durations
                        .get(&key)
                        .map(|d| d.iter().sum::<f64>() / d.len() as f64)
                        .unwrap_or(overall);
                }
            }
        }
        remaining
    }
}

/// Installs the Ctrl-C handler every measuring command shares: the first
/// Ctrl-C sets the returned flag (the runner then kills the running child
/// and the caller writes what was measured), a second one quits at once.
/// `tool` names the command in the message, e.g. "tally bench".
pub fn install_interrupt_handler(tool: &str) -> Arc<AtomicBool> {
    let interrupted = Arc::new(AtomicBool::new(false));
    let flag = Arc::clone(&interrupted);
    let tool = tool.to_string();
    // Failing to install the handler only loses graceful Ctrl-C.
    let _ = ctrlc::set_handler(move || {
        if flag.swap(true, Ordering::SeqCst) {
            std::process::exit(130);
        }
        eprintln!(
            "\n{tool}: interrupted; writing what was measured so far (Ctrl-C again to quit at once)"
        );
    });
    interrupted
}

/// The progress bar of a measuring run: drawn on stderr when it is a
/// terminal (hidden otherwise, or when `quiet`), `total` steps long.
pub fn progress_bar(total: u64, quiet: bool) -> ProgressBar {
    let target = if quiet || !std::io::stderr().is_terminal() {
        ProgressDrawTarget::hidden()
    } else {
        ProgressDrawTarget::stderr()
    };
    let bar = ProgressBar::with_draw_target(Some(total), target);
    bar.set_style(
        ProgressStyle::with_template("{elapsed_precise} [{bar:30.cyan/blue}] {pos}/{len} {msg}")
            .expect("valid template")
            .progress_chars("=> "),
    );
    bar.enable_steady_tick(Duration::from_millis(200));
    bar
}

/// The executors in the order one (round, benchmark) runs them: rotated by `offset`, so that
/// over the rounds each executor runs equally often first, second, … A fixed order would give
/// every executor the same neighbours and the same place in each slow phase of the machine;
/// rotating keeps the invocations being compared next to each other in time and the order
/// from biasing any of them.
fn rotated<T>(executors: &[T], offset: usize) -> impl Iterator<Item = &T> {
    let n = executors.len();
    (0..n).map(move |k| &executors[(k + offset) % n])
}

/// "1h02m", "3m05s", "42s"; "?" before anything has been measured.
pub fn format_duration(seconds: f64) -> String {
    if !seconds.is_finite() {
        return "?".into();
    }
    let s = seconds.round() as u64;
    if s >= 3600 {
        format!("{}h{:02}m", s / 3600, (s % 3600) / 60)
    } else if s >= 60 {
        format!("{}m{:02}s", s / 60, s % 60)
    } else {
        format!("{s}s")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_read_well() {
        assert_eq!(format_duration(42.4), "42s");
        assert_eq!(format_duration(185.0), "3m05s");
        assert_eq!(format_duration(3720.0), "1h02m");
        assert_eq!(format_duration(f64::NAN), "?");
    }

    #[test]
    fn rotation_puts_each_executor_in_each_place_equally_often() {
        let executors = ["a", "b", "c"];
        let mut first = std::collections::BTreeMap::new();
        for offset in 0..6 {
            let order: Vec<&str> = rotated(&executors, offset).copied().collect();
            let mut sorted = order.clone();
            sorted.sort_unstable();
            assert_eq!(sorted, executors, "every executor runs once per benchmark");
            *first.entry(order[0]).or_insert(0) += 1;
        }
        assert_eq!(first.values().copied().collect::<Vec<_>>(), [2, 2, 2]);
        assert!(rotated::<&str>(&[], 3).next().is_none());
    }
}
