//! Heap exhaustion under `--heap-size` must come back as `Err(OutOfMemory)`, after which the
//! heap is still usable and the process exits normally. Its own process because it needs its
//! own small `Heap` (MMTk allows one per process).

mod common;

use common::*;
use tally_heap::{Heap, HeapOptions, Value};

const LIMIT: usize = 16 << 20;

#[test]
fn exhausting_a_small_heap_is_an_error_not_a_crash() {
    let mut heap = Heap::new(HeapOptions {
        max_heap_bytes: Some(LIMIT),
        gc_stress_every: None,
        ..HeapOptions::default()
    })
    .expect("heap");
    let mut roots = Roots(vec![Value::NIL]);

    // Try to keep 100 MB alive in 1000-slot arrays chained through slot 0.
    let mut kept = 0usize;
    let err = loop {
        match heap.alloc(&mut roots, 1, 1, 1000, Value::NIL, 0) {
            Ok(array) => {
                array.set_slot(0, roots.0[0]);
                roots.0[0] = array;
                kept += 8016;
                assert!(kept < 100 << 20, "100 MB live in a {LIMIT}-byte heap");
            }
            Err(e) => break e,
        }
    };
    assert!(kept > LIMIT / 4, "gave up early, after {kept} bytes");
    assert_eq!(err.requested_bytes, 8016);
    assert_eq!(err.heap_limit_bytes, LIMIT);
    assert!(err.heap_used_bytes > 0);
    eprintln!("{err} (after keeping {kept} bytes)");

    // The live data is intact.
    let mut n = 0;
    let mut node = roots.0[0];
    while node != Value::NIL {
        assert_eq!(node.slot_count(), 1000);
        node = node.slot(0);
        n += 1;
    }
    assert_eq!(n * 8016, kept);

    // Large objects fail the same way, both one too big for the heap and many that fill it.
    let err = heap
        .alloc(&mut roots, 1, 1, 0, Value::NIL, 2 * LIMIT)
        .expect_err("bigger than the heap");
    assert!(err.requested_bytes > 2 * LIMIT);

    // Dropping the data makes the heap usable again.
    roots.0[0] = Value::NIL;
    heap.collect(&mut roots);
    let mut big = Roots(vec![]);
    let err = loop {
        match heap.alloc(&mut big, 2, 2, 0, Value::NIL, 1 << 20) {
            Ok(s) => big.0.push(s),
            Err(e) => break e,
        }
        assert!(
            big.0.len() < 100,
            "100 MB of large objects in a {LIMIT}-byte heap"
        );
    };
    assert!(big.0.len() >= 4, "only {} large objects fit", big.0.len());
    assert!(err.requested_bytes > 1 << 20);
    big.0.clear();
    build_list(&mut heap, &mut roots, 0, 10_000);
    walk_list(roots.0[0], 10_000);
    drop(heap);
}
