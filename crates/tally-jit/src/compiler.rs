//! The optimizing levels' compiler, one Cranelift module per level. It builds Tally's IR
//! (`tally-ir`: SSA values, guards from the sites' feedback, frame states) and lowers it
//! (`crate::optimizing`): SOM values in registers, native calls, a body entered directly by
//! compiled callers and an adapter the dispatcher enters it through.

use crate::optimizing::{AdapterBody, AdapterShape, Level, ProbeShape, SendProbes};
use crate::pc_map;
use cranelift_codegen::ir::immediates::Imm64;
use cranelift_codegen::ir::{types, AbiParam, Signature, UserFuncName};
use cranelift_codegen::settings::{self, Configurable};
use cranelift_codegen::Context;
use cranelift_frontend::FunctionBuilderContext;
use cranelift_jit::{JITBuilder, JITModule};
use cranelift_module::{default_libcall_names, FuncId, Module};
use std::time::Instant;

use tally_vm::jit::{
    CodeGenerator, CompileRequest, EntryPoint, Layout, NativeCode, SharedCode, Stage, Tier,
};

use crate::diagnostics::{CraneliftTiming, Diagnostics};

/// The most bytecodes of its own a method may have for the optimizing tier to compile it
/// (what it inlines is bounded apart, `tally_vm::jit::MAX_INLINED_BYTECODES`): a compile's
/// time and working memory grow with the function, and a method this long would hold the
/// compiler thread for seconds. Such a method stays where it is, with a `--tier-log` line.
pub const MAX_OPTIMIZED_BYTECODES: usize = 2500;

/// The compiler of one optimizing level: one Cranelift JIT module holding every function it
/// made.
pub(crate) struct CraneliftCompiler {
    tier: Tier,
    module: JITModule,
    context: Context,
    builder_context: FunctionBuilderContext,
    listing_parts: ListingParts,
    /// The adapters shared by the bodies without loop-head entries, by shape.
    shared_adapters: std::collections::HashMap<AdapterShape, FuncId>,
    /// What the optimizing tier's bodies are lowered with (its send probes), made before
    /// its first compile.
    level: Option<Level>,
    /// Functions made besides a version, not yet reported with one (`NativeCode::shared`):
    /// name, function, bytes.
    unreported: Vec<(String, FuncId, usize)>,
    /// `--print-ir-after` and `--time-passes`.
    diagnostics: Diagnostics,
}

/// What [`CodeGenerator::listing`] shows (`tally disasm --show`): machine code differs from
/// one target to the next, while the IR does not, so fixtures compare the IR alone.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ListingParts {
    /// Tally's IR with its frame states (the optimizing tier).
    pub tally_ir: bool,
    /// Cranelift's IR, each instruction marked with its bytecode index.
    pub ir: bool,
    /// The machine code's ranges by bytecode index and its instructions.
    pub machine: bool,
}

impl ListingParts {
    /// Every part.
    pub const ALL: ListingParts = ListingParts {
        tally_ir: true,
        ir: true,
        machine: true,
    };
}

impl CraneliftCompiler {
    /// The compiler of optimizing level `tier`.
    pub(crate) fn new(tier: Tier) -> Result<CraneliftCompiler, String> {
        // The quick level takes Cranelift without its optimizations (no e-graph pass, no
        // alias analysis): most of its speed comes from Tally's IR.
        let opt_level = match tier {
            Tier::Quick => "none",
            Tier::Opt => "speed",
            Tier::Baseline => return Err("the baseline tier is the template compiler".into()),
            Tier::Interp => return Err("the interpreter is not a compiler".into()),
        };
        let mut flags = settings::builder();
        let set = |flags: &mut settings::Builder, k: &str, v: &str| {
            flags
                .set(k, v)
                .map_err(|e| format!("cranelift setting {k}={v}: {e}"))
        };
        set(&mut flags, "opt_level", opt_level)?;
        // Cranelift's IR verifier costs a tenth of compile time; debug builds (and so the test
        // suite's) keep it, release builds trust the translator.
        if !cfg!(debug_assertions) {
            set(&mut flags, "enable_verifier", "false")?;
        }
        // Frame pointers, so native profilers can walk through compiled code.
        set(&mut flags, "preserve_frame_pointers", "true")?;
        // Machine blocks, so the pc map can place the code Cranelift adds (moves, constants,
        // split edges) on the bytecode it serves (`pc_map`).
        set(&mut flags, "machine_code_cfg_info", "true")?;
        let isa_builder =
            cranelift_native::builder().map_err(|e| format!("no code generator here: {e}"))?;
        let isa = isa_builder
            .finish(settings::Flags::new(flags))
            .map_err(|e| format!("cannot set up the code generator: {e}"))?;
        let module = JITModule::new(JITBuilder::with_isa(isa, default_libcall_names()));
        let context = module.make_context();
        Ok(CraneliftCompiler {
            tier,
            module,
            context,
            builder_context: FunctionBuilderContext::new(),
            shared_adapters: std::collections::HashMap::new(),
            level: None,
            unreported: Vec::new(),
            diagnostics: Diagnostics::default(),
            listing_parts: ListingParts::ALL,
        })
    }

