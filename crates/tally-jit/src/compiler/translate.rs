//! Bytecode → Cranelift IR for both compiled tiers: one block per instruction, entered from a
//! jump table on the frame's saved `ip`, so an activation can start or resume at any
//! instruction the interpreter or a stub left it at (`Shape` says how a tier differs).
//!
//! Invariant: no heap reference is held in an SSA value across a stub call or a direct call.
//! Every value is in its value-stack slot (the frame's base `fp` plus the instruction's static
//! stack height) whenever the collector may run, which updates it when it moves objects; it
//! is loaded again where it is used (`Mode::Memory`) or after the call (`Mode::Registers`).
//! Guards that deoptimize come before anything their instruction changes, so the interpreter
//! can redo the instruction from its start.

use cranelift_codegen::ir::condcodes::{FloatCC, IntCC};
use cranelift_codegen::ir::{
    types, AbiParam, Block, BlockCall, Function, InstBuilder, JumpTableData, MemFlagsData, SigRef,
    Signature, SourceLoc, Value,
};
use cranelift_frontend::{FunctionBuilder, FunctionBuilderContext};
use cranelift_jit::JITModule;
use cranelift_module::Module;
use tally_heap::object::HEADER_BYTES;
use tally_vm::bytecode::{stack_heights, Op};
use tally_vm::jit::{
    CompileRequest, DeoptReason, ExpectedReceivers, ExpectedTarget, InlinedScope, Layout,
    SiteFacts, Status, SCOPE_SHIFT,
};
use tally_vm::objects::{block, context};
use tally_vm::runtime::{
    IntOp, TRIVIAL_CONSTANT, TRIVIAL_GETTER, TRIVIAL_RECEIVER, TRIVIAL_SETTER,
};

const I64: types::Type = types::I64;
const I32: types::Type = types::I32;
const TRUE: i64 = tally_heap::Value::TRUE.0 as i64;
const FALSE: i64 = tally_heap::Value::FALSE.0 as i64;
/// The small-float encoding (`tally_heap::value`): tag `110`, payload = the IEEE bits rotated
/// left by one, rebased so exponent `SMALL_FLOAT_EXP_BASE` is 0, below `PAYLOAD_LIMIT`.
const FLOAT_TAG: i64 = 0b110;
/// Symbols' tag (`tally_heap::value`): the symbol's id above it.
const SYMBOL_TAG: i64 = 0b010;
const ROTATED_EXP_OFFSET: u64 = tally_heap::value::SMALL_FLOAT_EXP_BASE << 53;
const PAYLOAD_LIMIT: u64 = tally_heap::value::SMALL_FLOAT_EXP_COUNT << 53;

/// Writes `code`'s function into `func`.
pub(super) fn translate(
    func: &mut Function,
    builder_context: &mut FunctionBuilderContext,
    module: &JITModule,
    request: &CompileRequest,
    layout: &Layout,
    shape: Shape,
) -> Result<Translated, String> {
    let Shape { mode, speculate } = shape;
    let code = request.code;
    let ops = &code.ops;
    if ops.is_empty() {
        return Err("no bytecode".into());
    }
    let start = 1 + code.num_args as usize + code.num_locals as usize;
    let heights = heights_of(request)?;
    let sigs = StubSignatures::declare(func, module);
    let mut b = FunctionBuilder::new(func, builder_context);
    let vars = match mode {
        Mode::Memory => None,
        Mode::Registers => {
            let slots = heights.iter().flatten().max().copied().unwrap_or(0) + 2;
            Some((0..slots).map(|_| b.declare_var(I64)).collect::<Vec<_>>())
        }
    };
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
    b.ins().brif(
        resume,
        read_frame,
        &[],
        join,
        &[frame_in.into(), bp_in.into(), zero.into()],
    );
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
    // With values in registers, an activation starts or resumes through a block that loads
    // its slots; those blocks, and the jump table, are made at the end, once the places the
    // code leaves a frame at (its resume points) are known.
    let dispatch = b.create_block();
    let start_block = match mode {
        Mode::Memory => blocks[0],
        Mode::Registers => b.create_block(),
    };
    let at_start = cmp_imm(&mut b, IntCC::Equal, ip32, 0);
    b.ins().brif(at_start, start_block, &[], dispatch, &[]);
    if mode == Mode::Memory {
        b.switch_to_block(dispatch);
        let default = b.func.dfg.block_call(bad_ip, &[]);
        let table: Vec<BlockCall> = blocks
            .iter()
            .map(|&blk| b.func.dfg.block_call(blk, &[]))
            .collect();
        let jt = b.create_jump_table(JumpTableData::new(default, &table));
        b.ins().br_table(ip32, jt);
    }

    // An `ip` no instruction block serves (never saved by this code): let the interpreter
    // have the frame.
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
        exit,
        speculated: std::collections::BTreeSet::new(),
        speculate,
        inlined: Vec::new(),
        root: code.id,
        s: Scope {
            frame,
            fp,
            bp,
            request,
            blocks,
            handovers: Vec::new(),
            deopts: Vec::new(),
            vars,
            first_var: start as i32,
            pending_reload: None,
            resumes: std::collections::BTreeSet::new(),
            index: 0,
            return_to: None,
        },
    };
    t.translate_ops(&heights)?;
    t.finish_handovers();
    if mode == Mode::Registers {
        t.s.resumes.insert(0);
        let mut table = vec![t.b.func.dfg.block_call(bad_ip, &[]); ops.len()];
        for &ip in &t.s.resumes.clone() {
            let Some(Some(h)) = heights.get(ip) else {
                continue;
            };
            let resume = t.b.create_block();
            t.b.switch_to_block(resume);
            t.b.set_srcloc(t.loc(ip));
            t.reload(*h as i32);
            let target = t.s.blocks[ip];
            t.jump(target);
            table[ip] = t.b.func.dfg.block_call(resume, &[]);
            if ip == 0 {
                t.b.switch_to_block(start_block);
                t.jump(resume);
            }
        }
        t.b.switch_to_block(dispatch);
        let default = t.b.func.dfg.block_call(bad_ip, &[]);
        let jt = t.b.create_jump_table(JumpTableData::new(default, &table));
        t.b.ins().br_table(ip32, jt);
    }
    let speculated = t.speculated.len() as u32;
    let inlined = std::mem::take(&mut t.inlined);
    t.b.seal_all_blocks();
    let config = module.target_config();
    t.b.finalize(config);
    Ok(Translated {
        speculations: speculated,
        inlined,
    })
}

/// What a translation made besides the function.
pub(super) struct Translated {
    /// Sites the code speculates at.
    pub speculations: u32,
    /// The methods inlined, by scope (`NativeCode::inlined`).
    pub inlined: Vec<InlinedScope>,
}

/// Inline scopes nest at most this deep (the plan's own bound is lower; this one keeps a
/// plan that recurses from unrolling without end).
const MAX_INLINE_DEPTH: u32 = 12;

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

/// How a tier translates.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Shape {
    pub mode: Mode,
    /// Whether to speculate on the sites' feedback (guards that deoptimize).
    pub speculate: bool,
}

/// Where an activation's values live between stub calls.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Mode {
    /// In their value-stack slots, loaded where used (the baseline tier: the least code).
    Memory,
    /// The operand stack (the slots above the locals) in SSA variables (registers), written to
    /// their slots before every stub call and exit and read back after every call (the
    /// collector may have moved what they point to); the receiver, arguments and locals in
    /// their slots, as in `Memory`: the optimizing tier. Keeping the locals in memory costs
    /// a load per use but spares every call a store and a load per local, which made code
    /// with many locals twice the size (and compile time) and slower on call-heavy code.
    /// An activation resumes only where the code left one (after a call, at a loop head, at
    /// 0); anywhere else the interpreter takes the frame.
    Registers,
}

/// Signatures of the stubs, by shape.
struct StubSignatures {
    /// `(vm) -> u32`
    vm: SigRef,
    /// `(vm, u32) -> u32`
    status1: SigRef,
    /// `(vm, u32, u32) -> u32`
    status2: SigRef,
    /// `(vm, u32) -> u64`
    value1: SigRef,
    /// `(vm, u64, u64) -> u32`: `record_value`, `string_equal`
    record: SigRef,
    /// A compiled function's (`super::entry_signature`).
    entry: SigRef,
}

impl StubSignatures {
    fn declare(func: &mut Function, module: &JITModule) -> StubSignatures {
        let mut make = |params: &[types::Type], ret: types::Type| {
            let mut sig: Signature = module.make_signature();
            sig.params.extend(params.iter().map(|&t| AbiParam::new(t)));
            sig.returns.push(AbiParam::new(ret));
            func.import_signature(sig)
        };
        StubSignatures {
            vm: make(&[I64], I32),
            status1: make(&[I64, I32], I32),
            status2: make(&[I64, I32, I32], I32),
            value1: make(&[I64, I32], I64),
            record: make(&[I64, I64, I64], I32),
            entry: func.import_signature(super::entry_signature(module)),
        }
    }
}

struct Translator<'a, 'f> {
    b: FunctionBuilder<'f>,
    vm: Value,
    layout: &'a Layout,
    sigs: StubSignatures,
    /// Returns its one parameter, a status.
    exit: Block,
    /// Sites the code speculates at.
    speculated: std::collections::BTreeSet<u32>,
    /// Whether to speculate on what the sites' feedback says (the optimizing tier).
    speculate: bool,
    /// Every method inlined so far.
    inlined: Vec<InlinedScope>,
    /// The compiled code's own id (a failing guard names it: its version is the one to
    /// invalidate).
    root: u32,
    /// The inline scope being translated (the code's own, or an inlined method's, while
    /// the enclosing one waits in `inline_method`).
    s: Scope<'a>,
}

/// What the translator keeps per inline scope: the frame and code it translates for.
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
    /// Failing guards' blocks: they hand the frame to the interpreter at the instruction's
    /// start and answer `Status::Deopt`.
    deopts: Vec<(Block, Deopt)>,
    /// `Mode::Registers`: the variable of each stack slot from `first_var` up (the operand
    /// stack); the receiver, arguments and locals below it stay in their slots.
    vars: Option<Vec<cranelift_frontend::Variable>>,
    first_var: i32,
    /// The height the last `sync` wrote to memory, until the call after it reads the slots
    /// back; reset at each instruction and exit.
    pending_reload: Option<i32>,
    /// Every `ip` a frame was left at: where the code may be resumed (only the compiled
    /// code's own scope's are used: an inlined method's frame resumes in its own code).
    resumes: std::collections::BTreeSet<usize>,
    /// 0 for the code's own scope, k for `inlined[k - 1]`.
    index: u32,
    /// In an inlined method: the block its returns jump to, the value as its parameter.
    return_to: Option<Block>,
}

