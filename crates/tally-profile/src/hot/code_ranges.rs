//! The address ranges of compiled code, for signal handlers: a sample whose interrupted
//! program counter lies in one was running compiled code, not a primitive.
//!
//! Append-only and fixed-capacity, so the handler reads it with atomics alone: an entry is
//! written before the count that publishes it (release), and read after the count (acquire).
//! Compiled code is never freed today; when it is, retired ranges must stay readable until no
//! handler can be reading them (a reader count), which this table's append-only shape avoids.

use std::ops::Range;
use std::sync::atomic::{AtomicUsize, Ordering};

/// Ranges the table holds; code compiled after it is full is classified as native code.
pub const CODE_RANGES_CAPACITY: usize = 1 << 16;

pub struct CodeRanges {
    starts: Box<[AtomicUsize]>,
    ends: Box<[AtomicUsize]>,
    len: AtomicUsize,
    /// The hull of all ranges, `[low, high)`, so a pc outside it (most native code) is told
    /// apart without a scan.
    low: AtomicUsize,
    high: AtomicUsize,
}

impl Default for CodeRanges {
    fn default() -> Self {
        CodeRanges::new()
    }
}

impl CodeRanges {
    pub fn new() -> CodeRanges {
        CodeRanges {
            starts: bytemuck::zeroed_slice_box(CODE_RANGES_CAPACITY),
            ends: bytemuck::zeroed_slice_box(CODE_RANGES_CAPACITY),
            len: AtomicUsize::new(0),
            low: AtomicUsize::new(usize::MAX),
            high: AtomicUsize::new(0),
        }
    }

    /// Adds a range; false when the table is full. One writer (the VM thread).
    pub fn add(&self, code: Range<usize>) -> bool {
        let n = self.len.load(Ordering::Relaxed);
        if n >= CODE_RANGES_CAPACITY || code.is_empty() {
            return false;
        }
        self.starts[n].store(code.start, Ordering::Relaxed);
        self.ends[n].store(code.end, Ordering::Relaxed);
        self.low.fetch_min(code.start, Ordering::Relaxed);
        self.high.fetch_max(code.end, Ordering::Relaxed);
        self.len.store(n + 1, Ordering::Release);
        true
    }

    /// Whether `pc` lies in a registered range. Async-signal-safe: atomics only.
    #[inline]
    pub fn contains(&self, pc: usize) -> bool {
        let n = self.len.load(Ordering::Acquire);
        if n == 0
            || pc < self.low.load(Ordering::Relaxed)
            || pc >= self.high.load(Ordering::Relaxed)
        {
            return false;
        }
        (0..n).any(|i| {
            (self.starts[i].load(Ordering::Relaxed)..self.ends[i].load(Ordering::Relaxed))
                .contains(&pc)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_a_pc_in_any_range_and_nothing_between() {
        let r = CodeRanges::new();
        assert!(!r.contains(0x1000));
        assert!(r.add(0x1000..0x1100));
        assert!(r.add(0x3000..0x3010));
        assert!(!r.add(0x5000..0x5000), "empty ranges are refused");
        assert!(r.contains(0x1000) && r.contains(0x10ff) && r.contains(0x300f));
        assert!(!r.contains(0x1100) && !r.contains(0x2000) && !r.contains(0x3010));
        assert!(!r.contains(0x10));
    }
}
