//! IR instructions → Cranelift: heap access, guards, small-integer arithmetic, and the
//! calls to the `ir_*` stubs (safepoints).

use cranelift_codegen::ir::condcodes::IntCC;
use cranelift_codegen::ir::{InstBuilder, TrapCode, Value};
use tally_ir::{Inst, InstKind, IntCmp, IntOp};
use tally_vm::jit::DeoptReason;
use tally_vm::objects::{block, context};

use super::exits::ExitKind;
use super::heap::{slot_offset, FALSE, TRUE};
use super::lowerer::Lowerer;
use super::{flags, I32, I64, I8};

impl Lowerer<'_, '_> {
    pub(super) fn inst(&mut self, inst: &Inst) -> Result<(), String> {
        let state = || {
            inst.state
                .ok_or_else(|| format!("{:?} without a frame state", inst.kind))
        };
        let result: Option<Value> = match &inst.kind {
            InstKind::Const(v) => Some(self.iconst(I64, v.0 as i64)),
            InstKind::FlagConst(b) => Some(self.iconst(I8, i64::from(*b))),
            InstKind::Literal(n) => Some(self.table_entry(self.layout.calls.literals_base, *n)?),
            InstKind::Global(slot) => {
                // A global may be assigned: read where used, as a literal is.
                let v = self.table_entry(self.layout.calls.globals_base, *slot)?;
                // Undefined: the interpreter sends `unknownGlobal:`.
                let defined = self.cmp_imm(IntCC::NotEqual, v, 0);
                self.check(defined, state()?)?;
                Some(v)
            }
            InstKind::LoadField { obj, index } => {
                let o = self.val(*obj)?;
                Some(
                    self.b
                        .ins()
                        .load(I64, flags(), o, slot_offset(*index as usize)),
                )
            }
            InstKind::StoreField { obj, index, value } => {
                let (o, v) = (self.val(*obj)?, self.val(*value)?);
                self.store_into(o, slot_offset(*index as usize), None, v);
                None
            }
            InstKind::NewContext { size, outer } if self.map.scope.0 != 0 => {
                Some(self.inlined_context(*size, *outer, inst.bci)?)
            }
            InstKind::NewContext { .. } => Some(self.new_context(inst.bci)),
            InstKind::InitialLocal(k) => {
                // Read whatever the mode: in a directly called activation the slot may hold
                // anything, and the select takes nil.
                let slot = self
                    .b
                    .ins()
                    .load(I64, flags(), self.act.slots, 8 * *k as i32);
                let nil = self.iconst(I64, super::NIL);
                Some(self.b.ins().select(self.act.caller, slot, nil))
            }
            InstKind::FrameSlot(k) => Some(self.b.ins().load(
                I64,
                flags(),
                self.act.slots,
                8 * i32::from(*k),
            )),
            InstKind::FrameContext => Some(self.b.ins().load(
                I64,
                flags(),
                self.act.frame,
                self.layout.frame_ctx,
            )),
            InstKind::ContextOuter(c) => {
                let c = self.val(*c)?;
                Some(
                    self.b
                        .ins()
                        .load(I64, flags(), c, slot_offset(context::OUTER)),
                )
            }
            InstKind::ClosureContext(c) => {
                let c = self.val(*c)?;
                Some(
                    self.b
                        .ins()
                        .load(I64, flags(), c, slot_offset(block::CONTEXT)),
                )
            }
            InstKind::LoadContext { ctx, index } => {
                let c = self.val(*ctx)?;
                Some(
                    self.b
                        .ins()
                        .load(I64, flags(), c, slot_offset(*index as usize)),
                )
            }
            InstKind::StoreContext { ctx, index, value } => {
                let (c, v) = (self.val(*ctx)?, self.val(*value)?);
                self.store_into(c, slot_offset(*index as usize), None, v);
                None
            }
            InstKind::MakeBlock {
                code,
                receiver,
                ctx,
            } => {
                let v = self.make_block(*code, *receiver, *ctx, inst.bci)?;
                self.left_if_none(v, None)?;
                Some(v)
            }
            InstKind::GuardInt { value, reason } => {
                let x = self.val(*value)?;
                let is_int = self.and_imm(x, 1);
                self.guard(is_int, state()?, *reason)?;
                Some(x)
            }
            InstKind::GuardClass {
                value,
                class,
                reason,
            } => {
                let x = self.val(*value)?;
                let ok = self.class_is(x, *class);
                self.guard(ok, state()?, *reason)?;
                Some(x)
            }
            InstKind::ClassIs { value, class } => {
                // A class switch on what the site saw: speculation too, though a miss sends
                // instead of deoptimizing.
                if let Some(site) = self.site_at(inst.bci) {
                    self.record.speculated.insert(site);
                }
                let x = self.val(*value)?;
                Some(self.class_is(x, *class))
            }
            InstKind::IntBinary { op, lhs, rhs } => {
                let (a, b) = (self.val(*lhs)?, self.val(*rhs)?);
                Some(self.int_binary(*op, a, b, inst.state)?)
            }
            InstKind::IntCompare { op, lhs, rhs } => {
                let (a, b) = (self.val(*lhs)?, self.val(*rhs)?);
                let cc = match op {
                    IntCmp::Less => IntCC::SignedLessThan,
                    IntCmp::Greater => IntCC::SignedGreaterThan,
                    IntCmp::LessEq => IntCC::SignedLessThanOrEqual,
                    IntCmp::GreaterEq => IntCC::SignedGreaterThanOrEqual,
                    IntCmp::Equal => IntCC::Equal,
                    IntCmp::NotEqual => IntCC::NotEqual,
                };
                Some(self.b.ins().icmp(cc, a, b))
            }
            InstKind::FloatConst(bits) => Some(self.float_const(*bits)),
            InstKind::UnboxFloat {
                value,
                accept_int,
                reason,
            } => {
                let x = self.val(*value)?;
                Some(self.unbox_float(x, *accept_int, state()?, *reason)?)
            }
            InstKind::FloatBinary { op, lhs, rhs } => {
                let (a, b) = (self.val(*lhs)?, self.val(*rhs)?);
                Some(self.float_binary(*op, a, b))
            }
            InstKind::FloatUnary { op, value } => {
                let x = self.val(*value)?;
                Some(self.float_unary(*op, x))
            }
            InstKind::FloatCompare { op, lhs, rhs } => {
                let (a, b) = (self.val(*lhs)?, self.val(*rhs)?);
                Some(self.float_compare(*op, a, b))
            }
            InstKind::BoxFloat(v) => {
                let d = self.val(*v)?;
                Some(self.box_float(d, inst.bci)?)
            }
            InstKind::Identical(a, b) => {
                let (a, b) = (self.val(*a)?, self.val(*b)?);
                Some(self.b.ins().icmp(IntCC::Equal, a, b))
            }
            InstKind::NilTest { value, is_nil } => {
                let x = self.val(*value)?;
                let c = &self.layout.calls;
                let standard = crate::numbers::nil_tests_standard(
                    &mut self.b,
                    self.act.vm,
                    c.nil_tests_standard,
                    c.nil_tests_redefined,
                );
                self.guard(standard, state()?, DeoptReason::NilTests)?;
                let cc = if *is_nil {
                    IntCC::Equal
                } else {
                    IntCC::NotEqual
                };
                Some(self.cmp_imm(cc, x, super::NIL))
            }
            InstKind::FlagToBool(f) => {
                let f = self.val(*f)?;
                Some(self.flag_to_bool(f))
            }
            InstKind::Truth(v) => {
                let x = self.val(*v)?;
                let is_true = self.cmp_imm(IntCC::Equal, x, TRUE);
                let is_false = self.cmp_imm(IntCC::Equal, x, FALSE);
                let boolean = self.b.ins().bor(is_true, is_false);
                // Not a Boolean: the interpreter sends what it sends.
                self.check(boolean, state()?)?;
                Some(is_true)
            }
            InstKind::Send {
                site,
                receiver,
                args,
            }
            | InstKind::SuperSend {
                site,
                receiver,
                args,
            } => {
                let stub = if matches!(inst.kind, InstKind::SuperSend { .. }) {
                    self.layout.stubs.ir_super_send
                } else {
                    self.layout.stubs.ir_send
                };
                let v = if matches!(inst.kind, InstKind::SuperSend { .. }) {
                    self.call(stub, Some(*site), *receiver, args, inst)?
                } else {
                    self.send_through_cache(*site, *receiver, args, inst)?
                };
                // Only `Block>>restart` restarts its sender's frame (never inlined code's:
                // a method that sends it is not inlined).
                let restarts =
                    self.map.scope.0 == 0 && self.request.selector(*site) == Some("#restart");
                self.left_if_none(v, inst.state.filter(|_| restarts))?;
                Some(v)
            }
            InstKind::CallMethod {
                code,
                receiver,
                args,
            } => Some(self.call_direct(Some(*code), *receiver, args, inst)?),
            InstKind::CallBlock { closure, args } => {
                Some(self.call_direct(None, *closure, args, inst)?)
            }
            InstKind::ArrayAt { array, index } => {
                let (a, i) = (self.val(*array)?, self.val(*index)?);
                let address = self.element_address(a, i, state()?)?;
                Some(self.b.ins().load(I64, flags(), address, 0))
            }
            InstKind::ArrayAtPut {
                array,
                index,
                value,
            } => {
                let (a, i, v) = (self.val(*array)?, self.val(*index)?, self.val(*value)?);
                let address = self.element_address(a, i, state()?)?;
                self.store_into(a, 0, Some(address), v);
                None
            }
            InstKind::ArrayLength(a) => {
                let a = self.val(*a)?;
                let len = self.b.ins().uload32(flags(), a, 8);
                let one = self.iconst(I64, 1);
                let shifted = self.b.ins().ishl(len, one);
                Some(self.b.ins().bor(shifted, one))
            }
            InstKind::StringEqual { lhs, rhs, symbol } => {
                let (a, b) = (self.val(*lhs)?, self.val(*rhs)?);
                Some(self.text_equal(a, b, *symbol))
            }
            InstKind::NewInstance(class) => {
                let class = self.val(*class)?;
                let v = self.allocate(false, class, &[], inst)?;
                self.left_if_none(v, None)?;
                Some(v)
            }
            InstKind::NewArray { class, length } => {
                let class = self.val(*class)?;
                let shape = super::alloc::Shape::Array {
                    class: self.layout.array_class,
                    length: self.val(*length)?,
                };
                Some(self.allocate_shaped(true, class, &[*length], &shape, inst)?)
            }
            InstKind::Yieldpoint => {
                self.yieldpoint(state()?, inst.bci)?;
                None
            }
            InstKind::CallHook(code) => {
                self.call_hook(*code, inst.bci);
                None
            }
            InstKind::NewObject { class, shape } => {
                let class = self.val(*class)?;
                let shape = super::alloc::Shape::Plain {
                    class: shape.class,
                    fields: shape.fields,
                };
                Some(self.allocate_shaped(false, class, &[], &shape, inst)?)
            }
            InstKind::Materialize {
                class,
                shape,
                fields,
            } => {
                let class = self.val(*class)?;
                let set: Vec<(usize, Value)> = fields
                    .iter()
                    .enumerate()
                    .filter(|&(_, &f)| self.ir.const_value(f) != Some(tally_heap::Value::NIL))
                    .map(|(k, &f)| Ok((k, self.val(f)?)))
                    .collect::<Result<_, String>>()?;
                let shape = super::alloc::Shape::Plain {
                    class: shape.class,
                    fields: shape.fields,
                };
                let slow = self.b.create_block();
                let join = self.b.create_block();
                let made = self.b.append_block_param(join, I64);
                if let Some(fast) = self.alloc_in_place(&shape, slow) {
                    // A new object in the nursery: its stores need no write barrier.
                    for &(k, x) in &set {
                        self.b.ins().store(flags(), x, fast, slot_offset(k));
                    }
                    self.b.ins().jump(join, &[fast.into()]);
                    self.b.set_cold_block(slow);
                } else {
                    self.b.ins().jump(slow, &[]);
                }
                self.b.switch_to_block(slow);
                let made_slowly = self.new_instance(class, inst.bci)?;
                for &(k, x) in &set {
                    self.store_into(made_slowly, slot_offset(k), None, x);
                }
                self.b.ins().jump(join, &[made_slowly.into()]);
                self.b.switch_to_block(join);
                Some(made)
            }
            InstKind::VirtualBlock { .. }
            | InstKind::VirtualContext { .. }
            | InstKind::VirtualObject { .. } => None,
            InstKind::EnterInlined(code) => {
                if self.layout.count_calls {
                    let callee = self.request.callee(*code).ok_or_else(|| {
                        format!("an inlined code {code}, which the request does not name")
                    })?;
                    crate::counters::count_call(&mut self.b, callee, super::TIER_COLUMN);
                }
                self.call_hook(*code, inst.bci);
                None
            }
        };
        if let InstKind::VirtualBlock { .. }
        | InstKind::VirtualContext { .. }
        | InstKind::VirtualObject { .. } = inst.kind
        {
            // Made only by the exits whose frames hold it (`Lowerer::materialize`).
            return Ok(());
        }
        match (inst.result, result) {
            (Some(r), Some(x)) => self.define(r, x),
            (None, _) => {}
            (Some(r), None) => return Err(format!("{r} has no lowering")),
        }
        Ok(())
    }

