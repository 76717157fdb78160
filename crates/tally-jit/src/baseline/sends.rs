//! Sends: the stubs, the inline-cache probe and direct calls (frames pushed and
//! popped by compiled code), and value counting.

use super::*;

/// What `callable_directly` found out about a callee.
pub(super) struct DirectCall {
    /// The condition: all of it holds.
    pub ok: Value,
    /// The callee's compiled function.
    pub function: Value,
    /// Where its frame would go.
    pub frames: FrameDepth,
    /// Whether it takes the send's number of arguments (trivial methods need that too).
    pub arity: Value,
}

impl Translator<'_, '_> {
    /// Calls `stub` with the VM and `args`.
    pub(super) fn call_stub(&mut self, stub: Stub, args: &[Value]) -> Value {
        let mut all = vec![self.vm];
        all.extend_from_slice(args);
        let call = stub_calls::call(&mut self.b, &mut self.sigs, stub, &all);
        self.b.inst_results(call)[0]
    }

    /// After a stub that answers a status: on to `next` on `Continue`, else leave with it.
    pub(super) fn continue_or_leave(&mut self, status: Value, next: Block) {
        let go_on = cmp_imm(&mut self.b, IntCC::Equal, status, Status::Continue as i64);
        let exit = self.exit;
        self.b.ins().brif(go_on, next, &[], exit, &[status.into()]);
    }

    /// A send through a status stub; the frame resumes at `i + 1`.
    pub(super) fn send_stub(
        &mut self,
        stub: Stub,
        site: u32,
        h: i32,
        i: usize,
    ) -> Result<(), String> {
        self.sync(h, i + 1);
        let site = self.b.ins().iconst(I32, site as i64);
        let status = self.call_stub(stub, &[site]);
        let next = self.block(i + 1)?;
        self.continue_or_leave(status, next);
        Ok(())
    }

