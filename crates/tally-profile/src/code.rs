//! Code versions and name resolution: how a raw sampled frame becomes
//! the method(s) and bytecode index(es) a person reads.
//!
//! A code version is method × tier × compile id with its compile time, code
//! range and pc → (bytecode index, inlining chain) map. Samples in compiled
//! code record (version, pc offset); resolution walks the map, so one raw
//! frame can expand to several logical frames when methods were inlined.
//! Interpreted frames need no version: (method, bytecode index) is final.

use std::collections::HashMap;

use crate::event::{Event, EventKind};
use crate::ids::{ClassId, CodeVersionId, MethodId, RawFrame, Tier};

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CodeVersion {
    pub id: CodeVersionId,
    pub method: MethodId,
    pub tier: Tier,
    /// The compiler's own sequence number (ids may be assigned by the
    /// recorder; compile ids are the compiler's).
    pub compile_id: u32,
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

/// Everything the events taught us about names and code.
#[derive(Clone, Debug, Default)]
pub struct Symbols {
    pub methods: HashMap<MethodId, MethodInfo>,
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
            None => format!("method#{}", m.0),
        }
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

    /// A whole sampled stack, innermost first.
    pub fn resolve_stack(&self, frames: &[RawFrame]) -> Vec<LogicalFrame> {
        let mut out = Vec::with_capacity(frames.len());
        for &f in frames {
            self.resolve_into(f, &mut out);
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
    }
}
