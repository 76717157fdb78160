//! Samples per source line of one method, like `perf annotate` or `pprof -list`.
//!
//! A frame's line is the line of its bytecode index ([`Symbols::position`]): for a caller,
//! the call it is waiting in; for the innermost frame, the last call it made, because the VM
//! saves a frame's position only at calls; a frame that has made no call yet is put on the
//! method's header line. So *self* samples gather on the lines of calls and on the header.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write;

use crate::code::Symbols;
use crate::ids::MethodId;
use crate::profile::Profile;

/// One method's samples by line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LineProfile {
    pub method: MethodId,
    pub name: String,
    pub file: String,
    /// The method's header line.
    pub header_line: u32,
    /// The last line its bytecodes come from.
    pub last_line: u32,
    /// line → (self, total): samples whose innermost frame is the method at that line, and
    /// samples with the method at that line anywhere on the stack (once per sample).
    pub lines: BTreeMap<u32, (u64, u64)>,
    /// Samples with the method innermost, and anywhere on the stack.
    pub self_samples: u64,
    pub total_samples: u64,
    /// All samples, for shares.
    pub samples: u64,
}

impl LineProfile {
    /// The profiles of the methods named `name` (several when a name is not unique, e.g. the
    /// same method loaded twice), or of the methods whose names contain it when none is named
    /// exactly. Empty when nothing matches.
    pub fn for_name(p: &Profile, name: &str) -> Vec<LineProfile> {
        let symbols = p.symbols();
        let mut ids: Vec<MethodId> = symbols
            .methods
            .iter()
            .filter(|(_, i)| i.name == name)
            .map(|(&m, _)| m)
            .collect();
        if ids.is_empty() {
            ids = symbols
                .methods
                .iter()
                .filter(|(_, i)| i.name.contains(name))
                .map(|(&m, _)| m)
                .collect();
        }
        ids.sort();
        ids.into_iter()
            .map(|m| LineProfile::new(p, &symbols, m))
            .collect()
    }

    fn new(p: &Profile, symbols: &Symbols, method: MethodId) -> LineProfile {
        let info = &symbols.methods[&method];
        let mut lines: BTreeMap<u32, (u64, u64)> = BTreeMap::new();
        let mut seen = BTreeSet::new();
        let (mut self_samples, mut total_samples) = (0, 0);
        for s in &p.samples {
            seen.clear();
            for (i, f) in symbols.resolve_stack(&s.frames).iter().enumerate() {
                if f.method != method {
                    continue;
                }
                let Some(pos) = symbols.position(f.method, f.bci) else {
                    continue;
                };
                let row = lines.entry(pos.line).or_default();
                if i == 0 {
                    row.0 += 1;
                    self_samples += 1;
                }
                if seen.insert(pos.line) {
                    row.1 += 1;
                }
            }
            total_samples += u64::from(!seen.is_empty());
        }
        let table_last = symbols
            .lines
            .get(&method)
            .and_then(|t| t.iter().map(|e| e.line).max());
        let last_line = table_last
            .into_iter()
            .chain(lines.keys().copied())
            .fold(info.line, u32::max);
        LineProfile {
            method,
            name: info.name.clone(),
            file: info.file.clone(),
            header_line: info.line,
            last_line,
            lines,
            self_samples,
            total_samples,
            samples: p.samples.len() as u64,
        }
    }

    /// The listing: every line from the header to the method's last line, with its source
    /// when `source` (the file's text) is given, else the line numbers alone.
    pub fn render_text(&self, source: Option<&str>) -> String {
        let mut out = format!(
            "{} ({}:{}): {} of {} samples innermost in it (self), {} with it on the stack (total)\n",
            self.name, self.file, self.header_line, self.self_samples, self.samples, self.total_samples
        );
        out.push_str("   self  total   line\n");
        let text: Vec<&str> = source.map(|s| s.lines().collect()).unwrap_or_default();
        for line in self.header_line.max(1)..=self.last_line {
            let (s, t) = self.lines.get(&line).copied().unwrap_or((0, 0));
            let cell = |n: u64| {
                if n == 0 {
                    ".".to_string()
                } else {
                    n.to_string()
                }
            };
            let code = text.get(line as usize - 1).copied().unwrap_or("");
            let _ = writeln!(out, "{:>7} {:>6} {:>6}  {}", cell(s), cell(t), line, code);
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixtures::example_profile;

    #[test]
    fn samples_land_on_the_lines_of_their_bytecode_indices() {
        let p = example_profile();
        let lp = LineProfile::for_name(&p, "Bench>>fib:");
        assert_eq!(lp.len(), 1);
        let lp = &lp[0];
        // fib: samples: innermost at bytecode 4 (line 9) twice, 11 (line 11) once, 5 (line 9,
        // the truncated one) once; as a caller at 9 (line 10) twice.
        assert_eq!(
            lp.lines.iter().map(|(&l, &c)| (l, c)).collect::<Vec<_>>(),
            vec![(9, (3, 3)), (10, (0, 2)), (11, (1, 1))]
        );
        assert_eq!((lp.header_line, lp.last_line), (7, 11));
        assert_eq!((lp.self_samples, lp.total_samples), (4, 4));
        let source = "1\n2\n3\n4\n5\n6\nfib: n = (\n  line8\n  line9\n  line10\n  line11 )\n";
        let text = lp.render_text(Some(source));
        assert!(
            text.contains("\n      3      3      9    line9\n"),
            "{text}"
        );
        assert!(
            text.contains("\n      .      .      8    line8\n"),
            "{text}"
        );
        assert!(
            text.contains("\n      .      2     10    line10\n"),
            "{text}"
        );
        let bare = lp.render_text(None);
        assert!(bare.contains("\n      1      1     11  \n"), "{bare}");
        assert_eq!(
            LineProfile::for_name(&p, "fib").len(),
            1,
            "a part of a name"
        );
        assert!(LineProfile::for_name(&p, "nothing").is_empty());
    }
}
