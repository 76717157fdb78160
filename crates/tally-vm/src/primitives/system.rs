//! System primitives: globals, loading, output, time, exit, GC.

use tally_heap::Value;

use super::Table;
use crate::{Vm, VmError};

pub static INSTANCE: Table = &[
    ("global:", global),
    ("global:put:", global_put),
    ("hasGlobal:", has_global),
    ("loadFile:", load_file),
    ("load:", load),
    ("exit:", exit),
    ("printString:", print_string),
    ("printNewline", print_newline),
    ("errorPrintln:", error_println),
    ("errorPrint:", error_print),
    ("printStackTrace", print_stack_trace),
    ("time", time),
    ("ticks", ticks),
    ("fullGC", full_gc),
];

fn global(vm: &mut Vm, _: usize) -> Result<(), VmError> {
    let name = vm.symbol_arg(vm.arg(1, 1))?;
    let v = vm.rt.global(name).unwrap_or(Value::NIL);
    vm.answer(1, v)
}

fn global_put(vm: &mut Vm, _: usize) -> Result<(), VmError> {
    let (n, v) = (vm.arg(2, 1), vm.arg(2, 2));
    let name = vm.symbol_arg(n)?;
    vm.rt.set_global(name, v);
    let recv = vm.arg(2, 0);
    vm.answer(2, recv)
}

fn has_global(vm: &mut Vm, _: usize) -> Result<(), VmError> {
    let name = vm.symbol_arg(vm.arg(1, 1))?;
    let has = vm.rt.global(name).is_some();
    vm.answer(1, Value::from_bool(has))
}

/// The contents of a file as a String, or nil when it cannot be read.
fn load_file(vm: &mut Vm, _: usize) -> Result<(), VmError> {
    let path = vm.text_arg_string(vm.arg(1, 1))?;
    let v = match std::fs::read(&path) {
        Ok(bytes) => vm.new_string(&bytes)?,
        Err(_) => Value::NIL,
    };
    vm.answer(1, v)
}

/// Loads a class by name from the class path; nil when none defines it.
fn load(vm: &mut Vm, _: usize) -> Result<(), VmError> {
    let name = vm.symbol_arg(vm.arg(1, 1))?;
    let v = match vm.load_class(name)? {
        Some(c) => vm.rt.classes[c as usize].object,
        None => Value::NIL,
    };
    vm.answer(1, v)
}

fn exit(vm: &mut Vm, _: usize) -> Result<(), VmError> {
    match vm.int_arg(vm.arg(1, 1))? {
        crate::numbers::Int::Small(code) if (i32::MIN as i64..=i32::MAX as i64).contains(&code) => {
            Err(VmError::Exit(code as i32))
        }
        _ => Err(vm.error("Domain error.")),
    }
}

fn print_string(vm: &mut Vm, _: usize) -> Result<(), VmError> {
    let bytes = vm.text_arg_owned(vm.arg(1, 1))?;
    vm.write_out(&bytes);
    let recv = vm.arg(1, 0);
    vm.answer(1, recv)
}

fn print_newline(vm: &mut Vm, argc: usize) -> Result<(), VmError> {
    vm.write_out(b"\n");
    let recv = vm.arg(argc, 0);
    vm.answer(argc, recv)
}

fn error_print_impl(vm: &mut Vm, newline: bool) -> Result<(), VmError> {
    let mut bytes = vm.text_arg_owned(vm.arg(1, 1))?;
    if newline {
        bytes.push(b'\n');
    }
    vm.write_err(&bytes);
    let recv = vm.arg(1, 0);
    vm.answer(1, recv)
}

fn error_println(vm: &mut Vm, _: usize) -> Result<(), VmError> {
    error_print_impl(vm, true)
}

fn error_print(vm: &mut Vm, _: usize) -> Result<(), VmError> {
    error_print_impl(vm, false)
}

fn print_stack_trace(vm: &mut Vm, argc: usize) -> Result<(), VmError> {
    let mut text = String::new();
    let _ = crate::error::write_trace(&mut text, &vm.stack_trace());
    vm.write_err(text.as_bytes());
    let recv = vm.arg(argc, 0);
    vm.answer(argc, recv)
}

/// Milliseconds since the VM started.
fn time(vm: &mut Vm, argc: usize) -> Result<(), VmError> {
    let ms = vm.micros_since_start() / 1000;
    vm.answer(argc, Value::from_small_int(ms as i64))
}

/// Microseconds since the VM started.
fn ticks(vm: &mut Vm, argc: usize) -> Result<(), VmError> {
    let us = vm.micros_since_start();
    vm.answer(argc, Value::from_small_int(us as i64))
}

fn full_gc(vm: &mut Vm, argc: usize) -> Result<(), VmError> {
    vm.heap.collect(&mut vm.rt);
    vm.answer(argc, Value::TRUE)
}
