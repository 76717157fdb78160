//! `tally disasm METHOD`: print a method's bytecode with source positions and, with a
//! compiling tier, what that tier compiles it into.

use std::process::ExitCode;

use clap::Parser;
use tally_vm::{Vm, VmOptions};

/// Print the bytecode of a method (and of the blocks it creates): each instruction with its
/// index, its operands named (selectors, constants) and the source line and column it came
/// from. Bytecode indices are what profiles show as `@N` and what JIT code maps its machine
/// code back to.
#[derive(Parser)]
#[command(
    name = "tally disasm",
    after_help = "Examples:\n  tally disasm 'Integer>>to:do:'\n  tally disasm -cp SOM/Smalltalk:Examples/AreWeFastYet/Core 'Vector>>forEach:'\n  tally disasm 'Vector class>>new:'\n  tally disasm --tier=baseline 'Integer>>max:'   with the baseline's machine code\n  tally disasm --tier=opt --show=tally-ir,ir 'Integer>>max:'   the optimizing tier's two IRs\n  tally disasm --tier=baseline --show=machine --gc=gencopy 'Vector>>append:'   with write barriers\n  tally disasm Vector                    every method of Vector and of Vector class"
)]
struct DisasmArgs {
    /// `Class>>selector`, `Class class>>selector`, or `Class` for all of a class's methods
    method: String,
    /// Class path: directories separated by ':' (also spelled -cp); the embedded library
    /// serves classes it does not define
    #[arg(long, value_name = "DIR:DIR…")]
    classpath: Vec<String>,
    /// Also show what this tier compiles each method and block into: `baseline` prints the
    /// template compiler's machine code (x86-64) by bytecode index; `opt` and `quick`
    /// Tally's IR with its frame states, Cranelift's IR and the machine code, annotated
    /// with bytecode indices
    #[arg(long, value_enum, default_value_t = crate::TierChoice::Interp)]
    tier: crate::TierChoice,
    /// Which parts to print, comma-separated: `bytecode`; with a compiling tier also
    /// `machine` (machine code); with `--tier=opt` or `quick` also `ir` (Cranelift's IR,
    /// which does not depend on the instruction set) and `tally-ir` (Tally's IR of the
    /// method, with its frame states); the baseline tier has no IR. Default: all the tier has. Stubs and the yieldpoint flag, whose
    /// addresses change from run to run, are printed by name (`stub:send`,
    /// `addr:yieldpoint_flag`).
    #[arg(long, value_enum, value_delimiter = ',', value_name = "PART,…")]
    show: Vec<Part>,
    /// The collector the code is compiled for: under a generational plan (gencopy,
    /// genimmix) every store into the heap carries the write barrier
    #[arg(long = "gc", value_name = "PLAN", default_value = "genimmix", value_parser = crate::parse_gc_plan)]
    gc_plan: tally_vm::GcPlan,
    /// With `--tier=opt`: print the Tally IR on stderr after the named phases of each
    /// compile (`build`, a pass's name, several separated by commas, or `all`; see
    /// `tally --help`)
    #[arg(long, value_name = "PHASE|all")]
    print_ir_after: Option<String>,
    /// Print on stderr how long each phase of compilation took, summed over the listings,
    /// and the Cranelift instructions the optimizing tier's lowering wrote, by what they lower
    #[arg(long)]
    time_passes: bool,
}

/// A part of `tally disasm`'s output (`--show`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
enum Part {
    Bytecode,
    /// Tally's own IR (`--tier=opt`): SSA values, guards, frame states.
    TallyIr,
    Ir,
    Machine,
}

pub fn main(args: Vec<std::ffi::OsString>) -> ExitCode {
    let argv = std::iter::once(std::ffi::OsString::from("tally disasm")).chain(
        args.into_iter()
            .map(|a| if a == "-cp" { "--classpath".into() } else { a }),
    );
    let args = DisasmArgs::parse_from(argv);
    let options = VmOptions {
        class_path: crate::class_path(&args.classpath),
        heap: tally_vm::HeapOptions {
            plan: args.gc_plan,
            ..tally_vm::HeapOptions::default()
        },
        ..VmOptions::default()
    };
    let shows = |part| args.show.is_empty() || args.show.contains(&part);
    let compiled = shows(Part::TallyIr) || shows(Part::Ir) || shows(Part::Machine);
    if args.tier == crate::TierChoice::Interp && !args.show.is_empty() && compiled {
        say!("error: --show=ir and --show=machine need a compiling tier (--tier=baseline or opt)");
        return ExitCode::from(2);
    }
    let optimizing = matches!(args.tier, crate::TierChoice::Opt | crate::TierChoice::Quick);
    if args.show.contains(&Part::TallyIr) && !optimizing {
        say!("error: --show=tally-ir is the optimizing tier's IR; it needs --tier=opt or quick");
        return ExitCode::from(2);
    }
    if args.print_ir_after.is_some() && !optimizing {
        say!(
            "error: --print-ir-after prints the optimizing tier's IR; it needs --tier=opt or quick"
        );
        return ExitCode::from(2);
    }
    let diagnostics =
        match crate::compile_diagnostics(args.print_ir_after.as_deref(), args.time_passes) {
            Ok(d) => d,
            Err(e) => {
                say!("error: --print-ir-after: {e}");
                return ExitCode::from(2);
            }
        };
    let run = |mut vm: Vm| match args.tier {
        crate::TierChoice::Interp => vm.disassemble(&args.method, true, None),
        tier => {
            // `adaptive` shows the first tier it compiles to.
            let tier = match tier {
                crate::TierChoice::Opt => tally_vm::jit::Tier::Opt,
                crate::TierChoice::Quick => tally_vm::jit::Tier::Quick,
                _ => tally_vm::jit::Tier::Baseline,
            };
            let mut generator = tally_jit::Compiler::new(tier)
                .map_err(|e| tally_vm::VmError::Fatal(format!("--tier={}: {e}", tier.name())))?;
            generator.set_diagnostics(diagnostics.clone());
            generator.set_listing_parts(tally_jit::ListingParts {
                tally_ir: shows(Part::TallyIr),
                ir: shows(Part::Ir),
                machine: shows(Part::Machine),
            });
            let generator: Option<&mut dyn tally_vm::jit::CodeGenerator> =
                compiled.then_some(&mut generator);
            vm.disassemble(&args.method, shows(Part::Bytecode), generator)
        }
    };
    let outcome = Vm::new(options).and_then(run);
    if let Some(times) = &diagnostics.times {
        say!("{}", times.report().trim_end());
    }
    match outcome {
        Ok(text) => {
            print!("{text}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            say!("error: {e}");
            ExitCode::from(1)
        }
    }
}
