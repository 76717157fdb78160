//! Wiring the VM-agnostic profiler (`tally-profile`) into the interpreter.
//!
//! Every observer feeds from the same hooks: the prologue (every call, also of primitives and
//! frameless trivial methods), the epilogue (every return), loop back-edges, GC, and primitive
//! calls where a sample cannot tell them by its program counter. The interpreter's only cost
//! is one load of the yieldpoint flag at each of these places (Arnold & Grove's overloaded
//! flag): exhaustive counting keeps a bit raised for the whole run, timer ticks raise bits for
//! CBS windows and polled samples, and everything else happens out of line. Immediate samples
//! read the frame stack in place (`FrameStack::stack_view`), so they add nothing to calls at
//! all, and tell primitive time from interpretation by the program counter they interrupted
//! (`interpreter_code`), so they add nothing to primitive calls either. Each profile runs the
//! dispatch loop with the fewest flag tests that serves it ([`Dispatch`]): none without a
//! profiler or with one that only takes immediate samples, frameless sends alone for CBS. A
//! drain thread does what those loops cannot: empty the ring and answer Ctrl-C inside a loop
//! that makes no call.

use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard};

use tally_controller::CallGraphSource;
use tally_profile::trigger::{Sampler, SamplerConfig, Trigger};
use tally_profile::{
    flag, install_sigint_flush, CallEdge, CallGraph, Cbs, CbsConfig, ClassId, Drainer,
    DrainerConfig, EventKind, ExactCounts, Header, HotConfig, HotState, LineEntry, Mechanism,
    MethodId, Recorder, SamplerSettings, UnservedStop, VmState,
};

use crate::bytecode::CodeId;
use crate::frames::FrameStack;
use crate::{Vm, VmError};

/// The yieldpoint flag of this process's VM: a `static`, so the check at every call, return
/// and loop back-edge is one load from a fixed address. Never raised unless a profiler runs.
pub(crate) static YIELDPOINT: tally_profile::YieldpointFlag = tally_profile::YieldpointFlag::new();

/// What this process's VM is doing, for samples: a `static` for the same reason, since on
/// targets where the signal handler cannot read the interrupted program counter it is set
/// around every primitive call while immediate samples are taken.
pub(crate) static VM_STATE: tally_profile::StateCell = tally_profile::StateCell::new();

/// Which dispatch loop runs the program, fixed when the VM is made: the cheapest one that
/// serves what the profile asked for, so that a profile costs no more than that.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Dispatch {
    /// No flag tests: no profiler, or one that only takes samples in the signal handler. A
    /// raised flag still trips the depth checks of frame pushes, so ring drains and Ctrl-C
    /// are served at the next call that gets a frame; between those the drain thread empties
    /// the ring and answers Ctrl-C (`tally_profile::Drainer`). The same machine code as a
    /// build without the hooks.
    Plain,
    /// Counter-based sampling: flag tests at frameless sends (primitives, trivial methods)
    /// and tripped returns too, since a window must see every method entry and these are the
    /// entries that push no frame. Nothing in a loop body that makes no call is tested; the
    /// drain thread serves ring and Ctrl-C there, as for `Plain`.
    ///
    /// Those tests are needed only inside windows, so this loop runs only there (the code
    /// duplication of Arnold & Ryder, PLDI 2001): between windows the `Plain` loop runs. A
    /// tick trips the next frame push, whose slow path hands over to this loop; the hook that
    /// closes the window hands back, at once or at the next call (`Vm::sync_loop_handoff`).
    /// A window thus opens at the first call with a frame after its tick, as Arnold &
    /// Grove's open at the first prologue yieldpoint.
    Entries,
    /// `Entries`, and flag tests at back-edges and around primitive calls: a polled sample
    /// must be served inside a loop, and where the handler cannot read the program counter
    /// primitive calls publish their state. `--count-calls` runs it too, for the back-edges
    /// it counts.
    Hooks,
    /// `Hooks` and exact bytecode counts: exhaustive profiling.
    Counting,
    /// An instrumented run (`crate::instrument`): every instruction reported before it runs.
    Instrumented,
}

/// What a dispatch loop tests and counts, as a type: one per [`Dispatch`] variant, so the
/// loop is compiled once per mode and a mode's unused tests are not in its code at all.
pub(crate) trait LoopMode {
    /// Exact bytecode counts (exhaustive profiling).
    const COUNT_BYTECODES: bool;
    /// Flag tests at frameless sends and tripped returns; also the hook bits of the methods
    /// the loop enters and leaves (`Code::hooks`: GC hints, phases), which is why a run that
    /// hooks methods never runs the plain loop.
    const ENTRY_HOOKS: bool;
    /// Flag tests at back-edges and around primitive calls.
    const LOOP_HOOKS: bool;
    /// Whether frames may have compiled code (a code generator is set): the loop then tests
    /// each frame it switches to, and runs compiled ones (`Vm::run_compiled`). Off, the
    /// interpreter carries no such test.
    const RUNS_COMPILED: bool = false;
    /// Every instruction reported to the run's instrument (`Vm::instrument_op`).
    const INSTRUMENTED: bool = false;
}

/// Loop mode `L` with compiled frames run too (`LoopMode::RUNS_COMPILED`).
pub(crate) struct WithCompiled<L>(std::marker::PhantomData<L>);

