//! What the fuzzer runs on every profile the reader accepts: the offline
//! pipeline must be total on any well-formed file, however odd its
//! contents (unknown ids, empty stacks, huge counts).

use crate::metrics::TopN;
use crate::profile::Profile;
use crate::report;

pub fn analyse(p: &Profile) {
    let _ = report::FlatProfile::new(p).render_text(20);
    let _ = report::StateBreakdown::new(p).render_text();
    let symbols = p.symbols();
    let cct = crate::Cct::from_samples(&p.samples, &symbols);
    let _ = report::render_call_tree(&cct, &symbols, 0.0, 64);
    let _ = report::render_edges(&report::hottest_edges(p, report::EdgeSource::Cbs, 10));
    let _ = report::hottest_edges(p, report::EdgeSource::Exact, 10);
    let _ = report::compare(p, p, TopN::PercentOfWeight(90.0)).render_text(10);
    let _ = report::accuracy_against_exact(p, TopN::Count(5));
    let _ = crate::export::folded::to_folded(p);
    let _ = crate::export::pprof::to_pb_gz(p);
    let _ = crate::export::speedscope::to_json(p);
    let _ = crate::export::chrome::to_json(p);
}
