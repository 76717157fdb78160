//! The VM-profiler report (after Cog's VMProfiler): samples split between code the JIT
//! generated (per tier) and the VM's own code (interpreter, primitives, GC, runtime stubs,
//! compiling), then for each hot compiled method its samples by *bytecode range* through the
//! version's pc map, ranges inside inlined methods included, each with its bytecodes and
//! source line.
//!
//! A range is a run of consecutive bytecodes of one inline scope that come from one source
//! line (without a line table, one bytecode). Only samples taken while compiled code ran
//! ([`VmState::Compiled`]) are placed on ranges: a sample in a stub or a primitive called
//! from compiled code counts for that VM component, as in the header.

use std::collections::BTreeMap;
use std::fmt::Write;

use super::pct;
use crate::code::Symbols;
use crate::event::EventKind;
use crate::ids::RawFrame;
use crate::ids::{MethodId, Tier, VmState};
use crate::profile::Profile;

/// A named count and its share of all samples.
#[derive(Clone, Debug, PartialEq)]
pub struct ComponentRow {
    pub name: String,
    pub samples: u64,
    pub pct: f64,
}

/// The whole report.
#[derive(Clone, Debug, PartialEq)]
pub struct VmProfile {
    pub total: u64,
    /// Samples in generated code, per tier, heaviest first.
    pub generated: Vec<ComponentRow>,
    /// Samples in the VM's own code, per component, heaviest first.
    pub vm: Vec<ComponentRow>,
    /// Compiles and their summed time, from the code-installed events: work of the compiler
    /// thread (adaptive runs), which the VM thread's CPU-time samples do not see.
    pub compiles: u64,
    pub compile_ns: u64,
    /// Compiled methods by their samples in generated code, heaviest first.
    pub methods: Vec<CompiledMethod>,
}

/// One method's compiled code in one tier (all its versions there).
#[derive(Clone, Debug, PartialEq)]
pub struct CompiledMethod {
    pub method: MethodId,
    pub name: String,
    pub tier: Tier,
    pub versions: u64,
    /// Machine code bytes of its largest version.
    pub code_bytes: u64,
    pub samples: u64,
    /// Samples at pcs the map places on no bytecode (entry, shared exits).
    pub unmapped: u64,
    /// Heaviest first.
    pub ranges: Vec<BytecodeRange>,
}

/// Consecutive bytecodes of one inline scope from one source line.
#[derive(Clone, Debug, PartialEq)]
pub struct BytecodeRange {
    /// The scopes around this range's method, outermost (the compiled method) first, each
    /// with the bytecode index of its call into the next; empty for the compiled method's
    /// own code.
    pub inlined_via: Vec<(String, u32)>,
    /// The same scopes by id.
    pub via_ids: Vec<(MethodId, u32)>,
    pub method: MethodId,
    pub method_name: String,
    pub first_bci: u32,
    pub last_bci: u32,
    pub file: String,
    pub line: Option<u32>,
    pub samples: u64,
    /// Each bytecode of the range: index, text (when the profile has it), samples.
    pub bytecodes: Vec<(u32, Option<String>, u64)>,
}

impl BytecodeRange {
    pub fn is_inlined(&self) -> bool {
        !self.inlined_via.is_empty()
    }
}

/// Samples of one (inline scope, bytecode) inside one compiled method.
type ScopeKey = (Vec<(MethodId, u32)>, MethodId);

