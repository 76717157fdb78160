//! The value profiles a method's compiles were made from: the best and the most recent.
//!
//! A recompile (after a deopt, or to a higher tier) should not throw away a good profile for a
//! worse one: the tables may have been reset just before, or the method may be recompiled
//! from a short burst of a phase it rarely runs. So each method keeps the best snapshot seen so
//! far and the most recent one, and a recompile uses whichever is better.

use super::table::TableSnapshot;

/// The value tables of one method at one moment, in the method's site order.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ProfileSnapshot {
    pub tables: Vec<TableSnapshot>,
}

impl ProfileSnapshot {
    /// All counts of all tables.
    pub fn total(&self) -> u64 {
        self.tables.iter().map(TableSnapshot::total).sum()
    }

    /// How much this profile tells: the share of counts its tables placed (not "other"),
    /// discounted while it has few counts (half credit at [`FULL_CREDIT_COUNTS`] / 4).
    pub fn quality(&self) -> f64 {
        let total = self.total();
        if total == 0 {
            return 0.0;
        }
        let placed = total - self.tables.iter().map(|t| t.other).sum::<u64>();
        let coverage = placed as f64 / total as f64;
        let confidence = total as f64 / (total as f64 + FULL_CREDIT_COUNTS as f64 / 4.0);
        coverage * confidence
    }
}

/// Counts at which a profile is trusted nearly fully (quality ≥ 0.8 of its coverage).
pub const FULL_CREDIT_COUNTS: u64 = 1024;

/// The best and the latest profile of one method.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ProfileHistory {
    best: Option<ProfileSnapshot>,
    recent: Option<ProfileSnapshot>,
}

impl ProfileHistory {
    /// Keeps `snapshot` as the most recent, and as the best if it is at least as good.
    pub fn record(&mut self, snapshot: ProfileSnapshot) {
        if self
            .best
            .as_ref()
            .is_none_or(|b| snapshot.quality() >= b.quality())
        {
            self.best = Some(snapshot.clone());
        }
        self.recent = Some(snapshot);
    }

    /// What a recompile should use: the most recent profile unless the best is better.
    pub fn for_recompile(&self) -> Option<&ProfileSnapshot> {
        match (&self.best, &self.recent) {
            (Some(b), Some(r)) if b.quality() > r.quality() => Some(b),
            (_, Some(r)) => Some(r),
            (b, None) => b.as_ref(),
        }
    }

    pub fn best(&self) -> Option<&ProfileSnapshot> {
        self.best.as_ref()
    }

    pub fn recent(&self) -> Option<&ProfileSnapshot> {
        self.recent.as_ref()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn snapshot(placed: u64, other: u64) -> ProfileSnapshot {
        ProfileSnapshot {
            tables: vec![TableSnapshot {
                entries: vec![(8, placed)],
                other,
            }],
        }
    }

    #[test]
    fn a_recompile_keeps_the_better_profile() {
        let mut h = ProfileHistory::default();
        assert_eq!(h.for_recompile(), None);
        let good = snapshot(5000, 100);
        h.record(good.clone());
        // Right after a reset: few counts.
        let thin = snapshot(10, 0);
        h.record(thin.clone());
        assert_eq!(h.recent(), Some(&thin));
        assert_eq!(h.best(), Some(&good));
        assert_eq!(h.for_recompile(), Some(&good));
        // A new phase, well measured: it wins, and becomes the best.
        let new = snapshot(20_000, 50);
        h.record(new.clone());
        assert_eq!(h.for_recompile(), Some(&new));
        assert_eq!(h.best(), Some(&new));
    }

    #[test]
    fn quality_grows_with_coverage_and_counts() {
        assert_eq!(ProfileSnapshot::default().quality(), 0.0);
        assert!(snapshot(900, 100).quality() < snapshot(1000, 0).quality());
        assert!(snapshot(10, 0).quality() < snapshot(10_000, 0).quality());
        assert!(snapshot(FULL_CREDIT_COUNTS, 0).quality() >= 0.8);
    }
}
