//! Chrome trace-event JSON for the event timeline (chrome://tracing,
//! Perfetto): GCs and compilations as duration slices, everything else as
//! instant events, on the profile's monotonic clock relative to its start;
//! and the stack samples, in the format's `samples` array whose `sf` fields
//! index a `stackFrames` tree (outermost frame at the root).

use std::collections::HashMap;

use serde_json::{json, Map, Value};

use super::sample_labels;

use crate::event::EventKind;
use crate::profile::Profile;

const PID: u32 = 1;
const TID_VM: u32 = 1;
const TID_GC: u32 = 2;
const TID_JIT: u32 = 3;

pub fn to_json(p: &Profile) -> Value {
    let symbols = p.symbols();
    let start = p.header.start_time_ns;
    let us = |t: u64| t.saturating_sub(start) as f64 / 1000.0;
    let mut events = vec![
        json!({"name": "process_name", "ph": "M", "pid": PID, "tid": TID_VM,
               "args": {"name": format!("{} {}", p.header.vm_name, p.header.program)}}),
        json!({"name": "thread_name", "ph": "M", "pid": PID, "tid": TID_VM, "args": {"name": "VM"}}),
        json!({"name": "thread_name", "ph": "M", "pid": PID, "tid": TID_GC, "args": {"name": "GC"}}),
        json!({"name": "thread_name", "ph": "M", "pid": PID, "tid": TID_JIT, "args": {"name": "compiler"}}),
    ];
    for e in &p.events {
        let t = us(e.time_ns);
        let ev = match &e.kind {
            EventKind::GcEnd {
                kind,
                plan,
                scope,
                bytes_before,
                bytes_after,
                duration_ns,
            } => json!({
                "name": format!("GC {scope} ({kind})"), "cat": "gc", "ph": "X", "pid": PID, "tid": TID_GC,
                "ts": us(e.time_ns.saturating_sub(*duration_ns)), "dur": *duration_ns as f64 / 1000.0,
                "args": {"plan": plan, "scope": scope, "cause": kind,
                         "bytes_before": bytes_before, "bytes_after": bytes_after},
            }),
            EventKind::CodeInstalled(v) => json!({
                "name": format!("compile {} [{}]", symbols.method_name(v.method), v.tier.name()),
                "cat": "jit", "ph": "X", "pid": PID, "tid": TID_JIT,
                "ts": us(e.time_ns.saturating_sub(v.compile_time_ns)),
                "dur": v.compile_time_ns as f64 / 1000.0,
                "args": {"code_version": v.id.0, "compile_id": v.compile_id,
                         "code_start": v.code_start, "code_len": v.code_len},
            }),
            // On the compiler's track, where the compile it asks for follows.
            EventKind::TierDecision {
                method,
                from,
                to,
                past_ns,
                predicted_compile_ns,
                predicted_future_ns,
            } => json!({
                "name": format!("decide {} {} -> {}", symbols.method_name(*method), from.name(), to.name()),
                "cat": "jit", "ph": "i", "s": "t", "pid": PID, "tid": TID_JIT, "ts": t,
                "args": {"past_ns": past_ns, "predicted_compile_ns": predicted_compile_ns,
                         "predicted_future_ns": predicted_future_ns},
            }),
            EventKind::Deoptimized {
                method,
                bci,
                reason,
                now,
            } => json!({
                "name": format!("deopt {} @{bci}", symbols.method_name(*method)),
                "cat": "jit", "ph": "i", "s": "t", "pid": PID, "tid": TID_VM, "ts": t,
                "args": {"reason": reason, "now": now.map(|t| t.name())},
            }),
            // The matching GcEnd carries the duration; a start alone would
            // duplicate the slice.
            EventKind::GcStart { .. } => continue,
            // A method's line table is data for resolving samples, not something that
            // happened on the timeline.
            EventKind::MethodLines { .. }
            | EventKind::MethodBytecodes { .. }
            | EventKind::TierCallCounts { .. } => continue,
            other => {
                let args = match other {
                    EventKind::ProgramEnd { exit_code } => json!({"exit_code": exit_code}),
                    EventKind::ClassLoaded { name, source, .. } => {
                        json!({"class": name, "source": source})
                    }
                    EventKind::MethodCompiled {
                        name, bytecode_len, ..
                    } => {
                        json!({"method": name, "bytecodes": bytecode_len})
                    }
                    EventKind::CodeFreed { code } => json!({"code_version": code.0}),

                    _ => json!({}),
                };
                json!({"name": other.label(), "cat": "vm", "ph": "i", "s": "t",
                       "pid": PID, "tid": TID_VM, "ts": t, "args": args})
            }
        };
        events.push(ev);
    }
    let (stack_frames, samples) = samples_and_frames(p, &us);
    json!({
        "traceEvents": events,
        "stackFrames": stack_frames,
        "samples": samples,
        "displayTimeUnit": "ms",
        "otherData": {
            "vm": format!("{} {}", p.header.vm_name, p.header.vm_version),
            "program": p.header.program,
            "args": p.header.args,
            "clock": p.header.clock,
            "truncated_samples": p.truncated_samples(),
        },
    })
}

/// The samples on the VM thread's track, and the tree of stack frames they point into: one
/// node per distinct (parent, frame label), ids as decimal strings as the format has them.
fn samples_and_frames(p: &Profile, us: &dyn Fn(u64) -> f64) -> (Value, Value) {
    let symbols = p.symbols();
    let mut frames = Map::new();
    let mut ids: HashMap<(Option<usize>, String), usize> = HashMap::new();
    let mut samples = Vec::with_capacity(p.samples.len());
    for s in &p.samples {
        let labels = sample_labels(&symbols, s);
        let mut parent = None;
        for label in labels {
            let next = ids.len();
            let id = *ids.entry((parent, label.clone())).or_insert_with(|| {
                let mut node = json!({"name": label, "category": s.state.name()});
                if let Some(up) = parent {
                    node["parent"] = json!(up.to_string());
                }
                frames.insert(next.to_string(), node);
                next
            });
            parent = Some(id);
        }
        samples.push(json!({
            "tid": TID_VM, "pid": PID, "ts": us(s.time_ns), "name": s.state.name(),
            "sf": parent.map(|id| id.to_string()), "weight": 1,
        }));
    }
    (Value::Object(frames), Value::Array(samples))
}
