//! The routines every baseline function shares, written once per VM before its first
//! compile at the start of the code region, so that a function reaches each with a 5-byte
//! call: the send (inline cache, the callee's frame pushed and popped, trivial methods in
//! place, the stub), the binary operations' general paths, the hand-over to the
//! interpreter, the write barrier's check, and a trampoline per stub (which passes the VM).
//!
//! A routine runs on its caller's registers (`rbx`, `r12`-`r14`: see the module above) and
//! is a native frame the VM never sees: its caller made the VM's view exact, or the routine
//! makes it so before anything that can look (a stub, a call). It answers a status in `eax`
//! (`Continue`: go on) unless said otherwise. A routine that calls sets up a frame pointer
//! (so native profilers walk through it) and keeps the stack 16-byte aligned.
//!
//! Sends and binary operations take the site in `esi` and where they are in `rdx`, packed
//! by [`packed`]: the stack height `h` (bits 0-15), the argument count (16-23) and the
//! instruction to resume at (32-63).

use super::arith::{bool_op, boolean, double_operands, encode_double, Cond};
use super::ops::NIL;
use super::Asm;
use crate::numbers::has_float_form;
use dynasmrt::{dynasm, DynamicLabel, DynasmApi, DynasmLabelApi, VecAssembler};
use tally_heap::object::HEADER_BYTES;
use tally_vm::jit::{Layout, SharedCode, Status, Stub};
use tally_vm::runtime::{
    IntOp, TRIVIAL_CONSTANT, TRIVIAL_GETTER, TRIVIAL_RECEIVER, TRIVIAL_SETTER,
};

/// The binary operations, each with a routine of its own.
const INT_OPS: [IntOp; 20] = [
    IntOp::None,
    IntOp::Add,
    IntOp::Sub,
    IntOp::Mul,
    IntOp::Less,
    IntOp::Greater,
    IntOp::LessEq,
    IntOp::GreaterEq,
    IntOp::Equal,
    IntOp::NotEqual,
    IntOp::BitAnd,
    IntOp::FloatDiv,
    IntOp::And,
    IntOp::Or,
    IntOp::Div,
    IntOp::Mod,
    IntOp::Rem,
    IntOp::BitXor,
    IntOp::ShiftLeft,
    IntOp::ShiftRight,
];

/// `h`, `argc` and the instruction to resume at, as a send or binary routine takes them
/// in `rdx`; an error (the code stays interpreted) for a height or an instruction index
/// beyond the fields.
pub(super) fn packed(h: i32, argc: i32, resume: usize) -> Result<i64, String> {
    if !(0..1 << 16).contains(&h) || !(0..256).contains(&argc) || resume > u32::MAX as usize {
        return Err(format!(
            "a send at stack height {h} with {argc} arguments, beyond what the baseline's \
             send routine takes"
        ));
    }
    Ok(((resume as i64) << 32) | ((argc as i64) << 16) | h as i64)
}

/// Where the routines are.
pub(crate) struct Routines {
    pub(super) send: usize,
    /// The send that also counts the receiver's class in the value table in `r8`.
    pub(super) send_counting: usize,
    binary: Vec<(IntOp, usize)>,
    /// `edx` = `h`, `ecx` = the instruction: makes the frame exact and leaves the calling
    /// function (jumped to, not called) with `Interpret`.
    pub(super) handover: usize,
    /// After a store of reference `rax` into object `rsi`: remembers the object when its
    /// unlog bit is set. Keeps nothing.
    pub(super) barrier: usize,
    stubs: Vec<(Stub, usize)>,
    /// Each routine's name and place, for external profilers.
    pub(super) named: Vec<SharedCode>,
}

impl Routines {
    /// The routine of binary operation `op`.
    pub(super) fn binary(&self, op: IntOp) -> usize {
        self.binary
            .iter()
            .find(|(o, _)| *o == op)
            .map(|&(_, at)| at)
            .expect("every operation has a routine")
    }

