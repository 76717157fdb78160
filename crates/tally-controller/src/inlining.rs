//! The inlining oracle, after Arnold & Grove (CGO 2005, §5) and Jikes RVM's
//! `DefaultInlineOracle`: profile-directed inlining from a sampled call graph.
//!
//! For each call site of the method being compiled, the site's targets and their weights come
//! from the call graph (CBS edges name the call site, so one graph gives both the edge's heat
//! and the site's target distribution). A target is inlined when
//! - the VM says it always is (trivial methods, blocks passed to an inlined method), or
//! - it holds more than [`InlinePolicy::min_target_share`] of the site's calls (each such target
//!   behind its own class guard, the full send or a deopt behind the last), and its size is
//!   within the site's limit, which grows linearly with the edge's share of all sampled calls
//!   from [`InlinePolicy::cold_size`] up to [`InlinePolicy::hot_size`] at
//!   [`InlinePolicy::hot_edge_share`] and beyond;
//! - and the compile's total inlined size stays within its budget, the callee is not already
//!   being inlined on this path (recursion), and the depth is within [`InlinePolicy::max_depth`]
//!   (past [`InlinePolicy::shrink_depth`] the limit halves at every level).
//!
//! Sites are expanded hottest first, so a budget that runs out cuts cold sites. Every choice
//! comes back with its reason ([`Verdict`]), for the tier log and the reports. The call graph
//! may come from CBS or from timer samples' adjacent frames (the seed experiment): the oracle
//! takes any [`CallGraph`].

use std::collections::BTreeMap;

use tally_profile::{CallGraph, MethodId};

/// Where the inliner's call graph comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CallGraphSource {
    /// Call-edge samples taken in method prologues (CBS: Arnold & Grove's design).
    Cbs,
    /// The two innermost frames of the timer's method samples (the seeds' design, against
    /// which CBS is measured).
    TimerSamples,
    /// Every call counted: the exhaustive graph, a perfect profile at a price.
    Exhaustive,
}

/// Sizes are in the VM's bytecodes.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct InlinePolicy {
    pub enabled: bool,
    /// The size limit of a site whose edge the graph never saw hot.
    pub cold_size: u32,
    /// The size limit of a site at or above `hot_edge_share`.
    pub hot_size: u32,
    /// The edge share (of all sampled calls) at which a site gets `hot_size`.
    pub hot_edge_share: f64,
    /// Targets with at most this share of their site's calls are not inlined.
    pub min_target_share: f64,
    /// Inlining stops at this depth.
    pub max_depth: u32,
    /// Beyond this depth each level halves the size limit.
    pub shrink_depth: u32,
    /// Total inlined bytecodes per compile: `budget_factor` × the root's size + `budget_extra`.
    pub budget_factor: u32,
    pub budget_extra: u32,
    /// At most this many inlined bytecodes, whatever the root's size: one compile's cap, what
    /// its predicted gain pays for in compile time (`Controller::affordable_inlining`).
    pub budget_cap: u32,
}

impl Default for InlinePolicy {
    /// Jikes RVM's shape (limit from 4 to 20 call costs, hot above 1 % of the edges, guarded
    /// targets from 40 %, depth 5), in bytecodes: a SOM send is about 3 bytecodes (receiver,
    /// arguments, send), so 4 call costs ≈ 12 and 20 ≈ 60.
    fn default() -> Self {
        InlinePolicy {
            enabled: true,
            cold_size: 12,
            hot_size: 60,
            hot_edge_share: 0.01,
            min_target_share: 0.40,
            max_depth: 8,
            shrink_depth: 5,
            budget_factor: 4,
            budget_extra: 120,
            budget_cap: u32::MAX,
        }
    }
}

/// What the VM tells the oracle about its methods.
pub trait InlineSource {
    /// The method's size in bytecodes, or `None` if it cannot be inlined (a primitive, code
    /// the compiler does not take).
    fn size(&self, method: MethodId) -> Option<u32>;
    /// Whether to inline the method wherever it is the target (trivial methods, blocks whose
    /// home is inlined), whatever the profile says.
    fn always_inline(&self, method: MethodId) -> bool;
}

/// Why a target was or was not inlined.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Verdict {
    Inlined,
    /// Inlined because the VM always inlines it.
    AlwaysInlined,
    TooBig {
        size: u32,
        limit: u32,
    },
    TooRare {
        share: f64,
    },
    TooDeep,
    Recursive,
    BudgetSpent,
    NotInlinable,
}

