//! Reports people read: each is data first (so tools and tests can use
//! it) and a text rendering second.

mod amortization;
mod compare;
mod edges;
mod flat;
mod html;
mod lines;
mod states;
mod tiers;
mod tree;
mod vm;

pub use amortization::{Amortization, Recompilation, TierCost, Verdict};
pub use compare::{
    accuracy_against_exact, compare, describe, program_mismatch, Accuracy, Comparison, MethodDiff,
};
pub use edges::{hottest_edges, render_edges, EdgeRow, EdgeSource};
pub use flat::{FlatProfile, FlatRow};
pub use html::{render_html, HtmlOptions};
pub use lines::LineProfile;
pub use states::{StateBreakdown, StateRow};
pub use tiers::{DecisionRow, MethodTiers, TierReport, TierRow};
pub use tree::render_call_tree;
pub use vm::{BytecodeRange, CompiledMethod, ComponentRow, VmProfile};

fn pct(part: u64, total: u64) -> f64 {
    if total == 0 {
        0.0
    } else {
        100.0 * part as f64 / total as f64
    }
}

#[cfg(test)]
mod tests;
