//! Loads that repeat within a block: a field read again from the same object, with no store
//! to that field of any object and no call in between, is the value read (or stored) before;
//! a double unboxed again from the same value is the double unboxed before. (Inlined getters
//! read a field once per send: `body mass` three times in one loop body is one load.)
//!
//! Only within a block: a block boundary may be a loop's back edge or a merge with a path
//! that stored. The object itself may have moved since (a collection at a safepoint between
//! the two), which changes nothing: a moved object's fields hold what they held, and every
//! SSA value that is a reference is updated with it.

use std::collections::HashMap;

use crate::{Function, InstKind, ValueId};

/// What a load or unbox is keyed by: the object (or value) and the field (or whether a
/// small integer was accepted).
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
enum Known {
    Field(ValueId, u16),
    Unboxed(ValueId, bool),
}

/// Answers whether it replaced anything.
pub fn forward(f: &mut Function) -> bool {
    let mut replace: HashMap<ValueId, ValueId> = HashMap::new();
    let resolve = |replace: &HashMap<ValueId, ValueId>, mut v: ValueId| {
        while let Some(&r) = replace.get(&v) {
            v = r;
        }
        v
    };
    for b in 0..f.blocks.len() {
        let mut known: HashMap<Known, ValueId> = HashMap::new();
        for k in 0..f.blocks[b].insts.len() {
            let i = f.blocks[b].insts[k];
            let mut kind = f.insts[i.index()].kind.clone();
            kind.map_operands(|v| resolve(&replace, v));
            let result = f.insts[i.index()].result;
            match (&kind, result) {
                (&InstKind::LoadField { obj, index }, Some(r)) => {
                    match known.get(&Known::Field(obj, index)) {
                        Some(&v) => {
                            replace.insert(r, v);
                        }
                        None => {
                            known.insert(Known::Field(obj, index), r);
                        }
                    }
                }
                (
                    &InstKind::UnboxFloat {
                        value, accept_int, ..
                    },
                    Some(r),
                ) => match known.get(&Known::Unboxed(value, accept_int)) {
                    Some(&v) => {
                        replace.insert(r, v);
                    }
                    None => {
                        known.insert(Known::Unboxed(value, accept_int), r);
                    }
                },
                (&InstKind::StoreField { obj, index, value }, _) => {
                    // Any object's field `index` may be this one.
                    known.retain(|k, _| !matches!(k, Known::Field(_, j) if *j == index));
                    known.insert(Known::Field(obj, index), value);
                }
                // Anything that runs SOM code, and Array's `at:put:` (kept here although it writes
                // elements only).
                (kind, _) if kind.props().writes_fields => {
                    known.retain(|k, _| matches!(k, Known::Unboxed(..)));
                }
                _ => {}
            }
        }
    }
    super::replace_results(f, &replace);
    !replace.is_empty()
}
