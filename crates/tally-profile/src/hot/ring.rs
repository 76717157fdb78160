//! A pre-allocated sample ring that a signal handler can write.
//!
//! The handler may not allocate or lock, so every slot exists up front and
//! every word is an atomic. One consumer (the VM thread at a safepoint)
//! drains it. Producers are the signal handler and, with the polling
//! mechanism, the VM thread itself; a process-directed signal can also land
//! on a second thread. Rather than trusting that only one producer ever
//! runs, producers take a *try*-lock (one compare-exchange, never a wait):
//! whoever loses drops its sample and says so. Nothing ever blocks.
//!
//! Slot layout, in `u64` words: `[time_ns, meta, frame0, frame1, …]` with
//! frames innermost first, packed by [`crate::RawFrame::pack`].

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};

use crate::ids::{RawFrame, VmState};
use crate::sample::{Origin, Sample, SampleFlags};

const HEADER_WORDS: usize = 2;

pub struct SampleRing {
    words: Box<[AtomicU64]>,
    slots: usize,
    max_frames: usize,
    /// Total slots ever written (producer side).
    head: AtomicUsize,
    /// Total slots ever read (consumer side).
    tail: AtomicUsize,
    producing: AtomicBool,
}

/// Why a push did not record a sample.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PushError {
    Full,
    /// Another producer was mid-push (a signal on a second thread, or the
    /// handler interrupting a polled push on the VM thread).
    Busy,
}

/// Where a producer writes one sample. Frames beyond `max_frames` are
/// ignored (the sample is marked truncated by the caller).
pub struct SlotWriter<'a> {
    words: &'a [AtomicU64],
    max_frames: usize,
}

impl SlotWriter<'_> {
    #[inline]
    pub fn max_frames(&self) -> usize {
        self.max_frames
    }

    #[inline]
    pub fn set_frame(&self, i: usize, packed: u64) {
        if i < self.max_frames {
            self.words[HEADER_WORDS + i].store(packed, Ordering::Relaxed);
        }
    }
}

/// The header a producer returns after writing the frames.
#[derive(Clone, Copy, Debug)]
pub struct SlotHeader {
    pub time_ns: u64,
    pub state: VmState,
    pub origin: Origin,
    pub flags: SampleFlags,
    pub frames: usize,
    pub depth: u32,
}

impl SampleRing {
    pub fn new(slots: usize, max_frames: usize) -> SampleRing {
        let slots = slots.max(1);
        let max_frames = max_frames.clamp(1, u16::MAX as usize);
        // A zeroed allocation, not a loop of stores: the kernel hands out zero pages on first
        // touch, so a run pays (in time and resident memory) only for the slots it fills
        // before the next drain, not for all 4 MiB up front.
        let words = bytemuck::zeroed_slice_box(slots * (HEADER_WORDS + max_frames));
        SampleRing {
            words,
            slots,
            max_frames,
            head: AtomicUsize::new(0),
            tail: AtomicUsize::new(0),
            producing: AtomicBool::new(false),
        }
    }

    pub fn capacity(&self) -> usize {
        self.slots
    }

    pub fn max_frames(&self) -> usize {
        self.max_frames
    }

