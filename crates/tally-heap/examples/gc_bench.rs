//! Rough numbers for the heap: allocation rate and the cost of a collection with a small live
//! set. `cargo run --release -p tally-heap --example gc_bench`
use std::time::Instant;

use tally_heap::{Heap, HeapOptions, RootSet, Value};

struct Roots(Vec<Value>);
impl RootSet for Roots {
    fn visit_roots(&mut self, visit: &mut dyn FnMut(&mut Value)) {
        self.0.iter_mut().for_each(visit)
    }
}

fn main() {
    let mut heap = Heap::new(HeapOptions::default()).expect("heap");
    let mut roots = Roots(vec![Value::NIL]);
    // A small live set: a 10k-node list.
    for i in 0..10_000 {
        let n = heap.alloc(&mut roots, 1, 0, 2, Value::NIL, 0).unwrap();
        n.set_slot(0, Value::from_small_int(i));
        n.set_slot(1, roots.0[0]);
        roots.0[0] = n;
    }

    const N: u64 = 20_000_000;
    let s0 = heap.stats();
    let t = Instant::now();
    for _ in 0..N {
        heap.alloc(&mut roots, 1, 0, 2, Value::NIL, 0).unwrap();
    }
    let el = t.elapsed();
    let s1 = heap.stats();
    println!(
        "alloc: {:.1} M objects/s ({:.1} ns each), {} collections taking {:?} ({:?} each), heap limit {} MB",
        N as f64 / el.as_secs_f64() / 1e6,
        el.as_nanos() as f64 / N as f64,
        s1.collections - s0.collections,
        s1.gc_time - s0.gc_time,
        (s1.gc_time - s0.gc_time) / (s1.collections - s0.collections).max(1) as u32,
        s1.heap_limit_bytes >> 20,
    );

    const C: u32 = 500;
    let t = Instant::now();
    for _ in 0..C {
        heap.collect(&mut roots);
    }
    println!(
        "explicit collect with a 10k-node list live: {:?} each",
        t.elapsed() / C
    );

    // The same number of objects, but all reachable from one array (a wide, shallow graph).
    let list = roots.0[0];
    let arr = heap.alloc(&mut roots, 2, 0, 10_000, Value::NIL, 0).unwrap();
    roots.0[0] = arr;
    let mut node = list;
    let mut i = 0;
    while node != Value::NIL {
        let next = node.slot(1);
        node.set_slot(1, Value::NIL);
        arr.set_slot(i, node);
        i += 1;
        node = next;
    }
    let t = Instant::now();
    for _ in 0..C {
        heap.collect(&mut roots);
    }
    println!(
        "explicit collect with 10k objects in one array: {:?} each",
        t.elapsed() / C
    );
    roots.0[0] = Value::NIL;
    let t = Instant::now();
    for _ in 0..C {
        heap.collect(&mut roots);
    }
    println!(
        "explicit collect with nothing live: {:?} each",
        t.elapsed() / C
    );
}
