//! Which calls an optimizing compile inlines, decided on the VM thread while the request is
//! made (the compiler then never reads the runtime): the methods the sites' inline caches
//! (and value profiles) say a call reaches, by the size limits of
//! [`tally_controller::inlining::InlinePolicy`].
//!
//! With a call graph ([`EdgeWeights`]: CBS's, the samples', or the exhaustive one) the limits
//! are Arnold & Grove's: a site's limit grows with its edge's share of all calls in the graph,
//! a target holding too small a share of its site's calls is not inlined, a site the graph
//! never saw gets the cold limit, and each method's sites are expanded hottest first so that
//! a spent budget cuts the cold ones. Without one (`--inline-by=static`) every call the inline
//! cache saw counts as hot and sites go in bytecode order.
//!
//! An inlined method runs without a frame of its own; when something needs one (a guard
//! fails, a call out of it yields to the interpreter) the frames of the whole inline chain
//! are rebuilt above the compiled code's own. The frame stack and value stack keep
//! [`MAX_INLINED_FRAMES`] frames and [`INLINED_FRAMES_ROOM`] values beyond their limits for
//! those, so a chain's frames always fit, whatever depth the compiled code runs at.

use rustc_hash::FxHashMap;
use tally_controller::{size_limit, InlinePolicy, Verdict};
use tally_profile::CallGraph;

use super::request::{CompileRequest, ExpectedTarget, Speculation};
use crate::bytecode::{CodeId, Op};
use crate::compiler::CodeKind;
use crate::runtime::{Code, Runtime};

/// The deepest inline chain (the frames a deoptimization may rebuild above one compiled
/// activation's).
pub const MAX_INLINED_FRAMES: usize = 8;

/// The most bytecodes one compile inlines (each inlined copy counted), whatever its size:
/// compile time and code grow with them, and Cranelift's time more than linearly.
pub const MAX_INLINED_BYTECODES: u32 = 400;

/// The value-stack slots an inline chain's rebuilt frames may take at most (their receivers,
/// arguments, locals, operand stacks and headroom together).
pub const INLINED_FRAMES_ROOM: usize = 4096;

/// Whether `code` can run inlined, without a frame: a method (a block runs in its closure's
/// frame) that no method hook watches, and whose context, if it has one, no closure returns
/// non-locally to (the context then needs no frame's index, the one thing a frame gives it).
pub fn inlinable(rt: &Runtime, code: &Code) -> bool {
    code.kind == CodeKind::Method
        && !code.ops.is_empty()
        && code.hooks.load(std::sync::atomic::Ordering::Relaxed) == 0
        && (code.context_size == 0 || !returns_through_closures(rt, code))
}

/// Whether a block `code` makes (at any depth) has a `^`.
fn returns_through_closures(rt: &Runtime, code: &Code) -> bool {
    code.ops.iter().any(|op| match *op {
        Op::PushBlock(c) => {
            let block = rt.codes[c as usize];
            block.ops.iter().any(|o| matches!(o, Op::ReturnNonLocal))
                || returns_through_closures(rt, block)
        }
        _ => false,
    })
}

/// The value-stack slots a frame of `code` takes when rebuilt.
pub fn frame_room(code: &Code) -> usize {
    1 + code.num_args as usize + code.room_above_arguments as usize
}

/// Whether `code` sends `restart`, which restarts its sender's frame: the sender must have
/// one.
fn sends_restart(rt: &Runtime, code: &Code) -> bool {
    code.ops
        .iter()
        .filter_map(|op| op.site())
        .any(|s| rt.symbols.name(rt.sites[s as usize].selector) == "restart")
}

/// A call graph's weights as one compile reads them: per call site (caller code, bytecode
/// index), each callee's weight, and the graph's total.
#[derive(Clone, Debug, Default)]
pub(crate) struct EdgeWeights {
    sites: FxHashMap<(CodeId, u32), Vec<(CodeId, u64)>>,
    total: u64,
}

impl EdgeWeights {
    pub(crate) fn from_graph(graph: &CallGraph) -> EdgeWeights {
        let mut w = EdgeWeights::default();
        for (e, &n) in &graph.edges {
            w.add(e.caller.0, e.callsite, e.callee.0, n);
        }
        w
    }

    pub(crate) fn add(&mut self, caller: CodeId, bci: u32, callee: CodeId, n: u64) {
        let targets = self.sites.entry((caller, bci)).or_default();
        match targets.iter_mut().find(|t| t.0 == callee) {
            Some(t) => t.1 = t.1.saturating_add(n),
            None => targets.push((callee, n)),
        }
        self.total = self.total.saturating_add(n);
    }

    /// The calls the graph saw at the site, and those of them that reached `callee`.
    fn at(&self, caller: CodeId, bci: u32, callee: CodeId) -> (u64, u64) {
        let Some(targets) = self.sites.get(&(caller, bci)) else {
            return (0, 0);
        };
        let site = targets.iter().map(|t| t.1).sum();
        let edge = targets.iter().find(|t| t.0 == callee).map_or(0, |t| t.1);
        (site, edge)
    }

