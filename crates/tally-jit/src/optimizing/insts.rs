//! IR instructions → Cranelift: the dispatch by group, and the groups of values, guards
//! and small-integer arithmetic (heap access, doubles, calls and allocation have files of
//! their own).

use cranelift_codegen::ir::condcodes::IntCC;
use cranelift_codegen::ir::{InstBuilder, TrapCode, Value};
use tally_ir::{FrameStateId, Inst, InstKind, IntCmp, IntOp};
use tally_vm::jit::DeoptReason;

use super::exits::ExitKind;
use super::heap::{FALSE, TRUE};
use super::lowerer::Lowerer;
use super::{flags, I32, I64, I8};

/// The frame state `inst` carries (its declaration says it has one).
pub(super) fn state_of(inst: &Inst) -> Result<FrameStateId, String> {
    inst.state
        .ok_or_else(|| format!("{:?} without a frame state", inst.kind))
}

impl Lowerer<'_, '_> {
    /// Lowers one instruction and defines its result. The match is table-like: one short
    /// arm per group, each lowered in its group's file.
    pub(super) fn inst(&mut self, inst: &Inst) -> Result<(), String> {
        use InstKind::*;
        if let VirtualBlock { .. } | VirtualContext { .. } | VirtualObject { .. } = inst.kind {
            // Made only by the exits whose frames hold it (`Lowerer::materialize`).
            return Ok(());
        }
        let before = self.instructions_so_far();
        let lowered = self.lower_inst(inst);
        self.count_volume(inst.kind.name(), before);
        match (inst.result, lowered?) {
            (Some(r), Some(x)) => self.define(r, x),
            (None, _) => {}
            (Some(r), None) => return Err(format!("{r} has no lowering")),
        }
        Ok(())
    }

    /// The instruction's Cranelift, answering its result's value if it has one.
    fn lower_inst(&mut self, inst: &Inst) -> Result<Option<Value>, String> {
        use InstKind::*;
        Ok(match &inst.kind {
            Const(_) | FlagConst(_) | InitialLocal(_) | FrameSlot(_) | FrameContext => {
                self.value_inst(inst)?
            }
            GuardInt { .. } | GuardClass { .. } | ClassIs { .. } | NilTest { .. } | Truth(_) => {
                self.guard_inst(inst)?
            }
            IntBinary { .. } | IntCompare { .. } | Identical(..) | FlagToBool(_) => {
                self.int_inst(inst)?
            }
            Literal(_)
            | Global(_)
            | LoadField { .. }
            | StoreField { .. }
            | ContextOuter(_)
            | ClosureContext(_)
            | LoadContext { .. }
            | StoreContext { .. }
            | ArrayAt { .. }
            | ArrayAtPut { .. }
            | ArrayLength(_)
            | StringLength(_)
            | StringEqual { .. } => self.heap_inst(inst)?,
            FloatConst(_)
            | UnboxFloat { .. }
            | FloatBinary { .. }
            | FloatUnary { .. }
            | FloatCompare { .. }
            | BoxFloat(_) => self.float_inst(inst)?,
            Send { .. }
            | SuperSend { .. }
            | CallMethod { .. }
            | CallBlock { .. }
            | MakeBlock { .. }
            | NewContext { .. }
            | Yieldpoint
            | CallHook(_)
            | EnterInlined(_) => self.call_inst(inst)?,
            NewInstance(_) | NewObject { .. } | NewArray { .. } | Materialize { .. } => {
                self.alloc_inst(inst)?
            }
            VirtualBlock { .. } | VirtualContext { .. } | VirtualObject { .. } => {
                return Err("a virtual value has no code of its own".into())
            }
        })
    }

    /// Lowers a constant or a value the frame holds at entry (its result).
    pub(super) fn value_inst(&mut self, inst: &Inst) -> Result<Option<Value>, String> {
        Ok(match &inst.kind {
            InstKind::Const(v) => Some(self.iconst(I64, v.0 as i64)),
            InstKind::FlagConst(b) => Some(self.iconst(I8, i64::from(*b))),
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
            other => return Err(format!("{other:?} is no value")),
        })
    }

    /// Lowers a guard or a test the site's speculation made (its result).
    pub(super) fn guard_inst(&mut self, inst: &Inst) -> Result<Option<Value>, String> {
        Ok(match &inst.kind {
            InstKind::GuardInt { value, reason } => {
                let x = self.val(*value)?;
                let is_int = self.and_imm(x, 1);
                self.guard(is_int, state_of(inst)?, *reason)?;
                Some(x)
            }
            InstKind::GuardClass {
                value,
                class,
                reason,
            } => {
                let x = self.val(*value)?;
                if self.is_heap_class(*class) {
                    // Two guards to the one exit, without the flag `class_is` would merge.
                    let state = state_of(inst)?;
                    let is_object = self.is_object(x);
                    self.guard(is_object, state, *reason)?;
                    let actual = self.b.ins().load(I32, flags(), x, 4);
                    let same = self.cmp_imm(IntCC::Equal, actual, i64::from(*class));
                    self.guard(same, state, *reason)?;
                } else {
                    let ok = self.class_is(x, *class);
                    self.guard(ok, state_of(inst)?, *reason)?;
                }
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
            InstKind::NilTest { value, is_nil } => {
                let x = self.val(*value)?;
                let vm = self.act.vm;
                let standard =
                    crate::numbers::nil_tests_standard(&mut self.b, vm, &self.layout.calls);
                self.guard(standard, state_of(inst)?, DeoptReason::NilTests)?;
                let cc = if *is_nil {
                    IntCC::Equal
                } else {
                    IntCC::NotEqual
                };
                Some(self.cmp_imm(cc, x, super::NIL))
            }
            InstKind::Truth(v) => {
                let x = self.val(*v)?;
                let is_true = self.cmp_imm(IntCC::Equal, x, TRUE);
                let is_false = self.cmp_imm(IntCC::Equal, x, FALSE);
                let boolean = self.b.ins().bor(is_true, is_false);
                // Not a Boolean: the interpreter sends what it sends.
                self.check(boolean, state_of(inst)?)?;
                Some(is_true)
            }
            other => return Err(format!("{other:?} is no guard")),
        })
    }

    /// Lowers small-integer arithmetic, a comparison or a flag made a Boolean (its result).
    pub(super) fn int_inst(&mut self, inst: &Inst) -> Result<Option<Value>, String> {
        Ok(match &inst.kind {
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
            InstKind::Identical(a, b) => {
                let (a, b) = (self.val(*a)?, self.val(*b)?);
                Some(self.b.ins().icmp(IntCC::Equal, a, b))
            }
            InstKind::FlagToBool(f) => {
                let f = self.val(*f)?;
                Some(self.flag_to_bool(f))
            }
            other => return Err(format!("{other:?} is no integer operation")),
        })
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
