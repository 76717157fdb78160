//! A thread that keeps the sample ring empty and makes sure Ctrl-C is answered.
//!
//! A VM that checks the yieldpoint flag only where it already compares something (at calls,
//! through [`crate::TripWord`]s) runs no flag test in a loop that makes no call, so on its own
//! it would neither drain the ring nor see [`flag::STOP`] until that loop ends. The drainer
//! takes both off its hands: every period it moves the ring's samples aside (the VM collects
//! them with [`HotState::drain_into`]), and when a Ctrl-C has gone unserved for a grace
//! period it runs the VM's last resort, which writes the profile from this thread and exits.

use std::io;
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::hot::{flag, HotState};

/// What to do when Ctrl-C has waited longer than the grace period: typically claim the
/// final write ([`HotState::claim_final_write`]), write the profile so far and exit.
pub type UnservedStop = Box<dyn FnOnce() + Send>;

/// What the drainer does after each drain, on its own thread: typically append the new
/// samples and events to the streamed profile ([`crate::Recorder::flush`]), so that the VM
/// thread never writes the file while the program runs.
pub type OnPeriod = Box<dyn FnMut() + Send>;

/// How often the drainer wakes, and how long Ctrl-C may go unserved.
#[derive(Clone, Copy, Debug)]
pub struct DrainerConfig {
    /// Between drains. The default empties a 4096-slot ring long before it is half full even
    /// at 10 kHz; [`DrainerConfig::for_rate`] wakes less often at lower rates.
    pub period: Duration,
    /// How long the VM may take to reach a yieldpoint after Ctrl-C before the last resort runs.
    pub stop_grace: Duration,
}

impl Default for DrainerConfig {
    fn default() -> Self {
        DrainerConfig {
            period: Duration::from_millis(50),
            stop_grace: Duration::from_secs(1),
        }
    }
}

impl DrainerConfig {
    /// Wakes as seldom as a ring of `ring_slots` filled at `rate_hz` allows: a quarter full
    /// at the most between drains, but at least twice a second (for Ctrl-C) and at most 50
    /// times. Each wake-up is a timer interrupt and a context switch on a machine that may be
    /// running the VM thread on the same CPU, so at 250 Hz it wakes twice a second, not 20 times.
    pub fn for_rate(rate_hz: u32, ring_slots: usize) -> DrainerConfig {
        let quarter = ring_slots.max(4) as f64 / 4.0;
        let secs = (quarter / f64::from(rate_hz.max(1))).clamp(0.02, 0.5);
        DrainerConfig {
            period: Duration::from_secs_f64(secs),
            ..DrainerConfig::default()
        }
    }
}

pub struct Drainer {
    stopping: Arc<(Mutex<bool>, Condvar)>,
    thread: Option<JoinHandle<()>>,
}

impl Drainer {
    /// Starts the thread. `on_unserved_stop` runs at most once, on the drainer's thread.
    pub fn start(
        hot: Arc<HotState>,
        config: DrainerConfig,
        on_unserved_stop: Option<UnservedStop>,
    ) -> io::Result<Drainer> {
        Drainer::start_streaming(hot, config, on_unserved_stop, None)
    }

    /// [`Drainer::start`], running `on_period` after each drain.
    pub fn start_streaming(
        hot: Arc<HotState>,
        config: DrainerConfig,
        on_unserved_stop: Option<UnservedStop>,
        on_period: Option<OnPeriod>,
    ) -> io::Result<Drainer> {
        let stopping = Arc::new((Mutex::new(false), Condvar::new()));
        let signal = stopping.clone();
        let thread = std::thread::Builder::new()
            .name("tally-drainer".into())
            .spawn(move || run(&hot, config, &signal, on_unserved_stop, on_period))?;
        Ok(Drainer {
            stopping,
            thread: Some(thread),
        })
    }

    /// Stops the thread and waits for it; the ring is drained once more on the way out.
    pub fn stop(mut self) {
        self.stop_and_join();
    }

