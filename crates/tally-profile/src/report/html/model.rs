//! What the HTML report draws, computed from a profile: plain data that serializes to the
//! JSON the page's script reads. Method names and files are stored once, in [`Model::methods`],
//! and referred to by index, which keeps a large profile's report small.

use std::collections::{BTreeMap, HashMap};

use serde::Serialize;

use super::graph::{CallGraphModel, GraphLimits};
use super::history::{histories, MethodHistory};
use crate::code::{LogicalFrame, Symbols};
use crate::event::EventKind;
use crate::ids::{MethodId, RawFrame, Tier, VmState};
use crate::profile::Profile;
use crate::report::{Amortization, VmProfile};

/// The whole page's data.
#[derive(Serialize, Debug)]
pub(crate) struct Model {
    pub title: String,
    pub vm: String,
    pub sampler: String,
    pub duration_ns: u64,
    pub samples: u64,
    /// Notes a reader must see (truncated stacks, missing call counts, …).
    pub notes: Vec<String>,
    /// Tier code → name, for every tier the data mentions.
    pub tiers: Vec<(u8, String)>,
    pub methods: Vec<MethodRow>,
    pub states: Vec<(String, u64)>,
    pub summary: Summary,
    pub graph: CallGraphModel,
    pub histories: Vec<MethodHistory>,
    pub flame: Flame,
    pub timeline: Timeline,
    pub vm_profile: VmModel,
    pub lines: Vec<MethodLines>,
}

#[derive(Serialize, Debug)]
pub(crate) struct MethodRow {
    pub name: String,
    pub file: String,
    pub line: u32,
}

/// The recompilations' balance, as the amortization analysis gives it.
#[derive(Serialize, Debug, Default)]
pub(crate) struct Summary {
    /// Whether the profile has exact calls per tier (`--count-calls`).
    pub counted: bool,
    pub recompilations: u64,
    pub paid: u64,
    pub red: u64,
    pub unclear: u64,
    pub won_ns: f64,
    pub lost_ns: f64,
    /// The same over the samples' error: what the samples vouch for.
    pub won_least_ns: f64,
    pub lost_least_ns: f64,
    pub compiles: u64,
    pub compile_ns: u64,
    pub gcs: u64,
    pub gc_ns: u64,
    pub deopts: u64,
}

/// The merged stacks, root first, in preorder: node `k` is at depth `depth[k]`, and its
/// children are the nodes after it one level deeper, up to the next node at its depth or
/// above. Node 0 is the root (all samples). Children are heaviest first.
#[derive(Serialize, Debug, Default)]
pub(crate) struct Flame {
    pub method: Vec<u32>,
    pub tier: Vec<u8>,
    pub inlined: Vec<u8>,
    pub depth: Vec<u16>,
    pub value: Vec<u64>,
    pub self_value: Vec<u64>,
}

/// Events over the run and samples per time bin.
#[derive(Serialize, Debug, Default)]
pub(crate) struct Timeline {
    pub bin_ns: u64,
    /// What a sample was doing: a tier's generated code, or a part of the VM.
    pub categories: Vec<String>,
    /// Per bin, the samples of each category.
    pub bins: Vec<Vec<u32>>,
    pub compiles: Vec<CompileMark>,
    pub deopts: Vec<DeoptMark>,
    pub gcs: Vec<GcMark>,
}

#[derive(Serialize, Debug)]
pub(crate) struct CompileMark {
    pub method: u32,
    pub tier: u8,
    /// When it was installed, ns since the start; it ran for `compile_ns` before.
    pub at_ns: u64,
    pub compile_ns: u64,
    pub bytes: u64,
}

#[derive(Serialize, Debug)]
pub(crate) struct DeoptMark {
    pub method: u32,
    pub at_ns: u64,
    pub bci: u32,
    pub reason: String,
}

#[derive(Serialize, Debug)]
pub(crate) struct GcMark {
    /// When it ended, ns since the start; it lasted `duration_ns`.
    pub at_ns: u64,
    pub duration_ns: u64,
    /// What started it; the collector (empty when the profile does not say); nursery or full.
    pub kind: String,
    pub plan: String,
    pub scope: String,
    pub bytes_before: u64,
    pub bytes_after: u64,
}

