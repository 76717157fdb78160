//! What an exit makes before it writes its frames: the objects, contexts and closures the
//! frame states hold virtually ([`tally_ir::InstKind::VirtualObject`], `VirtualContext`,
//! `VirtualBlock`), each with what the exit's own state says it holds.

use cranelift_codegen::ir::InstBuilder;
use cranelift_codegen::ir::Value;
use tally_ir::{FrameStateId, ValueId};

use super::heap::slot_offset;
use super::lowerer::Lowerer;
use super::I32;

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

    /// Makes the virtual contexts and closures the states of `chain` hold (an exit's: the
    /// interpreter sees them now), defining each IR value as the new object for the rest of
    /// the exit: contexts first, each after its outer one, with the slots `innermost` (the
    /// exit's own state) names. Each is a safepoint; one whose allocation fails leaves (the
    /// error is parked).
    pub(super) fn materialize(
        &mut self,
        chain: &[FrameStateId],
        innermost: FrameStateId,
        bci: u32,
    ) -> Result<(), String> {
        self.box_exit_floats(chain, bci)?;
        let [contexts, virtuals, objects] = self.virtuals_of(chain);
        // The frame's own activation's context, which the frame holds.
        let home = chain
            .first()
            .and_then(|&s| self.ir.states[s.index()].context);
        // Objects: all made first, then filled, since one may hold another.
        let mut made_objects = Vec::with_capacity(objects.len());
        for o in objects {
            let Some(tally_ir::InstKind::VirtualObject { class, .. }) =
                self.ir.def_inst(o).map(|i| i.kind.clone())
            else {
                continue;
            };
            let fields = self.virtual_slots(innermost, o)?;
            let class = self.val(class)?;
            let made = self.new_instance(class, bci)?;
            self.define(o, made);
            made_objects.push((o, fields));
        }
        for (o, fields) in made_objects {
            let made = self.val(o)?;
            self.fill_made(made, &fields)?;
        }
        for c in contexts {
            let Some(tally_ir::InstKind::VirtualContext { size, outer }) =
                self.ir.def_inst(c).map(|i| i.kind.clone())
            else {
                continue;
            };
            let slots = self.virtual_slots(innermost, c)?;
            let made = if home == Some(c) {
                let code = self.iconst(I32, self.request.code.id as i64);
                let stub = self.layout.stubs.ir_home_context;
                let made = self.safepoint_call(stub, &[self.act.vm, code], bci);
                self.left_if_none(made, None)?;
                made
            } else {
                self.inlined_context(size, outer, bci)?
            };
            self.fill_made(made, &slots)?;
            self.define(c, made);
        }
        for v in virtuals {
            let Some(tally_ir::InstKind::VirtualBlock {
                code,
                receiver,
                ctx,
            }) = self.ir.def_inst(v).map(|i| i.kind.clone())
            else {
                continue;
            };
            let made = self.make_block(code, receiver, ctx, bci)?;
            let leave = self.leave();
            let go_on = self.b.create_block();
            self.b.ins().brif(made, go_on, &[], leave, &[]);
            self.b.switch_to_block(go_on);
            self.define(v, made);
        }
        Ok(())
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

    /// Stores `slots` into `made`, an object the exit just made (nil where the allocation
    /// left nil).
    fn fill_made(&mut self, made: Value, slots: &[ValueId]) -> Result<(), String> {
        for (k, &slot) in slots.iter().enumerate() {
            if self.ir.const_value(slot) == Some(tally_heap::Value::NIL) {
                continue;
            }
            let x = self.word(slot)?;
            self.store_into(made, slot_offset(k), None, x);
        }
        Ok(())
    }
}
