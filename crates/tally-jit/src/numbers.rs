//! Numbers in the optimizing tier's code (Cranelift IR): immediate doubles decoded, computed on
//! and encoded again in place (`tally_heap::value`'s small floats), and the conditions of
//! the comparison selectors. What does not fit an immediate jumps to the caller's slow path.

use cranelift_codegen::ir::condcodes::{FloatCC, IntCC};
use cranelift_codegen::ir::{types, Block, InstBuilder, MemFlagsData, Value};
use cranelift_frontend::FunctionBuilder;
use tally_vm::jit::CallLayout;
use tally_vm::runtime::IntOp;

const I64: types::Type = types::I64;
pub(crate) const TRUE: i64 = tally_heap::Value::TRUE.0 as i64;
pub(crate) const FALSE: i64 = tally_heap::Value::FALSE.0 as i64;
/// The small-float encoding (`tally_heap::value`): tag `110`, payload = the IEEE bits rotated
/// left by one, rebased so exponent `SMALL_FLOAT_EXP_BASE` is 0, below `PAYLOAD_LIMIT`.
pub(crate) const FLOAT_TAG: i64 = 0b110;
const ROTATED_EXP_OFFSET: u64 = tally_heap::value::SMALL_FLOAT_EXP_BASE << 53;
const PAYLOAD_LIMIT: u64 = tally_heap::value::SMALL_FLOAT_EXP_COUNT << 53;

/// `x + imm` (Cranelift's builder has no immediate forms: the constant goes through `iconst`).
pub(crate) fn add_imm(b: &mut FunctionBuilder, x: Value, imm: i64) -> Value {
    let ty = b.func.dfg.value_type(x);
    let c = b.ins().iconst(ty, imm);
    b.ins().iadd(x, c)
}

pub(crate) fn and_imm(b: &mut FunctionBuilder, x: Value, imm: i64) -> Value {
    let ty = b.func.dfg.value_type(x);
    let c = b.ins().iconst(ty, imm);
    b.ins().band(x, c)
}

pub(crate) fn cmp_imm(b: &mut FunctionBuilder, cc: IntCC, x: Value, imm: i64) -> Value {
    let ty = b.func.dfg.value_type(x);
    let c = b.ins().iconst(ty, imm);
    b.ins().icmp(cc, x, c)
}

/// The double condition of a comparison selector (immediate doubles are never NaN).
pub(crate) fn float_cc(op: IntOp) -> Option<FloatCC> {
    Some(match op {
        IntOp::Less => FloatCC::LessThan,
        IntOp::Greater => FloatCC::GreaterThan,
        IntOp::LessEq => FloatCC::LessThanOrEqual,
        IntOp::GreaterEq => FloatCC::GreaterThanOrEqual,
        IntOp::Equal => FloatCC::Equal,
        IntOp::NotEqual => FloatCC::NotEqual,
        _ => return None,
    })
}

/// The integer condition of a comparison selector (tagged small integers order like their
/// values), or `None` for the others.
pub(crate) fn compare_cc(op: IntOp) -> Option<IntCC> {
    Some(match op {
        IntOp::Less => IntCC::SignedLessThan,
        IntOp::Greater => IntCC::SignedGreaterThan,
        IntOp::LessEq => IntCC::SignedLessThanOrEqual,
        IntOp::GreaterEq => IntCC::SignedGreaterThanOrEqual,
        IntOp::Equal => IntCC::Equal,
        IntOp::NotEqual => IntCC::NotEqual,
        _ => return None,
    })
}

/// Whether [`int_arith`] has an inline form of `op`.
pub(crate) fn has_int_form(op: IntOp) -> bool {
    matches!(
        op,
        IntOp::Add
            | IntOp::Sub
            | IntOp::Mul
            | IntOp::BitAnd
            | IntOp::Div
            | IntOp::Mod
            | IntOp::Rem
            | IntOp::BitXor
            | IntOp::ShiftLeft
            | IntOp::ShiftRight
    ) || compare_cc(op).is_some()
}

/// Whether `isNil` and `notNil` may be answered by a comparison with nil: the core
/// library's four definitions stand and no class redefined them (`Runtime::nil_tests`, read
/// through `vm` where `calls` says).
pub(crate) fn nil_tests_standard(b: &mut FunctionBuilder, vm: Value, calls: &CallLayout) -> Value {
    let flags = MemFlagsData::trusted();
    let standard = b
        .ins()
        .uload8(types::I32, flags, vm, calls.nil_tests_standard);
    let redefined = b
        .ins()
        .uload8(types::I32, flags, vm, calls.nil_tests_redefined);
    let all_four = cmp_imm(b, IntCC::Equal, standard, 0b1111);
    let kept = cmp_imm(b, IntCC::Equal, redefined, 0);
    b.ins().band(all_four, kept)
}

