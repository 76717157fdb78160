//! Partial escape analysis and scalar replacement (after Stadler, Würthinger and
//! Mössenböck, CGO 2014): a plain object the function makes ([`InstKind::NewObject`]) is
//! virtual — its fields SSA values, `==` with it known (a new object is identical only to
//! itself), each frame state where it is live naming what its fields hold, so an exit can
//! make it — until it escapes: a send, call or return takes it, or a store puts it into the
//! heap. There it is made ([`InstKind::Materialize`], with the fields it holds at that
//! point) and is a real object on from there. An object that never escapes is never
//! allocated; one that escapes on a rare path is allocated on that path only, and gets its
//! identity hash there, which it keeps.
//!
//! One object must stay one object: the object is left as it is (allocated where it is
//! made) when a path from an escape could reach a use of it without passing the escape's
//! block first (a merge with a path where it is still virtual, or a loop around the escape),
//! since that use would need it virtual on one path and real on the other.

use std::collections::{HashMap, HashSet};

use super::slots;
use crate::dom::{reverse_postorder, DomTree};
use crate::{BlockId, FrameStateId, Function, InstId, InstKind, Terminator, Ty, ValueId};

struct Candidate {
    value: ValueId,
    inst: InstId,
    made_in: BlockId,
    class: ValueId,
    shape: tally_vm::jit::PlainShape,
    region: HashSet<BlockId>,
}

/// Makes every object the function makes virtual up to where it escapes: the last made
/// first, so that an object stored into one made after it (a point into a line) is, once
/// that one is virtual, a field value the merges pass on ([`super::params::prune`] turns
/// the parameters that pass it alone back into it) rather than a stored one.
pub fn virtualize(f: &mut Function) {
    let dom = DomTree::new(f);
    let mut candidates = find(f, &dom);
    let position: HashMap<BlockId, usize> = reverse_postorder(f)
        .into_iter()
        .enumerate()
        .map(|(k, b)| (b, k))
        .collect();
    candidates.sort_by_key(|c| {
        let at = f.blocks[c.made_in.index()]
            .insts
            .iter()
            .position(|&i| i == c.inst);
        std::cmp::Reverse((position[&c.made_in], at))
    });
    for mut c in candidates {
        // An earlier candidate's parameters pruned may have renamed the class object.
        if let InstKind::NewObject { class, .. } = f.insts[c.inst.index()].kind {
            c.class = class;
        }
        known_class(f, &c);
        if let Some(made_at) = materializing_blocks(f, &dom, &c) {
            let mut replace: HashMap<ValueId, ValueId> = HashMap::new();
            rewrite(f, &dom, &c, &made_at, &mut replace);
            f.replace_through(&replace);
            super::params::prune(f);
        }
    }
}

/// The objects the function makes, each with its region: the blocks its making dominates.
fn find(f: &Function, dom: &DomTree) -> Vec<Candidate> {
    let mut out = Vec::new();
    for (b, block) in f.blocks.iter().enumerate() {
        let made_in = BlockId(b as u32);
        if !dom.is_reachable(made_in) {
            continue;
        }
        for &i in &block.insts {
            let inst = &f.insts[i.index()];
            let (InstKind::NewObject { class, shape }, Some(value)) = (&inst.kind, inst.result)
            else {
                continue;
            };
            let region = (0..f.blocks.len() as u32)
                .map(BlockId)
                .filter(|&r| dom.is_reachable(r) && dom.dominates(made_in, r))
                .collect();
            out.push(Candidate {
                value,
                inst: i,
                made_in,
                class: *class,
                shape: *shape,
                region,
            });
        }
    }
    out
}

/// Whether `kind` uses object `v` (of `shape`) without taking it out of the function: its
/// own fields' loads and stores, `==`, and tests of its class or of nil.
fn keeps_virtual(kind: &InstKind, v: ValueId, shape: tally_vm::jit::PlainShape) -> bool {
    match *kind {
        InstKind::LoadField { index, .. } => index < shape.fields,
        InstKind::StoreField { obj, index, value } => {
            obj == v && value != v && index < shape.fields
        }
        InstKind::Identical(..) | InstKind::ClassIs { .. } | InstKind::NilTest { .. } => true,
        _ => false,
    }
}

/// Class guards of `c`'s object pass: it has the class it was made of. (Folding knew that
/// of the object where it was made; this one may have come out of another's field, whose
/// load was the value stored there once that other object was made virtual.)
fn known_class(f: &mut Function, c: &Candidate) {
    let mut known = HashMap::new();
    let mut gone = HashSet::new();
    for (i, inst) in f.insts.iter().enumerate() {
        if let (InstKind::GuardClass { value, class, .. }, Some(r)) = (&inst.kind, inst.result) {
            if *value == c.value && *class == c.shape.class {
                known.insert(r, c.value);
                gone.insert(InstId(i as u32));
            }
        }
    }
    if known.is_empty() {
        return;
    }
    f.replace_through(&known);
    for block in &mut f.blocks {
        block.insts.retain(|i| !gone.contains(i));
    }
}

