//! Bytecode → Cranelift IR for the baseline tier: one block per instruction, entered from a
//! jump table on the frame's saved `ip`, so an activation can start or resume at any
//! instruction the interpreter or a stub left it at. Nothing is speculated: the code runs
//! whatever the program does, and never deoptimizes.
//!
//! Invariant: no heap reference is held in an SSA value across a stub call or a direct call.
//! Every value is in its value-stack slot (the frame's base `fp` plus the instruction's static
//! stack height), loaded where it is used, so the collector finds and updates it there.

mod arith;
mod heap;
use heap::HeapSlot;
mod sends;

use cranelift_codegen::ir::condcodes::IntCC;
use cranelift_codegen::ir::{
    types, Block, BlockCall, Function, InstBuilder, JumpTableData, MemFlagsData, SigRef, SourceLoc,
    Value,
};
use cranelift_frontend::{FunctionBuilder, FunctionBuilderContext};
use cranelift_jit::JITModule;
use cranelift_module::Module;
use std::sync::atomic::Ordering::Relaxed;
use tally_heap::object::HEADER_BYTES;
use tally_vm::bytecode::{stack_heights, Op};
use tally_vm::jit::{CompileRequest, Layout, SiteFacts, Status, Stub};

use crate::stub_calls::{self, StubSignatures};
use tally_vm::objects::context;
use tally_vm::runtime::{
    IntOp, HOOK_AT_ENTRY, HOOK_AT_EXIT, TRIVIAL_CONSTANT, TRIVIAL_GETTER, TRIVIAL_RECEIVER,
    TRIVIAL_SETTER,
};

/// The baseline tier's column in per-tier counts (`tally_profile::Tier::column`).
const TIER_COLUMN: usize = 1;

const I64: types::Type = types::I64;
const I32: types::Type = types::I32;
use crate::numbers::{self, add_imm, and_imm, cmp_imm, compare_cc, float_cc, FALSE, TRUE};
/// Symbols' tag (`tally_heap::value`): the symbol's id above it.
const SYMBOL_TAG: i64 = 0b010;