/// Goes to `fast` while `isNil` and `notNil` may be answered by a comparison with nil
/// ([`nil_tests_standard`]), else to `slow`, which is cold (a class redefined one: the
/// send is made).
pub(crate) fn branch_on_nil_tests(
    b: &mut FunctionBuilder,
    vm: Value,
    calls: &CallLayout,
    fast: Block,
    slow: Block,
) {
    let standard = nil_tests_standard(b, vm, calls);
    b.set_cold_block(slow);
    b.ins().brif(standard, fast, &[], slow, &[]);
}

/// The Boolean `isNil` (`is_nil`) or `notNil` answers for `v`.
pub(crate) fn nil_test(b: &mut FunctionBuilder, is_nil: bool, v: Value) -> Value {
    let cc = if is_nil {
        IntCC::Equal
    } else {
        IntCC::NotEqual
    };
    let is = cmp_imm(b, cc, v, tally_heap::Value::NIL.0 as i64);
    boolean(b, is)
}

/// `&&` and `||` of two Booleans, answered as the interpreter answers them
/// (`IntOp::apply_bool`); `None` for other operations. Anything but two Booleans jumps to
/// `slow`, which sends.
pub(crate) fn bool_op(
    b: &mut FunctionBuilder,
    op: IntOp,
    x: Value,
    y: Value,
    slow: Block,
) -> Option<Value> {
    if op != IntOp::And && op != IntOp::Or {
        return None;
    }
    let is_bool = |b: &mut FunctionBuilder, v| {
        let is_t = cmp_imm(b, IntCC::Equal, v, TRUE);
        let is_f = cmp_imm(b, IntCC::Equal, v, FALSE);
        b.ins().bor(is_t, is_f)
    };
    let x_bool = is_bool(b, x);
    let y_bool = is_bool(b, y);
    let both = b.ins().band(x_bool, y_bool);
    let go = b.create_block();
    b.ins().brif(both, go, &[], slow, &[]);
    b.switch_to_block(go);
    let x_true = cmp_imm(b, IntCC::Equal, x, TRUE);
    Some(if op == IntOp::And {
        let false_ = b.ins().iconst(I64, FALSE);
        b.ins().select(x_true, y, false_)
    } else {
        let true_ = b.ins().iconst(I64, TRUE);
        b.ins().select(x_true, true_, y)
    })
}

/// Whether `op` has a double form [`float_operands`] answers.
pub(crate) fn has_float_form(op: IntOp) -> bool {
    matches!(op, IntOp::Add | IntOp::Sub | IntOp::Mul | IntOp::FloatDiv) || float_cc(op).is_some()
}

