//! The SOM virtual machine: class loading, the bytecode compiler, the interpreter, the
//! primitives and the embedded standard library. See `ARCHITECTURE.md` at the repository root.

pub mod bytecode;
mod clock;
pub mod compiler;
mod disasm;
mod error;
mod frames;
mod gc_hints;
mod inject;
mod instrument;
mod interpreter;
pub mod jit;
mod loader;
mod method_hooks;
pub mod numbers;
pub mod objects;
pub mod operands;
mod peephole;
mod phases;
mod primitives;
mod profiling;
mod program;
pub mod runtime;
mod scoped_names;
mod stdlib;
#[cfg(test)]
mod test_process;
mod value_stack;

use std::io::Write;
use std::path::PathBuf;

pub use clock::ClockKind;
pub use error::{TraceEntry, VmError, OUTPUT_FAILED};
pub use gc_hints::{HintsRecording, HintsUse};
pub use inject::DelayInjection;
pub use profiling::ProfileOptions;
pub use tally_controller;
/// The collector a VM runs (`VmOptions::gc_plan`).
pub use tally_heap::GcPlan;
/// How the VM's heap is collected and sized (`VmOptions::heap`).
pub use tally_heap::HeapOptions;
use tally_heap::{Heap, Value};
pub use tally_profile;
pub use tally_vertical;

use crate::objects::Kind;
use crate::runtime::{ClassId, Runtime};

/// Settings that shape a VM instance (command-line flags map onto these).
#[derive(Debug, Clone)]
pub struct VmOptions {
    pub class_path: Vec<PathBuf>,
    /// The collector, the heap's and the nursery's sizes, GC stress (`--gc`, `--heap-size`,
    /// `--heap-min`, `--nursery`, `--gc-stress`).
    pub heap: HeapOptions,
    /// Deepest SOM call stack before "stack overflow" is reported.
    pub max_stack_depth: usize,
    /// Record a profile of the run.
    pub profile: Option<ProfileOptions>,
    /// What `System>>ticks` and `System>>time` count.
    pub clock: ClockKind,
}

impl Default for VmOptions {
    fn default() -> Self {
        VmOptions {
            class_path: Vec::new(),
            heap: HeapOptions::default(),
            max_stack_depth: 100_000,
            profile: None,
            clock: ClockKind::Wall,
        }
    }
}

pub struct Vm {
    /// First, so it is dropped (and its sampler stopped) before the frames it reads.
    pub(crate) profiler: Option<Box<profiling::Profiler>>,
    /// GC hints being recorded or used; before `rt`, whose frame stack's trip words it may
    /// hold attached.
    pub(crate) gc_hints: Option<Box<gc_hints::GcHintsRuntime>>,
    /// The profile's GC listener (GC samples and markers), removed when the profile ends.
    pub(crate) profile_gc_listener: Option<tally_heap::GcListenerId>,
    /// The tool of an instrumented run (`instrument.rs`).
    pub(crate) instrumentation: Option<Box<instrument::Instrumentation>>,
    /// Method-level phases being recorded or counted (`phases`).
    pub(crate) phases: Option<Box<phases::PhasesRuntime>>,
    /// A delay injected at a method's entries (`inject`).
    pub(crate) injection: Option<Box<inject::DelayInjection>>,
    /// Whether primitive calls must publish the "primitive" state: only for samples taken in
    /// the signal handler, and only where the handler cannot tell native code from the
    /// interpreter by the interrupted program counter (`interpreter::interpreter_code`).
    pub(crate) publishes_primitive_calls: bool,
    /// The dispatch loop the profile needs (`profiling::Dispatch`).
    pub(crate) dispatch: profiling::Dispatch,
    /// The dispatch loop running now, if any: a loop may hand over to another only where
    /// everything between it and the switch point just returns (`VmError::SwitchLoop`).
    pub(crate) running_loop: Option<profiling::Dispatch>,
    pub heap: Heap,
    pub rt: Runtime,
    pub(crate) jit: jit::Jit,
    pub options: VmOptions,
    out: std::io::BufWriter<std::io::Stdout>,
    clock: clock::Clock,
    rng: u64,
}

