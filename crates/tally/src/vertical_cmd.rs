//! `tally vertical TOOL …`: instrumented runs (vertical profiling, after Javana): the program
//! runs interpreted with every memory access and VM event reported to a tool; and `phases`,
//! MonitorMethod's offline choice of phases (`vertical_phases.rs`).

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use tally_vm::tally_vertical::cache::parse_levels;
use tally_vm::tally_vertical::cache_tool::CacheTool;
use tally_vm::tally_vertical::lifetimes::LifetimeTool;
use tally_vm::tally_vertical::trace::{Record, TraceReader, TraceWriter};
use tally_vm::tally_vertical::Instrument;
use tally_vm::{Vm, VmError, VmOptions};

const AFTER_HELP: &str = "\
The program runs interpreted, in a dispatch loop of its own that reports, before every
instruction, the frame slots, fields and block-context slots it reads or writes; the Array
primitives report the elements, and the VM the objects it makes and the methods entered and
left. The program's own output goes to stdout as usual; the tool's report to stderr, or to
the file given with -o.

Examples:
  tally vertical cache -- -cp Examples/AreWeFastYet:Smalltalk Harness Sieve 1 20
  tally vertical trace -o sieve.trace -- Sieve.som
  tally vertical read --head 20 sieve.trace
  tally vertical lifetimes --short 16K -- -cp Examples/AreWeFastYet:Examples/AreWeFastYet/Json:Smalltalk Harness Json 1 1
  tally vertical cache --levels L1:32K:64:8,L2:256K:64:4,L3:8M:64:16 --top 30 -o sieve.txt -- Sieve.som

Method-level phases (MonitorMethod) take three steps: a run that times every method, the
choice of phases here, and a run that reads counters at them:
  tally --phases-record db.times -cp $CP Harness.som DeltaBlue 20 0
  tally vertical phases db.times -o db.phases
  tally --phases db.phases -cp $CP Harness.som DeltaBlue 20 0";

/// Instrumented runs: every memory access of the program through a tool.
#[derive(Parser, Debug)]
#[command(name = "tally vertical", version, after_help = AFTER_HELP)]
struct Cli {
    #[command(subcommand)]
    tool: Tool,
}

#[derive(Subcommand, Debug)]
enum Tool {
    /// Cache simulation: each access through a set-associative, write-back, write-allocate
    /// hierarchy (LRU), misses per method, per source line of the method with the most, and
    /// per class of the object accessed.
    Cache(CacheArgs),
    /// The memory address trace: every event and access of the run, streamed to an LZ4
    /// file as it goes (read it with `tally vertical read`).
    Trace(TraceArgs),
    /// Reads a trace: its records counted by kind, accesses by place, and with --head the
    /// first records.
    Read(ReadArgs),
    /// Object lifetimes (creation to last access, in bytes allocated) per class and
    /// allocation site, and refactoring hints: the sites whose objects mostly die young,
    /// with where they were last used. Runs under MarkSweep, which does not move objects.
    Lifetimes(LifetimeArgs),
    /// Method-level phases (MonitorMethod), offline: from the method times of a run with
    /// `--phases-record`, the phases (methods taking at least θ_weight of the run and θ_grain
    /// per call) under a grid of thresholds with each selection's estimated overhead; the
    /// finest within --budget is written with -o for a counting run (`tally --phases FILE`).
    Phases(crate::vertical_phases::PhasesArgs),
}

#[derive(clap::Args, Debug)]
struct LifetimeArgs {
    /// Lifetimes under this many bytes allocated count as short (K, M suffixes allowed).
    #[arg(long, value_name = "BYTES", default_value = "64K", value_parser = crate::parse_size)]
    short: usize,
    /// Rows per table.
    #[arg(long, value_name = "N", default_value_t = 20)]
    top: usize,
    #[command(flatten)]
    run: RunArgs,
}

