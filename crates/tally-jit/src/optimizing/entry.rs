//! The body's entry: who called it, the frame it runs in (set up by its caller, or pushed
//! here for a direct call), the native activation record the collector and stack walks
//! read, then the IR's entry block.

use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;

use cranelift_codegen::ir::condcodes::IntCC;
use cranelift_codegen::ir::{Block, InstBuilder, SourceLoc, Value};
use cranelift_frontend::FunctionBuilder;
use tally_vm::jit::{CompileRequest, Layout, SafepointTable};
use tally_vm::runtime::{Code, HOOK_AT_ENTRY};
use tally_vm::tally_profile::gc_hints::PointKind;

use super::heap::slot_offset;
use super::lowerer::Lowerer;
use super::{flags, I64, NIL};
use crate::numbers::{add_imm, cmp_imm};
use crate::stub_calls::StubSignatures;

/// Who called the body, as its second parameter says (an I32). [`Caller::Direct`] is 0, so
/// a branch on the parameter tests whether a frame was set up for the body.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Caller {
    /// Native code, directly: the body pushes its frame (or, where it cannot, makes the
    /// call through the stub).
    Direct,
    /// The dispatcher, through the adapter: the top frame is set up, at its start, its
    /// locals and context read from it.
    Dispatcher,
    /// The dispatcher, through the adapter, with the top frame stopped at the `k`-th loop
    /// head with an on-stack-replacement entry: the body reads its locals, operand stack
    /// and context there.
    LoopEntry(u32),
    /// The baseline tier's code, which pushed the frame and calls the adapter as for a new
    /// frame: a frame like the dispatcher's, but a call nobody has counted or hooked yet.
    FreshFromCompiled,
}

impl Caller {
    /// The parameter's value (any other than the loop entries' for a fresh call).
    pub(crate) fn code(self) -> i64 {
        match self {
            Caller::Direct => 0,
            Caller::Dispatcher => 1,
            Caller::LoopEntry(k) => 2 + i64::from(k),
            Caller::FreshFromCompiled => 0x4000_0000,
        }
    }
}

/// The activation's values, as the entry made them.
pub(super) struct Activation {
    /// The `*mut Vm` the body got.
    pub(super) vm: Value,
    /// Who called it (a [`Caller`]'s code, an I32).
    pub(super) caller: Value,
    /// The receiver and arguments as the body got them.
    pub(super) params: Vec<Value>,
    /// The frame (its address), the address of its first value-stack slot, and its
    /// `NativeActivation`.
    pub(super) frame: Value,
    pub(super) slots: Value,
    pub(super) native: Value,
}

/// What the prologue made.
pub(super) struct Entered {
    pub(super) act: Activation,
    /// Each IR block's Cranelift block (made first, in the IR's order).
    pub(super) blocks: Vec<Block>,
    /// The block every way out of the function returns through (`Lowerer::return_`), first
    /// used by the call through the stub.
    pub(super) epilogue: Block,
    /// The body's operands: receiver, arguments and, for a block, its closure.
    pub(super) operands: Vec<Value>,
}

/// Writes the body's prologue. For the dispatcher (through the adapter) the frame is the
/// top one, set up; for a direct call this pushes it, after checking the frame stack's
/// limit (a raised yieldpoint flag trips it), the value stack's room and the native stack,
/// or else makes the call through the stub instead (which takes the interpreter's way in:
/// the prologue hook, the stack-overflow error). Then it registers the native activation;
/// [`Lowerer::start`] goes on from there.
pub(super) fn enter(
    b: &mut FunctionBuilder,
    sigs: &mut StubSignatures,
    layout: &Layout,
    request: &CompileRequest,
    ir: &tally_ir::Function,
    table: &Arc<SafepointTable>,
) -> Entered {
    let code = request.code;
    let entry = b.create_block();
    b.append_block_params_for_function_params(entry);
    let blocks = (0..ir.blocks.len()).map(|_| b.create_block()).collect();
    b.switch_to_block(entry);
    b.set_srcloc(SourceLoc::new(0));
    let params = b.block_params(entry).to_vec();
    let (vm, caller) = (params[0], params[1]);
    let operands = params[2..].to_vec();
    let own = operands[..=code.num_args as usize].to_vec();
    for &p in &own {
        b.declare_value_needs_stack_map(p);
    }
    let framed = b.create_block();
    let direct = b.create_block();
    let join = b.create_block();
    b.append_block_param(join, I64);
    b.append_block_param(join, I64);
    b.ins().brif(caller, framed, &[], direct, &[]);
    let mut p = Prologue {
        b,
        layout,
        code,
        vm,
        caller,
        column: usize::from(table.tier_column()),
    };
    p.b.switch_to_block(framed);
    p.frame_set_up(join);
    p.b.switch_to_block(direct);
    let epilogue = p.push_frame(sigs, &operands, join);
    p.b.switch_to_block(join);
    let (frame, bp) = (p.b.block_params(join)[0], p.b.block_params(join)[1]);
    let (slots, native) = p.register(frame, bp, table);
    Entered {
        act: Activation {
            vm,
            caller,
            params: own,
            frame,
            slots,
            native,
        },
        blocks,
        epilogue,
        operands,
    }
}

