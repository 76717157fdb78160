//! Heap and frame access: array elements, fields, stores into the heap, contexts.

use super::*;

impl Translator<'_, '_> {
    /// The address of element `index` (1-based, in the slot above the receiver in slot `k`)
    /// of an instance of Array itself (no named fields), or a jump to `miss` when the index
    /// is not a small integer within its bounds.
    pub(super) fn element_address(&mut self, k: i32, miss: Block) -> Value {
        let array = self.slot(k);
        let index = self.slot(k + 1);
        let is_int = and_imm(&mut self.b, index, 1);
        let int = self.b.create_block();
        self.b.ins().brif(is_int, int, &[], miss, &[]);
        self.b.switch_to_block(int);
        let one = self.b.ins().iconst(I64, 1);
        let n = self.b.ins().sshr(index, one);
        let zero_based = add_imm(&mut self.b, n, -1);
        let len = self.b.ins().uload32(Self::flags(), array, 8);
        let within = self.b.ins().icmp(IntCC::UnsignedLessThan, zero_based, len);
        let ok = self.b.create_block();
        self.b.ins().brif(within, ok, &[], miss, &[]);
        self.b.switch_to_block(ok);
        let byte = mul_imm(&mut self.b, zero_based, 8);
        let address = self.b.ins().iadd(array, byte);
        add_imm(&mut self.b, address, HEADER_BYTES as i64)
    }

    /// The address of field `index` (a run-time u64) of the object in stack slot `k`, or a
    /// jump to `miss` when it is not an object with that many fields.
    pub(super) fn dynamic_field_address(&mut self, k: i32, index: Value, miss: Block) -> Value {
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
        add_imm(&mut self.b, address, HEADER_BYTES as i64)
    }

    /// The receiver's field `index` (its address), or a jump to `miss` when the receiver is
    /// not an object with that many fields.
    pub(super) fn field_address(&mut self, index: u16, miss: Block) -> Value {
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
        add_imm(
            &mut self.b,
            recv,
            (HEADER_BYTES + index as usize * 8) as i64,
        )
    }

    /// Stores `v` into a heap object's slot at `address`. Every store into the heap from
    /// compiled code goes through here: the place for a write barrier when the collector
    /// needs one (SemiSpace does not).
    pub(super) fn store_into_heap(&mut self, v: Value, address: Value) {
        self.b.ins().store(Self::flags(), v, address, 0);
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
