//! Contexts that never exist: an inlined activation's context (the slots its blocks share
//! with it) that only its own code, the blocks inlined from it and frame states use — no
//! closure made from it is allocated, no call or store takes it — becomes a
//! [`InstKind::VirtualContext`]. Its slots become SSA values (a load is the value last
//! stored on the path to it; where paths merge, a block parameter, which
//! [`crate::passes::params::prune`] removes where it merges one value), and each frame
//! state where it is live names what its slots hold there, so an exit can make it with
//! those values: the only place the interpreter can see it.
//!
//! The compiled code's own context is not made virtual: the interpreter may have made it
//! (a frame it hands over) and the frame holds it for the whole activation.

use std::collections::{HashMap, HashSet};

use tally_heap::Value;

use crate::dom::DomTree;
use crate::{BlockId, FrameStateId, Function, InstId, InstKind, ScopeId, Terminator, Ty, ValueId};

/// One context to make virtual: where it is made and the blocks where it lives (those its
/// making dominates, in its activation or the ones inlined into it).
struct Candidate {
    value: ValueId,
    inst: InstId,
    made_in: BlockId,
    size: u16,
    outer: Option<ValueId>,
    region: HashSet<BlockId>,
}

/// Makes every inlined activation's context that does not escape virtual.
pub fn virtualize(f: &mut Function) {
    fold_known_contexts(f);
    let dom = DomTree::new(f);
    let mut candidates = find(f, &dom);
    // A context stays real when one made from it (an inlined block's, its outer this one)
    // does: repeat until no candidate depends on one that was dropped.
    loop {
        let kept: HashSet<ValueId> = candidates.iter().map(|c| c.value).collect();
        let before = candidates.len();
        candidates.retain(|c| stays_inside(f, &dom, c, &kept));
        if candidates.len() == before {
            break;
        }
    }
    if candidates.is_empty() {
        return;
    }
    let mut replace: HashMap<ValueId, ValueId> = HashMap::new();
    for c in &candidates {
        rewrite(f, c, &mut replace);
    }
    f.replace_through(&replace);
}

/// The outer context of a context the function makes, and the context of a closure it
/// makes, are the values they were made with: reads of them become those values, so a load
/// through one is a load of the context itself (which the rewrite then sees).
fn fold_known_contexts(f: &mut Function) {
    let mut known: HashMap<ValueId, ValueId> = HashMap::new();
    let mut folded: HashSet<InstId> = HashSet::new();
    for (i, inst) in f.insts.iter().enumerate() {
        let (Some(r), Some(from)) = (
            inst.result,
            match &inst.kind {
                InstKind::ContextOuter(c) | InstKind::ClosureContext(c) => Some(*c),
                _ => None,
            },
        ) else {
            continue;
        };
        let made_with = match (&inst.kind, f.def_inst(from).map(|i| &i.kind)) {
            (
                InstKind::ContextOuter(_),
                Some(InstKind::NewContext { outer, .. } | InstKind::VirtualContext { outer, .. }),
            ) => *outer,
            (
                InstKind::ClosureContext(_),
                Some(InstKind::MakeBlock { ctx, .. } | InstKind::VirtualBlock { ctx, .. }),
            ) => *ctx,
            _ => None,
        };
        if let Some(m) = made_with {
            known.insert(r, m);
            folded.insert(InstId(i as u32));
        }
    }
    if !known.is_empty() {
        f.replace_through(&known);
        // Their results are unused now; gone, they no longer read the contexts.
        for block in &mut f.blocks {
            block.insts.retain(|i| !folded.contains(i));
        }
    }
}