    /// Samples written and not yet drained.
    pub fn len(&self) -> usize {
        self.head
            .load(Ordering::Acquire)
            .wrapping_sub(self.tail.load(Ordering::Acquire))
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn slot(&self, index: usize) -> &[AtomicU64] {
        let stride = HEADER_WORDS + self.max_frames;
        let start = (index % self.slots) * stride;
        &self.words[start..start + stride]
    }

    /// Writes one sample. `fill` writes the frames and returns the header.
    /// Async-signal-safe: atomics only, no allocation, no waiting.
    #[inline]
    pub fn try_push(
        &self,
        fill: impl FnOnce(&SlotWriter<'_>) -> SlotHeader,
    ) -> Result<(), PushError> {
        if self
            .producing
            .compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed)
            .is_err()
        {
            return Err(PushError::Busy);
        }
        let head = self.head.load(Ordering::Relaxed);
        let tail = self.tail.load(Ordering::Acquire);
        let result = if head.wrapping_sub(tail) >= self.slots {
            Err(PushError::Full)
        } else {
            let words = self.slot(head);
            let writer = SlotWriter {
                words,
                max_frames: self.max_frames,
            };
            let h = fill(&writer);
            let frames = h.frames.min(self.max_frames);
            let meta = u64::from(h.state as u8)
                | (u64::from(h.origin as u8) << 8)
                | (u64::from(h.flags.0) << 16)
                | ((frames as u64) << 24)
                | (u64::from(h.depth.min((1 << 24) - 1)) << 40);
            words[0].store(h.time_ns, Ordering::Relaxed);
            words[1].store(meta, Ordering::Relaxed);
            self.head.store(head.wrapping_add(1), Ordering::Release);
            Ok(())
        };
        self.producing.store(false, Ordering::Release);
        result
    }

    /// Moves every pending sample out, oldest first. Only the one consumer
    /// may call this; it allocates, so never from a signal handler.
    pub fn drain(&self, mut sink: impl FnMut(Sample)) -> usize {
        let head = self.head.load(Ordering::Acquire);
        let mut tail = self.tail.load(Ordering::Relaxed);
        let mut n = 0;
        while tail != head {
            let words = self.slot(tail);
            let time_ns = words[0].load(Ordering::Relaxed);
            let meta = words[1].load(Ordering::Relaxed);
            let count = ((meta >> 24) & 0xffff) as usize;
            let frames = words[HEADER_WORDS..HEADER_WORDS + count.min(self.max_frames)]
                .iter()
                .map(|w| RawFrame::unpack(w.load(Ordering::Relaxed)))
                .collect();
            sink(Sample {
                time_ns,
                state: VmState::from_u8(meta as u8).unwrap_or(VmState::Runtime),
                origin: Origin::from_u8((meta >> 8) as u8),
                flags: SampleFlags((meta >> 16) as u8),
                depth: (meta >> 40) as u32,
                frames,
            });
            tail = tail.wrapping_add(1);
            // Free the slot for the producer only after it has been read.
            self.tail.store(tail, Ordering::Release);
            n += 1;
        }
        n
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::MethodId;

    fn push(ring: &SampleRing, t: u64, frames: &[RawFrame]) -> Result<(), PushError> {
        ring.try_push(|w| {
            for (i, f) in frames.iter().enumerate() {
                w.set_frame(i, f.pack());
            }
            SlotHeader {
                time_ns: t,
                state: VmState::Interpreting,
                origin: Origin::Immediate,
                flags: SampleFlags::NONE,
                frames: frames.len(),
                depth: frames.len() as u32,
            }
        })
    }

    #[test]
    fn fills_drains_and_reports_full() {
        let ring = SampleRing::new(2, 4);
        let f = [RawFrame::interpreted(MethodId(3), 1)];
        assert_eq!(push(&ring, 1, &f), Ok(()));
        assert_eq!(push(&ring, 2, &f), Ok(()));
        assert_eq!(push(&ring, 3, &f), Err(PushError::Full));
        let mut got = vec![];
        assert_eq!(ring.drain(|s| got.push(s)), 2);
        assert_eq!(
            got.iter().map(|s| s.time_ns).collect::<Vec<_>>(),
            vec![1, 2]
        );
        assert_eq!(got[0].frames, f.to_vec());
        assert!(ring.is_empty());
        // Wraps around.
        for t in 10..15 {
            assert_eq!(push(&ring, t, &f), Ok(()));
            ring.drain(|s| assert_eq!(s.time_ns, t));
        }
    }

    #[test]
    fn frames_beyond_the_slot_are_cut() {
        let ring = SampleRing::new(1, 2);
        let f: Vec<_> = (0..5)
            .map(|m| RawFrame::interpreted(MethodId(m), 0))
            .collect();
        push(&ring, 1, &f).unwrap();
        ring.drain(|s| assert_eq!(s.frames, f[..2].to_vec()));
    }

    #[test]
    fn a_push_inside_a_push_is_busy_not_blocked() {
        let ring = SampleRing::new(4, 1);
        let inner = std::cell::Cell::new(None);
        push_nested(&ring, &inner);
        assert_eq!(inner.get(), Some(Err(PushError::Busy)));
        assert_eq!(ring.len(), 1);
    }

    fn push_nested(ring: &SampleRing, inner: &std::cell::Cell<Option<Result<(), PushError>>>) {
        ring.try_push(|_| {
            inner.set(Some(push(ring, 9, &[])));
            SlotHeader {
                time_ns: 0,
                state: VmState::Gc,
                origin: Origin::Polling,
                flags: SampleFlags::NONE,
                frames: 0,
                depth: 0,
            }
        })
        .unwrap();
    }
}
