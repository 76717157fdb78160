//! Doubles kept in registers. The builder boxes each double a send computes (a SOM value)
//! and unboxes each operand it computes on; what it could not pair within a block, this
//! pass does:
//!
//! 1. a block parameter every incoming value of which is a double (a box, a constant
//!    double, another such parameter, or a loop entry's frame slot, unboxed there behind the
//!    entry's check) and that something unboxes again (or passes on to such a parameter)
//!    becomes a double: a loop's double variables stay in registers across iterations. Its
//!    other uses (a send's argument, a return) get a box where they are;
//! 2. an unbox of a box, or of a constant double, is that double;
//! 3. frame states hold the double where they held its box (their exits box it), so a box
//!    that only frame states used is dead.

use std::collections::{HashMap, HashSet};

use tally_heap::Value;
use tally_vm::jit::DeoptReason;
use tally_vm::runtime::Code;

use crate::passes::entries;
use crate::{BlockId, Function, InstId, InstKind, Terminator, Ty, ValueId};

/// Where a value is used, as far as unboxing cares.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Use {
    /// An unbox of it.
    Unbox,
    /// An edge passing it to this block parameter.
    Param(ValueId),
    /// Anything else that needs a SOM value.
    Other,
}

pub fn unbox(f: &mut Function, code: &Code) {
    let floats = float_params(f);
    if !floats.is_empty() {
        retype(f, code, &floats);
    }
    forward_unboxes(f);
    states_hold_doubles(f);
}

/// The double an edge may pass a double parameter without work: a box's double or a
/// constant double (`None`: neither).
fn double_of(f: &Function, v: ValueId) -> Option<Result<ValueId, f64>> {
    match &f.def_inst(v)?.kind {
        InstKind::BoxFloat(d) => Some(Ok(*d)),
        InstKind::Const(c) => c.as_small_float().map(Err),
        _ => None,
    }
}

/// The loop entries' blocks, with their loop head's bytecode index and operand height.
fn entry_blocks(f: &Function) -> HashMap<BlockId, (u32, u32)> {
    f.osr_entries()
        .iter()
        .map(|o| (o.edge.block, (o.bci, o.height)))
        .collect()
}

/// The block parameters that can be doubles (step 1), by elimination from every word
/// parameter that something reaches.
fn float_params(f: &Function) -> HashSet<ValueId> {
    let entries = entry_blocks(f);
    let mut incoming: HashMap<ValueId, Vec<(BlockId, ValueId)>> = HashMap::new();
    let mut uses: HashMap<ValueId, Vec<Use>> = HashMap::new();
    for (b, block) in f.blocks.iter().enumerate() {
        for &i in &block.insts {
            let kind = &f.insts[i.index()].kind;
            let how = match kind {
                InstKind::UnboxFloat { .. } => Use::Unbox,
                _ => Use::Other,
            };
            for v in kind.operands() {
                uses.entry(v).or_default().push(how);
            }
        }
        let mut edge_args = 0;
        for edge in block.term.edges() {
            let params = &f.blocks[edge.block.index()].params;
            for (&a, &p) in edge.args.iter().zip(params) {
                incoming.entry(p).or_default().push((BlockId(b as u32), a));
                uses.entry(a).or_default().push(Use::Param(p));
                edge_args += 1;
            }
        }
        if edge_args < block.term.operands().len() {
            match &block.term {
                Terminator::Branch { cond, .. } => uses.entry(*cond).or_default().push(Use::Other),
                Terminator::Return(v) | Terminator::ReturnNonLocal { value: v, .. } => {
                    uses.entry(*v).or_default().push(Use::Other)
                }
                _ => {}
            }
        }
    }
    let mut floats: HashSet<ValueId> = incoming
        .keys()
        .copied()
        .filter(|&p| f.ty(p) == Ty::Word)
        .collect();
    loop {
        let dropped: Vec<ValueId> = floats
            .iter()
            .copied()
            .filter(|p| {
                let arrives = incoming[p].iter().all(|&(from, a)| {
                    floats.contains(&a)
                        || double_of(f, a).is_some()
                        || (entries.contains_key(&from) && entries::from_frame(f, a))
                });
                // Something computes on it (or passes it on to what may): the other uses
                // get a box of their own.
                let computed = uses
                    .get(p)
                    .map_or(&[][..], |u| &u[..])
                    .iter()
                    .any(|u| match u {
                        Use::Unbox => true,
                        Use::Param(q) => floats.contains(q),
                        Use::Other => false,
                    });
                !(arrives && computed)
            })
            .collect();
        if dropped.is_empty() {
            return floats;
        }
        for p in dropped {
            floats.remove(&p);
        }
    }
}

