//! The VM state a signal handler may read: a shadow stack of packed frames,
//! the VM state, and the id of the thread that owns them.
//!
//! # Protocol
//!
//! Only the owning VM thread writes; signal handlers only read.
//!
//! - The stack is a ring of `capacity` (a power of two) `AtomicU64` slots
//!   indexed by `depth % capacity`, so however deep the VM's stack is, the
//!   innermost `capacity` frames are always there; deeper samples are
//!   marked truncated.
//! - **push**: write the slot at index `depth`, *then* publish `depth + 1`
//!   (release). **pop**: publish `depth - 1`. A handler reads `depth`
//!   (acquire) and then the slots below it, so every slot it reads was
//!   completely written before it became visible.
//! - Each frame is one `u64` (see [`RawFrame::pack`]): no torn frames.
//! - The top frame's position is updated in place ([`set_top_pos`]) so that
//!   samples attribute time to the right bytecode index. Callers' slots hold
//!   their call-site index, written before the callee is pushed.
//!
//! # Safety argument
//!
//! Everything is atomics, so no read is undefined behaviour whatever the
//! interleaving. When the handler runs on the owning thread (timer_create
//! with `SIGEV_THREAD_ID`, perf with `F_OWNER_TID`), it interrupts the VM
//! between two of these stores, and the ordering above makes the snapshot
//! exactly the stack at that instant (the top frame's index may lag by the
//! instructions since the last `set_top_pos`). When a process-directed
//! signal (setitimer) lands on another thread, the VM may be changing the
//! stack while the handler copies it; the snapshot can then mix two
//! adjacent stack shapes, and the sample is flagged
//! [`crate::SampleFlags::FOREIGN_THREAD`] so consumers can discount it.
//!
//! [`set_top_pos`]: PublishedState::set_top_pos
//!
//! # Reading the VM's own frames instead
//!
//! Keeping a shadow stack costs stores on every call and return, which is
//! too much for an interpreter whose calls are a few nanoseconds. A VM whose
//! frames sit in memory that never moves can instead hand over a
//! [`StackView`] ([`PublishedState::use_stack_view`]): the handler then
//! reads the VM's frame array in place, so sampling adds nothing to calls.
//! The view is what async-profiler's `AsyncGetCallTrace` is to a JVM.
//!
//! # Telling native code from interpretation by the program counter
//!
//! Publishing "in a primitive" around every primitive call costs stores and
//! a call that can no longer be a tail call, on the hottest path there is.
//! A VM that keeps its interpreter loop in one address range can register
//! it instead ([`PublishedState::set_interpreter_code`]): a sample whose
//! interrupted program counter lies outside that range while the state
//! says [`VmState::Interpreting`] is recorded as [`VmState::Primitive`],
//! native code the interpreter called (primitives, and the runtime routines
//! that sends and primitives call). States the VM sets itself (GC,
//! compiling) are kept as they are.

use std::ops::Range;
use std::sync::atomic::{AtomicI32, AtomicU32, AtomicU8, AtomicUsize, Ordering};
use std::sync::OnceLock;

use super::code_ranges::AtPc;
use crate::ids::{MethodId, RawFrame, VmState};

/// The innermost frame a sample records, from the frame on top and the interrupted pc
/// ([`PublishedState::innermost_at`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Innermost {
    /// The frame as the stack holds it.
    AsSaved,
    /// This compiled frame in its place (packed).
    Running(u64),
    /// This compiled frame (packed) above it: a callee without its frame record.
    Above(u64),
}

/// Where a VM keeps its frames, for handlers to read in place.
///
/// Frame `i` (0 = outermost) starts at `base + i * stride`; `len` points at
/// the VM's count of live frames; `read` turns one frame into a
/// [`RawFrame`] (`innermost` tells it whether the frame is the one
/// executing, whose position may mean something different from a caller's
/// return position).
#[derive(Clone, Copy, Debug)]
pub struct StackView {
    pub base: *const u8,
    pub len: *const usize,
    pub stride: usize,
    /// Reads one frame. Must be async-signal-safe: plain (volatile) loads only.
    pub read: unsafe fn(frame: *const u8, innermost: bool) -> RawFrame,
    /// The distance from a frame to what `inlined` reads beside it.
    pub aside: isize,
    /// Writes the activations a frame's compiled code runs inlined, innermost first: the
    /// frames that stand above it in the program's stack without being in the frame array.
    /// Async-signal-safe, like `read`.
    pub inlined: unsafe fn(frame: *const u8, aside: isize, out: &mut dyn FnMut(RawFrame)),
}

