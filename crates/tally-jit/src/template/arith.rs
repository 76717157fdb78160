//! Binary sends and compare-and-branch: two small integers in place, everything else (an
//! operand of another kind, a result that does not fit) through the operation's shared
//! routine (`routines`), which answers doubles, symbols, Strings and Booleans in place and
//! sends the rest. Also the instruction sequences the routines share with the templates.

use super::ops::{slot, FALSE, TRUE};
use super::{asm, Asm, Emitter};
use crate::numbers::{has_int_form, FLOAT_TAG};
use dynasmrt::{dynasm, DynamicLabel, DynasmApi, DynasmLabelApi};
use tally_vm::runtime::IntOp;

/// The small-float encoding (`tally_heap::value`): payload = the IEEE bits rotated left by
/// one, rebased so exponent `SMALL_FLOAT_EXP_BASE` is 0, below `PAYLOAD_LIMIT`.
const ROTATED_EXP_OFFSET: i64 = (tally_heap::value::SMALL_FLOAT_EXP_BASE << 53) as i64;
const PAYLOAD_LIMIT: i64 = (tally_heap::value::SMALL_FLOAT_EXP_COUNT << 53) as i64;

/// A condition on the flags: signed (small integers: tagged ones order like their values),
/// unsigned (`ucomisd` of doubles, never NaN here) and equality.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(super) enum Cond {
    L,
    G,
    Le,
    Ge,
    E,
    Ne,
    B,
    A,
    Be,
    Ae,
}

impl Cond {
    pub(super) fn of_ints(op: IntOp) -> Option<Cond> {
        Some(match op {
            IntOp::Less => Cond::L,
            IntOp::Greater => Cond::G,
            IntOp::LessEq => Cond::Le,
            IntOp::GreaterEq => Cond::Ge,
            IntOp::Equal => Cond::E,
            IntOp::NotEqual => Cond::Ne,
            _ => return None,
        })
    }

    pub(super) fn of_doubles(op: IntOp) -> Option<Cond> {
        Some(match op {
            IntOp::Less => Cond::B,
            IntOp::Greater => Cond::A,
            IntOp::LessEq => Cond::Be,
            IntOp::GreaterEq => Cond::Ae,
            IntOp::Equal => Cond::E,
            IntOp::NotEqual => Cond::Ne,
            _ => return None,
        })
    }

    fn negated(self) -> Cond {
        match self {
            Cond::L => Cond::Ge,
            Cond::Ge => Cond::L,
            Cond::G => Cond::Le,
            Cond::Le => Cond::G,
            Cond::E => Cond::Ne,
            Cond::Ne => Cond::E,
            Cond::B => Cond::Ae,
            Cond::Ae => Cond::B,
            Cond::A => Cond::Be,
            Cond::Be => Cond::A,
        }
    }
}

/// Jumps to `to` when `cond` holds on the flags.
fn jump_on(a: &mut Asm, cond: Cond, to: DynamicLabel) {
    match cond {
        Cond::L => dynasm!(a; .arch x64; jl =>to),
        Cond::G => dynasm!(a; .arch x64; jg =>to),
        Cond::Le => dynasm!(a; .arch x64; jle =>to),
        Cond::Ge => dynasm!(a; .arch x64; jge =>to),
        Cond::E => dynasm!(a; .arch x64; je =>to),
        Cond::Ne => dynasm!(a; .arch x64; jne =>to),
        Cond::B => dynasm!(a; .arch x64; jb =>to),
        Cond::A => dynasm!(a; .arch x64; ja =>to),
        Cond::Be => dynasm!(a; .arch x64; jbe =>to),
        Cond::Ae => dynasm!(a; .arch x64; jae =>to),
    }
}

