//! The bytecode interpreter: one loop over an explicit frame stack.
//!
//! SOM calls never recurse on the Rust stack: a send pushes a `Frame`, a return pops one, so
//! deep SOM recursion is a counted "stack overflow", a profiler can walk `frames`, and
//! primitives that run SOM code (`value`, `perform:`) just push a frame and return.

use tally_heap::Value;
use tally_profile::flag;

use crate::bytecode::{CodeId, Op, SiteId};
use crate::compiler::CodeKind;
use crate::objects::{block, context, Kind};
use crate::primitives::Primitive;
use crate::profiling::{
    CountingLoop, Dispatch, EntriesLoop, HooksLoop, LoopMode, PlainLoop, VM_STATE,
};
use crate::runtime::{ClassId, Code, Frame, Symbol, Trivial, NO_CLASS};
use crate::{Vm, VmError};

impl Vm {
    #[inline(always)]
    fn push(&mut self, v: Value) {
        self.rt.stack.push(v);
    }

    #[inline(always)]
    fn pop(&mut self) -> Value {
        self.rt.stack.pop().expect("operand stack underflow")
    }

    /// The context `level` hops out from the current frame's.
    #[inline]
    fn context_at(&self, level: u8) -> Value {
        let mut ctx = self.rt.frames.top().ctx;
        for _ in 0..level {
            ctx = ctx.slot(context::OUTER);
        }
        ctx
    }

    /// Runs until the frame stack is back to `base_depth` frames; returns the value the
    /// outermost frame returned.
    pub(crate) fn execute(&mut self, base_depth: usize) -> Result<Value, VmError> {
        let enclosing = self.rt.frames.set_exit_depth(base_depth);
        // A loop hands over to another (`SwitchLoop`) only where the frames hold all its
        // state, so the next one picks up from the top frame.
        let outer_loop = self.running_loop;
        let result = loop {
            let dispatch = self.running_dispatch();
            self.running_loop = Some(dispatch);
            self.sync_loop_handoff();
            let result = match dispatch {
                Dispatch::Plain => self.execute_loop::<PlainLoop>(base_depth),
                Dispatch::Entries => self.execute_loop::<EntriesLoop>(base_depth),
                Dispatch::Hooks => self.execute_loop::<HooksLoop>(base_depth),
                Dispatch::Counting => self.execute_loop::<CountingLoop>(base_depth),
            };
            if !matches!(result, Err(VmError::SwitchLoop)) {
                break result;
            }
        };
        self.running_loop = outer_loop;
        self.rt.frames.set_exit_depth(enclosing);
        // The loop this one returns into may be the wrong one by now.
        self.sync_loop_handoff();
        result
    }

