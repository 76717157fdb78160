//! Object lifetimes and refactoring hints (Buytaert's thesis, appendix A.4).
//!
//! An object's lifetime runs from its creation to its last access, measured in the bytes the
//! program allocated meanwhile (and in its accesses). Lifetimes are gathered per class and per
//! allocation site; a site whose objects mostly die young — within [`LifetimeTool::short`]
//! bytes of allocation — is a refactoring hint, given with the sites where its objects were
//! last used and the methods they travelled between (made in one, last used in another).
//!
//! Objects are told apart by address, so the run must not move them (a non-moving collector):
//! an object made where an earlier one was ends the earlier one's record, which had been
//! unreachable since its last access anyway.

use std::collections::HashMap;
use std::fmt::Write as _;

use crate::event::{ClassId, Instrument, MemoryAccess, MethodId, NewObject};

/// An allocation or use site: method and line.
type SiteKey = (MethodId, u32);

struct Live {
    class: ClassId,
    born: SiteKey,
    called_from: Option<SiteKey>,
    born_bytes: u64,
    born_access: u64,
    last: SiteKey,
    last_bytes: u64,
    last_access: u64,
}

/// Lifetimes of the objects of one class or one site.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Lifetimes {
    /// Lifetimes in bytes allocated, one per object.
    pub bytes: Vec<u64>,
    /// Lifetimes in the program's memory accesses.
    pub accesses: Vec<u64>,
    /// Objects never accessed after their creation.
    pub never_used: u64,
    /// Where the site's objects were last used, and how often.
    pub last_uses: HashMap<SiteKey, u64>,
}

impl Lifetimes {
    fn median(values: &[u64]) -> u64 {
        Lifetimes::quantiles(values, &[0.5])[0]
    }

    /// The `qs` quantiles (nearest rank) of `values`.
    pub fn quantiles(values: &[u64], qs: &[f64]) -> Vec<u64> {
        let mut v = values.to_vec();
        v.sort_unstable();
        qs.iter()
            .map(|q| {
                let rank = ((q * v.len() as f64).ceil() as usize).clamp(1, v.len().max(1));
                v.get(rank - 1).copied().unwrap_or(0)
            })
            .collect()
    }

    /// Objects whose lifetime is below `short` bytes allocated.
    pub fn short_lived(&self, short: u64) -> usize {
        self.bytes.iter().filter(|&&b| b < short).count()
    }
}

pub struct LifetimeTool {
    /// Lifetimes below this many bytes allocated are short.
    pub short: u64,
    top: usize,
    live: HashMap<u64, Live>,
    allocated: u64,
    accesses: u64,
    by_class: HashMap<ClassId, Lifetimes>,
    /// By allocation site, the site that called the allocating method, and class.
    by_site: HashMap<(SiteKey, Option<SiteKey>, ClassId), Lifetimes>,
    methods: HashMap<MethodId, (String, String)>,
    classes: HashMap<ClassId, String>,
}

impl LifetimeTool {
    pub fn new(short: u64, top: usize) -> LifetimeTool {
        LifetimeTool {
            short,
            top,
            live: HashMap::new(),
            allocated: 0,
            accesses: 0,
            by_class: HashMap::new(),
            by_site: HashMap::new(),
            methods: HashMap::new(),
            classes: HashMap::new(),
        }
    }

    fn retire(&mut self, o: Live) {
        let bytes = o.last_bytes - o.born_bytes;
        let accesses = o.last_access - o.born_access;
        let never = o.last_access == o.born_access;
        for l in [
            self.by_class.entry(o.class).or_default(),
            self.by_site
                .entry((o.born, o.called_from, o.class))
                .or_default(),
        ] {
            l.bytes.push(bytes);
            l.accesses.push(accesses);
            l.never_used += u64::from(never);
            if !never {
                *l.last_uses.entry(o.last).or_default() += 1;
            }
        }
    }

    /// Lifetimes per class (every object retired: call after the run).
    pub fn classes(&self) -> Vec<(String, &Lifetimes)> {
        let mut rows: Vec<(String, &Lifetimes)> = self
            .by_class
            .iter()
            .map(|(c, l)| (self.class_name(*c), l))
            .collect();
        rows.sort_by(|a, b| b.1.bytes.len().cmp(&a.1.bytes.len()).then(a.0.cmp(&b.0)));
        rows
    }

