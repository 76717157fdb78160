//! Compiling a request and making the result run: the code version's registration (for
//! samples and the profile), the symbols for external profilers (`--perf-map`, `--jitdump`),
//! `--print-code`, `--tier-log`, and the adaptive controller's bookkeeping. Compiling
//! ([`generate`]) runs on whichever thread compiles (the VM thread for compile-at-first-call
//! tiers, the compiler thread under `--tier=adaptive`); installing runs on the VM thread.
//! The installer holds nothing of the VM but shared handles.

use std::io::Write as _;
use std::sync::{Arc, Mutex};

use tally_controller::Controller;
use tally_profile::{
    CodeVersion, CodeVersionId, EventKind, HotState, MethodId, PcMapEntry, Recorder,
};

use super::jitdump;
use super::request::CompileRequest;
use super::{CodeGenerator, EntryPoint, Layout, NativeCode, Tier};
use crate::bytecode::CodeId;
use crate::runtime::Code;
use rustc_hash::{FxHashMap, FxHashSet};

/// Where installed code is announced when a profiler runs.
pub(crate) struct ProfileLink {
    pub(crate) hot: Arc<HotState>,
    pub(crate) recorder: Arc<Mutex<Recorder>>,
}

#[derive(Default)]
pub(crate) struct Installer {
    /// `--tier-log`: one line on stderr per compile, failure, decision and deoptimization.
    pub(crate) log: bool,
    /// Compiles so far: the next code version's id (profiles name versions by it).
    compiles: u32,
    /// `--perf-map`: one line per compiled function for `perf report` and other profilers
    /// that read `/tmp/perf-PID.map`.
    pub(crate) perf_map: Option<std::io::BufWriter<std::fs::File>>,
    /// `--jitdump`.
    pub(crate) jitdump: Option<jitdump::JitDump>,
    /// `--print-code=PATTERN`: methods whose name contains it get their compiled code
    /// printed on stderr as they are compiled.
    pub(crate) print_code: Option<String>,
    /// The code generator writes on stderr as it compiles (`--print-ir-after`).
    pub(crate) writes_stderr: bool,
    /// `--time-passes`: installations are timed into it.
    pub(crate) phase_times: Option<Arc<super::PhaseTimes>>,
    pub(crate) profile: Option<ProfileLink>,
    /// The adaptive controller, told what was installed and what failed.
    pub(crate) controller: Option<Arc<Mutex<Controller>>>,
    /// Codes whose installed version speculates (a guard may invalidate it).
    speculative: FxHashSet<CodeId>,
    /// Each code's newest version that does not speculate, to fall back to when a
    /// speculative one is invalidated: its tier, entry point and direct entry (0: none).
    fallback: FxHashMap<CodeId, (Tier, EntryPoint, usize)>,
    /// A phases run's counters of the compiling thread: each compilation is an interval of
    /// the compilation phase.
    pub(crate) compile_counting: Option<crate::phases::CompileCounting>,
    /// Every installed version's safepoint table: an activation of a version may be
    /// suspended in a call long after a newer one is installed.
    safepoint_tables: Vec<Arc<super::SafepointTable>>,
}

/// What compiling one request gave, made on whichever thread compiles and installed by the
/// VM thread ([`Installer::finish`]).
pub(crate) struct Generated {
    tier: Tier,
    /// CPU time of the compiling thread.
    compile_ns: u64,
    /// The code and, under `--print-code` for a matching method, its listing; or why the
    /// compile failed.
    result: Result<(NativeCode, Option<String>), String>,
}

