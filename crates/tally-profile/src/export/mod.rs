//! Exports to tools people already have. Each takes a [`crate::Profile`]
//! and returns bytes or a string; names come from the profile's events.

pub mod chrome;
pub mod firefox;
pub mod folded;
pub mod pprof;
pub mod pprof_proto;
pub mod speedscope;

use crate::code::{LogicalFrame, Symbols};
use crate::sample::Sample;

/// A frame's display name in stack-based tools: the method, marked when
/// it ran inlined or in compiled code, so tiers stay visible in flame
/// graphs.
pub(crate) fn frame_label(symbols: &Symbols, f: &LogicalFrame) -> String {
    let name = symbols.method_name(f.method);
    match (f.tier, f.inlined) {
        (crate::ids::Tier::Interpreter, _) => name,
        (tier, false) => format!("{name} [{}]", tier.name()),
        (tier, true) => format!("{name} [{}, inlined]", tier.name()),
    }
}

/// A sample's stack as frame labels, root first; a sample with no frame is labelled with its
/// VM state (`[gc]`, …), so every sample counts somewhere.
pub(crate) fn sample_labels(symbols: &Symbols, s: &Sample) -> Vec<String> {
    let logical = symbols.resolve_sample(s);
    if logical.is_empty() {
        return vec![format!("[{}]", s.state.name())];
    }
    logical
        .iter()
        .rev()
        .map(|f| frame_label(symbols, f))
        .collect()
}
