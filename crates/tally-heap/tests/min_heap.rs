//! The smallest heap `Heap::new` accepts must actually work: allocate, collect, and report
//! exhaustion as an error. Its own process because it needs its own `Heap` (MMTk allows one per
//! process).

mod common;

use common::*;
use tally_heap::{Heap, HeapOptions, Value, MIN_HEAP_BYTES};

#[test]
fn the_minimum_heap_size_is_usable() {
    let mut heap = Heap::new(HeapOptions {
        max_heap_bytes: Some(MIN_HEAP_BYTES),
        gc_stress_every: None,
        ..HeapOptions::default()
    })
    .expect("heap");
    let mut roots = Roots(vec![Value::NIL]);
    build_list(&mut heap, &mut roots, 0, 2000);
    for _ in 0..20 {
        make_garbage(&mut heap, &mut roots, 10_000, 4);
    }
    heap.collect(&mut roots);
    walk_list(roots.0[0], 2000);
    assert!(heap.stats().collections > 1);
    // A large object that fits, then live data that does not.
    heap.alloc(&mut roots, 1, 1, 0, Value::NIL, 100_000)
        .expect("a 100 KB string in a 2 MB heap");
    let err = loop {
        match heap.alloc(&mut roots, 1, 1, 100, Value::NIL, 0) {
            Ok(array) => {
                array.set_slot(0, roots.0[0]);
                roots.0[0] = array;
            }
            Err(e) => break e,
        }
    };
    assert_eq!(err.heap_limit_bytes, MIN_HEAP_BYTES);
}
