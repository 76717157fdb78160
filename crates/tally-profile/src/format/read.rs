//! Decoding, with every way a file can be wrong named precisely.

use std::path::Path;

use super::codec::{Dec, R};
use super::{event_tags as et, tags, MAGIC, MAJOR, MINOR};
use crate::callgraph::CallEdge;
use crate::code::{CodeVersion, PcMapEntry};
use crate::event::{Event, EventKind, LineEntry, TierCalls};
use crate::hot::cbs::CbsConfig;
use crate::hot::exact::ExactCounts;
use crate::hot::SampleCounters;
use crate::ids::{ClassId, CodeVersionId, MethodId, RawFrame, Tier, VmState};
use crate::profile::{Header, Profile, SamplerSettings};
use crate::sample::{Origin, Sample, SampleFlags};

#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    /// Callers name the file ("cannot read the profile PATH: …"), so this says only why.
    #[error("{0}")]
    Io(#[from] std::io::Error),
    #[error("not a Tally profile (bad magic number)")]
    NotAProfile,
    #[error("unsupported profile format version {major}.{minor} (this reader reads {MAJOR}.x)")]
    UnsupportedVersion { major: u16, minor: u16 },
    #[error("truncated profile: {what} at byte {offset} runs past the end of the file")]
    Truncated { what: String, offset: u64 },
    #[error("corrupt profile: checksum mismatch in chunk {tag} at byte {offset}")]
    Checksum { tag: String, offset: u64 },
    #[error("corrupt profile: chunk {tag} at byte {offset}: {reason}")]
    Malformed {
        tag: String,
        offset: u64,
        reason: String,
    },
    #[error("unknown critical chunk {tag} at byte {offset}")]
    UnknownChunk { tag: String, offset: u64 },
    #[error("corrupt profile: {0}")]
    Structure(String),
    #[error("truncated profile: the end marker is missing (the writer did not finish)")]
    MissingEnd,
    #[error("corrupt profile: {extra} bytes after the end marker")]
    TrailingData { extra: u64 },
}

pub fn read_file(path: &Path) -> Result<Profile, ReadError> {
    decode(&std::fs::read(path)?)
}

/// Where a file cut short ends: what [`decode_partial`] could not read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Cut {
    /// Complete chunks read (the header included).
    pub chunks: u64,
    /// Byte offset just after the last complete chunk.
    pub at_byte: u64,
    /// Bytes after it: an incomplete chunk (0 when the file ends on a chunk boundary).
    pub lost_bytes: u64,
}

impl std::fmt::Display for Cut {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "the file ends after chunk {} at byte {}",
            self.chunks, self.at_byte
        )?;
        if self.lost_bytes > 0 {
            write!(
                f,
                " ({} bytes of an incomplete chunk dropped)",
                self.lost_bytes
            )?;
        }
        write!(
            f,
            ": the run's end and its counters are missing (the writer did not finish: killed, crashed or out of disk)"
        )
    }
}

/// A profile read from a file that may have been cut short.
#[derive(Debug)]
pub struct PartialRead {
    pub profile: Profile,
    /// `None` for a complete file.
    pub cut: Option<Cut>,
}

/// Reads a file that may be cut short (a run killed while its profile streamed to disk): every
/// complete chunk up to the end of the file is kept, and [`PartialRead::cut`] says what was
/// lost. Anything else wrong (a checksum failure, a malformed chunk, a file cut inside its
/// header) rejects the file as [`decode`] does.
pub fn decode_partial(bytes: &[u8]) -> Result<PartialRead, ReadError> {
    decode_inner(bytes, true)
}

pub fn read_file_partial(path: &Path) -> Result<PartialRead, ReadError> {
    decode_partial(&std::fs::read(path)?)
}

fn tag_name(tag: &[u8]) -> String {
    tag.iter()
        .map(|&b| {
            if b.is_ascii_graphic() {
                (b as char).to_string()
            } else {
                format!("\\x{b:02x}")
            }
        })
        .collect()
}

pub fn decode(bytes: &[u8]) -> Result<Profile, ReadError> {
    decode_inner(bytes, false).map(|r| r.profile)
}

