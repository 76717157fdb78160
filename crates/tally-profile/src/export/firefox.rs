//! Firefox Profiler export (the "processed" format, through the
//! fxprof-processed-profile crate). Each VM state is a category, so the
//! profiler's activity graph colours time by interpreter, primitives, GC,
//! compiler, runtime and compiled code.
//!
//! Source positions: the crate interns one frame per label and has no source fields, so
//! [`to_json`] rebuilds the VM thread's function, frame and stack tables: a function per
//! label with its file and header line, a frame per (function, line, column) of the
//! sampled bytecode index ([`crate::Symbols::position`]), so the call tree merges a
//! method's lines and the source view spreads its time over them.

use fxprof_processed_profile::{
    CategoryColor, CategoryHandle, CpuDelta, Frame, FrameFlags, FrameInfo, MarkerFieldFlags,
    MarkerFieldFormat, MarkerTiming, Profile as FxProfile, ReferenceTimestamp, SamplingInterval,
    StaticSchemaMarker, StaticSchemaMarkerField, StringHandle, Timestamp,
};

use std::collections::{BTreeMap, HashMap};

use serde_json::{json, Value};

use super::{sample_labels, sample_stack};
use crate::event::EventKind;
use crate::ids::VmState;
use crate::profile::Profile;

fn color(s: VmState) -> CategoryColor {
    match s {
        VmState::Interpreting => CategoryColor::Blue,
        VmState::Primitive => CategoryColor::Orange,
        VmState::Gc => CategoryColor::Yellow,
        VmState::Compiling => CategoryColor::Purple,
        VmState::Runtime => CategoryColor::Gray,
        VmState::Compiled => CategoryColor::Green,
    }
}

/// A garbage collection on the VM thread's track: when, how long, and what it freed.
struct GcMarker {
    category: CategoryHandle,
    /// What started it (allocation, explicit, stress, hint).
    kind: StringHandle,
    plan: StringHandle,
    /// `nursery` or `full`.
    scope: StringHandle,
    bytes_before: u64,
    bytes_after: u64,
}

impl StaticSchemaMarker for GcMarker {
    const UNIQUE_MARKER_TYPE_NAME: &'static str = "TallyGC";
    const DESCRIPTION: Option<&'static str> =
        Some("A garbage collection; the VM thread waits for it to end.");
    const CHART_LABEL: Option<&'static str> = Some("{marker.data.scope}");
    const TOOLTIP_LABEL: Option<&'static str> =
        Some("GC {marker.data.scope} ({marker.data.kind}, {marker.data.plan})");
    const TABLE_LABEL: Option<&'static str> = Some(
        "{marker.data.scope} ({marker.data.kind}): {marker.data.before} → {marker.data.after}",
    );
    const FIELDS: &'static [StaticSchemaMarkerField] = &[
        StaticSchemaMarkerField {
            key: "kind",
            label: "Cause",
            format: MarkerFieldFormat::String,
            flags: MarkerFieldFlags::SEARCHABLE,
        },
        StaticSchemaMarkerField {
            key: "plan",
            label: "Collector",
            format: MarkerFieldFormat::String,
            flags: MarkerFieldFlags::SEARCHABLE,
        },
        StaticSchemaMarkerField {
            key: "scope",
            label: "Scope",
            format: MarkerFieldFormat::String,
            flags: MarkerFieldFlags::SEARCHABLE,
        },
        StaticSchemaMarkerField {
            key: "before",
            label: "Heap used before",
            format: MarkerFieldFormat::Bytes,
            flags: MarkerFieldFlags::empty(),
        },
        StaticSchemaMarkerField {
            key: "after",
            label: "Heap used after",
            format: MarkerFieldFormat::Bytes,
            flags: MarkerFieldFlags::empty(),
        },
    ];

    fn name(&self, profile: &mut FxProfile) -> StringHandle {
        profile.intern_string("GC")
    }

    fn category(&self, _profile: &mut FxProfile) -> CategoryHandle {
        self.category
    }

    fn string_field_value(&self, field_index: u32) -> StringHandle {
        match field_index {
            0 => self.kind,
            1 => self.plan,
            2 => self.scope,
            _ => unreachable!("GC markers have string fields 0 to 2"),
        }
    }

    fn number_field_value(&self, field_index: u32) -> f64 {
        match field_index {
            3 => self.bytes_before as f64,
            4 => self.bytes_after as f64,
            _ => unreachable!("GC markers have number fields 3 and 4"),
        }
    }
}