/// Makes `floats` doubles: each edge passes a double (a box's, a constant made in the edge's
/// block, a loop entry's slot unboxed in the entry), their unboxes are the parameters, and
/// what needs a SOM value of one gets a box made just before it.
fn retype(f: &mut Function, code: &Code, floats: &HashSet<ValueId>) {
    let entries = entry_blocks(f);
    box_other_uses(f, floats);
    for &p in floats {
        f.values[p.index()].ty = Ty::Float;
    }
    for b in 0..f.blocks.len() {
        let block = BlockId(b as u32);
        let mut term = f.blocks[b].term.clone();
        let mut entry_state = None;
        for edge in term.edges_mut() {
            let params = f.blocks[edge.block.index()].params.clone();
            for (a, p) in edge.args.iter_mut().zip(params) {
                if !floats.contains(&p) || floats.contains(a) {
                    continue;
                }
                let bci = f.blocks[b].bci;
                *a = match double_of(f, *a) {
                    Some(Ok(d)) => d,
                    Some(Err(c)) => f
                        .push_inst(block, InstKind::FloatConst(c.to_bits()), None, bci)
                        .expect("a value"),
                    None => {
                        let (at, height) = entries[&block];
                        let st = *entry_state.get_or_insert_with(|| {
                            entries::entry_state(f, code, block, at, height)
                        });
                        // The frame's value at a loop entry: a value that is no double
                        // deoptimizes the entry, no site's speculation.
                        let kind = InstKind::UnboxFloat {
                            value: *a,
                            accept_int: false,
                            reason: DeoptReason::LoopEntry,
                        };
                        f.push_inst(block, kind, Some(st), at).expect("a value")
                    }
                };
            }
        }
        f.blocks[b].term = term;
    }
    // Their unboxes are the parameters themselves.
    let mut replace = HashMap::new();
    let mut dead = HashSet::new();
    for (i, inst) in f.insts.iter().enumerate() {
        if let (InstKind::UnboxFloat { value, .. }, Some(r)) = (&inst.kind, inst.result) {
            if floats.contains(value) {
                replace.insert(r, *value);
                dead.insert(InstId(i as u32));
            }
        }
    }
    remove(f, &dead);
    f.replace_through(&replace);
}

/// Gives each use of `floats` that needs a SOM value (not an unbox, not an edge to another
/// of them) a box of its own, made right before it in its block.
fn box_other_uses(f: &mut Function, floats: &HashSet<ValueId>) {
    for b in 0..f.blocks.len() {
        let block = BlockId(b as u32);
        let mut insts = Vec::with_capacity(f.blocks[b].insts.len());
        for k in 0..f.blocks[b].insts.len() {
            let i = f.blocks[b].insts[k];
            let inst = &f.insts[i.index()];
            if !matches!(inst.kind, InstKind::UnboxFloat { .. }) {
                let bci = inst.bci;
                for v in inst.kind.operands() {
                    if floats.contains(&v) {
                        let boxed = new_box(f, block, v, bci);
                        insts.push(f.blocks[b].insts.pop().expect("the box"));
                        f.insts[i.index()]
                            .kind
                            .map_operands(|x| if x == v { boxed } else { x });
                    }
                }
            }
            insts.push(i);
        }
        f.blocks[b].insts = insts;
        // The terminator's: boxes made at the block's end.
        let mut term = f.blocks[b].term.clone();
        let bci = f.blocks[b].bci;
        let mut boxes: HashMap<ValueId, ValueId> = HashMap::new();
        let mut boxed = |f: &mut Function, v: ValueId| {
            *boxes.entry(v).or_insert_with(|| new_box(f, block, v, bci))
        };
        match &mut term {
            Terminator::Return(v) | Terminator::ReturnNonLocal { value: v, .. }
                if floats.contains(v) =>
            {
                *v = boxed(f, *v);
            }
            _ => {}
        }
        for edge in term.edges_mut() {
            let params = f.blocks[edge.block.index()].params.clone();
            for (a, p) in edge.args.iter_mut().zip(params) {
                if floats.contains(a) && !floats.contains(&p) {
                    *a = boxed(f, *a);
                }
            }
        }
        f.blocks[b].term = term;
    }
}

/// A box of `v` appended to `block`.
fn new_box(f: &mut Function, block: BlockId, v: ValueId, bci: u32) -> ValueId {
    f.push_inst(block, InstKind::BoxFloat(v), None, bci)
        .expect("a value")
}

/// Step 2: an unbox of a box or of a constant double (or of a double: none is left here,
/// but the rule is the same) is that double.
fn forward_unboxes(f: &mut Function) {
    let mut replace = HashMap::new();
    let mut dead = HashSet::new();
    for b in 0..f.blocks.len() {
        for k in 0..f.blocks[b].insts.len() {
            let i = f.blocks[b].insts[k];
            let inst = &f.insts[i.index()];
            let (
                InstKind::UnboxFloat {
                    value, accept_int, ..
                },
                Some(r),
            ) = (&inst.kind, inst.result)
            else {
                continue;
            };
            let (value, accept_int) = (*value, *accept_int);
            match double_of(f, value) {
                Some(Ok(d)) => {
                    replace.insert(r, d);
                    dead.insert(i);
                }
                Some(Err(c)) => {
                    f.insts[i.index()].kind = InstKind::FloatConst(c.to_bits());
                    f.insts[i.index()].state = None;
                }
                None => match f.const_value(value).and_then(Value::as_int) {
                    Some(n) if accept_int => {
                        f.insts[i.index()].kind = InstKind::FloatConst((n as f64).to_bits());
                        f.insts[i.index()].state = None;
                    }
                    _ => {}
                },
            }
        }
    }
    remove(f, &dead);
    f.replace_through(&replace);
}

/// Step 3: frame states hold a box's double instead of the box.
fn states_hold_doubles(f: &mut Function) {
    let boxes: HashMap<ValueId, ValueId> = f
        .insts
        .iter()
        .filter_map(|i| match (&i.kind, i.result) {
            (InstKind::BoxFloat(d), Some(r)) => Some((r, *d)),
            _ => None,
        })
        .collect();
    if boxes.is_empty() {
        return;
    }
    for state in &mut f.states {
        state.map_values(|v| boxes.get(&v).copied().unwrap_or(v));
    }
}

/// Takes `dead` out of their blocks.
fn remove(f: &mut Function, dead: &HashSet<InstId>) {
    if dead.is_empty() {
        return;
    }
    for block in &mut f.blocks {
        block.insts.retain(|i| !dead.contains(i));
    }
}
