//! Bytecode → IR, by abstract interpretation of the frame: the receiver, arguments and
//! locals and the operand stack are SSA values as the bytecode runs, and every bytecode
//! block starts with a parameter for each of them (the merge; [`crate::passes`] drops the
//! parameters that merge nothing).
//!
//! The entry block takes the activation as a direct call would pass it — receiver,
//! arguments and, for a block, its closure — sets the locals to nil and makes the context,
//! then jumps to the block of instruction 0 (which a loop may jump back to).
//!
//! With on-stack-replacement entries (`osr`), the entry block only chooses the way in
//! ([`Terminator::Enter`]): a new activation runs the prologue above; an interpreted frame
//! stopped at a loop head (the target of a back-edge) enters that head with the frame's
//! locals, operand stack and context. The context is then a block parameter like a local
//! (it comes from the frame on one way in), which [`crate::passes`] drop where it merges
//! nothing.
//!
//! Speculation follows the sites' feedback ([`SiteFacts`]): operands that were always small
//! integers get [`InstKind::GuardInt`] and arithmetic done in place; a receiver class the
//! inline cache saw gets [`InstKind::GuardClass`] (one class) or a class switch (two, or a
//! value profile's one) with its target done in place or called directly, the other classes
//! sent. A guard's frame state is the one before its bytecode instruction, which the
//! interpreter redoes; a call's is the one after it.

use tally_heap::Value;
use tally_vm::bytecode::{stack_heights, CodeId, Op, SiteId};
use tally_vm::compiler::CodeKind;
use tally_vm::jit::{
    CompileRequest, DeoptReason, ExpectedReceiver, ExpectedReceivers, ExpectedTarget, SiteFacts,
};
use tally_vm::runtime::{
    Code, IntOp as SiteOp, TRIVIAL_CONSTANT, TRIVIAL_GETTER, TRIVIAL_RECEIVER, TRIVIAL_SETTER,
};

use tally_vm::operands::DoubleOperands;

use crate::{
    BlockId, Edge, FloatOp, FrameState, FrameStateId, Function, InstKind, IntCmp, IntOp, Resume,
    ScopeId, Terminator, Ty, ValueId,
};

/// What the builder asks of a compile: the facts of each send site.
pub trait Sites {
    fn facts(&self, site: SiteId) -> Option<SiteFacts>;

    /// Whether to inline `callee` (a method `tally_vm::jit::inlinable` accepts) where
    /// `site` calls it. The facts of every site of an inlined method, and of the blocks it
    /// makes, must be known.
    fn inline(&self, site: SiteId, callee: &Code) -> bool {
        let _ = (site, callee);
        false
    }

    /// The code of block `id`, when its closures' bodies may be inlined where a `value…`
    /// send in the function gets a closure it made (the facts of its sites must be known).
    fn block(&self, id: CodeId) -> Option<&'static Code> {
        let _ = id;
        None
    }

    /// The bytecodes the function may inline in all, each inlined copy counted.
    fn inline_budget(&self) -> usize {
        0
    }

    /// Literal `n`'s value when it is an immediate (a constant: literals never change).
    fn literal(&self, n: u32) -> Option<Value> {
        let _ = n;
        None
    }
}

impl Sites for CompileRequest {
    fn facts(&self, site: SiteId) -> Option<SiteFacts> {
        self.site(site).ok()
    }

    fn inline(&self, site: SiteId, callee: &Code) -> bool {
        self.inlines(site, callee.id)
    }

    fn block(&self, id: CodeId) -> Option<&'static Code> {
        CompileRequest::block(self, id)
    }

    fn inline_budget(&self) -> usize {
        self.inline_budget
    }

    fn literal(&self, n: u32) -> Option<Value> {
        self.immediate_literal(n)
    }
}

/// The function `code` (named `name`) compiles to, speculating on what `sites` say; with
/// `osr`, it may also be entered at its loop heads from an interpreted frame.
pub fn build(code: &Code, name: &str, sites: &dyn Sites, osr: bool) -> Result<Function, String> {
    let mut b = Builder {
        f: Function::new(code.id, name.to_string()),
        sites,
        act: Activation::new(code, ScopeId(0), sites, None)?,
        inlined_bytecodes: 0,
        home_here: vec![code.kind == CodeKind::Method],
    };
    let slots = b.act.slots();
    let loop_heads = b.act.loop_heads();
    let osr = osr && !loop_heads.is_empty();
    b.act.carry_context = osr && code.context_size > 0;
    let entry = b.f.add_block(ScopeId(0), 0);
    if osr {
        b.entries(entry, slots, &loop_heads);
    } else {
        b.prologue(entry, entry, slots, None);
    }
    b.translate_blocks()?;
    Ok(b.f)
}

/// The abstract frame while a block is translated.
#[derive(Clone)]
struct State {
    block: BlockId,
    locals: Vec<ValueId>,
    stack: Vec<ValueId>,
    /// The activation's context, if it has one.
    context: Option<ValueId>,
}

struct Builder<'a> {
    f: Function,
    sites: &'a dyn Sites,
    /// The activation being translated: the compiled code's own, or one inlined into it.
    act: Activation<'a>,
    /// Bytecodes of inlined methods so far.
    inlined_bytecodes: usize,
    /// For each scope, whether its home method is the compiled code's own activation.
    home_here: Vec<bool>,
}