    /// A send from `site` (receiver and arguments in the slots below `h`) that, when the
    /// inline cache holds the receiver's class and the target is compiled bytecode with a
    /// plain frame, pushes the callee's frame and calls its code directly; anything else
    /// (a miss, a primitive, a trivial method, a context to make, a tripped push limit, too
    /// little value stack or native stack) takes the send stub. Resumes at `i + 1`.
    pub(super) fn direct_send(&mut self, site: u32, h: i32, i: usize) -> Result<(), String> {
        let facts = self.site(site);
        let argc = facts.argc as i32;
        let c = &self.layout.calls;
        let flags = Self::flags();
        let slow = self.b.create_block();
        self.b.set_cold_block(slow);
        let have_class = self.b.create_block();
        self.b.append_block_param(have_class, I32);
        let hit = self.b.create_block();
        self.b.append_block_param(hit, I32);

        // The receiver's class: small integers and objects inline, other immediates sent.
        let class = self.receiver_class(h - 1 - argc, slow);
        self.b.ins().jump(have_class, &[class.into()]);

        // The inline cache's two entries.
        self.b.switch_to_block(have_class);
        let class = self.b.block_params(have_class)[0];
        if facts.receiver_table != 0 {
            self.count_value(facts.receiver_table, class);
        }
        let sites = self.b.ins().load(I64, flags, self.vm, c.sites_base);
        let entry = site as i32 * c.site_size;
        let class1 = self.b.ins().load(I32, flags, sites, entry + c.site_class1);
        let code1 = self.b.ins().load(I32, flags, sites, entry + c.site_code1);
        let second = self.b.create_block();
        let first_hits = self.b.ins().icmp(IntCC::Equal, class, class1);
        self.b
            .ins()
            .brif(first_hits, hit, &[code1.into()], second, &[]);
        self.b.switch_to_block(second);
        let class2 = self.b.ins().load(I32, flags, sites, entry + c.site_class2);
        let code2 = self.b.ins().load(I32, flags, sites, entry + c.site_code2);
        let second_hits = self.b.ins().icmp(IntCC::Equal, class, class2);
        self.b
            .ins()
            .brif(second_hits, hit, &[code2.into()], slow, &[]);

        // The target: compiled, a plain frame of the right arity, no context to make.
        self.b.switch_to_block(hit);
        let target = self.b.block_params(hit)[0];
        let code = self.code_address(target);
        let DirectCall {
            ok,
            function,
            frames,
            arity,
        } = self.callable_directly(code, argc, h);
        let push = self.b.create_block();
        let frameless = self.b.create_block();
        self.b.ins().brif(ok, push, &[], frameless, &[]);

        // A trivial method (getter, setter, constant, `^self`) done in place, as the
        // interpreter does when no profiler hook is due (a raised flag takes the stub).
        self.b.switch_to_block(frameless);
        let kind = self.b.ins().uload8(I32, flags, code, c.code_trivial_kind);
        let quiet = self.no_hook_due();
        let ok = self.b.ins().band(quiet, arity);
        let trivial = self.b.create_block();
        self.b.ins().brif(ok, trivial, &[], slow, &[]);
        self.b.switch_to_block(trivial);
        let operand = self.b.ins().load(I64, flags, code, c.code_trivial_operand);
        let next = self.block(i + 1)?;
        let recv_slot = h - 1 - argc;
        let cases = [
            (TRIVIAL_GETTER, 0),
            (TRIVIAL_SETTER, 1),
            (TRIVIAL_CONSTANT, 0),
            (TRIVIAL_RECEIVER, 0),
        ];
        for (want, min_args) in cases {
            if argc < min_args {
                continue;
            }
            let this = self.b.create_block();
            let other = self.b.create_block();
            let is = cmp_imm(&mut self.b, IntCC::Equal, kind, want as i64);
            self.b.ins().brif(is, this, &[], other, &[]);
            self.b.switch_to_block(this);
            match want {
                TRIVIAL_GETTER | TRIVIAL_SETTER => {
                    let field = self.dynamic_field_address(recv_slot, operand, slow);
                    if want == TRIVIAL_GETTER {
                        let v = self.b.ins().load(I64, flags, field.address, 0);
                        self.set_slot(recv_slot, v);
                    } else {
                        let v = self.slot(recv_slot + 1);
                        self.store_into_heap(v, field);
                    }
                }
                TRIVIAL_CONSTANT => self.set_slot(recv_slot, operand),
                _ => {}
            }
            self.jump(next);
            self.b.switch_to_block(other);
        }
        self.jump(slow);

        self.b.switch_to_block(push);
        let nil = self.b.ins().iconst(I64, tally_heap::Value::NIL.0 as i64);
        let none = self.b.ins().iconst(I64, 0);
        let callee = Callee {
            id: target,
            code,
            function,
            ctx: nil,
            closure: none,
        };
        self.push_and_call(callee, frames, argc, h, i)?;

        self.b.switch_to_block(slow);
        self.send_stub(self.layout.stubs.send, site, h, i)
    }

