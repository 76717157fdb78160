//! Code versions and name resolution: how a raw sampled frame becomes
//! the method(s) and bytecode index(es) a person reads.
//!
//! A code version is method × tier × compile id with its compile time, code
//! range and pc → (bytecode index, inlining chain) map. Samples in compiled
//! code record (version, pc offset); resolution walks the map, so one raw
//! frame can expand to several logical frames when methods were inlined.
//! Interpreted frames need no version: (method, bytecode index) is final.

use std::collections::HashMap;

use crate::event::{Event, EventKind, LineEntry};
use crate::ids::{ClassId, CodeVersionId, MethodId, RawFrame, Tier, ENTRY_BCI};
use crate::sample::{Sample, SampleFlags};

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CodeVersion {
    pub id: CodeVersionId,
    pub method: MethodId,
    pub tier: Tier,
    /// The compiler's own sequence number (ids may be assigned by the
    /// recorder; compile ids are the compiler's).
    pub compile_id: u32,
    /// The compiling thread's CPU time for the compile: what it cost the machine, which a
    /// busy machine does not inflate as it does the wall-clock time.
    pub compile_time_ns: u64,
    pub code_start: u64,
    pub code_len: u64,
    /// Sorted by `pc_offset`; each entry covers pcs up to the next one.
    pub pc_map: Vec<PcMapEntry>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PcMapEntry {
    pub pc_offset: u32,
    /// (method, bytecode index) innermost first; the last entry is the
    /// version's own method, earlier ones are methods inlined into it.
    pub chain: Vec<(MethodId, u32)>,
}

impl CodeVersion {
    /// The map entry covering `pc_offset`, if any.
    pub fn lookup(&self, pc_offset: u32) -> Option<&PcMapEntry> {
        let i = self.pc_map.partition_point(|e| e.pc_offset <= pc_offset);
        i.checked_sub(1).map(|i| &self.pc_map[i])
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MethodInfo {
    pub name: String,
    pub class: ClassId,
    pub file: String,
    pub line: u32,
    pub bytecode_len: u32,
}

/// One frame as a person reads it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct LogicalFrame {
    pub method: MethodId,
    pub bci: u32,
    pub tier: Tier,
    /// Inlined into the frame outside it (no real frame of its own).
    pub inlined: bool,
}

/// Where a frame is in its source: the file and 1-based line and column (column 0: only the
/// line is known, as for a method's header).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SourcePos<'a> {
    pub file: &'a str,
    pub line: u32,
    pub column: u32,
}

/// Everything the events taught us about names and code.
#[derive(Clone, Debug, Default)]
pub struct Symbols {
    pub methods: HashMap<MethodId, MethodInfo>,
    /// Bytecode index → source position, per method ([`EventKind::MethodLines`]).
    pub lines: HashMap<MethodId, Vec<LineEntry>>,
    /// Instructions as text, per method ([`EventKind::MethodBytecodes`]).
    pub bytecodes: HashMap<MethodId, Vec<String>>,
    pub classes: HashMap<ClassId, String>,
    pub code: HashMap<CodeVersionId, CodeVersion>,
}

impl Symbols {
    pub fn from_events<'a>(events: impl IntoIterator<Item = &'a Event>) -> Symbols {
        let mut s = Symbols::default();
        for e in events {
            match &e.kind {
                EventKind::ClassLoaded { class, name, .. } => {
                    s.classes.insert(*class, name.clone());
                }
                EventKind::MethodCompiled {
                    method,
                    class,
                    name,
                    file,
                    line,
                    bytecode_len,
                } => {
                    s.methods.insert(
                        *method,
                        MethodInfo {
                            name: name.clone(),
                            class: *class,
                            file: file.clone(),
                            line: *line,
                            bytecode_len: *bytecode_len,
                        },
                    );
                }
                EventKind::MethodLines { method, lines } => {
                    s.lines.insert(*method, lines.clone());
                }
                EventKind::MethodBytecodes { method, ops } => {
                    s.bytecodes.insert(*method, ops.clone());
                }
                // Freed versions stay: samples taken before the free still
                // name them.
                EventKind::CodeInstalled(v) => {
                    s.code.insert(v.id, v.clone());
                }
                _ => {}
            }
        }
        s
    }

    pub fn method_name(&self, m: MethodId) -> String {
        match self.methods.get(&m) {
            Some(info) => info.name.clone(),
            None if m == crate::ids::GC_PAUSE => "[GC]".to_string(),
            None => match m.truncated_frames() {
                Some(n) => format!("[truncated: {n} frames]"),
                None => format!("method#{}", m.0),
            },
        }
    }

    /// Where `bci` of `method` is in its source: the position of that bytecode (for a
    /// caller, the call it is waiting in; for the innermost frame, the last call it made),
    /// or the method's header line for [`ENTRY_BCI`] (entered, no call made yet) and for
    /// methods the profile has no line table for. `None` for unknown methods.
    pub fn position(&self, method: MethodId, bci: u32) -> Option<SourcePos<'_>> {
        let info = self.methods.get(&method)?;
        let mut pos = SourcePos {
            file: &info.file,
            line: info.line,
            column: 0,
        };
        if bci != ENTRY_BCI {
            if let Some(table) = self.lines.get(&method) {
                if let Some(i) = table.partition_point(|e| e.bci <= bci).checked_sub(1) {
                    pos.line = table[i].line;
                    pos.column = table[i].column;
                }
            }
        }
        Some(pos)
    }

    /// A sample's stack, innermost first; a truncated sample ends in a
    /// `[truncated: N frames]` root ([`MethodId::truncated`]) standing for the outer frames
    /// it lost, so its kept frames never pose as the program's root.
    pub fn resolve_sample(&self, s: &Sample) -> Vec<LogicalFrame> {
        let mut out = self.resolve_stack(&s.frames);
        if s.origin == crate::sample::Origin::GcPause {
            out.insert(
                0,
                LogicalFrame {
                    method: crate::ids::GC_PAUSE,
                    bci: 0,
                    tier: Tier::Interpreter,
                    inlined: false,
                },
            );
        }
        if let Some(lost) = lost_frames(s) {
            out.push(LogicalFrame {
                method: MethodId::truncated(lost),
                bci: 0,
                tier: Tier::Interpreter,
                inlined: false,
            });
        }
        out
    }

    /// Appends the logical frames of `raw`, innermost first.
    pub fn resolve_into(&self, raw: RawFrame, out: &mut Vec<LogicalFrame>) {
        match raw {
            RawFrame::Interpreted { method, bci } => out.push(LogicalFrame {
                method,
                bci,
                tier: Tier::Interpreter,
                inlined: false,
            }),
            RawFrame::InTier {
                method,
                bci,
                tier,
                inlined,
            } => out.push(LogicalFrame {
                method,
                bci,
                tier,
                inlined,
            }),
            RawFrame::Compiled { code, pc_offset } => {
                let Some(v) = self.code.get(&code) else {
                    // Unknown code: keep the sample, attribute it to a
                    // placeholder method so totals stay right.
                    out.push(LogicalFrame {
                        method: MethodId(u32::MAX),
                        bci: pc_offset,
                        tier: Tier::Other(255),
                        inlined: false,
                    });
                    return;
                };
                match v.lookup(pc_offset) {
                    Some(entry) if !entry.chain.is_empty() => {
                        let last = entry.chain.len() - 1;
                        for (i, &(method, bci)) in entry.chain.iter().enumerate() {
                            out.push(LogicalFrame {
                                method,
                                bci,
                                tier: v.tier,
                                inlined: i != last,
                            });
                        }
                    }
                    _ => out.push(LogicalFrame {
                        method: v.method,
                        bci: 0,
                        tier: v.tier,
                        inlined: false,
                    }),
                }
            }
        }
    }

    /// A whole sampled stack, innermost first: each raw frame's logical frames in turn (a
    /// compiled frame's include the methods its code runs inlined, which have no frames of
    /// their own).
    pub fn resolve_stack(&self, frames: &[RawFrame]) -> Vec<LogicalFrame> {
        let mut out = Vec::with_capacity(frames.len());
        for &f in frames {
            self.resolve_into(f, &mut out);
        }
        out
    }
}

