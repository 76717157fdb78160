//! The templates of the instructions that are not sends: locals, fields, contexts,
//! constants, literals, globals, closures, jumps and returns; and what they share (field
//! addresses, the write barrier).

use super::{asm, Emitter};
use dynasmrt::{dynasm, DynasmApi, DynasmLabelApi};
use tally_heap::object::HEADER_BYTES;
use tally_vm::bytecode::Op;
use tally_vm::jit::Status;
use tally_vm::objects::context;

/// Byte offset of value-stack slot `k` from `r13`.
pub(super) fn slot(k: i32) -> i32 {
    k * 8
}

/// Byte offset of field (or context slot) `index` in an object.
pub(super) fn field(index: u16) -> i32 {
    (HEADER_BYTES + index as usize * 8) as i32
}

impl Emitter<'_> {
    pub(super) fn op(&mut self, i: usize, op: Op, h: i32) -> Result<(), String> {
        match op {
            Op::PushLocal(k) => {
                self.copy_slot(k as i32, h);
                self.go_to(i + 1)
            }
            Op::StoreLocal(k) | Op::PopLocal(k) => {
                self.copy_slot(h - 1, k as i32);
                self.go_to(i + 1)
            }
            Op::PushCtx { level, index } => {
                self.context(level);
                let (from, to) = (field(index), slot(h));
                asm!(self
                    ; mov rax, [rsi + from]
                    ; mov [r13 + to], rax
                );
                self.go_to(i + 1)
            }
            Op::StoreCtx { level, index } | Op::PopCtx { level, index } => {
                self.context(level);
                let (from, to) = (slot(h - 1), field(index));
                asm!(self
                    ; mov rax, [r13 + from]
                    ; mov [rsi + to], rax
                );
                self.write_barrier();
                self.go_to(i + 1)
            }
            Op::PushField(k) => {
                self.push_field(k, h, i, h);
                self.go_to(i + 1)
            }
            Op::StoreField(k) | Op::PopField(k) => {
                self.receiver_with_field(k, i, h);
                let (from, to) = (slot(h - 1), field(k));
                asm!(self
                    ; mov rax, [r13 + from]
                    ; mov [rsi + to], rax
                );
                self.write_barrier();
                self.go_to(i + 1)
            }
            Op::PushLiteral(k) => {
                match self.request.immediate_literal(k) {
                    // An immediate never moves and a literal never changes: a constant.
                    Some(v) => self.push_constant(v.0, h),
                    None => {
                        let to = slot(h);
                        asm!(self; mov esi, k as i32);
                        self.call_stub(self.layout.stubs.literal);
                        asm!(self; mov [r13 + to], rax);
                    }
                }
                self.go_to(i + 1)
            }
            Op::PushConst(v) => {
                self.push_constant(v.0, h);
                self.go_to(i + 1)
            }
            Op::PushGlobal(global) => {
                // The stub answers `Value::NONE` for an undefined global: the interpreter
                // then sends `unknownGlobal:`.
                let unknown = self.handover(i, h);
                let to = slot(h);
                asm!(self; mov esi, global as i32);
                self.call_stub(self.layout.stubs.global);
                asm!(self
                    ; test rax, rax
                    ; jz =>unknown
                    ; mov [r13 + to], rax
                );
                self.go_to(i + 1)
            }
            Op::PushBlock(code) => {
                self.sync(h, i + 1);
                asm!(self; mov esi, code as i32);
                self.call_stub(self.layout.stubs.push_block);
                self.continue_or_leave(i + 1)
            }
            Op::Pop => self.go_to(i + 1),
            Op::Dup => {
                self.copy_slot(h - 1, h);
                self.go_to(i + 1)
            }
            Op::Send(site) => self.direct_send(site, h, i),
            Op::SuperSend(site) => {
                let stub = self.layout.stubs.super_send;
                self.send_stub(stub, site, h, i)
            }
            Op::SendBinary(site) => self.send_binary(site, h, i),
            Op::SendIsNil(site) | Op::SendNotNil(site) => {
                self.nil_test(site, matches!(op, Op::SendIsNil(_)), h, i)
            }
            Op::Return => {
                self.return_top(h, i);
                Ok(())
            }
            Op::ReturnSelf | Op::ReturnLocal(_) => {
                let k = match op {
                    Op::ReturnLocal(k) => k as i32,
                    _ => 0,
                };
                self.copy_slot(k, h);
                self.return_top(h + 1, i);
                Ok(())
            }
            Op::ReturnField(k) => {
                self.push_field(k, h, i, h);
                self.return_top(h + 1, i);
                Ok(())
            }
            Op::ReturnNonLocal => {
                self.sync(h, i);
                self.leave(Status::Interpret);
                Ok(())
            }
            Op::Jump(t) => self.go_to(t as usize),
            Op::JumpBack(t) => self.back_edge(t as usize, h),
            Op::JumpIfTrue(t) => self.conditional_jump(t as usize, true, h, i),
            Op::JumpIfFalse(t) => self.conditional_jump(t as usize, false, h, i),
            Op::PushLocal2(a, b) => {
                self.copy_slot(a as i32, h);
                self.copy_slot(b as i32, h + 1);
                self.go_to(i + 1)
            }
            Op::PopPushLocal(k) => {
                self.copy_slot(k as i32, h - 1);
                self.go_to(i + 1)
            }
            Op::PopPushField(k) => {
                self.push_field(k, h - 1, i, h);
                self.go_to(i + 1)
            }
            Op::PushLocalSend(k, site) => {
                self.copy_slot(k as i32, h);
                self.direct_send(site, h + 1, i)
            }
            Op::PushLocalSendBinary(k, site) => {
                self.copy_slot(k as i32, h);
                self.send_binary(site, h + 1, i)
            }
            Op::PushConstSendBinary(v, site) => {
                self.push_constant(v.0, h);
                self.send_binary(site, h + 1, i)
            }
            Op::SendCompareJumpIfFalse(site, t) => {
                self.compare_and_branch(site, t as usize, false, h, i)
            }
            Op::SendCompareJumpIfTrue(site, t) => {
                self.compare_and_branch(site, t as usize, true, h, i)
            }
        }
    }

    /// Slot `to` := slot `from`.
    fn copy_slot(&mut self, from: i32, to: i32) {
        let (from, to) = (slot(from), slot(to));
        asm!(self
            ; mov rax, [r13 + from]
            ; mov [r13 + to], rax
        );
    }

    /// Pushes the word `v` at slot `h`.
    pub(super) fn push_constant(&mut self, v: u64, h: i32) {
        let to = slot(h);
        match i32::try_from(v as i64) {
            Ok(small) => asm!(self; mov QWORD [r13 + to], small),
            Err(_) => asm!(self
                ; mov rax, QWORD v as i64
                ; mov [r13 + to], rax
            ),
        }
    }

    /// `rsi` := the context `level` hops out from the frame's.
    fn context(&mut self, level: u8) {
        let ctx = self.layout.frame_ctx;
        let outer = field(context::OUTER as u16);
        asm!(self; mov rsi, [r12 + ctx]);
        for _ in 0..level {
            asm!(self; mov rsi, [rsi + outer]);
        }
    }

    /// `rsi` := the receiver, when it is an object with field `index`; else the
    /// interpreter takes the frame at instruction `i` with `h` values (and reports the
    /// missing field).
    fn receiver_with_field(&mut self, index: u16, i: usize, h: i32) {
        let miss = self.handover(i, h);
        let index = index as i32;
        asm!(self
            ; mov rsi, [r13]
            ; test sil, 7
            ; jnz =>miss
            ; test rsi, rsi
            ; jz =>miss
            ; cmp DWORD [rsi + 8], index
            ; jbe =>miss
        );
    }

    /// Pushes the receiver's field `index` at slot `to`, or hands over at `i` with `h`.
    fn push_field(&mut self, index: u16, to: i32, i: usize, h: i32) {
        self.receiver_with_field(index, i, h);
        let (from, to) = (field(index), slot(to));
        asm!(self
            ; mov rax, [rsi + from]
            ; mov [r13 + to], rax
        );
    }

    /// After a store of `rax` into object `rsi`: under a generational plan the write
    /// barrier, which, when `rax` is a reference (immediates cannot make an old object point
    /// to a young one), calls the barrier routine. Uses `rcx` and `rdx`; nothing without a
    /// barrier.
    pub(super) fn write_barrier(&mut self) {
        if self.layout.unlog_table.is_none() {
            return;
        }
        let routine = self.routines.barrier;
        asm!(self
            ; test al, 7
            ; jnz >done
            ; call extern routine
            ; done:
        );
    }

    /// A loop's back-edge to instruction `t` (`h` values on the stack): on to the loop
    /// head, through the `back_edge` stub when the yieldpoint flag has a bit raised.
    fn back_edge(&mut self, t: usize, h: i32) -> Result<(), String> {
        let l = self.layout;
        if l.count_calls {
            let column = super::TIER_COLUMN;
            self.increment(tally_vm::jit::TierCallCounter::loops_offset_in_code(column));
        }
        let head = self.op_label(t)?;
        let yieldpoint = self.a.new_dynamic_label();
        let (flag, bits) = (l.yieldpoint_flag as i64, l.yieldpoint_bits as i8);
        asm!(self
            ; mov rax, QWORD flag
            ; test BYTE [rax], bits
            ; jnz =>yieldpoint
            ; jmp =>head
        );
        let stub = l.stubs.back_edge;
        self.later(move |e| {
            asm!(e; =>yieldpoint);
            e.sync(h, t);
            e.call_stub(stub);
            e.continue_or_leave(t)
                .expect("the loop head was found above");
        });
        Ok(())
    }

    /// A conditional jump to `target` when the value on top of the `h` is `if_true`'s
    /// Boolean, on to `i + 1` on the other; anything else hands over to the interpreter
    /// (which sends `mustBeBoolean`).
    fn conditional_jump(
        &mut self,
        target: usize,
        if_true: bool,
        h: i32,
        i: usize,
    ) -> Result<(), String> {
        let (jump_on, fall_on) = if if_true {
            (TRUE, FALSE)
        } else {
            (FALSE, TRUE)
        };
        let taken = self.op_label(target)?;
        self.op_label(i + 1)?;
        let not_boolean = self.handover(i, h);
        let top = slot(h - 1);
        asm!(self
            ; mov rax, [r13 + top]
            ; cmp rax, jump_on
            ; je =>taken
            ; cmp rax, fall_on
            ; jne =>not_boolean
        );
        self.go_to(i + 1)
    }
}

/// `true` and `false` as words (small enough for an immediate operand).
pub(super) const TRUE: i32 = tally_heap::Value::TRUE.0 as i32;
pub(super) const FALSE: i32 = tally_heap::Value::FALSE.0 as i32;
pub(super) const NIL: i32 = tally_heap::Value::NIL.0 as i32;