    /// Counts `class` (an I32) in the value table at `table` as `class | 1 << 32` (never 0,
    /// so a key match means a counted slot) while the table's burst lasts
    /// (`ValueTable::record_in_burst`): the common path of a multiplicative table
    /// inline (slot 0, then the slot `(value × multiplier) >> shift` holding the value: add
    /// one; no lock
    /// test, see `TableLayout`), anything else through the `record_value` stub. Goes on in a
    /// new block. The stub neither allocates nor changes frames, so nothing needs syncing.
    pub(super) fn count_value(&mut self, table: usize, class: Value) {
        let l = tally_vm::tally_profile::values::TableLayout::OF_VALUE_TABLE;
        let flags = Self::flags();
        let done = self.b.create_block();
        let slow = self.b.create_block();
        self.b.set_cold_block(slow);
        let t = self.b.ins().iconst(I64, table as i64);
        let left = self.b.ins().load(I32, flags, t, l.burst_left);
        // Between bursts (most of the time in hot code) a send pays the load and the branch;
        // the counting itself is laid out of line.
        let in_burst = self.b.create_block();
        self.b.set_cold_block(in_burst);
        self.b.ins().brif(left, in_burst, &[], done, &[]);
        self.b.switch_to_block(in_burst);
        let one = self.b.ins().iconst(I32, 1);
        let fewer = self.b.ins().isub(left, one);
        self.b.ins().store(flags, fewer, t, l.burst_left);
        let class = self.b.ins().uextend(I64, class);
        let value = self.b.ins().bor_imm_u(class, 1 << 32);
        // Slot 0 first: a send that sees one class (most do) finds it there with no hashing
        // (a key is where the table put it, whatever the index bits are).
        let key0 = self.b.ins().load(I64, flags, t, l.keys);
        let in_first = self.b.ins().icmp(IntCC::Equal, key0, value);
        let first = self.b.create_block();
        let hashed = self.b.create_block();
        self.b.set_cold_block(first);
        self.b.set_cold_block(hashed);
        self.b.ins().brif(in_first, first, &[], hashed, &[]);
        self.b.switch_to_block(first);
        let count = self.b.ins().load(I64, flags, t, l.counts);
        let more = add_imm(&mut self.b, count, 1);
        self.b.ins().store(flags, more, t, l.counts);
        self.jump(done);
        self.b.switch_to_block(hashed);
        let multiplier = self.b.ins().load(I64, flags, t, l.multiplier);
        let shift = self.b.ins().uload8(I64, flags, t, l.shift);
        let product = self.b.ins().imul(value, multiplier);
        let index = self.b.ins().ushr(product, shift);
        let offset = self.b.ins().ishl_imm_u(index, 3);
        let slot = self.b.ins().iadd(t, offset);
        let key = self.b.ins().load(I64, flags, slot, l.keys);
        let same = self.b.ins().icmp(IntCC::Equal, key, value);
        let add = self.b.create_block();
        self.b.set_cold_block(add);
        self.b.ins().brif(same, add, &[], slow, &[]);
        self.b.switch_to_block(add);
        let count = self.b.ins().load(I64, flags, slot, l.counts);
        let more = add_imm(&mut self.b, count, 1);
        self.b.ins().store(flags, more, slot, l.counts);
        self.jump(done);
        self.b.switch_to_block(slow);
        stub_calls::call(
            &mut self.b,
            &mut self.sigs,
            self.layout.stubs.record_value,
            &[self.vm, t, value],
        );
        self.jump(done);
        self.b.switch_to_block(done);
    }

    /// Whether the code at `code` (a `&Code`) can be called directly with `argc` arguments
    /// in the slots below `h`: compiled, a plain frame of that arity, no context to make, and
    /// room on the value stack and the frame stack.
    pub(super) fn callable_directly(&mut self, code: Value, argc: i32, h: i32) -> DirectCall {
        let c = &self.layout.calls;
        let flags = Self::flags();
        let function = self.b.ins().load(I64, flags, code, c.code_compiled);
        let compiled = cmp_imm(&mut self.b, IntCC::UnsignedGreaterThan, function, 1);
        let plain = self.b.ins().uload8(I32, flags, code, c.code_plain_frame);
        let nargs = self.b.ins().uload16(I32, flags, code, c.code_num_args);
        let arity = cmp_imm(&mut self.b, IntCC::Equal, nargs, argc as i64);
        let context = self.b.ins().uload16(I32, flags, code, c.code_context_size);
        let no_context = cmp_imm(&mut self.b, IntCC::Equal, context, 0);
        let plain = cmp_imm(&mut self.b, IntCC::NotEqual, plain, 0);
        let ok = self.b.ins().band(compiled, plain);
        let ok = self.b.ins().band(ok, arity);
        let ok = self.b.ins().band(ok, no_context);
        let room = self.b.ins().uload32(flags, code, c.code_room);
        let (fits, frames) = self.room_for_call(h, room);
        DirectCall {
            ok: self.b.ins().band(ok, fits),
            function,
            frames,
            arity,
        }
    }

