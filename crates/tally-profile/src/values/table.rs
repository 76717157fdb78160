//! One value profile: a fixed number of (value, count) slots and an "other" counter, after
//! OpenJ9's JProfiling.
//!
//! **The common path** ([`ValueTable::record`]) is a lookup and an increment: test the lock
//! word, compute the index from the value, compare the slot's key, add one to its count. Its
//! loads and stores are plain (relaxed atomics, no read-modify-write instruction), so compiled
//! code can inline it. Anything else — an empty slot, a collision, a full table, the lock word
//! set — goes out of line ([`ValueTable::record_slow`]).
//!
//! **Adding a value** takes the lock bit (never waiting: a thread that finds it held counts its
//! value as "other"), and if the value's slot is taken by another value, chooses the index bits
//! again so that all the table's values and the new one get slots of their own, and moves the
//! entries ("rearrangement"). A value that cannot be placed (the table is full, or no choice of
//! bits separates the values) counts as "other". Any k + 1 distinct values can be told apart
//! by k bits, so a table of 2^k slots always holds k + 1 values; how many more depends on
//! their bits (object addresses and small integers differ in many low bits and fill tables
//! well). The compiler's reads ([`ValueTable::snapshot`])
//! take the lock too, so they see whole entries.
//!
//! **Who writes the slots.** Only the thread that records into a table: the VM's mutator,
//! which owns its tables as it owns its frames. Other threads never write a slot: the compiler
//! reads under the lock, and the maintenance pass *requests* a reset
//! ([`ValueTable::request_reset`], a bit in the lock word) that the recording thread carries out
//! at its next record, since the set bit sends it down the slow path.
//!
//! **Lost counts.** With one recording thread, none: an increment that passed the lock test
//! just before another thread took the lock still lands on its slot (readers never move or
//! clear slots), the counts of a reset go to [`ValueTable::discarded`], and the counts of
//! values met while the lock was held go to "other". So `total() + discarded()` is the number
//! of records exactly (the test `readers_and_resets_racing_a_recorder_lose_no_count` holds it to
//! that). Tables shared by several recording threads would be plain unsynchronized counters:
//! racing increments lose updates, and a stale store after another thread's rearrangement can
//! land on a moved slot; a VM with several mutators gives each its own tables.
//!
//! Profiles steer optimization: paying a locked instruction on every profiled operation to
//! guard against races the VM does not have would be the wrong trade.

use std::sync::atomic::{AtomicU32, AtomicU64, AtomicU8, Ordering::*};

use super::hashing::{self, BitChoice, Hashing, MAX_BITS};

/// The most slots a table has.
pub const MAX_SLOTS: usize = 1 << MAX_BITS;

/// Lock-word bit: a thread holds the table.
const LOCKED: u32 = 1;
/// Lock-word bit: the maintenance pass asked for a reset.
const RESET_REQUESTED: u32 = 2;

/// A value → frequency table of `capacity` slots (a power of two up to [`MAX_SLOTS`]).
/// `repr(C)` with the fields the common path reads first, so generated code can inline it.
#[repr(C)]
pub struct ValueTable {
    /// [`LOCKED`] while a thread adds, rearranges or reads; [`RESET_REQUESTED`] until the
    /// recording thread has reset the table. The common path falls to the slow one unless 0.
    lock: AtomicU32,
    /// Records [`ValueTable::record_in_burst`] still takes in the current burst.
    burst_left: AtomicU32,
    /// [`Hashing`] as a number (fixed at creation).
    hashing: u8,
    /// log2 of the capacity.
    capacity_bits: u8,
    /// How many index bits are in use (the shift table's count, the multiplicative hash's shift).
    bits: AtomicU8,
    /// The multiplicative hash's right shift, `64 − bits` (63 while `bits` is 0, when the
    /// multiplier is 0), so that compiled code computes the index with no test.
    shift: AtomicU8,
    /// The shift table's bit positions, packed one per byte, ascending.
    positions: AtomicU32,
    /// `pext`'s mask (the same bits as `positions`); the multiplicative hash's multiplier.
    mask_or_multiplier: AtomicU64,
    /// Counts of values that found no slot.
    other: AtomicU64,
    /// Counts thrown away by resets (so that nothing recorded is unaccounted for).
    discarded: AtomicU64,
    keys: [AtomicU64; MAX_SLOTS],
    counts: [AtomicU64; MAX_SLOTS],
}

