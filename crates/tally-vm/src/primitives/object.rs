//! Object primitives: identity, hashing, reflection on fields, `perform:`.

use tally_heap::Value;

use super::Table;
use crate::objects::Kind;
use crate::runtime::ClassId;
use crate::{Vm, VmError};

pub static INSTANCE: Table = &[
    ("class", class),
    ("objectSize", object_size),
    ("==", identical),
    ("hashcode", hashcode),
    ("inspect", inspect),
    ("halt", halt),
    ("perform:", perform),
    ("perform:withArguments:", perform_with_arguments),
    ("perform:inSuperclass:", perform_in_superclass),
    (
        "perform:withArguments:inSuperclass:",
        perform_with_arguments_in_superclass,
    ),
    ("instVarAt:", inst_var_at),
    ("instVarAt:put:", inst_var_at_put),
    ("instVarNamed:", inst_var_named),
];

fn class(vm: &mut Vm, argc: usize) -> Result<(), VmError> {
    let c = vm.rt.class_of(vm.arg(argc, 0));
    let obj = vm.rt.classes[c as usize].object;
    vm.answer(argc, obj)
}

fn object_size(vm: &mut Vm, argc: usize) -> Result<(), VmError> {
    let v = vm.arg(argc, 0);
    let size = if v.is_ref() {
        16 + 8 * v.slot_count() + v.byte_len().div_ceil(8) * 8
    } else {
        8
    };
    vm.answer(argc, Value::from_small_int(size as i64))
}

fn identical(vm: &mut Vm, _: usize) -> Result<(), VmError> {
    let (a, b) = (vm.arg(1, 0), vm.arg(1, 1));
    let same = a == b || vm.value_identical(a, b);
    vm.answer(1, Value::from_bool(same))
}

impl Vm {
    /// Numbers compare by value even when boxed: two boxes of the same double or big integer
    /// are indistinguishable to a SOM program.
    pub(crate) fn value_identical(&self, a: Value, b: Value) -> bool {
        // Doubles are identical when their bits are, immediate or boxed (a result is immediate
        // whenever it can be, so mixed pairs arise only from values made elsewhere).
        if let (Some(x), Some(y)) = (self.double_of(a), self.double_of(b)) {
            return x.to_bits() == y.to_bits();
        }
        if let (Some(x), Some(y)) = (self.double_of(a), b.as_int()) {
            return x == y as f64;
        }
        if let (Some(x), Some(y)) = (a.as_int(), self.double_of(b)) {
            return x as f64 == y;
        }
        if !(a.is_ref() && b.is_ref()) || a.kind() != b.kind() {
            return false;
        }
        match Kind::from_u8(a.kind()) {
            Kind::Double | Kind::BigInt => a.bytes()[..a.byte_len()] == b.bytes()[..b.byte_len()],
            _ => false,
        }
    }

    /// A short, readable rendering of any value for `inspect`.
    pub(crate) fn describe(&self, v: Value) -> String {
        if let Some(i) = self.int_of(v) {
            return match i {
                crate::numbers::Int::Small(i) => i.to_string(),
                crate::numbers::Int::Big(b) => b.to_string(),
            };
        }
        if let Some(d) = self.double_of(v) {
            return crate::numbers::format_double(d);
        }
        if let Some(s) = v.as_symbol() {
            return format!("#{}", self.rt.symbols.name(s));
        }
        match v {
            Value::NIL => return "nil".into(),
            Value::TRUE => return "true".into(),
            Value::FALSE => return "false".into(),
            _ => {}
        }
        if let Some(text) = self.text_of(v) {
            return format!("'{text}'");
        }
        let class = self.rt.class_name(self.rt.class_of(v));
        let article = if class.starts_with(['A', 'E', 'I', 'O', 'U']) {
            "an"
        } else {
            "a"
        };
        format!("{article} {class}")
    }

    pub(crate) fn hash_of(&self, v: Value) -> i64 {
        if let Some(i) = v.as_int() {
            return i;
        }
        if let Some(s) = v.as_symbol() {
            return super::string::string_hash(self.rt.symbols.name(s).as_bytes());
        }
        // A Double hashes its IEEE bytes whether it is immediate or boxed; -0.0 = 0.0, so the
        // zeros hash alike.
        if let Some(d) = self.double_of(v) {
            let d = if d == 0.0 { 0.0 } else { d };
            return super::string::string_hash(&d.to_le_bytes());
        }
        if !v.is_ref() {
            return (v.bits() >> 3) as i64;
        }
        match Kind::from_u8(v.kind()) {
            Kind::BigInt | Kind::String | Kind::AsciiString => {
                super::string::string_hash(&v.bytes()[..v.byte_len()])
            }
            _ => v.identity_hash() as i64,
        }
    }
}

fn hashcode(vm: &mut Vm, argc: usize) -> Result<(), VmError> {
    let h = vm.hash_of(vm.arg(argc, 0));
    vm.answer(argc, Value::from_small_int(h))
}

fn inspect(vm: &mut Vm, argc: usize) -> Result<(), VmError> {
    let v = vm.arg(argc, 0);
    let class = vm.rt.class_name(vm.rt.class_of(v));
    let mut text = format!("an instance of {class}\n");
    if v.is_ref() && Kind::from_u8(v.kind()) == Kind::Plain {
        let c = vm.rt.class_of(v);
        let slots = vm.fields_ref(v);
        let fields = vm.rt.classes[c as usize].fields.clone();
        for (i, f) in fields.iter().enumerate().take(slots.len) {
            text.push_str(&format!("  {f}: {}\n", vm.describe(slots.get(i))));
        }
    }
    vm.write_out(text.as_bytes());
    vm.answer(argc, v)
}