impl<L: LoopMode> LoopMode for WithCompiled<L> {
    const COUNT_BYTECODES: bool = L::COUNT_BYTECODES;
    const ENTRY_HOOKS: bool = L::ENTRY_HOOKS;
    const LOOP_HOOKS: bool = L::LOOP_HOOKS;
    const RUNS_COMPILED: bool = true;
}

/// [`Dispatch::Plain`].
pub(crate) struct PlainLoop;
/// [`Dispatch::Entries`].
pub(crate) struct EntriesLoop;
/// [`Dispatch::Hooks`].
pub(crate) struct HooksLoop;
/// [`Dispatch::Counting`].
pub(crate) struct CountingLoop;
/// [`Dispatch::Instrumented`].
pub(crate) struct InstrumentedLoop;

impl LoopMode for PlainLoop {
    const COUNT_BYTECODES: bool = false;
    const ENTRY_HOOKS: bool = false;
    const LOOP_HOOKS: bool = false;
}
impl LoopMode for EntriesLoop {
    const COUNT_BYTECODES: bool = false;
    const ENTRY_HOOKS: bool = true;
    const LOOP_HOOKS: bool = false;
}
impl LoopMode for HooksLoop {
    const COUNT_BYTECODES: bool = false;
    const ENTRY_HOOKS: bool = true;
    const LOOP_HOOKS: bool = true;
}
impl LoopMode for CountingLoop {
    const COUNT_BYTECODES: bool = true;
    const ENTRY_HOOKS: bool = true;
    const LOOP_HOOKS: bool = true;
}
impl LoopMode for InstrumentedLoop {
    const COUNT_BYTECODES: bool = false;
    const ENTRY_HOOKS: bool = false;
    const LOOP_HOOKS: bool = false;
    const INSTRUMENTED: bool = true;
}

impl Dispatch {
    pub(crate) fn for_profile(
        options: Option<&ProfileOptions>,
        publishes_primitive_calls: bool,
    ) -> Dispatch {
        let Some(o) = options else {
            return Dispatch::Plain;
        };
        let polls = o.trigger.is_some() && o.mechanism == Mechanism::Polling;
        let counts_loops = o.count_calls && o.output.is_some();
        let counts_edges = o.call_graph == Some(CallGraphSource::Exhaustive);
        if o.exhaustive {
            Dispatch::Counting
        } else if polls || publishes_primitive_calls || counts_loops || counts_edges {
            Dispatch::Hooks
        } else if o.cbs.is_some() {
            Dispatch::Entries
        } else {
            Dispatch::Plain
        }
    }
}

#[derive(Debug, Clone)]
pub struct ProfileOptions {
    /// Where the profile goes; `None` records no profile: the samples only feed the
    /// adaptive optimizer (`Vm::set_adaptive`).
    pub output: Option<PathBuf>,
    /// Whether the profile may replace an existing file (`--force`), also one that another
    /// run wrote while this one ran.
    pub if_exists: tally_profile::tally_output::IfExists,
    /// The sample trigger; `None` takes no method samples (CBS or exhaustive only).
    pub trigger: Option<Trigger>,
    /// Why `trigger` was chosen when the user left the choice to Tally (`--sampler auto`),
    /// for the profile header.
    pub trigger_choice: Option<String>,
    pub mechanism: Mechanism,
    pub rate_hz: u32,
    /// Frames kept per sample, innermost first; deeper stacks lose their outer frames and are
    /// flagged truncated (reports put what is kept under a `[truncated: N frames]` root).
    pub sample_depth: usize,
    /// Counter-based sampling of call edges (Arnold & Grove): stride and samples per window.
    pub cbs: Option<CbsConfig>,
    /// Exact call and bytecode counts: the ground truth sampled profiles are judged against.
    pub exhaustive: bool,
    /// Count every call and loop back-edge per method per tier (`TierCallCounter`), for the
    /// amortization analysis: recorded as `TierCallCounts` events with the counting's own
    /// estimated time.
    pub count_calls: bool,
    /// What feeds the inliner's call graph as the program runs (`Vm::inline_call_graph`):
    /// CBS's edges, the two innermost frames of the method samples, or every call counted
    /// (the exhaustive graph, which needs the entry hooks everywhere); `None` keeps none.
    pub call_graph: Option<CallGraphSource>,
    /// The command line, for the profile's header.
    pub command_line: Vec<String>,
    /// Option names and values as given, for the header.
    pub settings: Vec<(String, String)>,
    /// Test-only: credit every sample to its caller (`Recorder::credit_callers`).
    pub credit_callers: bool,
}

impl ProfileOptions {
    /// Samples for the adaptive optimizer alone, `rate_hz` a second: only the innermost
    /// frame (all it reads), taken in the signal handler (which costs the interpreter
    /// nothing between samples), nothing recorded.
    pub fn for_controller(rate_hz: u32) -> ProfileOptions {
        let (trigger, why) = tally_profile::trigger::auto_trigger(rate_hz);
        ProfileOptions {
            output: None,
            if_exists: tally_profile::tally_output::IfExists::Refuse,
            trigger: Some(trigger),
            trigger_choice: Some(why),
            mechanism: Mechanism::Immediate,
            rate_hz,
            sample_depth: 1,
            cbs: None,
            exhaustive: false,
            count_calls: false,
            call_graph: None,
            command_line: Vec::new(),
            settings: Vec::new(),
            credit_callers: false,
        }
    }

