//! What compiling reports besides the code: the optimizing tier's IR after its named phases
//! (`--print-ir-after`, on stderr as each compile runs them) and the time of every phase
//! (`--time-passes`: the IR build, each tally-ir pass, lowering or translation, each of
//! Cranelift's passes through its timing hook, the code module's work), summed into the
//! run's [`PhaseTimes`], which the VM adds installation to and prints at exit.

use std::any::Any;
use std::cell::RefCell;
use std::io::Write as _;
use std::sync::Arc;
use std::time::{Duration, Instant};

use cranelift_codegen::timing;
use tally_ir::passes::{Observer, Pass};
use tally_vm::jit::{CompileRequest, PhaseTimes, Stage};

/// The phase `--print-ir-after` names for the IR as the builder made it.
pub const BUILD_PHASE: &str = "build";

/// Which phases' IR `--print-ir-after` prints.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum PrintIrAfter {
    #[default]
    Nothing,
    /// After building and after every pass.
    All,
    /// After the phases named (`build`, or a pass's name), each time it runs.
    Phases(Vec<String>),
}

impl PrintIrAfter {
    /// `all`, or phase names separated by commas.
    pub fn parse(text: &str) -> Result<PrintIrAfter, String> {
        if text == "all" {
            return Ok(PrintIrAfter::All);
        }
        let phases: Vec<String> = text.split(',').map(|p| p.trim().to_string()).collect();
        for p in &phases {
            if p != BUILD_PHASE && Pass::named(p).is_none() {
                return Err(format!(
                    "no phase is called `{p}`; the phases are {}, or `all`",
                    phase_names().join(", ")
                ));
            }
        }
        Ok(PrintIrAfter::Phases(phases))
    }

    fn wants(&self, phase: &str) -> bool {
        match self {
            PrintIrAfter::Nothing => false,
            PrintIrAfter::All => true,
            PrintIrAfter::Phases(p) => p.iter().any(|x| x == phase),
        }
    }
}

/// The phases `--print-ir-after` knows, in the order a compile runs them (some run more than
/// once).
pub fn phase_names() -> Vec<&'static str> {
    std::iter::once(BUILD_PHASE)
        .chain(Pass::ALL.iter().map(|p| p.name()))
        .collect()
}

/// `--print-ir-after` and `--time-passes` for one compiler.
#[derive(Clone, Default)]
pub struct Diagnostics {
    pub print_ir_after: PrintIrAfter,
    pub times: Option<Arc<PhaseTimes>>,
}

impl Diagnostics {
    /// Adds `took` to `phase`'s time, when passes are timed.
    pub(crate) fn add(&self, stage: Stage, phase: &str, took: Duration) {
        if let Some(t) = &self.times {
            t.add(stage, phase, took);
        }
    }

    /// Runs `f`, timed as `phase` when passes are timed.
    pub(crate) fn timed<T>(&self, stage: Stage, phase: &str, f: impl FnOnce() -> T) -> T {
        let started = self.times.as_ref().map(|_| Instant::now());
        let out = f();
        if let Some(s) = started {
            self.add(stage, phase, s.elapsed());
        }
        out
    }

    /// Prints `ir` after `phase`, the pipeline's `step`-th (0: the build), if asked to (in
    /// one write, so that compiles on other threads do not cut into it).
    pub(crate) fn after_phase(
        &self,
        phase: &str,
        step: u32,
        request: &CompileRequest,
        ir: &tally_ir::Function,
    ) {
        if !self.print_ir_after.wants(phase) {
            return;
        }
        let text = format!(
            "--- Tally IR of {} after {phase} (step {step})\n{}",
            request.name,
            tally_ir::print::print(ir, &crate::optimizing::RequestNames(request))
        );
        let mut e = std::io::stderr().lock();
        let _ = e.write_all(text.as_bytes());
        let _ = e.flush();
    }

    /// While the answer lives, Cranelift's passes on this thread are timed into the run's
    /// times (when passes are timed at all).
    pub(crate) fn time_cranelift(&self) -> Option<CraneliftTiming> {
        let times = self.times.clone()?;
        let previous = timing::set_thread_profiler(Box::new(CraneliftTimer { times }));
        Some(CraneliftTiming {
            previous: Some(previous),
        })
    }
}

/// What the optimizing tier's passes show the diagnostics: each pass timed, and its IR
/// printed after it when asked.
pub(crate) struct PassWatch<'a> {
    pub diagnostics: &'a Diagnostics,
    pub request: &'a CompileRequest,
    pub started: Option<Instant>,
    /// The passes run so far.
    pub steps: u32,
}

impl Observer for PassWatch<'_> {
    fn before(&mut self, _pass: Pass) {
        self.started = self.diagnostics.times.as_ref().map(|_| Instant::now());
    }

    fn after(&mut self, pass: Pass, f: &tally_ir::Function) {
        if let Some(s) = self.started.take() {
            self.diagnostics
                .add(Stage::IrPass, pass.name(), s.elapsed());
        }
        self.steps += 1;
        self.diagnostics
            .after_phase(pass.name(), self.steps, self.request, f);
    }
}

thread_local! {
    /// The passes under way on this thread, each with the time its nested passes took.
    static NESTED: RefCell<Vec<Duration>> = const { RefCell::new(Vec::new()) };
    /// The time Cranelift's passes took on this thread so far (their own times, summed).
    static CRANELIFT_SO_FAR: std::cell::Cell<Duration> = const { std::cell::Cell::new(Duration::ZERO) };
}

/// Cranelift's timing hook: each pass's own time (less the passes nested in it) added to
/// the run's times under its description.
struct CraneliftTimer {
    times: Arc<PhaseTimes>,
}

impl timing::Profiler for CraneliftTimer {
    fn start_pass(&self, pass: timing::Pass) -> Box<dyn Any> {
        NESTED.with(|n| n.borrow_mut().push(Duration::ZERO));
        Box::new(PassToken {
            pass,
            started: Instant::now(),
            times: self.times.clone(),
        })
    }
}

struct PassToken {
    pass: timing::Pass,
    started: Instant,
    times: Arc<PhaseTimes>,
}

impl Drop for PassToken {
    fn drop(&mut self) {
        let took = self.started.elapsed();
        let nested = NESTED.with(|n| {
            let mut n = n.borrow_mut();
            let nested = n.pop().unwrap_or_default();
            if let Some(parent) = n.last_mut() {
                *parent += took;
            }
            nested
        });
        let own = took.saturating_sub(nested);
        CRANELIFT_SO_FAR.with(|c| c.set(c.get() + own));
        self.times
            .add(Stage::Cranelift, self.pass.description(), own);
    }
}

/// Cranelift's passes timed on this thread until it is dropped, when the hook it replaced
/// comes back.
pub(crate) struct CraneliftTiming {
    previous: Option<Box<dyn timing::Profiler>>,
}

impl CraneliftTiming {
    /// The time Cranelift's passes took on this thread so far.
    pub(crate) fn so_far() -> Duration {
        CRANELIFT_SO_FAR.with(|c| c.get())
    }
}

impl Drop for CraneliftTiming {
    fn drop(&mut self) {
        if let Some(p) = self.previous.take() {
            timing::set_thread_profiler(p);
        }
    }
}