/// One activation's bytecode as it is translated: the compiled code's own, or a method
/// inlined at a call (whose blocks live in the same function, in their own scope).
struct Activation<'a> {
    code: &'a Code,
    scope: ScopeId,
    /// Operand stack height (above the locals) before each instruction; `None`: unreachable.
    heights: Vec<Option<usize>>,
    /// Bytecode indices that start a block, in order.
    leaders: Vec<usize>,
    /// The IR block of each leader.
    block_of: Vec<Option<BlockId>>,
    /// The activation's context (defined in the entry block, unless carried) and closure.
    context: Option<ValueId>,
    closure: Option<ValueId>,
    /// The context is a parameter of every bytecode block (it comes from the frame at an
    /// on-stack-replacement entry) instead of one value the entry block defines.
    carry_context: bool,
    /// Where an inlined activation was called from; `None` for the compiled code's own.
    inlined: Option<InlinedCall>,
    /// The receiver and arguments, the same values in every block (SOM never assigns them).
    args: Vec<ValueId>,
    /// The codes of the activations from the compiled code's own in to this one.
    chain: Vec<CodeId>,
    /// The value-stack slots their frames take when rebuilt.
    room: usize,
    /// Whether this activation's home method (its own, for a method) is the compiled code's
    /// own activation: a `^` in it then returns from the function.
    home_here: bool,
}

/// The call an inlined activation stands for.
struct InlinedCall {
    /// The caller suspended in the call: the outer state of every state of the callee.
    caller: FrameStateId,
    /// Where the callee's returns go, with the result as the one parameter.
    ret: BlockId,
}

impl<'a> Activation<'a> {
    fn new(
        code: &'a Code,
        scope: ScopeId,
        sites: &dyn Sites,
        inlined: Option<InlinedCall>,
    ) -> Result<Activation<'a>, String> {
        let ops = &code.ops;
        if ops.is_empty() {
            return Err("no bytecode".into());
        }
        let argc = |s: SiteId| sites.facts(s).map_or(0, |f| f.argc as usize);
        for op in ops {
            if let Some(s) = op.site() {
                sites
                    .facts(s)
                    .ok_or_else(|| format!("no facts for send site {s}"))?;
            }
        }
        let slots = 1 + code.num_args as usize + code.num_locals as usize;
        let (heights, _) = stack_heights(ops, slots, argc)?;
        let mut act = Activation {
            code,
            scope,
            heights: heights
                .iter()
                .map(|h| h.map(|h| h as usize - slots))
                .collect(),
            leaders: Vec::new(),
            block_of: vec![None; ops.len()],
            context: None,
            closure: None,
            carry_context: false,
            inlined,
            args: Vec::new(),
            chain: vec![code.id],
            room: tally_vm::jit::frame_room(code),
            home_here: code.kind == CodeKind::Method,
        };
        act.find_leaders();
        Ok(act)
    }

    fn slots(&self) -> usize {
        1 + self.code.num_args as usize + self.code.num_locals as usize
    }

    fn find_leaders(&mut self) {
        let ops = &self.code.ops;
        let mut leader = vec![false; ops.len() + 2];
        leader[0] = true;
        for (i, op) in ops.iter().enumerate() {
            match *op {
                Op::Jump(t) | Op::JumpBack(t) => {
                    leader[t as usize] = true;
                    leader[i + 1] = true;
                }
                Op::JumpIfTrue(t) | Op::JumpIfFalse(t) => {
                    leader[t as usize] = true;
                    leader[i + 1] = true;
                }
                Op::SendCompareJumpIfFalse(_, t) | Op::SendCompareJumpIfTrue(_, t) => {
                    // Always translated as the comparison and the jump behind it.
                    leader[t as usize] = true;
                    leader[i + 1] = true;
                }
                Op::Return
                | Op::ReturnNonLocal
                | Op::ReturnSelf
                | Op::ReturnLocal(_)
                | Op::ReturnField(_) => leader[i + 1] = true,
                _ => {}
            }
        }
        self.leaders = (0..ops.len())
            .filter(|&i| leader[i] && self.heights[i].is_some())
            .collect();
    }

    /// The back-edges' targets, in order.
    fn loop_heads(&self) -> Vec<usize> {
        let mut heads: Vec<usize> = (0..self.code.ops.len())
            .filter(|&i| self.heights[i].is_some())
            .filter_map(|i| match self.code.ops[i] {
                Op::JumpBack(t) => Some(t as usize),
                _ => None,
            })
            .collect();
        heads.sort_unstable();
        heads.dedup();
        heads
    }
}

