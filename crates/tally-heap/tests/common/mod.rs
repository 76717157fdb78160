//! Helpers shared by the integration tests. Each test file is its own process, which is what
//! lets each of them create the one `Heap` MMTk allows per process.
#![allow(dead_code)]

pub mod generational;

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
        assert_eq!(
            node.slot(0).as_int(),
            Some(expected),
            "node contents changed"
        );
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

/// What a node's slot should hold: an edge to another node, or an integer.
#[derive(Clone, Copy, Debug)]
pub enum Expect {
    Node(usize),
    Int(i64),
}

/// A random graph (cycles and sharing included) of `n` nodes, all held by one array in
/// `roots.0[all]` so the test can find every node again; `edges[i][k]` is node i's slot k + 1.
pub struct Graph {
    pub all: usize,
    pub edges: Vec<Vec<Expect>>,
}

pub const GRAPH_CLASS: u32 = 50;

pub fn build_graph(
    heap: &mut Heap,
    roots: &mut Roots,
    all: usize,
    n: usize,
    out_degree: usize,
    seed: u64,
) -> Graph {
    let mut rng = seed | 1;
    let mut next = move || {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng
    };
    roots.0[all] = heap
        .alloc(roots, 2, 0, n, Value::NIL, 0)
        .expect("allocation failed");
    for i in 0..n {
        let node = heap
            .alloc(roots, GRAPH_CLASS, 0, out_degree + 1, Value::NIL, i % 13)
            .expect("allocation failed");
        node.set_slot(0, Value::from_small_int(i as i64));
        node.bytes_mut().copy_from_slice(&pattern(i % 13, i as u8));
        roots.0[all].set_slot(i, node);
    }
    let mut edges = Vec::with_capacity(n);
    for i in 0..n {
        let node = roots.0[all].slot(i);
        let mut mine = Vec::with_capacity(out_degree);
        for k in 1..=out_degree {
            let r = next();
            let e = if r % 4 == 0 {
                Expect::Int((r >> 8) as i64 & 0xffff)
            } else {
                Expect::Node((r >> 8) as usize % n)
            };
            node.set_slot(
                k,
                match e {
                    Expect::Node(j) => roots.0[all].slot(j),
                    Expect::Int(x) => Value::from_small_int(x),
                },
            );
            mine.push(e);
        }
        edges.push(mine);
    }
    Graph { all, edges }
}

/// Checks every node's contents and that every edge still leads to the very object the array
/// holds for its target (sharing and cycles survive moves). Returns the nodes' addresses.
pub fn check_graph(roots: &Roots, g: &Graph) -> Vec<u64> {
    let all = roots.0[g.all];
    assert_eq!(all.slot_count(), g.edges.len());
    let mut addrs = Vec::with_capacity(g.edges.len());
    for (i, edges) in g.edges.iter().enumerate() {
        let node = all.slot(i);
        assert_eq!(node.class_id(), GRAPH_CLASS);
        assert_eq!(node.slot(0).as_int(), Some(i as i64), "node {i}");
        assert_eq!(
            node.bytes(),
            pattern(i % 13, i as u8).as_slice(),
            "node {i}"
        );
        for (k, e) in edges.iter().enumerate() {
            let v = node.slot(k + 1);
            match *e {
                Expect::Node(j) => assert_eq!(v, all.slot(j), "edge {i} -> {j}"),
                Expect::Int(x) => assert_eq!(v.as_int(), Some(x), "int in node {i}"),
            }
        }
        addrs.push(node.bits());
    }
    addrs
}
