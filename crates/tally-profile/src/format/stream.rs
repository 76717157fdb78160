//! Writing a profile while the run goes: chunks appended to the run's own stream,
//! `PATH.PID.partial` ([`tally_output::Stream`]), renamed to `PATH` once the end marker is on
//! disk.
//!
//! A run killed with SIGKILL, or a VM that crashes, leaves its stream holding every chunk
//! written so far, which [`super::decode_partial`] reads up to the last complete one. Runs
//! that share a `PATH` each stream to their own file; an existing `PATH` is only ever
//! replaced whole, by the rename.

use std::path::{Path, PathBuf};

use tally_output::{IfExists, OutputError, Stream, Uncommitted};

use super::tags;
use super::write::{chunk, end, events, header, preamble, samples, tail};
use super::SAMPLES_PER_CHUNK;
use crate::event::Event;
use crate::profile::{Header, Profile};
use crate::sample::Sample;

/// The streams runs left beside `path` (killed, or kept when the profile could not be
/// written): `NAME.*.partial` in its directory, newest first.
pub fn partials_of(path: &Path) -> Vec<PathBuf> {
    let Some(name) = path.file_name().map(|n| n.to_string_lossy().into_owned()) else {
        return Vec::new();
    };
    let dir = path
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let prefix = format!("{name}.");
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut found: Vec<(std::time::SystemTime, PathBuf)> = entries
        .filter_map(Result::ok)
        .filter(|e| {
            let n = e.file_name().to_string_lossy().into_owned();
            n.starts_with(&prefix) && n.ends_with(".partial") && n.len() > prefix.len() + 8
        })
        .map(|e| {
            let modified = e
                .metadata()
                .and_then(|m| m.modified())
                .unwrap_or(std::time::UNIX_EPOCH);
            (modified, path.with_file_name(e.file_name()))
        })
        .collect();
    found.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.cmp(&b.1)));
    found.into_iter().map(|(_, p)| p).collect()
}

/// An open profile file that grows by whole chunks.
pub struct StreamWriter {
    stream: Stream,
    /// Chunks written, for the end marker.
    chunks: u64,
}

impl StreamWriter {
    /// Creates the run's stream for `path` and writes the preamble and the header, which is
    /// therefore fixed from here on.
    pub fn create(
        path: &Path,
        head: &Header,
        if_exists: IfExists,
    ) -> Result<StreamWriter, OutputError> {
        let mut stream = Stream::create(path, if_exists)?;
        let mut bytes = preamble();
        bytes.extend_from_slice(&chunk(tags::HEAD, &header(head)));
        if let Err(e) = stream.append(&bytes) {
            stream.discard();
            return Err(OutputError::io(path, e));
        }
        Ok(StreamWriter { stream, chunks: 1 })
    }

    /// Where the chunks go until [`StreamWriter::finish`].
    pub fn partial(&self) -> &Path {
        self.stream.partial()
    }

    /// Appends events and samples as `EVNT` and `SMPL` chunks, in one write so that the
    /// file only ever grows by whole chunks: a write that fails leaves the file as it was.
    pub fn append(&mut self, new_events: &[Event], new_samples: &[Sample]) -> std::io::Result<()> {
        let mut bytes = Vec::new();
        let mut chunks = 0;
        if !new_events.is_empty() {
            bytes.extend_from_slice(&chunk(tags::EVNT, &events(new_events)));
            chunks += 1;
        }
        for batch in new_samples.chunks(SAMPLES_PER_CHUNK) {
            bytes.extend_from_slice(&chunk(tags::SMPL, &samples(batch)));
            chunks += 1;
        }
        if bytes.is_empty() {
            return Ok(());
        }
        self.stream.append(&bytes)?;
        self.chunks += chunks;
        Ok(())
    }

    /// Writes what only the end of the run knows (edges, exact counts, counters) and the end
    /// marker, syncs, and renames the stream to its `PATH`. On failure the writer comes back
    /// (holding all it held before, and the end too if only the rename failed), to be kept
    /// or dropped.
    pub fn finish(mut self, p: &Profile) -> Result<PathBuf, Box<(OutputError, StreamWriter)>> {
        let mut bytes = Vec::new();
        let mut chunks = self.chunks;
        for (tag, payload) in tail(p) {
            bytes.extend_from_slice(&chunk(tag, &payload));
            chunks += 1;
        }
        bytes.extend_from_slice(&end(chunks));
        if let Err(e) = self.stream.append(&bytes) {
            let error = OutputError::io(self.stream.target(), e);
            return Err(Box::new((error, self)));
        }
        let chunks = self.chunks;
        self.stream.commit().map_err(|refused| {
            let Uncommitted { error, stream } = *refused;
            Box::new((error, StreamWriter { stream, chunks }))
        })
    }

