//! `tally report`, `tally compare` and `tally export`: reading profile files.
//!
//! Recording happens in the VM (`tally --profile …` or `tally record …`); these commands only
//! read files, so they work on profiles from any run or machine.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Parser, ValueEnum};
use tally_vm::tally_profile::report::{self, EdgeSource};
use tally_vm::tally_profile::{export, Cct, Profile, SampleCounters, TopN};

macro_rules! outln {
    ($out:expr, $($arg:tt)*) => {{
        use std::fmt::Write as _;
        let _ = writeln!($out, $($arg)*);
    }};
}

/// Reads a profile, also one cut short (a killed run's `FILE.PID.partial`): what could be
/// read, with a warning on stderr that says what was lost.
fn read(path: &Path) -> Result<Profile, String> {
    use tally_vm::tally_profile::format::{partials_of, read_file_partial};
    if !path.exists() {
        if let Some(newest) = partials_of(path).first() {
            return Err(format!(
                "cannot read the profile {}: it does not exist, but {} does (the run writing it did not finish, or still runs); `tally report {}` reads what it holds",
                path.display(),
                newest.display(),
                newest.display()
            ));
        }
    }
    let read = read_file_partial(path)
        .map_err(|e| format!("cannot read the profile {}: {e}", path.display()))?;
    if let Some(cut) = read.cut {
        say!(
            "warning: {} is incomplete: {cut}; reading the {} samples before that",
            path.display(),
            read.profile.samples.len()
        );
    }
    Ok(read.profile)
}

/// Writes `bytes` to `path`, whole or not at all, and over an existing file only with
/// `force`: nothing the user wrote is overwritten without asking.
pub fn write_output(path: &Path, bytes: &[u8], force: bool) -> Result<(), String> {
    tally_output::write(path, bytes, tally_output::IfExists::from_force(force))
        .map_err(|e| e.to_string())
}

const REPORT_AFTER_HELP: &str = "\
Columns: self% is the share of samples whose innermost frame is the method (or context),
total% the share with it anywhere on the stack. In the call tree, `@File.som:23` is the line in
the caller that made the call.

Positions: a sample records each frame's bytecode index. For a caller that is the call it is
waiting in; for the innermost frame it is the last call it made (the VM saves a frame's
position only at calls), and a frame that has made no call yet is put on its method's header
line. So `--lines` shows self samples on lines with calls and on the header line, never on a
line the VM cannot place them on.

A stack deeper than --sample-depth keeps its innermost frames under a
`[truncated: N frames]` root (N frames lost); the report says how many samples were cut.";

/// Print what a profile says: where time went, the calls, the VM's states.
#[derive(Parser, Debug)]
#[command(name = "tally report", after_help = REPORT_AFTER_HELP)]
struct ReportArgs {
    /// A profile written by `tally --profile` or `tally record`.
    file: PathBuf,
    /// Rows of the flat profile and edges to show.
    #[arg(long, default_value_t = 25)]
    top: usize,
    /// Hide call-tree nodes below this percentage of samples.
    #[arg(long, default_value_t = 1.0)]
    min_percent: f64,
    /// Deepest call-tree level shown (1 shows only the roots).
    #[arg(long, default_value_t = 40)]
    depth: usize,
    /// Instead of the report, list METHOD's source (e.g. 'Vector>>forEach:', or a part of a
    /// name) with its samples per line: self (innermost on that line) and total (on the
    /// stack at that line), like `perf annotate` or `pprof -list`.
    #[arg(long, value_name = "METHOD", conflicts_with_all = ["vm", "amortization"])]
    lines: Option<String>,
    /// Instead of the report, the VM profiler's view (after Cog's VMProfiler): samples in
    /// generated code per tier against the VM's own code (interpreter, primitives, GC,
    /// runtime), then the --top heaviest compiled methods with their samples by bytecode
    /// range (inlined methods' ranges included) with the bytecodes and source line of each;
    /// ranges below --min-percent of their method are hidden.
    #[arg(long, conflicts_with = "amortization")]
    vm: bool,
    /// Instead of the report, the amortization analysis (Zimmer & Diehl) of a profile
    /// recorded with `--count-calls`: per method and tier its calls, time and cost per call,
    /// and for each recompilation whether it paid for itself (compile time plus the calls at
    /// the new cost against the same calls at the old cost), with the gain. A method's
    /// first tier often runs for only tens of milliseconds: record at a high rate (`--rate
    /// 10000`) so that its cost there is priced from enough samples for a verdict.
    #[arg(long)]
    amortization: bool,
    /// Instead of the text report, an interactive HTML report written to -o FILE: one
    /// self-contained page (any browser, no network) with the call graph per (method, tier)
    /// coloured by the amortization verdicts (profiles recorded with --count-calls have
    /// them) and a recompilation diagram per method, a flame graph with tiers and search, a
    /// timeline of compiles, deopts and GCs, the VM breakdown and the source with samples
    /// per line. Call-graph nodes below --min-percent of the samples are left out.
    #[arg(long, requires = "output", conflicts_with_all = ["vm", "amortization", "lines"])]
    html: bool,
    /// The file --html writes.
    #[arg(short, long, value_name = "FILE", requires = "html")]
    output: Option<PathBuf>,
    /// Let --html overwrite an existing -o FILE.
    #[arg(long, requires = "html")]
    force: bool,
}

