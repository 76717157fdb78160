//! End-to-end tests of the heap on the default (dynamic) heap size.
//!
//! MMTk is process-global and can be initialised once per process, so everything that needs a
//! `Heap` runs inside the single `#[test]` below, one scenario after another. Other scenarios
//! that need different `HeapOptions` live in their own test files, which cargo runs as
//! separate processes.

mod common;

use std::cell::RefCell;
use std::collections::HashSet;
use std::rc::Rc;
use std::time::{Duration, Instant};

use common::*;
use tally_heap::{GcEvent, GcKind, GcPlan, GcScope, Heap, HeapInitError, HeapOptions, Value};

#[test]
fn heap_end_to_end() {
    let mut heap = init_refuses_bad_options_then_one_heap();
    objects_move_and_survive_many_collections(&mut heap);
    graphs_with_sharing_and_cycles_survive(&mut heap);
    allocation_triggers_collections(&mut heap);
    byte_payloads_survive(&mut heap);
    fill_value_is_kept_alive_and_updated(&mut heap);
    inline_allocation_describes_the_fast_path(&mut heap);
    gc_stress_collects_every_n_allocations(&mut heap);
    large_objects(&mut heap);
    listener_sees_start_and_end(&mut heap);
    header_updates(&mut heap);
    impossible_sizes_are_out_of_memory(&mut heap);
    allocation_rate(&mut heap);
    drop(heap);
    assert_eq!(
        Heap::new(HeapOptions::default()).err(),
        Some(HeapInitError::AlreadyInitialized),
        "MMTk cannot be initialised twice, even after the heap is dropped"
    );
}

fn init_refuses_bad_options_then_one_heap() -> Heap {
    let too_small = HeapOptions {
        max_heap_bytes: Some(1024),
        gc_stress_every: None,
        ..HeapOptions::default()
    };
    assert!(matches!(
        Heap::new(too_small),
        Err(HeapInitError::HeapTooSmall {
            requested: 1024,
            ..
        })
    ));
    let zero_stress = HeapOptions {
        max_heap_bytes: None,
        gc_stress_every: Some(0),
        ..HeapOptions::default()
    };
    assert_eq!(
        Heap::new(zero_stress).err(),
        Some(HeapInitError::ZeroStressInterval)
    );
    // Refused options must not use up the process's one heap.
    // SemiSpace: every collection moves every object, which the checks below rely on.
    let heap = Heap::new(HeapOptions {
        plan: GcPlan::SemiSpace,
        ..HeapOptions::default()
    })
    .expect("first heap");
    assert_eq!(
        Heap::new(HeapOptions::default()).err(),
        Some(HeapInitError::AlreadyInitialized)
    );
    let stats = heap.stats();
    assert_eq!(stats.collections, 0);
    assert!(stats.heap_limit_bytes >= 32 << 20, "{stats:?}");
    assert!(stats.heap_max_bytes >= stats.heap_limit_bytes, "{stats:?}");
    heap
}

fn objects_move_and_survive_many_collections(heap: &mut Heap) {
    const N: usize = 2000;
    let mut roots = Roots(vec![Value::NIL, Value::from_small_int(1), Value::NONE]);
    build_list(heap, &mut roots, 0, N);
    let before = walk_list(roots.0[0], N);
    let distinct_hashes: HashSet<u32> = before.iter().map(|&(_, h)| h).collect();
    assert!(
        distinct_hashes.len() > N * 9 / 10,
        "identity hashes are poorly spread: {} distinct of {N}",
        distinct_hashes.len()
    );

    let collections_before = heap.stats().collections;
    let mut previous = before.clone();
    for round in 0..20 {
        make_garbage(heap, &mut roots, 500, 3);
        heap.collect(&mut roots);
        let now = walk_list(roots.0[0], N);
        // Identity hashes are stable across moves...
        let hashes = |v: &[(u64, u32)]| v.iter().map(|&(_, h)| h).collect::<Vec<_>>();
        assert_eq!(hashes(&now), hashes(&before), "round {round}");
        // ...and every node moved: a semi-space collection copies all live objects.
        for (a, b) in now.iter().zip(&previous) {
            assert_ne!(a.0, b.0, "round {round}: a node did not move");
        }
        previous = now;
    }
    // Immediates in the roots are left alone.
    assert_eq!(roots.0[1], Value::from_small_int(1));
    assert_eq!(roots.0[2], Value::NONE);
    assert_eq!(heap.stats().collections, collections_before + 20);
}

