//! The rebuild an exit of optimized code ends in (`Stubs::ir_exit`): from the exit's plan
//! ([`super::exit_plans`]) and the values it stored in the exit buffer, the objects the code
//! kept virtual are made, the frames of its inline chain written, and the status the
//! activation is handed over with answered.
//!
//! The collector may run at every allocation here. The exit clears its native record's
//! frame pointer before the call, so its stale stack map is never read; every reference
//! the rebuild holds is in `Runtime::handles` (the buffer's words are moved there before the
//! first allocation, each object as it is made) until the frames hold them.

use tally_heap::Value;

use super::exit_plans::{ExitHandOver, ExitObject, ExitPlan, ExitValue};
use super::{DeoptRecord, SafepointTable, Status};
use crate::frames::Frame;
use crate::{Vm, VmError};

/// What the exit gets back when the rebuild failed (an allocation, with the error parked in
/// `Jit::error`): it leaves as a call that answered `Value::NONE` does.
pub const REBUILD_FAILED: u32 = u32::MAX;

/// `(vm, table, exit, param) -> status | REBUILD_FAILED`: rebuilds the frames of exit `exit` of the
/// version whose tables are at `table`; `param` is the failed guard's reason or the
/// yieldpoint's status.
pub(super) extern "C" fn exit(vm: *mut Vm, table: u64, exit: u32, param: u32) -> u32 {
    // SAFETY: native code passes on the `*mut Vm` the dispatcher gave it, which points at
    // the live VM, not otherwise borrowed while native code runs; `table` is its version's
    // table, which the VM keeps for its whole life.
    let (vm, table) = unsafe { (&mut *vm, &*(table as *const SafepointTable)) };
    let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let plan = table.exit(exit).ok_or_else(|| {
            VmError::Fatal(format!(
                "compiled code left by exit {exit}, which its version does not describe"
            ))
        })?;
        rebuild(vm, plan, param)
    }));
    match outcome {
        Ok(Ok(status)) => status,
        Ok(Err(e)) => {
            vm.jit.error = Some(e);
            REBUILD_FAILED
        }
        Err(_) => {
            vm.jit.error = Some(VmError::Fatal("the VM failed inside compiled code".into()));
            REBUILD_FAILED
        }
    }
}

/// Where the rebuild keeps the references it holds: the buffer's words, then the objects
/// it made, from `base` in `Runtime::handles`.
struct Held {
    base: usize,
    words: usize,
}

impl Held {
    fn value(&self, vm: &Vm, v: ExitValue) -> Value {
        let at = |k: usize| vm.rt.handles[self.base + k];
        match v {
            ExitValue::Word(k) => at(k as usize),
            ExitValue::Made(k) => at(self.words + k as usize),
            ExitValue::Const(c) => c,
        }
    }

    fn value_or_nil(&self, vm: &Vm, v: Option<ExitValue>) -> Value {
        v.map_or(Value::NIL, |v| self.value(vm, v))
    }
}

/// Carries out `plan`; answers the status to hand the rebuilt activation over with.
fn rebuild(vm: &mut Vm, plan: &ExitPlan, param: u32) -> Result<u32, VmError> {
    let held = Held {
        base: vm.rt.handles.len(),
        words: plan.words as usize,
    };
    let written = make_objects(vm, plan, &held).and_then(|()| {
        fill_objects(vm, plan, &held);
        write_frames(vm, plan, &held)
    });
    vm.rt.handles.truncate(held.base);
    written?;
    Ok(match plan.hand_over {
        ExitHandOver::Deopt { site, code } => {
            vm.jit.deopt = DeoptRecord {
                site,
                reason: param,
                code,
            };
            Status::Deopt as u32
        }
        ExitHandOver::Interpret => Status::Interpret as u32,
        ExitHandOver::Restart => {
            vm.jit.restarted = 0;
            Status::Interpret as u32
        }
        ExitHandOver::Status => param,
    })
}

/// Moves the buffer's words into the handles, then makes the objects, each kept there as it
/// is made.
fn make_objects(vm: &mut Vm, plan: &ExitPlan, held: &Held) -> Result<(), VmError> {
    for k in 0..plan.words {
        let w = vm.jit.exit_buffer.word(k);
        vm.rt.handles.push(w);
    }
    for object in &plan.objects {
        let made = match object {
            ExitObject::Instance { class, .. } => {
                let class = held.value(vm, *class);
                vm.instantiate(class)?
            }
            ExitObject::HomeContext { code, .. } => {
                let code = vm.rt.codes[*code as usize];
                vm.new_home_context(code)?
            }
            &ExitObject::Context { size, outer, .. } => {
                let outer = held.value_or_nil(vm, outer);
                vm.new_inlined_context(size as usize, outer)?
            }
            &ExitObject::Closure {
                code,
                receiver,
                ctx,
            } => {
                let (receiver, ctx) = (held.value(vm, receiver), held.value_or_nil(vm, ctx));
                vm.new_closure(code, receiver, ctx)?
            }
        };
        vm.rt.handles.push(made);
    }
    Ok(())
}

/// Fills the slots of the objects made (nil ones are nil already), through the write
/// barrier: a collection since an object was made may have promoted it.
fn fill_objects(vm: &mut Vm, plan: &ExitPlan, held: &Held) {
    for (k, object) in plan.objects.iter().enumerate() {
        let slots = match object {
            ExitObject::Instance { fields, .. } => fields,
            ExitObject::HomeContext { slots, .. } | ExitObject::Context { slots, .. } => slots,
            ExitObject::Closure { .. } => continue,
        };
        let made = held.value(vm, ExitValue::Made(k as u16));
        for (i, &v) in slots.iter().enumerate() {
            if v != ExitValue::Const(Value::NIL) {
                made.set_slot(i, held.value(vm, v));
            }
        }
    }
}

/// Writes the chain's frames: the values of each above the one below it, from the frame's
/// own base; the records beyond the frame's own pushed.
fn write_frames(vm: &mut Vm, plan: &ExitPlan, held: &Held) -> Result<(), VmError> {
    let mut bp = vm.rt.frames.top().bp as usize;
    for (level, frame) in plan.frames.iter().enumerate() {
        vm.rt.stack.resize(bp, Value::NIL);
        for &v in &frame.slots {
            let v = held.value(vm, v);
            vm.rt.stack.push(v);
        }
        if level == 0 {
            if plan.hand_over != ExitHandOver::Restart {
                vm.rt.frames.top_mut().ip = frame.ip;
            }
        } else {
            let record = Frame {
                code: frame.code,
                ip: frame.ip,
                bp: bp as u32,
                mark: 0,
                ctx: held.value_or_nil(vm, frame.context),
                closure: frame.closure.map_or(Value::NONE, |c| held.value(vm, c)),
            };
            if !vm.rt.frames.push_rebuilt(record) {
                return Err(VmError::Fatal(
                    "an exit's inline chain is deeper than the frames kept for it".into(),
                ));
            }
        }
        bp += frame.slots.len();
    }
    Ok(())
}
