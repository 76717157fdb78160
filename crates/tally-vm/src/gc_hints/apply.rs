//! A run that uses GC hints: which methods are hinted, and the cost model that decides, at a
//! hinted entry or exit, whether to collect there.

use rustc_hash::FxHashMap;
use tally_heap::HeapStats;
use tally_profile::gc_hints::{GcHints, PointKind};

use crate::bytecode::CodeId;

/// The share of a collection cycle's room (the nursery, or the heap left free) allocated
/// before the VM starts to look for a favorable point: a collection is near from then on.
pub(crate) const ALARM_SHARE: f64 = 0.75;
/// A full collection at a hint must reclaim at least this many times the live data it traces.
const FULL_BENEFIT_OVER_COST: u64 = 2;
/// When the cost model declines, the allocation (as a share of the cycle's room) before it
/// is asked again.
pub(crate) const SNOOZE_SHARE: f64 = 0.05;

/// What to do at a hinted point.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Decision {
    Nothing,
    Nursery,
    Full,
}

/// The cost model (after Buytaert et al.): a collection's cost grows with the live data it
/// copies or marks, its benefit with the dead data it reclaims. It is asked only once a
/// collection is near (the allocation alarm rang: [`ALARM_SHARE`] of the cycle's room is
/// allocated).
/// - **Full**, when the garbage reclaimed (the heap in use less the live data the recording
///   saw here) is at least [`FULL_BENEFIT_OVER_COST`] times the live data: under the
///   non-generational plans, the next collection is a full one anyway; under the
///   generational ones, only once the heap has less than two nurseries available, when
///   MMTk would soon collect it whole.
/// - **Nursery** (generational plans), otherwise: at a point where live data is at a
///   minimum, fewer of the nursery's objects survive to be promoted.
/// - Otherwise **nothing**.
pub(crate) fn decide(expected_live: u64, heap: &HeapStats) -> Decision {
    let used = heap.heap_used_bytes as u64;
    let garbage = used.saturating_sub(expected_live);
    let worth_full = garbage >= FULL_BENEFIT_OVER_COST * expected_live;
    let nursery = heap.nursery_bytes as u64;
    if nursery == 0 {
        return if worth_full {
            Decision::Full
        } else {
            Decision::Nothing
        };
    }
    if worth_full && (heap.heap_available_bytes as u64) < 2 * nursery {
        return Decision::Full;
    }
    if heap.allocated_since_gc as f64 >= ALARM_SHARE * nursery as f64 {
        return Decision::Nursery;
    }
    Decision::Nothing
}

/// Per-code state of hints resolution: `UNKNOWN` until the code is first reached.
const UNKNOWN: u8 = 0;
const RESOLVED: u8 = 1;
const AT_ENTRY: u8 = 2;
const AT_EXIT: u8 = 4;

/// The hints of one run, resolved to code as methods are reached, and what they did.
pub(crate) struct Applied {
    /// Expected live bytes per hinted (method, kind).
    by_name: FxHashMap<(String, PointKind), u64>,
    /// Per code: `UNKNOWN`, or `RESOLVED` with `AT_ENTRY`/`AT_EXIT` bits.
    resolved: Vec<u8>,
    expected: FxHashMap<(CodeId, PointKind), u64>,
    pub points: usize,
    /// Hinted points reached while a collection was near, and what the cost model chose.
    pub consulted: u64,
    pub nursery: u64,
    pub full: u64,
    /// Collections so far when the alarm last rang: a collection since makes it stale.
    pub armed_at_collection: u64,
}

impl Applied {
    pub fn new(hints: &GcHints) -> Applied {
        let by_name: FxHashMap<_, _> = hints
            .points
            .iter()
            .map(|p| ((p.method.clone(), p.kind), p.expected_live_bytes))
            .collect();
        Applied {
            points: by_name.len(),
            by_name,
            resolved: Vec::new(),
            expected: FxHashMap::default(),
            consulted: 0,
            nursery: 0,
            full: 0,
            armed_at_collection: 0,
        }
    }