impl Verdict {
    pub fn inlined(&self) -> bool {
        matches!(self, Verdict::Inlined | Verdict::AlwaysInlined)
    }
}

/// One target at one site, and what became of it.
#[derive(Clone, Debug, PartialEq)]
pub struct InlineChoice {
    pub callee: MethodId,
    /// The target's share of its site's sampled calls.
    pub share: f64,
    /// The edge's share of all sampled calls.
    pub edge_share: f64,
    pub verdict: Verdict,
    /// The callee's own sites, when it is inlined.
    pub inner: InlinePlan,
}

/// What to inline into one method (or one inlined body): per call site (bytecode index), the
/// targets in descending share.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct InlinePlan {
    pub sites: BTreeMap<u32, Vec<InlineChoice>>,
}

impl InlinePlan {
    /// Inlined bodies in this plan and below.
    pub fn inlined_count(&self) -> usize {
        self.sites
            .values()
            .flatten()
            .filter(|c| c.verdict.inlined())
            .map(|c| 1 + c.inner.inlined_count())
            .sum()
    }

    /// Every choice with its depth (1 = a site of the root), depth first.
    pub fn walk(&self) -> Vec<(u32, &InlineChoice)> {
        let mut out = Vec::new();
        self.walk_into(1, &mut out);
        out
    }

    fn walk_into<'a>(&'a self, depth: u32, out: &mut Vec<(u32, &'a InlineChoice)>) {
        for c in self.sites.values().flatten() {
            out.push((depth, c));
            c.inner.walk_into(depth + 1, out);
        }
    }
}

/// The site → (callee → weight) view of a call graph, for one caller at a time.
struct Sites {
    by_caller: BTreeMap<MethodId, BTreeMap<u32, Vec<(MethodId, u64)>>>,
    total: u64,
}

impl Sites {
    fn new(graph: &CallGraph) -> Sites {
        let mut by_caller: BTreeMap<MethodId, BTreeMap<u32, Vec<(MethodId, u64)>>> =
            BTreeMap::new();
        for (e, &w) in &graph.edges {
            by_caller
                .entry(e.caller)
                .or_default()
                .entry(e.callsite)
                .or_default()
                .push((e.callee, w));
        }
        Sites {
            by_caller,
            total: graph.total(),
        }
    }
}

/// Plans the inlining into `root` from `graph` (see the module doc).
pub fn plan(
    root: MethodId,
    graph: &CallGraph,
    source: &dyn InlineSource,
    policy: &InlinePolicy,
) -> InlinePlan {
    if !policy.enabled {
        return InlinePlan::default();
    }
    let sites = Sites::new(graph);
    let root_size = source.size(root).unwrap_or(0);
    let mut budget = policy
        .budget_factor
        .saturating_mul(root_size)
        .saturating_add(policy.budget_extra)
        .min(policy.budget_cap);
    let mut path = vec![root];
    expand(root, &sites, source, policy, &mut path, &mut budget)
}

fn expand(
    method: MethodId,
    sites: &Sites,
    source: &dyn InlineSource,
    policy: &InlinePolicy,
    path: &mut Vec<MethodId>,
    budget: &mut u32,
) -> InlinePlan {
    let mut plan = InlinePlan::default();
    let Some(method_sites) = sites.by_caller.get(&method) else {
        return plan;
    };
    let depth = path.len() as u32;
    // Hottest sites first, so that a budget running out cuts the cold ones.
    let mut order: Vec<(u32, u64)> = method_sites
        .iter()
        .map(|(&bci, targets)| (bci, targets.iter().map(|t| t.1).sum()))
        .collect();
    order.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    for (bci, site_weight) in order {
        let mut targets = method_sites[&bci].clone();
        targets.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
        let mut choices = Vec::new();
        for (callee, weight) in targets {
            let share = weight as f64 / site_weight.max(1) as f64;
            let edge_share = weight as f64 / sites.total.max(1) as f64;
            let verdict = judge(
                callee, share, edge_share, depth, source, policy, path, *budget,
            );
            let mut inner = InlinePlan::default();
            if verdict.inlined() {
                *budget = budget.saturating_sub(source.size(callee).unwrap_or(0));
                path.push(callee);
                inner = expand(callee, sites, source, policy, path, budget);
                path.pop();
            }
            choices.push(InlineChoice {
                callee,
                share,
                edge_share,
                verdict,
                inner,
            });
        }
        plan.sites.insert(bci, choices);
    }
    plan
}

