//! The hottest call edges, from CBS samples or from the exhaustive counts.

use std::fmt::Write;

use super::pct;
use crate::callgraph::{CallEdge, CallGraph};
use crate::profile::Profile;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EdgeSource {
    /// Counter-based sampling.
    Cbs,
    /// The exhaustive (ground-truth) counts.
    Exact,
}

#[derive(Clone, Debug, PartialEq)]
pub struct EdgeRow {
    pub edge: CallEdge,
    pub caller: String,
    pub callee: String,
    pub weight: u64,
    pub pct: f64,
}

/// The `n` heaviest edges of the chosen graph (empty if it was not
/// recorded).
pub fn hottest_edges(p: &Profile, source: EdgeSource, n: usize) -> Vec<EdgeRow> {
    let graph = match source {
        EdgeSource::Cbs => p.cbs_edges.clone(),
        EdgeSource::Exact => match &p.exact {
            Some(x) => CallGraph::from_exact(x),
            None => return vec![],
        },
    };
    let symbols = p.symbols();
    let total = graph.total();
    graph
        .hottest(n)
        .into_iter()
        .map(|(edge, weight)| EdgeRow {
            edge,
            caller: symbols.method_name(edge.caller),
            callee: symbols.method_name(edge.callee),
            weight,
            pct: pct(weight, total),
        })
        .collect()
}

pub fn render_edges(rows: &[EdgeRow]) -> String {
    let mut out = String::from("hottest call edges (weight%, weight, caller @site -> callee)\n");
    for r in rows {
        let _ = writeln!(
            out,
            "{:>6.2}% {:>8}  {} @{} -> {}",
            r.pct, r.weight, r.caller, r.edge.callsite, r.callee
        );
    }
    out
}
