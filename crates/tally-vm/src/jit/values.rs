//! Receiver-class value profiles at send sites (JProfiling's tables,
//! `tally_profile::values`): code of the baseline tier counts each send's receiver class in
//! its site's table (the common path inline, a multiply and a shift to the slot), in bursts
//! that the maintenance pass reopens (`ValueTable::record_in_burst`); the
//! optimizing tier reads the tables when it compiles and guards on the classes that hold more
//! than the inliner's share of the site, instead of the one or two classes an inline cache
//! happens to hold when the compile starts.
//!
//! The tables live as long as the VM (compiled code refers to them and is never freed); the
//! registry's maintenance thread resets a table whose "other" count shows the program moved
//! to classes the table no longer holds, and reopens the burst of a table whose code used up
//! the last one. Each method keeps its best and most recent profile,
//! and a recompile uses the better one.

use std::sync::Arc;

use rustc_hash::FxHashMap;
use tally_profile::values::{
    Hashing, Maintainer, PassPolicy, ProfileHistory, ProfileSnapshot, TableSnapshot, ValueProfiles,
    ValueTable,
};

use crate::bytecode::{CodeId, SiteId};
use crate::runtime::Code;

/// Slots per receiver table: a send seldom sees more classes worth a guard.
const RECEIVER_SLOTS: usize = 4;

/// How often the maintenance pass looks at the tables.
const MAINTENANCE_PERIOD: std::time::Duration = std::time::Duration::from_millis(100);

/// Sends a new table counts before its first burst is used up: enough for the optimizing
/// tier's first compile of the method (it trusts tables of 32 counts and more) even when the
/// method runs the burst through before the compile starts.
const FIRST_BURST: u32 = 4096;

/// Sends counted per burst after the first, one burst per maintenance pass at most: a
/// sample of every phase (the pass resets tables a new phase fills with "other") that costs
/// hot sites one load and a branch per send between bursts.
const BURST: u32 = 1024;

pub(crate) struct SiteProfiles {
    registry: Arc<ValueProfiles>,
    /// Every site's table, kept for the VM's life: compiled code holds their addresses.
    tables: FxHashMap<SiteId, Arc<ValueTable>>,
    history: FxHashMap<CodeId, ProfileHistory>,
    maintainer: Option<Maintainer>,
}

impl SiteProfiles {
    /// Empty, with the maintenance thread running (none if it cannot start: tables then
    /// never reset, which costs precision, not correctness).
    pub(crate) fn start() -> SiteProfiles {
        let registry = Arc::new(ValueProfiles::new());
        let policy = PassPolicy {
            burst: BURST,
            ..PassPolicy::default()
        };
        let maintainer = Maintainer::start(registry.clone(), MAINTENANCE_PERIOD, policy).ok();
        SiteProfiles {
            registry,
            tables: FxHashMap::default(),
            history: FxHashMap::default(),
            maintainer,
        }
    }

    /// The address of `site`'s receiver table (made empty at the first ask), for code of
    /// `owner` to count into.
    pub(crate) fn table_address(&mut self, site: SiteId, owner: CodeId) -> usize {
        let registry = &self.registry;
        let table = self.tables.entry(site).or_insert_with(|| {
            let t = registry.table(u64::from(owner), RECEIVER_SLOTS, Hashing::Multiplicative);
            t.open_burst(FIRST_BURST);
            t
        });
        Arc::as_ptr(table) as usize
    }

    /// What compiling `code` should use: its sites' tables now, kept in its history, or its
    /// best earlier profile when that tells more (the tables may just have been reset).
    /// Per site, in the order of `sites`.
    pub(crate) fn for_compile(&mut self, code: &Code, sites: &[SiteId]) -> Vec<TableSnapshot> {
        let now = ProfileSnapshot {
            tables: sites
                .iter()
                .map(|s| self.tables.get(s).map(|t| t.snapshot()).unwrap_or_default())
                .collect(),
        };
        let history = self.history.entry(code.id).or_default();
        history.record(now);
        history
            .for_recompile()
            .map(|p| p.tables.clone())
            .unwrap_or_default()
    }
}

impl Drop for SiteProfiles {
    fn drop(&mut self) {
        if let Some(m) = self.maintainer.take() {
            m.stop();
        }
    }
}