/// Where a guard of instruction `at` deoptimizes to: the instruction's start, `height` values
/// on the stack (before anything a fused instruction pushes).
#[derive(Clone, Copy)]
struct Deopt {
    at: usize,
    height: i32,
    site: u32,
    reason: DeoptReason,
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

/// The instruction being translated, as a guard needs it: its index and its stack height
/// at its start.
#[derive(Clone, Copy)]
struct At {
    i: usize,
    h0: i32,
}

impl<'a> Translator<'a, '_> {
    /// Whether this tier speculates on what the sites' feedback says.
    fn speculates(&self) -> bool {
        self.speculate
    }

    /// The source location of instruction `i` of the scope being translated (its scope
    /// above `SCOPE_SHIFT` bits of bytecode index; scope 0 is the index alone).
    fn loc(&self, i: usize) -> SourceLoc {
        SourceLoc::new((self.s.index << SCOPE_SHIFT) | i as u32)
    }

    /// Translates every instruction of the scope's code into its block.
    fn translate_ops(&mut self, heights: &[Option<u32>]) -> Result<(), String> {
        let ops = &self.s.request.code.ops;
        for (i, &op) in ops.iter().enumerate() {
            self.b.switch_to_block(self.s.blocks[i]);
            self.b.set_srcloc(self.loc(i));
            self.s.pending_reload = None;
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

    /// Makes `next` the scope being translated and answers the one it replaces.
    fn swap_scope(&mut self, next: Scope<'a>) -> Scope<'a> {
        std::mem::replace(&mut self.s, next)
    }

    /// Returns the value on top of the `h` values on the stack at instruction `i`: the
    /// function answers `Returned`, or an inlined method hands the value to its caller's
    /// code.
    fn return_top(&mut self, h: i32, i: usize) {
        match self.s.return_to {
            Some(to) => {
                let v = self.slot(h - 1);
                self.s.pending_reload = None;
                self.b.ins().jump(to, &[v.into()]);
            }
            None => {
                self.sync(h, i + 1);
                self.leave(Status::Returned);
            }
        }
    }

    /// Inlines `callee` (its receiver's class already guarded) at the send at `i`, whose
    /// receiver and `argc` arguments are below `h`. Its frame is pushed as a call would push
    /// it, so that everything that walks or resumes frames (stubs, deoptimization, the
    /// collector, samples, the dispatcher after a stub changed the frames) finds what a call
    /// would have made; its code is translated here, with its own operand variables, and its
    /// returns go on at `i + 1`. What the push cannot do (a tripped push limit: a profiler
    /// hook due; too little value stack) goes to `slow`.
    fn inline_method(
        &mut self,
        callee: &'a CompileRequest,
        recv_slot: i32,
        argc: i32,
        h: i32,
        i: usize,
        slow: Block,
    ) -> Result<(), String> {
        let code = callee.code;
        let heights = heights_of(callee)?;
        let room = self.b.ins().iconst(I64, code.room_above_arguments as i64);
        let (fits, frames) = self.room_for_call(h, room);
        let push = self.b.create_block();
        self.b.ins().brif(fits, push, &[], slow, &[]);
        self.b.switch_to_block(push);
        let id = self.b.ins().iconst(I32, code.id as i64);
        let address = self
            .b
            .ins()
            .iconst(I64, code as *const tally_vm::runtime::Code as i64);
        let nil = self.b.ins().iconst(I64, tally_heap::Value::NIL.0 as i64);
        let none = self.b.ins().iconst(I64, 0);
        let pushed = Callee {
            id,
            code: address,
            function: none,
            ctx: nil,
            closure: none,
        };
        let (frame, bp) = self.push_frame(&pushed, frames, argc, h, i, Some(code.num_locals));
        let fp = add_imm(&mut self.b, self.s.fp, recv_slot as i64 * 8);
        let ret = self.b.create_block();
        self.b.append_block_param(ret, I64);
        let blocks: Vec<Block> = code.ops.iter().map(|_| self.b.create_block()).collect();
        let slots = heights.iter().flatten().max().copied().unwrap_or(0) + 2;
        let vars = Some((0..slots).map(|_| self.b.declare_var(I64)).collect());
        self.inlined.push(InlinedScope {
            code: code.id,
            parent: self.s.index,
            call_bci: i as u32,
        });
        let entry = blocks[0];
        let outer = self.swap_scope(Scope {
            frame,
            fp,
            bp,
            request: callee,
            blocks,
            handovers: Vec::new(),
            deopts: Vec::new(),
            vars,
            first_var: 1 + code.num_args as i32 + code.num_locals as i32,
            pending_reload: None,
            resumes: std::collections::BTreeSet::new(),
            index: self.inlined.len() as u32,
            return_to: Some(ret),
        });
        self.jump(entry);
        self.translate_ops(&heights)?;
        self.finish_handovers();
        self.swap_scope(outer);

        // Back in the caller: its operands below the receiver may have been moved by a
        // collection in the inlined code.
        self.b.switch_to_block(ret);
        self.b.set_srcloc(self.loc(i));
        let result = self.b.block_params(ret)[0];
        self.s.pending_reload = None;
        self.reload(recv_slot);
        self.pop_and_continue(result, frames, argc, h, i)
    }

    /// How deep the scope being translated is inlined (0: the code's own).
    fn inline_depth(&self) -> u32 {
        let mut depth = 0;
        let mut scope = self.s.index;
        while let Some(s) = scope
            .checked_sub(1)
            .and_then(|k| self.inlined.get(k as usize))
        {
            depth += 1;
            scope = s.parent;
        }
        depth
    }

    /// The request of `callee` when the plan inlines it at the send at `i` of the scope
    /// being translated and the compiler can.
    fn inline_request(
        &self,
        i: usize,
        callee: &tally_vm::runtime::Code,
    ) -> Option<&'a CompileRequest> {
        let request: &'a CompileRequest = self.s.request;
        let r = request.inlined_at(i as u32, callee.id)?;
        let fits = self.s.blocks.len() < 1 << SCOPE_SHIFT
            && self.inlined.len() + 1 < 1 << (32 - SCOPE_SHIFT)
            && self.inline_depth() < MAX_INLINE_DEPTH
            && self.s.vars.is_some();
        fits.then_some(r)
    }

    fn site(&self, site: u32) -> SiteFacts {
        self.s
            .request
            .site(site)
            .expect("every site was checked before translation")
    }
}

/// `x + imm` (Cranelift's builder has no immediate forms: the constant goes through `iconst`).
fn add_imm(b: &mut FunctionBuilder, x: Value, imm: i64) -> Value {
    let ty = b.func.dfg.value_type(x);
    let c = b.ins().iconst(ty, imm);
    b.ins().iadd(x, c)
}

fn mul_imm(b: &mut FunctionBuilder, x: Value, imm: i64) -> Value {
    let ty = b.func.dfg.value_type(x);
    let c = b.ins().iconst(ty, imm);
    b.ins().imul(x, c)
}

fn and_imm(b: &mut FunctionBuilder, x: Value, imm: i64) -> Value {
    let ty = b.func.dfg.value_type(x);
    let c = b.ins().iconst(ty, imm);
    b.ins().band(x, c)
}

fn cmp_imm(b: &mut FunctionBuilder, cc: IntCC, x: Value, imm: i64) -> Value {
    let ty = b.func.dfg.value_type(x);
    let c = b.ins().iconst(ty, imm);
    b.ins().icmp(cc, x, c)
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
        match &self.s.vars {
            Some(vars) if k >= self.s.first_var => {
                let var = vars[k as usize];
                self.b.use_var(var)
            }
            _ => self.b.ins().load(I64, Self::flags(), self.s.fp, k * 8),
        }
    }

    fn set_slot(&mut self, k: i32, v: Value) {
        match &self.s.vars {
            Some(vars) if k >= self.s.first_var => {
                let var = vars[k as usize];
                self.b.def_var(var, v);
            }
            _ => {
                self.b.ins().store(Self::flags(), v, self.s.fp, k * 8);
            }
        }
    }

    /// `Mode::Registers`: writes the operand slots below `h` to memory.
    fn flush(&mut self, h: i32) {
        let Some(vars) = self.s.vars.clone() else {
            return;
        };
        let first = self.s.first_var as usize;
        for (k, var) in vars.iter().enumerate().take(h.max(0) as usize).skip(first) {
            let v = self.b.use_var(*var);
            self.b
                .ins()
                .store(Self::flags(), v, self.s.fp, k as i32 * 8);
        }
    }

    /// `Mode::Registers`: reads the operand slots below `h` back from memory.
    fn reload(&mut self, h: i32) {
        let Some(vars) = self.s.vars.clone() else {
            return;
        };
        let first = self.s.first_var as usize;
        for (k, var) in vars.iter().enumerate().take(h.max(0) as usize).skip(first) {
            let v = self
                .b
                .ins()
                .load(I64, Self::flags(), self.s.fp, k as i32 * 8);
            self.b.def_var(*var, v);
        }
    }

    /// After a call: the slots the last `sync` wrote, and the one above them (where a stub
    /// pushes what it makes: a closure), read back.
    fn reload_after_call(&mut self) {
        if let Some(h) = self.s.pending_reload.take() {
            self.reload(h + 1);
        }
    }

    fn jump(&mut self, to: Block) {
        self.b.ins().jump(to, &[]);
    }

    /// Makes the VM's view exact before a stub or an exit: the stack height (`h` values above
    /// the frame's base) and the frame's `ip`.
    fn sync(&mut self, h: i32, ip: usize) {
        self.flush(h);
        self.s.pending_reload = Some(h);
        self.s.resumes.insert(ip);
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
        self.s.pending_reload = None;
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
        for (blk, d) in std::mem::take(&mut self.s.deopts) {
            self.b.switch_to_block(blk);
            self.b.set_srcloc(self.loc(d.at));
            self.sync(d.height, d.at);
            let site = self.b.ins().iconst(I32, d.site as i64);
            self.b
                .ins()
                .store(Self::flags(), site, self.vm, self.layout.deopt_site);
            let root = self.b.ins().iconst(I32, self.root as i64);
            self.b
                .ins()
                .store(Self::flags(), root, self.vm, self.layout.deopt_code);
            let reason = self.b.ins().iconst(I32, d.reason as i64);
            self.b
                .ins()
                .store(Self::flags(), reason, self.vm, self.layout.deopt_reason);
            self.leave(Status::Deopt);
        }
    }

    /// A new (cold) block where a guard of `site` in instruction `at` fails for `reason`:
    /// the frame goes to the interpreter at the instruction's start, so nothing the
    /// instruction did before its guards may be visible. Filled in by `finish_handovers`.
    fn deopt_block(&mut self, at: At, site: u32, reason: DeoptReason) -> Block {
        let blk = self.b.create_block();
        self.b.set_cold_block(blk);
        self.speculated.insert(site);
        self.s.deopts.push((
            blk,
            Deopt {
                at: at.i,
                height: at.h0,
                site,
                reason,
            },
        ));
        blk
    }

    /// Calls a stub at `address` with signature `sig`.
    fn call_stub(&mut self, address: usize, sig: SigRef, args: &[Value]) -> Value {
        let callee = self.b.ins().iconst(I64, address as i64);
        let mut all = vec![self.vm];
        all.extend_from_slice(args);
        let call = self.b.ins().call_indirect(sig, callee, &all);
        let result = self.b.inst_results(call)[0];
        self.reload_after_call();
        result
    }

    /// After a stub that answers a status: on to `next` on `Continue`, else leave with it.
    fn continue_or_leave(&mut self, status: Value, next: Block) {
        let go_on = cmp_imm(&mut self.b, IntCC::Equal, status, Status::Continue as i64);
        let exit = self.exit;
        self.b.ins().brif(go_on, next, &[], exit, &[status.into()]);
    }

    /// A send through a status stub; the frame resumes at `i + 1`.
    fn send_stub(&mut self, address: usize, site: u32, h: i32, i: usize) -> Result<(), String> {
        self.sync(h, i + 1);
        let site = self.b.ins().iconst(I32, site as i64);
        let sig = self.sigs.status1;
        let status = self.call_stub(address, sig, &[site]);
        let next = self.block(i + 1)?;
        self.continue_or_leave(status, next);
        Ok(())
    }

    /// A send from `site` (receiver and arguments in the slots below `h`) that, when the
    /// inline cache holds the receiver's class and the target is compiled bytecode with a
    /// plain frame, pushes the callee's frame and calls its code directly; anything else
    /// (a miss, a primitive, a trivial method, a context to make, a tripped push limit, too
    /// little value stack or native stack) takes the send stub. Resumes at `i + 1`. Where
    /// the tier speculates and the site's cache holds one or two classes, `speculative_send`.
    fn direct_send(&mut self, site: u32, h: i32, at: At) -> Result<(), String> {
        let facts = self.site(site);
        if self.speculates() {
            if let Some(expected) = facts.expects_receiver {
                return self.speculative_send(site, expected, h, at);
            }
            if facts.cold {
                return self.send_stub(self.layout.stubs.send, site, h, at.i);
            }
        }
        let i = at.i;
        let argc = facts.argc as i32;
        let c = &self.layout.calls;
        let flags = Self::flags();
        let slow = self.b.create_block();
        self.b.set_cold_block(slow);
        let have_class = self.b.create_block();
        self.b.append_block_param(have_class, I32);
        let hit = self.b.create_block();
        self.b.append_block_param(hit, I32);

        // The receiver's class: small integers and objects inline, other immediates sent.
        let class = self.receiver_class(h - 1 - argc, slow);
        self.b.ins().jump(have_class, &[class.into()]);

        // The inline cache's two entries.
        self.b.switch_to_block(have_class);
        let class = self.b.block_params(have_class)[0];
        if facts.receiver_table != 0 {
            self.count_value(facts.receiver_table, class);
        }
        let sites = self.b.ins().load(I64, flags, self.vm, c.sites_base);
        let entry = site as i32 * c.site_size;
        let class1 = self.b.ins().load(I32, flags, sites, entry + c.site_class1);
        let code1 = self.b.ins().load(I32, flags, sites, entry + c.site_code1);
        let second = self.b.create_block();
        let first_hits = self.b.ins().icmp(IntCC::Equal, class, class1);
        self.b
            .ins()
            .brif(first_hits, hit, &[code1.into()], second, &[]);
        self.b.switch_to_block(second);
        let class2 = self.b.ins().load(I32, flags, sites, entry + c.site_class2);
        let code2 = self.b.ins().load(I32, flags, sites, entry + c.site_code2);
        let second_hits = self.b.ins().icmp(IntCC::Equal, class, class2);
        self.b
            .ins()
            .brif(second_hits, hit, &[code2.into()], slow, &[]);

        // The target: compiled, a plain frame of the right arity, no context to make.
        self.b.switch_to_block(hit);
        let target = self.b.block_params(hit)[0];
        let code = self.code_address(target);
        let function = self.b.ins().load(I64, flags, code, c.code_compiled);
        let compiled = cmp_imm(&mut self.b, IntCC::UnsignedGreaterThan, function, 1);
        let plain = self.b.ins().uload8(I32, flags, code, c.code_plain_frame);
        let nargs = self.b.ins().uload16(I32, flags, code, c.code_num_args);
        let arity = cmp_imm(&mut self.b, IntCC::Equal, nargs, argc as i64);
        let context = self.b.ins().uload16(I32, flags, code, c.code_context_size);
        let no_context = cmp_imm(&mut self.b, IntCC::Equal, context, 0);
        let plain = cmp_imm(&mut self.b, IntCC::NotEqual, plain, 0);
        let ok = self.b.ins().band(compiled, plain);
        let ok = self.b.ins().band(ok, arity);
        let ok = self.b.ins().band(ok, no_context);
        let room = self.b.ins().uload32(flags, code, c.code_room);
        let (fits, frames) = self.room_for_call(h, room);
        let ok = self.b.ins().band(ok, fits);
        let push = self.b.create_block();
        let frameless = self.b.create_block();
        self.b.ins().brif(ok, push, &[], frameless, &[]);

        // A trivial method (getter, setter, constant, `^self`) done in place, as the
        // interpreter does when no profiler hook is due (a raised flag takes the stub).
        self.b.switch_to_block(frameless);
        let kind = self.b.ins().uload8(I32, flags, code, c.code_trivial_kind);
        let quiet = self.no_hook_due();
        let ok = self.b.ins().band(quiet, arity);
        let trivial = self.b.create_block();
        self.b.ins().brif(ok, trivial, &[], slow, &[]);
        self.b.switch_to_block(trivial);
        let operand = self.b.ins().load(I64, flags, code, c.code_trivial_operand);
        let next = self.block(i + 1)?;
        let recv_slot = h - 1 - argc;
        let cases = [
            (TRIVIAL_GETTER, 0),
            (TRIVIAL_SETTER, 1),
            (TRIVIAL_CONSTANT, 0),
            (TRIVIAL_RECEIVER, 0),
        ];
        for (want, min_args) in cases {
            if argc < min_args {
                continue;
            }
            let this = self.b.create_block();
            let other = self.b.create_block();
            let is = cmp_imm(&mut self.b, IntCC::Equal, kind, want as i64);
            self.b.ins().brif(is, this, &[], other, &[]);
            self.b.switch_to_block(this);
            match want {
                TRIVIAL_GETTER | TRIVIAL_SETTER => {
                    let address = self.dynamic_field_address(recv_slot, operand, slow);
                    if want == TRIVIAL_GETTER {
                        let v = self.b.ins().load(I64, flags, address, 0);
                        self.set_slot(recv_slot, v);
                    } else {
                        let v = self.slot(recv_slot + 1);
                        self.store_into_heap(v, address);
                    }
                }
                TRIVIAL_CONSTANT => self.set_slot(recv_slot, operand),
                _ => {}
            }
            self.jump(next);
            self.b.switch_to_block(other);
        }
        self.jump(slow);

        self.b.switch_to_block(push);
        let nil = self.b.ins().iconst(I64, tally_heap::Value::NIL.0 as i64);
        let none = self.b.ins().iconst(I64, 0);
        let callee = Callee {
            id: target,
            code,
            function,
            ctx: nil,
            closure: none,
        };
        self.push_and_call(callee, frames, argc, h, i)?;

        self.b.switch_to_block(slow);
        self.send_stub(self.layout.stubs.send, site, h, i)
    }

    /// Counts `class` (an I32) in the value table at `table` as `class | 1 << 32` (never 0,
    /// so a key match means a counted slot) while the table's burst lasts
    /// (`ValueTable::record_in_burst`): the common path of a multiplicative table
    /// inline (slot 0, then the slot `(value × multiplier) >> shift` holding the value: add
    /// one; no lock
    /// test, see `TableLayout`), anything else through the `record_value` stub. Goes on in a
    /// new block. The stub neither allocates nor changes frames, so nothing needs syncing.
    fn count_value(&mut self, table: usize, class: Value) {
        let l = tally_vm::tally_profile::values::TableLayout::OF_VALUE_TABLE;
        let flags = Self::flags();
        let done = self.b.create_block();
        let slow = self.b.create_block();
        self.b.set_cold_block(slow);
        let t = self.b.ins().iconst(I64, table as i64);
        let left = self.b.ins().load(I32, flags, t, l.burst_left);
        // Between bursts (most of the time in hot code) a send pays the load and the branch;
        // the counting itself is laid out of line.
        let in_burst = self.b.create_block();
        self.b.set_cold_block(in_burst);
        self.b.ins().brif(left, in_burst, &[], done, &[]);
        self.b.switch_to_block(in_burst);
        let one = self.b.ins().iconst(I32, 1);
        let fewer = self.b.ins().isub(left, one);
        self.b.ins().store(flags, fewer, t, l.burst_left);
        let class = self.b.ins().uextend(I64, class);
        let value = self.b.ins().bor_imm_u(class, 1 << 32);
        // Slot 0 first: a send that sees one class (most do) finds it there with no hashing
        // (a key is where the table put it, whatever the index bits are).
        let key0 = self.b.ins().load(I64, flags, t, l.keys);
        let in_first = self.b.ins().icmp(IntCC::Equal, key0, value);
        let first = self.b.create_block();
        let hashed = self.b.create_block();
        self.b.set_cold_block(first);
        self.b.set_cold_block(hashed);
        self.b.ins().brif(in_first, first, &[], hashed, &[]);
        self.b.switch_to_block(first);
        let count = self.b.ins().load(I64, flags, t, l.counts);
        let more = add_imm(&mut self.b, count, 1);
        self.b.ins().store(flags, more, t, l.counts);
        self.jump(done);
        self.b.switch_to_block(hashed);
        let multiplier = self.b.ins().load(I64, flags, t, l.multiplier);
        let shift = self.b.ins().uload8(I64, flags, t, l.shift);
        let product = self.b.ins().imul(value, multiplier);
        let index = self.b.ins().ushr(product, shift);
        let offset = self.b.ins().ishl_imm_u(index, 3);
        let slot = self.b.ins().iadd(t, offset);
        let key = self.b.ins().load(I64, flags, slot, l.keys);
        let same = self.b.ins().icmp(IntCC::Equal, key, value);
        let add = self.b.create_block();
        self.b.set_cold_block(add);
        self.b.ins().brif(same, add, &[], slow, &[]);
        self.b.switch_to_block(add);
        let count = self.b.ins().load(I64, flags, slot, l.counts);
        let more = add_imm(&mut self.b, count, 1);
        self.b.ins().store(flags, more, slot, l.counts);
        self.jump(done);
        self.b.switch_to_block(slow);
        let sig = self.sigs.record;
        let stub = self
            .b
            .ins()
            .iconst(I64, self.layout.stubs.record_value as i64);
        self.b.ins().call_indirect(sig, stub, &[self.vm, t, value]);
        self.jump(done);
        self.b.switch_to_block(done);
    }

    /// The `&Code` of code id `id` (a run-time u32).
    fn code_address(&mut self, id: Value) -> Value {
        let flags = Self::flags();
        let codes = self
            .b
            .ins()
            .load(I64, flags, self.vm, self.layout.calls.codes_base);
        let id64 = self.b.ins().uextend(I64, id);
        let index = mul_imm(&mut self.b, id64, 8);
        let slot = self.b.ins().iadd(codes, index);
        self.b.ins().load(I64, flags, slot, 0)
    }

    /// The class id (an I32) of the value in slot `k`: small integers and objects; other
    /// immediates jump to `other`.
    fn receiver_class(&mut self, k: i32, other: Block) -> Value {
        let c = &self.layout.calls;
        let recv = self.slot(k);
        let is_int = and_imm(&mut self.b, recv, 1);
        let not_int = self.b.create_block();
        let done = self.b.create_block();
        self.b.append_block_param(done, I32);
        let int_class = self.b.ins().iconst(I32, c.integer_class as i64);
        self.b
            .ins()
            .brif(is_int, done, &[int_class.into()], not_int, &[]);
        self.b.switch_to_block(not_int);
        let class = self.object_class(recv, other);
        self.b.ins().jump(done, &[class.into()]);
        self.b.switch_to_block(done);
        self.b.block_params(done)[0]
    }

    /// Whether `v` is a reference to a heap object (tag 0, not the null word).
    fn is_object(&mut self, v: Value) -> Value {
        let tag = and_imm(&mut self.b, v, 7);
        let is_ref = cmp_imm(&mut self.b, IntCC::Equal, tag, 0);
        let not_none = cmp_imm(&mut self.b, IntCC::NotEqual, v, 0);
        self.b.ins().band(is_ref, not_none)
    }

    /// The class id (an I32) of heap object `v`, in a new block; a jump to `not_object` when
    /// `v` is not one.
    fn object_class(&mut self, v: Value, not_object: Block) -> Value {
        let is_object = self.is_object(v);
        let object = self.b.create_block();
        self.b.ins().brif(is_object, object, &[], not_object, &[]);
        self.b.switch_to_block(object);
        // The class id is the high half of header word 0.
        self.b.ins().load(I32, Self::flags(), v, 4)
    }

    /// A guard that the value in slot `k` is an instance of `class`, else `fail`: a tag test
    /// for small integers and symbols (all immediates), a word compare for `nil`, `true` and `false` (their classes have no
    /// other instances: the VM refuses `new` for them), the header's class id for objects
    /// (the request never expects immediate doubles).
    fn guard_class(&mut self, k: i32, class: u32, fail: Block) {
        let recv = self.slot(k);
        let ok = self.b.create_block();
        let immediate = self
            .layout
            .calls
            .immediate_classes
            .iter()
            .find(|(c, _)| *c == class)
            .map(|&(_, word)| word);
        if class == self.layout.calls.integer_class {
            let is_int = and_imm(&mut self.b, recv, 1);
            self.b.ins().brif(is_int, ok, &[], fail, &[]);
        } else if class == self.layout.calls.symbol_class {
            let tag = and_imm(&mut self.b, recv, 7);
            let is_symbol = cmp_imm(&mut self.b, IntCC::Equal, tag, SYMBOL_TAG);
            self.b.ins().brif(is_symbol, ok, &[], fail, &[]);
        } else if let Some(word) = immediate {
            let same = cmp_imm(&mut self.b, IntCC::Equal, recv, word as i64);
            self.b.ins().brif(same, ok, &[], fail, &[]);
        } else {
            let actual = self.object_class(recv, fail);
            let same = cmp_imm(&mut self.b, IntCC::Equal, actual, class as i64);
            self.b.ins().brif(same, ok, &[], fail, &[]);
        }
        self.b.switch_to_block(ok);
    }

    /// Whether no profiler hook is due (the yieldpoint flag is down): only then may a send
    /// be done without a frame, as the interpreter does.
    fn no_hook_due(&mut self) -> Value {
        let address = self.b.ins().iconst(I64, self.layout.yieldpoint_flag as i64);
        let flag = self.b.ins().uload8(I32, Self::flags(), address, 0);
        cmp_imm(&mut self.b, IntCC::Equal, flag, 0)
    }

    /// Whether a direct call from height `h` may go ahead: a frame below the push limit
    /// (tripped by the yieldpoint flag, so a raised flag sends the call through the stub's
    /// prologue), `room` (an I64: the callee's `room_above_arguments`) free value-stack
    /// slots, and native stack for the call. Also answers the frame stack and its depth as
    /// loaded for the check, which `push_and_call` pushes at.
    fn room_for_call(&mut self, h: i32, room: Value) -> (Value, FrameDepth) {
        let c = &self.layout.calls;
        let flags = Self::flags();
        let frame_stack = self
            .b
            .ins()
            .load(I64, flags, self.vm, self.layout.frame_stack);
        let depth = self
            .b
            .ins()
            .load(I64, flags, frame_stack, self.layout.frames_len);
        let limit = self.b.ins().load(I64, flags, frame_stack, c.frames_limit);
        let below_limit = self.b.ins().icmp(IntCC::UnsignedLessThan, depth, limit);
        let capacity = self.b.ins().load(I64, flags, self.vm, c.stack_capacity);
        let height = add_imm(&mut self.b, self.s.bp, h as i64);
        let free = self.b.ins().isub(capacity, height);
        let fits = self
            .b
            .ins()
            .icmp(IntCC::UnsignedGreaterThanOrEqual, free, room);
        let ok = self.b.ins().band(below_limit, fits);
        let sp = self.b.ins().get_stack_pointer(I64);
        let native_limit = self.b.ins().load(I64, flags, self.vm, c.native_stack_limit);
        let deep_enough = self
            .b
            .ins()
            .icmp(IntCC::UnsignedGreaterThan, sp, native_limit);
        let ok = self.b.ins().band(ok, deep_enough);
        (ok, FrameDepth { frame_stack, depth })
    }

    /// Pushes `callee`'s frame over the receiver and `argc` arguments below height `h` (room
    /// checked by `room_for_call`, which loaded `at`), calls its compiled function, and on
    /// its return pops the frame and goes on at `i + 1` with the result in the receiver's
    /// slot.
    fn push_and_call(
        &mut self,
        callee: Callee,
        at: FrameDepth,
        argc: i32,
        h: i32,
        i: usize,
    ) -> Result<(), String> {
        let flags = Self::flags();
        let (callee_frame, new_bp) = self.push_frame(&callee, at, argc, h, i, None);
        let sig = self.sigs.entry;
        let fresh = self.b.ins().iconst(I32, 0);
        let call = self.b.ins().call_indirect(
            sig,
            callee.function,
            &[self.vm, callee_frame, new_bp, fresh],
        );
        let status = self.b.inst_results(call)[0];
        self.reload_after_call();
        let returned = self.b.create_block();
        let is_return = cmp_imm(&mut self.b, IntCC::Equal, status, Status::Returned as i64);
        let exit = self.exit;
        self.b
            .ins()
            .brif(is_return, returned, &[], exit, &[status.into()]);

        // The callee returned the value on top of its stack.
        self.b.switch_to_block(returned);
        let stack_len = self
            .b
            .ins()
            .load(I64, flags, self.vm, self.layout.stack_len);
        let stack = self
            .b
            .ins()
            .load(I64, flags, self.vm, self.layout.stack_base);
        let top = mul_imm(&mut self.b, stack_len, 8);
        let top = self.b.ins().iadd(stack, top);
        let result = self.b.ins().load(I64, flags, top, -8);
        self.pop_and_continue(result, at, argc, h, i)
    }

    /// Writes `callee`'s frame over the receiver and `argc` arguments below height `h` at
    /// depth `at` (room checked by `room_for_call`), its stack locals nil (`locals`: their
    /// number when known, else read from the code), after making the caller exact for a
    /// call from `i`. Answers the new frame's address and base (a u64).
    fn push_frame(
        &mut self,
        callee: &Callee,
        at: FrameDepth,
        argc: i32,
        h: i32,
        i: usize,
        locals: Option<u16>,
    ) -> (Value, Value) {
        let c = &self.layout.calls;
        let flags = Self::flags();
        let FrameDepth { frame_stack, depth } = at;
        // The callee's frame, written before the depth that makes it visible to samplers.
        self.sync(h, i + 1);
        let height = add_imm(&mut self.b, self.s.bp, h as i64);
        let frames = self
            .b
            .ins()
            .load(I64, flags, frame_stack, self.layout.frames_base);
        let offset = mul_imm(&mut self.b, depth, self.layout.frame_size as i64);
        let callee_frame = self.b.ins().iadd(frames, offset);
        let new_bp = add_imm(&mut self.b, self.s.bp, (h - 1 - argc) as i64);
        let new_bp32 = self.b.ins().ireduce(I32, new_bp);
        let zero32 = self.b.ins().iconst(I32, 0);
        let nil = self.b.ins().iconst(I64, tally_heap::Value::NIL.0 as i64);
        self.b
            .ins()
            .store(flags, callee.id, callee_frame, c.frame_code);
        self.b
            .ins()
            .store(flags, zero32, callee_frame, self.layout.frame_ip);
        self.b
            .ins()
            .store(flags, new_bp32, callee_frame, self.layout.frame_bp);
        self.b
            .ins()
            .store(flags, callee.ctx, callee_frame, self.layout.frame_ctx);
        self.b
            .ins()
            .store(flags, callee.closure, callee_frame, c.frame_closure);
        let new_depth = add_imm(&mut self.b, depth, 1);
        self.b
            .ins()
            .store(flags, new_depth, frame_stack, self.layout.frames_len);
        // Its stack locals, nil.
        let locals = match locals {
            Some(n) => {
                for k in 0..n as i32 {
                    self.b.ins().store(flags, nil, self.s.fp, (h + k) * 8);
                }
                self.b.ins().iconst(I64, n as i64)
            }
            None => {
                let locals = self
                    .b
                    .ins()
                    .uload16(I64, flags, callee.code, c.code_num_locals);
                let fill = self.b.create_block();
                self.b.append_block_param(fill, I64);
                let filled = self.b.create_block();
                let start = self.b.ins().iconst(I64, 0);
                self.b.ins().jump(fill, &[start.into()]);
                self.b.switch_to_block(fill);
                let k = self.b.block_params(fill)[0];
                let more = self.b.ins().icmp(IntCC::UnsignedLessThan, k, locals);
                let store_one = self.b.create_block();
                self.b.ins().brif(more, store_one, &[], filled, &[]);
                self.b.switch_to_block(store_one);
                let byte = mul_imm(&mut self.b, k, 8);
                let address = self.b.ins().iadd(self.s.fp, byte);
                self.b.ins().store(flags, nil, address, h * 8);
                let k1 = add_imm(&mut self.b, k, 1);
                self.b.ins().jump(fill, &[k1.into()]);
                self.b.switch_to_block(filled);
                locals
            }
        };
        let len = self.b.ins().iadd(height, locals);
        self.b
            .ins()
            .store(flags, len, self.vm, self.layout.stack_len);
        (callee_frame, new_bp)
    }

    /// After a callee pushed at depth `at` from the send at `i` (receiver and `argc`
    /// arguments below `h`) returned `result`: pops its frame, as `Vm::pop_frame` does, and
    /// goes on at `i + 1` with the result in the receiver's slot, through the epilogue stub
    /// when the exit depth is tripped.
    fn pop_and_continue(
        &mut self,
        result: Value,
        at: FrameDepth,
        argc: i32,
        h: i32,
        i: usize,
    ) -> Result<(), String> {
        let c = &self.layout.calls;
        let flags = Self::flags();
        let FrameDepth { frame_stack, depth } = at;
        self.set_slot(h - 1 - argc, result);
        self.b
            .ins()
            .store(flags, depth, frame_stack, self.layout.frames_len);
        self.sync(h - argc, i + 1);
        let exit_depth = self
            .b
            .ins()
            .load(I64, flags, frame_stack, c.frames_exit_depth);
        let tripped = self
            .b
            .ins()
            .icmp(IntCC::UnsignedLessThanOrEqual, depth, exit_depth);
        let next = self.block(i + 1)?;
        let epilogue = self.b.create_block();
        self.b.set_cold_block(epilogue);
        self.b.ins().brif(tripped, epilogue, &[], next, &[]);
        self.b.switch_to_block(epilogue);
        let sig = self.sigs.vm;
        let status = self.call_stub(self.layout.stubs.epilogue, sig, &[]);
        self.continue_or_leave(status, next);
        Ok(())
    }

    /// A send from a site whose inline cache holds one or two receiver classes: a guard on
    /// each class in turn, each followed by its target without the cache probe: a trivial
    /// method or an Array primitive in place, a method or a block's code called directly.
    /// A receiver of no guarded class deoptimizes when the site has seen one class, and
    /// takes the send stub when it has seen two (a full cache may have lost others). What a
    /// fast path cannot do (a raised profiler flag, an index out of bounds, no compiled code
    /// yet, no room) takes the send stub.
    fn speculative_send(
        &mut self,
        site: u32,
        expected: ExpectedReceivers,
        h: i32,
        at: At,
    ) -> Result<(), String> {
        let i = at.i;
        let argc = self.site(site).argc as i32;
        let recv_slot = h - 1 - argc;
        let slow = self.b.create_block();
        self.b.set_cold_block(slow);
        let classes = expected.classes();
        let last_miss = if expected.deopt_on_miss() {
            self.deopt_block(at, site, DeoptReason::ReceiverClass)
        } else {
            self.speculated.insert(site);
            slow
        };
        for (k, e) in classes.iter().enumerate() {
            let last = k + 1 == classes.len();
            let miss = if last {
                last_miss
            } else {
                self.b.create_block()
            };
            self.guard_class(recv_slot, e.class, miss);
            self.expected_target(e.target, recv_slot, argc, h, i, slow)?;
            if !last {
                self.b.switch_to_block(miss);
                self.s.pending_reload = None;
            }
        }
        self.b.switch_to_block(slow);
        self.send_stub(self.layout.stubs.send, site, h, i)
    }

    /// The code of one expected target, the receiver's class already guarded: done in place
    /// or called directly, then on to `i + 1`; what it cannot do goes to `slow`.
    fn expected_target(
        &mut self,
        target: ExpectedTarget,
        recv_slot: i32,
        argc: i32,
        h: i32,
        i: usize,
        slow: Block,
    ) -> Result<(), String> {
        let flags = Self::flags();
        let c = &self.layout.calls;
        let next = self.block(i + 1)?;
        match target {
            ExpectedTarget::Trivial { kind, operand } => {
                self.when_no_hook_due(slow);
                match kind {
                    TRIVIAL_GETTER | TRIVIAL_SETTER => {
                        let index = self.b.ins().iconst(I64, operand as i64);
                        let address = self.dynamic_field_address(recv_slot, index, slow);
                        if kind == TRIVIAL_GETTER {
                            let v = self.b.ins().load(I64, flags, address, 0);
                            self.set_slot(recv_slot, v);
                        } else {
                            let v = self.slot(recv_slot + 1);
                            self.store_into_heap(v, address);
                        }
                    }
                    TRIVIAL_CONSTANT => {
                        let v = self.b.ins().iconst(I64, operand as i64);
                        self.set_slot(recv_slot, v);
                    }
                    _ => {}
                }
                self.jump(next);
            }
            ExpectedTarget::Method(code) => {
                if let Some(callee) = self.inline_request(i, code) {
                    return self.inline_method(callee, recv_slot, argc, h, i, slow);
                }
                let address = self
                    .b
                    .ins()
                    .iconst(I64, code as *const tally_vm::runtime::Code as i64);
                let function = self.b.ins().load(I64, flags, address, c.code_compiled);
                let compiled = cmp_imm(&mut self.b, IntCC::UnsignedGreaterThan, function, 1);
                let room = self.b.ins().iconst(I64, code.room_above_arguments as i64);
                let (fits, frames) = self.room_for_call(h, room);
                let ok = self.b.ins().band(compiled, fits);
                let push = self.b.create_block();
                self.b.ins().brif(ok, push, &[], slow, &[]);
                self.b.switch_to_block(push);
                let id = self.b.ins().iconst(I32, code.id as i64);
                let nil = self.b.ins().iconst(I64, tally_heap::Value::NIL.0 as i64);
                let none = self.b.ins().iconst(I64, 0);
                let callee = Callee {
                    id,
                    code: address,
                    function,
                    ctx: nil,
                    closure: none,
                };
                self.push_and_call(callee, frames, argc, h, i)?;
            }
            ExpectedTarget::ArrayAt | ExpectedTarget::ArrayAtPut => {
                self.when_no_hook_due(slow);
                let address = self.element_address(recv_slot, slow);
                if matches!(target, ExpectedTarget::ArrayAt) {
                    let v = self.b.ins().load(I64, flags, address, 0);
                    self.set_slot(recv_slot, v);
                } else {
                    let v = self.slot(recv_slot + 2);
                    self.store_into_heap(v, address);
                }
                self.jump(next);
            }
            ExpectedTarget::ArrayLength => {
                self.when_no_hook_due(slow);
                let recv = self.slot(recv_slot);
                let len = self.b.ins().uload32(flags, recv, 8);
                let twice = self.b.ins().iadd(len, len);
                let v = add_imm(&mut self.b, twice, 1);
                self.set_slot(recv_slot, v);
                self.jump(next);
            }
            ExpectedTarget::Identical => {
                self.when_no_hook_due(slow);
                let a = self.slot(recv_slot);
                let b = self.slot(recv_slot + 1);
                let same = self.b.ins().icmp(IntCC::Equal, a, b);
                let v = self.boolean(same);
                self.set_slot(recv_slot, v);
                self.jump(next);
            }
            ExpectedTarget::BlockValue => {
                // The closure's code: compiled, a plain frame, no context of its own.
                let closure = self.slot(recv_slot);
                let slot_offset = |k: usize| (HEADER_BYTES + k * 8) as i32;
                let tagged_id = self
                    .b
                    .ins()
                    .load(I64, flags, closure, slot_offset(block::CODE));
                let one = self.b.ins().iconst(I64, 1);
                let id = self.b.ins().sshr(tagged_id, one);
                let id = self.b.ins().ireduce(I32, id);
                let code = self.code_address(id);
                let function = self.b.ins().load(I64, flags, code, c.code_compiled);
                let compiled = cmp_imm(&mut self.b, IntCC::UnsignedGreaterThan, function, 1);
                let plain = self.b.ins().uload8(I32, flags, code, c.code_plain_frame);
                let plain = cmp_imm(&mut self.b, IntCC::NotEqual, plain, 0);
                let nargs = self.b.ins().uload16(I32, flags, code, c.code_num_args);
                let arity = cmp_imm(&mut self.b, IntCC::Equal, nargs, argc as i64);
                let context = self.b.ins().uload16(I32, flags, code, c.code_context_size);
                let no_context = cmp_imm(&mut self.b, IntCC::Equal, context, 0);
                let ok = self.b.ins().band(compiled, plain);
                let ok = self.b.ins().band(ok, arity);
                let ok = self.b.ins().band(ok, no_context);
                let room = self.b.ins().uload32(flags, code, c.code_room);
                let (fits, frames) = self.room_for_call(h, room);
                let ok = self.b.ins().band(ok, fits);
                let push = self.b.create_block();
                self.b.ins().brif(ok, push, &[], slow, &[]);
                self.b.switch_to_block(push);
                // As `Vm::invoke_block`: the frame's receiver is the closure's, its outer
                // context the closure's.
                let ctx = self
                    .b
                    .ins()
                    .load(I64, flags, closure, slot_offset(block::CONTEXT));
                let receiver = self
                    .b
                    .ins()
                    .load(I64, flags, closure, slot_offset(block::RECEIVER));
                self.set_slot(recv_slot, receiver);
                let callee = Callee {
                    id,
                    code,
                    function,
                    ctx,
                    closure,
                };
                self.push_and_call(callee, frames, argc, h, i)?;
            }
        }
        Ok(())
    }

    /// Goes on in a new block when no profiler hook is due, else to `hook`.
    fn when_no_hook_due(&mut self, hook: Block) {
        let quiet = self.no_hook_due();
        let go = self.b.create_block();
        self.b.ins().brif(quiet, go, &[], hook, &[]);
        self.b.switch_to_block(go);
    }

    /// The address of element `index` (1-based, in the slot above the receiver in slot `k`)
    /// of an instance of Array itself (no named fields), or a jump to `miss` when the index
    /// is not a small integer within its bounds.
    fn element_address(&mut self, k: i32, miss: Block) -> Value {
        let array = self.slot(k);
        let index = self.slot(k + 1);
        let is_int = and_imm(&mut self.b, index, 1);
        let int = self.b.create_block();
        self.b.ins().brif(is_int, int, &[], miss, &[]);
        self.b.switch_to_block(int);
        let one = self.b.ins().iconst(I64, 1);
        let n = self.b.ins().sshr(index, one);
        let zero_based = add_imm(&mut self.b, n, -1);
        let len = self.b.ins().uload32(Self::flags(), array, 8);
        let within = self.b.ins().icmp(IntCC::UnsignedLessThan, zero_based, len);
        let ok = self.b.create_block();
        self.b.ins().brif(within, ok, &[], miss, &[]);
        self.b.switch_to_block(ok);
        let byte = mul_imm(&mut self.b, zero_based, 8);
        let address = self.b.ins().iadd(array, byte);
        add_imm(&mut self.b, address, HEADER_BYTES as i64)
    }

    /// The address of field `index` (a run-time u64) of the object in stack slot `k`, or a
    /// jump to `miss` when it is not an object with that many fields.
    fn dynamic_field_address(&mut self, k: i32, index: Value, miss: Block) -> Value {
        let recv = self.slot(k);
        let is_object = self.is_object(recv);
        let has_header = self.b.create_block();
        self.b.ins().brif(is_object, has_header, &[], miss, &[]);
        self.b.switch_to_block(has_header);
        let count = self.b.ins().uload32(Self::flags(), recv, 8);
        let has_field = self.b.ins().icmp(IntCC::UnsignedGreaterThan, count, index);
        let ok = self.b.create_block();
        self.b.ins().brif(has_field, ok, &[], miss, &[]);
        self.b.switch_to_block(ok);
        let byte = mul_imm(&mut self.b, index, 8);
        let address = self.b.ins().iadd(recv, byte);
        add_imm(&mut self.b, address, HEADER_BYTES as i64)
    }

    /// The receiver's field `index` (its address), or a jump to `miss` when the receiver is
    /// not an object with that many fields.
    fn field_address(&mut self, index: u16, miss: Block) -> Value {
        let recv = self.slot(0);
        let is_object = self.is_object(recv);
        let has_header = self.b.create_block();
        self.b.ins().brif(is_object, has_header, &[], miss, &[]);
        self.b.switch_to_block(has_header);
        let count = self.b.ins().uload32(Self::flags(), recv, 8);
        let has_field = cmp_imm(&mut self.b, IntCC::UnsignedGreaterThan, count, index as i64);
        let ok = self.b.create_block();
        self.b.ins().brif(has_field, ok, &[], miss, &[]);
        self.b.switch_to_block(ok);
        add_imm(
            &mut self.b,
            recv,
            (HEADER_BYTES + index as usize * 8) as i64,
        )
    }

    /// Stores `v` into a heap object's slot at `address`. Every store into the heap from
    /// compiled code goes through here: the place for a write barrier when the collector
    /// needs one (SemiSpace does not).
    fn store_into_heap(&mut self, v: Value, address: Value) {
        self.b.ins().store(Self::flags(), v, address, 0);
    }

    /// The context `level` hops out from the frame's.
    fn context(&mut self, level: u8) -> Value {
        let mut ctx = self
            .b
            .ins()
            .load(I64, Self::flags(), self.s.frame, self.layout.frame_ctx);
        let outer = (HEADER_BYTES + context::OUTER * 8) as i32;
        for _ in 0..level {
            ctx = self.b.ins().load(I64, Self::flags(), ctx, outer);
        }
        ctx
    }

    fn context_slot_offset(index: u16) -> i32 {
        (HEADER_BYTES + index as usize * 8) as i32
    }

    /// `a op b` for two tagged small integers, or a jump to `overflow` when the result does
    /// not fit; `None` when the operation has no inline form.
    fn int_arith(&mut self, op: IntOp, a: Value, b: Value, overflow: Block) -> Option<Value> {
        let tagged = |t: &mut Self, (r, of): (Value, Value)| {
            let ok = t.b.create_block();
            t.b.ins().brif(of, overflow, &[], ok, &[]);
            t.b.switch_to_block(ok);
            r
        };
        Some(match op {
            // (2x+1) + 2y = 2(x+y)+1; the i64 operation overflows exactly when x+y needs more
            // than 63 bits.
            IntOp::Add => {
                let b2 = add_imm(&mut self.b, b, -1);
                let r = self.b.ins().sadd_overflow(a, b2);
                tagged(self, r)
            }
            IntOp::Sub => {
                let b2 = add_imm(&mut self.b, b, -1);
                let r = self.b.ins().ssub_overflow(a, b2);
                tagged(self, r)
            }
            // x * 2y = 2xy, then the tag.
            IntOp::Mul => {
                let one = self.b.ins().iconst(I64, 1);
                let x = self.b.ins().sshr(a, one);
                let b2 = add_imm(&mut self.b, b, -1);
                let r = self.b.ins().smul_overflow(x, b2);
                let r = tagged(self, r);
                self.b.ins().bor(r, one)
            }
            IntOp::BitAnd => self.b.ins().band(a, b),
            _ => {
                let cc = compare_cc(op)?;
                let c = self.b.ins().icmp(cc, a, b);
                self.boolean(c)
            }
        })
    }

    /// A branch on `int(a) cc int(b)`: the jump behind a compare-and-branch.
    fn both_ints(&mut self, a: Value, b: Value) -> Value {
        let both = self.b.ins().band(a, b);
        and_imm(&mut self.b, both, 1)
    }

    /// A binary send from `site` with receiver and argument in slots `h - 2` and `h - 1`,
    /// resuming at `i + 1`.
    fn send_binary(&mut self, site: u32, h: i32, at: At) -> Result<(), String> {
        let i = at.i;
        let facts = self.site(site);
        let op = facts.int_op;
        let next = self.block(i + 1)?;
        if self.speculates() && facts.expects_small_ints && has_int_form(op) {
            // Operands that have always been small integers: anything else deoptimizes, and
            // so does a result that needs a big integer.
            let not_ints = self.deopt_block(at, site, DeoptReason::NotSmallInts);
            let overflow = self.deopt_block(at, site, DeoptReason::Overflow);
            let a = self.slot(h - 2);
            let b = self.slot(h - 1);
            let ints = self.both_ints(a, b);
            let go = self.b.create_block();
            self.b.ins().brif(ints, go, &[], not_ints, &[]);
            self.b.switch_to_block(go);
            let r = self
                .int_arith(op, a, b, overflow)
                .expect("has_int_form checked");
            self.set_slot(h - 2, r);
            self.jump(next);
            return Ok(());
        }
        let slow = self.b.create_block();
        self.b.set_cold_block(slow);
        if op != IntOp::None && op != IntOp::And && op != IntOp::Or {
            let not_numbers = self.symbol_test_block(op, slow);
            let (a, b, ints, doubles) = self.number_operands(op, h, not_numbers);
            if let Some((x, y)) = doubles {
                let r = match op {
                    IntOp::Add => Some(self.b.ins().fadd(x, y)),
                    IntOp::Sub => Some(self.b.ins().fsub(x, y)),
                    IntOp::Mul => Some(self.b.ins().fmul(x, y)),
                    IntOp::FloatDiv => Some(self.float_quotient(x, y, slow)),
                    _ => None,
                };
                let v = match r {
                    Some(r) => self.encode_small_float(r, slow),
                    None => {
                        let cc = float_cc(op).expect("number_operands checked");
                        let c = self.b.ins().fcmp(cc, x, y);
                        self.boolean(c)
                    }
                };
                self.set_slot(h - 2, v);
                self.jump(next);
            }
            if not_numbers != slow {
                self.compare_non_numbers(op, h, not_numbers, slow, |t, c| {
                    let v = t.boolean(c);
                    t.set_slot(h - 2, v);
                    t.jump(next);
                });
            }
            self.b.switch_to_block(ints);
            if op == IntOp::FloatDiv {
                // Two small integers: their quotient as a double, as Integer's `//` makes it.
                let one = self.b.ins().iconst(I64, 1);
                let x = self.b.ins().sshr(a, one);
                let y = self.b.ins().sshr(b, one);
                let x = self.b.ins().fcvt_from_sint(types::F64, x);
                let y = self.b.ins().fcvt_from_sint(types::F64, y);
                let q = self.float_quotient(x, y, slow);
                let v = self.encode_small_float(q, slow);
                self.set_slot(h - 2, v);
                self.jump(next);
            } else if let Some(r) = self.int_arith(op, a, b, slow) {
                self.set_slot(h - 2, r);
                self.jump(next);
            } else {
                self.jump(slow);
            }
        } else if op == IntOp::And || op == IntOp::Or {
            // Two Booleans, answered as the interpreter answers them (`IntOp::apply_bool`);
            // anything else is sent.
            let a = self.slot(h - 2);
            let b = self.slot(h - 1);
            let t = tally_heap::Value::TRUE.0 as i64;
            let f = tally_heap::Value::FALSE.0 as i64;
            let is_bool = |tr: &mut Self, v| {
                let is_t = cmp_imm(&mut tr.b, IntCC::Equal, v, t);
                let is_f = cmp_imm(&mut tr.b, IntCC::Equal, v, f);
                tr.b.ins().bor(is_t, is_f)
            };
            let a_bool = is_bool(self, a);
            let b_bool = is_bool(self, b);
            let both = self.b.ins().band(a_bool, b_bool);
            let go = self.b.create_block();
            self.b.ins().brif(both, go, &[], slow, &[]);
            self.b.switch_to_block(go);
            let a_true = cmp_imm(&mut self.b, IntCC::Equal, a, t);
            let r = if op == IntOp::And {
                let false_ = self.b.ins().iconst(I64, f);
                self.b.ins().select(a_true, b, false_)
            } else {
                let true_ = self.b.ins().iconst(I64, t);
                self.b.ins().select(a_true, true_, b)
            };
            self.set_slot(h - 2, r);
            self.jump(next);
        } else {
            self.jump(slow);
        }
        self.b.switch_to_block(slow);
        self.send_stub(self.layout.stubs.send_binary, site, h, i)
    }

    /// The operands of a binary `op` in slots `h - 2` and `h - 1`, split by kind: answers them
    /// tagged, the (empty) block taken when both are small integers, and, when `op` has a
    /// double form, the two as doubles, with the builder in the block where they are (operands
    /// of neither kind, and doubles `op` cannot take, jump to `slow`).
    fn number_operands(
        &mut self,
        op: IntOp,
        h: i32,
        slow: Block,
    ) -> (Value, Value, Block, Option<(Value, Value)>) {
        let a = self.slot(h - 2);
        let b = self.slot(h - 1);
        let ints = self.both_ints(a, b);
        let int_block = self.b.create_block();
        let others = self.b.create_block();
        self.b.ins().brif(ints, int_block, &[], others, &[]);
        self.b.switch_to_block(others);
        let doubles = self.float_operands(op, a, b, slow);
        if doubles.is_none() {
            self.jump(slow);
        }
        (a, b, int_block, doubles)
    }

    /// Where operands that are not numbers go: for `=` and `~=` a new block that tests for
    /// two symbols (`symbols_compare`), for other operations `slow`.
    fn symbol_test_block(&mut self, op: IntOp, slow: Block) -> Block {
        if matches!(op, IntOp::Equal | IntOp::NotEqual) {
            self.b.create_block()
        } else {
            slow
        }
    }

    /// From `at`, `=` or `~=` of operands that are not numbers (slots `h - 2` and `h - 1`),
    /// where it needs no send: two symbols (`symbols_compare`), and for `=` a String receiver
    /// (`strings_equal`). `answer` gets each condition with the builder in its block and
    /// must leave that block; anything else goes to `slow`.
    fn compare_non_numbers(
        &mut self,
        op: IntOp,
        h: i32,
        at: Block,
        slow: Block,
        mut answer: impl FnMut(&mut Self, Value),
    ) {
        let string = self
            .layout
            .string_with_primitive_equal
            .filter(|_| op == IntOp::Equal);
        let not_symbols = match string {
            Some(_) => self.b.create_block(),
            None => slow,
        };
        let c = self.symbols_compare(op, h, at, not_symbols);
        answer(self, c);
        if let Some(string) = string {
            let c = self.strings_equal(string, h, not_symbols, slow);
            answer(self, c);
        }
    }

    /// In `at`: when the operands in slots `h - 2` and `h - 1` are two symbols, the answer of
    /// `=` or `~=` as a condition (`IntOp::apply_symbols`: interned, so identity), with the
    /// builder in a new block; anything else goes to `slow`.
    fn symbols_compare(&mut self, op: IntOp, h: i32, at: Block, slow: Block) -> Value {
        self.b.switch_to_block(at);
        let a = self.slot(h - 2);
        let b = self.slot(h - 1);
        let ta = and_imm(&mut self.b, a, 7);
        let tb = and_imm(&mut self.b, b, 7);
        let sa = cmp_imm(&mut self.b, IntCC::Equal, ta, SYMBOL_TAG);
        let sb = cmp_imm(&mut self.b, IntCC::Equal, tb, SYMBOL_TAG);
        let both = self.b.ins().band(sa, sb);
        let go = self.b.create_block();
        self.b.ins().brif(both, go, &[], slow, &[]);
        self.b.switch_to_block(go);
        let cc = if op == IntOp::Equal {
            IntCC::Equal
        } else {
            IntCC::NotEqual
        };
        self.b.ins().icmp(cc, a, b)
    }

    /// In `at`: when the receiver in slot `h - 2` is a String (the class itself, whose `=` is
    /// the primitive: `Layout::string_with_primitive_equal`), String's `=` with the argument in
    /// slot `h - 1` as a condition, through the pure `string_equal` stub (no sync: it neither
    /// allocates nor touches frames), with the builder in a new block; anything else goes to
    /// `slow`.
    fn strings_equal(&mut self, string: u32, h: i32, at: Block, slow: Block) -> Value {
        self.b.switch_to_block(at);
        let a = self.slot(h - 2);
        let b = self.slot(h - 1);
        let class = self.object_class(a, slow);
        let is_string = cmp_imm(&mut self.b, IntCC::Equal, class, string as i64);
        let go = self.b.create_block();
        self.b.ins().brif(is_string, go, &[], slow, &[]);
        self.b.switch_to_block(go);
        let sig = self.sigs.record;
        let stub = self
            .b
            .ins()
            .iconst(I64, self.layout.stubs.string_equal as i64);
        let call = self.b.ins().call_indirect(sig, stub, &[self.vm, a, b]);
        let equal = self.b.inst_results(call)[0];
        cmp_imm(&mut self.b, IntCC::NotEqual, equal, 0)
    }

    /// `x / y` (doubles), or a jump to `slow` for a zero divisor (the general path reports
    /// it or answers infinity, as the receiver's `//` does).
    fn float_quotient(&mut self, x: Value, y: Value, slow: Block) -> Value {
        let zero = self.b.ins().f64const(0.0);
        let is_zero = self.b.ins().fcmp(FloatCC::Equal, y, zero);
        let go = self.b.create_block();
        self.b.ins().brif(is_zero, slow, &[], go, &[]);
        self.b.switch_to_block(go);
        self.b.ins().fdiv(x, y)
    }

    /// `true` or `false` as a SOM value, from a condition.
    fn boolean(&mut self, c: Value) -> Value {
        let t = self.b.ins().iconst(I64, TRUE);
        let f = self.b.ins().iconst(I64, FALSE);
        self.b.ins().select(c, t, f)
    }

    /// The operands of `op` as doubles when `IntOp::apply_float` would answer them in place
    /// (at least one an immediate double, the other an immediate double or a small integer;
    /// both doubles for `=` and `~=`), else a jump to `slow`. `None` when `op` has no double
    /// form at all.
    fn float_operands(
        &mut self,
        op: IntOp,
        a: Value,
        b: Value,
        slow: Block,
    ) -> Option<(Value, Value)> {
        let exact = matches!(op, IntOp::Equal | IntOp::NotEqual);
        if !matches!(op, IntOp::Add | IntOp::Sub | IntOp::Mul | IntOp::FloatDiv)
            && float_cc(op).is_none()
        {
            return None;
        }
        let is_float = |t: &mut Self, v: Value| {
            let tag = and_imm(&mut t.b, v, 7);
            cmp_imm(&mut t.b, IntCC::Equal, tag, FLOAT_TAG)
        };
        let (fa, fb) = (is_float(self, a), is_float(self, b));
        let ok = if exact {
            self.b.ins().band(fa, fb)
        } else {
            let ia = and_imm(&mut self.b, a, 1);
            let ia = cmp_imm(&mut self.b, IntCC::NotEqual, ia, 0);
            let ib = and_imm(&mut self.b, b, 1);
            let ib = cmp_imm(&mut self.b, IntCC::NotEqual, ib, 0);
            let a_ok = self.b.ins().bor(fa, ia);
            let b_ok = self.b.ins().bor(fb, ib);
            let any = self.b.ins().bor(fa, fb);
            let ok = self.b.ins().band(a_ok, b_ok);
            self.b.ins().band(ok, any)
        };
        let go = self.b.create_block();
        self.b.ins().brif(ok, go, &[], slow, &[]);
        self.b.switch_to_block(go);
        let x = self.number_as_double(a, fa);
        let y = self.number_as_double(b, fb);
        Some((x, y))
    }

    /// `v` as a double: decoded if `is_float`, else converted from a small integer.
    fn number_as_double(&mut self, v: Value, is_float: Value) -> Value {
        // Decoding (the inverse of `encode_small_float`): payload 0 and 1 are ±0.0.
        let three = self.b.ins().iconst(I64, 3);
        let payload = self.b.ins().ushr(v, three);
        let small = cmp_imm(&mut self.b, IntCC::UnsignedLessThanOrEqual, payload, 1);
        let rebased = add_imm(&mut self.b, payload, ROTATED_EXP_OFFSET as i64);
        let rotated = self.b.ins().select(small, payload, rebased);
        let one = self.b.ins().iconst(I64, 1);
        let bits = self.b.ins().rotr(rotated, one);
        let decoded = self.b.ins().bitcast(types::F64, MemFlagsData::new(), bits);
        let int = self.b.ins().sshr(v, one);
        let converted = self.b.ins().fcvt_from_sint(types::F64, int);
        self.b.ins().select(is_float, decoded, converted)
    }

    /// The immediate encoding of double `r` (as `Value::from_small_float`), or a jump to
    /// `slow` when it needs a boxed double.
    fn encode_small_float(&mut self, r: Value, slow: Block) -> Value {
        let bits = self.b.ins().bitcast(I64, MemFlagsData::new(), r);
        let one = self.b.ins().iconst(I64, 1);
        let rotated = self.b.ins().rotl(bits, one);
        let zero = cmp_imm(&mut self.b, IntCC::UnsignedLessThanOrEqual, rotated, 1);
        let p = add_imm(
            &mut self.b,
            rotated,
            (ROTATED_EXP_OFFSET as i64).wrapping_neg(),
        );
        let p2 = add_imm(&mut self.b, p, -2);
        let in_window = cmp_imm(
            &mut self.b,
            IntCC::UnsignedLessThan,
            p2,
            (PAYLOAD_LIMIT - 2) as i64,
        );
        let ok = self.b.ins().bor(zero, in_window);
        let fits = self.b.create_block();
        self.b.ins().brif(ok, fits, &[], slow, &[]);
        self.b.switch_to_block(fits);
        let payload = self.b.ins().select(zero, rotated, p);
        let three = self.b.ins().iconst(I64, 3);
        let shifted = self.b.ins().ishl(payload, three);
        let tag = self.b.ins().iconst(I64, FLOAT_TAG);
        self.b.ins().bor(shifted, tag)
    }

    /// A comparison answered and branched on at once for small integers (to `target` when
    /// its truth is `jump_if`, else past the conditional jump at `i + 1`); sent otherwise, and
    /// that jump tests the answer.
    fn compare_and_branch(
        &mut self,
        site: u32,
        target: u32,
        jump_if: bool,
        h: i32,
        at: At,
    ) -> Result<(), String> {
        let i = at.i;
        let facts = self.site(site);
        let op = facts.int_op;
        if let (Some(cc), true) = (
            compare_cc(op),
            self.speculates() && facts.expects_small_ints,
        ) {
            let (taken, not_taken) = (self.block(target as usize)?, self.block(i + 2)?);
            let not_ints = self.deopt_block(at, site, DeoptReason::NotSmallInts);
            let a = self.slot(h - 2);
            let b = self.slot(h - 1);
            let ints = self.both_ints(a, b);
            let go = self.b.create_block();
            self.b.ins().brif(ints, go, &[], not_ints, &[]);
            self.b.switch_to_block(go);
            let c = self.b.ins().icmp(cc, a, b);
            if jump_if {
                self.b.ins().brif(c, taken, &[], not_taken, &[]);
            } else {
                self.b.ins().brif(c, not_taken, &[], taken, &[]);
            }
            return Ok(());
        }
        let slow = self.b.create_block();
        self.b.set_cold_block(slow);
        if let Some(cc) = compare_cc(op) {
            let (taken, not_taken) = (self.block(target as usize)?, self.block(i + 2)?);
            let branch = |t: &mut Self, c: Value| {
                if jump_if {
                    t.b.ins().brif(c, taken, &[], not_taken, &[]);
                } else {
                    t.b.ins().brif(c, not_taken, &[], taken, &[]);
                }
            };
            let not_numbers = self.symbol_test_block(op, slow);
            let (a, b, ints, doubles) = self.number_operands(op, h, not_numbers);
            if let Some((x, y)) = doubles {
                let c = self.b.ins().fcmp(float_cc(op).expect("a comparison"), x, y);
                branch(self, c);
            }
            if not_numbers != slow {
                self.compare_non_numbers(op, h, not_numbers, slow, branch);
            }
            self.b.switch_to_block(ints);
            let c = self.b.ins().icmp(cc, a, b);
            branch(self, c);
        } else {
            self.jump(slow);
        }
        self.b.switch_to_block(slow);
        self.send_stub(self.layout.stubs.send_binary, site, h, i)
    }

    fn conditional_jump(
        &mut self,
        target: u32,
        if_true: bool,
        h: i32,
        i: usize,
    ) -> Result<(), String> {
        let v = self.slot(h - 1);
        let (taken, next) = (self.block(target as usize)?, self.block(i + 1)?);
        let (jump_on, fall_on) = if if_true {
            (TRUE, FALSE)
        } else {
            (FALSE, TRUE)
        };
        let jumps = cmp_imm(&mut self.b, IntCC::Equal, v, jump_on);
        let other = self.b.create_block();
        self.b.ins().brif(jumps, taken, &[], other, &[]);
        self.b.switch_to_block(other);
        let falls = cmp_imm(&mut self.b, IntCC::Equal, v, fall_on);
        let not_boolean = self.interpret_block(i, h);
        self.b.ins().brif(falls, next, &[], not_boolean, &[]);
        Ok(())
    }

    /// Pushes the receiver's field `index` at slot `h`, or hands over to the interpreter at
    /// `i` (which reports the missing field).
    fn push_field(&mut self, index: u16, h_at: i32, i: usize, h: i32) {
        let miss = self.interpret_block(i, h);
        let address = self.field_address(index, miss);
        let v = self.b.ins().load(I64, Self::flags(), address, 0);
        self.set_slot(h_at, v);
    }

    fn op(&mut self, i: usize, op: Op, h: i32, len: usize) -> Result<(), String> {
        let at = At { i, h0: h };
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
                let ctx = self.context(level);
                let v = self.slot(h - 1);
                let address = add_imm(&mut self.b, ctx, Self::context_slot_offset(index) as i64);
                self.store_into_heap(v, address);
                self.jump(next_block(next)?);
            }
            Op::PushField(k) => {
                self.push_field(k, h, i, h);
                self.jump(next_block(next)?);
            }
            Op::StoreField(k) | Op::PopField(k) => {
                let miss = self.interpret_block(i, h);
                let address = self.field_address(k, miss);
                let v = self.slot(h - 1);
                self.store_into_heap(v, address);
                self.jump(next_block(next)?);
            }
            Op::PushLiteral(k) => {
                let index = self.b.ins().iconst(I32, k as i64);
                let sig = self.sigs.value1;
                let v = self.call_stub(self.layout.stubs.literal, sig, &[index]);
                self.set_slot(h, v);
                self.jump(next_block(next)?);
            }
            Op::PushConst(v) => {
                let v = self.b.ins().iconst(I64, v.0 as i64);
                self.set_slot(h, v);
                self.jump(next_block(next)?);
            }
            Op::PushGlobal(slot) => {
                let index = self.b.ins().iconst(I32, slot as i64);
                let sig = self.sigs.value1;
                let v = self.call_stub(self.layout.stubs.global, sig, &[index]);
                let undefined = cmp_imm(&mut self.b, IntCC::Equal, v, 0);
                let defined = self.b.create_block();
                let unknown = self.interpret_block(i, h);
                self.b.ins().brif(undefined, unknown, &[], defined, &[]);
                self.b.switch_to_block(defined);
                self.set_slot(h, v);
                self.jump(next_block(next)?);
            }
            Op::PushBlock(code) => {
                self.sync(h, i + 1);
                let code = self.b.ins().iconst(I32, code as i64);
                let sig = self.sigs.status1;
                let status = self.call_stub(self.layout.stubs.push_block, sig, &[code]);
                self.continue_or_leave(status, next_block(next)?);
            }
            Op::Pop => self.jump(next_block(next)?),
            Op::Dup => {
                let v = self.slot(h - 1);
                self.set_slot(h, v);
                self.jump(next_block(next)?);
            }
            Op::Send(site) => self.direct_send(site, h, at)?,
            Op::SuperSend(site) => self.send_stub(self.layout.stubs.super_send, site, h, i)?,
            Op::SendBinary(site) => self.send_binary(site, h, at)?,
            Op::SendIsNil(site) | Op::SendNotNil(site) => {
                // Answered by a comparison with nil while the core library's definitions
                // stand (as the interpreter does), else sent through the stub.
                let c = &self.layout.calls;
                let (standard_at, redefined_at) = (c.nil_tests_standard, c.nil_tests_redefined);
                let standard = self
                    .b
                    .ins()
                    .uload8(I32, Self::flags(), self.vm, standard_at);
                let redefined = self
                    .b
                    .ins()
                    .uload8(I32, Self::flags(), self.vm, redefined_at);
                let all_four = cmp_imm(&mut self.b, IntCC::Equal, standard, 0b1111);
                let kept = cmp_imm(&mut self.b, IntCC::Equal, redefined, 0);
                let inline = self.b.ins().band(all_four, kept);
                let fast = self.b.create_block();
                let slow = self.b.create_block();
                self.b.set_cold_block(slow);
                self.b.ins().brif(inline, fast, &[], slow, &[]);
                self.b.switch_to_block(fast);
                let v = self.slot(h - 1);
                let cc = if matches!(op, Op::SendIsNil(_)) {
                    IntCC::Equal
                } else {
                    IntCC::NotEqual
                };
                let is = cmp_imm(&mut self.b, cc, v, tally_heap::Value::NIL.0 as i64);
                let answer = self.boolean(is);
                self.set_slot(h - 1, answer);
                self.jump(next_block(next)?);
                self.b.switch_to_block(slow);
                self.sync(h, i + 1);
                let site = self.b.ins().iconst(I32, site as i64);
                let is_nil = self
                    .b
                    .ins()
                    .iconst(I32, matches!(op, Op::SendIsNil(_)) as i64);
                let sig = self.sigs.status2;
                let status = self.call_stub(self.layout.stubs.send_nil_test, sig, &[site, is_nil]);
                self.continue_or_leave(status, next_block(next)?);
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
                self.sync(h, t as usize);
                let sig = self.sigs.vm;
                let status = self.call_stub(self.layout.stubs.back_edge, sig, &[]);
                self.continue_or_leave(status, to);
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
                self.direct_send(site, h + 1, at)?;
            }
            Op::PushLocalSendBinary(k, site) => {
                let v = self.slot(k as i32);
                self.set_slot(h, v);
                self.send_binary(site, h + 1, at)?;
            }
            Op::PushConstSendBinary(v, site) => {
                let v = self.b.ins().iconst(I64, v.0 as i64);
                self.set_slot(h, v);
                self.send_binary(site, h + 1, at)?;
            }
            Op::SendCompareJumpIfFalse(site, t) => {
                self.compare_and_branch(site, t, false, h, at)?
            }
            Op::SendCompareJumpIfTrue(site, t) => self.compare_and_branch(site, t, true, h, at)?,
        }
        Ok(())
    }
}

