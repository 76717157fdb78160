//! Object layout and the accessors the VM uses on heap references.
//!
//! Every object is two header words followed by its payload:
//!
//! ```text
//! word 0  bits 63..32  class id (u32, meaning is the VM's)
//!         bits 31..10  identity hash (22 bits, fixed at allocation)
//!         bits  9..2   kind (u8, meaning is the VM's)
//!         bits  1..0   MMTk forwarding state: always 00 in a live object
//! word 1  bits 63..32  byte length (u32)
//!         bits 31..0   slot count (u32)
//! then    slot count × Value
//! then    byte length raw bytes, padded with zeros to a multiple of 8
//! ```
//!
//! A reference is the address of word 0, so it is 8-aligned and fits `Value`'s `…000` tag.
//! While an object is being copied MMTk owns word 0 of the old copy: it keeps the forwarding
//! state in the two low bits (hence they must be zero in a live object) and then overwrites the
//! whole word with the forwarding pointer. Word 1, which says how big the object is, is never
//! touched, so the collector can always size an object.
//!
//! # The access invariant
//!
//! The accessors below are safe functions over raw memory. They rely on one invariant the VM
//! must keep: the `Value` is a reference returned by this heap's `alloc` that is *not stale*,
//! i.e. it was read from a root (or from a field of an object reached from a root) after the
//! most recent call to `Heap::alloc` or `Heap::collect`. Any of those calls may move every object,
//! and the old address then points into released memory. Debug builds check that the value is a
//! reference and that its header does not look forwarded; indices are always bounds-checked.

use crate::value::Value;

/// Bytes of header in front of every object's payload.
pub const HEADER_BYTES: usize = 16;

const FORWARDING_MASK: u64 = 0b11;
const KIND_SHIFT: u32 = 2;
/// Where the identity hash sits in word 0 (code that writes headers itself needs it).
pub const HASH_SHIFT: u32 = 10;
/// Width of the identity hash: what is left of word 0 after class id, kind and the GC's bits.
pub const HASH_BITS: u32 = 22;
const HASH_MASK: u64 = (1 << HASH_BITS) - 1;
const CLASS_SHIFT: u32 = 32;

/// Largest slot count and byte length a header can describe.
pub const MAX_SLOTS: usize = u32::MAX as usize;
pub const MAX_BYTES: usize = u32::MAX as usize;

/// Size in bytes of an object with `slots` slots and `bytes` payload bytes, or `None` if it
/// cannot be described by a header (or would overflow the address space).
pub fn object_size(slots: usize, bytes: usize) -> Option<usize> {
    if slots > MAX_SLOTS || bytes > MAX_BYTES {
        return None;
    }
    let slot_bytes = slots.checked_mul(8)?;
    let padded = bytes.checked_add(7)? & !7;
    HEADER_BYTES.checked_add(slot_bytes)?.checked_add(padded)
}

/// Header word 0 for a fresh object. `hash` is truncated to [`HASH_BITS`].
pub fn header_word0(class_id: u32, kind: u8, hash: u32) -> u64 {
    ((class_id as u64) << CLASS_SHIFT)
        | ((hash as u64 & HASH_MASK) << HASH_SHIFT)
        | ((kind as u64) << KIND_SHIFT)
}

/// Header word 1. Callers have checked the limits with [`object_size`].
pub fn header_word1(slots: usize, bytes: usize) -> u64 {
    debug_assert!(slots <= MAX_SLOTS && bytes <= MAX_BYTES);
    ((bytes as u64) << 32) | slots as u64
}

/// Size of an object from its header word 1; shared with the collector's object model.
pub fn size_from_word1(word1: u64) -> usize {
    let slots = (word1 & 0xffff_ffff) as usize;
    let bytes = (word1 >> 32) as usize;
    HEADER_BYTES + slots * 8 + ((bytes + 7) & !7)
}

/// Slot count from header word 1; shared with the collector's scanner.
pub fn slots_from_word1(word1: u64) -> usize {
    (word1 & 0xffff_ffff) as usize
}