    /// The `&Code` of code id `id` (a run-time u32).
    pub(super) fn code_address(&mut self, id: Value) -> Value {
        let flags = Self::flags();
        let codes = self
            .b
            .ins()
            .load(I64, flags, self.vm, self.layout.calls.codes_base);
        let id64 = self.b.ins().uextend(I64, id);
        let index = mul_imm(&mut self.b, id64, 8);
        let slot = self.b.ins().iadd(codes, index);
        self.b.ins().load(I64, flags, slot, 0)
    }

    /// The class id (an I32) of the value in slot `k`: small integers and objects; other
    /// immediates jump to `other`.
    pub(super) fn receiver_class(&mut self, k: i32, other: Block) -> Value {
        let c = &self.layout.calls;
        let recv = self.slot(k);
        let is_int = and_imm(&mut self.b, recv, 1);
        let not_int = self.b.create_block();
        let done = self.b.create_block();
        self.b.append_block_param(done, I32);
        let int_class = self.b.ins().iconst(I32, c.integer_class as i64);
        self.b
            .ins()
            .brif(is_int, done, &[int_class.into()], not_int, &[]);
        self.b.switch_to_block(not_int);
        let class = self.object_class(recv, other);
        self.b.ins().jump(done, &[class.into()]);
        self.b.switch_to_block(done);
        self.b.block_params(done)[0]
    }

    /// Whether `v` is a reference to a heap object (tag 0, not the null word).
    pub(super) fn is_object(&mut self, v: Value) -> Value {
        let tag = and_imm(&mut self.b, v, 7);
        let is_ref = cmp_imm(&mut self.b, IntCC::Equal, tag, 0);
        let not_none = cmp_imm(&mut self.b, IntCC::NotEqual, v, 0);
        self.b.ins().band(is_ref, not_none)
    }

    /// The class id (an I32) of heap object `v`, in a new block; a jump to `not_object` when
    /// `v` is not one.
    pub(super) fn object_class(&mut self, v: Value, not_object: Block) -> Value {
        let is_object = self.is_object(v);
        let object = self.b.create_block();
        self.b.ins().brif(is_object, object, &[], not_object, &[]);
        self.b.switch_to_block(object);
        // The class id is the high half of header word 0.
        self.b.ins().load(I32, Self::flags(), v, 4)
    }

    /// Whether no profiler hook is due (the yieldpoint flag is down): only then may a send
    /// be done without a frame, as the interpreter does.
    pub(super) fn no_hook_due(&mut self) -> Value {
        let address = self.b.ins().iconst(I64, self.layout.yieldpoint_flag as i64);
        let flag = self.b.ins().uload8(I32, Self::flags(), address, 0);
        cmp_imm(&mut self.b, IntCC::Equal, flag, 0)
    }

    /// Whether a direct call from height `h` may go ahead: a frame below the push limit
    /// (tripped by the yieldpoint flag, so a raised flag sends the call through the stub's
    /// prologue), `room` (an I64: the callee's `room_above_arguments`) free value-stack
    /// slots, and native stack for the call. Also answers the frame stack and its depth as
    /// loaded for the check, which `push_and_call` pushes at.
    pub(super) fn room_for_call(&mut self, h: i32, room: Value) -> (Value, FrameDepth) {
        let c = &self.layout.calls;
        let flags = Self::flags();
        let frame_stack = self
            .b
            .ins()
            .load(I64, flags, self.vm, self.layout.frame_stack);
        let depth = self
            .b
            .ins()
            .load(I64, flags, frame_stack, self.layout.frames_len);
        let limit = self.b.ins().load(I64, flags, frame_stack, c.frames_limit);
        let below_limit = self.b.ins().icmp(IntCC::UnsignedLessThan, depth, limit);
        let capacity = self.b.ins().load(I64, flags, self.vm, c.stack_capacity);
        let height = add_imm(&mut self.b, self.s.bp, h as i64);
        let free = self.b.ins().isub(capacity, height);
        let fits = self
            .b
            .ins()
            .icmp(IntCC::UnsignedGreaterThanOrEqual, free, room);
        let ok = self.b.ins().band(below_limit, fits);
        let sp = self.b.ins().get_stack_pointer(I64);
        let native_limit = self.b.ins().load(I64, flags, self.vm, c.native_stack_limit);
        let deep_enough = self
            .b
            .ins()
            .icmp(IntCC::UnsignedGreaterThan, sp, native_limit);
        let ok = self.b.ins().band(ok, deep_enough);
        (ok, FrameDepth { frame_stack, depth })
    }

