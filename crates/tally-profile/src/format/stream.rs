//! Writing a profile while the run goes: chunks appended to `PATH.partial` as they arrive,
//! renamed to `PATH` once the end marker is on disk.
//!
//! A run killed with SIGKILL, or a VM that crashes, leaves `PATH.partial` holding every chunk
//! written so far, which [`super::decode_partial`] reads up to the last complete one. An
//! existing `PATH` is only ever replaced whole, by the rename.

use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};

use super::tags;
use super::write::{chunk, end, events, header, preamble, samples, tail};
use super::SAMPLES_PER_CHUNK;
use crate::event::Event;
use crate::profile::{Header, Profile};
use crate::sample::Sample;

/// The name a profile has while it is being written: `PATH.partial`.
pub fn partial_path(path: &Path) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(".partial");
    PathBuf::from(name)
}

/// An open profile file that grows by whole chunks.
pub struct StreamWriter {
    file: File,
    path: PathBuf,
    partial: PathBuf,
    /// Chunks written, for the end marker.
    chunks: u64,
}

impl StreamWriter {
    /// Creates (or truncates) `PATH.partial` and writes the preamble and the header, which is
    /// therefore fixed from here on.
    pub fn create(path: &Path, head: &Header) -> std::io::Result<StreamWriter> {
        let partial = partial_path(path);
        let file = File::create(&partial)?;
        let mut w = StreamWriter {
            file,
            path: path.to_path_buf(),
            partial,
            chunks: 0,
        };
        let mut bytes = preamble();
        bytes.extend_from_slice(&chunk(tags::HEAD, &header(head)));
        w.chunks = 1;
        w.write(&bytes)?;
        Ok(w)
    }

    /// Where the chunks go until [`StreamWriter::finish`].
    pub fn partial(&self) -> &Path {
        &self.partial
    }

    fn write(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        self.file.write_all(bytes)
    }

    /// Appends events and samples as `EVNT` and `SMPL` chunks, in one write so that the
    /// file only ever grows by whole chunks (short of a crash inside that write).
    pub fn append(&mut self, new_events: &[Event], new_samples: &[Sample]) -> std::io::Result<()> {
        let mut bytes = Vec::new();
        if !new_events.is_empty() {
            bytes.extend_from_slice(&chunk(tags::EVNT, &events(new_events)));
            self.chunks += 1;
        }
        for batch in new_samples.chunks(SAMPLES_PER_CHUNK) {
            bytes.extend_from_slice(&chunk(tags::SMPL, &samples(batch)));
            self.chunks += 1;
        }
        if bytes.is_empty() {
            return Ok(());
        }
        self.write(&bytes)
    }

    /// Writes what only the end of the run knows (edges, exact counts, counters) and the end
    /// marker, syncs, and renames `PATH.partial` to `PATH`.
    pub fn finish(mut self, p: &Profile) -> std::io::Result<PathBuf> {
        let mut bytes = Vec::new();
        for (tag, payload) in tail(p) {
            bytes.extend_from_slice(&chunk(tag, &payload));
            self.chunks += 1;
        }
        bytes.extend_from_slice(&end(self.chunks));
        self.write(&bytes)?;
        self.file.sync_all()?;
        std::fs::rename(&self.partial, &self.path)?;
        Ok(self.path)
    }

    /// Gives up on the file: removes `PATH.partial` (a run that never started has nothing
    /// worth keeping, and must not replace an existing profile).
    pub fn discard(self) {
        let _ = std::fs::remove_file(&self.partial);
    }
}
