//! The profile file: versioned, self-describing, checksummed, written
//! atomically.
//!
//! ```text
//! file  = "TALLYPRF" major:u16le minor:u16le chunk*
//! chunk = tag:[u8;4] len:u32le payload[len] crc32:u32le   (crc over tag, len, payload)
//! ```
//!
//! Chunks: `HEAD` (exactly one, first: VM, program, options, clock,
//! sampler), then any number of `EVNT` (events), `SMPL` (samples), `EDGE`
//! (CBS edges), `EXCT` (exhaustive counts), `CNTR` (sample accounting), and
//! last `END!`, whose payload is the number of chunks before it. Nothing
//! may follow `END!`.
//!
//! Versioning: a reader accepts its own major version only. Minor versions
//! only *add*: new fields at the end of a known chunk's payload (an older
//! reader skips trailing bytes when the file's minor is newer, and rejects
//! them otherwise) or new chunk types. As in PNG, a chunk whose tag starts
//! with a lowercase letter is ancillary and may be skipped by readers that
//! do not know it; an unknown uppercase tag is critical and rejected.
//!
//! History: 1.1 adds `ticks_merged` at the end of `CNTR` (read as 0 from 1.0 files).
//! 1.2 adds the `MethodLines` event (bytecode index → line and column); a 1.1 reader
//! rejects files that carry it as holding an unknown event kind. 1.3 and 1.4 add the
//! controller's `Decision` and the `Deoptimized` events. 1.5 weights each CBS edge sample
//! by its window's call rate and adds the number of samples at the end of `EDGE` (read
//! as the sum of the weights from older files, whose samples weighed 1 each). 1.6 adds the
//! `MethodBytecodes` event (a method's instructions as text), 1.7 the `TierCallCounts` event.
//! 1.8 lets a sampled frame carry the mark compiled code leaves on its frames (the tier, and
//! whether the frame is an inlined method's: bits 60–62 of the packed frame, method ids
//! below 2^28); older files, whose frames have no mark, read the same. 1.9 writes a
//! collection's end with the collector and whether it collected the nursery or the whole
//! heap (a new event kind; the old one reads as plan unknown, scope full). 1.10 adds
//! `dropped_slow` at the end of `CNTR` (read as 0 from older files). 1.11 writes the call
//! counts with each method's loop back-edges per tier (a new event kind; the old one reads
//! as back-edges unknown).
//!
//! Corruption is caught by the per-chunk CRC-32, truncation by lengths
//! that run past the end of the file and by the missing `END!`; every
//! rejection says which chunk, at which byte offset, and why.
//!
//! Streaming: a run writes its file as it goes ([`StreamWriter`]), to
//! its own `PATH.PID.partial`: `HEAD` when sampling starts, then an `EVNT` chunk and
//! `SMPL` chunks at each drain (every half second at the default rate),
//! then `EDGE`, `EXCT`, `CNTR` and `END!` at the end, and renames the file
//! to `PATH`. So `EVNT` and `SMPL` chunks interleave, each chunk's time
//! deltas start from zero, and events (samples) read in file order are in
//! arrival order. This needs no new version: 1.0 and 1.1 readers already
//! accept any number of both. A file cut short (the run was killed) has
//! no `END!`; [`decode_partial`] reads it up to its last complete chunk
//! and says what was lost, [`decode`] rejects it. A checksum failure or a
//! malformed chunk rejects the file either way.

mod codec;
mod read;
mod stream;
mod write;

pub use read::{decode, decode_partial, read_file, read_file_partial, Cut, PartialRead, ReadError};
pub use stream::{partials_of, KeptStream, ProfileStream, StreamWriter, WriteFailure};
pub use write::{encode, write_file};

pub const MAGIC: &[u8; 8] = b"TALLYPRF";
pub const MAJOR: u16 = 1;
pub const MINOR: u16 = 11;

/// Samples per `SMPL` chunk, so that chunks stay far below 4 GiB and a
/// damaged chunk loses a bounded number of samples.
pub const SAMPLES_PER_CHUNK: usize = 8192;

pub(crate) mod tags {
    pub const HEAD: [u8; 4] = *b"HEAD";
    pub const EVNT: [u8; 4] = *b"EVNT";
    pub const SMPL: [u8; 4] = *b"SMPL";
    pub const EDGE: [u8; 4] = *b"EDGE";
    pub const EXCT: [u8; 4] = *b"EXCT";
    pub const CNTR: [u8; 4] = *b"CNTR";
    pub const END: [u8; 4] = *b"END!";
}

pub(crate) mod event_tags {
    pub const PROGRAM_START: u8 = 0;
    pub const PROGRAM_END: u8 = 1;
    pub const CLASS_LOADED: u8 = 2;
    pub const METHOD_COMPILED: u8 = 3;
    pub const CODE_INSTALLED: u8 = 4;
    pub const CODE_FREED: u8 = 5;
    pub const GC_START: u8 = 6;
    pub const GC_END: u8 = 7;
    /// A method's bytecode → source position table (since 1.2).
    pub const METHOD_LINES: u8 = 12;
    /// An adaptive controller's recompilation decision (since 1.3).
    pub const TIER_DECISION: u8 = 13;
    /// Compiled code failed a speculation and handed its frame to the interpreter (since 1.4).
    pub const DEOPTIMIZED: u8 = 14;
    /// A method's bytecode as text (since 1.6).
    pub const METHOD_BYTECODES: u8 = 15;
    /// Calls per method per tier (since 1.7).
    pub const TIER_CALL_COUNTS: u8 = 16;
    /// Calls and loop back-edges per method per tier (since 1.11; `TIER_CALL_COUNTS` before).
    pub const TIER_WORK_COUNTS: u8 = 18;
    /// The end of a collection with its plan and scope (since 1.9; `GC_END` before).
    pub const GC_END_SCOPED: u8 = 17;
}

#[cfg(test)]
mod tests;
