//! The cache-simulation tool: every memory access of the program through a simulated
//! hierarchy ([`crate::cache`]), its misses counted per method, per source line and per class
//! of the object accessed. Making an object counts as one store over all of it, at the
//! allocation site.

use std::collections::HashMap;
use std::fmt::Write as _;

use crate::cache::{CacheError, Hierarchy, LevelConfig};
use crate::event::{ClassId, Instrument, MemoryAccess, MethodId, NewObject, Site};

/// The most levels a hierarchy may have here.
pub const MAX_LEVELS: usize = 4;

/// Accesses and, per level, those that missed there.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counts {
    pub accesses: u64,
    pub misses: [u64; MAX_LEVELS],
}

impl Counts {
    fn add(&mut self, depth: usize) {
        self.accesses += 1;
        for m in &mut self.misses[..depth.min(MAX_LEVELS)] {
            *m += 1;
        }
    }
}

pub struct CacheTool {
    hierarchy: Hierarchy,
    /// Rows per table in the report.
    top: usize,
    levels: usize,
    method_names: HashMap<MethodId, (String, String)>,
    class_names: HashMap<ClassId, String>,
    total: Counts,
    by_method: HashMap<MethodId, Counts>,
    by_line: HashMap<(MethodId, u32), Counts>,
    by_class: HashMap<ClassId, Counts>,
}

impl CacheTool {
    /// A tool that simulates `levels` and reports `top` rows per table.
    pub fn new(levels: Vec<LevelConfig>, top: usize) -> Result<CacheTool, CacheError> {
        if levels.len() > MAX_LEVELS {
            return Err(CacheError::Spec(format!(
                "{} levels (at most {MAX_LEVELS})",
                levels.len()
            )));
        }
        let n = levels.len();
        Ok(CacheTool {
            hierarchy: Hierarchy::new(levels)?,
            top,
            levels: n,
            method_names: HashMap::new(),
            class_names: HashMap::new(),
            total: Counts::default(),
            by_method: HashMap::new(),
            by_line: HashMap::new(),
            by_class: HashMap::new(),
        })
    }

    pub fn total(&self) -> Counts {
        self.total
    }

    /// Counts per method, most first-level misses first.
    pub fn methods(&self) -> Vec<(String, Counts)> {
        let mut rows: Vec<(String, Counts)> = self
            .by_method
            .iter()
            .map(|(m, c)| (self.method_name(*m), *c))
            .collect();
        sort_rows(&mut rows);
        rows
    }

    /// Counts per source line of `method` (by name), in line order.
    pub fn lines_of(&self, method: &str) -> Vec<(u32, Counts)> {
        let mut rows: Vec<(u32, Counts)> = self
            .by_line
            .iter()
            .filter(|((m, _), _)| self.method_name(*m) == method)
            .map(|((_, line), c)| (*line, *c))
            .collect();
        rows.sort_by_key(|r| r.0);
        rows
    }

    /// Counts per class of the object accessed (frame slots are not in an object).
    pub fn classes(&self) -> Vec<(String, Counts)> {
        let mut rows: Vec<(String, Counts)> = self
            .by_class
            .iter()
            .map(|(c, n)| {
                let name = self
                    .class_names
                    .get(c)
                    .cloned()
                    .unwrap_or_else(|| format!("class #{}", c.0));
                (name, *n)
            })
            .collect();
        sort_rows(&mut rows);
        rows
    }

    fn method_name(&self, m: MethodId) -> String {
        if m == MethodId::NONE {
            return "(no method: the VM starting the program)".into();
        }
        self.method_names
            .get(&m)
            .map(|(n, _)| n.clone())
            .unwrap_or_else(|| format!("method #{}", m.0))
    }

    fn source_of(&self, method: &str) -> Option<&str> {
        self.method_names
            .values()
            .find(|(n, _)| n == method)
            .map(|(_, s)| s.as_str())
    }

    /// The report: totals, the `top` methods by first-level misses, the per-line table of
    /// the method with the most, and the `top` classes.
    pub fn render(&self, top: usize) -> String {
        let names: Vec<String> = self.hierarchy.configs().map(|c| c.name.clone()).collect();
        let mut out = String::from("cache:");
        for c in self.hierarchy.configs() {
            let _ = write!(out, " [{c}]");
        }
        out.push('\n');
        let _ = writeln!(out, "{}", self.summary_line(&names));
        let header = |first: &str| {
            let mut h = format!("{first:<48} {:>12}", "accesses");
            for n in &names {
                let _ = write!(h, " {:>12} {:>7}", format!("{n} misses"), "rate");
            }
            h
        };
        let row = |label: &str, c: &Counts| {
            let mut r = format!("{label:<48} {:>12}", c.accesses);
            for k in 0..self.levels {
                let rate = if c.accesses > 0 {
                    100.0 * c.misses[k] as f64 / c.accesses as f64
                } else {
                    0.0
                };
                let _ = write!(r, " {:>12} {:>6.2}%", c.misses[k], rate);
            }
            r
        };
        let _ = writeln!(
            out,
            "\nmisses by method (top {top} by {} misses):",
            names[0]
        );
        let _ = writeln!(out, "{}", header("method"));
        let methods = self.methods();
        for (name, c) in methods.iter().take(top) {
            let _ = writeln!(out, "{}", row(name, c));
        }
        if let Some((hottest, _)) = methods.first() {
            let source = self.source_of(hottest).unwrap_or("");
            let text = std::fs::read_to_string(source).ok();
            let _ = writeln!(out, "\nmisses by line of {hottest} ({source}):");
            let _ = writeln!(out, "{}", header("line"));
            for (line, c) in self.lines_of(hottest) {
                let code = text
                    .as_deref()
                    .and_then(|t| t.lines().nth(line.saturating_sub(1) as usize))
                    .map(|l| l.trim())
                    .unwrap_or("");
                let label: String = format!("{line:>5}  {code}").chars().take(48).collect();
                let _ = writeln!(out, "{}", row(&label, &c));
            }
        }
        let _ = writeln!(out, "\nmisses by class of the object accessed (top {top}):");
        let _ = writeln!(out, "{}", header("class"));
        for (name, c) in self.classes().iter().take(top) {
            let _ = writeln!(out, "{}", row(name, c));
        }
        out
    }

