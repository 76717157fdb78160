//! Array primitives.

use tally_heap::Value;

use tally_vertical::event::AccessKind;

use super::Table;
use crate::objects::Kind;
use crate::{Vm, VmError};

pub static INSTANCE: Table = &[("at:", at), ("at:put:", at_put), ("length", length)];
pub static CLASS: Table = &[("new:", new)];

fn at(vm: &mut Vm, _: usize) -> Result<(), VmError> {
    let (a, i) = (vm.array_ref(vm.arg(1, 0))?, vm.arg(1, 1));
    let i = vm.index_arg(i, a.len, "array")?;
    if vm.instrumentation.is_some() {
        vm.instrument_element(a.obj, a.base + i, AccessKind::Load);
    }
    vm.answer(1, a.get(i))
}

fn at_put(vm: &mut Vm, _: usize) -> Result<(), VmError> {
    let (a, i, v) = (vm.array_ref(vm.arg(2, 0))?, vm.arg(2, 1), vm.arg(2, 2));
    let i = vm.index_arg(i, a.len, "array")?;
    if vm.instrumentation.is_some() {
        vm.instrument_element(a.obj, a.base + i, AccessKind::Store);
    }
    a.set(i, v);
    vm.answer(2, a.obj)
}

fn length(vm: &mut Vm, argc: usize) -> Result<(), VmError> {
    let a = vm.array_ref(vm.arg(argc, 0))?;
    vm.answer(argc, Value::from_small_int(a.len as i64))
}

/// `Array new: n` (also on subclasses of Array: the instance gets the receiver's class, and
/// its named fields, nil, come before the `n` elements).
fn new(vm: &mut Vm, _: usize) -> Result<(), VmError> {
    let a = vm.instantiate_indexable(vm.arg(1, 0), vm.arg(1, 1))?;
    vm.answer(1, a)
}

impl Vm {
    /// `Array class>>new:`: a new instance of the class object `class` with `n` elements,
    /// all nil. Compiled code calls this for the primitive too
    /// (`jit::Stubs::ir_new_indexable`).
    pub(crate) fn instantiate_indexable(
        &mut self,
        class: Value,
        n: Value,
    ) -> Result<Value, VmError> {
        let len = self.size_arg(n)?;
        let class_id = self.class_ref(class)?;
        let info = &self.rt.classes[class_id as usize];
        if info.instance_kind != Kind::Array {
            let name = self.rt.class_name(class_id);
            return Err(self.error(format!("{name} new: makes no indexable instances")));
        }
        let fields = info.fields.len();
        self.alloc(class_id, Kind::Array, fields + len, Value::NIL, 0)
    }
}