/// `x op y` for two tagged small integers, as `IntOp::apply` answers it, or a jump to
/// `overflow` where that takes the general path (a result that does not fit, a zero divisor,
/// a shift out of range); `None` when the operation has no inline form.
pub(crate) fn int_arith(
    b: &mut FunctionBuilder,
    op: IntOp,
    x: Value,
    y: Value,
    overflow: Block,
) -> Option<Value> {
    let checked = |b: &mut FunctionBuilder, (r, of): (Value, Value)| {
        let ok = b.create_block();
        b.ins().brif(of, overflow, &[], ok, &[]);
        b.switch_to_block(ok);
        r
    };
    Some(match op {
        // (2x+1) + 2y = 2(x+y)+1; the i64 operation overflows exactly when x+y needs more
        // than 63 bits.
        IntOp::Add => {
            let y2 = add_imm(b, y, -1);
            let r = b.ins().sadd_overflow(x, y2);
            checked(b, r)
        }
        IntOp::Sub => {
            let y2 = add_imm(b, y, -1);
            let r = b.ins().ssub_overflow(x, y2);
            checked(b, r)
        }
        // x * 2y = 2xy, then the tag.
        IntOp::Mul => {
            let one = b.ins().iconst(I64, 1);
            let xs = b.ins().sshr(x, one);
            let y2 = add_imm(b, y, -1);
            let r = b.ins().smul_overflow(xs, y2);
            let r = checked(b, r);
            b.ins().bor(r, one)
        }
        IntOp::BitAnd => b.ins().band(x, y),
        // (2x+1) ^ (2y+1) = 2(x^y): the tag again.
        IntOp::BitXor => {
            let r = b.ins().bxor(x, y);
            b.ins().bor_imm_u(r, 1)
        }
        IntOp::Div | IntOp::Mod | IntOp::Rem => {
            let (xs, ys) = (untag(b, x), untag(b, y));
            let nonzero = cmp_imm(b, IntCC::NotEqual, ys, 0);
            go_on_if(b, nonzero, overflow);
            let q = match op {
                // No i64 division traps here: the operands are 63-bit, so never MIN / -1.
                IntOp::Div => b.ins().sdiv(xs, ys),
                _ => {
                    let r = b.ins().srem(xs, ys);
                    if op == IntOp::Mod {
                        // Floored: a remainder whose sign differs from the divisor's moves by it.
                        let moved = b.ins().iadd(r, ys);
                        let signs = b.ins().bxor(r, ys);
                        let differ = cmp_imm(b, IntCC::SignedLessThan, signs, 0);
                        let nonzero = cmp_imm(b, IntCC::NotEqual, r, 0);
                        let both = b.ins().band(differ, nonzero);
                        b.ins().select(both, moved, r)
                    } else {
                        r
                    }
                }
            };
            // -2^62 / -1 is the one quotient that leaves the small integers.
            let r = b.ins().sadd_overflow(q, q);
            let r = checked(b, r);
            b.ins().bor_imm_u(r, 1)
        }
        IntOp::ShiftLeft => {
            // (2x) << s, shifted back, must give 2x again: no bit of x is lost.
            let s = untag(b, y);
            let in_word = cmp_imm(b, IntCC::UnsignedLessThan, s, 63);
            go_on_if(b, in_word, overflow);
            let twice = add_imm(b, x, -1);
            let shifted = b.ins().ishl(twice, s);
            let back = b.ins().sshr(shifted, s);
            let kept = b.ins().icmp(IntCC::Equal, back, twice);
            go_on_if(b, kept, overflow);
            b.ins().bor_imm_u(shifted, 1)
        }
        IntOp::ShiftRight => {
            // A non-negative receiver, a shift within the word: its bits move down.
            let (xs, s) = (untag(b, x), untag(b, y));
            let in_word = cmp_imm(b, IntCC::UnsignedLessThan, s, 64);
            let non_negative = cmp_imm(b, IntCC::SignedGreaterThanOrEqual, xs, 0);
            let fits = b.ins().band(in_word, non_negative);
            go_on_if(b, fits, overflow);
            let r = b.ins().ushr(xs, s);
            let twice = b.ins().iadd(r, r);
            b.ins().bor_imm_u(twice, 1)
        }
        _ => {
            let cc = compare_cc(op)?;
            let c = b.ins().icmp(cc, x, y);
            boolean(b, c)
        }
    })
}

/// Goes on in a new block when `cond` holds, else jumps to `otherwise`.
fn go_on_if(b: &mut FunctionBuilder, cond: Value, otherwise: Block) {
    let ok = b.create_block();
    b.ins().brif(cond, ok, &[], otherwise, &[]);
    b.switch_to_block(ok);
}

/// The integer a tagged small integer stands for.
fn untag(b: &mut FunctionBuilder, v: Value) -> Value {
    let one = b.ins().iconst(I64, 1);
    b.ins().sshr(v, one)
}

/// `true` or `false` as a SOM value, from a condition.
pub(crate) fn boolean(b: &mut FunctionBuilder, c: Value) -> Value {
    let t = b.ins().iconst(I64, TRUE);
    let f = b.ins().iconst(I64, FALSE);
    b.ins().select(c, t, f)
}

/// The operands of `op` as doubles when `IntOp::apply_float` would answer them in place
/// (at least one an immediate double, the other an immediate double or a small integer;
/// both doubles for `=` and `~=`), else a jump to `slow`. `None` when `op` has no double
/// form at all.
pub(crate) fn float_operands(
    b: &mut FunctionBuilder,
    op: IntOp,
    x: Value,
    y: Value,
    slow: Block,
) -> Option<(Value, Value)> {
    if !has_float_form(op) {
        return None;
    }
    let exact = matches!(op, IntOp::Equal | IntOp::NotEqual);
    let is_float = |b: &mut FunctionBuilder, v: Value| {
        let tag = and_imm(b, v, 7);
        cmp_imm(b, IntCC::Equal, tag, FLOAT_TAG)
    };
    let (fx, fy) = (is_float(b, x), is_float(b, y));
    let ok = if exact {
        b.ins().band(fx, fy)
    } else {
        let ix = and_imm(b, x, 1);
        let ix = cmp_imm(b, IntCC::NotEqual, ix, 0);
        let iy = and_imm(b, y, 1);
        let iy = cmp_imm(b, IntCC::NotEqual, iy, 0);
        let x_ok = b.ins().bor(fx, ix);
        let y_ok = b.ins().bor(fy, iy);
        let any = b.ins().bor(fx, fy);
        let ok = b.ins().band(x_ok, y_ok);
        b.ins().band(ok, any)
    };
    let go = b.create_block();
    b.ins().brif(ok, go, &[], slow, &[]);
    b.switch_to_block(go);
    let x = number_as_double(b, x, fx);
    let y = number_as_double(b, y, fy);
    Some((x, y))
}

