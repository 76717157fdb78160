//! The activation stack, laid out so a profiler's signal handler can read it in place.
//!
//! Frames live in one array reserved up front for the deepest allowed stack (the pages are
//! only touched as the stack grows), so a frame never moves while it is live. That lets the
//! sampler read method and bytecode index straight from the frames (`tally_profile::StackView`)
//! instead of the interpreter keeping a second, shadow stack on every call and return.

use std::sync::atomic::{compiler_fence, Ordering};

use tally_heap::Value;
use tally_profile::{MethodId, RawFrame, StackView, TripWord, YieldpointFlag};

use crate::bytecode::CodeId;

/// One activation. Its receiver, arguments, stack locals and operand stack are the value
/// stack from `bp` up.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct Frame {
    /// The code running here; samples read this field.
    pub code: CodeId,
    /// The next instruction. Saved at calls, so a caller's is one past its call site; samples
    /// read this field.
    pub ip: u32,
    pub bp: u32,
    /// Which code runs this frame, for samples ([`tally_profile::FrameMark`]): 0 while the
    /// interpreter runs it (it clears the mark whenever it takes a frame over); while a
    /// profile is recorded, the tier of the compiled code that runs it, written as the frame
    /// is pushed by compiled code (with `bp`, in one store; `INLINED` for an inlined method's
    /// frame) or entered by the dispatcher. Must follow `bp` directly.
    pub mark: u32,
    /// This activation's context (own, or for a block without one, its closure's), or nil.
    pub ctx: Value,
    /// The closure being run, or NONE for a method activation.
    pub closure: Value,
}

/// What the collector needs of an activation that the optimizing tier's native code runs: its
/// references live across a call are in its native frame (Cranelift's stack maps), not in
/// the value stack. One per frame, beside the frame array at the same index (the same
/// size, so native code finds its record at a fixed distance from its frame); `fp` is 0
/// while no native code runs the frame, so only records of suspended native activations
/// are read. Native code writes `fp` and `table` at entry, `safepoint` before each call
/// that may collect, and clears `fp` on every way out.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct NativeActivation {
    /// The native frame pointer of the activation's code.
    pub fp: usize,
    /// Its version's `jit::SafepointTable` (kept alive for the VM's life).
    pub table: usize,
    /// The safepoint (an index into the table) of the call it is suspended in.
    pub safepoint: u32,
    _pad: u32,
    _pad2: u64,
}

const _: () = assert!(std::mem::size_of::<NativeActivation>() == std::mem::size_of::<Frame>());

// SAFETY: integers only.
unsafe impl bytemuck::Zeroable for NativeActivation {}

// Compiled code writes `bp` and `mark` with one 64-bit store.
const _: () = assert!(std::mem::offset_of!(Frame, mark) == std::mem::offset_of!(Frame, bp) + 4);

// SAFETY: every field is an integer or a `Value` (a `u64` whose all-zero pattern is
// `Value::NONE`), so the all-zero bit pattern is a valid `Frame`.
unsafe impl bytemuck::Zeroable for Frame {}

impl Frame {
    pub fn new(code: CodeId, bp: usize, ctx: Value, closure: Value) -> Frame {
        Frame {
            code,
            ip: 0,
            bp: bp as u32,
            mark: 0,
            ctx,
            closure,
        }
    }

    #[inline(always)]
    pub fn bp(&self) -> usize {
        self.bp as usize
    }
}

/// A stack of frames with a fixed capacity: pushing past it is the VM's stack overflow.
///
/// The two depth bounds the interpreter checks anyway, on every call and every return, are
/// [`TripWord`]s: a profiler attaches them to its yieldpoint flag, so a raised flag makes
/// those checks fail and the interpreter serves it on its slow path. That is how prologue
/// and epilogue yieldpoints cost no instruction of their own.
pub struct FrameStack {
    /// The number of live frames. Boxed with the array in `Runtime` so its address is stable.
    len: usize,
    /// The first frame of `frames`, for compiled code.
    base: *mut Frame,
    /// `capacity` frames, and the reserve beyond (see `with_capacity`).
    frames: Box<[Frame]>,
    /// The frames pushes may take.
    capacity: usize,
    /// The native activation records, one per frame slot.
    native: Box<[NativeActivation]>,
    /// `native`'s address less `frames`'s: a frame's record is at its address plus this.
    native_delta: isize,
    /// How many frames `push_within_limit` allows: the capacity, or 0 while tripped.
    limit: TripWord,
    /// The depth at or below which a return leaves the running dispatch loop (its base
    /// depth), or `usize::MAX` while tripped.
    exit_depth: TripWord,
}

