//! Running one VM invocation and measuring the process from outside.
//!
//! The harness times its iterations itself; from outside we add what it
//! cannot see: wall time of the whole process (start-up included), CPU time
//! (user + system, which reveals GC or JIT threads working beside the
//! mutator) and peak resident memory. CPU and memory come from `wait4`, the
//! kernel's accounting of exactly this child, taken by a small spawner process where the
//! program provides one (`spawner.rs`: otherwise a VM's peak memory cannot read below ours).

use std::io::Read;
use std::os::unix::process::CommandExt;
use std::process::Stdio;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread;
use std::time::{Duration, Instant};

/// Why the runner ended a child before it finished.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Killed {
    /// It ran longer than the per-invocation limit.
    Timeout,
    /// The user pressed Ctrl-C.
    Interrupted,
}

/// What one process did, as seen from outside.
#[derive(Debug, Clone)]
pub struct ProcessRun {
    /// Exit status when it exited normally.
    pub exit_code: Option<i32>,
    /// Terminating signal when it did not.
    pub signal: Option<i32>,
    /// Set when the runner killed it.
    pub killed: Option<Killed>,
    /// Everything it printed on standard output.
    pub stdout: String,
    /// Everything it printed on standard error.
    pub stderr: String,
    /// From start to reaped, in seconds.
    pub wall_s: f64,
    /// User CPU seconds.
    pub user_s: f64,
    /// System CPU seconds.
    pub sys_s: f64,
    /// Peak resident set size in KiB.
    pub max_rss_kib: u64,
}

impl ProcessRun {
    /// User plus system CPU seconds: the process's own work, without the
    /// time it waited for a CPU (which wall time includes on a busy machine).
    pub fn cpu_s(&self) -> f64 {
        self.user_s + self.sys_s
    }
}

/// How often the runner looks at a running child. It bounds how late a
/// timeout or Ctrl-C takes effect and how much wall time is over-counted;
/// the harness's own iteration times are unaffected.
pub(crate) const POLL: Duration = Duration::from_millis(2);

/// Starts `argv` and waits for it, killing it on `timeout` or when
/// `interrupted` becomes true. Errors only if the process cannot be started.
pub fn run_process(
    argv: &[String],
    timeout: Option<Duration>,
    interrupted: &AtomicBool,
) -> std::io::Result<ProcessRun> {
    let start = Instant::now();
    let (mut command, report) = crate::spawner::command(argv);
    let mut child = command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        // Its own process group, so that a kill also reaches anything it
        // started (which would otherwise hold the pipes open), and so that
        // Ctrl-C reaches only us: we decide what happens to the child.
        .process_group(0)
        .spawn()?;
    let pid = child.id() as libc::pid_t;
    // Both pipes are drained concurrently: a VM that fills one pipe's buffer
    // while we block reading the other would otherwise deadlock.
    let out = child.stdout.take().map(drain);
    let err = child.stderr.take().map(drain);
    let mut killed = None;
    let (mut status, mut usage) = loop {
        if let Some(done) = try_reap(pid)? {
            break done;
        }
        if killed.is_none() {
            if interrupted.load(Ordering::SeqCst) {
                killed = Some(Killed::Interrupted);
            } else if timeout.is_some_and(|t| start.elapsed() > t) {
                killed = Some(Killed::Timeout);
            }
            if killed.is_some() {
                kill(pid);
            }
        }
        thread::sleep(POLL);
    };
    let wall_s = start.elapsed().as_secs_f64();
    if let Some(report) = &report {
        if let Some(vm) = report.read()? {
            (status, usage) = vm;
        }
    }
    // The child is reaped already; dropping `child` does not wait again.
    drop(child);
    let stdout = out
        .map(|h| h.join().unwrap_or_default())
        .unwrap_or_default();
    let stderr = err
        .map(|h| h.join().unwrap_or_default())
        .unwrap_or_default();
    Ok(reaped_run(status, &usage, killed, stdout, stderr, wall_s))
}

/// What a reaped child did, from its `wait4` status and usage.
pub(crate) fn reaped_run(
    status: libc::c_int,
    usage: &libc::rusage,
    killed: Option<Killed>,
    stdout: String,
    stderr: String,
    wall_s: f64,
) -> ProcessRun {
    let (exit_code, signal) = if libc::WIFEXITED(status) {
        (Some(libc::WEXITSTATUS(status)), None)
    } else if libc::WIFSIGNALED(status) {
        (None, Some(libc::WTERMSIG(status)))
    } else {
        (None, None)
    };
    ProcessRun {
        exit_code,
        signal,
        killed,
        stdout,
        stderr,
        wall_s,
        user_s: seconds(usage.ru_utime),
        sys_s: seconds(usage.ru_stime),
        // Linux reports ru_maxrss in KiB.
        max_rss_kib: usage.ru_maxrss.max(0) as u64,
    }
}