/// Whether block `b` uses `v` or has a frame state that holds it.
fn mentions(f: &Function, b: BlockId, v: ValueId) -> bool {
    let block = &f.blocks[b.index()];
    block.insts.iter().any(|&i| {
        let inst = &f.insts[i.index()];
        inst.kind.operands().contains(&v)
            || inst.state.is_some_and(|s| f.chain_values(s).contains(&v))
    }) || block.term.operands().contains(&v)
        || block
            .term
            .state()
            .is_some_and(|s| f.chain_values(s).contains(&v))
}

/// The blocks where `c` escapes and is made (those an earlier escape's block does not
/// dominate), or `None` when it must stay a real allocation (see the module docs).
fn materializing_blocks(f: &Function, dom: &DomTree, c: &Candidate) -> Option<HashSet<BlockId>> {
    let v = c.value;
    let mut escapes: HashSet<BlockId> = HashSet::new();
    for &b in &c.region {
        let block = &f.blocks[b.index()];
        let inst_escape = block.insts.iter().any(|&i| {
            let kind = &f.insts[i.index()].kind;
            kind.operands().contains(&v) && !keeps_virtual(kind, v, c.shape)
        });
        if inst_escape || block.term.operands().contains(&v) {
            escapes.insert(b);
        }
    }
    let made_at: HashSet<BlockId> = escapes
        .iter()
        .copied()
        .filter(|&e| !escapes.iter().any(|&o| o != e && dom.dominates(o, e)))
        .collect();
    for &e in &made_at {
        // Everything an escape reaches before the object is made again must be an escape's
        // block's, with the object made once: dominated by it, and not around a loop.
        let mut seen: HashSet<BlockId> = HashSet::new();
        let mut work: Vec<BlockId> = f.blocks[e.index()].term.successors();
        while let Some(b) = work.pop() {
            if b == c.made_in || !c.region.contains(&b) || !seen.insert(b) {
                continue;
            }
            if b == e || (!dom.dominates(e, b) && mentions(f, b, v)) {
                return None;
            }
            work.extend(f.blocks[b.index()].term.successors());
        }
    }
    Some(made_at)
}