/// The prologue being written.
struct Prologue<'p, 'f> {
    b: &'p mut FunctionBuilder<'f>,
    layout: &'p Layout,
    code: &'static Code,
    vm: Value,
    caller: Value,
    /// The profile's column of the version's tier.
    column: usize,
}

impl Prologue<'_, '_> {
    pub(super) fn iconst(&mut self, ty: cranelift_codegen::ir::types::Type, v: i64) -> Value {
        self.b.ins().iconst(ty, v)
    }

    /// A frame its caller set up: the top one. Jumps to `join` with its address and base.
    pub(super) fn frame_set_up(&mut self, join: Block) {
        let (layout, code, vm) = (self.layout, self.code, self.vm);
        if layout.count_calls {
            // A fresh call from compiled code of another tier, which pushed the frame (the
            // dispatcher's frames are counted where the VM set them up).
            let fresh = cmp_imm(
                self.b,
                IntCC::Equal,
                self.caller,
                Caller::FreshFromCompiled.code(),
            );
            let count = self.b.create_block();
            let counted = self.b.create_block();
            self.b.ins().brif(fresh, count, &[], counted, &[]);
            self.b.switch_to_block(count);
            crate::counters::count_call(self.b, code, self.column);
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
        let top = add_imm(self.b, depth, -1);
        let size = self.iconst(I64, layout.frame_size as i64);
        let offset = self.b.ins().imul(top, size);
        let frame = self.b.ins().iadd(frames, offset);
        let bp = self.b.ins().uload32(flags(), frame, layout.frame_bp);
        self.b.ins().jump(join, &[frame.into(), bp.into()]);
    }

    /// A direct call: pushes the frame where there is room (then jumps to `join` with its
    /// address and base), else makes the call through the stub and returns its value.
    /// Answers the epilogue block that return goes through.
    pub(super) fn push_frame(
        &mut self,
        sigs: &mut StubSignatures,
        operands: &[Value],
        join: Block,
    ) -> Block {
        let (layout, code, vm) = (self.layout, self.code, self.vm);
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
        let needed = add_imm(self.b, stack_len, code.max_height as i64 + 1);
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
        let result = self.call_through_stub(sigs, operands);
        let epilogue = self.b.create_block();
        self.b.append_block_param(epilogue, I64);
        self.b.ins().jump(epilogue, &[result.into()]);

        self.b.switch_to_block(push);
        let frames = self
            .b
            .ins()
            .load(I64, flags(), frame_stack, layout.frames_base);
        let size = self.iconst(I64, layout.frame_size as i64);
        let offset = self.b.ins().imul(depth, size);
        let frame = self.b.ins().iadd(frames, offset);
        self.write_frame(frame, stack_len, operands);
        let depth = add_imm(self.b, depth, 1);
        self.b
            .ins()
            .store(flags(), depth, frame_stack, layout.frames_len);
        self.b.ins().jump(join, &[frame.into(), stack_len.into()]);
        epilogue
    }

    /// Writes the pushed frame's record at `frame`, its base `stack_len`.
    pub(super) fn write_frame(&mut self, frame: Value, stack_len: Value, operands: &[Value]) {
        let (layout, code) = (self.layout, self.code);
        // `code` and `ip` (0) in one store, `bp` and `mark` in another (`Frame`'s layout).
        let code_ip = self.iconst(I64, code.id as i64);
        self.b.ins().store(flags(), code_ip, frame, 0);
        if layout.count_calls {
            // A direct call (calls through the dispatcher or a stub are counted where the
            // VM sets up their frames).
            crate::counters::count_call(self.b, code, self.column);
        }
        let mark = if layout.mark_frames {
            tally_vm::tally_profile::FrameMark::of(self.column as u8, false) as i64
        } else {
            0
        };
        let mark = self.iconst(I64, mark << 32);
        let bp_mark = self.b.ins().bor(stack_len, mark);
        self.b.ins().store(flags(), bp_mark, frame, layout.frame_bp);
        let (ctx, closure) = if code.kind == tally_vm::compiler::CodeKind::Block {
            let closure = *operands.last().expect("a closure");
            let ctx = self.b.ins().load(
                I64,
                flags(),
                closure,
                slot_offset(tally_vm::objects::block::CONTEXT),
            );
            (ctx, closure)
        } else {
            (self.iconst(I64, NIL), self.iconst(I64, 0))
        };
        self.b.ins().store(flags(), ctx, frame, layout.frame_ctx);
        self.b
            .ins()
            .store(flags(), closure, frame, layout.native.frame_closure);
    }

    /// The call of this method or block through the stub (the receiver and arguments, a
    /// block's closure last, as the body takes them): what a direct call that cannot push
    /// its frame does instead.
    pub(super) fn call_through_stub(
        &mut self,
        sigs: &mut StubSignatures,
        operands: &[Value],
    ) -> Value {
        let is_block = self.code.kind == tally_vm::compiler::CodeKind::Block;
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
            (self.layout.stubs.ir_call_method, Some(self.code.id))
        };
        let call = super::calls::call_with_operands(self.b, sigs, self.vm, stub, what, &words);
        self.b.inst_results(call)[0]
    }

