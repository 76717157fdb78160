//! `--phases-record FILE`, `--phases FILE` and `--phases-report FILE`: the command line's side
//! of method-level phases (MonitorMethod): files and messages; the VM times and counts.

use std::path::{Path, PathBuf};

use tally_vm::tally_vertical::phase_files::Phases;
use tally_vm::{Vm, VmError};

/// What the command line asked of phases.
pub(crate) enum PhasesRequest {
    None,
    Record {
        output: PathBuf,
        force: bool,
        tier: &'static str,
    },
    Count {
        file: PathBuf,
        report: Option<PathBuf>,
        force: bool,
    },
}

/// The program as the files name it: the main class (a file's name without `.som`) and its
/// arguments.
pub(crate) fn program_name(program: &[String]) -> String {
    let mut words = program.iter();
    let main = words.next().map_or(String::new(), |m| {
        let file = Path::new(m)
            .file_name()
            .map_or(m.clone(), |n| n.to_string_lossy().into_owned());
        file.strip_suffix(".som")
            .map_or(file.clone(), str::to_string)
    });
    std::iter::once(main)
        .chain(words.cloned())
        .collect::<Vec<_>>()
        .join(" ")
}

/// Before the run: the files it will write must be writable, and are replaced only with
/// `--force`.
pub(crate) fn check_outputs(request: &PhasesRequest) -> Result<(), String> {
    match request {
        PhasesRequest::Record { output, force, .. } => {
            crate::check_new_file(output, *force, "the method times")
        }
        PhasesRequest::Count {
            report: Some(r),
            force,
            ..
        } => crate::check_new_file(r, *force, "the phase report"),
        _ => Ok(()),
    }
}

/// Sets the VM up for the request, before the program runs.
pub(crate) fn start(
    vm: &mut Vm,
    request: &PhasesRequest,
    program: &[String],
) -> Result<(), VmError> {
    match request {
        PhasesRequest::None => Ok(()),
        PhasesRequest::Record { .. } => vm.record_method_times(),
        PhasesRequest::Count { file, .. } => {
            let text = std::fs::read_to_string(file).map_err(|e| {
                VmError::Load(format!(
                    "error: cannot read the phases in {}: {e}",
                    file.display()
                ))
            })?;
            let phases = Phases::parse(&text).map_err(|e| {
                VmError::Load(format!(
                    "error: cannot use the phases in {}: {e} (write them with `tally vertical phases`)",
                    file.display()
                ))
            })?;
            let here = program_name(program);
            if phases.program != here {
                say!(
                    "tally: warning: the phases in {} were chosen for `{}`, not `{here}`",
                    file.display(),
                    phases.program
                );
            }
            vm.count_phases(&phases)
        }
    }
}

/// After the run: the times written, or the report printed (and written as JSON).
pub(crate) fn finish(
    vm: &mut Vm,
    request: &PhasesRequest,
    program: &[String],
) -> Result<(), VmError> {
    match request {
        PhasesRequest::None => Ok(()),
        PhasesRequest::Record {
            output,
            force,
            tier,
        } => {
            let Some(times) = vm.finish_method_times(&program_name(program), tier)? else {
                return Ok(());
            };
            write_new(output, *force, &times.render())?;
            say!(
                "tally: method times: {} methods, run {:.3} s (a probe {:.0} ns, a counter reading {:.0} ns) written to {}; choose the phases with `tally vertical phases {}`",
                times.methods.len(),
                times.run_ns as f64 / 1e9,
                times.record_probe_ns,
                times.count_probe_ns,
                output.display(),
                output.display()
            );
            Ok(())
        }
        PhasesRequest::Count { report, force, .. } => {
            let Some(r) = vm.finish_phase_counts()? else {
                return Ok(());
            };
            say!("{}", r.render());
            if r.phases
                .iter()
                .all(|p| p.kind != tally_vm::tally_vertical::phase_report::PhaseKind::Method)
            {
                say!(
                    "tally: warning: no selected method ran: are these the phases of this program?"
                );
            }
            if let Some(path) = report {
                write_new(path, *force, &r.to_json())?;
            }
            Ok(())
        }
    }
}

/// Writes `text` to `path` whole or not at all, never over a file that appeared during the
/// run without `force`.
fn write_new(path: &Path, force: bool, text: &str) -> Result<(), VmError> {
    tally_output::write(
        path,
        text.as_bytes(),
        tally_output::IfExists::from_force(force),
    )
    .map_err(|e| VmError::Output(format!("tally: {e}")))
}

#[cfg(test)]
mod tests {
    use super::program_name;

    #[test]
    fn a_program_is_named_by_its_file_and_arguments() {
        let w = |s: &str| s.split_whitespace().map(String::from).collect::<Vec<_>>();
        assert_eq!(
            program_name(&w("/x/y/Harness.som DeltaBlue 20 0")),
            "Harness DeltaBlue 20 0"
        );
        assert_eq!(program_name(&w("Hello")), "Hello");
    }
}
