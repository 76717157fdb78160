//! The one clock every timestamp in a profile is read from.
//!
//! `CLOCK_MONOTONIC` through `clock_gettime`, because it is
//! async-signal-safe (so the immediate sampler can stamp samples inside the
//! signal handler) and shared by all threads, so events and samples from
//! anywhere in the VM order correctly on one timeline.

/// Name recorded in the profile header so readers know what `time_ns` means.
pub const CLOCK_NAME: &str = "CLOCK_MONOTONIC";

/// Nanoseconds on the monotonic clock. Safe to call from a signal handler.
pub fn now_ns() -> u64 {
    read_ns(libc::CLOCK_MONOTONIC)
}

/// CPU time the calling thread has used, in ns. Safe to call from a signal handler (it then
/// reads the interrupted thread's, the handler's own time included).
pub fn thread_cpu_ns() -> u64 {
    read_ns(libc::CLOCK_THREAD_CPUTIME_ID)
}

/// `clock_gettime(clock)` in ns; `clock` must be one Linux always has.
#[inline(always)]
fn read_ns(clock: libc::clockid_t) -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec; both callers pass a clock that always
    // exists on Linux, and clock_gettime is async-signal-safe (POSIX).
    unsafe { libc::clock_gettime(clock, &mut ts) };
    (ts.tv_sec as u64)
        .wrapping_mul(1_000_000_000)
        .wrapping_add(ts.tv_nsec as u64)
}

/// Resolution of the clock in nanoseconds, for the header.
pub fn resolution_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: as in `read_ns`.
    unsafe { libc::clock_getres(libc::CLOCK_MONOTONIC, &mut ts) };
    (ts.tv_sec as u64) * 1_000_000_000 + ts.tv_nsec as u64
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_clock_does_not_go_backwards() {
        let a = super::now_ns();
        let b = super::now_ns();
        assert!(b >= a);
        assert!(super::resolution_ns() >= 1);
    }
}
