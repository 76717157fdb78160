//! The flat profile: per method, the samples in which it was running
//! (self) and in which it was anywhere on the stack (total).

use std::collections::{HashMap, HashSet};
use std::fmt::Write;

use super::pct;
use crate::ids::MethodId;
use crate::profile::Profile;

#[derive(Clone, Debug, PartialEq)]
pub struct FlatRow {
    pub method: MethodId,
    pub name: String,
    pub self_count: u64,
    pub total_count: u64,
    pub self_pct: f64,
    pub total_pct: f64,
}

#[derive(Clone, Debug, PartialEq)]
pub struct FlatProfile {
    pub total_samples: u64,
    /// Samples with no frame at all (VM start-up, runtime outside methods).
    pub no_frame: u64,
    /// Heaviest self time first.
    pub rows: Vec<FlatRow>,
}

impl FlatProfile {
    pub fn new(p: &Profile) -> FlatProfile {
        let symbols = p.symbols();
        let mut counts: HashMap<MethodId, (u64, u64)> = HashMap::new();
        let mut no_frame = 0;
        let mut seen = HashSet::new();
        for s in &p.samples {
            let frames = symbols.resolve_stack(&s.frames);
            let Some(top) = frames.first() else {
                no_frame += 1;
                continue;
            };
            counts.entry(top.method).or_default().0 += 1;
            // Recursion must not count a method twice in one sample.
            seen.clear();
            for f in &frames {
                if seen.insert(f.method) {
                    counts.entry(f.method).or_default().1 += 1;
                }
            }
        }
        let total = p.samples.len() as u64;
        let mut rows: Vec<FlatRow> = counts
            .into_iter()
            .map(|(m, (s, t))| FlatRow {
                method: m,
                name: symbols.method_name(m),
                self_count: s,
                total_count: t,
                self_pct: pct(s, total),
                total_pct: pct(t, total),
            })
            .collect();
        rows.sort_by(|a, b| {
            (b.self_count, b.total_count)
                .cmp(&(a.self_count, a.total_count))
                .then_with(|| a.name.cmp(&b.name))
        });
        FlatProfile {
            total_samples: total,
            no_frame,
            rows,
        }
    }

    pub fn render_text(&self, limit: usize) -> String {
        let mut out = format!("flat profile: {} samples\n", self.total_samples);
        let _ = writeln!(
            out,
            "{:>7} {:>7} {:>8} {:>8}  method",
            "self%", "total%", "self", "total"
        );
        for r in self.rows.iter().take(limit) {
            let _ = writeln!(
                out,
                "{:>6.2}% {:>6.2}% {:>8} {:>8}  {}",
                r.self_pct, r.total_pct, r.self_count, r.total_count, r.name
            );
        }
        if self.no_frame > 0 {
            let _ = writeln!(
                out,
                "{:>6.2}%          {:>8}           (no method on the stack)",
                pct(self.no_frame, self.total_samples),
                self.no_frame
            );
        }
        out
    }
}