fn decode_inner(bytes: &[u8], lenient: bool) -> Result<PartialRead, ReadError> {
    if bytes.len() < 8 || &bytes[..8] != MAGIC {
        return Err(
            if bytes.len() < 8 && MAGIC.starts_with(bytes) && !bytes.is_empty() {
                ReadError::Truncated {
                    what: "file header".into(),
                    offset: 0,
                }
            } else {
                ReadError::NotAProfile
            },
        );
    }
    if bytes.len() < 12 {
        return Err(ReadError::Truncated {
            what: "version".into(),
            offset: 8,
        });
    }
    let major = u16::from_le_bytes([bytes[8], bytes[9]]);
    let minor = u16::from_le_bytes([bytes[10], bytes[11]]);
    if major != MAJOR {
        return Err(ReadError::UnsupportedVersion { major, minor });
    }
    let newer_minor = minor > MINOR;

    let mut p = Profile::default();
    let mut pos = 12usize;
    let mut seen_head = false;
    let mut chunks = 0u64;
    // A cut after the header keeps what came before it; one inside the header keeps nothing.
    let cut = |pos: usize, chunks: u64, seen_head: bool, err: ReadError| {
        if lenient && seen_head {
            Ok(PartialRead {
                profile: Profile::default(),
                cut: Some(Cut {
                    chunks,
                    at_byte: pos as u64,
                    lost_bytes: (bytes.len() - pos) as u64,
                }),
            })
        } else {
            Err(err)
        }
    };
    loop {
        if pos == bytes.len() {
            return cut(pos, chunks, seen_head, ReadError::MissingEnd)
                .map(|r| PartialRead { profile: p, ..r });
        }
        let offset = pos as u64;
        if bytes.len() - pos < 8 {
            return cut(
                pos,
                chunks,
                seen_head,
                ReadError::Truncated {
                    what: "chunk header".into(),
                    offset,
                },
            )
            .map(|r| PartialRead { profile: p, ..r });
        }
        let tag: [u8; 4] = bytes[pos..pos + 4].try_into().unwrap();
        let name = tag_name(&tag);
        let len = u32::from_le_bytes(bytes[pos + 4..pos + 8].try_into().unwrap()) as usize;
        if bytes.len() - pos - 8 < len.saturating_add(4) {
            return cut(
                pos,
                chunks,
                seen_head,
                ReadError::Truncated {
                    what: format!("chunk {name}"),
                    offset,
                },
            )
            .map(|r| PartialRead { profile: p, ..r });
        }
        let body_end = pos + 8 + len;
        let stored = u32::from_le_bytes(bytes[body_end..body_end + 4].try_into().unwrap());
        // Fuzzing builds skip the check so that mutated payloads reach the
        // decoders below instead of all failing here.
        if !cfg!(fuzzing) && crc32fast::hash(&bytes[pos..body_end]) != stored {
            return Err(ReadError::Checksum { tag: name, offset });
        }
        let payload = &bytes[pos + 8..body_end];
        pos = body_end + 4;

        let malformed = |reason: String| ReadError::Malformed {
            tag: name.clone(),
            offset,
            reason,
        };
        if tag == tags::END {
            let mut d = Dec::new(payload);
            let n = d.uv().map_err(malformed)?;
            if n != chunks {
                return Err(malformed(format!(
                    "end marker counts {n} chunks but {chunks} precede it"
                )));
            }
            if pos != bytes.len() {
                return Err(ReadError::TrailingData {
                    extra: (bytes.len() - pos) as u64,
                });
            }
            if !seen_head {
                return Err(ReadError::Structure("no HEAD chunk".into()));
            }
            return Ok(PartialRead {
                profile: p,
                cut: None,
            });
        }
        chunks += 1;
        if tag == tags::HEAD {
            if seen_head {
                return Err(ReadError::Structure(format!(
                    "second HEAD chunk at byte {offset}"
                )));
            }
            seen_head = true;
        } else if !seen_head {
            return Err(ReadError::Structure(format!(
                "chunk {name} at byte {offset} comes before HEAD"
            )));
        }
        let mut d = Dec::new(payload);
        let result = match tag {
            tags::HEAD => header(&mut d).map(|h| p.header = h),
            tags::EVNT => events(&mut d, &mut p.events),
            tags::SMPL => samples(&mut d, &mut p.samples),
            tags::EDGE => edges(&mut d, &mut p),
            tags::EXCT => {
                if p.exact.is_some() {
                    Err("second EXCT chunk".to_string())
                } else {
                    exact(&mut d).map(|x| p.exact = Some(x))
                }
            }
            tags::CNTR => counters(&mut d).map(|c| p.counters = c),
            _ if tag[0].is_ascii_lowercase() => continue,
            _ => return Err(ReadError::UnknownChunk { tag: name, offset }),
        };
        result.map_err(malformed)?;
        if d.remaining() > 0 && !newer_minor {
            return Err(malformed(format!(
                "{} unexpected bytes at the end of the payload",
                d.remaining()
            )));
        }
    }
}

