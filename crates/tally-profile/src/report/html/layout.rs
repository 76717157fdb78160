//! A layered drawing of a directed graph, in the manner of Sugiyama's: callers above their
//! callees. Layers come from a breadth-first walk from the roots (so recursion and other cycles
//! need no special care: a back edge simply points up), the order within a layer from a few
//! sweeps of the barycenter heuristic (fewer crossings), and x positions from the barycenters
//! of each node's neighbours in the layer above, pushed apart to keep a gap. Done here rather
//! than in the page so that the page opens without laying anything out, and so it is tested.

use std::collections::VecDeque;

pub(crate) struct LayoutEdge {
    pub from: usize,
    pub to: usize,
    pub weight: u64,
}

pub(crate) struct Layout {
    /// Top-left corner of each node.
    pub positions: Vec<(f64, f64)>,
    pub width: f64,
    pub height: f64,
}

const MARGIN: f64 = 20.0;
const GAP_X: f64 = 24.0;
const GAP_Y: f64 = 56.0;
const SWEEPS: usize = 6;

/// Lays out nodes of the given widths (all `node_h` high); heavier nodes are preferred as
/// roots of cycles and come first in their layer before the sweeps.
pub(crate) fn layered(
    widths: &[f64],
    weights: &[u64],
    edges: &[LayoutEdge],
    node_h: f64,
) -> Layout {
    let n = widths.len();
    if n == 0 {
        return Layout {
            positions: Vec::new(),
            width: 2.0 * MARGIN,
            height: 2.0 * MARGIN,
        };
    }
    let mut out: Vec<Vec<(usize, u64)>> = vec![Vec::new(); n];
    let mut inc: Vec<Vec<(usize, u64)>> = vec![Vec::new(); n];
    for e in edges
        .iter()
        .filter(|e| e.from != e.to && e.from < n && e.to < n)
    {
        out[e.from].push((e.to, e.weight));
        inc[e.to].push((e.from, e.weight));
    }
    for list in out.iter_mut() {
        list.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    }
    let layer = layers(&out, &inc, weights);

    let depth = layer.iter().copied().max().unwrap_or(0) + 1;
    let mut rows: Vec<Vec<usize>> = vec![Vec::new(); depth];
    for v in discovery_order(&out, &layer, weights) {
        rows[layer[v]].push(v);
    }
    order_rows(&mut rows, &inc, &out, &layer);

    let mut x = vec![0.0; n];
    for (l, row) in rows.iter().enumerate() {
        let desired: Vec<f64> = row
            .iter()
            .map(|&v| {
                let above: Vec<(usize, u64)> = inc[v]
                    .iter()
                    .copied()
                    .filter(|&(u, _)| layer[u] < l)
                    .collect();
                if l == 0 || above.is_empty() {
                    f64::NAN
                } else {
                    let total: f64 = above.iter().map(|&(_, w)| w.max(1) as f64).sum();
                    above
                        .iter()
                        .map(|&(u, w)| (x[u] + widths[u] / 2.0) * w.max(1) as f64)
                        .sum::<f64>()
                        / total
                }
            })
            .collect();
        let placed = place_row(row, widths, &desired);
        for (&v, px) in row.iter().zip(placed) {
            x[v] = px;
        }
    }
    let min_x = x.iter().copied().fold(f64::INFINITY, f64::min);
    let mut width: f64 = 0.0;
    let mut positions = Vec::with_capacity(n);
    for v in 0..n {
        let px = x[v] - min_x + MARGIN;
        width = width.max(px + widths[v] + MARGIN);
        positions.push((px, MARGIN + layer[v] as f64 * (node_h + GAP_Y)));
    }
    Layout {
        positions,
        width,
        height: 2.0 * MARGIN + depth as f64 * node_h + (depth - 1) as f64 * GAP_Y,
    }
}