// SAFETY: the pointers are only dereferenced by `PublishedState::snapshot`,
// under the contract of `use_stack_view`; the view itself is plain data.
unsafe impl Send for StackView {}
// SAFETY: as above; sharing the view shares only addresses.
unsafe impl Sync for StackView {}

/// What the VM is doing (interpreting, in a primitive, collecting …), for samples to record.
///
/// A cell of its own so a VM can make it a `static`: setting it around every primitive call is
/// then a store to a fixed address, with no pointer chase to the profiler.
pub struct StateCell(AtomicU8);

impl Default for StateCell {
    fn default() -> Self {
        StateCell::new()
    }
}

impl StateCell {
    pub const fn new() -> StateCell {
        StateCell(AtomicU8::new(VmState::Runtime as u8))
    }

    /// Sets the state, answering the previous one. Only the VM thread writes, so a load and a
    /// store (two plain moves) do what a swap would, without a locked instruction.
    #[inline(always)]
    pub fn set(&self, state: VmState) -> VmState {
        let old = self.0.load(Ordering::Relaxed);
        self.0.store(state as u8, Ordering::Release);
        VmState::from_u8(old).unwrap_or(VmState::Runtime)
    }

    pub fn get(&self) -> VmState {
        VmState::from_u8(self.0.load(Ordering::Acquire)).unwrap_or(VmState::Runtime)
    }
}

pub struct PublishedState {
    view: OnceLock<StackView>,
    depth: AtomicU32,
    state: &'static StateCell,
    owner_tid: AtomicI32,
    /// The interpreter's code, `[start, end)`; `end == 0` while none is registered.
    interpreter_start: AtomicUsize,
    interpreter_end: AtomicUsize,
    /// Compiled code: samples there record `VmState::Compiled`.
    compiled: super::code_ranges::CodeRanges,
    mask: u32,
    frames: Box<[std::sync::atomic::AtomicU64]>,
}

impl PublishedState {
    /// `capacity` is rounded up to a power of two (at least 1).
    pub fn new(capacity: usize) -> PublishedState {
        // One small cell per state for the life of the process, as `HotState::new` does for
        // its flag: states are made once per run (and a few times in tests).
        PublishedState::with_state_cell(capacity, Box::leak(Box::new(StateCell::new())))
    }

    /// A published state whose VM state lives in `state`, typically a `static` of the VM.
    pub fn with_state_cell(capacity: usize, state: &'static StateCell) -> PublishedState {
        state.set(VmState::Runtime);
        let cap = capacity.max(1).next_power_of_two().min(1 << 24);
        PublishedState {
            view: OnceLock::new(),
            depth: AtomicU32::new(0),
            state,
            owner_tid: AtomicI32::new(0),
            interpreter_start: AtomicUsize::new(0),
            interpreter_end: AtomicUsize::new(0),
            compiled: Default::default(),
            mask: cap as u32 - 1,
            frames: (0..cap).map(|_| Default::default()).collect(),
        }
    }

    /// Samples read the VM's frames through `view` from now on; the shadow
    /// stack (`push`, `pop`, `set_top_pos`) is no longer consulted. Can be
    /// set once.
    ///
    /// # Safety
    /// Until every trigger that may call [`PublishedState::snapshot`] has
    /// stopped, `view.len` and the first `*view.len` frames from
    /// `view.base` must stay allocated, must not move, and the count must
    /// never exceed the frames that were initialised; `view.read` must be
    /// sound for any of those frames.
    pub unsafe fn use_stack_view(&self, view: StackView) -> Result<(), StackView> {
        self.view.set(view)
    }

