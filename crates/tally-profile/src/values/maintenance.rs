//! The value tables of a run and the background pass that keeps them useful.
//!
//! Code owns its tables (`Arc<ValueTable>`); the registry holds them weakly, grouped by owner
//! (a method id, say). A pass, on a thread of its own every period:
//! - skips tables that took no record since its last visit (code no longer running: nothing
//!   there changes, and rereading idle tables would cost a pass proportional to all code ever
//!   profiled);
//! - asks for a reset of a table whose "other" count dominates since its last reset: the values
//!   it holds are from a phase the program has left ([`PassPolicy`]);
//! - reopens the burst of a table that used up its last one ([`ValueTable::record_in_burst`]):
//!   code that profiles in bursts keeps sampling every phase, at one burst per pass;
//! - drops the entries of tables no code refers to any more (the table's memory went with its
//!   last owner).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::thread::JoinHandle;
use std::time::Duration;

use super::hashing::Hashing;
use super::table::ValueTable;

/// When a pass resets a table, and how many records a burst it reopens takes.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PassPolicy {
    /// Counts (entries and other) a table needs before its "other" share means anything.
    pub min_total: u64,
    /// Reset when "other" holds more than this share of the counts.
    pub other_share: f64,
    /// Records of the burst reopened at a table whose last burst is used up; 0 leaves
    /// bursts alone (tables counted by `record`, every value).
    pub burst: u32,
}

impl Default for PassPolicy {
    fn default() -> Self {
        PassPolicy {
            min_total: 256,
            other_share: 0.5,
            burst: 0,
        }
    }
}

/// What one pass did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PassReport {
    /// Tables whose counts changed since the last pass.
    pub visited: usize,
    /// Tables that took no record since the last pass.
    pub idle: usize,
    /// Tables asked to reset.
    pub reset: usize,
    /// Tables whose used-up burst was reopened.
    pub reopened: usize,
    /// Entries dropped because no code refers to their table.
    pub freed: usize,
}

struct Entry {
    owner: u64,
    table: Weak<ValueTable>,
    /// `total()` at the last visit.
    seen_total: u64,
}

/// Every value table of a run.
#[derive(Default)]
pub struct ValueProfiles {
    entries: Mutex<Vec<Entry>>,
}

impl ValueProfiles {
    pub fn new() -> ValueProfiles {
        ValueProfiles::default()
    }

    /// A new empty table for `owner`'s code; the caller keeps the only strong reference.
    pub fn table(&self, owner: u64, capacity: usize, hashing: Hashing) -> Arc<ValueTable> {
        let table = Arc::new(ValueTable::new(capacity, hashing));
        self.lock().push(Entry {
            owner,
            table: Arc::downgrade(&table),
            seen_total: 0,
        });
        table
    }

    /// Live tables of `owner`, in creation order.
    pub fn tables_of(&self, owner: u64) -> Vec<Arc<ValueTable>> {
        self.lock()
            .iter()
            .filter(|e| e.owner == owner)
            .filter_map(|e| e.table.upgrade())
            .collect()
    }

