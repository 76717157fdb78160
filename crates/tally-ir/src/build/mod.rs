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

mod entries;
mod inline;
mod speculate;

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
        context_args: std::collections::HashMap::new(),
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
    /// The arguments each context this function makes holds, by slot: SOM never assigns an
    /// argument, so a read of that slot is the argument's value wherever the context goes.
    /// A block inlined where a captured argument is read is then known (`known_block`).
    context_args: std::collections::HashMap<ValueId, Vec<(u16, ValueId)>>,
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
            self.context_args
                .entry(ctx)
                .or_default()
                .push((index, value));
        }
        ctx
    }

    /// The argument in slot `index` of the context `level`s out from the activation's, when
    /// this function made that context ([`Builder::context_args`]).
    fn captured_argument(&self, s: &State, level: u8, index: u16) -> Option<ValueId> {
        let mut ctx = s.context?;
        for _ in 0..level {
            match self.f.def_inst(ctx).map(|i| &i.kind) {
                Some(&InstKind::NewContext {
                    outer: Some(outer), ..
                }) => ctx = outer,
                _ => return None,
            }
        }
        let slots = self.context_args.get(&ctx)?;
        slots.iter().find(|&&(i, _)| i == index).map(|&(_, v)| v)
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
                let v = match self.captured_argument(s, level, index) {
                    Some(v) => v,
                    None => {
                        let ctx = self.context_at(s, level, i)?;
                        self.value(s, InstKind::LoadContext { ctx, index }, i, None)
                    }
                };
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
                self.nil_test(s, matches!(op, Op::SendIsNil(_)), i, &before)?;
            }
            Op::SendIsNil(site) | Op::SendNotNil(site) => self.send(s, site, i, &before, false)?,
            Op::Return
            | Op::ReturnSelf
            | Op::ReturnLocal(_)
            | Op::ReturnField(_)
            | Op::ReturnNonLocal
            | Op::Jump(_)
            | Op::JumpBack(_)
            | Op::JumpIfTrue(_)
            | Op::JumpIfFalse(_) => {
                self.end_block(s, i, &before)?;
                return Ok(true);
            }
        }
        Ok(false)
    }

    /// Ends the block with instruction `i`, a return or a jump (`before`: the operand
    /// stack before it).
    fn end_block(&mut self, s: &mut State, i: usize, before: &[ValueId]) -> Result<(), String> {
        let op = self.act.code.ops[i];
        match op {
            Op::Return => {
                let v = pop(s)?;
                self.return_(s, v);
            }
            Op::ReturnSelf => {
                self.return_(s, s.locals[0]);
            }
            Op::ReturnLocal(l) => {
                self.return_(s, s.locals[l as usize]);
            }
            Op::ReturnField(index) => {
                let v = self.load_field(s, index, i);
                self.return_(s, v);
            }
            Op::ReturnNonLocal if self.act.inlined.is_some() && self.act.home_here => {
                // An inlined block whose home is the function's own activation: its `^`
                // returns from the function (the activations inlined between end with it).
                let value = *s.stack.last().ok_or("empty stack")?;
                self.f.blocks[s.block.index()].term = Terminator::Return(value);
            }
            Op::ReturnNonLocal => {
                let value = *s.stack.last().ok_or("empty stack")?;
                let state = self.state(s, i, Resume::Before, before);
                self.f.blocks[s.block.index()].term = Terminator::ReturnNonLocal { value, state };
            }
            Op::Jump(t) => {
                let edge = self.edge_to(t as usize, s);
                self.f.blocks[s.block.index()].term = Terminator::Jump(edge);
            }
            Op::JumpBack(t) => {
                let state = self.state(s, t as usize, Resume::Before, before);
                self.push(s, InstKind::Yieldpoint, i, Some(state));
                let edge = self.edge_to(t as usize, s);
                self.f.blocks[s.block.index()].term = Terminator::Jump(edge);
            }
            Op::JumpIfTrue(t) | Op::JumpIfFalse(t) => {
                let state = self.state(s, i, Resume::Before, before);
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
            }
            _ => return Err(format!("{op:?} ends no block")),
        }
        Ok(())
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
}

fn pop(s: &mut State) -> Result<ValueId, String> {
    s.stack.pop().ok_or_else(|| "stack underflow".to_string())
}
