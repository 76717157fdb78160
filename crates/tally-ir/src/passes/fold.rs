//! Constant folding: arithmetic and comparisons of constant small integers and doubles
//! (a double boxed again where it has an immediate), truth tests of
//! known Booleans (a comparison's `FlagToBool` then `Truth` is the comparison's flag), guards
//! of values known to pass, and branches on constant flags.

use std::collections::HashMap;

use tally_heap::Value;

use crate::{Edge, Function, InstKind, Terminator, Ty, ValueId};

/// What an instruction folds to.
enum Folded {
    /// An existing value.
    Value(ValueId),
    /// A constant.
    Const(InstKind),
}

pub fn fold(f: &mut Function) {
    let mut replace: HashMap<ValueId, ValueId> = HashMap::new();
    // Instructions whose result is another value: gone (a guard among them proves nothing
    // another guard, or the value's type, does not).
    let mut gone: std::collections::HashSet<crate::InstId> = Default::default();
    let resolve = |replace: &HashMap<ValueId, ValueId>, mut v: ValueId| {
        while let Some(&r) = replace.get(&v) {
            v = r;
        }
        v
    };
    for b in crate::dom::reverse_postorder(f) {
        for k in 0..f.blocks[b.index()].insts.len() {
            let i = f.blocks[b.index()].insts[k];
            let mut kind = f.insts[i.index()].kind.clone();
            kind.map_operands(|v| resolve(&replace, v));
            f.insts[i.index()].kind = kind.clone();
            let Some(result) = f.insts[i.index()].result else {
                continue;
            };
            match fold_inst(f, &kind) {
                Some(Folded::Value(v)) => {
                    replace.insert(result, v);
                    gone.insert(i);
                }
                Some(Folded::Const(c)) => {
                    let inst = &mut f.insts[i.index()];
                    inst.kind = c;
                    inst.state = None;
                }
                None => {}
            }
        }
        let block = &mut f.blocks[b.index()];
        block.term.map_operands(|v| resolve(&replace, v));
    }
    f.replace_uses(|v| resolve(&replace, v));
    for block in &mut f.blocks {
        block.insts.retain(|i| !gone.contains(i));
    }
    fold_branches(f);
}

fn fold_inst(f: &Function, kind: &InstKind) -> Option<Folded> {
    use InstKind::*;
    match *kind {
        IntBinary { op, lhs, rhs } => {
            let r = op.apply(f.const_int(lhs)?, f.const_int(rhs)?)?;
            Some(Folded::Const(Const(Value::from_small_int(r))))
        }
        IntCompare { op, lhs, rhs } => {
            if lhs == rhs {
                return Some(Folded::Const(FlagConst(matches!(
                    op,
                    crate::IntCmp::Equal | crate::IntCmp::LessEq | crate::IntCmp::GreaterEq
                ))));
            }
            let r = op.apply(f.const_int(lhs)?, f.const_int(rhs)?);
            Some(Folded::Const(FlagConst(r)))
        }
        Identical(a, b) if a == b => Some(Folded::Const(FlagConst(true))),
        Identical(a, b) => {
            let (x, y) = (f.const_value(a)?, f.const_value(b)?);
            Some(Folded::Const(FlagConst(x == y)))
        }
        // Nil, true, false, numbers and symbols are instances of core classes, whose
        // answers a class loaded later cannot change.
        NilTest { value, is_nil } => {
            let v = f.const_value(value)?;
            Some(Folded::Const(FlagConst((v == Value::NIL) == is_nil)))
        }
        FlagToBool(v) => {
            let b = f.const_flag(v)?;
            Some(Folded::Const(Const(Value::from_bool(b))))
        }
        Truth(v) => {
            if let Some(InstKind::FlagToBool(flag)) = f.def_inst(v).map(|i| &i.kind) {
                return Some(Folded::Value(*flag));
            }
            match f.const_value(v)? {
                c if c == Value::TRUE => Some(Folded::Const(FlagConst(true))),
                c if c == Value::FALSE => Some(Folded::Const(FlagConst(false))),
                _ => None,
            }
        }
        GuardInt { value: v, .. } => {
            (f.ty(v) == Ty::Int || f.const_int(v).is_some()).then_some(Folded::Value(v))
        }
        // An object the function made has the class it was made of.
        GuardClass { value, class, .. } => {
            (made_class(f, value)? == class).then_some(Folded::Value(value))
        }
        ClassIs { value, class } => Some(Folded::Const(FlagConst(made_class(f, value)? == class))),
        FloatBinary { op, lhs, rhs } => {
            let r = op.apply(const_double(f, lhs)?, const_double(f, rhs)?);
            Some(Folded::Const(FloatConst(r.to_bits())))
        }
        FloatUnary { op, value } => {
            let r = op.apply(const_double(f, value)?);
            Some(Folded::Const(FloatConst(r.to_bits())))
        }
        FloatCompare { op, lhs, rhs } => {
            let r = op.apply_float(const_double(f, lhs)?, const_double(f, rhs)?);
            Some(Folded::Const(FlagConst(r)))
        }
        BoxFloat(v) => {
            let c = Value::from_small_float(const_double(f, v)?)?;
            Some(Folded::Const(Const(c)))
        }
        _ => None,
    }
}

/// The class of the object `v` is, if the function made it.
fn made_class(f: &Function, v: ValueId) -> Option<u32> {
    match f.def_inst(v)?.kind {
        InstKind::NewObject { shape, .. }
        | InstKind::VirtualObject { shape, .. }
        | InstKind::Materialize { shape, .. } => Some(shape.class),
        _ => None,
    }
}

/// The double `v` is, if it is a constant one.
fn const_double(f: &Function, v: ValueId) -> Option<f64> {
    match f.def_inst(v)?.kind {
        InstKind::FloatConst(bits) => Some(f64::from_bits(bits)),
        _ => None,
    }
}

/// A branch on a constant flag jumps to the side it takes.
fn fold_branches(f: &mut Function) {
    for b in 0..f.blocks.len() {
        let Terminator::Branch {
            cond,
            then,
            otherwise,
        } = &f.blocks[b].term
        else {
            continue;
        };
        let Some(taken) = f.const_flag(*cond) else {
            continue;
        };
        let edge: Edge = if taken {
            then.clone()
        } else {
            otherwise.clone()
        };
        f.blocks[b].term = Terminator::Jump(edge);
    }
}
