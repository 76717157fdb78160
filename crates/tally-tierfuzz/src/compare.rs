//! Whether a run agrees with the interpreter's, and if not, how.

use std::fmt;

use crate::run::{Exit, Outcome};

/// How a configuration's run differed from the interpreter's, worst first.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Disagreement {
    /// Killed by a signal, or a Rust panic.
    Crash,
    /// Still running long after the interpreter had finished.
    Hang,
    ExitStatus,
    Stdout,
    /// The SOM error message or stack trace.
    Stderr,
    /// A method or block the tier failed to compile (it ran interpreted instead).
    CompileFailed,
}

impl fmt::Display for Disagreement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Disagreement::Crash => "crash",
            Disagreement::Hang => "hang",
            Disagreement::ExitStatus => "exit status",
            Disagreement::Stdout => "standard output",
            Disagreement::Stderr => "error message or trace",
            Disagreement::CompileFailed => "failed compile",
        })
    }
}

pub fn compare(reference: &Outcome, got: &Outcome) -> Option<Disagreement> {
    let crashed = |o: &Outcome| matches!(o.exit, Exit::Signal(_)) || o.stderr.contains("panicked");
    // `--max-stack-depth` counts frame records; a method or block the optimizing tier
    // inlined takes none, so compiled recursion reaches the limit a few SOM frames deeper
    // than the interpreter: it may print a few more lines first, and the trace's deep end
    // (the folded repeats and the frames at the top) differs.
    let overflowed = overflowed(reference) && overflowed(got);
    if crashed(got) && !crashed(reference) {
        Some(Disagreement::Crash)
    } else if got.exit == Exit::TimedOut && reference.exit != Exit::TimedOut {
        Some(Disagreement::Hang)
    } else if got.exit != reference.exit {
        Some(Disagreement::ExitStatus)
    } else if overflowed && !one_leads_the_other(&reference.stdout, &got.stdout) {
        Some(Disagreement::Stdout)
    } else if overflowed && shallow_end(&reference.stderr) != shallow_end(&got.stderr) {
        Some(Disagreement::Stderr)
    } else if overflowed {
        None
    } else if got.stdout != reference.stdout {
        Some(Disagreement::Stdout)
    } else if got.stderr != reference.stderr {
        Some(Disagreement::Stderr)
    } else if !got.failed_compiles.is_empty() {
        Some(Disagreement::CompileFailed)
    } else {
        None
    }
}

/// Whether the run ended in SOM's stack overflow (the VM's frame limit).
fn overflowed(o: &Outcome) -> bool {
    o.stderr
        .lines()
        .last()
        .is_some_and(|l| l.starts_with("stack overflow: the SOM call stack exceeded"))
}

/// Whether one output is the other's first lines.
fn one_leads_the_other(a: &str, b: &str) -> bool {
    let (short, long) = if a.len() <= b.len() { (a, b) } else { (b, a) };
    long.starts_with(short) && (short.is_empty() || short.ends_with('\n'))
}

/// A stack overflow's report without the deep end of its trace: the frames from the
/// outermost one down to the first folded or omitted run, and the message.
fn shallow_end(stderr: &str) -> (Vec<&str>, Option<&str>) {
    let outer = stderr
        .lines()
        .take_while(|l| !l.starts_with("  ... "))
        .collect();
    (outer, stderr.lines().last())
}

/// The first line where two texts differ, with its number, for a one-line report.
pub fn first_difference(want: &str, got: &str) -> String {
    let (mut w, mut g) = (want.lines(), got.lines());
    for line in 1.. {
        match (w.next(), g.next()) {
            (Some(a), Some(b)) if a == b => continue,
            (None, None) => return "no difference".into(),
            (a, b) => {
                return format!(
                    "line {line}: expected {:?}, got {:?}",
                    a.unwrap_or("<end>"),
                    b.unwrap_or("<end>")
                )
            }
        }
    }
    unreachable!()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn outcome(stdout: &str, stderr: &str, exit: Exit) -> Outcome {
        Outcome {
            stdout: stdout.into(),
            stderr: stderr.into(),
            exit,
            elapsed: Duration::ZERO,
            opt_compiles: 0,
            deopts: 0,
            failed_compiles: Vec::new(),
        }
    }

    #[test]
    fn the_worst_difference_is_reported() {
        let want = outcome("1\n", "", Exit::Code(0));
        assert_eq!(compare(&want, &want.clone()), None);
        let panic = outcome("1\n", "thread 'main' panicked at x", Exit::Code(101));
        assert_eq!(compare(&want, &panic), Some(Disagreement::Crash));
        let segv = outcome("", "", Exit::Signal(11));
        assert_eq!(compare(&want, &segv), Some(Disagreement::Crash));
        assert_eq!(
            compare(&want, &outcome("2\n", "", Exit::Code(0))),
            Some(Disagreement::Stdout)
        );
        assert_eq!(
            compare(&want, &outcome("1\n", "", Exit::Code(1))),
            Some(Disagreement::ExitStatus)
        );
        assert_eq!(
            compare(&want, &outcome("1\n", "", Exit::TimedOut)),
            Some(Disagreement::Hang)
        );
    }

    #[test]
    fn stack_overflows_agree_on_the_shallow_end_of_their_trace() {
        let message = "stack overflow: the SOM call stack exceeded 100 frames (set --max-stack-depth to allow more)";
        let trace = |repeats: u32, top: &str| {
            format!(
                "Traceback (most recent call at bottom):\n  M.som, line 2, column 3: M>>run\n  M.som, line 5, column 9: M>>rec:\n  ... the frame above repeats {repeats} more times ...\n{top}{message}"
            )
        };
        let want = outcome(
            "a\nb\n",
            &trace(97, "  M.som, line 6, column 1: M>>rec:\n"),
            Exit::Code(1),
        );
        let deeper = outcome("a\nb\nc\n", &trace(98, ""), Exit::Code(1));
        assert_eq!(compare(&want, &deeper), None);
        assert_eq!(compare(&deeper, &want), None);
        // What the deeper run printed must still begin with what the other printed.
        let other = outcome("a\nx\nc\n", &trace(98, ""), Exit::Code(1));
        assert_eq!(compare(&want, &other), Some(Disagreement::Stdout));
        let cut = outcome("a\nb", &trace(98, ""), Exit::Code(1));
        assert_eq!(compare(&deeper, &cut), Some(Disagreement::Stdout));
        // The outer frames and the message must agree.
        let elsewhere = outcome(
            "a\nb\n",
            &trace(97, "").replace("M>>run", "M>>go"),
            Exit::Code(1),
        );
        assert_eq!(compare(&want, &elsewhere), Some(Disagreement::Stderr));
        // Only when both overflowed: an overflow against another error is a difference.
        let error = outcome(
            "a\nb\n",
            "Traceback (most recent call at bottom):\nerror",
            Exit::Code(1),
        );
        assert_eq!(compare(&want, &error), Some(Disagreement::Stderr));
    }

    #[test]
    fn the_first_different_line_is_named() {
        assert_eq!(
            first_difference("a\nb\nc\n", "a\nx\nc\n"),
            "line 2: expected \"b\", got \"x\""
        );
        assert_eq!(
            first_difference("a\n", "a\nb\n"),
            "line 2: expected \"<end>\", got \"b\""
        );
    }
}
