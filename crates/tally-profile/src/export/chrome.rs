//! Chrome trace-event JSON for the event timeline (chrome://tracing,
//! Perfetto): GCs and compilations as duration slices, everything else as
//! instant events, on the profile's monotonic clock relative to its start.

use serde_json::{json, Value};

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
                bytes_before,
                bytes_after,
                duration_ns,
            } => json!({
                "name": format!("GC ({kind})"), "cat": "gc", "ph": "X", "pid": PID, "tid": TID_GC,
                "ts": us(e.time_ns.saturating_sub(*duration_ns)), "dur": *duration_ns as f64 / 1000.0,
                "args": {"bytes_before": bytes_before, "bytes_after": bytes_after},
            }),
            EventKind::CodeInstalled(v) => json!({
                "name": format!("compile {} [{}]", symbols.method_name(v.method), v.tier.name()),
                "cat": "jit", "ph": "X", "pid": PID, "tid": TID_JIT,
                "ts": us(e.time_ns.saturating_sub(v.compile_time_ns)),
                "dur": v.compile_time_ns as f64 / 1000.0,
                "args": {"code_version": v.id.0, "compile_id": v.compile_id,
                         "code_start": v.code_start, "code_len": v.code_len},
            }),
            // The matching GcEnd carries the duration; a start alone would
            // duplicate the slice.
            EventKind::GcStart { .. } => continue,
            // A method's line table is data for resolving samples, not something that
            // happened on the timeline.
            EventKind::MethodLines { .. } => continue,
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
    json!({
        "traceEvents": events,
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