/// Writes `code`'s function into `func`.
pub(crate) fn translate(
    func: &mut Function,
    builder_context: &mut FunctionBuilderContext,
    module: &JITModule,
    request: &CompileRequest,
    layout: &Layout,
) -> Result<(), String> {
    let code = request.code;
    let ops = &code.ops;
    if ops.is_empty() {
        return Err("no bytecode".into());
    }
    let heights = heights_of(request)?;
    let call_conv = module.isa().default_call_conv();
    let mut sigs = StubSignatures::new(func, call_conv, &first_stubs(&layout.stubs));
    let entry_sig = func.import_signature(crate::compiler::entry_signature(module));
    let mut b = FunctionBuilder::new(func, builder_context);
    let entry = b.create_block();
    b.append_block_params_for_function_params(entry);
    let blocks: Vec<Block> = ops.iter().map(|_| b.create_block()).collect();
    let bad_ip = b.create_block();
    let exit = b.create_block();
    b.append_block_param(exit, I32);

    // A new frame (from a direct call) starts at instruction 0 with its frame and base
    // passed in; a resumed one reads them, and its `ip`, from the top frame.
    b.switch_to_block(entry);
    let params = b.block_params(entry).to_vec();
    let (vm, frame_in, bp_in, resume) = (params[0], params[1], params[2], params[3]);
    let flags = MemFlagsData::trusted();
    let read_frame = b.create_block();
    let join = b.create_block();
    for t in [I64, I64, I32] {
        b.append_block_param(join, t);
    }
    let zero = b.ins().iconst(I32, 0);
    let fresh_args = [frame_in.into(), bp_in.into(), zero.into()];
    let hooked_entry = code.hooks.load(Relaxed) & HOOK_AT_ENTRY != 0;
    if layout.count_calls || hooked_entry {
        // A direct call from compiled code: `--count-calls` counts it as a call of this code
        // in this tier, and its entry hook runs (calls through the dispatcher are counted,
        // and their hooks run, where the interpreter sets up the frame).
        let fresh = b.create_block();
        b.ins().brif(resume, read_frame, &[], fresh, &[]);
        b.switch_to_block(fresh);
        if layout.count_calls {
            crate::counters::count_call(&mut b, code, TIER_COLUMN);
        }
        if hooked_entry {
            let go_on = b.create_block();
            method_hook_point(&mut b, layout, &mut sigs, vm, 0, go_on, exit);
            b.switch_to_block(go_on);
        }
        b.ins().jump(join, &fresh_args);
    } else {
        b.ins().brif(resume, read_frame, &[], join, &fresh_args);
    }
    b.switch_to_block(read_frame);
    let frame_stack = b.ins().load(I64, flags, vm, layout.frame_stack);
    let depth = b.ins().load(I64, flags, frame_stack, layout.frames_len);
    let frames = b.ins().load(I64, flags, frame_stack, layout.frames_base);
    let top = add_imm(&mut b, depth, -1);
    let offset = mul_imm(&mut b, top, layout.frame_size as i64);
    let frame = b.ins().iadd(frames, offset);
    let ip = b.ins().load(I32, flags, frame, layout.frame_ip);
    let bp = b.ins().uload32(flags, frame, layout.frame_bp);
    b.ins().jump(join, &[frame.into(), bp.into(), ip.into()]);

    b.switch_to_block(join);
    let params = b.block_params(join).to_vec();
    let (frame, bp, ip32) = (params[0], params[1], params[2]);
    let stack = b.ins().load(I64, flags, vm, layout.stack_base);
    let bp_bytes = mul_imm(&mut b, bp, 8);
    let fp = b.ins().iadd(stack, bp_bytes);
    let dispatch = b.create_block();
    let at_start = cmp_imm(&mut b, IntCC::Equal, ip32, 0);
    b.ins().brif(at_start, blocks[0], &[], dispatch, &[]);
    b.switch_to_block(dispatch);
    let default = b.func.dfg.block_call(bad_ip, &[]);
    let table: Vec<BlockCall> = blocks
        .iter()
        .map(|&blk| b.func.dfg.block_call(blk, &[]))
        .collect();
    let jt = b.create_jump_table(JumpTableData::new(default, &table));
    b.ins().br_table(ip32, jt);

    // An `ip` no instruction block serves (never saved by this code): let the interpreter
    // have the frame. It and the exit run for no one bytecode.
    b.set_srcloc(SourceLoc::new(crate::pc_map::SHARED_EXIT));
    b.switch_to_block(bad_ip);
    let status = b.ins().iconst(I32, Status::Interpret as i64);
    b.ins().return_(&[status]);

    b.switch_to_block(exit);
    let status = b.block_params(exit)[0];
    b.ins().return_(&[status]);

    let mut t = Translator {
        b,
        vm,
        layout,
        sigs,
        entry_sig,
        exit,
        s: Scope {
            frame,
            fp,
            bp,
            request,
            blocks,
            handovers: Vec::new(),
        },
    };
    t.translate_ops(&heights)?;
    t.finish_handovers();
    t.b.seal_all_blocks();
    let config = module.target_config();
    t.b.finalize(config);
    Ok(())
}

/// The stack height before each instruction of `request`'s code (`None`: unreachable),
/// once every site it sends from is known to be in the request.
fn heights_of(request: &CompileRequest) -> Result<Vec<Option<u32>>, String> {
    let code = request.code;
    for op in &code.ops {
        if let Some(site) = op.site() {
            request.site(site)?;
        }
    }
    let start = 1 + code.num_args as usize + code.num_locals as usize;
    let (heights, _) = stack_heights(&code.ops, start, |s| {
        request.site(s).map_or(0, |f| f.argc as usize)
    })?;
    Ok(heights)
}