    /// Pushes `callee`'s frame over the receiver and `argc` arguments below height `h` (room
    /// checked by `room_for_call`, which loaded `at`), calls its compiled function, and on
    /// its return pops the frame and goes on at `i + 1` with the result in the receiver's
    /// slot.
    pub(super) fn push_and_call(
        &mut self,
        callee: Callee,
        at: FrameDepth,
        argc: i32,
        h: i32,
        i: usize,
    ) -> Result<(), String> {
        let flags = Self::flags();
        let (callee_frame, new_bp) = self.push_frame(&callee, at, argc, h, i);
        let sig = self.entry_sig;
        let fresh = self.b.ins().iconst(I32, 0);
        let call = self.b.ins().call_indirect(
            sig,
            callee.function,
            &[self.vm, callee_frame, new_bp, fresh],
        );
        let status = self.b.inst_results(call)[0];
        let returned = self.b.create_block();
        let is_return = cmp_imm(&mut self.b, IntCC::Equal, status, Status::Returned as i64);
        let exit = self.exit;
        self.b
            .ins()
            .brif(is_return, returned, &[], exit, &[status.into()]);

        // The callee returned the value on top of its stack.
        self.b.switch_to_block(returned);
        let stack_len = self
            .b
            .ins()
            .load(I64, flags, self.vm, self.layout.stack_len);
        let stack = self
            .b
            .ins()
            .load(I64, flags, self.vm, self.layout.stack_base);
        let top = mul_imm(&mut self.b, stack_len, 8);
        let top = self.b.ins().iadd(stack, top);
        let result = self.b.ins().load(I64, flags, top, -8);
        self.pop_and_continue(result, at, argc, h, i)
    }