    /// The same, also feeding the inliner's call graph from `source`: `cbs`'s windows for
    /// [`CallGraphSource::Cbs`], two frames per sample for [`CallGraphSource::TimerSamples`].
    pub fn for_controller_with_graph(
        rate_hz: u32,
        source: Option<CallGraphSource>,
        cbs: CbsConfig,
    ) -> ProfileOptions {
        let mut o = ProfileOptions::for_controller(rate_hz);
        o.call_graph = source;
        match source {
            Some(CallGraphSource::Cbs) => o.cbs = Some(cbs),
            Some(CallGraphSource::TimerSamples) => o.sample_depth = 2,
            Some(CallGraphSource::Exhaustive) | None => {}
        }
        o
    }
}

/// Locks the recorder whatever became of an earlier holder: a recorder only ever gains
/// whole entries, so one left by a panic is still consistent.
fn lock(recorder: &Mutex<Recorder>) -> MutexGuard<'_, Recorder> {
    recorder.lock().unwrap_or_else(|e| e.into_inner())
}

/// Reads each batch of samples as it arrives, on the drain thread.
pub(crate) type SampleObserver = Box<dyn FnMut(&[tally_profile::Sample]) + Send>;

pub(crate) struct Profiler {
    pub hot: Arc<HotState>,
    /// Shared with the GC listener, and with the drainer's last resort, which may write the
    /// profile from its own thread (`Profiler::write_on_unserved_stop`).
    pub recorder: Arc<Mutex<Recorder>>,
    pub cbs: Option<Cbs>,
    pub exact: Option<ExactCounts>,
    /// The inliner's call graph as samples fill it (`ProfileOptions::call_graph`); CBS's
    /// graph is the recorder's, an exhaustive one `exact`'s edges.
    pub call_graph: Option<Arc<Mutex<CallGraph>>>,
    sampler: Option<Sampler>,
    /// Empties the ring off the VM thread and answers a Ctrl-C the interpreter does not reach.
    drainer: Option<Drainer>,
    _sigint: Option<tally_profile::sigint::SigintGuard>,
    /// `None`: no profile is recorded (the samples only feed `observer`).
    output: Option<PathBuf>,
    options: ProfileOptions,
    /// Who else reads the samples as they arrive (the adaptive controller), on the drain
    /// thread: the same samples the profile keeps.
    observer: Option<SampleObserver>,
    /// How often the observer wants samples, at the longest.
    observer_period: Option<std::time::Duration>,
    /// Set when the program was interrupted (SIGINT) and must stop at the next yieldpoint.
    pub interrupted: bool,
    /// Set once the main class is loaded and about to run: a run that never got there (no
    /// such file, a syntax error) leaves no profile, and an existing one in place.
    pub program_started: bool,
    /// Methods whose bytecode listing the profile has (`Vm::profile_announce_bytecodes`).
    bytecodes_announced: Mutex<rustc_hash::FxHashSet<CodeId>>,
    /// Last, so it is dropped after `sampler` and `_sigint`.
    _trips: TripsAttached,
}

