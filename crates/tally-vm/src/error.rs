//! Errors that end a SOM program, with the SOM-level stack at the point of failure.

use std::fmt;

use crate::Vm;

/// `eprintln!` that ignores a closed stderr: a message that cannot be shown must not turn a
/// finished run into a panic.
macro_rules! say {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr(), $($arg)*);
    }};
}
pub(crate) use say;

/// One SOM frame of a stack trace.
#[derive(Debug, Clone)]
pub struct TraceEntry {
    /// `Class>>selector`, or `[] in Class>>selector` for a block.
    pub name: String,
    pub file: String,
    pub line: u32,
    pub column: u32,
    /// The source line, trimmed, when the file is known.
    pub text: String,
}

/// The exit status of a run whose program succeeded but that could not write a file it was
/// asked for: 74, `EX_IOERR` of `sysexits.h` ("an error occurred while doing I/O on some
/// file").
pub const OUTPUT_FAILED: i32 = 74;

#[derive(Debug)]
pub enum VmError {
    /// `System>>exit:` with this status.
    Exit(i32),
    /// An error the program did not handle: message and the stack, outermost first.
    Runtime {
        message: String,
        trace: Vec<TraceEntry>,
    },
    StackOverflow {
        depth: usize,
        trace: Vec<TraceEntry>,
        /// The native stack ran out first (compiled code nests calls on it), at `depth`
        /// SOM frames.
        native: bool,
    },
    OutOfMemory {
        message: String,
        trace: Vec<TraceEntry>,
    },
    /// A class that could not be loaded or compiled, already rendered for the user.
    Load(String),
    /// A VM-level failure outside the program's control.
    Fatal(String),
    /// A file the run was asked to write (the profile, GC hints, method times, a phase
    /// report) could not be written, said for the user. The run's exit status is then
    /// [`OUTPUT_FAILED`], unless the program's own status says that it failed.
    Output(String),
    /// Stopped by SIGINT, SIGTERM or SIGHUP while profiling (the profile is still written).
    Interrupted,
    /// Not an error: the running dispatch loop hands over to another at a counter-based
    /// sampling window's edge (see `Dispatch::Entries`). Raised only on the loop's own call
    /// path, with every frame complete, and caught by `Vm::execute`; it never leaves the VM.
    #[doc(hidden)]
    SwitchLoop,
}

/// How many (folded) frames of each end of a deep stack a trace shows.
const TRACE_EDGE: usize = 20;

/// Writes a trace, outermost frame first. Runs of the same frame (deep recursion) are folded
/// into one line with a count, and a still-long trace keeps only its two ends.
pub(crate) fn write_trace(f: &mut impl fmt::Write, trace: &[TraceEntry]) -> fmt::Result {
    writeln!(f, "Traceback (most recent call at bottom):")?;
    let mut folded: Vec<(&TraceEntry, usize)> = Vec::new();
    for e in trace {
        match folded.last_mut() {
            Some((last, n))
                if last.name == e.name
                    && last.file == e.file
                    && last.line == e.line
                    && last.column == e.column =>
            {
                *n += 1
            }
            _ => folded.push((e, 1)),
        }
    }
    let elide = folded.len() > 2 * TRACE_EDGE;
    for (i, (e, repeats)) in folded.iter().enumerate() {
        if elide && i == TRACE_EDGE {
            let hidden: usize = folded[TRACE_EDGE..folded.len() - TRACE_EDGE]
                .iter()
                .map(|(_, n)| n)
                .sum();
            writeln!(f, "  ... {hidden} frames omitted ...")?;
        }
        if elide && i >= TRACE_EDGE && i < folded.len() - TRACE_EDGE {
            continue;
        }
        writeln!(
            f,
            "  {}, line {}, column {}: {}",
            e.file, e.line, e.column, e.name
        )?;
        if !e.text.is_empty() {
            writeln!(f, "    {}", e.text)?;
        }
        if *repeats > 1 {
            writeln!(
                f,
                "  ... the frame above repeats {} more times ...",
                repeats - 1
            )?;
        }
    }
    Ok(())
}

impl fmt::Display for VmError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            VmError::Exit(code) => write!(f, "exit({code})"),
            VmError::Runtime { message, trace } => {
                write_trace(f, trace)?;
                write!(f, "{message}")
            }
            VmError::StackOverflow {
                depth,
                trace,
                native: false,
            } => {
                write_trace(f, trace)?;
                write!(f, "stack overflow: the SOM call stack exceeded {depth} frames (set --max-stack-depth to allow more)")
            }
            VmError::StackOverflow {
                depth,
                trace,
                native: true,
            } => {
                write_trace(f, trace)?;
                write!(f, "stack overflow: the native stack is exhausted at a SOM call depth of {depth} (compiled code nests calls on the thread's stack; run deep recursion on a thread with a larger one, or in the interpreter)")
            }
            VmError::OutOfMemory { message, trace } => {
                write_trace(f, trace)?;
                write!(f, "{message}")
            }
            VmError::Load(m) | VmError::Fatal(m) | VmError::Output(m) => write!(f, "{m}"),
            VmError::Interrupted => write!(f, "interrupted"),
            VmError::SwitchLoop => write!(f, "internal: dispatch loop switch escaped the VM"),
        }
    }
}

impl VmError {
    /// The process exit status for this outcome.
    pub fn exit_code(&self) -> i32 {
        match self {
            VmError::Exit(c) => *c,
            VmError::Interrupted => crate::profiling::interrupted_exit_code(),
            VmError::Output(_) => OUTPUT_FAILED,
            _ => 1,
        }
    }
}

impl Vm {
    /// The SOM stack, outermost frame first: the frames, and above each the activations its
    /// compiled code runs inlined (no frame of their own) while it makes a call.
    pub fn stack_trace(&self) -> Vec<TraceEntry> {
        let frames = &self.rt.frames;
        let mut out = Vec::with_capacity(frames.len());
        for (index, fr) in frames.live().iter().enumerate() {
            out.push(self.trace_entry(fr.code, fr.ip));
            for &(code, ip) in frames.inlined_at(index).iter().rev() {
                out.push(self.trace_entry(code, ip));
            }
        }
        out
    }

    /// The stack trace's line for an activation of `code` whose next instruction is `ip`.
    fn trace_entry(&self, code: crate::bytecode::CodeId, ip: u32) -> TraceEntry {
        let code = self.rt.codes[code as usize];
        let at = (ip as usize)
            .saturating_sub(1)
            .min(code.positions.len().saturating_sub(1));
        let (line, column) = code
            .positions
            .get(at)
            .copied()
            .unwrap_or((code.source_line, 1));
        let source = self.rt.sources.get(code.source as usize);
        let text = source
            .filter(|_| line > 0)
            .map(|s| s.line_text(line).trim().to_string())
            .unwrap_or_default();
        TraceEntry {
            name: self.rt.code_name(code),
            file: source
                .map(|s| s.path().to_string())
                .unwrap_or_else(|| "<primitive>".into()),
            line,
            column,
            text,
        }
    }

    /// A runtime error at the current point of execution.
    pub(crate) fn error(&self, message: impl Into<String>) -> VmError {
        VmError::Runtime {
            message: message.into(),
            trace: self.stack_trace(),
        }
    }

    pub(crate) fn out_of_memory(&self, oom: tally_heap::OutOfMemory) -> VmError {
        VmError::OutOfMemory {
            message: oom.to_string(),
            trace: self.stack_trace(),
        }
    }
}
