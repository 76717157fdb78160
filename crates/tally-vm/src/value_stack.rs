//! The value stack: receivers, arguments, locals and operands of every frame, in one array
//! reserved up front so that it never moves.
//!
//! Compiled code keeps the array's address and a stack height in registers and reads and writes
//! slots directly, so the array must not be reallocated while it runs; the pages are zeroed
//! and only become resident as the stack grows. A frame is entered only when its whole height
//! (`Code::max_height`, plus `HEADROOM` for the few values the VM itself pushes on a frame's
//! behalf) fits, so pushes inside a frame never run past the end.

use tally_heap::Value;

/// Values the VM may push above a frame's own maximum height on its behalf: the selector and
/// argument array of `doesNotUnderstand:arguments:`, the receiver and name of
/// `unknownGlobal:`, the receiver and block of `escapedBlock:`.
pub(crate) const HEADROOM: usize = 4;

/// A stack of values with a fixed capacity and a stable address (`#[repr(C)]`: compiled code
/// reads `base` and `len` at fixed offsets).
#[repr(C)]
pub struct ValueStack {
    /// The first slot of a zeroed allocation of `capacity` values, owned by this stack (freed
    /// in `Drop`). Every access goes through it, the VM's and compiled code's alike.
    base: *mut Value,
    /// The number of live values; above `capacity` only while the frames of an inline chain
    /// rebuilt past it run (see `with_capacity`).
    len: usize,
    capacity: usize,
    /// The slots allocated: `capacity` and the reserve beyond it.
    allocated: usize,
}

impl ValueStack {
    /// Reserves `capacity` slots, and `reserve` more beyond them that no room check grants:
    /// the frames an optimized activation's inline chain rebuilds when it deoptimizes fit
    /// there whatever the height it ran at (`jit::INLINED_FRAMES_ROOM`). Zeroed pages cost
    /// nothing until used.
    pub fn with_capacity(capacity: usize, reserve: usize) -> ValueStack {
        let capacity = capacity.max(HEADROOM + 1);
        let allocated = capacity + reserve;
        let slots: Box<[Value]> = bytemuck::zeroed_slice_box(allocated);
        ValueStack {
            base: Box::into_raw(slots) as *mut Value,
            len: 0,
            capacity,
            allocated,
        }
    }

    #[inline(always)]
    pub fn len(&self) -> usize {
        self.len
    }

    /// The address of slot `i`, for tools that simulate the memory the program touches.
    pub fn slot_address(&self, i: usize) -> u64 {
        self.base.wrapping_add(i) as usize as u64
    }

    #[inline(always)]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Whether `n` more values fit.
    #[inline(always)]
    pub fn has_room(&self, n: usize) -> bool {
        self.len.saturating_add(n) <= self.capacity
    }

    /// Pushes a value. Crate-private and unchecked in release builds: frames are entered only
    /// when their whole height fits (`Code::room_above_arguments`), and everything else that
    /// pushes (primitives spreading arguments, the VM's own sends) checks `has_room` or stays
    /// within `HEADROOM`, the same invariant compiled code relies on. (A check here, however
    /// cold, cost the interpreter 5 % on arithmetic loops.)
    #[inline(always)]
    pub(crate) fn push(&mut self, v: Value) {
        let len = self.len;
        debug_assert!(len < self.allocated, "value stack overflow inside a frame");
        // SAFETY: `len < allocated` (see above), so the slot lies inside the allocation.
        unsafe { self.base.add(len).write(v) };
        self.len = len + 1;
    }

    #[inline(always)]
    pub fn pop(&mut self) -> Option<Value> {
        let v = *self.live().last()?;
        self.len -= 1;
        Some(v)
    }

    #[inline(always)]
    pub fn last(&self) -> Option<&Value> {
        self.live().last()
    }

    #[inline(always)]
    pub fn last_mut(&mut self) -> Option<&mut Value> {
        self.live_mut().last_mut()
    }

