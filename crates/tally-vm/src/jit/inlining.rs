//! Which calls an optimizing compile inlines, decided on the VM thread while the request is
//! made (the compiler then never reads the runtime): the methods the sites' inline caches
//! (and value profiles) say a call reaches, by the size limits of
//! [`tally_controller::inlining::InlinePolicy`], hottest-first being the sites' order in
//! the bytecode until a call graph weighs them.
//!
//! An inlined method runs without a frame of its own; when something needs one (a guard
//! fails, a call out of it yields to the interpreter) the frames of the whole inline chain
//! are rebuilt above the compiled code's own. The frame stack and value stack keep
//! [`MAX_INLINED_FRAMES`] frames and [`INLINED_FRAMES_ROOM`] values beyond their limits for
//! those, so a chain's frames always fit, whatever depth the compiled code runs at.

use tally_controller::{size_limit, InlinePolicy, Verdict};

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

struct Planner<'a> {
    rt: &'a Runtime,
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
        for (bci, site) in code
            .ops
            .iter()
            .enumerate()
            .filter_map(|(i, op)| Some((i, op.site()?)))
        {
            let Ok(facts) = self.site(site) else { continue };
            let Some(expected) = facts.expects_receiver else {
                continue;
            };
            for e in expected.classes() {
                let ExpectedTarget::Method(callee) = e.target else {
                    continue;
                };
                let verdict = self.judge(p, callee, depth);
                self.inline_log.push(format!(
                    "{}{} @{bci} #{} → {}: {}",
                    "  ".repeat(depth as usize - 1),
                    p.rt.code_name(code),
                    p.rt.symbols.name(p.rt.sites[site as usize].selector),
                    p.rt.code_name(callee),
                    describe(&verdict)
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

    fn judge(&self, p: &Planner, callee: &'static Code, depth: u32) -> Verdict {
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
        // The inline cache says this class reaches the call: without a call graph to weigh
        // the edge, every such call counts as hot.
        let limit = size_limit(1.0, depth, p.policy);
        if size > limit {
            return Verdict::TooBig { size, limit };
        }
        Verdict::Inlined
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