#[derive(Serialize, Debug, Default)]
pub(crate) struct VmModel {
    pub total: u64,
    pub generated: Vec<(String, u64)>,
    pub vm: Vec<(String, u64)>,
    pub compiles: u64,
    pub compile_ns: u64,
    pub methods: Vec<VmMethod>,
}

#[derive(Serialize, Debug)]
pub(crate) struct VmMethod {
    pub method: u32,
    pub tier: u8,
    pub versions: u64,
    pub code_bytes: u64,
    pub samples: u64,
    pub unmapped: u64,
    pub ranges: Vec<VmRange>,
}

#[derive(Serialize, Debug)]
pub(crate) struct VmRange {
    /// Method indices of the scopes around the range, outermost first, with the bytecode
    /// index of each one's call.
    pub via: Vec<(u32, u32)>,
    pub method: u32,
    pub first_bci: u32,
    pub last_bci: u32,
    pub line: Option<u32>,
    pub source: Option<String>,
    pub samples: u64,
    pub bytecodes: Vec<(u32, Option<String>, u64)>,
}

/// One method's source with its samples per line.
#[derive(Serialize, Debug)]
pub(crate) struct MethodLines {
    pub method: u32,
    pub self_samples: u64,
    pub total_samples: u64,
    /// Why there is no text, when there is none.
    pub missing: Option<String>,
    /// (line, text, self, total), from the header line to the method's last line.
    pub rows: Vec<(u32, String, u64, u64)>,
}

/// Limits that keep a large profile's page quick to open.
#[derive(Clone, Debug)]
pub struct HtmlOptions {
    /// Call-graph nodes below this share of samples (on the stack) are left out.
    pub graph_min_percent: f64,
    pub graph_max_nodes: usize,
    /// Compiled methods shown in the VM breakdown.
    pub vm_methods: usize,
    /// Methods with a source view.
    pub source_methods: usize,
}

impl Default for HtmlOptions {
    fn default() -> Self {
        HtmlOptions {
            graph_min_percent: 0.5,
            graph_max_nodes: 150,
            vm_methods: 40,
            source_methods: 60,
        }
    }
}

/// Dense indices for the methods the model names, pseudo-methods (`[GC]`, a VM state) too.
#[derive(Default)]
pub(crate) struct MethodTable {
    index: HashMap<MethodId, u32>,
    states: HashMap<&'static str, u32>,
    pub rows: Vec<MethodRow>,
}

impl MethodTable {
    pub fn of(&mut self, symbols: &Symbols, m: MethodId) -> u32 {
        if let Some(&i) = self.index.get(&m) {
            return i;
        }
        let (file, line) = symbols
            .methods
            .get(&m)
            .map_or((String::new(), 0), |info| (info.file.clone(), info.line));
        let i = self.rows.len() as u32;
        self.rows.push(MethodRow {
            name: symbols.method_name(m),
            file,
            line,
        });
        self.index.insert(m, i);
        i
    }

    /// A sample without frames stands for what the VM was doing, `[gc]` and so on.
    pub fn of_state(&mut self, state: VmState) -> u32 {
        let name = state.name();
        if let Some(&i) = self.states.get(name) {
            return i;
        }
        let i = self.rows.len() as u32;
        self.rows.push(MethodRow {
            name: format!("[{name}]"),
            file: String::new(),
            line: 0,
        });
        self.states.insert(name, i);
        i
    }
}

/// Every sample's stack resolved once, innermost first.
pub(crate) struct Stacks {
    pub frames: Vec<Vec<LogicalFrame>>,
}

impl Stacks {
    fn new(p: &Profile, symbols: &Symbols) -> Stacks {
        Stacks {
            frames: p
                .samples
                .iter()
                .map(|s| symbols.resolve_sample(s))
                .collect(),
        }
    }
}

