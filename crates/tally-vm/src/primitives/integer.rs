//! Integer primitives. Small integers take the fast `i64` path with overflow checks; anything
//! that overflows, or involves a big integer, is done with `BigInt` and normalized back.

use num_bigint::BigInt;
use num_integer::Integer as _;
use num_traits::{FromPrimitive, Signed, ToPrimitive, Zero};
use tally_heap::Value;

use super::checked::Operand;
use super::Table;
use crate::numbers::Int;
use crate::{Vm, VmError};

pub static INSTANCE: Table = &[
    ("+", add),
    ("-", sub),
    ("*", mul),
    ("/", div),
    ("//", fdiv),
    ("%", modulo),
    ("rem:", rem),
    ("&", bit_and),
    ("bitXor:", bit_xor),
    ("<<", shift_left),
    (">>>", shift_right),
    ("sqrt", sqrt),
    ("atRandom", at_random),
    ("=", equal),
    ("<", less),
    ("asString", as_string),
    ("as32BitSignedValue", as_32_signed),
    ("as32BitUnsignedValue", as_32_unsigned),
    ("asDouble", as_double),
];

pub static CLASS: Table = &[("fromString:", from_string)];

impl Vm {
    /// An integer as a double, or the error SOM VMs give when it does not fit.
    pub(crate) fn int_to_double(&self, i: &Int) -> Result<f64, VmError> {
        let d = match i {
            Int::Small(s) => *s as f64,
            Int::Big(b) => b.to_f64().unwrap_or(f64::INFINITY),
        };
        if d.is_finite() {
            Ok(d)
        } else {
            Err(self.error("Can't represent as double."))
        }
    }
}

/// Shared shape of the binary arithmetic primitives.
fn arith(
    vm: &mut Vm,
    small: fn(i64, i64) -> Option<i64>,
    big: fn(&BigInt, &BigInt) -> BigInt,
    double: fn(f64, f64) -> f64,
) -> Result<(), VmError> {
    let (a, b) = (vm.arg(1, 0), vm.arg(1, 1));
    if let Some(x) = a.as_int() {
        if let Some(y) = b.as_int() {
            if let Some(r) = small(x, y) {
                let v = vm.i64_result(r)?;
                return vm.answer(1, v);
            }
        } else if let Some(y) = b.as_small_float() {
            let v = vm.new_double(double(x as f64, y))?;
            return vm.answer(1, v);
        }
    }
    let x = vm.int_arg(vm.arg(1, 0))?;
    match vm.numeric_operand(b)? {
        Operand::Int(y) => {
            let r = big(&x.to_big(), &y.to_big());
            let v = vm.int_result(r)?;
            vm.answer(1, v)
        }
        Operand::Double(y) => {
            let x = vm.int_to_double(&x)?;
            let v = vm.new_double(double(x, y))?;
            vm.answer(1, v)
        }
    }
}

fn add(vm: &mut Vm, _: usize) -> Result<(), VmError> {
    arith(vm, i64::checked_add, |a, b| a + b, |a, b| a + b)
}

fn sub(vm: &mut Vm, _: usize) -> Result<(), VmError> {
    arith(vm, i64::checked_sub, |a, b| a - b, |a, b| a - b)
}

fn mul(vm: &mut Vm, _: usize) -> Result<(), VmError> {
    arith(vm, i64::checked_mul, |a, b| a * b, |a, b| a * b)
}

fn is_zero(op: &Operand) -> bool {
    match op {
        Operand::Int(Int::Small(0)) => true,
        Operand::Int(Int::Big(b)) => b.is_zero(),
        Operand::Double(d) => *d == 0.0,
        _ => false,
    }
}