/// Compiles `request` with `generator`; a compiler that panics is a failed compile.
/// `print_code`: the `--print-code` pattern, whose methods get their listing made here
/// (the generator lives on the compiling thread).
pub(crate) fn generate(
    generator: &mut dyn CodeGenerator,
    layout: &Layout,
    request: &CompileRequest,
    print_code: Option<&str>,
) -> Generated {
    // CPU time of the compiling thread: on a busy machine its wall-clock time would also
    // count the time it waited for a CPU, which differs from run to run.
    let started = crate::clock::thread_cpu_time();
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        generator.compile(request, layout)
    }))
    .unwrap_or_else(|_| Err("the code generator panicked".into()));
    let compile_ns = crate::clock::thread_cpu_time()
        .saturating_sub(started)
        .as_nanos() as u64;
    let result = result.map(|native| {
        let listing = print_code
            .filter(|pattern| request.name.contains(pattern))
            .map(|_| {
                generator
                    .listing(request, layout)
                    .unwrap_or_else(|why| format!("(no listing: {why})\n"))
            });
        (native, listing)
    });
    Generated {
        tier: generator.tier(),
        compile_ns,
        result,
    }
}

/// Locks `m` whatever became of an earlier holder: everything behind these locks only ever
/// gains whole entries.
pub(crate) fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Writes `text` on stderr in one piece. A line that cannot be written is lost, not the run.
pub(crate) fn say(text: &str) {
    let mut e = std::io::stderr().lock();
    let _ = e.write_all(text.as_bytes());
    let _ = e.flush();
}

impl Installer {
    /// Whether compiling writes on stderr (the VM thread flushes its output first, so that
    /// the two keep their order).
    pub(crate) fn writes_stderr(&self) -> bool {
        self.log || self.print_code.is_some() || self.writes_stderr
    }

    /// Compiles `request` with `generator` and makes the code run at the method's next call;
    /// answers whether it did. A compiler that fails, or panics, leaves the method where it
    /// was, with one line under `--tier-log`. Only for the VM thread (see [`Generated`]).
    pub(crate) fn compile(
        &mut self,
        generator: &mut dyn CodeGenerator,
        layout: &Layout,
        request: &CompileRequest,
    ) -> bool {
        self.begin_compile();
        let generated = generate(generator, layout, request, self.print_code.as_deref());
        self.end_compile();
        self.finish(request, generated)
    }

    /// A compile starts on the calling thread (for a phases run's counters).
    pub(crate) fn begin_compile(&mut self) {
        if let Some(c) = self.compile_counting.as_mut() {
            c.begin();
        }
    }

    pub(crate) fn end_compile(&mut self) {
        if let Some(c) = self.compile_counting.as_mut() {
            c.end();
        }
    }

    /// Makes a compile's result run (or reports its failure); answers whether it installed.
    /// Called on the VM thread only: the dispatcher and compiled code read a method's entry
    /// points, tier and direct entry in more than one load, and must never see them change
    /// between two of those.
    pub(crate) fn finish(&mut self, request: &CompileRequest, generated: Generated) -> bool {
        let Generated {
            tier,
            compile_ns,
            result,
        } = generated;
        match result {
            Ok((native, listing)) => {
                let started = std::time::Instant::now();
                self.install(tier, request, native, listing, compile_ns);
                if let Some(times) = &self.phase_times {
                    times.add(super::Stage::Installation, "install", started.elapsed());
                }
                true
            }
            Err(why) => {
                if let Some(c) = &self.controller {
                    lock(c).compile_failed(MethodId(request.code.id), tier.profile_tier());
                }
                if self.log {
                    say(&format!(
                        "[tier] {} failed for {}, stays where it was: {why}\n",
                        tier.name(),
                        request.name
                    ));
                }
                false
            }
        }
    }