impl FrameStack {
    /// Reserves room for `capacity` frames, and `reserve` more beyond them that no push
    /// takes: the frames an optimized activation's inline chain rebuilds when it
    /// deoptimizes fit there at any depth (`jit::MAX_INLINED_FRAMES`). Zeroed pages cost
    /// nothing until used.
    pub fn with_capacity(capacity: usize, reserve: usize) -> Box<FrameStack> {
        let capacity = capacity.max(1);
        let mut frames: Box<[Frame]> = bytemuck::zeroed_slice_box(capacity + reserve);
        let native: Box<[NativeActivation]> = bytemuck::zeroed_slice_box(capacity + reserve);
        let native_delta = native.as_ptr() as isize - frames.as_ptr() as isize;
        Box::new(FrameStack {
            len: 0,
            base: frames.as_mut_ptr(),
            frames,
            capacity,
            native,
            native_delta,
            limit: TripWord::new(capacity, 0),
            exit_depth: TripWord::new(0, usize::MAX),
        })
    }

    /// Where compiled code finds the first frame and the number of live frames.
    pub(crate) const BASE_OFFSET: usize = std::mem::offset_of!(FrameStack, base);
    pub(crate) const LEN_OFFSET: usize = std::mem::offset_of!(FrameStack, len);
    /// Where native code finds the distance from a frame to its `NativeActivation`.
    pub(crate) const NATIVE_DELTA_OFFSET: usize = std::mem::offset_of!(FrameStack, native_delta);
    /// The push limit's and the exit depth's current values (`TripWord`s).
    pub(crate) const LIMIT_OFFSET: usize =
        std::mem::offset_of!(FrameStack, limit) + TripWord::VALUE_OFFSET;
    pub(crate) const EXIT_DEPTH_OFFSET: usize =
        std::mem::offset_of!(FrameStack, exit_depth) + TripWord::VALUE_OFFSET;

    /// Lets `flag` trip the depth bounds.
    ///
    /// # Safety
    /// This stack must outlive the attachment: detach the flag's words
    /// (`YieldpointFlag::detach_all`), after stopping everything that raises it, before
    /// dropping the stack.
    pub unsafe fn attach_to(&self, flag: &YieldpointFlag) -> Result<(), String> {
        // SAFETY: forwarded to our caller.
        unsafe {
            flag.attach(&self.limit)
                .and_then(|()| flag.attach(&self.exit_depth))
        }
        .map_err(|e| e.to_string())
    }

    /// Whether the flag has tripped either depth bound (two loads, for slow paths).
    pub fn bounds_tripped(&self) -> bool {
        self.limit.is_tripped() || self.exit_depth.is_tripped()
    }

    /// The depth bound of a return: at or below it, leave the loop or serve the flag.
    #[inline(always)]
    pub fn exit_depth(&self) -> usize {
        self.exit_depth.get()
    }

    /// Makes `depth` the running loop's base depth, answering the enclosing loop's.
    pub fn set_exit_depth(&self, depth: usize) -> usize {
        self.exit_depth.set_armed(depth)
    }

    #[inline(always)]
    pub fn len(&self) -> usize {
        self.len
    }

    #[inline(always)]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Pushes a frame; false when the stack is full or its limit is tripped (`is_full` tells
    /// which). The one check of the interpreter's call path.
    #[inline(always)]
    #[must_use]
    pub fn push_within_limit(&mut self, frame: Frame) -> bool {
        let len = self.len;
        if len < self.limit.get() {
            // SAFETY: the limit is the capacity or 0 (tripped), so `len < capacity`.
            unsafe { *self.frames.get_unchecked_mut(len) = frame };
            compiler_fence(Ordering::Release);
            self.len = len + 1;
            true
        } else {
            false
        }
    }

    /// Whether every frame slot is taken: a failed push is then a stack overflow.
    pub fn is_full(&self) -> bool {
        self.len >= self.capacity
    }

    /// Pushes a frame whatever the limit; false when the stack is full.
    #[inline(always)]
    #[must_use]
    pub fn push(&mut self, frame: Frame) -> bool {
        self.len < self.capacity && self.push_rebuilt(frame)
    }

    /// Pushes a frame of an inline chain an exit rebuilds, into the reserve beyond the
    /// capacity if need be (`jit::MAX_INLINED_FRAMES` frames are kept there); false when
    /// even the reserve is full.
    #[inline(always)]
    #[must_use]
    pub(crate) fn push_rebuilt(&mut self, frame: Frame) -> bool {
        match self.frames.get_mut(self.len) {
            Some(slot) => {
                *slot = frame;
                // A sampler interrupting this thread must never count a frame whose fields
                // are not written yet: keep the compiler from sinking the write below this.
                compiler_fence(Ordering::Release);
                self.len += 1;
                true
            }
            None => false,
        }
    }

