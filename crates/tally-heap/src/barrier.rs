//! The write barrier of the generational plans (MMTk's object-remembering `ObjectBarrier`).
//!
//! A nursery collection traces only from the roots and from the *remembered* mature objects,
//! so every store that may create a mature → young reference must remember its container. MMTk
//! keeps one "unlog" bit per 8 bytes of heap in global side metadata: 1 = mature and not yet
//! remembered (the store must take the slow path), 0 = young, or already remembered since the
//! last collection. The slow path clears the bit and puts the object in the mutator's
//! remembered set; the next collection scans it and sets the bit again.
//!
//! The fast path is inlined here (for the interpreter and primitives, through
//! [`Value::set_slot`]) and in compiled code (through [`unlog_table`]); both compute the
//! same address: byte `base + (object >> 6)`, bit `(object >> 3) & 7`.
//!
//! The side metadata exists only under plans that need it, so the barrier is off until
//! `Heap::new` starts such a plan: reading the table under any other plan would touch
//! unmapped memory.

use std::sync::atomic::{AtomicBool, Ordering};

use mmtk::plan::BarrierSelector;
use mmtk::util::metadata::side_metadata::SideMetadataSpec;
use mmtk::util::{Address, ObjectReference};
use mmtk::vm::ObjectModel;
use mmtk::MMTK;

use crate::binding::{fatal, Tally, TallyObjectModel, ValueSlot, MUTATOR};
use crate::object::HEADER_BYTES;
use crate::value::Value;

/// Set once by `Heap::new` when the plan uses the object barrier.
static ACTIVE: AtomicBool = AtomicBool::new(false);

/// Counts slow-path calls (objects remembered); read by `Heap::stats`.
static SLOW_CALLS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// Where compiled code finds the unlog bits: the address of the table, which MMTk maps at a
/// fixed place. `None` while no plan with a barrier runs, so compiled code then stores
/// without one.
pub fn unlog_table() -> Option<u64> {
    ACTIVE.load(Ordering::Relaxed).then_some(UNLOG_TABLE as u64)
}

/// The unlog bits' side-metadata spec, and the table's address, known at compile time so the
/// inlined fast path loads from a constant.
const UNLOG_SPEC: &SideMetadataSpec = TallyObjectModel::GLOBAL_LOG_BIT_SPEC
    .as_spec()
    .extract_side_spec();
const UNLOG_TABLE: usize = UNLOG_SPEC.get_absolute_offset().as_usize();

/// Turns the barrier on if `mmtk`'s plan needs it. Checks that the table has the shape the
/// inlined fast paths assume (one bit per 8-byte granule, one contiguous global table).
pub(crate) fn enable_for(mmtk: &MMTK<Tally>) {
    if mmtk.get_plan().constraints().barrier != BarrierSelector::ObjectBarrier {
        return;
    }
    let spec = UNLOG_SPEC;
    assert!(
        spec.is_global && spec.log_num_of_bits == 0 && spec.log_bytes_in_region == 3,
        "the unlog bits are not one bit per 8 bytes: the inlined barrier would read the wrong bit"
    );
    ACTIVE.store(true, Ordering::Relaxed);
}

pub(crate) fn slow_calls() -> u64 {
    SLOW_CALLS.load(Ordering::Relaxed)
}

/// Whether `object`'s unlog bit is set, i.e. a store of a reference into it must remember it.
///
/// # Safety
/// The barrier is active (the table is mapped) and `object` is a live heap object.
#[inline(always)]
unsafe fn is_unlogged(object: u64) -> bool {
    let address = object as usize;
    let byte = (UNLOG_TABLE + (address >> 6)) as *const u8;
    // SAFETY: the caller guarantees the table is mapped; it covers every address of MMTk's
    // spaces, where every heap object lives.
    let bits = unsafe { byte.read() };
    (bits >> ((address >> 3) & 7)) & 1 != 0
}

/// The barrier after `object`'s slot was overwritten with `stored`. Immediates cannot create a
/// mature → young edge, so only references are checked.
#[inline(always)]
pub(crate) fn after_store(object: Value, stored: Value) {
    if stored.is_ref() && ACTIVE.load(Ordering::Relaxed) {
        // SAFETY: active means the plan maps the table; `object` is live (the accessors'
        // access invariant).
        if unsafe { is_unlogged(object.0) } {
            remember(object.0);
        }
    }
}

/// The slow path: remembers `object` in the mutator's modified-objects buffer. It allocates no
/// heap object and never collects, so compiled code may call it without spilling its values
/// to the frame (the JIT's `write_barrier` stub).
#[cold]
#[inline(never)]
pub fn remember(object: u64) {
    let Some(src) = ObjectReference::from_raw_address(Address::from_ptr(object as *const u8))
    else {
        fatal("write barrier on a null object");
    };
    debug_assert!(
        ACTIVE.load(Ordering::Relaxed),
        "write barrier slow path under a plan without one"
    );
    let mutator = MUTATOR.load(Ordering::Acquire);
    if mutator.is_null() {
        fatal("write barrier without a bound mutator");
    }
    SLOW_CALLS.fetch_add(1, Ordering::Relaxed);
    let slot = ValueSlot::at(Address::from_ptr(
        (object as usize + HEADER_BYTES) as *const u8,
    ));
    // SAFETY: the mutator stays bound while any object exists to be stored into, and only this
    // (the mutator) thread uses it outside a collection; no collection runs during a store.
    let mutator = unsafe { &mut *mutator };
    // MMTk's slow path re-checks the bit atomically, so a racing caller cannot log twice.
    mutator.barrier.object_reference_write_slow(src, slot, None);
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_barrier_is_off_without_a_heap() {
        assert_eq!(super::unlog_table(), None);
    }
}
