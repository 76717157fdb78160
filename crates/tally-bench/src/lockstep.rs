//! Running several VMs in lockstep: at the same time, on one CPU, taking turns of a few tens
//! of milliseconds (`tally bench --lockstep`).
//!
//! Invocations run one after the other see different stretches of a shared machine; where
//! its speed changes several times a second (frequency, neighbours), no number of rounds pairs
//! them closely enough to resolve differences of 1 %. In lockstep, the executors of one
//! (round, benchmark) start together, pinned to the same CPU, and run one at a time, each for
//! a slice, round-robin (stopped and continued with SIGSTOP / SIGCONT). Every slow phase of
//! the machine then falls on all of them alike, whatever the length of an iteration.
//!
//! A VM stopped in the middle of an iteration must not count the time it was stopped: Tally
//! executors run with `--cpu-clock`, so their harness times process CPU time. That is also
//! why only Tally executors can run in lockstep. An invocation's wall time is the sum of its
//! own slices.

use std::process::Stdio;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use crate::measure::{drain, kill, reaped_run, try_reap, Killed, ProcessRun, POLL};

/// The word `tally` takes to time its harness by CPU time.
pub const TALLY_FLAG: &str = "--cpu-clock";

/// The default turn: short against the machine's phases (hundreds of milliseconds), long
/// against a context switch and the caches refilling after it (microseconds).
pub const DEFAULT_SLICE: Duration = Duration::from_millis(50);

/// One VM taking turns.
struct TurnTaker {
    pid: libc::pid_t,
    child: std::process::Child,
    stdout: Option<thread::JoinHandle<String>>,
    stderr: Option<thread::JoinHandle<String>>,
    /// The time it has been allowed to run.
    active: Duration,
    /// Where its spawner reports the VM's status and usage (`spawner.rs`).
    report: Option<crate::spawner::Report>,
    /// Its `wait4` status and usage once reaped.
    reaped: Option<(libc::c_int, libc::rusage)>,
    killed: Option<Killed>,
}

/// Starts every command at once, stopped, and lets them run one at a time, in the order
/// given, `slice` each, until all have ended. `timeout` bounds each VM's own running time.
/// Results are in the order of `argvs`; an error means that command could not be started.
pub fn run_in_lockstep(
    argvs: &[Vec<String>],
    slice: Duration,
    timeout: Option<Duration>,
    interrupted: &AtomicBool,
) -> Vec<std::io::Result<ProcessRun>> {
    let mut takers: Vec<std::io::Result<TurnTaker>> = argvs.iter().map(|a| start(a)).collect();
    loop {
        let mut anyone_ran = false;
        for taker in takers.iter_mut().flatten() {
            if taker.reaped.is_some() {
                continue;
            }
            if interrupted.load(Ordering::SeqCst) {
                taker.end(Killed::Interrupted);
                continue;
            }
            anyone_ran = true;
            if let Err(e) = taker.take_turn(slice, timeout) {
                // Not reaped, so the pid is still ours; give up on this one.
                taker.end(Killed::Interrupted);
                eprintln!("tally bench: lockstep: {e}");
            }
        }
        if !anyone_ran {
            break;
        }
    }
    takers
        .into_iter()
        .map(|t| t.map(TurnTaker::collect))
        .collect()
}

/// Starts `argv` and stops it at once, before it gets far into its start-up.
fn start(argv: &[String]) -> std::io::Result<TurnTaker> {
    use std::os::unix::process::CommandExt;
    let (mut command, report) = crate::spawner::command(argv);
    let mut child = command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        // Its own process group, as in `measure::run_process`: stopping, continuing and
        // killing reach all of it, and Ctrl-C reaches only us.
        .process_group(0)
        .spawn()?;
    let pid = child.id() as libc::pid_t;
    signal_group(pid, libc::SIGSTOP);
    Ok(TurnTaker {
        pid,
        stdout: child.stdout.take().map(drain),
        stderr: child.stderr.take().map(drain),
        child,
        report,
        active: Duration::ZERO,
        reaped: None,
        killed: None,
    })
}

impl TurnTaker {
    /// Lets the VM run for `slice`, then stops it again. We sleep through the whole slice,
    /// even if the VM ends early (the rest of its last slice is then idle), so that nothing
    /// of ours wakes up on the CPU the VMs share.
    fn take_turn(&mut self, slice: Duration, timeout: Option<Duration>) -> std::io::Result<()> {
        let began = Instant::now();
        signal_group(self.pid, libc::SIGCONT);
        thread::sleep(slice);
        match try_reap(self.pid)? {
            Some(done) => self.reaped = Some(done),
            None => signal_group(self.pid, libc::SIGSTOP),
        }
        self.active += began.elapsed();
        if self.reaped.is_none() && timeout.is_some_and(|t| self.active > t) {
            self.end(Killed::Timeout);
        }
        Ok(())
    }

    /// Kills the VM (stopped or not) and reaps it.
    fn end(&mut self, why: Killed) {
        if self.reaped.is_some() {
            return;
        }
        self.killed.get_or_insert(why);
        kill(self.pid);
        loop {
            match try_reap(self.pid) {
                Ok(Some(done)) => {
                    self.reaped = Some(done);
                    return;
                }
                Ok(None) => thread::sleep(POLL),
                // Nothing left to wait for (someone else reaped it): record the kill we sent,
                // so that the VM counts as ended and the turns go on without it.
                Err(_) => {
                    self.reaped = Some(killed_without_usage());
                    return;
                }
            }
        }
    }

