//! The results file: every raw measurement of a run, so that any report can
//! be recomputed later (with other statistics settings, too) without
//! re-running anything.

use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::error::BenchError;
use crate::executor::Executor;
use crate::measure::{Killed, ProcessRun};
use crate::suite::{Benchmark, Suite};

/// Written into every results file; a reader refuses other formats rather
/// than misreading them.
pub const FORMAT: &str = "tally-bench/1";

/// A whole run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Results {
    /// Always [`FORMAT`].
    pub format: String,
    /// The tool that measured, e.g. "tally 0.1.0".
    pub tool: String,
    /// RFC 3339, UTC.
    pub started: String,
    /// RFC 3339, UTC; when the run ended or was interrupted.
    pub finished: String,
    /// False if Ctrl-C ended the run early.
    pub complete: bool,
    /// Where it ran.
    pub machine: Machine,
    /// How it ran, and the analysis settings it was first reported with.
    pub settings: Settings,
    /// What ran.
    pub suite: Suite,
    /// Who ran it; the first is the default baseline.
    pub executors: Vec<Executor>,
    /// Every invocation in the order it ran (failed ones included).
    pub invocations: Vec<InvocationRecord>,
}

/// The machine, for reading results months later.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Machine {
    /// Host name.
    pub hostname: String,
    /// `std::env::consts::OS`.
    pub os: String,
    /// `std::env::consts::ARCH`.
    pub arch: String,
    /// Logical CPUs available to the process.
    pub cpus: usize,
    /// Logical CPUs online in the whole system: what the load average is measured against
    /// (in a container or under an affinity mask it can exceed `cpus`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub online_cpus: Option<usize>,
    /// The CPU model, from /proc/cpuinfo where there is one.
    pub cpu_model: Option<String>,
    /// 1-minute load average when the run started: a busy machine explains wide intervals.
    pub load_average: Option<f64>,
    /// 1-minute load average when the run ended. It weighs the run's last minute most (the
    /// start's weighs the minute before the run), so it says better whether other work
    /// competed with the run; set by `tally bench` when it finishes or is interrupted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub load_average_end: Option<f64>,
}

/// Run and analysis settings.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Settings {
    /// Invocations per benchmark and executor.
    pub invocations: u32,
    /// Per-invocation limit in seconds, if any.
    pub timeout_s: Option<f64>,
    /// With `--lockstep`: how each (round, benchmark)'s executors took turns.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lockstep: Option<LockstepSettings>,
    /// Analysis settings; `report` may override them.
    pub analysis: crate::analysis::AnalysisSettings,
}

/// How the executors of a (round, benchmark) shared one CPU (`--lockstep`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LockstepSettings {
    /// The CPU they were pinned to.
    pub cpu: usize,
    /// The length of a turn, milliseconds.
    pub slice_ms: u64,
}

/// How one invocation ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Outcome {
    /// Exited 0 and printed one time per iteration.
    Ok,
    /// Exited non-zero, died, timed out, or printed the wrong number of times.
    Failed,
    /// Killed by Ctrl-C; its partial times are kept but not analysed.
    Interrupted,
}

/// One VM process.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct InvocationRecord {
    /// Benchmark name.
    pub benchmark: String,
    /// Executor name.
    pub executor: String,
    /// 1-based number of this invocation of the benchmark on this executor.
    pub invocation: u32,
    /// 1-based position in the whole run (shows the interleaving).
    pub sequence: u32,
    /// The exact command line.
    pub argv: Vec<String>,
    /// How it ended.
    pub outcome: Outcome,
    /// Why it failed, in a sentence.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure: Option<String>,
    /// Exit status, if it exited.
    pub exit_code: Option<i32>,
    /// Terminating signal, if it was killed.
    pub signal: Option<i32>,
    /// The harness's per-iteration times, microseconds, in order.
    pub iterations_us: Vec<f64>,
    /// Wall-clock seconds of the whole process.
    pub wall_s: f64,
    /// User CPU seconds.
    pub user_s: f64,
    /// System CPU seconds.
    pub sys_s: f64,
    /// Peak resident set size, KiB.
    pub max_rss_kib: u64,
    /// The last lines of output, kept for failures.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_tail: Option<String>,
    /// Time spent compiling, microseconds per tier, when the executor logs its compiles
    /// (Tally with `--tier-log`: see [`parse_compile_times`]).
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub compile_us: std::collections::BTreeMap<String, f64>,
}