    /// Whether samples read a VM's frames in place.
    pub fn has_stack_view(&self) -> bool {
        self.view.get().is_some()
    }

    pub fn capacity(&self) -> usize {
        self.frames.len()
    }

    /// Records the calling thread as the VM thread. Samples taken on any
    /// other thread are flagged as foreign.
    pub fn bind_current_thread(&self) {
        self.owner_tid.store(current_tid(), Ordering::Release);
    }

    pub fn owner_tid(&self) -> i32 {
        self.owner_tid.load(Ordering::Acquire)
    }

    #[inline]
    pub fn push(&self, frame: RawFrame) {
        let d = self.depth.load(Ordering::Relaxed);
        self.frames[(d & self.mask) as usize].store(frame.pack(), Ordering::Relaxed);
        self.depth.store(d.wrapping_add(1), Ordering::Release);
    }

    #[inline]
    pub fn pop(&self) {
        let d = self.depth.load(Ordering::Relaxed);
        self.depth.store(d.saturating_sub(1), Ordering::Release);
    }

    /// Updates the innermost frame's bytecode index (or pc offset): before a
    /// call (so the caller's slot holds the call site) and, for precise
    /// attribution, as the interpreter advances.
    #[inline]
    pub fn set_top_pos(&self, pos: u32) {
        let d = self.depth.load(Ordering::Relaxed);
        if d == 0 {
            return;
        }
        let slot = &self.frames[((d - 1) & self.mask) as usize];
        let old = RawFrame::unpack(slot.load(Ordering::Relaxed));
        slot.store(old.with_pos(pos).pack(), Ordering::Release);
    }

    /// Replaces the innermost frame (e.g. on a tier transition).
    #[inline]
    pub fn set_top(&self, frame: RawFrame) {
        let d = self.depth.load(Ordering::Relaxed);
        if d == 0 {
            return;
        }
        self.frames[((d - 1) & self.mask) as usize].store(frame.pack(), Ordering::Release);
    }

    /// Sets the VM state and returns the previous one, so that a caller
    /// can restore it (`let old = p.set_state(Gc); …; p.set_state(old)`).
    #[inline]
    pub fn set_state(&self, state: VmState) -> VmState {
        self.state.set(state)
    }

    pub fn state(&self) -> VmState {
        self.state.get()
    }

    /// Registers the address range of the VM's interpreter loop, so that samples taken with
    /// the interrupted program counter (see [`PublishedState::state_at`]) tell interpretation
    /// from native code without the VM publishing primitive calls. Register it before the
    /// triggers start; an empty range unregisters.
    pub fn set_interpreter_code(&self, code: Range<usize>) {
        let (start, end) = if code.is_empty() {
            (0, 0)
        } else {
            (code.start, code.end)
        };
        self.interpreter_start.store(start, Ordering::Release);
        self.interpreter_end.store(end, Ordering::Release);
    }

    /// Registers a compiled function's code: samples interrupted there record
    /// [`VmState::Compiled`]. False when the table is full (such code then counts as native).
    pub fn add_compiled_code(
        &self,
        code: Range<usize>,
        version: crate::ids::CodeVersionId,
        method: MethodId,
        inlined: &[MethodId],
    ) -> bool {
        self.compiled.add(code, version, method, inlined)
    }

    /// Registers a function compiled code calls that belongs to no version (a shared
    /// routine): samples there count as compiled code at their frame's saved place.
    pub fn add_shared_code(&self, code: Range<usize>) -> bool {
        self.compiled.add_shared(code)
    }