    fn site_weight(&self, caller: CodeId, bci: u32) -> u64 {
        self.sites
            .get(&(caller, bci))
            .map_or(0, |t| t.iter().map(|t| t.1).sum())
    }

    pub(crate) fn total(&self) -> u64 {
        self.total
    }
}

/// A call graph recorded by another run, by name: its methods' ids are not this run's, so
/// each edge is placed on the codes that carry its names (every one of them, where a name is
/// shared: two blocks of one method have the same name). Placed again when code is loaded.
pub(crate) struct RecordedGraph {
    edges: Vec<(String, u32, String, u64)>,
    placed: Option<(usize, EdgeWeights)>,
}

impl RecordedGraph {
    pub(crate) fn new(edges: Vec<(String, u32, String, u64)>) -> RecordedGraph {
        RecordedGraph {
            edges,
            placed: None,
        }
    }

    pub(crate) fn weights(&mut self, rt: &Runtime) -> EdgeWeights {
        let codes = rt.codes.len();
        if let Some((n, w)) = &self.placed {
            if *n == codes {
                return w.clone();
            }
        }
        let mut by_name: FxHashMap<String, Vec<CodeId>> = FxHashMap::default();
        for code in rt.codes.iter() {
            by_name.entry(rt.code_name(code)).or_default().push(code.id);
        }
        let mut w = EdgeWeights::default();
        for (caller, bci, callee, n) in &self.edges {
            let (Some(callers), Some(callees)) = (by_name.get(caller), by_name.get(callee)) else {
                continue;
            };
            for &a in callers {
                for &b in callees {
                    w.add(a, *bci, b, *n);
                }
            }
        }
        self.placed = Some((codes, w.clone()));
        w
    }
}

struct Planner<'a> {
    rt: &'a Runtime,
    /// The call graph, or `None` for the static heuristics.
    weights: Option<&'a EdgeWeights>,
    speculation: Speculation<'a>,
    policy: &'a InlinePolicy,
    budget: u32,
    /// The methods on the chain being expanded (recursion is not inlined).
    path_codes: Vec<CodeId>,
    /// The codes expanded so far, with the depth they were expanded at.
    expanded: Vec<(CodeId, u32)>,
}

impl CompileRequest {
    /// Plans the calls this compile may inline (see the module doc), adding the facts of
    /// every site of each method it may inline and of the blocks those and the code make;
    /// each choice and refusal goes to `inline_log`. The IR builder inlines a planned call
    /// where the chain it is on stays within [`MAX_INLINED_FRAMES`] and
    /// [`INLINED_FRAMES_ROOM`], and a block where a `value…` send in the compile gets the
    /// closure it made.
    pub(crate) fn plan_inlining(
        &mut self,
        rt: &Runtime,
        speculation: Speculation,
        policy: &InlinePolicy,
        weights: Option<&EdgeWeights>,
    ) {
        if !policy.enabled || matches!(speculation, Speculation::Off) {
            return;
        }
        let root = self.code;
        let size = root.ops.len() as u32;
        let budget = policy
            .budget_factor
            .saturating_mul(size)
            .saturating_add(policy.budget_extra)
            .min(policy.budget_cap)
            .min(MAX_INLINED_BYTECODES);
        self.inline_budget = budget as usize;
        let mut p = Planner {
            rt,
            weights,
            speculation,
            policy,
            budget,
            path_codes: vec![root.id],
            expanded: Vec::new(),
        };
        self.expand(&mut p, root, 1);
    }

