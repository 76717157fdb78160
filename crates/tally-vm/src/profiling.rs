//! Wiring the VM-agnostic profiler (`tally-profile`) into the interpreter.
//!
//! Every observer feeds from the same hooks: the prologue (every call, also of primitives and
//! frameless trivial methods), the epilogue (every return), loop back-edges, GC, and primitive
//! calls where a sample cannot tell them by its program counter. The interpreter's only cost is one load of the yieldpoint flag at each of these
//! places (Arnold & Grove's overloaded flag): exhaustive counting keeps a bit raised for the
//! whole run, timer ticks raise bits for CBS windows and polled samples, and everything else
//! happens out of line. Immediate samples read the frame stack in place
//! (`FrameStack::stack_view`), so they add nothing to calls at all, and tell primitive time
//! from interpretation by the program counter they interrupted (`interpreter_code`), so they
//! add nothing to primitive calls either. Without a profiler the interpreter runs a loop that
//! has no flag tests (`execute_loop::<_, false>`).

use std::cell::RefCell;
use std::path::PathBuf;
use std::rc::Rc;
use std::sync::Arc;

use tally_profile::trigger::{Sampler, SamplerConfig, Trigger};
use tally_profile::{
    flag, install_sigint_flush, CallEdge, Cbs, CbsConfig, ClassId, EventKind, ExactCounts, Header,
    HotConfig, HotState, Mechanism, MethodId, Profile, Recorder, SamplerSettings, VmState,
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

/// What to profile and where to write it (command-line flags map onto this).
#[derive(Debug, Clone)]
pub struct ProfileOptions {
    pub output: PathBuf,
    /// The sample trigger; `None` takes no method samples (CBS or exhaustive only).
    pub trigger: Option<Trigger>,
    pub mechanism: Mechanism,
    pub rate_hz: u32,
    /// Counter-based sampling of call edges (Arnold & Grove): stride and samples per window.
    pub cbs: Option<CbsConfig>,
    /// Exact call and bytecode counts: the ground truth sampled profiles are judged against.
    pub exhaustive: bool,
    /// The command line, for the profile's header.
    pub command_line: Vec<String>,
    /// Option names and values as given, for the header.
    pub settings: Vec<(String, String)>,
}

pub(crate) struct Profiler {
    pub hot: Arc<HotState>,
    pub recorder: Rc<RefCell<Recorder>>,
    pub cbs: Option<Cbs>,
    pub exact: Option<ExactCounts>,
    sampler: Option<Sampler>,
    _sigint: Option<tally_profile::sigint::SigintGuard>,
    output: PathBuf,
    /// Set when the program was interrupted (SIGINT) and must stop at the next yieldpoint.
    pub interrupted: bool,
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
        let hot = HotState::with_statics(HotConfig::default(), &YIELDPOINT, &VM_STATE);
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
        if options.exhaustive {
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
                max_frames: HotConfig::default().max_frames as u32,
                ..SamplerSettings::default()
            },
            ..Header::default()
        };
        let recorder = Rc::new(RefCell::new(Recorder::new(header)));
        hot.published.bind_current_thread();
        let sigint = install_sigint_flush(&hot).ok();
        Ok(Profiler {
            hot,
            recorder,
            cbs: options.cbs.map(Cbs::new),
            exact: options.exhaustive.then(ExactCounts::new),
            sampler: None,
            _sigint: sigint,
            output: options.output.clone(),
            interrupted: false,
            _trips: trips,
        })
    }

    /// Starts the trigger; called once the VM is ready to run the program.
    pub fn start_sampling(&mut self, options: &ProfileOptions) -> Result<(), VmError> {
        self.hot.published.set_state(VmState::Interpreting);
        let trigger = match options.trigger {
            Some(t) => t,
            // CBS alone still needs ticks to open its windows: perf_events' CPU clock reaches
            // the requested rate (the CPU-time timers stop near the kernel tick); it falls back
            // to the timer below where perf_events is refused.
            None if options.cbs.is_some() => Trigger::Perf {
                prefer_hardware: false,
            },
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
            let mut r = self.recorder.borrow_mut();
            let h = &mut r.header_mut().sampler;
            h.trigger = info.trigger.to_string();
            h.trigger_source = info.source.clone();
            h.trigger_note = fallback_note
                .or_else(|| info.note.clone())
                .unwrap_or_default();
        }
        self.sampler = Some(sampler);
        Ok(())
    }

    /// Stops sampling and writes the profile (atomically).
    pub fn finish(mut self, exit_code: i32) -> Result<PathBuf, VmError> {
        if let Some(s) = self.sampler.take() {
            s.stop();
        }
        self.hot.settle();
        // The VM clears its GC listener first, so the recorder has one owner again.
        let recorder = Rc::try_unwrap(self.recorder)
            .map(RefCell::into_inner)
            .map_err(|_| VmError::Fatal("the profile recorder is still in use".into()))?;
        let profile: Profile = recorder.finish(&self.hot, self.exact.take(), exit_code);
        profile.write_atomically(&self.output).map_err(|e| {
            VmError::Fatal(format!(
                "cannot write the profile to {}: {e}",
                self.output.display()
            ))
        })?;
        Ok(self.output)
    }
}