    /// What it did, once reaped.
    fn collect(mut self) -> ProcessRun {
        if self.reaped.is_none() {
            self.end(Killed::Interrupted);
        }
        // Reaped already; dropping the handle does not wait again.
        drop(self.child);
        let stdout = self.stdout.map(|h| h.join().unwrap_or_default());
        let stderr = self.stderr.map(|h| h.join().unwrap_or_default());
        let (mut status, mut usage) = self.reaped.unwrap_or_else(killed_without_usage);
        let mut stderr = stderr.unwrap_or_default();
        match self.report.as_ref().map(|r| r.read()) {
            Some(Ok(Some(vm))) => (status, usage) = vm,
            // The spawner could not start the VM: failed as a shell reports a command it
            // cannot run.
            Some(Err(e)) => {
                status = 127 << 8;
                stderr.push_str(&format!("tally bench: cannot start the VM: {e}\n"));
            }
            _ => {}
        }
        reaped_run(
            status,
            &usage,
            self.killed,
            stdout.unwrap_or_default(),
            stderr,
            self.active.as_secs_f64(),
        )
    }
}

/// The `wait4` result of a VM we killed but could not reap: terminated by SIGKILL, no usage.
fn killed_without_usage() -> (libc::c_int, libc::rusage) {
    // SAFETY: `rusage` is plain old data for which all-zero bytes are valid.
    (libc::SIGKILL, unsafe { std::mem::zeroed() })
}

/// Sends `signal` to the process group `pid` leads.
fn signal_group(pid: libc::pid_t, signal: libc::c_int) {
    // SAFETY: kill(2) has no memory-safety preconditions. `pid` is our child, not yet reaped
    // (callers check), so its group id cannot have been reused by anyone else.
    unsafe {
        libc::kill(-pid, signal);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::measure::tests::sh;

    #[test]
    fn every_vm_runs_to_its_end_and_keeps_its_output() {
        let never = AtomicBool::new(false);
        let runs = run_in_lockstep(
            &[sh("echo a1; echo a2"), sh("echo b1; exit 3")],
            Duration::from_millis(10),
            None,
            &never,
        );
        let a = runs[0].as_ref().unwrap();
        assert_eq!((a.exit_code, a.stdout.as_str()), (Some(0), "a1\na2\n"));
        let b = runs[1].as_ref().unwrap();
        assert_eq!((b.exit_code, b.stdout.as_str()), (Some(3), "b1\n"));
    }

    #[test]
    fn only_one_vm_runs_at_a_time() {
        // Two loops that log the wall time 100 times each: with 30 ms turns their timestamps
        // fall in alternating runs rather than mixed together.
        let dir = tempfile::tempdir().unwrap();
        let script = |name: &str| {
            let log = dir.path().join(name);
            sh(&format!(
                "i=0; while [ $i -lt 100 ]; do date +%s%N >> {}; i=$((i+1)); done",
                log.display()
            ))
        };
        let never = AtomicBool::new(false);
        let runs = run_in_lockstep(
            &[script("a"), script("b")],
            Duration::from_millis(30),
            None,
            &never,
        );
        assert!(runs
            .iter()
            .all(|r| r.as_ref().unwrap().exit_code == Some(0)));
        let read = |name: &str| -> Vec<(u128, char)> {
            std::fs::read_to_string(dir.path().join(name))
                .unwrap()
                .lines()
                .filter_map(|l| l.trim().parse().ok())
                .map(|t| (t, name.chars().next().unwrap()))
                .collect()
        };
        let mut all = read("a");
        all.extend(read("b"));
        assert_eq!(all.len(), 200);
        all.sort();
        let switches = all.windows(2).filter(|w| w[0].1 != w[1].1).count();
        // Running freely on two CPUs (or time-shared by the kernel every few milliseconds)
        // they would switch at almost every line; in turns, a few lines to a turn.
        assert!(switches >= 2, "{switches} switches: took turns");
        assert!(switches < 50, "{switches} switches in 200 lines");
    }

    #[test]
    fn timeouts_and_missing_programs_end_only_their_own_vm() {
        let never = AtomicBool::new(false);
        let runs = run_in_lockstep(
            &[
                sh("sleep 5"),
                vec!["/surely/not/here".to_string()],
                sh("echo c"),
            ],
            Duration::from_millis(20),
            Some(Duration::from_millis(300)),
            &never,
        );
        let stuck = runs[0].as_ref().unwrap();
        assert_eq!(stuck.killed, Some(Killed::Timeout));
        assert!(stuck.wall_s < 1.0, "{stuck:?}");
        assert!(runs[1].is_err());
        assert_eq!(runs[2].as_ref().unwrap().stdout, "c\n");
    }

    #[test]
    fn an_interrupt_ends_every_vm() {
        let now = AtomicBool::new(true);
        let runs = run_in_lockstep(&[sh("sleep 5"), sh("sleep 5")], DEFAULT_SLICE, None, &now);
        for run in runs {
            assert_eq!(run.unwrap().killed, Some(Killed::Interrupted));
        }
    }
}