/// Integer division, truncating toward zero (as other SOM VMs do).
fn div(vm: &mut Vm, _: usize) -> Result<(), VmError> {
    let b = vm.arg(1, 1);
    let op = vm.numeric_operand(b)?;
    if is_zero(&op) {
        return Err(vm.error("Division by zero."));
    }
    let x = vm.int_arg(vm.arg(1, 0))?;
    match op {
        Operand::Int(y) => {
            let v = match (&x, &y) {
                (Int::Small(a), Int::Small(b)) if !(*a == i64::MIN && *b == -1) => {
                    vm.i64_result(a / b)?
                }
                _ => vm.int_result(x.to_big() / y.to_big())?,
            };
            vm.answer(1, v)
        }
        Operand::Double(y) => {
            // Other SOM VMs truncate a quotient with a Double divisor.
            let x = vm.int_to_double(&x)?;
            let Some(q) = BigInt::from_f64((x / y).trunc()) else {
                return Err(vm.error("Can't represent as integer."));
            };
            let v = vm.int_result(q)?;
            vm.answer(1, v)
        }
    }
}

/// Division with a Double result.
fn fdiv(vm: &mut Vm, _: usize) -> Result<(), VmError> {
    let b = vm.arg(1, 1);
    let op = vm.numeric_operand(b)?;
    if is_zero(&op) {
        return Err(vm.error("Division by zero."));
    }
    let x = vm.int_arg(vm.arg(1, 0))?;
    let r = match op {
        Operand::Int(y) => match (&x, &y) {
            (Int::Small(a), Int::Small(b)) => *a as f64 / *b as f64,
            _ => big_ratio(&x.to_big(), &y.to_big()),
        },
        Operand::Double(y) => vm.int_to_double(&x)? / y,
    };
    let v = vm.new_double(r)?;
    vm.answer(1, v)
}

/// a / b as a double without overflowing when both are huge.
fn big_ratio(a: &BigInt, b: &BigInt) -> f64 {
    let (fa, fb) = (
        a.to_f64().unwrap_or(f64::INFINITY),
        b.to_f64().unwrap_or(f64::INFINITY),
    );
    if fa.is_finite() && fb.is_finite() {
        return fa / fb;
    }
    let shift = a.bits().max(b.bits()).saturating_sub(1000);
    let (sa, sb) = (a >> shift, b >> shift);
    sa.to_f64().unwrap_or(0.0) / sb.to_f64().unwrap_or(f64::INFINITY)
}

/// Modulo with the sign of the divisor (floored).
fn modulo(vm: &mut Vm, _: usize) -> Result<(), VmError> {
    let b = vm.arg(1, 1);
    let op = vm.numeric_operand(b)?;
    if is_zero(&op) {
        return Err(vm.error("Division by zero."));
    }
    let x = vm.int_arg(vm.arg(1, 0))?;
    match op {
        Operand::Int(y) => {
            let v = match (&x, &y) {
                (Int::Small(a), Int::Small(b)) => vm.i64_result(a.mod_floor(b))?,
                _ => vm.int_result(x.to_big().mod_floor(&y.to_big()))?,
            };
            vm.answer(1, v)
        }
        Operand::Double(y) => {
            let x = vm.int_to_double(&x)?;
            let v = vm.new_double(super::double::double_mod(x, y))?;
            vm.answer(1, v)
        }
    }
}

/// Remainder with the sign of the receiver (truncated).
fn rem(vm: &mut Vm, _: usize) -> Result<(), VmError> {
    let y = vm.int_arg(vm.arg(1, 1))?;
    if is_zero(&Operand::Int(y.clone())) {
        return Err(vm.error("Division by zero or overflow."));
    }
    let x = vm.int_arg(vm.arg(1, 0))?;
    let v = match (&x, &y) {
        (Int::Small(a), Int::Small(b)) if !(*a == i64::MIN && *b == -1) => vm.i64_result(a % b)?,
        _ => vm.int_result(x.to_big() % y.to_big())?,
    };
    vm.answer(1, v)
}

fn bit_and(vm: &mut Vm, _: usize) -> Result<(), VmError> {
    let y = vm.int_arg(vm.arg(1, 1))?;
    let x = vm.int_arg(vm.arg(1, 0))?;
    let v = match (&x, &y) {
        (Int::Small(a), Int::Small(b)) => vm.i64_result(a & b)?,
        _ => vm.int_result(x.to_big() & y.to_big())?,
    };
    vm.answer(1, v)
}