    /// The trampoline of `stub`: a call of it with the VM and the arguments from `esi` on.
    pub(super) fn stub(&self, stub: Stub) -> usize {
        self.stubs
            .iter()
            .find(|(s, _)| *s == stub)
            .map(|&(_, at)| at)
            .expect("every stub has a trampoline")
    }
}

/// Writes the routines for code at `base`: their bytes and where each is.
pub(super) fn write(layout: &Layout, base: usize) -> Result<(Vec<u8>, Routines), String> {
    let mut w = Writer {
        a: VecAssembler::new(base),
        layout,
        base,
        starts: Vec::new(),
    };
    let mut stubs = Vec::new();
    for stub in layout.stubs.all() {
        let at = w.start(format!("trampoline:{}", stub.name()));
        let address = stub.address() as i64;
        dynasm!(w.a
            ; .arch x64
            ; mov rdi, rbx
            ; mov rax, QWORD address
            ; jmp rax
        );
        stubs.push((stub, at));
    }
    let send = w.send(false);
    let send_counting = w.send(true);
    let mut binary = Vec::new();
    for op in INT_OPS {
        binary.push((op, w.binary(op)));
    }
    let handover = w.handover();
    let barrier = w.barrier();
    let end = w.a.offset().0;
    let bytes = w.a.finalize().map_err(|e| format!("assembling: {e}"))?;
    let mut named: Vec<SharedCode> = Vec::new();
    for (k, (name, start)) in w.starts.iter().enumerate() {
        let stop = w.starts.get(k + 1).map_or(end, |(_, s)| *s);
        named.push(SharedCode {
            name: name.clone(),
            start: base + start,
            size: stop - start,
        });
    }
    let routines = Routines {
        send,
        send_counting,
        binary,
        handover,
        barrier,
        stubs,
        named,
    };
    Ok((bytes, routines))
}

struct Writer<'a> {
    a: Asm,
    layout: &'a Layout,
    /// The address the code is assembled for.
    base: usize,
    /// Each routine's name and offset, in order.
    starts: Vec<(String, usize)>,
}

macro_rules! w {
    ($w:expr; $($t:tt)*) => {
        dynasm!($w.a ; .arch x64 ; $($t)*)
    };
}