    /// The dispatch loop, compiled once per [`LoopMode`]. `M::COUNT_BYTECODES` (exhaustive
    /// profiling) is a compile-time switch so the ordinary loop carries no counting code at
    /// all. `M::ENTRY_HOOKS` says whether the loop tests the yieldpoint flag at frameless
    /// sends and tripped returns, `M::LOOP_HOOKS` whether
    /// also at back-edges and around primitive calls (see [`Dispatch`]): the loop that runs
    /// without a profiler, or with one that only takes samples in the signal handler, tests
    /// it nowhere and is the same code as a build with the hooks compiled out (the depth
    /// checks that carry the call and return hooks are there in every loop).
    ///
    /// The running frame's code, instruction pointer and base pointer live in locals; `ip` is
    /// written back to the frame (`save!`) before anything that may look at it: calls (a
    /// caller's `ip` is its return address, and samples read it), errors, yieldpoints.
    // In a section of its own with the routines of sends and frames it calls out of line, so
    // that a sample can tell from the interrupted program counter whether the interpreter or
    // native code below it (primitives, the heap, the C library) was running
    // (`interpreter_code`).
    #[cfg_attr(target_os = "linux", link_section = "tally_interpreter")]
    fn execute_loop<M: LoopMode>(&mut self, base_depth: usize) -> Result<Value, VmError> {
        let top = self.rt.frames.top();
        let mut code: &'static Code = self.rt.codes[top.code as usize];
        // The running code's instructions, kept apart so dispatch needs no load through `code`.
        let mut ops: &'static [Op] = &code.ops;
        let mut ip: usize = top.ip as usize;
        let mut bp: usize = top.bp();
        let mut executed: u64 = 0;
        macro_rules! flush_counts {
            () => {
                if M::COUNT_BYTECODES {
                    self.profile_bytecodes(code.id, executed);
                    executed = 0;
                }
            };
        }
        // Before leaving the loop: the last counts of the running code.
        macro_rules! final_counts {
            () => {
                if M::COUNT_BYTECODES {
                    self.profile_bytecodes(code.id, executed);
                }
            };
        }
        macro_rules! reload {
            () => {{
                flush_counts!();
                let f = self.rt.frames.top();
                code = self.rt.codes[f.code as usize];
                ops = &code.ops;
                ip = f.ip as usize;
                bp = f.bp();
            }};
        }
        macro_rules! save {
            () => {
                self.rt.frames.top_mut().ip = ip as u32;
            };
        }
        // The epilogue yieldpoint; the frame that is now on top has its `ip` saved. Ordinary
        // returns get here only when the flag has tripped the exit depth (`do_return!`).
        macro_rules! epilogue {
            () => {
                let f = self.entry_flag::<M>();
                if f & flag::ALL_YIELDPOINTS != 0 {
                    self.profile_yieldpoint(f)?;
                }
            };
        }
        // A send from a site: inline cache, then the callee's frame (switched to in place; the
        // prologue yieldpoint rides on the frame push, see `enter`), or, after an explicit
        // prologue check, a trivial method done in place or the general path.
        macro_rules! send {
            ($site_id:expr) => {{
                let site_id = $site_id;

                let site = &self.rt.sites[site_id as usize];
                let argc = site.argc as usize;
                let recv = self.rt.stack[self.rt.stack.len() - 1 - argc];
                let class = self.rt.class_of(recv);
                save!();
                let target = if site.cached_class == class {
                    site.cached_code
                } else if site.cached_class2 == class {
                    site.cached_code2
                } else {
                    match self.relink(site_id, class) {
                        Some(t) => t,
                        None => {
                            let selector = self.rt.sites[site_id as usize].selector;
                            self.does_not_understand(selector, argc)?;
                            reload!();
                            continue;
                        }
                    }
                };
                let callee: &'static Code = self.rt.codes[target as usize];
                if callee.is_plain_frame(argc) {
                    // The common case, inline: a bytecode method gets a frame and the loop
                    // switches to it without going through the frame stack.
                    let new_bp = self.rt.stack.len() - 1 - argc;
                    self.enter(callee, new_bp, Value::NONE)?;
                    flush_counts!();
                    code = callee;
                    ops = &callee.ops;
                    ip = 0;
                    bp = new_bp;
                } else {
                    // A raised flag sends even a trivial method through the call below, so
                    // that the loop has one call site here and its hot path one more test.
                    let f = self.entry_flag::<M>();
                    if f == 0
                        && callee.trivial != Trivial::No
                        && argc == callee.num_args as usize
                        && self.run_trivial(callee.trivial, argc)
                    {
                        // Done in place: the frame is unchanged.
                    } else {
                        self.invoke_frameless::<M>(callee, argc, f)?;
                        reload!();
                    }
                }
            }};
        }
        // A binary send: small integers answered in place, anything else sent.
        macro_rules! send_binary {
            ($site_id:expr) => {{
                let site_id = $site_id;
                let int_op = self.rt.sites[site_id as usize].int_op;
                let len = self.rt.stack.len();
                let (a, b) = (self.rt.stack[len - 2], self.rt.stack[len - 1]);
                if a.is_int() && b.is_int() {
                    if let Some(r) = int_op.apply(a.int_unchecked(), b.int_unchecked()) {
                        self.rt.stack.truncate(len - 1);
                        self.rt.stack[len - 2] = r;
                        continue;
                    }
                } else if a.is_small_float() || b.is_small_float() {
                    if let Some(r) = int_op.apply_float(a, b) {
                        self.rt.stack.truncate(len - 1);
                        self.rt.stack[len - 2] = r;
                        continue;
                    }
                } else if let Some(r) = int_op.apply_bool(a, b) {
                    self.rt.stack.truncate(len - 1);
                    self.rt.stack[len - 2] = r;
                    continue;
                }
                send!(site_id);
            }};
        }
        // Returns `result` from the running frame to its caller (or out of the loop). The one
        // depth check is against the exit depth, which a raised yieldpoint flag trips to
        // `usize::MAX`: the epilogue yieldpoint costs ordinary returns nothing.
        macro_rules! do_return {
            ($result:expr) => {{
                let result = $result;
                self.pop_frame(result);
                let depth = self.rt.frames.len();
                if depth <= self.rt.frames.exit_depth() {
                    if depth <= base_depth {
                        final_counts!();
                        epilogue!();
                        return Ok(result);
                    }
                    reload!();
                    epilogue!();
                } else {
                    reload!();
                }
            }};
        }
        // A comparison answered in place for numbers, then the jump right behind it (at `ip`)
        // is taken or skipped; anything else is sent, and that jump tests the result later.
        macro_rules! compare_and_branch {
            ($site_id:expr, $target:expr, $jump_if:expr) => {{
                let site_id = $site_id;
                let int_op = self.rt.sites[site_id as usize].int_op;
                let len = self.rt.stack.len();
                let (a, b) = (self.rt.stack[len - 2], self.rt.stack[len - 1]);
                let answer = if a.is_int() && b.is_int() {
                    int_op.apply(a.int_unchecked(), b.int_unchecked())
                } else if a.is_small_float() || b.is_small_float() {
                    int_op.apply_float(a, b)
                } else {
                    int_op.apply_bool(a, b)
                };
                match answer {
                    Some(r) => {
                        self.rt.stack.truncate(len - 2);
                        ip = if (r == Value::TRUE) == $jump_if {
                            $target as usize
                        } else {
                            ip + 1
                        };
                    }
                    None => {
                        send!(site_id);
                    }
                }
            }};
        }
        loop {
            let op = ops[ip];
            ip += 1;
            if M::COUNT_BYTECODES {
                executed += 1;
            }
            match op {
                Op::PushLocal(i) => {
                    let v = self.rt.stack[bp + i as usize];
                    self.push(v);
                }
                Op::StoreLocal(i) => {
                    let v = *self.rt.stack.last().expect("value");
                    self.rt.stack[bp + i as usize] = v;
                }
                Op::PopLocal(i) => {
                    let v = self.pop();
                    self.rt.stack[bp + i as usize] = v;
                }
                Op::PushCtx { level, index } => {
                    let v = self.context_at(level).slot(index as usize);
                    self.push(v);
                }
                Op::StoreCtx { level, index } => {
                    let v = *self.rt.stack.last().expect("value");
                    self.context_at(level).set_slot(index as usize, v);
                }
                Op::PopCtx { level, index } => {
                    let v = self.pop();
                    self.context_at(level).set_slot(index as usize, v);
                }
                Op::PushField(i) => {
                    let recv = self.rt.stack[bp];
                    match self.field(recv, i as usize) {
                        Some(v) => self.push(v),
                        None => {
                            save!();
                            return Err(self.missing_field(i, "read"));
                        }
                    }
                }
                Op::StoreField(i) => {
                    let recv = self.rt.stack[bp];
                    let v = *self.rt.stack.last().expect("value");
                    if !self.set_field(recv, i as usize, v) {
                        save!();
                        return Err(self.missing_field(i, "written"));
                    }
                }
                Op::PopField(i) => {
                    let recv = self.rt.stack[bp];
                    let v = self.pop();
                    if !self.set_field(recv, i as usize, v) {
                        save!();
                        return Err(self.missing_field(i, "written"));
                    }
                }
                Op::PushLiteral(i) => {
                    let v = self.rt.literals[i as usize];
                    self.push(v);
                }
                Op::PushConst(v) => self.push(v),
                Op::PushGlobal(slot) => {
                    let v = self.rt.globals[slot as usize];
                    if v != Value::NONE {
                        self.push(v);
                    } else {
                        save!();
                        self.unknown_global(slot)?;
                        reload!();
                    }
                }
                Op::PushBlock(id) => {
                    save!();
                    let b = self.alloc(
                        self.block_class_for(id),
                        Kind::Block,
                        block::SLOTS,
                        Value::NIL,
                        0,
                    )?;
                    let f = self.rt.frames.top();
                    b.set_slot(block::CODE, Value::from_small_int(id as i64));
                    b.set_slot(block::CONTEXT, f.ctx);
                    b.set_slot(block::RECEIVER, self.rt.stack[f.bp()]);
                    self.push(b);
                }
                Op::Pop => {
                    self.pop();
                }
                Op::Dup => {
                    let v = *self.rt.stack.last().expect("value");
                    self.push(v);
                }
                Op::SendBinary(site_id) => {
                    send_binary!(site_id);
                }
                Op::PushLocalSendBinary(i, site_id) => {
                    let v = self.rt.stack[bp + i as usize];
                    self.push(v);
                    send_binary!(site_id);
                }
                Op::PushConstSendBinary(v, site_id) => {
                    self.push(v);
                    send_binary!(site_id);
                }
                Op::PushLocalSend(i, site_id) => {
                    let v = self.rt.stack[bp + i as usize];
                    self.push(v);
                    send!(site_id);
                }
                Op::PushLocal2(a, b) => {
                    let (x, y) = (
                        self.rt.stack[bp + a as usize],
                        self.rt.stack[bp + b as usize],
                    );
                    self.push(x);
                    self.push(y);
                }
                Op::PopPushLocal(i) => {
                    let v = self.rt.stack[bp + i as usize];
                    *self.rt.stack.last_mut().expect("value") = v;
                }
                Op::PopPushField(i) => {
                    let recv = self.rt.stack[bp];
                    match self.field(recv, i as usize) {
                        Some(v) => *self.rt.stack.last_mut().expect("value") = v,
                        None => {
                            save!();
                            return Err(self.missing_field(i, "read"));
                        }
                    }
                }
                Op::Send(site_id) => {
                    send!(site_id);
                }
                Op::SendIsNil(site_id) | Op::SendNotNil(site_id) => {
                    if self.rt.nil_tests.standard() {
                        let top = self.rt.stack.last_mut().expect("receiver");
                        let is_nil = *top == Value::NIL;
                        *top = Value::from_bool(is_nil == matches!(op, Op::SendIsNil(_)));
                    } else {
                        send!(site_id);
                    }
                }
                Op::SuperSend(site) => {
                    save!();
                    self.send(site, true)?;
                    reload!();
                }
                Op::Return => {
                    let result = self.pop();
                    do_return!(result);
                }
                Op::ReturnSelf => {
                    let result = self.rt.stack[bp];
                    do_return!(result);
                }
                Op::ReturnLocal(i) => {
                    let result = self.rt.stack[bp + i as usize];
                    do_return!(result);
                }
                Op::ReturnField(i) => {
                    let recv = self.rt.stack[bp];
                    match self.field(recv, i as usize) {
                        Some(result) => {
                            do_return!(result);
                        }
                        None => {
                            save!();
                            return Err(self.missing_field(i, "read"));
                        }
                    }
                }
                Op::SendCompareJumpIfFalse(site_id, t) => {
                    compare_and_branch!(site_id, t, false);
                }
                Op::SendCompareJumpIfTrue(site_id, t) => {
                    compare_and_branch!(site_id, t, true);
                }
                Op::ReturnNonLocal => {
                    save!();
                    let result = self.pop();
                    match self.home_frame() {
                        Some(k) => {
                            self.rt.frames.truncate(k + 1);
                            self.pop_frame(result);
                            if self.rt.frames.len() <= base_depth {
                                final_counts!();
                                epilogue!();
                                return Ok(result);
                            }
                            epilogue!();
                        }
                        None => {
                            // The home method has returned: tell the block's receiver.
                            let f = self.rt.frames.top();
                            let (receiver, closure) = (self.rt.stack[f.bp()], f.closure);
                            self.push(receiver);
                            self.push(closure);
                            let sel = self.rt.symbols.intern("escapedBlock:");
                            self.send_selector(sel, 1)?;
                        }
                    }
                    reload!();
                }
                Op::Jump(t) => ip = t as usize,
                Op::JumpBack(t) => {
                    ip = t as usize;
                    let f = self.loop_flag::<M>();
                    if f & flag::ALL_YIELDPOINTS != 0 {
                        save!();
                        self.profile_yieldpoint(f)?;
                    }
                }
                Op::JumpIfTrue(t) | Op::JumpIfFalse(t) => {
                    let v = self.pop();
                    let want = matches!(op, Op::JumpIfTrue(_));
                    if v == Value::TRUE {
                        if want {
                            ip = t as usize;
                        }
                    } else if v == Value::FALSE {
                        if !want {
                            ip = t as usize;
                        }
                    } else {
                        save!();
                        let class = self.rt.class_name(self.rt.class_of(v));
                        return Err(self.error(format!(
                            "a conditional (ifTrue:, whileTrue:, and: …) needs a Boolean, but got an instance of {class}"
                        )));
                    }
                }
            }
        }
    }