fn graphs_with_sharing_and_cycles_survive(heap: &mut Heap) {
    let mut roots = Roots(vec![Value::NIL]);
    let graph = build_graph(heap, &mut roots, 0, 20_000, 3, 42);
    let mut before = check_graph(&roots, &graph);
    for round in 0..5 {
        make_garbage(heap, &mut roots, 5000, 2);
        heap.collect(&mut roots);
        let now = check_graph(&roots, &graph);
        assert!(
            now.iter().zip(&before).all(|(a, b)| a != b),
            "round {round}: a node did not move"
        );
        before = now;
    }
}

fn allocation_triggers_collections(heap: &mut Heap) {
    const N: usize = 1000;
    let mut roots = Roots(vec![Value::NIL]);
    build_list(heap, &mut roots, 0, N);
    let hashes: Vec<u32> = walk_list(roots.0[0], N).iter().map(|p| p.1).collect();
    let before = heap.stats();
    // Several times the heap's current size in garbage: the heap must collect by itself.
    let target = 3 * before.heap_limit_bytes as u64;
    while heap.stats().allocated_bytes - before.allocated_bytes < target {
        make_garbage(heap, &mut roots, 10_000, 6);
    }
    let after = heap.stats();
    assert!(
        after.collections > before.collections,
        "no collection while allocating {target} bytes: {after:?}"
    );
    assert!(after.gc_time > before.gc_time);
    assert!(after.heap_used_bytes <= after.heap_limit_bytes, "{after:?}");
    let now: Vec<u32> = walk_list(roots.0[0], N).iter().map(|p| p.1).collect();
    assert_eq!(now, hashes);
}

fn byte_payloads_survive(heap: &mut Heap) {
    let lengths = [0usize, 1, 7, 8, 9, 63, 100, 4095, 8192, 50_000];
    let mut roots = Roots(vec![Value::NIL; lengths.len() + 1]);
    for (i, &len) in lengths.iter().enumerate() {
        let obj = heap
            .alloc(&mut roots, 20, 2, 0, Value::NIL, len)
            .expect("alloc bytes");
        assert_eq!(obj.byte_len(), len);
        assert!(obj.bytes().iter().all(|&b| b == 0), "bytes are not zeroed");
        obj.bytes_mut().copy_from_slice(&pattern(len, i as u8));
        roots.0[i] = obj;
    }
    // An object with both slots and bytes.
    let mixed = heap
        .alloc(&mut roots, 21, 4, 3, Value::TRUE, 13)
        .expect("alloc mixed");
    mixed.bytes_mut().copy_from_slice(b"mixed payload");
    mixed.set_slot(2, roots.0[3]);
    let last = lengths.len();
    roots.0[last] = mixed;

    for _ in 0..3 {
        make_garbage(heap, &mut roots, 1000, 4);
        heap.collect(&mut roots);
        for (i, &len) in lengths.iter().enumerate() {
            let obj = roots.0[i];
            assert_eq!((obj.class_id(), obj.kind()), (20, 2));
            assert_eq!((obj.slot_count(), obj.byte_len()), (0, len));
            assert_eq!(
                obj.bytes(),
                pattern(len, i as u8).as_slice(),
                "length {len}"
            );
        }
        let mixed = roots.0[last];
        assert_eq!((mixed.slot_count(), mixed.byte_len()), (3, 13));
        assert_eq!(mixed.bytes(), b"mixed payload");
        assert_eq!(mixed.slot(0), Value::TRUE);
        assert_eq!(mixed.slot(1), Value::TRUE);
        assert_eq!(mixed.slot(2), roots.0[3], "reference inside a mixed object");
    }
}