#[derive(clap::Args, Debug)]
struct TraceArgs {
    /// The trace file to write.
    #[arg(short = 'o', long, value_name = "FILE")]
    output: PathBuf,
    /// Overwrite the trace file.
    #[arg(long)]
    force: bool,
    /// The program: `[-cp DIR:DIR…] CLASS|FILE.som [ARGS]`, after `--`.
    #[arg(last = true, required = true, value_name = "PROGRAM")]
    program: Vec<String>,
}

#[derive(clap::Args, Debug)]
struct ReadArgs {
    /// A trace written by `tally vertical trace`.
    file: PathBuf,
    /// Print the first N records too.
    #[arg(long, value_name = "N", default_value_t = 0)]
    head: usize,
}

#[derive(clap::Args, Debug)]
struct CacheArgs {
    /// The levels, first first: NAME:SIZE:LINE:WAYS, comma-separated (sizes in bytes or with
    /// K, M, G).
    #[arg(long, value_name = "SPEC", default_value = "L1:32K:64:8,L2:1M:64:16")]
    levels: String,
    /// Rows per table.
    #[arg(long, value_name = "N", default_value_t = 20)]
    top: usize,
    #[command(flatten)]
    run: RunArgs,
}

/// Where the report goes and what runs.
#[derive(clap::Args, Debug)]
struct RunArgs {
    /// Write the report to FILE instead of stderr (not over an existing file without
    /// --force).
    #[arg(short = 'o', long, value_name = "FILE")]
    output: Option<PathBuf>,
    /// Overwrite the report file.
    #[arg(long)]
    force: bool,
    /// The program: `[-cp DIR:DIR…] CLASS|FILE.som [ARGS]`, after `--`.
    #[arg(last = true, required = true, value_name = "PROGRAM")]
    program: Vec<String>,
}

pub fn main(args: Vec<std::ffi::OsString>) -> ExitCode {
    let argv = std::iter::once(std::ffi::OsString::from("tally vertical")).chain(args);
    let cli = Cli::parse_from(argv);
    let mut plan = tally_vm::GcPlan::default();
    let (tool, run): (Box<dyn Instrument>, RunArgs) = match cli.tool {
        Tool::Cache(a) => {
            let tool = match parse_levels(&a.levels).and_then(|l| CacheTool::new(l, a.top)) {
                Ok(t) => t,
                Err(e) => {
                    say!("error: --levels: {e}");
                    return ExitCode::from(2);
                }
            };
            (Box::new(tool), a.run)
        }
        Tool::Trace(a) => {
            let if_exists = tally_output::IfExists::from_force(a.force);
            let file = match tally_output::OutputFile::create(&a.output, if_exists) {
                Ok(f) => f,
                Err(e) => {
                    say!("error: the trace: {e}");
                    return ExitCode::from(2);
                }
            };
            let writer = TraceWriter::new(std::io::BufWriter::with_capacity(1 << 20, file));
            let run = RunArgs {
                output: None,
                force: false,
                program: a.program,
            };
            (Box::new(writer), run)
        }
        Tool::Read(a) => return read(&a),
        Tool::Phases(a) => return crate::vertical_phases::run(&a),
        Tool::Lifetimes(a) => {
            plan = tally_vm::GcPlan::MarkSweep;
            (Box::new(LifetimeTool::new(a.short as u64, a.top)), a.run)
        }
    };
    if let Some(out) = &run.output {
        if let Err(e) = crate::check_new_file(out, run.force, "the report") {
            say!("error: {e}");
            return ExitCode::from(2);
        }
    }
    let (class_path, program) = split_class_path(&run.program);
    if program.is_empty() {
        say!("error: no program after `--` (give CLASS or FILE.som, after -cp DIRS if needed)");
        return ExitCode::from(2);
    }
    let options = VmOptions {
        class_path: crate::class_path(&class_path),
        heap: tally_vm::HeapOptions {
            plan,
            ..tally_vm::HeapOptions::default()
        },
        ..VmOptions::default()
    };
    let result = Vm::new(options).and_then(|mut vm| {
        vm.instrument(tool)?;
        let r = vm.run_main(&program);
        vm.flush();
        let failed = r.is_err() && !matches!(r, Err(VmError::Exit(0)));
        let tool = vm.finish_instrument(failed);
        let written = tool
            .map(|mut t| t.finish())
            .transpose()
            .map_err(|e| VmError::Output(format!("tally: {e}")))
            .and_then(|report| match (&run.output, report) {
                (Some(path), Some(report)) => tally_output::write(
                    path,
                    report.as_bytes(),
                    tally_output::IfExists::from_force(run.force),
                )
                .map_err(|e| VmError::Output(format!("tally: the report: {e}"))),
                (None, Some(report)) => {
                    say!("{report}");
                    Ok(())
                }
                (_, None) => Ok(()),
            });
        // The program's own failure is the run's status; a file not written is said too.
        match written {
            Err(e) if failed => {
                say!("{e}");
                r
            }
            Err(e) => Err(e),
            Ok(()) => r,
        }
    });
    match result {
        Ok(_) => ExitCode::SUCCESS,
        Err(VmError::Exit(code)) => ExitCode::from(code as u8),
        Err(e) => {
            say!("{e}");
            ExitCode::from(e.exit_code() as u8)
        }
    }
}

