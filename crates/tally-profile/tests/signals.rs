//! The triggers under real signals: accounting must balance
//! (taken = recorded + dropped) however the storm interleaves with the
//! VM's updates, and every recorded sample must be a stack the VM actually
//! published.

use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use tally_profile::*;

/// One SIGPROF per process: tests that arm triggers take turns.
static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

const METHODS: u32 = 8;

/// A fake interpreter: a recursive walk over `METHODS` methods whose
/// frames always satisfy `bci == 10 * method + k` (k < 10), so a sample
/// can be checked for being a stack that really existed. Polls the flag
/// like a VM would.
struct FakeVm {
    hot: Arc<HotState>,
    recorder: Recorder,
    drain_every: Option<u64>,
    steps: u64,
}

impl FakeVm {
    fn new(hot: Arc<HotState>, drain_every: Option<u64>) -> FakeVm {
        FakeVm {
            hot,
            recorder: Recorder::new(Header::default()),
            drain_every,
            steps: 0,
        }
    }

    fn yieldpoint(&mut self) {
        self.steps += 1;
        let f = self.hot.flag.load();
        if f != 0 {
            if f & flag::SAMPLE != 0 {
                self.hot.take_polled_sample();
            }
            if f & flag::DRAIN != 0 && self.drain_every.is_some() {
                self.recorder.drain(&self.hot);
            }
            // CBS windows are not under test here.
            self.hot.flag.clear(flag::CBS_WINDOW);
        }
        if let Some(n) = self.drain_every {
            if self.steps.is_multiple_of(n) {
                self.recorder.drain(&self.hot);
            }
        }
    }

    fn call(&mut self, m: u32, depth: u32) {
        let p = &self.hot.published;
        p.push(RawFrame::interpreted(MethodId(m), 10 * m));
        self.yieldpoint();
        for k in 0..10 {
            self.hot.published.set_top_pos(10 * m + k);
            if k % 3 == 0 {
                let old = self.hot.published.set_state(VmState::Primitive);
                std::hint::black_box(k * m);
                self.hot.published.set_state(old);
            }
            if depth < 6 && k == 5 {
                self.call((m + 1) % METHODS, depth + 1);
            }
            self.yieldpoint(); // back-edge
        }
        self.hot.published.pop();
        self.yieldpoint();
    }

    fn run_for(&mut self, d: Duration) {
        self.hot.published.set_state(VmState::Interpreting);
        let end = Instant::now() + d;
        while Instant::now() < end {
            for m in 0..METHODS {
                self.call(m, 0);
            }
        }
    }
}

fn check_samples(samples: &[Sample]) {
    for s in samples {
        assert!(
            !s.flags.contains(SampleFlags::FOREIGN_THREAD),
            "thread-directed trigger"
        );
        assert!(
            matches!(s.state, VmState::Interpreting | VmState::Primitive),
            "{s:?}"
        );
        assert_eq!(s.frames.len() as u32, s.depth);
        let mut expected_next: Option<u32> = None;
        for f in &s.frames {
            let RawFrame::Interpreted { method, bci } = *f else {
                panic!("{s:?}")
            };
            assert!(method.0 < METHODS, "{s:?}");
            assert!(bci / 10 == method.0, "torn frame {s:?}");
            if let Some(m) = expected_next {
                assert_eq!(m, method.0, "stack shape {s:?}");
            }
            // The caller of method m is m - 1 (mod METHODS), unless m is
            // an outermost call.
            expected_next = Some((method.0 + METHODS - 1) % METHODS);
            if f == s.frames.last().unwrap() {
                break;
            }
        }
    }
}

#[test]
fn immediate_sampling_balances_under_a_10khz_signal_storm() {
    let _g = serial();
    let hot = HotState::new(HotConfig {
        ring_slots: 256,
        ..HotConfig::default()
    });
    // The fake VM is interpreting from here on: a tick may land before `run_for`.
    hot.published.set_state(VmState::Interpreting);
    let sampler = Sampler::start(
        hot.clone(),
        SamplerConfig {
            trigger: Trigger::Timer(TimerClock::Monotonic),
            rate_hz: 10_000,
            mechanism: Some(Mechanism::Immediate),
            cbs: false,
        },
    )
    .unwrap();
    let mut vm = FakeVm::new(hot.clone(), Some(1000));
    vm.run_for(Duration::from_millis(1500));
    let counters = sampler.stop();
    let profile = vm.recorder.finish(&hot, None, 0);
    eprintln!("immediate, 10 kHz: {counters:?}");
    // Standard signals coalesce when the thread is descheduled, so a loaded
    // machine sees fewer than 15 000; still thousands.
    assert!(
        counters.taken >= 1000,
        "too few ticks for 10 kHz: {counters:?}"
    );
    assert!(counters.balanced(), "{counters:?}");
    assert_eq!(counters.recorded, profile.samples.len() as u64);
    check_samples(&profile.samples);
}

