//! Primitives: the methods the VM implements, bound by (class, selector) when a class file
//! declares `selector = primitive`.
//!
//! Calling convention: the receiver and the arguments are the top `argc + 1` stack values. A
//! primitive either replaces them with its result (`answer`) or pushes a frame that will do so
//! (`value`, `perform:` …); it never runs SOM code re-entrantly.

mod array;
mod block;
mod checked;
mod class;
mod double;
mod integer;
mod object;
mod string;
mod system;

use tally_heap::Value;

use crate::objects::Kind;
use crate::{Vm, VmError};

pub type Primitive = fn(&mut Vm, usize) -> Result<(), VmError>;

type Table = &'static [(&'static str, Primitive)];

/// Every primitive table, by (class name, class side).
const TABLES: &[(&str, bool, Table)] = &[
    ("Object", false, object::INSTANCE),
    ("Class", false, class::INSTANCE),
    ("Array", false, array::INSTANCE),
    ("Array", true, array::CLASS),
    ("Block", false, block::BLOCK),
    ("Block1", false, block::BLOCK_N),
    ("Block2", false, block::BLOCK_N),
    ("Block3", false, block::BLOCK_N),
    ("Block4", false, block::BLOCK_N),
    ("Double", false, double::INSTANCE),
    ("Double", true, double::CLASS),
    ("Integer", false, integer::INSTANCE),
    ("Integer", true, integer::CLASS),
    ("Method", false, class::METHOD),
    ("Primitive", false, class::METHOD),
    ("String", false, string::INSTANCE),
    ("Symbol", false, string::SYMBOL),
    ("System", false, system::INSTANCE),
];

/// The primitive for `class>>selector` (or `class class>>selector` when `class_side`).
pub fn find(class: &str, class_side: bool, selector: &str) -> Option<Primitive> {
    let (_, _, table) = TABLES
        .iter()
        .find(|(c, side, _)| *c == class && *side == class_side)?;
    table.iter().find(|(s, _)| *s == selector).map(|(_, p)| *p)
}

impl Vm {
    /// The `i`-th argument (0 is the receiver) of a primitive call with `argc` arguments.
    #[inline(always)]
    pub(crate) fn arg(&self, argc: usize, i: usize) -> Value {
        self.rt.stack[self.rt.stack.len() - 1 - argc + i]
    }

    /// Replaces receiver and arguments with the result.
    #[inline(always)]
    pub(crate) fn answer(&mut self, argc: usize, v: Value) -> Result<(), VmError> {
        let n = self.rt.stack.len() - argc;
        self.rt.stack.truncate(n);
        *self.rt.stack.last_mut().expect("receiver") = v;
        Ok(())
    }

    /// A short type name used in primitive error messages (they follow the wording other SOM
    /// VMs use, which the SOM integration tests check).
    pub(crate) fn type_name(&self, v: Value) -> &'static str {
        if v.is_int() {
            return "Int";
        }
        if v.as_symbol().is_some() {
            return "Symbol";
        }
        if v == Value::NIL {
            return "Nil";
        }
        if v == Value::TRUE || v == Value::FALSE {
            return "Boolean";
        }
        if v.is_small_float() {
            return "Double";
        }
        match Kind::from_u8(v.kind()) {
            Kind::Plain | Kind::Context => "Inst",
            Kind::Array => "Array",
            Kind::String | Kind::AsciiString => "String_",
            Kind::Double => "Double",
            Kind::BigInt => "BigInt",
            Kind::Block => "Block",
            Kind::Method => "Method",
            Kind::Class => "Class",
        }
    }
}