    /// The error for a field access on a receiver without that field (SOM code that reached
    /// an object of another shape, e.g. through `become`-like tricks or a bad primitive).
    #[cold]
    fn missing_field(&self, i: u16, access: &str) -> VmError {
        self.error(format!("field {} {access} on an object without it", i + 1))
    }

    fn field(&self, recv: Value, i: usize) -> Option<Value> {
        (recv.is_ref() && i < recv.slot_count()).then(|| recv.slot(i))
    }

    fn set_field(&self, recv: Value, i: usize, v: Value) -> bool {
        if recv.is_ref() && i < recv.slot_count() {
            recv.set_slot(i, v);
            true
        } else {
            false
        }
    }

    fn block_class_for(&self, id: CodeId) -> u32 {
        let n = self.rt.codes[id as usize].num_args as usize;
        self.rt
            .block_classes
            .get(n)
            .copied()
            .unwrap_or(self.rt.core.block)
    }

    /// Index of the live frame of the current block's home method, if it is still on the stack.
    // Inlined in every build: the loop is its only caller. Left to LLVM, a build with the
    // hooks compiled out (one loop) inlines it and a build with them (three loops) does not,
    // and the loop that runs with profiling off would differ from the compiled-out one.
    #[inline(always)]
    #[cfg_attr(target_os = "linux", link_section = "tally_interpreter")]
    fn home_frame(&self) -> Option<usize> {
        let mut ctx = self.rt.frames.last()?.ctx;
        if !ctx.is_ref() {
            return None;
        }
        loop {
            let outer = ctx.slot(context::OUTER);
            if !outer.is_ref() {
                break;
            }
            ctx = outer;
        }
        let index = ctx.slot(context::FRAME_INDEX).as_int()? as usize;
        let f = self.rt.frames.get(index)?;
        (f.closure == Value::NONE && f.ctx == ctx).then_some(index)
    }