/// `tally report --vm`: where time goes by VM component and inside compiled code.
fn report_vm(p: &Profile, top: usize, min_percent: f64) -> String {
    // Each file read once; one that cannot be read shows no source text.
    let files: std::cell::RefCell<std::collections::HashMap<String, Option<Vec<String>>>> =
        Default::default();
    let source = |file: &str, line: u32| -> Option<String> {
        let mut files = files.borrow_mut();
        let lines = files
            .entry(file.to_string())
            .or_insert_with(|| {
                std::fs::read_to_string(file)
                    .ok()
                    .map(|t| t.lines().map(str::to_string).collect())
            })
            .as_ref()?;
        lines.get(line.checked_sub(1)? as usize).cloned()
    };
    report::VmProfile::new(p).render_text(top, min_percent, &source)
}

/// `tally report --lines METHOD`: each matching method's source with samples per line.
fn report_lines(p: &Profile, method: &str) -> Result<String, String> {
    let found = report::LineProfile::for_name(p, method);
    if found.is_empty() {
        return Err(format!("no method named like '{method}' in the profile"));
    }
    let mut out = String::new();
    for lp in &found {
        let source = match std::fs::read_to_string(&lp.file) {
            Ok(text) => Some(text),
            Err(e) => {
                outln!(
                    out,
                    "note: cannot read {} ({e}); showing line numbers only",
                    if lp.file.is_empty() {
                        "the source file"
                    } else {
                        &lp.file
                    }
                );
                None
            }
        };
        outln!(out, "{}", lp.render_text(source.as_deref()));
    }
    Ok(out)
}

/// Writes a finished report; a closed pipe (`tally report f | head`) is not an error.
fn print_out(text: &str) {
    use std::io::Write as _;
    let mut stdout = std::io::stdout().lock();
    let _ = stdout
        .write_all(text.as_bytes())
        .and_then(|_| stdout.flush());
}

/// The rate samples were really taken at, beside the rate asked for: CPU-time triggers
/// cannot beat the kernel tick, and a waiting program takes fewer CPU-time samples.
fn achieved_rate(taken: u64, duration_ns: u64) -> String {
    if taken == 0 || duration_ns == 0 {
        return String::new();
    }
    format!(
        " ({:.0} samples per second)",
        taken as f64 / (duration_ns as f64 / 1e9)
    )
}

/// A CPU-time timer fires only on kernel ticks that find the VM thread running, so on a CPU
/// shared with other work the kernel merges expiries (overruns): samples never taken, or
/// CBS windows never opened where the ticks only open windows.
fn merged_ticks(c: &SampleCounters, wall_clock: bool) -> Option<String> {
    (c.ticks_merged > 0).then(|| {
        // A tick that takes a sample also opens a window when both run, so these overlap.
        let delivered = c.taken.max(c.cbs_ticks);
        let share = 100.0 * c.ticks_merged as f64 / (c.ticks_merged + delivered).max(1) as f64;
        let lost = if c.taken > 0 || c.cbs_ticks == 0 {
            "their samples were never taken"
        } else {
            "the CBS windows they would have opened never opened"
        };
        let why = if wall_clock {
            "the wall-clock timer's signal was still pending when the next expiry came (the \
             VM thread was not scheduled, or the rate is too high for the handler)"
        } else {
            "the CPU-time timer fires only on kernel ticks that find the VM thread running, and \
             misses them while it shares its CPU (`--sampler perf` does not)"
        };
        format!(
            "the kernel merged {} timer expiries into later ones ({share:.1} % of the ticks), so \
             {lost}: {why}",
            c.ticks_merged
        )
    })
}

