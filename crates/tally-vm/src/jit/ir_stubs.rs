//! The stubs of the optimizing tier's native code. Unlike `stubs.rs`'s, a call runs to completion
//! here: the stub pushes the receiver and arguments on the value stack above the calling
//! frame, makes the send (a primitive or trivial method answers in place, a method or block
//! gets its frame) and runs the callee in a nested dispatch loop, then answers its result.
//! The calling activation stays suspended in its native frame meanwhile; its references are
//! in the frame's stack-map slots, which the collector finds through its `NativeActivation`.
//!
//! A stub answers `Value::NONE` (0) when native code must leave: an error is then parked in
//! `Vm::jit.error`; or `Vm::jit.restarted` is set (the call restarted the calling frame);
//! or, without either, a non-local return unwound the calling frame.

use tally_heap::Value;

use crate::bytecode::CodeId;
use crate::objects::{block, Kind};
use crate::{Vm, VmError};

/// Runs `body` (which answers the call's result, `None` when the caller's frame was
/// unwound) on the VM behind `vm` and answers the word native code gets. A panic (a VM bug)
/// must not unwind through native frames: it becomes a fatal error.
fn run(vm: *mut Vm, body: impl FnOnce(&mut Vm) -> Result<Option<Value>, VmError>) -> u64 {
    // SAFETY: native code passes on the `*mut Vm` the dispatcher gave it, which points at
    // the live VM; nothing else holds a reference into the VM while native code runs.
    let vm = unsafe { &mut *vm };
    let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| body(&mut *vm)));
    match outcome {
        Ok(Ok(Some(v))) => v.0,
        Ok(Ok(None)) => Value::NONE.0,
        Ok(Err(e)) => {
            vm.jit.error = Some(e);
            Value::NONE.0
        }
        Err(_) => {
            vm.jit.error = Some(VmError::Fatal("the VM failed inside compiled code".into()));
            Value::NONE.0
        }
    }
}

/// A call from the top frame: its receiver and `argc` arguments (at `operands`, which native
/// code wrote just before the call and the collector does not see: they are read before
/// anything may collect) go on the value stack, `start` begins the call, and a callee frame
/// it pushed runs to its return. `None`: a non-local return unwound the caller's frame.
fn call(
    vm: &mut Vm,
    operands: *const u64,
    argc: u32,
    start: impl FnOnce(&mut Vm) -> Result<(), VmError>,
) -> Result<Option<Value>, VmError> {
    let here = std::hint::black_box(0u8);
    if (std::ptr::addr_of!(here) as usize) < vm.jit.native_stack_limit {
        return Err(vm.native_stack_overflow());
    }
    let depth = vm.rt.frames.len();
    let ip = vm.rt.frames.top().ip;
    for k in 0..=argc as usize {
        // SAFETY: native code passes `argc + 1` words at `operands`.
        let v = Value(unsafe { *operands.add(k) });
        vm.rt.stack.push(v);
    }
    // No dispatch loop runs this call, so nothing in it may ask one to hand over; a loop
    // that asks anyway does so with the callee's frame complete, which runs below.
    let outer = vm.running_loop.take();
    let started = start(vm);
    vm.running_loop = outer;
    match started {
        Ok(()) | Err(VmError::SwitchLoop) => {}
        Err(e) => return Err(e),
    }
    if vm.rt.frames.len() > depth {
        vm.execute(depth)?;
    }
    if vm.rt.frames.len() < depth {
        return Ok(None);
    }
    if vm.rt.frames.top().ip != ip {
        // `restart` (the only primitive that moves its caller) emptied the frame's operand
        // stack and set it to start again, keeping its locals, which native code holds.
        vm.jit.restarted = 1;
        return Ok(None);
    }
    Ok(Some(vm.rt.stack.pop().expect("a result")))
}

/// The index in the frame stack of the frame at address `frame` (native code passes its
/// frame's address).
fn frame_index(vm: &Vm, frame: u64) -> usize {
    let base = vm.rt.frames.live().as_ptr() as u64;
    ((frame - base) / std::mem::size_of::<crate::frames::Frame>() as u64) as usize
}

/// Counts a send of `site` through the stub; at the counts
/// [`super::stub_report::recompiles_at`] names, the version that makes it may be compiled
/// again.
fn count_stub_send(vm: &mut Vm, site: u32) {
    let Some(s) = vm.rt.sites.get_mut(site as usize) else {
        return;
    };
    s.stub_sends += 1;
    if super::stub_report::recompiles_at(s.stub_sends) {
        vm.stub_sends_piled_up(site);
    }
}

