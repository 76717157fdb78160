//! Tally's compiled tiers, on Cranelift. The VM defines what compiled code must do
//! (`tally_vm::jit`: frames and value stack shared with the interpreter, statuses, stubs);
//! this crate makes the machine code, so the VM itself never depends on a compiler back end.

mod compiler;
mod counters;
mod lower;
mod numbers;

pub use compiler::{Compiler, ListingParts};

use tally_vm::jit::{AdaptiveConfig, CodeGenerator, Tier};
use tally_vm::tally_controller::{CallGraphSource, CostModel, InlinePolicy};

/// Samples per second that drive `--tier=adaptive` when no profile is recorded: enough for
/// the controller to see a method that runs for a few milliseconds, at a cost below the
/// noise of a benchmark (the samples are taken in the signal handler, one frame deep).
pub const ADAPTIVE_SAMPLE_RATE: u32 = 1000;

/// `--tier=adaptive` with this crate's compilers and `model`'s figures, the optimizing tier
/// inlining by the call graph from `inline_from` (`None`: no inlining).
pub fn adaptive_config(model: CostModel, inline_from: Option<CallGraphSource>) -> AdaptiveConfig {
    AdaptiveConfig {
        generators: Box::new(|tier| -> Result<Box<dyn CodeGenerator>, String> {
            Ok(Box::new(Compiler::new(tier)?))
        }),
        tiers: vec![Tier::Baseline, Tier::Opt],
        model,
        rate_hz: ADAPTIVE_SAMPLE_RATE,
        inline_from,
        inline_policy: inline_policy(),
    }
}

/// The inliner's policy for this crate's optimizing tier: Jikes RVM's shape with a smaller
/// budget, since each bytecode becomes a few hundred bytes of machine code here (every inlined
/// method also keeps its frame, its guards and its stub calls): at most the root's own size
/// plus 40 bytecodes inlined per compile, callees up to 40 bytecodes on hot edges.
pub fn inline_policy() -> InlinePolicy {
    InlinePolicy {
        hot_size: 40,
        budget_factor: 1,
        budget_extra: 40,
        ..InlinePolicy::default()
    }
}