impl Builder<'_> {
    /// The entry's parameters: receiver, arguments and, for a block, its closure.
    fn entry_params(&mut self, entry: BlockId) -> Vec<ValueId> {
        let mut params = Vec::new();
        for _ in 0..=self.act.code.num_args {
            params.push(self.f.add_param(entry, Ty::Word));
        }
        if self.act.code.kind == CodeKind::Block {
            self.act.closure = Some(self.f.add_param(entry, Ty::Word));
        }
        self.act.args = params.clone();
        params
    }

    /// An entry that chooses between the prologue and an entry at each loop head.
    fn entries(&mut self, entry: BlockId, slots: usize, loop_heads: &[usize]) {
        let params = self.entry_params(entry);
        // What the closure's context is does not depend on the way in.
        let outer = self.outer_context(entry);
        let normal = self.f.add_block(self.act.scope, 0);
        self.prologue(entry, normal, slots, outer);
        let mut osr = Vec::new();
        for &head in loop_heads {
            let block = self.f.add_block(self.act.scope, head as u32);
            let height = self.act.heights[head].expect("a reachable loop head");
            let mut args = Vec::new();
            for k in params.len()..slots + height {
                let v = self
                    .f
                    .push_inst(block, InstKind::FrameSlot(k as u16), None, head as u32)
                    .expect("a value");
                args.push(v);
            }
            if self.act.carry_context {
                let v = self
                    .f
                    .push_inst(block, InstKind::FrameContext, None, head as u32)
                    .expect("a value");
                args.push(v);
            }
            let target = self.block_for(head);
            self.f.blocks[block.index()].term = Terminator::Jump(Edge {
                block: target,
                args,
            });
            osr.push(crate::OsrEntry {
                bci: head as u32,
                edge: Edge {
                    block,
                    args: Vec::new(),
                },
                height: height as u32,
            });
        }
        self.f.blocks[entry.index()].term = Terminator::Enter {
            normal: Edge {
                block: normal,
                args: Vec::new(),
            },
            osr,
        };
    }

    /// A block's closure's context, read in `block` (None for a method).
    fn outer_context(&mut self, block: BlockId) -> Option<ValueId> {
        let c = self.act.closure?;
        self.f
            .push_inst(block, InstKind::ClosureContext(c), None, 0)
    }

    /// The prologue of a new activation, in `block`: the locals nil, the context made; then
    /// the jump to instruction 0. Without on-stack-replacement entries `block` is `entry`.
    /// `outer` is the closure's context when the entry has read it already.
    fn prologue(&mut self, entry: BlockId, block: BlockId, slots: usize, outer: Option<ValueId>) {
        let code = self.act.code;
        let params = if entry == block {
            self.entry_params(entry)
        } else {
            self.f.blocks[entry.index()].params[..=code.num_args as usize].to_vec()
        };
        let mut locals = params.clone();
        for k in locals.len()..slots {
            let v = self
                .f
                .push_inst(block, InstKind::InitialLocal(k as u16), None, 0)
                .expect("a value");
            locals.push(v);
        }
        let outer = if entry == block {
            self.outer_context(block)
        } else {
            outer
        };
        let context = if code.context_size > 0 {
            let state = self.f.add_state(FrameState {
                code: code.id,
                bci: 0,
                resume: Resume::Before,
                locals: locals.iter().map(|&v| Some(v)).collect(),
                stack: Vec::new(),
                context: None,
                closure: self.act.closure,
                outer: None,
                virtuals: Vec::new(),
            });
            Some(self.new_context(block, &locals, outer, state))
        } else {
            outer
        };
        let mut args = locals.split_off(self.act.args.len());
        if self.act.carry_context {
            args.extend(context);
        } else {
            self.act.context = context;
        }
        let first = self.block_for(0);
        self.f.blocks[block.index()].term = Terminator::Jump(Edge { block: first, args });
    }

    /// The IR block of leader `bci`, made with its parameters on first use.
    fn block_for(&mut self, bci: usize) -> BlockId {
        if let Some(b) = self.act.block_of[bci] {
            return b;
        }
        let b = self.f.add_block(self.act.scope, bci as u32);
        // The receiver and arguments are the same values everywhere (SOM never assigns
        // them): no block takes them as parameters.
        let slots = self.act.slots() - self.act.args.len();
        let height = self.act.heights[bci].expect("a reachable leader");
        let carried = usize::from(self.act.carry_context);
        for _ in 0..slots + height + carried {
            self.f.add_param(b, Ty::Word);
        }
        self.act.block_of[bci] = Some(b);
        b
    }

    fn edge_to(&mut self, bci: usize, s: &State) -> Edge {
        let block = self.block_for(bci);
        Edge {
            block,
            args: s.locals[self.act.args.len()..]
                .iter()
                .chain(s.stack.iter())
                .chain(s.context.iter().filter(|_| self.act.carry_context))
                .copied()
                .collect(),
        }
    }

    fn constant(&mut self, block: BlockId, v: Value, bci: u32) -> ValueId {
        self.f
            .push_inst(block, InstKind::Const(v), None, bci)
            .expect("a value")
    }

    fn state(&mut self, s: &State, bci: usize, resume: Resume, stack: &[ValueId]) -> FrameStateId {
        self.f.add_state(FrameState {
            code: self.act.code.id,
            bci: bci as u32,
            resume,
            locals: s.locals.iter().map(|&v| Some(v)).collect(),
            stack: stack.to_vec(),
            context: s.context,
            closure: self.act.closure,
            outer: self.act.inlined.as_ref().map(|c| c.caller),
            virtuals: Vec::new(),
        })
    }

    /// Ends `s`'s block with a return of `v`: from the function, or for an inlined
    /// activation a jump to where its call goes on.
    fn return_(&mut self, s: &State, v: ValueId) {
        self.f.blocks[s.block.index()].term = match &self.act.inlined {
            None => Terminator::Return(v),
            Some(call) => Terminator::Jump(Edge {
                block: call.ret,
                args: vec![v],
            }),
        };
    }

    /// Translates every block of the activation's bytecode.
    fn translate_blocks(&mut self) -> Result<(), String> {
        for k in 0..self.act.leaders.len() {
            self.translate_block(k)?;
        }
        Ok(())
    }

    /// Appends `kind`, from instruction `i`, to `s`'s block with the frame state its
    /// declaration asks for: `before` for one that resumes before its bytecode instruction
    /// (the state before that instruction, which its guards share), a new state after the
    /// call for a call (the stack as `s` holds it, the call's operands taken), none
    /// otherwise. Answers its result.
    fn push(
        &mut self,
        s: &State,
        kind: InstKind,
        i: usize,
        before: Option<FrameStateId>,
    ) -> Option<ValueId> {
        let state = match kind.props().state {
            None => None,
            Some(Resume::Before) => {
                Some(before.expect("the state before the instruction, for one that needs it"))
            }
            Some(Resume::AfterCall) => Some(self.state(s, i, Resume::AfterCall, &s.stack.clone())),
        };
        self.f.push_inst(s.block, kind, state, i as u32)
    }

    /// [`Builder::push`] of an instruction that defines a value.
    fn value(
        &mut self,
        s: &State,
        kind: InstKind,
        i: usize,
        before: Option<FrameStateId>,
    ) -> ValueId {
        self.push(s, kind, i, before).expect("a value")
    }

    fn translate_block(&mut self, k: usize) -> Result<(), String> {
        let start = self.act.leaders[k];
        let end = self
            .act
            .leaders
            .get(k + 1)
            .copied()
            .unwrap_or(self.act.code.ops.len());
        let block = self.block_for(start);
        let params = self.f.blocks[block.index()].params.clone();
        let slots = self.act.slots() - self.act.args.len();
        let (params, context) = if self.act.carry_context {
            let (context, params) = params.split_last().expect("a context parameter");
            (params, Some(*context))
        } else {
            (&params[..], self.act.context)
        };
        let mut locals = self.act.args.clone();
        locals.extend_from_slice(&params[..slots]);
        let mut s = State {
            block,
            locals,
            stack: params[slots..].to_vec(),
            context,
        };
        for i in start..end {
            if self.act.heights[i].is_none() {
                break;
            }
            if self.op(&mut s, i)? {
                return Ok(());
            }
        }
        // Falls through into the next leader.
        let edge = self.edge_to(end, &s);
        self.f.blocks[s.block.index()].term = Terminator::Jump(edge);
        Ok(())
    }

    /// Translates instruction `i`; answers whether it ended the block.
    fn op(&mut self, s: &mut State, i: usize) -> Result<bool, String> {
        let op = self.act.code.ops[i];
        let before = s.stack.clone();
        match op {
            Op::PushLocal(l) => s.stack.push(s.locals[l as usize]),
            Op::StoreLocal(l) | Op::PopLocal(l) if (l as usize) < self.act.args.len() => {
                return Err(format!(
                    "a store into argument {l}, which SOM never assigns"
                ));
            }
            Op::StoreLocal(l) => s.locals[l as usize] = *s.stack.last().ok_or("empty stack")?,
            Op::PopLocal(l) => s.locals[l as usize] = pop(s)?,
            Op::PushLocal2(a, c) => {
                s.stack.push(s.locals[a as usize]);
                s.stack.push(s.locals[c as usize]);
            }
            Op::PopPushLocal(l) => {
                pop(s)?;
                s.stack.push(s.locals[l as usize]);
            }
            Op::PushCtx { level, index } => {
                let ctx = self.context_at(s, level, i)?;
                let v = self.value(s, InstKind::LoadContext { ctx, index }, i, None);
                s.stack.push(v);
            }
            Op::StoreCtx { level, index } | Op::PopCtx { level, index } => {
                let value = if matches!(op, Op::PopCtx { .. }) {
                    pop(s)?
                } else {
                    *s.stack.last().ok_or("empty stack")?
                };
                let ctx = self.context_at(s, level, i)?;
                self.push(s, InstKind::StoreContext { ctx, index, value }, i, None);
            }
            Op::PushField(index) => {
                let v = self.load_field(s, index, i);
                s.stack.push(v);
            }
            Op::PopPushField(index) => {
                pop(s)?;
                let v = self.load_field(s, index, i);
                s.stack.push(v);
            }
            Op::StoreField(index) | Op::PopField(index) => {
                let value = if matches!(op, Op::PopField(_)) {
                    pop(s)?
                } else {
                    *s.stack.last().ok_or("empty stack")?
                };
                let obj = s.locals[0];
                self.push(s, InstKind::StoreField { obj, index, value }, i, None);
            }
            Op::PushLiteral(n) => {
                let v = match self.sites.literal(n) {
                    Some(c) => self.constant(s.block, c, i as u32),
                    None => self.value(s, InstKind::Literal(n), i, None),
                };
                s.stack.push(v);
            }
            Op::PushConst(c) => {
                let v = self.constant(s.block, c, i as u32);
                s.stack.push(v);
            }
            Op::PushGlobal(slot) => {
                let state = self.state(s, i, Resume::Before, &before);
                let v = self.value(s, InstKind::Global(slot), i, Some(state));
                s.stack.push(v);
            }
            Op::PushBlock(code) => self.make_block(s, code, i, &before),
            Op::Pop => {
                pop(s)?;
            }
            Op::Dup => s.stack.push(*s.stack.last().ok_or("empty stack")?),
            Op::Send(site) => self.send(s, site, i, &before, false)?,
            Op::SuperSend(site) => self.send(s, site, i, &before, true)?,
            Op::PushLocalSend(l, site) => {
                s.stack.push(s.locals[l as usize]);
                self.send(s, site, i, &before, false)?;
            }
            Op::SendBinary(site) => self.binary(s, site, i, &before)?,
            Op::PushLocalSendBinary(l, site) => {
                s.stack.push(s.locals[l as usize]);
                self.binary(s, site, i, &before)?;
            }
            Op::PushConstSendBinary(c, site) => {
                let v = self.constant(s.block, c, i as u32);
                s.stack.push(v);
                self.binary(s, site, i, &before)?;
            }
            // The comparison, then the jump behind it (the next instruction) on its result.
            Op::SendCompareJumpIfFalse(site, _) | Op::SendCompareJumpIfTrue(site, _) => {
                self.binary(s, site, i, &before)?;
            }
            Op::SendIsNil(site) | Op::SendNotNil(site) if self.facts(site).nil_tests_standard => {
                let state = self.state(s, i, Resume::Before, &before);
                let value = pop(s)?;
                let is_nil = matches!(op, Op::SendIsNil(_));
                let kind = InstKind::NilTest { value, is_nil };
                let flag = self.value(s, kind, i, Some(state));
                let v = self.value(s, InstKind::FlagToBool(flag), i, None);
                s.stack.push(v);
            }
            Op::SendIsNil(site) | Op::SendNotNil(site) => self.send(s, site, i, &before, false)?,
            Op::Return => {
                let v = pop(s)?;
                self.return_(s, v);
                return Ok(true);
            }
            Op::ReturnSelf => {
                self.return_(s, s.locals[0]);
                return Ok(true);
            }
            Op::ReturnLocal(l) => {
                self.return_(s, s.locals[l as usize]);
                return Ok(true);
            }
            Op::ReturnField(index) => {
                let v = self.load_field(s, index, i);
                self.return_(s, v);
                return Ok(true);
            }
            Op::ReturnNonLocal if self.act.inlined.is_some() && self.act.home_here => {
                // An inlined block whose home is the function's own activation: its `^`
                // returns from the function (the activations inlined between end with it).
                let value = *s.stack.last().ok_or("empty stack")?;
                self.f.blocks[s.block.index()].term = Terminator::Return(value);
                return Ok(true);
            }
            Op::ReturnNonLocal => {
                let value = *s.stack.last().ok_or("empty stack")?;
                let state = self.state(s, i, Resume::Before, &before);
                self.f.blocks[s.block.index()].term = Terminator::ReturnNonLocal { value, state };
                return Ok(true);
            }
            Op::Jump(t) => {
                let edge = self.edge_to(t as usize, s);
                self.f.blocks[s.block.index()].term = Terminator::Jump(edge);
                return Ok(true);
            }
            Op::JumpBack(t) => {
                let state = self.state(s, t as usize, Resume::Before, &before);
                self.push(s, InstKind::Yieldpoint, i, Some(state));
                let edge = self.edge_to(t as usize, s);
                self.f.blocks[s.block.index()].term = Terminator::Jump(edge);
                return Ok(true);
            }
            Op::JumpIfTrue(t) | Op::JumpIfFalse(t) => {
                let state = self.state(s, i, Resume::Before, &before);
                let v = pop(s)?;
                let cond = self.value(s, InstKind::Truth(v), i, Some(state));
                let target = self.edge_to(t as usize, s);
                let next = self.edge_to(i + 1, s);
                let (then, otherwise) = if matches!(op, Op::JumpIfTrue(_)) {
                    (target, next)
                } else {
                    (next, target)
                };
                self.f.blocks[s.block.index()].term = Terminator::Branch {
                    cond,
                    then,
                    otherwise,
                };
                return Ok(true);
            }
        }
        Ok(false)
    }

    /// The context `level` steps out from the activation's.
    fn context_at(&mut self, s: &State, level: u8, i: usize) -> Result<ValueId, String> {
        let mut ctx = s.context.ok_or("a context access without a context")?;
        for _ in 0..level {
            ctx = self.value(s, InstKind::ContextOuter(ctx), i, None);
        }
        Ok(ctx)
    }

    fn load_field(&mut self, s: &State, index: u16, i: usize) -> ValueId {
        let obj = s.locals[0];
        self.value(s, InstKind::LoadField { obj, index }, i, None)
    }

    fn make_block(&mut self, s: &mut State, code: CodeId, i: usize, before: &[ValueId]) {
        let state = self.state(s, i, Resume::Before, before);
        let kind = InstKind::MakeBlock {
            code,
            receiver: s.locals[0],
            ctx: s.context,
        };
        let v = self.value(s, kind, i, Some(state));
        s.stack.push(v);
    }

    /// `v` as a small integer, behind a guard that deoptimizes to `state` (the state before
    /// the send whose operand it is).
    fn guard_int(&mut self, s: &State, v: ValueId, i: usize, state: FrameStateId) -> ValueId {
        let kind = InstKind::GuardInt {
            value: v,
            reason: DeoptReason::NotSmallInts,
        };
        self.value(s, kind, i, Some(state))
    }

    /// Pops a send's receiver and arguments (in order).
    fn operands(&self, s: &mut State, argc: usize) -> Result<(ValueId, Vec<ValueId>), String> {
        if s.stack.len() < argc + 1 {
            return Err("stack underflow at a send".into());
        }
        let args = s.stack.split_off(s.stack.len() - argc);
        let receiver = pop(s)?;
        Ok((receiver, args))
    }

    fn facts(&self, site: SiteId) -> SiteFacts {
        self.sites.facts(site).expect("checked before building")
    }

    /// A binary send: small-integer arithmetic in place where the site only ever saw small
    /// integers, else a send (guarded by receiver class where the cache says).
    fn binary(
        &mut self,
        s: &mut State,
        site: SiteId,
        i: usize,
        before: &[ValueId],
    ) -> Result<(), String> {
        let facts = self.facts(site);
        let compare = |op| match op {
            SiteOp::Less => Some(IntCmp::Less),
            SiteOp::Greater => Some(IntCmp::Greater),
            SiteOp::LessEq => Some(IntCmp::LessEq),
            SiteOp::GreaterEq => Some(IntCmp::GreaterEq),
            SiteOp::Equal => Some(IntCmp::Equal),
            SiteOp::NotEqual => Some(IntCmp::NotEqual),
            _ => None,
        };
        if let Some(kinds) = facts.expects_doubles.filter(|_| facts.argc == 1) {
            let float = FloatOp::of_site(facts.int_op)
                .map(Err)
                .or_else(|| compare(facts.int_op).map(Ok));
            if let Some(float) = float {
                return self.double_binary(s, float, kinds, i, before);
            }
        }
        let arith = IntOp::of_site(facts.int_op)
            .map(Err)
            .or_else(|| compare(facts.int_op).map(Ok));
        let Some(arith) = arith.filter(|_| facts.expects_small_ints && facts.argc == 1) else {
            return self.send(s, site, i, before, false);
        };
        let state = self.state(s, i, Resume::Before, before);
        let (receiver, args) = self.operands(s, 1)?;
        let lhs = self.guard_int(s, receiver, i, state);
        let rhs = self.guard_int(s, args[0], i, state);
        let v = match arith {
            Err(op) => {
                let st = op.may_overflow().then_some(state);
                self.value(s, InstKind::IntBinary { op, lhs, rhs }, i, st)
            }
            Ok(op) => {
                let flag = self.value(s, InstKind::IntCompare { op, lhs, rhs }, i, None);
                self.value(s, InstKind::FlagToBool(flag), i, None)
            }
        };
        s.stack.push(v);
        Ok(())
    }

    /// A binary send at a site that saw only doubles (with doubles or small integers): done
    /// on doubles behind guards on the operands, its result boxed (a later pass keeps
    /// doubles unboxed where they flow into more arithmetic, frame states and loops).
    fn double_binary(
        &mut self,
        s: &mut State,
        op: Result<IntCmp, FloatOp>,
        kinds: DoubleOperands,
        i: usize,
        before: &[ValueId],
    ) -> Result<(), String> {
        let state = self.state(s, i, Resume::Before, before);
        let (receiver, args) = self.operands(s, 1)?;
        let lhs = self.double(s, receiver, kinds.receiver_may_be_int, state, i);
        let rhs = self.double(s, args[0], kinds.argument_may_be_int, state, i);
        let v = match op {
            Err(op) => {
                let r = self.value(s, InstKind::FloatBinary { op, lhs, rhs }, i, None);
                self.value(s, InstKind::BoxFloat(r), i, None)
            }
            Ok(op) => {
                let flag = self.value(s, InstKind::FloatCompare { op, lhs, rhs }, i, None);
                self.value(s, InstKind::FlagToBool(flag), i, None)
            }
        };
        s.stack.push(v);
        Ok(())
    }

    /// `v` as a double: the double a box was made of, a constant's, or `v` unboxed behind a
    /// guard that deoptimizes to `state` (taking small integers too with `accept_int`).
    fn double(
        &mut self,
        s: &State,
        v: ValueId,
        accept_int: bool,
        state: FrameStateId,
        i: usize,
    ) -> ValueId {
        if let Some(InstKind::BoxFloat(d)) = self.f.def_inst(v).map(|d| &d.kind) {
            return *d;
        }
        let constant = self.f.const_value(v).and_then(|c| {
            c.as_small_float()
                .or_else(|| c.as_int().filter(|_| accept_int).map(|n| n as f64))
        });
        if let Some(d) = constant {
            return self.value(s, InstKind::FloatConst(d.to_bits()), i, None);
        }
        let kind = InstKind::UnboxFloat {
            value: v,
            accept_int,
            reason: DeoptReason::NotDoubles,
        };
        self.value(s, kind, i, Some(state))
    }

    /// A send: the receiver classes the site saw done in place or called directly behind
    /// their guards, the rest sent.
    fn send(
        &mut self,
        s: &mut State,
        site: SiteId,
        i: usize,
        before: &[ValueId],
        is_super: bool,
    ) -> Result<(), String> {
        let facts = self.facts(site);
        let guard_state = self.state(s, i, Resume::Before, before);
        let (receiver, args) = self.operands(s, facts.argc as usize)?;
        if is_super {
            // Its target is fixed: called directly or done in place, no guard.
            let v = match facts.expects_receiver {
                Some(ExpectedReceivers::One(e)) => {
                    self.target(s, e, site, receiver, &args, i, guard_state)?
                }
                _ => self.call(s, site, receiver, args, i, true),
            };
            s.stack.push(v);
            return Ok(());
        }
        let Some(expected) = facts.expects_receiver else {
            let v = self.call(s, site, receiver, args, i, is_super);
            s.stack.push(v);
            return Ok(());
        };
        if let ExpectedReceivers::One(e) = expected {
            if matches!(e.target, ExpectedTarget::BlockValue)
                && self
                    .known_block(receiver)
                    .is_some_and(|(b, _)| b.num_args as usize == args.len())
            {
                // A closure this function makes, of the arity the send passes: its class is
                // the block class of that arity, the one the cache saw.
                let v = self.target(s, e, site, receiver, &args, i, guard_state)?;
                s.stack.push(v);
                return Ok(());
            }
            // A double's target unboxes the receiver, which is its guard.
            let checked = if matches!(e.target, ExpectedTarget::DoubleMath(_)) {
                receiver
            } else {
                let guard = InstKind::GuardClass {
                    value: receiver,
                    class: e.class,
                    reason: DeoptReason::ReceiverClass,
                };
                self.value(s, guard, i, Some(guard_state))
            };
            let v = self.target(s, e, site, checked, &args, i, guard_state)?;
            s.stack.push(v);
            return Ok(());
        }
        // A class switch: each class the site expects in turn, then the send. Classes that
        // reach the same method share one copy of its code.
        let join = self.f.add_block(self.act.scope, i as u32);
        let result = self.f.add_param(join, Ty::Word);
        let mut targets: Vec<(ExpectedReceiver, Vec<u32>)> = Vec::new();
        for e in expected.classes() {
            match targets.iter_mut().find(|(t, _)| t.code == e.code) {
                Some((_, classes)) => classes.push(e.class),
                None => targets.push((*e, vec![e.class])),
            }
        }
        for (e, classes) in targets {
            let hit = self.f.add_block(self.act.scope, i as u32);
            for class in classes {
                let flag = self.value(
                    s,
                    InstKind::ClassIs {
                        value: receiver,
                        class,
                    },
                    i,
                    None,
                );
                let miss = self.f.add_block(self.act.scope, i as u32);
                self.f.blocks[s.block.index()].term = Terminator::Branch {
                    cond: flag,
                    then: Edge {
                        block: hit,
                        args: vec![],
                    },
                    otherwise: Edge {
                        block: miss,
                        args: vec![],
                    },
                };
                s.block = miss;
            }
            let mut in_hit = State {
                block: hit,
                ..s.clone()
            };
            let v = self.target(&mut in_hit, e, site, receiver, &args, i, guard_state)?;
            self.f.blocks[in_hit.block.index()].term = Terminator::Jump(Edge {
                block: join,
                args: vec![v],
            });
        }
        let v = self.call(s, site, receiver, args, i, false);
        self.f.blocks[s.block.index()].term = Terminator::Jump(Edge {
            block: join,
            args: vec![v],
        });
        s.block = join;
        s.stack.push(result);
        Ok(())
    }

    /// A send through the VM, or a super send.
    fn call(
        &mut self,
        s: &State,
        site: SiteId,
        receiver: ValueId,
        args: Vec<ValueId>,
        i: usize,
        is_super: bool,
    ) -> ValueId {
        let kind = if is_super {
            InstKind::SuperSend {
                site,
                receiver,
                args,
            }
        } else {
            InstKind::Send {
                site,
                receiver,
                args,
            }
        };
        self.value(s, kind, i, None)
    }

    /// What one expected receiver class runs at the site, done in place or called.
    #[allow(clippy::too_many_arguments)]
    fn target(
        &mut self,
        s: &mut State,
        e: ExpectedReceiver,
        site: SiteId,
        receiver: ValueId,
        args: &[ValueId],
        i: usize,
        guard_state: FrameStateId,
    ) -> Result<ValueId, String> {
        let in_place = match e.target {
            ExpectedTarget::Trivial { kind, .. } => matches!(
                kind,
                TRIVIAL_GETTER | TRIVIAL_SETTER | TRIVIAL_CONSTANT | TRIVIAL_RECEIVER
            ),
            ExpectedTarget::Method(_) | ExpectedTarget::Primitive(_) => false,
            ExpectedTarget::ArrayAt
            | ExpectedTarget::ArrayAtPut
            | ExpectedTarget::ArrayLength
            | ExpectedTarget::BlockValue
            | ExpectedTarget::Identical
            | ExpectedTarget::StringEqual { .. }
            | ExpectedTarget::NewInstance { .. }
            | ExpectedTarget::NewArray
            | ExpectedTarget::DoubleMath(_) => true,
        };
        if in_place {
            // A method called directly runs its hook at its entry; a `value…` calls the
            // closure's body that way, but the primitive's own call is done here.
            self.push(s, InstKind::CallHook(e.code), i, None);
        }
        Ok(match e.target {
            ExpectedTarget::Trivial { kind, operand } => match kind {
                TRIVIAL_GETTER => self.value(
                    s,
                    InstKind::LoadField {
                        obj: receiver,
                        index: operand as u16,
                    },
                    i,
                    None,
                ),
                TRIVIAL_SETTER => {
                    let kind = InstKind::StoreField {
                        obj: receiver,
                        index: operand as u16,
                        value: args[0],
                    };
                    self.push(s, kind, i, None);
                    receiver
                }
                TRIVIAL_CONSTANT => self.constant(s.block, Value(operand), i as u32),
                TRIVIAL_RECEIVER => receiver,
                _ => self.call(s, site, receiver, args.to_vec(), i, false),
            },
            ExpectedTarget::Method(code) if self.inlines(site, code) => {
                let mut entry = vec![receiver];
                entry.extend_from_slice(args);
                return self.inline_activation(s, code, entry, None, None, false, i);
            }
            ExpectedTarget::Method(code) | ExpectedTarget::Primitive(code) => {
                let kind = InstKind::CallMethod {
                    code: code.id,
                    receiver,
                    args: args.to_vec(),
                };
                self.value(s, kind, i, None)
            }
            ExpectedTarget::ArrayAt => {
                let index = self.guard_int(s, args[0], i, guard_state);
                let kind = InstKind::ArrayAt {
                    array: receiver,
                    index,
                };
                self.value(s, kind, i, Some(guard_state))
            }
            ExpectedTarget::ArrayAtPut => {
                let index = self.guard_int(s, args[0], i, guard_state);
                let kind = InstKind::ArrayAtPut {
                    array: receiver,
                    index,
                    value: args[1],
                };
                self.push(s, kind, i, Some(guard_state));
                args[1]
            }
            ExpectedTarget::ArrayLength => self.value(s, InstKind::ArrayLength(receiver), i, None),
            ExpectedTarget::BlockValue => {
                if let Some(v) = self.inline_block(s, receiver, args, i)? {
                    return Ok(v);
                }
                let kind = InstKind::CallBlock {
                    closure: receiver,
                    args: args.to_vec(),
                };
                self.value(s, kind, i, None)
            }
            ExpectedTarget::Identical => {
                let flag = self.value(s, InstKind::Identical(receiver, args[0]), i, None);
                self.value(s, InstKind::FlagToBool(flag), i, None)
            }
            ExpectedTarget::StringEqual { symbol } => {
                let kind = InstKind::StringEqual {
                    lhs: receiver,
                    rhs: args[0],
                    symbol,
                };
                let flag = self.value(s, kind, i, None);
                self.value(s, InstKind::FlagToBool(flag), i, None)
            }
            ExpectedTarget::NewInstance { plain: None } => {
                let kind = InstKind::NewInstance(receiver);
                self.value(s, kind, i, Some(guard_state))
            }
            ExpectedTarget::NewInstance { plain: Some(shape) } => {
                let kind = InstKind::NewObject {
                    class: receiver,
                    shape,
                };
                self.value(s, kind, i, Some(guard_state))
            }
            ExpectedTarget::NewArray => {
                let kind = InstKind::NewArray {
                    class: receiver,
                    length: args[0],
                };
                self.value(s, kind, i, Some(guard_state))
            }
            ExpectedTarget::DoubleMath(op) => {
                let x = self.double(s, receiver, false, guard_state, i);
                let r = self.value(s, InstKind::FloatUnary { op, value: x }, i, None);
                self.value(s, InstKind::BoxFloat(r), i, None)
            }
        })
    }
}