/// `(vm, site, operands, argc) -> Value`: a send from `site`.
pub(super) extern "C" fn send(vm: *mut Vm, site: u32, operands: *const u64, argc: u32) -> u64 {
    send_from(vm, site, operands, argc, false)
}

/// `(vm, site, operands, argc) -> Value`: a super send from `site`.
pub(super) extern "C" fn super_send(
    vm: *mut Vm,
    site: u32,
    operands: *const u64,
    argc: u32,
) -> u64 {
    send_from(vm, site, operands, argc, true)
}

/// A send, or (`is_super`) a super send, from `site`, run to completion.
fn send_from(vm: *mut Vm, site: u32, operands: *const u64, argc: u32, is_super: bool) -> u64 {
    run(vm, |vm| {
        count_stub_send(vm, site);
        call(vm, operands, argc, |vm| vm.send(site, is_super))
    })
}

/// `(vm, code, operands, argc) -> Value`: a call of method `code` (its receiver's class was
/// checked).
pub(super) extern "C" fn call_method(
    vm: *mut Vm,
    code: u32,
    operands: *const u64,
    argc: u32,
) -> u64 {
    run(vm, |vm| {
        // A compiled body whose frame push found the limit tripped calls itself through here.
        vm.rearm_idle_bounds();
        call(vm, operands, argc, |vm| {
            vm.invoke(code as CodeId, argc as usize)
        })
    })
}

/// `(vm, operands, argc) -> Value`: `value…` of the closure in `operands[0]`.
pub(super) extern "C" fn call_block(vm: *mut Vm, operands: *const u64, argc: u32) -> u64 {
    run(vm, |vm| {
        call(vm, operands, argc, |vm| vm.invoke_block(argc as usize))
    })
}

/// `(vm, code, receiver, context) -> Value`: a new closure of block `code`.
pub(super) extern "C" fn make_block(vm: *mut Vm, code: u32, receiver: u64, ctx: u64) -> u64 {
    run(vm, |vm| {
        vm.new_closure(code as CodeId, Value(receiver), Value(ctx))
            .map(Some)
    })
}

/// `(vm, code) -> Value`: the context of the top frame, an activation of `code` that native
/// code called directly (its outer context the frame's, its frame index for a method's home);
/// native code stores the captured arguments into it.
pub(super) extern "C" fn new_context(vm: *mut Vm, code: u32) -> u64 {
    run(vm, |vm| {
        let code = vm.rt.codes[code as usize];
        vm.new_top_context(code).map(Some)
    })
}

/// `(vm, size, outer) -> Value`: the context of an activation native code runs inlined
/// (`Vm::new_inlined_context`).
pub(super) extern "C" fn inlined_context(vm: *mut Vm, size: u64, outer: u64) -> u64 {
    run(vm, |vm| {
        vm.new_inlined_context(size as usize, Value(outer))
            .map(Some)
    })
}

/// `(vm, code) -> 0`: the prologue hook of a call of `code` that native code does in place
/// (a trivial method, an Array primitive, `==`, a block's `value…`), as the interpreter runs
/// it before such a call: counter-based sampling and exact counting see the call edge from
/// the top frame at its `ip` (which native code wrote). Only the bits of
/// [`super::CALL_HOOK_BITS`] are served: the others may collect or fail and wait for the
/// next safepoint, so this call is not one.
pub(super) extern "C" fn call_hook(vm: *mut Vm, code: u32) -> u32 {
    // SAFETY: as in `run`: the live VM, not otherwise borrowed while native code runs.
    let vm = unsafe { &mut *vm };
    let f = vm.yieldpoint_flag() & super::CALL_HOOK_BITS;
    if f != 0 {
        // Neither bit leads to an error (only `flag::STOP` and the controller's do).
        let outcome = vm.profile_prologue(code, f);
        debug_assert!(outcome.is_ok());
    }
    0
}

/// `(vm, class) -> Value`: `Class>>new`, the primitive native code found at a send site,
/// done without the send: a new instance of `class`. A safepoint (it allocates).
pub(super) extern "C" fn new_instance(vm: *mut Vm, class: u64) -> u64 {
    run(vm, |vm| vm.instantiate(Value(class)).map(Some))
}

