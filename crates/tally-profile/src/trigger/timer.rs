//! Timer triggers: POSIX `timer_create` aimed at the VM thread, or the
//! classic process-wide `setitimer(ITIMER_PROF)`.
//!
//! `timer_create` with `SIGEV_THREAD_ID` is the default because the signal
//! lands on the VM thread, where the published stack is exact. Its clock is
//! the *process* CPU clock, so time the VM spends waiting for GC worker
//! threads still produces ticks, and those samples carry the VM's published
//! "gc" state. `setitimer` is kept for comparison with the literature (it is
//! what Jikes RVM-era systems used); its signal may land on any thread.

use std::io;

use super::signal::SIGNAL;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TimerClock {
    /// CPU time of the whole process (default).
    ProcessCpu,
    /// CPU time of the VM thread only.
    ThreadCpu,
    /// Wall-clock time. CPU-time clocks expire on the scheduler tick, which
    /// caps them near the kernel's HZ; this one is a high-resolution timer,
    /// so it reaches rates like 10 kHz (and samples waiting time too).
    Monotonic,
}

pub enum ArmedTimer {
    Posix(libc::timer_t),
    Itimer,
}

fn interval(rate_hz: u32) -> libc::timespec {
    let ns = 1_000_000_000u64 / u64::from(rate_hz.max(1));
    libc::timespec {
        tv_sec: (ns / 1_000_000_000) as libc::time_t,
        tv_nsec: (ns % 1_000_000_000) as libc::c_long,
    }
}

pub fn arm_posix(clock: TimerClock, rate_hz: u32, tid: i32) -> io::Result<ArmedTimer> {
    let clock_id = match clock {
        TimerClock::ProcessCpu => libc::CLOCK_PROCESS_CPUTIME_ID,
        TimerClock::ThreadCpu => libc::CLOCK_THREAD_CPUTIME_ID,
        TimerClock::Monotonic => libc::CLOCK_MONOTONIC,
    };
    // SAFETY: sigevent is plain data; zeroed then filled with a valid
    // notification (signal to thread `tid`, which is the calling thread).
    // timer_create writes the new timer id into `timer`.
    let timer = unsafe {
        let mut sev: libc::sigevent = std::mem::zeroed();
        sev.sigev_notify = libc::SIGEV_THREAD_ID;
        sev.sigev_signo = SIGNAL;
        sev.sigev_notify_thread_id = tid;
        let mut timer: libc::timer_t = std::mem::zeroed();
        if libc::timer_create(clock_id, &mut sev, &mut timer) != 0 {
            return Err(io::Error::last_os_error());
        }
        timer
    };
    let spec = libc::itimerspec {
        it_interval: interval(rate_hz),
        it_value: interval(rate_hz),
    };
    // SAFETY: `timer` was just created; `spec` is a valid itimerspec.
    if unsafe { libc::timer_settime(timer, 0, &spec, std::ptr::null_mut()) } != 0 {
        let err = io::Error::last_os_error();
        // SAFETY: deleting the timer we created.
        unsafe { libc::timer_delete(timer) };
        return Err(err);
    }
    Ok(ArmedTimer::Posix(timer))
}

pub fn arm_itimer(rate_hz: u32) -> io::Result<ArmedTimer> {
    let t = interval(rate_hz);
    let tv = libc::timeval {
        tv_sec: t.tv_sec,
        tv_usec: (t.tv_nsec / 1000).max(1) as libc::suseconds_t,
    };
    let it = libc::itimerval {
        it_interval: tv,
        it_value: tv,
    };
    // SAFETY: `it` is a valid itimerval; the old value is not wanted.
    if unsafe { libc::setitimer(libc::ITIMER_PROF, &it, std::ptr::null_mut()) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(ArmedTimer::Itimer)
}

impl ArmedTimer {
    pub fn disarm(&mut self) {
        match *self {
            // SAFETY: the timer id came from timer_create and is deleted
            // exactly once (disarm is called once, from Sampler::stop).
            ArmedTimer::Posix(t) => unsafe {
                libc::timer_delete(t);
            },
            ArmedTimer::Itimer => {
                // SAFETY: a zeroed itimerval disarms ITIMER_PROF.
                unsafe {
                    let zero: libc::itimerval = std::mem::zeroed();
                    libc::setitimer(libc::ITIMER_PROF, &zero, std::ptr::null_mut());
                }
            }
        }
    }
}