pub(crate) fn build(
    p: &Profile,
    source: &dyn Fn(&str) -> Option<String>,
    options: &HtmlOptions,
) -> Model {
    let symbols = p.symbols();
    let stacks = Stacks::new(p, &symbols);
    let mut table = MethodTable::default();
    let amortization = Amortization::new(p);
    let mut notes = Vec::new();
    if let Some(note) = p.truncation_note() {
        notes.push(note);
    }
    if amortization.is_none() {
        notes.push(
            "No exact calls per tier in this profile, so recompilations have no verdict \
             (grey): record with --count-calls for the amortization analysis."
                .to_string(),
        );
    }
    if p.samples.is_empty() {
        notes.push("The profile holds no samples: the run ended before the first tick, or it was recorded with --sampler none.".to_string());
    }

    let graph = CallGraphModel::new(
        p,
        &symbols,
        &stacks,
        amortization.as_ref(),
        &mut table,
        &GraphLimits {
            min_percent: options.graph_min_percent,
            max_nodes: options.graph_max_nodes,
        },
    );
    let histories = histories(p, &symbols, &stacks, amortization.as_ref(), &mut table);
    let flame = flame(p, &symbols, &stacks, &mut table);
    let timeline = timeline(p, &symbols, &mut table);
    let vm_profile = vm_model(p, &symbols, source, options.vm_methods, &mut table);
    let lines = line_views(
        &symbols,
        &stacks,
        source,
        options.source_methods,
        &mut table,
    );
    let summary = summary(amortization.as_ref(), &histories, &timeline);

    let mut tiers: BTreeMap<u8, String> =
        Tier::NAMED.iter().map(|t| (t.to_u8(), t.name())).collect();
    for v in symbols.code.values() {
        tiers.entry(v.tier.to_u8()).or_insert_with(|| v.tier.name());
    }
    let mut states: Vec<(String, u64)> = VmState::ALL
        .iter()
        .map(|s| {
            let n = p.samples.iter().filter(|x| x.state == *s).count() as u64;
            (s.name().to_string(), n)
        })
        .filter(|(_, n)| *n > 0)
        .collect();
    states.sort_by_key(|r| std::cmp::Reverse(r.1));

    let h = &p.header;
    let mut program = h.program.clone();
    for a in &h.args {
        program.push(' ');
        program.push_str(a);
    }
    Model {
        title: program,
        vm: format!("{} {}", h.vm_name, h.vm_version),
        sampler: format!(
            "{} / {} at {} Hz{}",
            h.sampler.trigger,
            h.sampler.mechanism,
            h.sampler.rate_hz,
            if h.sampler.trigger_source.is_empty() {
                String::new()
            } else {
                format!(" ({})", h.sampler.trigger_source)
            }
        ),
        duration_ns: p.duration_ns(),
        samples: p.samples.len() as u64,
        notes,
        tiers: tiers.into_iter().collect(),
        methods: std::mem::take(&mut table.rows),
        states,
        summary,
        graph,
        histories,
        flame,
        timeline,
        vm_profile,
        lines,
    }
}

/// The page's totals: the timeline's marks summed, the recompilations as the histories list
/// them, and their balance as the amortization analysis gives it.
fn summary(a: Option<&Amortization>, histories: &[MethodHistory], timeline: &Timeline) -> Summary {
    let mut s = Summary {
        counted: a.is_some(),
        recompilations: histories
            .iter()
            .map(|h| h.recompilations.len() as u64)
            .sum(),
        compiles: timeline.compiles.len() as u64,
        compile_ns: timeline.compiles.iter().map(|c| c.compile_ns).sum(),
        gcs: timeline.gcs.len() as u64,
        gc_ns: timeline.gcs.iter().map(|g| g.duration_ns).sum(),
        deopts: timeline.deopts.len() as u64,
        ..Summary::default()
    };
    if let Some(a) = a {
        (s.won_ns, s.lost_ns) = a.won_and_lost_ns();
        (s.won_least_ns, s.lost_least_ns) = a.won_and_lost_at_least_ns();
        let count = |label: &str| {
            a.recompilations
                .iter()
                .filter(|r| r.verdict.label() == label)
                .count() as u64
        };
        (s.paid, s.red, s.unclear) = (count("paid off"), count("did not pay"), count("unclear"));
    }
    s
}