#[test]
fn an_undrained_ring_drops_and_reports_it() {
    let _g = serial();
    let hot = HotState::new(HotConfig {
        ring_slots: 4,
        ..HotConfig::default()
    });
    // The fake VM is interpreting from here on: a tick may land before `run_for`.
    hot.published.set_state(VmState::Interpreting);
    let sampler = Sampler::start(
        hot.clone(),
        SamplerConfig {
            trigger: Trigger::Timer(TimerClock::ThreadCpu),
            rate_hz: 10_000,
            mechanism: Some(Mechanism::Immediate),
            cbs: false,
        },
    )
    .unwrap();
    let mut vm = FakeVm::new(hot.clone(), None);
    vm.run_for(Duration::from_millis(500));
    let c = sampler.stop();
    eprintln!("undrained: {c:?}");
    assert_eq!(c.recorded, 4);
    assert!(c.dropped_full > 0 && c.balanced(), "{c:?}");
    assert_eq!(vm.recorder.drain(&hot), 4);
}

#[test]
fn polling_samples_at_yieldpoints_and_balances() {
    let _g = serial();
    let hot = HotState::new(HotConfig::default());
    // The fake VM is interpreting from here on: a tick may land before `run_for`.
    hot.published.set_state(VmState::Interpreting);
    let sampler = Sampler::start(
        hot.clone(),
        SamplerConfig {
            trigger: Trigger::Timer(TimerClock::Monotonic),
            rate_hz: 10_000,
            mechanism: Some(Mechanism::Polling),
            cbs: true,
        },
    )
    .unwrap();
    let mut vm = FakeVm::new(hot.clone(), Some(1000));
    vm.run_for(Duration::from_millis(800));
    let c = sampler.stop();
    let profile = vm.recorder.finish(&hot, None, 0);
    eprintln!("polling: {c:?}");
    assert!(c.recorded > 500 && c.balanced(), "{c:?}");
    assert!(c.cbs_ticks >= c.taken, "every tick also opens a CBS window");
    assert!(profile.samples.iter().all(|s| s.origin == Origin::Polling));
    check_samples(&profile.samples);
}

#[test]
fn setitimer_trigger_balances() {
    let _g = serial();
    let hot = HotState::new(HotConfig::default());
    // The fake VM is interpreting from here on: a tick may land before `run_for`.
    hot.published.set_state(VmState::Interpreting);
    let sampler = Sampler::start(
        hot.clone(),
        SamplerConfig {
            trigger: Trigger::Itimer,
            rate_hz: 1000,
            mechanism: Some(Mechanism::Immediate),
            cbs: false,
        },
    )
    .unwrap();
    assert_eq!(sampler.info().source, "setitimer(ITIMER_PROF)");
    let mut vm = FakeVm::new(hot.clone(), Some(1000));
    vm.run_for(Duration::from_millis(500));
    let c = sampler.stop();
    eprintln!("itimer: {c:?}");
    // Process-directed: samples may come from other threads (and are
    // flagged so), so only the accounting is checked.
    assert!(c.taken > 0 && c.balanced(), "{c:?}");
}

/// These machines have no PMU: hardware cycles must fail over to the
/// software task clock, and say so.
#[test]
fn perf_trigger_falls_back_to_software_and_reports_it() {
    let _g = serial();
    let hot = HotState::new(HotConfig::default());
    // The fake VM is interpreting from here on: a tick may land before `run_for`.
    hot.published.set_state(VmState::Interpreting);
    let sampler = Sampler::start(
        hot.clone(),
        SamplerConfig {
            trigger: Trigger::Perf {
                prefer_hardware: true,
            },
            rate_hz: 4000,
            mechanism: Some(Mechanism::Immediate),
            cbs: false,
        },
    )
    .unwrap();
    let info = sampler.info().clone();
    eprintln!("perf: {info:?}");
    if info.source.contains("hardware") {
        assert!(info.note.is_none());
    } else {
        assert_eq!(info.source, "perf_event_open: task-clock (software)");
        assert!(info
            .note
            .as_deref()
            .unwrap()
            .starts_with("hardware cycles unavailable"));
    }
    let mut vm = FakeVm::new(hot.clone(), Some(1000));
    vm.run_for(Duration::from_millis(800));
    let c = sampler.stop();
    let profile = vm.recorder.finish(&hot, None, 0);
    eprintln!("perf: {c:?}");
    assert!(c.taken >= 100 && c.balanced(), "{c:?}");
    check_samples(&profile.samples);
}

#[test]
fn only_one_sampler_owns_sigprof() {
    let _g = serial();
    let a = HotState::new(HotConfig::default());
    let b = HotState::new(HotConfig::default());
    let config = SamplerConfig {
        trigger: Trigger::Timer(TimerClock::ThreadCpu),
        rate_hz: 100,
        mechanism: Some(Mechanism::Polling),
        cbs: false,
    };
    let first = Sampler::start(a, config).unwrap();
    assert!(matches!(
        Sampler::start(b.clone(), config),
        Err(TriggerError::AlreadyActive)
    ));
    drop(first);
    let second = Sampler::start(b, config).unwrap();
    second.stop();
}