    /// Entries in the registry (live or not yet dropped).
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// One maintenance pass (see the module doc).
    pub fn pass(&self, policy: &PassPolicy) -> PassReport {
        let mut report = PassReport::default();
        self.lock().retain_mut(|e| {
            let Some(t) = e.table.upgrade() else {
                report.freed += 1;
                return false;
            };
            let total = t.total();
            if total == e.seen_total && !t.reset_pending() {
                report.idle += 1;
                return true;
            }
            report.visited += 1;
            e.seen_total = total;
            // Used up since the last pass (it took records), so its code still runs.
            if policy.burst != 0 && t.burst_left() == 0 {
                t.open_burst(policy.burst);
                report.reopened += 1;
            }
            if !t.reset_pending() && total >= policy.min_total {
                let s = t.snapshot();
                if s.other as f64 > policy.other_share * s.total() as f64 {
                    t.request_reset();
                    report.reset += 1;
                }
            }
            true
        });
        report
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<Entry>> {
        self.entries.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// The background thread that runs [`ValueProfiles::pass`] every period until stopped.
pub struct Maintainer {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<PassReport>>,
}

impl Maintainer {
    pub fn start(
        profiles: Arc<ValueProfiles>,
        period: Duration,
        policy: PassPolicy,
    ) -> std::io::Result<Maintainer> {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let thread = std::thread::Builder::new()
            .name("tally-values".into())
            .spawn(move || {
                let mut sum = PassReport::default();
                while !flag.load(Ordering::Acquire) {
                    std::thread::park_timeout(period);
                    let r = profiles.pass(&policy);
                    sum.visited += r.visited;
                    sum.idle += r.idle;
                    sum.reset += r.reset;
                    sum.reopened += r.reopened;
                    sum.freed += r.freed;
                }
                sum
            })?;
        Ok(Maintainer {
            stop,
            thread: Some(thread),
        })
    }

    /// Stops the thread; answers what all its passes did together.
    pub fn stop(mut self) -> PassReport {
        self.stop_thread()
    }

    fn stop_thread(&mut self) -> PassReport {
        self.stop.store(true, Ordering::Release);
        match self.thread.take() {
            Some(t) => {
                t.thread().unpark();
                t.join().unwrap_or_default()
            }
            None => PassReport::default(),
        }
    }
}

impl Drop for Maintainer {
    fn drop(&mut self) {
        self.stop_thread();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_table_resets_after_a_phase_change() {
        let profiles = ValueProfiles::new();
        let t = profiles.table(1, 4, Hashing::ShiftTable);
        let policy = PassPolicy::default();
        // Phase 1: four values fill the table.
        for i in 0..1000u64 {
            t.record((i % 4 + 1) * 8);
        }
        assert_eq!(profiles.pass(&policy).reset, 0, "phase 1 fits the table");
        // Phase 2: four other values, all of them "other".
        for i in 0..3000u64 {
            t.record((i % 4 + 10) * 8);
        }
        let r = profiles.pass(&policy);
        assert_eq!((r.visited, r.reset), (1, 1));
        // The recording thread carries the reset out; then phase 2's values get the slots.
        for i in 0..1000u64 {
            t.record((i % 4 + 10) * 8);
        }
        let s = t.snapshot();
        assert_eq!(s.other, 0);
        let values: Vec<u64> = s.entries.iter().map(|e| e.0).collect();
        assert!(values.iter().all(|v| (80..=104).contains(v)), "{values:?}");
        assert_eq!(
            t.discarded(),
            4000,
            "phase 1 and phase 2 counts before the reset"
        );
        assert_eq!(profiles.pass(&policy).reset, 0, "phase 2 now fits");
    }

    #[test]
    fn idle_tables_are_skipped_and_dropped_ones_freed() {
        let profiles = ValueProfiles::new();
        let running = profiles.table(1, 4, Hashing::ShiftTable);
        let finished = profiles.table(2, 4, Hashing::ShiftTable);
        let gone = profiles.table(3, 4, Hashing::ShiftTable);
        for t in [&running, &finished, &gone] {
            t.record(8);
        }
        let policy = PassPolicy::default();
        assert_eq!(profiles.pass(&policy).visited, 3);
        drop(gone);
        running.record(8);
        let r = profiles.pass(&policy);
        assert_eq!((r.visited, r.idle, r.freed), (1, 1, 1));
        assert_eq!(profiles.len(), 2);
        assert_eq!(profiles.tables_of(1).len(), 1);
        assert!(profiles.tables_of(3).is_empty());
    }

    #[test]
    fn a_pass_reopens_used_up_bursts_of_running_code_only() {
        let profiles = ValueProfiles::new();
        let running = profiles.table(1, 4, Hashing::Multiplicative);
        let finished = profiles.table(2, 4, Hashing::Multiplicative);
        let policy = PassPolicy {
            burst: 10,
            ..PassPolicy::default()
        };
        for t in [&running, &finished] {
            t.open_burst(4);
            for _ in 0..100 {
                t.record_in_burst(8);
            }
        }
        let r = profiles.pass(&policy);
        assert_eq!((r.visited, r.reopened), (2, 2));
        // A phase change sampled by the next burst, in the code still running only.
        for _ in 0..100 {
            running.record_in_burst(16);
        }
        let r = profiles.pass(&policy);
        assert_eq!((r.visited, r.idle, r.reopened), (1, 1, 1));
        assert_eq!(running.snapshot().entries, vec![(16, 10), (8, 4)]);
        assert_eq!(
            finished.burst_left(),
            10,
            "left open: its code no longer runs"
        );
        let r = profiles.pass(&policy);
        assert_eq!(
            (r.visited, r.reopened),
            (0, 0),
            "nothing ran: nothing to reopen"
        );
    }

    #[test]
    fn a_small_table_is_not_reset_on_too_few_counts() {
        let profiles = ValueProfiles::new();
        let t = profiles.table(1, 1, Hashing::ShiftTable);
        for v in [8u64, 16, 24, 32] {
            t.record(v);
        }
        assert_eq!(profiles.pass(&PassPolicy::default()).reset, 0);
    }

    #[test]
    fn the_maintainer_resets_tables_in_the_background() {
        let profiles = Arc::new(ValueProfiles::new());
        let t = profiles.table(1, 2, Hashing::ShiftTable);
        let m = Maintainer::start(
            profiles.clone(),
            Duration::from_millis(1),
            PassPolicy::default(),
        )
        .unwrap();
        for i in 0..10_000u64 {
            t.record((i % 8) * 8);
        }
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while !t.reset_pending() && std::time::Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(1));
        }
        let report = m.stop();
        assert!(t.reset_pending(), "{report:?}");
        assert!(report.reset >= 1);
    }
}