/// Detaches the frame stack's trip words from the flag when the profiler goes.
struct TripsAttached(&'static tally_profile::YieldpointFlag);

impl Drop for TripsAttached {
    fn drop(&mut self) {
        self.0.detach_all();
    }
}

impl Profiler {
    pub fn new(options: &ProfileOptions, frames: &FrameStack) -> Result<Profiler, VmError> {
        let config = HotConfig {
            max_frames: options.sample_depth,
            ..HotConfig::default()
        };
        let hot = HotState::with_statics(config, &YIELDPOINT, &VM_STATE);
        // SAFETY: the frame stack is reserved once and never moves; the VM drops its profiler
        // (which stops the sampler) before its frames (`Vm`'s field order).
        if unsafe { hot.published.use_stack_view(frames.stack_view()) }.is_err() {
            return Err(VmError::Fatal(
                "the profiler's stack view was already set".into(),
            ));
        }
        // SAFETY: as for the view; `TripsAttached`, the profiler's last field, detaches them
        // after the sampler and the SIGINT handler (which raise the flag) are gone.
        unsafe { frames.attach_to(hot.flag) }.map_err(VmError::Fatal)?;
        let trips = TripsAttached(hot.flag);
        // Immediate samples then tell primitives from interpretation by where the signal
        // interrupted the thread, so primitive calls publish nothing.
        if tally_profile::INTERRUPTED_PC_AVAILABLE {
            if let Some(code) = crate::interpreter::interpreter_code() {
                hot.published.set_interpreter_code(code);
            }
        }
        let counts_edges = options.call_graph == Some(CallGraphSource::Exhaustive);
        if options.exhaustive || counts_edges {
            hot.flag.raise(flag::EXACT);
        }
        let header = Header {
            vm_name: "tally".into(),
            vm_version: env!("CARGO_PKG_VERSION").into(),
            program: options.command_line.first().cloned().unwrap_or_default(),
            args: options.command_line.iter().skip(1).cloned().collect(),
            options: options.settings.clone(),
            sampler: SamplerSettings {
                trigger: options.trigger.map(|t| t.name()).unwrap_or("none").into(),
                mechanism: if options.trigger.is_some() {
                    options.mechanism.name()
                } else {
                    "none"
                }
                .into(),
                rate_hz: options.rate_hz,
                cbs: options.cbs,
                exhaustive: options.exhaustive,
                ring_slots: HotConfig::default().ring_slots as u32,
                max_frames: hot.ring.max_frames() as u32,
                ..SamplerSettings::default()
            },
            ..Header::default()
        };
        let mut recorder = Recorder::new(header);
        if options.credit_callers {
            recorder.credit_callers();
        }
        let recorder = Arc::new(Mutex::new(recorder));
        hot.published.bind_current_thread();
        // Without a profile to save, Ctrl-C keeps its ordinary meaning.
        let sigint = match options.output {
            Some(_) => install_sigint_flush(&hot).ok(),
            None => None,
        };
        Ok(Profiler {
            hot,
            recorder,
            cbs: options.cbs.map(Cbs::new),
            exact: (options.exhaustive || counts_edges).then(ExactCounts::new),
            call_graph: (options.call_graph == Some(CallGraphSource::TimerSamples))
                .then(Arc::default),
            sampler: None,
            drainer: None,
            _sigint: sigint,
            output: options.output.clone(),
            options: options.clone(),
            observer: None,
            observer_period: None,
            interrupted: false,
            program_started: false,
            bytecodes_announced: Mutex::default(),
            _trips: trips,
        })
    }

    /// Whether a profile is recorded (else the samples only feed the observer).
    pub fn records(&self) -> bool {
        self.output.is_some()
    }

    /// The options the profiler was made with.
    pub fn options(&self) -> &ProfileOptions {
        &self.options
    }

    /// Hands every batch of samples to `observer` as well, on the drain thread, which then
    /// wakes every `period` at least. Set before [`Profiler::start_sampling`].
    pub fn observe_samples(&mut self, observer: SampleObserver, period: std::time::Duration) {
        self.observer = Some(observer);
        self.observer_period = Some(period);
    }

    /// Starts the drain thread and the trigger; called once the VM is ready to run the program.
    pub fn start_sampling(&mut self) -> Result<(), VmError> {
        let options = self.options.clone();
        self.hot.published.set_state(VmState::Interpreting);
        self.start_trigger(&options)?;
        // The header is complete now (the trigger has said what it is): the file starts.
        let stream = match &self.output {
            Some(output) => Some(
                self.recorder()
                    .stream_to(output, options.if_exists)
                    .map_err(|e| VmError::Output(format!("tally: {e}")))?
                    .to_path_buf(),
            ),
            None => None,
        };
        let mut config = DrainerConfig::for_rate(options.rate_hz, HotConfig::default().ring_slots);
        if let Some(period) = self.observer_period {
            config.period = config.period.min(period);
        }
        let last_resort = self.write_on_unserved_stop();
        let drainer = Drainer::start_streaming(
            self.hot.clone(),
            config,
            Some(last_resort),
            Some(self.stream_on_drain(stream)),
        )
        .map_err(|e| VmError::Fatal(format!("cannot start the profiler's drain thread: {e}")))?;
        self.drainer = Some(drainer);
        Ok(())
    }

    /// What the drainer does every period: append the new samples and events to `stream`, so
    /// that a killed run keeps all but its last period. On the drainer's thread, so the VM
    /// thread does no more than before; a write that fails is said once, and tried again
    /// every period and at the end.
    ///
    /// The observer then gets the samples that arrived: those the recorder took (also any the
    /// VM thread drained into it), or, with no profile recorded, the ring's, which are then
    /// dropped.
    fn stream_on_drain(&mut self, stream: Option<PathBuf>) -> tally_profile::OnPeriod {
        let hot = self.hot.clone();
        let recorder = self.recorder.clone();
        let mut observer = self.observer.take();
        let mut observed = 0;
        let mut scratch = Vec::new();
        Box::new(move || match &stream {
            Some(stream) => {
                let mut r = lock(&recorder);
                if let Err(e) = r.flush(&hot) {
                    crate::error::say!(
                        "tally: cannot stream the profile to {}: {e}; trying again as the run goes and at its end",
                        stream.display()
                    );
                }
                if let Some(observe) = observer.as_mut() {
                    let samples = r.samples();
                    observe(&samples[observed.min(samples.len())..]);
                    observed = samples.len();
                }
            }
            None => {
                hot.drain_into(&mut scratch);
                if let Some(observe) = observer.as_mut() {
                    observe(&scratch);
                }
                scratch.clear();
            }
        })
    }

    /// Starts the sample trigger (or the CBS ticks) and records what it is in the header.
    fn start_trigger(&mut self, options: &ProfileOptions) -> Result<(), VmError> {
        // CBS alone still needs ticks to open its windows; they come from the trigger the
        // user's `auto` would pick for method samples at the same rate.
        let (trigger, choice) = match options.trigger {
            Some(t) => (t, options.trigger_choice.clone()),
            None if options.cbs.is_some() => {
                let (t, why) = tally_profile::trigger::auto_trigger(options.rate_hz);
                (t, Some(format!("CBS ticks: {why}")))
            }
            None => return Ok(()),
        };
        let config = SamplerConfig {
            trigger,
            rate_hz: options.rate_hz,
            mechanism: options.trigger.map(|_| options.mechanism),
            cbs: options.cbs.is_some(),
        };
        // perf_events may be forbidden (perf_event_paranoid, containers): fall back to the
        // thread CPU-time timer and say so in the profile rather than refusing to profile.
        let (sampler, fallback_note) = match Sampler::start(self.hot.clone(), config) {
            Ok(s) => (s, None),
            Err(e) if matches!(trigger, Trigger::Perf { .. }) => {
                let fallback = SamplerConfig {
                    trigger: Trigger::Timer(tally_profile::trigger::TimerClock::ThreadCpu),
                    ..config
                };
                let s = Sampler::start(self.hot.clone(), fallback).map_err(|e2| {
                    VmError::Fatal(format!("cannot start the profiler: perf_events failed ({e}) and so did the timer ({e2})"))
                })?;
                (s, Some(format!("perf_events unavailable ({e}); sampled with the thread CPU-time timer instead")))
            }
            Err(e) => {
                return Err(VmError::Fatal(format!(
                    "cannot start the profiler's {} trigger: {e}",
                    trigger.name()
                )));
            }
        };
        {
            let info = sampler.info();
            let mut r = self.recorder();
            let h = &mut r.header_mut().sampler;
            h.trigger = info.trigger.to_string();
            h.trigger_source = info.source.clone();
            h.trigger_note = [choice, fallback_note.or_else(|| info.note.clone())]
                .into_iter()
                .flatten()
                .collect::<Vec<_>>()
                .join("; ");
        }
        self.sampler = Some(sampler);
        Ok(())
    }

    /// The recorder, for the VM thread. A poisoned lock means the drainer's last resort
    /// panicked mid-write; the recorder itself is still whole.
    pub fn recorder(&self) -> MutexGuard<'_, Recorder> {
        lock(&self.recorder)
    }

    /// What the drainer does when Ctrl-C has gone unserved: the interpreter is in a loop that
    /// makes no call (the loop without flag tests only sees the flag at calls), or in a long
    /// primitive. It writes the profile so far from the drainer's thread and exits as an
    /// interrupted run does; the program's buffered output is not flushed.
    fn write_on_unserved_stop(&self) -> UnservedStop {
        let hot = self.hot.clone();
        let recorder = self.recorder.clone();
        let output = self.output.clone();
        Box::new(move || {
            if !hot.claim_final_write() {
                return; // the VM thread got there first
            }
            let code = interrupted_exit_code();
            let Some(output) = output else {
                std::process::exit(code);
            };
            let mut r = lock(&recorder);
            let profile = r.snapshot(&hot, code);
            match r.write_final(&profile, &output) {
                Ok(()) => crate::error::say!(
                    "\ntally: interrupted, and the program reached no call within a second; profile written to {} (see `tally report {}`)",
                    output.display(),
                    output.display()
                ),
                Err(e) => crate::error::say!("\ntally: interrupted; {e}"),
            }
            std::process::exit(code);
        })
    }

    /// Stops sampling and writes the profile (whole or not at all); answers `None`, writing
    /// nothing and leaving any existing file alone, when the program never started.
    pub fn finish(mut self, exit_code: i32) -> Result<Option<PathBuf>, VmError> {
        if !self.hot.claim_final_write() {
            // The drainer's last resort is writing the profile and will end the process.
            loop {
                std::thread::park();
            }
        }
        if let Some(s) = self.sampler.take() {
            s.stop();
        }
        if let Some(d) = self.drainer.take() {
            d.stop();
        }
        if let Some(cbs) = self.cbs.as_mut() {
            let mut r = lock(&self.recorder);
            cbs.finish(|e, w| r.record_edge(e, w));
        }
        self.hot.settle();
        // The VM clears its GC listener first, so the recorder has one owner again.
        let recorder = Arc::try_unwrap(self.recorder)
            .map(|m| m.into_inner().unwrap_or_else(|e| e.into_inner()))
            .map_err(|_| VmError::Fatal("the profile recorder is still in use".into()))?;
        let Some(output) = self.output.take().filter(|_| self.program_started) else {
            let mut recorder = recorder;
            recorder.discard();
            return Ok(None);
        };
        recorder
            .finish_to_file(&self.hot, self.exact.take(), exit_code, &output)
            .map_err(|e| VmError::Output(format!("tally: {e}")))?;
        Ok(Some(output))
    }
}

