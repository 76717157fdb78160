//! Allocation in place: the heap's fast path (`tally_heap::InlineAllocation`) done by the
//! compiled code itself for plain objects of a known shape and Arrays, so that an object that
//! fits in the bump pointer's buffer costs no call, no safepoint and no spill of the values
//! live across one. What does not fit (the buffer is full, the object belongs in the
//! large-object space, the allocation alarm is due) takes the allocation stub, as before.

use cranelift_codegen::ir::condcodes::IntCC;
use cranelift_codegen::ir::{Block, InstBuilder, Value};
use tally_heap::object::{header_word0, header_word1, HASH_BITS, HASH_SHIFT, HEADER_BYTES};
use tally_vm::jit::AllocLayout;

use super::heap::slot_offset;
use tally_ir::{Inst, InstKind};

use super::lowerer::Lowerer;
use super::{flags, I32, I64, NIL};
use crate::stub_calls;

/// Plain objects with more fields than this fill them in a loop instead of one store each.
const UNROLLED_FIELDS: u16 = 16;

/// The object an in-place allocation asks for.
pub(super) enum Shape {
    /// A plain object of class `class` with `fields` fields.
    Plain { class: u32, fields: u16 },
    /// An Array (class `class`, no named fields) of as many elements as the small integer
    /// `length` says; anything else (a negative length, no small integer) takes the stub,
    /// which fails as the primitive does.
    Array { class: u32, length: Value },
}

impl Lowerer<'_, '_> {
    /// Lowers an allocation of an object (its result).
    pub(super) fn alloc_inst(&mut self, inst: &Inst) -> Result<Option<Value>, String> {
        Ok(match &inst.kind {
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
            other => return Err(format!("{other:?} is no allocation")),
        })
    }

    /// Starts an allocation of `shape` in place: answers the new object, every slot nil, in
    /// the current block, or `None` when the layout or the shape rules it out (the caller
    /// then calls the stub alone). `slow` is where the current block goes when the object
    /// does not fit; the caller fills it.
    pub(super) fn alloc_in_place(&mut self, shape: &Shape, slow: Block) -> Option<Value> {
        let a = self.layout.alloc?;
        let (size, word0, word1, slots) = match *shape {
            Shape::Plain { class, fields } => {
                let bytes = HEADER_BYTES + 8 * usize::from(fields);
                if bytes > a.max_object_bytes {
                    return None;
                }
                let size = self.iconst(I64, bytes as i64);
                let word1 = self.iconst(I64, header_word1(usize::from(fields), 0) as i64);
                let word0 = header_word0(class, a.plain_kind, 0);
                (size, word0, word1, Slots::Fixed(fields))
            }
            Shape::Array { .. } if !a.array_is_bare => return None,
            Shape::Array { class, length } => {
                // A small integer (tag bit 1) from 0 up to what fits below the large-object
                // threshold.
                let most = ((a.max_object_bytes - HEADER_BYTES) / 8) as i64;
                let tagged_most = (most << 1) | 1;
                let tag = self.and_imm(length, 1);
                let is_int = self.cmp_imm(IntCC::NotEqual, tag, 0);
                let in_range = self.cmp_imm(IntCC::UnsignedLessThanOrEqual, length, tagged_most);
                let ok = self.b.ins().band(is_int, in_range);
                let go_on = self.b.create_block();
                self.b.ins().brif(ok, go_on, &[], slow, &[]);
                self.b.switch_to_block(go_on);
                let n = self.b.ins().ushr_imm_u(length, 1);
                let body = self.b.ins().ishl_imm_u(n, 3);
                let size = self.add_imm(body, HEADER_BYTES as i64);
                // Word 1 of `header_word1(n, 0)`: the slot count in the low half.
                let word0 = header_word0(class, a.array_kind, 0);
                (size, word0, n, Slots::Counted(n))
            }
        };
        let made = self.bump(&a, size, word0, word1, slow);
        match slots {
            Slots::Fixed(n) if n <= UNROLLED_FIELDS => {
                let nil = self.iconst(I64, NIL);
                for k in 0..usize::from(n) {
                    self.b.ins().store(flags(), nil, made, slot_offset(k));
                }
            }
            Slots::Fixed(n) => {
                let n = self.iconst(I64, i64::from(n));
                self.fill_nil(made, n);
            }
            Slots::Counted(n) => self.fill_nil(made, n),
        }
        Some(made)
    }