    /// `a op b` for two small integers (tagged), as the interpreter answers it
    /// (`numbers::int_arith`); where that takes the general path the code deoptimizes to
    /// `state`.
    pub(super) fn int_binary(
        &mut self,
        op: IntOp,
        a: Value,
        b: Value,
        state: Option<tally_ir::FrameStateId>,
    ) -> Result<Value, String> {
        let fail = self.b.create_block();
        let v = crate::numbers::int_arith(&mut self.b, op.site_op(), a, b, fail)
            .ok_or_else(|| format!("{} has no inline form", op.name()))?;
        let go_on = self.b.create_block();
        let result = self.b.append_block_param(go_on, I64);
        self.b.ins().jump(go_on, &[v.into()]);
        self.b.switch_to_block(fail);
        self.b.set_cold_block(fail);
        if op.may_overflow() {
            let state = state.ok_or("arithmetic that may fail without a frame state")?;
            let reason = match op {
                IntOp::Add | IntOp::Sub | IntOp::Mul => DeoptReason::Overflow,
                _ => DeoptReason::IntRange,
            };
            let exit = self.exit(state, ExitKind::Deopt)?;
            let reason = self.iconst(I32, reason as i64);
            self.b.ins().jump(exit, &[reason.into()]);
        } else {
            self.b.ins().trap(TrapCode::unwrap_user(1));
        }
        self.b.switch_to_block(go_on);
        Ok(result)
    }
}