/// Where compiled code finds what the common path of a [`Hashing::Multiplicative`] table
/// reads: byte offsets into a [`ValueTable`]. The shift is a u8, the multiplier a u64, keys
/// and counts arrays of u64; index = `(value × multiplier) >> shift` (the multiplier is 0
/// while the table uses no bits, so the index is 0 then). `burst_left` is a u32 for code that
/// records in bursts ([`ValueTable::record_in_burst`]).
///
/// Compiled code may skip the lock test of [`ValueTable::record`] when it counts only values
/// that are never 0 (a key of 0 marks an empty slot) and is the table's one recording thread:
/// the lock guards rearrangement, which only the recording thread does (never during its own
/// increment), readers, which never move or clear slots, and reset requests, which the slow
/// path serves; a table is reset when its "other" count dominates, that is when most records
/// take the slow path anyway.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TableLayout {
    pub lock: i32,
    pub burst_left: i32,
    pub shift: i32,
    pub multiplier: i32,
    pub keys: i32,
    pub counts: i32,
}

impl TableLayout {
    pub const OF_VALUE_TABLE: TableLayout = TableLayout {
        lock: std::mem::offset_of!(ValueTable, lock) as i32,
        burst_left: std::mem::offset_of!(ValueTable, burst_left) as i32,
        shift: std::mem::offset_of!(ValueTable, shift) as i32,
        multiplier: std::mem::offset_of!(ValueTable, mask_or_multiplier) as i32,
        keys: std::mem::offset_of!(ValueTable, keys) as i32,
        counts: std::mem::offset_of!(ValueTable, counts) as i32,
    };
}

/// What a table held at one moment.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TableSnapshot {
    /// (value, count), highest count first.
    pub entries: Vec<(u64, u64)>,
    pub other: u64,
}

impl TableSnapshot {
    pub fn total(&self) -> u64 {
        self.entries.iter().map(|e| e.1).sum::<u64>() + self.other
    }

    /// The share of all counts held by the most frequent value (0 for an empty table).
    pub fn top_share(&self) -> f64 {
        let total = self.total();
        match self.entries.first() {
            Some(&(_, n)) if total > 0 => n as f64 / total as f64,
            _ => 0.0,
        }
    }

    /// The values holding more than `share` of all counts, most frequent first.
    pub fn values_above(&self, share: f64) -> Vec<(u64, f64)> {
        let total = self.total().max(1) as f64;
        self.entries
            .iter()
            .map(|&(v, n)| (v, n as f64 / total))
            .filter(|&(_, s)| s > share)
            .collect()
    }
}

/// Releases the table's lock when dropped.
struct Locked<'a>(&'a ValueTable);

impl Drop for Locked<'_> {
    fn drop(&mut self) {
        self.0.lock.fetch_and(!LOCKED, Release);
    }
}

impl ValueTable {
    /// An empty table of `capacity` slots (rounded up to a power of two, at most 16).
    /// `Hashing::Pext` where the CPU lacks BMI2 becomes the shift table (same indices).
    pub fn new(capacity: usize, hashing: Hashing) -> ValueTable {
        let capacity_bits = capacity
            .clamp(1, MAX_SLOTS)
            .next_power_of_two()
            .trailing_zeros() as u8;
        let hashing = if hashing == Hashing::Pext && !hashing::has_bmi2() {
            Hashing::ShiftTable
        } else {
            hashing
        };
        ValueTable {
            lock: AtomicU32::new(0),
            burst_left: AtomicU32::new(0),
            hashing: hashing as u8,
            capacity_bits,
            bits: AtomicU8::new(0),
            shift: AtomicU8::new(63),
            positions: AtomicU32::new(0),
            mask_or_multiplier: AtomicU64::new(0),
            other: AtomicU64::new(0),
            discarded: AtomicU64::new(0),
            keys: std::array::from_fn(|_| AtomicU64::new(0)),
            counts: std::array::from_fn(|_| AtomicU64::new(0)),
        }
    }

