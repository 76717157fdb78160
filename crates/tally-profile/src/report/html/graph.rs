//! The dynamic call graph of the HTML report: a node per (method, tier), coloured by whether
//! the recompilation that brought the method into that tier paid for itself, and an edge per
//! caller → callee seen on the sampled stacks (inlined frames resolved as if they were on the
//! stack, in the tier of the code they were inlined into).

use std::collections::{BTreeMap, HashMap, HashSet};

use serde::Serialize;

use super::layout::{layered, LayoutEdge};
use super::model::{MethodTable, Stacks};
use crate::code::Symbols;
use crate::event::EventKind;
use crate::ids::{MethodId, Tier};
use crate::profile::Profile;
use crate::report::{Amortization, Verdict};

/// A node's colour: what became of the recompilation into its tier.
#[derive(Serialize, Clone, Copy, Debug, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub(crate) enum Colour {
    /// No recompilation brought the method into this tier: the tier it started in, or a
    /// method never recompiled.
    Blue,
    /// The recompilation paid for itself.
    Green,
    /// It did not.
    Red,
    /// No verdict: too few samples or calls, a cost that drifted, or no call counts.
    Grey,
}

#[derive(Serialize, Debug)]
pub(crate) struct GraphNode {
    pub method: u32,
    pub tier: u8,
    pub self_samples: u64,
    pub total_samples: u64,
    pub colour: Colour,
    /// The verdict in words, for the node's tooltip.
    pub verdict: Option<String>,
    pub x: f64,
    pub y: f64,
    pub w: f64,
}

#[derive(Serialize, Debug)]
pub(crate) struct GraphEdge {
    pub from: usize,
    pub to: usize,
    /// Samples with this call on the stack.
    pub samples: u64,
}

#[derive(Serialize, Debug, Default)]
pub(crate) struct CallGraphModel {
    pub nodes: Vec<GraphNode>,
    pub edges: Vec<GraphEdge>,
    pub width: f64,
    pub height: f64,
    pub node_height: f64,
    /// Nodes left out below the share or beyond the count.
    pub left_out: usize,
    pub min_percent: f64,
}

pub(crate) struct GraphLimits {
    pub min_percent: f64,
    pub max_nodes: usize,
}

/// Pixels a character of a node's label takes, and the label's bounds.
const CHAR_PX: f64 = 6.6;
const MIN_NODE_PX: f64 = 90.0;
const MAX_NODE_PX: f64 = 280.0;
const NODE_PX_HIGH: f64 = 34.0;
/// The node's second line, its tier and shares (`baseline · 99.9 % · self 99.9 %`).
const LINE_TWO_CHARS: usize = 30;

type Key = (MethodId, Tier);

