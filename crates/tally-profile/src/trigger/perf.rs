//! The perf_events trigger (HPM-sampling, Buytaert et al. OOPSLA 2007):
//! a counter overflow raises SIGPROF on the VM thread.
//!
//! Hardware cycles are the paper's trigger; where there is no PMU (virtual
//! machines, containers) the kernel refuses them and we fall back to the
//! software `task-clock` event, which counts the thread's CPU nanoseconds
//! and so behaves like a thread-CPU timer delivered through the same
//! overflow path. Which one was chosen is reported, never silent.
//!
//! The attribute struct is declared here (the `libc` crate has none); its
//! layout is `PERF_ATTR_SIZE_VER5` (112 bytes), which every kernel since
//! 4.1 accepts.

use std::io;

use super::signal::SIGNAL;

const PERF_TYPE_HARDWARE: u32 = 0;
const PERF_TYPE_SOFTWARE: u32 = 1;
const PERF_COUNT_HW_CPU_CYCLES: u64 = 0;
const PERF_COUNT_SW_TASK_CLOCK: u64 = 1;

const ATTR_DISABLED: u64 = 1 << 0;
const ATTR_EXCLUDE_KERNEL: u64 = 1 << 5;
const ATTR_EXCLUDE_HV: u64 = 1 << 6;
const ATTR_FREQ: u64 = 1 << 10;

const PERF_EVENT_IOC_ENABLE: libc::c_ulong = 0x2400;
const PERF_EVENT_IOC_DISABLE: libc::c_ulong = 0x2401;
const PERF_FLAG_FD_CLOEXEC: libc::c_ulong = 1 << 3;

// fcntl commands that libc does not export for glibc targets
// (asm-generic values, shared by x86-64 and aarch64).
const F_SETSIG: libc::c_int = 10;
const F_SETOWN_EX: libc::c_int = 15;
const F_OWNER_TID: libc::c_int = 0;

#[repr(C)]
#[derive(Default)]
struct PerfEventAttr {
    type_: u32,
    size: u32,
    config: u64,
    sample_period_or_freq: u64,
    sample_type: u64,
    read_format: u64,
    flags: u64,
    wakeup_events: u32,
    bp_type: u32,
    config1: u64,
    config2: u64,
    branch_sample_type: u64,
    sample_regs_user: u64,
    sample_stack_user: u32,
    clockid: i32,
    sample_regs_intr: u64,
    aux_watermark: u32,
    sample_max_stack: u16,
    reserved2: u16,
}

#[repr(C)]
struct FOwnerEx {
    type_: libc::c_int,
    pid: libc::pid_t,
}

/// Which counter drives the samples.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum PerfEvent {
    /// `PERF_COUNT_HW_CPU_CYCLES`, frequency mode at the requested rate.
    HardwareCycles,
    /// `PERF_COUNT_SW_TASK_CLOCK`, one overflow per `1/rate` s of thread
    /// CPU time.
    SoftwareTaskClock,
}

impl PerfEvent {
    pub fn name(self) -> &'static str {
        match self {
            PerfEvent::HardwareCycles => "cpu-cycles (hardware)",
            PerfEvent::SoftwareTaskClock => "task-clock (software)",
        }
    }
}

pub struct PerfCounter {
    fd: libc::c_int,
    pub event: PerfEvent,
    /// Why hardware cycles were not used, when they were wanted.
    pub fallback_reason: Option<String>,
}

fn open(event: PerfEvent, rate_hz: u32) -> io::Result<libc::c_int> {
    let mut attr = PerfEventAttr {
        size: std::mem::size_of::<PerfEventAttr>() as u32,
        flags: ATTR_DISABLED | ATTR_EXCLUDE_KERNEL | ATTR_EXCLUDE_HV,
        wakeup_events: 1,
        ..PerfEventAttr::default()
    };
    match event {
        PerfEvent::HardwareCycles => {
            attr.type_ = PERF_TYPE_HARDWARE;
            attr.config = PERF_COUNT_HW_CPU_CYCLES;
            attr.flags |= ATTR_FREQ;
            attr.sample_period_or_freq = u64::from(rate_hz.max(1));
        }
        PerfEvent::SoftwareTaskClock => {
            attr.type_ = PERF_TYPE_SOFTWARE;
            attr.config = PERF_COUNT_SW_TASK_CLOCK;
            attr.sample_period_or_freq = 1_000_000_000 / u64::from(rate_hz.max(1));
        }
    }
    // SAFETY: perf_event_open reads `attr` (a properly sized, initialised
    // repr(C) struct matching PERF_ATTR_SIZE_VER5); pid 0 / cpu -1 means
    // "this thread, any CPU"; group fd -1 means no group.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_perf_event_open,
            &attr as *const PerfEventAttr,
            0 as libc::pid_t,
            -1 as libc::c_int,
            -1 as libc::c_int,
            PERF_FLAG_FD_CLOEXEC,
        )
    };
    if fd < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(fd as libc::c_int)
    }
}

/// Routes overflow notifications on `fd` as SIGPROF to thread `tid`.
fn route_signal(fd: libc::c_int, tid: i32) -> io::Result<()> {
    let owner = FOwnerEx {
        type_: F_OWNER_TID,
        pid: tid,
    };
    // SAFETY: fcntl on a perf fd we own: set async notification, the signal
    // to send, and the owning thread (F_SETOWN_EX reads `owner`).
    unsafe {
        let fl = libc::fcntl(fd, libc::F_GETFL);
        if fl < 0
            || libc::fcntl(fd, libc::F_SETFL, fl | libc::O_ASYNC) != 0
            || libc::fcntl(fd, F_SETSIG, SIGNAL) != 0
            || libc::fcntl(fd, F_SETOWN_EX, &owner as *const FOwnerEx) != 0
        {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

impl PerfCounter {
    /// Opens hardware cycles if `prefer_hardware` and the PMU allows it,
    /// else the software task clock; aims the overflow signal at `tid`
    /// (the calling thread) and enables the counter.
    pub fn start(prefer_hardware: bool, rate_hz: u32, tid: i32) -> io::Result<PerfCounter> {
        let mut fallback_reason = None;
        let (fd, event) = match prefer_hardware.then(|| open(PerfEvent::HardwareCycles, rate_hz)) {
            Some(Ok(fd)) => (fd, PerfEvent::HardwareCycles),
            other => {
                if let Some(Err(e)) = other {
                    fallback_reason = Some(format!("hardware cycles unavailable: {e}"));
                }
                (
                    open(PerfEvent::SoftwareTaskClock, rate_hz)?,
                    PerfEvent::SoftwareTaskClock,
                )
            }
        };
        let counter = PerfCounter {
            fd,
            event,
            fallback_reason,
        };
        route_signal(fd, tid)?;
        // SAFETY: enabling the counter on the fd we own.
        if unsafe { libc::ioctl(fd, PERF_EVENT_IOC_ENABLE as _, 0) } != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(counter)
    }
}

impl Drop for PerfCounter {
    fn drop(&mut self) {
        // SAFETY: disabling and closing the fd we own, exactly once.
        unsafe {
            libc::ioctl(self.fd, PERF_EVENT_IOC_DISABLE as _, 0);
            libc::close(self.fd);
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_attribute_struct_has_the_ver5_size() {
        assert_eq!(std::mem::size_of::<super::PerfEventAttr>(), 112);
    }
}
