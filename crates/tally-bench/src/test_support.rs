//! Synthetic results for the unit tests of the analysis, the outlier check and the warnings:
//! two benchmarks (A and B, six iterations each) on two Tally executors (base, the
//! baseline, and new), on a fixed, idle machine.

use std::path::Path;

use crate::analysis::AnalysisSettings;
use crate::executor::Executor;
use crate::results::{InvocationRecord, Machine, Outcome, Results, Settings, FORMAT};
use crate::suite::{Benchmark, Suite};

/// One invocation of `bench` on `exec` that printed `times` (microseconds); the process
/// took 1 s of wall time and 0.75 s of CPU time.
pub(crate) fn record(
    bench: &str,
    exec: &str,
    n: u32,
    times: &[f64],
    outcome: Outcome,
) -> InvocationRecord {
    InvocationRecord {
        benchmark: bench.into(),
        executor: exec.into(),
        invocation: n,
        sequence: 0,
        argv: vec![],
        outcome,
        failure: None,
        exit_code: Some(0),
        signal: None,
        iterations_us: times.to_vec(),
        wall_s: 1.0,
        user_s: 0.5,
        sys_s: 0.25,
        max_rss_kib: 2048,
        output_tail: None,
        compile_us: Default::default(),
    }
}

/// Four idle CPUs, a load of 0.2 at both ends of a ten-minute run.
pub(crate) fn idle_machine() -> Machine {
    Machine {
        hostname: "test".into(),
        os: "linux".into(),
        arch: "x86_64".into(),
        cpus: 4,
        online_cpus: Some(4),
        cpu_model: None,
        load_average: Some(0.2),
        load_average_end: Some(0.2),
    }
}

/// A complete run of benchmarks A and B on executors base and new.
pub(crate) fn results(invocations: Vec<InvocationRecord>) -> Results {
    let tally = Path::new("/t");
    Results {
        format: FORMAT.into(),
        tool: "test".into(),
        started: "2026-01-01T12:00:00Z".into(),
        finished: "2026-01-01T12:10:00Z".into(),
        complete: true,
        machine: idle_machine(),
        settings: Settings {
            invocations: 3,
            timeout_s: None,
            lockstep: None,
            analysis: AnalysisSettings::default(),
        },
        suite: Suite {
            name: "s".into(),
            source: "s".into(),
            harness: "Harness".into(),
            classpath: vec![],
            benchmarks: ["A", "B"]
                .map(|n| Benchmark {
                    name: n.into(),
                    iterations: 6,
                    inner: 1,
                })
                .to_vec(),
        },
        executors: vec![
            Executor::parse_tally("base", tally).unwrap(),
            Executor::parse_tally("new", tally).unwrap(),
        ],
        invocations,
    }
}