    #[inline(always)]
    pub fn pop(&mut self) -> Option<Frame> {
        if self.len == 0 {
            return None;
        }
        self.len -= 1;
        Some(self.frames[self.len])
    }

    #[inline(always)]
    pub fn last(&self) -> Option<&Frame> {
        self.len.checked_sub(1).map(|i| &self.frames[i])
    }

    #[inline(always)]
    pub fn last_mut(&mut self) -> Option<&mut Frame> {
        self.len.checked_sub(1).map(|i| &mut self.frames[i])
    }

    /// The top frame; the interpreter only runs with one.
    #[inline(always)]
    pub fn top(&self) -> &Frame {
        &self.frames[self.len - 1]
    }

    #[inline(always)]
    pub fn top_mut(&mut self) -> &mut Frame {
        &mut self.frames[self.len - 1]
    }

    pub fn get(&self, index: usize) -> Option<&Frame> {
        self.live().get(index)
    }

    pub fn truncate(&mut self, len: usize) {
        self.len = self.len.min(len);
    }

    pub fn live(&self) -> &[Frame] {
        &self.frames[..self.len]
    }

    pub fn live_mut(&mut self) -> &mut [Frame] {
        &mut self.frames[..self.len]
    }

    /// Visits the references that suspended native activations of live frames hold in
    /// their native frames, in place (a moving collector updates them there).
    pub(crate) fn visit_native_roots(&mut self, visit: &mut dyn FnMut(&mut Value)) {
        for n in &self.native[..self.len] {
            if n.fp == 0 {
                continue;
            }
            // SAFETY: a non-zero `fp` is written by native code that is suspended in a call
            // (it clears it on every way out), with `table` its version's table, which the
            // VM keeps for its life; the table's slots are that frame's stack-map slots at
            // the safepoint it stored.
            unsafe {
                let table = &*(n.table as *const crate::jit::SafepointTable);
                for slot in table.slots(n.safepoint, n.fp) {
                    visit(&mut *(slot as *mut Value));
                }
            }
        }
    }

    /// The activations inlined into live frame `index`'s that its compiled code is making a
    /// call from (innermost first: code and `ip`, one past its call), while the code is
    /// suspended in a call; empty otherwise. What stack traces, profiler hooks and samples
    /// show above the frame.
    pub fn inlined_at(&self, index: usize) -> &[(CodeId, u32)] {
        let Some(n) = self.native[..self.len].get(index) else {
            return &[];
        };
        if n.fp == 0 || n.table == 0 {
            return &[];
        }
        // SAFETY: a non-zero `fp` is written by native code running the frame, with `table`
        // its version's table, which the VM keeps for its life.
        let table = unsafe { &*(n.table as *const crate::jit::SafepointTable) };
        table.inlined(n.safepoint)
    }

    /// Where a sampler finds these frames.
    ///
    /// The view stays valid as long as this `FrameStack` is alive: the array and the length
    /// are heap-allocated and never reallocated. The VM stops its sampler before dropping it.
    pub fn stack_view(&self) -> StackView {
        StackView {
            base: self.frames.as_ptr() as *const u8,
            len: &self.len,
            stride: std::mem::size_of::<Frame>(),
            read: read_frame,
            aside: self.native_delta,
            inlined: read_inlined,
        }
    }
}

/// Reads one frame for a sample: the method and the bytecode index of its last call (for the
/// innermost frame too: the interpreter saves its position only at calls and yieldpoints, so
/// the innermost frame is placed at its most recent call, or at `ENTRY_BCI`, "entered", when
/// it has saved none, rather than at bytecode 0, which would claim a position).
///
/// # Safety
/// `frame` points at a live `Frame` of a `FrameStack` (see `FrameStack::stack_view`).
unsafe fn read_frame(frame: *const u8, _innermost: bool) -> RawFrame {
    let frame = frame as *const Frame;
    // SAFETY: the caller passes a pointer to a frame inside the stack's array; volatile because
    // the interpreter writes these words without synchronisation and the handler may run
    // between any two of its instructions (an aligned word is either written or not).
    let (code, ip, mark) = unsafe {
        (
            std::ptr::read_volatile(std::ptr::addr_of!((*frame).code)),
            std::ptr::read_volatile(std::ptr::addr_of!((*frame).ip)),
            std::ptr::read_volatile(std::ptr::addr_of!((*frame).mark)),
        )
    };
    RawFrame::from_mark(
        MethodId(code),
        ip.checked_sub(1).unwrap_or(tally_profile::ENTRY_BCI),
        mark,
    )
}

