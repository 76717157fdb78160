//! The call tree: the calling-context tree rendered top-down, heaviest
//! callee first, pruned below a share of the samples.

use std::fmt::Write;

use super::pct;
use crate::cct::Cct;
use crate::code::Symbols;
use crate::ids::MethodId;

/// Renders `cct`, hiding contexts below `min_pct` % of all samples and
/// deeper than `max_depth`.
pub fn render_call_tree(cct: &Cct, symbols: &Symbols, min_pct: f64, max_depth: usize) -> String {
    let total = cct.total();
    let mut out = format!(
        "call tree: {total} samples (total% self% method @file:line of the call in its caller; [inlined]: ran inlined into its caller's compiled code)\n"
    );
    let mut stack: Vec<(usize, usize, Option<MethodId>)> = cct
        .sorted_children(Cct::ROOT)
        .into_iter()
        .rev()
        .map(|c| (c, 0, None))
        .collect();
    while let Some((node, depth, caller)) = stack.pop() {
        let n = &cct.nodes[node];
        if pct(n.total_count, total) < min_pct || depth >= max_depth {
            continue;
        }
        let name = n.method.map(|m| symbols.method_name(m)).unwrap_or_default();
        let site = match caller.and_then(|c| symbols.position(c, n.callsite)) {
            Some(pos) => format!(" @{}:{}", file_name(pos.file), pos.line),
            None => String::new(),
        };
        let inlined = match n.inlined_count {
            0 => String::new(),
            k if k == n.total_count => " [inlined]".to_string(),
            k => format!(" [inlined in {:.0}%]", pct(k, n.total_count)),
        };
        let _ = writeln!(
            out,
            "{:>6.2}% {:>6.2}% {}{}{}{}",
            pct(n.total_count, total),
            pct(n.self_count, total),
            "  ".repeat(depth),
            name,
            site,
            inlined
        );
        for c in cct.sorted_children(node).into_iter().rev() {
            stack.push((c, depth + 1, n.method));
        }
    }
    out
}

/// The last component of a source path: a call tree's lines are read beside the method names,
/// which already say the class; the whole path is in the exports.
pub(crate) fn file_name(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
}
