//! The plan of an exit ([`tally_vm::jit::ExitPlan`]): the frames of its state's inline chain
//! and the objects, contexts and closures the states hold virtually
//! ([`tally_ir::InstKind::VirtualObject`], `VirtualContext`, `VirtualBlock`), each value named
//! by where the rebuild finds it: a word the exit stores in the exit buffer (a double boxed
//! first), a constant, or an object the rebuild makes.

use std::collections::HashMap;

use tally_ir::{FrameStateId, Resume, ValueId};
use tally_vm::jit::{ExitFrame, ExitHandOver, ExitObject, ExitPlan, ExitValue, MAX_EXIT_WORDS};

use super::exits::ExitKind;
use super::lowerer::Lowerer;

/// What an exit stores in the buffer, in order: IR values, or the frame's own receiver and
/// arguments as the body got them.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub(super) enum Stored {
    Ir(ValueId),
    Param(usize),
}

/// A plan being made, and what its exit must store.
#[derive(Default)]
pub(super) struct PlanBuilder {
    /// The words the exit stores, each once.
    pub(super) words: Vec<Stored>,
    index: HashMap<Stored, u16>,
    /// The rebuild's number of each virtual value.
    made: HashMap<ValueId, u16>,
}

impl PlanBuilder {
    fn word(&mut self, s: Stored) -> ExitValue {
        let next = self.words.len() as u16;
        let k = *self.index.entry(s).or_insert_with(|| {
            self.words.push(s);
            next
        });
        ExitValue::Word(k)
    }
}

impl Lowerer<'_, '_> {
    /// The virtual contexts (outer ones first: each before the ones made over it) and the
    /// virtual closures the states of `chain` hold, directly or as a closure's context or a
    /// context's outer, each once.
    pub(super) fn virtuals_of(&self, chain: &[FrameStateId]) -> [Vec<tally_ir::ValueId>; 3] {
        let mut virtuals: Vec<tally_ir::ValueId> = Vec::new();
        let mut contexts: Vec<tally_ir::ValueId> = Vec::new();
        let mut objects: Vec<tally_ir::ValueId> = Vec::new();
        for &st in chain {
            for v in self.ir.states[st.index()].values() {
                let mut next = Some(v);
                while let Some(x) = next {
                    next = match self.ir.def_inst(x).map(|i| &i.kind) {
                        Some(tally_ir::InstKind::VirtualBlock { ctx, .. }) => {
                            if !virtuals.contains(&x) {
                                virtuals.push(x);
                            }
                            *ctx
                        }
                        Some(tally_ir::InstKind::VirtualContext { outer, .. }) => {
                            if !contexts.contains(&x) {
                                contexts.push(x);
                            }
                            *outer
                        }
                        Some(tally_ir::InstKind::VirtualObject { .. }) => {
                            if !objects.contains(&x) {
                                objects.push(x);
                            }
                            None
                        }
                        _ => None,
                    };
                }
            }
        }
        contexts.sort_by_key(|&c| c.index());
        objects.sort_by_key(|&c| c.index());
        [contexts, virtuals, objects]
    }

