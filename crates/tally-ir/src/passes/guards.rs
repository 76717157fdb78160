//! Guards that are already proven: a value checked to be a small integer, or of a class, by
//! a guard that dominates (or defined by small-integer arithmetic, or a block parameter every
//! edge passes a small integer, such as a loop's counter) is not checked again, and a class
//! switch's test on a value a dominating guard fixed is a constant.

use std::collections::{HashMap, HashSet};

use crate::dom::DomTree;
use crate::{BlockId, Function, InstKind, Ty, ValueId};

/// What a dominating guard proved, per value.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
enum Fact {
    Int(ValueId),
    Class(ValueId, u32),
}

pub fn eliminate(f: &mut Function) {
    type_params(f);
    let dom = DomTree::new(f);
    let mut children: Vec<Vec<BlockId>> = vec![Vec::new(); f.blocks.len()];
    for b in 0..f.blocks.len() {
        let b = BlockId(b as u32);
        if let Some(p) = dom.idom(b).filter(|&p| p != b) {
            children[p.index()].push(b);
        }
    }
    let mut proven: HashMap<Fact, ValueId> = HashMap::new();
    let mut replace: HashMap<ValueId, ValueId> = HashMap::new();
    walk(f, &children, f.entry(), &mut proven, &mut replace);
    // The guards that proved nothing new are gone; their results are the proving ones'.
    super::replace_results(f, &replace);
}

/// Types as [`Ty::Int`] the block parameters every edge passes a small integer.
fn type_params(f: &mut Function) {
    for p in int_params(f, |_| false) {
        f.values[p.index()].ty = Ty::Int;
    }
}

/// The block parameters (not yet typed) that only ever receive small integers: the largest
/// such set, so that loops merging one another's counters (nested loops) count too. A value
/// `wildcard` accepts may be passed as well, but is no evidence: a parameter needs at least
/// one small integer (or another such parameter) reaching it.
pub(crate) fn int_params(f: &Function, wildcard: impl Fn(ValueId) -> bool) -> HashSet<ValueId> {
    let incoming = crate::passes::params::incoming_args(f);
    let mut set: HashSet<ValueId> = f
        .blocks
        .iter()
        .skip(1)
        .flat_map(|b| b.params.iter().copied())
        .filter(|&p| f.ty(p) != Ty::Int)
        .collect();
    let known_int = |a: ValueId| f.ty(a) == Ty::Int || f.const_int(a).is_some();
    loop {
        let mut dropped = Vec::new();
        for (b, block) in f.blocks.iter().enumerate().skip(1) {
            for (k, &p) in block.params.iter().enumerate() {
                if !set.contains(&p) {
                    continue;
                }
                let passed = &incoming[b][k];
                let others = || passed.iter().copied().filter(|&a| a != p);
                let all = others().all(|a| known_int(a) || set.contains(&a) || wildcard(a));
                let evidence = others().any(|a| known_int(a) || set.contains(&a));
                if !all || !evidence {
                    dropped.push(p);
                }
            }
        }
        if dropped.is_empty() {
            return set;
        }
        for p in dropped {
            set.remove(&p);
        }
    }
}

/// Visits `b` and the blocks it dominates, with the facts proven above it in scope.
fn walk(
    f: &mut Function,
    children: &[Vec<BlockId>],
    b: BlockId,
    proven: &mut HashMap<Fact, ValueId>,
    replace: &mut HashMap<ValueId, ValueId>,
) {
    let mut added: Vec<Fact> = Vec::new();
    let resolve = |replace: &HashMap<ValueId, ValueId>, mut v: ValueId| {
        while let Some(&r) = replace.get(&v) {
            v = r;
        }
        v
    };
    for k in 0..f.blocks[b.index()].insts.len() {
        let i = f.blocks[b.index()].insts[k];
        let mut kind = f.insts[i.index()].kind.clone();
        kind.map_operands(|v| resolve(replace, v));
        let result = f.insts[i.index()].result;
        match (kind.clone(), result) {
            (InstKind::GuardInt { value: v, .. }, Some(r)) => {
                if f.ty(v) == Ty::Int {
                    replace.insert(r, v);
                } else if let Some(&known) = proven.get(&Fact::Int(v)) {
                    replace.insert(r, known);
                } else {
                    proven.insert(Fact::Int(v), r);
                    added.push(Fact::Int(v));
                }
            }
            (InstKind::GuardClass { value, class, .. }, Some(r)) => {
                let fact = Fact::Class(value, class);
                if let Some(&known) = proven.get(&fact) {
                    replace.insert(r, known);
                } else {
                    proven.insert(fact, r);
                    added.push(fact);
                    // The guard's result is the same value, of the same class.
                    let also = Fact::Class(r, class);
                    proven.insert(also, r);
                    added.push(also);
                }
            }
            (InstKind::ClassIs { value, class }, Some(_))
                if proven.contains_key(&Fact::Class(value, class)) =>
            {
                kind = InstKind::FlagConst(true);
            }
            _ => {}
        }
        f.insts[i.index()].kind = kind;
        if matches!(f.insts[i.index()].kind, InstKind::FlagConst(_)) {
            f.insts[i.index()].state = None;
        }
    }
    for &c in &children[b.index()] {
        walk(f, children, c, proven, replace);
    }
    for fact in added {
        proven.remove(&fact);
    }
}
