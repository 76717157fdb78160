//! `--tier-log`'s closing summary: the send sites whose sends compiled code handed to the send
//! stubs most often, with what their inline caches held at the end. That is where compiled
//! code still needs the general send, and so where speculation or inlining would pay next.

use std::fmt::Write;

use super::install::lock;
use crate::bytecode::SiteId;
use crate::runtime::{Site, NO_CLASS};
use crate::Vm;

/// How many sites the summary names.
const BUSIEST: usize = 10;

impl Vm {
    /// Writes the summary on stderr when compiles are logged and compiled code took a send
    /// stub at all.
    pub fn log_stub_sends(&mut self) {
        if !lock(&self.jit.installer).log {
            return;
        }
        let total: u64 = self.rt.sites.iter().map(|s| s.stub_sends).sum();
        if total == 0 {
            return;
        }
        let mut busiest: Vec<(u64, SiteId)> = self
            .rt
            .sites
            .iter()
            .enumerate()
            .filter(|(_, s)| s.stub_sends > 0)
            .map(|(i, s)| (s.stub_sends, i as SiteId))
            .collect();
        busiest.sort_unstable_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
        busiest.truncate(BUSIEST);
        let mut out =
            format!("[tier] compiled code took the send stubs {total} times; the busiest sites:\n");
        for (n, site) in busiest {
            let _ = writeln!(
                out,
                "[tier] {n:>10}  {} (#{}): {}",
                self.site_place(site),
                self.rt.symbols.name(self.rt.sites[site as usize].selector),
                self.cache_contents(&self.rt.sites[site as usize]),
            );
        }
        self.write_err(out.as_bytes());
    }

    /// `Holder>>selector @bci` of the instruction that sends from `site`.
    fn site_place(&self, site: SiteId) -> String {
        for code in &self.rt.codes {
            if let Some(ip) = code.ops.iter().position(|op| op.site() == Some(site)) {
                return format!("{} @{ip}", self.rt.code_name(code));
            }
        }
        format!("site {site}")
    }

    /// What a site's inline cache holds: each class and the method it runs.
    fn cache_contents(&self, site: &Site) -> String {
        let entries: Vec<String> = [
            (site.cached_class, site.cached_code),
            (site.cached_class2, site.cached_code2),
        ]
        .iter()
        .filter(|(class, _)| *class != NO_CLASS)
        .map(|&(class, code)| {
            let code = self.rt.codes[code as usize];
            let kind = if code.primitive.is_some() {
                " (primitive)"
            } else {
                ""
            };
            format!(
                "{} -> {}{kind}",
                self.rt.class_name(class),
                self.rt.code_name(code)
            )
        })
        .collect();
        if entries.is_empty() {
            "cache empty".to_string()
        } else {
            format!("cache {}", entries.join(", "))
        }
    }
}
