//! The calling-context tree: samples aggregated by their full call path,
//! so that the same method reached from different callers stays apart
//! (the call tree report, flame graphs and the amortization analysis of
//! T7 all read it).

use std::collections::HashMap;

use crate::code::{LogicalFrame, Symbols};
use crate::ids::MethodId;
use crate::sample::Sample;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CctNode {
    /// `None` only for the root.
    pub method: Option<MethodId>,
    /// Bytecode index in the parent where this context was called from.
    pub callsite: u32,
    /// Samples whose innermost frame is this context.
    pub self_count: u64,
    /// Samples passing through this context.
    pub total_count: u64,
    /// Of `total_count`, the samples in which this context ran inlined into its caller's
    /// compiled code.
    pub inlined_count: u64,
    pub children: Vec<usize>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Cct {
    pub nodes: Vec<CctNode>,
    index: HashMap<(usize, MethodId, u32), usize>,
}

impl Default for Cct {
    fn default() -> Self {
        Cct {
            nodes: vec![CctNode {
                method: None,
                callsite: 0,
                self_count: 0,
                total_count: 0,
                inlined_count: 0,
                children: vec![],
            }],
            index: HashMap::new(),
        }
    }
}

impl Cct {
    pub const ROOT: usize = 0;

    pub fn from_samples(samples: &[Sample], symbols: &Symbols) -> Cct {
        let mut cct = Cct::default();
        for s in samples {
            let frames = symbols.resolve_sample(s);
            cct.add_stack(&frames, 1);
        }
        cct
    }

    /// Adds one stack (innermost first, as samples store it).
    pub fn add_stack(&mut self, innermost_first: &[LogicalFrame], weight: u64) {
        let mut node = Cct::ROOT;
        self.nodes[node].total_count += weight;
        let mut callsite = 0;
        for f in innermost_first.iter().rev() {
            let key = (node, f.method, callsite);
            let child = match self.index.get(&key) {
                Some(&c) => c,
                None => {
                    let c = self.nodes.len();
                    self.nodes.push(CctNode {
                        method: Some(f.method),
                        callsite,
                        self_count: 0,
                        total_count: 0,
                        inlined_count: 0,
                        children: vec![],
                    });
                    self.nodes[node].children.push(c);
                    self.index.insert(key, c);
                    c
                }
            };
            node = child;
            self.nodes[node].total_count += weight;
            if f.inlined {
                self.nodes[node].inlined_count += weight;
            }
            callsite = f.bci;
        }
        self.nodes[node].self_count += weight;
    }

    pub fn total(&self) -> u64 {
        self.nodes[Cct::ROOT].total_count
    }

    /// Children of `node`, heaviest first.
    pub fn sorted_children(&self, node: usize) -> Vec<usize> {
        let mut c = self.nodes[node].children.clone();
        c.sort_by(|&a, &b| {
            self.nodes[b]
                .total_count
                .cmp(&self.nodes[a].total_count)
                .then(a.cmp(&b))
        });
        c
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::Tier;

    fn f(m: u32, bci: u32) -> LogicalFrame {
        LogicalFrame {
            method: MethodId(m),
            bci,
            tier: Tier::Interpreter,
            inlined: false,
        }
    }

    #[test]
    fn contexts_split_by_caller_and_call_site() {
        let mut cct = Cct::default();
        cct.add_stack(&[f(3, 0), f(1, 5), f(0, 2)], 1);
        cct.add_stack(&[f(3, 0), f(1, 5), f(0, 2)], 1);
        cct.add_stack(&[f(3, 0), f(2, 1), f(0, 4)], 1);
        cct.add_stack(&[f(1, 9), f(0, 2)], 1);
        assert_eq!(cct.total(), 4);
        let main = cct.sorted_children(Cct::ROOT);
        assert_eq!(main.len(), 1);
        let m0 = &cct.nodes[main[0]];
        assert_eq!(
            (m0.method, m0.total_count, m0.self_count),
            (Some(MethodId(0)), 4, 0)
        );
        // method 1 called from bci 2, method 2 from bci 4.
        let kids = cct.sorted_children(main[0]);
        let k: Vec<_> = kids
            .iter()
            .map(|&k| {
                (
                    cct.nodes[k].method.unwrap().0,
                    cct.nodes[k].callsite,
                    cct.nodes[k].total_count,
                )
            })
            .collect();
        assert_eq!(k, vec![(1, 2, 3), (2, 4, 1)]);
        // Method 3 appears under two contexts.
        let threes = cct
            .nodes
            .iter()
            .filter(|n| n.method == Some(MethodId(3)))
            .count();
        assert_eq!(threes, 2);
        assert_eq!(cct.nodes.iter().map(|n| n.self_count).sum::<u64>(), 4);
    }
}