/// Merges the stacks into a tree, root first; each level's children heaviest first.
fn flame(p: &Profile, symbols: &Symbols, stacks: &Stacks, table: &mut MethodTable) -> Flame {
    // (method index, tier, inlined) → child; built as a tree of maps, then flattened.
    #[derive(Default)]
    struct Node {
        value: u64,
        self_value: u64,
        children: HashMap<(u32, u8, bool), usize>,
    }
    let mut nodes: Vec<Node> = vec![Node::default()];
    let mut keys: Vec<(u32, u8, bool)> = vec![(u32::MAX, 0, false)];
    for (s, frames) in p.samples.iter().zip(&stacks.frames) {
        let path: Vec<(u32, u8, bool)> = if frames.is_empty() {
            vec![(table.of_state(s.state), 0, false)]
        } else {
            frames
                .iter()
                .rev()
                .map(|f| (table.of(symbols, f.method), f.tier.to_u8(), f.inlined))
                .collect()
        };
        let mut at = 0;
        nodes[0].value += 1;
        for key in path {
            let next = match nodes[at].children.get(&key) {
                Some(&n) => n,
                None => {
                    nodes.push(Node::default());
                    keys.push(key);
                    let n = nodes.len() - 1;
                    nodes[at].children.insert(key, n);
                    n
                }
            };
            nodes[next].value += 1;
            at = next;
        }
        nodes[at].self_value += 1;
    }
    let mut out = Flame::default();
    let mut stack = vec![(0usize, 0u16)];
    while let Some((n, depth)) = stack.pop() {
        let (m, t, inl) = keys[n];
        out.method.push(m);
        out.tier.push(t);
        out.inlined.push(inl as u8);
        out.depth.push(depth);
        out.value.push(nodes[n].value);
        out.self_value.push(nodes[n].self_value);
        let mut children: Vec<usize> = nodes[n].children.values().copied().collect();
        // Heaviest first; pushed in reverse so the heaviest is emitted first.
        children.sort_by(|&a, &b| {
            nodes[b]
                .value
                .cmp(&nodes[a].value)
                .then(keys[a].cmp(&keys[b]))
        });
        for &c in children.iter().rev() {
            stack.push((c, depth.saturating_add(1)));
        }
    }
    out
}

/// How many bins the sample histogram has at most.
const TIMELINE_BINS: u64 = 400;

