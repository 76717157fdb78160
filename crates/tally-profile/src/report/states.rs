//! Where time goes by VM component (T6): samples per VM state, and per
//! tier of the running code.

use std::collections::BTreeMap;
use std::fmt::Write;

use super::pct;
use crate::event::EventKind;
use crate::ids::VmState;
use crate::profile::Profile;

#[derive(Clone, Debug, PartialEq)]
pub struct StateRow {
    pub name: String,
    pub count: u64,
    pub pct: f64,
}

#[derive(Clone, Debug, PartialEq)]
pub struct StateBreakdown {
    pub total: u64,
    /// One row per VM state, in declaration order (zeros included).
    pub states: Vec<StateRow>,
    /// Samples by the tier of the innermost frame, heaviest first.
    pub tiers: Vec<StateRow>,
    /// Collections and their summed duration from the GC events, and the run's duration.
    /// Samples alone can miss GC time: a collector working on other threads while the VM
    /// thread waits takes no CPU time of the VM thread, which CPU-time triggers count.
    pub gc_events: GcTotals,
    /// Samples that stand for GC pauses ([`crate::Origin::GcPause`]).
    pub gc_pause_samples: u64,
}

/// What the `GcEnd` events add up to.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct GcTotals {
    pub collections: u64,
    /// Of `collections`, those that collected only a generational collector's nursery.
    pub nursery: u64,
    /// Of `collections`, those GC hints asked for (kind `Hint`).
    pub hinted: u64,
    pub gc_ns: u64,
    pub longest_ns: u64,
    pub run_ns: u64,
}

impl GcTotals {
    pub fn new(p: &Profile) -> GcTotals {
        let mut t = GcTotals {
            run_ns: p.duration_ns(),
            ..GcTotals::default()
        };
        for e in &p.events {
            if let EventKind::GcEnd {
                duration_ns,
                ref scope,
                ref kind,
                ..
            } = e.kind
            {
                t.collections += 1;
                t.nursery += u64::from(scope == "nursery");
                t.hinted += u64::from(kind == "Hint");
                t.gc_ns += duration_ns;
                t.longest_ns = t.longest_ns.max(duration_ns);
            }
        }
        t
    }
}

impl StateBreakdown {
    pub fn new(p: &Profile) -> StateBreakdown {
        let total = p.samples.len() as u64;
        let mut by_state = [0u64; VmState::ALL.len()];
        let mut by_tier: BTreeMap<String, u64> = BTreeMap::new();
        let symbols = p.symbols();
        for s in &p.samples {
            by_state[s.state as usize] += 1;
            let frames = symbols.resolve_stack(&s.frames);
            if let Some(top) = frames.first() {
                *by_tier.entry(top.tier.name()).or_insert(0) += 1;
            }
        }
        let states = VmState::ALL
            .iter()
            .map(|&s| StateRow {
                name: s.name().into(),
                count: by_state[s as usize],
                pct: pct(by_state[s as usize], total),
            })
            .collect();
        let mut tiers: Vec<StateRow> = by_tier
            .into_iter()
            .map(|(name, count)| StateRow {
                name,
                count,
                pct: pct(count, total),
            })
            .collect();
        tiers.sort_by(|a, b| b.count.cmp(&a.count).then_with(|| a.name.cmp(&b.name)));
        StateBreakdown {
            total,
            states,
            tiers,
            gc_events: GcTotals::new(p),
            gc_pause_samples: p
                .samples
                .iter()
                .filter(|s| s.origin == crate::sample::Origin::GcPause)
                .count() as u64,
        }
    }

    pub fn render_text(&self) -> String {
        let mut out = format!("VM states: {} samples\n", self.total);
        for r in &self.states {
            let _ = writeln!(out, "{:>6.2}% {:>8}  {}", r.pct, r.count, r.name);
        }
        out.push_str("code tiers (innermost frame):\n");
        for r in &self.tiers {
            let _ = writeln!(out, "{:>6.2}% {:>8}  {}", r.pct, r.count, r.name);
        }
        let g = self.gc_events;
        if g.collections > 0 {
            let share = if g.run_ns > 0 {
                100.0 * g.gc_ns as f64 / g.run_ns as f64
            } else {
                0.0
            };
            let hinted = if g.hinted > 0 {
                format!("; {} at GC hints", g.hinted)
            } else {
                String::new()
            };
            let scopes = if g.nursery > 0 {
                format!(
                    " ({} nursery, {} full{hinted})",
                    g.nursery,
                    g.collections - g.nursery
                )
            } else if g.hinted > 0 {
                format!(" ({} at GC hints)", g.hinted)
            } else {
                String::new()
            };
            let _ = writeln!(
                out,
                "garbage collection (from GC events, wall clock, all threads): {} collection(s)\
                 {scopes}, {:.1} ms, {share:.2}% of the run, longest pause {:.2} ms",
                g.collections,
                g.gc_ns as f64 / 1e6,
                g.longest_ns as f64 / 1e6
            );
            if self.gc_pause_samples > 0 {
                let _ = writeln!(
                    out,
                    "  {} of the samples ({:.2}%) stand for that time: the VM thread waits while \
                     the collector works on its own threads, which a CPU-time trigger cannot \
                     sample, so each pause adds samples at the profile's rate on the stack of \
                     the allocation that triggered it (shown as [GC])",
                    self.gc_pause_samples,
                    pct(self.gc_pause_samples, self.total)
                );
            }
        }
        out
    }
}