    fn install(
        &mut self,
        tier: Tier,
        request: &CompileRequest,
        native: NativeCode,
        listing: Option<String>,
        compile_ns: u64,
    ) {
        let code = request.code;
        self.compiles += 1;
        let version = CodeVersionId(self.compiles);
        let method = MethodId(code.id);
        let start = native.start();
        // The range is known to samples before the code can run.
        if let Some(p) = &self.profile {
            // A full table leaves this code counted as native code in samples.
            let _ =
                p.hot
                    .published
                    .add_compiled_code(start..start + native.size, version, method, &[]);
            for f in &native.shared {
                let _ = p.hot.published.add_shared_code(f.start..f.start + f.size);
            }
            let pc_map = native
                .pc_map
                .iter()
                .map(|&(pc_offset, loc)| PcMapEntry {
                    pc_offset,
                    chain: loc
                        .map(|loc| {
                            super::location_chain(&native.scopes, code.id, loc)
                                .into_iter()
                                .map(|(c, bci)| (MethodId(c), bci))
                                .collect()
                        })
                        .unwrap_or_default(),
                })
                .collect();
            lock(&p.recorder).event(EventKind::CodeInstalled(CodeVersion {
                id: version,
                method,
                tier: tier.profile_tier(),
                compile_id: self.compiles,
                compile_time_ns: compile_ns,
                code_start: start as u64,
                code_len: native.size as u64,
                pc_map,
            }));
        }
        if let Some(c) = &self.controller {
            lock(c).code_installed(version, method, tier.profile_tier());
        }
        if let Some(t) = &native.safepoints {
            self.safepoint_tables.push(t.clone());
        }
        if native.speculations > 0 {
            self.speculative.insert(code.id);
        } else {
            self.speculative.remove(&code.id);
            self.fallback
                .insert(code.id, (tier, native.entry, native.direct.unwrap_or(0)));
        }
        code.calls.set_tier(tier);
        code.compiled.install(native.entry);
        code.direct.store(
            native.direct.unwrap_or(0),
            std::sync::atomic::Ordering::Relaxed,
        );
        code.loop_entries.store(
            !native.osr_entries.is_empty(),
            std::sync::atomic::Ordering::Relaxed,
        );
        let name = &request.name;
        let tier_name = tier.name();
        if let Some(text) = listing {
            say(&format!(
                "=== {name} [{tier_name}], compile {}\n{text}",
                self.compiles
            ));
        }
        if let Some(dump) = self.jitdump.as_mut() {
            // SAFETY: the generator answered `size` bytes of finalized (readable and
            // executable) machine code at the entry point, never freed.
            let bytes = unsafe { std::slice::from_raw_parts(start as *const u8, native.size) };
            let lines: Vec<jitdump::DebugLine> = native
                .pc_map
                .iter()
                .filter_map(|&(offset, loc)| {
                    // The line of the version's own code (inlined code is placed on the call
                    // it runs for: the file is the version's).
                    let chain = super::location_chain(&native.scopes, code.id, loc?);
                    let &(_, bci) = chain.last()?;
                    let (line, _) = *code.positions.get(bci as usize)?;
                    Some(jitdump::DebugLine {
                        address: (start + offset as usize) as u64,
                        line,
                        file: &request.file,
                    })
                })
                .collect();
            // A record that cannot be written loses a symbol, not the run.
            let _ = dump.code_loaded(&format!("{name} [{tier_name}]"), bytes, &lines);
        }
        if let Some(map) = self.perf_map.as_mut() {
            // A map line that cannot be written loses a symbol, not the run.
            let _ = writeln!(map, "{start:x} {:x} {name} [{tier_name}]", native.size)
                .and_then(|()| map.flush());
        }
        self.name_shared(&native.shared, tier_name);
        if self.log {
            let guarded = match native.speculations {
                0 => String::new(),
                1 => ", speculating at 1 site".to_string(),
                n => format!(", speculating at {n} sites"),
            };
            let entered = match native.osr_entries.as_slice() {
                [] => String::new(),
                heads => format!(
                    ", entered at loop head{} {}",
                    if heads.len() == 1 { "" } else { "s" },
                    heads
                        .iter()
                        .map(|h| h.to_string())
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            };
            let inlined = inlined_summary(request, &native.scopes) + &never_made(native.never_made);
            let compiled = match compiled_bytecodes(request, code, &native.scopes) {
                n if n == code.ops.len() => String::new(),
                n => format!(", {n} bytecodes compiled"),
            };
            let mut text = format!(
                "[tier] {tier_name} {name} ({} bytecodes, {} bytes, {:.0} us{compiled}{guarded}{inlined}{entered})\n",
                code.ops.len(),
                native.size,
                compile_ns as f64 / 1e3
            );
            for line in &request.inline_log {
                text.push_str(&format!("[tier]   {line}\n"));
            }
            say(&text);
        }
    }

    /// Takes `code`'s speculative version out of use after one of its guards failed: the
    /// code falls back to its newest version that does not speculate, or to the
    /// interpreter. Answers the tier it runs in now, or `None` when its installed version
    /// does not speculate (an older activation of an invalidated version failed).
    pub(crate) fn invalidate(&mut self, code: &'static Code) -> Option<Tier> {
        if !self.speculative.remove(&code.id) {
            return None;
        }
        let now = match self.fallback.get(&code.id) {
            Some(&(tier, entry, direct)) => {
                code.compiled.install(entry);
                code.direct
                    .store(direct, std::sync::atomic::Ordering::Relaxed);
                code.calls.set_tier(tier);
                tier
            }
            None => {
                code.direct.store(0, std::sync::atomic::Ordering::Relaxed);
                code.compiled.clear();
                Tier::Interp
            }
        };
        if let Some(c) = &self.controller {
            lock(c).code_invalidated(MethodId(code.id), now.profile_tier());
        }
        Some(now)
    }
}

/// What a version never allocates, for its `--tier-log` line: ", 2 closures and 1 context
/// never made".
fn never_made(n: super::NeverMade) -> String {
    let count = |n: u32, what: &str| match n {
        1 => format!("1 {what}"),
        n => format!("{n} {what}s"),
    };
    match (n.closures, n.contexts) {
        (0, 0) => String::new(),
        (c, 0) => format!(", {} never made", count(c, "closure")),
        (0, x) => format!(", {} never made", count(x, "context")),
        (c, x) => format!(
            ", {} and {} never made",
            count(c, "closure"),
            count(x, "context")
        ),
    }
}

impl Installer {
    /// Names the functions a compile made besides its version, for `--perf-map` and
    /// `--jitdump`.
    fn name_shared(&mut self, shared: &[super::SharedCode], tier_name: &str) {
        for f in shared {
            if let Some(dump) = self.jitdump.as_mut() {
                // SAFETY: the generator answered `size` bytes of finalized machine code at
                // `start`, never freed.
                let bytes = unsafe { std::slice::from_raw_parts(f.start as *const u8, f.size) };
                let _ = dump.code_loaded(&format!("{} [{tier_name}]", f.name), bytes, &[]);
            }
            if let Some(map) = self.perf_map.as_mut() {
                let _ = writeln!(map, "{:x} {:x} {} [{tier_name}]", f.start, f.size, f.name)
                    .and_then(|()| map.flush());
            }
        }
    }
}

/// The bytecodes a compile translated: its own and those of every method and block it
/// inlined, each time it inlined them. What a compile costs grows with this, not with the
/// root's size alone.
fn compiled_bytecodes(
    request: &CompileRequest,
    code: &Code,
    scopes: &[super::InlineScope],
) -> usize {
    let inlined: usize = scopes
        .iter()
        .skip(1)
        .filter_map(|s| request.callee(s.code))
        .map(|c| c.ops.len())
        .sum();
    code.ops.len() + inlined
}

/// What a version inlines, for its `--tier-log` line: ", 3 methods and 1 block inlined".
fn inlined_summary(request: &CompileRequest, scopes: &[super::InlineScope]) -> String {
    let blocks = scopes
        .iter()
        .skip(1)
        .filter(|s| {
            request
                .callee(s.code)
                .is_some_and(|c| c.kind == crate::compiler::CodeKind::Block)
        })
        .count();
    let methods = scopes.len().saturating_sub(1) - blocks;
    let count = |n: usize, what: &str| match n {
        1 => format!("1 {what}"),
        n => format!("{n} {what}s"),
    };
    match (methods, blocks) {
        (0, 0) => String::new(),
        (m, 0) => format!(", {} inlined", count(m, "method")),
        (0, b) => format!(", {} inlined", count(b, "block")),
        (m, b) => format!(", {} and {} inlined", count(m, "method"), count(b, "block")),
    }
}