/// What one call count costs (`TierCallCounter::count`: a load, an add and a store, plus
/// the interpreter's test), measured once by timing a million of them: the amortization
/// analysis takes counts × this out of the run's time.
pub(crate) fn call_count_cost_ns() -> f64 {
    static COST: std::sync::OnceLock<f64> = std::sync::OnceLock::new();
    *COST.get_or_init(|| {
        const N: u32 = 1_000_000;
        let counter = crate::jit::TierCallCounter::default();
        let on = std::hint::black_box(true);
        let start = std::time::Instant::now();
        for i in 0..N {
            if std::hint::black_box(on) {
                std::hint::black_box(&counter).count((i & 1) as usize);
            }
        }
        start.elapsed().as_nanos() as f64 / f64::from(N)
    })
}

/// The exit status of a run stopped by a signal: 128 + its number, as a shell reports it
/// (SIGINT's 2 when none was recorded).
pub(crate) fn interrupted_exit_code() -> i32 {
    128 + tally_profile::stop_signal().unwrap_or(2)
}

impl Vm {
    /// Re-arms the frame stack's bounds if no bit of the flag is up: the slow paths they
    /// send calls and returns to call this when they find nothing to serve, since a raise
    /// whose bit the VM thread served between its `fetch_or` and its trips leaves them
    /// tripped (`YieldpointFlag::rearm_if_idle`). The VM thread only.
    #[inline]
    pub(crate) fn rearm_idle_bounds(&self) {
        if cfg!(feature = "profiling") && self.rt.frames.bounds_tripped() {
            YIELDPOINT.rearm_if_idle();
        }
    }

    /// The yieldpoint flag as the interpreter sees it: always 0 in builds without the
    /// `profiling` feature, so every hook disappears from the interpreter.
    #[inline(always)]
    pub(crate) fn yieldpoint_flag(&self) -> u8 {
        if cfg!(feature = "profiling") {
            YIELDPOINT.load()
        } else {
            0
        }
    }