/// `rax` := `true` when `cond` holds on the flags, else `false`. Uses `edx`.
pub(super) fn boolean(a: &mut Asm, cond: Cond) {
    dynasm!(a
        ; .arch x64
        ; mov eax, FALSE
        ; mov edx, TRUE
    );
    match cond {
        Cond::L => dynasm!(a; .arch x64; cmovl eax, edx),
        Cond::G => dynasm!(a; .arch x64; cmovg eax, edx),
        Cond::Le => dynasm!(a; .arch x64; cmovle eax, edx),
        Cond::Ge => dynasm!(a; .arch x64; cmovge eax, edx),
        Cond::E => dynasm!(a; .arch x64; cmove eax, edx),
        Cond::Ne => dynasm!(a; .arch x64; cmovne eax, edx),
        Cond::B => dynasm!(a; .arch x64; cmovb eax, edx),
        Cond::A => dynasm!(a; .arch x64; cmova eax, edx),
        Cond::Be => dynasm!(a; .arch x64; cmovbe eax, edx),
        Cond::Ae => dynasm!(a; .arch x64; cmovae eax, edx),
    }
}

/// `xmm0` and `xmm1` := the operands `rax` and `rdx` as doubles, when
/// `IntOp::apply_float` would answer them in place: both immediate doubles for an `exact`
/// comparison; else each an immediate double or a small integer, and at least one a double
/// unless `ints_too` (`//`, which makes a double of two integers). Else to `fail`.
pub(super) fn double_operands(a: &mut Asm, exact: bool, ints_too: bool, fail: DynamicLabel) {
    let float_tag = FLOAT_TAG as i32;
    dynasm!(a
        ; .arch x64
        ; mov ecx, eax
        ; and ecx, 7
        ; cmp ecx, float_tag
        ; sete r8b
        ; mov ecx, edx
        ; and ecx, 7
        ; cmp ecx, float_tag
        ; sete r9b
    );
    if exact {
        dynasm!(a
            ; .arch x64
            ; mov cl, r8b
            ; and cl, r9b
            ; jz =>fail
        );
    } else {
        dynasm!(a
            ; .arch x64
            ; mov r10d, eax
            ; and r10d, 1
            ; or r10b, r8b
            ; mov r11d, edx
            ; and r11d, 1
            ; or r11b, r9b
            ; and r10b, r11b
            ; jz =>fail
        );
        if !ints_too {
            dynasm!(a
                ; .arch x64
                ; mov cl, r8b
                ; or cl, r9b
                ; jz =>fail
            );
        }
    }
    let offset = ROTATED_EXP_OFFSET;
    // Decoded when a double (payloads 0 and 1 are ±0.0, the others rebased), converted
    // when a small integer.
    dynasm!(a
        ; .arch x64
        ; test r8b, r8b
        ; jz >x_int
        ; mov rcx, rax
        ; shr rcx, 3
        ; mov r11, QWORD offset
        ; add r11, rcx
        ; cmp rcx, 1
        ; cmova rcx, r11
        ; ror rcx, 1
        ; movq xmm0, rcx
        ; jmp >x_done
        ; x_int:
        ; mov rcx, rax
        ; sar rcx, 1
        ; cvtsi2sd xmm0, rcx
        ; x_done:
        ; test r9b, r9b
        ; jz >y_int
        ; mov rcx, rdx
        ; shr rcx, 3
        ; mov r11, QWORD offset
        ; add r11, rcx
        ; cmp rcx, 1
        ; cmova rcx, r11
        ; ror rcx, 1
        ; movq xmm1, rcx
        ; jmp >y_done
        ; y_int:
        ; mov rcx, rdx
        ; sar rcx, 1
        ; cvtsi2sd xmm1, rcx
        ; y_done:
    );
}

/// `rax` := the immediate encoding of the double in `xmm0` (as `Value::from_small_float`),
/// or to `slow` when it needs a boxed double.
pub(super) fn encode_double(a: &mut Asm, slow: DynamicLabel) {
    let (minus_offset, window) = (ROTATED_EXP_OFFSET.wrapping_neg(), PAYLOAD_LIMIT - 2);
    let float_tag = FLOAT_TAG as i32;
    dynasm!(a
        ; .arch x64
        ; movq rax, xmm0
        ; rol rax, 1
        ; cmp rax, 1
        ; jbe >zero
        ; mov rcx, QWORD minus_offset
        ; add rax, rcx
        ; lea rcx, [rax - 2]
        ; mov r11, QWORD window
        ; cmp rcx, r11
        ; jae =>slow
        ; zero:
        ; shl rax, 3
        ; or rax, float_tag
    );
}