fn timeline(p: &Profile, symbols: &Symbols, table: &mut MethodTable) -> Timeline {
    let start = p.header.start_time_ns;
    let duration = p.duration_ns().max(1);
    let bin_ns = duration.div_ceil(TIMELINE_BINS).max(1);
    let mut categories: Vec<String> = Vec::new();
    let mut category = |name: String| -> usize {
        match categories.iter().position(|c| *c == name) {
            Some(i) => i,
            None => {
                categories.push(name);
                categories.len() - 1
            }
        }
    };
    let mut per_sample = Vec::with_capacity(p.samples.len());
    for s in &p.samples {
        let name = match (s.state, s.frames.first()) {
            (VmState::Compiled, Some(RawFrame::Compiled { code, .. })) => symbols
                .code
                .get(code)
                .map_or_else(|| "compiled code".to_string(), |v| v.tier.name()),
            (VmState::Interpreting, _) => "interpreter".to_string(),
            (state, _) => state.name().to_string(),
        };
        let bin = (s.time_ns.saturating_sub(start) / bin_ns).min(TIMELINE_BINS - 1) as usize;
        per_sample.push((bin, category(name)));
    }
    // Generated code first, lowest tier first, then the VM's parts: the stacking order.
    const ORDER: [&str; 9] = [
        "interpreter",
        "baseline",
        "optimizing",
        "compiled code",
        "compiled",
        "primitive",
        "runtime",
        "compiling",
        "gc",
    ];
    let rank = |c: &str| ORDER.iter().position(|o| *o == c).unwrap_or(ORDER.len());
    let mut order: Vec<usize> = (0..categories.len()).collect();
    order.sort_by_key(|&i| (rank(&categories[i]), categories[i].clone()));
    let mut new_index = vec![0; categories.len()];
    for (new, &old) in order.iter().enumerate() {
        new_index[old] = new;
    }
    let categories: Vec<String> = order.iter().map(|&i| categories[i].clone()).collect();
    let nbins = (duration.div_ceil(bin_ns)).clamp(1, TIMELINE_BINS) as usize;
    let mut bins = vec![vec![0u32; categories.len()]; nbins];
    for (bin, c) in per_sample {
        let bin = bin.min(nbins - 1);
        bins[bin][new_index[c]] += 1;
    }
    let mut t = Timeline {
        bin_ns,
        categories,
        bins,
        ..Timeline::default()
    };
    for e in &p.events {
        let at_ns = e.time_ns.saturating_sub(start);
        match &e.kind {
            EventKind::CodeInstalled(v) => t.compiles.push(CompileMark {
                method: table.of(symbols, v.method),
                tier: v.tier.to_u8(),
                at_ns,
                compile_ns: v.compile_time_ns,
                bytes: v.code_len,
            }),
            EventKind::Deoptimized {
                method,
                bci,
                reason,
                ..
            } => t.deopts.push(DeoptMark {
                method: table.of(symbols, *method),
                at_ns,
                bci: *bci,
                reason: reason.clone(),
            }),
            EventKind::GcEnd {
                kind,
                plan,
                scope,
                bytes_before,
                bytes_after,
                duration_ns,
            } => t.gcs.push(GcMark {
                at_ns,
                duration_ns: *duration_ns,
                kind: kind.clone(),
                plan: plan.clone(),
                scope: scope.clone(),
                bytes_before: *bytes_before,
                bytes_after: *bytes_after,
            }),
            _ => {}
        }
    }
    t
}

fn vm_model(
    p: &Profile,
    symbols: &Symbols,
    source: &dyn Fn(&str) -> Option<String>,
    limit: usize,
    table: &mut MethodTable,
) -> VmModel {
    let vp = VmProfile::new(p);
    let mut files = SourceCache::new(source);
    let methods = vp
        .methods
        .iter()
        .take(limit)
        .map(|cm| VmMethod {
            method: table.of(symbols, cm.method),
            tier: cm.tier.to_u8(),
            versions: cm.versions,
            code_bytes: cm.code_bytes,
            samples: cm.samples,
            unmapped: cm.unmapped,
            ranges: cm
                .ranges
                .iter()
                .map(|r| {
                    let via = r
                        .via_ids
                        .iter()
                        .map(|&(m, bci)| (table.of(symbols, m), bci))
                        .collect();
                    VmRange {
                        via,
                        method: table.of(symbols, r.method),
                        first_bci: r.first_bci,
                        last_bci: r.last_bci,
                        line: r.line,
                        source: r
                            .line
                            .and_then(|l| files.line(&r.file, l))
                            .map(|s| s.trim().to_string()),
                        samples: r.samples,
                        bytecodes: r.bytecodes.clone(),
                    }
                })
                .collect(),
        })
        .collect();
    VmModel {
        total: vp.total,
        generated: vp
            .generated
            .iter()
            .map(|r| (r.name.clone(), r.samples))
            .collect(),
        vm: vp.vm.iter().map(|r| (r.name.clone(), r.samples)).collect(),
        compiles: vp.compiles,
        compile_ns: vp.compile_ns,
        methods,
    }
}

/// Source files read once each, split into lines.
struct SourceCache<'a> {
    read: &'a dyn Fn(&str) -> Option<String>,
    files: HashMap<String, Option<Vec<String>>>,
}

impl<'a> SourceCache<'a> {
    fn new(read: &'a dyn Fn(&str) -> Option<String>) -> Self {
        SourceCache {
            read,
            files: HashMap::new(),
        }
    }

