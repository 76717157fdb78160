//! The optimizing tier: bytecode → `tally_ir` → Cranelift. Every SOM value of an activation is an
//! SSA value (a register or a spill slot Cranelift chooses); the value stack is written only
//! where the interpreter takes the activation over (a frame state's exit) and read only at
//! entry.
//!
//! Contract with the VM (`tally_vm::jit`):
//! - Each version is two functions. The body, `(vm, caller, receiver, arguments…[, closure])
//!   -> Value`, is what native code calls directly ([`Caller::Direct`]: it pushes its frame,
//!   or, at the frame stack's limit, without value-stack room or native stack, makes the
//!   call through the stub instead) and what the adapter runs for the dispatcher (a frame
//!   set up, [`Caller`] says how). The adapter is the `EntryPoint`: a frame left at any
//!   other `ip` but 0 or a loop head with an entry goes back to the interpreter
//!   (`Status::Interpret`).
//! - At entry the body writes its frame pointer and its version's `SafepointTable` into the
//!   frame's `NativeActivation`; before each call that may collect it writes the call's
//!   safepoint number there (and the frame's `ip`, one past the call, as the interpreter
//!   does). Every reference live across such a call is in Cranelift's stack map of the call,
//!   whose slots the collector updates; the body clears `fp` on every way out.
//! - Calls: a known method, a closure's block, or a send whose inline cache holds a method
//!   with a body go straight to that body (a send whose class the compile did not know
//!   through its shape's shared probe, [`probe`], which probes the cache); the rest go
//!   through the `ir_*` stubs, which run the callee to completion. `Value::NONE` from either means leave (an error parked, a
//!   non-local return that popped the frame, or the frame restarted).
//! - A guard that fails, or an instruction the tier leaves to the interpreter, stores the
//!   values its state's exit plan names and calls the VM's rebuild (`Stubs::ir_exit`),
//!   which writes the frames the state describes; for the dispatcher the body leaves the status (`Status::Deopt`: the speculation is recorded
//!   and the version invalidated; `Status::Interpret`) in `Layout::exit_status`, for a direct
//!   call `ir_interpret` runs the frame in the interpreter to its return. One exit per frame
//!   state and status, shared by its guards, each ending in the function's one hand-over.

//!
//! Files: [`driver`] (the IR built and optimized, then lowered), [`entry`] (the body's
//! prologue), [`control`] (blocks, terminators, returns), [`insts`] (one lowering per IR
//! instruction, each group in a file of its own: [`heap`], [`calls`], [`sends`],
//! [`floats`], [`alloc`]; the shared send probes in [`probe`], what both write in [`emit`]), [`exits`] and [`exit_plan`] (the ways out to the interpreter),
//! [`adapter`] (the dispatcher's way in); [`lowerer`] holds the lowering's state.

mod adapter;
mod alloc;
mod calls;
mod control;
mod driver;
mod emit;
mod entry;
mod exit_plan;
mod exits;
mod floats;
mod heap;
mod insts;
mod lowerer;
mod probe;
mod sends;

use cranelift_codegen::ir::{types, MemFlagsData};

pub(crate) use adapter::{lower_adapter, AdapterBody, AdapterShape};
pub(crate) use driver::{
    fill_safepoints, inline_scopes, ir_of, lower, Level, Lowered, RequestNames,
};
pub(crate) use probe::{lower_send_probe, ProbeShape, SendProbes};

const I64: types::Type = types::I64;
const I32: types::Type = types::I32;
const I8: types::Type = types::I8;
const NIL: i64 = tally_heap::Value::NIL.0 as i64;

fn flags() -> MemFlagsData {
    MemFlagsData::trusted()
}
