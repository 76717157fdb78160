//! Peak memory of small processes, measured from a small parent.
//!
//! Linux counts a process's peak resident memory (`ru_maxrss`, what `wait4` reports) from
//! before its `exec`: the new program starts with the peak of the memory it replaced, and for
//! a child the runner starts (with `fork` or `vfork`) that is the runner's own, several MiB
//! with the report code and the results in it. Every VM smaller than the runner would read as
//! the runner. So the runner starts each VM through a spawner, a second copy of its own binary
//! that does nothing but start the VM, wait for it and hand over the VM's status and resource
//! usage in a file: its peak before the VM's `exec` (about 2 MiB, mostly the C library) is the
//! floor under the figures instead.
//!
//! The spawner joins the VM's process group, so stopping, continuing and killing the group
//! (timeouts, Ctrl-C, lockstep turns) reach both; a spawner killed before it could report
//! leaves the runner its own status, which is what a killed VM reports anyway.

use std::ffi::OsString;
use std::io::{Error, ErrorKind};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;

/// Set in a spawner's environment: where it writes its report. Its presence is what makes
/// the binary a spawner (see [`serve_if_asked`]); the VM does not inherit it.
const REPORT_PATH_ENV: &str = "TALLY_BENCH_SPAWNER_REPORT";

/// The binary VMs are started through, once the program has said which ([`spawn_through`]).
static SPAWNER: OnceLock<PathBuf> = OnceLock::new();

/// Starts every later VM through `binary`: this program's own executable, whose `main` calls
/// [`serve_if_asked`] before anything else. Without it VMs are started directly (and a VM
/// smaller than this process reads as this process's peak memory).
pub fn spawn_through(binary: PathBuf) {
    let _ = SPAWNER.set(binary);
}

/// When this process was started as a spawner: runs the command its arguments name, writes
/// the report, and exits. Otherwise returns at once. Call it first in `main`, before the
/// program allocates or touches anything it does not need: all of it is under the VM's figure.
pub fn serve_if_asked() {
    let Some(report) = std::env::var_os(REPORT_PATH_ENV) else {
        return;
    };
    let argv: Vec<OsString> = std::env::args_os().skip(1).collect();
    let line = match argv.split_first() {
        None => format!("error {} the spawner was given no command", libc::EINVAL),
        Some((program, args)) => match Command::new(program)
            .args(args)
            .env_remove(REPORT_PATH_ENV)
            .spawn()
        {
            Err(e) => format!("error {} {e}", e.raw_os_error().unwrap_or(libc::EIO)),
            Ok(child) => match crate::measure::wait(child.id() as libc::pid_t) {
                Ok((status, usage)) => format!(
                    "ok {status} {} {} {} {} {}",
                    usage.ru_maxrss,
                    usage.ru_utime.tv_sec,
                    usage.ru_utime.tv_usec,
                    usage.ru_stime.tv_sec,
                    usage.ru_stime.tv_usec
                ),
                Err(e) => format!("error {} {e}", e.raw_os_error().unwrap_or(libc::EIO)),
            },
        },
    };
    let written = tally_output::write(
        std::path::Path::new(&report),
        (line + "\n").as_bytes(),
        tally_output::IfExists::Replace,
    );
    std::process::exit(if written.is_ok() { 0 } else { 70 });
}

/// The command that starts `argv`, through the spawner when there is one, and where the
/// spawner will report.
pub(crate) fn command(argv: &[String]) -> (Command, Option<Report>) {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let Some(binary) = SPAWNER.get() else {
        let mut direct = Command::new(&argv[0]);
        direct.args(&argv[1..]);
        return (direct, None);
    };
    let name = format!(
        "tally-bench-{}-{}.spawned",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    );
    let report = Report {
        path: std::env::temp_dir().join(name),
    };
    let mut spawner = Command::new(binary);
    spawner.args(argv).env(REPORT_PATH_ENV, &report.path);
    (spawner, Some(report))
}

/// What the spawner wrote, read once it has ended. The file is removed when this is dropped.
pub(crate) struct Report {
    path: PathBuf,
}

impl Report {
    /// The VM's `wait4` status and usage, from a spawner that has ended; `None` when it wrote
    /// none (it was killed first), an error when it could not start the VM.
    pub(crate) fn read(&self) -> std::io::Result<Option<(libc::c_int, libc::rusage)>> {
        match std::fs::read_to_string(&self.path) {
            Ok(text) => parse(&text, &self.path).map(Some),
            Err(e) if e.kind() == ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e),
        }
    }
}

impl Drop for Report {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

fn parse(text: &str, path: &Path) -> std::io::Result<(libc::c_int, libc::rusage)> {
    let corrupt = || {
        Error::new(
            ErrorKind::InvalidData,
            format!(
                "the spawner's report {} is damaged: {text:?}",
                path.display()
            ),
        )
    };
    let mut words = text.split_whitespace();
    match words.next() {
        Some("error") => {
            let code: i32 = words
                .next()
                .and_then(|w| w.parse().ok())
                .ok_or_else(corrupt)?;
            let message: Vec<&str> = words.collect();
            let kind = Error::from_raw_os_error(code).kind();
            Err(Error::new(kind, message.join(" ")))
        }
        Some("ok") => {
            let mut numbers = words.map(|w| w.parse::<i64>().map_err(|_| corrupt()));
            let mut next = || numbers.next().unwrap_or_else(|| Err(corrupt()));
            let status = next()? as libc::c_int;
            // SAFETY: `rusage` is plain old data for which all-zero bytes are valid.
            let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
            usage.ru_maxrss = next()? as libc::c_long;
            usage.ru_utime.tv_sec = next()? as libc::time_t;
            usage.ru_utime.tv_usec = next()? as libc::suseconds_t;
            usage.ru_stime.tv_sec = next()? as libc::time_t;
            usage.ru_stime.tv_usec = next()? as libc::suseconds_t;
            Ok((status, usage))
        }
        _ => Err(corrupt()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_report_gives_status_and_usage_and_an_error_its_kind() {
        let path = Path::new("/r");
        let (status, usage) = parse("ok 768 5120 1 250000 0 1000\n", path).unwrap();
        assert_eq!((status, usage.ru_maxrss), (768, 5120));
        assert_eq!((usage.ru_utime.tv_sec, usage.ru_utime.tv_usec), (1, 250000));
        assert_eq!((usage.ru_stime.tv_sec, usage.ru_stime.tv_usec), (0, 1000));
        let e = parse("error 2 No such file or directory (os error 2)\n", path).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::NotFound);
        for damaged in ["", "ok 1 2", "ok a b c d e f", "what 1"] {
            let e = parse(damaged, path).unwrap_err();
            assert_eq!(e.kind(), ErrorKind::InvalidData, "{damaged:?}");
        }
    }
}