impl Vm {
    /// Creates a VM with the core classes loaded (from the class path if it defines them,
    /// else from the embedded library).
    pub fn new(options: VmOptions) -> Result<Vm, VmError> {
        let heap = Heap::new(options.heap.clone())
            .map_err(|e| VmError::Fatal(format!("cannot create the heap: {e}")))?;
        let options_clock = options.clock;
        let mut vm = Vm {
            profiler: None,
            gc_hints: None,
            profile_gc_listener: None,
            instrumentation: None,
            phases: None,
            injection: None,
            publishes_primitive_calls: false,
            dispatch: profiling::Dispatch::Plain,
            running_loop: None,
            heap,
            rt: Runtime::new(options.max_stack_depth),
            jit: Default::default(),
            options,
            out: std::io::BufWriter::with_capacity(1 << 16, std::io::stdout()),
            clock: clock::Clock::start(options_clock),
            rng: 0x2545_f491_4f6c_dd1d,
        };
        if let Some(p) = vm.options.profile.clone() {
            // Before any code is compiled: compiled code counts only if told so when made.
            vm.rt.count_calls = p.count_calls && p.output.is_some();
            vm.rt.mark_frames = p.output.is_some();
            vm.rt.counts_calls_in_place = p.cbs.is_some() || p.exhaustive;
            if vm.rt.count_calls {
                profiling::call_count_cost_ns();
            }
            vm.start_profiler(p)?;
        }
        vm.bootstrap()?;
        Ok(vm)
    }

    /// Sets up the profiler (its sampling starts with the program) and the dispatch loop it
    /// needs.
    pub(crate) fn start_profiler(&mut self, p: ProfileOptions) -> Result<(), VmError> {
        if !cfg!(feature = "profiling") {
            return Err(VmError::Fatal(
                "this tally was built without profiling (cargo feature `profiling`)".into(),
            ));
        }
        let profiler = profiling::Profiler::new(&p, &self.rt.frames)?;
        self.publishes_primitive_calls = p.trigger.is_some()
            && p.mechanism == tally_profile::Mechanism::Immediate
            && !profiler.hot.published.classifies_by_pc();
        self.dispatch = profiling::Dispatch::for_profile(Some(&p), self.publishes_primitive_calls);
        let records = p.output.is_some();
        self.profiler = Some(Box::new(profiler));
        if records {
            self.profile_watch_gc();
            if !self.rt.codes.is_empty() {
                self.profile_announce_code(0);
            }
        }
        Ok(())
    }

    /// Runs a program the way SOM VMs do: `args[0]` names a class (or a `.som` file), which is
    /// loaded and sent `run:` with all arguments when it understands it, else `run`.
    pub fn run_main(&mut self, args: &[String]) -> Result<Value, VmError> {
        if let Some(p) = self.profiler.as_deref_mut() {
            p.start_sampling()?;
        }
        let result = self.run_main_inner(args);
        self.flush();
        result
    }

    /// Ends profiling (if on) and writes the profile; answers where it was written.
    pub fn finish_profile(&mut self, exit_code: i32) -> Result<Option<PathBuf>, VmError> {
        // The compiler thread installs code and records it: it stops first.
        self.jit.stop();
        self.profile_record_call_counts();
        let Some(p) = self.profiler.take() else {
            return Ok(None);
        };
        if let Some(listener) = self.profile_gc_listener.take() {
            self.heap.remove_gc_listener(listener);
        }
        p.finish(exit_code)
    }

    pub fn flush(&mut self) {
        let _ = self.out.flush();
    }

    pub(crate) fn write_out(&mut self, bytes: &[u8]) {
        let _ = self.out.write_all(bytes);
    }

    pub(crate) fn write_err(&mut self, bytes: &[u8]) {
        self.flush();
        let mut e = std::io::stderr();
        let _ = e.write_all(bytes);
        let _ = e.flush();
    }

    /// Allocates, collecting garbage if needed: every `Value` held outside `self.rt` is stale
    /// afterwards.
    #[inline]
    pub(crate) fn alloc(
        &mut self,
        class: ClassId,
        kind: Kind,
        slots: usize,
        fill: Value,
        bytes: usize,
    ) -> Result<Value, VmError> {
        match self
            .heap
            .alloc(&mut self.rt, class, kind as u8, slots, fill, bytes)
        {
            Ok(v) => {
                if self.heap.take_alarm() {
                    self.gc_hint_alarm();
                }
                if self.instrumentation.is_some() {
                    self.instrument_alloc(v);
                }
                Ok(v)
            }
            Err(oom) => Err(self.out_of_memory(oom)),
        }
    }

    pub(crate) fn micros_since_start(&self) -> u64 {
        self.clock.elapsed().as_micros() as u64
    }
}
