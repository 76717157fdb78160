//! Encoding a [`Profile`] and writing it atomically.

use std::path::Path;

use super::codec::Enc;
use super::{event_tags as et, tags, MAGIC, MAJOR, MINOR, SAMPLES_PER_CHUNK};
use crate::code::CodeVersion;
use crate::event::{Event, EventKind};
use crate::profile::{Header, Profile};
use crate::sample::Sample;

struct Chunks {
    out: Vec<u8>,
    count: u64,
}

impl Chunks {
    fn put(&mut self, tag: [u8; 4], payload: &[u8]) {
        let len = u32::try_from(payload.len()).expect("chunk payloads stay below 4 GiB");
        let start = self.out.len();
        self.out.extend_from_slice(&tag);
        self.out.extend_from_slice(&len.to_le_bytes());
        self.out.extend_from_slice(payload);
        let crc = crc32fast::hash(&self.out[start..]);
        self.out.extend_from_slice(&crc.to_le_bytes());
        self.count += 1;
    }
}

/// The whole file as bytes.
pub fn encode(p: &Profile) -> Vec<u8> {
    let mut c = Chunks {
        out: Vec::new(),
        count: 0,
    };
    c.out.extend_from_slice(&preamble());
    c.put(tags::HEAD, &header(&p.header));
    if !p.events.is_empty() {
        c.put(tags::EVNT, &events(&p.events));
    }
    for batch in p.samples.chunks(SAMPLES_PER_CHUNK) {
        c.put(tags::SMPL, &samples(batch));
    }
    for (tag, payload) in tail(p) {
        c.put(tag, &payload);
    }
    let mut e = Enc::new();
    e.uv(c.count);
    c.put(tags::END, &e.buf);
    c.out
}

/// Magic number and version: the first 12 bytes of every file.
pub(super) fn preamble() -> Vec<u8> {
    let mut out = MAGIC.to_vec();
    out.extend_from_slice(&MAJOR.to_le_bytes());
    out.extend_from_slice(&MINOR.to_le_bytes());
    out
}

/// One chunk, framed and checksummed.
pub(super) fn chunk(tag: [u8; 4], payload: &[u8]) -> Vec<u8> {
    let mut c = Chunks {
        out: Vec::with_capacity(payload.len() + 12),
        count: 0,
    };
    c.put(tag, payload);
    c.out
}

/// The `END!` chunk closing a file of `chunks` chunks.
pub(super) fn end(chunks: u64) -> Vec<u8> {
    let mut e = Enc::new();
    e.uv(chunks);
    chunk(tags::END, &e.buf)
}

/// The chunks only known when the run is over: CBS edges, exhaustive counts, counters.
pub(super) fn tail(p: &Profile) -> Vec<([u8; 4], Vec<u8>)> {
    let mut out = Vec::new();
    // A sample count without edges is still something to keep.
    if !p.cbs_edges.edges.is_empty() || p.cbs_samples > 0 {
        let mut e = Enc::new();
        e.uv(p.cbs_edges.edges.len() as u64);
        for (edge, &w) in &p.cbs_edges.edges {
            e.uv(edge.caller.0.into());
            e.uv(edge.callsite.into());
            e.uv(edge.callee.0.into());
            e.uv(w);
        }
        e.uv(p.cbs_samples);
        out.push((tags::EDGE, e.buf));
    }
    if let Some(x) = &p.exact {
        let mut e = Enc::new();
        for v in [&x.calls, &x.bytecodes] {
            e.uv(v.len() as u64);
            for &n in v {
                e.uv(n);
            }
        }
        let mut edges: Vec<_> = x.edges.iter().collect();
        edges.sort();
        e.uv(edges.len() as u64);
        for (edge, &n) in edges {
            e.uv(edge.caller.0.into());
            e.uv(edge.callsite.into());
            e.uv(edge.callee.0.into());
            e.uv(n);
        }
        out.push((tags::EXCT, e.buf));
    }
    let k = &p.counters;
    let mut e = Enc::new();
    for v in [
        k.taken,
        k.recorded,
        k.dropped_full,
        k.dropped_busy,
        k.dropped_coalesced,
        k.cbs_ticks,
        k.ticks_merged,
        k.dropped_slow,
    ] {
        e.uv(v);
    }
    out.push((tags::CNTR, e.buf));
    out
}

/// An `EVNT` payload.
pub(super) fn events(events: &[Event]) -> Vec<u8> {
    let mut e = Enc::new();
    e.uv(events.len() as u64);
    let mut prev = 0u64;
    for ev in events {
        event(&mut e, ev, &mut prev);
    }
    e.buf
}

pub(super) fn header(h: &Header) -> Vec<u8> {
    let mut e = Enc::new();
    e.str(&h.vm_name);
    e.str(&h.vm_version);
    e.str(&h.program);
    e.uv(h.args.len() as u64);
    for a in &h.args {
        e.str(a);
    }
    e.uv(h.options.len() as u64);
    for (k, v) in &h.options {
        e.str(k);
        e.str(v);
    }
    e.str(&h.clock);
    e.uv(h.clock_resolution_ns);
    e.uv(h.start_unix_ns);
    e.uv(h.start_time_ns);
    let s = &h.sampler;
    e.str(&s.trigger);
    e.str(&s.trigger_source);
    e.str(&s.trigger_note);
    e.str(&s.mechanism);
    e.uv(s.rate_hz.into());
    match &s.cbs {
        None => e.bool(false),
        Some(c) => {
            e.bool(true);
            e.uv(c.stride.into());
            e.uv(c.samples.into());
            e.uv(c.seed);
        }
    }
    e.bool(s.exhaustive);
    e.uv(s.ring_slots.into());
    e.uv(s.max_frames.into());
    e.buf
}

