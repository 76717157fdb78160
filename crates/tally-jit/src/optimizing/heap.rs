//! Heap access: fields and slots, the VM's literal and global tables, class tests of a
//! value, codes and closures, and every store into a heap object with its write barrier.

use cranelift_codegen::ir::condcodes::IntCC;
use cranelift_codegen::ir::{InstBuilder, Value};
use tally_heap::object::HEADER_BYTES;
use tally_ir::{Inst, InstKind};
use tally_vm::jit::DeoptReason;
use tally_vm::objects::{block, context};

use super::emit::Emitter;
use super::insts::state_of;
use super::lowerer::Lowerer;
use super::{flags, I32, I64, I8};

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

impl<'f> Lowerer<'_, 'f> {
    /// Lowers an instruction that reads or writes the heap or the VM's tables (its result, if any).
    pub(super) fn heap_inst(&mut self, inst: &Inst) -> Result<Option<Value>, String> {
        Ok(match &inst.kind {
            InstKind::Literal(n) => Some(self.table_entry(self.layout.calls.literals_base, *n)?),
            InstKind::Global(slot) => {
                // A global may be assigned: read where used, as a literal is.
                let v = self.table_entry(self.layout.calls.globals_base, *slot)?;
                // Undefined: the interpreter sends `unknownGlobal:`.
                let defined = self.cmp_imm(IntCC::NotEqual, v, 0);
                self.check(defined, state_of(inst)?)?;
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
            InstKind::ArrayAt { array, index } => {
                let (a, i) = (self.val(*array)?, self.val(*index)?);
                let address = self.element_address(a, i, state_of(inst)?)?;
                Some(self.b.ins().load(I64, flags(), address, 0))
            }
            InstKind::ArrayAtPut {
                array,
                index,
                value,
            } => {
                let (a, i, v) = (self.val(*array)?, self.val(*index)?, self.val(*value)?);
                let address = self.element_address(a, i, state_of(inst)?)?;
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
            InstKind::StringLength(s) => {
                let s = self.val(*s)?;
                // Another string's characters are counted by the interpreter, and the
                // site's next version sends `length`.
                let one_byte = self.is_ascii_string(s);
                self.guard(one_byte, state_of(inst)?, DeoptReason::NotAscii)?;
                Some(self.byte_length(s))
            }
            InstKind::StringEqual { lhs, rhs, symbol } => {
                let (a, b) = (self.val(*lhs)?, self.val(*rhs)?);
                Some(self.text_equal(a, b, *symbol))
            }
            other => return Err(format!("{other:?} is no heap access")),
        })
    }

    /// Entry `index` of the VM's literal or global table, whose first entry's address is at
    /// `base` in the VM: read where used, since the table may have grown (its base moved)
    /// and the collector may have moved the object since the last read.
    pub(super) fn table_entry(&mut self, base: i32, index: u32) -> Result<Value, String> {
        let first = self.b.ins().load(I64, flags(), self.act.vm, base);
        let offset = i32::try_from(8 * u64::from(index))
            .map_err(|_| format!("table entry {index} beyond the reach of an offset"))?;
        Ok(self.b.ins().load(I64, flags(), first, offset))
    }

    /// The shared emitters ([`Emitter`]) writing into this body.
    pub(super) fn emit(&mut self) -> Emitter<'_, 'f> {
        Emitter {
            b: &mut self.b,
            layout: self.layout,
            vm: self.act.vm,
            stubs: &mut self.sigs.stubs,
        }
    }

    /// Whether `x` is a heap object (tag 0, not `Value::NONE`).
    pub(super) fn is_object(&mut self, x: Value) -> Value {
        self.emit().is_object(x)
    }

    /// The address of the `Code` of id `id` (an I64).
    pub(super) fn code_address(&mut self, id: Value) -> Value {
        self.emit().code_address(id)
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
        if self.is_heap_class(class) {
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

    /// Whether every instance of `class` is a heap object whose header names it (no
    /// immediate is one).
    pub(super) fn is_heap_class(&self, class: u32) -> bool {
        let calls = &self.layout.calls;
        class != calls.integer_class
            && class != calls.symbol_class
            && class != calls.double_class
            && !calls.immediate_classes.iter().any(|&(c, _)| c == class)
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

    /// The address of element `index` (a small integer, 1-based) of Array `array`; an index
    /// out of bounds hands the frame to the interpreter in `state` (which raises the error).
    pub(super) fn element_address(
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
        self.emit().slot_address(object, index)
    }

    /// The yieldpoint flag's byte masked by `bits` (an I32): nonzero when one of them is up.
    pub(super) fn flag_bits(&mut self, bits: u8) -> Value {
        self.emit().flag_bits(bits)
    }

    /// Stores `v` into `object` at `offset` (or at `address`, inside it) with the write
    /// barrier ([`Emitter::store_into`]).
    pub(super) fn store_into(
        &mut self,
        object: Value,
        offset: i32,
        address: Option<Value>,
        v: Value,
    ) {
        self.emit().store_into(object, offset, address, v);
    }
}
