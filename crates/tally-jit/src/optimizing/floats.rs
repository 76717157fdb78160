//! Doubles in registers ([`tally_ir::Ty::Float`]): unboxed from a SOM value behind a guard,
//! computed on, and boxed again where a SOM value is needed (an immediate where one holds
//! the double, else a heap Double from the `ir_box_double` stub), exits included.

use cranelift_codegen::ir::condcodes::{FloatCC, IntCC};
use cranelift_codegen::ir::immediates::Ieee64;
use cranelift_codegen::ir::{types, InstBuilder, MemFlagsData, Value};
use tally_heap::object::HEADER_BYTES;
use tally_ir::{FloatOp, FrameStateId, Inst, InstKind, IntCmp};
use tally_vm::jit::{DeoptReason, DoubleFn};

use super::insts::state_of;
use super::lowerer::Lowerer;
use super::{flags, I64};
use crate::numbers;

const F64: types::Type = types::F64;

impl Lowerer<'_, '_> {
    /// Lowers an instruction on doubles (its result).
    pub(super) fn float_inst(&mut self, inst: &Inst) -> Result<Option<Value>, String> {
        Ok(match &inst.kind {
            InstKind::FloatConst(bits) => Some(self.float_const(*bits)),
            InstKind::UnboxFloat {
                value,
                accept_int,
                reason,
            } => {
                let x = self.val(*value)?;
                Some(self.unbox_float(x, *accept_int, state_of(inst)?, *reason)?)
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
            other => return Err(format!("{other:?} is no instruction on doubles")),
        })
    }

    pub(super) fn float_const(&mut self, bits: u64) -> Value {
        self.b.ins().f64const(Ieee64::with_bits(bits))
    }

    /// `x` as a double: an immediate double decoded, a heap Double's payload read, a small
    /// integer converted where `accept_int`; anything else deoptimizes to `state` for
    /// `reason`.
    pub(super) fn unbox_float(
        &mut self,
        x: Value,
        accept_int: bool,
        state: FrameStateId,
        reason: DeoptReason,
    ) -> Result<Value, String> {
        let join = self.b.create_block();
        let d = self.b.append_block_param(join, F64);
        let (small, other) = (self.b.create_block(), self.b.create_block());
        let tag = self.and_imm(x, 7);
        let is_small = self.cmp_imm(IntCC::Equal, tag, numbers::FLOAT_TAG);
        self.b.ins().brif(is_small, small, &[], other, &[]);
        self.b.switch_to_block(small);
        let decoded = numbers::decode_small_float(&mut self.b, x);
        self.b.ins().jump(join, &[decoded.into()]);
        self.b.switch_to_block(other);
        if accept_int {
            let (int, heap) = (self.b.create_block(), self.b.create_block());
            let bit = self.and_imm(x, 1);
            self.b.ins().brif(bit, int, &[], heap, &[]);
            self.b.switch_to_block(int);
            let one = self.iconst(I64, 1);
            let n = self.b.ins().sshr(x, one);
            let converted = self.b.ins().fcvt_from_sint(F64, n);
            self.b.ins().jump(join, &[converted.into()]);
            self.b.switch_to_block(heap);
        }
        let is_double = self.heap_class_is(x, self.layout.calls.double_class);
        self.guard(is_double, state, reason)?;
        let payload = self.b.ins().load(F64, flags(), x, HEADER_BYTES as i32);
        self.b.ins().jump(join, &[payload.into()]);
        self.b.switch_to_block(join);
        Ok(d)
    }

    pub(super) fn float_binary(&mut self, op: FloatOp, x: Value, y: Value) -> Value {
        match op {
            FloatOp::Add => self.b.ins().fadd(x, y),
            FloatOp::Sub => self.b.ins().fsub(x, y),
            FloatOp::Mul => self.b.ins().fmul(x, y),
            FloatOp::Div => self.b.ins().fdiv(x, y),
        }
    }

    /// `op` of `x`: `sqrt` an instruction, `sin` and `cos` calls of Rust's (which neither
    /// allocate nor collect: no safepoint).
    pub(super) fn float_unary(&mut self, op: DoubleFn, x: Value) -> Value {
        let f = match op {
            DoubleFn::Sqrt => return self.b.ins().sqrt(x),
            DoubleFn::Sin => self.layout.stubs.double_sin,
            DoubleFn::Cos => self.layout.stubs.double_cos,
        };
        let call = crate::stub_calls::call(&mut self.b, &mut self.sigs.stubs, f, &[x]);
        self.b.inst_results(call)[0]
    }

    /// The comparison as [`IntCmp::apply_float`] defines it (NaN included).
    pub(super) fn float_compare(&mut self, op: IntCmp, x: Value, y: Value) -> Value {
        let cc = match op {
            IntCmp::Less => FloatCC::LessThan,
            IntCmp::LessEq => FloatCC::LessThanOrEqual,
            IntCmp::Greater => FloatCC::UnorderedOrGreaterThan,
            IntCmp::GreaterEq => FloatCC::UnorderedOrGreaterThanOrEqual,
            IntCmp::Equal => FloatCC::Equal,
            IntCmp::NotEqual => FloatCC::NotEqual,
        };
        self.b.ins().fcmp(cc, x, y)
    }

    /// Double `d` as a SOM value: its immediate, or a heap Double made by the stub (a
    /// safepoint at `bci`; an allocation that fails leaves, its error parked).
    pub(super) fn box_float(&mut self, d: Value, bci: u32) -> Result<Value, String> {
        let (slow, join) = (self.b.create_block(), self.b.create_block());
        self.b.set_cold_block(slow);
        let word = self.b.append_block_param(join, I64);
        let immediate = numbers::encode_small_float(&mut self.b, d, slow);
        self.b.ins().jump(join, &[immediate.into()]);
        self.b.switch_to_block(slow);
        let bits = self.b.ins().bitcast(I64, MemFlagsData::new(), d);
        let stub = self.layout.stubs.ir_box_double;
        let boxed = self.safepoint_call(stub, &[self.act.vm, bits], bci);
        self.left_if_none(boxed, None)?;
        self.b.ins().jump(join, &[boxed.into()]);
        self.b.switch_to_block(join);
        Ok(word)
    }
}
