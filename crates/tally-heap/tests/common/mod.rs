//! Helpers shared by the integration tests. Each test file is its own process, which is what
//! lets each of them create the one `Heap` MMTk allows per process.
#![allow(dead_code)]

use tally_heap::{Heap, RootSet, Value};

pub const NODE_CLASS: u32 = 7;
pub const NODE_KIND: u8 = 3;

/// Roots for the tests: a plain vector of slots.
pub struct Roots(pub Vec<Value>);

impl RootSet for Roots {
    fn visit_roots(&mut self, visit: &mut dyn FnMut(&mut Value)) {
        self.0.iter_mut().for_each(visit)
    }
}

/// Prepends `n` nodes (slot 0: an integer, slot 1: next) to the list whose head is in
/// `roots.0[head]`; node values count down from `n - 1` at the head... to 0 at the old head side.
pub fn build_list(heap: &mut Heap, roots: &mut Roots, head: usize, n: usize) {
    for i in 0..n {
        let node = heap
            .alloc(roots, NODE_CLASS, NODE_KIND, 2, Value::NIL, 0)
            .expect("allocation failed");
        node.set_slot(0, Value::from_small_int(i as i64));
        node.set_slot(1, roots.0[head]);
        roots.0[head] = node;
    }
}

/// Walks a list built by `build_list` and returns every node's (address, identity hash),
/// checking class, kind and contents on the way.
pub fn walk_list(head: Value, n: usize) -> Vec<(u64, u32)> {
    let mut out = Vec::with_capacity(n);
    let mut node = head;
    let mut expected = n as i64;
    while node != Value::NIL {
        expected -= 1;
        assert!(node.is_ref(), "list link is not a reference: {node:?}");
        assert_eq!(node.class_id(), NODE_CLASS);
        assert_eq!(node.kind(), NODE_KIND);
        assert_eq!(node.slot_count(), 2);
        assert_eq!(node.byte_len(), 0);
        assert_eq!(node.slot(0).as_int(), Some(expected), "node contents changed");
        out.push((node.bits(), node.identity_hash()));
        node = node.slot(1);
    }
    assert_eq!(expected, 0, "list has the wrong length");
    out
}

/// Allocates `count` unreachable objects of `slots` slots each.
pub fn make_garbage(heap: &mut Heap, roots: &mut Roots, count: usize, slots: usize) {
    for _ in 0..count {
        heap.alloc(roots, 1, 1, slots, Value::from_small_int(5), 0)
            .expect("allocation failed");
    }
}

/// Deterministic test bytes.
pub fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed))
        .collect()
}