/// Lines of each stream kept for a failed invocation.
const TAIL_LINES: usize = 12;

impl InvocationRecord {
    /// Classifies a finished process: it succeeded only if it exited 0 and
    /// the harness reported every iteration. A verification failure shows as
    /// a non-zero exit (our harness, SOM's `error:`) or as missing iterations.
    pub fn from_run(
        bench: &Benchmark,
        executor: &str,
        invocation: u32,
        sequence: u32,
        argv: Vec<String>,
        run: &ProcessRun,
    ) -> InvocationRecord {
        let iterations_us = parse_iteration_times(&run.stdout);
        let expected = bench.iterations as usize;
        let failure = match (run.killed, run.exit_code, run.signal) {
            (Some(Killed::Interrupted), _, _) => None,
            (Some(Killed::Timeout), _, _) => Some(format!("timed out after {:.1} s", run.wall_s)),
            (None, Some(0), _) if iterations_us.len() != expected => Some(format!(
                "printed {} iteration time(s), expected {expected}",
                iterations_us.len()
            )),
            (None, Some(0), _) => None,
            (None, Some(code), _) => Some(format!("exit status {code}")),
            (None, None, Some(sig)) => Some(format!("killed by signal {sig}")),
            (None, None, None) => Some("ended abnormally".into()),
        };
        let outcome = match (run.killed, &failure) {
            (Some(Killed::Interrupted), _) => Outcome::Interrupted,
            (_, Some(_)) => Outcome::Failed,
            (_, None) => Outcome::Ok,
        };
        let output_tail =
            (outcome == Outcome::Failed).then(|| output_tail(&run.stdout, &run.stderr));
        let compile_us = parse_compile_times(&run.stderr);
        InvocationRecord {
            benchmark: bench.name.clone(),
            executor: executor.to_string(),
            invocation,
            sequence,
            argv,
            outcome,
            failure,
            exit_code: run.exit_code,
            signal: run.signal,
            iterations_us,
            wall_s: run.wall_s,
            user_s: run.user_s,
            sys_s: run.sys_s,
            max_rss_kib: run.max_rss_kib,
            output_tail,
            compile_us,
        }
    }

    /// An executor that could not even be started for this invocation.
    pub fn not_started(
        bench: &Benchmark,
        executor: &str,
        invocation: u32,
        sequence: u32,
        argv: Vec<String>,
        error: &std::io::Error,
    ) -> InvocationRecord {
        InvocationRecord {
            benchmark: bench.name.clone(),
            executor: executor.to_string(),
            invocation,
            sequence,
            argv,
            outcome: Outcome::Failed,
            failure: Some(format!("could not start: {error}")),
            exit_code: None,
            signal: None,
            iterations_us: Vec::new(),
            wall_s: 0.0,
            user_s: 0.0,
            sys_s: 0.0,
            max_rss_kib: 0,
            output_tail: None,
            compile_us: Default::default(),
        }
    }
}

/// Compile time per tier, microseconds, from Tally's `--tier-log` lines on stderr:
/// `[tier] TIER NAME (N bytecodes, B bytes, T us…)`, one per compile. Decisions, failures,
/// deopts and other lines are not compiles.
pub fn parse_compile_times(stderr: &str) -> std::collections::BTreeMap<String, f64> {
    let mut out = std::collections::BTreeMap::new();
    for line in stderr.lines() {
        if let Some((tier, us)) = parse_compile_line(line) {
            *out.entry(tier.to_string()).or_insert(0.0) += us;
        }
    }
    out
}

