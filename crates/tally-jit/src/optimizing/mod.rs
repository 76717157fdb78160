//! The optimizing tier: bytecode → `tally_ir` → Cranelift. Every SOM value of an activation is an
//! SSA value (a register or a spill slot Cranelift chooses); the value stack is written only
//! where the interpreter takes the activation over (a frame state's exit) and read only at
//! entry.
//!
//! Contract with the VM (`tally_vm::jit`):
//! - Each version is two functions. The body, `(vm, framed, receiver, arguments…[, closure])
//!   -> Value`, is what native code calls directly (`framed` 0: it pushes its frame, or,
//!   at the frame stack's limit, without value-stack room or native stack, makes the call
//!   through the stub instead) and what the adapter runs for the dispatcher (`framed` 1:
//!   the top frame is set up, its locals and context read from it; `2 + k`: the frame
//!   stopped at the `k`-th loop head with an on-stack-replacement entry, whose locals,
//!   operand stack and context the body reads from it; [`FRESH_FROM_COMPILED`]: a frame
//!   the baseline tier's code pushed for a call, which the body counts and hooks as a
//!   direct call's). The adapter is the `EntryPoint`: a frame left at any other `ip` but 0
//!   goes back to the interpreter (`Status::Interpret`).
//! - At entry the body writes its frame pointer and its version's `SafepointTable` into the
//!   frame's `NativeActivation`; before each call that may collect it writes the call's
//!   safepoint number there (and the frame's `ip`, one past the call, as the interpreter
//!   does). Every reference live across such a call is in Cranelift's stack map of the call,
//!   whose slots the collector updates; the body clears `fp` on every way out.
//! - Calls: a known method, a closure's block, or a send whose inline cache holds a method
//!   with a body go straight to that body; the rest go through the `ir_*` stubs, which run
//!   the callee to completion. `Value::NONE` from either means leave (an error parked, a
//!   non-local return that popped the frame, or the frame restarted).
//! - A guard that fails, or an instruction the tier leaves to the interpreter, writes the
//!   frame its state describes (locals and operand stack into the value stack, `ip`); for
//!   the dispatcher the body leaves the status (`Status::Deopt`: the speculation is recorded
//!   and the version invalidated; `Status::Interpret`) in `Layout::exit_status`, for a direct
//!   call `ir_interpret` runs the frame in the interpreter to its return. One exit per frame
//!   state and status, shared by its guards, each ending in the function's one hand-over.

mod alloc;
mod floats;
mod insts;
mod sends;

use std::collections::HashMap;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;

use cranelift_codegen::ir::condcodes::IntCC;
use cranelift_codegen::ir::{
    types, AbiParam, Block, Function, InstBuilder, MemFlagsData, SigRef, Signature, SourceLoc,
    TrapCode, Value,
};
use cranelift_frontend::{FunctionBuilder, FunctionBuilderContext};
use cranelift_jit::JITModule;
use cranelift_module::Module;
use tally_ir::{BlockId, FrameStateId, Resume, Terminator, Ty, ValueId};
use tally_vm::jit::{
    CompileRequest, DeoptReason, Layout, SafepointMap, SafepointTable, Status, Stub,
};

use crate::stub_calls::{self, StubSignatures};
use tally_vm::runtime::{HOOK_AT_ENTRY, HOOK_AT_EXIT};
use tally_vm::tally_profile::gc_hints::PointKind;

const I64: types::Type = types::I64;
const I32: types::Type = types::I32;
const I8: types::Type = types::I8;
const NIL: i64 = tally_heap::Value::NIL.0 as i64;
/// The profile's (and `--count-calls`') column of this tier.
const TIER_COLUMN: usize = tally_vm::tally_profile::Tier::Optimizing.column();

/// `framed` for a call from compiled code of another tier (the baseline tier's direct sends),
/// which pushed the frame and calls the adapter with `resume` 0: a frame like the
/// dispatcher's, but a call nobody has counted or hooked yet. Any other value than 0, 1 and
/// the loop-head entries' 2 + k.
pub(crate) const FRESH_FROM_COMPILED: i64 = 0x4000_0000;

/// The IR of `request`'s code, optimized: what the tier lowers, and what listings show.
pub(crate) fn ir_of(request: &CompileRequest) -> Result<tally_ir::Function, String> {
    let code = request.code;
    let mut f = tally_ir::build::build(code, &request.name, request, request.osr)?;
    tally_ir::passes::optimize(
        &mut f,
        code,
        &|id| request.callee(id),
        &mut tally_ir::passes::Unobserved,
    )?;
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
}

