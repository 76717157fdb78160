//! Contexts that never exist: an inlined activation's context (the slots its blocks share
//! with it) that only its own code, the blocks inlined from it and frame states use — no
//! closure made from it is allocated, no call or store takes it — becomes a
//! [`InstKind::VirtualContext`]. Its slots become SSA values (a load is the value last
//! stored on the path to it; where paths merge, a block parameter, which
//! [`crate::passes::params::prune`] removes where it merges one value), and each frame
//! state where it is live names what its slots hold there, so an exit can make it with
//! those values: the only place the interpreter can see it.
//!
//! The function's own activation's context is a candidate too, unless the function has
//! on-stack-replacement entries: those take over a context the interpreter made and filled,
//! which their loops then carry. An exit makes the virtual one the frame's
//! (`Vm::new_home_context`: with the frame index a method's context holds for non-local
//! returns), in place of one a dispatcher's set-up may have made, which the code never
//! uses.

use std::collections::{HashMap, HashSet};

use super::slots::{self, Slots};
use crate::dom::DomTree;
use crate::{BlockId, FrameStateId, Function, InstId, InstKind, ScopeId, ValueId};

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

/// Makes every context that does not escape virtual.
/// Answers whether a context became virtual.
pub fn virtualize(f: &mut Function) -> bool {
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
        return false;
    }
    let mut replace: HashMap<ValueId, ValueId> = HashMap::new();
    for c in &candidates {
        rewrite(f, c, &mut replace);
    }
    f.replace_through(&replace);
    true
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

/// The contexts activations make (the function's own only without entries at loop heads),
/// each with its region.
fn find(f: &Function, dom: &DomTree) -> Vec<Candidate> {
    let mut out = Vec::new();
    let own_too = f.osr_entries().is_empty();
    for (b, block) in f.blocks.iter().enumerate() {
        let made_in = BlockId(b as u32);
        if (block.scope == ScopeId(0) && !own_too) || !dom.is_reachable(made_in) {
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

/// Whether an exit at state `s` would have to make `v`: a state of its chain holds it, or a
/// closure or context made over it, anywhere: as its context or closure, or among its
/// locals and operands (a block an inlined method made and answered, on its caller's
/// operand stack after that method's region ended).
fn chain_refers_to(f: &Function, s: FrameStateId, v: ValueId) -> bool {
    let mut next = Some(s);
    while let Some(k) = next {
        let state = &f.states[k.index()];
        if state.values().any(|x| reaches(f, x, v)) {
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

/// Makes `c` virtual ([`slots::replace`]): its loads become the values stored last.
fn rewrite(f: &mut Function, c: &Candidate, replace: &mut HashMap<ValueId, ValueId>) {
    let v = c.value;
    let made = Slots {
        value: v,
        inst: c.inst,
        made_in: c.made_in,
        size: c.size as usize,
        region: &c.region,
        virtual_kind: InstKind::VirtualContext {
            size: c.size,
            outer: c.outer,
        },
    };
    slots::replace(
        f,
        &made,
        replace,
        |k| match *k {
            InstKind::LoadContext { ctx, index } if ctx == v => Some(index),
            _ => None,
        },
        |k| match *k {
            InstKind::StoreContext { ctx, index, value } if ctx == v => Some((index, value)),
            _ => None,
        },
    );
}
