//! The tier's driver: a request's IR built and optimized (`tally_ir`), then lowered into a
//! Cranelift function; and what lowering records besides the code (the safepoint table,
//! the inline scopes of the pc map).

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use cranelift_codegen::ir::{AbiParam, Function, Signature};
use cranelift_frontend::{FunctionBuilder, FunctionBuilderContext};
use cranelift_jit::JITModule;
use cranelift_module::Module;
use tally_vm::jit::{CompileRequest, Layout, SafepointMap, SafepointTable, Stub};

use super::entry::enter;
use super::lowerer::{IrMap, Lowerer, Recorded, Signatures, WaysOut};
use super::{I32, I64};
use crate::diagnostics::{Diagnostics, PassWatch, BUILD_PHASE};
use crate::stub_calls::StubSignatures;
use tally_vm::jit::Stage;

/// The IR of `request`'s code, optimized: what the tier lowers, and what listings show.
/// `diagnostics` times the build and each pass, and prints the IR after the phases it names.
pub(crate) fn ir_of(
    request: &CompileRequest,
    diagnostics: &Diagnostics,
) -> Result<tally_ir::Function, String> {
    let code = request.code;
    let mut f = diagnostics.timed(Stage::IrBuild, BUILD_PHASE, || {
        tally_ir::build::build(code, &request.name, request, request.osr)
    })?;
    diagnostics.after_phase(BUILD_PHASE, 0, request, &f);
    let mut watch = PassWatch {
        diagnostics,
        request,
        started: None,
        steps: 0,
    };
    tally_ir::passes::optimize(&mut f, code, &|id| request.callee(id), &mut watch)?;
    Ok(f)
}

/// What listings call codes and sites: the request's names, else their ids.
pub(crate) struct RequestNames<'a>(pub &'a CompileRequest);

impl tally_ir::print::Names for RequestNames<'_> {
    fn code(&self, id: u32) -> String {
        self.0
            .code_name(id)
            .map_or_else(|| format!("code{id}"), str::to_string)
    }

    fn site(&self, site: u32) -> String {
        self.0
            .selector(site)
            .map_or_else(|| format!("site{site}"), str::to_string)
    }
}

/// What a level of the tier lowers with: the profile's column of its tier, and its
/// compiler's shared send probes.
pub(crate) struct Level {
    pub column: u8,
    pub probes: super::probe::SendProbes,
}

/// What lowering made besides the function.
pub(crate) struct Lowered {
    /// The safepoint table the code refers to, filled by [`fill_safepoints`] once compiled.
    pub table: Arc<SafepointTable>,
    /// Sites the code speculates at (guards that deoptimize, class switches on what the site
    /// saw).
    pub speculations: u32,
    /// Safepoints made (the table's length once filled).
    pub safepoints: u32,
    /// For each safepoint, the activations inlined into the frame's that it is made from.
    pub inlined_at: Vec<Vec<(u32, u32)>>,
    /// Cranelift instructions written, by what they lower: the entry, each IR instruction
    /// kind, the exits (`--time-passes` sums them over the run).
    pub volume: BTreeMap<&'static str, u64>,
    /// The plans of the exits, for the table once the code is compiled.
    pub exits: Vec<tally_vm::jit::ExitPlan>,
}

/// The signature of a body: `(vm, caller, receiver, arguments…[, closure]) -> Value`
/// (`caller` a [`super::Caller`]'s code).
pub(crate) fn body_signature(
    call_conv: cranelift_codegen::isa::CallConv,
    argc: usize,
    is_block: bool,
) -> Signature {
    let mut sig = Signature::new(call_conv);
    sig.params.push(AbiParam::new(I64));
    sig.params.push(AbiParam::new(I32));
    for _ in 0..=argc + usize::from(is_block) {
        sig.params.push(AbiParam::new(I64));
    }
    sig.returns.push(AbiParam::new(I64));
    sig
}

/// Writes the body of `ir`'s function into `func`: what the dispatcher runs through the
/// adapter ([`lower_adapter`]) and what native code calls directly.
/// `Lowered::volume`'s row for the function's entry: the prologue, the frame record, the
/// loop-head entries.
pub(crate) const ENTRY_VOLUME: &str = "entry";
/// Its row for the ways out written after the body: the exits that rebuild interpreter
/// frames, their shared tails, the hand-over and the epilogue.
pub(crate) const EXITS_VOLUME: &str = "exits";

