//! Double primitives. Mixed arithmetic converts the integer operand to a double.

use num_bigint::BigInt;
use num_traits::FromPrimitive;
use tally_heap::Value;

use super::Table;
use crate::numbers::format_double;
use crate::{Vm, VmError};

pub static INSTANCE: Table = &[
    ("+", add),
    ("-", sub),
    ("*", mul),
    ("//", div),
    ("%", modulo),
    ("sqrt", sqrt),
    ("round", round),
    ("asInteger", as_integer),
    ("cos", cos),
    ("sin", sin),
    ("=", equal),
    ("<", less),
    ("asString", as_string),
];

pub static CLASS: Table = &[
    ("PositiveInfinity", positive_infinity),
    ("fromString:", from_string),
];

/// Double `%` is C's fmod: the result has the sign of the receiver (SOM's DoubleTest).
pub(crate) fn double_mod(a: f64, b: f64) -> f64 {
    a % b
}

#[inline(always)]
fn arith(vm: &mut Vm, f: fn(f64, f64) -> f64, check_zero: bool) -> Result<(), VmError> {
    let y = vm.double_operand(vm.arg(1, 1))?;
    if check_zero && y == 0.0 {
        return Err(vm.error("Division by zero."));
    }
    let x = vm.double_arg(vm.arg(1, 0))?;
    let v = vm.new_double(f(x, y))?;
    vm.answer(1, v)
}

fn add(vm: &mut Vm, _: usize) -> Result<(), VmError> {
    arith(vm, |a, b| a + b, false)
}
fn sub(vm: &mut Vm, _: usize) -> Result<(), VmError> {
    arith(vm, |a, b| a - b, false)
}
fn mul(vm: &mut Vm, _: usize) -> Result<(), VmError> {
    arith(vm, |a, b| a * b, false)
}
/// IEEE division: a zero divisor gives an infinity or NaN, which AWFY's CD relies on.
fn div(vm: &mut Vm, _: usize) -> Result<(), VmError> {
    arith(vm, |a, b| a / b, false)
}
fn modulo(vm: &mut Vm, _: usize) -> Result<(), VmError> {
    arith(vm, double_mod, true)
}

#[inline(always)]
fn unary(vm: &mut Vm, argc: usize, f: fn(f64) -> f64) -> Result<(), VmError> {
    let x = vm.double_arg(vm.arg(argc, 0))?;
    let v = vm.new_double(f(x))?;
    vm.answer(argc, v)
}

fn sqrt(vm: &mut Vm, argc: usize) -> Result<(), VmError> {
    unary(vm, argc, f64::sqrt)
}
fn cos(vm: &mut Vm, argc: usize) -> Result<(), VmError> {
    unary(vm, argc, f64::cos)
}
fn sin(vm: &mut Vm, argc: usize) -> Result<(), VmError> {
    unary(vm, argc, f64::sin)
}

/// The Integer of an integral double `d` (already rounded or truncated).
fn to_integer(vm: &mut Vm, argc: usize, d: f64) -> Result<(), VmError> {
    // Integral doubles in [-2^62, 2^62) are exactly the small integers' range.
    const LIMIT: f64 = (1u64 << 62) as f64;
    if (-LIMIT..LIMIT).contains(&d) {
        return vm.answer(argc, Value::from_small_int(d as i64));
    }
    let Some(b) = BigInt::from_f64(d) else {
        return Err(vm.error(format!(
            "{} cannot be converted to an Integer.",
            format_double(d)
        )));
    };
    let v = vm.int_result(b)?;
    vm.answer(argc, v)
}

/// Rounds half away from zero.
fn round(vm: &mut Vm, argc: usize) -> Result<(), VmError> {
    let x = vm.double_arg(vm.arg(argc, 0))?;
    to_integer(vm, argc, x.round())
}

/// Truncates toward zero.
fn as_integer(vm: &mut Vm, argc: usize) -> Result<(), VmError> {
    let x = vm.double_arg(vm.arg(argc, 0))?;
    to_integer(vm, argc, x.trunc())
}

fn compare(vm: &mut Vm, want_equal: bool) -> Result<(), VmError> {
    let x = vm.double_arg(vm.arg(1, 0))?;
    let y = if want_equal {
        match vm.double_operand(vm.arg(1, 1)) {
            Ok(y) => y,
            Err(_) => return vm.answer(1, Value::FALSE),
        }
    } else {
        vm.double_operand(vm.arg(1, 1))?
    };
    vm.answer(1, Value::from_bool(if want_equal { x == y } else { x < y }))
}

fn equal(vm: &mut Vm, _: usize) -> Result<(), VmError> {
    compare(vm, true)
}
fn less(vm: &mut Vm, _: usize) -> Result<(), VmError> {
    compare(vm, false)
}

fn as_string(vm: &mut Vm, argc: usize) -> Result<(), VmError> {
    let s = format_double(vm.double_arg(vm.arg(argc, 0))?);
    let v = vm.new_string(s.as_bytes())?;
    vm.answer(argc, v)
}

fn positive_infinity(vm: &mut Vm, argc: usize) -> Result<(), VmError> {
    let v = vm.new_double(f64::INFINITY)?;
    vm.answer(argc, v)
}

fn from_string(vm: &mut Vm, argc: usize) -> Result<(), VmError> {
    let text = vm.text_arg_string(vm.arg(argc, 1))?;
    match text.trim().parse::<f64>() {
        Ok(d) => {
            let v = vm.new_double(d)?;
            vm.answer(argc, v)
        }
        Err(_) => Err(vm.error(format!("'{text}' cannot be converted to a Double."))),
    }
}
