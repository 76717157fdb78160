//! What a compile works from: the code (never changed once made) and copies of what it needs
//! from the VM's mutable state, taken on the VM thread. A compiler thread therefore never
//! reads the runtime while the program changes it (send sites are appended, and their
//! caches rewritten, as the program runs).

use crate::bytecode::SiteId;
use crate::runtime::{Code, IntOp, Runtime};

/// What a compiler may know of one send site.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SiteFacts {
    pub argc: u8,
    /// The small-integer operation the selector stands for, if any.
    pub int_op: IntOp,
}

/// One method or block to compile.
pub struct CompileRequest {
    pub code: &'static Code,
    /// `Class>>selector` (or `[] in Class>>selector`), for logs, listings and symbols.
    pub name: String,
    /// Its source file, for debug line tables.
    pub file: String,
    /// The facts of every site the code sends from, sorted by site.
    sites: Vec<(SiteId, SiteFacts)>,
}

impl CompileRequest {
    /// Copies what compiling `code` needs from `rt`.
    pub fn new(code: &'static Code, rt: &Runtime) -> CompileRequest {
        let mut sites: Vec<(SiteId, SiteFacts)> = code
            .ops
            .iter()
            .filter_map(|op| op.site())
            .map(|s| {
                let site = &rt.sites[s as usize];
                (
                    s,
                    SiteFacts {
                        argc: site.argc,
                        int_op: site.int_op,
                    },
                )
            })
            .collect();
        sites.sort_unstable_by_key(|&(s, _)| s);
        sites.dedup_by_key(|&mut (s, _)| s);
        CompileRequest {
            code,
            name: rt.code_name(code),
            file: rt.source_path(code),
            sites,
        }
    }

    /// The facts of `site`; an error for a site the code does not send from.
    pub fn site(&self, site: SiteId) -> Result<SiteFacts, String> {
        self.sites
            .binary_search_by_key(&site, |&(s, _)| s)
            .map(|i| self.sites[i].1)
            .map_err(|_| format!("send site {site} is not one of {}'s", self.name))
    }
}
