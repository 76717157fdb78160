//! The same object graphs collected by two GC worker threads, which trace concurrently and may
//! race to copy the same object. Its own process because it needs its own `Heap` (MMTk allows
//! one per process) with a different thread count.

mod common;

use common::*;
use tally_heap::{GcPlan, Heap, HeapOptions, Value};

#[test]
fn two_gc_threads_keep_graphs_intact() {
    // Read once by `Heap::new`; this process has no other threads that read the environment.
    std::env::set_var("TALLY_GC_THREADS", "2");
    // SemiSpace, so that every collection moves every node (checked below).
    let mut heap = Heap::new(HeapOptions {
        plan: GcPlan::SemiSpace,
        max_heap_bytes: Some(64 << 20),
        gc_stress_every: None,
        ..HeapOptions::default()
    })
    .expect("heap");
    let mut roots = Roots(vec![Value::NIL; 2]);
    let graph = build_graph(&mut heap, &mut roots, 0, 40_000, 4, 0x1234_5678);
    build_list(&mut heap, &mut roots, 1, 20_000);
    let mut before = check_graph(&roots, &graph);
    for round in 0..10 {
        make_garbage(&mut heap, &mut roots, 20_000, 5);
        heap.collect(&mut roots);
        let now = check_graph(&roots, &graph);
        assert!(
            now.iter().zip(&before).all(|(a, b)| a != b),
            "round {round}"
        );
        before = now;
        walk_list(roots.0[1], 20_000);
    }
    assert!(heap.stats().collections >= 10);
}