/// `x op y` on two doubles [`float_operands`] gave, as a SOM value: an immediate double, or
/// a Boolean for a comparison; a result that needs a boxed double, or a division by zero
/// (which the general path reports or answers), jumps to `slow`.
pub(crate) fn float_op(
    b: &mut FunctionBuilder,
    op: IntOp,
    x: Value,
    y: Value,
    slow: Block,
) -> Value {
    let r = match op {
        IntOp::Add => b.ins().fadd(x, y),
        IntOp::Sub => b.ins().fsub(x, y),
        IntOp::Mul => b.ins().fmul(x, y),
        IntOp::FloatDiv => float_quotient(b, x, y, slow),
        _ => {
            let cc = float_cc(op).expect("a comparison with a double form");
            let c = b.ins().fcmp(cc, x, y);
            return boolean(b, c);
        }
    };
    encode_small_float(b, r, slow)
}

/// `x / y` (doubles), or a jump to `slow` for a zero divisor (the general path reports
/// it or answers infinity, as the receiver's `//` does).
pub(crate) fn float_quotient(b: &mut FunctionBuilder, x: Value, y: Value, slow: Block) -> Value {
    let zero = b.ins().f64const(0.0);
    let is_zero = b.ins().fcmp(FloatCC::Equal, y, zero);
    let go = b.create_block();
    b.ins().brif(is_zero, slow, &[], go, &[]);
    b.switch_to_block(go);
    b.ins().fdiv(x, y)
}

/// `v` as a double: decoded if `is_float`, else converted from a small integer.
pub(crate) fn number_as_double(b: &mut FunctionBuilder, v: Value, is_float: Value) -> Value {
    let decoded = decode_small_float(b, v);
    let one = b.ins().iconst(I64, 1);
    let int = b.ins().sshr(v, one);
    let converted = b.ins().fcvt_from_sint(types::F64, int);
    b.ins().select(is_float, decoded, converted)
}

/// The double an immediate double `v` (tag `110`) encodes: the inverse of
/// [`encode_small_float`], whose payloads 0 and 1 are ±0.0.
pub(crate) fn decode_small_float(b: &mut FunctionBuilder, v: Value) -> Value {
    let three = b.ins().iconst(I64, 3);
    let payload = b.ins().ushr(v, three);
    let small = cmp_imm(b, IntCC::UnsignedLessThanOrEqual, payload, 1);
    let rebased = add_imm(b, payload, ROTATED_EXP_OFFSET as i64);
    let rotated = b.ins().select(small, payload, rebased);
    let one = b.ins().iconst(I64, 1);
    let bits = b.ins().rotr(rotated, one);
    b.ins().bitcast(types::F64, MemFlagsData::new(), bits)
}

/// The immediate encoding of double `r` (as `Value::from_small_float`), or a jump to
/// `slow` when it needs a boxed double.
pub(crate) fn encode_small_float(b: &mut FunctionBuilder, r: Value, slow: Block) -> Value {
    let bits = b.ins().bitcast(I64, MemFlagsData::new(), r);
    let one = b.ins().iconst(I64, 1);
    let rotated = b.ins().rotl(bits, one);
    let zero = cmp_imm(b, IntCC::UnsignedLessThanOrEqual, rotated, 1);
    let p = add_imm(b, rotated, (ROTATED_EXP_OFFSET as i64).wrapping_neg());
    let p2 = add_imm(b, p, -2);
    let in_window = cmp_imm(b, IntCC::UnsignedLessThan, p2, (PAYLOAD_LIMIT - 2) as i64);
    let ok = b.ins().bor(zero, in_window);
    let fits = b.create_block();
    b.ins().brif(ok, fits, &[], slow, &[]);
    b.switch_to_block(fits);
    let payload = b.ins().select(zero, rotated, p);
    let three = b.ins().iconst(I64, 3);
    let shifted = b.ins().ishl(payload, three);
    let tag = b.ins().iconst(I64, FLOAT_TAG);
    b.ins().bor(shifted, tag)
}