pub(crate) fn drain<R: Read + Send + 'static>(mut r: R) -> thread::JoinHandle<String> {
    thread::spawn(move || {
        let mut bytes = Vec::new();
        let _ = r.read_to_end(&mut bytes);
        String::from_utf8_lossy(&bytes).into_owned()
    })
}

fn seconds(t: libc::timeval) -> f64 {
    t.tv_sec as f64 + t.tv_usec as f64 * 1e-6
}

/// Reaps `pid` if it has ended, with its resource usage.
///
/// Polling with `WNOHANG` from the one thread that also kills keeps the pid
/// ours until we reap it: a kill can never reach a recycled pid.
pub(crate) fn try_reap(pid: libc::pid_t) -> std::io::Result<Option<(libc::c_int, libc::rusage)>> {
    reap(pid, libc::WNOHANG)
}

/// Waits for `pid` to end (the spawner, which kills nothing), with its resource usage.
pub(crate) fn wait(pid: libc::pid_t) -> std::io::Result<(libc::c_int, libc::rusage)> {
    reap(pid, 0).map(|done| done.expect("wait4 without WNOHANG returns only once it reaped"))
}

/// `wait4(pid, flags)`, restarted after signals: `None` when `WNOHANG` found it running.
fn reap(
    pid: libc::pid_t,
    flags: libc::c_int,
) -> std::io::Result<Option<(libc::c_int, libc::rusage)>> {
    let mut status: libc::c_int = 0;
    // SAFETY: `rusage` is plain old data for which all-zero bytes are valid.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    loop {
        // SAFETY: both pointers refer to live, writable locals of the right
        // types for the duration of the call; `pid` is our unreaped child.
        let r = unsafe { libc::wait4(pid, &mut status, flags, &mut usage) };
        if r == pid {
            return Ok(Some((status, usage)));
        }
        if r == 0 {
            return Ok(None);
        }
        let e = std::io::Error::last_os_error();
        if e.kind() != std::io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
}

pub(crate) fn kill(pid: libc::pid_t) {
    // SAFETY: kill(2) has no memory-safety preconditions. `-pid` names the
    // process group our child leads; the child is not reaped yet (see
    // `try_reap`), so the group id cannot have been reused by anyone else.
    unsafe {
        libc::kill(-pid, libc::SIGKILL);
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// `sh -c SCRIPT`: a stand-in VM for the tests of this module and of `lockstep`.
    pub(crate) fn sh(script: &str) -> Vec<String> {
        vec!["sh".into(), "-c".into(), script.into()]
    }

    #[test]
    fn captures_output_status_and_usage() {
        let never = AtomicBool::new(false);
        let r = run_process(&sh("echo out; echo err >&2; exit 3"), None, &never).unwrap();
        assert_eq!((r.exit_code, r.signal, r.killed), (Some(3), None, None));
        assert_eq!((r.stdout.as_str(), r.stderr.as_str()), ("out\n", "err\n"));
        assert!(r.max_rss_kib > 0 && r.wall_s > 0.0);
    }

    #[test]
    fn measures_cpu_time_of_the_child() {
        let never = AtomicBool::new(false);
        let r = run_process(
            &sh("i=0; while [ $i -lt 200000 ]; do i=$((i+1)); done"),
            None,
            &never,
        )
        .unwrap();
        assert!(r.user_s + r.sys_s > 0.01, "{r:?}");
    }

    #[test]
    fn kills_on_timeout_and_on_interrupt() {
        let never = AtomicBool::new(false);
        let r = run_process(&sh("sleep 5"), Some(Duration::from_millis(100)), &never).unwrap();
        assert_eq!(r.killed, Some(Killed::Timeout));
        assert_eq!(r.signal, Some(libc::SIGKILL));
        assert!(r.wall_s < 4.0);
        let now = AtomicBool::new(true);
        let r = run_process(&sh("sleep 5"), None, &now).unwrap();
        assert_eq!(r.killed, Some(Killed::Interrupted));
    }

    #[test]
    fn a_missing_program_is_an_error() {
        let never = AtomicBool::new(false);
        assert!(run_process(&["/surely/not/here".to_string()], None, &never).is_err());
    }
}