    /// Makes later listings show only `parts` (all by default).
    pub(crate) fn set_listing_parts(&mut self, parts: ListingParts) {
        self.listing_parts = parts;
    }

    /// Makes later compiles (and listings) report what `diagnostics` asks.
    pub(crate) fn set_diagnostics(&mut self, diagnostics: Diagnostics) {
        self.diagnostics = diagnostics;
    }

    /// The bytes of machine code of the function just defined from the context.
    fn defined_size(&self) -> usize {
        self.context
            .compiled_code()
            .map_or(0, |c| c.code_info().total_size as usize)
    }

    /// Defines `id` from the context's function (Cranelift compiles it, the module takes its
    /// code); the module's own part is timed apart from Cranelift's passes.
    fn define(&mut self, id: FuncId) -> Result<(), String> {
        let cranelift_before = CraneliftTiming::so_far();
        let started = Instant::now();
        self.module
            .define_function(id, &mut self.context)
            .map_err(|e| format!("{e:?}"))?;
        let cranelift = CraneliftTiming::so_far().saturating_sub(cranelift_before);
        let module = started.elapsed().saturating_sub(cranelift);
        self.diagnostics.add(Stage::Module, "define", module);
        Ok(())
    }
}

/// What writing a function made besides it: its IR and what lowering it made.
struct Built(Box<tally_ir::Function>, crate::optimizing::Lowered);

/// What every function a compiler writes is written against.
#[derive(Clone, Copy)]
struct BuildEnv<'a> {
    module: &'a JITModule,
    layout: &'a Layout,
    diagnostics: &'a Diagnostics,
    level: &'a Level,
}

/// Writes `code`'s function into `context` (signature, name, body), timing and printing
/// what `diagnostics` asks.
fn build(
    env: &BuildEnv,
    builder_context: &mut FunctionBuilderContext,
    context: &mut Context,
    request: &CompileRequest,
) -> Result<Built, String> {
    let BuildEnv {
        module,
        layout,
        diagnostics,
        level,
    } = *env;
    context.func.signature = entry_signature(module);
    context.func.name = UserFuncName::user(0, request.code.id);
    let ir = crate::optimizing::ir_of(request, diagnostics)?;
    let lowered = diagnostics.timed(Stage::Lowering, "lower", || {
        crate::optimizing::lower(
            &mut context.func,
            builder_context,
            module,
            request,
            layout,
            &ir,
            level,
        )
    })?;
    if let Some(times) = &diagnostics.times {
        times.add_volume(lowered.volume.iter().map(|(&what, &n)| (what, n)));
    }
    Ok(Built(Box::new(ir), lowered))
}

/// The compiled function's pc map ([`pc_map::pc_map`]) from Cranelift's source-location
/// ranges and machine blocks.
fn pc_map(compiled: &cranelift_codegen::CompiledCode) -> Vec<(u32, Option<u32>)> {
    let segments: Vec<pc_map::Segment> = compiled
        .buffer
        .get_srclocs_sorted()
        .iter()
        .map(|l| pc_map::Segment {
            start: l.start,
            end: l.end,
            loc: (!l.loc.is_default()).then(|| l.loc.bits()),
        })
        .collect();
    pc_map::pc_map(
        &segments,
        &compiled.bb_starts,
        compiled.code_info().total_size,
    )
}

/// `EntryPoint`'s signature: (vm, frame, bp, resume) -> status.
pub(crate) fn entry_signature(module: &JITModule) -> Signature {
    let mut sig = module.make_signature();
    for t in [types::I64, types::I64, types::I64, types::I32] {
        sig.params.push(AbiParam::new(t));
    }
    sig.returns.push(AbiParam::new(types::I32));
    sig
}

