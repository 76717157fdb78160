//! Reverse postorder and the dominator tree (Cooper, Harvey & Kennedy's iterative
//! algorithm: small functions, a few passes).

use crate::{BlockId, Function};

/// The blocks reachable from the entry, each before its successors except along back edges.
pub fn reverse_postorder(f: &Function) -> Vec<BlockId> {
    let n = f.blocks.len();
    let mut seen = vec![false; n];
    let mut post = Vec::with_capacity(n);
    // (block, index of the next successor to visit)
    let mut stack: Vec<(BlockId, usize)> = vec![(f.entry(), 0)];
    seen[f.entry().index()] = true;
    while let Some((b, k)) = stack.pop() {
        let succs = f.blocks[b.index()].term.successors();
        if k < succs.len() {
            stack.push((b, k + 1));
            let s = succs[k];
            if !seen[s.index()] {
                seen[s.index()] = true;
                stack.push((s, 0));
            }
        } else {
            post.push(b);
        }
    }
    post.reverse();
    post
}

/// Each reachable block's immediate dominator.
#[derive(Clone, Debug)]
pub struct DomTree {
    idom: Vec<Option<BlockId>>,
    /// Position in reverse postorder (`usize::MAX`: unreachable).
    order: Vec<usize>,
}

impl DomTree {
    pub fn new(f: &Function) -> DomTree {
        let rpo = reverse_postorder(f);
        let mut order = vec![usize::MAX; f.blocks.len()];
        for (k, b) in rpo.iter().enumerate() {
            order[b.index()] = k;
        }
        let preds = f.predecessors();
        let mut idom: Vec<Option<BlockId>> = vec![None; f.blocks.len()];
        idom[f.entry().index()] = Some(f.entry());
        let mut changed = true;
        while changed {
            changed = false;
            for &b in rpo.iter().skip(1) {
                let mut new: Option<BlockId> = None;
                for &p in &preds[b.index()] {
                    if idom[p.index()].is_none() {
                        continue;
                    }
                    new = Some(match new {
                        None => p,
                        Some(q) => intersect(&idom, &order, p, q),
                    });
                }
                if new.is_some() && idom[b.index()] != new {
                    idom[b.index()] = new;
                    changed = true;
                }
            }
        }
        DomTree { idom, order }
    }

    pub fn is_reachable(&self, b: BlockId) -> bool {
        self.order[b.index()] != usize::MAX
    }

    /// The immediate dominator (the entry's is itself).
    pub fn idom(&self, b: BlockId) -> Option<BlockId> {
        self.idom[b.index()]
    }

    /// Whether `a` dominates `b` (every block dominates itself).
    pub fn dominates(&self, a: BlockId, b: BlockId) -> bool {
        if !self.is_reachable(a) || !self.is_reachable(b) {
            return false;
        }
        let mut x = b;
        loop {
            if x == a {
                return true;
            }
            match self.idom[x.index()] {
                Some(p) if p != x => x = p,
                _ => return false,
            }
        }
    }

    /// Whether the edge `from → to` goes back to a block that dominates `from` (a loop).
    pub fn is_back_edge(&self, from: BlockId, to: BlockId) -> bool {
        self.dominates(to, from)
    }
}

fn intersect(idom: &[Option<BlockId>], order: &[usize], a: BlockId, b: BlockId) -> BlockId {
    let (mut x, mut y) = (a, b);
    while x != y {
        while order[x.index()] > order[y.index()] {
            x = idom[x.index()].expect("processed");
        }
        while order[y.index()] > order[x.index()] {
            y = idom[y.index()].expect("processed");
        }
    }
    x
}
