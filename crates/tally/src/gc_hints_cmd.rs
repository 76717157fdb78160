//! `--gc-hints-record FILE`, `--gc-hints FILE` and `--gc-hints-optional`: the command line's
//! side of GC hints (files, messages); the VM records and applies them.

use std::path::{Path, PathBuf};

use tally_vm::tally_profile::gc_hints::GcHints;
use tally_vm::{Vm, VmError};

/// What the command line asked of GC hints.
pub(crate) enum HintsRequest {
    None,
    Record { output: PathBuf, force: bool },
    Use { file: PathBuf, optional: bool },
}

/// Before the run: a recording's output must be writable, and may be replaced only with
/// `--force`.
pub(crate) fn check_record_output(output: &Path, force: bool) -> Result<(), String> {
    crate::check_new_file(output, force, "GC hints")
}

/// Sets the VM up for the request, before the program runs. A hints file that cannot be used
/// is an error, or with `--gc-hints-optional` a warning and a run without hints.
pub(crate) fn start(
    vm: &mut Vm,
    request: &HintsRequest,
    program: &[String],
) -> Result<(), VmError> {
    match request {
        HintsRequest::None => Ok(()),
        HintsRequest::Record { .. } => vm.record_gc_hints(),
        HintsRequest::Use { file, optional } => {
            let rejected = |why: String| -> Result<(), VmError> {
                let message = format!("cannot use the GC hints in {}: {why}", file.display());
                if *optional {
                    say!("tally: warning: {message}; running without hints (--gc-hints-optional)");
                    Ok(())
                } else {
                    Err(VmError::Load(format!(
                        "error: {message} (--gc-hints-optional runs without them instead)"
                    )))
                }
            };
            let text = match std::fs::read(file) {
                Ok(bytes) => match String::from_utf8(bytes) {
                    Ok(t) => t,
                    Err(_) => return rejected("it is not text".into()),
                },
                Err(e) => return rejected(e.to_string()),
            };
            let hints = match GcHints::parse(&text) {
                Ok(h) => h,
                Err(e) => return rejected(e.to_string()),
            };
            match vm.use_gc_hints(&hints, program)? {
                Ok(()) => Ok(()),
                Err(e) => rejected(e.to_string()),
            }
        }
    }
}

/// After the run: a recording's hints written (the run's program having started), with a
/// summary on stderr.
pub(crate) fn finish(
    vm: &mut Vm,
    request: &HintsRequest,
    program: &[String],
) -> Result<(), VmError> {
    let HintsRequest::Record { output, force } = request else {
        return Ok(());
    };
    let Some(recording) = vm.finish_gc_hints_recording(program)? else {
        return Ok(());
    };
    let text = recording.hints.render();
    tally_output::write(
        output,
        text.as_bytes(),
        tally_output::IfExists::from_force(*force),
    )
    .map_err(|e| VmError::Output(format!("tally: the GC hints: {e}")))?;
    say!(
        "tally: GC hints: {} method entries and exits, live data measured at {}{}; {} favorable point(s) written to {}",
        recording.reaches,
        recording.measurements,
        if recording.budget_exhausted {
            " (the measurement budget ran out before the end)"
        } else {
            ""
        },
        recording.hints.points.len(),
        output.display()
    );
    for p in &recording.hints.points {
        say!(
            "  {} {}: {} live bytes, a minimum {} of {} times",
            p.kind.name(),
            p.method,
            p.expected_live_bytes,
            p.minima,
            p.seen
        );
    }
    Ok(())
}

/// `--gc-stats`' line for hints, when the run used them.
pub(crate) fn stats_line(vm: &Vm) -> Option<String> {
    let u = vm.gc_hints_use()?;
    Some(format!(
        "gc hints: {} point(s); consulted {} time(s) near a collection; collected {} nursery, {} full",
        u.points, u.consulted, u.nursery, u.full
    ))
}
