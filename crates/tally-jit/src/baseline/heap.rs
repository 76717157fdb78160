//! Heap and frame access: fields, stores into the heap, contexts.

use super::*;

/// A slot of a heap object: its address, and the object it lies in, which the write barrier
/// needs (it remembers objects, not slots).
#[derive(Clone, Copy)]
pub(super) struct HeapSlot {
    pub(super) object: Value,
    pub(super) address: Value,
}

impl Translator<'_, '_> {
    /// The address of field `index` (a run-time u64) of the object in stack slot `k`, or a
    /// jump to `miss` when it is not an object with that many fields.
    pub(super) fn dynamic_field_address(&mut self, k: i32, index: Value, miss: Block) -> HeapSlot {
        let recv = self.slot(k);
        let is_object = self.is_object(recv);
        let has_header = self.b.create_block();
        self.b.ins().brif(is_object, has_header, &[], miss, &[]);
        self.b.switch_to_block(has_header);
        let count = self.b.ins().uload32(Self::flags(), recv, 8);
        let has_field = self.b.ins().icmp(IntCC::UnsignedGreaterThan, count, index);
        let ok = self.b.create_block();
        self.b.ins().brif(has_field, ok, &[], miss, &[]);
        self.b.switch_to_block(ok);
        let byte = mul_imm(&mut self.b, index, 8);
        let address = self.b.ins().iadd(recv, byte);
        HeapSlot {
            object: recv,
            address: add_imm(&mut self.b, address, HEADER_BYTES as i64),
        }
    }

    /// The receiver's field `index` (its address), or a jump to `miss` when the receiver is
    /// not an object with that many fields.
    pub(super) fn field_address(&mut self, index: u16, miss: Block) -> HeapSlot {
        let recv = self.slot(0);
        let is_object = self.is_object(recv);
        let has_header = self.b.create_block();
        self.b.ins().brif(is_object, has_header, &[], miss, &[]);
        self.b.switch_to_block(has_header);
        let count = self.b.ins().uload32(Self::flags(), recv, 8);
        let has_field = cmp_imm(&mut self.b, IntCC::UnsignedGreaterThan, count, index as i64);
        let ok = self.b.create_block();
        self.b.ins().brif(has_field, ok, &[], miss, &[]);
        self.b.switch_to_block(ok);
        HeapSlot {
            object: recv,
            address: add_imm(
                &mut self.b,
                recv,
                (HEADER_BYTES + index as usize * 8) as i64,
            ),
        }
    }

    /// Stores `v` into a heap object's slot. Every store into the heap from compiled code
    /// goes through here, so under a generational plan this is the write barrier: when `v` is
    /// a reference and the object's unlog bit is set (an old object not yet remembered), the
    /// `write_barrier` stub remembers it. The stub neither allocates nor touches frames, so
    /// nothing is synced around it. Without a barrier (`Layout::unlog_table` is `None`) this
    /// is the bare store.
    pub(super) fn store_into_heap(&mut self, v: Value, slot: HeapSlot) {
        self.b.ins().store(Self::flags(), v, slot.address, 0);
        let Some(table) = self.layout.unlog_table else {
            return;
        };
        let check = self.b.create_block();
        let remember = self.b.create_block();
        let done = self.b.create_block();
        // Immediates (a non-zero tag) cannot make an old object point to a young one.
        let tag = and_imm(&mut self.b, v, 7);
        self.b.ins().brif(tag, done, &[], check, &[]);
        self.b.switch_to_block(check);
        let granule = self.b.ins().ushr_imm_u(slot.object, 6);
        let byte_address = add_imm(&mut self.b, granule, table as i64);
        let byte = self.b.ins().uload8(I64, Self::flags(), byte_address, 0);
        let shift = self.b.ins().ushr_imm_u(slot.object, 3);
        let shift = and_imm(&mut self.b, shift, 7);
        let bits = self.b.ins().ushr(byte, shift);
        let unlogged = and_imm(&mut self.b, bits, 1);
        self.b.ins().brif(unlogged, remember, &[], done, &[]);
        self.b.set_cold_block(remember);
        self.b.switch_to_block(remember);
        stub_calls::call(
            &mut self.b,
            &mut self.sigs,
            self.layout.stubs.write_barrier,
            &[self.vm, slot.object],
        );
        self.b.ins().jump(done, &[]);
        self.b.switch_to_block(done);
    }

    /// The context `level` hops out from the frame's.
    pub(super) fn context(&mut self, level: u8) -> Value {
        let mut ctx = self
            .b
            .ins()
            .load(I64, Self::flags(), self.s.frame, self.layout.frame_ctx);
        let outer = (HEADER_BYTES + context::OUTER * 8) as i32;
        for _ in 0..level {
            ctx = self.b.ins().load(I64, Self::flags(), ctx, outer);
        }
        ctx
    }

    pub(super) fn context_slot_offset(index: u16) -> i32 {
        (HEADER_BYTES + index as usize * 8) as i32
    }
}
