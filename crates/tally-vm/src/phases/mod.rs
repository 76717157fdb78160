//! Method-level phases in the VM (Buytaert's MonitorMethod, thesis chapter 3): a first run
//! that times every method through the method hooks, and a second that reads counters at the
//! hooks of the selected methods only, at collections and at compilations.
//!
//! The selection itself, the files and the report are `tally_vertical`'s
//! (`phases`, `phase_files`, `phase_report`).

mod count;
mod record;

use std::cell::RefCell;
use std::rc::Rc;
use std::sync::atomic::Ordering;

pub(crate) use count::CompileCounting;
use tally_profile::gc_hints::PointKind;
use tally_vertical::phase_files::{MethodTimes, Phases};
use tally_vertical::phase_report::{PhaseData, PhaseKind, PhaseReport, ReportInput};

use crate::method_hooks::{HookedMethods, METHOD_HOOKS_ARMED};
use crate::runtime::{Code, HOOK_AT_ENTRY, HOOK_AT_EXIT};
use crate::{Vm, VmError};

enum Mode {
    Record(record::Recording),
    /// Shared with the heap's GC listener (none on a scratch runtime).
    Count {
        counting: Rc<RefCell<count::Counting>>,
        listener: Option<tally_heap::GcListenerId>,
        selection_estimate: f64,
    },
}

pub(crate) struct PhasesRuntime {
    mode: Mode,
}

impl Vm {
    /// Makes this run time every method (MonitorMethod's first run). Methods may still be
    /// inlined by compiled code, which then runs their hooks where it inlined them. Ask
    /// [`Vm::finish_method_times`] at the end.
    pub fn record_method_times(&mut self) -> Result<(), VmError> {
        if self.phases.is_some() {
            return Err(VmError::Fatal("phases were set up twice".into()));
        }
        let probe_ns = self.time_hooks(Mode::Record(record::Recording::new(0.0)));
        self.start_phases(Mode::Record(record::Recording::new(probe_ns)))?;
        self.hook_methods(HookedMethods::All(HOOK_AT_ENTRY | HOOK_AT_EXIT))?;
        METHOD_HOOKS_ARMED.store(true, Ordering::Relaxed);
        Ok(())
    }

    /// The first run's times, for `program` run in `tier`, with the cost a counter reading
    /// has on this machine (the second run's unit of overhead).
    pub fn finish_method_times(
        &mut self,
        program: &str,
        tier: &str,
    ) -> Result<Option<MethodTimes>, VmError> {
        let Some(PhasesRuntime {
            mode: Mode::Record(r),
        }) = self.phases.as_deref_mut()
        else {
            return Ok(None);
        };
        let rt = &self.rt;
        let (methods, run_ns) = r.finish(|c| rt.code_name(rt.codes[c as usize]));
        let probe_ns = r.probe_ns;
        let count_probe_ns = self.time_counting_hooks().map_err(|e| {
            VmError::Fatal(format!(
                "cannot open perf_events counters to measure a reading's cost: {e}"
            ))
        })?;
        Ok(Some(MethodTimes::new(
            program.into(),
            tier.into(),
            run_ns,
            probe_ns,
            count_probe_ns,
            &methods,
        )))
    }

    /// Makes this run read counters at the phases of `phases` (MonitorMethod's second run),
    /// at every collection and at every compilation. Ask [`Vm::finish_phase_counts`] at the
    /// end.
    pub fn count_phases(&mut self, phases: &Phases) -> Result<(), VmError> {
        let counting =
            count::Counting::new(&phases.methods, self.heap.allocated_bytes()).map_err(|e| {
                VmError::Fatal(format!(
                    "cannot open perf_events counters for the phases: {e} \
                     (see /proc/sys/kernel/perf_event_paranoid)"
                ))
            })?;
        let counting = Rc::new(RefCell::new(counting));
        let listener = {
            let counting = counting.clone();
            self.heap.add_gc_listener(move |event| match event {
                tally_heap::GcEvent::Start { .. } => counting.borrow_mut().gc_started(),
                tally_heap::GcEvent::End { .. } => counting.borrow_mut().gc_ended(),
            })
        };
        if let Err(e) = self.start_phases(Mode::Count {
            counting,
            listener: Some(listener),
            selection_estimate: phases.estimated_overhead,
        }) {
            self.heap.remove_gc_listener(listener);
            return Err(e);
        }
        let methods = phases
            .methods
            .iter()
            .map(|m| (m.clone(), HOOK_AT_ENTRY | HOOK_AT_EXIT))
            .collect();
        self.hook_methods(HookedMethods::Named(methods))?;
        self.jit
            .set_compile_counting(Some(CompileCounting::default()));
        METHOD_HOOKS_ARMED.store(true, Ordering::Relaxed);
        Ok(())
    }

