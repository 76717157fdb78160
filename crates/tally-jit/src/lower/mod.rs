//! The `ir` tier: bytecode → `tally_ir` → Cranelift. Every SOM value of an activation is an
//! SSA value (a register or a spill slot Cranelift chooses); the value stack is written only
//! where the interpreter takes the activation over (a frame state's exit) and read only at
//! entry.
//!
//! Contract with the VM (`tally_vm::jit`):
//! - The function is an `EntryPoint` called for a frame that is set up (receiver and
//!   arguments in its value-stack slots, locals nil, its context made): a new one (`resume`
//!   0, or the top frame at `ip` 0). A frame left at any other `ip` is handed back to the
//!   interpreter (`Status::Interpret`): this tier has no resume points.
//! - At entry the code writes its frame pointer and its version's `SafepointTable` into the
//!   frame's `NativeActivation`; before each call that may collect it writes the call's
//!   safepoint number there (and the frame's `ip`, one past the call, as the interpreter
//!   does). Every reference live across such a call is in Cranelift's stack map of the call,
//!   whose slots the collector updates; the code clears `fp` on every way out.
//! - Calls go through the `ir_*` stubs, which run the callee to completion and answer its
//!   result, or `Value::NONE` to leave (`Status::Unwound`: an error parked, or a non-local
//!   return that popped the frame).
//! - A guard that fails, or an instruction the tier leaves to the interpreter, writes the
//!   frame its state describes (locals and operand stack into the value stack, `ip`) and
//!   answers `Status::Deopt` (the speculation is recorded and the version invalidated) or
//!   `Status::Interpret`. One exit per frame state and status, shared by its guards.
//! - A return pushes the result and answers `Status::Returned`.

mod insts;

use std::collections::HashMap;
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
use tally_vm::jit::{CompileRequest, DeoptReason, Layout, SafepointMap, SafepointTable, Status};

const I64: types::Type = types::I64;
const I32: types::Type = types::I32;
const I8: types::Type = types::I8;
const NIL: i64 = tally_heap::Value::NIL.0 as i64;

/// The IR of `request`'s code, optimized: what the tier lowers, and what listings show.
pub(crate) fn ir_of(request: &CompileRequest) -> Result<tally_ir::Function, String> {
    let code = request.code;
    if code.hooks.load(std::sync::atomic::Ordering::Relaxed) != 0 {
        return Err(
            "methods with hooks (GC hints, phases) are not compiled by this tier yet".into(),
        );
    }
    let mut f = tally_ir::build::build(code, &request.name, request)?;
    tally_ir::passes::optimize(&mut f, code)?;
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
    /// Sites the code speculates at (guards that deoptimize).
    pub speculations: u32,
    /// Safepoints made (the table's length once filled).
    pub safepoints: u32,
}

/// Writes `ir`'s function into `func` (whose signature is the entry point's).
pub(crate) fn lower(
    func: &mut Function,
    builder_context: &mut FunctionBuilderContext,
    module: &JITModule,
    request: &CompileRequest,
    layout: &Layout,
    ir: &tally_ir::Function,
) -> Result<Lowered, String> {
    if layout.count_calls {
        return Err("--count-calls is not counted by this tier yet".into());
    }
    let table = Arc::new(SafepointTable::new());
    let sigs = Signatures::declare(func, module);
    let b = FunctionBuilder::new(func, builder_context);
    let mut l = Lowerer {
        b,
        layout,
        request,
        ir,
        sigs,
        vm: Value::from_u32(0),
        frame: Value::from_u32(0),
        bp: Value::from_u32(0),
        slots: Value::from_u32(0),
        native: Value::from_u32(0),
        values: vec![None; ir.values.len()],
        blocks: Vec::new(),
        exits: HashMap::new(),
        leave: None,
        safepoints: 0,
        speculated: std::collections::BTreeSet::new(),
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
    })
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
    let mut maps = vec![SafepointMap::default(); lowered.safepoints as usize];
    let mut found = vec![false; maps.len()];
    for (offset, span, map) in compiled.buffer.user_stack_maps() {
        let Some(&k) = by_offset.get(offset) else {
            continue;
        };
        let entry = maps
            .get_mut(k as usize)
            .ok_or_else(|| format!("a stack map for safepoint {k}, which was not made"))?;
        entry.span = *span;
        entry.offsets = map.entries().map(|(_, o)| o).collect();
        found[k as usize] = true;
    }
    // A safepoint without a stack map has nothing live across it; its span is unused.
    let _ = found;
    lowered.table.set(maps)
}