    /// What a sample interrupted at `pc` records for the innermost frame `word`: when `pc`
    /// lies in a compiled version of the frame's own method, or of a method the frame's
    /// method is inlined into, that version at `pc`'s offset in its place (resolved later
    /// through its pc map to a bytecode index, a tier and the inlined methods,
    /// [`crate::Symbols::resolve_stack`]); when it lies in a version of another method, that
    /// version above the frame: a callee whose entry has not pushed its frame record yet or
    /// whose return has popped it (a compiled call's frame push and pop are a good part of
    /// a small method's time, and the frame on top then is its caller's, waiting at the
    /// call). Otherwise the frame as the stack holds it (its last saved position).
    /// Async-signal-safe.
    #[inline]
    pub fn innermost_at(&self, word: u64, pc: usize) -> Innermost {
        let method = match RawFrame::unpack(word) {
            RawFrame::Interpreted { method, .. } | RawFrame::InTier { method, .. } => method,
            RawFrame::Compiled { .. } => return Innermost::AsSaved,
        };
        match self.compiled.at_pc(pc, method) {
            Some(AtPc::Frame(code, pc_offset)) => {
                Innermost::Running(RawFrame::Compiled { code, pc_offset }.pack())
            }
            Some(AtPc::Unrecorded(code, pc_offset)) => {
                Innermost::Above(RawFrame::Compiled { code, pc_offset }.pack())
            }
            None => Innermost::AsSaved,
        }
    }

    /// Whether an interpreter range is registered.
    pub fn classifies_by_pc(&self) -> bool {
        self.interpreter_end.load(Ordering::Acquire) != 0
    }

    /// The state a sample records when the thread was interrupted at `pc` (`None` when the
    /// trigger cannot tell): the published state, except that "interpreting" outside the
    /// registered interpreter code is native code the interpreter called, a primitive.
    /// Async-signal-safe: atomics only.
    #[inline]
    pub fn state_at(&self, pc: Option<usize>) -> VmState {
        let state = self.state.get();
        if state != VmState::Interpreting {
            return state;
        }
        let end = self.interpreter_end.load(Ordering::Acquire);
        match pc {
            Some(pc) if self.compiled.contains(pc) => VmState::Compiled,
            Some(pc)
                if end != 0
                    && !(self.interpreter_start.load(Ordering::Acquire)..end).contains(&pc) =>
            {
                VmState::Primitive
            }
            _ => state,
        }
    }

    pub fn depth(&self) -> u32 {
        if let Some(view) = self.view.get() {
            // SAFETY: the contract of `use_stack_view` keeps `len` valid.
            return unsafe { std::ptr::read_volatile(view.len) } as u32;
        }
        self.depth.load(Ordering::Acquire)
    }

    /// Empties the stack (e.g. after the VM unwinds on an error).
    pub fn reset(&self) {
        self.depth.store(0, Ordering::Release);
    }

    /// Copies the innermost frames into `out` (innermost first) and returns
    /// `(frames copied, full depth)`. With a stack view, each frame comes after the
    /// activations its compiled code runs inlined (`StackView::inlined`), which count in the
    /// depth as the view's frames are walked (a truncated sample's depth counts the frames
    /// it did not walk once each); when `pc` is given and lies in a compiled version of the
    /// innermost frame's method, that frame is the version at `pc`'s offset instead
    /// ([`PublishedState::innermost_at`]), whose pc map names what it runs inlined.
    /// Async-signal-safe: atomics only.
    #[inline]
    pub fn snapshot(
        &self,
        mut out: impl FnMut(usize, u64),
        max: usize,
        pc: Option<usize>,
    ) -> (usize, u32) {
        if let Some(view) = self.view.get() {
            // SAFETY: `use_stack_view`'s contract: `len` and the frames below
            // it are allocated, initialised and unmoved while triggers run.
            // Volatile loads because the VM writes them without atomics: on
            // the VM's own thread the handler runs between two of its
            // instructions, so each aligned word is either written or not.
            let d = unsafe { std::ptr::read_volatile(view.len) };
            let mut n = 0;
            let mut inlined = 0;
            let mut unrecorded = 0;
            for i in 0..d {
                if n >= max {
                    break;
                }
                let index = d - 1 - i;
                // SAFETY: `index < len`, inside the frames the contract covers.
                let at = unsafe { view.base.add(index * view.stride) };
                // SAFETY: as above.
                let word = unsafe { (view.read)(at, i == 0) }.pack();
                if let (0, Some(pc)) = (i, pc) {
                    match self.innermost_at(word, pc) {
                        Innermost::Running(running) => {
                            out(n, running);
                            n += 1;
                            continue;
                        }
                        Innermost::Above(callee) => {
                            out(n, callee);
                            n += 1;
                            unrecorded = 1;
                        }
                        Innermost::AsSaved => {}
                    }
                }
                // SAFETY: as above; `aside` is the view's own.
                unsafe {
                    (view.inlined)(at, view.aside, &mut |f| {
                        inlined += 1;
                        if n < max {
                            out(n, f.pack());
                            n += 1;
                        }
                    })
                };
                if n < max {
                    out(n, word);
                    n += 1;
                }
            }
            return (n, (d + inlined + unrecorded) as u32);
        }
        let d = self.depth.load(Ordering::Acquire);
        let kept = (d as usize).min(self.frames.len());
        let mut n = 0;
        let mut unrecorded = 0u32;
        for i in 0..kept {
            if n >= max {
                break;
            }
            let idx = (d as usize - 1 - i) & self.mask as usize;
            let word = self.frames[idx].load(Ordering::Acquire);
            let word = match (i, pc) {
                (0, Some(pc)) => match self.innermost_at(word, pc) {
                    Innermost::Running(running) => running,
                    Innermost::Above(callee) => {
                        out(n, callee);
                        n += 1;
                        unrecorded = 1;
                        if n >= max {
                            break;
                        }
                        word
                    }
                    Innermost::AsSaved => word,
                },
                _ => word,
            };
            out(n, word);
            n += 1;
        }
        (n, d + unrecorded)
    }
}

