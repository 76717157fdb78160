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
//! Layout: one array of `u64` words used as a variable-length ring, so a
//! deep stack costs its own depth and a shallow one only its few frames (a
//! ring of fixed slots sized for thousands of frames would keep megabytes
//! resident for stacks that are mostly shallow). A sample is
//! `[time_ns, meta, frame0, frame1, …]`, frames innermost first, packed by
//! [`crate::RawFrame::pack`]. A producer reserves room for `max_frames`
//! frames contiguously before it starts (it learns the depth only while
//! copying), and advances the head by what it wrote. When the reservation
//! does not fit before the end of the array, the producer writes
//! [`WRAP`] as the time word and starts again at the array's beginning.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};

use crate::ids::{RawFrame, VmState};
use crate::sample::{Origin, Sample, SampleFlags};

const HEADER_WORDS: usize = 2;
/// A time word that means "the rest of the array is unused; continue at word 0". The
/// monotonic clock never reads this.
const WRAP: u64 = u64::MAX;
/// Words per sample slot the array is sized for, besides room for two deepest samples: an
/// average far above typical SOM stacks, so the sample count, not the words, bounds the ring
/// unless stacks are deep.
const AVERAGE_WORDS: usize = 64;

pub struct SampleRing {
    words: Box<[AtomicU64]>,
    /// Most samples held at a time.
    slots: usize,
    max_frames: usize,
    /// Words ever written (producer side), including skipped tails.
    head: AtomicUsize,
    /// Words ever read (consumer side).
    tail: AtomicUsize,
    /// Samples ever written and ever read.
    pushed: AtomicUsize,
    popped: AtomicUsize,
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
    /// A ring for `slots` samples of up to `max_frames` frames each (at most 65,535: the
    /// count is a 16-bit field).
    pub fn new(slots: usize, max_frames: usize) -> SampleRing {
        let slots = slots.max(1);
        let max_frames = max_frames.clamp(1, u16::MAX as usize);
        let len =
            slots * AVERAGE_WORDS.min(HEADER_WORDS + max_frames) + 2 * (HEADER_WORDS + max_frames);
        // A zeroed allocation, not a loop of stores: the kernel hands out zero pages on first
        // touch, so a run pays (in time and resident memory) only for the words it fills
        // before the next drain, not for the whole array up front.
        let words = bytemuck::zeroed_slice_box(len);
        SampleRing {
            words,
            slots,
            max_frames,
            head: AtomicUsize::new(0),
            tail: AtomicUsize::new(0),
            pushed: AtomicUsize::new(0),
            popped: AtomicUsize::new(0),
            producing: AtomicBool::new(false),
        }
    }

    /// Most samples the ring holds.
    pub fn capacity(&self) -> usize {
        self.slots
    }

    pub fn max_frames(&self) -> usize {
        self.max_frames
    }

    /// Samples written and not yet drained.
    pub fn len(&self) -> usize {
        self.pushed
            .load(Ordering::Acquire)
            .wrapping_sub(self.popped.load(Ordering::Acquire))
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Whether half the samples or half the words are in use: time to drain.
    pub fn half_full(&self) -> bool {
        let words = self
            .head
            .load(Ordering::Acquire)
            .wrapping_sub(self.tail.load(Ordering::Acquire));
        self.len() * 2 >= self.slots || words * 2 >= self.words.len()
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
        let result = self.push_locked(fill);
        self.producing.store(false, Ordering::Release);
        result
    }

    #[inline]
    fn push_locked(
        &self,
        fill: impl FnOnce(&SlotWriter<'_>) -> SlotHeader,
    ) -> Result<(), PushError> {
        let len = self.words.len();
        let need = HEADER_WORDS + self.max_frames;
        let mut head = self.head.load(Ordering::Relaxed);
        let tail = self.tail.load(Ordering::Acquire);
        if self.len() >= self.slots {
            return Err(PushError::Full);
        }
        let pos = head % len;
        // Words to skip so the reservation is contiguous.
        let skip = if len - pos < need { len - pos } else { 0 };
        if len - head.wrapping_sub(tail) < skip + need {
            return Err(PushError::Full);
        }
        if skip > 0 {
            self.words[pos].store(WRAP, Ordering::Relaxed);
            head = head.wrapping_add(skip);
        }
        let start = head % len;
        let words = &self.words[start..start + need];
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
        // A clock reading of `WRAP` would read back as a wrap marker; it cannot happen on a
        // monotonic clock, but the word must never be ambiguous.
        words[0].store(h.time_ns.min(WRAP - 1), Ordering::Relaxed);
        words[1].store(meta, Ordering::Relaxed);
        self.head
            .store(head.wrapping_add(HEADER_WORDS + frames), Ordering::Release);
        self.pushed.fetch_add(1, Ordering::Release);
        Ok(())
    }

    /// Moves every pending sample out, oldest first. Only the one consumer
    /// may call this; it allocates, so never from a signal handler.
    pub fn drain(&self, mut sink: impl FnMut(Sample)) -> usize {
        let len = self.words.len();
        let samples = self.len();
        let mut tail = self.tail.load(Ordering::Relaxed);
        let mut n = 0;
        while n < samples {
            let pos = tail % len;
            let time_ns = self.words[pos].load(Ordering::Relaxed);
            if time_ns == WRAP {
                tail = tail.wrapping_add(len - pos);
                continue;
            }
            let meta = self.words[pos + 1].load(Ordering::Relaxed);
            let count = (((meta >> 24) & 0xffff) as usize).min(self.max_frames);
            let frames = self.words[pos + HEADER_WORDS..pos + HEADER_WORDS + count]
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
            tail = tail.wrapping_add(HEADER_WORDS + count);
            // Free the words for the producer only after they have been read.
            self.tail.store(tail, Ordering::Release);
            self.popped.fetch_add(1, Ordering::Release);
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
    fn deep_and_shallow_samples_share_the_words_across_wraps() {
        // Three slots of a 300-frame ring: deep samples use most of the words, so pushes
        // wrap at the array's end many times; every sample comes back whole and in order.
        let ring = SampleRing::new(3, 300);
        let deep: Vec<_> = (0..300)
            .map(|m| RawFrame::interpreted(MethodId(m), m))
            .collect();
        for t in 0..50u64 {
            let n = [300, 1, 0, 77, 299][t as usize % 5];
            push(&ring, t, &deep[..n]).unwrap();
            let mut got = vec![];
            ring.drain(|s| got.push(s));
            assert_eq!(got.len(), 1);
            assert_eq!((got[0].time_ns, &got[0].frames[..]), (t, &deep[..n]));
        }
        assert!(ring.is_empty() && !ring.half_full());
    }

    #[test]
    fn a_ring_without_room_for_the_deepest_stack_is_full() {
        let ring = SampleRing::new(100, 10);
        let f: Vec<_> = (0..10)
            .map(|m| RawFrame::interpreted(MethodId(m), 0))
            .collect();
        let mut pushed = 0;
        while push(&ring, pushed, &f).is_ok() {
            pushed += 1;
        }
        assert_eq!(push(&ring, 0, &f), Err(PushError::Full));
        assert!(pushed >= 2 && ring.half_full());
        let mut got = 0;
        ring.drain(|s| {
            assert_eq!(s.frames, f);
            got += 1;
        });
        assert_eq!(got, pushed);
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