    /// The yieldpoint flag where loop mode `M` tests it at entries (frameless sends, tripped
    /// returns): a constant 0 in the loops that do not.
    #[inline(always)]
    pub(crate) fn entry_flag<M: LoopMode>(&self) -> u8 {
        if M::ENTRY_HOOKS {
            self.yieldpoint_flag()
        } else {
            0
        }
    }

    /// The yieldpoint flag where loop mode `M` tests it in loops (back-edges): a constant 0 in
    /// the loops that do not.
    #[inline(always)]
    pub(crate) fn loop_flag<M: LoopMode>(&self) -> u8 {
        // Loops that run compiled code test it too: the adaptive optimizer raises it when
        // code was installed that a running loop may move into.
        if M::LOOP_HOOKS || M::RUNS_COMPILED {
            self.yieldpoint_flag()
        } else {
            0
        }
    }

    /// The dispatch loop to run from here: for counter-based sampling without other hooks,
    /// the one with entry hooks only while a window is open or its tick pending, the plain
    /// one otherwise (see [`Dispatch::Entries`]).
    #[inline(always)]
    pub(crate) fn running_dispatch(&self) -> Dispatch {
        match self.dispatch() {
            Dispatch::Entries if !self.cbs_window_wanted() && self.rt.hooked_methods.is_none() => {
                Dispatch::Plain
            }
            d => d,
        }
    }

    /// Whether the running loop is not the one [`Vm::running_dispatch`] would pick now.
    /// Asked only on slow paths, and false outside a loop (nothing would catch the switch).
    #[inline(always)]
    pub(crate) fn loop_switch_due(&self) -> bool {
        self.dispatch() == Dispatch::Entries
            && self
                .running_loop
                .is_some_and(|running| running != self.running_dispatch())
    }

    #[inline(always)]
    fn cbs_window_wanted(&self) -> bool {
        self.yieldpoint_flag() & flag::CBS_WINDOW != 0
    }

    /// The dispatch loop to run: always the plain one in builds without the `profiling`
    /// feature, so that they have that loop alone.
    #[inline(always)]
    pub(crate) fn dispatch(&self) -> Dispatch {
        if cfg!(feature = "profiling") {
            self.dispatch
        } else {
            Dispatch::Plain
        }
    }

    /// The prologue, out of line: a call of `callee` from the top frame (whose `ip` is saved),
    /// about to get its frame or to run in place (primitives, trivial methods).
    #[cold]
    #[inline(never)]
    pub(crate) fn profile_prologue(&mut self, callee: CodeId, f: u8) -> Result<(), VmError> {
        let Some(p) = self.profiler.as_deref_mut() else {
            return Ok(());
        };
        // The innermost activation making the call: the top frame's, or one its compiled
        // code runs inlined.
        let frames = &self.rt.frames;
        let caller = frames.last().map(|fr| {
            let (code, ip) = frames
                .inlined_at(frames.len() - 1)
                .first()
                .copied()
                .unwrap_or((fr.code, fr.ip));
            (MethodId(code), ip.saturating_sub(1))
        });
        if f & flag::EXACT != 0 {
            if let Some(exact) = p.exact.as_mut() {
                exact.on_call(caller, MethodId(callee));
            }
        }
        if f & flag::CBS_WINDOW != 0 {
            if let Some(cbs) = p.cbs.as_mut() {
                if cbs.on_method_entry(f, p.hot.flag) {
                    let edge = caller.map(|(caller, callsite)| CallEdge {
                        caller,
                        callsite,
                        callee: MethodId(callee),
                    });
                    let mut recorder = None;
                    cbs.keep(edge, |e, w| {
                        recorder
                            .get_or_insert_with(|| lock(&p.recorder))
                            .record_edge(e, w)
                    });
                }
            }
        }
        self.sync_loop_handoff();
        if f & flag::ALL_YIELDPOINTS != 0 {
            return self.profile_yieldpoint(f);
        }
        Ok(())
    }

    /// Raises [`flag::HANDOFF`] while the running loop is not the one wanted, lowers it
    /// once they agree. A window opens and closes on prologues, and not every prologue is
    /// followed by a point where the loop may switch (a super send, `perform:`, a nested
    /// loop returning into an outer one): the raised flag sends the next call to one that
    /// is, instead of leaving the loop with entry hooks running until the next tick.
    #[inline]
    pub(crate) fn sync_loop_handoff(&self) {
        if self.dispatch() != Dispatch::Entries {
            return;
        }
        if self.loop_switch_due() {
            YIELDPOINT.raise(flag::HANDOFF);
        } else if self.yieldpoint_flag() & flag::HANDOFF != 0 {
            YIELDPOINT.clear(flag::HANDOFF);
        }
    }

    /// The work behind a raised flag at any yieldpoint (prologue, epilogue, back-edge), out
    /// of line. The top frame's `ip` is saved, so a polled sample sees the right position.
    #[cold]
    #[inline(never)]
    pub(crate) fn profile_yieldpoint(&mut self, f: u8) -> Result<(), VmError> {
        if f & flag::CONTROLLER != 0 {
            YIELDPOINT.clear(flag::CONTROLLER);
            self.serve_controller();
        }
        let Some(p) = self.profiler.as_deref_mut() else {
            return Ok(());
        };
        if f & flag::SAMPLE != 0 {
            p.hot.take_polled_sample();
        }
        if f & flag::DRAIN != 0 {
            if p.records() {
                p.hot.flag.clear(flag::DRAIN);
                p.recorder().drain(&p.hot);
            } else {
                // The drain thread takes the samples to their observer.
                p.hot.flag.clear(flag::DRAIN);
            }
        }
        if f & flag::STOP != 0 {
            p.hot.flag.clear(flag::STOP);
            p.interrupted = true;
            return Err(VmError::Interrupted);
        }
        Ok(())
    }