/// Reads, for a sample, the activations inlined into a frame that its compiled code is
/// making a call from (see [`FrameStack::inlined_at`]), innermost first.
///
/// # Safety
/// `frame` points at a live `Frame` of a `FrameStack` whose native records are `aside`
/// bytes from its frames (see `FrameStack::stack_view`).
unsafe fn read_inlined(frame: *const u8, aside: isize, out: &mut dyn FnMut(RawFrame)) {
    // SAFETY: the record beside a live frame is inside the records' array; volatile because
    // native code writes it without synchronisation (each aligned word is written or not).
    let (fp, table, safepoint) = unsafe {
        let n = frame.offset(aside) as *const NativeActivation;
        (
            std::ptr::read_volatile(std::ptr::addr_of!((*n).fp)),
            std::ptr::read_volatile(std::ptr::addr_of!((*n).table)),
            std::ptr::read_volatile(std::ptr::addr_of!((*n).safepoint)),
        )
    };
    if fp == 0 || table == 0 {
        return;
    }
    // SAFETY: a non-zero table is a version's `SafepointTable`, which the VM keeps for its
    // life (a stale one, of the activation before at this depth, is as valid: at worst the
    // sample names that call's chain); `inlined` reads it with atomic loads only.
    let table = unsafe { &*(table as *const crate::jit::SafepointTable) };
    let mark = tally_profile::FrameMark::of(table.tier_column(), true);
    for &(code, ip) in table.inlined(safepoint) {
        out(RawFrame::from_mark(
            MethodId(code),
            ip.saturating_sub(1),
            mark,
        ));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn push_pop_and_overflow() {
        let mut s = FrameStack::with_capacity(2, 0);
        assert!(s.push(Frame::new(7, 0, Value::NIL, Value::NONE)));
        assert!(s.push(Frame::new(8, 3, Value::NIL, Value::NONE)));
        assert!(!s.push(Frame::new(9, 5, Value::NIL, Value::NONE)), "full");
        assert_eq!(s.len(), 2);
        assert_eq!(s.top().code, 8);
        assert_eq!(s.pop().map(|f| f.bp()), Some(3));
        assert_eq!(s.top().code, 7);
    }

    #[test]
    fn a_raised_flag_trips_the_limit_and_the_exit_depth() {
        let flag = YieldpointFlag::new();
        let mut s = FrameStack::with_capacity(4, 0);
        // SAFETY: `s` outlives the attachment; detached below.
        unsafe { s.attach_to(&flag).unwrap() };
        assert_eq!(s.set_exit_depth(1), 0);
        assert!(s.push_within_limit(Frame::new(1, 0, Value::NIL, Value::NONE)));
        flag.raise(tally_profile::flag::SAMPLE);
        assert!(!s.push_within_limit(Frame::new(2, 1, Value::NIL, Value::NONE)));
        assert!(!s.is_full(), "tripped, not full");
        assert_eq!(s.exit_depth(), usize::MAX);
        assert!(
            s.push(Frame::new(2, 1, Value::NIL, Value::NONE)),
            "the slow path pushes"
        );
        flag.clear(tally_profile::flag::SAMPLE);
        assert_eq!(s.exit_depth(), 1);
        assert!(s.push_within_limit(Frame::new(3, 2, Value::NIL, Value::NONE)));
        assert!(s.push_within_limit(Frame::new(4, 3, Value::NIL, Value::NONE)));
        assert!(!s.push_within_limit(Frame::new(5, 4, Value::NIL, Value::NONE)));
        assert!(s.is_full());
        flag.detach_all();
    }

    #[test]
    fn the_view_reads_methods_and_call_sites() {
        let mut s = FrameStack::with_capacity(4, 0);
        assert!(s.push(Frame::new(1, 0, Value::NIL, Value::NONE)));
        s.top_mut().ip = 5;
        assert!(s.push(Frame::new(2, 1, Value::NIL, Value::NONE)));
        let view = s.stack_view();
        let published = tally_profile::PublishedState::new(1);
        // SAFETY: `s` outlives `published`'s snapshots in this test.
        unsafe { published.use_stack_view(view).unwrap() };
        let mut words = [0u64; 4];
        let (n, depth) = published.snapshot(|i, w| words[i] = w, 4, None);
        assert_eq!((n, depth), (2, 2));
        // The innermost frame has made no call yet: "entered", not a made-up position.
        assert_eq!(
            RawFrame::unpack(words[0]),
            RawFrame::interpreted(MethodId(2), tally_profile::ENTRY_BCI)
        );
        assert_eq!(
            RawFrame::unpack(words[1]),
            RawFrame::interpreted(MethodId(1), 4)
        );
    }
}