    #[inline(always)]
    pub(crate) fn pop_frame(&mut self, result: Value) {
        let f = self.rt.frames.pop().expect("frame");
        self.rt.stack.truncate(f.bp() + 1);
        self.rt.stack[f.bp()] = result;
    }

    /// A send site missed its inline cache: look the selector up for `class` and cache the
    /// answer (a miss is not cached, so `doesNotUnderstand:` is sent each time).
    #[inline(never)]
    #[cfg_attr(target_os = "linux", link_section = "tally_interpreter")]
    fn relink(&mut self, site_id: SiteId, class: ClassId) -> Option<CodeId> {
        let selector = self.rt.sites[site_id as usize].selector;
        let found = if class == NO_CLASS {
            None
        } else {
            self.rt.lookup(class, selector)
        };
        if let Some(c) = found {
            // The newest class goes first; the previous first entry is kept as the second.
            let site = &mut self.rt.sites[site_id as usize];
            site.cached_class2 = site.cached_class;
            site.cached_code2 = site.cached_code;
            site.cached_class = class;
            site.cached_code = c;
        }
        found
    }

    /// Sends from a send site; the receiver and arguments are on the stack.
    // Inlined in every build: the loop is its only caller. Left to LLVM, a build with the
    // hooks compiled out (one loop) inlines it and a build with them (three loops) does not,
    // and the loop that runs with profiling off would differ from the compiled-out one.
    #[inline(always)]
    #[cfg_attr(target_os = "linux", link_section = "tally_interpreter")]
    fn send(&mut self, site_id: SiteId, is_super: bool) -> Result<(), VmError> {
        let site = &self.rt.sites[site_id as usize];
        let argc = site.argc as usize;
        let selector = site.selector;
        let recv = self.rt.stack[self.rt.stack.len() - 1 - argc];
        let class = if is_super {
            site.super_lookup.unwrap_or(NO_CLASS)
        } else {
            self.rt.class_of(recv)
        };
        let code = if site.cached_class == class {
            Some(site.cached_code)
        } else if site.cached_class2 == class {
            Some(site.cached_code2)
        } else {
            self.relink(site_id, class)
        };
        match code {
            Some(c) => self.invoke(c, argc),
            None => self.does_not_understand(selector, argc),
        }
    }