fn bit_xor(vm: &mut Vm, _: usize) -> Result<(), VmError> {
    let y = vm.int_arg(vm.arg(1, 1))?;
    let x = vm.int_arg(vm.arg(1, 0))?;
    let v = match (&x, &y) {
        (Int::Small(a), Int::Small(b)) => vm.i64_result(a ^ b)?,
        _ => vm.int_result(x.to_big() ^ y.to_big())?,
    };
    vm.answer(1, v)
}

/// Largest shift accepted: results beyond this many bits are refused rather than exhausting memory.
const MAX_SHIFT: i64 = 1 << 24;

fn shift_amount(vm: &Vm, v: Value) -> Result<i64, VmError> {
    let s = match vm.int_of(v) {
        Some(Int::Small(s)) => s,
        Some(Int::Big(b)) => {
            if b.is_negative() {
                return Err(vm.error("Negative shift."));
            }
            return Err(vm.error("Shift too big."));
        }
        None => {
            return Err(vm.error(format!(
                "Expected a numeric type but got type '{}'.",
                vm.type_name(v)
            )))
        }
    };
    if s < 0 {
        return Err(vm.error("Negative shift."));
    }
    if s > MAX_SHIFT {
        return Err(vm.error("Shift too big."));
    }
    Ok(s)
}

fn shift_left(vm: &mut Vm, _: usize) -> Result<(), VmError> {
    let s = shift_amount(vm, vm.arg(1, 1))?;
    let x = vm.int_arg(vm.arg(1, 0))?;
    let v = match x {
        Int::Small(a) if s < 63 && (a << s) >> s == a => vm.i64_result(a << s)?,
        _ => vm.int_result(x.to_big() << (s as usize))?,
    };
    vm.answer(1, v)
}

/// Logical shift right: a negative small integer is treated as its 64-bit pattern.
fn shift_right(vm: &mut Vm, _: usize) -> Result<(), VmError> {
    let s = shift_amount(vm, vm.arg(1, 1))?;
    let x = vm.int_arg(vm.arg(1, 0))?;
    let v = match x {
        Int::Small(a) => {
            let r = if s >= 64 { 0 } else { ((a as u64) >> s) as i64 };
            vm.i64_result(r)?
        }
        Int::Big(b) => vm.int_result(b >> (s as usize))?,
    };
    vm.answer(1, v)
}

/// A small integer's root is exact for perfect squares (an Integer), otherwise a Double; a big
/// integer's root is its integer square root.
fn sqrt(vm: &mut Vm, argc: usize) -> Result<(), VmError> {
    if let Some(i) = vm.arg(argc, 0).as_int() {
        if i >= 0 {
            let v = match exact_isqrt(i) {
                Some(r) => Value::from_small_int(r),
                None => vm.new_double((i as f64).sqrt())?,
            };
            return vm.answer(argc, v);
        }
    }
    let x = vm.int_arg(vm.arg(argc, 0))?;
    let b = x.to_big();
    if b.is_negative() {
        return Err(vm.error("Domain error."));
    }
    let r = b.sqrt();
    let v = if &r * &r == b || matches!(x, Int::Big(_)) {
        vm.int_result(r)?
    } else {
        let d = vm.int_to_double(&x)?;
        vm.new_double(d.sqrt())?
    };
    vm.answer(argc, v)
}

/// The root of `i >= 0` when `i` is a perfect square.
fn exact_isqrt(i: i64) -> Option<i64> {
    // The float root is within one of the integer root for every i64; fix it up exactly.
    let mut r = (i as f64).sqrt() as i128;
    let i = i as i128;
    while r * r > i {
        r -= 1;
    }
    while (r + 1) * (r + 1) <= i {
        r += 1;
    }
    (r * r == i).then_some(r as i64)
}

fn at_random(vm: &mut Vm, argc: usize) -> Result<(), VmError> {
    let x = vm.int_arg(vm.arg(argc, 0))?;
    let Int::Small(n) = x else {
        return Err(vm.error("atRandom needs a receiver that fits in 63 bits."));
    };
    if n <= 0 {
        return Err(vm.error("atRandom needs a positive receiver."));
    }
    let r = vm.next_random() % (n as u64);
    vm.answer(argc, Value::from_small_int(r as i64 + 1))
}