/// `(vm, class, n) -> Value`: `Array class>>new:` done as [`new_instance`] does `new`.
pub(super) extern "C" fn new_indexable(vm: *mut Vm, class: u64, n: u64) -> u64 {
    run(vm, |vm| {
        vm.instantiate_indexable(Value(class), Value(n)).map(Some)
    })
}

/// `(vm, bits) -> Value`: the double `bits` as a SOM value where compiled code found no
/// immediate for it (NaN, an infinity, a magnitude outside the immediates' window): a new
/// heap Double. A safepoint (it allocates).
pub(super) extern "C" fn box_double(vm: *mut Vm, bits: u64) -> u64 {
    run(vm, |vm| vm.new_double(f64::from_bits(bits)).map(Some))
}

/// `(x) -> sin x`: Double's `sin`, as its primitive computes it.
pub(super) extern "C" fn double_sin(x: f64) -> f64 {
    x.sin()
}

/// `(x) -> cos x`: Double's `cos`, as its primitive computes it.
pub(super) extern "C" fn double_cos(x: f64) -> f64 {
    x.cos()
}

/// `(vm, frame, status) -> Value`: native code that native code called directly left its
/// frame (`frame`, the top one) to the interpreter, with `status` (`Status::Deopt`: a guard
/// failed, recorded as for the dispatcher; `Interpret`; or what a yieldpoint's stub
/// answered): the interpreter runs it to its return, whose value this answers.
pub(super) extern "C" fn interpret(vm: *mut Vm, frame: u64, status: u32) -> u64 {
    run(vm, |vm| {
        let index = frame_index(vm, frame);
        if status == super::Status::Deopt as u32 {
            vm.deoptimized();
        } else if status == super::Status::Error as u32 {
            // A dispatch loop's hand-over is not an error here: the frame is exact, and the
            // loop below runs it in whatever loop is due.
            match vm.jit.error.take() {
                Some(VmError::SwitchLoop) | None => {}
                Some(e) => return Err(e),
            }
        }
        vm.execute(index)?;
        if vm.rt.frames.len() < index {
            return Ok(None);
        }
        Ok(Some(vm.rt.stack.pop().expect("a result")))
    })
}

/// `(vm, frame) -> Value`: a directly called activation (its frame at `frame`) whose call
/// answered `Value::NONE` without a restart: the value it returns when a non-local return
/// popped exactly its frame (it is the home; the value is on the stack), else `Value::NONE`
/// (an error is parked, or the return goes on below it).
pub(super) extern "C" fn left(vm: *mut Vm, frame: u64) -> u64 {
    run(vm, |vm| {
        if vm.jit.error.is_some() {
            return Ok(None);
        }
        let index = frame_index(vm, frame);
        if vm.rt.frames.len() == index {
            return Ok(vm.rt.stack.pop());
        }
        Ok(None)
    })
}

impl Vm {
    /// A new closure of block `code` over `receiver` and `ctx` (compiled code's, and an
    /// exit's rebuild's); both are roots while it is allocated.
    pub(super) fn new_closure(
        &mut self,
        code: CodeId,
        receiver: Value,
        ctx: Value,
    ) -> Result<Value, VmError> {
        self.rt.stack.push(receiver);
        self.rt.stack.push(ctx);
        let allocated = self.alloc(
            self.block_class_for(code),
            Kind::Block,
            block::SLOTS,
            Value::NIL,
            0,
        );
        let ctx = self.rt.stack.pop().expect("pushed");
        let receiver = self.rt.stack.pop().expect("pushed");
        let b = allocated?;
        b.init_slot(block::CODE, Value::from_small_int(code as i64));
        b.init_slot(block::CONTEXT, ctx);
        b.init_slot(block::RECEIVER, receiver);
        Ok(b)
    }

    /// The context of an activation compiled code runs inlined, with `size` slots and
    /// `outer` (nil for a method's; a root while it is allocated). It holds no frame index:
    /// a method is inlined only when no closure of it returns non-locally to it.
    pub(super) fn new_inlined_context(
        &mut self,
        size: usize,
        outer: Value,
    ) -> Result<Value, VmError> {
        self.rt.stack.push(outer);
        let allocated = self.alloc(self.rt.core.object, Kind::Context, size, Value::NIL, 0);
        let outer = self.rt.stack.pop().expect("pushed");
        let ctx = allocated?;
        ctx.init_slot(crate::objects::context::OUTER, outer);
        Ok(ctx)
    }
}