    /// Allocation sites (`Class at file:line (method), called from file:line (method)`) whose
    /// objects mostly die young, most short-lived objects first. Objects the VM made before
    /// the program ran are left out: no code of the program made them.
    pub fn hints(&self) -> Vec<(String, &Lifetimes)> {
        let mut rows: Vec<(String, usize, &Lifetimes)> = self
            .by_site
            .iter()
            .filter(|(((m, _), _, _), _)| *m != MethodId::NONE)
            .map(|(((m, line), caller, c), l)| {
                let mut label = format!("{} at {}", self.class_name(*c), self.site_name(*m, *line));
                if let Some((cm, cl)) = caller {
                    label.push_str(&format!(", called from {}", self.site_name(*cm, *cl)));
                }
                (label, l.short_lived(self.short), l)
            })
            .filter(|(_, short, l)| *short * 2 > l.bytes.len())
            .collect();
        rows.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
        rows.into_iter().map(|(s, _, l)| (s, l)).collect()
    }

    fn class_name(&self, c: ClassId) -> String {
        self.classes
            .get(&c)
            .cloned()
            .unwrap_or_else(|| format!("class #{}", c.0))
    }

    fn method_name(&self, m: MethodId) -> String {
        if m == MethodId::NONE {
            return "(the VM starting the program)".into();
        }
        self.methods
            .get(&m)
            .map(|(n, _)| n.clone())
            .unwrap_or_else(|| format!("method #{}", m.0))
    }

    /// `file:line (method)`.
    fn site_name(&self, m: MethodId, line: u32) -> String {
        let file = self.methods.get(&m).map(|(_, s)| s.as_str()).unwrap_or("?");
        format!("{file}:{line} ({})", self.method_name(m))
    }

    pub fn render(&self) -> String {
        let mut out = format!(
            "object lifetimes: from creation to last access, in bytes allocated meanwhile \
             ({} objects, {} bytes allocated, {} accesses); short-lived: under {} bytes\n",
            self.by_class.values().map(|l| l.bytes.len()).sum::<usize>(),
            self.allocated,
            self.accesses,
            self.short
        );
        let _ = writeln!(out, "\nby class (top {}):", self.top);
        let _ = writeln!(
            out,
            "{:<28} {:>9} {:>8} {:>34} {:>14} {:>9}",
            "class", "objects", "short", "bytes: p25 / p50 / p90 / max", "accesses p50", "unused"
        );
        for (name, l) in self.classes().iter().take(self.top) {
            let q = Lifetimes::quantiles(&l.bytes, &[0.25, 0.5, 0.9, 1.0]);
            let _ = writeln!(
                out,
                "{:<28} {:>9} {:>7.1}% {:>34} {:>14} {:>9}",
                name,
                l.bytes.len(),
                100.0 * l.short_lived(self.short) as f64 / l.bytes.len().max(1) as f64,
                format!("{} / {} / {} / {}", q[0], q[1], q[2], q[3]),
                Lifetimes::median(&l.accesses),
                l.never_used
            );
        }
        let _ = writeln!(
            out,
            "\nrefactoring hints: allocation sites whose objects mostly die young (top {}):",
            self.top
        );
        for (site, l) in self.hints().iter().take(self.top) {
            let short = l.short_lived(self.short);
            let _ = writeln!(
                out,
                "{site}: {short} of {} objects short-lived (median {} bytes), {} never used",
                l.bytes.len(),
                Lifetimes::median(&l.bytes),
                l.never_used
            );
            let mut uses: Vec<(&SiteKey, &u64)> = l.last_uses.iter().collect();
            uses.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
            for ((m, line), n) in uses.iter().take(3) {
                let _ = writeln!(out, "    last used at {} ({n})", self.site_name(*m, *line));
            }
        }
        out
    }
}

impl Instrument for LifetimeTool {
    fn class_loaded(&mut self, class: ClassId, name: &str) {
        self.classes.insert(class, name.to_string());
    }

    fn method_defined(&mut self, method: MethodId, name: &str, source: &str) {
        self.methods
            .insert(method, (name.to_string(), source.to_string()));
    }

