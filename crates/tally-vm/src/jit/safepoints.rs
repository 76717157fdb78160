//! Where the optimizing tier's native code keeps references across calls: for each call that may
//! collect (a safepoint), the slots of its native frame that hold live references, from
//! Cranelift's user stack maps. The collector reads them through the frame's
//! [`crate::frames::NativeActivation`] and updates the slots in place; the code reloads
//! them after the call.

use std::sync::OnceLock;

use super::exit_plans::ExitPlan;
use crate::bytecode::CodeId;

/// The slots of one safepoint: `span` is the frame pointer less the stack pointer at the
/// call, each offset is from that stack pointer. `inlined`: the activations inlined into
/// the frame's that the call is made from, innermost first, each as a frame would show it
/// (code, `ip` one past its call); empty for a call of the frame's own code.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SafepointMap {
    pub span: u32,
    pub offsets: Vec<u32>,
    pub inlined: Vec<(CodeId, u32)>,
}

/// The tables the VM reads while one compiled version runs: its safepoints, indexed by the
/// number its code stores in `NativeActivation::safepoint`, and the plans of its exits
/// ([`ExitPlan`]), indexed by the number each exit passes `Stubs::ir_exit`. Made empty
/// before the code is generated (the code embeds its address) and filled once the stack
/// maps are known, before the code can run.
#[derive(Debug, Default)]
pub struct SafepointTable {
    maps: OnceLock<Vec<SafepointMap>>,
    exits: OnceLock<Vec<ExitPlan>>,
    /// The profile's column of the tier the version was compiled for (how samples mark the
    /// activations inlined into its frames).
    tier_column: u8,
}

impl SafepointTable {
    /// The table of a version of the tier of profile column `tier_column`.
    pub fn new(tier_column: u8) -> SafepointTable {
        SafepointTable {
            tier_column,
            ..SafepointTable::default()
        }
    }

    /// The profile's column of the version's tier.
    pub fn tier_column(&self) -> u8 {
        self.tier_column
    }

    /// Sets the maps; an error if they were set already.
    pub fn set(&self, maps: Vec<SafepointMap>) -> Result<(), String> {
        self.maps
            .set(maps)
            .map_err(|_| "the safepoint table is set already".to_string())
    }

    /// Sets the exits' plans; an error if they were set already.
    pub fn set_exits(&self, plans: Vec<ExitPlan>) -> Result<(), String> {
        self.exits
            .set(plans)
            .map_err(|_| "the exit plans are set already".to_string())
    }

    /// The plan of exit `k`.
    pub(crate) fn exit(&self, k: u32) -> Option<&ExitPlan> {
        self.exits.get()?.get(k as usize)
    }

    /// The addresses of the live references of the activation whose frame pointer is `fp`,
    /// suspended at `safepoint`. None for a safepoint the table does not know (a bug in the
    /// code generator): no slot is guessed.
    pub(crate) fn slots(&self, safepoint: u32, fp: usize) -> impl Iterator<Item = usize> + '_ {
        let map = self.maps.get().and_then(|m| m.get(safepoint as usize));
        debug_assert!(map.is_some(), "safepoint {safepoint} has no map");
        map.into_iter().flat_map(move |m| {
            let sp = fp - m.span as usize;
            m.offsets.iter().map(move |&o| sp + o as usize)
        })
    }

    /// The activations inlined into the frame at `safepoint` (see [`SafepointMap`]); empty
    /// for a safepoint the table does not know. Async-signal-safe: the maps are immutable
    /// once set, and reading them is an atomic load.
    pub fn inlined(&self, safepoint: u32) -> &[(CodeId, u32)] {
        self.maps
            .get()
            .and_then(|m| m.get(safepoint as usize))
            .map_or(&[], |m| &m.inlined)
    }

    pub fn len(&self) -> usize {
        self.maps.get().map_or(0, Vec::len)
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_are_below_the_frame_pointer_by_the_span() {
        let t = SafepointTable::new(2);
        t.set(vec![
            SafepointMap {
                span: 64,
                offsets: vec![0, 16],
                inlined: vec![(3, 5)],
            },
            SafepointMap::default(),
        ])
        .unwrap();
        assert_eq!(t.slots(0, 1000).collect::<Vec<_>>(), vec![936, 952]);
        assert_eq!(t.slots(1, 1000).count(), 0);
        assert_eq!(t.inlined(0), &[(3, 5)]);
        assert!(t.inlined(1).is_empty() && t.inlined(7).is_empty());
        assert!(t.set(Vec::new()).is_err(), "set once");
    }
}
