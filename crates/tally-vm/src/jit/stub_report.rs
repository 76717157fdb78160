//! Sends compiled code hands to the send stubs: the optimizing tier's version compiled again
//! where they pile up at a site it could now serve, and `--tier-log`'s closing summary of the
//! sites that took the stubs most often, with what their inline caches held at the end. That
//! is where compiled code still needs the general send, and so where speculation or inlining
//! would pay next.

use std::fmt::Write;

use super::install::lock;
use crate::bytecode::SiteId;
use crate::runtime::{Code, Site, NO_CLASS};
use crate::Vm;

/// How many sites the summary names.
const BUSIEST: usize = 10;

/// Whether the optimizing tier's version that sent through the stub at a site for the
/// `n`th time is compiled again (`Vm::stub_sends_piled_up`): at 2^10 sends (enough that a
/// site cold at the compile has turned hot, few next to the calls a hot site makes in a
/// second), then at every sixteenfold, so a site whose sends stay on the stub (megamorphic)
/// costs a few compiles over a run, not one per thousand sends.
pub(crate) fn recompiles_at(n: u64) -> bool {
    n >= 1 << 10 && n.is_power_of_two() && n.trailing_zeros() % 4 == 2
}

impl Vm {
    /// The optimizing tier's code took the send stub at `site` often ([`recompiles_at`]):
    /// when compiled code can now serve the site without the stub (its cache has filled
    /// since the compile, or it was compiled cold and turned hot) and the site is not
    /// megamorphic, the speculative version running on top (the one the send is in, or
    /// inlined into) is taken out of use and compiled again. Its running activations go on
    /// in it; the next call runs the tier below until the new version is in.
    pub(crate) fn stub_sends_piled_up(&mut self, site: SiteId) {
        // A site that saw more classes than a class switch tests (megamorphic) would send
        // the rest from a new version as often.
        let megamorphic = self.rt.sites[site as usize]
            .seen
            .as_deref()
            .is_some_and(|m| m.megamorphic());
        if megamorphic || super::request::expected_receivers(&self.rt, site).is_none() {
            return;
        }
        let code: &'static Code = self.rt.codes[self.rt.frames.top().code as usize];
        let Some(now) = lock(&self.jit.installer).invalidate(code) else {
            return;
        };
        if self.jit.generator.is_some() {
            code.compiled.request();
        }
        if lock(&self.jit.installer).log {
            let selector = self.rt.symbols.name(self.rt.sites[site as usize].selector);
            let line = format!(
                "[tier] recompile {}: its send of #{selector} took the send stub {} times; \
                 invalidated, now {}\n",
                self.rt.code_name(code),
                self.rt.sites[site as usize].stub_sends,
                now.name()
            );
            self.write_err(line.as_bytes());
        }
    }

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

#[cfg(test)]
mod tests {
    use super::recompiles_at;

    #[test]
    fn recompiles_come_at_two_to_the_ten_then_at_every_sixteenfold() {
        let at: Vec<u64> = (1..=1u64 << 22).filter(|&n| recompiles_at(n)).collect();
        assert_eq!(at, vec![1 << 10, 1 << 14, 1 << 18, 1 << 22]);
    }
}
