//! The sends whose receiver class a compile did not know: the inline cache probed at run
//! time, and what compiled code does there without the send stub (arithmetic on numbers,
//! the primitives of `Code::intrinsic`, trivial methods, `isNil`/`notNil`).

use cranelift_codegen::ir::condcodes::IntCC;
use cranelift_codegen::ir::{InstBuilder, Value};
use tally_ir::Inst;
use tally_vm::bytecode::Op;
use tally_vm::jit::Intrinsic;
use tally_vm::objects::block;
use tally_vm::runtime::IntOp as VmIntOp;

use super::entry::Caller;
use super::heap::slot_offset;
use super::lowerer::Lowerer;
use super::probe::ProbeShape;
use super::{flags, I32, I64, I8};
use crate::stub_calls;

impl Lowerer<'_, '_> {
    /// A send whose receiver class the compile did not know: the site's inline cache is
    /// probed at run time (a small integer's class or a heap object's header against its two
    /// entries), and a hit on a method with a direct entry is called straight; anything else
    /// goes through the send stub, which fills the cache. Both are safepoints. A cold site
    /// (`SiteFacts::cold`) gets the stub call alone. Arithmetic and comparisons on numbers
    /// are done here; the rest of the probe is a call of its shape's shared probe
    /// ([`super::probe`]), except where the selector may find an intrinsic (done inline,
    /// each its own way) or the send is wider than the probes: there it is written here.
    pub(super) fn send_through_cache(
        &mut self,
        site: u32,
        receiver: tally_ir::ValueId,
        args: &[tally_ir::ValueId],
        inst: &Inst,
    ) -> Result<Value, String> {
        if let Some(op @ (Op::SendIsNil(_) | Op::SendNotNil(_))) =
            self.code().ops.get(inst.bci as usize).copied()
        {
            return self.nil_test(matches!(op, Op::SendIsNil(_)), site, receiver, inst);
        }
        if self.request.site(site).is_ok_and(|f| f.cold) {
            // A send that never ran while the code around it did: the stub alone, no fast
            // path to spend code (and compile time) on. A speculation that it stays cold:
            // the version is compiled again when the stub's sends pile up there
            // (`Vm::stub_sends_piled_up`).
            self.record.speculated.insert(site);
            return self.call(self.layout.stubs.ir_send, Some(site), receiver, args, inst);
        }
        let recv = self.val(receiver)?;
        let selector = self.request.selector(site).unwrap_or("").to_string();
        let selector = selector.trim_start_matches('#');
        let intrinsics = tally_vm::jit::intrinsics_of_selector(selector);
        let probe = ProbeShape::of(selector, args.len())
            .filter(|_| intrinsics.is_empty())
            .and_then(|shape| self.probes.address(shape));
        let join = self.b.create_block();
        let result = self.b.append_block_param(join, I64);
        if let [arg] = args {
            let arg = self.val(*arg)?;
            self.numbers_in_place(site, recv, arg, join)?;
        }
        if let Some(probe) = probe {
            // The shape's shared probe does the rest.
            let mut operands = vec![self.act.vm, self.iconst(I32, i64::from(site)), recv];
            for &a in args {
                operands.push(self.val(a)?);
            }
            let k = self.safepoint(inst.bci);
            let sig = self.probe_sig(args.len());
            let address = self.iconst(I64, probe as i64);
            let call = self.b.ins().call_indirect(sig, address, &operands);
            self.tag(call, k);
            let v = self.b.inst_results(call)[0];
            self.b.ins().jump(join, &[v.into()]);
            self.b.switch_to_block(join);
            return Ok(result);
        }
        // A selector that may find an intrinsic (which compiled code does inline, each in
        // its own way), or a send wider than the probes: the probe's work written here.
        let slow = self.b.create_block();
        let mut e = self.emit();
        let class = e.receiver_class(recv, slow);
        let site_index = e.b.ins().iconst(I64, i64::from(site));
        let code = e.cached_code(site_index, class, slow);
        let target = self.code_address(code);
        let direct = self
            .b
            .ins()
            .load(I64, flags(), target, self.layout.code_direct);
        let fast = self.b.create_block();
        let frameless = self.b.create_block();
        self.b.ins().brif(direct, fast, &[], frameless, &[]);

        // A primitive compiled code does itself (a block's `value…`, Array's `at:`,
        // `at:put:`, `length`), or a trivial method (getter, setter, constant, `^self`) done
        // in place, as the interpreter does when no profiler hook is due (a raised flag
        // takes the stub, which runs the hook: tested here while the profiler counts calls,
        // else for trivial methods alone, which the interpreter runs in place only then).
        self.b.switch_to_block(frameless);
        if self.layout.call_hook_bits != 0 {
            self.unless_flag_raised(slow);
        }
        let trivial = self.b.create_block();
        self.intrinsic(
            selector, target, class, recv, args, inst, join, slow, trivial,
        )?;
        self.b.switch_to_block(trivial);
        if self.layout.call_hook_bits == 0 {
            self.unless_flag_raised(slow);
        }
        let operands = args
            .iter()
            .map(|&a| self.val(a))
            .collect::<Result<Vec<_>, _>>()?;
        let keyword = selector.ends_with(':');
        self.emit()
            .trivial_in_place(keyword, target, recv, &operands, join, slow);

        self.b.switch_to_block(fast);
        let k = self.safepoint(inst.bci);
        let sig = self.body_sig(args.len(), false);
        let direct_call = self.iconst(I32, Caller::Direct.code());
        let mut call_args = vec![self.act.vm, direct_call, recv];
        for &a in args {
            call_args.push(self.val(a)?);
        }
        let call = self.b.ins().call_indirect(sig, direct, &call_args);
        self.tag(call, k);
        let v = self.b.inst_results(call)[0];
        self.b.ins().jump(join, &[v.into()]);

        self.b.switch_to_block(slow);
        self.b.set_cold_block(slow);
        let v = self.call(self.layout.stubs.ir_send, Some(site), receiver, args, inst)?;
        self.b.ins().jump(join, &[v.into()]);
        self.b.switch_to_block(join);
        Ok(result)
    }

