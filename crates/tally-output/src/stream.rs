//! [`Stream`]: a file that grows while a run goes, under a name of its own, renamed to its
//! target when the run ends.

use std::io::{Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use tempfile::NamedTempFile;

use crate::{
    check_target, directory_of, name_of, permissions, sync_directory, IfExists, OutputError, Target,
};

/// A stream whose [commit](Stream::commit) failed: why, and the stream, still on disk.
pub struct Uncommitted {
    pub error: OutputError,
    pub stream: Stream,
}

/// How many other names a stream tries when `NAME.PID.partial` is taken (a killed run of an
/// earlier process with the same id left it).
const OTHER_NAMES: u32 = 100;

/// A file appended to as a run goes: `NAME.PID.partial` beside the target, created
/// exclusively, so runs that share a target each write their own. [`Stream::commit`]
/// renames it to the target, [`Stream::discard`] removes it; otherwise it stays, holding
/// every whole append, as it does when the run is killed: dropped while a panic unwinds, a
/// stream is what is left of a run that crashed.
pub struct Stream {
    file: NamedTempFile,
    /// Its name as the target was given (relative when the target was), for messages.
    partial: PathBuf,
    target: PathBuf,
    if_exists: IfExists,
    /// The length of the whole appends: a failed append is cut back to it.
    whole: u64,
}

impl Stream {
    /// Creates the stream of `target`, refused as [`crate::OutputFile::create`] refuses.
    /// A target that is not a regular file (a device, a FIFO) cannot take a stream.
    pub fn create(target: &Path, if_exists: IfExists) -> Result<Stream, OutputError> {
        if let Target::Special = check_target(target, if_exists)? {
            return Err(OutputError::io(
                target,
                std::io::Error::other("it is not a regular file, and a profile needs one"),
            ));
        }
        let base = format!("{}.{}", name_of(target), std::process::id());
        let mut names =
            std::iter::once(base.clone()).chain((1..=OTHER_NAMES).map(|n| format!("{base}.{n}")));
        let file = loop {
            let Some(name) = names.next() else {
                return Err(OutputError::io(
                    target,
                    std::io::Error::new(
                        std::io::ErrorKind::AlreadyExists,
                        format!(
                            "{base}.partial and {OTHER_NAMES} other names for its stream exist"
                        ),
                    ),
                ));
            };
            match tempfile::Builder::new()
                .prefix(&name)
                .suffix(".partial")
                .rand_bytes(0)
                .permissions(permissions())
                .disable_cleanup(true)
                .tempfile_in(directory_of(target))
            {
                Ok(f) => break f,
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
                Err(e) => return Err(OutputError::io(target, e)),
            }
        };
        let partial = match file.path().file_name() {
            Some(name) => target.with_file_name(name),
            None => file.path().to_path_buf(),
        };
        Ok(Stream {
            file,
            partial,
            target: target.to_path_buf(),
            if_exists,
            whole: 0,
        })
    }

    /// Where the stream is until it is committed.
    pub fn partial(&self) -> &Path {
        &self.partial
    }

    /// The file it becomes.
    pub fn target(&self) -> &Path {
        &self.target
    }

    /// Bytes appended whole so far.
    pub fn len(&self) -> u64 {
        self.whole
    }

    /// Whether nothing has been appended.
    pub fn is_empty(&self) -> bool {
        self.whole == 0
    }

    /// Appends `bytes`, all of them or (as far as the system allows) none: a write that
    /// fails part-way is cut back to the last whole append, so the stream stays readable.
    pub fn append(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        match self.file.as_file_mut().write_all(bytes) {
            Ok(()) => {
                self.whole += bytes.len() as u64;
                Ok(())
            }
            Err(e) => {
                let f = self.file.as_file_mut();
                let _ = f.set_len(self.whole);
                let _ = f.seek(SeekFrom::Start(self.whole));
                Err(e)
            }
        }
    }

    /// Syncs the stream and renames it to its target. When that fails (or the target may not
    /// be replaced and one appeared meanwhile), the stream stays where it is, for the caller
    /// to [keep](Stream::keep) or drop.
    pub fn commit(self) -> Result<PathBuf, Box<Uncommitted>> {
        if let Err(e) = self.file.as_file().sync_all() {
            let error = OutputError::io(&self.target, e);
            return Err(Box::new(Uncommitted {
                error,
                stream: self,
            }));
        }
        let Stream {
            file,
            partial,
            target,
            if_exists,
            whole,
        } = self;
        let renamed = match if_exists {
            IfExists::Replace => file.persist(&target),
            IfExists::Refuse => file.persist_noclobber(&target),
        };
        match renamed {
            Ok(_) => {
                sync_directory(directory_of(&target));
                Ok(target)
            }
            Err(e) => {
                let error = match e.error.kind() {
                    std::io::ErrorKind::AlreadyExists if if_exists == IfExists::Refuse => {
                        OutputError::Appeared {
                            path: target.clone(),
                        }
                    }
                    _ => OutputError::io(&target, e.error),
                };
                let back = Stream {
                    file: e.file,
                    partial,
                    target,
                    if_exists,
                    whole,
                };
                Err(Box::new(Uncommitted {
                    error,
                    stream: back,
                }))
            }
        }
    }

    /// Leaves the stream on disk under its own name (the run's only record of what it
    /// holds), and answers that name.
    pub fn keep(self) -> PathBuf {
        self.partial
    }

    /// Removes the stream: a run that never started, or one whose stream holds nothing of it.
    pub fn discard(self) {
        let _ = std::fs::remove_file(self.file.path());
    }
}