    fn summary_line(&self, names: &[String]) -> String {
        let t = self.total;
        let mut s = format!("{} accesses", t.accesses);
        for (k, n) in names.iter().enumerate() {
            let rate = if t.accesses > 0 {
                100.0 * t.misses[k] as f64 / t.accesses as f64
            } else {
                0.0
            };
            let _ = write!(s, "; {n}: {} misses ({rate:.2}%)", t.misses[k]);
        }
        s
    }
}

fn sort_rows(rows: &mut [(String, Counts)]) {
    rows.sort_by(|a, b| {
        b.1.misses[0]
            .cmp(&a.1.misses[0])
            .then(b.1.accesses.cmp(&a.1.accesses))
            .then(a.0.cmp(&b.0))
    });
}

impl Instrument for CacheTool {
    fn class_loaded(&mut self, class: ClassId, name: &str) {
        self.class_names.insert(class, name.to_string());
    }

    fn method_defined(&mut self, method: MethodId, name: &str, source: &str) {
        self.method_names
            .insert(method, (name.to_string(), source.to_string()));
    }

    /// A new object's initialization writes every line it spans: counted as one store at
    /// its allocation site (without it, the first store into a fresh object would miss as
    /// if the allocator had not just written there).
    fn object_created(&mut self, o: &NewObject) {
        self.access(&MemoryAccess {
            address: o.address,
            size: o.size,
            kind: crate::cache::AccessKind::Store,
            place: crate::event::Place::Initialization,
            site: o.site,
            object: Some((o.address, o.class)),
        });
    }

    fn access(&mut self, a: &MemoryAccess) {
        let depth = self.hierarchy.access(a.address, a.size, a.kind);
        let Site { method, line, .. } = a.site;
        self.total.add(depth);
        self.by_method.entry(method).or_default().add(depth);
        self.by_line.entry((method, line)).or_default().add(depth);
        if let Some((_, class)) = a.object {
            self.by_class.entry(class).or_default().add(depth);
        }
    }

    fn finish(&mut self) -> Result<String, String> {
        Ok(self.render(self.top))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cache::AccessKind;
    use crate::event::Place;

    fn access(address: u64, method: u32, line: u32, class: Option<u32>) -> MemoryAccess {
        MemoryAccess {
            address,
            size: 8,
            kind: AccessKind::Load,
            place: if class.is_some() {
                Place::Field
            } else {
                Place::FrameSlot
            },
            site: Site {
                method: MethodId(method),
                bci: 0,
                line,
            },
            object: class.map(|c| (address & !15, ClassId(c))),
        }
    }

    #[test]
    fn misses_are_counted_per_method_line_and_class() {
        let levels = crate::cache::parse_levels("L1:128:64:1").unwrap();
        let mut t = CacheTool::new(levels, 10).unwrap();
        t.method_defined(MethodId(1), "A>>walk", "A.som");
        t.method_defined(MethodId(2), "A>>sum", "A.som");
        t.class_loaded(ClassId(7), "Node");
        // walk: two misses on two lines (line 3), then a hit (line 4).
        t.access(&access(0, 1, 3, Some(7)));
        t.access(&access(64, 1, 3, Some(7)));
        t.access(&access(8, 1, 4, Some(7)));
        // sum: one miss (a frame slot).
        t.access(&access(1024, 2, 9, None));
        assert_eq!(t.total().accesses, 4);
        assert_eq!(t.total().misses[0], 3);
        let methods = t.methods();
        assert_eq!(methods[0].0, "A>>walk");
        assert_eq!((methods[0].1.accesses, methods[0].1.misses[0]), (3, 2));
        assert_eq!(
            t.lines_of("A>>walk")
                .iter()
                .map(|(l, c)| (*l, c.accesses, c.misses[0]))
                .collect::<Vec<_>>(),
            vec![(3, 2, 2), (4, 1, 0)]
        );
        assert_eq!(t.classes()[0].0, "Node");
        assert_eq!(t.classes()[0].1.accesses, 3);
        let report = t.render(10);
        assert!(report.contains("misses by line of A>>walk"), "{report}");
        assert!(
            report.contains("4 accesses; L1: 3 misses (75.00%)"),
            "{report}"
        );
    }
}
