//! Dead code: blocks no path reaches, instructions whose results nothing uses and that
//! neither write, call nor allocate, block parameters nothing reads, and frame states no
//! instruction carries. Values a live frame state holds are live, and those of the states it
//! is inlined into: deoptimization rebuilds their frames too.

use std::collections::HashSet;

use crate::dom::DomTree;
use crate::passes::params::remove_params;
use crate::{BlockId, FrameStateId, Function, Terminator, ValueDef, ValueId};

pub fn dce(f: &mut Function) {
    drop_unreachable(f);
    drop_dead_values(f);
    compact_states(f);
}

/// Removes the blocks no path from the entry reaches, renumbering the rest in order.
fn drop_unreachable(f: &mut Function) {
    let dom = DomTree::new(f);
    let n = f.blocks.len();
    let mut new_id: Vec<Option<BlockId>> = vec![None; n];
    let mut next = 0u32;
    for (b, slot) in new_id.iter_mut().enumerate() {
        if dom.is_reachable(BlockId(b as u32)) {
            *slot = Some(BlockId(next));
            next += 1;
        }
    }
    if next as usize == n {
        return;
    }
    let old = std::mem::take(&mut f.blocks);
    for (b, mut block) in old.into_iter().enumerate() {
        let Some(id) = new_id[b] else { continue };
        for e in block.term.edges_mut() {
            e.block = new_id[e.block.index()].expect("an edge from a reachable block");
        }
        for (k, &p) in block.params.iter().enumerate() {
            f.values[p.index()].def = ValueDef::Param {
                block: id,
                index: k as u32,
            };
        }
        f.blocks.push(block);
    }
}

/// Marks what is live from the instructions that must stay and the terminators, then drops
/// the rest: instructions, and parameters with their edges' arguments.
fn drop_dead_values(f: &mut Function) {
    let mut live: HashSet<ValueId> = HashSet::new();
    let mut work: Vec<ValueId> = Vec::new();
    let mark = |v: ValueId, live: &mut HashSet<ValueId>, work: &mut Vec<ValueId>| {
        if live.insert(v) {
            work.push(v);
        }
    };
    for block in &f.blocks {
        for &i in &block.insts {
            let inst = &f.insts[i.index()];
            if !inst.kind.removable_if_unused() {
                for v in inst.kind.operands() {
                    mark(v, &mut live, &mut work);
                }
                if let Some(s) = inst.state {
                    for v in f.chain_values(s) {
                        mark(v, &mut live, &mut work);
                    }
                }
                if let Some(r) = inst.result {
                    mark(r, &mut live, &mut work);
                }
            }
        }
        match &block.term {
            Terminator::Branch { cond, .. } => mark(*cond, &mut live, &mut work),
            Terminator::Return(v) | Terminator::ReturnNonLocal { value: v, .. } => {
                mark(*v, &mut live, &mut work)
            }
            _ => {}
        }
        if let Some(s) = block.term.state() {
            for v in f.chain_values(s) {
                mark(v, &mut live, &mut work);
            }
        }
    }
    // Which edges pass each block's parameter: a live parameter makes those arguments live.
    let mut into: Vec<Vec<(usize, usize)>> = vec![Vec::new(); f.blocks.len()];
    for (b, block) in f.blocks.iter().enumerate() {
        for (k, e) in block.term.edges().iter().enumerate() {
            into[e.block.index()].push((b, k));
        }
    }
    while let Some(v) = work.pop() {
        match f.def(v) {
            ValueDef::Inst(i) => {
                let inst = &f.insts[i.index()];
                for u in inst.kind.operands() {
                    mark(u, &mut live, &mut work);
                }
                if let Some(s) = inst.state {
                    for u in f.chain_values(s) {
                        mark(u, &mut live, &mut work);
                    }
                }
            }
            ValueDef::Param { block, index } => {
                for &(from, k) in &into[block.index()] {
                    let edges = f.blocks[from].term.edges();
                    if let Some(&a) = edges[k].args.get(index as usize) {
                        mark(a, &mut live, &mut work);
                    }
                }
            }
        }
    }
    for block in &mut f.blocks {
        let insts = &f.insts;
        block.insts.retain(|&i| {
            let inst = &insts[i.index()];
            !inst.kind.removable_if_unused() || inst.result.is_some_and(|r| live.contains(&r))
        });
    }
    let mut dead_params = Vec::new();
    for (b, block) in f.blocks.iter().enumerate().skip(1) {
        for (k, p) in block.params.iter().enumerate() {
            if !live.contains(p) {
                dead_params.push((BlockId(b as u32), k));
            }
        }
    }
    remove_params(f, &dead_params);
}

/// Renumbers the frame states instructions and terminators still carry (and their outer
/// states), dropping the rest.
fn compact_states(f: &mut Function) {
    let mut used: Vec<bool> = vec![false; f.states.len()];
    let mut work: Vec<FrameStateId> = Vec::new();
    for block in &f.blocks {
        for &i in &block.insts {
            work.extend(f.insts[i.index()].state);
        }
        work.extend(block.term.state());
    }
    while let Some(s) = work.pop() {
        if !used[s.index()] {
            used[s.index()] = true;
            work.extend(f.states[s.index()].outer);
        }
    }
    if used.iter().all(|&u| u) {
        return;
    }
    let mut new_id: Vec<Option<FrameStateId>> = vec![None; used.len()];
    let mut next = 0;
    for (k, &u) in used.iter().enumerate() {
        if u {
            new_id[k] = Some(FrameStateId(next));
            next += 1;
        }
    }
    let renumber = |s: FrameStateId| new_id[s.index()].expect("a used state");
    let old = std::mem::take(&mut f.states);
    for (k, mut state) in old.into_iter().enumerate() {
        if used[k] {
            state.outer = state.outer.map(renumber);
            f.states.push(state);
        }
    }
    for block in &mut f.blocks {
        for &i in &block.insts {
            let inst = &mut f.insts[i.index()];
            inst.state = inst.state.map(renumber);
        }
        match &mut block.term {
            Terminator::ReturnNonLocal { state, .. } | Terminator::Deopt(state) => {
                *state = renumber(*state)
            }
            _ => {}
        }
    }
}