/// Samples skipped because taking samples had used more of the thread's time than the
/// program: the rate is too high for the stack's depth, and the profile holds fewer samples
/// than ticks.
fn slow_samples(c: &SampleCounters) -> Option<String> {
    (c.dropped_slow > 0).then(|| {
        format!(
            "{} of {} samples ({:.1} %) were skipped because taking samples had used more of \
             the thread's time than the program (deep stacks at a high rate, or an \
             unoptimised build), so that sampling never takes over half of it: lower --rate \
             or --sample-depth to keep them",
            c.dropped_slow,
            c.taken,
            100.0 * c.dropped_slow as f64 / c.taken.max(1) as f64
        )
    })
}

/// Below this many CBS windows a run's call graph is rough: on DeltaBlue, 3:32 at 35 windows a
/// run reached 79 % overlap with the exact graph, at 65 windows 85 % (ACCURACY.md, item 3).
const FEW_CBS_WINDOWS: u64 = 50;

/// CBS samples only inside its windows, one per tick, so a short run gets few of them and a
/// rough call graph however many edges it shows.
fn few_cbs_windows(cbs_on: bool, c: &SampleCounters) -> Option<String> {
    (cbs_on && c.cbs_ticks < FEW_CBS_WINDOWS).then(|| {
        format!(
            "CBS opened at most {} windows in this run; a call graph from fewer than about \
             {FEW_CBS_WINDOWS} is rough (DeltaBlue: 79 % overlap with the exact graph at 35 \
             windows, 85 % at 65): raise --rate for a run this short",
            c.cbs_ticks
        )
    })
}

