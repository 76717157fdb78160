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

/// The primitive for `class>>selector` (or `class class>>selector` when `class_side`).
pub fn find(class: &str, class_side: bool, selector: &str) -> Option<Primitive> {
    let table: Table = match (class, class_side) {
        ("Object", false) => object::INSTANCE,
        ("Class", false) => class::INSTANCE,
        ("Array", false) => array::INSTANCE,
        ("Array", true) => array::CLASS,
        ("Block", false) => block::BLOCK,
        ("Block1", false) | ("Block2", false) | ("Block3", false) | ("Block4", false) => {
            block::BLOCK_N
        }
        ("Double", false) => double::INSTANCE,
        ("Double", true) => double::CLASS,
        ("Integer", false) => integer::INSTANCE,
        ("Integer", true) => integer::CLASS,
        ("Method", false) | ("Primitive", false) => class::METHOD,
        ("String", false) => string::INSTANCE,
        ("Symbol", false) => string::SYMBOL,
        ("System", false) => system::INSTANCE,
        _ => return None,
    };
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

    pub(crate) fn expected_int(&self, v: Value) -> VmError {
        self.error(format!(
            "Expected object of type 'Int' but got type '{}'.",
            self.type_name(v)
        ))
    }

    pub(crate) fn expected_symbol(&self, v: Value) -> VmError {
        let class = self.rt.class_name(self.rt.class_of(v));
        self.error(format!(
            "Expected instance of 'Symbol' but got instance of '{class}'."
        ))
    }

    pub(crate) fn expected_string(&self, v: Value) -> VmError {
        self.error(format!(
            "Expected object of type 'String_' but got type '{}'.",
            self.type_name(v)
        ))
    }

    /// A small non-negative index argument, 1-based, or the error SOM VMs report.
    pub(crate) fn index_arg(&self, v: Value, len: usize, what: &str) -> Result<usize, VmError> {
        let Some(i) = v.as_int() else {
            return Err(self.expected_int(v));
        };
        if i < 0 {
            return Err(self.error("Can't represent as unsigned machine integer."));
        }
        if i == 0 || i as usize > len {
            return Err(self.error(format!("Index {i} not valid for {what} of length {len}.")));
        }
        Ok(i as usize - 1)
    }
}
