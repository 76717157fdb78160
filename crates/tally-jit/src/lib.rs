//! Tally's compiled tiers, on Cranelift. The VM defines what compiled code must do
//! (`tally_vm::jit`: frames and value stack shared with the interpreter, statuses, stubs);
//! this crate makes the machine code, so the VM itself never depends on a compiler back end.

mod baseline;

pub use baseline::{Baseline, ListingParts};