fn report(args: ReportArgs) -> Result<(), String> {
    let p = read(&args.file)?;
    if let Some(method) = &args.lines {
        print_out(&report_lines(&p, method)?);
        return Ok(());
    }
    if args.vm {
        print_out(&report_vm(&p, args.top, args.min_percent));
        return Ok(());
    }
    if args.html {
        let output = args
            .output
            .as_deref()
            .expect("clap requires -o with --html");
        let options = report::HtmlOptions {
            graph_min_percent: args.min_percent,
            ..report::HtmlOptions::default()
        };
        let page = report::render_html(&p, &|file| std::fs::read_to_string(file).ok(), &options);
        write_output(output, page.as_bytes(), args.force)?;
        say!(
            "tally: wrote {} ({} KiB); open it in a browser",
            output.display(),
            page.len().div_ceil(1024)
        );
        return Ok(());
    }
    if args.amortization {
        let a = report::Amortization::new(&p).ok_or_else(|| {
            format!(
                "{} has no calls counted per tier: record it with --count-calls",
                args.file.display()
            )
        })?;
        print_out(&a.render_text(args.top));
        return Ok(());
    }
    let mut out = String::new();
    let h = &p.header;
    outln!(
        out,
        "Profile of {} {} ({} {})",
        h.program,
        h.args.join(" "),
        h.vm_name,
        h.vm_version
    );
    let s = &h.sampler;
    outln!(
        out,
        "sampler: {} / {} at {} Hz ({}{}){}{}",
        s.trigger,
        s.mechanism,
        s.rate_hz,
        if s.trigger_source.is_empty() {
            "no trigger"
        } else {
            &s.trigger_source
        },
        match (s.trigger.as_str(), s.is_wall_clock()) {
            ("none", _) => "",
            (_, true) => "; samples measure wall-clock time",
            (_, false) => "; samples measure CPU time",
        },
        s.cbs
            .map(|c| format!("; CBS stride {} samples {}", c.stride, c.samples))
            .unwrap_or_default(),
        if s.exhaustive {
            "; exhaustive counts"
        } else {
            ""
        }
    );
    if !s.trigger_note.is_empty() {
        outln!(out, "note: {}", s.trigger_note);
    }
    let c = &p.counters;
    if let Some(warning) = merged_ticks(c, s.is_wall_clock()) {
        outln!(out, "note: {warning}");
    }
    if let Some(warning) = few_cbs_windows(s.cbs.is_some(), c) {
        outln!(out, "note: {warning}");
    }
    if let Some(warning) = slow_samples(c) {
        outln!(out, "note: {warning}");
    }
    if let Some(note) = p.truncation_note() {
        outln!(out, "note: {note}");
    }
    outln!(
        out,
        "samples: {} taken, {} recorded, {} dropped; {:.3} s of program time{}\n",
        c.taken,
        c.recorded,
        c.dropped(),
        p.duration_ns() as f64 / 1e9,
        achieved_rate(c.taken, p.duration_ns())
    );
    if !p.samples.is_empty() {
        outln!(out, "== Flat profile (self and total share of samples)");
        outln!(
            out,
            "{}",
            report::FlatProfile::new(&p).render_text(args.top)
        );
        outln!(out, "== Call tree");
        let symbols = p.symbols();
        let cct = Cct::from_samples(&p.samples, &symbols);
        outln!(
            out,
            "{}",
            report::render_call_tree(&cct, &symbols, args.min_percent, args.depth)
        );
        outln!(out, "== VM states");
        outln!(out, "{}", report::StateBreakdown::new(&p).render_text());
    }
    if let Some(tiers) = report::TierReport::new(&p) {
        outln!(
            out,
            "== Tiers (compiled code and the adaptive controller's decisions)"
        );
        outln!(out, "{}", tiers.render_text(args.top));
    }
    for (source, title) in [
        (EdgeSource::Cbs, "sampled by CBS"),
        (EdgeSource::Exact, "exact counts"),
    ] {
        let rows = report::hottest_edges(&p, source, args.top);
        if !rows.is_empty() {
            outln!(out, "== Hottest call edges ({title})");
            outln!(out, "{}", report::render_edges(&rows));
        }
    }
    if let Some(acc) = report::accuracy_against_exact(&p, TopN::Count(10)) {
        outln!(
            out,
            "== Samples against this run's exact counts (top 10 methods)"
        );
        outln!(
            out,
            "method overlap {:.1} %, unweighted {:.1} %, weighted {:.1} %{}",
            acc.method_overlap * 100.0,
            acc.unweighted * 100.0,
            acc.weighted * 100.0,
            acc.edge_overlap
                .map(|o| format!(", call-edge overlap {:.1} %", o * 100.0))
                .unwrap_or_default()
        );
    }
    print_out(&out);
    Ok(())
}

/// Compare two profiles: accuracy metrics and a per-method diff.
#[derive(Parser, Debug)]
#[command(name = "tally compare")]
struct CompareArgs {
    /// The reference profile (e.g. an exhaustive or high-rate run).
    reference: PathBuf,
    /// The profile judged against it.
    candidate: PathBuf,
    /// Methods considered "hot" by the top-N metrics.
    #[arg(long, default_value_t = 10)]
    top: usize,
    /// Rows of the per-method diff.
    #[arg(long, default_value_t = 25)]
    rows: usize,
}

fn compare(args: CompareArgs) -> Result<(), String> {
    let a = read(&args.reference)?;
    let b = read(&args.candidate)?;
    let mut out = String::new();
    outln!(
        out,
        "{}",
        report::describe("A (reference)", &args.reference.display().to_string(), &a)
    );
    outln!(
        out,
        "{}",
        report::describe("B (candidate)", &args.candidate.display().to_string(), &b)
    );
    if let Some(w) = report::program_mismatch(&a, &b) {
        say!("warning: {w}");
        outln!(out, "warning: {w}");
    }
    let c = report::compare(&a, &b, TopN::Count(args.top));
    outln!(out, "\n{}", c.render_text(args.rows));
    print_out(&out);
    Ok(())
}

#[derive(Clone, Copy, Debug, ValueEnum)]
enum Format {
    /// pprof protobuf, gzipped (`go tool pprof`, Pyroscope).
    Pprof,
    /// Folded stacks, one line per stack (flame graph tools).
    Folded,
    /// A flame graph SVG (inferno).
    Flamegraph,
    /// speedscope JSON (https://www.speedscope.app).
    Speedscope,
    /// Firefox Profiler processed-profile JSON (https://profiler.firefox.com).
    Firefox,
    /// Chrome trace events: the event timeline (chrome://tracing, Perfetto).
    Chrome,
}