pub(crate) fn lower(
    func: &mut Function,
    builder_context: &mut FunctionBuilderContext,
    module: &JITModule,
    request: &CompileRequest,
    layout: &Layout,
    ir: &tally_ir::Function,
    level: &Level,
) -> Result<Lowered, String> {
    let table = Arc::new(SafepointTable::new(level.column));
    let code = request.code;
    let call_conv = module.isa().default_call_conv();
    func.signature = body_signature(
        call_conv,
        code.num_args as usize,
        code.kind == tally_vm::compiler::CodeKind::Block,
    );
    let scope_codes = scope_codes(request, ir)?;
    let mut stubs = StubSignatures::new(func, call_conv, &first_stubs(&layout.stubs));
    let mut b = FunctionBuilder::new(func, builder_context);
    let entered = enter(&mut b, &mut stubs, layout, request, ir, &table);
    let entry_volume = b.func.dfg.num_insts() as u64;
    let mut l = Lowerer {
        b,
        layout,
        request,
        ir,
        act: entered.act,
        sigs: Signatures {
            stubs,
            bodies: HashMap::new(),
            probes: HashMap::new(),
            call_conv,
        },
        map: IrMap {
            values: vec![None; ir.values.len()],
            blocks: entered.blocks,
            scope_codes,
            scope: tally_ir::ScopeId(0),
        },
        out: WaysOut {
            exits: HashMap::new(),
            exit_scopes: HashMap::new(),
            plans: Vec::new(),
            table: Arc::as_ptr(&table) as usize,
            leave: None,
            hand_over: None,
            ret: None,
            epilogue: entered.epilogue,
        },
        record: Recorded::default(),
        probes: &level.probes,
        column: usize::from(level.column),
    };
    l.record.volume.insert(ENTRY_VOLUME, entry_volume);
    let before = l.instructions_so_far();
    l.start(entered.operands)?;
    l.count_volume(ENTRY_VOLUME, before);
    // Dominators first, so every value is lowered before its uses.
    for id in tally_ir::dom::reverse_postorder(ir) {
        l.block(id)?;
    }
    let before = l.instructions_so_far();
    l.finish()?;
    l.count_volume(EXITS_VOLUME, before);
    l.b.seal_all_blocks();
    l.b.finalize(module.target_config());
    Ok(Lowered {
        table,
        speculations: l.record.speculated.len() as u32,
        safepoints: l.record.safepoints,
        inlined_at: l.record.inlined_at,
        volume: l.record.volume,
        exits: l.out.plans,
    })
}

/// The code of each of `ir`'s scopes: the request's own, then the methods inlined.
fn scope_codes(
    request: &CompileRequest,
    ir: &tally_ir::Function,
) -> Result<Vec<&'static tally_vm::runtime::Code>, String> {
    if ir.scopes.len() as u32 > tally_vm::jit::MAX_SCOPES {
        return Err(format!("{} inline scopes, too many", ir.scopes.len()));
    }
    ir.scopes
        .iter()
        .enumerate()
        .map(|(k, s)| {
            if k == 0 {
                Ok(request.code)
            } else {
                request.callee(s.code).ok_or_else(|| {
                    format!(
                        "an inlined code {}, which the request does not name",
                        s.code
                    )
                })
            }
        })
        .collect()
}

/// The scopes a version's pc map names (`NativeCode::scopes`).
pub(crate) fn inline_scopes(ir: &tally_ir::Function) -> Vec<tally_vm::jit::InlineScope> {
    if ir.scopes.len() < 2 {
        return Vec::new();
    }
    ir.scopes
        .iter()
        .map(|s| tally_vm::jit::InlineScope {
            code: s.code,
            parent: s.parent.map(|(p, bci)| (p.0, bci)),
        })
        .collect()
}

/// Fills `table` from the compiled code's stack maps, each found by the safepoint number
/// its call is tagged with, and with the exits' plans.
pub(crate) fn fill_safepoints(
    compiled: &cranelift_codegen::CompiledCode,
    lowered: &mut Lowered,
) -> Result<(), String> {
    lowered
        .table
        .set_exits(std::mem::take(&mut lowered.exits))?;
    let mut by_offset: HashMap<u32, u32> = HashMap::new();
    for tags in compiled.buffer.debug_tags() {
        for tag in tags.tags {
            if let cranelift_codegen::ir::DebugTag::User(k) = tag {
                by_offset.insert(tags.offset, *k);
            }
        }
    }
    // A safepoint without a stack map has nothing live across it: its default map is empty.
    let mut maps: Vec<SafepointMap> = (0..lowered.safepoints as usize)
        .map(|k| SafepointMap {
            inlined: lowered.inlined_at.get(k).cloned().unwrap_or_default(),
            ..SafepointMap::default()
        })
        .collect();
    for (offset, span, map) in compiled.buffer.user_stack_maps() {
        let Some(&k) = by_offset.get(offset) else {
            continue;
        };
        let entry = maps
            .get_mut(k as usize)
            .ok_or_else(|| format!("a stack map for safepoint {k}, which was not made"))?;
        entry.span = *span;
        entry.offsets = map.entries().map(|(_, o)| o).collect();
    }
    lowered.table.set(maps)
}

/// The stubs whose signatures the tier imports first, in this order (so that listings
/// number them the same in every function): one of each shape it calls.
fn first_stubs(stubs: &tally_vm::jit::Stubs) -> [Stub; 12] {
    [
        stubs.ir_send,
        stubs.ir_call_block,
        stubs.ir_make_block,
        stubs.back_edge,
        stubs.write_barrier,
        stubs.ir_new_context,
        stubs.ir_interpret,
        stubs.ir_left,
        stubs.string_equal,
        stubs.ir_new_indexable,
        stubs.method_hook,
        stubs.double_sin,
    ]
}
