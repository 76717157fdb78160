//! What the tiers did: per tier the code versions installed, their compile time and size;
//! per method its samples in each tier; and the adaptive controller's decisions, each with
//! its predictions beside what the compile that followed actually took.

use std::collections::BTreeMap;
use std::fmt::Write;

use super::pct;
use crate::event::EventKind;
use crate::ids::{MethodId, Tier};
use crate::profile::Profile;

/// One tier's compiles.
#[derive(Clone, Debug, PartialEq)]
pub struct TierRow {
    pub tier: Tier,
    /// Code versions installed.
    pub versions: u64,
    pub compile_ns: u64,
    pub code_bytes: u64,
    /// Samples whose innermost frame ran in this tier.
    pub samples: u64,
}

/// One method's samples per tier (by column: interpreter, baseline, optimizing, quick).
#[derive(Clone, Debug, PartialEq)]
pub struct MethodTiers {
    pub name: String,
    pub samples: [u64; Tier::COLUMNS],
    /// Versions compiled for it.
    pub versions: u64,
}

/// A decision of the controller and the compile that answered it.
#[derive(Clone, Debug, PartialEq)]
pub struct DecisionRow {
    /// Since the profile started.
    pub at_ns: u64,
    pub method: String,
    pub from: Tier,
    pub to: Tier,
    pub past_ns: u64,
    pub predicted_compile_ns: u64,
    pub predicted_future_ns: u64,
    /// The compile's actual time and code size; `None` if none followed (it failed, or the
    /// run ended first).
    pub actual_compile_ns: Option<u64>,
    pub code_bytes: Option<u64>,
}

/// A failed speculation: compiled code handed its frame back to the interpreter.
#[derive(Clone, Debug, PartialEq)]
pub struct DeoptRow {
    /// Since the profile started.
    pub at_ns: u64,
    pub method: String,
    pub bci: u32,
    pub reason: String,
    /// The tier the method ran in afterwards, when its version was invalidated.
    pub now: Option<Tier>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct TierReport {
    pub total_samples: u64,
    /// Tiers that compiled anything, lowest first.
    pub tiers: Vec<TierRow>,
    /// Methods with compiled code, most samples first.
    pub methods: Vec<MethodTiers>,
    pub decisions: Vec<DecisionRow>,
    pub deopts: Vec<DeoptRow>,
}

impl TierReport {
    /// `None` when nothing was compiled.
    pub fn new(p: &Profile) -> Option<TierReport> {
        let symbols = p.symbols();
        let start = p.header.start_time_ns;
        let mut tiers: BTreeMap<u8, TierRow> = BTreeMap::new();
        let mut versions: BTreeMap<MethodId, u64> = BTreeMap::new();
        let mut decisions: Vec<DecisionRow> = Vec::new();
        let mut deopts: Vec<DeoptRow> = Vec::new();
        // Decisions waiting for their compile: (method, to) → index in `decisions`.
        let mut open: BTreeMap<(MethodId, u8), usize> = BTreeMap::new();
        for e in &p.events {
            match &e.kind {
                EventKind::TierDecision {
                    method,
                    from,
                    to,
                    past_ns,
                    predicted_compile_ns,
                    predicted_future_ns,
                } => {
                    open.insert((*method, to.to_u8()), decisions.len());
                    decisions.push(DecisionRow {
                        at_ns: e.time_ns.saturating_sub(start),
                        method: symbols.method_name(*method),
                        from: *from,
                        to: *to,
                        past_ns: *past_ns,
                        predicted_compile_ns: *predicted_compile_ns,
                        predicted_future_ns: *predicted_future_ns,
                        actual_compile_ns: None,
                        code_bytes: None,
                    });
                }
                EventKind::CodeInstalled(v) => {
                    let row = tiers.entry(v.tier.to_u8()).or_insert(TierRow {
                        tier: v.tier,
                        versions: 0,
                        compile_ns: 0,
                        code_bytes: 0,
                        samples: 0,
                    });
                    row.versions += 1;
                    row.compile_ns += v.compile_time_ns;
                    row.code_bytes += v.code_len;
                    *versions.entry(v.method).or_insert(0) += 1;
                    if let Some(i) = open.remove(&(v.method, v.tier.to_u8())) {
                        decisions[i].actual_compile_ns = Some(v.compile_time_ns);
                        decisions[i].code_bytes = Some(v.code_len);
                    }
                }
                EventKind::Deoptimized {
                    method,
                    bci,
                    reason,
                    now,
                } => deopts.push(DeoptRow {
                    at_ns: e.time_ns.saturating_sub(start),
                    method: symbols.method_name(*method),
                    bci: *bci,
                    reason: reason.clone(),
                    now: *now,
                }),
                _ => {}
            }
        }
        if tiers.is_empty() && decisions.is_empty() {
            return None;
        }
        let mut per_method: BTreeMap<MethodId, [u64; Tier::COLUMNS]> = BTreeMap::new();
        for s in &p.samples {
            let frames = symbols.resolve_stack(&s.frames);
            let Some(top) = frames.first() else { continue };
            if let Some(row) = tiers.get_mut(&top.tier.to_u8()) {
                row.samples += 1;
            }
            if versions.contains_key(&top.method) {
                per_method.entry(top.method).or_insert([0; Tier::COLUMNS])[top.tier.column()] += 1;
            }
        }
        let mut methods: Vec<MethodTiers> = versions
            .iter()
            .map(|(m, &n)| MethodTiers {
                name: symbols.method_name(*m),
                samples: per_method.get(m).copied().unwrap_or_default(),
                versions: n,
            })
            .collect();
        methods.sort_by(|a, b| {
            b.samples
                .iter()
                .sum::<u64>()
                .cmp(&a.samples.iter().sum::<u64>())
                .then_with(|| a.name.cmp(&b.name))
        });
        Some(TierReport {
            total_samples: p.samples.len() as u64,
            tiers: tiers.into_values().collect(),
            methods,
            decisions,
            deopts,
        })
    }