impl CraneliftCompiler {
    /// Makes what the tier's bodies are lowered with ([`Level`]) the first time it
    /// compiles: for the optimizing tier the send probes (`optimizing::probe`, every shape
    /// at once: a function's lowering calls them by address).
    fn prepare_level(&mut self, layout: &Layout) -> Result<(), String> {
        if self.level.is_some() {
            return Ok(());
        }
        let column = self.tier.profile_tier().column() as u8;
        let mut ids = Vec::new();
        for shape in ProbeShape::all() {
            self.module.clear_context(&mut self.context);
            let started = Instant::now();
            crate::optimizing::lower_send_probe(
                &mut self.context.func,
                &mut self.builder_context,
                shape,
                layout,
                self.module.target_config(),
                self.module.isa().default_call_conv(),
            );
            self.diagnostics
                .add(Stage::Lowering, "send probes", started.elapsed());
            let id = self
                .module
                .declare_anonymous_function(&self.context.func.signature.clone())
                .map_err(|e| e.to_string())?;
            self.define(id)?;
            let size = self.defined_size();
            self.unreported.push((shape.name(), id, size));
            ids.push((shape, id));
        }
        self.module
            .finalize_definitions()
            .map_err(|e| e.to_string())?;
        let probes = SendProbes {
            addresses: ids
                .into_iter()
                .map(|(shape, id)| (shape, self.module.get_finalized_function(id) as usize))
                .collect(),
        };
        self.level = Some(Level { column, probes });
        Ok(())
    }

    /// The adapter the dispatcher enters every body of `shape` without loop-head entries
    /// through, made at its first use.
    fn shared_adapter(&mut self, shape: AdapterShape, layout: &Layout) -> Result<FuncId, String> {
        if let Some(&id) = self.shared_adapters.get(&shape) {
            return Ok(id);
        }
        let id = self.define_adapter(shape, layout, AdapterBody::OfFrame, &[], u32::MAX)?;
        self.shared_adapters.insert(shape, id);
        let kind = if shape.is_block { "block" } else { "method" };
        let name = format!("adapter:{kind}{}", shape.argc);
        let size = self.defined_size();
        self.unreported.push((name, id, size));
        Ok(id)
    }

    /// Defines an adapter (`optimizing::lower_adapter`) calling `body` (a function of this
    /// module, or the frame's), entering at the loop heads `osr`; `name` numbers it.
    fn define_adapter(
        &mut self,
        shape: AdapterShape,
        layout: &Layout,
        body: AdapterBody<FuncId>,
        osr: &[u32],
        name: u32,
    ) -> Result<FuncId, String> {
        self.module.clear_context(&mut self.context);
        self.context.func.signature = entry_signature(&self.module);
        self.context.func.name = UserFuncName::user(1, name);
        let body = match body {
            AdapterBody::Known(f) => {
                AdapterBody::Known(self.module.declare_func_in_func(f, &mut self.context.func))
            }
            AdapterBody::OfFrame => AdapterBody::OfFrame,
        };
        let started = Instant::now();
        crate::optimizing::lower_adapter(
            &mut self.context.func,
            &mut self.builder_context,
            shape,
            layout,
            body,
            osr,
            self.module.target_config(),
            self.module.isa().default_call_conv(),
        );
        self.diagnostics
            .add(Stage::Lowering, "adapter", started.elapsed());
        let adapter = self
            .module
            .declare_anonymous_function(&self.context.func.signature.clone())
            .map_err(|e| e.to_string())?;
        self.define(adapter)?;
        Ok(adapter)
    }
}

/// The virtual closures and contexts `ir` holds (its dead code gone: each is held by a state).
fn never_made(ir: &tally_ir::Function) -> tally_vm::jit::NeverMade {
    let mut out = tally_vm::jit::NeverMade::default();
    for block in &ir.blocks {
        for &i in &block.insts {
            match ir.insts[i.index()].kind {
                tally_ir::InstKind::VirtualBlock { .. } => out.closures += 1,
                tally_ir::InstKind::VirtualContext { .. } => out.contexts += 1,
                _ => {}
            }
        }
    }
    out
}

impl CodeGenerator for CraneliftCompiler {
    fn tier(&self) -> Tier {
        self.tier
    }