impl CallGraphModel {
    pub fn new(
        p: &Profile,
        symbols: &Symbols,
        stacks: &Stacks,
        amortization: Option<&Amortization>,
        table: &mut MethodTable,
        limits: &GraphLimits,
    ) -> CallGraphModel {
        let mut totals: HashMap<Key, (u64, u64)> = HashMap::new();
        let mut edges: HashMap<(Key, Key), u64> = HashMap::new();
        let mut seen_nodes = HashSet::new();
        let mut seen_edges = HashSet::new();
        for frames in &stacks.frames {
            seen_nodes.clear();
            seen_edges.clear();
            for (i, f) in frames.iter().enumerate() {
                let key = (f.method, f.tier);
                let t = totals.entry(key).or_default();
                if i == 0 {
                    t.0 += 1;
                }
                if seen_nodes.insert(key) {
                    t.1 += 1;
                }
                if let Some(caller) = frames.get(i + 1) {
                    let edge = ((caller.method, caller.tier), key);
                    if seen_edges.insert(edge) {
                        *edges.entry(edge).or_default() += 1;
                    }
                }
            }
        }
        let all = p.samples.len() as u64;
        let distinct = totals.len();
        let mut kept: Vec<(Key, (u64, u64))> = totals
            .into_iter()
            .filter(|(_, (_, total))| {
                all > 0 && 100.0 * *total as f64 / all as f64 >= limits.min_percent
            })
            .collect();
        kept.sort_by(|a, b| b.1 .1.cmp(&a.1 .1).then(a.0.cmp(&b.0)));
        kept.truncate(limits.max_nodes);
        let left_out = distinct - kept.len();
        let index: HashMap<Key, usize> = kept.iter().enumerate().map(|(i, k)| (k.0, i)).collect();
        let mut graph_edges: Vec<GraphEdge> = edges
            .into_iter()
            .filter_map(|((a, b), n)| {
                Some(GraphEdge {
                    from: *index.get(&a)?,
                    to: *index.get(&b)?,
                    samples: n,
                })
            })
            .collect();
        graph_edges.sort_by_key(|e| (e.from, e.to));

        let verdicts = verdicts(p, amortization);
        let mut nodes: Vec<GraphNode> = kept
            .iter()
            .map(|&((m, tier), (self_samples, total_samples))| {
                let (colour, verdict) = verdicts
                    .get(&(m, tier))
                    .cloned()
                    .unwrap_or((Colour::Blue, None));
                GraphNode {
                    method: table.of(symbols, m),
                    tier: tier.to_u8(),
                    self_samples,
                    total_samples,
                    colour,
                    verdict,
                    x: 0.0,
                    y: 0.0,
                    w: (symbols.method_name(m).chars().count().max(LINE_TWO_CHARS) as f64
                        * CHAR_PX
                        + 16.0)
                        .clamp(MIN_NODE_PX, MAX_NODE_PX),
                }
            })
            .collect();
        let widths: Vec<f64> = nodes.iter().map(|n| n.w).collect();
        let weights: Vec<u64> = nodes.iter().map(|n| n.total_samples).collect();
        let layout_edges: Vec<LayoutEdge> = graph_edges
            .iter()
            .map(|e| LayoutEdge {
                from: e.from,
                to: e.to,
                weight: e.samples,
            })
            .collect();
        let layout = layered(&widths, &weights, &layout_edges, NODE_PX_HIGH);
        for (n, &(x, y)) in nodes.iter_mut().zip(&layout.positions) {
            n.x = x;
            n.y = y;
        }
        CallGraphModel {
            nodes,
            edges: graph_edges,
            width: layout.width,
            height: layout.height,
            node_height: NODE_PX_HIGH,
            left_out,
            min_percent: limits.min_percent,
        }
    }
}

/// The colour and words of each (method, tier) a recompilation brought a method into.
fn verdicts(
    p: &Profile,
    amortization: Option<&Amortization>,
) -> BTreeMap<Key, (Colour, Option<String>)> {
    let mut out = BTreeMap::new();
    match amortization {
        Some(a) => {
            for r in &a.recompilations {
                let (colour, words) = match &r.verdict {
                    Verdict::PaidOff { gain_ns } => (
                        Colour::Green,
                        format!(
                            "{} → {}: paid off, gained {}",
                            r.from.name(),
                            r.to.name(),
                            ms(*gain_ns)
                        ),
                    ),
                    Verdict::DidNotPay { loss_ns } => (
                        Colour::Red,
                        format!(
                            "{} → {}: did not pay, lost {}",
                            r.from.name(),
                            r.to.name(),
                            ms(*loss_ns)
                        ),
                    ),
                    Verdict::Unclear { why } => (
                        Colour::Grey,
                        format!("{} → {}: no verdict: {why}", r.from.name(), r.to.name()),
                    ),
                };
                out.insert((r.method, r.to), (colour, Some(words)));
            }
        }
        None => {
            for e in &p.events {
                if let EventKind::CodeInstalled(v) = &e.kind {
                    out.entry((v.method, v.tier)).or_insert((
                        Colour::Grey,
                        Some(format!(
                            "compiled to {}: no verdict without call counts (--count-calls)",
                            v.tier.name()
                        )),
                    ));
                }
            }
        }
    }
    out
}

pub(crate) fn ms(ns: f64) -> String {
    format!("{:.2} ms", ns / 1e6)
}
