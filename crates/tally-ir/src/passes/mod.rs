//! Passes over the IR, each small and run in a fixed order by [`optimize`]:
//!
//! 1. [`states::trim`]: frame states describe only the locals the bytecode still reads, so
//!    dead values are neither kept alive nor rebuilt on deoptimization;
//! 2. [`params::prune`]: block parameters that merge one value (the builder gives every
//!    bytecode block one per local and stack slot) become that value;
//! 3. [`fold::fold`]: constant folding of arithmetic, comparisons, truth tests and branches;
//! 4. [`entries::check`]: an entry at a loop head checks that the frame's values are small
//!    integers where everything else reaching the loop is one;
//! 5. [`guards::eliminate`]: guards a dominating guard, or the value's own definition,
//!    already proves, then folding again;
//! 6. [`loads::forward`]: a field read again in the same block (no store to that field, no
//!    call between) is the value read or stored before, and a double unboxed again the one
//!    unboxed before; then guards and folding again, for the guards of what was read;
//! 7. [`dce::dce`]: unreachable blocks, unused values and parameters, frame states nothing
//!    refers to;
//! 8. [`floats::unbox`]: doubles stay unboxed through loops and frame states;
//! 9. [`closures::sink`]: a closure that escapes only on some paths is made where they
//!    begin;
//! 10. [`closures::virtualize`]: closures only frame states hold are made by the exits that
//!     need them, not where the code made them;
//! 11. [`contexts::virtualize`]: an activation's context (the function's own too, when it
//!     has no loop-head entries) that only its code, virtual closures and frame states use
//!     has its slots in SSA values, made by the exits too;
//! 12. [`objects::virtualize`]: an object the function makes has its fields in SSA values
//!     until it escapes, and is made there (or by the exits that need it), nowhere else;
//!     then [`floats::unbox`] again, for the doubles those fields held.
//!
//! Each keeps the IR valid ([`crate::verify`]); debug builds check that after every pass.

pub mod closures;
pub mod contexts;
pub mod dce;
pub mod entries;
pub mod floats;
pub mod fold;
pub mod guards;
pub mod loads;
pub mod objects;
pub mod params;
mod slots;
pub mod states;

use tally_vm::bytecode::CodeId;
use tally_vm::runtime::Code;

use std::collections::HashMap;

use crate::{Function, ValueId};

/// Runs every pass on `f`, made from `code` and the methods inlined into it (`inlined`
/// finds their code).
pub fn optimize(
    f: &mut Function,
    code: &Code,
    inlined: &dyn Fn(CodeId) -> Option<&'static Code>,
) -> Result<(), String> {
    check(f, "building")?;
    states::trim(f, code, inlined);
    check(f, "frame-state trimming")?;
    params::prune(f);
    check(f, "parameter pruning")?;
    fold::fold(f);
    check(f, "folding")?;
    entries::check(f, code);
    check(f, "checking the entries")?;
    guards::eliminate(f);
    check(f, "guard elimination")?;
    // What the guards proved folds further (a class switch's constant test).
    fold::fold(f);
    check(f, "folding what the guards proved")?;
    // After the guards: the getters inlined one after another read through one guarded
    // value now. The guards of what they read are then one too.
    if loads::forward(f) {
        check(f, "load forwarding")?;
        guards::eliminate(f);
        fold::fold(f);
        check(f, "guard elimination after load forwarding")?;
    }
    dce::dce(f);
    params::prune(f);
    check(f, "dead code elimination")?;
    // After dead code elimination: a loop's dead variables no longer hold a double's
    // parameter to a word.
    floats::unbox(f, code);
    dce::dce(f);
    check(f, "unboxing doubles")?;
    closures::sink(f);
    check(f, "closure sinking")?;
    closures::virtualize(f);
    dce::dce(f);
    check(f, "closure virtualization")?;
    contexts::virtualize(f);
    check(f, "context virtualization")?;
    objects::virtualize(f);
    check(f, "object virtualization")?;
    // The slots' parameters where paths merge one value, and the loads' now unused nils.
    params::prune(f);
    dce::dce(f);
    check(f, "pruning the contexts' parameters")?;
    // A double stored into a virtual object's field and loaded back is the double again.
    floats::unbox(f, code);
    dce::dce(f);
    check(f, "unboxing the doubles of virtual objects")
}

/// Drops the instructions whose results `replace` maps to other values, and makes every use
/// of such a result a use of what it maps to (following chains of replacements).
fn replace_results(f: &mut Function, replace: &HashMap<ValueId, ValueId>) {
    if replace.is_empty() {
        return;
    }
    for block in &mut f.blocks {
        let insts = &f.insts;
        block.insts.retain(|i| {
            insts[i.index()]
                .result
                .is_none_or(|r| !replace.contains_key(&r))
        });
    }
    f.replace_uses(|mut v| {
        while let Some(&r) = replace.get(&v) {
            v = r;
        }
        v
    });
}

fn check(f: &Function, after: &str) -> Result<(), String> {
    if cfg!(debug_assertions) {
        crate::verify::verify(f).map_err(|e| format!("invalid IR after {after}: {e}"))
    } else {
        Ok(())
    }
}