impl VmProfile {
    pub fn new(p: &Profile) -> VmProfile {
        let symbols = p.symbols();
        let total = p.samples.len() as u64;
        let mut generated: BTreeMap<String, u64> = BTreeMap::new();
        let mut vm: BTreeMap<&'static str, u64> = BTreeMap::new();
        // (method, tier) → scope → bci → samples; and unmapped samples.
        let mut by_method: BTreeMap<(MethodId, Tier), BTreeMap<ScopeKey, BTreeMap<u32, u64>>> =
            BTreeMap::new();
        let mut unmapped: BTreeMap<(MethodId, Tier), u64> = BTreeMap::new();
        for s in &p.samples {
            let innermost = s.frames.first().copied();
            let compiled = match (s.state, innermost) {
                (VmState::Compiled, Some(RawFrame::Compiled { code, pc_offset })) => {
                    symbols.code.get(&code).map(|v| (v, pc_offset))
                }
                _ => None,
            };
            let Some((v, pc)) = compiled else {
                if s.state == VmState::Compiled {
                    // Code that runs for whatever frame is on top (the optimizing tier's send
                    // probes and adapters, the baseline's routines), or, rarely, a version the
                    // profile does not have (installed before the recording started).
                    *generated
                        .entry("shared code or unknown version".into())
                        .or_insert(0) += 1;
                } else {
                    *vm.entry(component_name(s.state)).or_insert(0) += 1;
                }
                continue;
            };
            *generated.entry(v.tier.name()).or_insert(0) += 1;
            let key = (v.method, v.tier);
            match v.lookup(pc).filter(|e| !e.chain.is_empty()) {
                Some(entry) => {
                    let (inner, bci) = entry.chain[0];
                    let mut via: Vec<(MethodId, u32)> = entry.chain[1..].to_vec();
                    via.reverse();
                    *by_method
                        .entry(key)
                        .or_default()
                        .entry((via, inner))
                        .or_default()
                        .entry(bci)
                        .or_insert(0) += 1;
                }
                None => *unmapped.entry(key).or_insert(0) += 1,
            }
        }
        let mut versions: BTreeMap<(MethodId, Tier), (u64, u64)> = BTreeMap::new();
        let (mut compiles, mut compile_ns) = (0, 0);
        for e in &p.events {
            if let EventKind::CodeInstalled(v) = &e.kind {
                compiles += 1;
                compile_ns += v.compile_time_ns;
                let entry = versions.entry((v.method, v.tier)).or_insert((0, 0));
                entry.0 += 1;
                entry.1 = entry.1.max(v.code_len);
            }
        }
        let mut keys: Vec<(MethodId, Tier)> = by_method.keys().copied().collect();
        keys.extend(unmapped.keys().copied());
        keys.sort();
        keys.dedup();
        let mut methods: Vec<CompiledMethod> = keys
            .into_iter()
            .map(|key| {
                let scopes = by_method.remove(&key).unwrap_or_default();
                let ranges = ranges(&symbols, scopes);
                let off_map = unmapped.get(&key).copied().unwrap_or(0);
                let (n, bytes) = versions.get(&key).copied().unwrap_or((0, 0));
                CompiledMethod {
                    method: key.0,
                    name: symbols.method_name(key.0),
                    tier: key.1,
                    versions: n,
                    code_bytes: bytes,
                    samples: off_map + ranges.iter().map(|r| r.samples).sum::<u64>(),
                    unmapped: off_map,
                    ranges,
                }
            })
            .collect();
        methods.sort_by(|a, b| b.samples.cmp(&a.samples).then(a.name.cmp(&b.name)));
        VmProfile {
            total,
            generated: rows(generated, total),
            vm: rows(vm, total),
            compiles,
            compile_ns,
            methods,
        }
    }

    pub fn generated_samples(&self) -> u64 {
        self.generated.iter().map(|r| r.samples).sum()
    }

    /// The report as text: the header, then the `top` heaviest compiled methods with their
    /// ranges down to `min_percent` of the method's samples, each range's source line as
    /// `source` gives it (file, line → text).
    pub fn render_text(
        &self,
        top: usize,
        min_percent: f64,
        source: &dyn Fn(&str, u32) -> Option<String>,
    ) -> String {
        let mut out = format!("VM profile: {} samples\n", self.total);
        let generated = self.generated_samples();
        let sections = [
            ("generated code", generated, &self.generated),
            ("the VM's own code", self.total - generated, &self.vm),
        ];
        for (what, samples, rows) in sections {
            let share = pct(samples, self.total);
            let _ = writeln!(out, "{samples:>8} {share:>6.2}%  samples in {what}");
            for r in rows {
                let _ = writeln!(out, "{:>8} {:>6.2}%    {}", r.samples, r.pct, r.name);
            }
        }
        if self.compiles > 0 {
            let _ = writeln!(
                out,
                "compiles: {} taking {:.1} ms (on the compiler thread when adaptive; its time is \
                 not in the samples above)",
                self.compiles,
                self.compile_ns as f64 / 1e6
            );
        }
        if self.methods.is_empty() {
            out.push_str("\nno samples in compiled code\n");
            return out;
        }
        for m in self.methods.iter().take(top) {
            let _ = writeln!(
                out,
                "\n{} [{}]: {} samples, {:.2}% of all; {} version(s), {} bytes of code",
                m.name,
                m.tier.name(),
                m.samples,
                pct(m.samples, self.total),
                m.versions,
                m.code_bytes
            );
            for r in &m.ranges {
                let share = pct(r.samples, m.samples);
                if share < min_percent {
                    continue;
                }
                let line = r.line.map_or(String::new(), |l| format!("{}:{l}", r.file));
                let scope = if r.is_inlined() {
                    let via: Vec<String> = r
                        .inlined_via
                        .iter()
                        .map(|(name, bci)| format!("{name} @{bci}"))
                        .collect();
                    format!("  [inlined: {} > {}]", via.join(" > "), r.method_name)
                } else {
                    String::new()
                };
                let _ = writeln!(
                    out,
                    "  {:>7} {:>6.2}%  @{}-{}  {}{}",
                    r.samples, share, r.first_bci, r.last_bci, line, scope
                );
                if let Some(text) = r.line.and_then(|l| source(&r.file, l)) {
                    let _ = writeln!(out, "                    | {}", text.trim());
                }
                for (bci, text, n) in &r.bytecodes {
                    let text = text.as_deref().unwrap_or("");
                    let _ = writeln!(out, "  {:>7}          @{bci:<4} {text}", count_or_blank(*n));
                }
            }
            if m.unmapped > 0 {
                let _ = writeln!(
                    out,
                    "  {:>7} {:>6.2}%  (entry and exits: no bytecode)",
                    m.unmapped,
                    pct(m.unmapped, m.samples)
                );
            }
        }
        out
    }
}