/// A method-hook point (`kind` 0: entry, 1: before the return; GC hints, phases): when
/// `method_hooks_armed` is set, calls the `method_hook` stub (which may collect: everything is
/// in the frame by then), then goes on to `go_on`, or leaves through `exit` with the stub's
/// status if it failed.
fn method_hook_point(
    b: &mut FunctionBuilder,
    layout: &Layout,
    sigs: &mut StubSignatures,
    vm: Value,
    kind: i64,
    go_on: Block,
    exit: Block,
) {
    let address = b.ins().iconst(I64, layout.method_hooks_armed as i64);
    let armed = b.ins().uload8(I32, MemFlagsData::trusted(), address, 0);
    let hook = b.create_block();
    b.set_cold_block(hook);
    b.ins().brif(armed, hook, &[], go_on, &[]);
    b.switch_to_block(hook);
    let stub = stub_calls::address(b, layout.stubs.method_hook);
    let kind = b.ins().iconst(I32, kind);
    let call = stub_calls::call_at(b, sigs, stub, &[vm, kind]);
    let status = b.inst_results(call)[0];
    let ok = cmp_imm(b, IntCC::Equal, status, Status::Continue as i64);
    b.ins().brif(ok, go_on, &[], exit, &[status.into()]);
}

/// The stubs whose signatures the tier imports first, in this order (so that listings
/// number them the same in every function): one of each shape it calls.
fn first_stubs(stubs: &tally_vm::jit::Stubs) -> [Stub; 6] {
    [
        stubs.back_edge,
        stubs.send,
        stubs.send_nil_test,
        stubs.literal,
        stubs.record_value,
        stubs.write_barrier,
    ]
}

struct Translator<'a, 'f> {
    b: FunctionBuilder<'f>,
    vm: Value,
    layout: &'a Layout,
    sigs: StubSignatures,
    /// A compiled function's signature (`super::entry_signature`), for direct calls.
    entry_sig: SigRef,
    /// Returns its one parameter, a status.
    exit: Block,
    /// The frame and code being translated.
    s: Scope<'a>,
}

/// The frame and code being translated.
struct Scope<'a> {
    /// The frame (its address in the frame array).
    frame: Value,
    /// The address of the frame's first value-stack slot (its receiver).
    fp: Value,
    /// The frame's base index in the value stack (a u64).
    bp: Value,
    /// The code and its send sites (all checked to be there before translation starts).
    request: &'a CompileRequest,
    blocks: Vec<Block>,
    /// Blocks that hand the frame to the interpreter: (block, instruction, height).
    handovers: Vec<(Block, usize, i32)>,
}

/// The code a direct call enters and the frame fields that differ between a method's and a
/// block's activation.
struct Callee {
    /// Its code id (I32), `&Code` and compiled function (I64s).
    id: Value,
    code: Value,
    function: Value,
    /// The frame's outer context and closure (nil and none for a method).
    ctx: Value,
    closure: Value,
}

/// The frame stack (its address) and the number of live frames, loaded once per direct call.
#[derive(Clone, Copy)]
struct FrameDepth {
    frame_stack: Value,
    depth: Value,
}

impl<'a> Translator<'a, '_> {
    /// The source location of instruction `i`: its bytecode index.
    fn loc(&self, i: usize) -> SourceLoc {
        SourceLoc::new(i as u32)
    }

    /// Translates every instruction of the code into its block.
    fn translate_ops(&mut self, heights: &[Option<u32>]) -> Result<(), String> {
        let ops = &self.s.request.code.ops;
        for (i, &op) in ops.iter().enumerate() {
            self.b.switch_to_block(self.s.blocks[i]);
            self.b.set_srcloc(self.loc(i));
            match heights[i] {
                Some(h) => self.op(i, op, h as i32, ops.len())?,
                None => {
                    let status = self.b.ins().iconst(I32, Status::Interpret as i64);
                    self.b.ins().return_(&[status]);
                }
            }
        }
        Ok(())
    }

    /// Returns the value on top of the `h` values on the stack at instruction `i`: the
    /// function answers `Returned`.
    fn return_top(&mut self, h: i32, i: usize) {
        self.sync(h, i + 1);
        if self.s.request.code.hooks.load(Relaxed) & HOOK_AT_EXIT != 0 {
            let leave = self.b.create_block();
            let (vm, exit) = (self.vm, self.exit);
            method_hook_point(&mut self.b, self.layout, &mut self.sigs, vm, 1, leave, exit);
            self.b.switch_to_block(leave);
        }
        self.leave(Status::Returned);
    }

    fn site(&self, site: u32) -> SiteFacts {
        self.s
            .request
            .site(site)
            .expect("every site was checked before translation")
    }
}

