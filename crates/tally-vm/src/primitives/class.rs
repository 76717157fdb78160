//! Class and Method primitives: reflection over the class table.

use tally_heap::Value;

use super::Table;
use crate::objects::Kind;
use crate::{Vm, VmError};

pub static INSTANCE: Table = &[
    ("name", name),
    ("new", new),
    ("superclass", superclass),
    ("fields", fields),
    ("methods", methods),
];

pub static METHOD: Table = &[
    ("signature", signature),
    ("holder", holder),
    ("invokeOn:with:", invoke_on_with),
];

fn name(vm: &mut Vm, argc: usize) -> Result<(), VmError> {
    let c = vm.class_ref(vm.arg(argc, 0))?;
    let name = vm.rt.class_name(c);
    let sym = vm.rt.symbols.intern(&name);
    vm.answer(argc, Value::from_symbol(sym))
}

fn new(vm: &mut Vm, argc: usize) -> Result<(), VmError> {
    let obj = vm.instantiate(vm.arg(argc, 0))?;
    vm.answer(argc, obj)
}

impl Vm {
    /// `Class>>new`: a new instance of the class object `class`, its fields nil. Compiled
    /// code calls this for the primitive too (`jit::Stubs::ir_new_instance`).
    pub(crate) fn instantiate(&mut self, class: Value) -> Result<Value, VmError> {
        let c = self.class_ref(class)?;
        let info = &self.rt.classes[c as usize];
        let (kind, slots) = match info.instance_kind {
            _ if info.special_layout => {
                let name = self.rt.class_name(c);
                return Err(self.error(format!(
                    "Cannot create an instance of {name} with new: the VM makes its instances"
                )));
            }
            Kind::Plain => (Kind::Plain, info.fields.len()),
            Kind::Array => (Kind::Array, info.fields.len()),
            Kind::String | Kind::AsciiString if info.fields.is_empty() => (Kind::AsciiString, 0),
            other => {
                let name = self.rt.class_name(c);
                return Err(self.error(format!(
                    "instances of {name} cannot be created with new ({other:?})"
                )));
            }
        };
        self.alloc(c, kind, slots, Value::NIL, 0)
    }
}

fn superclass(vm: &mut Vm, argc: usize) -> Result<(), VmError> {
    let c = vm.class_ref(vm.arg(argc, 0))?;
    let v = match vm.rt.classes[c as usize].superclass {
        Some(s) => vm.rt.classes[s as usize].object,
        None => Value::NIL,
    };
    vm.answer(argc, v)
}

/// The names of all instance fields (inherited first), as an Array of Symbols.
fn fields(vm: &mut Vm, argc: usize) -> Result<(), VmError> {
    let c = vm.class_ref(vm.arg(argc, 0))?;
    let names: Vec<u32> = vm.rt.classes[c as usize]
        .fields
        .iter()
        .filter(|f| !f.starts_with('<'))
        .cloned()
        .collect::<Vec<_>>()
        .iter()
        .map(|f| vm.rt.symbols.intern(f))
        .collect();
    let arr = vm.alloc(vm.rt.core.array, Kind::Array, names.len(), Value::NIL, 0)?;
    for (i, n) in names.iter().enumerate() {
        arr.set_slot(i, Value::from_symbol(*n));
    }
    vm.answer(argc, arr)
}

/// The class's own methods as an Array of Method/Primitive objects — the same array and the
/// same objects every time, so identity and hashes are stable.
fn methods(vm: &mut Vm, argc: usize) -> Result<(), VmError> {
    let c = vm.class_ref(vm.arg(argc, 0))?;
    let cached = vm.rt.classes[c as usize].methods_array;
    if cached.is_ref() {
        return vm.answer(argc, cached);
    }
    let order = vm.rt.classes[c as usize].method_order.clone();
    let arr = vm.alloc(vm.rt.core.array, Kind::Array, order.len(), Value::NIL, 0)?;
    vm.rt.handles.push(arr);
    for (i, sel) in order.iter().enumerate() {
        let code = vm.rt.classes[c as usize].methods[sel];
        let class = if vm.rt.codes[code as usize].primitive.is_some() {
            vm.rt.core.primitive
        } else {
            vm.rt.core.method
        };
        let m = vm.alloc(class, Kind::Method, 1, Value::NIL, 0);
        let m = match m {
            Ok(m) => m,
            Err(e) => {
                vm.rt.handles.pop();
                return Err(e);
            }
        };
        m.set_slot(0, Value::from_small_int(code as i64));
        vm.rt.handles.last().expect("handle").set_slot(i, m);
    }
    let arr = vm.rt.handles.pop().expect("handle");
    vm.rt.classes[c as usize].methods_array = arr;
    vm.answer(argc, arr)
}

fn signature(vm: &mut Vm, argc: usize) -> Result<(), VmError> {
    let code = vm.method_ref(vm.arg(argc, 0))? as usize;
    let sel = vm.rt.codes[code].selector;
    vm.answer(argc, Value::from_symbol(sel))
}

fn holder(vm: &mut Vm, argc: usize) -> Result<(), VmError> {
    let code = vm.method_ref(vm.arg(argc, 0))? as usize;
    let holder = vm.rt.codes[code].holder;
    let obj = vm.rt.classes[holder as usize].object;
    vm.answer(argc, obj)
}

/// `aMethod invokeOn: receiver with: argumentsArray`: checked like any reflective call (the
/// arity, and the receiver an instance of the method's holder).
fn invoke_on_with(vm: &mut Vm, _: usize) -> Result<(), VmError> {
    let (m, recv, args) = (vm.arg(2, 0), vm.arg(2, 1), vm.arg(2, 2));
    let code = vm.method_ref(m)?;
    let args = vm
        .arguments_ref(args)
        .map_err(|_| vm.error("invokeOn:with: needs an Array of arguments"))?;
    let n = args.map_or(0, |a| a.len);
    vm.check_invocation(code, recv, n)?;
    if !vm.rt.stack.has_room(n + crate::value_stack::HEADROOM) {
        return Err(vm.stack_overflow());
    }
    let base = vm.rt.stack.len() - 3;
    vm.rt.stack.truncate(base);
    vm.rt.stack.push(recv);
    if let Some(args) = args {
        for i in 0..n {
            vm.rt.stack.push(args.get(i));
        }
    }
    vm.invoke(code, n)
}