fn count_or_blank(n: u64) -> String {
    if n == 0 {
        String::new()
    } else {
        n.to_string()
    }
}

fn component_name(state: VmState) -> &'static str {
    match state {
        VmState::Interpreting => "interpreter",
        VmState::Primitive => "primitives",
        VmState::Gc => "garbage collector",
        VmState::Compiling => "compiling (on the VM thread)",
        VmState::Runtime => "runtime (stubs, lookups, the VM's own work)",
        VmState::Compiled => "generated code",
    }
}

fn rows<K: Into<String>>(counts: BTreeMap<K, u64>, total: u64) -> Vec<ComponentRow> {
    let mut rows: Vec<ComponentRow> = counts
        .into_iter()
        .map(|(name, samples)| ComponentRow {
            name: name.into(),
            samples,
            pct: pct(samples, total),
        })
        .collect();
    rows.sort_by(|a, b| b.samples.cmp(&a.samples).then(a.name.cmp(&b.name)));
    rows
}

/// The line of `bci` in `method`, when the profile has its line table.
fn line_of(symbols: &Symbols, method: MethodId, bci: u32) -> Option<u32> {
    let table = symbols.lines.get(&method)?;
    let i = table.partition_point(|e| e.bci <= bci).checked_sub(1)?;
    Some(table[i].line)
}

/// Each scope's sampled bytecodes grouped into ranges, heaviest first.
fn ranges(symbols: &Symbols, scopes: BTreeMap<ScopeKey, BTreeMap<u32, u64>>) -> Vec<BytecodeRange> {
    let mut out = Vec::new();
    for ((via, method), counts) in scopes {
        let text = symbols.bytecodes.get(&method);
        let len = text
            .map(|t| t.len() as u32)
            .or_else(|| symbols.methods.get(&method).map(|m| m.bytecode_len))
            .unwrap_or(0)
            .max(counts.keys().last().map_or(0, |b| b + 1));
        let file = symbols
            .methods
            .get(&method)
            .map_or_else(String::new, |m| m.file.clone());
        let has_lines = symbols.lines.contains_key(&method);
        let mut done_until: Option<u32> = None;
        for &bci in counts.keys() {
            if done_until.is_some_and(|end| bci <= end) {
                continue;
            }
            let line = line_of(symbols, method, bci);
            let (mut first, mut last) = (bci, bci);
            if has_lines {
                while first > 0 && line_of(symbols, method, first - 1) == line {
                    first -= 1;
                }
                while last + 1 < len && line_of(symbols, method, last + 1) == line {
                    last += 1;
                }
            }
            done_until = Some(last);
            let bytecodes: Vec<(u32, Option<String>, u64)> = (first..=last)
                .map(|b| {
                    let op = text.and_then(|t| t.get(b as usize)).cloned();
                    (b, op, counts.get(&b).copied().unwrap_or(0))
                })
                .collect();
            out.push(BytecodeRange {
                inlined_via: via
                    .iter()
                    .map(|&(m, b)| (symbols.method_name(m), b))
                    .collect(),
                via_ids: via.clone(),
                method,
                method_name: symbols.method_name(method),
                first_bci: first,
                last_bci: last,
                file: file.clone(),
                line,
                samples: bytecodes.iter().map(|b| b.2).sum(),
                bytecodes,
            });
        }
    }
    out.sort_by(|a, b| {
        b.samples
            .cmp(&a.samples)
            .then(a.first_bci.cmp(&b.first_bci))
    });
    out
}