/// A class loaded (parsed, compiled, installed) by the VM, as an instant on its track.
struct ClassLoadMarker {
    category: CategoryHandle,
    class: StringHandle,
    source: StringHandle,
}

impl StaticSchemaMarker for ClassLoadMarker {
    const UNIQUE_MARKER_TYPE_NAME: &'static str = "TallyClassLoad";
    const DESCRIPTION: Option<&'static str> = Some("A class loaded by the VM.");
    const CHART_LABEL: Option<&'static str> = Some("{marker.data.class}");
    const TOOLTIP_LABEL: Option<&'static str> = Some("class {marker.data.class} loaded");
    const TABLE_LABEL: Option<&'static str> = Some("{marker.data.class} ({marker.data.source})");
    const FIELDS: &'static [StaticSchemaMarkerField] = &[
        StaticSchemaMarkerField {
            key: "class",
            label: "Class",
            format: MarkerFieldFormat::String,
            flags: MarkerFieldFlags::SEARCHABLE,
        },
        StaticSchemaMarkerField {
            key: "source",
            label: "Source",
            format: MarkerFieldFormat::FilePath,
            flags: MarkerFieldFlags::empty(),
        },
    ];

    fn name(&self, profile: &mut FxProfile) -> StringHandle {
        profile.intern_string("Class load")
    }

    fn category(&self, _profile: &mut FxProfile) -> CategoryHandle {
        self.category
    }

    fn string_field_value(&self, field_index: u32) -> StringHandle {
        match field_index {
            0 => self.class,
            1 => self.source,
            _ => unreachable!("class-load markers have string fields 0 and 1"),
        }
    }

    fn number_field_value(&self, _field_index: u32) -> f64 {
        unreachable!("class-load markers have no number fields")
    }
}

pub fn to_profile(p: &Profile) -> FxProfile {
    let symbols = p.symbols();
    let rate = p.header.sampler.rate_hz.max(1);
    let period_ns = 1_000_000_000u64 / u64::from(rate);
    let reference = ReferenceTimestamp::from_millis_since_unix_epoch(
        p.header.start_unix_ns as f64 / 1_000_000.0,
    );
    // The processed format has no field for the clock samples were taken on; the product
    // name is what the profiler shows at the top, so a wall-clock profile says so there.
    let clock = if p.header.sampler.is_wall_clock() {
        "wall-clock samples"
    } else {
        "CPU-time samples"
    };
    let mut product = format!("{} {} ({clock})", p.header.vm_name, p.header.program);
    let truncated = p.truncated_samples();
    if truncated > 0 {
        product += &format!(
            " ({truncated} samples truncated at {} frames)",
            p.header.sampler.max_frames
        );
    }
    let mut fx = FxProfile::new(&product, reference, SamplingInterval::from_nanos(period_ns));
    let categories: Vec<CategoryHandle> = VmState::ALL
        .iter()
        .map(|&s| fx.add_category(s.name(), color(s)))
        .collect();
    let start = p.header.start_time_ns;
    let process = fx.add_process(
        &p.header.vm_name,
        1,
        Timestamp::from_nanos_since_reference(0),
    );
    let thread = fx.add_thread(process, 1, Timestamp::from_nanos_since_reference(0), true);
    fx.set_thread_name(thread, &format!("VM ({clock})"));
    for s in &p.samples {
        let category = categories[s.state as usize];
        let labels = sample_labels(&symbols, s);
        let frames: Vec<FrameInfo> = labels
            .iter()
            .map(|l| FrameInfo {
                frame: Frame::Label(fx.intern_string(l)),
                category_pair: category.into(),
                flags: FrameFlags::empty(),
            })
            .collect();
        let stack = fx.intern_stack_frames(thread, frames.into_iter());
        fx.add_sample(
            thread,
            Timestamp::from_nanos_since_reference(s.time_ns.saturating_sub(start)),
            stack,
            CpuDelta::from_nanos(period_ns),
            1,
        );
    }
    add_markers(p, &mut fx, thread, &categories);
    fx
}

