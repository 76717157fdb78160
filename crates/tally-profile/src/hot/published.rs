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

use std::sync::atomic::{AtomicI32, AtomicU32, AtomicU8, Ordering};

use crate::ids::{RawFrame, VmState};

pub struct PublishedState {
    depth: AtomicU32,
    state: AtomicU8,
    owner_tid: AtomicI32,
    mask: u32,
    frames: Box<[std::sync::atomic::AtomicU64]>,
}

impl PublishedState {
    /// `capacity` is rounded up to a power of two (at least 1).
    pub fn new(capacity: usize) -> PublishedState {
        let cap = capacity.max(1).next_power_of_two().min(1 << 24);
        PublishedState {
            depth: AtomicU32::new(0),
            state: AtomicU8::new(VmState::Runtime as u8),
            owner_tid: AtomicI32::new(0),
            mask: cap as u32 - 1,
            frames: (0..cap).map(|_| Default::default()).collect(),
        }
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
        let old = self.state.swap(state as u8, Ordering::AcqRel);
        VmState::from_u8(old).unwrap_or(VmState::Runtime)
    }

    pub fn state(&self) -> VmState {
        VmState::from_u8(self.state.load(Ordering::Acquire)).unwrap_or(VmState::Runtime)
    }

    pub fn depth(&self) -> u32 {
        self.depth.load(Ordering::Acquire)
    }

    /// Empties the stack (e.g. after the VM unwinds on an error).
    pub fn reset(&self) {
        self.depth.store(0, Ordering::Release);
    }

    /// Copies the innermost frames into `out` (innermost first) and returns
    /// `(frames copied, full depth)`. Async-signal-safe: atomics only.
    #[inline]
    pub fn snapshot(&self, mut out: impl FnMut(usize, u64), max: usize) -> (usize, u32) {
        let d = self.depth.load(Ordering::Acquire);
        let n = (d as usize).min(self.frames.len()).min(max);
        for i in 0..n {
            let idx = (d as usize - 1 - i) & self.mask as usize;
            out(i, self.frames[idx].load(Ordering::Acquire));
        }
        (n, d)
    }
}

/// The kernel thread id; `gettid` is async-signal-safe.
pub fn current_tid() -> i32 {
    // SAFETY: SYS_gettid takes no arguments, cannot fail and is
    // async-signal-safe.
    unsafe { libc::syscall(libc::SYS_gettid) as i32 }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::MethodId;

    fn frames(p: &PublishedState, max: usize) -> (Vec<RawFrame>, u32) {
        let mut v = vec![0u64; max];
        let (n, d) = p.snapshot(|i, w| v[i] = w, max);
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

    #[test]
    fn state_swaps_return_the_previous_state() {
        let p = PublishedState::new(1);
        assert_eq!(p.set_state(VmState::Gc), VmState::Runtime);
        assert_eq!(p.set_state(VmState::Interpreting), VmState::Gc);
        assert_eq!(p.state(), VmState::Interpreting);
    }
}
