//! The optimizing tier's intermediate representation, between bytecode and Cranelift.
//!
//! A [`Function`] holds one method or block in SSA form over SOM values (tagged words), in
//! the shape of HotSpot C1/C2, Graal and V8's Maglev: blocks with parameters (the merges of
//! values, as Cranelift has them), instructions that each define at most one value, and a
//! [`FrameState`] on every instruction that may deoptimize, call or collect. A frame state
//! says exactly what the interpreter's frame holds at that point — the code, the bytecode
//! index to resume at, the values of the receiver, arguments and locals still live there,
//! the operand stack, the context and closure — and, for inlined code, the state of the
//! caller it was inlined into; deoptimization and stack walks rebuild interpreter frames
//! from it, so compiled code keeps values in registers and nowhere else.
//!
//! - [`build::build`] makes a function from a [`tally_vm::jit::CompileRequest`]'s bytecode by
//!   abstract interpretation of its locals and operand stack; the sites' feedback becomes
//!   guards ([`InstKind::GuardInt`], [`InstKind::GuardClass`]) that deoptimize to the state
//!   before the guarded instruction, so the interpreter redoes it.
//! - [`passes`] simplify it: merges that merge nothing, constant folding, guards that a
//!   dominating guard or the value's own definition already proves, dead values and code;
//!   frame states describe only the locals the bytecode still reads.
//! - [`print`] writes it as text (`tally disasm`, listings, fixtures); [`verify`] checks its
//!   invariants (tests and debug builds run it after every pass).
//!
//! Invariants: every value is defined once, in a block that dominates each of its uses
//! (frame states included); a block's arguments on every edge match its parameters; every
//! block ends in one terminator; an instruction with a frame state that deoptimizes does so
//! before it changes anything the interpreter would redo.

pub mod build;
pub mod dom;
mod function;
mod inst;
pub mod parse;
pub mod passes;
pub mod print;
mod syntax;
pub mod verify;

pub use function::Function;
pub use function::{
    Block, BlockId, Edge, FloatOp, FrameState, FrameStateId, Inst, InstId, IntCmp, IntOp, OsrEntry,
    Resume, Scope, ScopeId, Terminator, Ty, ValueData, ValueDef, ValueId,
};
pub use inst::{InstKind, InstProps};
pub use syntax::NameTable;

#[cfg(test)]
mod tests;
