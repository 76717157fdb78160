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

/// Inlined-method ids the table keeps for all ranges together; a range added when it is
/// full takes any method as inlined (its samples then trust the frame's method).
const INLINED_POOL_CAPACITY: usize = 1 << 16;

/// `inlined_count` of a range whose inlined methods were not kept.
const ANY_METHOD: u32 = u32::MAX;

/// The method of a range of shared code (a routine compiled code of any method calls): no
/// frame runs it as its own, so a sample there is compiled code at its frame's saved place.
const SHARED: u32 = u32::MAX;

/// What the code at a sample's pc is to the frame on top of the stack ([`CodeRanges::at_pc`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AtPc {
    /// The frame runs there: this version, at this offset.
    Frame(CodeVersionId, u32),
    /// An activation of another method runs there without its frame record on top (its entry
    /// or its return): this version, at this offset.
    Unrecorded(CodeVersionId, u32),
}

pub struct CodeRanges {
    starts: Box<[AtomicUsize]>,
    ends: Box<[AtomicUsize]>,
    /// The code version each range holds, and its method.
    versions: Box<[AtomicU32]>,
    methods: Box<[AtomicU32]>,
    /// The methods inlined into each range's code: `inlined_count[i]` ids from
    /// `inlined_from[i]` in `inlined_pool` ([`ANY_METHOD`]: too many to keep, any method
    /// counts as inlined).
    inlined_from: Box<[AtomicU32]>,
    inlined_count: Box<[AtomicU32]>,
    inlined_pool: Box<[AtomicU32]>,
    inlined_len: AtomicUsize,
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
            inlined_from: bytemuck::zeroed_slice_box(CODE_RANGES_CAPACITY),
            inlined_count: bytemuck::zeroed_slice_box(CODE_RANGES_CAPACITY),
            inlined_pool: bytemuck::zeroed_slice_box(INLINED_POOL_CAPACITY),
            inlined_len: AtomicUsize::new(0),
            len: AtomicUsize::new(0),
            low: AtomicUsize::new(usize::MAX),
            high: AtomicUsize::new(0),
        }
    }

    /// Adds the range of code version `version` of `method`, into which the methods
    /// `inlined` were inlined; false when the table is full. One writer at a time (the VM
    /// thread, or the thread that installs compiled code).
    pub fn add(
        &self,
        code: Range<usize>,
        version: CodeVersionId,
        method: MethodId,
        inlined: &[MethodId],
    ) -> bool {
        let n = self.len.load(Ordering::Relaxed);
        if n >= CODE_RANGES_CAPACITY || code.is_empty() {
            return false;
        }
        self.starts[n].store(code.start, Ordering::Relaxed);
        self.ends[n].store(code.end, Ordering::Relaxed);
        self.versions[n].store(version.0, Ordering::Relaxed);
        self.methods[n].store(method.0, Ordering::Relaxed);
        let from = self.inlined_len.load(Ordering::Relaxed);
        let count = if inlined.is_empty() {
            0
        } else if from + inlined.len() <= INLINED_POOL_CAPACITY {
            for (k, m) in inlined.iter().enumerate() {
                self.inlined_pool[from + k].store(m.0, Ordering::Relaxed);
            }
            self.inlined_len
                .store(from + inlined.len(), Ordering::Relaxed);
            inlined.len() as u32
        } else {
            ANY_METHOD
        };
        self.inlined_from[n].store(from as u32, Ordering::Relaxed);
        self.inlined_count[n].store(count, Ordering::Relaxed);
        self.low.fetch_min(code.start, Ordering::Relaxed);
        self.high.fetch_max(code.end, Ordering::Relaxed);
        self.len.store(n + 1, Ordering::Release);
        true
    }

    /// Adds the range of a function compiled code of any version calls (a shared routine,
    /// a probe, an adapter); false when the table is full.
    pub fn add_shared(&self, code: Range<usize>) -> bool {
        self.add(code, CodeVersionId(0), MethodId(SHARED), &[])
    }

    /// Whether `pc` lies in a registered range. Async-signal-safe: atomics only.
    #[inline]
    pub fn contains(&self, pc: usize) -> bool {
        self.find(pc).is_some()
    }

    /// The code version `pc` lies in, its method, and `pc`'s offset in it. Async-signal-safe.
    #[inline]
    pub fn find(&self, pc: usize) -> Option<(CodeVersionId, MethodId, u32)> {
        let i = self.index_of(pc)?;
        Some((
            CodeVersionId(self.versions[i].load(Ordering::Relaxed)),
            MethodId(self.methods[i].load(Ordering::Relaxed)),
            (pc - self.starts[i].load(Ordering::Relaxed)) as u32,
        ))
    }

    /// What the code at `pc` is to a frame of `method` on top of the stack: that frame
    /// running (the code is a version of its method, or of one it is inlined into), or
    /// another activation whose frame record is not on top (a callee in its entry before it
    /// pushes its record, or returning after it popped it). `None` outside compiled code and
    /// in shared code, which runs for whatever frame is on top. Async-signal-safe.
    #[inline]
    pub fn at_pc(&self, pc: usize, method: MethodId) -> Option<AtPc> {
        let i = self.index_of(pc)?;
        let own = self.methods[i].load(Ordering::Relaxed);
        if own == SHARED {
            return None;
        }
        let version = CodeVersionId(self.versions[i].load(Ordering::Relaxed));
        let offset = (pc - self.starts[i].load(Ordering::Relaxed)) as u32;
        let runs = own == method.0 || {
            let count = self.inlined_count[i].load(Ordering::Relaxed);
            let from = self.inlined_from[i].load(Ordering::Relaxed) as usize;
            count == ANY_METHOD
                || self.inlined_pool[from..from + count as usize]
                    .iter()
                    .any(|m| m.load(Ordering::Relaxed) == method.0)
        };
        Some(if runs {
            AtPc::Frame(version, offset)
        } else {
            AtPc::Unrecorded(version, offset)
        })
    }

    fn index_of(&self, pc: usize) -> Option<usize> {
        let n = self.len.load(Ordering::Acquire);
        if n == 0
            || pc < self.low.load(Ordering::Relaxed)
            || pc >= self.high.load(Ordering::Relaxed)
        {
            return None;
        }
        (0..n).find(|&i| {
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
        assert!(r.add(0x1000..0x1100, CodeVersionId(1), MethodId(7), &[]));
        assert!(r.add(0x3000..0x3010, CodeVersionId(2), MethodId(8), &[]));
        assert!(
            !r.add(0x5000..0x5000, CodeVersionId(3), MethodId(9), &[]),
            "empty ranges are refused"
        );
        assert_eq!(r.find(0x3004), Some((CodeVersionId(2), MethodId(8), 4)));
        assert!(r.contains(0x1000) && r.contains(0x10ff) && r.contains(0x300f));
        assert!(!r.contains(0x1100) && !r.contains(0x2000) && !r.contains(0x3010));
        assert!(!r.contains(0x10));
    }

    #[test]
    fn shared_code_is_compiled_code_no_frame_runs_as_its_own() {
        let r = CodeRanges::new();
        assert!(r.add_shared(0x1000..0x1100));
        assert!(r.contains(0x1010));
        assert_eq!(r.at_pc(0x1010, MethodId(SHARED)), None);
        assert_eq!(r.at_pc(0x1010, MethodId(7)), None);
    }

    #[test]
    fn a_frame_runs_in_its_own_code_or_code_it_is_inlined_into() {
        let r = CodeRanges::new();
        assert!(r.add(0x1000..0x1100, CodeVersionId(1), MethodId(7), &[]));
        assert!(r.add(
            0x2000..0x2100,
            CodeVersionId(2),
            MethodId(8),
            &[MethodId(3), MethodId(4)]
        ));
        assert_eq!(
            r.at_pc(0x1010, MethodId(7)),
            Some(AtPc::Frame(CodeVersionId(1), 0x10))
        );
        assert_eq!(
            r.at_pc(0x1010, MethodId(3)),
            Some(AtPc::Unrecorded(CodeVersionId(1), 0x10)),
            "not inlined there: another activation, whose record is not on top"
        );
        assert_eq!(
            r.at_pc(0x2020, MethodId(8)),
            Some(AtPc::Frame(CodeVersionId(2), 0x20))
        );
        assert_eq!(
            r.at_pc(0x2020, MethodId(4)),
            Some(AtPc::Frame(CodeVersionId(2), 0x20))
        );
        assert_eq!(
            r.at_pc(0x2020, MethodId(5)),
            Some(AtPc::Unrecorded(CodeVersionId(2), 0x20))
        );
        assert_eq!(r.at_pc(0x3000, MethodId(8)), None);
    }

    #[test]
    fn a_full_pool_takes_any_method_as_inlined() {
        let r = CodeRanges::new();
        let many: Vec<MethodId> = (0..INLINED_POOL_CAPACITY as u32).map(MethodId).collect();
        assert!(r.add(0x1000..0x1100, CodeVersionId(1), MethodId(7), &many));
        assert!(r.add(
            0x2000..0x2100,
            CodeVersionId(2),
            MethodId(8),
            &[MethodId(1)]
        ));
        assert_eq!(
            r.at_pc(0x1000, MethodId(5)),
            Some(AtPc::Frame(CodeVersionId(1), 0))
        );
        assert_eq!(
            r.at_pc(0x2000, MethodId(u32::MAX - 1)),
            Some(AtPc::Frame(CodeVersionId(2), 0)),
            "the pool was full: any method may be inlined"
        );
    }
}
