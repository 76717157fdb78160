//! The bytecode interpreter: one loop over an explicit frame stack.
//!
//! SOM calls never recurse on the Rust stack: a send pushes a `Frame`, a return pops one, so
//! deep SOM recursion is a counted "stack overflow", a profiler can walk `frames`, and
//! primitives that run SOM code (`value`, `perform:`) just push a frame and return.

use std::sync::atomic::Ordering::Relaxed;
use tally_heap::Value;

use tally_profile::flag;
use tally_profile::gc_hints::PointKind;

use crate::bytecode::{CodeId, Op};
use crate::jit::Exit;
use crate::objects::context;
use crate::profiling::{
    CountingLoop, Dispatch, EntriesLoop, HooksLoop, InstrumentedLoop, LoopMode, PlainLoop,
    WithCompiled,
};
use crate::runtime::{Code, Trivial, HOOK_AT_ENTRY, HOOK_AT_EXIT};
use crate::{Vm, VmError};

mod frames;
mod sends;

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
            // Exhaustive counting counts bytecodes in the interpreter, so it never runs
            // compiled code.
            let result = match (dispatch, self.jit.is_on()) {
                (Dispatch::Plain, false) => self.execute_loop::<PlainLoop>(base_depth),
                (Dispatch::Plain, true) => self.execute_loop::<WithCompiled<PlainLoop>>(base_depth),
                (Dispatch::Entries, false) => self.execute_loop::<EntriesLoop>(base_depth),
                (Dispatch::Entries, true) => {
                    self.execute_loop::<WithCompiled<EntriesLoop>>(base_depth)
                }
                (Dispatch::Hooks, false) => self.execute_loop::<HooksLoop>(base_depth),
                (Dispatch::Hooks, true) => self.execute_loop::<WithCompiled<HooksLoop>>(base_depth),
                (Dispatch::Counting, _) => self.execute_loop::<CountingLoop>(base_depth),
                (Dispatch::Instrumented, _) => self.execute_loop::<InstrumentedLoop>(base_depth),
            };
            if !matches!(result, Err(VmError::SwitchLoop)) {
                break result;
            }
            // A hand-over asked for on the way out of the base frame (its return, or a
            // non-local return past it) finds this loop's work done: the frames left belong to
            // whoever called it (native code of the optimizing tier among them, whose frames
            // hold no values to interpret). The base frame's value is on top of the stack.
            if self.rt.frames.len() <= base_depth {
                break Ok(self.rt.stack.last().copied().unwrap_or(Value::NIL));
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
        let top = self.rt.frames.top_mut();
        top.mark = 0;
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
        // The running frame's state into the loop's locals; the interpreter runs it now, so
        // samples no longer see the mark compiled code may have left on it.
        macro_rules! load_frame {
            () => {{
                let f = self.rt.frames.top_mut();
                f.mark = 0;
                code = self.rt.codes[f.code as usize];
                ops = &code.ops;
                ip = f.ip as usize;
                bp = f.bp();
            }};
        }
        // Compiled frames run in the JIT's dispatcher until one must be interpreted (or the
        // loop's base frame returns): one test of the running code on each frame change.
        macro_rules! run_compiled_if_any {
            () => {{
                if M::RUNS_COMPILED && code.compiled.is_set() {
                    match self.run_compiled::<M>(base_depth)? {
                        Exit::Returned(v) => return Ok(v),
                        Exit::Interpret => load_frame!(),
                    }
                }
            }};
        }
        macro_rules! reload {
            () => {{
                // A loop never goes on below its base: those frames are its caller's (native
                // frames of the optimizing tier among them, which keep no values to read).
                debug_assert!(
                    self.rt.frames.len() > base_depth,
                    "a loop went on below its base depth {base_depth} (exit depth {})",
                    self.rt.frames.exit_depth()
                );
                flush_counts!();
                load_frame!();
                run_compiled_if_any!();
            }};
        }
        // The loop may start on a compiled frame.
        run_compiled_if_any!();
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
                self.rearm_idle_bounds();
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
                    if M::ENTRY_HOOKS && callee.hooks.load(Relaxed) & HOOK_AT_ENTRY != 0 {
                        self.method_hook(callee, PointKind::Entry, self.rt.frames.len())?;
                    }
                    flush_counts!();
                    code = callee;
                    ops = &callee.ops;
                    ip = 0;
                    bp = new_bp;
                    run_compiled_if_any!();
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
                let answer = int_op.answer(a, b);
                self.note_operands(site_id, a, b, answer.is_some());
                if let Some(r) = answer {
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
                let exiting = code;
                self.pop_frame(result);
                let result = if M::ENTRY_HOOKS && exiting.hooks.load(Relaxed) & HOOK_AT_EXIT != 0 {
                    // The frame is popped: it was one above the frames left.
                    self.method_hook(exiting, PointKind::Exit, self.rt.frames.len() + 1)?;
                    // A collection may have moved it; the caller's stack holds it.
                    *self.rt.stack.last().expect("the result")
                } else {
                    result
                };
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
                let answer = int_op.answer(a, b);
                self.note_operands(site_id, a, b, answer.is_some());
                match answer {
                    Some(r) => {
                        self.rt.stack.truncate(len - 2);
                        ip = if (r == Value::TRUE) == $jump_if {
                            $target as usize
                        } else {
                            ip + 1
                        };
                    }
                    None => send!(site_id),
                }
            }};
        }
        loop {
            let op = ops[ip];
            if M::INSTRUMENTED {
                self.instrument_op(code, ip, bp, op);
            }
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
                    self.push_block(id)?;
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
                            if M::ENTRY_HOOKS && self.rt.hooked_methods.is_some() {
                                self.method_hooks_unwound(k);
                            }
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
                    // `--count-calls` runs a loop with the hooks (`Dispatch::for_profile`).
                    if M::LOOP_HOOKS && self.rt.count_calls {
                        code.calls.count_loop(0);
                    }
                    let f = self.loop_flag::<M>();
                    if f & flag::ALL_YIELDPOINTS != 0 {
                        save!();
                        self.profile_yieldpoint(f)?;
                        // On-stack replacement: code compiled for this method meanwhile
                        // takes the frame over at the loop's head (compiled code resumes
                        // a frame at any instruction boundary).
                        if !self.jit.no_osr {
                            run_compiled_if_any!();
                        }
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

    pub(crate) fn block_class_for(&self, id: CodeId) -> u32 {
        let n = self.rt.codes[id as usize].num_args as usize;
        self.rt
            .block_classes
            .get(n)
            .copied()
            .unwrap_or(self.rt.core.block)
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