impl Builder<'_> {
    /// Whether `callee` can run inlined in the current activation: within the compile's
    /// budget, the chain it would end stays within the frames and value-stack room a
    /// deoptimization may rebuild, and does not hold it already (recursion is not inlined).
    fn fits_chain(&self, callee: &Code) -> bool {
        self.inlined_bytecodes + callee.ops.len() <= self.sites.inline_budget()
            && self.act.chain.len() < tally_vm::jit::MAX_INLINED_FRAMES
            && self.act.room + tally_vm::jit::frame_room(callee)
                <= tally_vm::jit::INLINED_FRAMES_ROOM
            && !self.act.chain.contains(&callee.id)
    }

    /// Whether the call of `callee` from `site` is inlined: what the sites' plan says (which
    /// knows which methods can run without a frame of their own), where the chain has room.
    fn inlines(&self, site: SiteId, callee: &Code) -> bool {
        callee.kind == CodeKind::Method
            && self.sites.inline(site, callee)
            && self.fits_chain(callee)
    }

    /// The activation of `callee` (a method, or a block with its closure `closure`) that a
    /// call at instruction `i` makes, translated into this function: it has no frame, only
    /// frame states whose outer state is this call's. `entry` holds its receiver and
    /// arguments; `context` is a block's (its closure's). Answers the call's result (the
    /// parameter of the block its returns jump to).
    #[allow(clippy::too_many_arguments)]
    fn inline_activation(
        &mut self,
        s: &mut State,
        callee: &'static Code,
        entry: Vec<ValueId>,
        closure: Option<ValueId>,
        context: Option<ValueId>,
        home_here: bool,
        i: usize,
    ) -> Result<ValueId, String> {
        // What a send would show the profiler (and a call counter): the call, at its site.
        self.push(s, InstKind::EnterInlined(callee.id), i, None);
        let caller = self.state(s, i, Resume::AfterCall, &s.stack.clone());
        let ret = self.f.add_block(self.act.scope, i as u32);
        let result = self.f.add_param(ret, Ty::Word);
        let scope = self.f.add_scope(callee.id, self.act.scope, i as u32);
        self.home_here.push(home_here);
        let mut act =
            Activation::new(callee, scope, self.sites, Some(InlinedCall { caller, ret }))?;
        act.chain = self.act.chain.clone();
        act.chain.push(callee.id);
        act.room = self.act.room + tally_vm::jit::frame_room(callee);
        act.home_here = home_here;
        act.closure = closure;
        act.context = context;
        act.args = entry;
        let nil = self.constant(s.block, Value::NIL, i as u32);
        let locals = vec![nil; act.slots() - act.args.len()];
        let outer = std::mem::replace(&mut self.act, act);
        self.inlined_bytecodes += callee.ops.len();
        // The activation's entry, in its scope: its context, if it has one (a block's with
        // its closure's as the outer one), made once, before any loop at its start.
        let entry = self.f.add_block(scope, 0);
        self.f.blocks[s.block.index()].term = Terminator::Jump(Edge {
            block: entry,
            args: Vec::new(),
        });
        if callee.context_size > 0 {
            self.inlined_context(entry, &locals);
        }
        let first = self.block_for(0);
        self.f.blocks[entry.index()].term = Terminator::Jump(Edge {
            block: first,
            args: locals,
        });
        let translated = self.translate_blocks();
        self.act = outer;
        translated?;
        s.block = ret;
        Ok(result)
    }

    /// Makes the current (inlined) activation's own context in `block`, its outer the
    /// closure's context for a block, and stores the captured arguments into it; `locals`
    /// are its other locals at entry (nil).
    fn inlined_context(&mut self, block: BlockId, locals: &[ValueId]) {
        let code = self.act.code;
        let mut all = self.act.args.clone();
        all.extend_from_slice(locals);
        let state = self.f.add_state(FrameState {
            code: code.id,
            bci: 0,
            resume: Resume::Before,
            locals: all.iter().map(|&v| Some(v)).collect(),
            stack: Vec::new(),
            context: self.act.context,
            closure: self.act.closure,
            outer: self.act.inlined.as_ref().map(|c| c.caller),
            virtuals: Vec::new(),
        });
        let ctx = self.new_context(block, &all, self.act.context, state);
        self.act.context = Some(ctx);
    }

    /// A new context for the current activation, made in `block` (at instruction 0, in
    /// `state`) with `outer` as its outer context, and the captured arguments among
    /// `locals` (its receiver, arguments and locals) stored into it.
    fn new_context(
        &mut self,
        block: BlockId,
        locals: &[ValueId],
        outer: Option<ValueId>,
        state: FrameStateId,
    ) -> ValueId {
        let code = self.act.code;
        let kind = InstKind::NewContext {
            size: code.context_size,
            outer,
        };
        let ctx = self
            .f
            .push_inst(block, kind, Some(state), 0)
            .expect("a value");
        for &(arg, index) in &code.captured_args {
            let value = locals[arg as usize];
            let store = InstKind::StoreContext { ctx, index, value };
            self.f.push_inst(block, store, None, 0);
        }
        ctx
    }

    /// `value…` of `closure` inlined, when the closure is one this function makes (a
    /// `MakeBlock`: its code is known) of a block that can run without a frame; `None`
    /// otherwise (the caller calls the closure).
    fn inline_block(
        &mut self,
        s: &mut State,
        closure: ValueId,
        args: &[ValueId],
        i: usize,
    ) -> Result<Option<ValueId>, String> {
        let Some((block, made)) = self.known_block(closure) else {
            return Ok(None);
        };
        let Some(InstKind::MakeBlock { receiver, ctx, .. }) =
            self.f.def_inst(made).map(|i| i.kind.clone())
        else {
            return Ok(None);
        };
        if block.num_args as usize != args.len()
            || block.hooks.load(std::sync::atomic::Ordering::Relaxed) != 0
            || !self.fits_chain(block)
        {
            return Ok(None);
        }
        // Its `^` returns from the home method of the activation that made the closure.
        let maker = self.maker_scope(made);
        let home_here = self.home_here[maker.index()];
        let mut entry = vec![receiver];
        entry.extend_from_slice(args);
        self.inline_activation(s, block, entry, Some(made), ctx, home_here, i)
            .map(Some)
    }

    /// The block whose closure `v` is, when this function makes it (a `MakeBlock`, seen
    /// through the class guards on it) of a block the sites know; and the `MakeBlock`'s value.
    fn known_block(&self, v: ValueId) -> Option<(&'static Code, ValueId)> {
        let mut made = v;
        while let Some(InstKind::GuardClass { value, .. }) = self.f.def_inst(made).map(|i| &i.kind)
        {
            made = *value;
        }
        match self.f.def_inst(made).map(|i| &i.kind) {
            Some(InstKind::MakeBlock { code, .. }) => Some((self.sites.block(*code)?, made)),
            _ => None,
        }
    }

    /// The scope whose code made `closure` (the block of its `MakeBlock`'s).
    fn maker_scope(&self, closure: ValueId) -> ScopeId {
        match self.f.def(closure) {
            crate::ValueDef::Inst(inst) => self
                .f
                .blocks
                .iter()
                .find(|b| b.insts.contains(&inst))
                .map_or(ScopeId(0), |b| b.scope),
            crate::ValueDef::Param { block, .. } => self.f.blocks[block.index()].scope,
        }
    }
}

fn pop(s: &mut State) -> Result<ValueId, String> {
    s.stack.pop().ok_or_else(|| "stack underflow".to_string())
}