    #[inline(always)]
    pub fn truncate(&mut self, len: usize) {
        self.len = self.len.min(len);
    }

    /// Grows (filling with `fill`) or shrinks to `len` values; growing past the capacity is a
    /// VM bug and panics.
    #[inline(always)]
    pub(crate) fn resize(&mut self, len: usize, fill: Value) {
        assert!(len <= self.allocated, "value stack overflow inside a frame");
        let old = self.len;
        self.len = len;
        if len > old {
            self.live_mut()[old..].fill(fill);
        }
    }

    /// Pushes every value of `values`; callers have checked `has_room`.
    #[cfg(test)]
    pub(crate) fn extend(&mut self, values: impl IntoIterator<Item = Value>) {
        for v in values {
            self.push(v);
        }
    }

    /// The live values, bottom first. Indexing checks against the height, as a `Vec` does,
    /// which the interpreter's `stack[len - n]` lets the compiler fold away.
    #[inline(always)]
    pub fn live(&self) -> &[Value] {
        // SAFETY: `base` is the start of an allocation of `allocated` values, and
        // `len <= allocated` always holds: `push` and `resize` check before raising it, `pop`
        // and `truncate` lower it, and compiled code raises it only within a frame's checked
        // room (`Code::room_above_arguments`) or, rebuilding an inline chain's frames,
        // within the reserve.
        unsafe { std::slice::from_raw_parts(self.base, self.len) }
    }

    #[inline(always)]
    pub fn live_mut(&mut self) -> &mut [Value] {
        // SAFETY: as in `live`; `&mut self` makes the slice the only access.
        unsafe { std::slice::from_raw_parts_mut(self.base, self.len) }
    }

    pub fn iter_mut(&mut self) -> std::slice::IterMut<'_, Value> {
        self.live_mut().iter_mut()
    }

    /// Where compiled code finds the array's address and the stack height.
    pub(crate) const BASE_OFFSET: usize = std::mem::offset_of!(ValueStack, base);
    pub(crate) const LEN_OFFSET: usize = std::mem::offset_of!(ValueStack, len);
    pub(crate) const CAPACITY_OFFSET: usize = std::mem::offset_of!(ValueStack, capacity);
}

impl Drop for ValueStack {
    fn drop(&mut self) {
        let slots = std::ptr::slice_from_raw_parts_mut(self.base, self.allocated);
        // SAFETY: `base` and `allocated` are the pointer and length of the boxed slice made in
        // `with_capacity`, freed only here.
        drop(unsafe { Box::from_raw(slots) });
    }
}

impl std::ops::Index<usize> for ValueStack {
    type Output = Value;

    #[inline(always)]
    fn index(&self, i: usize) -> &Value {
        &self.live()[i]
    }
}

impl std::ops::IndexMut<usize> for ValueStack {
    #[inline(always)]
    fn index_mut(&mut self, i: usize) -> &mut Value {
        &mut self.live_mut()[i]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pushes_pops_and_keeps_its_address() {
        let mut s = ValueStack::with_capacity(16, 0);
        let base = s.base;
        s.push(Value::from_small_int(1));
        s.resize(4, Value::NIL);
        assert_eq!(s.len(), 4);
        assert_eq!(s[3], Value::NIL);
        assert_eq!(s.pop(), Some(Value::NIL));
        s.truncate(1);
        assert_eq!(s.last(), Some(&Value::from_small_int(1)));
        assert!(s.has_room(15) && !s.has_room(16));
        assert_eq!(s.base, base);
    }

    #[test]
    #[should_panic]
    fn a_push_past_the_capacity_panics_instead_of_writing_out_of_bounds() {
        let mut s = ValueStack::with_capacity(HEADROOM + 1, 0);
        for _ in 0..=HEADROOM + 1 {
            s.push(Value::NIL);
        }
    }
}