/// Convert a profile for other tools.
#[derive(Parser, Debug)]
#[command(
    name = "tally export",
    after_help = "Also: tally export diff-flamegraph BEFORE AFTER -o diff.svg\n  a differential \
                  flame graph, red where AFTER spends a larger share of samples, blue where smaller"
)]
struct ExportArgs {
    #[arg(value_enum)]
    format: Format,
    /// The profile to convert.
    file: PathBuf,
    /// Where to write the result; `-` writes to standard output.
    #[arg(short, long)]
    output: PathBuf,
    /// Overwrite the output file if it exists.
    #[arg(long)]
    force: bool,
    #[command(flatten)]
    flame: FlameArgs,
}

/// How flame graphs are drawn (`flamegraph` and `diff-flamegraph`).
#[derive(clap::Args, Debug)]
struct FlameArgs {
    /// The flame graph's title (default: the program and its arguments).
    #[arg(long)]
    title: Option<String>,
    /// Draw roots at the top (an icicle graph).
    #[arg(long)]
    inverted: bool,
    /// Image width in pixels (default 1200).
    #[arg(long, value_parser = clap::value_parser!(u32).range(100..=100_000))]
    width: Option<u32>,
}

impl FlameArgs {
    fn options(&self, default_title: String) -> export::folded::FlameOptions {
        export::folded::FlameOptions {
            title: self.title.clone().unwrap_or(default_title),
            inverted: self.inverted,
            width: self.width.map(|w| w as usize),
        }
    }
}

fn program_line(p: &Profile) -> String {
    format!("{} {}", p.header.program, p.header.args.join(" "))
        .trim_end()
        .to_string()
}

/// Writes `bytes` to `output`, or to standard output when it is `-`.
fn emit(output: &Path, bytes: &[u8], force: bool) -> Result<(), String> {
    if output == Path::new("-") {
        use std::io::Write as _;
        let mut stdout = std::io::stdout().lock();
        return stdout
            .write_all(bytes)
            .and_then(|_| stdout.flush())
            .map_err(|e| format!("cannot write to standard output: {e}"));
    }
    write_output(output, bytes, force)?;
    say!("wrote {}", output.display());
    Ok(())
}

fn export(args: ExportArgs) -> Result<(), String> {
    let p = read(&args.file)?;
    let bytes = match args.format {
        Format::Pprof => export::pprof::to_pb_gz(&p),
        Format::Folded => export::folded::to_folded(&p).into_bytes(),
        Format::Flamegraph => {
            let mut title = program_line(&p);
            let truncated = p.truncated_samples();
            if truncated > 0 {
                title += &format!(" ({truncated} samples truncated)");
            }
            export::folded::to_svg(&export::folded::to_folded(&p), &args.flame.options(title))
                .map_err(|e| format!("{}: {e}", args.file.display()))?
        }
        Format::Speedscope => json(&export::speedscope::to_json(&p)),
        Format::Firefox => json(&export::firefox::to_json(&p)),
        Format::Chrome => json(&export::chrome::to_json(&p)),
    };
    emit(&args.output, &bytes, args.force)
}

/// A differential flame graph of two profiles: the second's stacks, red where a frame took a
/// larger share of samples than in the first, blue where smaller.
#[derive(Parser, Debug)]
#[command(name = "tally export diff-flamegraph")]
struct DiffFlameArgs {
    /// The profile before (the baseline).
    before: PathBuf,
    /// The profile after (whose shape is drawn).
    after: PathBuf,
    /// Where to write the SVG; `-` writes to standard output.
    #[arg(short, long)]
    output: PathBuf,
    /// Overwrite the output file if it exists.
    #[arg(long)]
    force: bool,
    #[command(flatten)]
    flame: FlameArgs,
}

fn diff_flamegraph(args: DiffFlameArgs) -> Result<(), String> {
    let a = read(&args.before)?;
    let b = read(&args.after)?;
    if let Some(w) = report::program_mismatch(&a, &b) {
        say!("warning: {w}");
    }
    let title = format!("{} → {}", program_line(&a), program_line(&b));
    let svg = export::folded::to_diff_svg(
        &export::folded::to_folded(&a),
        &export::folded::to_folded(&b),
        &args.flame.options(title),
    )?;
    emit(&args.output, &svg, args.force)
}