/// The stubs' signatures.
struct Signatures {
    /// `(vm, u32) -> u64`: `literal`, `global`.
    value1: SigRef,
    /// `(vm, u32, ptr, u32) -> u64`: sends and method calls.
    call: SigRef,
    /// `(vm, ptr, u32) -> u64`: block calls.
    call_block: SigRef,
    /// `(vm, u32, u64, u64) -> u64`: `ir_make_block`.
    make_block: SigRef,
    /// `(vm) -> u32`: `back_edge`.
    status0: SigRef,
    /// `(vm, u64) -> u32`: `write_barrier`.
    remember: SigRef,
}

impl Signatures {
    fn declare(func: &mut Function, module: &JITModule) -> Signatures {
        let mut make = |params: &[types::Type], ret: types::Type| {
            let mut sig: Signature = module.make_signature();
            sig.params.extend(params.iter().map(|&t| AbiParam::new(t)));
            sig.returns.push(AbiParam::new(ret));
            func.import_signature(sig)
        };
        Signatures {
            value1: make(&[I64, I32], I64),
            call: make(&[I64, I32, I64, I32], I64),
            call_block: make(&[I64, I64, I32], I64),
            make_block: make(&[I64, I32, I64, I64], I64),
            status0: make(&[I64], I32),
            remember: make(&[I64, I64], I32),
        }
    }
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
    /// A call restarted the frame (`Block>>restart`): its locals are written, the rest is
    /// as the primitive left it (operand stack empty, `ip` 0).
    Restart,
}

