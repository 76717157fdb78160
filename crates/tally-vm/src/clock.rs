//! The clock behind `System>>ticks` and `System>>time`.
//!
//! Wall-clock time is what SOM VMs answer and what a program normally wants. Process CPU time
//! (`tally --cpu-clock`) is for benchmarking on a CPU shared with others: a harness's
//! iteration times then count only this process's own work, all its threads included (GC,
//! profiler), and not the time it waited while something else ran. `tally bench --lockstep`
//! relies on it to time-share one CPU between the VMs it compares.

use std::time::{Duration, Instant};

/// Which time `System>>ticks` counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ClockKind {
    /// Real time since the VM started.
    #[default]
    Wall,
    /// CPU time of the whole process (all threads) since the VM started.
    ProcessCpu,
}

/// A started clock.
#[derive(Debug)]
pub(crate) struct Clock {
    kind: ClockKind,
    wall_start: Instant,
    cpu_start: Duration,
}

impl Clock {
    pub(crate) fn start(kind: ClockKind) -> Clock {
        Clock {
            kind,
            wall_start: Instant::now(),
            cpu_start: process_cpu_time(),
        }
    }

    /// Time since the start, by this clock's kind.
    pub(crate) fn elapsed(&self) -> Duration {
        match self.kind {
            ClockKind::Wall => self.wall_start.elapsed(),
            ClockKind::ProcessCpu => process_cpu_time().saturating_sub(self.cpu_start),
        }
    }
}

/// CPU time consumed by all threads of this process.
fn process_cpu_time() -> Duration {
    cpu_time(libc::CLOCK_PROCESS_CPUTIME_ID)
}

/// CPU time consumed by the calling thread.
pub(crate) fn thread_cpu_time() -> Duration {
    cpu_time(libc::CLOCK_THREAD_CPUTIME_ID)
}

fn cpu_time(clock: libc::clockid_t) -> Duration {
    let mut t = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `t` is a live, writable timespec; the clock ids passed are constants every POSIX
    // system has. On failure (which POSIX allows only for bad ids) `t` stays zero.
    unsafe {
        libc::clock_gettime(clock, &mut t);
    }
    Duration::new(
        t.tv_sec.max(0) as u64,
        t.tv_nsec.clamp(0, 999_999_999) as u32,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cpu_clock_does_not_advance_while_sleeping_but_does_while_working() {
        crate::test_process::in_own_process(
            "clock::tests::the_cpu_clock_does_not_advance_while_sleeping_but_does_while_working",
            || {
                let clock = Clock::start(ClockKind::ProcessCpu);
                let before = clock.elapsed();
                std::thread::sleep(Duration::from_millis(200));
                let slept = clock.elapsed() - before;
                assert!(slept < Duration::from_millis(100), "{slept:?}");
                let work_start = clock.elapsed();
                let mut x = 0u64;
                let began = Instant::now();
                while began.elapsed() < Duration::from_millis(100) {
                    x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(7));
                }
                assert!(clock.elapsed() - work_start > Duration::from_millis(20));
            },
        );
    }

    #[test]
    fn the_wall_clock_advances_while_sleeping() {
        let clock = Clock::start(ClockKind::Wall);
        std::thread::sleep(Duration::from_millis(50));
        assert!(clock.elapsed() >= Duration::from_millis(50));
    }
}
