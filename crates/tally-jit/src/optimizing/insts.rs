//! IR instructions → Cranelift: heap access, guards, small-integer arithmetic, and the
//! calls to the `ir_*` stubs (safepoints).

use cranelift_codegen::ir::condcodes::IntCC;
use cranelift_codegen::ir::{InstBuilder, TrapCode, Value};
use tally_heap::object::HEADER_BYTES;
use tally_ir::{Inst, InstKind, IntCmp, IntOp};
use tally_vm::jit::{DeoptReason, Stub};
use tally_vm::objects::{block, context};

use super::{flags, ExitKind, Lowerer, I32, I64, I8};
use crate::stub_calls;

pub(super) const TRUE: i64 = tally_heap::Value::TRUE.0 as i64;
pub(super) const FALSE: i64 = tally_heap::Value::FALSE.0 as i64;
/// Symbols' tag (`tally_heap::value`).
pub(super) const SYMBOL_TAG: i64 = 0b010;
/// A class id no inline cache holds (not even an empty one's `NO_CLASS`): the receiver's
/// class is not known inline.
pub(super) const UNCACHED_CLASS: i64 = (u32::MAX - 1) as i64;

pub(super) fn slot_offset(index: usize) -> i32 {
    (HEADER_BYTES + index * 8) as i32
}

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
            InstKind::NewContext { size, outer } if self.scope.0 != 0 => {
                Some(self.inlined_context(*size, *outer, inst.bci)?)
            }
            InstKind::NewContext { .. } => Some(self.new_context(inst.bci)),
            InstKind::InitialLocal(k) => {
                // Read whatever the mode: in a directly called activation the slot may hold
                // anything, and the select takes nil.
                let slot = self.b.ins().load(I64, flags(), self.slots, 8 * *k as i32);
                let nil = self.iconst(I64, super::NIL);
                Some(self.b.ins().select(self.framed, slot, nil))
            }
            InstKind::FrameSlot(k) => Some(self.b.ins().load(
                I64,
                flags(),
                self.slots,
                8 * i32::from(*k),
            )),
            InstKind::FrameContext => Some(self.b.ins().load(
                I64,
                flags(),
                self.frame,
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
                    self.speculated.insert(site);
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
                    self.vm,
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
                    self.scope.0 == 0 && self.request.selector(*site) == Some("#restart");
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

    /// Entry `index` of the VM's literal or global table, whose first entry's address is at
    /// `base` in the VM: read where used, since the table may have grown (its base moved)
    /// and the collector may have moved the object since the last read.
    fn table_entry(&mut self, base: i32, index: u32) -> Result<Value, String> {
        let first = self.b.ins().load(I64, flags(), self.vm, base);
        let offset = i32::try_from(8 * u64::from(index))
            .map_err(|_| format!("table entry {index} beyond the reach of an offset"))?;
        Ok(self.b.ins().load(I64, flags(), first, offset))
    }

    /// A new closure of block `code` over `receiver` and `ctx` (a safepoint: it allocates);
    /// `Value::NONE` when the allocation failed (the error is parked).
    pub(super) fn make_block(
        &mut self,
        code: u32,
        receiver: tally_ir::ValueId,
        ctx: Option<tally_ir::ValueId>,
        bci: u32,
    ) -> Result<Value, String> {
        let r = self.val(receiver)?;
        let c = match ctx {
            Some(c) => self.val(c)?,
            None => self.iconst(I64, super::NIL),
        };
        let k = self.safepoint(bci);
        let stub = stub_calls::address(&mut self.b, self.layout.stubs.ir_make_block);
        let code = self.iconst(I32, code as i64);
        let call = stub_calls::call_at(&mut self.b, &mut self.sigs, stub, &[self.vm, code, r, c]);
        self.tag(call, k);
        Ok(self.b.inst_results(call)[0])
    }

    /// Whether `x` is a heap object (tag 0, not `Value::NONE`).
    pub(super) fn is_object(&mut self, x: Value) -> Value {
        let tag = self.and_imm(x, 7);
        let is_ref = self.cmp_imm(IntCC::Equal, tag, 0);
        let not_none = self.cmp_imm(IntCC::NotEqual, x, 0);
        self.b.ins().band(is_ref, not_none)
    }

    /// The address of the `Code` of id `id` (an I64), from the VM's table of codes, which
    /// grows as classes load (so read each time).
    pub(super) fn code_address(&mut self, id: Value) -> Value {
        let codes = self
            .b
            .ins()
            .load(I64, flags(), self.vm, self.layout.calls.codes_base);
        let eight = self.iconst(I64, 8);
        let offset = self.b.ins().imul(id, eight);
        let entry = self.b.ins().iadd(codes, offset);
        self.b.ins().load(I64, flags(), entry, 0)
    }

    /// The address of the `Code` of closure `closure`'s block.
    pub(super) fn closure_code(&mut self, closure: Value) -> Value {
        let id = self
            .b
            .ins()
            .load(I64, flags(), closure, slot_offset(block::CODE));
        let id = self.b.ins().sshr_imm_s(id, 1);
        self.code_address(id)
    }

    /// `true` or `false` by the flag `f`.
    pub(super) fn flag_to_bool(&mut self, f: Value) -> Value {
        let t = self.iconst(I64, TRUE);
        let e = self.iconst(I64, FALSE);
        self.b.ins().select(f, t, e)
    }

    /// Whether `x` is an instance of `class`: a tag test for small integers and symbols, a
    /// word compare for `nil`, `true` and `false` (their classes have no other instances), the
    /// tag or the header for doubles, the header's class id for other heap objects.
    pub(super) fn class_is(&mut self, x: Value, class: u32) -> Value {
        let calls = &self.layout.calls;
        if class == calls.integer_class {
            let bit = self.and_imm(x, 1);
            return self.cmp_imm(IntCC::NotEqual, bit, 0);
        }
        if class == calls.symbol_class {
            let tag = self.and_imm(x, 7);
            return self.cmp_imm(IntCC::Equal, tag, SYMBOL_TAG);
        }
        if let Some(&(_, word)) = calls.immediate_classes.iter().find(|(c, _)| *c == class) {
            return self.cmp_imm(IntCC::Equal, x, word as i64);
        }
        if class != calls.double_class {
            return self.heap_class_is(x, class);
        }
        let (other, join) = (self.b.create_block(), self.b.create_block());
        self.b.append_block_param(join, I8);
        let tag = self.and_imm(x, 7);
        let small = self.cmp_imm(IntCC::Equal, tag, crate::numbers::FLOAT_TAG);
        self.b.ins().brif(small, join, &[small.into()], other, &[]);
        self.b.switch_to_block(other);
        let boxed = self.heap_class_is(x, class);
        self.b.ins().jump(join, &[boxed.into()]);
        self.b.switch_to_block(join);
        self.b.block_params(join)[0]
    }

    /// Whether `x` is a heap object (tag 0, not NONE) whose header names `class`.
    pub(super) fn heap_class_is(&mut self, x: Value, class: u32) -> Value {
        let object = self.b.create_block();
        let join = self.b.create_block();
        self.b.append_block_param(join, I8);
        let is_object = self.is_object(x);
        let no = self.iconst(I8, 0);
        self.b
            .ins()
            .brif(is_object, object, &[], join, &[no.into()]);
        self.b.switch_to_block(object);
        let actual = self.b.ins().load(I32, flags(), x, 4);
        let same = self.cmp_imm(IntCC::Equal, actual, class as i64);
        self.b.ins().jump(join, &[same.into()]);
        self.b.switch_to_block(join);
        self.b.block_params(join)[0]
    }

    /// `a op b` for two small integers (tagged), as the interpreter answers it
    /// (`numbers::int_arith`); where that takes the general path the code deoptimizes to
    /// `state`.
    fn int_binary(
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

    /// The address of element `index` (a small integer, 1-based) of Array `array`; an index
    /// out of bounds hands the frame to the interpreter in `state` (which raises the error).
    fn element_address(
        &mut self,
        array: Value,
        index: Value,
        state: tally_ir::FrameStateId,
    ) -> Result<Value, String> {
        let one = self.iconst(I64, 1);
        let n = self.b.ins().sshr(index, one);
        let zero_based = self.add_imm(n, -1);
        let len = self.b.ins().uload32(flags(), array, 8);
        let within = self.b.ins().icmp(IntCC::UnsignedLessThan, zero_based, len);
        self.check(within, state)?;
        Ok(self.slot_address(array, zero_based))
    }

    /// The address of slot `index` (an I64, from 0) of heap object `object`.
    pub(super) fn slot_address(&mut self, object: Value, index: Value) -> Value {
        let eight = self.iconst(I64, 8);
        let byte = self.b.ins().imul(index, eight);
        let address = self.b.ins().iadd(object, byte);
        self.add_imm(address, HEADER_BYTES as i64)
    }

    /// The yieldpoint flag's byte masked by `bits` (an I32): nonzero when one of them is up.
    pub(super) fn flag_bits(&mut self, bits: u8) -> Value {
        let address = self.iconst(I64, self.layout.yieldpoint_flag as i64);
        let flag = self.b.ins().uload8(I32, flags(), address, 0);
        if bits == u8::MAX {
            return flag;
        }
        self.and_imm(flag, i64::from(bits))
    }

    /// Stores `v` into `object` at `offset` (or at `address`, inside it) with the write
    /// barrier of the generational plans: a reference stored into an old object not yet
    /// remembered calls `write_barrier` (which neither allocates nor touches frames).
    /// The constant Cranelift value `v` is, if it is an `iconst`.
    fn constant(&self, v: Value) -> Option<i64> {
        let inst = self.b.func.dfg.value_def(v).inst()?;
        match self.b.func.dfg.insts[inst] {
            cranelift_codegen::ir::InstructionData::UnaryImm {
                opcode: cranelift_codegen::ir::Opcode::Iconst,
                imm,
            } => Some(imm.bits()),
            _ => None,
        }
    }

    pub(super) fn store_into(
        &mut self,
        object: Value,
        offset: i32,
        address: Option<Value>,
        v: Value,
    ) {
        match address {
            Some(a) => self.b.ins().store(flags(), v, a, 0),
            None => self.b.ins().store(flags(), v, object, offset),
        };
        let Some(table) = self.layout.unlog_table else {
            return;
        };
        // Immediates (a non-zero tag) cannot make an old object point to a young one.
        if self.constant(v).is_some_and(|c| c & 7 != 0) {
            return;
        }
        let check = self.b.create_block();
        let remember = self.b.create_block();
        let done = self.b.create_block();
        let tag = self.and_imm(v, 7);
        self.b.ins().brif(tag, done, &[], check, &[]);
        self.b.switch_to_block(check);
        let granule = self.b.ins().ushr_imm_u(object, 6);
        let byte_address = self.add_imm(granule, table as i64);
        let byte = self.b.ins().uload8(I64, flags(), byte_address, 0);
        let shift = self.b.ins().ushr_imm_u(object, 3);
        let shift = self.and_imm(shift, 7);
        let bits = self.b.ins().ushr(byte, shift);
        let unlogged = self.and_imm(bits, 1);
        self.b.ins().brif(unlogged, remember, &[], done, &[]);
        self.b.set_cold_block(remember);
        self.b.switch_to_block(remember);
        let stub = self.layout.stubs.write_barrier;
        stub_calls::call(&mut self.b, &mut self.sigs, stub, &[self.vm, object]);
        self.b.ins().jump(done, &[]);
        self.b.switch_to_block(done);
    }

    /// A call through an `ir_*` stub (a safepoint): the receiver (or closure) and the
    /// arguments in a stack slot, `what` (a site or code id) first when the stub takes one.
    /// The caller tests for `Value::NONE` (`left_if_none`).
    pub(super) fn call(
        &mut self,
        stub: Stub,
        what: Option<u32>,
        receiver: tally_ir::ValueId,
        args: &[tally_ir::ValueId],
        inst: &Inst,
    ) -> Result<Value, String> {
        let words = std::iter::once(receiver)
            .chain(args.iter().copied())
            .map(|v| self.val(v))
            .collect::<Result<Vec<Value>, String>>()?;
        let k = self.safepoint(inst.bci);
        let call = self.call_with_operands(stub, what, &words);
        self.tag(call, k);
        Ok(self.b.inst_results(call)[0])
    }

    /// The activation's context: for the dispatcher, the one the frame's set-up made; for a
    /// direct call, a new one (a safepoint: it allocates).
    fn new_context(&mut self, bci: u32) -> Value {
        let framed = self.b.create_block();
        let direct = self.b.create_block();
        let join = self.b.create_block();
        let ctx = self.b.append_block_param(join, I64);
        self.b.ins().brif(self.framed, framed, &[], direct, &[]);
        self.b.switch_to_block(framed);
        let made = self
            .b
            .ins()
            .load(I64, flags(), self.frame, self.layout.frame_ctx);
        self.b.ins().jump(join, &[made.into()]);
        self.b.switch_to_block(direct);
        let code = self.iconst(I32, self.request.code.id as i64);
        let stub = self.layout.stubs.ir_new_context;
        let new = self.safepoint_call(stub, &[self.vm, code], bci);
        let leave = self.leave();
        self.b.ins().brif(new, join, &[new.into()], leave, &[]);
        self.b.switch_to_block(join);
        ctx
    }

    /// The context of an inlined activation: `size` slots, `outer` as its outer context (a
    /// safepoint: it allocates).
    pub(super) fn inlined_context(
        &mut self,
        size: u16,
        outer: Option<tally_ir::ValueId>,
        bci: u32,
    ) -> Result<Value, String> {
        let outer = match outer {
            Some(o) => self.val(o)?,
            None => self.iconst(I64, super::NIL),
        };
        let k = self.safepoint(bci);
        let stub = stub_calls::address(&mut self.b, self.layout.stubs.ir_inlined_context);
        let size = self.iconst(I64, i64::from(size));
        let call = stub_calls::call_at(&mut self.b, &mut self.sigs, stub, &[self.vm, size, outer]);
        self.tag(call, k);
        let ctx = self.b.inst_results(call)[0];
        self.left_if_none(ctx, None)?;
        Ok(ctx)
    }

    /// A call of a known method (`code`) or of a closure's block (`None`, `receiver` the
    /// closure, whose class guard fixed its arity): straight into the callee's body with the
    /// receiver and arguments in registers when its code has one installed, else through
    /// the stub. Both are safepoints.
    fn call_direct(
        &mut self,
        code: Option<u32>,
        receiver: tally_ir::ValueId,
        args: &[tally_ir::ValueId],
        inst: &Inst,
    ) -> Result<Value, String> {
        let (target, mut operands) = match code {
            Some(c) => {
                let callee: &tally_vm::runtime::Code = self.request.callee(c).ok_or_else(|| {
                    format!("a call of code {c}, which the request does not name")
                })?;
                let address = self.iconst(I64, callee as *const _ as i64);
                (address, vec![self.val(receiver)?])
            }
            None => {
                let closure = self.val(receiver)?;
                let address = self.closure_code(closure);
                let recv = self
                    .b
                    .ins()
                    .load(I64, flags(), closure, slot_offset(block::RECEIVER));
                (address, vec![recv])
            }
        };
        if let Some(c) = code.filter(|&c| {
            self.request
                .callee(c)
                .is_some_and(|callee| callee.primitive.is_some())
        }) {
            // A primitive has no body to call directly: the stub runs it.
            let v = self.call(
                self.layout.stubs.ir_call_method,
                Some(c),
                receiver,
                args,
                inst,
            )?;
            self.left_if_none(v, None)?;
            return Ok(v);
        }
        for &a in args {
            operands.push(self.val(a)?);
        }
        if code.is_none() {
            operands.push(self.val(receiver)?);
        }
        let direct = self
            .b
            .ins()
            .load(I64, flags(), target, self.layout.code_direct);
        let fast = self.b.create_block();
        let slow = self.b.create_block();
        let join = self.b.create_block();
        let result = self.b.append_block_param(join, I64);
        self.b.ins().brif(direct, fast, &[], slow, &[]);

        self.b.switch_to_block(fast);
        let k = self.safepoint(inst.bci);
        let sig = self.body_sig(args.len(), code.is_none());
        let zero = self.iconst(I32, 0);
        let mut call_args = vec![self.vm, zero];
        call_args.extend(operands.iter().copied());
        let call = self.b.ins().call_indirect(sig, direct, &call_args);
        self.tag(call, k);
        let v = self.b.inst_results(call)[0];
        self.b.ins().jump(join, &[v.into()]);

        self.b.switch_to_block(slow);
        let stub = match code {
            Some(_) => self.layout.stubs.ir_call_method,
            None => self.layout.stubs.ir_call_block,
        };
        let v = self.call(stub, code, receiver, args, inst)?;
        self.b.ins().jump(join, &[v.into()]);
        self.b.switch_to_block(join);
        // A method or block body never restarts its caller.
        self.left_if_none(result, None)?;
        Ok(result)
    }

    /// The prologue hook of a call of `code` done in place: while a bit of
    /// `Layout::call_hook_bits` is raised, the stub runs it with this activation's `ip` at
    /// `bci` (the call's site). Not a safepoint: the stub neither collects nor fails.
    fn call_hook(&mut self, code: u32, bci: u32) {
        if self.layout.call_hook_bits == 0 {
            return;
        }
        let raised = self.flag_bits(self.layout.call_hook_bits);
        let hook = self.b.create_block();
        let go_on = self.b.create_block();
        self.b.set_cold_block(hook);
        self.b.ins().brif(raised, hook, &[], go_on, &[]);
        self.b.switch_to_block(hook);
        // Numbered like a safepoint, though the call is none (it neither collects nor is
        // tagged): the number tells the hook which inlined activations make the call.
        self.safepoint(bci);
        let stub = stub_calls::address(&mut self.b, self.layout.stubs.ir_call_hook);
        let code = self.iconst(I32, code as i64);
        stub_calls::call_at(&mut self.b, &mut self.sigs, stub, &[self.vm, code]);
        self.b.ins().jump(go_on, &[]);
        self.b.switch_to_block(go_on);
    }

    /// Leaves when a stub answered `Value::NONE`; for a call (with its frame state after
    /// the call), to the interpreter at the frame's start when the call restarted it.
    pub(super) fn left_if_none(
        &mut self,
        v: Value,
        after: Option<tally_ir::FrameStateId>,
    ) -> Result<(), String> {
        let leave = self.leave();
        let go_on = self.b.create_block();
        let Some(state) = after else {
            self.b.ins().brif(v, go_on, &[], leave, &[]);
            self.b.switch_to_block(go_on);
            return Ok(());
        };
        let none = self.b.create_block();
        self.b.set_cold_block(none);
        self.b.ins().brif(v, go_on, &[], none, &[]);
        self.b.switch_to_block(none);
        let restart = self.exit(state, ExitKind::Restart)?;
        let flag = self
            .b
            .ins()
            .uload8(I32, flags(), self.vm, self.layout.restarted);
        self.b.ins().brif(flag, restart, &[], leave, &[]);
        self.b.switch_to_block(go_on);
        Ok(())
    }

    /// A loop's back-edge: when the yieldpoint flag has a bit raised, the `back_edge` stub
    /// serves it (a safepoint); a status other than `Continue` writes the frame at the loop
    /// head and returns it.
    fn yieldpoint(&mut self, state: tally_ir::FrameStateId, bci: u32) -> Result<(), String> {
        if self.layout.count_calls {
            let code = self.code();
            crate::counters::count_loop(&mut self.b, code, super::TIER_COLUMN);
        }
        let raised = self.flag_bits(self.layout.yieldpoint_bits);
        let serve = self.b.create_block();
        let go_on = self.b.create_block();
        self.b.set_cold_block(serve);
        self.b.ins().brif(raised, serve, &[], go_on, &[]);
        self.b.switch_to_block(serve);
        let exit = self.exit(state, ExitKind::Status)?;
        let k = self.safepoint(bci);
        let stub = self.layout.stubs.back_edge;
        let call = stub_calls::call(&mut self.b, &mut self.sigs, stub, &[self.vm]);
        self.tag(call, k);
        let status = self.b.inst_results(call)[0];
        let done = self.cmp_imm(IntCC::Equal, status, tally_vm::jit::Status::Continue as i64);
        self.b.ins().brif(done, go_on, &[], exit, &[status.into()]);
        self.b.switch_to_block(go_on);
        Ok(())
    }
}
