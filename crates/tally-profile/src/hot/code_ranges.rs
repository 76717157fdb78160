//! The address ranges of compiled code, for signal handlers: a sample whose interrupted
//! program counter lies in one was running compiled code, not a primitive.
//!
//! Append-only and fixed-capacity, so the handler reads it with atomics alone: an entry is
//! written before the count that publishes it (release), and read after the count (acquire).
//! Compiled code is never freed today; when it is, retired ranges must stay readable until no
//! handler can be reading them (a reader count), which this table's append-only shape avoids.

use std::ops::Range;
use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};

use crate::ids::{CodeVersionId, MethodId};

/// Ranges the table holds; code compiled after it is full is classified as native code.
pub const CODE_RANGES_CAPACITY: usize = 1 << 16;

pub struct CodeRanges {
    starts: Box<[AtomicUsize]>,
    ends: Box<[AtomicUsize]>,
    /// The code version each range holds, and its method.
    versions: Box<[AtomicU32]>,
    methods: Box<[AtomicU32]>,
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
            versions: bytemuck::zeroed_slice_box(CODE_RANGES_CAPACITY),
            methods: bytemuck::zeroed_slice_box(CODE_RANGES_CAPACITY),
            len: AtomicUsize::new(0),
            low: AtomicUsize::new(usize::MAX),
            high: AtomicUsize::new(0),
        }
    }

    /// Adds the range of code version `version` of `method`; false when the table is full.
    /// One writer at a time (the VM thread, or the thread that installs compiled code).
    pub fn add(&self, code: Range<usize>, version: CodeVersionId, method: MethodId) -> bool {
        let n = self.len.load(Ordering::Relaxed);
        if n >= CODE_RANGES_CAPACITY || code.is_empty() {
            return false;
        }
        self.starts[n].store(code.start, Ordering::Relaxed);
        self.ends[n].store(code.end, Ordering::Relaxed);
        self.versions[n].store(version.0, Ordering::Relaxed);
        self.methods[n].store(method.0, Ordering::Relaxed);
        self.low.fetch_min(code.start, Ordering::Relaxed);
        self.high.fetch_max(code.end, Ordering::Relaxed);
        self.len.store(n + 1, Ordering::Release);
        true
    }

    /// Whether `pc` lies in a registered range. Async-signal-safe: atomics only.
    #[inline]
    pub fn contains(&self, pc: usize) -> bool {
        self.find(pc).is_some()
    }

    /// The code version `pc` lies in, its method, and `pc`'s offset in it. Async-signal-safe.
    #[inline]
    pub fn find(&self, pc: usize) -> Option<(CodeVersionId, MethodId, u32)> {
        let n = self.len.load(Ordering::Acquire);
        if n == 0
            || pc < self.low.load(Ordering::Relaxed)
            || pc >= self.high.load(Ordering::Relaxed)
        {
            return None;
        }
        (0..n).find_map(|i| {
            let start = self.starts[i].load(Ordering::Relaxed);
            (start..self.ends[i].load(Ordering::Relaxed))
                .contains(&pc)
                .then(|| {
                    (
                        CodeVersionId(self.versions[i].load(Ordering::Relaxed)),
                        MethodId(self.methods[i].load(Ordering::Relaxed)),
                        (pc - start) as u32,
                    )
                })
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
        assert!(r.add(0x1000..0x1100, CodeVersionId(1), MethodId(7)));
        assert!(r.add(0x3000..0x3010, CodeVersionId(2), MethodId(8)));
        assert!(
            !r.add(0x5000..0x5000, CodeVersionId(3), MethodId(9)),
            "empty ranges are refused"
        );
        assert_eq!(r.find(0x3004), Some((CodeVersionId(2), MethodId(8), 4)));
        assert!(r.contains(0x1000) && r.contains(0x10ff) && r.contains(0x300f));
        assert!(!r.contains(0x1100) && !r.contains(0x2000) && !r.contains(0x3010));
        assert!(!r.contains(0x10));
    }
}
