//! The hot path: everything the VM touches at yieldpoints and everything a
//! signal handler touches. Allocation-free and lock-free after
//! construction; the rest of the crate is offline.
//!
//! [`HotState`] bundles the pieces a trigger's signal handler needs (flag,
//! published state, ring, counters). The VM creates it once, keeps an
//! `Arc` to it, and hands a clone to [`crate::Sampler::start`].

pub mod cbs;
pub mod code_ranges;
pub mod exact;
pub mod flag;
pub mod published;
pub mod ring;

use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, AtomicU8, Ordering};
use std::sync::{Arc, Mutex};

use crate::clock;
use crate::ids::{RawFrame, VmState};
use crate::sample::{Origin, Sample, SampleFlags};
use flag::YieldpointFlag;
use published::{current_tid, PublishedState, StateCell};
use ring::{PushError, SampleRing, SlotHeader};

/// How method samples are taken (Buytaert et al. OOPSLA 2007).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Mechanism {
    /// The tick raises [`flag::SAMPLE`]; the VM records at its next
    /// yieldpoint ([`HotState::take_polled_sample`]).
    Polling,
    /// The tick records the sample itself from [`PublishedState`].
    Immediate,
}

impl Mechanism {
    pub fn name(self) -> &'static str {
        match self {
            Mechanism::Polling => "polling",
            Mechanism::Immediate => "immediate",
        }
    }
}

/// Sizes fixed at construction, because the handler cannot allocate.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HotConfig {
    /// Shadow-stack slots (rounded up to a power of two).
    pub stack_capacity: usize,
    /// Samples the ring holds between drains.
    pub ring_slots: usize,
    /// Frames kept per sample (innermost first). The handler copies only the frames a stack
    /// has, so a high limit costs nothing for shallow stacks; the ring is sized by it
    /// ([`SampleRing::new`]).
    pub max_frames: usize,
}

/// Frames kept per sample unless the VM asks otherwise: above AWFY's deepest stacks (Havlak's
/// depth-first search reaches a few hundred frames) and a 2,000-deep recursion. Not more,
/// because the handler copies every kept frame at every tick and the recorder stores it: a
/// stack thousands deep sampled at 10 kHz by a wall-clock timer makes ticks in an unoptimised
/// build slower than their period, and the pacing ([`SampleCounters::dropped_slow`]) skips
/// ticks until the program has had as much time as the samples.
pub const DEFAULT_SAMPLE_DEPTH: usize = 2048;

impl Default for HotConfig {
    fn default() -> Self {
        HotConfig {
            stack_capacity: 1024,
            ring_slots: 4096,
            max_frames: DEFAULT_SAMPLE_DEPTH,
        }
    }
}

/// The sample accounting the acceptance criteria ask for:
/// `taken = recorded + dropped` once the run has been settled.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SampleCounters {
    /// Trigger ticks that asked for a method sample.
    pub taken: u64,
    /// Samples written to the ring.
    pub recorded: u64,
    /// The ring was full (the VM did not drain often enough).
    pub dropped_full: u64,
    /// Another producer held the ring.
    pub dropped_busy: u64,
    /// Polling: a tick arrived while the previous one was still pending,
    /// or was still pending at the end of the run.
    pub dropped_coalesced: u64,
    /// Timer ticks that opened (or extended) a CBS window.
    pub cbs_ticks: u64,
    /// Expiries of a CPU-time timer that the kernel merged into a later signal (overruns):
    /// ticks that never came, so samples never taken. The timer is checked only on kernel
    /// ticks that find the VM thread running, so this grows when it shares its CPU.
    pub ticks_merged: u64,
    /// Ticks whose sample was skipped because taking samples had used more of the VM
    /// thread's CPU time than the program, beyond a small credit ([`HotState`]'s pacing): at
    /// a rate too high for the stack's depth (an unoptimised build, a deep recursion) taking
    /// samples would otherwise leave the program no time at all.
    pub dropped_slow: u64,
}

impl SampleCounters {
    pub fn dropped(&self) -> u64 {
        self.dropped_full + self.dropped_busy + self.dropped_coalesced + self.dropped_slow
    }

    /// Whether every taken sample is accounted for.
    pub fn balanced(&self) -> bool {
        self.taken == self.recorded + self.dropped()
    }
}

#[derive(Default)]
struct Counters {
    taken: AtomicU64,
    recorded: AtomicU64,
    dropped_full: AtomicU64,
    dropped_busy: AtomicU64,
    dropped_coalesced: AtomicU64,
    cbs_ticks: AtomicU64,
    ticks_merged: AtomicU64,
    dropped_slow: AtomicU64,
}