    /// A send without a site (from primitives and the VM itself).
    #[cfg_attr(target_os = "linux", link_section = "tally_interpreter")]
    pub(crate) fn send_selector(&mut self, selector: Symbol, argc: usize) -> Result<(), VmError> {
        let recv = self.rt.stack[self.rt.stack.len() - 1 - argc];
        let class = self.rt.class_of(recv);
        match self.rt.lookup(class, selector) {
            Some(c) => self.invoke(c, argc),
            None => self.does_not_understand(selector, argc),
        }
    }

    /// Runs a method whose receiver and `argc` arguments are on the stack: a primitive runs
    /// now, SOM code gets a frame. The caller's `ip` must be saved.
    #[cfg_attr(target_os = "linux", link_section = "tally_interpreter")]
    pub(crate) fn invoke(&mut self, code_id: CodeId, argc: usize) -> Result<(), VmError> {
        let code: &'static Code = self.rt.codes[code_id as usize];
        let f = self.yieldpoint_flag();
        if f != 0 {
            self.profile_prologue(code_id, f)?;
        }
        self.run_in_place_or_invoke(code, argc)
    }

    /// A trivial method done in place, or else the method invoked (after the prologue hook).
    #[inline(always)]
    #[cfg_attr(target_os = "linux", link_section = "tally_interpreter")]
    fn run_in_place_or_invoke(&mut self, code: &'static Code, argc: usize) -> Result<(), VmError> {
        if code.trivial != Trivial::No
            && argc == code.num_args as usize
            && self.run_trivial(code.trivial, argc)
        {
            return Ok(());
        }
        self.invoke_unprofiled::<HooksLoop>(code, argc)
    }

    /// A send the loop does without a frame of its own (a primitive or trivial method), with
    /// the flag the loop read: the prologue hook if it is raised, then the method.
    #[inline(always)]
    fn invoke_frameless<M: LoopMode>(
        &mut self,
        code: &'static Code,
        argc: usize,
        f: u8,
    ) -> Result<(), VmError> {
        if M::ENTRY_HOOKS && f != 0 {
            return self.invoke_after_hook::<M>(code, argc, f);
        }
        self.invoke_unprofiled::<M>(code, argc)
    }

    /// The prologue hook of a frameless send, then the send: out of line, so the loop pays
    /// for it only when the flag is raised. The loop with entry hooks alone
    /// (`M::LOOP_HOOKS` false) hands back to the plain one here once the hook has closed the
    /// sampling window (see `Dispatch::Entries`).
    #[cold]
    #[inline(never)]
    #[cfg_attr(target_os = "linux", link_section = "tally_interpreter")]
    fn invoke_after_hook<M: LoopMode>(
        &mut self,
        code: &'static Code,
        argc: usize,
        f: u8,
    ) -> Result<(), VmError> {
        self.profile_prologue(code.id, f)?;
        self.run_in_place_or_invoke(code, argc)?;
        if !M::LOOP_HOOKS && self.loop_switch_due() {
            return Err(VmError::SwitchLoop);
        }
        Ok(())
    }