    /// `isNil` (`is_nil`) or `notNil`: a comparison with nil while the core library's
    /// definitions stand (as the interpreter answers it), else the send stub.
    pub(super) fn nil_test(
        &mut self,
        is_nil: bool,
        site: u32,
        receiver: tally_ir::ValueId,
        inst: &Inst,
    ) -> Result<Value, String> {
        let recv = self.val(receiver)?;
        let fast = self.b.create_block();
        let slow = self.b.create_block();
        let join = self.b.create_block();
        let vm = self.act.vm;
        crate::numbers::branch_on_nil_tests(&mut self.b, vm, &self.layout.calls, fast, slow);
        let result = self.b.append_block_param(join, I64);
        self.b.switch_to_block(fast);
        let answer = crate::numbers::nil_test(&mut self.b, is_nil, recv);
        self.b.ins().jump(join, &[answer.into()]);
        self.b.switch_to_block(slow);
        let v = self.call(self.layout.stubs.ir_send, Some(site), receiver, &[], inst)?;
        self.b.ins().jump(join, &[v.into()]);
        self.b.switch_to_block(join);
        Ok(result)
    }

    /// A binary arithmetic or comparison send answered in place when its operands are small
    /// integers or immediate doubles, and `&&`/`||` of two Booleans (as the interpreter
    /// answers them, whatever the site's cache holds): the answer goes to `join`; anything else (an overflow, a result that
    /// needs a boxed double, other receivers) goes on in the block this leaves current.
    pub(super) fn numbers_in_place(
        &mut self,
        site: u32,
        recv: Value,
        arg: Value,
        join: cranelift_codegen::ir::Block,
    ) -> Result<(), String> {
        use crate::numbers;
        let op = self.request.site(site).map_err(|e| e.to_string())?.int_op;
        if matches!(op, VmIntOp::And | VmIntOp::Or) {
            let other = self.b.create_block();
            let v = numbers::bool_op(&mut self.b, op, recv, arg, other).expect("&& or ||");
            self.b.ins().jump(join, &[v.into()]);
            self.b.switch_to_block(other);
            return Ok(());
        }
        let int_form = numbers::has_int_form(op);
        if !int_form && !numbers::has_float_form(op) {
            return Ok(());
        }
        let other = self.b.create_block();
        let not_ints = self.b.create_block();
        if int_form {
            let both = self.b.ins().band(recv, arg);
            let ints = self.and_imm(both, 1);
            let go = self.b.create_block();
            self.b.ins().brif(ints, go, &[], not_ints, &[]);
            self.b.switch_to_block(go);
            let v = numbers::int_arith(&mut self.b, op, recv, arg, other)
                .expect("an operation with an int form");
            self.b.ins().jump(join, &[v.into()]);
        } else {
            self.b.ins().jump(not_ints, &[]);
        }
        self.b.switch_to_block(not_ints);
        if matches!(op, VmIntOp::Equal | VmIntOp::NotEqual) {
            // Two symbols: the interpreter answers them without a send (`IntOp::answer`),
            // so their site's cache stays empty and only this keeps them off the stub.
            let symbol = self.layout.calls.symbol_class;
            let recv_symbol = self.class_is(recv, symbol);
            let arg_symbol = self.class_is(arg, symbol);
            let symbols = self.b.ins().band(recv_symbol, arg_symbol);
            let go = self.b.create_block();
            let rest = self.b.create_block();
            self.b.ins().brif(symbols, go, &[], rest, &[]);
            self.b.switch_to_block(go);
            let cc = if matches!(op, VmIntOp::Equal) {
                IntCC::Equal
            } else {
                IntCC::NotEqual
            };
            let answer = self.b.ins().icmp(cc, recv, arg);
            let v = self.flag_to_bool(answer);
            self.b.ins().jump(join, &[v.into()]);
            self.b.switch_to_block(rest);
        }
        match numbers::float_operands(&mut self.b, op, recv, arg, other) {
            Some((x, y)) => {
                let v = numbers::float_op(&mut self.b, op, x, y, other);
                self.b.ins().jump(join, &[v.into()]);
            }
            None => {
                self.b.ins().jump(other, &[]);
            }
        }
        self.b.switch_to_block(other);
        Ok(())
    }