/// What a sample must have taken to take (ns) before the next may be skipped to let the
/// program run ([`HotState`]'s pacing).
pub const PACED_ABOVE_NS: u64 = 20_000;

/// How much more of the thread's CPU time (ns) samples may take than the program before the
/// pacing skips one: enough for a few hundred slow samples, far less than a second.
pub const PACING_CREDIT_NS: i64 = 10_000_000;

const MODE_POLLING: u8 = 1;
const MODE_IMMEDIATE: u8 = 2;
const MODE_CBS: u8 = 4;

pub struct HotState {
    /// `'static` so a VM can give it a fixed address its interpreter loads without any
    /// indirection ([`HotState::with_statics`]).
    pub flag: &'static YieldpointFlag,
    pub published: PublishedState,
    pub ring: SampleRing,
    counters: Counters,
    mode: AtomicU8,
    /// Samples taken off the ring by a thread other than the VM's ([`crate::Drainer`]), in
    /// order. Its lock is also the ring's consumer lock: the ring has one consumer at a time.
    drained: Mutex<Vec<Sample>>,
    /// Whether someone has started writing the final profile (see [`HotState::claim_final_write`]).
    final_write: AtomicBool,
    /// When the last sample was taken, and the program's time not yet spent on samples
    /// (negative: what samples took beyond it), in ns of the VM thread's CPU time, for the
    /// pacing in [`HotState::paced`].
    last_sample_end_ns: AtomicU64,
    pacing_credit_ns: AtomicI64,
}

impl HotState {
    pub fn new(config: HotConfig) -> Arc<HotState> {
        // One small flag per HotState for the life of the process: states are made once per
        // run (and a few times in tests).
        HotState::with_statics(
            config,
            Box::leak(Box::new(YieldpointFlag::new())),
            Box::leak(Box::new(StateCell::new())),
        )
    }

    /// A state whose yieldpoint flag and VM-state cell are `static`s of the VM, so that the
    /// check compiled into every yieldpoint is one load from a fixed address and a state
    /// change one store. Both are reset here; a VM must not run two profiled states on the
    /// same statics at a time.
    pub fn with_statics(
        config: HotConfig,
        flag: &'static YieldpointFlag,
        state: &'static StateCell,
    ) -> Arc<HotState> {
        flag.clear(u8::MAX);
        Arc::new(HotState {
            flag,
            published: PublishedState::with_state_cell(config.stack_capacity, state),
            ring: SampleRing::new(config.ring_slots, config.max_frames),
            counters: Counters::default(),
            mode: AtomicU8::new(0),
            drained: Mutex::new(Vec::new()),
            final_write: AtomicBool::new(false),
            last_sample_end_ns: AtomicU64::new(0),
            pacing_credit_ns: AtomicI64::new(PACING_CREDIT_NS),
        })
    }

    /// Moves every sample on the ring, after those a drainer took off it before, to `out`, in
    /// order; answers how many. Any thread may call it (it takes the consumer lock).
    pub fn drain_into(&self, out: &mut Vec<Sample>) -> usize {
        let mut drained = self.drained.lock().unwrap_or_else(|e| e.into_inner());
        let earlier = drained.len();
        out.append(&mut drained);
        earlier + self.ring.drain(|s| out.push(s))
    }

    /// Empties the ring into the drainer's buffer, for [`HotState::drain_into`] to collect.
    pub(crate) fn drain_aside(&self) -> usize {
        let mut drained = self.drained.lock().unwrap_or_else(|e| e.into_inner());
        self.ring.drain(|s| drained.push(s))
    }

    /// Claims the writing of the run's final profile: true for the first caller only. The VM
    /// thread claims it when it finishes; a [`crate::Drainer`] whose Ctrl-C went unserved
    /// claims it to write the profile itself, and the loser must leave the file alone.
    pub fn claim_final_write(&self) -> bool {
        !self.final_write.swap(true, Ordering::SeqCst)
    }

    /// What a tick does: take method samples by `mechanism` (or none), and
    /// open CBS windows or not. Set by [`crate::Sampler::start`]; may also
    /// be set directly to drive the state machine without signals (tests,
    /// or a VM with its own timer thread).
    pub fn set_mode(&self, mechanism: Option<Mechanism>, cbs: bool) {
        let m = match mechanism {
            None => 0,
            Some(Mechanism::Polling) => MODE_POLLING,
            Some(Mechanism::Immediate) => MODE_IMMEDIATE,
        } | if cbs { MODE_CBS } else { 0 };
        self.mode.store(m, Ordering::Release);
    }