fn fill_value_is_kept_alive_and_updated(heap: &mut Heap) {
    let mut roots = Roots(vec![Value::NIL, Value::NIL]);
    let target = heap
        .alloc(&mut roots, 30, 0, 0, Value::NIL, 4)
        .expect("alloc");
    target.bytes_mut().copy_from_slice(b"fill");
    let hash = target.identity_hash();
    // The only reference to `target` is the fill argument, and every allocation collects.
    heap.set_gc_stress_every(Some(1));
    let array = heap
        .alloc(&mut roots, 31, 0, 5, target, 0)
        .expect("alloc array");
    heap.set_gc_stress_every(None);
    let filled = array.slot(0);
    assert_ne!(filled, target, "the fill object should have moved");
    for i in 0..5 {
        assert_eq!(array.slot(i), filled);
    }
    assert_eq!(filled.bytes(), b"fill");
    assert_eq!(filled.identity_hash(), hash);
}

/// What `inline_allocation` tells compiled code is what `alloc`'s fast path does: the object
/// is placed at the bump pointer's cursor, which moves by its size; the counters sit at the
/// offsets given; the hash is the xorshift32 step of the hash state, its top bits.
fn inline_allocation_describes_the_fast_path(heap: &mut Heap) {
    let a = heap
        .inline_allocation()
        .expect("SemiSpace has a bump pointer");
    assert!(a.max_object_bytes >= 1024, "{a:?}");
    let read_u64 = |heap: &Heap, offset: usize| {
        // SAFETY: `offset` is `offset_of!` a `u64` field inside `Heap` (its contract).
        unsafe { *(heap as *const Heap).cast::<u8>().add(offset).cast::<u64>() }
    };
    let read_u32 = |heap: &Heap, offset: usize| {
        // SAFETY: as above, for the `u32` hash state.
        unsafe { *(heap as *const Heap).cast::<u8>().add(offset).cast::<u32>() }
    };
    let cursor = || {
        // SAFETY: the bump pointer lives in the mutator, alive while the heap is; nothing
        // else runs on it now.
        unsafe { *(a.bump_pointer as *const u64) }
    };
    let mut roots = Roots(vec![Value::NIL]);
    // A fresh buffer, so the next objects fit in it.
    heap.collect(&mut roots);
    heap.alloc(&mut roots, NODE_CLASS, NODE_KIND, 2, Value::NIL, 0)
        .expect("alloc");
    for _ in 0..10 {
        let bytes = read_u64(heap, a.allocated_bytes);
        assert_eq!(bytes, heap.allocated_bytes());
        let objects = read_u64(heap, a.allocated_objects);
        assert_eq!(read_u64(heap, a.alarm_at), u64::MAX, "no alarm set");
        let mut x = read_u32(heap, a.hash_state);
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        let at = cursor();
        let node = heap
            .alloc(&mut roots, NODE_CLASS, NODE_KIND, 2, Value::NIL, 0)
            .expect("alloc");
        assert_eq!(node.0, at, "placed at the cursor");
        assert_eq!(cursor(), at + 32, "the cursor moved by the object's size");
        assert_eq!(read_u64(heap, a.allocated_bytes), bytes + 32);
        assert_eq!(read_u64(heap, a.allocated_objects), objects + 1);
        assert_eq!(read_u32(heap, a.hash_state), x);
        assert_eq!(
            node.identity_hash(),
            x >> (32 - tally_heap::object::HASH_BITS)
        );
    }
}