/// Whether `int_arith` has an inline form of `op`.
fn has_int_form(op: IntOp) -> bool {
    matches!(op, IntOp::Add | IntOp::Sub | IntOp::Mul | IntOp::BitAnd) || compare_cc(op).is_some()
}

/// The double condition of a comparison selector (immediate doubles are never NaN).
fn float_cc(op: IntOp) -> Option<FloatCC> {
    Some(match op {
        IntOp::Less => FloatCC::LessThan,
        IntOp::Greater => FloatCC::GreaterThan,
        IntOp::LessEq => FloatCC::LessThanOrEqual,
        IntOp::GreaterEq => FloatCC::GreaterThanOrEqual,
        IntOp::Equal => FloatCC::Equal,
        IntOp::NotEqual => FloatCC::NotEqual,
        _ => return None,
    })
}

/// The integer condition of a comparison selector (tagged small integers order like their
/// values), or `None` for the others.
fn compare_cc(op: IntOp) -> Option<IntCC> {
    Some(match op {
        IntOp::Less => IntCC::SignedLessThan,
        IntOp::Greater => IntCC::SignedGreaterThan,
        IntOp::LessEq => IntCC::SignedLessThanOrEqual,
        IntOp::GreaterEq => IntCC::SignedGreaterThanOrEqual,
        IntOp::Equal => IntCC::Equal,
        IntOp::NotEqual => IntCC::NotEqual,
        _ => return None,
    })
}