fn json(v: &serde_json::Value) -> Vec<u8> {
    serde_json::to_vec(v).expect("JSON values serialize")
}

fn args_start_with(first: &Option<std::ffi::OsString>, word: &str) -> bool {
    first.as_deref().is_some_and(|a| a == word)
}

/// Runs `tally report|compare|export ARGS…`; `None` when `command` is not one of them.
pub fn dispatch(command: &str, args: Vec<std::ffi::OsString>) -> Option<ExitCode> {
    let name = format!("tally {command}");
    let argv_peek = args.first().cloned();
    let argv = std::iter::once(std::ffi::OsString::from(name)).chain(args);
    let result = match command {
        "report" => report(ReportArgs::parse_from(argv)),
        "compare" => compare(CompareArgs::parse_from(argv)),
        "export" if args_start_with(&argv_peek, "diff-flamegraph") => {
            diff_flamegraph(DiffFlameArgs::parse_from(
                std::iter::once(std::ffi::OsString::from("tally export diff-flamegraph"))
                    .chain(argv.skip(2)),
            ))
        }
        "export" => export(ExportArgs::parse_from(argv)),
        _ => return None,
    };
    Some(match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            say!("error: {e}");
            ExitCode::from(1)
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn merged_timer_ticks_are_pointed_out() {
        let mut c = SampleCounters {
            taken: 300,
            recorded: 300,
            ..SampleCounters::default()
        };
        assert_eq!(merged_ticks(&c, false), None);
        c.ticks_merged = 100;
        let note = merged_ticks(&c, false).expect("100 of 400 ticks merged");
        assert!(
            note.starts_with("the kernel merged 100 timer expiries into later ones (25.0 %"),
            "{note}"
        );
        assert!(note.contains("samples were never taken"), "{note}");
        // Ticks that only open CBS windows.
        let cbs_only = SampleCounters {
            cbs_ticks: 300,
            ticks_merged: 100,
            ..SampleCounters::default()
        };
        let note = merged_ticks(&cbs_only, false).expect("100 of 400 CBS ticks merged");
        assert!(note.contains("(25.0 % of the ticks)"), "{note}");
        assert!(
            note.contains("CBS windows they would have opened"),
            "{note}"
        );
    }

    #[test]
    fn merged_wall_clock_expiries_are_not_blamed_on_the_cpu_timer() {
        let c = SampleCounters {
            taken: 300,
            recorded: 300,
            ticks_merged: 100,
            ..SampleCounters::default()
        };
        let note = merged_ticks(&c, true).expect("100 of 400 ticks merged");
        assert!(note.contains("wall-clock timer"), "{note}");
        assert!(!note.contains("CPU-time timer"), "{note}");
    }

    #[test]
    fn samples_skipped_for_pacing_are_pointed_out() {
        let mut c = SampleCounters {
            taken: 400,
            recorded: 300,
            dropped_slow: 100,
            ..SampleCounters::default()
        };
        let note = slow_samples(&c).expect("100 of 400 skipped");
        assert!(
            note.starts_with("100 of 400 samples (25.0 %) were skipped"),
            "{note}"
        );
        assert!(
            note.contains("lower --rate or --sample-depth to keep them"),
            "{note}"
        );
        c.dropped_slow = 0;
        assert_eq!(slow_samples(&c), None);
    }

    #[test]
    fn a_call_graph_from_few_windows_is_pointed_out() {
        let few = SampleCounters {
            cbs_ticks: 12,
            ..SampleCounters::default()
        };
        let note = few_cbs_windows(true, &few).expect("12 windows are few");
        assert!(note.starts_with("CBS opened at most 12 windows"), "{note}");
        assert!(note.contains("raise --rate"), "{note}");
        assert_eq!(few_cbs_windows(false, &few), None, "no CBS, no note");
        let enough = SampleCounters {
            cbs_ticks: FEW_CBS_WINDOWS,
            ..SampleCounters::default()
        };
        assert_eq!(few_cbs_windows(true, &enough), None);
    }

    #[test]
    fn the_achieved_rate_is_samples_per_second_of_program_time() {
        assert_eq!(
            achieved_rate(500, 2_000_000_000),
            " (250 samples per second)"
        );
        assert_eq!(achieved_rate(0, 2_000_000_000), "");
    }
}