/// `tally vertical read`.
fn read(a: &ReadArgs) -> ExitCode {
    let file = match std::fs::File::open(&a.file) {
        Ok(f) => f,
        Err(e) => {
            say!("error: cannot read {}: {e}", a.file.display());
            return ExitCode::from(2);
        }
    };
    let reader = match TraceReader::new(std::io::BufReader::new(file)) {
        Ok(r) => r,
        Err(e) => {
            say!("error: {}: {e}", a.file.display());
            return ExitCode::from(1);
        }
    };
    let mut kinds: std::collections::BTreeMap<&str, u64> = Default::default();
    let mut places: std::collections::BTreeMap<(&str, &str), u64> = Default::default();
    let mut n = 0usize;
    for record in reader {
        let record = match record {
            Ok(r) => r,
            Err(e) => {
                say!("error: {}: {e}", a.file.display());
                return ExitCode::from(1);
            }
        };
        if n < a.head {
            println!("{record:?}");
        }
        n += 1;
        let kind = match &record {
            Record::Class { .. } => "class",
            Record::Method { .. } => "method",
            Record::Object { .. } => "object made",
            Record::Enter(_) => "method entered",
            Record::Exit { .. } => "method left",
            Record::Access(x) => {
                let k = match x.kind {
                    tally_vm::tally_vertical::cache::AccessKind::Load => "load",
                    tally_vm::tally_vertical::cache::AccessKind::Store => "store",
                };
                *places.entry((x.place.name(), k)).or_default() += 1;
                "access"
            }
        };
        *kinds.entry(kind).or_default() += 1;
    }
    println!("{}: {n} records", a.file.display());
    for (k, c) in &kinds {
        println!("  {c:>12}  {k}");
    }
    println!("accesses by place:");
    for ((p, k), c) in &places {
        println!("  {c:>12}  {p} {k}");
    }
    ExitCode::SUCCESS
}

/// `-cp DIRS` (or `--classpath DIRS`) in front of the program words, and the rest.
fn split_class_path(words: &[String]) -> (Vec<String>, Vec<String>) {
    let mut cp = Vec::new();
    let mut i = 0;
    while i + 1 < words.len() && (words[i] == "-cp" || words[i] == "--classpath") {
        cp.push(words[i + 1].clone());
        i += 2;
    }
    (cp, words[i..].to_vec())
}

#[cfg(test)]
mod tests {
    use super::split_class_path;

    #[test]
    fn the_class_path_comes_before_the_program() {
        let w = |s: &str| s.split_whitespace().map(String::from).collect::<Vec<_>>();
        assert_eq!(
            split_class_path(&w("-cp a:b -cp c Main x -cp")),
            (w("a:b c"), w("Main x -cp"))
        );
        assert_eq!(split_class_path(&w("Main.som")), (vec![], w("Main.som")));
    }
}
