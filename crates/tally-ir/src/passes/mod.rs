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
//!     has its slots in SSA values, made by the exits too; then 10 and 11 again while they
//!     find more (a closure only a now virtual context held);
//! 12. [`objects::virtualize`]: an object the function makes has its fields in SSA values
//!     until it escapes, and is made there (or by the exits that need it), nowhere else;
//!     then [`floats::unbox`] again, for the doubles those fields held.
//!
//! Each keeps the IR valid ([`crate::verify`]); debug builds check that after every pass.
//! Each has a name ([`Pass`]): the filetests run one pass by name, and the compiler's
//! `--print-ir-after` and `--time-passes` name them.

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

/// A pass over the IR, by the name `--print-ir-after`, `--time-passes` and the filetests
/// (`tests/ir/`) call it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Pass {
    TrimStates,
    PruneParams,
    Fold,
    CheckEntries,
    EliminateGuards,
    ForwardLoads,
    Dce,
    UnboxFloats,
    SinkClosures,
    VirtualizeClosures,
    VirtualizeContexts,
    VirtualizeObjects,
}

impl Pass {
    pub const ALL: [Pass; 12] = [
        Pass::TrimStates,
        Pass::PruneParams,
        Pass::Fold,
        Pass::CheckEntries,
        Pass::EliminateGuards,
        Pass::ForwardLoads,
        Pass::Dce,
        Pass::UnboxFloats,
        Pass::SinkClosures,
        Pass::VirtualizeClosures,
        Pass::VirtualizeContexts,
        Pass::VirtualizeObjects,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Pass::TrimStates => "trim-states",
            Pass::PruneParams => "prune-params",
            Pass::Fold => "fold",
            Pass::CheckEntries => "check-entries",
            Pass::EliminateGuards => "eliminate-guards",
            Pass::ForwardLoads => "forward-loads",
            Pass::Dce => "dce",
            Pass::UnboxFloats => "unbox-floats",
            Pass::SinkClosures => "sink-closures",
            Pass::VirtualizeClosures => "virtualize-closures",
            Pass::VirtualizeContexts => "virtualize-contexts",
            Pass::VirtualizeObjects => "virtualize-objects",
        }
    }

    pub fn named(name: &str) -> Option<Pass> {
        Pass::ALL.into_iter().find(|p| p.name() == name)
    }

    /// Runs it on `f`; answers whether it changed anything (`forward-loads` and the
    /// virtualizations of closures and contexts say, for the pipeline to run others again;
    /// the rest answer true).
    pub fn run(self, f: &mut Function, codes: &Codes) -> Result<bool, String> {
        match self {
            Pass::TrimStates => states::trim(f, codes.own(f)?, codes.inlined),
            Pass::PruneParams => params::prune(f),
            Pass::Fold => fold::fold(f),
            Pass::CheckEntries => entries::check(f, codes.own(f)?),
            Pass::EliminateGuards => guards::eliminate(f),
            Pass::ForwardLoads => return Ok(loads::forward(f)),
            Pass::Dce => dce::dce(f),
            Pass::UnboxFloats => floats::unbox(f, codes.own(f)?),
            Pass::SinkClosures => closures::sink(f),
            Pass::VirtualizeClosures => return Ok(closures::virtualize(f)),
            Pass::VirtualizeContexts => return Ok(contexts::virtualize(f)),
            Pass::VirtualizeObjects => objects::virtualize(f),
        }
        Ok(true)
    }
}

/// The bytecode the passes read (liveness, the frame's shape at loop entries): the
/// function's own code and the methods inlined into it.
pub struct Codes<'a> {
    pub own: Option<&'a Code>,
    pub inlined: &'a dyn Fn(CodeId) -> Option<&'static Code>,
}

impl<'a> Codes<'a> {
    fn own(&self, f: &Function) -> Result<&'a Code, String> {
        self.own
            .filter(|c| c.id == f.code)
            .ok_or_else(|| format!("no bytecode for {}, which the pass reads", f.name))
    }
}

/// What the caller of [`optimize`] sees of it: each pass as it starts and as it ends (the
/// compiler times them and prints the IR after them).
pub trait Observer {
    fn before(&mut self, pass: Pass) {
        let _ = pass;
    }

    fn after(&mut self, pass: Pass, f: &Function) {
        let _ = (pass, f);
    }
}

/// An observer that sees nothing.
pub struct Unobserved;

impl Observer for Unobserved {}

/// How often contexts and closures are virtualized again after each other: each round
/// frees one more level of blocks passed on through arguments.
const MAX_VIRTUALIZATION_ROUNDS: usize = 3;

/// Runs every pass on `f`, made from `code` and the methods inlined into it (`inlined`
/// finds their code), in their fixed order; `observer` sees each.
pub fn optimize(
    f: &mut Function,
    code: &Code,
    inlined: &dyn Fn(CodeId) -> Option<&'static Code>,
    observer: &mut dyn Observer,
) -> Result<(), String> {
    check(f, "building")?;
    let codes = Codes {
        own: Some(code),
        inlined,
    };
    let mut run = |f: &mut Function, pass: Pass| -> Result<bool, String> {
        observer.before(pass);
        let changed = pass.run(f, &codes)?;
        observer.after(pass, f);
        check(f, pass.name())?;
        Ok(changed)
    };
    run(f, Pass::TrimStates)?;
    run(f, Pass::PruneParams)?;
    run(f, Pass::Fold)?;
    run(f, Pass::CheckEntries)?;
    run(f, Pass::EliminateGuards)?;
    // What the guards proved folds further (a class switch's constant test).
    run(f, Pass::Fold)?;
    // After the guards: the getters inlined one after another read through one guarded
    // value now. The guards of what they read are then one too.
    if run(f, Pass::ForwardLoads)? {
        run(f, Pass::EliminateGuards)?;
        run(f, Pass::Fold)?;
    }
    run(f, Pass::Dce)?;
    run(f, Pass::PruneParams)?;
    // After dead code elimination: a loop's dead variables no longer hold a double's
    // parameter to a word.
    run(f, Pass::UnboxFloats)?;
    run(f, Pass::Dce)?;
    run(f, Pass::SinkClosures)?;
    run(f, Pass::VirtualizeClosures)?;
    run(f, Pass::Dce)?;
    // A closure a context held (a block passed on through an argument) has only frame states
    // left once that context is virtual and its slots' parameters that merge one value are
    // gone, and the context it was made over may follow.
    let mut rounds = 0;
    while run(f, Pass::VirtualizeContexts)? && rounds < MAX_VIRTUALIZATION_ROUNDS {
        run(f, Pass::PruneParams)?;
        run(f, Pass::Dce)?;
        if !run(f, Pass::VirtualizeClosures)? {
            break;
        }
        rounds += 1;
    }
    run(f, Pass::VirtualizeObjects)?;
    // The slots' parameters where paths merge one value, and the loads' now unused nils.
    run(f, Pass::PruneParams)?;
    run(f, Pass::Dce)?;
    // A double stored into a virtual object's field and loaded back is the double again.
    run(f, Pass::UnboxFloats)?;
    run(f, Pass::Dce)?;
    Ok(())
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

/// In debug builds (tests among them), the IR's invariants after `after`.
fn check(f: &Function, after: &str) -> Result<(), String> {
    if cfg!(debug_assertions) {
        crate::verify::verify(f).map_err(|e| format!("invalid IR after {after}: {e}"))
    } else {
        Ok(())
    }
}
