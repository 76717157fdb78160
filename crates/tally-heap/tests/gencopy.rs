//! The GenCopy plan: the write barrier, nursery and full collections, and stress. Its own
//! process because it needs its own `Heap`.

mod common;

use common::generational::check_generational_heap;
use common::*;
use tally_heap::{GcPlan, Heap, HeapOptions, Value};

#[test]
fn gencopy_keeps_old_to_young_references_and_collects_both_generations() {
    let mut heap = Heap::new(HeapOptions {
        plan: GcPlan::GenCopy,
        ..HeapOptions::default()
    })
    .expect("heap");
    check_generational_heap(&mut heap);

    // Under stress, most collections are nursery ones; lists and graphs survive them.
    heap.set_gc_stress_every(Some(7));
    let mut roots = Roots(vec![Value::NIL; 2]);
    build_list(&mut heap, &mut roots, 0, 3000);
    let graph = build_graph(&mut heap, &mut roots, 1, 500, 3, 11);
    make_garbage(&mut heap, &mut roots, 5000, 3);
    walk_list(roots.0[0], 3000);
    check_graph(&roots, &graph);
    let stats = heap.stats();
    assert!(
        stats.nursery_collections > 0 && stats.nursery_collections < stats.collections,
        "{stats:?}"
    );
}
