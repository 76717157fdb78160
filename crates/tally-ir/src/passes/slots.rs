//! Scalar replacement, shared by the contexts and objects made virtual: an allocation whose
//! slots only its own loads and stores read and write becomes a virtual one; each load is
//! the value last stored on the path to it (nil before any store), where paths merge a
//! block parameter per slot, and each frame state in its region names what the slots hold
//! there, so an exit can make it with those values.

use std::collections::{HashMap, HashSet};

use tally_heap::Value;

use crate::{BlockId, FrameStateId, Function, InstId, InstKind, Terminator, Ty, ValueId};

/// One allocation to make virtual.
pub(super) struct Slots<'a> {
    /// Its value, and the instruction that makes it, in block `made_in`.
    pub value: ValueId,
    pub inst: InstId,
    pub made_in: BlockId,
    pub size: usize,
    /// The blocks where it lives: `made_in` and blocks it dominates, which nothing outside
    /// enters past `made_in`.
    pub region: &'a HashSet<BlockId>,
    /// What the making becomes.
    pub virtual_kind: InstKind,
}

/// Makes `c` virtual: its loads (`load` answers a load's slot) become the values stored
/// last (`replace` maps each load's result to one; `store` answers a store's slot and
/// value), its region's blocks get a parameter per slot, and each frame state in the region
/// names what the slots hold there.
pub(super) fn replace(
    f: &mut Function,
    c: &Slots,
    replace: &mut HashMap<ValueId, ValueId>,
    load: impl Fn(&InstKind) -> Option<u16>,
    store: impl Fn(&InstKind) -> Option<(u16, ValueId)>,
) {
    let size = c.size;
    let nil = nil_before(f, c.made_in, c.inst);
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
            if i == c.inst {
                slots = Some(vec![nil; size]);
                let inst = &mut f.insts[i.index()];
                inst.kind = c.virtual_kind.clone();
                // Nothing is allocated here any more.
                inst.state = None;
            } else if let Some(index) = load(&inst.kind) {
                let now = slots.as_ref().expect("loads after the making")[index as usize];
                replace.insert(inst.result.expect("a value"), now);
                drop = true;
            } else if let Some((index, value)) = store(&inst.kind) {
                slots.as_mut().expect("stores after the making")[index as usize] = value;
                drop = true;
            } else if let (Some(s), Some(now)) = (inst.state, &slots) {
                let s = annotate(f, s, c.value, now);
                f.insts[i.index()].state = Some(s);
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

/// A nil made right before `making` (in block `made_in`): what every slot holds at first.
pub(super) fn nil_before(f: &mut Function, made_in: BlockId, making: InstId) -> ValueId {
    let id = InstId(f.insts.len() as u32);
    let bci = f.insts[making.index()].bci;
    f.push_inst(made_in, InstKind::Const(Value::NIL), None, bci)
        .expect("a value");
    let insts = &mut f.blocks[made_in.index()].insts;
    insts.pop();
    let at = insts.iter().position(|&i| i == making).expect("the making");
    insts.insert(at, id);
    f.insts[id.index()].result.expect("a value")
}

/// State `s` naming `slots` as what virtual `v`'s slots hold; a copy of it when it already
/// names other values for them (a state some other point uses).
pub(super) fn annotate(
    f: &mut Function,
    s: FrameStateId,
    v: ValueId,
    slots: &[ValueId],
) -> FrameStateId {
    let state = &f.states[s.index()];
    match state.virtuals.iter().find(|(c, _)| *c == v) {
        Some((_, held)) if held == slots => s,
        Some(_) => {
            let mut copy = state.clone();
            for (c, held) in &mut copy.virtuals {
                if *c == v {
                    *held = slots.to_vec();
                }
            }
            f.add_state(copy)
        }
        None => {
            f.states[s.index()].virtuals.push((v, slots.to_vec()));
            s
        }
    }
}