/// The signature of a body: `(vm, framed, receiver, arguments…[, closure]) -> Value`.
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
pub(crate) fn lower(
    func: &mut Function,
    builder_context: &mut FunctionBuilderContext,
    module: &JITModule,
    request: &CompileRequest,
    layout: &Layout,
    ir: &tally_ir::Function,
) -> Result<Lowered, String> {
    let table = Arc::new(SafepointTable::new());
    let code = request.code;
    let call_conv = module.isa().default_call_conv();
    func.signature = body_signature(
        call_conv,
        code.num_args as usize,
        code.kind == tally_vm::compiler::CodeKind::Block,
    );
    let sigs = StubSignatures::new(func, call_conv, &first_stubs(&layout.stubs));
    let b = FunctionBuilder::new(func, builder_context);
    let mut l = Lowerer {
        b,
        layout,
        request,
        ir,
        sigs,
        bodies: HashMap::new(),
        call_conv,
        vm: Value::from_u32(0),
        framed: Value::from_u32(0),
        params: Vec::new(),
        frame: Value::from_u32(0),
        bp: Value::from_u32(0),
        slots: Value::from_u32(0),
        native: Value::from_u32(0),
        values: vec![None; ir.values.len()],
        blocks: Vec::new(),
        exits: HashMap::new(),
        exit_scopes: HashMap::new(),
        outer_tails: HashMap::new(),
        leave: None,
        hand_over: None,
        ret: None,
        epilogue: None,
        safepoints: 0,
        inlined_at: Vec::new(),
        speculated: std::collections::BTreeSet::new(),
        scope_codes: scope_codes(request, ir)?,
        scope: tally_ir::ScopeId(0),
        exit_boxes: HashMap::new(),
    };
    l.entry(&table)?;
    // Dominators first, so every value is lowered before its uses.
    for id in tally_ir::dom::reverse_postorder(ir) {
        l.block(id)?;
    }
    l.finish()?;
    l.b.seal_all_blocks();
    l.b.finalize(module.target_config());
    Ok(Lowered {
        table,
        speculations: l.speculated.len() as u32,
        safepoints: l.safepoints,
        inlined_at: l.inlined_at,
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
/// its call is tagged with.
pub(crate) fn fill_safepoints(
    compiled: &cranelift_codegen::CompiledCode,
    lowered: &Lowered,
) -> Result<(), String> {
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

/// How an exit hands the activation over.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
enum ExitKind {
    /// A speculation failed (the reason is the exit block's parameter).
    Deopt,
    /// The interpreter does the instruction (no speculation failed).
    Interpret,
    /// A yieldpoint's stub answered this status (an error, or frames to run).
    Status,
    /// A call restarted the frame (`Block>>restart`): its receiver, arguments and locals
    /// are written, an empty operand stack; `ip` is as the primitive left it (0).
    Restart,
}

struct Lowerer<'a, 'f> {
    b: FunctionBuilder<'f>,
    layout: &'a Layout,
    request: &'a CompileRequest,
    ir: &'a tally_ir::Function,
    sigs: StubSignatures,
    /// The bodies' signatures, by argument count (methods, then blocks): direct calls.
    bodies: HashMap<(usize, bool), SigRef>,
    call_conv: cranelift_codegen::isa::CallConv,
    /// The entry point's `*mut Vm`, the frame, its base (slot index) and the address of its
    /// first value-stack slot, and its `NativeActivation`.
    vm: Value,
    /// 1 (an I32) when the dispatcher runs the body through the adapter, 0 for a direct call.
    framed: Value,
    /// The receiver and arguments as the body got them.
    params: Vec<Value>,
    frame: Value,
    bp: Value,
    slots: Value,
    native: Value,
    /// Each IR value's Cranelift value, once defined.
    values: Vec<Option<Value>>,
    /// Each IR block's Cranelift block.
    blocks: Vec<Block>,
    /// The exit of each (frame state, kind): writes the frame and returns.
    exits: HashMap<(FrameStateId, ExitKind), Block>,
    /// The scope each exit's frame state is in (where its code is placed).
    exit_scopes: HashMap<FrameStateId, tally_ir::ScopeId>,
    /// The tail the exits of the code inlined at each call share (keyed by the caller's
    /// state), with the objects its frames hold that the exits make.
    outer_tails: HashMap<FrameStateId, (Block, Vec<tally_ir::ValueId>)>,
    /// Where a call that answered `Value::NONE` leaves.
    leave: Option<Block>,
    /// The end every exit shares once it has written its frame: hands the frame over with
    /// the status (its parameter).
    hand_over: Option<Block>,
    /// Where the returns go (`fill_ret`), and the bytecode index of the first.
    ret: Option<(Block, u32)>,
    /// The one block that returns from the function (`Lowerer::return_`).
    epilogue: Option<Block>,
    /// Safepoints numbered so far, and for each the activations inlined into the frame's
    /// that it is made from (innermost first, as `SafepointMap::inlined` keeps them).
    safepoints: u32,
    inlined_at: Vec<Vec<(u32, u32)>>,
    speculated: std::collections::BTreeSet<u32>,
    /// The code of each of the IR's scopes (the request's own first).
    scope_codes: Vec<&'static tally_vm::runtime::Code>,
    /// The scope of the instruction being lowered.
    scope: tally_ir::ScopeId,
    /// In the exit (or outer tail) being filled: the doubles its frames hold, boxed.
    exit_boxes: HashMap<ValueId, Value>,
}

fn flags() -> MemFlagsData {
    MemFlagsData::trusted()
}

impl Lowerer<'_, '_> {
    fn iconst(&mut self, ty: types::Type, v: i64) -> Value {
        self.b.ins().iconst(ty, v)
    }

    fn add_imm(&mut self, x: Value, imm: i64) -> Value {
        let ty = self.b.func.dfg.value_type(x);
        let c = self.b.ins().iconst(ty, imm);
        self.b.ins().iadd(x, c)
    }

    fn cmp_imm(&mut self, cc: IntCC, x: Value, imm: i64) -> Value {
        let ty = self.b.func.dfg.value_type(x);
        let c = self.b.ins().iconst(ty, imm);
        self.b.ins().icmp(cc, x, c)
    }

    fn and_imm(&mut self, x: Value, imm: i64) -> Value {
        let ty = self.b.func.dfg.value_type(x);
        let c = self.b.ins().iconst(ty, imm);
        self.b.ins().band(x, c)
    }

    fn ty_of(ty: Ty) -> types::Type {
        match ty {
            Ty::Word | Ty::Int => I64,
            Ty::Flag => I8,
            Ty::Float => types::F64,
        }
    }

    /// The Cranelift value of IR value `v`.
    fn val(&self, v: ValueId) -> Result<Value, String> {
        self.values[v.index()].ok_or_else(|| format!("{v} is used before it is lowered"))
    }

    /// Defines IR value `v` as `x`; a SOM value that may be a reference goes into the stack
    /// maps of the calls it lives across.
    fn define(&mut self, v: ValueId, x: Value) {
        // A constant immediate (nil, true, false, a small integer, a symbol) is no reference:
        // kept out of the stack maps, it is neither spilled nor reloaded.
        let immediate = self.ir.const_value(v).is_some_and(|c| !c.is_ref());
        if self.ir.ty(v) == Ty::Word && self.b.func.dfg.value_type(x) == I64 && !immediate {
            self.b.declare_value_needs_stack_map(x);
        }
        self.values[v.index()] = Some(x);
    }

    /// The body's entry. For the dispatcher (`framed` 1, through the adapter) the frame is
    /// the top one, set up; for a direct call (`framed` 0) this pushes it, after checking
    /// the frame stack's limit (a raised yieldpoint flag trips it), the value stack's room
    /// and the native stack, or else makes the call through the stub instead (which takes
    /// the interpreter's way in: the prologue hook, the stack-overflow error). Then it
    /// registers the native activation and jumps to the IR's entry.
    fn entry(&mut self, table: &Arc<SafepointTable>) -> Result<(), String> {
        let layout = self.layout;
        let code = self.request.code;
        let entry = self.b.create_block();
        self.b.append_block_params_for_function_params(entry);
        for _ in 0..self.ir.blocks.len() {
            let blk = self.b.create_block();
            self.blocks.push(blk);
        }
        self.b.switch_to_block(entry);
        self.b.set_srcloc(SourceLoc::new(0));
        let params = self.b.block_params(entry).to_vec();
        self.vm = params[0];
        self.framed = params[1];
        let operands = params[2..].to_vec();
        self.params = operands[..=code.num_args as usize].to_vec();
        for &p in &self.params {
            self.b.declare_value_needs_stack_map(p);
        }
        let vm = self.vm;
        let framed_blk = self.b.create_block();
        let direct_blk = self.b.create_block();
        let join = self.b.create_block();
        self.b.append_block_param(join, I64);
        self.b.append_block_param(join, I64);
        self.b
            .ins()
            .brif(self.framed, framed_blk, &[], direct_blk, &[]);

        self.b.switch_to_block(framed_blk);
        if layout.count_calls {
            // A fresh call from compiled code of another tier, which pushed the frame (the
            // dispatcher's frames are counted where the VM set them up).
            let fresh = self.cmp_imm(IntCC::Equal, self.framed, FRESH_FROM_COMPILED);
            let count = self.b.create_block();
            let counted = self.b.create_block();
            self.b.ins().brif(fresh, count, &[], counted, &[]);
            self.b.switch_to_block(count);
            crate::counters::count_call(&mut self.b, code, TIER_COLUMN);
            self.b.ins().jump(counted, &[]);
            self.b.switch_to_block(counted);
        }
        let frame_stack = self.b.ins().load(I64, flags(), vm, layout.frame_stack);
        let depth = self
            .b
            .ins()
            .load(I64, flags(), frame_stack, layout.frames_len);
        let frames = self
            .b
            .ins()
            .load(I64, flags(), frame_stack, layout.frames_base);
        let top = self.add_imm(depth, -1);
        let size = self.iconst(I64, layout.frame_size as i64);
        let offset = self.b.ins().imul(top, size);
        let frame = self.b.ins().iadd(frames, offset);
        let bp = self.b.ins().uload32(flags(), frame, layout.frame_bp);
        self.b.ins().jump(join, &[frame.into(), bp.into()]);

        self.b.switch_to_block(direct_blk);
        let c = &layout.calls;
        let frame_stack = self.b.ins().load(I64, flags(), vm, layout.frame_stack);
        let depth = self
            .b
            .ins()
            .load(I64, flags(), frame_stack, layout.frames_len);
        let limit = self.b.ins().load(I64, flags(), frame_stack, c.frames_limit);
        let below_limit = self.b.ins().icmp(IntCC::UnsignedLessThan, depth, limit);
        let stack_len = self.b.ins().load(I64, flags(), vm, layout.stack_len);
        let capacity = self.b.ins().load(I64, flags(), vm, c.stack_capacity);
        let needed = self.add_imm(stack_len, code.max_height as i64 + 1);
        let room = self
            .b
            .ins()
            .icmp(IntCC::UnsignedLessThanOrEqual, needed, capacity);
        let sp = self.b.ins().get_stack_pointer(I64);
        let native_limit = self.b.ins().load(I64, flags(), vm, c.native_stack_limit);
        let native_room = self
            .b
            .ins()
            .icmp(IntCC::UnsignedGreaterThan, sp, native_limit);
        let ok = self.b.ins().band(below_limit, room);
        let ok = self.b.ins().band(ok, native_room);
        let push = self.b.create_block();
        let slow = self.b.create_block();
        self.b.set_cold_block(slow);
        self.b.ins().brif(ok, push, &[], slow, &[]);

        self.b.switch_to_block(slow);
        let result = self.call_through_stub(&operands)?;
        self.return_(result);

        self.b.switch_to_block(push);
        let frames = self
            .b
            .ins()
            .load(I64, flags(), frame_stack, layout.frames_base);
        let size = self.iconst(I64, layout.frame_size as i64);
        let offset = self.b.ins().imul(depth, size);
        let frame = self.b.ins().iadd(frames, offset);
        // `code` and `ip` (0) in one store, `bp` and `mark` in another (`Frame`'s layout).
        let code_ip = self.iconst(I64, code.id as i64);
        self.b.ins().store(flags(), code_ip, frame, 0);
        if layout.count_calls {
            // A direct call (calls through the dispatcher or a stub are counted where the
            // VM sets up their frames).
            crate::counters::count_call(&mut self.b, code, TIER_COLUMN);
        }
        let mark = if layout.mark_frames {
            tally_vm::tally_profile::FrameMark::of(TIER_COLUMN as u8, false) as i64
        } else {
            0
        };
        let mark = self.iconst(I64, mark << 32);
        let bp_mark = self.b.ins().bor(stack_len, mark);
        self.b.ins().store(flags(), bp_mark, frame, layout.frame_bp);
        let is_block = code.kind == tally_vm::compiler::CodeKind::Block;
        let (ctx, closure) = if is_block {
            let closure = *operands.last().expect("a closure");
            let ctx = self.b.ins().load(
                I64,
                flags(),
                closure,
                insts::slot_offset(tally_vm::objects::block::CONTEXT),
            );
            (ctx, closure)
        } else {
            (self.iconst(I64, NIL), self.iconst(I64, 0))
        };
        self.b.ins().store(flags(), ctx, frame, layout.frame_ctx);
        self.b
            .ins()
            .store(flags(), closure, frame, layout.native.frame_closure);
        let depth = self.add_imm(depth, 1);
        self.b
            .ins()
            .store(flags(), depth, frame_stack, layout.frames_len);
        self.b.ins().jump(join, &[frame.into(), stack_len.into()]);

        self.b.switch_to_block(join);
        let jp = self.b.block_params(join).to_vec();
        self.frame = jp[0];
        self.bp = jp[1];
        let stack = self.b.ins().load(I64, flags(), vm, layout.stack_base);
        let eight = self.iconst(I64, 8);
        let bp_bytes = self.b.ins().imul(self.bp, eight);
        self.slots = self.b.ins().iadd(stack, bp_bytes);
        let frame_stack = self.b.ins().load(I64, flags(), vm, layout.frame_stack);
        let delta = self
            .b
            .ins()
            .load(I64, flags(), frame_stack, layout.native.delta);
        self.native = self.b.ins().iadd(self.frame, delta);
        let fp = self.b.ins().get_frame_pointer(I64);
        self.b
            .ins()
            .store(flags(), fp, self.native, layout.native.fp);
        let table_address = self.iconst(I64, Arc::as_ptr(table) as i64);
        self.b
            .ins()
            .store(flags(), table_address, self.native, layout.native.table);

        let ir_entry = self.ir.entry();
        let entry_params = &self.ir.blocks[ir_entry.index()].params;
        if operands.len() != entry_params.len() {
            return Err(format!(
                "the IR's entry takes {} values, the activation has {}",
                entry_params.len(),
                operands.len()
            ));
        }
        if code.hooks.load(Relaxed) & HOOK_AT_ENTRY != 0 {
            // The entry hook of a direct call or a fresh call from compiled code (the
            // dispatcher's frames had theirs where the interpreter set them up).
            let direct = self.b.create_block();
            let go_on = self.b.create_block();
            let is_direct = self.cmp_imm(IntCC::Equal, self.framed, 0);
            let fresh = self.cmp_imm(IntCC::Equal, self.framed, FRESH_FROM_COMPILED);
            let hook = self.b.ins().bor(is_direct, fresh);
            self.b.ins().brif(hook, direct, &[], go_on, &[]);
            self.b.switch_to_block(direct);
            self.method_hook(PointKind::Entry, 0);
            self.b.ins().jump(go_on, &[]);
            self.b.switch_to_block(go_on);
        }
        let target = self.blocks[ir_entry.index()];
        let args: Vec<_> = operands.into_iter().map(Into::into).collect();
        self.b.ins().jump(target, &args);
        Ok(())
    }

    /// The call of this method or block through the stub (the receiver and arguments, a
    /// block's closure last, as the body takes them): what a direct call that cannot push
    /// its frame does instead.
    fn call_through_stub(&mut self, operands: &[Value]) -> Result<Value, String> {
        let code = self.request.code;
        let is_block = code.kind == tally_vm::compiler::CodeKind::Block;
        // The stubs take a block's closure in the receiver's place.
        let words: Vec<Value> = if is_block {
            let closure = *operands.last().expect("a closure");
            std::iter::once(closure)
                .chain(operands[1..operands.len() - 1].iter().copied())
                .collect()
        } else {
            operands.to_vec()
        };
        let (stub, what) = if is_block {
            (self.layout.stubs.ir_call_block, None)
        } else {
            (self.layout.stubs.ir_call_method, Some(code.id))
        };
        let call = self.call_with_operands(stub, what, &words);
        Ok(self.b.inst_results(call)[0])
    }

    /// Calls `stub` with `words` (the receiver, or a block's closure, then the arguments)
    /// in a stack slot and their count, `what` (a site or code id) first when the stub takes
    /// one. Answers the call, for its result and its safepoint tag.
    fn call_with_operands(
        &mut self,
        stub: Stub,
        what: Option<u32>,
        words: &[Value],
    ) -> cranelift_codegen::ir::Inst {
        let slot = self
            .b
            .create_sized_stack_slot(cranelift_codegen::ir::StackSlotData::new(
                cranelift_codegen::ir::StackSlotKind::ExplicitSlot,
                8 * words.len() as u32,
                3,
            ));
        for (k, &w) in words.iter().enumerate() {
            let address = self.b.ins().stack_addr(I64, slot, 8 * k as i32);
            self.b.ins().store(flags(), w, address, 0);
        }
        let pointer = self.b.ins().stack_addr(I64, slot, 0);
        let argc = self.iconst(I32, words.len() as i64 - 1);
        let callee = stub_calls::address(&mut self.b, stub);
        let args = match what {
            Some(w) => {
                let w = self.iconst(I32, w as i64);
                vec![self.vm, w, pointer, argc]
            }
            None => vec![self.vm, pointer, argc],
        };
        stub_calls::call_at(&mut self.b, &mut self.sigs, callee, &args)
    }

    /// Lowers one IR block: its parameters, instructions and terminator.
    fn block(&mut self, id: BlockId) -> Result<(), String> {
        let ir = self.ir;
        let block = &ir.blocks[id.index()];
        let blk = self.blocks[id.index()];
        self.b.switch_to_block(blk);
        self.scope = block.scope;
        self.set_location(block.bci);
        for &p in &block.params {
            let x = self.b.append_block_param(blk, Self::ty_of(ir.ty(p)));
            self.define(p, x);
        }
        for &i in &block.insts {
            let inst = &ir.insts[i.index()];
            self.set_location(inst.bci);
            self.inst(inst)?;
        }
        let bci = block
            .insts
            .last()
            .map_or(block.bci, |&i| ir.insts[i.index()].bci);
        self.terminator(&block.term, bci)
    }

    fn edge_args(
        &self,
        e: &tally_ir::Edge,
    ) -> Result<Vec<cranelift_codegen::ir::BlockArg>, String> {
        e.args
            .iter()
            .map(|&a| self.val(a).map(Into::into))
            .collect()
    }

    /// Ends the block whose last instruction (or start) is at `bci`.
    fn terminator(&mut self, term: &Terminator, bci: u32) -> Result<(), String> {
        match term {
            Terminator::Jump(e) => {
                let args = self.edge_args(e)?;
                self.b.ins().jump(self.blocks[e.block.index()], &args);
            }
            Terminator::Branch {
                cond,
                then,
                otherwise,
            } => {
                let c = self.val(*cond)?;
                let t = self.edge_args(then)?;
                let o = self.edge_args(otherwise)?;
                self.b.ins().brif(
                    c,
                    self.blocks[then.block.index()],
                    &t,
                    self.blocks[otherwise.block.index()],
                    &o,
                );
            }
            Terminator::Return(v) => {
                let v = self.val(*v)?;
                if self.request.code.hooks.load(Relaxed) & HOOK_AT_EXIT != 0 {
                    self.method_hook(PointKind::Exit, bci);
                }
                let ret = self.ret(bci);
                self.b.ins().jump(ret, &[v.into()]);
            }
            Terminator::ReturnNonLocal { state, .. } | Terminator::Deopt(state) => {
                let exit = self.exit(*state, ExitKind::Interpret)?;
                self.b.ins().jump(exit, &[]);
            }
            Terminator::Enter { normal, osr } => {
                // `framed` 2 + k enters at the k-th loop head; 0 and 1 are new activations.
                let mut switch = cranelift_frontend::Switch::new();
                for (k, o) in osr.iter().enumerate() {
                    switch.set_entry(2 + k as u128, self.blocks[o.edge.block.index()]);
                }
                let normal = self.blocks[normal.block.index()];
                switch.emit(&mut self.b, self.framed, normal);
            }
            Terminator::Unreachable => {
                self.b.ins().trap(TrapCode::unwrap_user(1));
            }
        }
        Ok(())
    }

    /// The block every return jumps to with its value (created at the first, whose
    /// bytecode index, `bci`, its code is placed on).
    fn ret(&mut self, bci: u32) -> Block {
        if let Some((b, _)) = self.ret {
            return b;
        }
        let b = self.b.create_block();
        self.b.append_block_param(b, I64);
        self.ret = Some((b, bci));
        b
    }

    /// Fills `ret`, which returns its parameter: for the dispatcher the adapter pushes it and
    /// answers `Status::Returned` (the dispatcher pops the frame); a direct call pops its
    /// frame.
    fn fill_ret(&mut self, ret: Block, bci: u32) {
        let layout = self.layout;
        self.b.switch_to_block(ret);
        self.b.set_srcloc(SourceLoc::new(bci));
        let v = self.b.block_params(ret)[0];
        let (framed, direct) = self.leave_by_caller();
        self.b.switch_to_block(direct);
        let frame_stack = self.b.ins().load(I64, flags(), self.vm, layout.frame_stack);
        let depth = self
            .b
            .ins()
            .load(I64, flags(), frame_stack, layout.frames_len);
        let depth = self.add_imm(depth, -1);
        self.b
            .ins()
            .store(flags(), depth, frame_stack, layout.frames_len);
        self.return_(v);
        self.b.switch_to_block(framed);
        self.return_(v);
    }

    /// Returns `v` through the one epilogue every way out of the function shares (Cranelift
    /// writes an epilogue at each `return`: restoring registers and the frame, some twenty
    /// bytes).
    fn return_(&mut self, v: Value) {
        let epilogue = match self.epilogue {
            Some(b) => b,
            None => {
                let b = self.b.create_block();
                self.b.append_block_param(b, I64);
                self.epilogue = Some(b);
                b
            }
        };
        self.b.ins().jump(epilogue, &[v.into()]);
    }

    /// A hooked method's entry or exit hook (GC hints, phases) while the hooks are armed,
    /// as the interpreter runs it; a safepoint, since a hook may collect. An error leaves.
    fn method_hook(&mut self, kind: PointKind, bci: u32) {
        let address = self.iconst(I64, self.layout.method_hooks_armed as i64);
        let armed = self.b.ins().uload8(I32, flags(), address, 0);
        let hook = self.b.create_block();
        let go_on = self.b.create_block();
        self.b.set_cold_block(hook);
        self.b.ins().brif(armed, hook, &[], go_on, &[]);
        self.b.switch_to_block(hook);
        let k = self.safepoint(bci);
        let stub = stub_calls::address(&mut self.b, self.layout.stubs.method_hook);
        let kind = self.iconst(I32, i64::from(kind == PointKind::Exit));
        let call = stub_calls::call_at(&mut self.b, &mut self.sigs, stub, &[self.vm, kind]);
        self.tag(call, k);
        let status = self.b.inst_results(call)[0];
        let ok = self.cmp_imm(IntCC::Equal, status, Status::Continue as i64);
        let leave = self.leave();
        self.b.ins().brif(ok, go_on, &[], leave, &[]);
        self.b.switch_to_block(go_on);
    }

    /// The send site of the current scope's instruction at `bci`, if it sends.
    fn site_at(&self, bci: u32) -> Option<u32> {
        self.code().ops.get(bci as usize)?.site()
    }

    /// The code of the scope being lowered.
    fn code(&self) -> &'static tally_vm::runtime::Code {
        self.scope_codes[self.scope.index()]
    }

    /// The code a frame state describes an activation of.
    fn state_code(&self, state: FrameStateId) -> Result<&'static tally_vm::runtime::Code, String> {
        let id = self.ir.states[state.index()].code;
        self.scope_codes
            .iter()
            .copied()
            .find(|c| c.id == id)
            .ok_or_else(|| format!("{state} describes code {id}, of no scope"))
    }

    /// Places the next instructions on the current scope's bytecode `bci` (the pc map's
    /// location).
    fn set_location(&mut self, bci: u32) {
        let loc = if bci >= crate::pc_map::SHARED_EXIT {
            bci
        } else {
            tally_vm::jit::pack_location(self.scope.0, bci)
        };
        self.b.set_srcloc(SourceLoc::new(loc));
    }

    fn clear_native(&mut self) {
        let zero = self.iconst(I64, 0);
        self.b
            .ins()
            .store(flags(), zero, self.native, self.layout.native.fp);
    }

    /// The start of every way out: clears the native record, then branches on who called
    /// the body, answering the blocks for the dispatcher (`framed`) and for a direct call.
    fn leave_by_caller(&mut self) -> (Block, Block) {
        self.clear_native();
        let framed = self.b.create_block();
        let direct = self.b.create_block();
        self.b.ins().brif(self.framed, framed, &[], direct, &[]);
        (framed, direct)
    }

    /// Where a call that answered `Value::NONE` goes: the frame is gone or an error is
    /// parked; this answers `Value::NONE` too (the adapter makes it `Status::Unwound`, and
    /// the dispatcher looks for the error first).
    /// Filled by [`Lowerer::finish`] (Cranelift fills one block at a time).
    fn leave(&mut self) -> Block {
        if let Some(b) = self.leave {
            return b;
        }
        let leave = self.b.create_block();
        self.b.set_cold_block(leave);
        self.leave = Some(leave);
        leave
    }

    /// The exit of frame state `state` for `kind`: writes the interpreter's frame and
    /// returns. A `Deopt` exit takes the reason (I32), a `Status` exit the status (I32).
    /// Filled by [`Lowerer::finish`].
    fn exit(&mut self, state: FrameStateId, kind: ExitKind) -> Result<Block, String> {
        if let Some(&b) = self.exits.get(&(state, kind)) {
            return Ok(b);
        }
        let fs = &self.ir.states[state.index()];
        let resumes = if kind == ExitKind::Restart {
            Resume::AfterCall
        } else {
            Resume::Before
        };
        if fs.resume != resumes || (kind == ExitKind::Restart && fs.outer.is_some()) {
            return Err(format!(
                "an exit to {state} (after a call, or restarting inlined code), which this \
                 tier cannot rebuild"
            ));
        }
        let mut outer = fs.outer;
        while let Some(o) = outer {
            if self.ir.states[o.index()].resume != Resume::AfterCall {
                return Err(format!(
                    "{state}'s outer state {o} is not suspended in a call"
                ));
            }
            outer = self.ir.states[o.index()].outer;
        }
        let exit = self.b.create_block();
        self.b.set_cold_block(exit);
        if matches!(kind, ExitKind::Deopt | ExitKind::Status) {
            self.b.append_block_param(exit, I32);
        }
        self.exits.insert((state, kind), exit);
        self.exit_scopes.insert(state, self.scope);
        Ok(exit)
    }

    /// Fills the exits and the leave block.
    fn finish(&mut self) -> Result<(), String> {
        let mut exits: Vec<_> = self.exits.iter().map(|(&k, &b)| (k, b)).collect();
        exits.sort_by_key(|&((s, _), b)| (s, b));
        for ((state, kind), exit) in exits {
            self.fill_exit(state, kind, exit)?;
        }
        let mut tails: Vec<_> = self
            .outer_tails
            .iter()
            .map(|(&caller, (tail, held))| (caller, *tail, held.clone()))
            .collect();
        tails.sort_by_key(|&(caller, ..)| caller);
        for (caller, tail, held) in tails {
            self.fill_outer_tail(caller, tail, &held)?;
        }
        // After the exits, which may be the first to leave (an allocation that fails).
        if let Some(leave) = self.leave {
            // For the dispatcher, `Value::NONE` (the dispatcher sorts errors from
            // unwinding); for a direct call, the value of a non-local return that ended at
            // this frame, or `Value::NONE`.
            self.b.switch_to_block(leave);
            let (framed, direct) = self.leave_by_caller();
            self.b.switch_to_block(framed);
            let none = self.iconst(I64, 0);
            self.return_(none);
            self.b.switch_to_block(direct);
            let stub = self.layout.stubs.ir_left;
            let call = stub_calls::call(&mut self.b, &mut self.sigs, stub, &[self.vm, self.frame]);
            let v = self.b.inst_results(call)[0];
            self.return_(v);
        }
        if let Some(hand_over) = self.hand_over {
            self.fill_hand_over(hand_over);
        }
        if let Some((ret, bci)) = self.ret {
            self.fill_ret(ret, bci);
        }
        if let Some(epilogue) = self.epilogue {
            self.b.switch_to_block(epilogue);
            let bci = self.ret.map_or(crate::pc_map::SHARED_EXIT, |(_, bci)| bci);
            self.b.set_srcloc(SourceLoc::new(bci));
            let v = self.b.block_params(epilogue)[0];
            self.b.ins().return_(&[v]);
        }
        Ok(())
    }

    /// The end the exits share (`hand_over`), created at the first exit.
    fn hand_over(&mut self) -> Block {
        if let Some(b) = self.hand_over {
            return b;
        }
        let b = self.b.create_block();
        self.b.set_cold_block(b);
        self.b.append_block_param(b, I32);
        self.hand_over = Some(b);
        b
    }

    /// Hands the frame an exit wrote over with its status: for the dispatcher, the status
    /// through the adapter; for a direct call, the interpreter runs the frame to its return
    /// here. It runs for no one bytecode (`SHARED_EXIT`).
    fn fill_hand_over(&mut self, hand_over: Block) {
        let layout = self.layout;
        self.b.switch_to_block(hand_over);
        self.b
            .set_srcloc(SourceLoc::new(crate::pc_map::SHARED_EXIT));
        let status = self.b.block_params(hand_over)[0];
        let (framed, direct) = self.leave_by_caller();
        self.b.switch_to_block(framed);
        self.b
            .ins()
            .store(flags(), status, self.vm, layout.exit_status);
        let none = self.iconst(I64, 0);
        self.return_(none);
        self.b.switch_to_block(direct);
        let args = [self.vm, self.frame, status];
        let call = stub_calls::call(
            &mut self.b,
            &mut self.sigs,
            layout.stubs.ir_interpret,
            &args,
        );
        let result = self.b.inst_results(call)[0];
        self.return_(result);
    }

    /// Fills the exit of `state` for `kind`: writes the frame it describes — and, for a
    /// state of inlined code, the frames of its whole inline chain, each above the one it
    /// was inlined into, suspended in its call — then hands the innermost over. The frames
    /// of the chain a state is inlined into are the same for every exit of the inlined
    /// code (its caller's values were fixed at the call): they are written once, by the
    /// tail of that outer chain ([`Lowerer::fill_outer_tail`]), which every such exit
    /// jumps to after writing its own frame.
    fn fill_exit(
        &mut self,
        state: FrameStateId,
        kind: ExitKind,
        exit: Block,
    ) -> Result<(), String> {
        let fs = &self.ir.states[state.index()];
        self.b.switch_to_block(exit);
        self.scope = self.exit_scopes[&state];
        self.set_location(fs.bci);
        let param = self.b.block_params(exit).first().copied();
        let layout = self.layout;
        let chain = self.chain_outermost_first(state);
        self.exit_boxes.clear();
        self.materialize(&chain, state, fs.bci)?;
        let outer = &chain[..chain.len() - 1];
        // Where the innermost frame goes: above the values of the frames of its chain.
        let below: i64 = outer.iter().map(|&o| self.frame_height(o)).sum();
        let level = outer.len();
        let (slots, bp, frame) = if level == 0 {
            (self.slots, self.bp, self.frame)
        } else {
            (
                self.add_imm(self.slots, 8 * below),
                self.add_imm(self.bp, below),
                self.add_imm(self.frame, i64::from(layout.frame_size) * level as i64),
            )
        };
        let height = self.write_frame(state, level, kind, slots, bp, frame)?;
        let len = self.add_imm(bp, height);
        let status = match kind {
            ExitKind::Interpret | ExitKind::Restart => self.iconst(I32, Status::Interpret as i64),
            ExitKind::Status => param.expect("a status"),
            ExitKind::Deopt => {
                let code = self.request.code;
                let site = self
                    .state_code(state)?
                    .ops
                    .get(fs.bci as usize)
                    .and_then(|op| op.site());
                if let Some(site) = site {
                    self.speculated.insert(site);
                }
                let site = site.unwrap_or(tally_vm::jit::NO_DEOPT_SITE);
                let site = self.iconst(I32, site as i64);
                self.b
                    .ins()
                    .store(flags(), site, self.vm, layout.deopt_site);
                let reason = param.expect("a reason");
                self.b
                    .ins()
                    .store(flags(), reason, self.vm, layout.deopt_reason);
                let id = self.iconst(I32, code.id as i64);
                self.b.ins().store(flags(), id, self.vm, layout.deopt_code);
                self.iconst(I32, Status::Deopt as i64)
            }
        };
        let Some(&caller) = outer.last() else {
            self.b.ins().store(flags(), len, self.vm, layout.stack_len);
            let hand_over = self.hand_over();
            self.b.ins().jump(hand_over, &[status.into()]);
            return Ok(());
        };
        // The outer chain's tail, with the objects this exit made that its frames hold.
        let mut held = self.virtuals_of(outer).concat();
        held.extend(self.floats_of(outer));
        let tail = match self.outer_tails.get(&caller) {
            Some((tail, same)) if *same == held => *tail,
            Some(_) => {
                return Err(format!(
                    "exits inlined at {caller} disagree on the objects its chain holds"
                ))
            }
            None => {
                let tail = self.b.create_block();
                self.b.set_cold_block(tail);
                self.b.append_block_param(tail, I32);
                self.b.append_block_param(tail, I64);
                for _ in &held {
                    self.b.append_block_param(tail, I64);
                }
                self.outer_tails.insert(caller, (tail, held.clone()));
                tail
            }
        };
        let mut args: Vec<cranelift_codegen::ir::BlockArg> = vec![status.into(), len.into()];
        for &v in &held {
            args.push(self.word(v)?.into());
        }
        self.b.ins().jump(tail, &args);
        Ok(())
    }

    /// `state` and the states it is inlined into, the frame's own activation first.
    fn chain_outermost_first(&self, state: FrameStateId) -> Vec<FrameStateId> {
        let mut chain = vec![state];
        while let Some(o) = self.ir.states[chain.last().expect("a state").index()].outer {
            chain.push(o);
        }
        chain.reverse();
        chain
    }

    /// The values a frame of `state` holds in the value stack: its locals and operands.
    fn frame_height(&self, state: FrameStateId) -> i64 {
        let fs = &self.ir.states[state.index()];
        (fs.locals.len() + fs.stack.len()) as i64
    }

    /// Writes the frame of `state`, the `level`-th of its exit's chain (0: the frame's own
    /// activation, whose frame record exists; above, an inlined activation's, whose record
    /// is written too), its values at `slots` (`bp` their index) and its record at `frame`;
    /// answers the number of values written.
    fn write_frame(
        &mut self,
        state: FrameStateId,
        level: usize,
        kind: ExitKind,
        slots: Value,
        bp: Value,
        frame: Value,
    ) -> Result<i64, String> {
        let layout = self.layout;
        let fs = &self.ir.states[state.index()];
        if level > 0 {
            let code = self.iconst(I64, fs.code as i64);
            self.b.ins().store(flags(), code, frame, 0);
            // `bp` with a clear mark: the interpreter runs it.
            self.b.ins().store(flags(), bp, frame, layout.frame_bp);
            let ctx = match fs.context {
                Some(c) => self.word(c)?,
                None => self.iconst(I64, NIL),
            };
            self.b.ins().store(flags(), ctx, frame, layout.frame_ctx);
            let closure = match fs.closure {
                Some(c) => self.word(c)?,
                None => self.iconst(I64, 0),
            };
            self.b
                .ins()
                .store(flags(), closure, frame, layout.native.frame_closure);
        }
        let mut k = 0i32;
        for (slot, l) in fs.locals.iter().enumerate() {
            k += 1;
            // The receiver and arguments of the frame's own activation never change (SOM
            // does not assign them): the interpreter may read them where the bytecode
            // does not (an escaped block's receiver, a restarted method's arguments).
            let v = match (l, self.params.get(slot).filter(|_| level == 0)) {
                (Some(v), _) => self.word(*v)?,
                (None, Some(&p)) => p,
                (None, None) => self.iconst(I64, NIL),
            };
            self.b.ins().store(flags(), v, slots, 8 * (k - 1));
        }
        if kind == ExitKind::Restart {
            // The primitive emptied the operand stack and set `ip` 0.
            let zero = self.iconst(I8, 0);
            self.b.ins().store(flags(), zero, self.vm, layout.restarted);
        } else {
            for &s in &fs.stack {
                let v = self.word(s)?;
                self.b.ins().store(flags(), v, slots, 8 * k);
                k += 1;
            }
            let ip = match fs.resume {
                Resume::Before => fs.bci,
                Resume::AfterCall => fs.bci + 1,
            };
            let ip = self.iconst(I32, ip as i64);
            self.b.ins().store(flags(), ip, frame, layout.frame_ip);
        }
        Ok(k as i64)
    }

    /// Fills the tail the exits of code inlined at `caller`'s call share: with the status,
    /// the value stack's new length and the objects the exit made (`held`, in its params),
    /// it writes the frames of `caller`'s chain, outermost first, pushes their records
    /// beyond the frame's own with the exit's one, and hands the innermost over.
    fn fill_outer_tail(
        &mut self,
        caller: FrameStateId,
        tail: Block,
        held: &[tally_ir::ValueId],
    ) -> Result<(), String> {
        let layout = self.layout;
        self.b.switch_to_block(tail);
        self.b
            .set_srcloc(SourceLoc::new(crate::pc_map::SHARED_EXIT));
        let params = self.b.block_params(tail).to_vec();
        let (status, len) = (params[0], params[1]);
        self.exit_boxes.clear();
        for (&v, &p) in held.iter().zip(&params[2..]) {
            if self.ir.ty(v) == Ty::Float {
                self.exit_boxes.insert(v, p);
            } else {
                self.define(v, p);
            }
        }
        let chain = self.chain_outermost_first(caller);
        let (mut slots, mut bp, mut frame) = (self.slots, self.bp, self.frame);
        let mut height = 0i64;
        for (level, &st) in chain.iter().enumerate() {
            if level > 0 {
                slots = self.add_imm(slots, 8 * height);
                bp = self.add_imm(bp, height);
                frame = self.add_imm(frame, layout.frame_size as i64);
            }
            height = self.write_frame(st, level, ExitKind::Interpret, slots, bp, frame)?;
        }
        self.b.ins().store(flags(), len, self.vm, layout.stack_len);
        let frame_stack = self.b.ins().load(I64, flags(), self.vm, layout.frame_stack);
        let depth = self
            .b
            .ins()
            .load(I64, flags(), frame_stack, layout.frames_len);
        // The exit's own frame and those of the chain beyond the frame's own.
        let depth = self.add_imm(depth, chain.len() as i64);
        self.b
            .ins()
            .store(flags(), depth, frame_stack, layout.frames_len);
        let hand_over = self.hand_over();
        self.b.ins().jump(hand_over, &[status.into()]);
        Ok(())
    }

    /// The virtual contexts (outer ones first: each before the ones made over it) and the
    /// virtual closures the states of `chain` hold, directly or as a closure's context or a
    /// context's outer, each once.
    fn virtuals_of(&self, chain: &[FrameStateId]) -> [Vec<tally_ir::ValueId>; 3] {
        let mut virtuals: Vec<tally_ir::ValueId> = Vec::new();
        let mut contexts: Vec<tally_ir::ValueId> = Vec::new();
        let mut objects: Vec<tally_ir::ValueId> = Vec::new();
        for &st in chain {
            for v in self.ir.states[st.index()].values() {
                let mut next = Some(v);
                while let Some(x) = next {
                    next = match self.ir.def_inst(x).map(|i| &i.kind) {
                        Some(tally_ir::InstKind::VirtualBlock { ctx, .. }) => {
                            if !virtuals.contains(&x) {
                                virtuals.push(x);
                            }
                            *ctx
                        }
                        Some(tally_ir::InstKind::VirtualContext { outer, .. }) => {
                            if !contexts.contains(&x) {
                                contexts.push(x);
                            }
                            *outer
                        }
                        Some(tally_ir::InstKind::VirtualObject { .. }) => {
                            if !objects.contains(&x) {
                                objects.push(x);
                            }
                            None
                        }
                        _ => None,
                    };
                }
            }
        }
        contexts.sort_by_key(|&c| c.index());
        objects.sort_by_key(|&c| c.index());
        [contexts, virtuals, objects]
    }

    /// Makes the virtual contexts and closures the states of `chain` hold (an exit's: the
    /// interpreter sees them now), defining each IR value as the new object for the rest of
    /// the exit: contexts first, each after its outer one, with the slots `innermost` (the
    /// exit's own state) names. Each is a safepoint; one whose allocation fails leaves (the
    /// error is parked).
    fn materialize(
        &mut self,
        chain: &[FrameStateId],
        innermost: FrameStateId,
        bci: u32,
    ) -> Result<(), String> {
        self.box_exit_floats(chain, bci)?;
        let [contexts, virtuals, objects] = self.virtuals_of(chain);
        // The frame's own activation's context, which the frame holds.
        let home = chain
            .first()
            .and_then(|&s| self.ir.states[s.index()].context);
        // Objects: all made first, then filled, since one may hold another.
        let mut made_objects = Vec::with_capacity(objects.len());
        for o in objects {
            let Some(tally_ir::InstKind::VirtualObject { class, .. }) =
                self.ir.def_inst(o).map(|i| i.kind.clone())
            else {
                continue;
            };
            let fields = self.ir.states[innermost.index()]
                .virtuals
                .iter()
                .find(|(v, _)| *v == o)
                .map(|(_, s)| s.clone())
                .ok_or_else(|| format!("{innermost} does not name what {o}'s fields hold"))?;
            let class = self.val(class)?;
            let made = self.new_instance(class, bci)?;
            self.define(o, made);
            made_objects.push((o, fields));
        }
        for (o, fields) in made_objects {
            let made = self.val(o)?;
            for (k, &field) in fields.iter().enumerate() {
                if self.ir.const_value(field) == Some(tally_heap::Value::NIL) {
                    continue;
                }
                let x = self.word(field)?;
                self.store_into(made, insts::slot_offset(k), None, x);
            }
        }
        for c in contexts {
            let Some(tally_ir::InstKind::VirtualContext { size, outer }) =
                self.ir.def_inst(c).map(|i| i.kind.clone())
            else {
                continue;
            };
            let slots = self.ir.states[innermost.index()]
                .virtuals
                .iter()
                .find(|(v, _)| *v == c)
                .map(|(_, s)| s.clone())
                .ok_or_else(|| format!("{innermost} does not name what {c}'s slots hold"))?;
            let made = if home == Some(c) {
                let code = self.iconst(I32, self.request.code.id as i64);
                let stub = self.layout.stubs.ir_home_context;
                let made = self.safepoint_call(stub, &[self.vm, code], bci);
                self.left_if_none(made, None)?;
                made
            } else {
                self.inlined_context(size, outer, bci)?
            };
            for (k, &slot) in slots.iter().enumerate() {
                if self.ir.const_value(slot) == Some(tally_heap::Value::NIL) {
                    continue;
                }
                let x = self.word(slot)?;
                self.store_into(made, insts::slot_offset(k), None, x);
            }
            self.define(c, made);
        }
        for v in virtuals {
            let Some(tally_ir::InstKind::VirtualBlock {
                code,
                receiver,
                ctx,
            }) = self.ir.def_inst(v).map(|i| i.kind.clone())
            else {
                continue;
            };
            let made = self.make_block(code, receiver, ctx, bci)?;
            let leave = self.leave();
            let go_on = self.b.create_block();
            self.b.ins().brif(made, go_on, &[], leave, &[]);
            self.b.switch_to_block(go_on);
            self.define(v, made);
        }
        Ok(())
    }

    /// Goes on in a new block when `ok` holds, else deoptimizes to `state` for `reason`.
    fn guard(&mut self, ok: Value, state: FrameStateId, reason: DeoptReason) -> Result<(), String> {
        let exit = self.exit(state, ExitKind::Deopt)?;
        let go_on = self.b.create_block();
        let reason = self.iconst(I32, reason as i64);
        self.b.ins().brif(ok, go_on, &[], exit, &[reason.into()]);
        self.b.switch_to_block(go_on);
        Ok(())
    }

    /// Goes on in a new block when `ok` holds, else hands the frame to the interpreter in
    /// `state` (which redoes the instruction and raises what it raises).
    fn check(&mut self, ok: Value, state: FrameStateId) -> Result<(), String> {
        let exit = self.exit(state, ExitKind::Interpret)?;
        let go_on = self.b.create_block();
        self.b.ins().brif(ok, go_on, &[], exit, &[]);
        self.b.switch_to_block(go_on);
        Ok(())
    }

    /// Makes the next call a safepoint: the frame's `ip` (one past the call at the current
    /// scope's `bci`, as the interpreter leaves it; in inlined code, one past the call the
    /// outermost inlined method stands for) and the safepoint's number; answers the number,
    /// which the call is tagged with. The number also tells stack walks which activations
    /// inlined into the frame's the call is made from.
    fn safepoint(&mut self, bci: u32) -> u32 {
        let k = self.safepoints;
        self.safepoints += 1;
        let chain = self.ir.scope_chain(self.scope, bci);
        let &(_, own_bci) = chain.last().expect("the own scope");
        self.inlined_at.push(
            chain[..chain.len() - 1]
                .iter()
                .map(|&(scope, at)| (self.scope_codes[scope.index()].id, at + 1))
                .collect(),
        );
        let ip = self.iconst(I32, own_bci as i64 + 1);
        self.b
            .ins()
            .store(flags(), ip, self.frame, self.layout.frame_ip);
        let n = self.iconst(I32, k as i64);
        self.b
            .ins()
            .store(flags(), n, self.native, self.layout.native.safepoint);
        k
    }

    /// The signature of a body taking `argc` arguments (and a closure).
    fn body_sig(&mut self, argc: usize, is_block: bool) -> SigRef {
        if let Some(&s) = self.bodies.get(&(argc, is_block)) {
            return s;
        }
        let sig = self
            .b
            .import_signature(body_signature(self.call_conv, argc, is_block));
        self.bodies.insert((argc, is_block), sig);
        sig
    }

    /// Tags call `inst` with safepoint `k`, so its stack map can be found.
    fn tag(&mut self, inst: cranelift_codegen::ir::Inst, k: u32) {
        self.b
            .func
            .debug_tags
            .set(inst, [cranelift_codegen::ir::DebugTag::User(k)]);
    }
}

/// What an adapter calls: the body it was made with, or (an adapter shared by every body
/// of its shape without loop-head entries) the body installed for the frame's code.
#[derive(Clone, Copy)]
pub(crate) enum AdapterBody<F = cranelift_codegen::ir::FuncRef> {
    Known(F),
    OfFrame,
}

/// The activations an adapter enters: a method's or a block's, with `argc` arguments.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub(crate) struct AdapterShape {
    pub argc: usize,
    pub is_block: bool,
}

impl AdapterShape {
    pub(crate) fn of(code: &tally_vm::runtime::Code) -> AdapterShape {
        AdapterShape {
            argc: code.num_args as usize,
            is_block: code.kind == tally_vm::compiler::CodeKind::Block,
        }
    }
}

/// Writes the adapter the dispatcher calls (an `EntryPoint`) into `func`: for a new frame
/// (`resume` 0: a call from the baseline tier's code, `framed` [`FRESH_FROM_COMPILED`]; or
/// the top frame at `ip` 0, `framed` 1) it reads the receiver and arguments from the
/// frame's slots and runs `body` for the frame; a frame stopped at `osr[k]` (a loop head)
/// enters the body there (`framed` 2 + k); a frame left elsewhere goes back to the
/// interpreter. The body's value is pushed for `Status::Returned`; `Value::NONE` gives the
/// status its exit left in `Layout::exit_status`, or `Status::Unwound`.
#[allow(clippy::too_many_arguments)]
pub(crate) fn lower_adapter(
    func: &mut Function,
    builder_context: &mut FunctionBuilderContext,
    shape: AdapterShape,
    layout: &Layout,
    body: AdapterBody,
    osr: &[u32],
    target: cranelift_codegen::isa::TargetFrontendConfig,
    call_conv: cranelift_codegen::isa::CallConv,
) {
    let mut b = FunctionBuilder::new(func, builder_context);
    let entry = b.create_block();
    b.append_block_params_for_function_params(entry);
    b.switch_to_block(entry);
    let params = b.block_params(entry).to_vec();
    let (vm, frame_in, bp_in, resume) = (params[0], params[1], params[2], params[3]);
    let resumed = b.create_block();
    let join = b.create_block();
    b.append_block_param(join, I64);
    b.append_block_param(join, I64);
    b.append_block_param(join, I32);
    let fresh = b.ins().iconst(I32, FRESH_FROM_COMPILED);
    b.ins().brif(
        resume,
        resumed,
        &[],
        join,
        &[frame_in.into(), bp_in.into(), fresh.into()],
    );
    b.switch_to_block(resumed);
    let frame_stack = b.ins().load(I64, flags(), vm, layout.frame_stack);
    let depth = b.ins().load(I64, flags(), frame_stack, layout.frames_len);
    let frames = b.ins().load(I64, flags(), frame_stack, layout.frames_base);
    let minus_one = b.ins().iconst(I64, -1);
    let top = b.ins().iadd(depth, minus_one);
    let size = b.ins().iconst(I64, layout.frame_size as i64);
    let offset = b.ins().imul(top, size);
    let frame = b.ins().iadd(frames, offset);
    let ip = b.ins().load(I32, flags(), frame, layout.frame_ip);
    let bp = b.ins().uload32(flags(), frame, layout.frame_bp);
    let elsewhere = b.create_block();
    b.set_cold_block(elsewhere);
    let mut next = b.create_block();
    let new = b.ins().iconst(I32, 1);
    b.ins()
        .brif(ip, next, &[], join, &[frame.into(), bp.into(), new.into()]);
    for (k, &bci) in osr.iter().enumerate() {
        b.switch_to_block(next);
        next = b.create_block();
        let here = b.ins().icmp_imm_u(IntCC::Equal, ip, i64::from(bci));
        let entry = b.ins().iconst(I32, 2 + k as i64);
        b.ins().brif(
            here,
            join,
            &[frame.into(), bp.into(), entry.into()],
            next,
            &[],
        );
    }
    b.switch_to_block(next);
    b.ins().jump(elsewhere, &[]);
    b.switch_to_block(elsewhere);
    let status = b.ins().iconst(I32, Status::Interpret as i64);
    b.ins().return_(&[status]);

    b.switch_to_block(join);
    let frame = b.block_params(join)[0];
    let bp = b.block_params(join)[1];
    let framed = b.block_params(join)[2];
    let stack = b.ins().load(I64, flags(), vm, layout.stack_base);
    let eight = b.ins().iconst(I64, 8);
    let bp_bytes = b.ins().imul(bp, eight);
    let slots = b.ins().iadd(stack, bp_bytes);
    let mut args = vec![vm, framed];
    for k in 0..=shape.argc as i32 {
        args.push(b.ins().load(I64, flags(), slots, 8 * k));
    }
    if shape.is_block {
        args.push(
            b.ins()
                .load(I64, flags(), frame, layout.native.frame_closure),
        );
    }
    let call = match body {
        AdapterBody::Known(body) => b.ins().call(body, &args),
        AdapterBody::OfFrame => {
            // The body installed for the frame's code (`Code::direct`): read where the
            // dispatcher entered through this adapter, which the VM installed with it.
            let calls = &layout.calls;
            let id = b.ins().uload32(flags(), frame, calls.frame_code);
            let codes = b.ins().load(I64, flags(), vm, calls.codes_base);
            let offset = b.ins().imul(id, eight);
            let at = b.ins().iadd(codes, offset);
            let code = b.ins().load(I64, flags(), at, 0);
            let direct = b.ins().load(I64, flags(), code, layout.code_direct);
            let sig = b.import_signature(body_signature(call_conv, shape.argc, shape.is_block));
            b.ins().call_indirect(sig, direct, &args)
        }
    };
    let result = b.inst_results(call)[0];
    let returned = b.create_block();
    let left = b.create_block();
    b.ins().brif(result, returned, &[], left, &[]);

    b.switch_to_block(returned);
    let len = b.ins().load(I64, flags(), vm, layout.stack_len);
    let offset = b.ins().imul(len, eight);
    let slot = b.ins().iadd(stack, offset);
    b.ins().store(flags(), result, slot, 0);
    let one64 = b.ins().iconst(I64, 1);
    let len = b.ins().iadd(len, one64);
    b.ins().store(flags(), len, vm, layout.stack_len);
    let status = b.ins().iconst(I32, Status::Returned as i64);
    b.ins().return_(&[status]);

    b.switch_to_block(left);
    let status = b.ins().load(I32, flags(), vm, layout.exit_status);
    let zero = b.ins().iconst(I32, 0);
    b.ins().store(flags(), zero, vm, layout.exit_status);
    let unwound = b.ins().iconst(I32, Status::Unwound as i64);
    let status = b.ins().select(status, status, unwound);
    b.ins().return_(&[status]);
    b.seal_all_blocks();
    b.finalize(target);
}