    /// Writes `callee`'s frame over the receiver and `argc` arguments below height `h` at
    /// depth `at` (room checked by `room_for_call`), its stack locals nil, after making the
    /// caller exact for a call from `i`. Answers the new frame's address and base (a u64).
    pub(super) fn push_frame(
        &mut self,
        callee: &Callee,
        at: FrameDepth,
        argc: i32,
        h: i32,
        i: usize,
    ) -> (Value, Value) {
        let c = &self.layout.calls;
        let flags = Self::flags();
        let FrameDepth { frame_stack, depth } = at;
        // The callee's frame, written before the depth that makes it visible to samplers.
        self.sync(h, i + 1);
        let height = add_imm(&mut self.b, self.s.bp, h as i64);
        let frames = self
            .b
            .ins()
            .load(I64, flags, frame_stack, self.layout.frames_base);
        let offset = mul_imm(&mut self.b, depth, self.layout.frame_size as i64);
        let callee_frame = self.b.ins().iadd(frames, offset);
        let new_bp = add_imm(&mut self.b, self.s.bp, (h - 1 - argc) as i64);
        let new_bp32 = self.b.ins().ireduce(I32, new_bp);
        let zero32 = self.b.ins().iconst(I32, 0);
        let nil = self.b.ins().iconst(I64, tally_heap::Value::NIL.0 as i64);
        self.b
            .ins()
            .store(flags, callee.id, callee_frame, c.frame_code);
        self.b
            .ins()
            .store(flags, zero32, callee_frame, self.layout.frame_ip);
        if self.layout.mark_frames {
            // `bp` and `mark` are neighbours: one store writes both (little-endian, `bp`
            // first), so marking costs a profiled call no store of its own.
            debug_assert_eq!(self.layout.frame_mark, self.layout.frame_bp + 4);
            let mark = self.b.ins().uload8(
                I64,
                flags,
                callee.code,
                tally_vm::jit::TierCallCounter::tier_offset_in_code(),
            );
            let mark_high = self.b.ins().ishl_imm_u(mark, 32);
            let bp_low = self.b.ins().uextend(I64, new_bp32);
            let both = self.b.ins().bor(bp_low, mark_high);
            self.b
                .ins()
                .store(flags, both, callee_frame, self.layout.frame_bp);
        } else {
            self.b
                .ins()
                .store(flags, new_bp32, callee_frame, self.layout.frame_bp);
        }
        self.b
            .ins()
            .store(flags, callee.ctx, callee_frame, self.layout.frame_ctx);
        self.b
            .ins()
            .store(flags, callee.closure, callee_frame, c.frame_closure);
        let new_depth = add_imm(&mut self.b, depth, 1);
        self.b
            .ins()
            .store(flags, new_depth, frame_stack, self.layout.frames_len);
        // Its stack locals, nil.
        let locals = self
            .b
            .ins()
            .uload16(I64, flags, callee.code, c.code_num_locals);
        let fill = self.b.create_block();
        self.b.append_block_param(fill, I64);
        let filled = self.b.create_block();
        let start = self.b.ins().iconst(I64, 0);
        self.b.ins().jump(fill, &[start.into()]);
        self.b.switch_to_block(fill);
        let k = self.b.block_params(fill)[0];
        let more = self.b.ins().icmp(IntCC::UnsignedLessThan, k, locals);
        let store_one = self.b.create_block();
        self.b.ins().brif(more, store_one, &[], filled, &[]);
        self.b.switch_to_block(store_one);
        let byte = mul_imm(&mut self.b, k, 8);
        let address = self.b.ins().iadd(self.s.fp, byte);
        self.b.ins().store(flags, nil, address, h * 8);
        let k1 = add_imm(&mut self.b, k, 1);
        self.b.ins().jump(fill, &[k1.into()]);
        self.b.switch_to_block(filled);
        let len = self.b.ins().iadd(height, locals);
        self.b
            .ins()
            .store(flags, len, self.vm, self.layout.stack_len);
        (callee_frame, new_bp)
    }

    /// After a callee pushed at depth `at` from the send at `i` (receiver and `argc`
    /// arguments below `h`) returned `result`: pops its frame, as `Vm::pop_frame` does, and
    /// goes on at `i + 1` with the result in the receiver's slot, through the epilogue stub
    /// when the exit depth is tripped.
    pub(super) fn pop_and_continue(
        &mut self,
        result: Value,
        at: FrameDepth,
        argc: i32,
        h: i32,
        i: usize,
    ) -> Result<(), String> {
        let c = &self.layout.calls;
        let flags = Self::flags();
        let FrameDepth { frame_stack, depth } = at;
        self.set_slot(h - 1 - argc, result);
        self.b
            .ins()
            .store(flags, depth, frame_stack, self.layout.frames_len);
        self.sync(h - argc, i + 1);
        let exit_depth = self
            .b
            .ins()
            .load(I64, flags, frame_stack, c.frames_exit_depth);
        let tripped = self
            .b
            .ins()
            .icmp(IntCC::UnsignedLessThanOrEqual, depth, exit_depth);
        let next = self.block(i + 1)?;
        let epilogue = self.b.create_block();
        self.b.set_cold_block(epilogue);
        self.b.ins().brif(tripped, epilogue, &[], next, &[]);
        self.b.switch_to_block(epilogue);
        let status = self.call_stub(self.layout.stubs.epilogue, &[]);
        self.continue_or_leave(status, next);
        Ok(())
    }
}