    /// The end of a counting run: its report.
    pub fn finish_phase_counts(&mut self) -> Result<Option<PhaseReport>, VmError> {
        let Some(PhasesRuntime {
            mode:
                Mode::Count {
                    counting,
                    listener,
                    selection_estimate,
                },
        }) = self.phases.as_deref()
        else {
            return Ok(None);
        };
        if let Some(listener) = *listener {
            self.heap.remove_gc_listener(listener);
        }
        let selection_estimate = *selection_estimate;
        // No compilation may end half-counted: the compiler thread stops first.
        self.jit.stop();
        let compile = self.jit.take_compile_counting();
        let mut c = counting.borrow_mut();
        let (mut phases, run_ns) = c.finish(self.heap.allocated_bytes());
        if let Some(why) = c.failure.take() {
            return Err(VmError::Fatal(format!(
                "reading the phases' counters failed: {why}"
            )));
        }
        if let Some(compile) = compile {
            if let Some(why) = compile.failure {
                return Err(VmError::Fatal(format!(
                    "counting the compilations failed: {why}"
                )));
            }
            if !compile.intervals.is_empty() {
                phases.push(PhaseData {
                    name: "(compilation)".into(),
                    kind: PhaseKind::Compilation,
                    events: compile.events,
                    intervals: compile.intervals,
                });
            }
        }
        let readings = c.readings;
        drop(c);
        let reading_ns = self.time_counting_hooks().unwrap_or(f64::NAN);
        Ok(Some(PhaseReport::new(&ReportInput {
            phases: &phases,
            run_ns,
            readings,
            reading_ns,
            selection_estimated_overhead: Some(selection_estimate),
        })))
    }

    /// Any method's code (the core classes have many), to time hooks on.
    fn some_method_code(&self) -> Option<&'static Code> {
        self.rt
            .codes
            .iter()
            .copied()
            .find(|c| c.kind == crate::compiler::CodeKind::Method)
    }

    /// What one hook costs on the VM's own path (`method_hook`, the dispatch to the mode and
    /// its work), timed with `mode` on a scratch runtime put in place of this run's: entries
    /// and exits of a method at a depth no frame has. Compiled code's stub call and the
    /// interpreter's loop with entry hooks come on top.
    fn time_hooks(&mut self, mode: Mode) -> f64 {
        const PAIRS: u32 = 2_000;
        let Some(code) = self.some_method_code() else {
            return 0.0;
        };
        let own = self.phases.replace(Box::new(PhasesRuntime { mode }));
        let depth = self.rt.frames.len() + 1_000;
        let t = std::time::Instant::now();
        for _ in 0..PAIRS {
            // Phases never fail a hook (only GC hints, which a phases run has not).
            let _ = self.method_hook(code, PointKind::Entry, depth);
            let _ = self.method_hook(code, PointKind::Exit, depth);
        }
        let ns = t.elapsed().as_nanos() as f64 / f64::from(2 * PAIRS);
        self.phases = own;
        ns
    }

    /// [`Vm::time_hooks`] for a counting run's hooks, each a counter reading.
    fn time_counting_hooks(&mut self) -> std::io::Result<f64> {
        let Some(code) = self.some_method_code() else {
            return Ok(0.0);
        };
        let name = self.rt.code_name(code);
        let counting = count::Counting::new(&[name], self.heap.allocated_bytes())?;
        Ok(self.time_hooks(Mode::Count {
            counting: Rc::new(RefCell::new(counting)),
            listener: None,
            selection_estimate: 0.0,
        }))
    }

    fn start_phases(&mut self, mode: Mode) -> Result<(), VmError> {
        if !cfg!(feature = "profiling") {
            return Err(VmError::Fatal(
                "method-level phases need the interpreter's hooks (cargo feature `profiling`)"
                    .into(),
            ));
        }
        if self.phases.is_some() {
            return Err(VmError::Fatal("phases were set up twice".into()));
        }
        self.phases = Some(Box::new(PhasesRuntime { mode }));
        Ok(())
    }

    /// A hooked method's entry or exit, its frame at `depth`.
    pub(crate) fn phase_hook(&mut self, code: &'static Code, kind: PointKind, depth: usize) {
        let allocated = self.heap.allocated_bytes();
        let Some(p) = self.phases.as_deref_mut() else {
            return;
        };
        match &mut p.mode {
            Mode::Record(r) => match kind {
                PointKind::Entry => r.entered(code.id, depth),
                PointKind::Exit => r.exited(code.id, depth),
            },
            Mode::Count { counting, .. } => {
                let mut c = counting.borrow_mut();
                let rt = &self.rt;
                let Some(phase) = c.phase_of(code.id, || rt.code_name(code)) else {
                    return;
                };
                match kind {
                    PointKind::Entry => c.entered(phase, depth, allocated),
                    PointKind::Exit => c.exited(phase, depth, allocated),
                }
            }
        }
    }

    /// The frames above `depth` were left without their exit hooks.
    pub(crate) fn phases_unwound(&mut self, depth: usize) {
        let allocated = self.heap.allocated_bytes();
        let Some(p) = self.phases.as_deref_mut() else {
            return;
        };
        match &mut p.mode {
            Mode::Record(r) => r.unwound(depth),
            Mode::Count { counting, .. } => counting.borrow_mut().unwound(depth, allocated),
        }
    }

    /// The counted events of a counting run, for messages.
    pub fn phase_counter_events(&self) -> Option<Vec<&'static str>> {
        match &self.phases.as_deref()?.mode {
            Mode::Count { counting, .. } => Some(
                counting
                    .borrow()
                    .events()
                    .iter()
                    .map(|e| e.name())
                    .collect(),
            ),
            Mode::Record(_) => None,
        }
    }
}