    /// The plan of the exit of `state` for `kind`, and what the exit stores for it.
    pub(super) fn exit_plan(
        &self,
        state: FrameStateId,
        kind: ExitKind,
        site: Option<u32>,
    ) -> Result<(ExitPlan, PlanBuilder), String> {
        let chain = self.chain_outermost_first(state);
        let mut p = PlanBuilder::default();
        let [contexts, closures, objects] = self.virtuals_of(&chain);
        // Numbered first, in the order the rebuild makes them (objects, then contexts,
        // outer ones first, then closures over them), so that any slot may name any.
        for (k, &v) in objects.iter().chain(&contexts).chain(&closures).enumerate() {
            p.made.insert(v, k as u16);
        }
        // The frame's own activation's context, which the frame holds.
        let home = self.ir.states[chain[0].index()].context;
        let mut made = Vec::with_capacity(p.made.len());
        for &o in &objects {
            let Some(tally_ir::InstKind::VirtualObject { class, .. }) =
                self.ir.def_inst(o).map(|i| &i.kind)
            else {
                return Err(format!("{o} is no virtual object"));
            };
            let class = self.source(*class, &mut p);
            let fields = self.sources(&self.virtual_slots(state, o)?, &mut p);
            made.push(ExitObject::Instance { class, fields });
        }
        for &c in &contexts {
            let Some(&tally_ir::InstKind::VirtualContext { size, outer }) =
                self.ir.def_inst(c).map(|i| &i.kind)
            else {
                return Err(format!("{c} is no virtual context"));
            };
            let slots = self.sources(&self.virtual_slots(state, c)?, &mut p);
            made.push(if home == Some(c) {
                ExitObject::HomeContext {
                    code: self.request.code.id,
                    slots,
                }
            } else {
                ExitObject::Context {
                    size,
                    outer: outer.map(|o| self.source(o, &mut p)),
                    slots,
                }
            });
        }
        for &v in &closures {
            let Some(&tally_ir::InstKind::VirtualBlock {
                code,
                receiver,
                ctx,
            }) = self.ir.def_inst(v).map(|i| &i.kind)
            else {
                return Err(format!("{v} is no virtual closure"));
            };
            made.push(ExitObject::Closure {
                code,
                receiver: self.source(receiver, &mut p),
                ctx: ctx.map(|c| self.source(c, &mut p)),
            });
        }
        let mut frames = Vec::with_capacity(chain.len());
        for (level, &st) in chain.iter().enumerate() {
            let fs = &self.ir.states[st.index()];
            let mut slots = Vec::with_capacity(fs.locals.len() + fs.stack.len());
            for (slot, l) in fs.locals.iter().enumerate() {
                // The receiver and arguments of the frame's own activation never change (SOM
                // does not assign them): the interpreter may read them where the bytecode
                // does not (an escaped block's receiver, a restarted method's arguments).
                slots.push(match l {
                    Some(v) => self.source(*v, &mut p),
                    None if level == 0 && slot < self.act.params.len() => {
                        p.word(Stored::Param(slot))
                    }
                    None => ExitValue::Const(tally_heap::Value::NIL),
                });
            }
            if kind != ExitKind::Restart {
                let stack = self.sources(&fs.stack, &mut p);
                slots.extend(stack);
            }
            let ip = match fs.resume {
                Resume::Before => fs.bci,
                Resume::AfterCall => fs.bci + 1,
            };
            let (context, closure) = if level == 0 {
                (None, None)
            } else {
                (
                    fs.context.map(|c| self.source(c, &mut p)),
                    fs.closure.map(|c| self.source(c, &mut p)),
                )
            };
            frames.push(ExitFrame {
                code: fs.code,
                ip,
                context,
                closure,
                slots,
            });
        }
        if p.words.len() > MAX_EXIT_WORDS {
            return Err(format!(
                "an exit to {state} holds {} values, more than the exit buffer's {MAX_EXIT_WORDS}",
                p.words.len()
            ));
        }
        let hand_over = match kind {
            ExitKind::Deopt => ExitHandOver::Deopt {
                site: site.unwrap_or(tally_vm::jit::NO_DEOPT_SITE),
                code: self.request.code.id,
            },
            ExitKind::Interpret => ExitHandOver::Interpret,
            ExitKind::Status => ExitHandOver::Status,
            ExitKind::Restart => ExitHandOver::Restart,
        };
        let plan = ExitPlan {
            hand_over,
            words: p.words.len() as u16,
            objects: made,
            frames,
        };
        Ok((plan, p))
    }

    /// Where the rebuild finds IR value `v`.
    fn source(&self, v: ValueId, p: &mut PlanBuilder) -> ExitValue {
        if let Some(&k) = p.made.get(&v) {
            return ExitValue::Made(k);
        }
        match self.ir.const_value(v) {
            Some(c) if !c.is_ref() => ExitValue::Const(c),
            _ => p.word(Stored::Ir(v)),
        }
    }

    fn sources(&self, vs: &[ValueId], p: &mut PlanBuilder) -> Vec<ExitValue> {
        vs.iter().map(|&v| self.source(v, p)).collect()
    }

    /// What state `innermost` says the slots (a context's) or fields (an object's) of the
    /// virtual `v` hold.
    fn virtual_slots(&self, innermost: FrameStateId, v: ValueId) -> Result<Vec<ValueId>, String> {
        self.ir.states[innermost.index()]
            .virtuals
            .iter()
            .find(|(x, _)| *x == v)
            .map(|(_, slots)| slots.clone())
            .ok_or_else(|| format!("{innermost} does not name what {v}'s slots hold"))
    }
}
