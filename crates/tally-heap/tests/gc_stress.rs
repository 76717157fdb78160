//! `--gc-stress 1`: a collection before every single allocation, the harshest test of root
//! handling, under SemiSpace, where every collection moves every object. Its own process
//! because it needs its own `Heap` (MMTk allows one per process).

mod common;

use common::*;
use tally_heap::{GcPlan, Heap, HeapOptions, Value};

#[test]
fn every_allocation_collects_and_nothing_is_lost() {
    let mut heap = Heap::new(HeapOptions {
        plan: GcPlan::SemiSpace,
        max_heap_bytes: Some(32 << 20),
        gc_stress_every: Some(1),
        ..HeapOptions::default()
    })
    .expect("heap");
    assert!(
        heap.inline_allocation().is_none(),
        "stress counts every allocation: compiled code must not bypass it"
    );
    const N: usize = 500;
    let mut roots = Roots(vec![Value::NIL, Value::NIL]);
    build_list(&mut heap, &mut roots, 0, N);
    build_list(&mut heap, &mut roots, 1, N / 2);
    assert!(heap.stats().collections >= (N + N / 2) as u64);
    let a = walk_list(roots.0[0], N);
    let b = walk_list(roots.0[1], N / 2);

    // The same object reachable from two roots and from the heap stays one object.
    roots.0.push(roots.0[0]);
    heap.alloc(&mut roots, 1, 1, 0, Value::NIL, 0)
        .expect("alloc");
    assert_eq!(roots.0[0], roots.0[2]);
    let a2 = walk_list(roots.0[0], N);
    let b2 = walk_list(roots.0[1], N / 2);
    let hashes = |v: &[(u64, u32)]| v.iter().map(|p| p.1).collect::<Vec<_>>();
    assert_eq!(hashes(&a), hashes(&a2));
    assert_eq!(hashes(&b), hashes(&b2));
    assert_ne!(a[0].0, a2[0].0, "objects move on every collection");
}
