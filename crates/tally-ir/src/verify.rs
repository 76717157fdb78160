//! The IR's invariants, checked: run after building and after every pass in tests and debug
//! builds, so a pass that breaks one fails where it did, not in the machine code.

use crate::dom::DomTree;
use crate::{BlockId, Function, InstKind, Terminator, Ty, ValueDef, ValueId};

/// Where each value is defined: its block and its position there (parameters before every
/// instruction).
fn definitions(f: &Function) -> Vec<Option<(BlockId, usize)>> {
    let mut at = vec![None; f.values.len()];
    for (b, block) in f.blocks.iter().enumerate() {
        for &p in &block.params {
            at[p.index()] = Some((BlockId(b as u32), 0));
        }
        for (k, &i) in block.insts.iter().enumerate() {
            if let Some(v) = f.insts[i.index()].result {
                at[v.index()] = Some((BlockId(b as u32), k + 1));
            }
        }
    }
    at
}

/// Whether `v` is a closure or context only frame states hold (made by exits alone).
fn is_virtual(f: &Function, v: ValueId) -> bool {
    matches!(
        f.def_inst(v).map(|i| &i.kind),
        Some(
            InstKind::VirtualBlock { .. }
                | InstKind::VirtualContext { .. }
                | InstKind::VirtualObject { .. }
        )
    )
}

/// Whether `kind` reads doubles ([`Ty::Float`]); every other instruction reads none.
fn reads_doubles(kind: &InstKind) -> bool {
    matches!(
        kind,
        InstKind::FloatBinary { .. }
            | InstKind::FloatCompare { .. }
            | InstKind::FloatUnary { .. }
            | InstKind::BoxFloat(_)
    )
}

/// The first broken invariant, described, if any.
pub fn verify(f: &Function) -> Result<(), String> {
    let dom = DomTree::new(f);
    let defs = definitions(f);
    let name = |v: ValueId| v.to_string();
    for (v, data) in f.values.iter().enumerate() {
        let listed = match data.def {
            // A parameter of a block dead code elimination dropped names no block now.
            ValueDef::Param { block, index } => f
                .blocks
                .get(block.index())
                .and_then(|b| b.params.get(index as usize))
                .is_some_and(|&p| p.index() == v),
            ValueDef::Inst(i) => f.insts[i.index()].result.is_some_and(|r| r.index() == v),
        };
        let placed = defs[v].is_some();
        if placed && !listed {
            return Err(format!("v{v}'s definition does not list it"));
        }
    }
    // A use at position `pos` of block `b` (instructions 1.., the terminator after them).
    let check = |v: ValueId, b: BlockId, pos: usize, what: &str| -> Result<(), String> {
        let Some((db, dpos)) = defs.get(v.index()).copied().flatten() else {
            return Err(format!(
                "{what} in {b} uses {}, which nothing defines",
                name(v)
            ));
        };
        let ok = if db == b {
            dpos < pos
        } else {
            dom.dominates(db, b)
        };
        if ok {
            Ok(())
        } else {
            Err(format!(
                "{what} in {b} uses {}, defined where it does not dominate",
                name(v)
            ))
        }
    };
    for (b, block) in f.blocks.iter().enumerate() {
        let b = BlockId(b as u32);
        if !dom.is_reachable(b) {
            continue;
        }
        for (k, &i) in block.insts.iter().enumerate() {
            let inst = &f.insts[i.index()];
            for v in inst.kind.operands() {
                check(v, b, k + 1, &format!("{i}"))?;
                if (f.ty(v) == Ty::Float) != reads_doubles(&inst.kind) {
                    return Err(format!("{i} reads {} {}", f.ty(v).name(), name(v)));
                }
                // A virtual object exists only for exits: what reads it must be one too.
                let virtual_use = matches!(
                    inst.kind,
                    InstKind::VirtualBlock { ctx: Some(c), .. }
                        | InstKind::VirtualContext { outer: Some(c), .. } if c == v
                );
                if is_virtual(f, v) && !virtual_use {
                    return Err(format!("{i} uses the virtual {}", name(v)));
                }
            }
            if inst.kind.needs_state() != inst.state.is_some() {
                return Err(format!(
                    "{i} ({:?}) {} a frame state",
                    inst.kind,
                    if inst.state.is_some() { "has" } else { "lacks" }
                ));
            }
            if let Some(s) = inst.state {
                for v in f.chain_values(s) {
                    check(v, b, k + 1, &format!("{s} (or an outer state) of {i}"))?;
                }
            }
        }
        let end = block.insts.len() + 1;
        for v in block.term.operands() {
            check(v, b, end, "the terminator")?;
            if is_virtual(f, v) {
                return Err(format!(
                    "the terminator of {b} uses the virtual {}",
                    name(v)
                ));
            }
        }
        if let Some(s) = block.term.state() {
            for v in f.chain_values(s) {
                check(
                    v,
                    b,
                    end,
                    &format!("{s} (or an outer state) of the terminator"),
                )?;
            }
        }
        if let Terminator::Enter { normal, osr } = &block.term {
            // Only the first block chooses the way in, and every way in starts from its
            // parameters alone: no value is defined on one way and used on another.
            if b != f.entry() {
                return Err(format!("{b} is not the entry but enters"));
            }
            if std::iter::once(normal)
                .chain(osr.iter().map(|o| &o.edge))
                .any(|e| !e.args.is_empty())
            {
                return Err("an entry edge passes values".into());
            }
            let mut bcis: Vec<u32> = osr.iter().map(|o| o.bci).collect();
            bcis.sort_unstable();
            bcis.dedup();
            if bcis.len() != osr.len() {
                return Err("two on-stack-replacement entries at one loop head".into());
            }
        }
        if block.term == Terminator::Unreachable {
            return Err(format!("{b} is reachable but has no terminator"));
        }
        let passed: Vec<ValueId> = block
            .term
            .edges()
            .iter()
            .flat_map(|e| e.args.clone())
            .collect();
        for v in block.term.operands() {
            if f.ty(v) == Ty::Float && !passed.contains(&v) {
                return Err(format!(
                    "the terminator of {b} reads the double {}",
                    name(v)
                ));
            }
        }
        for e in block.term.edges() {
            let params = &f.blocks[e.block.index()].params;
            for (&a, &p) in e.args.iter().zip(params) {
                if (f.ty(a) == Ty::Float) != (f.ty(p) == Ty::Float) {
                    return Err(format!(
                        "{b} passes {} {} to {}'s {} {}",
                        f.ty(a).name(),
                        name(a),
                        e.block,
                        f.ty(p).name(),
                        name(p)
                    ));
                }
            }
            let want = f.blocks[e.block.index()].params.len();
            if e.args.len() != want {
                return Err(format!(
                    "{b} passes {} values to {}, which takes {want}",
                    e.args.len(),
                    e.block
                ));
            }
        }
    }
    Ok(())
}
