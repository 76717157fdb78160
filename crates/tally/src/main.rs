//! `tally`: run a SOM program.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;
use tally_vm::{Vm, VmError, VmOptions};

const AFTER_HELP: &str = "\
Examples:
  tally Hello.som                       run the class in Hello.som (its directory joins the class path)
  tally -cp lib:app Main arg1 arg2      load Main from the class path and send it run: with the arguments
  tally -cp SOM/Smalltalk:SOM/TestSuite TestHarness
                                        run SOM's test suite with SOM's own core library

The main class is sent `run:` with an Array of the command-line words (its name first) if it
understands `run:`, else `run`. Classes are looked up on the class path first, then in Tally's
embedded standard library, so a directory that defines Object, Integer, … replaces ours.";

/// Tally: a virtual machine for SOM, the Simple Object Machine.
#[derive(Parser, Debug)]
#[command(name = "tally", version, about, after_help = AFTER_HELP)]
struct Cli {
    /// Class path: directories separated by ':' (also spelled -cp, as in other SOM VMs).
    #[arg(long = "classpath", value_name = "DIR:DIR…")]
    classpath: Vec<String>,

    /// Collect garbage every N allocations (exercises the GC; slow).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    gc_stress: Option<u64>,

    /// Upper bound of the heap, e.g. 64M, 2G (default: grows as needed).
    #[arg(long, value_name = "SIZE", value_parser = parse_size)]
    heap_size: Option<usize>,

    /// Print garbage-collection statistics to stderr when the program ends.
    #[arg(long)]
    gc_stats: bool,

    /// Deepest SOM call stack before "stack overflow" is reported.
    #[arg(long, value_name = "FRAMES", default_value_t = 100_000)]
    max_stack_depth: usize,

    /// The class name or .som file to run, then its arguments.
    #[arg(required = true, trailing_var_arg = true, allow_hyphen_values = true, value_name = "CLASS|FILE.som [ARGS]")]
    program: Vec<String>,
}

fn parse_size(s: &str) -> Result<usize, String> {
    let s = s.trim();
    let (digits, unit) = match s.char_indices().find(|(_, c)| !c.is_ascii_digit()) {
        Some((i, _)) => (&s[..i], s[i..].to_ascii_lowercase()),
        None => (s, String::new()),
    };
    let n: usize = digits.parse().map_err(|_| format!("'{s}' is not a size (examples: 512M, 2G, 1048576)"))?;
    let factor = match unit.trim_end_matches('b') {
        "" => 1,
        "k" => 1 << 10,
        "m" => 1 << 20,
        "g" => 1 << 30,
        _ => return Err(format!("unknown size unit in '{s}' (use K, M or G)")),
    };
    n.checked_mul(factor).ok_or_else(|| format!("'{s}' is too large"))
}

/// Other SOM VMs spell the class path `-cp`; clap cannot have a two-letter short flag.
fn normalize_args() -> Vec<String> {
    let mut out = Vec::new();
    let mut program_started = false;
    let mut expect_value = false;
    for (i, a) in std::env::args().enumerate() {
        if i > 0 && !program_started && !expect_value {
            if a == "-cp" {
                out.push("--classpath".to_string());
                expect_value = true;
                continue;
            }
            if !a.starts_with('-') {
                program_started = true;
            } else if !a.contains('=') && ["--classpath", "--gc-stress", "--heap-size", "--max-stack-depth"].contains(&a.as_str()) {
                expect_value = true;
                out.push(a);
                continue;
            }
        }
        expect_value = false;
        out.push(a);
    }
    out
}

fn main() -> ExitCode {
    let cli = Cli::parse_from(normalize_args());
    let class_path: Vec<PathBuf> =
        cli.classpath.iter().flat_map(|cp| cp.split(':')).filter(|d| !d.is_empty()).map(PathBuf::from).collect();
    let options = VmOptions {
        class_path,
        max_heap_bytes: cli.heap_size,
        gc_stress_every: cli.gc_stress,
        max_stack_depth: cli.max_stack_depth,
    };
    let result = Vm::new(options).and_then(|mut vm| {
        let r = vm.run_main(&cli.program);
        vm.flush();
        if cli.gc_stats {
            let s = vm.heap.stats();
            eprintln!(
                "gc: {} collections in {:.1} ms; {} objects ({} bytes) allocated; heap {} bytes in use of {} bytes",
                s.collections,
                s.gc_time.as_secs_f64() * 1e3,
                s.allocated_objects,
                s.allocated_bytes,
                s.heap_used_bytes,
                s.heap_limit_bytes
            );
        }
        r
    });
    match result {
        Ok(_) => ExitCode::SUCCESS,
        Err(VmError::Exit(code)) => ExitCode::from(code as u8),
        Err(e) => {
            eprintln!("{e}");
            ExitCode::from(e.exit_code() as u8)
        }
    }
}
