//! Why a file could not be written, said the way a command's user needs it.

use std::path::PathBuf;

/// A writer's failure. Every variant names the target; none leaves a temporary behind.
#[derive(Debug, thiserror::Error)]
pub enum OutputError {
    #[error("{} exists; pass --force to overwrite it", path.display())]
    Exists { path: PathBuf },
    #[error(
        "{} appeared while this file was being written (another process made it) and was kept; pass --force to replace it",
        path.display()
    )]
    Appeared { path: PathBuf },
    #[error("cannot write {}: it is a directory", path.display())]
    IsDirectory { path: PathBuf },
    #[error("cannot write {}: the directory {} does not exist", path.display(), dir.display())]
    NoDirectory { path: PathBuf, dir: PathBuf },
    #[error("cannot write {}: {}", path.display(), reason(source))]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

impl OutputError {
    /// An I/O error met while writing `path`.
    pub fn io(path: impl Into<PathBuf>, source: std::io::Error) -> OutputError {
        OutputError::Io {
            path: path.into(),
            source,
        }
    }

    /// The file that was not written.
    pub fn path(&self) -> &std::path::Path {
        match self {
            OutputError::Exists { path }
            | OutputError::Appeared { path }
            | OutputError::IsDirectory { path }
            | OutputError::NoDirectory { path, .. }
            | OutputError::Io { path, .. } => path,
        }
    }
}

/// The system's words for an I/O error, and what EFBIG means: the process's file-size limit
/// (`ulimit -f`), which the system's words ("File too large") do not name.
pub fn reason(e: &std::io::Error) -> String {
    match e.kind() {
        std::io::ErrorKind::FileTooLarge => {
            format!("{e}: the file-size limit (ulimit -f) was reached")
        }
        _ => e.to_string(),
    }
}