impl Translator<'_, '_> {
    /// Pushes global `slot`'s value at height `h`, or hands over to the interpreter at `i`
    /// (which sends `unknownGlobal:`).
    fn push_global(&mut self, slot: u32, h: i32, i: usize) {
        let index = self.b.ins().iconst(I32, slot as i64);
        let v = self.call_stub(self.layout.stubs.global, &[index]);
        let undefined = cmp_imm(&mut self.b, IntCC::Equal, v, 0);
        let defined = self.b.create_block();
        let unknown = self.interpret_block(i, h);
        self.b.ins().brif(undefined, unknown, &[], defined, &[]);
        self.b.switch_to_block(defined);
        self.set_slot(h, v);
    }

    /// Stores the value on top of the `h` into slot `index` of the context `level` out.
    fn store_context(&mut self, level: u8, index: u16, h: i32) {
        let ctx = self.context(level);
        let v = self.slot(h - 1);
        let address = add_imm(&mut self.b, ctx, Self::context_slot_offset(index) as i64);
        self.store_into_heap(
            v,
            HeapSlot {
                object: ctx,
                address,
            },
        );
    }

    /// A loop's back-edge to `to` (instruction `t`, `h` values on the stack): on to the
    /// loop head, through the `back_edge` stub when the yieldpoint flag has a bit raised.
    fn back_edge(&mut self, t: usize, to: Block, h: i32) {
        if self.layout.count_calls {
            crate::counters::count_loop(&mut self.b, self.s.request.code, TIER_COLUMN);
        }
        let address = self.b.ins().iconst(I64, self.layout.yieldpoint_flag as i64);
        let bits = self
            .b
            .ins()
            .uload8(I32, MemFlagsData::trusted(), address, 0);
        let raised = and_imm(&mut self.b, bits, self.layout.yieldpoint_bits as i64);
        let yieldpoint = self.b.create_block();
        self.b.set_cold_block(yieldpoint);
        self.b.ins().brif(raised, yieldpoint, &[], to, &[]);
        self.b.switch_to_block(yieldpoint);
        self.sync(h, t);
        let status = self.call_stub(self.layout.stubs.back_edge, &[]);
        self.continue_or_leave(status, to);
    }

    /// `isNil` (`is_nil`) or `notNil` of the value on top of the `h` at instruction `i`:
    /// answered by a comparison with nil while the core library's definitions stand (as the
    /// interpreter does), else sent through the stub; then on to `next`.
    fn nil_test(&mut self, site: u32, is_nil: bool, h: i32, i: usize, next: Block) {
        let fast = self.b.create_block();
        let slow = self.b.create_block();
        numbers::branch_on_nil_tests(&mut self.b, self.vm, &self.layout.calls, fast, slow);
        self.b.switch_to_block(fast);
        let v = self.slot(h - 1);
        let answer = numbers::nil_test(&mut self.b, is_nil, v);
        self.set_slot(h - 1, answer);
        self.jump(next);
        self.b.switch_to_block(slow);
        self.sync(h, i + 1);
        let site = self.b.ins().iconst(I32, site as i64);
        let is_nil = self.b.ins().iconst(I32, is_nil as i64);
        let stub = self.layout.stubs.send_nil_test;
        let status = self.call_stub(stub, &[site, is_nil]);
        self.continue_or_leave(status, next);
    }
}

fn mul_imm(b: &mut FunctionBuilder, x: Value, imm: i64) -> Value {
    let ty = b.func.dfg.value_type(x);
    let c = b.ins().iconst(ty, imm);
    b.ins().imul(x, c)
}