    fn object_created(&mut self, o: &NewObject) {
        let NewObject {
            address,
            class,
            size,
            site,
            caller,
        } = *o;
        self.allocated += u64::from(size);
        let born = (site.method, site.line);
        let called_from = caller.map(|c| (c.method, c.line));
        let new = Live {
            class,
            born,
            called_from,
            born_bytes: self.allocated,
            born_access: self.accesses,
            last: born,
            last_bytes: self.allocated,
            last_access: self.accesses,
        };
        if let Some(old) = self.live.insert(address, new) {
            self.retire(old);
        }
    }

    fn access(&mut self, a: &MemoryAccess) {
        self.accesses += 1;
        if let Some((object, _)) = a.object {
            if let Some(o) = self.live.get_mut(&object) {
                o.last = (a.site.method, a.site.line);
                o.last_bytes = self.allocated;
                o.last_access = self.accesses;
            }
        }
    }

    fn finish(&mut self) -> Result<String, String> {
        let live: Vec<Live> = self.live.drain().map(|(_, o)| o).collect();
        for o in live {
            self.retire(o);
        }
        Ok(self.render())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cache::AccessKind;
    use crate::event::{Place, Site};

    fn site(m: u32, line: u32) -> Site {
        Site {
            method: MethodId(m),
            bci: 0,
            line,
        }
    }

    fn touch(t: &mut LifetimeTool, object: u64, m: u32, line: u32) {
        t.access(&MemoryAccess {
            address: object + 16,
            size: 8,
            kind: AccessKind::Load,
            place: Place::Field,
            site: site(m, line),
            object: Some((object, ClassId(1))),
        });
    }

    #[test]
    fn lifetimes_run_from_creation_to_last_access_in_bytes_allocated() {
        let mut t = LifetimeTool::new(100, 10);
        t.class_loaded(ClassId(1), "Point");
        t.method_defined(MethodId(1), "A>>make", "A.som");
        t.method_defined(MethodId(2), "A>>use", "A.som");
        // p is made at line 3 and last used at line 9 after 40 more bytes; q, made at line 4,
        // lives 1000 bytes; r is never used.
        let made = |t: &mut LifetimeTool, address, size, line| {
            t.object_created(&NewObject {
                address,
                class: ClassId(1),
                size,
                site: site(1, line),
                caller: None,
            })
        };
        made(&mut t, 0x100, 40, 3);
        made(&mut t, 0x200, 40, 4);
        touch(&mut t, 0x100, 2, 9);
        made(&mut t, 0x300, 1000, 3);
        touch(&mut t, 0x200, 2, 9);
        // A new object where p was ends p's record.
        made(&mut t, 0x100, 40, 5);
        t.finish().unwrap();
        let point = &t.by_class[&ClassId(1)];
        let mut bytes = point.bytes.clone();
        bytes.sort_unstable();
        // p: 40 (q's); q: 1000 (r's); r and the last one: 0, never used.
        assert_eq!(bytes, vec![0, 0, 40, 1000]);
        assert_eq!(point.never_used, 2);
        let hints = t.hints();
        // Line 3 made p (short, used) and r (short, never used): a hint, last used at line 9.
        let (label, l) = hints
            .iter()
            .find(|(s, _)| s.contains("A.som:3"))
            .expect("a hint for line 3");
        assert!(label.starts_with("Point at A.som:3 (A>>make)"), "{label}");
        assert_eq!(l.short_lived(100), 2);
        assert_eq!(l.last_uses.get(&(MethodId(2), 9)), Some(&1));
        // Line 4 made q, which lived long: no hint.
        assert!(
            hints.iter().all(|(s, _)| !s.contains("A.som:4")),
            "{hints:?}"
        );
        assert!(t.render().contains("last used at A.som:9 (A>>use) (1)"));
        assert!(t.render().contains("0 / 0 / 1000 / 1000"), "{}", t.render());
    }

    #[test]
    fn quantiles_are_nearest_rank() {
        let v = [5, 1, 4, 2, 3];
        assert_eq!(Lifetimes::quantiles(&v, &[0.2, 0.5, 1.0]), vec![1, 3, 5]);
        assert_eq!(Lifetimes::quantiles(&[], &[0.5]), vec![0]);
    }
}
