//! The event stream: everything that happens to the VM that is not a
//! sample, each stamped on the profile's one clock. Method and class names
//! reach the profile only through these events, which keeps the hot path
//! free of strings.

use crate::code::CodeVersion;
use crate::ids::{ClassId, CodeVersionId, MethodId, Tier};

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Event {
    pub time_ns: u64,
    pub kind: EventKind,
}

/// The source position of the bytecodes from `bci` on (1-based line and column).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LineEntry {
    pub bci: u32,
    pub line: u32,
    pub column: u32,
}

impl LineEntry {
    /// The run-length table of a method whose bytecode `i` sits at `positions[i]` (line,
    /// column): one entry where the position changes.
    pub fn table(positions: impl IntoIterator<Item = (u32, u32)>) -> Vec<LineEntry> {
        let mut out: Vec<LineEntry> = Vec::new();
        for (bci, (line, column)) in positions.into_iter().enumerate() {
            if out
                .last()
                .is_none_or(|e| (e.line, e.column) != (line, column))
            {
                out.push(LineEntry {
                    bci: bci as u32,
                    line,
                    column,
                });
            }
        }
        out
    }
}

/// Calls of one method in one tier.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TierCalls {
    pub method: MethodId,
    pub tier: Tier,
    pub calls: u64,
    /// Loop back-edges the method's code took in the tier (`None`: files before format
    /// 1.11 did not count them).
    pub loops: Option<u64>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum EventKind {
    ProgramStart,
    ProgramEnd {
        exit_code: i32,
    },
    ClassLoaded {
        class: ClassId,
        name: String,
        /// Where it came from (a file, or e.g. `<embedded>`).
        source: String,
    },
    /// A method compiled to bytecode (the interpreter tier). Its `name` is
    /// what reports show, so the VM picks the familiar spelling
    /// (`Class>>selector` for SOM).
    MethodCompiled {
        method: MethodId,
        class: ClassId,
        name: String,
        file: String,
        line: u32,
        bytecode_len: u32,
    },
    /// Where each bytecode of a method comes from in its file, announced with
    /// `MethodCompiled`: a bytecode index maps to the last entry at or before it.
    MethodLines {
        method: MethodId,
        /// Sorted by `bci`, one entry where the position changes.
        lines: Vec<LineEntry>,
    },
    /// A method's bytecode as text, one instruction per entry (index = bytecode index),
    /// announced before the first code version that compiles or inlines it: what the
    /// VM-profiler report shows beside each bytecode range of compiled code.
    MethodBytecodes {
        method: MethodId,
        ops: Vec<String>,
    },
    /// Exact calls per method per tier since the run started (cumulative: a later event of
    /// the kind supersedes an earlier one), from the VM's call-counting instrumentation, and
    /// the time that instrumentation itself has cost so far, which the amortization analysis
    /// takes out of the run's time. Emitted now and then during the run and at its end.
    TierCallCounts {
        counts: Vec<TierCalls>,
        instrumentation_ns: u64,
    },
    /// A compiled code version became executable.
    CodeInstalled(CodeVersion),
    /// The adaptive controller chose to recompile `method` from tier `from` to tier `to`,
    /// with the figures of its cost/benefit model (Jikes RVM's): the method's past time as
    /// if all spent in `from` (the estimate of its future), the predicted compile time and
    /// the predicted time of the same work in `to`. The compile that follows is a
    /// `CodeInstalled` with the actual compile time.
    TierDecision {
        method: MethodId,
        from: Tier,
        to: Tier,
        past_ns: u64,
        predicted_compile_ns: u64,
        predicted_future_ns: u64,
    },
    /// Compiled code of `method` failed a guard at bytecode `bci` (`reason` says which) and
    /// handed its frame to the interpreter. `now`: the tier the method fell back to when
    /// this invalidated the speculating version; `None` when it had been invalidated already.
    Deoptimized {
        method: MethodId,
        bci: u32,
        reason: String,
        now: Option<Tier>,
    },
    /// A code version was discarded; its id is never reused.
    CodeFreed {
        code: CodeVersionId,
    },
    GcStart {
        kind: String,
    },
    /// A collection ended. `kind`: what started it (allocation, explicit, stress, hint);
    /// `plan`: the collector (`semispace`, `genimmix`, …; empty in files before 1.9);
    /// `scope`: `nursery` or `full`; heap bytes in use before and after.
    GcEnd {
        kind: String,
        plan: String,
        scope: String,
        bytes_before: u64,
        bytes_after: u64,
        duration_ns: u64,
    },
}

impl EventKind {
    /// A short name, used by the timeline exporters.
    pub fn label(&self) -> &'static str {
        match self {
            EventKind::ProgramStart => "program start",
            EventKind::ProgramEnd { .. } => "program end",
            EventKind::ClassLoaded { .. } => "class loaded",
            EventKind::MethodCompiled { .. } => "method compiled",
            EventKind::MethodLines { .. } => "method lines",
            EventKind::MethodBytecodes { .. } => "method bytecodes",
            EventKind::TierCallCounts { .. } => "tier call counts",
            EventKind::CodeInstalled(_) => "code installed",
            EventKind::TierDecision { .. } => "tier decision",
            EventKind::Deoptimized { .. } => "deoptimized",
            EventKind::CodeFreed { .. } => "code freed",
            EventKind::GcStart { .. } => "gc start",
            EventKind::GcEnd { .. } => "gc",
        }
    }
}