/// The contexts inlined activations make, each with its region.
fn find(f: &Function, dom: &DomTree) -> Vec<Candidate> {
    let mut out = Vec::new();
    for (b, block) in f.blocks.iter().enumerate() {
        let made_in = BlockId(b as u32);
        if block.scope == ScopeId(0) || !dom.is_reachable(made_in) {
            continue;
        }
        for &i in &block.insts {
            let inst = &f.insts[i.index()];
            let (InstKind::NewContext { size, outer }, Some(value)) = (&inst.kind, inst.result)
            else {
                continue;
            };
            let inside = descendants(f, block.scope);
            let region = (0..f.blocks.len() as u32)
                .map(BlockId)
                .filter(|&r| {
                    dom.is_reachable(r)
                        && dom.dominates(made_in, r)
                        && inside.contains(&f.blocks[r.index()].scope)
                })
                .collect();
            out.push(Candidate {
                value,
                inst: i,
                made_in,
                size: *size,
                outer: *outer,
                region,
            });
        }
    }
    out
}

/// `scope` and every scope inlined into it, at any depth.
fn descendants(f: &Function, scope: ScopeId) -> HashSet<ScopeId> {
    let mut out = HashSet::from([scope]);
    // Scopes come after their parents.
    for (k, s) in f.scopes.iter().enumerate() {
        if let Some((parent, _)) = s.parent {
            if out.contains(&parent) {
                out.insert(ScopeId(k as u32));
            }
        }
    }
    out
}

/// Whether `c` can be virtual: every use is a load or store of its slots, the context of a
/// virtual closure, the outer of a context in `kept`, or a frame state's context — all
/// inside its region, which only its making enters; and no frame state outside the region
/// refers to it.
fn stays_inside(f: &Function, dom: &DomTree, c: &Candidate, kept: &HashSet<ValueId>) -> bool {
    let v = c.value;
    for (b, block) in f.blocks.iter().enumerate() {
        let b = BlockId(b as u32);
        if !dom.is_reachable(b) {
            continue;
        }
        let inside = c.region.contains(&b);
        for &i in &block.insts {
            let inst = &f.insts[i.index()];
            if let Some(s) = inst.state {
                if !inside && chain_refers_to(f, s, v) {
                    return false;
                }
            }
            if !inst.kind.operands().contains(&v) {
                continue;
            }
            let allowed = match &inst.kind {
                InstKind::LoadContext { .. } => true,
                InstKind::StoreContext { value, .. } => *value != v,
                InstKind::VirtualBlock { receiver, .. } => *receiver != v,
                InstKind::NewContext { .. } => inst.result.is_some_and(|r| kept.contains(&r)),
                _ => false,
            };
            if !allowed || !inside {
                return false;
            }
        }
        if block.term.operands().contains(&v) {
            return false;
        }
        if let Some(s) = block.term.state() {
            if !inside && chain_refers_to(f, s, v) {
                return false;
            }
        }
        for target in block.term.successors() {
            // Only its making enters the region: no way back to it (it makes one context
            // per activation), no way in from outside past it.
            let into = c.region.contains(&target);
            let entered = if target == c.made_in {
                inside
            } else {
                into && !inside
            };
            if entered {
                return false;
            }
        }
    }
    // Contexts never sit among a frame's locals or operands.
    !f.states
        .iter()
        .any(|s| s.locals.iter().flatten().chain(&s.stack).any(|&x| x == v))
}

/// Whether an exit at state `s` would have to make `v`: a state of its chain has it as its
/// context, or holds a virtual closure or context made over it.
fn chain_refers_to(f: &Function, s: FrameStateId, v: ValueId) -> bool {
    let mut next = Some(s);
    while let Some(k) = next {
        let state = &f.states[k.index()];
        if state
            .context
            .iter()
            .chain(state.closure.iter())
            .any(|&x| reaches(f, x, v))
        {
            return true;
        }
        next = state.outer;
    }
    false
}

/// Whether `x` is `v`, or a closure or context whose contexts lead out to it.
fn reaches(f: &Function, mut x: ValueId, v: ValueId) -> bool {
    loop {
        if x == v {
            return true;
        }
        let next = match f.def_inst(x).map(|i| &i.kind) {
            Some(InstKind::VirtualBlock { ctx, .. } | InstKind::MakeBlock { ctx, .. }) => *ctx,
            Some(InstKind::NewContext { outer, .. } | InstKind::VirtualContext { outer, .. }) => {
                *outer
            }
            _ => None,
        };
        match next {
            Some(n) => x = n,
            None => return false,
        }
    }
}