/// The outer frames a truncated sample lost (at least 1: a sample flagged truncated whose
/// depth was not recorded still lost something).
pub fn lost_frames(s: &Sample) -> Option<u32> {
    s.flags
        .contains(SampleFlags::TRUNCATED)
        .then(|| s.depth.saturating_sub(s.frames.len() as u32).max(1))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn positions_come_from_the_line_table_and_entry_means_the_header() {
        let events = [
            Event {
                time_ns: 0,
                kind: EventKind::MethodCompiled {
                    method: MethodId(4),
                    class: ClassId(1),
                    name: "A>>b".into(),
                    file: "A.som".into(),
                    line: 10,
                    bytecode_len: 9,
                },
            },
            Event {
                time_ns: 0,
                kind: EventKind::MethodLines {
                    method: MethodId(4),
                    lines: LineEntry::table([(11, 5), (11, 5), (12, 9), (14, 3), (14, 3)]),
                },
            },
        ];
        let s = Symbols::from_events(&events);
        let at = |bci| {
            s.position(MethodId(4), bci)
                .map(|p| (p.file, p.line, p.column))
        };
        assert_eq!(at(0), Some(("A.som", 11, 5)));
        assert_eq!(at(1), Some(("A.som", 11, 5)));
        assert_eq!(at(2), Some(("A.som", 12, 9)));
        assert_eq!(at(4), Some(("A.som", 14, 3)));
        assert_eq!(at(400), Some(("A.som", 14, 3)));
        assert_eq!(at(ENTRY_BCI), Some(("A.som", 10, 0)));
        assert_eq!(s.position(MethodId(5), 0), None);
    }

    #[test]
    fn a_truncated_sample_hangs_under_a_truncated_root() {
        let s = Symbols::default();
        let mut sample = Sample {
            time_ns: 0,
            state: crate::ids::VmState::Interpreting,
            origin: crate::sample::Origin::Immediate,
            flags: SampleFlags::TRUNCATED,
            depth: 2000,
            frames: vec![RawFrame::interpreted(MethodId(1), 3); 128],
        };
        let frames = s.resolve_sample(&sample);
        assert_eq!(frames.len(), 129);
        assert_eq!(
            s.method_name(frames[128].method),
            "[truncated: 1872 frames]"
        );
        sample.flags = SampleFlags::NONE;
        sample.depth = 128;
        assert_eq!(s.resolve_sample(&sample).len(), 128);
    }

    #[test]
    fn compiled_frames_expand_through_the_inlining_chain() {
        let v = CodeVersion {
            id: CodeVersionId(1),
            method: MethodId(10),
            tier: Tier::Optimizing,
            compile_id: 3,
            compile_time_ns: 5000,
            code_start: 0x1000,
            code_len: 0x100,
            pc_map: vec![
                PcMapEntry {
                    pc_offset: 0,
                    chain: vec![(MethodId(10), 0)],
                },
                PcMapEntry {
                    pc_offset: 0x20,
                    chain: vec![(MethodId(11), 4), (MethodId(10), 7)],
                },
            ],
        };
        let events = [Event {
            time_ns: 0,
            kind: EventKind::CodeInstalled(v),
        }];
        let s = Symbols::from_events(&events);
        let frames = s.resolve_stack(&[
            RawFrame::Compiled {
                code: CodeVersionId(1),
                pc_offset: 0x24,
            },
            RawFrame::interpreted(MethodId(2), 9),
        ]);
        let got: Vec<_> = frames
            .iter()
            .map(|f| (f.method.0, f.bci, f.inlined))
            .collect();
        assert_eq!(got, vec![(11, 4, true), (10, 7, false), (2, 9, false)]);
        assert_eq!(frames[0].tier, Tier::Optimizing);
        assert_eq!(frames[2].tier, Tier::Interpreter);
        let early = s.resolve_stack(&[RawFrame::Compiled {
            code: CodeVersionId(1),
            pc_offset: 0x1f,
        }]);
        assert_eq!(early[0].method, MethodId(10));
        assert_eq!(s.method_name(MethodId(10)), "method#10");

        // A frame below naming the version's own method is a real call of it (recursion),
        // not the same activation: nothing is dropped.
        let recursive = s.resolve_stack(&[
            RawFrame::Compiled {
                code: CodeVersionId(1),
                pc_offset: 0x24,
            },
            RawFrame::interpreted(MethodId(10), 7),
        ]);
        let got: Vec<_> = recursive.iter().map(|f| (f.method.0, f.inlined)).collect();
        assert_eq!(got, vec![(11, true), (10, false), (10, false)]);
    }
}