    /// Marks what the VM is doing (a primitive, GC …) for samples; answers the previous state.
    /// The profiler's published state reads `VM_STATE`, so this writes the cell directly.
    #[inline]
    pub(crate) fn profile_state(&self, state: VmState) -> Option<VmState> {
        self.profiler.is_some().then(|| VM_STATE.set(state))
    }

    /// Whether primitive calls publish the "primitive" state for samples (see
    /// `Vm::publishes_primitive_calls`). False at compile time in builds without the
    /// `profiling` feature.
    #[inline(always)]
    pub(crate) fn publishes_states(&self) -> bool {
        cfg!(feature = "profiling") && self.publishes_primitive_calls
    }

    #[inline]
    pub(crate) fn profile_bytecodes(&mut self, code: CodeId, n: u64) {
        if let Some(exact) = self.profiler.as_deref_mut().and_then(|p| p.exact.as_mut()) {
            exact.on_bytecodes(MethodId(code), n);
        }
    }

    pub(crate) fn profile_event(&self, kind: EventKind) {
        if let Some(p) = self.profiler.as_deref().filter(|p| p.records()) {
            p.recorder().event(kind);
        }
    }

    /// Records every code unit the VM has compiled and every class it has loaded so far
    /// (the core classes load before the profiler can see them), then follows new ones.
    pub(crate) fn profile_announce_code(&self, from: usize) {
        let Some(p) = self.profiler.as_deref().filter(|p| p.records()) else {
            return;
        };
        let mut r = p.recorder();
        for code in &self.rt.codes[from..] {
            let file = self.rt.source_path(code);
            r.event(EventKind::MethodCompiled {
                method: MethodId(code.id),
                class: ClassId(code.holder),
                name: self.rt.code_name(code),
                file,
                line: code.source_line,
                bytecode_len: code.ops.len() as u32,
            });
            if !code.positions.is_empty() {
                r.event(EventKind::MethodLines {
                    method: MethodId(code.id),
                    lines: LineEntry::table(code.positions.iter().copied()),
                });
            }
        }
    }

    /// Records the bytecode listing of each of `codes` the profile does not have yet: the
    /// methods a compile is about to translate (its own and the ones it inlines), whose
    /// instructions the VM-profiler report shows beside each bytecode range.
    pub(crate) fn profile_announce_bytecodes(&self, codes: &[CodeId]) {
        let Some(p) = self.profiler.as_deref().filter(|p| p.records()) else {
            return;
        };
        let mut announced = p
            .bytecodes_announced
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        for &id in codes {
            if !announced.insert(id) {
                continue;
            }
            let code = self.rt.codes[id as usize];
            let ops = code.ops.iter().map(|&op| self.op_text(op)).collect();
            p.recorder().event(EventKind::MethodBytecodes {
                method: MethodId(id),
                ops,
            });
        }
    }

    /// Records the calls counted so far per method per tier (`--count-calls`), with what the
    /// counting itself has cost: each count at the cost measured when the run started.
    pub(crate) fn profile_record_call_counts(&self) {
        let Some(p) = self.profiler.as_deref().filter(|p| p.records()) else {
            return;
        };
        if !self.rt.count_calls {
            return;
        }
        let mut counts = Vec::new();
        let mut total = 0u64;
        for code in &self.rt.codes {
            for (column, tier) in tally_profile::Tier::NAMED.into_iter().enumerate() {
                let (calls, loops) = (code.calls.get(column), code.calls.loops(column));
                if calls > 0 || loops > 0 {
                    total += calls + loops;
                    counts.push(tally_profile::TierCalls {
                        method: MethodId(code.id),
                        tier,
                        calls,
                        loops: Some(loops),
                    });
                }
            }
        }
        let instrumentation_ns = (total as f64 * call_count_cost_ns()) as u64;
        p.recorder().event(EventKind::TierCallCounts {
            counts,
            instrumentation_ns,
        });
    }

