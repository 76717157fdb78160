//! Scenarios for the generational plans: the write barrier must keep a young object that only
//! an old object refers to alive through a nursery collection.

use std::cell::RefCell;
use std::rc::Rc;

use super::{build_graph, build_list, check_graph, make_garbage, walk_list, Roots};
use tally_heap::{GcEvent, GcPlan, GcScope, Heap, HeapOptions, Value};

const OLD_CLASS: u32 = 60;
const YOUNG_CLASS: u32 = 77;
const FILLER_CLASS: u32 = 5;
const YOUNG_BYTES: &[u8] = b"young object";

/// Records the scope of every collection.
pub fn record_scopes(heap: &mut Heap) -> Rc<RefCell<Vec<GcScope>>> {
    let scopes = Rc::new(RefCell::new(Vec::new()));
    let sink = scopes.clone();
    heap.add_gc_listener(move |e| {
        if let GcEvent::End { scope, .. } = e {
            sink.borrow_mut().push(scope);
        }
    });
    scopes
}

/// Allocates an object and promotes it with a full collection; it stays in `roots.0[0]`.
pub fn make_old(heap: &mut Heap, roots: &mut Roots) {
    roots.0[0] = heap
        .alloc(roots, OLD_CLASS, 0, 4, Value::NIL, 0)
        .expect("allocation");
    heap.collect(roots);
}

/// Allocates a young object and stores it into slot 0 of the old object in `roots.0[0]` with
/// `store`; only the old object stays a root. Then collects the nursery a few times, with
/// enough allocation in between to reuse the nursery's memory, and returns what slot 0 then
/// holds: `Some(hash)` of the young object if it survived intact, `None` if the slot points at
/// memory that now holds something else.
pub fn store_young_into_old(
    heap: &mut Heap,
    roots: &mut Roots,
    store: impl Fn(Value, usize, Value),
) -> Option<u32> {
    let young = heap
        .alloc(roots, YOUNG_CLASS, 0, 1, Value::NIL, YOUNG_BYTES.len())
        .expect("allocation");
    young.bytes_mut().copy_from_slice(YOUNG_BYTES);
    let hash = young.identity_hash();
    store(roots.0[0], 0, young);
    for _ in 0..3 {
        heap.collect_nursery(roots);
        for _ in 0..20_000 {
            heap.alloc(roots, FILLER_CLASS, 0, 6, Value::from_small_int(1), 0)
                .expect("allocation");
        }
    }
    let slot = roots.0[0].slot(0);
    // Read the header raw: a lost object's memory holds filler or nothing, and the checked
    // accessors would assert on it.
    // SAFETY: MMTk never unmaps its spaces, so the word at a former nursery address is readable.
    let word0 = unsafe { (slot.bits() as usize as *const u64).read() };
    let survived = (word0 >> 32) as u32 == YOUNG_CLASS
        && slot.bytes() == YOUNG_BYTES
        && slot.identity_hash() == hash;
    survived.then_some(hash)
}

/// Everything a generational plan must do, on a fresh heap of that plan.
pub fn check_generational_heap(heap: &mut Heap) {
    let scopes = record_scopes(heap);
    let mut roots = Roots(vec![Value::NIL]);

    // Without the barrier (`init_slot` is for objects known to be young) the young object is
    // lost: this is what the barrier is for, and shows the scenario can fail.
    make_old(heap, &mut roots);
    let before = heap.stats().barrier_slow_calls;
    assert_eq!(
        store_young_into_old(heap, &mut roots, |o, i, v| o.init_slot(i, v)),
        None,
        "the young object survived a nursery collection without the barrier"
    );
    assert_eq!(heap.stats().barrier_slow_calls, before);

    // With it, the old object is remembered once and the young one survives.
    make_old(heap, &mut roots);
    let before = heap.stats().barrier_slow_calls;
    let remembered = store_young_into_old(heap, &mut roots, |o, i, v| {
        o.set_slot(i, v);
        // A second store before the next collection finds the object already remembered.
        o.set_slot(i + 1, v);
    });
    assert!(remembered.is_some(), "the barrier did not keep the object");
    assert_eq!(heap.stats().barrier_slow_calls, before + 1);

    // Stores of immediates and stores into young objects never take the slow path.
    let before = heap.stats().barrier_slow_calls;
    roots.0[0].set_slot(2, Value::from_small_int(3));
    let young = heap
        .alloc(&mut roots, YOUNG_CLASS, 0, 1, Value::NIL, 0)
        .expect("allocation");
    young.set_slot(0, roots.0[0]);
    assert_eq!(heap.stats().barrier_slow_calls, before);

    let scopes = scopes.borrow();
    assert!(scopes.contains(&GcScope::Nursery), "{scopes:?}");
    assert!(scopes.contains(&GcScope::Full), "{scopes:?}");
    assert_eq!(
        heap.stats().nursery_collections,
        scopes.iter().filter(|&&s| s == GcScope::Nursery).count() as u64
    );
}

/// A heap of generational `plan` does everything above, then keeps lists and graphs through
/// stress collections, most of them nursery ones.
pub fn check_generational_plan(plan: GcPlan) {
    let mut heap = Heap::new(HeapOptions {
        plan,
        ..HeapOptions::default()
    })
    .expect("heap");
    check_generational_heap(&mut heap);

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