#[allow(clippy::too_many_arguments)]
fn judge(
    callee: MethodId,
    share: f64,
    edge_share: f64,
    depth: u32,
    source: &dyn InlineSource,
    policy: &InlinePolicy,
    path: &[MethodId],
    budget: u32,
) -> Verdict {
    let Some(size) = source.size(callee) else {
        return Verdict::NotInlinable;
    };
    if path.contains(&callee) {
        return Verdict::Recursive;
    }
    if depth > policy.max_depth {
        return Verdict::TooDeep;
    }
    if size > budget {
        return Verdict::BudgetSpent;
    }
    if source.always_inline(callee) {
        return Verdict::AlwaysInlined;
    }
    if share <= policy.min_target_share {
        return Verdict::TooRare { share };
    }
    let limit = size_limit(edge_share, depth, policy);
    if size > limit {
        return Verdict::TooBig { size, limit };
    }
    Verdict::Inlined
}

/// The size limit of a site at `depth` (1 = the root's own sites) whose edge holds
/// `edge_share` of the sampled calls.
pub fn size_limit(edge_share: f64, depth: u32, policy: &InlinePolicy) -> u32 {
    let heat = (edge_share / policy.hot_edge_share).clamp(0.0, 1.0);
    let span = f64::from(policy.hot_size.saturating_sub(policy.cold_size));
    let limit = f64::from(policy.cold_size) + heat * span;
    let shrink = depth.saturating_sub(policy.shrink_depth).min(31);
    (limit as u32) >> shrink
}

#[cfg(test)]
mod tests {
    use super::*;
    use tally_profile::CallEdge;

    struct Methods(BTreeMap<u32, (u32, bool)>);

    impl InlineSource for Methods {
        fn size(&self, m: MethodId) -> Option<u32> {
            self.0.get(&m.0).map(|s| s.0)
        }
        fn always_inline(&self, m: MethodId) -> bool {
            self.0.get(&m.0).is_some_and(|s| s.1)
        }
    }

    fn methods(list: &[(u32, u32, bool)]) -> Methods {
        Methods(
            list.iter()
                .map(|&(id, size, always)| (id, (size, always)))
                .collect(),
        )
    }

    fn graph(edges: &[(u32, u32, u32, u64)]) -> CallGraph {
        let mut g = CallGraph::default();
        for &(caller, callsite, callee, w) in edges {
            g.add(
                CallEdge {
                    caller: MethodId(caller),
                    callsite,
                    callee: MethodId(callee),
                },
                w,
            );
        }
        g
    }

    fn verdicts(p: &InlinePlan) -> Vec<(u32, u32, Verdict)> {
        p.walk()
            .into_iter()
            .map(|(d, c)| (d, c.callee.0, c.verdict))
            .collect()
    }

    #[test]
    fn the_size_limit_grows_with_edge_weight_up_to_a_bound() {
        let p = InlinePolicy::default();
        assert_eq!(size_limit(0.0, 1, &p), 12);
        assert_eq!(size_limit(0.005, 1, &p), 36);
        assert_eq!(size_limit(0.01, 1, &p), 60);
        assert_eq!(size_limit(0.5, 1, &p), 60);
        // Deeper than shrink_depth: halved per level.
        assert_eq!(size_limit(0.5, 6, &p), 30);
        assert_eq!(size_limit(0.5, 7, &p), 15);
    }

    #[test]
    fn a_hot_edge_inlines_a_bigger_callee_than_a_cold_one() {
        // Root 0 calls 1 (40 bytecodes) hot at @3, and 2 (40 bytecodes) rarely at @7.
        let g = graph(&[(0, 3, 1, 500), (0, 7, 2, 2), (9, 1, 9, 498)]);
        let src = methods(&[
            (0, 50, false),
            (1, 40, false),
            (2, 40, false),
            (9, 5, false),
        ]);
        let p = plan(MethodId(0), &g, &src, &InlinePolicy::default());
        assert_eq!(p.sites[&3][0].verdict, Verdict::Inlined);
        assert!(matches!(
            p.sites[&7][0].verdict,
            Verdict::TooBig { size: 40, .. }
        ));
    }

