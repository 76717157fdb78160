//! Frames: entering a method or block (the prologue yieldpoint rides on the frame push),
//! contexts for captured variables, returns and the home frame of a non-local return.

use std::sync::atomic::Ordering::Relaxed;

use tally_heap::Value;
use tally_profile::gc_hints::PointKind;

use crate::bytecode::CodeId;
use crate::objects::{block, context, Kind};
use crate::runtime::{Code, Frame, HOOK_AT_ENTRY};
use crate::{Vm, VmError};

impl Vm {
    /// Index of the live frame of the current block's home method, if it is still on the stack.
    // Inlined in every build: the loop is its only caller. Left to LLVM, a build with the
    // hooks compiled out (one loop) inlines it and a build with them (three loops) does not,
    // and the loop that runs with profiling off would differ from the compiled-out one.
    #[inline(always)]
    #[cfg_attr(target_os = "linux", link_section = "tally_interpreter")]
    pub(super) fn home_frame(&self) -> Option<usize> {
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
    pub(super) fn enter_at_limit(
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
    pub(super) fn enter_after_prologue(
        &mut self,
        code: &'static Code,
        bp: usize,
        closure: Value,
    ) -> Result<(), VmError> {
        self.push_frame(code.id, bp, closure)?;
        self.set_up_frame(code)?;
        // Not the loop's own sends (those test it themselves, in the loops with entry
        // hooks): invocations from primitives and from compiled code's send stub.
        if code.hooks.load(Relaxed) & HOOK_AT_ENTRY != 0 {
            self.method_hook(code, PointKind::Entry, self.rt.frames.len())?;
        }
        Ok(())
    }

    /// Pushes a frame whatever the (tripped) limit; a full stack is the stack overflow.
    #[inline(always)]
    pub(super) fn push_frame(
        &mut self,
        code: CodeId,
        bp: usize,
        closure: Value,
    ) -> Result<(), VmError> {
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
    pub(super) fn push_at_limit(
        &mut self,
        callee: CodeId,
        bp: usize,
        closure: Value,
    ) -> Result<(), VmError> {
        if self.rt.frames.is_full() {
            return Err(self.stack_overflow());
        }
        let f = self.yieldpoint_flag();
        if f != 0 {
            self.profile_prologue(callee, f)?;
        } else {
            self.rearm_idle_bounds();
        }
        self.push_frame(callee, bp, closure)
    }

    #[inline(always)]
    pub(super) fn outer_context(closure: Value) -> Value {
        if closure == Value::NONE {
            Value::NIL
        } else {
            closure.slot(block::CONTEXT)
        }
    }

    /// The rest of an activation once its frame is pushed: stack locals and context.
    #[inline(always)]
    pub(super) fn set_up_frame(&mut self, code: &'static Code) -> Result<(), VmError> {
        if !self.rt.stack.has_room(code.room_above_arguments as usize) {
            return Err(self.stack_overflow());
        }
        if self.rt.count_calls {
            count_call(code);
        }
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
    pub(crate) fn stack_overflow(&self) -> VmError {
        VmError::StackOverflow {
            depth: self.options.max_stack_depth,
            trace: self.stack_trace(),
            native: false,
        }
    }

    /// The native stack reached `Jit::native_stack_limit` before the SOM stack its bound.
    #[cold]
    pub(crate) fn native_stack_overflow(&self) -> VmError {
        VmError::StackOverflow {
            depth: self.rt.frames.len(),
            trace: self.stack_trace(),
            native: true,
        }
    }

    /// Gives the new top frame a heap context for its captured variables, copying captured
    /// arguments into it.
    #[inline(never)]
    #[cfg_attr(target_os = "linux", link_section = "tally_interpreter")]
    pub(super) fn make_context(&mut self, code: &'static Code) -> Result<(), VmError> {
        let ctx = self.new_top_context(code)?;
        let bp = self.rt.frames.top().bp();
        for &(stack_slot, ctx_slot) in &code.captured_args {
            ctx.init_slot(ctx_slot as usize, self.rt.stack[bp + stack_slot as usize]);
        }
        Ok(())
    }

    /// A new context for the top frame, an activation of `code`: its outer context the
    /// frame's, its frame index for a method's (the home of non-local returns); the frame
    /// holds it from now on. Captured arguments are the caller's to copy (the interpreter's
    /// are in the frame's slots, compiled code's in registers). Inlined, so that the
    /// interpreter's copy stays in its section.
    #[inline(always)]
    pub(crate) fn new_top_context(&mut self, code: &Code) -> Result<Value, VmError> {
        let ctx = self.alloc_context(code)?;
        let depth = self.rt.frames.len() - 1;
        let f = self.rt.frames.top_mut();
        ctx.init_slot(context::OUTER, f.ctx);
        if f.closure == Value::NONE {
            ctx.init_slot(context::FRAME_INDEX, Value::from_small_int(depth as i64));
        }
        f.ctx = ctx;
        Ok(ctx)
    }

    /// A context for an activation of `code`, every slot nil.
    #[inline(always)]
    fn alloc_context(&mut self, code: &Code) -> Result<Value, VmError> {
        self.alloc(
            self.rt.core.object,
            Kind::Context,
            code.context_size as usize,
            Value::NIL,
            0,
        )
    }

    /// The context of the top frame's own activation, made late: an exit of a version that
    /// kept it virtual hands the frame over. Its outer context is the frame's closure's (a
    /// block's activation) or nil, and a method's holds the frame index (closures the
    /// interpreter makes from it may return to it). It replaces whatever context the frame
    /// held: the one a dispatcher's set-up made was never used by the version.
    pub(crate) fn new_home_context(&mut self, code: &Code) -> Result<Value, VmError> {
        let ctx = self.alloc_context(code)?;
        let depth = self.rt.frames.len() - 1;
        let f = self.rt.frames.top_mut();
        if f.closure == Value::NONE {
            ctx.init_slot(context::OUTER, Value::NIL);
            ctx.init_slot(context::FRAME_INDEX, Value::from_small_int(depth as i64));
        } else {
            ctx.init_slot(context::OUTER, f.closure.slot(block::CONTEXT));
        }
        f.ctx = ctx;
        Ok(ctx)
    }
}

/// `--count-calls`: one call of `code` in the tier that runs it; out of line, so the frame
/// set-up of runs that do not count carries only the test.
#[cold]
#[inline(never)]
fn count_call(code: &Code) {
    code.calls.count_current(&code.compiled);
}
