//! Triggers: what makes a tick happen (Buytaert et al.'s "trigger" axis).
//! A [`Sampler`] arms one and routes its SIGPROF to a [`HotState`]; what
//! a tick does there (poll or immediate, CBS window) is the "mechanism"
//! axis, configured on the same call.

mod auto;
mod perf;
mod signal;
mod timer;

use std::fmt;
use std::io;
use std::sync::Arc;

pub use auto::{auto_trigger, kernel_tick_hz};
pub use perf::PerfEvent;
pub use signal::INTERRUPTED_PC_AVAILABLE;
pub use timer::TimerClock;

use crate::hot::published::current_tid;
use crate::hot::{HotState, Mechanism, SampleCounters};

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Trigger {
    /// `timer_create` aimed at the calling (VM) thread.
    Timer(TimerClock),
    /// `setitimer(ITIMER_PROF)`: process-wide, lands on any thread.
    Itimer,
    /// perf_events counter overflow on the calling thread; hardware cycles
    /// if `prefer_hardware` and a PMU exists, else software task-clock.
    Perf { prefer_hardware: bool },
}

impl Trigger {
    pub fn name(self) -> &'static str {
        match self {
            // A wall-clock profile must not be read as CPU time, so its name says so.
            Trigger::Timer(TimerClock::Monotonic) => "timer-wall",
            Trigger::Timer(_) => "timer",
            Trigger::Itimer => "itimer",
            Trigger::Perf { .. } => "perf",
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct SamplerConfig {
    pub trigger: Trigger,
    /// Ticks per second (of CPU time).
    pub rate_hz: u32,
    /// How ticks take method samples; `None` for CBS-only runs.
    pub mechanism: Option<Mechanism>,
    /// Whether ticks open counter-based-sampling windows.
    pub cbs: bool,
}

#[derive(Debug)]
pub enum TriggerError {
    /// Another sampler owns SIGPROF in this process.
    AlreadyActive,
    Install(io::Error),
    Arm {
        trigger: &'static str,
        error: io::Error,
    },
}

impl fmt::Display for TriggerError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TriggerError::AlreadyActive => {
                write!(f, "another sampler is already running in this process")
            }
            TriggerError::Install(e) => write!(f, "cannot install the SIGPROF handler: {e}"),
            TriggerError::Arm { trigger, error } => {
                write!(f, "cannot start the {trigger} trigger: {error}")
            }
        }
    }
}

impl std::error::Error for TriggerError {}

enum Armed {
    Timer(timer::ArmedTimer),
    Perf(perf::PerfCounter),
}

/// What actually drives the samples, for the profile header and the
/// user (the perf trigger may have fallen back to software).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TriggerInfo {
    pub trigger: &'static str,
    /// e.g. "CLOCK_PROCESS_CPUTIME_ID", "task-clock (software)".
    pub source: String,
    pub rate_hz: u32,
    pub note: Option<String>,
}

/// An armed trigger. Dropping it (or [`Sampler::stop`]) disarms the
/// trigger and waits out any handler still running.
pub struct Sampler {
    hot: Arc<HotState>,
    armed: Option<Armed>,
    info: TriggerInfo,
}

impl Sampler {
    /// Arms `config.trigger` so that its ticks reach `hot`. Call on the VM
    /// thread: thread-directed triggers aim at the caller, and the
    /// published state is bound to it.
    pub fn start(hot: Arc<HotState>, config: SamplerConfig) -> Result<Sampler, TriggerError> {
        signal::ensure_installed().map_err(TriggerError::Install)?;
        hot.published.bind_current_thread();
        hot.set_mode(config.mechanism, config.cbs);
        if !signal::activate(&hot) {
            return Err(TriggerError::AlreadyActive);
        }
        let tid = current_tid();
        let armed = match config.trigger {
            Trigger::Timer(clock) => timer::arm_posix(clock, config.rate_hz, tid).map(|t| {
                let source = match clock {
                    TimerClock::ProcessCpu => "timer_create(CLOCK_PROCESS_CPUTIME_ID)",
                    TimerClock::ThreadCpu => "timer_create(CLOCK_THREAD_CPUTIME_ID)",
                    TimerClock::Monotonic => "timer_create(CLOCK_MONOTONIC)",
                };
                (Armed::Timer(t), source.to_string(), None)
            }),
            Trigger::Itimer => timer::arm_itimer(config.rate_hz)
                .map(|t| (Armed::Timer(t), "setitimer(ITIMER_PROF)".to_string(), None)),
            Trigger::Perf { prefer_hardware } => {
                perf::PerfCounter::start(prefer_hardware, config.rate_hz, tid).map(|p| {
                    let source = format!("perf_event_open: {}", p.event.name());
                    let note = p.fallback_reason.clone();
                    (Armed::Perf(p), source, note)
                })
            }
        };
        match armed {
            Ok((armed, source, note)) => Ok(Sampler {
                hot,
                armed: Some(armed),
                info: TriggerInfo {
                    trigger: config.trigger.name(),
                    source,
                    rate_hz: config.rate_hz,
                    note,
                },
            }),
            Err(error) => {
                signal::deactivate();
                hot.set_mode(None, false);
                Err(TriggerError::Arm {
                    trigger: config.trigger.name(),
                    error,
                })
            }
        }
    }

    pub fn info(&self) -> &TriggerInfo {
        &self.info
    }

    pub fn hot(&self) -> &Arc<HotState> {
        &self.hot
    }

    /// Disarms the trigger, settles the counters and returns them.
    pub fn stop(mut self) -> SampleCounters {
        self.shutdown();
        self.hot.counters()
    }

    fn shutdown(&mut self) {
        if let Some(armed) = self.armed.take() {
            match armed {
                Armed::Timer(mut t) => t.disarm(),
                Armed::Perf(p) => drop(p),
            }
            signal::deactivate();
            self.hot.set_mode(None, false);
            self.hot.settle();
        }
    }
}

impl Drop for Sampler {
    fn drop(&mut self) {
        self.shutdown();
    }
}
