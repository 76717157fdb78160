//! Exhaustive counting: the ground truth every sampled profile is judged
//! against (exact call counts per method and per call edge, exact executed
//! bytecodes per method).
//!
//! It is the slow mode by design: the VM calls it on every call and every
//! bytecode. Counters are indexed by method id in plain vectors so the
//! common case is one bounds check and an add; an edge seen for the first
//! time allocates, which is fine because this mode is never on in a
//! signal handler or in a measured run.

use std::collections::HashMap;

use crate::callgraph::CallEdge;
use crate::ids::MethodId;

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ExactCounts {
    /// Calls per method, indexed by method id.
    pub calls: Vec<u64>,
    /// Bytecodes executed per method, indexed by method id.
    pub bytecodes: Vec<u64>,
    pub edges: HashMap<CallEdge, u64>,
}

impl ExactCounts {
    pub fn new() -> ExactCounts {
        ExactCounts::default()
    }

    /// A call from `caller` at bytecode `callsite` to `callee`; `caller` is
    /// `None` for the program's entry call.
    #[inline]
    pub fn on_call(&mut self, caller: Option<(MethodId, u32)>, callee: MethodId) {
        bump(&mut self.calls, callee, 1);
        if let Some((caller, callsite)) = caller {
            *self
                .edges
                .entry(CallEdge {
                    caller,
                    callsite,
                    callee,
                })
                .or_insert(0) += 1;
        }
    }

    /// `n` bytecodes executed in `method` (the interpreter may batch, e.g.
    /// per basic block, as long as the total is exact).
    #[inline]
    pub fn on_bytecodes(&mut self, method: MethodId, n: u64) {
        bump(&mut self.bytecodes, method, n);
    }

    pub fn calls_of(&self, m: MethodId) -> u64 {
        self.calls.get(m.0 as usize).copied().unwrap_or(0)
    }

    pub fn bytecodes_of(&self, m: MethodId) -> u64 {
        self.bytecodes.get(m.0 as usize).copied().unwrap_or(0)
    }

    pub fn total_bytecodes(&self) -> u64 {
        self.bytecodes
            .iter()
            .fold(0u64, |a, &b| a.saturating_add(b))
    }
}

#[inline]
fn bump(v: &mut Vec<u64>, m: MethodId, n: u64) {
    let i = m.0 as usize;
    if i >= v.len() {
        v.resize(i + 1, 0);
    }
    v[i] = v[i].saturating_add(n);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_calls_edges_and_bytecodes() {
        let mut c = ExactCounts::new();
        c.on_call(None, MethodId(0));
        for _ in 0..3 {
            c.on_call(Some((MethodId(0), 4)), MethodId(2));
            c.on_bytecodes(MethodId(2), 10);
        }
        c.on_call(Some((MethodId(0), 9)), MethodId(2));
        assert_eq!(c.calls_of(MethodId(2)), 4);
        assert_eq!(c.calls_of(MethodId(0)), 1);
        assert_eq!(c.calls_of(MethodId(1)), 0);
        assert_eq!(c.bytecodes_of(MethodId(2)), 30);
        assert_eq!(c.total_bytecodes(), 30);
        let e = CallEdge {
            caller: MethodId(0),
            callsite: 4,
            callee: MethodId(2),
        };
        assert_eq!(c.edges[&e], 3);
        assert_eq!(c.edges.len(), 2);
    }
}
