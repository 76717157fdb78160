//! What a body's lowering and the shared send probes ([`super::probe`]) both write: a value's
//! class id, a send site's inline cache looked up, a trivial method done in place, and the
//! heap accesses these need (a store with its write barrier). Each writes into the block
//! being built of whichever function holds the builder.

use cranelift_codegen::ir::condcodes::IntCC;
use cranelift_codegen::ir::{Block, InstBuilder, Value};
use cranelift_frontend::FunctionBuilder;
use tally_heap::object::HEADER_BYTES;
use tally_vm::jit::Layout;
use tally_vm::runtime::{TRIVIAL_CONSTANT, TRIVIAL_GETTER, TRIVIAL_RECEIVER, TRIVIAL_SETTER};

use super::heap::{SYMBOL_TAG, UNCACHED_CLASS};
use super::{flags, I32, I64};
use crate::numbers;
use crate::stub_calls::{self, StubSignatures};

/// The builder of the function being written, with what its code reads the VM through.
pub(super) struct Emitter<'s, 'f> {
    pub(super) b: &'s mut FunctionBuilder<'f>,
    pub(super) layout: &'s Layout,
    /// The `*mut Vm` the function was given.
    pub(super) vm: Value,
    pub(super) stubs: &'s mut StubSignatures,
}

impl Emitter<'_, '_> {
    /// Whether `x` is a heap object (tag 0, not `Value::NONE`).
    pub(super) fn is_object(&mut self, x: Value) -> Value {
        let tag = numbers::and_imm(self.b, x, 7);
        let is_ref = numbers::cmp_imm(self.b, IntCC::Equal, tag, 0);
        let not_none = numbers::cmp_imm(self.b, IntCC::NotEqual, x, 0);
        self.b.ins().band(is_ref, not_none)
    }

    /// The address of the `Code` of id `id` (an I64), from the VM's table of codes, which
    /// grows as classes load (so read each time).
    pub(super) fn code_address(&mut self, id: Value) -> Value {
        let codes = self
            .b
            .ins()
            .load(I64, flags(), self.vm, self.layout.calls.codes_base);
        let eight = self.b.ins().iconst(I64, 8);
        let offset = self.b.ins().imul(id, eight);
        let entry = self.b.ins().iadd(codes, offset);
        self.b.ins().load(I64, flags(), entry, 0)
    }

    /// The address of slot `index` (an I64, from 0) of `object`.
    pub(super) fn slot_address(&mut self, object: Value, index: Value) -> Value {
        let eight = self.b.ins().iconst(I64, 8);
        let byte = self.b.ins().imul(index, eight);
        let address = self.b.ins().iadd(object, byte);
        numbers::add_imm(self.b, address, HEADER_BYTES as i64)
    }

    /// The yieldpoint flag's byte masked by `bits` (an I32): nonzero when one of them is up.
    pub(super) fn flag_bits(&mut self, bits: u8) -> Value {
        let address = self.b.ins().iconst(I64, self.layout.yieldpoint_flag as i64);
        let flag = self.b.ins().uload8(I32, flags(), address, 0);
        if bits == u8::MAX {
            return flag;
        }
        numbers::and_imm(self.b, flag, i64::from(bits))
    }

    /// Goes on in a new block while the yieldpoint flag is down, else to `slow`.
    pub(super) fn unless_flag_raised(&mut self, slow: Block) {
        let flag = self.flag_bits(u8::MAX);
        let down = self.b.create_block();
        self.b.ins().brif(flag, slow, &[], down, &[]);
        self.b.switch_to_block(down);
    }

