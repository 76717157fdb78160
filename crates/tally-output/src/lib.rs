//! Every file Tally writes goes through this crate, so that each is whole or absent.
//!
//! **Invariant**: a path Tally was asked to write holds, at every moment, either what it held
//! before (nothing, or the old file) or one complete new file; never a part of one, never
//! an empty file left by a failure. A command that could not write its file says why and
//! leaves no temporary behind.
//!
//! How: the bytes go to a file created exclusively under a name no other writer uses, in
//! the target's directory (a rename is atomic only within one filesystem). Once whole, it
//! is synced to disk and renamed over the target in one step, then the directory is synced
//! so that the rename outlives a crash. On any failure, and whenever a writer is dropped
//! before it is committed (an error returned early, a panic), the temporary is removed and
//! the target is untouched.
//!
//! Two writers share that protocol:
//! - [`OutputFile`] (and [`write`]) for files made at once or streamed by a command: exports,
//!   reports, results, hints, phases, traces, calibration. Its temporary is hidden
//!   (`.NAME.XXXXXX.tmp`).
//! - [`Stream`] for a profile that grows while its run goes: it is named `NAME.PID.partial`,
//!   visible, so that a run killed with SIGKILL, or one that crashed, leaves it behind to be
//!   read. It alone may stay on failure ([`Stream::keep`]), since what it holds is the run's
//!   only record; its writer removes it ([`Stream::discard`]) when it holds nothing of use.
//!
//! Existing targets: [`IfExists::Refuse`] (the default of every command; `--force` means
//! [`IfExists::Replace`]) refuses a target that exists when the writer is created and, when
//! one appears meanwhile (another process wrote it), refuses to replace it at the rename
//! too. Of several writers on one path with `Replace`, the last to commit wins; whichever
//! wins, the target is one writer's whole file.
//!
//! A target that exists and is not a regular file (`/dev/stdout`, `/dev/null`, a FIFO) is
//! written in place: there is no file to keep whole, and renaming over a device would
//! replace it.

mod error;
mod file;
mod stream;

use std::path::Path;

pub use error::{reason, OutputError};
pub use file::{write, OutputFile};
pub use stream::{Stream, Uncommitted};

/// Makes a write past the process's file-size limit (`ulimit -f`, `RLIMIT_FSIZE`) fail
/// with EFBIG, which the writers report like a full disk, instead of the default SIGXFSZ
/// killing the process with its file half written and nothing said. Call first thing in
/// `main`; child processes inherit it.
pub fn report_size_limit_as_error() {
    // SAFETY: setting a signal's disposition to SIG_IGN installs no handler and touches no
    // memory; it is process-wide and idempotent.
    unsafe {
        libc::signal(libc::SIGXFSZ, libc::SIG_IGN);
    }
}

/// What a writer does about a target that already exists.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IfExists {
    /// Keep it: the writer is refused (nothing the user wrote is overwritten unasked).
    Refuse,
    /// Replace it whole when the new file is complete.
    Replace,
}

impl IfExists {
    /// `--force` on the command line.
    pub fn from_force(force: bool) -> IfExists {
        if force {
            IfExists::Replace
        } else {
            IfExists::Refuse
        }
    }
}

/// Files are made readable as any new file is (`0666` less the umask), not only by their
/// owner as a temporary would be: they are renamed into place as they are.
fn permissions() -> std::fs::Permissions {
    std::os::unix::fs::PermissionsExt::from_mode(0o666)
}

/// The directory a target's temporary goes in: its own, so that the rename is atomic.
fn directory_of(target: &Path) -> &Path {
    target
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."))
}

/// The target's file name, for naming its temporaries.
fn name_of(target: &Path) -> String {
    target
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "output".into())
}

/// What a writer about to start finds at its target.
enum Target {
    /// Nothing, or a regular file it may replace: written through a temporary.
    File,
    /// A device, FIFO or socket: written in place.
    Special,
}

/// Checks what a writer can check before it writes anything: the target is not a directory,
/// it exists only if it may be replaced, and its directory exists.
fn check_target(target: &Path, if_exists: IfExists) -> Result<Target, OutputError> {
    match std::fs::metadata(target) {
        Ok(m) if m.is_dir() => {
            return Err(OutputError::IsDirectory {
                path: target.to_path_buf(),
            })
        }
        Ok(m) if !m.is_file() => return Ok(Target::Special),
        Ok(_) if if_exists == IfExists::Refuse => {
            return Err(OutputError::Exists {
                path: target.to_path_buf(),
            })
        }
        _ => {}
    }
    let dir = directory_of(target);
    if !dir.is_dir() {
        return Err(OutputError::NoDirectory {
            path: target.to_path_buf(),
            dir: dir.to_path_buf(),
        });
    }
    Ok(Target::File)
}

/// Syncs a directory, so that a rename in it survives a crash. Best effort: the rename has
/// happened and the file is whole whether or not this succeeds (some filesystems refuse to
/// sync a directory), so a failure here is not the write's failure.
fn sync_directory(dir: &Path) {
    if let Ok(d) = std::fs::File::open(dir) {
        let _ = d.sync_all();
    }
}

/// The names in `dir`, sorted: what writers left there, for tests.
#[cfg(test)]
fn entries(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

#[cfg(test)]
mod tests;