    /// Plans the calls from `code`'s sites and its blocks', `code` running at `depth` (1:
    /// the compiled code's own activation).
    fn expand(&mut self, p: &mut Planner, code: &'static Code, depth: u32) {
        if p.expanded.iter().any(|&(c, d)| c == code.id && d <= depth) {
            return;
        }
        p.expanded.push((code.id, depth));
        for block in code.ops.iter().filter_map(|op| match *op {
            Op::PushBlock(c) => Some(p.rt.codes[c as usize]),
            _ => None,
        }) {
            self.add_block(block);
            self.add_sites_of(p.rt, block, p.speculation);
            self.expand(p, block, depth + 1);
        }
        let mut sites: Vec<(u32, u32)> = code
            .ops
            .iter()
            .enumerate()
            .filter_map(|(i, op)| Some((i as u32, op.site()?)))
            .collect();
        if let Some(w) = p.weights {
            // Hottest first (a stable sort: equal weights keep the bytecode order).
            sites.sort_by_key(|&(bci, _)| std::cmp::Reverse(w.site_weight(code.id, bci)));
        }
        for (bci, site) in sites {
            let Ok(facts) = self.site(site) else { continue };
            let Some(expected) = facts.expects_receiver else {
                continue;
            };
            let mut callees: Vec<&'static Code> = Vec::new();
            for e in expected.classes() {
                // Classes that find the same method share its one inlined copy.
                if let ExpectedTarget::Method(c) = e.target {
                    if !callees.iter().any(|k| k.id == c.id) {
                        callees.push(c);
                    }
                }
            }
            for callee in callees {
                let heat = p.weights.map(|w| {
                    let (site, edge) = w.at(code.id, bci, callee.id);
                    Heat {
                        site,
                        edge,
                        total: w.total(),
                    }
                });
                let verdict = self.judge(p, callee, depth, heat);
                self.inline_log.push(format!(
                    "{}{} @{bci} #{} → {}: {}{}",
                    "  ".repeat(depth as usize - 1),
                    p.rt.code_name(code),
                    p.rt.symbols.name(p.rt.sites[site as usize].selector),
                    p.rt.code_name(callee),
                    describe(&verdict),
                    heat.map(|h| h.describe()).unwrap_or_default()
                ));
                if !verdict.inlined() {
                    continue;
                }
                p.budget = p.budget.saturating_sub(callee.ops.len() as u32);
                p.path_codes.push(callee.id);
                self.inline(site, callee.id);
                self.add_sites_of(p.rt, callee, p.speculation);
                self.expand(p, callee, depth + 1);
                p.path_codes.pop();
            }
        }
    }

    fn judge(&self, p: &Planner, callee: &'static Code, depth: u32, heat: Option<Heat>) -> Verdict {
        if !inlinable(p.rt, callee) || sends_restart(p.rt, callee) {
            return Verdict::NotInlinable;
        }
        if p.path_codes.contains(&callee.id) {
            return Verdict::Recursive;
        }
        if depth > p.policy.max_depth.min(MAX_INLINED_FRAMES as u32) {
            return Verdict::TooDeep;
        }
        let size = callee.ops.len() as u32;
        if size > p.budget {
            return Verdict::BudgetSpent;
        }
        let edge_share = match heat {
            // The inline cache says this class reaches the call: without a call graph to
            // weigh the edge, every such call counts as hot.
            None => 1.0,
            // A site the graph never saw is cold, whatever its inline cache holds.
            Some(h) if h.site == 0 => 0.0,
            Some(h) => {
                let share = h.edge as f64 / h.site as f64;
                if share <= p.policy.min_target_share {
                    return Verdict::TooRare { share };
                }
                h.edge as f64 / h.total.max(1) as f64
            }
        };
        let limit = size_limit(edge_share, depth, p.policy);
        if size > limit {
            return Verdict::TooBig { size, limit };
        }
        Verdict::Inlined
    }
}

/// What the call graph says about one (site, callee) edge.
#[derive(Clone, Copy, Debug)]
struct Heat {
    /// Calls the graph saw at the site.
    site: u64,
    /// Those that reached the callee.
    edge: u64,
    /// Calls in the whole graph.
    total: u64,
}

impl Heat {
    fn describe(&self) -> String {
        if self.site == 0 {
            return " (a site the call graph never saw)".into();
        }
        format!(
            " (edge {:.2} % of the graph's calls, {:.0} % of the site's)",
            self.edge as f64 * 100.0 / self.total.max(1) as f64,
            self.edge as f64 * 100.0 / self.site as f64
        )
    }
}

fn describe(v: &Verdict) -> String {
    match v {
        Verdict::Inlined | Verdict::AlwaysInlined => "inlined".into(),
        Verdict::TooBig { size, limit } => format!("not inlined, {size} bytecodes > {limit}"),
        Verdict::TooRare { share } => format!("not inlined, {:.0} % of the calls", share * 100.0),
        Verdict::TooDeep => "not inlined, too deep".into(),
        Verdict::Recursive => "not inlined, recursive".into(),
        Verdict::BudgetSpent => "not inlined, the compile's budget is spent".into(),
        Verdict::NotInlinable => {
            "not inlinable (a closure returns to its context, a hook, or `restart`)".into()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tally_profile::{CallEdge, MethodId};

    #[test]
    fn edge_weights_give_each_site_its_callees_and_the_graph_its_total() {
        let mut g = CallGraph::default();
        let edge = |caller, callsite, callee| CallEdge {
            caller: MethodId(caller),
            callsite,
            callee: MethodId(callee),
        };
        g.add(edge(1, 4, 2), 30);
        g.add(edge(1, 4, 3), 10);
        g.add(edge(1, 9, 2), 60);
        let w = EdgeWeights::from_graph(&g);
        assert_eq!(w.total(), 100);
        assert_eq!(w.at(1, 4, 2), (40, 30));
        assert_eq!(w.at(1, 4, 3), (40, 10));
        assert_eq!(w.at(1, 9, 3), (60, 0));
        assert_eq!(w.at(7, 4, 2), (0, 0), "a site the graph never saw");
        assert_eq!(w.site_weight(1, 9), 60);
    }
}