    #[test]
    fn at_a_polymorphic_site_only_targets_above_40_percent_are_inlined() {
        let g = graph(&[(0, 3, 1, 55), (0, 3, 2, 30), (0, 3, 3, 15), (0, 5, 4, 10)]);
        let src = methods(&[
            (0, 20, false),
            (1, 5, false),
            (2, 5, false),
            (3, 5, false),
            (4, 5, false),
        ]);
        let p = plan(MethodId(0), &g, &src, &InlinePolicy::default());
        let site: Vec<(u32, bool)> = p.sites[&3]
            .iter()
            .map(|c| (c.callee.0, c.verdict.inlined()))
            .collect();
        assert_eq!(site, vec![(1, true), (2, false), (3, false)]);
        assert!(matches!(p.sites[&3][1].verdict, Verdict::TooRare { .. }));
        // Two targets at 50 % each: both inlined, each behind its guard.
        let g = graph(&[(0, 3, 1, 50), (0, 3, 2, 50)]);
        let p = plan(MethodId(0), &g, &src, &InlinePolicy::default());
        assert!(p.sites[&3].iter().all(|c| c.verdict == Verdict::Inlined));
    }

    #[test]
    fn trivial_methods_are_inlined_whatever_the_profile_says() {
        let g = graph(&[(0, 3, 1, 1), (0, 3, 2, 99)]);
        let src = methods(&[(0, 20, false), (1, 2, true), (2, 200, false)]);
        let p = plan(MethodId(0), &g, &src, &InlinePolicy::default());
        let by_callee: BTreeMap<u32, Verdict> = p.sites[&3]
            .iter()
            .map(|c| (c.callee.0, c.verdict))
            .collect();
        assert_eq!(by_callee[&1], Verdict::AlwaysInlined);
        assert!(matches!(by_callee[&2], Verdict::TooBig { .. }));
    }

    #[test]
    fn inlining_nests_and_stops_at_recursion_and_depth() {
        // 0 -> 1 -> 2 -> 1 (recursion), and a chain 2 -> 3 -> 4 ... deeper than allowed.
        let mut edges = vec![(0, 1, 1, 100), (1, 1, 2, 100), (2, 1, 1, 100)];
        for m in 2..12u32 {
            edges.push((m, 4, m + 1, 100));
        }
        let g = graph(&edges);
        let list: Vec<(u32, u32, bool)> = (0..13).map(|m| (m, 3, false)).collect();
        let src = methods(&list);
        let policy = InlinePolicy {
            max_depth: 4,
            ..InlinePolicy::default()
        };
        let p = plan(MethodId(0), &g, &src, &policy);
        let v = verdicts(&p);
        assert!(v.contains(&(3, 1, Verdict::Recursive)), "{v:?}");
        assert!(v.contains(&(5, 5, Verdict::TooDeep)), "{v:?}");
        assert_eq!(p.inlined_count(), 4, "1, 2, 3, 4: {v:?}");
    }

    #[test]
    fn the_budget_goes_to_the_hottest_sites_first() {
        // Root of size 10: budget 4 × 10 + 120 = 160; three 60-bytecode callees.
        let g = graph(&[(0, 1, 1, 100), (0, 2, 2, 300), (0, 3, 3, 200)]);
        let src = methods(&[
            (0, 10, false),
            (1, 60, false),
            (2, 60, false),
            (3, 60, false),
        ]);
        let p = plan(MethodId(0), &g, &src, &InlinePolicy::default());
        assert_eq!(p.sites[&2][0].verdict, Verdict::Inlined);
        assert_eq!(p.sites[&3][0].verdict, Verdict::Inlined);
        assert_eq!(p.sites[&1][0].verdict, Verdict::BudgetSpent);
        // A compile that can afford 100 bytecodes gets the hottest callee only.
        let capped = InlinePolicy {
            budget_cap: 100,
            ..InlinePolicy::default()
        };
        let p = plan(MethodId(0), &g, &src, &capped);
        assert_eq!(p.sites[&2][0].verdict, Verdict::Inlined);
        assert_eq!(p.sites[&3][0].verdict, Verdict::BudgetSpent);
        assert_eq!(p.inlined_count(), 1);
    }

    #[test]
    fn primitives_and_disabled_policies_inline_nothing() {
        let g = graph(&[(0, 1, 1, 100)]);
        let src = methods(&[(0, 10, false)]);
        let p = plan(MethodId(0), &g, &src, &InlinePolicy::default());
        assert_eq!(p.sites[&1][0].verdict, Verdict::NotInlinable);
        let off = InlinePolicy {
            enabled: false,
            ..InlinePolicy::default()
        };
        let src = methods(&[(0, 10, false), (1, 2, true)]);
        assert_eq!(plan(MethodId(0), &g, &src, &off), InlinePlan::default());
    }
}