    pub fn capacity(&self) -> usize {
        1 << self.capacity_bits
    }

    pub fn hashing(&self) -> Hashing {
        match self.hashing {
            0 => Hashing::Pext,
            1 => Hashing::ShiftTable,
            _ => Hashing::Multiplicative,
        }
    }

    /// The slot `value` belongs in under the current index bits.
    #[inline]
    fn index(&self, value: u64) -> usize {
        let key = self.mask_or_multiplier.load(Relaxed);
        match self.hashing() {
            Hashing::Pext => hashing::pext_hw(value, key),
            Hashing::ShiftTable => {
                let packed = self.positions.load(Relaxed).to_le_bytes();
                let bits = self.bits.load(Relaxed) as usize;
                let mut index = 0;
                for (i, &p) in packed[..bits].iter().enumerate() {
                    index |= ((value >> p) & 1) << i;
                }
                index as usize
            }
            Hashing::Multiplicative => hashing::multiplicative(value, key, self.bits.load(Relaxed)),
        }
    }

    /// Counts one occurrence of `value`: the common path inline, the rest out of line.
    #[inline]
    pub fn record(&self, value: u64) {
        if self.lock.load(Relaxed) == 0 {
            let i = self.index(value);
            if self.keys[i].load(Relaxed) == value {
                let c = &self.counts[i];
                let n = c.load(Relaxed);
                if n != 0 {
                    c.store(n + 1, Relaxed);
                    return;
                }
            }
        }
        self.record_slow(value);
    }

    /// Counts `value` if the current burst has records left ([`ValueTable::open_burst`]);
    /// nothing otherwise. Profiling in bursts (Arnold & Ryder's sampled instrumentation):
    /// between bursts a profiled operation pays one load and a branch instead of a lookup and
    /// a store, and the counts stay a sample of every phase as long as someone reopens the
    /// burst now and then (the maintenance pass does). The decrement is a plain load and
    /// store by the recording thread; a burst opened by another thread while it is open can
    /// lose that store, which changes the sample's size, never a count.
    #[inline]
    pub fn record_in_burst(&self, value: u64) {
        let left = self.burst_left.load(Relaxed);
        if left != 0 {
            self.burst_left.store(left - 1, Relaxed);
            self.record(value);
        }
    }

    /// Lets [`ValueTable::record_in_burst`] count the next `records` values. Any thread.
    pub fn open_burst(&self, records: u32) {
        self.burst_left.store(records, Relaxed);
    }

    /// Records left in the current burst.
    pub fn burst_left(&self) -> u32 {
        self.burst_left.load(Relaxed)
    }

    /// The out-of-line path: a value to add, a collision, a full table, or the lock held.
    #[cold]
    #[inline(never)]
    pub fn record_slow(&self, value: u64) {
        let Some(_locked) = self.try_lock() else {
            self.other.fetch_add(1, Relaxed);
            return;
        };
        if self.lock.fetch_and(!RESET_REQUESTED, Relaxed) & RESET_REQUESTED != 0 {
            self.discarded.fetch_add(self.total(), Relaxed);
            self.clear();
        }
        let i = self.index(value);
        let n = self.counts[i].load(Relaxed);
        if n == 0 {
            self.keys[i].store(value, Relaxed);
            self.counts[i].store(1, Relaxed);
            return;
        }
        if self.keys[i].load(Relaxed) == value {
            self.counts[i].store(n + 1, Relaxed);
            return;
        }
        // The slot holds another value: choose the bits again, if the table has room.
        let mut present = [(0u64, 0u64); MAX_SLOTS];
        let mut len = 0;
        for s in 0..self.capacity() {
            let c = self.counts[s].load(Relaxed);
            if c != 0 {
                present[len] = (self.keys[s].load(Relaxed), c);
                len += 1;
            }
        }
        if len == self.capacity() || !self.rearrange(&present[..len], value) {
            self.other.fetch_add(1, Relaxed);
        }
    }