    /// The summary per tier, the `top` methods with compiled code, and the decision log (all
    /// of it when `top` is 0).
    pub fn render_text(&self, top: usize) -> String {
        let ms = |ns: u64| ns as f64 / 1e6;
        let mut out = String::new();
        let _ = writeln!(
            out,
            "{:<12} {:>9} {:>12} {:>12} {:>11} {:>8}",
            "tier", "versions", "compile ms", "mean us", "code bytes", "samples"
        );
        for r in &self.tiers {
            let _ = writeln!(
                out,
                "{:<12} {:>9} {:>12.2} {:>12.0} {:>11} {:>7.2}%",
                r.tier.name(),
                r.versions,
                ms(r.compile_ns),
                r.compile_ns as f64 / 1e3 / r.versions.max(1) as f64,
                r.code_bytes,
                pct(r.samples, self.total_samples)
            );
        }
        let shown = if top == 0 { usize::MAX } else { top };
        let _ = writeln!(
            out,
            "\nmethods with compiled code: samples per tier (interpreter / baseline / quick / optimizing)"
        );
        for m in self.methods.iter().take(shown) {
            let by_rank = Tier::RANKED.map(|t| m.samples[t.column()]);
            let _ = writeln!(
                out,
                "{:>8} {:>8} {:>8} {:>8}  {} ({} version{})",
                by_rank[0],
                by_rank[1],
                by_rank[2],
                by_rank[3],
                m.name,
                m.versions,
                if m.versions == 1 { "" } else { "s" }
            );
        }
        if self.methods.len() > shown {
            let _ = writeln!(out, "  … and {} more", self.methods.len() - shown);
        }
        if !self.decisions.is_empty() {
            let _ = writeln!(
                out,
                "\ncontroller decisions (times in ms): at, method, from -> to, ran so far, \
                 compile predicted / actual, then predicted"
            );
            for d in self.decisions.iter().take(shown) {
                let actual = d
                    .actual_compile_ns
                    .map_or("-".to_string(), |a| format!("{:.2}", ms(a)));
                let _ = writeln!(
                    out,
                    "{:>9.1}  {} {} -> {}: ran {:.2}; compile {:.2} / {actual}; then {:.2}",
                    ms(d.at_ns),
                    d.method,
                    d.from.name(),
                    d.to.name(),
                    ms(d.past_ns),
                    ms(d.predicted_compile_ns),
                    ms(d.predicted_future_ns)
                );
            }
            if self.decisions.len() > shown {
                let _ = writeln!(out, "  … and {} more", self.decisions.len() - shown);
            }
        }
        if !self.deopts.is_empty() {
            let _ = writeln!(
                out,
                "\ndeoptimizations (times in ms): at, method @ bytecode index: reason; then"
            );
            for d in self.deopts.iter().take(shown) {
                let then = match d.now {
                    Some(t) => format!("invalidated, runs in {}", t.name()),
                    None => "an older version; already invalidated".to_string(),
                };
                let _ = writeln!(
                    out,
                    "{:>9.1}  {} @{}: {}; {then}",
                    ms(d.at_ns),
                    d.method,
                    d.bci,
                    d.reason
                );
            }
            if self.deopts.len() > shown {
                let _ = writeln!(out, "  … and {} more", self.deopts.len() - shown);
            }
        }
        out
    }
}