impl Translator<'_, '_> {
    fn flags() -> MemFlagsData {
        MemFlagsData::trusted()
    }

    fn block(&self, at: usize) -> Result<Block, String> {
        self.s
            .blocks
            .get(at)
            .copied()
            .ok_or_else(|| format!("a jump to {at} leaves the code"))
    }

    /// The value in stack slot `k` of the frame (0 is the receiver).
    fn slot(&mut self, k: i32) -> Value {
        self.b.ins().load(I64, Self::flags(), self.s.fp, k * 8)
    }

    fn set_slot(&mut self, k: i32, v: Value) {
        self.b.ins().store(Self::flags(), v, self.s.fp, k * 8);
    }

    fn jump(&mut self, to: Block) {
        self.b.ins().jump(to, &[]);
    }

    /// Makes the VM's view exact before a stub or an exit: the stack height (`h` values above
    /// the frame's base) and the frame's `ip`.
    fn sync(&mut self, h: i32, ip: usize) {
        let len = add_imm(&mut self.b, self.s.bp, h as i64);
        self.b
            .ins()
            .store(Self::flags(), len, self.vm, self.layout.stack_len);
        let ip = self.b.ins().iconst(I32, ip as i64);
        self.b
            .ins()
            .store(Self::flags(), ip, self.s.frame, self.layout.frame_ip);
    }

    fn leave(&mut self, status: Status) {
        let s = self.b.ins().iconst(I32, status as i64);
        self.b.ins().return_(&[s]);
    }

    /// A new block that hands the frame to the interpreter at instruction `at` with `h`
    /// values on the stack (error paths and rare cases: the interpreter redoes the
    /// instruction and reports what went wrong).
    /// Filled in at the end (`finish_handovers`): a block must be complete before the
    /// builder switches away from it.
    fn interpret_block(&mut self, at: usize, h: i32) -> Block {
        let blk = self.b.create_block();
        self.b.set_cold_block(blk);
        self.s.handovers.push((blk, at, h));
        blk
    }

    fn finish_handovers(&mut self) {
        for (blk, at, h) in std::mem::take(&mut self.s.handovers) {
            self.b.switch_to_block(blk);
            self.b.set_srcloc(self.loc(at));
            self.sync(h, at);
            self.leave(Status::Interpret);
        }
    }

    /// Pushes the receiver's field `index` at slot `h`, or hands over to the interpreter at
    /// `i` (which reports the missing field).
    fn push_field(&mut self, index: u16, h_at: i32, i: usize, h: i32) {
        let miss = self.interpret_block(i, h);
        let field = self.field_address(index, miss);
        let v = self.b.ins().load(I64, Self::flags(), field.address, 0);
        self.set_slot(h_at, v);
    }

