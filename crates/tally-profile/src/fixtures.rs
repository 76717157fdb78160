//! A small but complete profile (every event kind, both sample origins,
//! an inlined compiled frame, CBS edges, exact counts) for tests, examples
//! and the fuzzer's seed corpus.

use crate::callgraph::CallEdge;
use crate::code::{CodeVersion, PcMapEntry};
use crate::event::{Event, EventKind, LineEntry};
use crate::hot::cbs::CbsConfig;
use crate::hot::exact::ExactCounts;
use crate::hot::SampleCounters;
use crate::ids::{ClassId, CodeVersionId, MethodId, RawFrame, Tier, VmState};
use crate::profile::{Header, Profile, SamplerSettings};
use crate::sample::{Origin, Sample, SampleFlags};

const T0: u64 = 1_000_000_000;

fn ev(dt: u64, kind: EventKind) -> Event {
    Event {
        time_ns: T0 + dt,
        kind,
    }
}

fn method(id: u32, name: &str, line: u32) -> Event {
    ev(
        10 + u64::from(id),
        EventKind::MethodCompiled {
            method: MethodId(id),
            class: ClassId(1),
            name: name.into(),
            file: "Bench.som".into(),
            line,
            bytecode_len: 20,
        },
    )
}

fn lines(id: u32, table: &[(u32, u32, u32)]) -> Event {
    ev(
        10 + u64::from(id),
        EventKind::MethodLines {
            method: MethodId(id),
            lines: table
                .iter()
                .map(|&(bci, line, column)| LineEntry { bci, line, column })
                .collect(),
        },
    )
}

/// A `TierCallCounts` event at `time_ns` with `(method, tier, calls)` rows.
pub fn tier_call_counts(time_ns: u64, rows: &[(u32, Tier, u64)], instrumentation_ns: u64) -> Event {
    Event {
        time_ns,
        kind: EventKind::TierCallCounts {
            counts: rows
                .iter()
                .map(|&(m, tier, calls)| crate::event::TierCalls {
                    method: MethodId(m),
                    tier,
                    calls,
                    loops: None,
                })
                .collect(),
            instrumentation_ns,
        },
    }
}

fn i(m: u32, bci: u32) -> RawFrame {
    RawFrame::interpreted(MethodId(m), bci)
}

