//! CBS judged against the exhaustive profile of the same run — the
//! "ground truth is built in" principle as a test: a call-heavy program
//! with a skewed edge distribution, CBS ticks every few hundred calls.

use std::collections::BTreeMap;

use tally_profile::metrics::{overlap, weighted_accuracy};
use tally_profile::*;

#[test]
fn cbs_edges_overlap_the_exact_call_graph() {
    let hot = HotState::new(HotConfig::default());
    hot.set_mode(None, true);
    let mut cbs = Cbs::new(CbsConfig {
        stride: 3,
        samples: 16,
        seed: 2024,
    });
    let mut exact = ExactCounts::new();
    let mut recorder = Recorder::new(Header::default());
    let main = MethodId(0);
    // Call sites of main and how often each runs per outer iteration:
    // (call-site bci, callee, repetitions).
    let sites = [(2, 1, 50), (5, 2, 30), (9, 3, 15), (12, 4, 4), (14, 5, 1)];
    let mut calls = 0u64;
    for _ in 0..2000 {
        for &(bci, callee, reps) in &sites {
            for _ in 0..reps {
                calls += 1;
                if calls.is_multiple_of(397) {
                    hot.on_tick();
                }
                let callee = MethodId(callee);
                exact.on_call(Some((main, bci)), callee);
                let f = hot.flag.load();
                if f != 0 && cbs.on_method_entry(f, hot.flag) {
                    let edge = CallEdge {
                        caller: main,
                        callsite: bci,
                        callee,
                    };
                    cbs.keep(Some(edge), |e, w| recorder.record_edge(e, w));
                }
            }
        }
    }
    cbs.finish(|e, w| recorder.record_edge(e, w));
    let profile = recorder.finish(&hot, Some(exact), 0);
    let truth: BTreeMap<CallEdge, u64> =
        CallGraph::from_exact(profile.exact.as_ref().unwrap()).edges;
    let sampled = &profile.cbs_edges.edges;
    let o = overlap(&truth, sampled);
    eprintln!(
        "{} windows, {} edges sampled, overlap {o:.3}",
        cbs.windows_opened(),
        cbs.edges_sampled()
    );
    // Every sampled edge is in the graph, weighted by its window's call rate (≥ 1).
    assert!(profile.cbs_edges.total() >= cbs.edges_sampled());
    assert!(cbs.windows_opened() > 300);
    assert!(o > 0.9, "overlap {o}");
    assert_eq!(weighted_accuracy(&truth, sampled, TopN::Count(3)), 1.0);
}
