//! The dynamic call graph: weighted (caller, call site, callee) edges.
//!
//! Edges carry the call-site bytecode index because the inliner decides
//! per site (Arnold & Grove's profile-directed inlining), and because the
//! same pair of methods can be linked by sites of very different heat.

use std::collections::BTreeMap;

use crate::code::Symbols;
use crate::hot::exact::ExactCounts;
use crate::ids::MethodId;
use crate::sample::Sample;

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct CallEdge {
    pub caller: MethodId,
    /// Bytecode index of the send in `caller`.
    pub callsite: u32,
    pub callee: MethodId,
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CallGraph {
    pub edges: BTreeMap<CallEdge, u64>,
}

impl CallGraph {
    pub fn add(&mut self, edge: CallEdge, weight: u64) {
        let w = self.edges.entry(edge).or_insert(0);
        *w = w.saturating_add(weight);
    }

    pub fn total(&self) -> u64 {
        self.edges.values().fold(0u64, |a, &b| a.saturating_add(b))
    }

    /// The exhaustive graph (ground truth).
    pub fn from_exact(exact: &ExactCounts) -> CallGraph {
        CallGraph {
            edges: exact.edges.iter().map(|(&e, &n)| (e, n)).collect(),
        }
    }

    /// Edges implied by stack samples: each adjacent pair of frames is one
    /// observation of the edge between them. (Timer-based edge sampling,
    /// the baseline CBS improves on.)
    pub fn from_stack_samples(samples: &[Sample], symbols: &Symbols) -> CallGraph {
        let mut g = CallGraph::default();
        for s in samples {
            let frames = symbols.resolve_stack(&s.frames);
            for pair in frames.windows(2) {
                let (callee, caller) = (pair[0], pair[1]);
                g.add(
                    CallEdge {
                        caller: caller.method,
                        callsite: caller.bci,
                        callee: callee.method,
                    },
                    1,
                );
            }
        }
        g
    }

    /// Edges keyed by names, for comparing runs whose method ids differ.
    pub fn by_name(&self, symbols: &Symbols) -> BTreeMap<(String, u32, String), u64> {
        let mut out = BTreeMap::new();
        for (e, &w) in &self.edges {
            let key = (
                symbols.method_name(e.caller),
                e.callsite,
                symbols.method_name(e.callee),
            );
            let x = out.entry(key).or_insert(0);
            *x = u64::saturating_add(*x, w);
        }
        out
    }

    /// The `n` heaviest edges, heaviest first (ties by edge order).
    pub fn hottest(&self, n: usize) -> Vec<(CallEdge, u64)> {
        let mut v: Vec<_> = self.edges.iter().map(|(&e, &w)| (e, w)).collect();
        v.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
        v.truncate(n);
        v
    }
}
