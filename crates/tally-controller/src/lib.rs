//! Adaptive optimization for any VM, after Jikes RVM's adaptive optimization system: method
//! samples flow one way through an organizer (time per method and tier) into a controller
//! that weighs each method's compile cost against its expected gain ([`Controller`]), with
//! the tiers' speedups and compile rates from a measured [`CostModel`]. The crate knows
//! nothing of the VM: it takes `tally-profile` samples and answers [`Decision`]s; compiling
//! and installing code is the VM's business, which reports back what it installed.
//!
//! The inlining oracle ([`plan_inlining`]) is the optimizing compiler's other input: which call sites to inline, from a
//! sampled call graph (Arnold & Grove's profile-directed inlining).

mod controller;
mod inlining;
mod model;
mod organizer;

pub use controller::{Controller, Decision, MAX_COMPILES_PER_METHOD};
pub use inlining::{
    plan as plan_inlining, size_limit, CallGraphSource, InlineChoice, InlinePlan, InlinePolicy,
    InlineSource, Verdict,
};
pub use model::{CostModel, ModelError, Provenance, TierCost};
pub use organizer::{MethodRecord, Organizer};