    fn op(&mut self, i: usize, op: Op, h: i32, len: usize) -> Result<(), String> {
        let next = if i + 1 < len {
            self.s.blocks.get(i + 1).copied()
        } else {
            None
        };
        let next_block =
            |n: Option<Block>| n.ok_or_else(|| "execution runs off the end".to_string());
        match op {
            Op::PushLocal(k) => {
                let v = self.slot(k as i32);
                self.set_slot(h, v);
                self.jump(next_block(next)?);
            }
            Op::StoreLocal(k) | Op::PopLocal(k) => {
                let v = self.slot(h - 1);
                self.set_slot(k as i32, v);
                self.jump(next_block(next)?);
            }
            Op::PushCtx { level, index } => {
                let ctx = self.context(level);
                let v =
                    self.b
                        .ins()
                        .load(I64, Self::flags(), ctx, Self::context_slot_offset(index));
                self.set_slot(h, v);
                self.jump(next_block(next)?);
            }
            Op::StoreCtx { level, index } | Op::PopCtx { level, index } => {
                self.store_context(level, index, h);
                self.jump(next_block(next)?);
            }
            Op::PushField(k) => {
                self.push_field(k, h, i, h);
                self.jump(next_block(next)?);
            }
            Op::StoreField(k) | Op::PopField(k) => {
                let miss = self.interpret_block(i, h);
                let field = self.field_address(k, miss);
                let v = self.slot(h - 1);
                self.store_into_heap(v, field);
                self.jump(next_block(next)?);
            }
            Op::PushLiteral(k) => {
                let index = self.b.ins().iconst(I32, k as i64);
                let v = self.call_stub(self.layout.stubs.literal, &[index]);
                self.set_slot(h, v);
                self.jump(next_block(next)?);
            }
            Op::PushConst(v) => {
                let v = self.b.ins().iconst(I64, v.0 as i64);
                self.set_slot(h, v);
                self.jump(next_block(next)?);
            }
            Op::PushGlobal(slot) => {
                self.push_global(slot, h, i);
                self.jump(next_block(next)?);
            }
            Op::PushBlock(code) => {
                self.sync(h, i + 1);
                let code = self.b.ins().iconst(I32, code as i64);
                let status = self.call_stub(self.layout.stubs.push_block, &[code]);
                self.continue_or_leave(status, next_block(next)?);
            }
            Op::Pop => self.jump(next_block(next)?),
            Op::Dup => {
                let v = self.slot(h - 1);
                self.set_slot(h, v);
                self.jump(next_block(next)?);
            }
            Op::Send(site) => self.direct_send(site, h, i)?,
            Op::SuperSend(site) => self.send_stub(self.layout.stubs.super_send, site, h, i)?,
            Op::SendBinary(site) => self.send_binary(site, h, i)?,
            Op::SendIsNil(site) | Op::SendNotNil(site) => {
                let is_nil = matches!(op, Op::SendIsNil(_));
                self.nil_test(site, is_nil, h, i, next_block(next)?);
            }
            Op::Return => self.return_top(h, i),
            Op::ReturnSelf | Op::ReturnLocal(_) => {
                let k = if let Op::ReturnLocal(k) = op {
                    k as i32
                } else {
                    0
                };
                let v = self.slot(k);
                self.set_slot(h, v);
                self.return_top(h + 1, i);
            }
            Op::ReturnField(k) => {
                self.push_field(k, h, i, h);
                self.return_top(h + 1, i);
            }
            Op::ReturnNonLocal => {
                self.sync(h, i);
                self.leave(Status::Interpret);
            }
            Op::Jump(t) => {
                let to = self.block(t as usize)?;
                self.jump(to);
            }
            Op::JumpBack(t) => {
                let to = self.block(t as usize)?;
                self.back_edge(t as usize, to, h);
            }
            Op::JumpIfTrue(t) => self.conditional_jump(t, true, h, i)?,
            Op::JumpIfFalse(t) => self.conditional_jump(t, false, h, i)?,
            Op::PushLocal2(a, c) => {
                let x = self.slot(a as i32);
                let y = self.slot(c as i32);
                self.set_slot(h, x);
                self.set_slot(h + 1, y);
                self.jump(next_block(next)?);
            }
            Op::PopPushLocal(k) => {
                let v = self.slot(k as i32);
                self.set_slot(h - 1, v);
                self.jump(next_block(next)?);
            }
            Op::PopPushField(k) => {
                self.push_field(k, h - 1, i, h);
                self.jump(next_block(next)?);
            }
            Op::PushLocalSend(k, site) => {
                let v = self.slot(k as i32);
                self.set_slot(h, v);
                self.direct_send(site, h + 1, i)?;
            }
            Op::PushLocalSendBinary(k, site) => {
                let v = self.slot(k as i32);
                self.set_slot(h, v);
                self.send_binary(site, h + 1, i)?;
            }
            Op::PushConstSendBinary(v, site) => {
                let v = self.b.ins().iconst(I64, v.0 as i64);
                self.set_slot(h, v);
                self.send_binary(site, h + 1, i)?;
            }
            Op::SendCompareJumpIfFalse(site, t) => self.compare_and_branch(site, t, false, h, i)?,
            Op::SendCompareJumpIfTrue(site, t) => self.compare_and_branch(site, t, true, h, i)?,
        }
        Ok(())
    }
}
