//! Inlining: a method the sites' plan chooses, or a block whose closure the function makes,
//! translated into the caller's function as a scope of its own, with no frame, its frame
//! states' outer state the call's.

use super::*;

impl Builder<'_> {
    /// Whether `callee` can run inlined in the current activation: within the compile's
    /// budget, the chain it would end stays within the frames and value-stack room a
    /// deoptimization may rebuild, and does not hold it already (recursion is not inlined).
    pub(super) fn fits_chain(&self, callee: &Code) -> bool {
        self.inlined_bytecodes + callee.ops.len() <= self.sites.inline_budget()
            && self.act.chain.len() < tally_vm::jit::MAX_INLINED_FRAMES
            && self.act.room + tally_vm::jit::frame_room(callee)
                <= tally_vm::jit::INLINED_FRAMES_ROOM
            && !self.act.chain.contains(&callee.id)
    }

    /// Whether the call of `callee` from `site` is inlined: what the sites' plan says (which
    /// knows which methods can run without a frame of their own), where the chain has room.
    pub(super) fn inlines(&self, site: SiteId, callee: &Code) -> bool {
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
    pub(super) fn inline_activation(
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
    pub(super) fn inlined_context(&mut self, block: BlockId, locals: &[ValueId]) {
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

    /// `value…` of `closure` inlined, when the closure is one this function makes (a
    /// `MakeBlock`: its code is known) of a block that can run without a frame; `None`
    /// otherwise (the caller calls the closure).
    pub(super) fn inline_block(
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
    pub(super) fn known_block(&self, v: ValueId) -> Option<(&'static Code, ValueId)> {
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
    pub(super) fn maker_scope(&self, closure: ValueId) -> ScopeId {
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