fn compare(vm: &mut Vm, want_equal: bool) -> Result<(), VmError> {
    let (a, b) = (vm.arg(1, 0), vm.arg(1, 1));
    if let (Some(x), Some(y)) = (a.as_int(), b.as_int()) {
        return vm.answer(1, Value::from_bool(if want_equal { x == y } else { x < y }));
    }
    let x = vm.int_arg(vm.arg(1, 0))?;
    let op = if want_equal {
        match vm.numeric_operand(b) {
            Ok(op) => op,
            Err(_) => return vm.answer(1, Value::FALSE),
        }
    } else {
        vm.numeric_operand(b)?
    };
    let r = match op {
        Operand::Int(y) => {
            let (x, y) = (x.to_big(), y.to_big());
            if want_equal {
                x == y
            } else {
                x < y
            }
        }
        Operand::Double(y) => {
            let x = match &x {
                Int::Small(s) => *s as f64,
                Int::Big(b) => b.to_f64().unwrap_or(f64::INFINITY),
            };
            if want_equal {
                x == y
            } else {
                x < y
            }
        }
    };
    vm.answer(1, Value::from_bool(r))
}

fn equal(vm: &mut Vm, _: usize) -> Result<(), VmError> {
    compare(vm, true)
}

fn less(vm: &mut Vm, _: usize) -> Result<(), VmError> {
    compare(vm, false)
}

fn as_string(vm: &mut Vm, argc: usize) -> Result<(), VmError> {
    let s = match vm.int_arg(vm.arg(argc, 0))? {
        Int::Small(i) => i.to_string(),
        Int::Big(b) => b.to_string(),
    };
    let v = vm.new_string(s.as_bytes())?;
    vm.answer(argc, v)
}

fn as_double(vm: &mut Vm, argc: usize) -> Result<(), VmError> {
    let x = vm.int_arg(vm.arg(argc, 0))?;
    let d = vm.int_to_double(&x)?;
    let v = vm.new_double(d)?;
    vm.answer(argc, v)
}

fn low_64(x: &Int) -> u64 {
    match x {
        Int::Small(i) => *i as u64,
        Int::Big(b) => {
            let (sign, digits) = b.to_u64_digits();
            let low = digits.first().copied().unwrap_or(0);
            if sign == num_bigint::Sign::Minus {
                low.wrapping_neg()
            } else {
                low
            }
        }
    }
}

fn as_32_signed(vm: &mut Vm, argc: usize) -> Result<(), VmError> {
    let x = vm.int_arg(vm.arg(argc, 0))?;
    vm.answer(argc, Value::from_small_int(low_64(&x) as u32 as i32 as i64))
}

fn as_32_unsigned(vm: &mut Vm, argc: usize) -> Result<(), VmError> {
    let x = vm.int_arg(vm.arg(argc, 0))?;
    vm.answer(argc, Value::from_small_int(low_64(&x) as u32 as i64))
}

fn from_string(vm: &mut Vm, argc: usize) -> Result<(), VmError> {
    let text = vm.text_arg_string(vm.arg(argc, 1))?;
    let trimmed = text.trim();
    match trimmed.parse::<BigInt>() {
        Ok(b) => {
            let v = vm.int_result(b)?;
            vm.answer(argc, v)
        }
        Err(_) => Err(vm.error(format!("'{text}' cannot be converted to an Integer."))),
    }
}

#[cfg(test)]
mod tests {
    use super::exact_isqrt;

    #[test]
    fn exact_isqrt_finds_perfect_squares_only() {
        for r in [0i64, 1, 2, 3, 10, 94906265, 3037000499] {
            assert_eq!(exact_isqrt(r * r), Some(r));
            if r > 1 {
                assert_eq!(exact_isqrt(r * r - 1), None);
                assert_eq!(exact_isqrt(r * r + 1), None);
            }
        }
        assert_eq!(exact_isqrt(2), None);
        assert_eq!(exact_isqrt(i64::MAX >> 1), None);
        assert_eq!(exact_isqrt(i64::MAX), None);
    }
}