impl Value {
    #[inline(always)]
    fn header(self) -> *mut u64 {
        debug_assert!(self.is_ref(), "not a heap reference: {self:?}");
        self.0 as usize as *mut u64
    }

    #[inline(always)]
    fn word0(self) -> u64 {
        // SAFETY: by the access invariant (module docs) `self` is the address of a live object,
        // whose first word is its header word 0; the mutator is the only thread touching objects
        // outside a collection, and collections only happen inside `Heap::alloc`/`collect`.
        let w = unsafe { self.header().read() };
        debug_assert_eq!(w & FORWARDING_MASK, 0, "stale reference {self:?}");
        w
    }

    #[inline(always)]
    fn word1(self) -> u64 {
        // SAFETY: as in `word0`; every object has two header words.
        unsafe { self.header().add(1).read() }
    }

    /// The VM's class id stored in the header.
    #[inline]
    pub fn class_id(self) -> u32 {
        (self.word0() >> CLASS_SHIFT) as u32
    }

    /// Changes the class id (e.g. to finish bootstrapping, or for `become`-like tricks).
    #[inline]
    pub fn set_class_id(self, class_id: u32) {
        let w = (self.word0() & 0xffff_ffff) | ((class_id as u64) << CLASS_SHIFT);
        // SAFETY: as in `word0`; writing the header of a live object from the mutator.
        unsafe { self.header().write(w) }
    }

    /// The VM's object kind stored in the header.
    #[inline]
    pub fn kind(self) -> u8 {
        (self.word0() >> KIND_SHIFT) as u8
    }

    /// A hash fixed when the object was allocated, so it survives moves; 22 bits wide.
    #[inline]
    pub fn identity_hash(self) -> u32 {
        ((self.word0() >> HASH_SHIFT) & HASH_MASK) as u32
    }

    #[inline]
    pub fn slot_count(self) -> usize {
        slots_from_word1(self.word1())
    }

    /// Reads slot `i`. Panics if `i` is out of bounds.
    #[inline]
    pub fn slot(self, i: usize) -> Value {
        assert!(i < self.slot_count(), "slot {i} out of bounds");
        // SAFETY: the object is live (access invariant) and `i` is within its slot count, so the
        // word lies inside the object.
        unsafe { self.slot_ptr(i).read() }
    }

    /// Writes slot `i`, with the generational plans' write barrier. Panics if `i` is out of
    /// bounds.
    ///
    /// Every store the VM makes into an object that may already be old goes through here
    /// (compiled code has its own copy of the barrier), so this is the interpreter's barrier.
    #[inline]
    pub fn set_slot(self, i: usize, v: Value) {
        assert!(i < self.slot_count(), "slot {i} out of bounds");
        // SAFETY: as in `slot`.
        unsafe { self.slot_ptr(i).write(v) }
        crate::barrier::after_store(self, v);
    }

    /// Writes slot `i` of an object allocated since the last allocation or collection, without
    /// the write barrier: such an object is young (or a new large object, which starts
    /// remembered), so the barrier could never fire. Panics if `i` is out of bounds.
    #[inline]
    pub fn init_slot(self, i: usize, v: Value) {
        assert!(i < self.slot_count(), "slot {i} out of bounds");
        // SAFETY: as in `slot`.
        unsafe { self.slot_ptr(i).write(v) }
    }

    #[inline(always)]
    fn slot_ptr(self, i: usize) -> *mut Value {
        (self.0 as usize + HEADER_BYTES + i * 8) as *mut Value
    }

    /// Number of raw payload bytes (without the padding).
    #[inline]
    pub fn byte_len(self) -> usize {
        (self.word1() >> 32) as usize
    }

    /// The raw payload bytes.
    ///
    /// The lifetime is unbounded because the heap cannot tie it to anything: the slice is valid
    /// only until the next `Heap::alloc` or `Heap::collect`, which may move the object. Do not
    /// hold it across an allocation; copy out what you need first.
    #[inline]
    pub fn bytes<'a>(self) -> &'a [u8] {
        let w1 = self.word1();
        let start = (self.0 as usize + HEADER_BYTES + slots_from_word1(w1) * 8) as *const u8;
        // SAFETY: the object is live (access invariant); its byte payload starts after its slots
        // and is `byte_len` bytes long, all initialised at allocation. Nothing moves or frees it
        // until the next allocation, which the caller must not reach while holding the slice.
        unsafe { std::slice::from_raw_parts(start, (w1 >> 32) as usize) }
    }

