//! String and Symbol primitives. Strings are immutable UTF-8; lengths and indices count
//! characters, as in other SOM VMs (an all-ASCII string takes the byte-indexed fast path).

use tally_heap::Value;

use super::Table;
use crate::objects::Kind;
use crate::{Vm, VmError};

pub static INSTANCE: Table = &[
    ("concatenate:", concatenate),
    ("asSymbol", as_symbol),
    ("hashcode", hashcode),
    ("length", length),
    ("isWhiteSpace", is_white_space),
    ("isLetters", is_letters),
    ("isDigits", is_digits),
    ("=", equal),
    ("primSubstringFrom:to:", substring),
];

pub static SYMBOL: Table = &[("asString", symbol_as_string)];

/// FNV-1a over the UTF-8 bytes: equal strings and symbols hash equal.
pub(crate) fn string_hash(s: &[u8]) -> i64 {
    let mut h: u32 = 0x811c_9dc5;
    for &b in s {
        h ^= b as u32;
        h = h.wrapping_mul(0x0100_0193);
    }
    (h & 0x3fff_ffff) as i64
}

fn concatenate(vm: &mut Vm, _: usize) -> Result<(), VmError> {
    let mut s = vm.text_arg_owned(vm.arg(1, 0))?;
    s.extend_from_slice(vm.text_arg(vm.arg(1, 1))?);
    let v = vm.new_string(&s)?;
    vm.answer(1, v)
}

fn as_symbol(vm: &mut Vm, argc: usize) -> Result<(), VmError> {
    let s = vm.text_arg_owned(vm.arg(argc, 0))?;
    let sym = vm.rt.symbols.intern(&String::from_utf8_lossy(&s));
    vm.answer(argc, Value::from_symbol(sym))
}

fn symbol_as_string(vm: &mut Vm, argc: usize) -> Result<(), VmError> {
    let s = vm.text_arg_owned(vm.arg(argc, 0))?;
    let v = vm.new_string(&s)?;
    vm.answer(argc, v)
}

fn hashcode(vm: &mut Vm, argc: usize) -> Result<(), VmError> {
    let h = string_hash(vm.text_arg(vm.arg(argc, 0))?);
    vm.answer(argc, Value::from_small_int(h))
}

fn char_count(s: &[u8]) -> usize {
    if s.is_ascii() {
        s.len()
    } else {
        String::from_utf8_lossy(s).chars().count()
    }
}

fn length(vm: &mut Vm, argc: usize) -> Result<(), VmError> {
    let n = if vm.is_ascii_text(vm.arg(argc, 0)) {
        vm.text_arg(vm.arg(argc, 0))?.len()
    } else {
        char_count(vm.text_arg(vm.arg(argc, 0))?)
    };
    vm.answer(argc, Value::from_small_int(n as i64))
}

fn all_chars(vm: &mut Vm, argc: usize, pred: fn(char) -> bool) -> Result<(), VmError> {
    let text = String::from_utf8_lossy(vm.text_arg(vm.arg(argc, 0))?);
    let r = !text.is_empty() && text.chars().all(pred);
    vm.answer(argc, Value::from_bool(r))
}

fn is_white_space(vm: &mut Vm, argc: usize) -> Result<(), VmError> {
    all_chars(vm, argc, char::is_whitespace)
}
fn is_letters(vm: &mut Vm, argc: usize) -> Result<(), VmError> {
    all_chars(vm, argc, char::is_alphabetic)
}
fn is_digits(vm: &mut Vm, argc: usize) -> Result<(), VmError> {
    all_chars(vm, argc, |c| c.is_ascii_digit())
}

/// Equal when the argument is a String or Symbol with the same characters.
fn equal(vm: &mut Vm, _: usize) -> Result<(), VmError> {
    let (a, b) = (vm.arg(1, 0), vm.arg(1, 1));
    if a == b {
        return vm.answer(1, Value::TRUE);
    }
    if a.as_symbol().is_some() && b.as_symbol().is_some() {
        return vm.answer(1, Value::FALSE);
    }
    let r = match vm.text_slice(b) {
        Some(rhs) => vm.text_arg(vm.arg(1, 0))? == rhs,
        None => false,
    };
    vm.answer(1, Value::from_bool(r))
}

/// Characters `start` to `end`, both 1-based and inclusive.
fn substring(vm: &mut Vm, _: usize) -> Result<(), VmError> {
    let start = vm.small_int_arg(vm.arg(2, 1))?;
    let end = vm.small_int_arg(vm.arg(2, 2))?;
    let ascii = vm.is_ascii_text(vm.arg(2, 0));
    let s = vm.text_arg(vm.arg(2, 0))?;
    let out: Vec<u8> = if ascii {
        let len = s.len() as i64;
        if start < 1 || end > len || start > end + 1 {
            return Err(vm.error(format!(
                "substring {start} to {end} is out of bounds for a string of length {len}"
            )));
        }
        // Allocated first and filled from the receiver read again (a collection may have
        // moved it): no copy in between.
        let (from, to) = ((start - 1) as usize, end.max(start - 1) as usize);
        let v = vm.alloc(
            vm.rt.core.string,
            Kind::AsciiString,
            0,
            Value::NIL,
            to - from,
        )?;
        let source = vm.text_arg(vm.arg(2, 0))?;
        v.bytes_mut()[..to - from].copy_from_slice(&source[from..to]);
        return vm.answer(2, v);
    } else {
        let text = String::from_utf8_lossy(s);
        let len = text.chars().count() as i64;
        if start < 1 || end > len || start > end + 1 {
            return Err(vm.error(format!(
                "substring {start} to {end} is out of bounds for a string of length {len}"
            )));
        }
        text.chars()
            .skip((start - 1) as usize)
            .take((end - start + 1).max(0) as usize)
            .collect::<String>()
            .into_bytes()
    };
    let v = vm.new_string(&out)?;
    vm.answer(2, v)
}
