//! The CPU a lockstep run takes, kept to itself.
//!
//! A lockstep run pins itself and its VMs to one CPU. Two runs started at once both took the
//! last CPU, so each one's VMs took turns with the other's as well: both ran half as fast, and
//! a turn found its caches filled by a stranger. Now a run claims its CPU with an exclusive
//! lock on a file for that CPU (`flock`, through `File::try_lock`), held for the whole run. The
//! kernel drops the lock when the process ends, however it ends, so no stale claim survives a
//! crash. A run takes the last CPU it may use that no other run holds (the first CPUs usually
//! take more interrupts), and waits when every one is held.

use std::fs::{File, OpenOptions, TryLockError};
use std::io::{self, Read, Seek, Write};
use std::path::{Path, PathBuf};

/// A CPU claimed for one lockstep run; the claim lasts as long as this value.
#[derive(Debug)]
pub struct CpuClaim {
    pub cpu: usize,
    _lock: File,
}

/// The CPUs this process may run on, in increasing order.
pub fn allowed_cpus() -> io::Result<Vec<usize>> {
    // SAFETY: `cpu_set_t` is a plain bit array for which all-zero bytes are the empty set.
    let mut allowed: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    let size = std::mem::size_of::<libc::cpu_set_t>();
    // SAFETY: `allowed` is a live, writable `cpu_set_t` of `size` bytes; pid 0 is this thread.
    if unsafe { libc::sched_getaffinity(0, size, &mut allowed) } != 0 {
        return Err(io::Error::last_os_error());
    }
    let cpus: Vec<usize> = (0..libc::CPU_SETSIZE as usize)
        // SAFETY: `cpu` is below CPU_SETSIZE, the number of bits in `allowed`.
        .filter(|&cpu| unsafe { libc::CPU_ISSET(cpu, &allowed) })
        .collect();
    if cpus.is_empty() {
        return Err(io::Error::other("this process may run on no CPU"));
    }
    Ok(cpus)
}

/// Pins this thread, and so every process it starts from now on, to `cpu`.
pub fn pin_to(cpu: usize) -> io::Result<()> {
    // SAFETY: as above, all-zero bytes are the empty set.
    let mut only: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: the caller's `cpu` comes from `allowed_cpus`, so it is below CPU_SETSIZE; `only`
    // is a live `cpu_set_t`.
    unsafe { libc::CPU_SET(cpu, &mut only) };
    let size = std::mem::size_of::<libc::cpu_set_t>();
    // SAFETY: `only` is a live `cpu_set_t` of `size` bytes; pid 0 is this thread, the one that
    // starts the VMs, which inherit its affinity.
    if unsafe { libc::sched_setaffinity(0, size, &only) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// The file whose lock stands for `cpu`.
pub fn lock_path(lock_dir: &Path, cpu: usize) -> PathBuf {
    lock_dir.join(format!("tally-bench-lockstep-cpu{cpu}.lock"))
}

/// Claims the last of `cpus` that no other run holds. When all are held, calls `waiting` with
/// the CPU it will wait for and what its lock file says of the holder, then waits for it.
pub fn claim(
    lock_dir: &Path,
    cpus: &[usize],
    waiting: impl FnOnce(usize, &str),
) -> io::Result<CpuClaim> {
    let Some(&last) = cpus.last() else {
        return Err(io::Error::other("no CPU to claim"));
    };
    for &cpu in cpus.iter().rev() {
        let file = open_lock(lock_dir, cpu)?;
        match file.try_lock() {
            Ok(()) => return Ok(held(cpu, file)),
            Err(TryLockError::WouldBlock) => continue,
            Err(TryLockError::Error(e)) => return Err(e),
        }
    }
    let mut file = open_lock(lock_dir, last)?;
    let mut holder = String::new();
    // Best effort: the holder may not have written its line yet.
    let _ = file.read_to_string(&mut holder);
    waiting(last, holder.trim());
    file.lock()?;
    Ok(held(last, file))
}

fn open_lock(lock_dir: &Path, cpu: usize) -> io::Result<File> {
    let path = lock_path(lock_dir, cpu);
    OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(&path)
        // Another user's lock file: a read-only descriptor locks just as well.
        .or_else(|_| File::open(&path))
        .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", path.display())))
}

/// Says who holds the claim, for a run that has to wait for it.
fn held(cpu: usize, mut file: File) -> CpuClaim {
    let line = format!("pid {}\n", std::process::id());
    // Best effort: a read-only lock file keeps the previous holder's line.
    let _ = file
        .set_len(0)
        .and_then(|()| file.rewind())
        .and_then(|()| file.write_all(line.as_bytes()));
    CpuClaim { cpu, _lock: file }
}

/// Claims a CPU in the system's temporary directory and pins this thread to it.
pub fn claim_and_pin(quiet: bool) -> io::Result<CpuClaim> {
    let cpus = allowed_cpus()?;
    let claim = claim(&std::env::temp_dir(), &cpus, |cpu, holder| {
        if !quiet {
            let holder = if holder.is_empty() {
                "another run"
            } else {
                holder
            };
            eprintln!(
                "tally bench: --lockstep: every CPU this run may use is taken by other lockstep runs; waiting for CPU {cpu} ({holder})"
            );
        }
    })?;
    pin_to(claim.cpu)?;
    Ok(claim)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc;
    use std::time::Duration;

    #[test]
    fn runs_take_different_cpus_last_first() {
        let dir = tempfile::tempdir().unwrap();
        let a = claim(dir.path(), &[0, 1, 2], |_, _| panic!("must not wait")).unwrap();
        let b = claim(dir.path(), &[0, 1, 2], |_, _| panic!("must not wait")).unwrap();
        assert_eq!((a.cpu, b.cpu), (2, 1));
        let line = std::fs::read_to_string(lock_path(dir.path(), 2)).unwrap();
        assert_eq!(line, format!("pid {}\n", std::process::id()));
        // A claim ended is free again.
        drop(a);
        let c = claim(dir.path(), &[0, 1, 2], |_, _| panic!("must not wait")).unwrap();
        assert_eq!(c.cpu, 2);
    }

    #[test]
    fn a_run_waits_while_every_cpu_is_held() {
        let dir = tempfile::tempdir().unwrap();
        let first = claim(dir.path(), &[3], |_, _| panic!("must not wait")).unwrap();
        let (told, heard) = mpsc::channel();
        let path = dir.path().to_path_buf();
        let second = std::thread::spawn(move || {
            claim(&path, &[3], |cpu, holder| {
                told.send((cpu, holder.to_string())).unwrap()
            })
            .unwrap()
            .cpu
        });
        let (cpu, holder) = heard.recv_timeout(Duration::from_secs(10)).unwrap();
        assert_eq!((cpu, holder), (3, format!("pid {}", std::process::id())));
        std::thread::sleep(Duration::from_millis(100));
        assert!(!second.is_finished(), "the second run must wait");
        drop(first);
        assert_eq!(second.join().unwrap(), 3);
    }

    #[test]
    fn the_allowed_cpus_include_the_one_this_thread_is_on() {
        let cpus = allowed_cpus().unwrap();
        // SAFETY: sched_getcpu has no preconditions.
        let now = unsafe { libc::sched_getcpu() };
        assert!(cpus.contains(&(now as usize)), "{now} not in {cpus:?}");
    }
}
