//! The child processes of `tally validate`: one run of the program with given flags, its CPU
//! time and what it printed, with progress and an estimate of the time left on stderr.

use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tally_vm::tally_profile::{Profile, VmState};

/// Runs this binary on the program, counting the runs for the progress line and keeping a
/// record of each for `validate.json`.
pub(super) struct Runs {
    pub this: PathBuf,
    pub program: Vec<String>,
    pub timeout: Duration,
    pub interrupted: Arc<AtomicBool>,
    pub quiet: bool,
    /// Runs done, and planned in all (the first is known only once the places are).
    pub done: usize,
    pub total: usize,
    pub started: Instant,
    pub log: Vec<serde_json::Value>,
}

/// What one run gave.
pub(super) struct Run {
    /// User and system CPU time of the whole process (wait4).
    pub cpu_s: f64,
    pub stderr: String,
}

impl Runs {
    /// Runs the program with `flags` before it; `what` names the run in the progress line and
    /// in errors. A run that fails, or is killed at the timeout, is an error.
    pub fn run(&mut self, what: &str, flags: &[String]) -> Result<Run, String> {
        let mut argv = vec![self.this.display().to_string()];
        argv.extend(flags.iter().cloned());
        argv.extend(self.program.iter().cloned());
        if !self.quiet {
            let left = if self.done > 0 && self.total > self.done {
                let per = self.started.elapsed().as_secs_f64() / self.done as f64;
                format!(
                    ", about {} left",
                    minutes_of(per * (self.total - self.done) as f64)
                )
            } else {
                String::new()
            };
            say!(
                "tally validate: [{}/{}{left}] {what}",
                self.done + 1,
                self.total.max(self.done + 1)
            );
        }
        let r = tally_bench::measure::run_process(&argv, Some(self.timeout), &self.interrupted)
            .map_err(|e| format!("cannot start {}: {e}", argv[0]))?;
        self.done += 1;
        self.log.push(serde_json::json!({
            "what": what, "argv": argv, "exit": r.exit_code, "cpu_s": r.cpu_s(), "wall_s": r.wall_s,
        }));
        if r.killed.is_some() || r.exit_code != Some(0) {
            let why = match r.killed {
                Some(tally_bench::measure::Killed::Interrupted) => "interrupted".to_string(),
                Some(tally_bench::measure::Killed::Timeout) => {
                    format!("killed after {} s (--timeout)", self.timeout.as_secs())
                }
                None => match (r.exit_code, r.signal) {
                    (Some(c), _) => format!("exit {c}"),
                    (None, Some(s)) => format!("killed by signal {s}"),
                    (None, None) => "ended".into(),
                },
            };
            // A benchmark harness says why on stdout, the VM on stderr: the end of both.
            let tail = |text: &str| {
                let lines: Vec<&str> = text.lines().rev().take(6).collect();
                lines.into_iter().rev().collect::<Vec<_>>().join("\n")
            };
            return Err(format!(
                "{what} failed ({why})\n{}\n{}\ncommand: {}",
                tail(&r.stdout),
                tail(&r.stderr),
                argv.join(" ")
            ));
        }
        Ok(Run {
            cpu_s: r.cpu_s(),
            stderr: r.stderr,
        })
    }
}

pub(super) fn minutes_of(seconds: f64) -> String {
    if seconds < 90.0 {
        format!("{seconds:.0} s")
    } else {
        format!("{:.0} min", seconds / 60.0)
    }
}

/// The CPU time a run's `--inject-delay` reports having injected, in ns.
pub(super) fn injected_ns(stderr: &str) -> Option<f64> {
    let line = stderr.lines().find(|l| l.contains("ms of CPU in all"))?;
    let before = line.split(" ms of CPU in all").next()?;
    before
        .rsplit(' ')
        .next()?
        .parse::<f64>()
        .ok()
        .map(|ms| ms * 1e6)
}

/// The delay loop's calibrated cost per iteration a run's `--inject-delay` reports, in ns.
pub(super) fn ns_per_iteration(stderr: &str) -> Option<f64> {
    let line = stderr.lines().find(|l| l.contains("ns per iteration"))?;
    let before = line.split(" ns per iteration").next()?;
    before.rsplit(' ').next()?.parse::<f64>().ok()
}

/// Reads a run's profile and removes the file (each run writes the same path).
pub(super) fn take_profile(path: &Path) -> Result<Profile, String> {
    let p = Profile::read(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let _ = std::fs::remove_file(path);
    Ok(p)
}

/// Samples of a profile that are the program's (those `credited_ns` counts).
pub(super) fn program_samples(p: &Profile) -> f64 {
    p.samples
        .iter()
        .filter(|s| !matches!(s.state, VmState::Gc | VmState::Compiling))
        .count() as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_injected_time_and_the_loop_s_cost_are_read_from_the_vm_s_line() {
        let e = "x\ntally: injected 100 delay(s) of 2000000 ns into A>>b: 199.870 ms of CPU in all (1639344 loop iterations each, 1.22 ns per iteration)\n";
        assert_eq!(injected_ns(e), Some(199.870e6));
        assert_eq!(ns_per_iteration(e), Some(1.22));
        assert_eq!(injected_ns("nothing"), None);
        assert_eq!(ns_per_iteration("nothing"), None);
    }
}