    fn stop_and_join(&mut self) {
        let (lock, wake) = &*self.stopping;
        *lock.lock().unwrap_or_else(|e| e.into_inner()) = true;
        wake.notify_all();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for Drainer {
    fn drop(&mut self) {
        self.stop_and_join();
    }
}

fn run(
    hot: &HotState,
    config: DrainerConfig,
    stopping: &(Mutex<bool>, Condvar),
    mut on_unserved_stop: Option<UnservedStop>,
    mut on_period: Option<OnPeriod>,
) {
    let (lock, wake) = stopping;
    let mut stop_seen: Option<Instant> = None;
    loop {
        {
            let stopped = lock.lock().unwrap_or_else(|e| e.into_inner());
            let (stopped, _) = wake
                .wait_timeout_while(stopped, config.period, |s| !*s)
                .unwrap_or_else(|e| e.into_inner());
            if *stopped {
                break;
            }
        }
        hot.drain_aside();
        if let Some(f) = on_period.as_mut() {
            f();
        }
        if hot.flag.load() & flag::STOP == 0 {
            stop_seen = None;
            continue;
        }
        let since = *stop_seen.get_or_insert_with(Instant::now);
        if since.elapsed() >= config.stop_grace {
            if let Some(last_resort) = on_unserved_stop.take() {
                last_resort();
            }
        }
    }
    hot.drain_aside();
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hot::{HotConfig, Mechanism};
    use crate::ids::MethodId;
    use crate::RawFrame;
    use std::sync::atomic::{AtomicBool, Ordering};

    fn quick() -> DrainerConfig {
        DrainerConfig {
            period: Duration::from_millis(5),
            stop_grace: Duration::from_millis(30),
        }
    }

    #[test]
    fn the_drainer_empties_the_ring_and_keeps_the_order() {
        let hot = HotState::new(HotConfig {
            ring_slots: 8,
            ..HotConfig::default()
        });
        hot.set_mode(Some(Mechanism::Immediate), false);
        hot.published.push(RawFrame::interpreted(MethodId(1), 0));
        let drainer = Drainer::start(hot.clone(), quick(), None).unwrap();
        // Far more samples than slots: without the drainer most would be dropped.
        for _ in 0..40 {
            for _ in 0..4 {
                hot.on_tick();
            }
            std::thread::sleep(Duration::from_millis(15));
        }
        drainer.stop();
        let mut out = Vec::new();
        assert_eq!(hot.drain_into(&mut out), 160);
        let c = hot.counters();
        assert_eq!((c.taken, c.recorded), (160, 160), "{c:?}");
        assert!(out.windows(2).all(|w| w[0].time_ns <= w[1].time_ns));
    }

    #[test]
    fn an_unserved_stop_runs_the_last_resort_once_and_a_served_one_never() {
        let hot = HotState::new(HotConfig::default());
        let ran = Arc::new(AtomicBool::new(false));
        let flag_it = ran.clone();
        let drainer = Drainer::start(
            hot.clone(),
            quick(),
            Some(Box::new(move || flag_it.store(true, Ordering::SeqCst))),
        )
        .unwrap();
        // Served within the grace period: nothing happens.
        hot.flag.raise(flag::STOP);
        std::thread::sleep(Duration::from_millis(10));
        hot.flag.clear(flag::STOP);
        std::thread::sleep(Duration::from_millis(60));
        assert!(!ran.load(Ordering::SeqCst));
        // Left pending: the last resort runs.
        hot.flag.raise(flag::STOP);
        let deadline = Instant::now() + Duration::from_secs(5);
        while !ran.load(Ordering::SeqCst) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(5));
        }
        assert!(ran.load(Ordering::SeqCst));
        drainer.stop();
    }

    #[test]
    fn the_period_follows_the_rate_within_bounds() {
        let at = |hz| DrainerConfig::for_rate(hz, 4096).period;
        assert_eq!(at(250), Duration::from_millis(500));
        assert_eq!(at(10_000), Duration::from_secs_f64(0.1024));
        assert_eq!(at(1_000_000), Duration::from_millis(20));
        assert_eq!(
            DrainerConfig::for_rate(0, 0).period,
            Duration::from_millis(500)
        );
    }

    #[test]
    fn the_final_write_is_claimed_once() {
        let hot = HotState::new(HotConfig::default());
        assert!(hot.claim_final_write());
        assert!(!hot.claim_final_write());
    }
}
