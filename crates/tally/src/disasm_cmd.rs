//! `tally disasm METHOD`: print a method's bytecode with source positions.

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
    after_help = "Examples:\n  tally disasm 'Integer>>to:do:'\n  tally disasm -cp SOM/Smalltalk:Examples/AreWeFastYet/Core 'Vector>>forEach:'\n  tally disasm 'Vector class>>new:'\n  tally disasm --tier=baseline 'Integer>>max:'   with Cranelift IR and machine code\n  tally disasm Vector                    every method of Vector and of Vector class"
)]
struct DisasmArgs {
    /// `Class>>selector`, `Class class>>selector`, or `Class` for all of a class's methods
    method: String,
    /// Class path: directories separated by ':' (also spelled -cp); the embedded library
    /// serves classes it does not define
    #[arg(long, value_name = "DIR:DIR…")]
    classpath: Vec<String>,
    /// Also show what this tier compiles each method into: `baseline` prints Cranelift's IR
    /// and the machine code, annotated with bytecode indices
    #[arg(long, value_enum, default_value_t = crate::TierChoice::Interp)]
    tier: crate::TierChoice,
}

pub fn main(args: Vec<std::ffi::OsString>) -> ExitCode {
    let argv = std::iter::once(std::ffi::OsString::from("tally disasm")).chain(
        args.into_iter()
            .map(|a| if a == "-cp" { "--classpath".into() } else { a }),
    );
    let args = DisasmArgs::parse_from(argv);
    let options = VmOptions {
        class_path: crate::class_path(&args.classpath),
        ..VmOptions::default()
    };
    let run = |mut vm: Vm| match args.tier {
        crate::TierChoice::Interp => vm.disassemble(&args.method, None),
        crate::TierChoice::Baseline | crate::TierChoice::Adaptive => {
            let mut generator = tally_jit::Baseline::new()
                .map_err(|e| tally_vm::VmError::Fatal(format!("--tier=baseline: {e}")))?;
            vm.disassemble(&args.method, Some(&mut generator))
        }
    };
    match Vm::new(options).and_then(run) {
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
