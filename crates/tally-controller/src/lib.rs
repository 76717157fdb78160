//! Adaptive optimization for any VM, after Jikes RVM's adaptive optimization system: method
//! samples flow one way through an organizer (time per method and tier) into a controller
//! that weighs each method's compile cost against its expected gain ([`Controller`]), with
//! the tiers' speedups and compile rates from a measured [`CostModel`]. The crate knows
//! nothing of the VM: it takes `tally-profile` samples and answers [`Decision`]s; compiling
//! and installing code is the VM's business, which reports back what it installed.

mod controller;
mod model;
mod organizer;

pub use controller::{Controller, Decision, MAX_COMPILES_PER_METHOD};
pub use model::{CostModel, ModelError, Provenance, TierCost};
pub use organizer::{MethodRecord, Organizer};