fn parse_compile_line(line: &str) -> Option<(&str, f64)> {
    let rest = line.strip_prefix("[tier] ")?;
    let (tier, rest) = rest.split_once(' ')?;
    if matches!(tier, "decide" | "deopt" | "cost") || rest.starts_with("failed ") {
        return None;
    }
    let figures = rest.rsplit_once(" (")?.1.strip_suffix(')')?;
    let mut parts = figures.split(", ");
    parts.next()?.strip_suffix(" bytecodes")?;
    parts.next()?.strip_suffix(" bytes")?;
    let us: f64 = parts.next()?.strip_suffix(" us")?.parse().ok()?;
    (us.is_finite() && us >= 0.0).then_some((tier, us))
}

/// Iteration times from harness output: lines `Name: iterations=1 runtime: 1234us`
/// (the Are We Fast Yet format; `ms` and `s` suffixes are accepted too).
pub fn parse_iteration_times(stdout: &str) -> Vec<f64> {
    stdout.lines().filter_map(parse_iteration_line).collect()
}

fn parse_iteration_line(line: &str) -> Option<f64> {
    let (_, rest) = line.trim().split_once(": iterations=1 runtime: ")?;
    let rest = rest.trim();
    let (number, factor) = if let Some(n) = rest.strip_suffix("us") {
        (n, 1.0)
    } else if let Some(n) = rest.strip_suffix("ms") {
        (n, 1e3)
    } else if let Some(n) = rest.strip_suffix('s') {
        (n, 1e6)
    } else {
        (rest, 1.0)
    };
    let value: f64 = number.trim().parse().ok()?;
    (value.is_finite() && value >= 0.0).then_some(value * factor)
}

fn output_tail(stdout: &str, stderr: &str) -> String {
    fn last(s: &str) -> Vec<&str> {
        let lines: Vec<&str> = s.lines().collect();
        lines[lines.len().saturating_sub(TAIL_LINES)..].to_vec()
    }
    let mut out = Vec::new();
    if !stdout.trim().is_empty() {
        out.push("--- stdout (last lines) ---".to_string());
        out.extend(last(stdout).into_iter().map(String::from));
    }
    if !stderr.trim().is_empty() {
        out.push("--- stderr (last lines) ---".to_string());
        out.extend(last(stderr).into_iter().map(String::from));
    }
    if out.is_empty() {
        out.push("(no output)".into());
    }
    out.join("\n")
}

impl Results {
    /// Reads and checks a results file.
    pub fn read(path: &Path) -> Result<Results, BenchError> {
        let err = |message: String| BenchError::Results {
            path: path.to_path_buf(),
            message,
        };
        let text = std::fs::read_to_string(path).map_err(|e| err(e.to_string()))?;
        let value: serde_json::Value =
            serde_json::from_str(&text).map_err(|e| err(format!("not JSON: {e}")))?;
        match value.get("format").and_then(|f| f.as_str()) {
            Some(FORMAT) => {}
            Some(other) => {
                return Err(err(format!(
                    "results format {other:?}; this tally reads {FORMAT:?}"
                )))
            }
            None => return Err(err("not a tally bench results file (no \"format\")".into())),
        }
        let results: Results =
            serde_json::from_value(value).map_err(|e| err(format!("malformed results: {e}")))?;
        // Every report names a baseline executor; a run always has one.
        if results.executors.is_empty() {
            return Err(err("malformed results: no executors".into()));
        }
        Ok(results)
    }

    /// Writes the file whole or not at all (`tally_output`), so an interrupted write never
    /// leaves a truncated file where results were. It replaces the run's own earlier save.
    pub fn write(&self, path: &Path) -> Result<(), BenchError> {
        let text = serde_json::to_string_pretty(self).expect("results serialize") + "\n";
        Ok(tally_output::write(
            path,
            text.as_bytes(),
            tally_output::IfExists::Replace,
        )?)
    }
}

impl Machine {
    /// Facts about this machine.
    pub fn current() -> Machine {
        let cpu_model = std::fs::read_to_string("/proc/cpuinfo").ok().and_then(|t| {
            t.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split_once(':'))
                .map(|(_, v)| v.trim().to_string())
        });
        let hostname = std::fs::read_to_string("/proc/sys/kernel/hostname")
            .map(|h| h.trim().to_string())
            .unwrap_or_else(|_| "unknown".into());
        Machine {
            hostname,
            os: std::env::consts::OS.into(),
            arch: std::env::consts::ARCH.into(),
            cpus: std::thread::available_parallelism()
                .map(|n| n.get())
                .unwrap_or(1),
            online_cpus: online_cpus(),
            cpu_model,
            load_average: load_average(),
            load_average_end: None,
        }
    }
}