    /// Leaves the stream on disk under its own name, and answers that name.
    pub fn keep(self) -> PathBuf {
        self.stream.keep()
    }

    /// Removes the stream.
    pub fn discard(self) {
        self.stream.discard()
    }
}

/// A run's profile on its way to disk: its stream, and how much of the profile it holds.
pub struct ProfileStream {
    writer: StreamWriter,
    /// Events and samples already in the stream.
    events: usize,
    samples: usize,
    /// The run's start and its last sample in the stream, to say how much a kept stream holds.
    start_ns: u64,
    last_sample_ns: u64,
    /// Whether the last append failed (said once, until one succeeds again).
    failing: bool,
}

/// Why a profile could not be written, and what of it is kept on disk.
#[derive(Debug)]
pub struct WriteFailure {
    pub error: OutputError,
    /// The run's stream, kept under its own name because it holds part of the run (or all
    /// of it, when only the rename was refused).
    pub kept: Option<KeptStream>,
}

/// What a kept stream holds.
#[derive(Debug)]
pub struct KeptStream {
    pub path: PathBuf,
    pub samples: usize,
    pub events: usize,
    /// Seconds of the run its samples cover, from the start.
    pub seconds: f64,
    /// Whether it is the whole profile (end marker included).
    pub whole: bool,
}

impl std::fmt::Display for WriteFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.error)?;
        if let Some(k) = &self.kept {
            let what = if k.whole {
                "the whole profile".to_string()
            } else {
                format!(
                    "the first {:.1} s of the run ({} samples, {} events)",
                    k.seconds, k.samples, k.events
                )
            };
            write!(
                f,
                "; {what} is kept in {} (`tally report {}` reads it)",
                k.path.display(),
                k.path.display()
            )?;
        }
        Ok(())
    }
}

impl ProfileStream {
    /// Starts `path`'s stream with the profile's header (complete by now: it is fixed).
    pub fn start(
        path: &Path,
        head: &Header,
        if_exists: IfExists,
    ) -> Result<ProfileStream, OutputError> {
        Ok(ProfileStream {
            writer: StreamWriter::create(path, head, if_exists)?,
            events: 0,
            samples: 0,
            start_ns: head.start_time_ns,
            last_sample_ns: head.start_time_ns,
            failing: false,
        })
    }

    /// Where the stream is.
    pub fn partial(&self) -> &Path {
        self.writer.partial()
    }

    /// Removes the stream (a run that never started).
    pub fn discard(self) {
        self.writer.discard()
    }

    /// Appends the events and samples the stream does not hold yet (`events` and `samples`
    /// are all the run's so far). A failure is answered when it follows a success, not again
    /// while the appends keep failing; each period tries again, so the stream resumes when
    /// the disk has room again.
    pub fn catch_up(&mut self, events: &[Event], samples: &[Sample]) -> std::io::Result<()> {
        match self.append_rest(events, samples) {
            Ok(()) => {
                self.failing = false;
                Ok(())
            }
            Err(_) if self.failing => Ok(()),
            Err(e) => {
                self.failing = true;
                Err(e)
            }
        }
    }

    fn append_rest(&mut self, events: &[Event], samples: &[Sample]) -> std::io::Result<()> {
        let new_samples = &samples[self.samples.min(samples.len())..];
        self.writer
            .append(&events[self.events.min(events.len())..], new_samples)?;
        if let Some(s) = new_samples.last() {
            self.last_sample_ns = s.time_ns;
        }
        self.events = events.len();
        self.samples = samples.len();
        Ok(())
    }

    /// Appends the rest of `p` and its end, and renames the stream to its target. When that
    /// fails, the stream stays on disk if it holds something of the run (it is removed
    /// otherwise), and the failure says where and what.
    pub fn finish(mut self, p: &Profile) -> Result<PathBuf, WriteFailure> {
        let failure = match self.append_rest(&p.events, &p.samples) {
            Err(e) => (OutputError::io(self.writer.stream.target(), e), self.writer),
            Ok(()) => match self.writer.finish(p) {
                Ok(path) => return Ok(path),
                Err(failure) => *failure,
            },
        };
        let (error, writer) = failure;
        if self.samples == 0 && self.events == 0 {
            writer.discard();
            return Err(WriteFailure { error, kept: None });
        }
        let kept = KeptStream {
            path: writer.keep(),
            samples: self.samples,
            events: self.events,
            seconds: self.last_sample_ns.saturating_sub(self.start_ns) as f64 / 1e9,
            whole: matches!(error, OutputError::Appeared { .. }),
        };
        Err(WriteFailure {
            error,
            kept: Some(kept),
        })
    }
}
