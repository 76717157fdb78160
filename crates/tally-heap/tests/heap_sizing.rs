//! The default collector's heap follows the live data: a program with little live data stays
//! at the floor however much garbage it makes, and one whose live data grows gets a heap that
//! grows with it instead of running out. Its own process because it needs its own `Heap`.

mod common;

use common::*;
use tally_heap::{GcPlan, Heap, HeapOptions, Value, DEFAULT_GENERATIONAL_MIN_HEAP_BYTES};

#[test]
fn the_heap_grows_with_the_live_data_and_not_with_the_garbage() {
    let mut heap = Heap::new(HeapOptions::default()).expect("heap");
    assert_eq!(heap.plan(), GcPlan::GenImmix);
    let floor = heap.stats().heap_limit_bytes;
    assert_eq!(floor, DEFAULT_GENERATIONAL_MIN_HEAP_BYTES);

    // About 1 MiB live (20,000 two-slot nodes of 32 bytes), 200 MiB of garbage around it.
    let mut roots = Roots(vec![Value::NIL; 2]);
    build_list(&mut heap, &mut roots, 0, 20_000);
    for _ in 0..55 {
        make_garbage(&mut heap, &mut roots, 50_000, 8);
    }
    walk_list(roots.0[0], 20_000);
    let stats = heap.stats();
    assert!(stats.allocated_bytes > 200 << 20, "{stats:?}");
    assert!(
        stats.nursery_collections * 2 > stats.collections,
        "mostly nursery collections: {stats:?}"
    );
    assert!(
        stats.heap_limit_bytes <= 2 * floor,
        "the garbage grew the heap: {stats:?}"
    );

    // Now keep 100 MiB live: 100,000 arrays of 128 slots (1 KiB each), chained.
    for _ in 0..100_000 {
        let array = heap
            .alloc(&mut roots, 3, 0, 128, Value::NIL, 0)
            .expect("the heap grows instead of running out");
        array.set_slot(0, roots.0[1]);
        roots.0[1] = array;
    }
    let stats = heap.stats();
    assert!(
        stats.heap_limit_bytes > 100 << 20,
        "the heap did not grow with the live data: {stats:?}"
    );
    let mut length = 0;
    let mut node = roots.0[1];
    while node != Value::NIL {
        length += 1;
        node = node.slot(0);
    }
    assert_eq!(length, 100_000);
    walk_list(roots.0[0], 20_000);
}
