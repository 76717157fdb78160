//! Double primitives. Mixed arithmetic converts the integer operand to a double.

use num_bigint::BigInt;
use num_traits::FromPrimitive;
use tally_heap::Value;

use super::integer::Operand;
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

/// The receiver of a Double primitive: an immediate small float on the common path.
#[inline(always)]
fn receiver(vm: &Vm, argc: usize) -> f64 {
    let v = vm.arg(argc, 0);
    match v.as_small_float() {
        Some(d) => d,
        None => boxed_receiver(vm, v),
    }
}

#[cold]
#[inline(never)]
fn boxed_receiver(vm: &Vm, v: Value) -> f64 {
    vm.boxed_double_of(v).expect("Double primitive on a double")
}

/// The argument of a binary Double primitive as a double. Small floats and small integers
/// are decoded in place; boxed doubles, big integers and errors take the slow path.
#[inline(always)]
fn operand(vm: &Vm) -> Result<f64, VmError> {
    let v = vm.arg(1, 1);
    if let Some(d) = v.as_small_float() {
        return Ok(d);
    }
    if let Some(i) = v.as_int() {
        return Ok(i as f64);
    }
    operand_slow(vm, v)
}

#[cold]
#[inline(never)]
fn operand_slow(vm: &Vm, v: Value) -> Result<f64, VmError> {
    match vm.numeric_operand(v)? {
        Operand::Double(d) => Ok(d),
        Operand::Int(i) => vm.int_to_double(&i),
    }
}

#[inline(always)]
fn arith(vm: &mut Vm, f: fn(f64, f64) -> f64, check_zero: bool) -> Result<(), VmError> {
    let y = operand(vm)?;
    if check_zero && y == 0.0 {
        return Err(vm.error("Division by zero."));
    }
    let x = receiver(vm, 1);
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
    let x = receiver(vm, argc);
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
    let x = receiver(vm, argc);
    to_integer(vm, argc, x.round())
}

/// Truncates toward zero.
fn as_integer(vm: &mut Vm, argc: usize) -> Result<(), VmError> {
    let x = receiver(vm, argc);
    to_integer(vm, argc, x.trunc())
}

fn compare(vm: &mut Vm, want_equal: bool) -> Result<(), VmError> {
    let x = receiver(vm, 1);
    let y = if want_equal {
        match operand(vm) {
            Ok(y) => y,
            Err(_) => return vm.answer(1, Value::FALSE),
        }
    } else {
        operand(vm)?
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
    let s = format_double(receiver(vm, argc));
    let v = vm.new_string(s.as_bytes())?;
    vm.answer(argc, v)
}

fn positive_infinity(vm: &mut Vm, argc: usize) -> Result<(), VmError> {
    let v = vm.new_double(f64::INFINITY)?;
    vm.answer(argc, v)
}

fn from_string(vm: &mut Vm, argc: usize) -> Result<(), VmError> {
    let a = vm.arg(argc, 1);
    let Some(text) = vm.text_of(a) else {
        return Err(vm.expected_string(a));
    };
    match text.trim().parse::<f64>() {
        Ok(d) => {
            let v = vm.new_double(d)?;
            vm.answer(argc, v)
        }
        Err(_) => Err(vm.error(format!("'{text}' cannot be converted to a Double."))),
    }
}
