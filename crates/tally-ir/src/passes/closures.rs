//! Closures that never exist: a closure the function makes whose block was inlined at every
//! `value…` send that got it, and that nothing else uses — no send, call or store takes it,
//! no return or branch reads it — is held only by frame states. Its `MakeBlock` becomes a
//! [`InstKind::VirtualBlock`]: no allocation where it was made; an exit whose frames hold it
//! makes it there (with the receiver and context the block would have had), the only place
//! the interpreter can see it.

use std::collections::HashSet;

use crate::{Function, InstKind, ValueId};

pub fn virtualize(f: &mut Function) {
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
            }
        }
    }
}