    /// Places `entries` and `new` (count 1) under freshly chosen index bits. Answers false,
    /// changing nothing, when no choice separates them. Call with the lock held.
    fn rearrange(&self, entries: &[(u64, u64)], new: u64) -> bool {
        let mut values = [0u64; MAX_SLOTS + 1];
        let mut n = 0;
        for &(v, _) in entries.iter() {
            values[n] = v;
            n += 1;
        }
        values[n] = new;
        n += 1;
        let max_bits = self.capacity_bits as usize;
        let (bits, positions, key) = match self.hashing() {
            Hashing::Pext | Hashing::ShiftTable => {
                let Some(c) = hashing::choose_bits(&values[..n], max_bits) else {
                    return false;
                };
                (c.count, u32::from_le_bytes(c.positions), c.mask)
            }
            Hashing::Multiplicative => {
                let Some((m, bits)) = hashing::choose_multiplier(&values[..n], max_bits) else {
                    return false;
                };
                (bits, 0, m)
            }
        };
        for s in 0..self.capacity() {
            self.counts[s].store(0, Relaxed);
            self.keys[s].store(0, Relaxed);
        }
        self.bits.store(bits, Relaxed);
        self.positions.store(positions, Relaxed);
        // With no bits every value has slot 0: a zero multiplier says so to compiled code.
        let (key, shift) = match (self.hashing(), bits) {
            (Hashing::Multiplicative, 0) => (0, 63),
            (Hashing::Multiplicative, b) => (key, 64 - b),
            _ => (key, 63),
        };
        self.shift.store(shift, Relaxed);
        self.mask_or_multiplier.store(key, Relaxed);
        let placed = entries.iter().copied().chain([(new, 1)]);
        for (v, c) in placed {
            let i = self.index(v);
            self.keys[i].store(v, Relaxed);
            self.counts[i].store(c, Relaxed);
        }
        // An empty slot keeps key 0, which only slot `index(0)` can match; if that slot is
        // empty too, a 0 arriving there is added by the slow path (its count is 0).
        true
    }