    /// The primitive at `code` (an address), found in the cache for receivers of `class`,
    /// done by compiled code where `Code::intrinsic` names it: its value passed to `join`;
    /// a case it cannot do goes to `slow`, a code that is no intrinsic to `other`.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn intrinsic(
        &mut self,
        selector: &str,
        code: Value,
        class: Value,
        recv: Value,
        args: &[tally_ir::ValueId],
        inst: &Inst,
        join: cranelift_codegen::ir::Block,
        slow: cranelift_codegen::ir::Block,
        other: cranelift_codegen::ir::Block,
    ) -> Result<(), String> {
        let kind = self
            .b
            .ins()
            .uload8(I32, flags(), code, self.layout.code_intrinsic);
        // Only the marks the selector can find (`Code::intrinsic` is set by selector).
        let cases = tally_vm::jit::intrinsics_of_selector(selector);
        for want in cases {
            let this = self.b.create_block();
            let next = self.b.create_block();
            let is = self.cmp_imm(IntCC::Equal, kind, want as i64);
            self.b.ins().brif(is, this, &[], next, &[]);
            self.b.switch_to_block(this);
            let v = match want {
                Intrinsic::BlockValue => self.block_value(recv, args, inst, slow)?,
                Intrinsic::StringLength | Intrinsic::StringEqual => {
                    self.string_intrinsic(want, class, recv, args, slow)?
                }
                Intrinsic::ClassNew | Intrinsic::ArrayNew => {
                    self.allocate(want == Intrinsic::ArrayNew, recv, args, inst)?
                }
                Intrinsic::DoubleSqrt => self.double_sqrt(recv, slow),
                Intrinsic::ArrayAt | Intrinsic::ArrayAtPut | Intrinsic::ArrayLength => {
                    self.array_intrinsic(want, class, recv, args, slow)?
                }
                Intrinsic::None => unreachable!("a selector's marks are intrinsics"),
            };
            self.b.ins().jump(join, &[v.into()]);
            self.b.switch_to_block(next);
        }
        self.b.ins().jump(other, &[]);
        Ok(())
    }

    /// Array's `at:`, `at:put:` or `length` of Array's own instances (elements from the
    /// first slot); other receivers, a non-integer index or one out of bounds go to `slow`.
    pub(super) fn array_intrinsic(
        &mut self,
        which: Intrinsic,
        class: Value,
        recv: Value,
        args: &[tally_ir::ValueId],
        slow: cranelift_codegen::ir::Block,
    ) -> Result<Value, String> {
        let is_array = self.cmp_imm(IntCC::Equal, class, self.layout.array_class as i64);
        let array = self.b.create_block();
        self.b.ins().brif(is_array, array, &[], slow, &[]);
        self.b.switch_to_block(array);
        if which == Intrinsic::ArrayLength {
            let len = self.b.ins().uload32(flags(), recv, 8);
            let one = self.iconst(I64, 1);
            let shifted = self.b.ins().ishl(len, one);
            return Ok(self.b.ins().bor(shifted, one));
        }
        let index = self.val(args[0])?;
        let is_int = self.and_imm(index, 1);
        let int = self.b.create_block();
        self.b.ins().brif(is_int, int, &[], slow, &[]);
        self.b.switch_to_block(int);
        let one = self.iconst(I64, 1);
        let n = self.b.ins().sshr(index, one);
        let zero_based = self.add_imm(n, -1);
        let len = self.b.ins().uload32(flags(), recv, 8);
        let within = self.b.ins().icmp(IntCC::UnsignedLessThan, zero_based, len);
        let ok = self.b.create_block();
        self.b.ins().brif(within, ok, &[], slow, &[]);
        self.b.switch_to_block(ok);
        let address = self.slot_address(recv, zero_based);
        Ok(if which == Intrinsic::ArrayAt {
            self.b.ins().load(I64, flags(), address, 0)
        } else {
            let v = self.val(args[1])?;
            self.store_into(recv, 0, Some(address), v);
            v
        })
    }

    /// Double's `sqrt` of an immediate double whose root is one too; a boxed receiver or
    /// result goes to `slow`.
    pub(super) fn double_sqrt(&mut self, recv: Value, slow: cranelift_codegen::ir::Block) -> Value {
        let tag = self.and_imm(recv, 7);
        let is_float = self.cmp_imm(IntCC::Equal, tag, crate::numbers::FLOAT_TAG);
        let float = self.b.create_block();
        self.b.ins().brif(is_float, float, &[], slow, &[]);
        self.b.switch_to_block(float);
        let x = crate::numbers::decode_small_float(&mut self.b, recv);
        let root = self.b.ins().sqrt(x);
        crate::numbers::encode_small_float(&mut self.b, root, slow)
    }

    /// String's `length` (of an instance of String whose characters are its bytes) or `=`
    /// (of an instance of String itself or a Symbol, as String's primitive answers it: a
    /// symbol equals only itself, and text is compared by the pure `string_equal` stub,
    /// which neither allocates nor fails); other receivers go to `slow`.
    pub(super) fn string_intrinsic(
        &mut self,
        which: Intrinsic,
        class: Value,
        recv: Value,
        args: &[tally_ir::ValueId],
        slow: cranelift_codegen::ir::Block,
    ) -> Result<Value, String> {
        let is_string = self.cmp_imm(IntCC::Equal, class, self.layout.string_class as i64);
        let string = self.b.create_block();
        if which == Intrinsic::StringEqual {
            let other = self.val(args[0])?;
            let done = self.b.create_block();
            let answer = self.b.append_block_param(done, I64);
            let is_symbol =
                self.cmp_imm(IntCC::Equal, class, self.layout.calls.symbol_class as i64);
            let symbol = self.b.create_block();
            let text = self.b.create_block();
            self.b.ins().brif(is_string, text, &[], symbol, &[]);
            self.b.switch_to_block(symbol);
            let symbols = self.b.create_block();
            self.b.ins().brif(is_symbol, symbols, &[], slow, &[]);
            for (block, of_symbol) in [(text, false), (symbols, true)] {
                self.b.switch_to_block(block);
                let equal = self.text_equal(recv, other, of_symbol);
                let v = self.flag_to_bool(equal);
                self.b.ins().jump(done, &[v.into()]);
            }
            self.b.switch_to_block(done);
            return Ok(answer);
        }
        self.b.ins().brif(is_string, string, &[], slow, &[]);
        self.b.switch_to_block(string);
        let ascii = self.is_ascii_string(recv);
        let bytes = self.b.create_block();
        self.b.ins().brif(ascii, bytes, &[], slow, &[]);
        self.b.switch_to_block(bytes);
        Ok(self.byte_length(recv))
    }

    /// Whether the String `string` holds one-byte characters (its length is its byte
    /// length): the kind, bits 9..2 of header word 0, is the ASCII strings'.
    pub(super) fn is_ascii_string(&mut self, string: Value) -> Value {
        let word0 = self.b.ins().load(I64, flags(), string, 0);
        let kind = self.b.ins().ushr_imm_u(word0, 2);
        let kind = self.and_imm(kind, 0xff);
        self.cmp_imm(IntCC::Equal, kind, self.layout.ascii_string_kind as i64)
    }

    /// The byte length of String `string`, as a small integer (its header's second word's
    /// high half).
    pub(super) fn byte_length(&mut self, string: Value) -> Value {
        let len = self.b.ins().uload32(flags(), string, 12);
        let one = self.iconst(I64, 1);
        let shifted = self.b.ins().ishl(len, one);
        self.b.ins().bor(shifted, one)
    }

    /// String's primitive `=` of `string`, a String or (`symbol`) a Symbol, and any `other`,
    /// as a flag: the same word is equal; a symbol equals only itself (`other` a symbol
    /// too is unequal); text is compared by the pure `string_equal` stub, which neither
    /// allocates nor fails.
    pub(super) fn text_equal(&mut self, string: Value, other: Value, symbol: bool) -> Value {
        let done = self.b.create_block();
        let answer = self.b.append_block_param(done, I8);
        let yes = self.iconst(I8, 1);
        let no = self.iconst(I8, 0);
        let same = self.b.ins().icmp(IntCC::Equal, string, other);
        let text = self.b.create_block();
        let not_same = self.b.create_block();
        self.b.ins().brif(same, done, &[yes.into()], not_same, &[]);
        self.b.switch_to_block(not_same);
        if symbol {
            let other_symbol = self.class_is(other, self.layout.calls.symbol_class);
            self.b
                .ins()
                .brif(other_symbol, done, &[no.into()], text, &[]);
        } else {
            self.one_byte_strings_equal(string, other, done, text);
        }
        self.b.switch_to_block(text);
        let stub = self.layout.stubs.string_equal;
        let call = stub_calls::call(
            &mut self.b,
            &mut self.sigs.stubs,
            stub,
            &[self.act.vm, string, other],
        );
        let equal = self.b.inst_results(call)[0];
        let equal = self.cmp_imm(IntCC::NotEqual, equal, 0);
        self.b.ins().jump(done, &[equal.into()]);
        self.b.switch_to_block(done);
        answer
    }

    /// Whether the String `string` (an object of a string kind) and `other` are equal, for
    /// what parsers compare most without the stub: `other` a string object too, and both of
    /// one byte (or of different lengths: unequal). The flag goes to `done`; anything else
    /// goes to `text`, which compares it in full.
    pub(super) fn one_byte_strings_equal(
        &mut self,
        string: Value,
        other: Value,
        done: cranelift_codegen::ir::Block,
        text: cranelift_codegen::ir::Block,
    ) {
        use tally_heap::object::HEADER_BYTES;
        use tally_vm::objects::Kind;
        let other_object = self.is_object(other);
        let kind_of_other = self.b.create_block();
        self.b
            .ins()
            .brif(other_object, kind_of_other, &[], text, &[]);
        self.b.switch_to_block(kind_of_other);
        // Header word 0 holds the kind in bits 9..2; word 1 the slots (low half) and the
        // byte length (high half), the bytes following the slots.
        let word0 = self.b.ins().load(I64, flags(), other, 0);
        let kind = self.b.ins().ushr_imm_u(word0, 2);
        let kind = self.and_imm(kind, 0xff);
        let plain = self.cmp_imm(IntCC::Equal, kind, Kind::String as i64);
        let ascii = self.cmp_imm(IntCC::Equal, kind, Kind::AsciiString as i64);
        let is_string = self.b.ins().bor(plain, ascii);
        let lengths = self.b.create_block();
        self.b.ins().brif(is_string, lengths, &[], text, &[]);
        self.b.switch_to_block(lengths);
        let words = [string, other].map(|s| self.b.ins().load(I64, flags(), s, 8));
        let len = words.map(|w| self.b.ins().ushr_imm_u(w, 32));
        let same_length = self.b.ins().icmp(IntCC::Equal, len[0], len[1]);
        let one = self.b.create_block();
        let no = self.iconst(I8, 0);
        self.b.ins().brif(same_length, one, &[], done, &[no.into()]);
        self.b.switch_to_block(one);
        let one_byte = self.cmp_imm(IntCC::Equal, len[0], 1);
        let bytes = self.b.create_block();
        self.b.ins().brif(one_byte, bytes, &[], text, &[]);
        self.b.switch_to_block(bytes);
        let byte = [(string, words[0]), (other, words[1])].map(|(s, w)| {
            let slots = self.and_imm(w, 0xffff_ffff);
            let slot_bytes = self.b.ins().ishl_imm_u(slots, 3);
            let address = self.b.ins().iadd(s, slot_bytes);
            self.b
                .ins()
                .uload8(I32, flags(), address, HEADER_BYTES as i32)
        });
        let equal = self.b.ins().icmp(IntCC::Equal, byte[0], byte[1]);
        self.b.ins().jump(done, &[equal.into()]);
    }

    /// `value…` of the closure `closure` (its class is a block class): its block's body
    /// called directly when its arity matches and it has one, else `slow`.
    pub(super) fn block_value(
        &mut self,
        closure: Value,
        args: &[tally_ir::ValueId],
        inst: &Inst,
        slow: cranelift_codegen::ir::Block,
    ) -> Result<Value, String> {
        let calls = &self.layout.calls;
        let callee = self.closure_code(closure);
        let num_args = self
            .b
            .ins()
            .uload16(I32, flags(), callee, calls.code_num_args);
        let arity = self.cmp_imm(IntCC::Equal, num_args, args.len() as i64);
        let direct = self
            .b
            .ins()
            .load(I64, flags(), callee, self.layout.code_direct);
        let has_body = self.cmp_imm(IntCC::NotEqual, direct, 0);
        let ok = self.b.ins().band(arity, has_body);
        let call = self.b.create_block();
        self.b.ins().brif(ok, call, &[], slow, &[]);
        self.b.switch_to_block(call);
        let recv = self
            .b
            .ins()
            .load(I64, flags(), closure, slot_offset(block::RECEIVER));
        let k = self.safepoint(inst.bci);
        let sig = self.body_sig(args.len(), true);
        let direct_call = self.iconst(I32, Caller::Direct.code());
        let mut call_args = vec![self.act.vm, direct_call, recv];
        for &a in args {
            call_args.push(self.val(a)?);
        }
        call_args.push(closure);
        let call = self.b.ins().call_indirect(sig, direct, &call_args);
        self.tag(call, k);
        Ok(self.b.inst_results(call)[0])
    }

    /// Goes on in a new block while the yieldpoint flag is down, else to `slow`.
    pub(super) fn unless_flag_raised(&mut self, slow: cranelift_codegen::ir::Block) {
        self.emit().unless_flag_raised(slow);
    }
}