    /// The expected live bytes when `code`'s `kind` is a hinted point; `name` names a code
    /// the first time it is asked about.
    pub fn hinted(
        &mut self,
        code: CodeId,
        kind: PointKind,
        name: impl FnOnce() -> String,
    ) -> Option<u64> {
        let i = code as usize;
        if i >= self.resolved.len() {
            self.resolved.resize(i + 1, UNKNOWN);
        }
        if self.resolved[i] == UNKNOWN {
            let name = name();
            let mut bits = RESOLVED;
            for (k, bit) in [(PointKind::Entry, AT_ENTRY), (PointKind::Exit, AT_EXIT)] {
                if let Some(&live) = self.by_name.get(&(name.clone(), k)) {
                    bits |= bit;
                    self.expected.insert((code, k), live);
                }
            }
            self.resolved[i] = bits;
        }
        let bit = match kind {
            PointKind::Entry => AT_ENTRY,
            PointKind::Exit => AT_EXIT,
        };
        if self.resolved[i] & bit == 0 {
            return None;
        }
        self.expected.get(&(code, kind)).copied()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tally_profile::gc_hints::{HintPoint, ProgramIdentity};

    const MIB: usize = 1 << 20;

    fn heap(used: usize, available: usize, nursery: usize, since_gc: u64) -> HeapStats {
        HeapStats {
            heap_used_bytes: used,
            heap_available_bytes: available,
            nursery_bytes: nursery,
            allocated_since_gc: since_gc,
            ..HeapStats::default()
        }
    }

    #[test]
    fn a_full_collection_pays_when_it_reclaims_twice_the_live_data() {
        // Non-generational: the next collection is full anyway; 50 MiB reclaimed for 10.
        assert_eq!(
            decide(10 * MIB as u64, &heap(60 * MIB, MIB, 0, 0)),
            Decision::Full
        );
        // 30 reclaimed for 30 traced is not worth a collection before its time.
        assert_eq!(
            decide(30 * MIB as u64, &heap(60 * MIB, MIB, 0, 0)),
            Decision::Nothing
        );
        // Generational: whole only when little is available, else the nursery.
        let n = 4 * MIB;
        assert_eq!(
            decide(MIB as u64, &heap(50 * MIB, 6 * MIB, n, 3 * MIB as u64)),
            Decision::Full
        );
        assert_eq!(
            decide(MIB as u64, &heap(50 * MIB, 20 * MIB, n, 3 * MIB as u64)),
            Decision::Nursery
        );
    }

    #[test]
    fn a_nursery_not_yet_mostly_allocated_is_left_alone() {
        let n = 4 * MIB;
        assert_eq!(
            decide(MIB as u64, &heap(20 * MIB, 40 * MIB, n, MIB as u64)),
            Decision::Nothing
        );
    }

    #[test]
    fn hinted_points_resolve_by_method_name_and_kind() {
        let hints = GcHints {
            vm_version: "0".into(),
            program: ProgramIdentity {
                name: "P".into(),
                fingerprint: 0,
            },
            points: vec![HintPoint {
                method: "App>>round".into(),
                kind: PointKind::Exit,
                expected_live_bytes: 123,
                seen: 3,
                minima: 3,
            }],
        };
        let mut a = Applied::new(&hints);
        let mut named = 0;
        let mut name = |n: &str| {
            named += 1;
            n.to_string()
        };
        assert_eq!(
            a.hinted(7, PointKind::Exit, || name("App>>round")),
            Some(123)
        );
        assert_eq!(a.hinted(7, PointKind::Entry, || name("App>>round")), None);
        assert_eq!(a.hinted(3, PointKind::Exit, || name("App>>other")), None);
        assert_eq!(a.hinted(3, PointKind::Exit, || name("App>>other")), None);
        // Each code is named once.
        assert_eq!(named, 2);
        assert_eq!(a.points, 1);
    }
}
