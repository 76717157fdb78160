//! `--tier=adaptive`: Jikes RVM's adaptive optimization system on Tally's profiler. Data
//! flows one way:
//!
//! 1. the profiler's samples (the same stream a recorded profile keeps) reach the
//!    controller on the drain thread (`Profiler::observe_samples`), which keeps time per
//!    method and tier and decides, by cost and benefit, what to recompile at which tier
//!    (`tally_controller`);
//! 2. decisions wait for the VM thread, which the controller calls with
//!    [`flag::CONTROLLER`]: at its next yieldpoint it copies what each compile needs
//!    ([`CompileRequest`]), records the decision in the profile and queues the request;
//! 3. the compiler thread compiles while the program keeps running, and hands the code
//!    back; the VM thread installs it at its next yieldpoint (again [`flag::CONTROLLER`]),
//!    so a method's entry points only ever change between two of its instructions, never
//!    between two loads of the dispatcher or of compiled code. The method's next call (or a
//!    running loop's next back-edge) enters the new code.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use tally_controller::{CallGraphSource, Controller, CostModel, Decision};
use tally_profile::{flag, CallEdge, CallGraph, EventKind, MethodId, RawFrame};

use super::install::{generate, lock, say, Generated, Installer};
use super::request::{CompileRequest, Speculation};
use super::values::SiteProfiles;
use super::{CodeGenerator, Layout, Tier};
use crate::{Vm, VmError};

/// Makes the code generator of a tier, on the compiler thread (code generators need not be
/// `Send`: they own their code memory there).
pub type GeneratorFactory = Box<dyn Fn(Tier) -> Result<Box<dyn CodeGenerator>, String> + Send>;

/// What `--tier=adaptive` runs with.
pub struct AdaptiveConfig {
    pub generators: GeneratorFactory,
    /// The tiers the controller may compile to.
    pub tiers: Vec<Tier>,
    /// The tiers' speedups and compile rates (`tally calibrate`).
    pub model: CostModel,
    /// Samples per second when no profile is recorded (a recorded profile's rate rules
    /// otherwise).
    pub rate_hz: u32,
}

/// The share of a site's counted receivers a class needs before optimized code guards on it
/// (the value profile's distribution replaces the inline cache's at that site).
const MIN_GUARDED_SHARE: f64 = 0.4;

/// How often the controller looks at new samples at the longest.
const DECISION_PERIOD: std::time::Duration = std::time::Duration::from_millis(20);

pub(crate) struct Adaptive {
    controller: Arc<Mutex<Controller>>,
    /// Decided on the drain thread, waiting for the VM thread.
    decisions: Arc<Mutex<Vec<Decision>>>,
    requests: Option<mpsc::Sender<(Tier, CompileRequest)>>,
    /// Compiled on the compiler thread, waiting for the VM thread to install.
    finished: Finished,
    thread: Option<JoinHandle<()>>,
    /// Raised by the drain thread every [`DECISION_PERIOD`] under `--count-calls`: the VM
    /// thread records the call counts at its next yieldpoint, so the amortization analysis
    /// sees how each method's calls spread over the run (a cost per call that changes within
    /// one tier), not only where decisions happened to be served.
    counts_due: Arc<AtomicBool>,
}