/// `rax` := `rax op rdx` for two tagged small integers, as `IntOp::apply` answers it, or to
/// `slow` where that takes the general path (a result that does not fit, a zero divisor, a
/// shift out of range).
fn int_arith(a: &mut Asm, op: IntOp, slow: DynamicLabel) {
    match op {
        // (2x+1) + 2y = 2(x+y)+1; the i64 operation overflows exactly when x+y needs more
        // than 63 bits.
        IntOp::Add => dynasm!(a
            ; .arch x64
            ; lea rcx, [rdx - 1]
            ; add rax, rcx
            ; jo =>slow
        ),
        IntOp::Sub => dynasm!(a
            ; .arch x64
            ; lea rcx, [rdx - 1]
            ; sub rax, rcx
            ; jo =>slow
        ),
        // x * 2y = 2xy, then the tag.
        IntOp::Mul => dynasm!(a
            ; .arch x64
            ; sar rax, 1
            ; lea rcx, [rdx - 1]
            ; imul rax, rcx
            ; jo =>slow
            ; or rax, 1
        ),
        IntOp::BitAnd => dynasm!(a; .arch x64; and rax, rdx),
        // (2x+1) ^ (2y+1) = 2(x^y): the tag again.
        IntOp::BitXor => dynasm!(a
            ; .arch x64
            ; xor rax, rdx
            ; or rax, 1
        ),
        IntOp::Div | IntOp::Mod | IntOp::Rem => {
            // No division traps here: the operands are 63-bit, so never MIN / -1.
            dynasm!(a
                ; .arch x64
                ; mov rcx, rdx
                ; sar rcx, 1
                ; jz =>slow
                ; sar rax, 1
                ; cqo
                ; idiv rcx
            );
            match op {
                IntOp::Div => {}
                IntOp::Rem => dynasm!(a; .arch x64; mov rax, rdx),
                _ => dynasm!(a
                    ; .arch x64
                    // Floored: a remainder whose sign differs from the divisor's moves by it.
                    ; test rdx, rdx
                    ; jz >floored
                    ; mov r8, rdx
                    ; xor r8, rcx
                    ; jns >floored
                    ; add rdx, rcx
                    ; floored:
                    ; mov rax, rdx
                ),
            }
            // -2^62 / -1 is the one quotient that leaves the small integers.
            dynasm!(a
                ; .arch x64
                ; add rax, rax
                ; jo =>slow
                ; or rax, 1
            );
        }
        // (2x) << s, shifted back, must give 2x again: no bit of x is lost.
        IntOp::ShiftLeft => dynasm!(a
            ; .arch x64
            ; mov rcx, rdx
            ; sar rcx, 1
            ; cmp rcx, 63
            ; jae =>slow
            ; lea r8, [rax - 1]
            ; mov r9, r8
            ; shl r9, cl
            ; mov r10, r9
            ; sar r10, cl
            ; cmp r10, r8
            ; jne =>slow
            ; lea rax, [r9 + 1]
        ),
        // A non-negative receiver, a shift within the word: its bits move down.
        IntOp::ShiftRight => dynasm!(a
            ; .arch x64
            ; mov rcx, rdx
            ; sar rcx, 1
            ; cmp rcx, 64
            ; jae =>slow
            ; sar rax, 1
            ; js =>slow
            ; shr rax, cl
            ; add rax, rax
            ; or rax, 1
        ),
        _ => dynasm!(a; .arch x64; jmp =>slow),
    }
}