impl Writer<'_> {
    /// Starts routine `name` on a 16-byte boundary; answers its address.
    fn start(&mut self, name: String) -> usize {
        self.a.align(16, 0xcc);
        let at = self.a.offset().0;
        self.starts.push((name, at));
        self.base + at
    }

    /// `push rbp; mov rbp, rsp`, then the site (`esi`) and the packed operand (`rdx`)
    /// pushed: `[rbp - 8]` the site, `[rbp - 16]` `h` (a u16), `[rbp - 14]` `argc` (a u8),
    /// `[rbp - 12]` the instruction to resume at (a u32). The stack is aligned.
    fn enter_with_operands(&mut self) {
        w!(self
            ; push rbp
            ; mov rbp, rsp
            ; push rsi
            ; push rdx
        );
    }

    /// The frame exact at the call: `h` values above its base, `ip` the instruction to
    /// resume at. Uses `rcx`.
    fn sync_from_operands(&mut self) {
        let (stack_len, frame_ip) = (self.layout.stack_len, self.layout.frame_ip);
        w!(self
            ; movzx ecx, WORD [rbp - 16]
            ; add rcx, r14
            ; mov [rbx + stack_len], rcx
            ; mov ecx, DWORD [rbp - 12]
            ; mov DWORD [r12 + frame_ip], ecx
        );
    }

    /// `rcx` := the receiver's slot index, `h - 1 - argc`. Uses `r10`.
    fn receiver_index(&mut self) {
        w!(self
            ; movzx ecx, WORD [rbp - 16]
            ; movzx r10d, BYTE [rbp - 14]
            ; sub ecx, r10d
            ; dec ecx
        );
    }

    /// Calls `stub` (the VM in `rdi`, its other arguments already placed).
    fn call_stub(&mut self, stub: Stub) {
        let address = stub.address() as i64;
        w!(self
            ; mov rdi, rbx
            ; mov rax, QWORD address
            ; call rax
        );
    }

    /// `rsi` := the receiver (slot `rcx`) when it is an object with field `rdx`; else to
    /// `slow`. Uses `eax`.
    fn receiver_with_field(&mut self, slow: DynamicLabel) {
        w!(self
            ; mov rsi, [r13 + rcx * 8]
            ; test sil, 7
            ; jnz =>slow
            ; test rsi, rsi
            ; jz =>slow
            ; mov eax, DWORD [rsi + 8]
            ; cmp rax, rdx
            ; jbe =>slow
        );
    }

    /// The send: see [`Routines::send`]. Answers `Continue` with the result in the
    /// receiver's slot and the frame exact at the instruction to resume at, or the stub's
    /// status.
    fn send(&mut self, counting: bool) -> usize {
        let name = if counting { "send_counting" } else { "send" };
        let at = self.start(format!("routine:{name}"));
        let l = self.layout;
        let c = &l.calls;
        let slow = self.a.new_dynamic_label();
        let frameless = self.a.new_dynamic_label();
        let leave = self.a.new_dynamic_label();
        self.enter_with_operands();
        // The receiver's class in `ecx`: small integers and objects here, other immediates
        // sent.
        self.receiver_index();
        let int_class = c.integer_class as i32;
        w!(self
            ; mov rax, [r13 + rcx * 8]
            ; mov ecx, int_class
            ; test al, 1
            ; jnz >have_class
            ; test al, 7
            ; jnz =>slow
            ; test rax, rax
            ; jz =>slow
            ; mov ecx, DWORD [rax + 4]
            ; have_class:
        );
        if counting {
            self.count_value();
        }
        // The inline cache's two entries: the target's code id in `eax`, its `&Code` in
        // `rsi`.
        let (sites_base, codes_base, site_size) = (c.sites_base, c.codes_base, c.site_size);
        let (class1, code1, class2, code2) =
            (c.site_class1, c.site_code1, c.site_class2, c.site_code2);
        w!(self
            ; imul edx, DWORD [rbp - 8], site_size
            ; add rdx, [rbx + sites_base]
            ; mov eax, DWORD [rdx + code1]
            ; cmp ecx, DWORD [rdx + class1]
            ; je >hit
            ; mov eax, DWORD [rdx + code2]
            ; cmp ecx, DWORD [rdx + class2]
            ; jne =>slow
            ; hit:
            ; mov rdx, [rbx + codes_base]
            ; mov rsi, [rdx + rax * 8]
        );
        // The target: compiled, a plain frame of the send's arity, no context to make, and
        // room for its frame (the frame stack's depth in `r15`).
        let (compiled, plain, nargs) = (c.code_compiled, c.code_plain_frame, c.code_num_args);
        let (context_size, room) = (c.code_context_size, c.code_room);
        let (frame_stack, frames_len, frames_limit) = (l.frame_stack, l.frames_len, c.frames_limit);
        let (capacity, native_limit) = (c.stack_capacity, c.native_stack_limit);
        w!(self
            ; cmp QWORD [rsi + compiled], 1
            ; jbe =>frameless
            ; cmp BYTE [rsi + plain], 0
            ; je =>frameless
            ; movzx edx, BYTE [rbp - 14]
            ; cmp WORD [rsi + nargs], dx
            ; jne =>frameless
            ; cmp WORD [rsi + context_size], 0
            ; jne =>frameless
            ; mov rdx, [rbx + frame_stack]
            ; mov r15, [rdx + frames_len]
            ; cmp r15, [rdx + frames_limit]
            ; jae =>frameless
            ; mov rcx, [rbx + capacity]
            ; movzx edx, WORD [rbp - 16]
            ; add rdx, r14
            ; sub rcx, rdx
            ; mov edx, DWORD [rsi + room]
            ; cmp rcx, rdx
            ; jb =>frameless
            ; cmp rsp, [rbx + native_limit]
            ; jbe =>frameless
        );
        self.push_and_call(leave);

        // A trivial method done in place, as the interpreter does when no profiler hook is
        // due (a raised flag takes the stub).
        let (getter, constant, done) = (
            self.a.new_dynamic_label(),
            self.a.new_dynamic_label(),
            self.a.new_dynamic_label(),
        );
        let (trivial_kind, trivial_operand) = (c.code_trivial_kind, c.code_trivial_operand);
        let flag = l.yieldpoint_flag as i64;
        let header = HEADER_BYTES as i32;
        w!(self
            ; =>frameless
            ; movzx edx, BYTE [rbp - 14]
            ; cmp WORD [rsi + nargs], dx
            ; jne =>slow
            ; mov rax, QWORD flag
            ; cmp BYTE [rax], 0
            ; jne =>slow
            ; movzx eax, BYTE [rsi + trivial_kind]
            ; mov rdx, [rsi + trivial_operand]
            ; cmp eax, TRIVIAL_GETTER as i32
            ; je =>getter
            ; cmp eax, TRIVIAL_CONSTANT as i32
            ; je =>constant
            ; cmp eax, TRIVIAL_RECEIVER as i32
            ; je =>done
            // A setter takes one argument: the arity was checked.
            ; cmp eax, TRIVIAL_SETTER as i32
            ; jne =>slow
        );
        // Getter and setter: field `rdx` of the receiver, when it is an object that has it.
        self.receiver_index();
        self.receiver_with_field(slow);
        w!(self
            ; mov rax, [r13 + rcx * 8 + 8]
            ; mov [rsi + rdx * 8 + header], rax
        );
        self.barrier_check(done);
        w!(self
            ; jmp =>done
            ; =>getter
        );
        self.receiver_index();
        self.receiver_with_field(slow);
        w!(self
            ; mov rax, [rsi + rdx * 8 + header]
            ; mov [r13 + rcx * 8], rax
            ; jmp =>done
            ; =>constant
        );
        self.receiver_index();
        w!(self
            ; mov [r13 + rcx * 8], rdx
            ; =>done
            ; xor eax, eax
            ; jmp =>leave
            ; =>slow
        );
        self.sync_from_operands();
        w!(self; mov esi, DWORD [rbp - 8]);
        self.call_stub(l.stubs.send);
        w!(self
            ; =>leave
            ; mov rsp, rbp
            ; pop rbp
            ; ret
        );
        at
    }

    /// Pushes the frame of the callee `rsi` (code id in `eax`, the frame stack's depth in
    /// `r15`, room checked) over the receiver and arguments, calls its compiled function,
    /// and on its return pops the frame with the result in the receiver's slot, through the
    /// epilogue stub when the exit depth is tripped; any other answer goes to `leave` as it
    /// is.
    fn push_and_call(&mut self, leave: DynamicLabel) {
        let l = self.layout;
        let c = &l.calls;
        // The callee's frame, written before the depth that makes it visible to samplers.
        self.sync_from_operands();
        let (frame_stack, frames_base, frames_len) = (l.frame_stack, l.frames_base, l.frames_len);
        let (frame_size, frame_code, frame_ip, frame_bp) =
            (l.frame_size, c.frame_code, l.frame_ip, l.frame_bp);
        let (frame_ctx, frame_closure) = (l.frame_ctx, c.frame_closure);
        let (num_locals, compiled, stack_len) = (c.code_num_locals, c.code_compiled, l.stack_len);
        w!(self
            ; mov rdx, [rbx + frame_stack]
            ; mov rdi, [rdx + frames_base]
            ; imul rcx, r15, frame_size
            ; add rdi, rcx
            ; mov DWORD [rdi + frame_code], eax
            ; mov DWORD [rdi + frame_ip], 0
        );
        self.receiver_index();
        w!(self; add rcx, r14);
        if l.mark_frames {
            // `bp` and `mark` are neighbours: one store writes both (little-endian, `bp`
            // first), so marking costs a profiled call no store of its own.
            debug_assert_eq!(l.frame_mark, l.frame_bp + 4);
            let tier = tally_vm::jit::TierCallCounter::tier_offset_in_code();
            w!(self
                ; movzx eax, BYTE [rsi + tier]
                ; shl rax, 32
                ; mov r8d, ecx
                ; or rax, r8
                ; mov [rdi + frame_bp], rax
            );
        } else {
            w!(self; mov DWORD [rdi + frame_bp], ecx);
        }
        w!(self
            ; mov QWORD [rdi + frame_ctx], NIL
            ; mov QWORD [rdi + frame_closure], 0
            ; lea rax, [r15 + 1]
            ; mov [rdx + frames_len], rax
            // Its stack locals, nil, from slot `h`.
            ; movzx eax, WORD [rsi + num_locals]
            ; movzx r8d, WORD [rbp - 16]
            ; lea r10, [r14 + r8]
            ; add r10, rax
            ; mov [rbx + stack_len], r10
            ; lea r8, [r13 + r8 * 8]
            ; lea r9, [r8 + rax * 8]
            ; jmp >test
            ; fill:
            ; mov QWORD [r8], NIL
            ; add r8, 8
            ; test:
            ; cmp r8, r9
            ; jb <fill
            ; mov rax, [rsi + compiled]
            ; mov rdx, rcx
            ; mov rsi, rdi
            ; mov rdi, rbx
            ; xor ecx, ecx
            ; call rax
            ; cmp eax, Status::Returned as i32
            ; jne =>leave
        );
        // The callee returned the value on top of its stack: pop its frame, as
        // `Vm::pop_frame` does.
        let (stack_base, exit_depth) = (l.stack_base, c.frames_exit_depth);
        let epilogue = self.a.new_dynamic_label();
        w!(self
            ; mov rax, [rbx + stack_len]
            ; mov rdx, [rbx + stack_base]
            ; mov rax, [rdx + rax * 8 - 8]
        );
        self.receiver_index();
        w!(self
            ; mov [r13 + rcx * 8], rax
            ; mov rdx, [rbx + frame_stack]
            ; mov [rdx + frames_len], r15
            ; lea rcx, [r14 + rcx + 1]
            ; mov [rbx + stack_len], rcx
            ; mov ecx, DWORD [rbp - 12]
            ; mov DWORD [r12 + frame_ip], ecx
            ; cmp r15, [rdx + exit_depth]
            ; jbe =>epilogue
            ; xor eax, eax
            ; jmp =>leave
            ; =>epilogue
        );
        self.call_stub(l.stubs.epilogue);
        w!(self; jmp =>leave);
    }

    /// Counts the class in `ecx` in the value table at `r8` as `class | 1 << 32` (never 0,
    /// so a key match means a counted slot) while the table's burst lasts
    /// (`ValueTable::record_in_burst`): slot 0, then the slot `(value × multiplier) >> shift`
    /// holding the value: add one (no lock test, see `TableLayout`), anything else through the
    /// `record_value` stub. Keeps `ecx`. The stub neither allocates nor changes frames.
    fn count_value(&mut self) {
        let l = tally_vm::tally_profile::values::TableLayout::OF_VALUE_TABLE;
        let (burst_left, keys, counts, multiplier, shift) =
            (l.burst_left, l.keys, l.counts, l.multiplier, l.shift);
        let done = self.a.new_dynamic_label();
        w!(self
            ; cmp DWORD [r8 + burst_left], 0
            ; je =>done
            ; sub DWORD [r8 + burst_left], 1
            ; mov r9d, ecx
            ; bts r9, 32
            // Slot 0 first: a send that sees one class (most do) finds it there with no
            // hashing.
            ; cmp [r8 + keys], r9
            ; jne >hashed
            ; add QWORD [r8 + counts], 1
            ; jmp =>done
            ; hashed:
            ; mov r10, r9
            ; imul r10, [r8 + multiplier]
            ; mov r11, rcx
            ; movzx ecx, BYTE [r8 + shift]
            ; shr r10, cl
            ; mov rcx, r11
            ; lea r10, [r8 + r10 * 8]
            ; cmp [r10 + keys], r9
            ; jne >record
            ; add QWORD [r10 + counts], 1
            ; jmp =>done
            ; record:
            ; mov r15, rcx
            ; mov rsi, r8
            ; mov rdx, r9
        );
        self.call_stub(self.layout.stubs.record_value);
        w!(self
            ; mov rcx, r15
            ; =>done
        );
    }

    /// After a store of `rax` into object `rsi`: unless `rax` is an immediate, the barrier
    /// routine's check; then to `done`.
    fn barrier_check(&mut self, done: DynamicLabel) {
        if self.layout.unlog_table.is_none() {
            return;
        }
        w!(self
            ; test al, 7
            ; jnz =>done
        );
        self.barrier_body();
    }

    /// The write barrier's check and slow path for object `rsi` (under a generational plan):
    /// when the object's unlog bit is set (an old object not yet remembered), the
    /// `write_barrier` stub remembers it. It neither allocates nor touches frames. Uses
    /// `rcx`, `rdx`; the stack must be aligned for a call.
    fn barrier_body(&mut self) {
        let Some(table) = self.layout.unlog_table else {
            return;
        };
        w!(self
            ; mov rcx, rsi
            ; shr rcx, 6
            ; mov rdx, QWORD table as i64
            ; movzx edx, BYTE [rdx + rcx]
            ; mov ecx, esi
            ; shr ecx, 3
            ; and ecx, 7
            ; bt edx, ecx
            ; jnc >unlogged
        );
        self.call_stub(self.layout.stubs.write_barrier);
        w!(self; unlogged:);
    }

    /// The barrier routine: see [`Routines::barrier`].
    fn barrier(&mut self) -> usize {
        let at = self.start("routine:barrier".into());
        w!(self
            ; push rbp
            ; mov rbp, rsp
        );
        self.barrier_body();
        w!(self
            ; pop rbp
            ; ret
        );
        at
    }

    /// The hand-over: see [`Routines::handover`]. Restores what the function's prologue
    /// saved, as its own exit does.
    fn handover(&mut self) -> usize {
        let at = self.start("routine:handover".into());
        let (stack_len, frame_ip) = (self.layout.stack_len, self.layout.frame_ip);
        w!(self
            ; lea r11, [r14 + rdx]
            ; mov [rbx + stack_len], r11
            ; mov DWORD [r12 + frame_ip], ecx
            ; mov eax, Status::Interpret as i32
            ; add rsp, 8
            ; pop r15
            ; pop r14
            ; pop r13
            ; pop r12
            ; pop rbx
            ; pop rbp
            ; ret
        );
        at
    }

    /// Binary operation `op`'s routine, for operands that are not two small integers (or
    /// whose result does not fit one): doubles, symbols, a String receiver of `=`, Booleans
    /// of `&&` and `||` answered into the receiver's slot; anything else sent through the
    /// `send_binary` stub.
    fn binary(&mut self, op: IntOp) -> usize {
        let at = self.start(format!("routine:binary:{op:?}"));
        let slow = self.a.new_dynamic_label();
        let done = self.a.new_dynamic_label();
        let leave = self.a.new_dynamic_label();
        self.enter_with_operands();
        // `rdi` := the receiver's slot, `h - 2` (no sequence below uses `rdi` but a call).
        w!(self
            ; movzx ecx, WORD [rbp - 16]
            ; lea rdi, [r13 + rcx * 8 - 16]
            ; mov rax, [rdi]
            ; mov rdx, [rdi + 8]
        );
        let equality = matches!(op, IntOp::Equal | IntOp::NotEqual);
        if op == IntOp::And || op == IntOp::Or {
            bool_op(&mut self.a, op, slow);
            w!(self; jmp =>done);
        } else if has_float_form(op) {
            let not_doubles = if equality {
                self.a.new_dynamic_label()
            } else {
                slow
            };
            double_operands(&mut self.a, equality, op == IntOp::FloatDiv, not_doubles);
            match Cond::of_doubles(op) {
                Some(cond) => {
                    w!(self; ucomisd xmm0, xmm1);
                    boolean(&mut self.a, cond);
                }
                None => {
                    match op {
                        IntOp::Add => w!(self; addsd xmm0, xmm1),
                        IntOp::Sub => w!(self; subsd xmm0, xmm1),
                        IntOp::Mul => w!(self; mulsd xmm0, xmm1),
                        // `//`: a zero divisor takes the general path, which reports it or
                        // answers infinity.
                        _ => w!(self
                            ; xorpd xmm2, xmm2
                            ; ucomisd xmm1, xmm2
                            ; je =>slow
                            ; divsd xmm0, xmm1
                        ),
                    }
                    encode_double(&mut self.a, slow);
                }
            }
            w!(self; jmp =>done);
            if equality {
                w!(self; =>not_doubles);
                self.non_numbers_equal(op, slow, done);
            }
        } else {
            w!(self; jmp =>slow);
        }
        w!(self
            ; =>done
            ; mov [rdi], rax
            ; xor eax, eax
            ; jmp =>leave
            ; =>slow
        );
        self.sync_from_operands();
        w!(self; mov esi, DWORD [rbp - 8]);
        self.call_stub(self.layout.stubs.send_binary);
        w!(self
            ; =>leave
            ; mov rsp, rbp
            ; pop rbp
            ; ret
        );
        at
    }

    /// `=` or `~=` of operands `rax` and `rdx` that are not numbers, where it needs no send:
    /// two symbols (interned, so identity: `IntOp::apply_symbols`), and for `=` a String
    /// receiver (the class itself, whose `=` is the primitive: the pure `string_equal` stub).
    /// The Boolean to `done` in `rax` (with `rdi` the receiver's slot); anything else to
    /// `slow`.
    fn non_numbers_equal(&mut self, op: IntOp, slow: DynamicLabel, done: DynamicLabel) {
        let symbol_tag = 0b010;
        let string = self
            .layout
            .string_with_primitive_equal
            .filter(|_| op == IntOp::Equal);
        let not_symbols = if string.is_some() {
            self.a.new_dynamic_label()
        } else {
            slow
        };
        let cond = if op == IntOp::Equal {
            Cond::E
        } else {
            Cond::Ne
        };
        w!(self
            ; mov ecx, eax
            ; and ecx, 7
            ; cmp ecx, symbol_tag
            ; jne =>not_symbols
            ; mov ecx, edx
            ; and ecx, 7
            ; cmp ecx, symbol_tag
            ; jne =>not_symbols
            ; cmp rax, rdx
        );
        boolean(&mut self.a, cond);
        w!(self; jmp =>done);
        if let Some(string) = string {
            w!(self
                ; =>not_symbols
                ; test al, 7
                ; jnz =>slow
                ; test rax, rax
                ; jz =>slow
                ; cmp DWORD [rax + 4], string as i32
                ; jne =>slow
                ; mov rsi, rax
            );
            self.call_stub(self.layout.stubs.string_equal);
            w!(self
                ; test eax, eax
                ; movzx ecx, WORD [rbp - 16]
                ; lea rdi, [r13 + rcx * 8 - 16]
            );
            // `lea` and `movzx` keep the flags of the test.
            boolean(&mut self.a, Cond::Ne);
            w!(self; jmp =>done);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::packed;

    #[test]
    fn the_packed_operand_holds_height_arguments_and_resume_point_or_refuses() {
        let p = packed(300, 2, 70_000).unwrap();
        assert_eq!(p & 0xffff, 300);
        assert_eq!((p >> 16) & 0xff, 2);
        assert_eq!(p >> 32, 70_000);
        assert!(packed(1 << 16, 0, 1).is_err());
        assert!(packed(4, 256, 1).is_err());
    }
}