struct Lowerer<'a, 'f> {
    b: FunctionBuilder<'f>,
    layout: &'a Layout,
    request: &'a CompileRequest,
    ir: &'a tally_ir::Function,
    sigs: Signatures,
    /// The entry point's `*mut Vm`, the frame, its base (slot index) and the address of its
    /// first value-stack slot, and its `NativeActivation`.
    vm: Value,
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
    /// Where a call that answered `Value::NONE` leaves.
    leave: Option<Block>,
    /// Safepoints numbered so far.
    safepoints: u32,
    speculated: std::collections::BTreeSet<u32>,
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
        }
    }

    /// The Cranelift value of IR value `v`.
    fn val(&self, v: ValueId) -> Result<Value, String> {
        self.values[v.index()].ok_or_else(|| format!("{v} is used before it is lowered"))
    }

    /// Defines IR value `v` as `x`; a SOM value that may be a reference goes into the stack
    /// maps of the calls it lives across.
    fn define(&mut self, v: ValueId, x: Value) {
        if self.ir.ty(v) == Ty::Word && self.b.func.dfg.value_type(x) == I64 {
            self.b.declare_value_needs_stack_map(x);
        }
        self.values[v.index()] = Some(x);
    }

    /// The entry: finds the frame, hands frames left elsewhere than `ip` 0 back, registers
    /// the native activation, reads the receiver and arguments, and jumps to the IR's entry.
    fn entry(&mut self, table: &Arc<SafepointTable>) -> Result<(), String> {
        let layout = self.layout;
        let entry = self.b.create_block();
        self.b.append_block_params_for_function_params(entry);
        for _ in 0..self.ir.blocks.len() {
            let blk = self.b.create_block();
            self.blocks.push(blk);
        }
        self.b.switch_to_block(entry);
        self.b.set_srcloc(SourceLoc::new(0));
        let params = self.b.block_params(entry).to_vec();
        let (vm, frame_in, bp_in, resume) = (params[0], params[1], params[2], params[3]);
        self.vm = vm;
        let resumed = self.b.create_block();
        let join = self.b.create_block();
        self.b.append_block_param(join, I64);
        self.b.append_block_param(join, I64);
        self.b
            .ins()
            .brif(resume, resumed, &[], join, &[frame_in.into(), bp_in.into()]);

        self.b.switch_to_block(resumed);
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
        let ip = self.b.ins().load(I32, flags(), frame, layout.frame_ip);
        let bp = self.b.ins().uload32(flags(), frame, layout.frame_bp);
        let elsewhere = self.b.create_block();
        self.b.set_cold_block(elsewhere);
        self.b
            .ins()
            .brif(ip, elsewhere, &[], join, &[frame.into(), bp.into()]);
        self.b.switch_to_block(elsewhere);
        let status = self.iconst(I32, Status::Interpret as i64);
        self.b.ins().return_(&[status]);

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

        let code = self.request.code;
        let ir_entry = self.ir.entry();
        let entry_params = self.ir.blocks[ir_entry.index()].params.clone();
        let mut args = Vec::with_capacity(entry_params.len());
        for k in 0..=code.num_args as usize {
            let v = self.b.ins().load(I64, flags(), self.slots, 8 * k as i32);
            args.push(v);
        }
        if code.kind == tally_vm::compiler::CodeKind::Block {
            let closure = self
                .b
                .ins()
                .load(I64, flags(), self.frame, layout.native.frame_closure);
            args.push(closure);
        }
        if args.len() != entry_params.len() {
            return Err(format!(
                "the IR's entry takes {} values, the activation has {}",
                entry_params.len(),
                args.len()
            ));
        }
        let target = self.blocks[ir_entry.index()];
        let args: Vec<_> = args.into_iter().map(Into::into).collect();
        self.b.ins().jump(target, &args);
        Ok(())
    }

    /// Lowers one IR block: its parameters, instructions and terminator.
    fn block(&mut self, id: BlockId) -> Result<(), String> {
        let ir = self.ir;
        let block = &ir.blocks[id.index()];
        let blk = self.blocks[id.index()];
        self.b.switch_to_block(blk);
        self.b.set_srcloc(SourceLoc::new(block.bci));
        for &p in &block.params {
            let x = self.b.append_block_param(blk, Self::ty_of(ir.ty(p)));
            self.define(p, x);
        }
        for &i in &block.insts {
            let inst = &ir.insts[i.index()];
            self.b.set_srcloc(SourceLoc::new(inst.bci));
            self.inst(inst)?;
        }
        self.terminator(&block.term)
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

    fn terminator(&mut self, term: &Terminator) -> Result<(), String> {
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
                self.return_value(v);
            }
            Terminator::ReturnNonLocal { state, .. } | Terminator::Deopt(state) => {
                let exit = self.exit(*state, ExitKind::Interpret)?;
                self.b.ins().jump(exit, &[]);
            }
            Terminator::Unreachable => {
                self.b.ins().trap(TrapCode::unwrap_user(1));
            }
        }
        Ok(())
    }

    /// Pushes `v` on the value stack and answers `Status::Returned`.
    fn return_value(&mut self, v: Value) {
        let layout = self.layout;
        let stack = self.b.ins().load(I64, flags(), self.vm, layout.stack_base);
        let len = self.b.ins().load(I64, flags(), self.vm, layout.stack_len);
        let eight = self.iconst(I64, 8);
        let offset = self.b.ins().imul(len, eight);
        let slot = self.b.ins().iadd(stack, offset);
        self.b.ins().store(flags(), v, slot, 0);
        let len = self.add_imm(len, 1);
        self.b.ins().store(flags(), len, self.vm, layout.stack_len);
        self.clear_native();
        let status = self.iconst(I32, Status::Returned as i64);
        self.b.ins().return_(&[status]);
    }

    fn clear_native(&mut self) {
        let zero = self.iconst(I64, 0);
        self.b
            .ins()
            .store(flags(), zero, self.native, self.layout.native.fp);
    }

    /// Where a call that answered `Value::NONE` goes: the frame is gone or an error is
    /// parked; `Status::Unwound` tells the dispatcher, which looks for the error first.
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
        if fs.outer.is_some() || fs.resume != resumes {
            return Err(format!(
                "an exit to {state} (inlined, or after a call), which this tier cannot rebuild"
            ));
        }
        let exit = self.b.create_block();
        self.b.set_cold_block(exit);
        if matches!(kind, ExitKind::Deopt | ExitKind::Status) {
            self.b.append_block_param(exit, I32);
        }
        self.exits.insert((state, kind), exit);
        Ok(exit)
    }

    /// Fills the exits and the leave block.
    fn finish(&mut self) -> Result<(), String> {
        if let Some(leave) = self.leave {
            self.b.switch_to_block(leave);
            self.clear_native();
            let status = self.iconst(I32, Status::Unwound as i64);
            self.b.ins().return_(&[status]);
        }
        let mut exits: Vec<_> = self.exits.iter().map(|(&k, &b)| (k, b)).collect();
        exits.sort_by_key(|&((s, _), b)| (s, b));
        for ((state, kind), exit) in exits {
            self.fill_exit(state, kind, exit)?;
        }
        Ok(())
    }

    fn fill_exit(
        &mut self,
        state: FrameStateId,
        kind: ExitKind,
        exit: Block,
    ) -> Result<(), String> {
        let fs = &self.ir.states[state.index()];
        self.b.switch_to_block(exit);
        self.b.set_srcloc(SourceLoc::new(fs.bci));
        let param = self.b.block_params(exit).first().copied();
        let layout = self.layout;
        let mut k = 0i32;
        let args = 1 + self.request.code.num_args as usize;
        for (slot, l) in fs.locals.iter().enumerate() {
            k += 1;
            let v = match (l, kind) {
                // The frame runs again from its start, which reads what the bytecode after
                // the call did not: the receiver and arguments, still in their slots (never
                // written, and SOM does not assign them), and the locals as they are.
                (None, ExitKind::Restart) => continue,
                (Some(_), ExitKind::Restart) if slot < args => continue,
                (Some(v), _) => self.val(*v)?,
                (None, _) => self.iconst(I64, NIL),
            };
            self.b.ins().store(flags(), v, self.slots, 8 * (k - 1));
        }
        if kind == ExitKind::Restart {
            let zero = self.iconst(I8, 0);
            self.b.ins().store(flags(), zero, self.vm, layout.restarted);
        } else {
            for &s in &fs.stack {
                let v = self.val(s)?;
                self.b.ins().store(flags(), v, self.slots, 8 * k);
                k += 1;
            }
            let len = self.add_imm(self.bp, k as i64);
            self.b.ins().store(flags(), len, self.vm, layout.stack_len);
            let ip = self.iconst(I32, fs.bci as i64);
            self.b.ins().store(flags(), ip, self.frame, layout.frame_ip);
        }
        self.clear_native();
        let status = match kind {
            ExitKind::Interpret | ExitKind::Restart => self.iconst(I32, Status::Interpret as i64),
            ExitKind::Status => param.expect("a status"),
            ExitKind::Deopt => {
                let code = self.request.code;
                let site = code
                    .ops
                    .get(fs.bci as usize)
                    .and_then(|op| op.site())
                    .ok_or_else(|| format!("a guard at {} without a send site", fs.bci))?;
                self.speculated.insert(site);
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
        self.b.ins().return_(&[status]);
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

    /// Makes the next call a safepoint: the frame's `ip` (one past the call at `bci`, as
    /// the interpreter leaves it) and the safepoint's number; answers the number, which the
    /// call is tagged with.
    fn safepoint(&mut self, bci: u32) -> u32 {
        let k = self.safepoints;
        self.safepoints += 1;
        let ip = self.iconst(I32, bci as i64 + 1);
        self.b
            .ins()
            .store(flags(), ip, self.frame, self.layout.frame_ip);
        let n = self.iconst(I32, k as i64);
        self.b
            .ins()
            .store(flags(), n, self.native, self.layout.native.safepoint);
        k
    }

    /// Tags call `inst` with safepoint `k`, so its stack map can be found.
    fn tag(&mut self, inst: cranelift_codegen::ir::Inst, k: u32) {
        self.b
            .func
            .debug_tags
            .set(inst, [cranelift_codegen::ir::DebugTag::User(k)]);
    }
}