fn header(d: &mut Dec) -> R<Header> {
    let vm_name = d.str()?;
    let vm_version = d.str()?;
    let program = d.str()?;
    let args = (0..d.count(1)?).map(|_| d.str()).collect::<R<Vec<_>>>()?;
    let options = (0..d.count(2)?)
        .map(|_| Ok((d.str()?, d.str()?)))
        .collect::<R<Vec<_>>>()?;
    let clock = d.str()?;
    let clock_resolution_ns = d.uv()?;
    let start_unix_ns = d.uv()?;
    let start_time_ns = d.uv()?;
    let trigger = d.str()?;
    let trigger_source = d.str()?;
    let trigger_note = d.str()?;
    let mechanism = d.str()?;
    let rate_hz = d.u32()?;
    let cbs = if d.bool()? {
        Some(CbsConfig {
            stride: d.u32()?,
            samples: d.u32()?,
            seed: d.uv()?,
        })
    } else {
        None
    };
    Ok(Header {
        vm_name,
        vm_version,
        program,
        args,
        options,
        clock,
        clock_resolution_ns,
        start_unix_ns,
        start_time_ns,
        sampler: SamplerSettings {
            trigger,
            trigger_source,
            trigger_note,
            mechanism,
            rate_hz,
            cbs,
            exhaustive: d.bool()?,
            ring_slots: d.u32()?,
            max_frames: d.u32()?,
        },
    })
}

fn events(d: &mut Dec, out: &mut Vec<Event>) -> R<()> {
    let n = d.count(2)?;
    out.reserve(n);
    let mut prev = 0u64;
    for _ in 0..n {
        let time_ns = prev.wrapping_add(d.iv()? as u64);
        prev = time_ns;
        let kind = d.u8()?;
        let kind = match kind {
            et::PROGRAM_START => EventKind::ProgramStart,
            et::PROGRAM_END => EventKind::ProgramEnd {
                exit_code: d.i32()?,
            },
            et::CLASS_LOADED => EventKind::ClassLoaded {
                class: ClassId(d.u32()?),
                name: d.str()?,
                source: d.str()?,
            },
            et::METHOD_COMPILED => EventKind::MethodCompiled {
                method: MethodId(d.u32()?),
                class: ClassId(d.u32()?),
                name: d.str()?,
                file: d.str()?,
                line: d.u32()?,
                bytecode_len: d.u32()?,
            },
            et::METHOD_LINES => method_lines(d)?,
            et::TIER_CALL_COUNTS | et::TIER_WORK_COUNTS => {
                let with_loops = kind == et::TIER_WORK_COUNTS;
                let instrumentation_ns = d.uv()?;
                let n = d.count(if with_loops { 4 } else { 3 })?;
                let mut counts = Vec::with_capacity(n);
                for _ in 0..n {
                    counts.push(TierCalls {
                        method: MethodId(d.u32()?),
                        tier: Tier::from_u8(d.u8()?),
                        calls: d.uv()?,
                        loops: if with_loops { Some(d.uv()?) } else { None },
                    });
                }
                EventKind::TierCallCounts {
                    counts,
                    instrumentation_ns,
                }
            }
            et::METHOD_BYTECODES => {
                let method = MethodId(d.u32()?);
                let n = d.count(1)?;
                let mut ops = Vec::with_capacity(n);
                for _ in 0..n {
                    ops.push(d.str()?);
                }
                EventKind::MethodBytecodes { method, ops }
            }
            et::CODE_INSTALLED => EventKind::CodeInstalled(code_version(d)?),
            et::TIER_DECISION => EventKind::TierDecision {
                method: MethodId(d.u32()?),
                from: Tier::from_u8(d.u8()?),
                to: Tier::from_u8(d.u8()?),
                past_ns: d.uv()?,
                predicted_compile_ns: d.uv()?,
                predicted_future_ns: d.uv()?,
            },
            et::DEOPTIMIZED => EventKind::Deoptimized {
                method: MethodId(d.u32()?),
                bci: d.u32()?,
                reason: d.str()?,
                now: match d.uv()? {
                    0 => None,
                    t => Some(Tier::from_u8(
                        u8::try_from(t - 1).map_err(|_| format!("tier {} out of range", t - 1))?,
                    )),
                },
            },
            et::CODE_FREED => EventKind::CodeFreed {
                code: CodeVersionId(d.u32()?),
            },
            et::GC_START => EventKind::GcStart { kind: d.str()? },
            et::GC_END => EventKind::GcEnd {
                kind: d.str()?,
                plan: String::new(),
                scope: "full".into(),
                bytes_before: d.uv()?,
                bytes_after: d.uv()?,
                duration_ns: d.uv()?,
            },
            et::GC_END_SCOPED => EventKind::GcEnd {
                kind: d.str()?,
                plan: d.str()?,
                scope: d.str()?,
                bytes_before: d.uv()?,
                bytes_after: d.uv()?,
                duration_ns: d.uv()?,
            },
            k => return Err(format!("unknown event kind {k}")),
        };
        out.push(Event { time_ns, kind });
    }
    Ok(())
}

