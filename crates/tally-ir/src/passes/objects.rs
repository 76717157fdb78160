//! Objects that never exist (escape analysis and scalar replacement): a plain object the
//! function makes ([`InstKind::NewObject`]) that only its own field loads and stores, `==`
//! tests and frame states use — no send, call or return takes it, no store puts it into
//! another object — becomes an [`InstKind::VirtualObject`]. Its fields become SSA values
//! ([`super::slots`]), `==` with it is known (a new object is identical only to itself),
//! and each frame state where it is live names what its fields hold there, so an exit makes
//! it with those values: the only place the interpreter can see it, and the first time it
//! gets an identity hash, which it keeps from then on.

use std::collections::{HashMap, HashSet};

use super::slots::{self, Slots};
use crate::dom::DomTree;
use crate::{BlockId, Function, InstId, InstKind, ValueId};

struct Candidate {
    value: ValueId,
    inst: InstId,
    made_in: BlockId,
    class: ValueId,
    shape: tally_vm::jit::PlainShape,
    region: HashSet<BlockId>,
}

/// Makes every object the function makes that does not escape virtual.
pub fn virtualize(f: &mut Function) {
    let dom = DomTree::new(f);
    let candidates: Vec<Candidate> = find(f, &dom)
        .into_iter()
        .filter(|c| stays_inside(f, &dom, c))
        .collect();
    if candidates.is_empty() {
        return;
    }
    let mut replace: HashMap<ValueId, ValueId> = HashMap::new();
    for c in &candidates {
        known_identity(f, c.value);
        let v = c.value;
        let made = Slots {
            value: v,
            inst: c.inst,
            made_in: c.made_in,
            size: c.shape.fields as usize,
            region: &c.region,
            virtual_kind: InstKind::VirtualObject {
                class: c.class,
                shape: c.shape,
            },
        };
        slots::replace(
            f,
            &made,
            &mut replace,
            |k| match *k {
                InstKind::LoadField { obj, index } if obj == v => Some(index),
                _ => None,
            },
            |k| match *k {
                InstKind::StoreField { obj, index, value } if obj == v => Some((index, value)),
                _ => None,
            },
        );
    }
    f.replace_through(&replace);
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

/// Whether `c` can be virtual: every use is a load or store of its fields (not a store of
/// it), an `==`, or a frame state's — all inside its region, which nothing enters but
/// through its making (a loop's back-edge to the making makes a new one: the old one is dead
/// there, since no edge passes it on).
fn stays_inside(f: &Function, dom: &DomTree, c: &Candidate) -> bool {
    let v = c.value;
    let fields = c.shape.fields;
    for (b, block) in f.blocks.iter().enumerate() {
        let b = BlockId(b as u32);
        if !dom.is_reachable(b) {
            continue;
        }
        let inside = c.region.contains(&b);
        let states = block
            .insts
            .iter()
            .filter_map(|&i| f.insts[i.index()].state)
            .chain(block.term.state());
        for s in states {
            if !inside && f.chain_values(s).contains(&v) {
                return false;
            }
        }
        for &i in &block.insts {
            let inst = &f.insts[i.index()];
            if !inst.kind.operands().contains(&v) {
                continue;
            }
            let allowed = match inst.kind {
                InstKind::LoadField { index, .. } => index < fields,
                InstKind::StoreField { obj, index, value } => {
                    obj == v && value != v && index < fields
                }
                InstKind::Identical(..) => true,
                _ => false,
            };
            if !allowed || !inside {
                return false;
            }
        }
        if block.term.operands().contains(&v) {
            return false;
        }
        for target in block.term.successors() {
            if target != c.made_in && c.region.contains(&target) && !inside {
                return false;
            }
        }
    }
    true
}

/// `==` with the new object `v`: true of itself only.
fn known_identity(f: &mut Function, v: ValueId) {
    for inst in &mut f.insts {
        if let InstKind::Identical(a, b) = inst.kind {
            if a == v || b == v {
                inst.kind = InstKind::FlagConst(a == b);
            }
        }
    }
}