impl Vm {
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

    /// The yieldpoint flag in a dispatch loop specialised on whether a profiler is attached:
    /// a constant 0 in the loop that runs without one.
    #[inline(always)]
    pub(crate) fn hook_flag<const HOOKS: bool>(&self) -> u8 {
        if HOOKS {
            self.yieldpoint_flag()
        } else {
            0
        }
    }

    /// Whether a profiler is attached, so the interpreter must run its hooks. Only
    /// `Profiler::new` attaches the trip words and installs the triggers that raise the
    /// yieldpoint flag, so without a profiler the flag stays 0 for the whole run.
    #[inline(always)]
    pub(crate) fn has_profiler(&self) -> bool {
        cfg!(feature = "profiling") && self.profiler.is_some()
    }

    /// The prologue, out of line: a call of `callee` from the top frame (whose `ip` is saved),
    /// about to get its frame or to run in place (primitives, trivial methods).
    #[cold]
    #[inline(never)]
    pub(crate) fn profile_prologue(&mut self, callee: CodeId, f: u8) -> Result<(), VmError> {
        let Some(p) = self.profiler.as_deref_mut() else {
            return Ok(());
        };
        let caller = self
            .rt
            .frames
            .last()
            .map(|fr| (MethodId(fr.code), fr.ip.saturating_sub(1)));
        if f & flag::EXACT != 0 {
            if let Some(exact) = p.exact.as_mut() {
                exact.on_call(caller, MethodId(callee));
            }
        }
        if f & flag::CBS_WINDOW != 0 {
            if let Some(cbs) = p.cbs.as_mut() {
                if cbs.on_method_entry(f, p.hot.flag) {
                    if let Some((caller, callsite)) = caller {
                        p.recorder.borrow_mut().record_edge(CallEdge {
                            caller,
                            callsite,
                            callee: MethodId(callee),
                        });
                    }
                }
            }
        }
        if f & flag::ALL_YIELDPOINTS != 0 {
            return self.profile_yieldpoint(f);
        }
        Ok(())
    }

    /// The work behind a raised flag at any yieldpoint (prologue, epilogue, back-edge), out
    /// of line. The top frame's `ip` is saved, so a polled sample sees the right position.
    #[cold]
    #[inline(never)]
    pub(crate) fn profile_yieldpoint(&mut self, f: u8) -> Result<(), VmError> {
        let Some(p) = self.profiler.as_deref_mut() else {
            return Ok(());
        };
        if f & flag::SAMPLE != 0 {
            p.hot.take_polled_sample();
        }
        if f & flag::DRAIN != 0 {
            p.recorder.borrow_mut().drain(&p.hot);
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
        if let Some(p) = self.profiler.as_deref() {
            p.recorder.borrow_mut().event(kind);
        }
    }

    /// Records every code unit the VM has compiled and every class it has loaded so far
    /// (the core classes load before the profiler can see them), then follows new ones.
    pub(crate) fn profile_announce_code(&self, from: usize) {
        let Some(p) = self.profiler.as_deref() else {
            return;
        };
        let mut r = p.recorder.borrow_mut();
        for code in &self.rt.codes[from..] {
            let file = self
                .rt
                .sources
                .get(code.source as usize)
                .map(|s| s.path().to_string())
                .unwrap_or_default();
            r.event(EventKind::MethodCompiled {
                method: MethodId(code.id),
                class: ClassId(code.holder),
                name: self.rt.code_name(code),
                file,
                line: code.source_line,
                bytecode_len: code.ops.len() as u32,
            });
        }
    }

    /// Connects GC start/end to the event stream and the VM state samples see.
    pub(crate) fn profile_watch_gc(&mut self) {
        let Some(p) = self.profiler.as_deref() else {
            return;
        };
        let hot = p.hot.clone();
        let recorder = p.recorder.clone();
        let previous = std::cell::Cell::new(VmState::Interpreting);
        self.heap.set_gc_listener(move |event| match event {
            tally_heap::GcEvent::Start { kind, .. } => {
                previous.set(hot.published.set_state(VmState::Gc));
                recorder.borrow_mut().event(EventKind::GcStart {
                    kind: format!("{kind:?}"),
                });
            }
            tally_heap::GcEvent::End {
                kind,
                heap_used_before,
                heap_used_after,
                duration,
            } => {
                hot.published.set_state(previous.get());
                recorder.borrow_mut().event(EventKind::GcEnd {
                    kind: format!("{kind:?}"),
                    bytes_before: heap_used_before as u64,
                    bytes_after: heap_used_after as u64,
                    duration_ns: duration.as_nanos() as u64,
                });
            }
        });
    }
}