fn event(e: &mut Enc, ev: &Event, prev: &mut u64) {
    e.iv(ev.time_ns.wrapping_sub(*prev) as i64);
    *prev = ev.time_ns;
    match &ev.kind {
        EventKind::ProgramStart => e.u8(et::PROGRAM_START),
        EventKind::ProgramEnd { exit_code } => {
            e.u8(et::PROGRAM_END);
            e.iv((*exit_code).into());
        }
        EventKind::ClassLoaded {
            class,
            name,
            source,
        } => {
            e.u8(et::CLASS_LOADED);
            e.uv(class.0.into());
            e.str(name);
            e.str(source);
        }
        EventKind::MethodCompiled {
            method,
            class,
            name,
            file,
            line,
            bytecode_len,
        } => {
            e.u8(et::METHOD_COMPILED);
            e.uv(method.0.into());
            e.uv(class.0.into());
            e.str(name);
            e.str(file);
            e.uv((*line).into());
            e.uv((*bytecode_len).into());
        }
        EventKind::MethodLines { method, lines } => {
            e.u8(et::METHOD_LINES);
            e.uv(method.0.into());
            e.uv(lines.len() as u64);
            let (mut bci, mut line) = (0i64, 0i64);
            for l in lines {
                e.iv(i64::from(l.bci) - bci);
                e.iv(i64::from(l.line) - line);
                e.uv(l.column.into());
                (bci, line) = (l.bci.into(), l.line.into());
            }
        }
        EventKind::MethodBytecodes { method, ops } => {
            e.u8(et::METHOD_BYTECODES);
            e.uv(method.0.into());
            e.uv(ops.len() as u64);
            for op in ops {
                e.str(op);
            }
        }
        EventKind::TierCallCounts {
            counts,
            instrumentation_ns,
        } => {
            // Counts without back-edges (a profile read from a file before 1.11) keep the
            // old kind, so that writing them does not claim zero back-edges.
            let with_loops = counts.iter().all(|c| c.loops.is_some());
            e.u8(if with_loops {
                et::TIER_WORK_COUNTS
            } else {
                et::TIER_CALL_COUNTS
            });
            e.uv(*instrumentation_ns);
            e.uv(counts.len() as u64);
            for c in counts {
                e.uv(c.method.0.into());
                e.u8(c.tier.to_u8());
                e.uv(c.calls);
                if with_loops {
                    e.uv(c.loops.unwrap_or(0));
                }
            }
        }
        EventKind::CodeInstalled(v) => {
            e.u8(et::CODE_INSTALLED);
            code_version(e, v);
        }
        EventKind::TierDecision {
            method,
            from,
            to,
            past_ns,
            predicted_compile_ns,
            predicted_future_ns,
        } => {
            e.u8(et::TIER_DECISION);
            e.uv(method.0.into());
            e.u8(from.to_u8());
            e.u8(to.to_u8());
            e.uv(*past_ns);
            e.uv(*predicted_compile_ns);
            e.uv(*predicted_future_ns);
        }
        EventKind::Deoptimized {
            method,
            bci,
            reason,
            now,
        } => {
            e.u8(et::DEOPTIMIZED);
            e.uv(method.0.into());
            e.uv((*bci).into());
            e.str(reason);
            // 0 for none, else the tier's number plus one.
            e.uv(now.map_or(0, |t| u64::from(t.to_u8()) + 1));
        }
        EventKind::CodeFreed { code } => {
            e.u8(et::CODE_FREED);
            e.uv(code.0.into());
        }
        EventKind::GcStart { kind } => {
            e.u8(et::GC_START);
            e.str(kind);
        }
        EventKind::GcEnd {
            kind,
            plan,
            scope,
            bytes_before,
            bytes_after,
            duration_ns,
        } => {
            e.u8(et::GC_END_SCOPED);
            e.str(kind);
            e.str(plan);
            e.str(scope);
            e.uv(*bytes_before);
            e.uv(*bytes_after);
            e.uv(*duration_ns);
        }
    }
}

fn code_version(e: &mut Enc, v: &CodeVersion) {
    e.uv(v.id.0.into());
    e.uv(v.method.0.into());
    e.u8(v.tier.to_u8());
    e.uv(v.compile_id.into());
    e.uv(v.compile_time_ns);
    e.uv(v.code_start);
    e.uv(v.code_len);
    e.uv(v.pc_map.len() as u64);
    for entry in &v.pc_map {
        e.uv(entry.pc_offset.into());
        e.uv(entry.chain.len() as u64);
        for (m, bci) in &entry.chain {
            e.uv(m.0.into());
            e.uv((*bci).into());
        }
    }
}

pub(super) fn samples(batch: &[Sample]) -> Vec<u8> {
    let mut e = Enc::new();
    e.uv(batch.len() as u64);
    let mut prev = 0u64;
    for s in batch {
        e.iv(s.time_ns.wrapping_sub(prev) as i64);
        prev = s.time_ns;
        e.u8(s.state as u8);
        e.u8(s.origin as u8);
        e.u8(s.flags.0);
        e.uv(s.depth.into());
        e.uv(s.frames.len() as u64);
        for f in &s.frames {
            e.uv(f.pack());
        }
    }
    e.buf
}

/// Writes `p` to `path` whole or not at all ([`tally_output::write`]).
pub fn write_file(
    p: &Profile,
    path: &Path,
    if_exists: tally_output::IfExists,
) -> Result<(), tally_output::OutputError> {
    tally_output::write(path, &encode(p), if_exists)
}