/// `rax` := `rax && rdx` or `rax || rdx` for two Booleans, as the interpreter answers them
/// (`IntOp::apply_bool`); anything but two Booleans to `slow`.
pub(super) fn bool_op(a: &mut Asm, op: IntOp, slow: DynamicLabel) {
    dynasm!(a
        ; .arch x64
        ; cmp rax, TRUE
        ; je >x_ok
        ; cmp rax, FALSE
        ; jne =>slow
        ; x_ok:
        ; cmp rdx, TRUE
        ; je >y_ok
        ; cmp rdx, FALSE
        ; jne =>slow
        ; y_ok:
        ; cmp rax, TRUE
    );
    if op == IntOp::And {
        // true && y is y; false && y is false (rax).
        dynasm!(a; .arch x64; cmove rax, rdx);
    } else {
        // true || y is true (rax); false || y is y.
        dynasm!(a; .arch x64; cmovne rax, rdx);
    }
}

impl Emitter<'_> {
    /// `rax` and `rdx` := the operands in slots `h - 2` and `h - 1`; to `not_ints` unless
    /// both are small integers.
    fn int_operands(&mut self, h: i32, not_ints: DynamicLabel) {
        let (x, y) = (slot(h - 2), slot(h - 1));
        asm!(self
            ; mov rax, [r13 + x]
            ; mov rdx, [r13 + y]
            ; mov ecx, eax
            ; and ecx, edx
            ; test cl, 1
            ; jz =>not_ints
        );
    }

    /// Calls `op`'s shared routine for the binary send from `site` at instruction `i` (`h`
    /// values, the operands on top), which answers in place or sends; then on to `i + 1`.
    fn binary_routine(&mut self, op: IntOp, site: u32, h: i32, i: usize) -> Result<(), String> {
        let routine = self.routines.binary(op);
        let packed = super::routines::packed(h, 1, i + 1)?;
        let exit = self.exit;
        self.mark_routine_call(i);
        asm!(self
            ; mov esi, site as i32
            ; mov rdx, QWORD packed
            ; call extern routine
            ; test eax, eax
            ; jnz =>exit
        );
        self.go_to(i + 1)
    }

    /// A binary send from `site` with receiver and argument in slots `h - 2` and `h - 1`,
    /// resuming at `i + 1`.
    pub(super) fn send_binary(&mut self, site: u32, h: i32, i: usize) -> Result<(), String> {
        let op = self.site(site).int_op;
        self.op_label(i + 1)?;
        // Checked here: the cold path's call of the routine cannot fail.
        super::routines::packed(h, 1, i + 1)?;
        if !has_int_form(op) {
            return self.binary_routine(op, site, h, i);
        }
        let slow = self.a.new_dynamic_label();
        self.int_operands(h, slow);
        match Cond::of_ints(op) {
            Some(cond) => {
                asm!(self; cmp rax, rdx);
                boolean(&mut self.a, cond);
            }
            None => int_arith(&mut self.a, op, slow),
        }
        let to = slot(h - 2);
        asm!(self; mov [r13 + to], rax);
        self.later(move |e| {
            asm!(e; =>slow);
            e.binary_routine(op, site, h, i)
                .expect("the next instruction was found above");
        });
        self.go_to(i + 1)
    }

    /// A comparison answered and branched on at once for small integers (to `target` when
    /// its truth is `jump_if`, else past the conditional jump at `i + 1`); otherwise its
    /// routine answers it into the stack, and that jump tests the answer.
    pub(super) fn compare_and_branch(
        &mut self,
        site: u32,
        target: usize,
        jump_if: bool,
        h: i32,
        i: usize,
    ) -> Result<(), String> {
        let op = self.site(site).int_op;
        self.op_label(i + 1)?;
        super::routines::packed(h, 1, i + 1)?;
        let Some(cond) = Cond::of_ints(op) else {
            return self.binary_routine(op, site, h, i);
        };
        let taken = self.op_label(target)?;
        self.op_label(i + 2)?;
        let slow = self.a.new_dynamic_label();
        self.int_operands(h, slow);
        asm!(self; cmp rax, rdx);
        let cond = if jump_if { cond } else { cond.negated() };
        jump_on(&mut self.a, cond, taken);
        self.later(move |e| {
            asm!(e; =>slow);
            e.binary_routine(op, site, h, i)
                .expect("the next instruction was found above");
        });
        self.jump_to(i + 2)
    }
}