/// Methods: 0 `Bench>>run`, 1 `Bench>>fib:`, 2 `Bench>>loop`,
/// 3 `Bench>>add:` (inlined into the optimized `loop`, code version 1).
pub fn example_profile() -> Profile {
    let mut events = vec![
        ev(0, EventKind::ProgramStart),
        ev(
            5,
            EventKind::ClassLoaded {
                class: ClassId(1),
                name: "Bench".into(),
                source: "Bench.som".into(),
            },
        ),
        method(0, "Bench>>run", 3),
        method(1, "Bench>>fib:", 7),
        method(2, "Bench>>loop", 12),
        method(3, "Bench>>add:", 18),
        lines(0, &[(0, 4, 5), (5, 5, 5)]),
        lines(1, &[(0, 8, 5), (4, 9, 9), (9, 10, 9), (11, 11, 5)]),
        lines(2, &[(0, 13, 5), (4, 14, 9), (9, 15, 5)]),
        lines(3, &[(0, 19, 5), (2, 20, 5)]),
    ];
    events.push(ev(
        3_800_000,
        EventKind::MethodBytecodes {
            method: MethodId(2),
            ops: (0..12).map(|b| format!("op{b}")).collect(),
        },
    ));
    events.push(ev(
        3_800_000,
        EventKind::MethodBytecodes {
            method: MethodId(3),
            ops: vec![
                "PushArgument(1)".into(),
                "PushArgument(2)".into(),
                "SendBinary #+".into(),
                "ReturnLocal".into(),
            ],
        },
    ));
    events.push(ev(
        3_700_000,
        EventKind::TierDecision {
            method: MethodId(2),
            from: Tier::Interpreter,
            to: Tier::Optimizing,
            past_ns: 3_000_000,
            predicted_compile_ns: 300_000,
            predicted_future_ns: 750_000,
        },
    ));
    events.push(ev(
        4_000_000,
        EventKind::CodeInstalled(CodeVersion {
            id: CodeVersionId(1),
            method: MethodId(2),
            tier: Tier::Optimizing,
            compile_id: 1,
            compile_time_ns: 250_000,
            code_start: 0x7f00_0000_1000,
            code_len: 0x200,
            pc_map: vec![
                PcMapEntry {
                    pc_offset: 0,
                    chain: vec![(MethodId(2), 0)],
                },
                PcMapEntry {
                    pc_offset: 0x40,
                    chain: vec![(MethodId(3), 2), (MethodId(2), 6)],
                },
            ],
        }),
    ));
    events.push(ev(
        6_000_000,
        EventKind::GcStart {
            kind: "Allocation".into(),
        },
    ));
    events.push(ev(
        7_500_000,
        EventKind::GcEnd {
            kind: "Allocation".into(),
            plan: "genimmix".into(),
            scope: "nursery".into(),
            bytes_before: 8 << 20,
            bytes_after: 1 << 20,
            duration_ns: 1_500_000,
        },
    ));
    events.push(ev(
        8_500_000,
        EventKind::Deoptimized {
            method: MethodId(2),
            bci: 6,
            reason: "receiver class guard failed".into(),
            now: Some(Tier::Interpreter),
        },
    ));
    events.push(ev(
        9_000_000,
        EventKind::CodeFreed {
            code: CodeVersionId(1),
        },
    ));
    events.push(ev(10_000_000, EventKind::ProgramEnd { exit_code: 0 }));

    let stacks: Vec<(VmState, Vec<RawFrame>)> = vec![
        (VmState::Interpreting, vec![i(1, 4), i(1, 9), i(0, 2)]),
        (VmState::Interpreting, vec![i(1, 4), i(1, 9), i(0, 2)]),
        (VmState::Interpreting, vec![i(1, 11), i(0, 2)]),
        (VmState::Primitive, vec![i(1, 5), i(0, 2)]),
        (VmState::Interpreting, vec![i(2, 3), i(0, 5)]),
        (
            VmState::Compiled,
            vec![
                RawFrame::Compiled {
                    code: CodeVersionId(1),
                    pc_offset: 0x48,
                },
                i(0, 5),
            ],
        ),
        (
            VmState::Compiled,
            vec![
                RawFrame::Compiled {
                    code: CodeVersionId(1),
                    pc_offset: 0x10,
                },
                i(0, 5),
            ],
        ),
        (VmState::Gc, vec![i(2, 8), i(0, 5)]),
        (VmState::Runtime, vec![]),
    ];
    let samples = stacks
        .into_iter()
        .enumerate()
        .map(|(k, (state, frames))| Sample {
            time_ns: T0 + 1_000_000 * (k as u64 + 1),
            state,
            origin: if k % 2 == 0 {
                Origin::Immediate
            } else {
                Origin::Polling
            },
            flags: if k == 3 {
                SampleFlags::TRUNCATED
            } else {
                SampleFlags::NONE
            },
            depth: frames.len() as u32 + u32::from(k == 3),
            frames,
        })
        .collect::<Vec<_>>();

    let mut exact = ExactCounts::new();
    exact.on_call(None, MethodId(0));
    for _ in 0..30 {
        exact.on_call(Some((MethodId(0), 2)), MethodId(1));
    }
    for _ in 0..10 {
        exact.on_call(Some((MethodId(1), 9)), MethodId(1));
    }
    exact.on_call(Some((MethodId(0), 5)), MethodId(2));
    for _ in 0..5 {
        exact.on_call(Some((MethodId(2), 6)), MethodId(3));
    }
    exact.on_bytecodes(MethodId(0), 40);
    exact.on_bytecodes(MethodId(1), 600);
    exact.on_bytecodes(MethodId(2), 300);
    exact.on_bytecodes(MethodId(3), 60);

    let mut p = Profile {
        header: Header {
            vm_name: "example-vm".into(),
            vm_version: "0.1.0".into(),
            program: "Bench.som".into(),
            args: vec!["Bench".into(), "10".into()],
            options: vec![("profile".into(), "timer".into())],
            clock: "CLOCK_MONOTONIC".into(),
            clock_resolution_ns: 1,
            start_unix_ns: 1_700_000_000_000_000_000,
            start_time_ns: T0,
            sampler: SamplerSettings {
                trigger: "timer".into(),
                trigger_source: "timer_create(CLOCK_PROCESS_CPUTIME_ID)".into(),
                trigger_note: String::new(),
                mechanism: "immediate".into(),
                rate_hz: 1000,
                cbs: Some(CbsConfig {
                    stride: 3,
                    samples: 16,
                    seed: 42,
                }),
                exhaustive: true,
                ring_slots: 4096,
                max_frames: 128,
            },
        },
        events,
        samples,
        exact: Some(exact),
        counters: SampleCounters {
            taken: 12,
            recorded: 9,
            dropped_full: 1,
            dropped_busy: 0,
            dropped_coalesced: 1,
            cbs_ticks: 9,
            ticks_merged: 2,
            dropped_slow: 1,
        },
        ..Profile::default()
    };
    for (e, w) in [
        ((0, 2, 1), 20),
        ((1, 9, 1), 7),
        ((0, 5, 2), 1),
        ((2, 6, 3), 4),
    ] {
        p.cbs_edges.add(
            CallEdge {
                caller: MethodId(e.0),
                callsite: e.1,
                callee: MethodId(e.2),
            },
            w,
        );
    }
    // As a file older than 1.5 reads: one sample per unit of weight.
    p.cbs_samples = p.cbs_edges.total();
    p
}
