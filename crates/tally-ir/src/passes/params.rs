//! Block parameters that merge nothing: where every edge into a block passes the same value
//! for a parameter (or the parameter itself, around a loop), the parameter is that value;
//! and parameters that only pass one another around (nested) loops, fed from outside by one
//! value, are that value (Braun et al., CC 2013, §3.2). The builder gives every local of
//! every block a parameter, and an entry at a loop head adds a second way in to each: a
//! method's arguments and loop-invariant locals would otherwise stay merges, re-checked
//! on every iteration.

use std::collections::HashMap;

use crate::{BlockId, Function, ValueId};

/// Replaces every trivial parameter by the value it always receives, until none is left.
pub fn prune(f: &mut Function) {
    loop {
        let incoming = incoming_args(f);
        let mut replace: HashMap<ValueId, ValueId> = HashMap::new();
        let mut drop: Vec<(BlockId, usize)> = Vec::new();
        for (b, block) in f.blocks.iter().enumerate().skip(1) {
            for (k, &p) in block.params.iter().enumerate() {
                let args = &incoming[b][k];
                let mut others = args.iter().copied().filter(|&a| a != p);
                let Some(first) = others.next() else {
                    continue;
                };
                if others.all(|a| a == first) {
                    replace.insert(p, first);
                    drop.push((BlockId(b as u32), k));
                }
            }
        }
        if replace.is_empty() {
            redundant_cycles(f, &incoming, &mut replace, &mut drop);
        }
        if replace.is_empty() {
            return;
        }
        f.replace_through(&replace);
        remove_params(f, &drop);
    }
}

/// Finds the strongly connected sets of parameters (each passed to the others) whose
/// members receive, from outside the set, one value only: every member is that value.
fn redundant_cycles(
    f: &Function,
    incoming: &[Vec<Vec<ValueId>>],
    replace: &mut HashMap<ValueId, ValueId>,
    drop: &mut Vec<(BlockId, usize)>,
) {
    // Parameters (of blocks other than the entry) numbered densely, with their operands.
    let mut number: HashMap<ValueId, usize> = HashMap::new();
    let mut params: Vec<(BlockId, usize, ValueId)> = Vec::new();
    for (b, block) in f.blocks.iter().enumerate().skip(1) {
        for (k, &p) in block.params.iter().enumerate() {
            number.insert(p, params.len());
            params.push((BlockId(b as u32), k, p));
        }
    }
    let operands = |n: usize| {
        let (b, k, _) = params[n];
        &incoming[b.index()][k]
    };
    for scc in strongly_connected(params.len(), |n| {
        operands(n)
            .iter()
            .filter_map(|a| number.get(a).copied())
            .collect()
    }) {
        let members: std::collections::HashSet<ValueId> =
            scc.iter().map(|&n| params[n].2).collect();
        let mut outside = scc
            .iter()
            .flat_map(|&n| operands(n).iter().copied())
            .filter(|a| !members.contains(a));
        let Some(first) = outside.next() else {
            continue;
        };
        if outside.all(|a| a == first) {
            for &n in &scc {
                let (b, k, p) = params[n];
                replace.insert(p, first);
                drop.push((b, k));
            }
        }
    }
}

/// The strongly connected components of the graph on `0..n` with edges `succ(v)`, of two
/// nodes or more (Tarjan's algorithm, iterative).
fn strongly_connected(n: usize, succ: impl Fn(usize) -> Vec<usize>) -> Vec<Vec<usize>> {
    const UNSEEN: usize = usize::MAX;
    let succs: Vec<Vec<usize>> = (0..n).map(&succ).collect();
    let mut index = vec![UNSEEN; n];
    let mut low = vec![0; n];
    let mut on_stack = vec![false; n];
    let mut stack: Vec<usize> = Vec::new();
    let mut next = 0;
    let mut out = Vec::new();
    for root in 0..n {
        if index[root] != UNSEEN {
            continue;
        }
        // (node, position in its successors)
        let mut work: Vec<(usize, usize)> = vec![(root, 0)];
        index[root] = next;
        low[root] = next;
        next += 1;
        stack.push(root);
        on_stack[root] = true;
        while let Some(&mut (v, ref mut i)) = work.last_mut() {
            if let Some(&w) = succs[v].get(*i) {
                *i += 1;
                if index[w] == UNSEEN {
                    index[w] = next;
                    low[w] = next;
                    next += 1;
                    stack.push(w);
                    on_stack[w] = true;
                    work.push((w, 0));
                } else if on_stack[w] {
                    low[v] = low[v].min(index[w]);
                }
                continue;
            }
            work.pop();
            if let Some(&(parent, _)) = work.last() {
                low[parent] = low[parent].min(low[v]);
            }
            if low[v] == index[v] {
                let mut component = Vec::new();
                loop {
                    let w = stack.pop().expect("on the stack");
                    on_stack[w] = false;
                    component.push(w);
                    if w == v {
                        break;
                    }
                }
                if component.len() > 1 {
                    out.push(component);
                }
            }
        }
    }
    out
}

/// For each block and parameter, the values its incoming edges pass.
pub(crate) fn incoming_args(f: &Function) -> Vec<Vec<Vec<ValueId>>> {
    let mut incoming: Vec<Vec<Vec<ValueId>>> = f
        .blocks
        .iter()
        .map(|b| vec![Vec::new(); b.params.len()])
        .collect();
    let reachable = crate::dom::DomTree::new(f);
    for (b, block) in f.blocks.iter().enumerate() {
        if !reachable.is_reachable(BlockId(b as u32)) {
            continue;
        }
        for e in block.term.edges() {
            for (k, &a) in e.args.iter().enumerate() {
                incoming[e.block.index()][k].push(a);
            }
        }
    }
    incoming
}

/// Removes parameter `k` of each listed block, and the matching argument of every edge into it.
pub fn remove_params(f: &mut Function, drop: &[(BlockId, usize)]) {
    let mut by_block: HashMap<BlockId, Vec<usize>> = HashMap::new();
    for &(b, k) in drop {
        by_block.entry(b).or_default().push(k);
    }
    for ks in by_block.values_mut() {
        ks.sort_unstable();
        ks.dedup();
    }
    let keep = |ks: &[usize], k: usize| ks.binary_search(&k).is_err();
    for block in &mut f.blocks {
        for e in block.term.edges_mut() {
            if let Some(ks) = by_block.get(&e.block) {
                let args = std::mem::take(&mut e.args);
                e.args = args
                    .into_iter()
                    .enumerate()
                    .filter(|(k, _)| keep(ks, *k))
                    .map(|(_, a)| a)
                    .collect();
            }
        }
    }
    for (b, ks) in &by_block {
        let params = std::mem::take(&mut f.blocks[b.index()].params);
        let kept: Vec<ValueId> = params
            .into_iter()
            .enumerate()
            .filter(|(k, _)| keep(ks, *k))
            .map(|(_, p)| p)
            .collect();
        for (k, &p) in kept.iter().enumerate() {
            f.values[p.index()].def = crate::ValueDef::Param {
                block: *b,
                index: k as u32,
            };
        }
        f.blocks[b.index()].params = kept;
    }
}