fn gc_stress_collects_every_n_allocations(heap: &mut Heap) {
    let events = Rc::new(RefCell::new(Vec::new()));
    let sink = events.clone();
    let listener = heap.add_gc_listener(move |e| sink.borrow_mut().push(e));

    let mut roots = Roots(vec![Value::NIL]);
    heap.set_gc_stress_every(Some(10));
    let before = heap.stats().collections;
    build_list(heap, &mut roots, 0, 100);
    let after = heap.stats().collections;
    heap.set_gc_stress_every(None);
    heap.remove_gc_listener(listener);

    let stress_ends = events
        .borrow()
        .iter()
        .filter(|e| {
            matches!(
                e,
                GcEvent::End {
                    kind: GcKind::Stress,
                    ..
                }
            )
        })
        .count();
    assert_eq!(stress_ends, 10);
    assert!(after - before >= 10);
    walk_list(roots.0[0], 100);

    // The same through `HeapOptions` is covered by tests/gc_stress.rs.
}

fn large_objects(heap: &mut Heap) {
    const SLOTS: usize = 3_000_000; // 24 MB: far beyond the copying plan's 8 KiB limit
    const BYTES: usize = 10 << 20;
    let mut roots = Roots(vec![Value::NIL; 3]);
    let big = heap
        .alloc(&mut roots, 40, 1, SLOTS, Value::from_small_int(9), 0)
        .expect("large array");
    roots.0[0] = big;
    let string = heap
        .alloc(&mut roots, 41, 2, 0, Value::NIL, BYTES)
        .expect("large byte string");
    roots.0[1] = string;
    let small = heap
        .alloc(&mut roots, 42, 0, 1, Value::from_small_int(77), 0)
        .expect("small");
    let big = roots.0[0];
    big.set_slot(SLOTS - 1, small);
    big.set_slot(1234, small);
    roots.0[1].bytes_mut()[BYTES - 1] = 0xab;
    let used_with_large = heap.stats().heap_used_bytes;
    assert!(used_with_large >= SLOTS * 8 + BYTES, "{:?}", heap.stats());

    let big_addr = roots.0[0].bits();
    for _ in 0..3 {
        heap.collect(&mut roots);
    }
    let big = roots.0[0];
    assert_eq!(big.bits(), big_addr, "large objects are not copied");
    assert_eq!((big.class_id(), big.slot_count()), (40, SLOTS));
    let small = big.slot(SLOTS - 1);
    assert_ne!(small.bits(), 0);
    assert_eq!(
        big.slot(1234),
        small,
        "references from a large object are updated"
    );
    assert_eq!(small.slot(0).as_int(), Some(77));
    assert_eq!(small.class_id(), 42);
    assert_eq!(big.slot(0).as_int(), Some(9));
    assert_eq!(big.slot(SLOTS - 2).as_int(), Some(9));
    let string = roots.0[1];
    assert_eq!(string.byte_len(), BYTES);
    assert_eq!(string.bytes()[BYTES - 1], 0xab);
    assert!(string.bytes()[..BYTES - 1].iter().all(|&b| b == 0));

    roots.0.fill(Value::NIL);
    heap.collect(&mut roots);
    let used_after = heap.stats().heap_used_bytes;
    assert!(
        used_after + SLOTS * 8 + BYTES <= used_with_large + (1 << 20),
        "dead large objects were not freed: {used_with_large} -> {used_after}"
    );
}