    /// `invoke` after the prologue hook, for anything but a trivial method done in place.
    ///
    /// `M` is the calling loop's mode (see `execute_loop`); the loops without loop hooks never
    /// run where primitive calls must publish their state.
    #[cfg_attr(target_os = "linux", link_section = "tally_interpreter")]
    fn invoke_unprofiled<M: LoopMode>(
        &mut self,
        code: &'static Code,
        argc: usize,
    ) -> Result<(), VmError> {
        if let Some(p) = code.primitive {
            if M::LOOP_HOOKS && self.publishes_states() {
                return self.run_primitive_in_state(p, argc);
            }
            return p(self, argc);
        }
        if code.ops.is_empty() || argc != code.num_args as usize {
            return Err(self.uninvokable(code, argc));
        }
        let bp = self.rt.stack.len() - 1 - argc;
        self.enter_after_prologue(code, bp, Value::NONE)
    }

    /// Why `code` cannot run with `argc` arguments. Out of line so that `invoke_unprofiled`,
    /// on the path of every primitive call, saves no registers and keeps its tail calls.
    #[cold]
    #[inline(never)]
    fn uninvokable(&self, code: &'static Code, argc: usize) -> VmError {
        if code.ops.is_empty() {
            return self.error(format!(
                "primitive {} is not implemented by Tally",
                self.rt.code_name(code)
            ));
        }
        self.error(format!(
            "{} takes {} arguments but was sent {argc}",
            self.rt.code_name(code),
            code.num_args
        ))
    }

    /// A primitive run while samples are taken: the VM state says so for its duration. Out of
    /// line and small, so the path without sampling keeps its tail call and saves no registers.
    #[inline(never)]
    fn run_primitive_in_state(&mut self, p: Primitive, argc: usize) -> Result<(), VmError> {
        let previous = VM_STATE.set(tally_profile::VmState::Primitive);
        // Matched rather than held and returned: copying the whole `Result` back reads words
        // the primitive has just written in smaller pieces, a store-forwarding stall on every
        // primitive call of a sampled run.
        match p(self, argc) {
            Ok(()) => {
                VM_STATE.set(previous);
                Ok(())
            }
            Err(e) => {
                VM_STATE.set(previous);
                Err(e)
            }
        }
    }

    /// Does a trivial method's work in place of the receiver and arguments; false when the
    /// receiver does not have the field (the method then runs normally and reports it).
    #[inline]
    #[cfg_attr(target_os = "linux", link_section = "tally_interpreter")]
    fn run_trivial(&mut self, trivial: Trivial, argc: usize) -> bool {
        let len = self.rt.stack.len();
        let recv = self.rt.stack[len - 1 - argc];
        let result = match trivial {
            Trivial::Getter(i) => match self.field(recv, i as usize) {
                Some(v) => v,
                None => return false,
            },
            Trivial::Setter(i) => {
                if !self.set_field(recv, i as usize, self.rt.stack[len - 1]) {
                    return false;
                }
                recv
            }
            Trivial::Constant(v) => v,
            Trivial::Literal(i) => self.rt.literals[i as usize],
            Trivial::Receiver => recv,
            Trivial::No => return false,
        };
        self.rt.stack.truncate(len - argc);
        self.rt.stack[len - 1 - argc] = result;
        true
    }

    /// Activates `code` on the stack from `bp` (receiver, then arguments): pushes its frame,
    /// its stack locals and, if it has captured variables, its context.
    ///
    /// This is also the call's prologue yieldpoint: the frame push checks the stack limit,
    /// which a raised yieldpoint flag trips, so the hook costs nothing until it is wanted.
    /// Its callers (the loop's sends, and `value` primitives the loop called) return right
    /// after it, so the loop may hand over to another here (see `Dispatch::Entries`).
    #[inline(always)]
    pub(crate) fn enter(
        &mut self,
        code: &'static Code,
        bp: usize,
        closure: Value,
    ) -> Result<(), VmError> {
        // The frame is built again on the slow path, so the fast one writes it in place.
        let frame = Frame::new(code.id, bp, Self::outer_context(closure), closure);
        if !self.rt.frames.push_within_limit(frame) {
            return self.enter_at_limit(code, bp, closure);
        }
        self.set_up_frame(code)
    }

    /// `enter` whose push hit the limit: a stack overflow, or the prologue hook, then the
    /// whole activation. Only then, with the new frame complete, may the calling loop be
    /// told to hand over, so the switch costs the fast path nothing.
    #[cold]
    #[inline(never)]
    #[cfg_attr(target_os = "linux", link_section = "tally_interpreter")]
    fn enter_at_limit(
        &mut self,
        code: &'static Code,
        bp: usize,
        closure: Value,
    ) -> Result<(), VmError> {
        self.push_at_limit(code.id, bp, closure)?;
        self.set_up_frame(code)?;
        if self.loop_switch_due() {
            return Err(VmError::SwitchLoop);
        }
        Ok(())
    }