impl Adaptive {
    /// Stops the compiler thread after the compile it is in; pending requests are dropped.
    pub(crate) fn stop(&mut self) {
        self.requests.take();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for Adaptive {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Compiles done and not yet installed, in the order they finished.
type Finished = Arc<Mutex<Vec<(CompileRequest, Generated)>>>;

/// The compiler thread: compiles requests in order, each with its tier's generator, and
/// hands each result to the VM thread.
fn compiler_thread(
    requests: mpsc::Receiver<(Tier, CompileRequest)>,
    factory: GeneratorFactory,
    layout: Layout,
    installer: Arc<Mutex<Installer>>,
    finished: Finished,
) {
    let mut generators: Vec<(Tier, Box<dyn CodeGenerator>)> = Vec::new();
    while let Ok((tier, request)) = requests.recv() {
        let generator = match generators.iter().position(|(t, _)| *t == tier) {
            Some(i) => &mut generators[i].1,
            None => match factory(tier) {
                Ok(g) => {
                    generators.push((tier, g));
                    &mut generators.last_mut().expect("just pushed").1
                }
                Err(why) => {
                    let i = lock(&installer);
                    if let Some(c) = &i.controller {
                        lock(c).compile_failed(MethodId(request.code.id), tier.profile_tier());
                    }
                    if i.log {
                        say(&format!("[tier] no {} compiler: {why}\n", tier.name()));
                    }
                    continue;
                }
            },
        };
        // The installer is not held while compiling: the VM thread takes it at deopts.
        let print_code = {
            let mut i = lock(&installer);
            i.begin_compile();
            i.print_code.clone()
        };
        let generated = generate(generator.as_mut(), &layout, &request, print_code.as_deref());
        lock(&installer).end_compile();
        lock(&finished).push((request, generated));
        crate::profiling::YIELDPOINT.raise(flag::CONTROLLER);
    }
}

impl Vm {
    /// Runs the program under the adaptive optimizer from now on: methods start
    /// interpreted and the controller moves the hot ones up the tiers. Samples come from the
    /// recorded profile when there is one (it must take method samples), else from a
    /// sampler of the controller's own that records nothing.
    pub fn set_adaptive(&mut self, config: AdaptiveConfig, log: bool) -> Result<(), VmError> {
        if !cfg!(feature = "profiling") {
            return Err(VmError::Fatal(
                "--tier=adaptive needs the profiler (cargo feature `profiling`)".into(),
            ));
        }
        let graph_source = self.jit.inline_graph;
        if self.profiler.is_none() {
            self.start_profiler(crate::ProfileOptions::for_controller_with_graph(
                config.rate_hz,
                graph_source,
                self.jit.inline_graph_cbs,
            ))?;
        }
        let profiler = self.profiler.as_deref_mut().expect("a profiler was set");
        let options = profiler.options();
        if options.trigger.is_none() {
            return Err(VmError::Fatal(
                "--tier=adaptive is driven by method samples; this profile takes none (--sampler=none)".into(),
            ));
        }
        if options.call_graph != graph_source {
            return Err(VmError::Fatal(
                "the profile does not keep the call graph the inliner reads (ProfileOptions::call_graph must match --inline-by)".into(),
            ));
        }
        if graph_source == Some(CallGraphSource::Cbs) && options.cbs.is_none() {
            return Err(VmError::Fatal(
                "--inline-by=cbs weighs inlining by CBS's call graph; this profile has --cbs=off (take --inline-by=samples or static)".into(),
            ));
        }
        if graph_source == Some(CallGraphSource::TimerSamples) && options.sample_depth < 2 {
            return Err(VmError::Fatal(
                "--inline-by=samples reads call edges from samples' two innermost frames; this profile keeps one (--sample-depth=1)".into(),
            ));
        }
        // Samples feed the graph on the drain thread, as they reach the controller.
        let sample_graph = (graph_source == Some(CallGraphSource::TimerSamples))
            .then(|| profiler.call_graph.clone())
            .flatten();
        let sample_ns = 1e9 / f64::from(options.rate_hz.max(1));
        let tiers: Vec<_> = config.tiers.iter().map(|t| t.profile_tier()).collect();
        let controller = Arc::new(Mutex::new(Controller::new(config.model, sample_ns, &tiers)));
        let decisions = Arc::new(Mutex::new(Vec::new()));
        let counts_due = Arc::new(AtomicBool::new(false));
        {
            let (controller, decisions) = (controller.clone(), decisions.clone());
            let (counts_due, count_calls) = (counts_due.clone(), self.rt.count_calls);
            profiler.observe_samples(
                Box::new(move |samples| {
                    if let Some(g) = sample_graph.as_ref() {
                        add_sample_edges(&mut lock(g), samples);
                    }
                    let new = lock(&controller).observe(samples);
                    if count_calls {
                        counts_due.store(true, Ordering::Relaxed);
                    }
                    let decided = !new.is_empty();
                    if decided {
                        lock(&decisions).extend(new);
                    }
                    if decided || count_calls {
                        crate::profiling::YIELDPOINT.raise(flag::CONTROLLER);
                    }
                }),
                DECISION_PERIOD,
            );
        }
        let layout = self.prepare_compiled_code(log);
        {
            let mut installer = lock(&self.jit.installer);
            installer.controller = Some(controller.clone());
        }
        let (tx, rx) = mpsc::channel();
        let installer = self.jit.installer.clone();
        let factory = config.generators;
        let finished = Finished::default();
        let done = finished.clone();
        let thread = std::thread::Builder::new()
            .name("tally-compiler".into())
            .spawn(move || compiler_thread(rx, factory, layout, installer, done))
            .map_err(|e| VmError::Fatal(format!("cannot start the compiler thread: {e}")))?;
        self.jit.adaptive = Some(Adaptive {
            controller,
            decisions,
            requests: Some(tx),
            finished,
            thread: Some(thread),
            counts_due,
        });
        self.code_added(0);
        Ok(())
    }

    /// Tells the controller the sizes of codes from `from` on.
    pub(super) fn announce_to_controller(&self, from: usize) {
        let Some(a) = self.jit.adaptive.as_ref() else {
            return;
        };
        let mut c = lock(&a.controller);
        for code in &self.rt.codes[from..] {
            if code.plain_frame {
                c.method_defined(MethodId(code.id), code.ops.len() as u32);
            }
        }
    }

    /// The VM thread's part ([`flag::CONTROLLER`] was up): install what the compiler thread
    /// finished, and queue the decisions taken since the last time, each recorded in the
    /// profile.
    pub(crate) fn serve_controller(&mut self) {
        let Some(a) = self.jit.adaptive.as_ref() else {
            return;
        };
        let finished = std::mem::take(&mut *lock(&a.finished));
        if !finished.is_empty() {
            let mut installer = lock(&self.jit.installer);
            if installer.writes_stderr() {
                use std::io::Write as _;
                let _ = self.out.flush();
            }
            for (request, generated) in finished {
                installer.finish(&request, generated);
            }
        }
        let Some(a) = self.jit.adaptive.as_ref() else {
            return;
        };
        let decisions = std::mem::take(&mut *lock(&a.decisions));
        // The counts as each batch of decisions is served and every decision period: the
        // analysis prices a method's calls in each stretch of the run between two readings.
        if a.counts_due.swap(false, Ordering::Relaxed) || !decisions.is_empty() {
            self.profile_record_call_counts();
        }
        let controller = a.controller.clone();
        let log = lock(&self.jit.installer).log;
        let weights = if decisions
            .iter()
            .any(|d| Tier::from_profile_tier(d.to).is_some_and(Tier::inlines))
        {
            self.inline_weights()
        } else {
            None
        };
        for d in decisions {
            let code = self.rt.codes[d.method.0 as usize];
            let Some(tier) = Tier::from_profile_tier(d.to) else {
                // A tier the VM does not have: not asked again.
                lock(&controller).compile_failed(d.method, d.to);
                continue;
            };
            if let Some(p) = self.profiler.as_deref() {
                p.recorder().event(EventKind::TierDecision {
                    method: d.method,
                    from: d.from,
                    to: d.to,
                    past_ns: d.past_ns as u64,
                    predicted_compile_ns: d.compile_ns as u64,
                    predicted_future_ns: d.future_ns as u64,
                });
            }
            let mut request = CompileRequest::new(code, &self.rt, self.speculation());
            request.osr &= !self.jit.no_osr;
            if tier == Tier::Baseline {
                if let Some(values) = self.jit.values.as_mut() {
                    request = request.with_value_tables(values);
                }
            }
            if tier.is_optimizing() {
                let speculation = if self.jit.no_speculation {
                    Speculation::Off
                } else {
                    Speculation::Except(&self.jit.failed_sites)
                };
                let mut guards_log = String::new();
                if let Some(values) = self.jit.values.as_mut() {
                    let log = log.then_some(&mut guards_log);
                    apply_value_profiles(
                        values,
                        &self.rt,
                        &mut request,
                        MIN_GUARDED_SHARE,
                        speculation,
                        log,
                    );
                }
                if tier.inlines() {
                    request.plan_inlining(
                        &self.rt,
                        speculation,
                        &self.jit.inline_policy,
                        weights.as_ref(),
                    );
                }
                if !guards_log.is_empty() {
                    self.write_err(guards_log.as_bytes());
                }
            }
            self.profile_announce_bytecodes(&[request.code.id]);
            if log {
                self.write_err(
                    format!(
                        "[tier] decide {} {} -> {}: ran {:.2} ms; predicted compile {:.2} ms, then {:.2} ms\n",
                        request.name,
                        d.from.name(),
                        d.to.name(),
                        d.past_ns / 1e6,
                        d.compile_ns / 1e6,
                        d.future_ns / 1e6
                    )
                    .as_bytes(),
                );
            }
            let sent = self
                .jit
                .adaptive
                .as_ref()
                .and_then(|a| a.requests.as_ref())
                .is_some_and(|tx| tx.send((tier, request)).is_ok());
            if !sent {
                lock(&controller).compile_failed(d.method, d.to);
            }
        }
    }
}

/// The call edges of timer samples: each sample's two innermost frames, the caller's
/// position being its call site (the seeds' call graph, which CBS is measured against).
fn add_sample_edges(graph: &mut CallGraph, samples: &[tally_profile::Sample]) {
    let at = |f: &RawFrame| match *f {
        RawFrame::Interpreted { method, bci } | RawFrame::InTier { method, bci, .. } => {
            Some((method, bci))
        }
        RawFrame::Compiled { .. } => None,
    };
    for s in samples {
        let [callee, caller, ..] = s.frames.as_slice() else {
            continue;
        };
        if let (Some((callee, _)), Some((caller, callsite))) = (at(callee), at(caller)) {
            graph.add(
                CallEdge {
                    caller,
                    callsite,
                    callee,
                },
                1,
            );
        }
    }
}

/// Makes `request` guard on what its sites' value tables counted (classes above `share`),
/// noting each such site in `log`.
fn apply_value_profiles(
    values: &mut SiteProfiles,
    rt: &crate::runtime::Runtime,
    request: &mut CompileRequest,
    share: f64,
    speculation: Speculation,
    log: Option<&mut String>,
) {
    let tables = values.for_compile(request.code, &request.site_ids());
    let applied = request.with_receiver_profiles(rt, &tables, share, speculation);
    let Some(log) = log else {
        return;
    };
    for (site, classes) in applied {
        let s = &rt.sites[site as usize];
        let guards: Vec<String> = classes
            .iter()
            .map(|&(c, sh)| format!("{} {:.0}%", rt.class_name(c), sh * 100.0))
            .collect();
        log.push_str(&format!(
            "[tier]   {} #{}: guards from the value profile: {}\n",
            request.name,
            rt.symbols.name(s.selector),
            guards.join(", ")
        ));
    }
}