    fn compile(&mut self, request: &CompileRequest, layout: &Layout) -> Result<NativeCode, String> {
        let own = request.code.ops.len();
        if own > MAX_OPTIMIZED_BYTECODES {
            return Err(format!(
                "{own} bytecodes, beyond the {MAX_OPTIMIZED_BYTECODES} the optimizing tier compiles"
            ));
        }
        let _timing = self.diagnostics.time_cranelift();
        self.prepare_level(layout)?;
        self.module.clear_context(&mut self.context);
        let env = BuildEnv {
            module: &self.module,
            layout,
            diagnostics: &self.diagnostics,
            level: self.level.as_ref().expect("prepared"),
        };
        let Built(ir, mut lowered) =
            build(&env, &mut self.builder_context, &mut self.context, request).inspect_err(
                |_| {
                    // A lowering that stopped half way leaves the builder's state behind: the next
                    // compile must not start from it.
                    self.builder_context = FunctionBuilderContext::new();
                },
            )?;
        let sig = self.context.func.signature.clone();
        let id = self
            .module
            .declare_anonymous_function(&sig)
            .map_err(|e| e.to_string())?;
        self.define(id)?;
        let started = Instant::now();
        let (size, pc_map) = match self.context.compiled_code() {
            Some(c) => {
                crate::optimizing::fill_safepoints(c, &mut lowered)?;
                (c.code_info().total_size as usize, pc_map(c))
            }
            None => return Err("Cranelift kept no compiled code".into()),
        };
        self.diagnostics
            .add(Stage::Module, "pc map and stack maps", started.elapsed());
        // The body is called directly by native code; the dispatcher enters it through an
        // adapter with the `EntryPoint` signature.
        let osr_entries: Vec<u32> = ir.osr_entries().iter().map(|o| o.bci).collect();
        let shape = AdapterShape::of(request.code);
        let adapter = if osr_entries.is_empty() {
            // A body without loop-head entries shares its shape's adapter, which calls the
            // body installed with it: one compile less per method.
            self.shared_adapter(shape, layout)?
        } else {
            let body = AdapterBody::Known(id);
            self.define_adapter(shape, layout, body, &osr_entries, request.code.id)?
        };
        let started = Instant::now();
        self.module
            .finalize_definitions()
            .map_err(|e| e.to_string())?;
        self.diagnostics
            .add(Stage::Module, "finalize", started.elapsed());
        let direct = Some(self.module.get_finalized_function(id) as usize);
        let entry_address = self.module.get_finalized_function(adapter);
        // SAFETY: the adapter was declared with the `EntryPoint` signature
        // (`entry_signature`, the platform's C calling convention) and is finalized.
        let entry = unsafe { std::mem::transmute::<*const u8, EntryPoint>(entry_address) };
        let (speculations, safepoints, scopes, never_made) = (
            lowered.speculations,
            Some(lowered.table),
            crate::optimizing::inline_scopes(&ir),
            never_made(&ir),
        );
        let shared = std::mem::take(&mut self.unreported)
            .into_iter()
            .map(|(name, id, size)| SharedCode {
                name,
                start: self.module.get_finalized_function(id) as usize,
                size,
            })
            .collect();
        Ok(NativeCode {
            shared,
            entry,
            size,
            pc_map,
            speculations,
            safepoints,
            direct,
            code_start: direct,
            osr_entries,
            scopes,
            never_made,
        })
    }