/// GC (an interval per collection, from its end event and duration) and class-load (an
/// instant) markers on the VM thread's track, in the category of the VM state they stand for.
fn add_markers(
    p: &Profile,
    fx: &mut FxProfile,
    thread: fxprof_processed_profile::ThreadHandle,
    categories: &[CategoryHandle],
) {
    let start = p.header.start_time_ns;
    let at = |ns: u64| Timestamp::from_nanos_since_reference(ns.saturating_sub(start));
    for e in &p.events {
        match &e.kind {
            EventKind::GcEnd {
                kind,
                plan,
                scope,
                bytes_before,
                bytes_after,
                duration_ns,
            } => {
                let marker = GcMarker {
                    category: categories[VmState::Gc as usize],
                    kind: fx.intern_string(kind),
                    plan: fx.intern_string(if plan.is_empty() { "unrecorded" } else { plan }),
                    scope: fx.intern_string(scope),
                    bytes_before: *bytes_before,
                    bytes_after: *bytes_after,
                };
                let timing = MarkerTiming::Interval(
                    at(e.time_ns.saturating_sub(*duration_ns)),
                    at(e.time_ns),
                );
                fx.add_marker(thread, timing, marker);
            }
            EventKind::ClassLoaded { name, source, .. } => {
                let marker = ClassLoadMarker {
                    category: categories[VmState::Runtime as usize],
                    class: fx.intern_string(name),
                    source: fx.intern_string(source),
                };
                fx.add_marker(thread, MarkerTiming::Instant(at(e.time_ns)), marker);
            }
            _ => {}
        }
    }
}

pub fn to_json(p: &Profile) -> serde_json::Value {
    let mut v =
        serde_json::to_value(to_profile(p)).expect("the processed profile always serializes");
    add_source_positions(p, &mut v["threads"][0]);
    set_profiling_range(p, &mut v["meta"]);
    v
}

/// The profile's range is the whole run, from the program's start: without it the viewer
/// starts at the first sample and hides what came before (the core classes' loads, an early
/// collection).
fn set_profiling_range(p: &Profile, meta: &mut Value) {
    let start = p.header.start_time_ns;
    let last_sample = p.samples.iter().map(|s| s.time_ns).max().unwrap_or(start);
    let last_event = p.events.iter().map(|e| e.time_ns).max().unwrap_or(start);
    let end = last_sample.max(last_event).saturating_sub(start);
    meta["profilingStartTime"] = serde_json::json!(0.0);
    meta["profilingEndTime"] = serde_json::json!(end as f64 / 1e6);
}

/// Interns strings into a thread's string array, keeping the indices already used.
struct StringArray {
    strings: Vec<Value>,
    index: HashMap<String, usize>,
}

impl StringArray {
    fn get(&mut self, s: &str) -> usize {
        if let Some(&i) = self.index.get(s) {
            return i;
        }
        self.strings.push(Value::String(s.to_string()));
        self.index.insert(s.to_string(), self.strings.len() - 1);
        self.strings.len() - 1
    }
}

#[derive(Default)]
struct Table {
    columns: BTreeMap<&'static str, Vec<Value>>,
    length: usize,
}

