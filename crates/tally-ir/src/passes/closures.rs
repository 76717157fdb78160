//! Closures that never exist: a closure the function makes whose block was inlined at every
//! `value…` send that got it, and that nothing else uses — no send, call or store takes it,
//! no return or branch reads it — is held only by frame states. Its `MakeBlock` becomes a
//! [`InstKind::VirtualBlock`]: no allocation where it was made; an exit whose frames hold it
//! makes it there (with the receiver and context the block would have had), the only place
//! the interpreter can see it.
//!
//! A closure that escapes only on some paths ([`sink`]) is made where those paths begin (the
//! block dominating every escape) and stays virtual on the others.

use std::collections::{HashMap, HashSet};

use crate::dom::DomTree;
use crate::{BlockId, FrameStateId, Function, InstId, InstKind, ValueId};

/// Moves the making of each closure that escapes (a send, call, store, return or branch
/// takes it) only below a branch to the start of the block `d` that dominates every escape,
/// so the paths that do not reach `d` never make it: the original `MakeBlock` keeps only
/// the frame states of those paths (for [`virtualize`] to make virtual), and the states
/// below `d` hold the object made there. Left where it is when `d` is in a loop the closure
/// is made outside of (one closure must stay one object), or when a frame state some path
/// from `d` reaches is also reached by a path that does not pass `d` (such a state would
/// need the virtual closure on one path and the made one on the other).
pub fn sink(f: &mut Function) {
    let dom = DomTree::new(f);
    let succs: Vec<Vec<BlockId>> = f.blocks.iter().map(|b| b.term.successors()).collect();
    // Each value's uses that are not frame states: the blocks they are in.
    let mut uses: HashMap<ValueId, Vec<BlockId>> = HashMap::new();
    // Each frame state's users (directly or as an outer state): their blocks.
    let mut state_users: HashMap<FrameStateId, Vec<BlockId>> = HashMap::new();
    let mut makes: Vec<(BlockId, InstId)> = Vec::new();
    for (b, block) in f.blocks.iter().enumerate() {
        let b = BlockId(b as u32);
        if !dom.is_reachable(b) {
            continue;
        }
        let states = block
            .insts
            .iter()
            .filter_map(|&i| f.insts[i.index()].state)
            .chain(block.term.state());
        for s in states {
            let mut next = Some(s);
            while let Some(k) = next {
                state_users.entry(k).or_default().push(b);
                next = f.states[k.index()].outer;
            }
        }
        for &i in &block.insts {
            let inst = &f.insts[i.index()];
            for v in inst.kind.operands() {
                uses.entry(v).or_default().push(b);
            }
            if matches!(inst.kind, InstKind::MakeBlock { .. }) {
                makes.push((b, i));
            }
        }
        for v in block.term.operands() {
            uses.entry(v).or_default().push(b);
        }
    }
    for (home, make) in makes {
        let Some(v) = f.insts[make.index()].result else {
            continue;
        };
        let Some(escapes) = uses.get(&v) else {
            continue;
        };
        let Some(d) = common_dominator(&dom, escapes) else {
            continue;
        };
        if d == home || reaches_avoiding(&succs, d, d, home) {
            continue;
        }
        let below_d = reachable_from(&succs, d);
        let mut made_below = Vec::new();
        let mut movable = true;
        for (k, state) in f.states.iter().enumerate() {
            if !state.values().any(|x| x == v) {
                continue;
            }
            let id = FrameStateId(k as u32);
            let users = state_users.get(&id).map(Vec::as_slice).unwrap_or_default();
            if !users.is_empty() && users.iter().all(|&u| dom.dominates(d, u)) {
                made_below.push(id);
            } else if users.iter().any(|u| below_d.contains(u)) {
                movable = false;
                break;
            }
        }
        if !movable {
            continue;
        }
        let original = f.insts[make.index()].clone();
        let Some(made) = f.push_inst(
            d,
            original.kind.clone(),
            original.state,
            f.blocks[d.index()].bci,
        ) else {
            continue;
        };
        // `push_inst` appended it: it goes first in `d`, before every use there.
        let insts = &mut f.blocks[d.index()].insts;
        let new = insts.pop().expect("the instruction just pushed");
        insts.insert(0, new);
        for s in made_below {
            f.states[s.index()].map_values(|x| if x == v { made } else { x });
        }
        let swap = |x: ValueId| if x == v { made } else { x };
        for b in escapes.iter().copied().collect::<HashSet<_>>() {
            let block = &mut f.blocks[b.index()];
            for &i in &block.insts {
                if i != new {
                    f.insts[i.index()].kind.map_operands(swap);
                }
            }
            block.term.map_operands(swap);
        }
    }
}

/// The block that dominates every block of `blocks` and is dominated by every other such.
fn common_dominator(dom: &DomTree, blocks: &[BlockId]) -> Option<BlockId> {
    let (&first, rest) = blocks.split_first()?;
    let mut d = first;
    for &b in rest {
        while !dom.dominates(d, b) {
            d = dom.idom(d).filter(|&p| p != d)?;
        }
    }
    Some(d)
}

/// Whether some path of one edge or more from `from` reaches `to` without passing `avoid`.
fn reaches_avoiding(succs: &[Vec<BlockId>], from: BlockId, to: BlockId, avoid: BlockId) -> bool {
    let mut seen = HashSet::new();
    let mut work: Vec<BlockId> = succs[from.index()].clone();
    while let Some(b) = work.pop() {
        if b == to {
            return true;
        }
        if b == avoid || !seen.insert(b) {
            continue;
        }
        work.extend(succs[b.index()].iter().copied());
    }
    false
}

/// `from` and every block a path from it reaches.
fn reachable_from(succs: &[Vec<BlockId>], from: BlockId) -> HashSet<BlockId> {
    let mut seen = HashSet::from([from]);
    let mut work = vec![from];
    while let Some(b) = work.pop() {
        for &s in &succs[b.index()] {
            if seen.insert(s) {
                work.push(s);
            }
        }
    }
    seen
}

/// Answers whether a closure became virtual.
pub fn virtualize(f: &mut Function) -> bool {
    let mut changed = false;
    let mut used: HashSet<ValueId> = HashSet::new();
    for block in &f.blocks {
        for &i in &block.insts {
            used.extend(f.insts[i.index()].kind.operands());
        }
        used.extend(block.term.operands());
    }
    for block in &f.blocks {
        for &i in &block.insts {
            let inst = &mut f.insts[i.index()];
            let InstKind::MakeBlock {
                code,
                receiver,
                ctx,
            } = inst.kind
            else {
                continue;
            };
            if inst.result.is_some_and(|r| !used.contains(&r)) {
                inst.kind = InstKind::VirtualBlock {
                    code,
                    receiver,
                    ctx,
                };
                // Nothing happens here any more that could deoptimize or collect.
                inst.state = None;
                changed = true;
            }
        }
    }
    changed
}