fn listener_sees_start_and_end(heap: &mut Heap) {
    let events = Rc::new(RefCell::new(Vec::new()));
    let sink = events.clone();
    heap.add_gc_listener(move |e| sink.borrow_mut().push(e));
    // A second listener sees the same events, and stops seeing them once removed.
    let seen_by_second = Rc::new(RefCell::new(0));
    let second = {
        let seen = seen_by_second.clone();
        heap.add_gc_listener(move |_| *seen.borrow_mut() += 1)
    };
    let mut roots = Roots(vec![Value::NIL]);
    build_list(heap, &mut roots, 0, 10);
    events.borrow_mut().clear();
    *seen_by_second.borrow_mut() = 0;
    heap.collect(&mut roots);
    assert_eq!(*seen_by_second.borrow(), 2);
    heap.remove_gc_listener(second);
    heap.collect(&mut roots);
    assert_eq!(*seen_by_second.borrow(), 2);
    events.borrow_mut().clear();
    heap.collect(&mut roots);
    {
        let events = events.borrow();
        assert_eq!(events.len(), 2, "{events:?}");
        assert!(matches!(
            events[0],
            GcEvent::Start {
                kind: GcKind::Explicit,
                ..
            }
        ));
        match events[1] {
            GcEvent::End {
                kind,
                scope,
                heap_used_before,
                heap_used_after,
                duration,
            } => {
                assert_eq!(kind, GcKind::Explicit);
                // SemiSpace has no nursery.
                assert_eq!(scope, GcScope::Full);
                assert!(duration > Duration::ZERO);
                assert!(heap_used_after <= heap_used_before);
            }
            other => panic!("expected an End event, got {other:?}"),
        }
    }

    // Collections the allocator starts are reported as such.
    events.borrow_mut().clear();
    let collections = heap.stats().collections;
    while heap.stats().collections == collections {
        make_garbage(heap, &mut roots, 1000, 8);
    }
    assert!(events.borrow().iter().any(|e| matches!(
        e,
        GcEvent::End {
            kind: GcKind::Allocation,
            ..
        }
    )));

    // A panicking listener does not break the heap: the panic comes out of `collect`.
    let listener = heap.add_gc_listener(|_| panic!("listener failure"));
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        heap.collect(&mut roots);
    }));
    assert!(result.is_err());
    heap.remove_gc_listener(listener);
    heap.collect(&mut roots);
    walk_list(roots.0[0], 10);
}

fn header_updates(heap: &mut Heap) {
    let mut roots = Roots(vec![Value::NIL]);
    let obj = heap
        .alloc(&mut roots, u32::MAX, u8::MAX, 1, Value::FALSE, 3)
        .expect("alloc");
    roots.0[0] = obj;
    let hash = obj.identity_hash();
    assert_eq!((obj.class_id(), obj.kind()), (u32::MAX, u8::MAX));
    obj.set_class_id(12345);
    heap.collect(&mut roots);
    let obj = roots.0[0];
    assert_eq!(
        (obj.class_id(), obj.kind(), obj.identity_hash()),
        (12345, u8::MAX, hash)
    );
    assert_eq!(obj.slot(0), Value::FALSE);
}

fn impossible_sizes_are_out_of_memory(heap: &mut Heap) {
    let mut roots = Roots(vec![]);
    let err = heap
        .alloc(&mut roots, 1, 1, usize::MAX / 4, Value::NIL, 0)
        .expect_err("an object beyond the header's limits");
    assert_eq!(err.heap_limit_bytes, heap.stats().heap_max_bytes);
    let slots = u32::MAX as usize; // 32 GiB: describable, but beyond the heap's maximum
    let err = heap
        .alloc(&mut roots, 1, 1, slots, Value::NIL, 0)
        .expect_err("an object beyond the heap's maximum");
    assert_eq!(err.requested_bytes, 16 + slots * 8);
    assert!(err.to_string().starts_with("out of memory"), "{err}");
    // Still usable afterwards.
    heap.alloc(&mut roots, 1, 1, 1, Value::NIL, 0)
        .expect("alloc");
}

fn allocation_rate(heap: &mut Heap) {
    let mut roots = Roots(vec![Value::NIL]);
    const N: usize = 1_000_000;
    let start = Instant::now();
    make_garbage(heap, &mut roots, N, 2);
    let elapsed = start.elapsed();
    eprintln!(
        "allocation rate: {:.1} M objects/s (32-byte objects, this build profile)",
        N as f64 / elapsed.as_secs_f64() / 1e6
    );
}