    /// `enter` for a call whose prologue hook has run already.
    #[cfg_attr(target_os = "linux", link_section = "tally_interpreter")]
    fn enter_after_prologue(
        &mut self,
        code: &'static Code,
        bp: usize,
        closure: Value,
    ) -> Result<(), VmError> {
        self.push_frame(code.id, bp, closure)?;
        self.set_up_frame(code)
    }

    /// Pushes a frame whatever the (tripped) limit; a full stack is the stack overflow.
    #[inline(always)]
    fn push_frame(&mut self, code: CodeId, bp: usize, closure: Value) -> Result<(), VmError> {
        let frame = Frame::new(code, bp, Self::outer_context(closure), closure);
        if !self.rt.frames.push(frame) {
            return Err(self.stack_overflow());
        }
        Ok(())
    }

    /// A push that hit the limit: a stack overflow, or the flag has tripped the limit and the
    /// prologue hook runs (with the caller still on top) before the frame is pushed.
    #[cold]
    #[inline(never)]
    #[cfg_attr(target_os = "linux", link_section = "tally_interpreter")]
    fn push_at_limit(&mut self, callee: CodeId, bp: usize, closure: Value) -> Result<(), VmError> {
        if self.rt.frames.is_full() {
            return Err(self.stack_overflow());
        }
        let f = self.yieldpoint_flag();
        if f != 0 {
            self.profile_prologue(callee, f)?;
        }
        self.push_frame(callee, bp, closure)
    }

    #[inline(always)]
    fn outer_context(closure: Value) -> Value {
        if closure == Value::NONE {
            Value::NIL
        } else {
            closure.slot(block::CONTEXT)
        }
    }

    /// The rest of an activation once its frame is pushed: stack locals and context.
    #[inline(always)]
    fn set_up_frame(&mut self, code: &'static Code) -> Result<(), VmError> {
        let locals = code.num_locals as usize;
        if locals > 0 {
            let len = self.rt.stack.len();
            self.rt.stack.resize(len + locals, Value::NIL);
        }
        if code.context_size > 0 {
            self.make_context(code)?;
        }
        Ok(())
    }

    #[cold]
    fn stack_overflow(&self) -> VmError {
        VmError::StackOverflow {
            depth: self.options.max_stack_depth,
            trace: self.stack_trace(),
        }
    }

    /// Gives the new top frame a heap context for its captured variables, copying captured
    /// arguments into it.
    #[inline(never)]
    #[cfg_attr(target_os = "linux", link_section = "tally_interpreter")]
    fn make_context(&mut self, code: &'static Code) -> Result<(), VmError> {
        let ctx = self.alloc(
            self.rt.core.object,
            Kind::Context,
            code.context_size as usize,
            Value::NIL,
            0,
        )?;
        let depth = self.rt.frames.len() - 1;
        let f = self.rt.frames.top_mut();
        ctx.set_slot(context::OUTER, f.ctx);
        if f.closure == Value::NONE {
            ctx.set_slot(context::FRAME_INDEX, Value::from_small_int(depth as i64));
        }
        f.ctx = ctx;
        let bp = f.bp();
        for &(stack_slot, ctx_slot) in &code.captured_args {
            ctx.set_slot(ctx_slot as usize, self.rt.stack[bp + stack_slot as usize]);
        }
        Ok(())
    }

    /// Evaluates the closure at the bottom of the `argc + 1` values on top of the stack.
    #[cfg_attr(target_os = "linux", link_section = "tally_interpreter")]
    pub(crate) fn invoke_block(&mut self, argc: usize) -> Result<(), VmError> {
        let bp = self.rt.stack.len() - 1 - argc;
        let closure = self.rt.stack[bp];
        let code_id = self.block_ref(closure)?;
        let code: &'static Code = self.rt.codes[code_id as usize];
        if code.num_args as usize != argc {
            return Err(self.error(format!(
                "a block with {} parameter(s) was evaluated with {argc} argument(s)",
                code.num_args
            )));
        }
        debug_assert_eq!(code.kind, CodeKind::Block);
        self.rt.stack[bp] = closure.slot(block::RECEIVER);
        self.enter(code, bp, closure)
    }

    #[cfg_attr(target_os = "linux", link_section = "tally_interpreter")]
    fn does_not_understand(&mut self, selector: Symbol, argc: usize) -> Result<(), VmError> {
        let recv = self.rt.stack[self.rt.stack.len() - 1 - argc];
        let class = self.rt.class_of(recv);
        let dnu = self.rt.symbols.intern("doesNotUnderstand:arguments:");
        let Some(handler) = self.rt.lookup(class, dnu) else {
            return Err(self.error(format!(
                "Method {} not found in class {}",
                self.rt.symbols.name(selector),
                self.rt.class_name(class)
            )));
        };
        let args = self.alloc(self.rt.core.array, Kind::Array, argc, Value::NIL, 0)?;
        let first = self.rt.stack.len() - argc;
        for i in 0..argc {
            args.set_slot(i, self.rt.stack[first + i]);
        }
        self.rt.stack.truncate(first);
        self.push(Value::from_symbol(selector));
        self.push(args);
        self.invoke(handler, 2)
    }