    /// The raw payload bytes, writable. Same rule as [`Value::bytes`]: do not hold the slice
    /// across an allocation, and do not hold two slices of the same object at once.
    #[inline]
    #[allow(clippy::mut_from_ref)]
    pub fn bytes_mut<'a>(self) -> &'a mut [u8] {
        let w1 = self.word1();
        let start = (self.0 as usize + HEADER_BYTES + slots_from_word1(w1) * 8) as *mut u8;
        // SAFETY: as in `bytes`; exclusivity is part of the documented contract, since a `Value`
        // is a copyable address that the borrow checker cannot track.
        unsafe { std::slice::from_raw_parts_mut(start, (w1 >> 32) as usize) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_are_header_plus_slots_plus_padded_bytes() {
        assert_eq!(object_size(0, 0), Some(16));
        assert_eq!(object_size(2, 0), Some(32));
        assert_eq!(object_size(0, 1), Some(24));
        assert_eq!(object_size(0, 8), Some(24));
        assert_eq!(object_size(1, 9), Some(40));
        assert_eq!(object_size(MAX_SLOTS + 1, 0), None);
        assert_eq!(object_size(0, MAX_BYTES + 1), None);
        for (s, b) in [(0, 0), (3, 5), (1000, 17), (MAX_SLOTS, MAX_BYTES)] {
            let w1 = header_word1(s, b);
            assert_eq!(size_from_word1(w1), object_size(s, b).unwrap());
            assert_eq!(slots_from_word1(w1), s);
        }
    }

    #[test]
    fn header_fields_do_not_overlap_and_leave_the_gc_bits_clear() {
        let w = header_word0(u32::MAX, u8::MAX, u32::MAX);
        assert_eq!(w & FORWARDING_MASK, 0);
        assert_eq!((w >> CLASS_SHIFT) as u32, u32::MAX);
        assert_eq!((w >> KIND_SHIFT) as u8, u8::MAX);
        assert_eq!((w >> HASH_SHIFT) & HASH_MASK, HASH_MASK);
        let w = header_word0(0x1234_5678, 0x9a, 0x0012_3456);
        assert_eq!((w >> CLASS_SHIFT) as u32, 0x1234_5678);
        assert_eq!((w >> KIND_SHIFT) as u8, 0x9a);
        assert_eq!((w >> HASH_SHIFT) & HASH_MASK, 0x12_3456);
    }

    #[test]
    fn accessors_work_on_a_hand_built_object() {
        // An object laid out in ordinary memory: the accessors only need the layout.
        let mut mem = [0u64; 5];
        mem[0] = header_word0(7, 3, 99);
        mem[1] = header_word1(2, 5);
        let v = Value(mem.as_mut_ptr() as u64);
        assert!(v.is_ref());
        v.set_slot(0, Value::NIL);
        v.set_slot(1, Value::from_small_int(-4));
        v.bytes_mut().copy_from_slice(b"hello");
        assert_eq!((v.class_id(), v.kind(), v.identity_hash()), (7, 3, 99));
        assert_eq!((v.slot_count(), v.byte_len()), (2, 5));
        assert_eq!(v.slot(0), Value::NIL);
        assert_eq!(v.slot(1).as_int(), Some(-4));
        assert_eq!(v.bytes(), b"hello");
        v.set_class_id(8);
        assert_eq!((v.class_id(), v.kind(), v.identity_hash()), (8, 3, 99));
    }

    #[test]
    #[should_panic(expected = "out of bounds")]
    fn slot_index_is_bounds_checked() {
        let mut mem = [header_word0(1, 1, 1), header_word1(1, 0), 0];
        let v = Value(mem.as_mut_ptr() as u64);
        v.slot(1);
    }
}