fn halt(vm: &mut Vm, argc: usize) -> Result<(), VmError> {
    let trace = vm.error("halt: no debugger is attached; execution continues");
    vm.write_err(format!("{trace}\n").as_bytes());
    let v = vm.arg(argc, 0);
    vm.answer(argc, v)
}

/// Spreads an Array argument onto the stack; answers how many values were pushed.
fn spread(vm: &mut Vm, args: Value) -> Result<usize, VmError> {
    let args = vm
        .array_ref(args)
        .map_err(|_| vm.error("Expected an Array of arguments."))?;
    if !vm
        .rt
        .stack
        .has_room(args.len + crate::value_stack::HEADROOM)
    {
        return Err(vm.stack_overflow());
    }
    for i in 0..args.len {
        vm.rt.stack.push(args.get(i));
    }
    Ok(args.len)
}

fn check_arity(vm: &Vm, selector: u32, n: usize) -> Result<(), VmError> {
    let name = vm.rt.symbols.name(selector);
    let expected = if name.ends_with(':') {
        name.matches(':').count()
    } else if name
        .chars()
        .next()
        .is_some_and(|c| !c.is_alphanumeric() && c != '_')
    {
        1
    } else {
        0
    };
    if expected != n {
        return Err(vm.error(format!(
            "Tried passing {n} arguments to a function that requires {expected}."
        )));
    }
    Ok(())
}

fn perform(vm: &mut Vm, _: usize) -> Result<(), VmError> {
    let sel = vm.symbol_arg(vm.arg(1, 1))?;
    check_arity(vm, sel, 0)?;
    vm.rt.stack.pop();
    vm.send_selector(sel, 0)
}

fn perform_with_arguments(vm: &mut Vm, _: usize) -> Result<(), VmError> {
    let (sel, args) = (vm.arg(2, 1), vm.arg(2, 2));
    let sel = vm.symbol_arg(sel)?;
    let len = vm.rt.stack.len();
    vm.rt.stack.truncate(len - 2);
    let n = spread(vm, args)?;
    check_arity(vm, sel, n)?;
    vm.send_selector(sel, n)
}

fn class_arg(vm: &Vm, v: Value) -> Result<ClassId, VmError> {
    vm.class_ref(v).map_err(|_| vm.error("Expected a class."))
}

/// Runs the method `class` has for `sel` on the receiver under the top `n` arguments, which
/// must be an instance of the method's holder: that is what `inSuperclass:` promises.
fn send_in(vm: &mut Vm, class: ClassId, sel: u32, n: usize) -> Result<(), VmError> {
    match vm.rt.lookup(class, sel) {
        Some(code) => {
            let recv = vm.rt.stack[vm.rt.stack.len() - 1 - n];
            vm.check_invocation(code, recv, n)?;
            vm.invoke(code, n)
        }
        None => {
            let name = vm.rt.class_name(class);
            Err(vm.error(format!(
                "Method {} not found in class {name}",
                vm.rt.symbols.name(sel)
            )))
        }
    }
}

fn perform_in_superclass(vm: &mut Vm, _: usize) -> Result<(), VmError> {
    let (sel, cls) = (vm.arg(2, 1), vm.arg(2, 2));
    let sel = vm.symbol_arg(sel)?;
    let class = class_arg(vm, cls)?;
    check_arity(vm, sel, 0)?;
    let len = vm.rt.stack.len();
    vm.rt.stack.truncate(len - 2);
    send_in(vm, class, sel, 0)
}

fn perform_with_arguments_in_superclass(vm: &mut Vm, _: usize) -> Result<(), VmError> {
    let (sel, args, cls) = (vm.arg(3, 1), vm.arg(3, 2), vm.arg(3, 3));
    let sel = vm.symbol_arg(sel)?;
    let class = class_arg(vm, cls)?;
    let len = vm.rt.stack.len();
    vm.rt.stack.truncate(len - 3);
    let n = spread(vm, args)?;
    check_arity(vm, sel, n)?;
    send_in(vm, class, sel, n)
}

/// Fields of a plain object (or an Array's fields and elements), 1-based.
fn inst_var_at(vm: &mut Vm, _: usize) -> Result<(), VmError> {
    let (o, i) = (vm.fields_ref(vm.arg(1, 0)), vm.arg(1, 1));
    let i = vm.index_arg(i, o.len, "array")?;
    vm.answer(1, o.get(i))
}

fn inst_var_at_put(vm: &mut Vm, _: usize) -> Result<(), VmError> {
    let (o, i, v) = (vm.fields_ref(vm.arg(2, 0)), vm.arg(2, 1), vm.arg(2, 2));
    let i = vm.index_arg(i, o.len, "array")?;
    o.set(i, v);
    vm.answer(2, o.obj)
}

fn inst_var_named(vm: &mut Vm, _: usize) -> Result<(), VmError> {
    let (o, s) = (vm.arg(1, 0), vm.arg(1, 1));
    let sym = vm.symbol_arg(s)?;
    let name = vm.rt.symbols.name(sym).to_string();
    let c = vm.rt.class_of(o);
    let found = vm.rt.classes[c as usize]
        .fields
        .iter()
        .position(|f| *f == name)
        .and_then(|i| vm.fields_ref(o).named(i));
    match found {
        Some(v) => vm.answer(1, v),
        None => Err(vm.error(format!("No field named {name} in {}", vm.rt.class_name(c)))),
    }
}
