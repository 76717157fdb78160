//! Block parameters that merge nothing: where every edge into a block passes the same value
//! for a parameter (or the parameter itself, around a loop), the parameter is that value.

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
            return;
        }
        let resolve = |mut v: ValueId| {
            let mut steps = 0;
            while let Some(&r) = replace.get(&v) {
                v = r;
                steps += 1;
                if steps > replace.len() {
                    break;
                }
            }
            v
        };
        f.replace_uses(resolve);
        remove_params(f, &drop);
    }
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