    fn try_lock(&self) -> Option<Locked<'_>> {
        let word = self.lock.fetch_or(LOCKED, Acquire);
        // `then`, not `then_some`: a guard built and dropped unused would release the lock.
        (word & LOCKED == 0).then(|| Locked(self))
    }

    /// Takes the lock, waiting for a thread in the slow path (which holds it briefly).
    fn lock(&self) -> Locked<'_> {
        loop {
            if let Some(l) = self.try_lock() {
                return l;
            }
            std::hint::spin_loop();
        }
    }

    /// The table's entries and "other" count, read under the lock (for the compiler).
    pub fn snapshot(&self) -> TableSnapshot {
        let _locked = self.lock();
        self.read()
    }

    fn read(&self) -> TableSnapshot {
        let mut entries: Vec<(u64, u64)> = (0..self.capacity())
            .filter_map(|s| {
                let c = self.counts[s].load(Relaxed);
                (c != 0).then(|| (self.keys[s].load(Relaxed), c))
            })
            .collect();
        entries.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
        TableSnapshot {
            entries,
            other: self.other.load(Relaxed),
        }
    }

    /// Asks the recording thread to empty the table (a phase change it missed) at its next
    /// record. Any thread; the slots are left to their writer.
    pub fn request_reset(&self) {
        self.lock.fetch_or(RESET_REQUESTED, Release);
    }

    /// Whether a requested reset has not happened yet.
    pub fn reset_pending(&self) -> bool {
        self.lock.load(Relaxed) & RESET_REQUESTED != 0
    }

    /// Counts thrown away by resets so far.
    pub fn discarded(&self) -> u64 {
        self.discarded.load(Relaxed)
    }

    fn clear(&self) {
        for s in 0..self.capacity() {
            self.counts[s].store(0, Relaxed);
            self.keys[s].store(0, Relaxed);
        }
        self.other.store(0, Relaxed);
        self.bits.store(0, Relaxed);
        self.shift.store(63, Relaxed);
        self.positions.store(0, Relaxed);
        self.mask_or_multiplier.store(0, Relaxed);
    }

    /// Every count (entries and other): what the maintenance pass compares between visits to
    /// tell whether code still records into the table, without a write of its own.
    pub fn total(&self) -> u64 {
        (0..self.capacity())
            .map(|s| self.counts[s].load(Relaxed))
            .sum::<u64>()
            + self.other.load(Relaxed)
    }

    /// The bits the table extracts now (for reports and tests).
    pub fn bit_choice(&self) -> Option<BitChoice> {
        (self.hashing() != Hashing::Multiplicative)
            .then(|| BitChoice::from_mask(self.mask_or_multiplier.load(Relaxed)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;
    use std::sync::atomic::{AtomicBool, AtomicU64};
    use std::sync::Arc;

    const ALL: [Hashing; 3] = [Hashing::Pext, Hashing::ShiftTable, Hashing::Multiplicative];

    /// What compiled code does with [`TableLayout`] for a value that is never 0: the common
    /// path read through raw offsets, no lock test, no count test. `Some(count)` when it
    /// would count the value in place.
    fn common_path_by_layout(t: &ValueTable, value: u64) -> Option<u64> {
        let l = TableLayout::OF_VALUE_TABLE;
        let base = t as *const ValueTable as *const u8;
        // SAFETY: the offsets are `offset_of!` the table's own fields, read at their types.
        unsafe {
            let read64 = |off: i32| std::ptr::read(base.add(off as usize) as *const u64);
            if read64(l.keys) == value {
                return Some(read64(l.counts));
            }
            let shift = std::ptr::read(base.add(l.shift as usize));
            let index = value.wrapping_mul(read64(l.multiplier)) >> shift;
            let key = read64(l.keys + 8 * index as i32);
            let count = read64(l.counts + 8 * index as i32);
            (key == value).then_some(count)
        }
    }

    #[test]
    fn the_layout_gives_compiled_code_the_common_path_of_multiplicative_tables() {
        let t = ValueTable::new(4, Hashing::Multiplicative);
        assert_eq!(
            common_path_by_layout(&t, 7),
            None,
            "empty: the slow path adds"
        );
        for v in [7u64, 19, 1000, 7, 7, 19] {
            t.record(v);
        }
        assert_eq!(common_path_by_layout(&t, 7), Some(3));
        assert_eq!(common_path_by_layout(&t, 19), Some(2));
        assert_eq!(common_path_by_layout(&t, 1000), Some(1));
        assert_eq!(
            common_path_by_layout(&t, 5),
            None,
            "a new value goes out of line"
        );
        // After a reset the slots are empty again: nothing nonzero matches.
        t.request_reset();
        t.record(19);
        assert_eq!(common_path_by_layout(&t, 19), Some(1));
        assert_eq!(common_path_by_layout(&t, 7), None);
    }

    #[test]
    fn a_burst_counts_exactly_its_records_and_reopening_counts_more() {
        let t = ValueTable::new(4, Hashing::Multiplicative);
        for v in 1..=10u64 {
            t.record_in_burst(v);
        }
        assert_eq!(t.total(), 0, "no burst open yet: nothing counted");
        t.open_burst(5);
        for _ in 0..20 {
            t.record_in_burst(8);
        }
        assert_eq!((t.total(), t.burst_left()), (5, 0));
        t.open_burst(3);
        for _ in 0..20 {
            t.record_in_burst(16);
        }
        let s = t.snapshot();
        assert_eq!(s.entries, vec![(8, 5), (16, 3)]);
        // Compiled code reads and writes the burst through the layout's offset.
        let l = TableLayout::OF_VALUE_TABLE;
        t.open_burst(42);
        // SAFETY: `burst_left` is the table's u32 field at that offset.
        let left = unsafe {
            std::ptr::read(
                (&t as *const ValueTable as *const u8).add(l.burst_left as usize) as *const u32,
            )
        };
        assert_eq!(left, 42);
    }

    fn contents(t: &ValueTable) -> (BTreeMap<u64, u64>, u64) {
        let s = t.snapshot();
        (s.entries.into_iter().collect(), s.other)
    }

    #[test]
    fn values_up_to_the_capacity_are_counted_exactly_at_every_size() {
        for hashing in [Hashing::Pext, Hashing::ShiftTable] {
            for capacity in [1, 2, 4, 8, 16] {
                let t = ValueTable::new(capacity, hashing);
                let values: Vec<u64> = (0..capacity as u64).map(|i| 0x1000 + i * 24).collect();
                for round in 0..5u64 {
                    for (k, &v) in values.iter().enumerate() {
                        for _ in 0..=(k as u64 + round) {
                            t.record(v);
                        }
                    }
                }
                let (entries, other) = contents(&t);
                assert_eq!(other, 0, "{hashing:?} capacity {capacity}");
                for (k, v) in values.iter().enumerate() {
                    // Rounds 0..5 add k+1 .. k+5 each.
                    assert_eq!(entries[v], 5 * k as u64 + 15, "{hashing:?} {capacity} {v}");
                }
            }
        }
    }

    #[test]
    fn a_full_table_counts_new_values_as_other() {
        for hashing in ALL {
            let t = ValueTable::new(4, hashing);
            for v in [8u64, 16, 24, 32] {
                t.record(v);
            }
            let placed = contents(&t).0.len() as u64;
            for v in 100..110u64 {
                t.record(v * 8);
            }
            let (entries, other) = contents(&t);
            assert_eq!(entries.len() as u64, placed, "{hashing:?}");
            assert_eq!(other, 10 + (4 - placed), "{hashing:?}");
            if hashing != Hashing::Multiplicative {
                assert_eq!(placed, 4);
            }
        }
    }

    #[test]
    fn lookups_after_rearrangement_find_every_value_where_its_bits_say() {
        let t = ValueTable::new(16, Hashing::ShiftTable);
        let values: Vec<u64> = (0..16u64).map(|i| (i * 0x9e37) << 3).collect();
        for &v in &values {
            t.record(v);
            // Each addition rearranged if needed; every value so far is still found.
            let (entries, other) = contents(&t);
            assert_eq!(other, 0);
            assert!(entries.values().all(|&c| c == 1));
        }
        let bits = t.bit_choice().unwrap();
        assert_eq!(bits.count, 4, "16 values need 4 bits");
        let slots: std::collections::HashSet<usize> =
            values.iter().map(|&v| bits.gather(v)).collect();
        assert_eq!(slots.len(), 16);
        // The common path now finds each one without taking the lock.
        for &v in &values {
            t.record(v);
        }
        assert!(contents(&t).0.values().all(|&c| c == 2));
    }

    /// The same stream gives the same table contents with `pext`, the shift table and the
    /// multiplicative hash, whenever the values fit (for the multiplicative hash: few of them).
    #[test]
    fn pext_and_the_fallbacks_give_identical_results() {
        let mut x = 7u64;
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        for capacity in [2, 4, 8, 16] {
            let distinct: Vec<u64> = (0..capacity / 2).map(|_| next() & !7).collect();
            let stream: Vec<u64> = (0..2000)
                .map(|_| distinct[(next() % distinct.len() as u64) as usize])
                .collect();
            let results: Vec<_> = ALL
                .iter()
                .map(|&h| {
                    let t = ValueTable::new(capacity, h);
                    stream.iter().for_each(|&v| t.record(v));
                    contents(&t)
                })
                .collect();
            assert_eq!(
                results[0], results[1],
                "pext / shift table, capacity {capacity}"
            );
            assert_eq!(
                results[0], results[2],
                "pext / multiplicative, capacity {capacity}"
            );
            assert_eq!(results[0].1, 0);
            assert_eq!(results[0].0.values().sum::<u64>(), 2000);
        }
    }

    #[test]
    fn a_snapshot_names_the_dominant_values() {
        let t = ValueTable::new(2, Hashing::ShiftTable);
        for v in [8u64, 8, 8, 8, 8, 8, 16, 16, 24, 32] {
            t.record(v);
        }
        let s = t.snapshot();
        assert_eq!((s.total(), s.other), (10, 2));
        assert_eq!(s.top_share(), 0.6);
        assert_eq!(s.values_above(0.4), vec![(8, 0.6)]);
        assert_eq!(TableSnapshot::default().top_share(), 0.0);
    }

    #[test]
    fn zero_is_a_value_like_any_other() {
        let t = ValueTable::new(4, Hashing::ShiftTable);
        for v in [0u64, 0, 8, 0, 16] {
            t.record(v);
        }
        let (entries, other) = contents(&t);
        assert_eq!(
            (entries[&0], entries[&8], entries[&16], other),
            (3, 1, 1, 0)
        );
    }

    #[test]
    fn a_reset_table_starts_over() {
        let t = ValueTable::new(2, Hashing::ShiftTable);
        for v in [8u64, 16, 24, 24] {
            t.record(v);
        }
        assert_eq!(contents(&t).1, 2);
        t.request_reset();
        assert!(t.reset_pending());
        assert_eq!(
            contents(&t).1,
            2,
            "the recording thread resets, at its next record"
        );
        t.record(40);
        assert!(!t.reset_pending());
        assert_eq!(t.discarded(), 4);
        t.record(48);
        let (entries, other) = contents(&t);
        assert_eq!((entries.len(), other), (2, 0));
    }

    #[test]
    fn a_held_lock_sends_values_to_other_instead_of_waiting() {
        let t = ValueTable::new(4, Hashing::ShiftTable);
        t.record(8);
        let held = t.try_lock().unwrap();
        t.record(8);
        t.record(16);
        drop(held);
        let (entries, other) = contents(&t);
        assert_eq!((entries[&8], other), (1, 2));
    }

    /// One thread records (as running code does: new values arrive, so it rearranges) while
    /// another reads the table under the lock and requests resets, as the compiler and the
    /// maintenance pass do: every record is in the table, in "other" or discarded by a reset.
    #[test]
    fn readers_and_resets_racing_a_recorder_lose_no_count() {
        for hashing in [Hashing::ShiftTable, Hashing::Pext, Hashing::Multiplicative] {
            let t = Arc::new(ValueTable::new(8, hashing));
            let stop = Arc::new(AtomicBool::new(false));
            let resets_asked = Arc::new(AtomicU64::new(0));
            let reader = {
                let (t, stop, asked) = (t.clone(), stop.clone(), resets_asked.clone());
                std::thread::spawn(move || {
                    let mut reads = 0u64;
                    while !stop.load(Relaxed) {
                        let s = t.snapshot();
                        assert!(s.entries.len() <= 8);
                        reads += 1;
                        if reads.is_multiple_of(64) {
                            t.request_reset();
                            asked.fetch_add(1, Relaxed);
                        }
                    }
                    reads
                })
            };
            // At least 2 million records, and on until the reader has asked for 20 resets and
            // one has been carried out (on a loaded machine the threads may not overlap at
            // first).
            let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
            let mut records = 0u64;
            let mut x = 1u64;
            while records < 2_000_000
                || ((resets_asked.load(Relaxed) < 20 || t.discarded() == 0)
                    && std::time::Instant::now() < deadline)
            {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                // Mostly six values, now and then one of many others: rearrangements and a
                // full table.
                let v = if x.is_multiple_of(16) {
                    (x % 64) * 8
                } else {
                    (x % 6 + 1) * 0x40
                };
                t.record(v);
                records += 1;
            }
            stop.store(true, Relaxed);
            let reads = reader.join().unwrap();
            let resets = resets_asked.load(Relaxed);
            assert_eq!(
                t.total() + t.discarded(),
                records,
                "{hashing:?}: {reads} reads, {resets} resets asked"
            );
            assert!(
                resets >= 20 && t.discarded() > 0,
                "the race was exercised ({reads} reads)"
            );
        }
    }
}