/// Rewrites `c`'s region, dominators first: virtual where no escape's block dominates the
/// point, made at the first escape and real from there.
fn rewrite(
    f: &mut Function,
    dom: &DomTree,
    c: &Candidate,
    made_at: &HashSet<BlockId>,
    replace: &mut HashMap<ValueId, ValueId>,
) {
    let v = c.value;
    let size = c.shape.fields as usize;
    let nil = slots::nil_before(f, c.made_in, c.inst);
    let order: Vec<BlockId> = reverse_postorder(f)
        .into_iter()
        .filter(|b| c.region.contains(b))
        .collect();
    // The block whose escape makes it, for each block that starts with it made.
    let made_before = |b: BlockId| {
        made_at
            .iter()
            .copied()
            .find(|&e| e != b && dom.dominates(e, b))
    };
    let mut at_entry: HashMap<BlockId, Vec<ValueId>> = HashMap::new();
    for &b in &order {
        if b != c.made_in && made_before(b).is_none() {
            let params = (0..size).map(|_| f.add_param(b, Ty::Word)).collect();
            at_entry.insert(b, params);
        }
    }
    let mut real: HashMap<BlockId, ValueId> = HashMap::new();
    let mut states = StateCopies::default();
    for &b in &order {
        // `Err(made)`: the real object; `Ok(slots)`: what the virtual one's fields hold.
        let mut now: Option<Result<Vec<ValueId>, ValueId>> = match made_before(b) {
            Some(e) => Some(Err(real[&e])),
            None => at_entry.get(&b).cloned().map(Ok),
        };
        let mut kept = Vec::new();
        for i in f.blocks[b.index()].insts.clone() {
            if i == c.inst {
                now = Some(Ok(vec![nil; size]));
                let inst = &mut f.insts[i.index()];
                inst.kind = InstKind::VirtualObject {
                    class: c.class,
                    shape: c.shape,
                };
                inst.state = None;
                kept.push(i);
                continue;
            }
            let kind = f.insts[i.index()].kind.clone();
            let uses = kind.operands().contains(&v);
            if let Some(Ok(slots)) = &mut now {
                if uses && keeps_virtual(&kind, v, c.shape) {
                    let result = f.insts[i.index()].result;
                    match kind {
                        InstKind::LoadField { index, .. } => {
                            replace.insert(result.expect("a value"), slots[index as usize]);
                        }
                        InstKind::StoreField { index, value, .. } => slots[index as usize] = value,
                        InstKind::Identical(a, b) => {
                            f.insts[i.index()].kind = InstKind::FlagConst(a == b);
                            f.insts[i.index()].state = None;
                            kept.push(i);
                        }
                        InstKind::ClassIs { class, .. } => {
                            f.insts[i.index()].kind = InstKind::FlagConst(class == c.shape.class);
                            kept.push(i);
                        }
                        // An object is not nil; its class was loaded when the compile
                        // found the nil tests standard, so it does not redefine them.
                        InstKind::NilTest { is_nil, .. } => {
                            f.insts[i.index()].kind = InstKind::FlagConst(!is_nil);
                            f.insts[i.index()].state = None;
                            kept.push(i);
                        }
                        _ => unreachable!("keeps_virtual answers these only"),
                    }
                    continue;
                }
                if uses {
                    let m = materialize(f, c, slots, f.insts[i.index()].bci, &mut kept, b);
                    real.insert(b, m);
                    now = Some(Err(m));
                } else if let Some(s) = f.insts[i.index()].state {
                    if f.chain_values(s).contains(&v) {
                        let s = annotate(f, s, v, slots);
                        f.insts[i.index()].state = Some(s);
                    }
                }
            }
            if let Some(Err(m)) = now {
                let inst = &mut f.insts[i.index()];
                inst.kind.map_operands(|x| if x == v { m } else { x });
                if let Some(s) = inst.state {
                    let s = states.with_real(f, s, v, m);
                    f.insts[i.index()].state = Some(s);
                }
            }
            kept.push(i);
        }
        f.blocks[b.index()].insts = kept;
        let Some(mut now) = now else { continue };
        if let Ok(slots) = &now {
            if f.blocks[b.index()].term.operands().contains(&v) {
                let bci = f.blocks[b.index()].bci;
                let mut insts = std::mem::take(&mut f.blocks[b.index()].insts);
                let m = materialize(f, c, slots, bci, &mut insts, b);
                f.blocks[b.index()].insts = insts;
                real.insert(b, m);
                now = Err(m);
            }
        }
        let mut term = f.blocks[b.index()].term.clone();
        match &now {
            Ok(slots) => {
                if let Some(s) = term.state().filter(|&s| f.chain_values(s).contains(&v)) {
                    set_state(&mut term, annotate(f, s, v, slots));
                }
            }
            Err(m) => {
                term.map_operands(|x| if x == v { *m } else { x });
                if let Some(s) = term.state() {
                    set_state(&mut term, states.with_real(f, s, v, *m));
                }
            }
        }
        for edge in term.edges_mut() {
            if at_entry.contains_key(&edge.block) {
                match &now {
                    Ok(slots) => edge.args.extend_from_slice(slots),
                    // A block no escape's dominates, where the object is dead (see
                    // `materializing_blocks`): its fields' values do not matter there.
                    Err(_) => edge.args.extend(std::iter::repeat_n(nil, size)),
                }
            }
        }
        f.blocks[b.index()].term = term;
    }
}

/// Appends to `insts` (block `b`'s, being rebuilt) the making of `c` with `slots` in its
/// fields; answers the object.
fn materialize(
    f: &mut Function,
    c: &Candidate,
    slots: &[ValueId],
    bci: u32,
    insts: &mut Vec<InstId>,
    b: BlockId,
) -> ValueId {
    let kind = InstKind::Materialize {
        class: c.class,
        shape: c.shape,
        fields: slots.to_vec(),
    };
    let m = f.push_inst(b, kind, None, bci).expect("a value");
    let made = f.blocks[b.index()].insts.pop().expect("the making");
    insts.push(made);
    m
}

fn set_state(term: &mut Terminator, s: FrameStateId) {
    if let Terminator::ReturnNonLocal { state, .. } | Terminator::Deopt(state) = term {
        *state = s;
    }
}

/// State `s` naming `slots` as what virtual `v`'s fields hold.
fn annotate(f: &mut Function, s: FrameStateId, v: ValueId, slots: &[ValueId]) -> FrameStateId {
    slots::annotate(f, s, v, slots)
}

/// Copies of frame states (and their outer states) that hold the made object where the
/// original held the virtual one, each made once.
#[derive(Default)]
struct StateCopies(HashMap<FrameStateId, FrameStateId>);

impl StateCopies {
    fn with_real(
        &mut self,
        f: &mut Function,
        s: FrameStateId,
        v: ValueId,
        m: ValueId,
    ) -> FrameStateId {
        if !f.chain_values(s).contains(&v) {
            return s;
        }
        if let Some(&copy) = self.0.get(&s) {
            return copy;
        }
        let mut copy = f.states[s.index()].clone();
        copy.virtuals.retain(|(x, _)| *x != v);
        copy.map_values(|x| if x == v { m } else { x });
        if let Some(outer) = copy.outer {
            copy.outer = Some(self.with_real(f, outer, v, m));
        }
        let id = f.add_state(copy);
        self.0.insert(s, id);
        id
    }
}