    /// Stores `v` into `object` at `offset` (or at `address`, inside it) with the write
    /// barrier of the generational plans: a reference stored into an old object not yet
    /// remembered calls `write_barrier` (which neither allocates nor touches frames).
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
        if constant(self.b, v).is_some_and(|c| c & 7 != 0) {
            return;
        }
        let check = self.b.create_block();
        let remember = self.b.create_block();
        let done = self.b.create_block();
        let tag = numbers::and_imm(self.b, v, 7);
        self.b.ins().brif(tag, done, &[], check, &[]);
        self.b.switch_to_block(check);
        let granule = self.b.ins().ushr_imm_u(object, 6);
        let byte_address = numbers::add_imm(self.b, granule, table as i64);
        let byte = self.b.ins().uload8(I64, flags(), byte_address, 0);
        let shift = self.b.ins().ushr_imm_u(object, 3);
        let shift = numbers::and_imm(self.b, shift, 7);
        let bits = self.b.ins().ushr(byte, shift);
        let unlogged = numbers::and_imm(self.b, bits, 1);
        self.b.ins().brif(unlogged, remember, &[], done, &[]);
        self.b.set_cold_block(remember);
        self.b.switch_to_block(remember);
        let stub = self.layout.stubs.write_barrier;
        stub_calls::call(self.b, self.stubs, stub, &[self.vm, object]);
        self.b.ins().jump(done, &[]);
        self.b.switch_to_block(done);
    }

    /// The class id of `recv` (an I32), in a new block the code goes on in: small integers
    /// by their tag, objects by their header, nil, true, false, symbols and doubles by their
    /// words and tags; any other immediate goes to `slow`.
    pub(super) fn receiver_class(&mut self, recv: Value, slow: Block) -> Value {
        let calls = &self.layout.calls;
        let classed = self.b.create_block();
        self.b.append_block_param(classed, I32);
        let not_int = self.b.create_block();
        let int_class = self.b.ins().iconst(I32, calls.integer_class as i64);
        let bit = numbers::and_imm(self.b, recv, 1);
        self.b
            .ins()
            .brif(bit, classed, &[int_class.into()], not_int, &[]);
        self.b.switch_to_block(not_int);
        let is_object = self.is_object(recv);
        let object = self.b.create_block();
        let immediate = self.b.create_block();
        self.b.ins().brif(is_object, object, &[], immediate, &[]);
        self.b.switch_to_block(object);
        let header_class = self.b.ins().load(I32, flags(), recv, 4);
        self.b.ins().jump(classed, &[header_class.into()]);
        self.b.switch_to_block(immediate);
        let calls = &self.layout.calls;
        let mut class = self.b.ins().iconst(I32, UNCACHED_CLASS);
        let tag = numbers::and_imm(self.b, recv, 7);
        let is_symbol = numbers::cmp_imm(self.b, IntCC::Equal, tag, SYMBOL_TAG);
        let symbol = self.b.ins().iconst(I32, calls.symbol_class as i64);
        class = self.b.ins().select(is_symbol, symbol, class);
        let is_double = numbers::cmp_imm(self.b, IntCC::Equal, tag, numbers::FLOAT_TAG);
        let double = self.b.ins().iconst(I32, calls.double_class as i64);
        class = self.b.ins().select(is_double, double, class);
        for &(c, word) in &calls.immediate_classes {
            let is = numbers::cmp_imm(self.b, IntCC::Equal, recv, word as i64);
            let this = self.b.ins().iconst(I32, c as i64);
            class = self.b.ins().select(is, this, class);
        }
        let known = numbers::cmp_imm(self.b, IntCC::NotEqual, class, UNCACHED_CLASS);
        self.b
            .ins()
            .brif(known, classed, &[class.into()], slow, &[]);
        self.b.switch_to_block(classed);
        self.b.block_params(classed)[0]
    }

    /// The code id (an I64) send site `site`'s inline cache holds for receivers of `class`,
    /// in a new block the code goes on in; a miss goes to `slow`. `site` is an I64.
    pub(super) fn cached_code(&mut self, site: Value, class: Value, slow: Block) -> Value {
        let calls = &self.layout.calls;
        let sites = self.b.ins().load(I64, flags(), self.vm, calls.sites_base);
        let size = self.b.ins().iconst(I64, calls.site_size as i64);
        let offset = self.b.ins().imul(site, size);
        let entry = self.b.ins().iadd(sites, offset);
        let found = self.b.create_block();
        self.b.append_block_param(found, I32);
        let second = self.b.create_block();
        let c1 = self.b.ins().load(I32, flags(), entry, calls.site_class1);
        let code1 = self.b.ins().load(I32, flags(), entry, calls.site_code1);
        let hit1 = self.b.ins().icmp(IntCC::Equal, class, c1);
        self.b.ins().brif(hit1, found, &[code1.into()], second, &[]);
        self.b.switch_to_block(second);
        let c2 = self.b.ins().load(I32, flags(), entry, calls.site_class2);
        let code2 = self.b.ins().load(I32, flags(), entry, calls.site_code2);
        let hit2 = self.b.ins().icmp(IntCC::Equal, class, c2);
        self.b.ins().brif(hit2, found, &[code2.into()], slow, &[]);
        self.b.switch_to_block(found);
        let code = self.b.block_params(found)[0];
        self.b.ins().uextend(I64, code)
    }

    /// A trivial method (getter, setter, constant, `^self`: `Code`'s trivial kind) at `code`
    /// (an address) done in place, as the interpreter does when no profiler hook is due
    /// (the caller tests the flag first): its value goes to `join`, anything else to `slow`.
    /// `keyword` says whether the selector ends in a colon: setters are one-keyword (`x:`),
    /// never binary.
    pub(super) fn trivial_in_place(
        &mut self,
        keyword: bool,
        code: Value,
        recv: Value,
        args: &[Value],
        join: Block,
        slow: Block,
    ) {
        let calls = &self.layout.calls;
        let kind = self
            .b
            .ins()
            .uload8(I32, flags(), code, calls.code_trivial_kind);
        let operand = self
            .b
            .ins()
            .load(I64, flags(), code, calls.code_trivial_operand);
        let cases: &[u8] = match args.len() {
            0 => &[TRIVIAL_GETTER, TRIVIAL_CONSTANT, TRIVIAL_RECEIVER],
            1 if keyword => &[TRIVIAL_SETTER, TRIVIAL_CONSTANT, TRIVIAL_RECEIVER],
            _ => &[TRIVIAL_CONSTANT, TRIVIAL_RECEIVER],
        };
        for &want in cases {
            let this = self.b.create_block();
            let other = self.b.create_block();
            let is = numbers::cmp_imm(self.b, IntCC::Equal, kind, want as i64);
            self.b.ins().brif(is, this, &[], other, &[]);
            self.b.switch_to_block(this);
            let v = match want {
                TRIVIAL_GETTER | TRIVIAL_SETTER => {
                    // An object with that many fields (the cache's class says it is one,
                    // but the field count is checked as the interpreter's primitive does).
                    let is_object = self.is_object(recv);
                    let object = self.b.create_block();
                    self.b.ins().brif(is_object, object, &[], slow, &[]);
                    self.b.switch_to_block(object);
                    let count = self.b.ins().uload32(flags(), recv, 8);
                    let has = self
                        .b
                        .ins()
                        .icmp(IntCC::UnsignedGreaterThan, count, operand);
                    let ok = self.b.create_block();
                    self.b.ins().brif(has, ok, &[], slow, &[]);
                    self.b.switch_to_block(ok);
                    let address = self.slot_address(recv, operand);
                    if want == TRIVIAL_GETTER {
                        self.b.ins().load(I64, flags(), address, 0)
                    } else {
                        self.store_into(recv, 0, Some(address), args[0]);
                        recv
                    }
                }
                TRIVIAL_CONSTANT => operand,
                _ => recv,
            };
            self.b.ins().jump(join, &[v.into()]);
            self.b.switch_to_block(other);
        }
        self.b.ins().jump(slow, &[]);
    }
}

/// The constant Cranelift value `v` is, if it is an `iconst`.
pub(super) fn constant(b: &FunctionBuilder, v: Value) -> Option<i64> {
    let inst = b.func.dfg.value_def(v).inst()?;
    match b.func.dfg.insts[inst] {
        cranelift_codegen::ir::InstructionData::UnaryImm {
            opcode: cranelift_codegen::ir::Opcode::Iconst,
            imm,
        } => Some(imm.bits()),
        _ => None,
    }
}