fn method_lines(d: &mut Dec) -> R<EventKind> {
    let method = MethodId(d.u32()?);
    let n = d.count(3)?;
    let mut lines = Vec::with_capacity(n);
    let (mut bci, mut line) = (0i64, 0i64);
    for _ in 0..n {
        bci += d.iv()?;
        line += d.iv()?;
        let column = d.u32()?;
        let (Ok(b), Ok(l)) = (u32::try_from(bci), u32::try_from(line)) else {
            return Err(format!(
                "line table of method {} leaves the u32 range",
                method.0
            ));
        };
        if lines.last().is_some_and(|e: &LineEntry| b <= e.bci) {
            return Err(format!("line table of method {} is not sorted", method.0));
        }
        lines.push(LineEntry {
            bci: b,
            line: l,
            column,
        });
    }
    Ok(EventKind::MethodLines { method, lines })
}

fn code_version(d: &mut Dec) -> R<CodeVersion> {
    let id = CodeVersionId(d.u32()?);
    let method = MethodId(d.u32()?);
    let tier = Tier::from_u8(d.u8()?);
    let compile_id = d.u32()?;
    let compile_time_ns = d.uv()?;
    let code_start = d.uv()?;
    let code_len = d.uv()?;
    let mut pc_map = Vec::new();
    let mut last = None;
    for _ in 0..d.count(2)? {
        let pc_offset = d.u32()?;
        if last.is_some_and(|l| pc_offset <= l) {
            return Err(format!("pc map of code version {} is not sorted", id.0));
        }
        last = Some(pc_offset);
        let chain = (0..d.count(2)?)
            .map(|_| Ok((MethodId(d.u32()?), d.u32()?)))
            .collect::<R<Vec<_>>>()?;
        pc_map.push(PcMapEntry { pc_offset, chain });
    }
    Ok(CodeVersion {
        id,
        method,
        tier,
        compile_id,
        compile_time_ns,
        code_start,
        code_len,
        pc_map,
    })
}

fn samples(d: &mut Dec, out: &mut Vec<Sample>) -> R<()> {
    let n = d.count(6)?;
    out.reserve(n);
    let mut prev = 0u64;
    for _ in 0..n {
        let time_ns = prev.wrapping_add(d.iv()? as u64);
        prev = time_ns;
        let s = d.u8()?;
        let state = VmState::from_u8(s).ok_or_else(|| format!("unknown VM state {s}"))?;
        let origin = match d.u8()? {
            0 => Origin::Polling,
            1 => Origin::Immediate,
            2 => Origin::GcPause,
            o => return Err(format!("unknown sample origin {o}")),
        };
        let flags = SampleFlags(d.u8()?);
        let depth = d.u32()?;
        let frames = (0..d.count(1)?)
            .map(|_| d.uv().map(RawFrame::unpack))
            .collect::<R<Vec<_>>>()?;
        out.push(Sample {
            time_ns,
            state,
            origin,
            flags,
            depth,
            frames,
        });
    }
    Ok(())
}

fn edge(d: &mut Dec) -> R<(CallEdge, u64)> {
    Ok((
        CallEdge {
            caller: MethodId(d.u32()?),
            callsite: d.u32()?,
            callee: MethodId(d.u32()?),
        },
        d.uv()?,
    ))
}

fn edges(d: &mut Dec, p: &mut Profile) -> R<()> {
    for _ in 0..d.count(4)? {
        let (e, w) = edge(d)?;
        if p.cbs_edges.edges.insert(e, w).is_some() {
            return Err("duplicate call edge".into());
        }
    }
    // Since 1.5, whose weights are window rates; before, each sample weighed 1.
    p.cbs_samples = if d.remaining() > 0 {
        d.uv()?
    } else {
        p.cbs_edges.total()
    };
    Ok(())
}

fn exact(d: &mut Dec) -> R<ExactCounts> {
    let mut x = ExactCounts::new();
    x.calls = (0..d.count(1)?).map(|_| d.uv()).collect::<R<_>>()?;
    x.bytecodes = (0..d.count(1)?).map(|_| d.uv()).collect::<R<_>>()?;
    for _ in 0..d.count(4)? {
        let (e, n) = edge(d)?;
        if x.edges.insert(e, n).is_some() {
            return Err("duplicate exact edge".into());
        }
    }
    Ok(x)
}

fn counters(d: &mut Dec) -> R<SampleCounters> {
    Ok(SampleCounters {
        taken: d.uv()?,
        recorded: d.uv()?,
        dropped_full: d.uv()?,
        dropped_busy: d.uv()?,
        dropped_coalesced: d.uv()?,
        cbs_ticks: d.uv()?,
        // Since format 1.1.
        ticks_merged: if d.remaining() > 0 { d.uv()? } else { 0 },
        // Since format 1.10.
        dropped_slow: if d.remaining() > 0 { d.uv()? } else { 0 },
    })
}