/// Makes `c` virtual: its loads become the values stored last (`replace` maps each load's
/// result to one), its region's blocks get a parameter per slot, and each frame state in
/// the region names what the slots hold there.
fn rewrite(f: &mut Function, c: &Candidate, replace: &mut HashMap<ValueId, ValueId>) {
    let size = c.size as usize;
    // Contexts start with nil in every slot.
    let nil = {
        let id = InstId(f.insts.len() as u32);
        let bci = f.insts[c.inst.index()].bci;
        f.push_inst(
            c.made_in,
            InstKind::Const(Value::NIL),
            Some(Ty::Word),
            None,
            bci,
        )
        .expect("a value");
        let insts = &mut f.blocks[c.made_in.index()].insts;
        insts.pop();
        let at = insts.iter().position(|&i| i == c.inst).expect("the making");
        insts.insert(at, id);
        f.insts[id.index()].result.expect("a value")
    };
    let mut region: Vec<BlockId> = c.region.iter().copied().collect();
    region.sort();
    let mut at_entry: HashMap<BlockId, Vec<ValueId>> = HashMap::new();
    for &b in &region {
        if b != c.made_in {
            let params = (0..size).map(|_| f.add_param(b, Ty::Word)).collect();
            at_entry.insert(b, params);
        }
    }
    for &b in &region {
        let mut slots: Option<Vec<ValueId>> = at_entry.get(&b).cloned();
        let mut kept = Vec::new();
        for i in f.blocks[b.index()].insts.clone() {
            let inst = &f.insts[i.index()];
            let mut drop = false;
            match inst.kind.clone() {
                _ if i == c.inst => {
                    slots = Some(vec![nil; size]);
                    let inst = &mut f.insts[i.index()];
                    inst.kind = InstKind::VirtualContext {
                        size: c.size,
                        outer: c.outer,
                    };
                    // Nothing is allocated here any more.
                    inst.state = None;
                }
                InstKind::LoadContext { ctx, index } if ctx == c.value => {
                    let now = slots.as_ref().expect("loads after the making")[index as usize];
                    replace.insert(inst.result.expect("a value"), now);
                    drop = true;
                }
                InstKind::StoreContext { ctx, index, value } if ctx == c.value => {
                    slots.as_mut().expect("stores after the making")[index as usize] = value;
                    drop = true;
                }
                _ => {
                    if let (Some(s), Some(now)) = (inst.state, &slots) {
                        let s = annotate(f, s, c.value, now);
                        f.insts[i.index()].state = Some(s);
                    }
                }
            }
            if !drop {
                kept.push(i);
            }
        }
        f.blocks[b.index()].insts = kept;
        let Some(now) = slots else { continue };
        if let Some(s) = f.blocks[b.index()].term.state() {
            let s = annotate(f, s, c.value, &now);
            match &mut f.blocks[b.index()].term {
                Terminator::ReturnNonLocal { state, .. } | Terminator::Deopt(state) => *state = s,
                _ => {}
            }
        }
        for edge in f.blocks[b.index()].term.edges_mut() {
            if at_entry.contains_key(&edge.block) {
                edge.args.extend_from_slice(&now);
            }
        }
    }
}

/// State `s` naming `slots` as what `ctx`'s slots hold; a copy of it when it already
/// names other values for them (a state some other point uses).
fn annotate(f: &mut Function, s: FrameStateId, ctx: ValueId, slots: &[ValueId]) -> FrameStateId {
    let state = &f.states[s.index()];
    match state.virtuals.iter().find(|(c, _)| *c == ctx) {
        Some((_, held)) if held == slots => s,
        Some(_) => {
            let mut copy = state.clone();
            for (c, held) in &mut copy.virtuals {
                if *c == ctx {
                    *held = slots.to_vec();
                }
            }
            f.add_state(copy)
        }
        None => {
            f.states[s.index()].virtuals.push((ctx, slots.to_vec()));
            s
        }
    }
}