impl Table {
    fn push(&mut self, row: &[(&'static str, Value)]) -> usize {
        for (k, v) in row {
            self.columns.entry(k).or_default().push(v.clone());
        }
        self.length += 1;
        self.length - 1
    }

    fn into_json(self) -> Value {
        let mut m: serde_json::Map<String, Value> = self
            .columns
            .into_iter()
            .map(|(k, v)| (k.to_string(), Value::Array(v)))
            .collect();
        m.insert("length".into(), json!(self.length));
        Value::Object(m)
    }
}

/// One frame of a stack: its label, its function's file and header line, and the frame's
/// own line and column (0: unknown).
type FrameRow = (String, Option<(String, u32)>, u32, u32);

/// Rebuilds `thread`'s function, frame and stack tables with source positions, keeping its
/// samples (one per profile sample, in order) and their categories.
fn add_source_positions(p: &Profile, thread: &mut Value) {
    let symbols = p.symbols();
    let old_stacks: Vec<Option<usize>> = column(&thread["samples"]["stack"]);
    let old_stack_frame: Vec<Option<usize>> = column(&thread["stackTable"]["frame"]);
    let old_frame_category: Vec<Option<usize>> = column(&thread["frameTable"]["category"]);
    if old_stacks.len() != p.samples.len() {
        return;
    }
    let existing = thread["stringArray"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let mut strings = StringArray {
        index: existing
            .iter()
            .enumerate()
            .filter_map(|(i, s)| s.as_str().map(|s| (s.to_string(), i)))
            .collect(),
        strings: existing,
    };
    let (mut funcs, mut frames, mut stacks) =
        (Table::default(), Table::default(), Table::default());
    let mut func_index: HashMap<String, usize> = HashMap::new();
    let mut frame_index: HashMap<(usize, u32, u32, usize), usize> = HashMap::new();
    let mut stack_index: HashMap<(Option<usize>, usize), usize> = HashMap::new();
    let mut new_stacks = Vec::with_capacity(p.samples.len());
    for (s, old) in p.samples.iter().zip(&old_stacks) {
        let category = old
            .and_then(|st| old_stack_frame.get(st).copied().flatten())
            .and_then(|f| old_frame_category.get(f).copied().flatten())
            .unwrap_or(0);
        let rows: Vec<FrameRow> = sample_stack(&symbols, s)
            .into_iter()
            .map(|(label, frame)| {
                let info = frame.and_then(|f| symbols.methods.get(&f.method));
                let pos = frame.and_then(|f| symbols.position(f.method, f.bci));
                (
                    label,
                    info.map(|i| (i.file.clone(), i.line)),
                    pos.map_or(0, |p| p.line),
                    pos.map_or(0, |p| p.column),
                )
            })
            .collect();
        let mut prefix: Option<usize> = None;
        for (label, func_source, line, col) in rows {
            let func = match func_index.get(&label) {
                Some(&f) => f,
                None => {
                    let name = strings.get(&label);
                    let (file, header) = match &func_source {
                        Some((file, line)) if !file.is_empty() => {
                            (json!(strings.get(file)), json!(line))
                        }
                        _ => (Value::Null, Value::Null),
                    };
                    let f = funcs.push(&[
                        ("name", json!(name)),
                        ("isJS", json!(false)),
                        ("relevantForJS", json!(false)),
                        ("resource", json!(-1)),
                        ("fileName", file),
                        ("lineNumber", header),
                        ("columnNumber", Value::Null),
                    ]);
                    func_index.insert(label, f);
                    f
                }
            };
            let frame = *frame_index
                .entry((func, line, col, category))
                .or_insert_with(|| {
                    let known = |n: u32| if n == 0 { Value::Null } else { json!(n) };
                    frames.push(&[
                        ("address", json!(-1)),
                        ("inlineDepth", json!(0)),
                        ("category", json!(category)),
                        ("subcategory", json!(0)),
                        ("func", json!(func)),
                        ("nativeSymbol", Value::Null),
                        ("innerWindowID", json!(0)),
                        ("line", known(line)),
                        ("column", known(col)),
                    ])
                });
            let stack = *stack_index.entry((prefix, frame)).or_insert_with(|| {
                stacks.push(&[("frame", json!(frame)), ("prefix", json!(prefix))])
            });
            prefix = Some(stack);
        }
        new_stacks.push(json!(prefix));
    }
    thread["funcTable"] = funcs.into_json();
    thread["frameTable"] = frames.into_json();
    thread["stackTable"] = stacks.into_json();
    thread["samples"]["stack"] = Value::Array(new_stacks);
    thread["stringArray"] = Value::Array(strings.strings);
}

fn column(v: &Value) -> Vec<Option<usize>> {
    v.as_array()
        .map(|a| a.iter().map(|x| x.as_u64().map(|n| n as usize)).collect())
        .unwrap_or_default()
}