/// Each node's layer: its distance from the roots (nodes nobody calls). Nodes only reachable
/// through cycles start a walk of their own from the heaviest of them, one layer below their
/// nearest placed caller.
fn layers(out: &[Vec<(usize, u64)>], inc: &[Vec<(usize, u64)>], weights: &[u64]) -> Vec<usize> {
    let n = out.len();
    let mut layer = vec![usize::MAX; n];
    let mut queue = VecDeque::new();
    let mut by_weight: Vec<usize> = (0..n).collect();
    by_weight.sort_by(|&a, &b| weights[b].cmp(&weights[a]).then(a.cmp(&b)));
    for &v in &by_weight {
        if inc[v].is_empty() {
            layer[v] = 0;
            queue.push_back(v);
        }
    }
    loop {
        while let Some(u) = queue.pop_front() {
            for &(v, _) in &out[u] {
                if layer[v] == usize::MAX {
                    layer[v] = layer[u] + 1;
                    queue.push_back(v);
                }
            }
        }
        let Some(&start) = by_weight.iter().find(|&&v| layer[v] == usize::MAX) else {
            break;
        };
        layer[start] = inc[start]
            .iter()
            .filter(|&&(u, _)| layer[u] != usize::MAX)
            .map(|&(u, _)| layer[u] + 1)
            .min()
            .unwrap_or(0);
        queue.push_back(start);
    }
    layer
}

/// Nodes in the order a heaviest-first walk down the layers meets them, the starting order
/// of each row.
fn discovery_order(out: &[Vec<(usize, u64)>], layer: &[usize], weights: &[u64]) -> Vec<usize> {
    let n = out.len();
    let mut seen = vec![false; n];
    let mut order = Vec::with_capacity(n);
    let mut starts: Vec<usize> = (0..n).collect();
    starts.sort_by(|&a, &b| {
        layer[a]
            .cmp(&layer[b])
            .then(weights[b].cmp(&weights[a]))
            .then(a.cmp(&b))
    });
    for s in starts {
        if seen[s] {
            continue;
        }
        seen[s] = true;
        let mut queue = VecDeque::from([s]);
        while let Some(u) = queue.pop_front() {
            order.push(u);
            for &(v, _) in &out[u] {
                if !seen[v] && layer[v] > layer[u] {
                    seen[v] = true;
                    queue.push_back(v);
                }
            }
        }
    }
    order
}

/// Reorders each row by the weighted mean position of its neighbours in the row above (going
/// down) or below (going up).
fn order_rows(
    rows: &mut [Vec<usize>],
    inc: &[Vec<(usize, u64)>],
    out: &[Vec<(usize, u64)>],
    layer: &[usize],
) {
    let n = layer.len();
    let mut pos = vec![0.0; n];
    let index = |rows: &[Vec<usize>], pos: &mut Vec<f64>| {
        for row in rows {
            for (i, &v) in row.iter().enumerate() {
                pos[v] = i as f64;
            }
        }
    };
    index(rows, &mut pos);
    for sweep in 0..SWEEPS {
        let down = sweep % 2 == 0;
        let order: Vec<usize> = if down {
            (1..rows.len()).collect()
        } else {
            (0..rows.len().saturating_sub(1)).rev().collect()
        };
        for l in order {
            let neighbour_layer = if down { l - 1 } else { l + 1 };
            let keys: Vec<(usize, f64)> = rows[l]
                .iter()
                .map(|&v| {
                    let (mut sum, mut total) = (0.0, 0.0);
                    for &(u, w) in inc[v].iter().chain(out[v].iter()) {
                        if layer[u] == neighbour_layer {
                            sum += pos[u] * w.max(1) as f64;
                            total += w.max(1) as f64;
                        }
                    }
                    (v, if total > 0.0 { sum / total } else { pos[v] })
                })
                .collect();
            let mut sorted = keys;
            sorted.sort_by(|a, b| a.1.total_cmp(&b.1));
            rows[l] = sorted.into_iter().map(|(v, _)| v).collect();
            for (i, &v) in rows[l].iter().enumerate() {
                pos[v] = i as f64;
            }
        }
    }
}