/// The 1-minute load average, where the system reports one (`/proc/loadavg`).
pub(crate) fn load_average() -> Option<f64> {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|t| t.split_whitespace().next().and_then(|x| x.parse().ok()))
}

/// Logical CPUs online in the whole system, whatever this process may use.
fn online_cpus() -> Option<usize> {
    // SAFETY: sysconf has no preconditions; it answers -1 for a name it does not know.
    let n = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) };
    usize::try_from(n).ok().filter(|&n| n > 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_awfy_iteration_lines_only() {
        let out = "Starting Bounce benchmark ... \nBounce: GC count:     0n\nBounce: iterations=1 runtime: 4286863us\n\
                   Bounce: iterations=1 runtime: 12ms\nBounce: iterations=2 average: 2149431us total: 4298863us\n\
                   Total Runtime: 4298863us\n";
        assert_eq!(parse_iteration_times(out), vec![4286863.0, 12000.0]);
        assert_eq!(parse_iteration_line("X: iterations=1 runtime: -3us"), None);
        assert_eq!(
            parse_iteration_line("X: iterations=1 runtime: fastus"),
            None
        );
    }

    fn run(code: Option<i32>, stdout: &str) -> ProcessRun {
        ProcessRun {
            exit_code: code,
            signal: None,
            killed: None,
            stdout: stdout.into(),
            stderr: "boom\n".into(),
            wall_s: 1.0,
            user_s: 0.5,
            sys_s: 0.1,
            max_rss_kib: 1000,
        }
    }

    #[test]
    fn compile_times_come_from_compile_log_lines_only() {
        let log = "[tier] cost model: built-in figures\n\
                   [tier] decide Foo>>bar interpreter -> optimizing: ran 1.00 ms; predicted compile 0.27 ms, then 0.80 ms\n\
                   [tier] opt Foo>>bar (12 bytecodes, 800 bytes, 350 us, speculating at 2 sites)\n\
                   [tier] baseline Foo>>baz: (3 bytecodes, 100 bytes, 40 us)\n\
                   [tier] opt [] in Foo>>bar (5 bytecodes, 300 bytes, 150 us)\n\
                   [tier] deopt Foo>>bar @3 (#+): small-integer overflow; invalidated, now interp\n\
                   [tier] opt failed for Foo>>qux, stays where it was: no (1 reason)\n\
                   Foo: iterations=1 runtime: 5us\n";
        let times = parse_compile_times(log);
        assert_eq!(times.len(), 2, "{times:?}");
        assert_eq!(times["opt"], 500.0);
        assert_eq!(times["baseline"], 40.0);
        assert!(parse_compile_times("").is_empty());
    }

    #[test]
    fn classifies_outcomes() {
        let b = Benchmark {
            name: "B".into(),
            iterations: 2,
            inner: 1,
        };
        let two = "B: iterations=1 runtime: 5us\nB: iterations=1 runtime: 6us\n";
        let ok = InvocationRecord::from_run(&b, "x", 1, 1, vec![], &run(Some(0), two));
        assert_eq!((ok.outcome, ok.output_tail.clone()), (Outcome::Ok, None));
        let short = InvocationRecord::from_run(
            &b,
            "x",
            1,
            1,
            vec![],
            &run(Some(0), "B: iterations=1 runtime: 5us\n"),
        );
        assert_eq!(short.outcome, Outcome::Failed);
        assert!(short
            .failure
            .unwrap()
            .contains("printed 1 iteration time(s), expected 2"));
        let bad = InvocationRecord::from_run(&b, "x", 1, 1, vec![], &run(Some(1), two));
        assert_eq!(bad.failure.as_deref(), Some("exit status 1"));
        assert!(bad.output_tail.unwrap().contains("boom"));
    }
}
