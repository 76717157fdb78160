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

/// A sample's stack, root first, each entry with its label and its frame; a sample with no
/// frame is one entry labelled with its VM state (`[gc]`, …) and no frame, so every sample
/// counts somewhere.
pub(crate) fn sample_stack(symbols: &Symbols, s: &Sample) -> Vec<(String, Option<LogicalFrame>)> {
    let logical = symbols.resolve_sample(s);
    if logical.is_empty() {
        return vec![(format!("[{}]", s.state.name()), None)];
    }
    logical
        .iter()
        .rev()
        .map(|f| (frame_label(symbols, f), Some(*f)))
        .collect()
}

/// [`sample_stack`]'s labels.
pub(crate) fn sample_labels(symbols: &Symbols, s: &Sample) -> Vec<String> {
    sample_stack(symbols, s)
        .into_iter()
        .map(|(label, _)| label)
        .collect()
}
