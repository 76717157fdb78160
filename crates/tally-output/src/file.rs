//! [`OutputFile`]: a file written through a hidden temporary and renamed into place whole.

use std::io::Write;
use std::path::{Path, PathBuf};

use tempfile::NamedTempFile;

use crate::{
    check_target, directory_of, name_of, permissions, sync_directory, IfExists, OutputError, Target,
};

/// A file being written. Bytes written go to a temporary beside the target;
/// [`OutputFile::commit`] makes it the target. Dropped before that, it removes the
/// temporary and leaves the target as it was.
pub struct OutputFile {
    out: Option<Out>,
    target: PathBuf,
    if_exists: IfExists,
}

enum Out {
    /// `.NAME.XXXXXX.tmp` in the target's directory, removed when dropped.
    Temporary(NamedTempFile),
    /// A device or FIFO, written in place.
    Special(std::fs::File),
}

impl OutputFile {
    /// Starts writing `target`: refused now if it is a directory, if its directory does not
    /// exist, or if it exists and `if_exists` refuses it.
    pub fn create(target: &Path, if_exists: IfExists) -> Result<OutputFile, OutputError> {
        let out = match check_target(target, if_exists)? {
            Target::Special => Out::Special(
                std::fs::OpenOptions::new()
                    .write(true)
                    .open(target)
                    .map_err(|e| OutputError::io(target, e))?,
            ),
            Target::File => Out::Temporary(
                tempfile::Builder::new()
                    .prefix(&format!(".{}.", name_of(target)))
                    .suffix(".tmp")
                    .permissions(permissions())
                    .tempfile_in(directory_of(target))
                    .map_err(|e| OutputError::io(target, e))?,
            ),
        };
        Ok(OutputFile {
            out: Some(out),
            target: target.to_path_buf(),
            if_exists,
        })
    }

    /// The file this will become.
    pub fn target(&self) -> &Path {
        &self.target
    }

    /// An error met while writing this file, for its writer to return.
    pub fn error(&self, e: std::io::Error) -> OutputError {
        OutputError::io(&self.target, e)
    }

    /// Makes the written bytes the target: synced, then renamed over it (or, when the
    /// target may not be replaced and one appeared meanwhile, refused, and removed).
    pub fn commit(mut self) -> Result<(), OutputError> {
        let temporary = match self.out.take() {
            Some(Out::Temporary(t)) => t,
            Some(Out::Special(mut f)) => return f.flush().map_err(|e| self.error(e)),
            None => unreachable!("an OutputFile is committed once, by value"),
        };
        temporary.as_file().sync_all().map_err(|e| self.error(e))?;
        let renamed = match self.if_exists {
            IfExists::Replace => temporary.persist(&self.target),
            IfExists::Refuse => temporary.persist_noclobber(&self.target),
        };
        // A failed rename hands the temporary back, and dropping it removes it.
        renamed.map_err(|e| match e.error.kind() {
            std::io::ErrorKind::AlreadyExists if self.if_exists == IfExists::Refuse => {
                OutputError::Appeared {
                    path: self.target.clone(),
                }
            }
            _ => self.error(e.error),
        })?;
        sync_directory(directory_of(&self.target));
        Ok(())
    }

    fn file(&mut self) -> &mut std::fs::File {
        match self.out.as_mut() {
            Some(Out::Temporary(t)) => t.as_file_mut(),
            Some(Out::Special(f)) => f,
            None => unreachable!("an OutputFile is not written after its commit"),
        }
    }
}

impl Write for OutputFile {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.file().write(buf)
    }

    fn write_all(&mut self, buf: &[u8]) -> std::io::Result<()> {
        self.file().write_all(buf)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.file().flush()
    }
}

/// Writes `bytes` as the file `target`, whole or not at all.
pub fn write(target: &Path, bytes: &[u8], if_exists: IfExists) -> Result<(), OutputError> {
    let mut out = OutputFile::create(target, if_exists)?;
    out.write_all(bytes).map_err(|e| out.error(e))?;
    out.commit()
}