    /// Counts timer expiries the kernel merged into the signal being handled
    /// ([`SampleCounters::ticks_merged`]). Async-signal-safe: one atomic add.
    #[inline]
    pub fn note_merged_ticks(&self, n: u64) {
        self.counters.ticks_merged.fetch_add(n, Ordering::Relaxed);
    }

    /// One trigger tick. This is the body of the signal handler:
    /// async-signal-safe (atomics, `clock_gettime`, `gettid`; no
    /// allocation, no locks).
    #[inline]
    pub fn on_tick(&self) {
        self.on_tick_at(None)
    }

    /// [`HotState::on_tick`] for a trigger that knows where the thread was interrupted, so
    /// that immediate samples can tell native code from interpretation
    /// ([`PublishedState::state_at`]).
    #[inline]
    pub fn on_tick_at(&self, pc: Option<usize>) {
        let mode = self.mode.load(Ordering::Acquire);
        // A window samples the calls that follow its tick, so windows must open in proportion
        // to the program's own running time: a tick while the VM compiles would open one on
        // the calls after a compile, the first runs of new code, and over-represent warm-up.
        if mode & MODE_CBS != 0 && self.published.state() != VmState::Compiling {
            self.counters.cbs_ticks.fetch_add(1, Ordering::Relaxed);
            self.flag.raise(flag::CBS_WINDOW);
        }
        if mode & MODE_IMMEDIATE != 0 {
            self.counters.taken.fetch_add(1, Ordering::Relaxed);
            let foreign = self.on_foreign_thread();
            if foreign {
                // The pacing's clock is the thread's own: the VM thread's alone is paced.
                self.capture(Origin::Immediate, pc, true);
            } else {
                self.paced(|| self.capture(Origin::Immediate, pc, false));
            }
            if self.ring.half_full() {
                self.flag.raise(flag::DRAIN);
            }
        } else if mode & MODE_POLLING != 0 {
            self.counters.taken.fetch_add(1, Ordering::Relaxed);
            if self.flag.raise(flag::SAMPLE) & flag::SAMPLE != 0 {
                self.counters
                    .dropped_coalesced
                    .fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    /// Polling mechanism: call at a yieldpoint whose flag load had
    /// [`flag::SAMPLE`] set. Records the published stack; returns whether
    /// a sample was pending.
    #[inline]
    pub fn take_polled_sample(&self) -> bool {
        if self.flag.clear(flag::SAMPLE) & flag::SAMPLE == 0 {
            return false;
        }
        self.paced(|| self.capture(Origin::Polling, None, self.on_foreign_thread()));
        self.after_polled_push();
        true
    }

    /// Polling for a VM that keeps no [`PublishedState`]: it passes its
    /// stack (innermost first) and state itself.
    pub fn take_polled_sample_from(
        &self,
        state: VmState,
        frames: impl Iterator<Item = RawFrame>,
    ) -> bool {
        if self.flag.clear(flag::SAMPLE) & flag::SAMPLE == 0 {
            return false;
        }
        self.paced(|| self.push_frames(state, frames));
        self.after_polled_push();
        true
    }

    fn push_frames(&self, state: VmState, frames: impl Iterator<Item = RawFrame>) {
        let result = self.ring.try_push(|w| {
            let mut n = 0;
            let mut depth = 0u32;
            for f in frames {
                w.set_frame(n, f.pack());
                n = (n + 1).min(w.max_frames());
                depth += 1;
            }
            SlotHeader {
                time_ns: clock::now_ns(),
                state,
                origin: Origin::Polling,
                flags: if depth as usize > n {
                    SampleFlags::TRUNCATED
                } else {
                    SampleFlags::NONE
                },
                frames: n,
                depth,
            }
        });
        self.account(result);
    }

    /// Takes a sample with `take` unless taking samples has used more of the thread's time
    /// than the program, beyond a credit of [`PACING_CREDIT_NS`]; then counts it as
    /// [`SampleCounters::dropped_slow`]. Without it a tick slower than its period (a
    /// wall-clock timer at 10 kHz copying thousands of frames in an unoptimised build) would
    /// starve the program for ever, a signal pending again as each handler returns. The
    /// credit absorbs single slow samples (a page fault, an interrupt), so only a lasting
    /// imbalance skips any, and a skipped tick waits only until the program has run off the
    /// debt. Both are the thread's CPU time, so a sample that was preempted does not count as
    /// slow. Call it on the VM thread only (the clock is the calling thread's).
    /// Async-signal-safe: two clock readings and relaxed atomics.
    ///
    /// Samples that take under [`PACED_ABOVE_NS`] are free: at the highest rate a trigger
    /// reaches (10 kHz) they take under a fifth of the time, and ticks driven back to back
    /// without a signal (tests, a VM's own timer) stay whole.
    #[inline]
    fn paced(&self, take: impl FnOnce()) {
        let start = clock::thread_cpu_ns();
        let since = start.saturating_sub(self.last_sample_end_ns.load(Ordering::Relaxed));
        let credit = self
            .pacing_credit_ns
            .load(Ordering::Relaxed)
            .saturating_add(i64::try_from(since).unwrap_or(i64::MAX))
            .min(PACING_CREDIT_NS);
        if credit < 0 {
            self.counters.dropped_slow.fetch_add(1, Ordering::Relaxed);
            self.pacing_credit_ns.store(credit, Ordering::Relaxed);
            self.last_sample_end_ns.store(start, Ordering::Relaxed);
            return;
        }
        take();
        let end = clock::thread_cpu_ns();
        let cost = end.saturating_sub(start);
        let debit = if cost > PACED_ABOVE_NS {
            i64::try_from(cost).unwrap_or(i64::MAX)
        } else {
            0
        };
        self.pacing_credit_ns
            .store(credit.saturating_sub(debit), Ordering::Relaxed);
        self.last_sample_end_ns.store(end, Ordering::Relaxed);
    }

    fn after_polled_push(&self) {
        if self.ring.half_full() {
            self.flag.raise(flag::DRAIN);
        }
    }

    /// Whether the calling thread is not the one whose stack is published (a process-wide
    /// timer's signal can land on any thread).
    #[inline]
    fn on_foreign_thread(&self) -> bool {
        let owner = self.published.owner_tid();
        owner != 0 && owner != current_tid()
    }

    #[inline]
    fn capture(&self, origin: Origin, pc: Option<usize>, foreign: bool) {
        let published = &self.published;
        let result = self.ring.try_push(|w| {
            let pc_here = if foreign { None } else { pc };
            let (n, depth) =
                published.snapshot(|i, word| w.set_frame(i, word), w.max_frames(), pc_here);
            let mut flags = SampleFlags::NONE;
            if depth as usize > n {
                flags = flags.with(SampleFlags::TRUNCATED);
            }
            if foreign {
                flags = flags.with(SampleFlags::FOREIGN_THREAD);
            }
            SlotHeader {
                time_ns: clock::now_ns(),
                // Another thread's program counter says nothing about the VM thread's.
                state: published.state_at(if foreign { None } else { pc }),
                origin,
                flags,
                frames: n,
                depth,
            }
        });
        self.account(result);
    }

    #[inline]
    fn account(&self, result: Result<(), PushError>) {
        let c = &self.counters;
        match result {
            Ok(()) => c.recorded.fetch_add(1, Ordering::Relaxed),
            Err(PushError::Full) => c.dropped_full.fetch_add(1, Ordering::Relaxed),
            Err(PushError::Busy) => c.dropped_busy.fetch_add(1, Ordering::Relaxed),
        };
    }

    /// Ends the run's accounting: a polling request still pending will
    /// never be served, so it counts as dropped. Call after the trigger
    /// has stopped.
    pub fn settle(&self) {
        if self.flag.clear(flag::SAMPLE) & flag::SAMPLE != 0 {
            self.counters
                .dropped_coalesced
                .fetch_add(1, Ordering::Relaxed);
        }
    }

    pub fn counters(&self) -> SampleCounters {
        let c = &self.counters;
        SampleCounters {
            taken: c.taken.load(Ordering::Acquire),
            recorded: c.recorded.load(Ordering::Acquire),
            dropped_full: c.dropped_full.load(Ordering::Acquire),
            dropped_busy: c.dropped_busy.load(Ordering::Acquire),
            dropped_coalesced: c.dropped_coalesced.load(Ordering::Acquire),
            cbs_ticks: c.cbs_ticks.load(Ordering::Acquire),
            ticks_merged: c.ticks_merged.load(Ordering::Acquire),
            dropped_slow: c.dropped_slow.load(Ordering::Acquire),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::MethodId;

    #[test]
    fn ticks_while_compiling_open_no_cbs_window() {
        let hot = HotState::new(HotConfig::default());
        hot.set_mode(None, true);
        hot.published.set_state(VmState::Compiling);
        hot.on_tick();
        assert_eq!(hot.flag.load() & flag::CBS_WINDOW, 0);
        hot.published.set_state(VmState::Interpreting);
        hot.on_tick();
        assert_ne!(hot.flag.load() & flag::CBS_WINDOW, 0);
        assert_eq!(hot.counters().cbs_ticks, 1);
    }

    #[test]
    fn polling_ticks_coalesce_and_settle() {
        let hot = HotState::new(HotConfig::default());
        hot.set_mode(Some(Mechanism::Polling), false);
        hot.published.push(RawFrame::interpreted(MethodId(1), 0));
        hot.on_tick();
        hot.on_tick(); // coalesces with the first
        assert!(hot.take_polled_sample());
        assert!(!hot.take_polled_sample(), "served once");
        hot.on_tick(); // never served
        hot.settle();
        let c = hot.counters();
        assert_eq!((c.taken, c.recorded, c.dropped_coalesced), (3, 1, 2));
        assert!(c.balanced());
    }

    #[test]
    fn a_tick_while_samples_owe_the_program_time_is_skipped_and_counted() {
        for mechanism in [Mechanism::Immediate, Mechanism::Polling] {
            let hot = HotState::new(HotConfig::default());
            hot.set_mode(Some(mechanism), false);
            hot.published.bind_current_thread();
            hot.published.push(RawFrame::interpreted(MethodId(4), 2));
            let tick = || {
                hot.on_tick();
                if mechanism == Mechanism::Polling {
                    assert!(hot.take_polled_sample());
                }
            };
            // As if samples had taken 1 ms more than the program has run, the last ending
            // just now.
            let debt = 1_000_000;
            hot.pacing_credit_ns.store(-debt, Ordering::Relaxed);
            hot.last_sample_end_ns
                .store(clock::thread_cpu_ns(), Ordering::Relaxed);
            tick();
            let c = hot.counters();
            assert_eq!(
                (c.taken, c.recorded, c.dropped_slow),
                (1, 0, 1),
                "{mechanism:?}"
            );
            // Once the program has run that long, the next tick samples.
            let start = clock::thread_cpu_ns();
            while clock::thread_cpu_ns() - start < 2 * debt as u64 {
                std::hint::spin_loop();
            }
            tick();
            let c = hot.counters();
            assert_eq!(
                (c.taken, c.recorded, c.dropped_slow),
                (2, 1, 1),
                "{mechanism:?}"
            );
            assert!(c.balanced());
            // With the credit whole, fast samples are free, however soon they come (an
            // occasional slow one, a page fault on a fresh ring slot, comes out of the credit).
            hot.pacing_credit_ns
                .store(PACING_CREDIT_NS, Ordering::Relaxed);
            for _ in 0..1000 {
                tick();
            }
            assert_eq!(
                hot.counters().recorded,
                1001,
                "{mechanism:?} {:?}",
                hot.counters()
            );
        }
    }

    #[test]
    fn immediate_ticks_record_the_published_stack() {
        let hot = HotState::new(HotConfig {
            ring_slots: 2,
            ..HotConfig::default()
        });
        hot.set_mode(Some(Mechanism::Immediate), true);
        hot.published.bind_current_thread();
        hot.published.set_state(VmState::Primitive);
        hot.published.push(RawFrame::interpreted(MethodId(4), 2));
        for _ in 0..3 {
            hot.on_tick();
        }
        let c = hot.counters();
        assert_eq!(
            (c.taken, c.recorded, c.dropped_full, c.cbs_ticks),
            (3, 2, 1, 3)
        );
        assert!(hot.flag.load() & flag::DRAIN != 0);
        assert!(hot.flag.load() & flag::CBS_WINDOW != 0);
        hot.ring.drain(|s| {
            assert_eq!(s.state, VmState::Primitive);
            assert_eq!(s.origin, Origin::Immediate);
            assert_eq!(s.flags, SampleFlags::NONE);
            assert_eq!(s.frames, vec![RawFrame::interpreted(MethodId(4), 2)]);
        });
    }

    #[test]
    fn explicit_stacks_can_be_polled() {
        let hot = HotState::new(HotConfig {
            max_frames: 2,
            ..HotConfig::default()
        });
        hot.set_mode(Some(Mechanism::Polling), false);
        hot.on_tick();
        let frames = (0..3).map(|m| RawFrame::interpreted(MethodId(m), 0));
        assert!(hot.take_polled_sample_from(VmState::Interpreting, frames));
        hot.ring.drain(|s| {
            assert_eq!(s.frames.len(), 2);
            assert_eq!(s.depth, 3);
            assert!(s.flags.contains(SampleFlags::TRUNCATED));
        });
    }
}