    /// A global that is not defined yet: load the class of that name from the class path, or
    /// ask the receiver (`unknownGlobal:`).
    // Inlined in every build: the loop is its only caller. Left to LLVM, a build with the
    // hooks compiled out (one loop) inlines it and a build with them (three loops) does not,
    // and the loop that runs with profiling off would differ from the compiled-out one.
    #[inline(always)]
    fn unknown_global(&mut self, slot: u32) -> Result<(), VmError> {
        let name = self.rt.global_names[slot as usize];
        if let Some(class) = self.load_class(name)? {
            let obj = self.rt.classes[class as usize].object;
            self.push(obj);
            return Ok(());
        }
        let recv = self.rt.stack[self.rt.frames.top().bp()];
        let sel = self.rt.symbols.intern("unknownGlobal:");
        if self.rt.lookup(self.rt.class_of(recv), sel).is_none() {
            return Err(self.error(format!("unknown global '{}'", self.rt.symbols.name(name))));
        }
        self.push(recv);
        self.push(Value::from_symbol(name));
        self.send_selector(sel, 1)
    }

    /// Sends `selector` to `receiver` with `args` from Rust and runs it to completion.
    pub fn call(
        &mut self,
        receiver: Value,
        selector: &str,
        args: &[Value],
    ) -> Result<Value, VmError> {
        let sel = self.rt.symbols.intern(selector);
        let depth = self.rt.frames.len();
        self.push(receiver);
        for &a in args {
            self.push(a);
        }
        // No loop runs this send, so nothing in it may ask one to hand over.
        let outer_loop = self.running_loop.take();
        let sent = self.send_selector(sel, args.len());
        self.running_loop = outer_loop;
        sent?;
        if self.rt.frames.len() == depth {
            // A primitive answered directly.
            return Ok(self.pop());
        }
        let result = self.execute(depth)?;
        self.pop();
        Ok(result)
    }
}

/// The address range of the interpreter: every instantiation of `execute_loop` with what is
/// inlined into it, and the send and frame routines it calls out of line (the functions of
/// this module marked `link_section = "tally_interpreter"`). It comes from the bounds the
/// linker defines for a section whose name is an identifier.
///
/// `None` on targets where the interpreter is not in a section of its own, and in unoptimised
/// builds, where even `Vec::push` is a call out of the section, so the program counter would
/// put most interpretation in native code.
pub(crate) fn interpreter_code() -> Option<std::ops::Range<usize>> {
    #[cfg(target_os = "linux")]
    {
        if cfg!(debug_assertions) {
            return None;
        }
        extern "C" {
            static __start_tally_interpreter: u8;
            static __stop_tally_interpreter: u8;
        }
        // Only the addresses of the bounds are taken; their bytes are never read.
        let start = std::ptr::addr_of!(__start_tally_interpreter) as usize;
        let stop = std::ptr::addr_of!(__stop_tally_interpreter) as usize;
        (start < stop).then_some(start..stop)
    }
    #[cfg(not(target_os = "linux"))]
    {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    #[cfg(target_os = "linux")]
    fn the_interpreter_section_holds_the_interpreter_and_nothing_below_it() {
        if cfg!(debug_assertions) {
            assert_eq!(
                interpreter_code(),
                None,
                "unoptimised builds publish states instead"
            );
            return;
        }
        let code = interpreter_code().expect("the linker bounds the interpreter's section");
        type Loop = fn(&mut Vm, usize) -> Result<Value, VmError>;
        let loops: [Loop; 4] = [
            Vm::execute_loop::<PlainLoop>,
            Vm::execute_loop::<EntriesLoop>,
            Vm::execute_loop::<HooksLoop>,
            Vm::execute_loop::<CountingLoop>,
        ];
        for l in loops {
            assert!(
                code.contains(&(l as usize)),
                "{:#x} not in {code:x?}",
                l as usize
            );
        }
        let routines = [
            Vm::invoke_unprofiled::<HooksLoop> as *const () as usize,
            Vm::run_trivial as *const () as usize,
            Vm::relink as *const () as usize,
            Vm::make_context as *const () as usize,
        ];
        for r in routines {
            assert!(code.contains(&r), "{r:#x} not in {code:x?}");
        }
        // Primitives, and what embeds the interpreter, are not.
        let primitive = crate::primitives::find("String", false, "concatenate:").unwrap();
        assert!(!code.contains(&(primitive as usize)));
        assert!(!code.contains(&(Vm::call as *const () as usize)));
    }
}