    /// Takes `size` bytes at the bump pointer when they fit below its limit and the
    /// allocation clock stays below the alarm (else jumps to `slow`), counts them, and writes
    /// the header: `word0` with the next identity hash, `word1`.
    pub(super) fn bump(
        &mut self,
        a: &AllocLayout,
        size: Value,
        word0: u64,
        word1: Value,
        slow: Block,
    ) -> Value {
        let vm = self.act.vm;
        let bump = self.iconst(I64, a.bump_pointer as i64);
        let cursor = self.b.ins().load(I64, flags(), bump, 0);
        let limit = self.b.ins().load(I64, flags(), bump, 8);
        let end = self.b.ins().iadd(cursor, size);
        let fits = self
            .b
            .ins()
            .icmp(IntCC::UnsignedLessThanOrEqual, end, limit);
        let clock = self.b.ins().load(I64, flags(), vm, a.allocated_bytes);
        let clock = self.b.ins().iadd(clock, size);
        let alarm = self.b.ins().load(I64, flags(), vm, a.alarm_at);
        let quiet = self.b.ins().icmp(IntCC::UnsignedLessThan, clock, alarm);
        let ok = self.b.ins().band(fits, quiet);
        let fast = self.b.create_block();
        self.b.ins().brif(ok, fast, &[], slow, &[]);
        self.b.switch_to_block(fast);
        self.b.ins().store(flags(), end, bump, 0);
        self.b.ins().store(flags(), clock, vm, a.allocated_bytes);
        let objects = self.b.ins().load(I64, flags(), vm, a.allocated_objects);
        let objects = self.add_imm(objects, 1);
        self.b
            .ins()
            .store(flags(), objects, vm, a.allocated_objects);
        // The heap's xorshift32 step (`HeapCore::next_hash`), its top bits the hash.
        let x = self.b.ins().load(I32, flags(), vm, a.hash_state);
        let t = self.b.ins().ishl_imm_u(x, 13);
        let x = self.b.ins().bxor(x, t);
        let t = self.b.ins().ushr_imm_u(x, 17);
        let x = self.b.ins().bxor(x, t);
        let t = self.b.ins().ishl_imm_u(x, 5);
        let x = self.b.ins().bxor(x, t);
        self.b.ins().store(flags(), x, vm, a.hash_state);
        let hash = self.b.ins().ushr_imm_u(x, i64::from(32 - HASH_BITS));
        let hash = self.b.ins().uextend(I64, hash);
        let hash = self.b.ins().ishl_imm_u(hash, i64::from(HASH_SHIFT));
        let word0 = self.b.ins().bor_imm_u(hash, word0 as i64);
        self.b.ins().store(flags(), word0, cursor, 0);
        self.b.ins().store(flags(), word1, cursor, 8);
        cursor
    }

    /// Stores nil into the first `n` slots of `object` (a loop: `n` may be large, or 0).
    pub(super) fn fill_nil(&mut self, object: Value, n: Value) {
        let head = self.b.create_block();
        let body = self.b.create_block();
        let done = self.b.create_block();
        let first = self.add_imm(object, i64::from(slot_offset(0)));
        let bytes = self.b.ins().ishl_imm_u(n, 3);
        let end = self.b.ins().iadd(first, bytes);
        self.b.append_block_param(head, I64);
        self.b.ins().jump(head, &[first.into()]);
        self.b.switch_to_block(head);
        let at = self.b.block_params(head)[0];
        let more = self.b.ins().icmp(IntCC::UnsignedLessThan, at, end);
        self.b.ins().brif(more, body, &[], done, &[]);
        self.b.switch_to_block(body);
        let nil = self.iconst(I64, NIL);
        self.b.ins().store(flags(), nil, at, 0);
        let next = self.add_imm(at, 8);
        self.b.ins().jump(head, &[next.into()]);
        self.b.switch_to_block(done);
    }
}

/// How many slots an in-place allocation fills with nil.
enum Slots {
    Fixed(u16),
    Counted(Value),
}

impl Lowerer<'_, '_> {
    /// `Class>>new` (or, `indexable`, `Array class>>new:` of `args[0]` elements) of the
    /// class `recv` (its class, a metaclass, found the primitive): the allocation without
    /// the send, through its stub (a safepoint; `Value::NONE` is an error, which leaves as
    /// the send's would).
    pub(super) fn allocate(
        &mut self,
        indexable: bool,
        recv: Value,
        args: &[tally_ir::ValueId],
        inst: &Inst,
    ) -> Result<Value, String> {
        let k = self.safepoint(inst.bci);
        let call = if indexable {
            let n = self.val(args[0])?;
            let stub = self.layout.stubs.ir_new_indexable;
            stub_calls::call(
                &mut self.b,
                &mut self.sigs.stubs,
                stub,
                &[self.act.vm, recv, n],
            )
        } else {
            let stub = self.layout.stubs.ir_new_instance;
            stub_calls::call(
                &mut self.b,
                &mut self.sigs.stubs,
                stub,
                &[self.act.vm, recv],
            )
        };
        self.tag(call, k);
        Ok(self.b.inst_results(call)[0])
    }

    /// [`Lowerer::allocate`] with the allocation done in place first where `shape` allows it
    /// (`alloc_in_place`); the stub is the cold way. Leaves when the stub fails.
    pub(super) fn allocate_shaped(
        &mut self,
        indexable: bool,
        recv: Value,
        args: &[tally_ir::ValueId],
        shape: &super::alloc::Shape,
        inst: &Inst,
    ) -> Result<Value, String> {
        let slow = self.b.create_block();
        let join = self.b.create_block();
        let made = self.b.append_block_param(join, I64);
        match self.alloc_in_place(shape, slow) {
            Some(fast) => {
                self.b.ins().jump(join, &[fast.into()]);
                self.b.switch_to_block(slow);
                self.b.set_cold_block(slow);
            }
            None => {
                self.b.ins().jump(slow, &[]);
                self.b.switch_to_block(slow);
            }
        }
        let v = self.allocate(indexable, recv, args, inst)?;
        self.left_if_none(v, None)?;
        self.b.ins().jump(join, &[v.into()]);
        self.b.switch_to_block(join);
        Ok(made)
    }

    /// A new instance of class object `class` through the allocation stub (a safepoint at
    /// `bci`; an allocation that fails leaves, its error parked).
    pub(super) fn new_instance(&mut self, class: Value, bci: u32) -> Result<Value, String> {
        let stub = self.layout.stubs.ir_new_instance;
        let made = self.safepoint_call(stub, &[self.act.vm, class], bci);
        self.left_if_none(made, None)?;
        Ok(made)
    }
}
