//! Tally's compiled tiers: the baseline tier's template compiler (dynasm) and the
//! optimizing levels (Tally's IR lowered to Cranelift). The VM defines what compiled code
//! must do (`tally_vm::jit`: frames and value stack shared with the interpreter, statuses,
//! stubs); this crate makes the machine code, so the VM itself never depends on a compiler
//! back end.

mod compiler;
mod counters;
mod diagnostics;
mod generator;
mod numbers;
mod optimizing;
mod pc_map;
mod stub_calls;
#[cfg(target_arch = "x86_64")]
mod template;

pub use compiler::ListingParts;
pub use diagnostics::{phase_names, Diagnostics, PrintIrAfter};
pub use generator::Compiler;

use tally_vm::jit::{AdaptiveConfig, CodeGenerator, Tier};
use tally_vm::tally_controller::CostModel;

/// Samples per second that drive `--tier=adaptive` when no profile is recorded: enough for
/// the controller to see a method that runs for a few milliseconds, at a cost below the
/// noise of a benchmark (the samples are taken in the signal handler, one frame deep).
pub const ADAPTIVE_SAMPLE_RATE: u32 = 1000;

/// `--tier=adaptive` with this crate's compilers, reporting what `diagnostics` asks, and
/// `model`'s figures, compiling to `tiers`.
pub fn adaptive_config(
    model: CostModel,
    diagnostics: Diagnostics,
    tiers: Vec<Tier>,
) -> AdaptiveConfig {
    AdaptiveConfig {
        generators: Box::new(move |tier| -> Result<Box<dyn CodeGenerator>, String> {
            let mut compiler = Compiler::new(tier)?;
            compiler.set_diagnostics(diagnostics.clone());
            Ok(Box::new(compiler))
        }),
        tiers,
        model,
        rate_hz: ADAPTIVE_SAMPLE_RATE,
    }
}