thread_local! {
    /// This thread's id once asked for: a sample handler asks at every tick, and on a virtual
    /// machine a system call there costs as much as the rest of the sample. Constant-initialised
    /// and without a destructor, so reading it is a plain thread-local load (no lazy
    /// registration, no allocation) and safe in a signal handler.
    static CACHED_TID: std::cell::Cell<i32> = const { std::cell::Cell::new(0) };
}

/// The kernel thread id. Async-signal-safe: the first call on a thread makes the `gettid`
/// system call (itself async-signal-safe); later ones read the cached value. (A child made by
/// `fork` would inherit its parent's value; no profiler runs in one.)
pub fn current_tid() -> i32 {
    let cached = CACHED_TID.with(|c| c.get());
    if cached != 0 {
        return cached;
    }
    // SAFETY: SYS_gettid takes no arguments, cannot fail and is
    // async-signal-safe.
    let tid = unsafe { libc::syscall(libc::SYS_gettid) as i32 };
    CACHED_TID.with(|c| c.set(tid));
    tid
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cached_thread_id_is_the_kernels_and_differs_between_threads() {
        // SAFETY: gettid takes no arguments and cannot fail.
        let kernel = || unsafe { libc::syscall(libc::SYS_gettid) as i32 };
        assert_eq!(current_tid(), kernel());
        assert_eq!(current_tid(), kernel(), "the cached value");
        let main = current_tid();
        let other = std::thread::spawn(move || (current_tid(), kernel()))
            .join()
            .unwrap();
        assert_eq!(other.0, other.1);
        assert_ne!(other.0, main);
    }
    use crate::ids::MethodId;

    fn frames(p: &PublishedState, max: usize) -> (Vec<RawFrame>, u32) {
        let mut v = vec![0u64; max];
        let (n, d) = p.snapshot(|i, w| v[i] = w, max, None);
        (v[..n].iter().map(|&w| RawFrame::unpack(w)).collect(), d)
    }

    #[test]
    fn push_pop_and_positions() {
        let p = PublishedState::new(4);
        p.push(RawFrame::interpreted(MethodId(1), 0));
        p.set_top_pos(7);
        p.push(RawFrame::interpreted(MethodId(2), 0));
        p.set_top_pos(3);
        let (f, d) = frames(&p, 8);
        assert_eq!(d, 2);
        assert_eq!(
            f,
            vec![
                RawFrame::interpreted(MethodId(2), 3),
                RawFrame::interpreted(MethodId(1), 7)
            ]
        );
        p.pop();
        assert_eq!(frames(&p, 8).0, vec![RawFrame::interpreted(MethodId(1), 7)]);
    }

    #[test]
    fn deep_stacks_keep_their_innermost_frames() {
        let p = PublishedState::new(3); // rounds to 4
        assert_eq!(p.capacity(), 4);
        for m in 0..10 {
            p.push(RawFrame::interpreted(MethodId(m), m));
        }
        let (f, d) = frames(&p, 16);
        assert_eq!(d, 10);
        let ids: Vec<u32> = f
            .iter()
            .map(|f| match f {
                RawFrame::Interpreted { method, .. } => method.0,
                _ => unreachable!(),
            })
            .collect();
        assert_eq!(ids, vec![9, 8, 7, 6]);
    }

    #[repr(C)]
    struct VmFrame {
        method: u32,
        next_ip: u32,
        other: u64,
    }

    /// Callers hold their return position (one past the call), the innermost frame its own.
    unsafe fn read_vm_frame(p: *const u8, innermost: bool) -> RawFrame {
        // SAFETY: the test passes pointers to `VmFrame`s.
        let f = unsafe { &*(p as *const VmFrame) };
        let bci = if innermost { f.next_ip } else { f.next_ip - 1 };
        RawFrame::interpreted(MethodId(f.method), bci)
    }

    unsafe fn no_inlined(_: *const u8, _: isize, _: &mut dyn FnMut(RawFrame)) {}

    /// `n` frames of methods 0, 1, … (frame `m` at its `next_ip` 10 + m).
    fn vm_frames(n: u32) -> Vec<VmFrame> {
        (0..n)
            .map(|m| VmFrame {
                method: m,
                next_ip: 10 + m,
                other: 0,
            })
            .collect()
    }

    /// A published state reading the first `len` of `frames` in place.
    ///
    /// # Safety
    /// `frames` and `len` must outlive every snapshot of the state.
    unsafe fn viewing(frames: &[VmFrame], len: &usize) -> PublishedState {
        let p = PublishedState::new(1);
        let view = StackView {
            base: frames.as_ptr() as *const u8,
            len,
            stride: std::mem::size_of::<VmFrame>(),
            read: read_vm_frame,
            aside: 0,
            inlined: no_inlined,
        };
        // SAFETY: the caller keeps `frames` and `len` alive while the state is used.
        unsafe { p.use_stack_view(view).unwrap() };
        p
    }

    #[test]
    fn a_stack_view_reads_the_vm_frames_in_place() {
        let frames = vm_frames(5);
        let len: usize = 3;
        // SAFETY: `frames` and `len` outlive every snapshot below.
        let p = unsafe { viewing(&frames, &len) };
        assert!(p.has_stack_view());
        assert_eq!(p.depth(), 3);
        let (f, d) = frames_of(&p, 2);
        assert_eq!(d, 3);
        assert_eq!(
            f,
            vec![
                RawFrame::interpreted(MethodId(2), 12),
                RawFrame::interpreted(MethodId(1), 10)
            ]
        );
        drop(frames);
    }

    fn frames_of(p: &PublishedState, max: usize) -> (Vec<RawFrame>, u32) {
        frames(p, max)
    }

    fn frames_at(p: &PublishedState, max: usize, pc: usize) -> (Vec<RawFrame>, u32) {
        let mut v = vec![0u64; max];
        let (n, d) = p.snapshot(|i, w| v[i] = w, max, Some(pc));
        (v[..n].iter().map(|&w| RawFrame::unpack(w)).collect(), d)
    }

    #[test]
    fn a_pc_in_another_methods_code_is_a_callee_above_the_frame_on_top() {
        use crate::ids::CodeVersionId;
        let p = PublishedState::new(4);
        p.push(RawFrame::interpreted(MethodId(1), 0));
        p.set_top_pos(4);
        p.push(RawFrame::interpreted(MethodId(2), 0));
        p.set_top_pos(9);
        assert!(p.add_compiled_code(0x1000..0x1100, CodeVersionId(5), MethodId(2), &[]));
        assert!(p.add_compiled_code(0x2000..0x2100, CodeVersionId(6), MethodId(3), &[]));
        assert!(p.add_shared_code(0x3000..0x3100));
        let compiled = |v, o| RawFrame::Compiled {
            code: CodeVersionId(v),
            pc_offset: o,
        };
        // The frame on top runs its own code: that code in its place.
        let (f, d) = frames_at(&p, 8, 0x1010);
        assert_eq!(d, 2);
        assert_eq!(
            f,
            vec![compiled(5, 0x10), RawFrame::interpreted(MethodId(1), 4)]
        );
        // Method 3's code, its record not pushed (or popped): a callee above method 2's
        // frame, which waits at its call.
        let (f, d) = frames_at(&p, 8, 0x2020);
        assert_eq!(d, 3);
        assert_eq!(
            f,
            vec![
                compiled(6, 0x20),
                RawFrame::interpreted(MethodId(2), 9),
                RawFrame::interpreted(MethodId(1), 4)
            ]
        );
        // Kept to one frame, the sample keeps the callee and counts the rest.
        let (f, d) = frames_at(&p, 1, 0x2020);
        assert_eq!((f, d), (vec![compiled(6, 0x20)], 3));
        // Shared code and native code run for the frame on top as it is.
        for pc in [0x3010, 0x9000] {
            let (f, d) = frames_at(&p, 8, pc);
            assert_eq!(d, 2);
            assert_eq!(f[0], RawFrame::interpreted(MethodId(2), 9));
        }
    }

    #[test]
    fn a_stack_view_puts_a_callee_without_its_record_above_the_top_frame() {
        use crate::ids::CodeVersionId;
        let frames = vm_frames(2);
        let len: usize = 2;
        // SAFETY: `frames` and `len` outlive every snapshot below.
        let p = unsafe { viewing(&frames, &len) };
        assert!(p.add_compiled_code(0x2000..0x2100, CodeVersionId(6), MethodId(7), &[]));
        let (f, d) = frames_at(&p, 8, 0x2004);
        assert_eq!(d, 3);
        assert_eq!(
            f,
            vec![
                RawFrame::Compiled {
                    code: CodeVersionId(6),
                    pc_offset: 4
                },
                RawFrame::interpreted(MethodId(1), 11),
                RawFrame::interpreted(MethodId(0), 9)
            ]
        );
        drop(frames);
    }

    #[test]
    fn the_interrupted_pc_tells_native_code_from_interpretation() {
        let p = PublishedState::new(4);
        p.set_state(VmState::Interpreting);
        // Nothing registered: the published state stands, whatever the pc.
        assert!(!p.classifies_by_pc());
        assert_eq!(p.state_at(Some(5)), VmState::Interpreting);
        p.set_interpreter_code(0x1000..0x2000);
        assert!(p.classifies_by_pc());
        assert_eq!(p.state_at(Some(0x1000)), VmState::Interpreting);
        assert_eq!(p.state_at(Some(0x1fff)), VmState::Interpreting);
        assert_eq!(p.state_at(Some(0x2000)), VmState::Primitive);
        assert_eq!(p.state_at(Some(0x0fff)), VmState::Primitive);
        // A trigger without a pc, and states the VM set itself, are left alone.
        assert_eq!(p.state_at(None), VmState::Interpreting);
        p.set_state(VmState::Gc);
        assert_eq!(p.state_at(Some(0x5000)), VmState::Gc);
        p.set_state(VmState::Interpreting);
        p.set_interpreter_code(0..0);
        assert!(!p.classifies_by_pc());
        assert_eq!(p.state_at(Some(0x5000)), VmState::Interpreting);
    }

    #[test]
    fn state_swaps_return_the_previous_state() {
        let p = PublishedState::new(1);
        assert_eq!(p.set_state(VmState::Gc), VmState::Runtime);
        assert_eq!(p.set_state(VmState::Interpreting), VmState::Gc);
        assert_eq!(p.state(), VmState::Interpreting);
    }
}
