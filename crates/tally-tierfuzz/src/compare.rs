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
    if crashed(got) && !crashed(reference) {
        Some(Disagreement::Crash)
    } else if got.exit == Exit::TimedOut && reference.exit != Exit::TimedOut {
        Some(Disagreement::Hang)
    } else if got.exit != reference.exit {
        Some(Disagreement::ExitStatus)
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