    fn lines(&mut self, file: &str) -> Option<&Vec<String>> {
        let read = self.read;
        self.files
            .entry(file.to_string())
            .or_insert_with(|| read(file).map(|t| t.lines().map(str::to_string).collect()))
            .as_ref()
    }

    fn line(&mut self, file: &str, line: u32) -> Option<String> {
        self.lines(file)?
            .get(line.checked_sub(1)? as usize)
            .cloned()
    }
}

/// A method's self and total samples, and per line its (self, total).
type LineCounts = (u64, u64, BTreeMap<u32, (u64, u64)>);

/// The source views: the methods with the most samples on the stack, each with its lines.
fn line_views(
    symbols: &Symbols,
    stacks: &Stacks,
    source: &dyn Fn(&str) -> Option<String>,
    limit: usize,
    table: &mut MethodTable,
) -> Vec<MethodLines> {
    // method → line → (self, total), and per-method self/total; one pass over the samples.
    let mut per: HashMap<MethodId, LineCounts> = HashMap::new();
    let mut seen_lines = std::collections::HashSet::new();
    let mut seen_methods = std::collections::HashSet::new();
    for frames in &stacks.frames {
        seen_lines.clear();
        seen_methods.clear();
        for (i, f) in frames.iter().enumerate() {
            if !symbols.methods.contains_key(&f.method) {
                continue;
            }
            let entry = per.entry(f.method).or_default();
            if i == 0 {
                entry.0 += 1;
            }
            if seen_methods.insert(f.method) {
                entry.1 += 1;
            }
            let Some(pos) = symbols.position(f.method, f.bci) else {
                continue;
            };
            let row = entry.2.entry(pos.line).or_default();
            if i == 0 {
                row.0 += 1;
            }
            if seen_lines.insert((f.method, pos.line)) {
                row.1 += 1;
            }
        }
    }
    // The hottest by self samples (where lines matter most) and by total, hottest self first.
    let mut by_self: Vec<(MethodId, u64, u64)> = per.iter().map(|(&m, v)| (m, v.0, v.1)).collect();
    by_self.sort_by(|a, b| b.1.cmp(&a.1).then(b.2.cmp(&a.2)).then(a.0.cmp(&b.0)));
    let mut by_total = by_self.clone();
    by_total.sort_by(|a, b| b.2.cmp(&a.2).then(a.0.cmp(&b.0)));
    let mut chosen: std::collections::HashSet<MethodId> = by_self
        .iter()
        .take(limit.div_ceil(2))
        .map(|r| r.0)
        .collect();
    for r in &by_total {
        if chosen.len() >= limit {
            break;
        }
        chosen.insert(r.0);
    }
    let order: Vec<MethodId> = by_self
        .iter()
        .map(|r| r.0)
        .filter(|m| chosen.contains(m))
        .collect();
    let mut files = SourceCache::new(source);
    order
        .into_iter()
        .map(|m| {
            let (self_samples, total_samples, counts) = per.remove(&m).unwrap_or_default();
            let info = &symbols.methods[&m];
            let last_line = symbols
                .lines
                .get(&m)
                .and_then(|t| t.iter().map(|e| e.line).max())
                .unwrap_or(info.line)
                .max(info.line)
                .max(counts.keys().next_back().copied().unwrap_or(0));
            let text = files.lines(&info.file).cloned();
            let missing = match &text {
                Some(_) => None,
                None if info.file.is_empty() => Some("the profile names no source file".into()),
                None => Some(format!("{} could not be read", info.file)),
            };
            let first = info.line.max(1);
            let rows = (first..=last_line.max(first))
                .map(|l| {
                    let line_text = text
                        .as_ref()
                        .and_then(|t| t.get(l as usize - 1).cloned())
                        .unwrap_or_default();
                    let (s, t) = counts.get(&l).copied().unwrap_or((0, 0));
                    (l, line_text, s, t)
                })
                .collect();
            MethodLines {
                method: table.of(symbols, m),
                self_samples,
                total_samples,
                missing,
                rows,
            }
        })
        .collect()
}