    /// Connects GC start/end to the event stream and the VM state samples see.
    pub(crate) fn profile_watch_gc(&mut self) {
        let Some(p) = self.profiler.as_deref() else {
            return;
        };
        let hot = p.hot.clone();
        let recorder = p.recorder.clone();
        let previous = std::cell::Cell::new(VmState::Interpreting);
        let cpu_at_start = std::cell::Cell::new(std::time::Duration::ZERO);
        let plan = self.heap.plan().name();
        let listener = self.heap.add_gc_listener(move |event| match event {
            tally_heap::GcEvent::Start { kind, .. } => {
                previous.set(hot.published.set_state(VmState::Gc));
                cpu_at_start.set(crate::clock::thread_cpu_time());
                lock(&recorder).event(EventKind::GcStart {
                    kind: format!("{kind:?}"),
                });
            }
            tally_heap::GcEvent::End {
                kind,
                scope,
                heap_used_before,
                heap_used_after,
                duration,
            } => {
                let end = tally_profile::clock::now_ns();
                let duration_ns = duration.as_nanos() as u64;
                let mut r = lock(&recorder);
                // Before the state changes back: the pause's samples are GC samples.
                // The VM thread's own work in the pause (handing the roots over and back) ran
                // on its CPU, where its trigger sampled it already.
                let on_cpu = crate::clock::thread_cpu_time().saturating_sub(cpu_at_start.get());
                r.attribute_gc_pause(
                    &hot,
                    end.saturating_sub(duration_ns),
                    end,
                    on_cpu.as_nanos() as u64,
                );
                hot.published.set_state(previous.get());
                r.event_at(
                    end,
                    EventKind::GcEnd {
                        kind: format!("{kind:?}"),
                        plan: plan.into(),
                        scope: scope.name().into(),
                        bytes_before: heap_used_before as u64,
                        bytes_after: heap_used_after as u64,
                        duration_ns,
                    },
                );
            }
        });
        self.profile_gc_listener = Some(listener);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tally_profile::trigger::TimerClock;

    fn options(trigger: Option<Trigger>, mechanism: Mechanism) -> ProfileOptions {
        ProfileOptions {
            trigger_choice: None,
            sample_depth: HotConfig::default().max_frames,
            output: Some(PathBuf::from("unused.profile")),
            if_exists: tally_profile::tally_output::IfExists::Refuse,
            trigger,
            mechanism,
            rate_hz: 250,
            cbs: None,
            exhaustive: false,
            count_calls: false,
            call_graph: None,
            command_line: Vec::new(),
            settings: Vec::new(),
            credit_callers: false,
        }
    }

    #[test]
    fn each_profile_runs_the_lowest_loop_that_serves_it() {
        let perf = Some(Trigger::Perf {
            prefer_hardware: false,
        });
        let timer = Some(Trigger::Timer(TimerClock::ThreadCpu));
        let immediate = options(perf, Mechanism::Immediate);
        assert_eq!(Dispatch::for_profile(None, false), Dispatch::Plain);
        assert_eq!(
            Dispatch::for_profile(Some(&immediate), false),
            Dispatch::Plain
        );
        assert_eq!(
            Dispatch::for_profile(Some(&options(timer, Mechanism::Immediate)), false),
            Dispatch::Plain
        );
        // Where the handler cannot read the program counter, primitives publish their state,
        // which only the loops with hooks do.
        assert_eq!(
            Dispatch::for_profile(Some(&immediate), true),
            Dispatch::Hooks
        );
        let cbs = ProfileOptions {
            cbs: Some(CbsConfig::default()),
            ..options(None, Mechanism::Immediate)
        };
        assert_eq!(Dispatch::for_profile(Some(&cbs), false), Dispatch::Entries);
        let both = ProfileOptions {
            trigger: perf,
            ..cbs.clone()
        };
        assert_eq!(Dispatch::for_profile(Some(&both), false), Dispatch::Entries);
        let cbs_polling = ProfileOptions {
            mechanism: Mechanism::Polling,
            ..both.clone()
        };
        assert_eq!(
            Dispatch::for_profile(Some(&cbs_polling), false),
            Dispatch::Hooks
        );
        assert_eq!(Dispatch::for_profile(Some(&cbs), true), Dispatch::Hooks);
        let polling = options(perf, Mechanism::Polling);
        assert_eq!(
            Dispatch::for_profile(Some(&polling), false),
            Dispatch::Hooks
        );
        let exhaustive = ProfileOptions {
            exhaustive: true,
            ..both
        };
        assert_eq!(
            Dispatch::for_profile(Some(&exhaustive), false),
            Dispatch::Counting
        );
        // A polling mechanism without a trigger takes no samples, so needs no hooks.
        assert_eq!(
            Dispatch::for_profile(Some(&options(None, Mechanism::Polling)), false),
            Dispatch::Plain
        );
    }

    /// The one test in this crate that touches the process-wide flag; no other unit test
    /// raises it, so it cannot race with them.
    #[test]
    fn the_handoff_bit_is_up_exactly_while_the_running_loop_is_the_wrong_one() {
        crate::test_process::in_own_process(
            "profiling::tests::the_handoff_bit_is_up_exactly_while_the_running_loop_is_the_wrong_one",
            || {
                let mut vm = crate::Vm::new(crate::VmOptions::default()).unwrap();
                vm.dispatch = Dispatch::Entries;
                let handoff = || YIELDPOINT.load() & flag::HANDOFF != 0;
                // A window closed while the entries loop ran, on a path that could not switch.
                vm.running_loop = Some(Dispatch::Entries);
                vm.sync_loop_handoff();
                assert!(
                    handoff(),
                    "the next call must be sent to a slow path that switches"
                );
                // The plain loop took over: nothing is left to do.
                vm.running_loop = Some(Dispatch::Plain);
                vm.sync_loop_handoff();
                assert!(!handoff());
                // A window is wanted and the plain loop runs: the tick's own bit already trips the
                // next frame push, and the hand-off bit comes and goes with it.
                YIELDPOINT.raise(flag::CBS_WINDOW);
                vm.sync_loop_handoff();
                assert!(handoff());
                vm.running_loop = Some(Dispatch::Entries);
                vm.sync_loop_handoff();
                assert!(!handoff());
                YIELDPOINT.clear(flag::CBS_WINDOW);
                // Other loops never hand over: no bit for them.
                vm.dispatch = Dispatch::Hooks;
                vm.running_loop = Some(Dispatch::Hooks);
                vm.sync_loop_handoff();
                assert!(!handoff());
                assert_eq!(YIELDPOINT.load(), 0);
            },
        );
    }
}