/// Left x of each node of a row, in the row's order: as near its desired centre as the gaps
/// allow (nodes without a wish keep a packed place). Pushing right and pushing left, averaged,
/// keeps a crowded row centred on its wishes instead of drifting one way.
fn place_row(row: &[usize], widths: &[f64], desired_centre: &[f64]) -> Vec<f64> {
    let k = row.len();
    let mut packed = Vec::with_capacity(k);
    let mut at = 0.0;
    for &v in row {
        packed.push(at);
        at += widths[v] + GAP_X;
    }
    let wish: Vec<f64> = (0..k)
        .map(|i| {
            let c = desired_centre[i];
            if c.is_nan() {
                packed[i]
            } else {
                c - widths[row[i]] / 2.0
            }
        })
        .collect();
    let mut right = wish.clone();
    for i in 1..k {
        let min = right[i - 1] + widths[row[i - 1]] + GAP_X;
        right[i] = right[i].max(min);
    }
    let mut left = wish;
    for i in (0..k.saturating_sub(1)).rev() {
        let max = left[i + 1] - widths[row[i]] - GAP_X;
        left[i] = left[i].min(max);
    }
    let mut x: Vec<f64> = right
        .iter()
        .zip(&left)
        .map(|(a, b)| (a + b) / 2.0)
        .collect();
    // The average of two valid placements keeps every gap: each gap is the mean of two gaps
    // that are at least GAP_X.
    for i in 1..k {
        let min = x[i - 1] + widths[row[i - 1]] + GAP_X;
        if x[i] < min {
            x[i] = min;
        }
    }
    x
}

#[cfg(test)]
mod tests {
    use super::*;

    fn edge(from: usize, to: usize, weight: u64) -> LayoutEdge {
        LayoutEdge { from, to, weight }
    }

    fn no_overlap(l: &Layout, widths: &[f64]) {
        for a in 0..widths.len() {
            for b in a + 1..widths.len() {
                let (pa, pb) = (l.positions[a], l.positions[b]);
                if pa.1 == pb.1 {
                    let apart = pa.0 + widths[a] + GAP_X <= pb.0 + 1e-6
                        || pb.0 + widths[b] + GAP_X <= pa.0 + 1e-6;
                    assert!(apart, "nodes {a} and {b} overlap: {pa:?} {pb:?}");
                }
            }
        }
        for (v, p) in l.positions.iter().enumerate() {
            assert!(
                p.0 >= 0.0 && p.0 + widths[v] <= l.width + 1e-6,
                "node {v} outside"
            );
            assert!(p.1 >= 0.0 && p.1 <= l.height, "node {v} outside");
        }
    }

    #[test]
    fn callers_sit_above_their_callees() {
        let widths = [100.0, 100.0, 100.0];
        let l = layered(&widths, &[3, 2, 1], &[edge(0, 1, 5), edge(1, 2, 5)], 30.0);
        assert!(l.positions[0].1 < l.positions[1].1);
        assert!(l.positions[1].1 < l.positions[2].1);
        // A chain is drawn straight down.
        assert!((l.positions[0].0 - l.positions[2].0).abs() < 1e-6);
    }

    #[test]
    fn a_cycle_and_recursion_still_get_places() {
        let widths = [80.0, 120.0, 90.0, 100.0];
        // 1 → 2 → 3 → 1 is reachable only through a cycle once 0 is gone; 3 calls itself.
        let edges = [edge(1, 2, 1), edge(2, 3, 1), edge(3, 1, 1), edge(3, 3, 9)];
        let l = layered(&widths, &[1, 9, 5, 4], &edges, 30.0);
        assert!(l
            .positions
            .iter()
            .all(|p| p.0.is_finite() && p.1.is_finite()));
        // The heaviest node of the cycle is its top.
        assert!(l.positions[1].1 < l.positions[2].1);
        no_overlap(&l, &widths);
    }

    #[test]
    fn wide_rows_never_overlap_and_children_cluster_under_their_parent() {
        // Two parents, each with six children of varied widths.
        let mut widths = vec![150.0, 150.0];
        let mut edges = vec![];
        for i in 0..12 {
            widths.push(60.0 + (i * 37 % 90) as f64);
            edges.push(edge(if i < 6 { 0 } else { 1 }, 2 + i, 1 + i as u64));
        }
        let weights: Vec<u64> = (0..widths.len() as u64).rev().collect();
        let l = layered(&widths, &weights, &edges, 30.0);
        no_overlap(&l, &widths);
        let centre = |v: usize| l.positions[v].0 + widths[v] / 2.0;
        let mean = |vs: std::ops::Range<usize>| {
            let n = vs.len() as f64;
            vs.map(centre).sum::<f64>() / n
        };
        // Each parent's children are on its side of the other parent's.
        let (a, b) = (mean(2..8), mean(8..14));
        assert_eq!(centre(0) < centre(1), a < b);
    }

    #[test]
    fn an_empty_graph_has_a_size() {
        let l = layered(&[], &[], &[], 30.0);
        assert!(l.positions.is_empty() && l.width > 0.0);
    }
}