    fn listing(&mut self, request: &CompileRequest, layout: &Layout) -> Result<String, String> {
        use std::fmt::Write as _;
        let parts = self.listing_parts;
        let tier = self.tier.name();
        let _timing = self.diagnostics.time_cranelift();
        self.prepare_level(layout)?;
        let mut context = self.module.make_context();
        context.set_disasm(parts.machine);
        let level = self.level.as_ref().expect("prepared");
        let env = BuildEnv {
            module: &self.module,
            layout,
            diagnostics: &self.diagnostics,
            level,
        };
        let built = build(&env, &mut self.builder_context, &mut context, request)?;
        let mut names = address_names(layout);
        names.extend(
            level
                .probes
                .addresses
                .iter()
                .map(|&(shape, address)| (shape.name(), address)),
        );
        let mut out = String::new();
        if parts.tally_ir {
            let Built(ir, _) = &built;
            let _ = writeln!(
                out,
                "--- {tier}: Tally IR (vN: values; fsN: frame states, what deoptimization \
                 rebuilds; @N: bytecode index)"
            );
            out.push_str(&tally_ir::print::print(
                ir,
                &crate::optimizing::RequestNames(request),
            ));
        }
        if parts.ir {
            let _ = writeln!(
                out,
                "--- {tier}: Cranelift IR (@N: the bytecode index an instruction comes from; \
                 stub:NAME and addr:NAME stand for addresses)"
            );
            // Shared exits are marked `@exit` in the column of bytecode indices.
            let mut ir = context
                .func
                .display()
                .to_string()
                .replace(&format!("@{:x}", pc_map::SHARED_EXIT), "@exit    ");
            for (name, address) in &names {
                ir = replace_token(&ir, &Imm64::new(*address as i64).to_string(), name);
            }
            out.push_str(&ir);
        }
        // Compiled even when only the IR is shown: a listing never shows IR that fails to
        // compile (or, in debug builds, to verify).
        let compiled = context
            .compile(self.module.isa(), &mut Default::default())
            .map_err(|e| format!("{:?}", e.inner))?;
        if !parts.machine {
            return Ok(out);
        }
        let _ = writeln!(
            out,
            "--- {tier}: machine code ({} bytes), by bytecode index",
            compiled.code_info().total_size
        );
        for loc in compiled.buffer.get_srclocs_sorted() {
            if !loc.loc.is_default() {
                let at = match loc.loc.bits() {
                    pc_map::SHARED_EXIT => "exit".to_string(),
                    bci => bci.to_string(),
                };
                let _ = writeln!(out, "  {:#06x}..{:#06x}  @{at}", loc.start, loc.end);
            }
        }
        if let Some(vcode) = &compiled.vcode {
            let _ = writeln!(out, "--- {tier}: machine instructions");
            // Where the target loads an address whole (x86-64's `movabsq $0x…`); targets
            // that build it piecewise show it raw.
            let mut vcode = vcode.clone();
            for (name, address) in &names {
                vcode = replace_token(&vcode, &format!("{address:#x}"), name);
            }
            out.push_str(&vcode);
        }
        Ok(out)
    }
}

/// The addresses compiled code embeds (stubs, the yieldpoint flag, the unlog bits, the bump pointer), with the names listings
/// print for them: the addresses change from run to run (ASLR), and a name says more.
pub(crate) fn address_names(layout: &Layout) -> Vec<(String, usize)> {
    let mut names: Vec<(String, usize)> = layout
        .stubs
        .all()
        .iter()
        .map(|stub| (format!("stub:{}", stub.name()), stub.address()))
        .collect();
    names.push(("addr:yieldpoint_flag".into(), layout.yieldpoint_flag));
    if let Some(table) = layout.unlog_table {
        names.push(("addr:unlog_table".into(), table as usize));
    }
    if let Some(a) = &layout.alloc {
        names.push(("addr:bump_pointer".into(), a.bump_pointer));
    }
    names
}

/// `text` with every occurrence of `from` that is a whole token (not part of a longer name or
/// number: Cranelift writes `0x55a9_d136_2420`, so `_` counts as part of one) replaced by `to`.
pub(crate) fn replace_token(text: &str, from: &str, to: &str) -> String {
    let part_of_token = |c: char| c.is_ascii_alphanumeric() || c == '_';
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find(from) {
        out.push_str(&rest[..at]);
        let before = out.chars().next_back();
        let after = rest[at + from.len()..].chars().next();
        if before.is_some_and(part_of_token) || after.is_some_and(part_of_token) {
            out.push_str(from);
        } else {
            out.push_str(to);
        }
        rest = &rest[at + from.len()..];
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::replace_token;

    #[test]
    fn only_whole_tokens_are_replaced() {
        let ir = "v1 = iconst.i64 0x55a9_d136_2420\n\
                  call_indirect sig1, v1(v0)  ; v1 = 0x55a9_d136_2420, v2 = 72\n\
                  v3 = iconst.i64 0x1_55a9_d136_2420\n\
                  v4 = iconst.i64 0x55a9_d136_24201";
        assert_eq!(
            replace_token(ir, "0x55a9_d136_2420", "stub:send"),
            "v1 = iconst.i64 stub:send\n\
             call_indirect sig1, v1(v0)  ; v1 = stub:send, v2 = 72\n\
             v3 = iconst.i64 0x1_55a9_d136_2420\n\
             v4 = iconst.i64 0x55a9_d136_24201"
        );
        assert_eq!(
            replace_token(
                "movabsq $0x55a9d1362420, %rax",
                "0x55a9d1362420",
                "stub:send"
            ),
            "movabsq $stub:send, %rax"
        );
    }
}