    /// The frame's value-stack slots and its native activation record (the frame pointer
    /// and the version's safepoint table written into it), from the frame at `frame` with
    /// base `bp`.
    pub(super) fn register(
        &mut self,
        frame: Value,
        bp: Value,
        table: &Arc<SafepointTable>,
    ) -> (Value, Value) {
        let (layout, vm) = (self.layout, self.vm);
        let stack = self.b.ins().load(I64, flags(), vm, layout.stack_base);
        let eight = self.iconst(I64, 8);
        let bp_bytes = self.b.ins().imul(bp, eight);
        let slots = self.b.ins().iadd(stack, bp_bytes);
        let frame_stack = self.b.ins().load(I64, flags(), vm, layout.frame_stack);
        let delta = self
            .b
            .ins()
            .load(I64, flags(), frame_stack, layout.native.delta);
        let native = self.b.ins().iadd(frame, delta);
        let fp = self.b.ins().get_frame_pointer(I64);
        self.b.ins().store(flags(), fp, native, layout.native.fp);
        let table_address = self.iconst(I64, Arc::as_ptr(table) as i64);
        self.b
            .ins()
            .store(flags(), table_address, native, layout.native.table);
        (slots, native)
    }
}

impl Lowerer<'_, '_> {
    /// After the prologue: the entry hook of a hooked method, then the jump to the IR's
    /// entry with the body's operands.
    pub(super) fn start(&mut self, operands: Vec<Value>) -> Result<(), String> {
        let code = self.request.code;
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
            let caller = self.act.caller;
            let is_direct = self.cmp_imm(IntCC::Equal, caller, Caller::Direct.code());
            let fresh = self.cmp_imm(IntCC::Equal, caller, Caller::FreshFromCompiled.code());
            let hook = self.b.ins().bor(is_direct, fresh);
            self.b.ins().brif(hook, direct, &[], go_on, &[]);
            self.b.switch_to_block(direct);
            self.method_hook(PointKind::Entry, 0);
            self.b.ins().jump(go_on, &[]);
            self.b.switch_to_block(go_on);
        }
        let target = self.map.blocks[ir_entry.index()];
        let args: Vec<_> = operands.into_iter().map(Into::into).collect();
        self.b.ins().jump(target, &args);
        Ok(())
    }
}
