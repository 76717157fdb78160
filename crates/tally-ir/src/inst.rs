//! The IR's instructions, each declared once: its fields, its text, the type of its result,
//! the frame state it carries and what it may do ([`InstProps`]). The `InstKind` enum, the
//! values an instruction reads ([`InstKind::operands`]), its properties, its text
//! ([`crate::print`]) and its parsing ([`crate::parse`]) all come from the declarations
//! below, so adding an instruction is its declaration, its lowering (`tally-jit`) and a
//! filetest (`tests/ir/`).
//!
//! A declaration reads `Name(fields) "template" => result, properties;` (or `Name { fields
//! }`): fields of type `ValueId`, `Option<ValueId>` and `Vec<ValueId>` are its operands, in
//! order; a field may give a default (`= expr`) that its template's optional group leaves
//! out ([`crate::syntax`]); the result is `Word`, `Int`, `Flag`, `Float` or `none`; a
//! property may hold only when a condition on the fields does (`before(op.may_overflow())`).

use tally_heap::Value;
use tally_vm::bytecode::{CodeId, SiteId};
use tally_vm::jit::{DeoptReason, DoubleFn, PlainShape};

use crate::print::Names;
use crate::syntax::{self, Field, NameTable, Slot};
use crate::{FloatOp, IntCmp, IntOp, Resume, Ty, ValueId};

/// What an instruction may do, as its declaration says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct InstProps {
    /// The type of the value it defines (`None`: it defines none). Folding may refine a
    /// `Word` result to `Int` (a constant that was small-integer arithmetic).
    pub result: Option<Ty>,
    /// The frame state it carries: where the interpreter resumes if the activation is handed
    /// over at it — before it (a guard's, which the interpreter redoes), after its call (a
    /// call's) — or none.
    pub state: Option<Resume>,
    /// It calls out: anything may happen, the frames above it are real.
    pub calls: bool,
    /// It may allocate, and so collect (calls included).
    pub allocates: bool,
    /// It may hand the activation to the interpreter at its state, before it is done (a
    /// failed guard, or a case compiled code leaves to the interpreter).
    pub deopts: bool,
    /// Removing it when its result is unused changes nothing the program can see: it
    /// neither writes nor calls, nor can its general path raise an error; it may allocate
    /// (an identity no one sees) or deoptimize (the interpreter then computes what compiled
    /// code would have). Guards stay: what they prove is used by other passes without a use
    /// of their value.
    pub removable: bool,
    /// It reads doubles ([`Ty::Float`]); every other instruction reads SOM values and flags.
    pub reads_doubles: bool,
    /// It may store into the fields of objects that already exist (calls run SOM code).
    pub writes_fields: bool,
    /// It exists only for frame states: the exits that rebuild a frame holding it make it.
    pub is_virtual: bool,
}

impl InstProps {
    const fn of(result: Option<Ty>) -> InstProps {
        InstProps {
            result,
            state: None,
            calls: false,
            allocates: false,
            deopts: false,
            removable: false,
            reads_doubles: false,
            writes_fields: false,
            is_virtual: false,
        }
    }
}

/// The result type a declaration names.
macro_rules! result_ty {
    (none) => {
        None
    };
    ($ty:ident) => {
        Some(Ty::$ty)
    };
}

/// Sets one declared property (under its condition, if it has one).
macro_rules! set_prop {
    ($p:ident, before) => {
        $p.state = Some(Resume::Before)
    };
    ($p:ident, before, $c:expr) => {
        if $c {
            $p.state = Some(Resume::Before)
        }
    };
    ($p:ident, after_call) => {
        $p.state = Some(Resume::AfterCall)
    };
    ($p:ident, $flag:ident) => {
        $p.$flag = true
    };
    ($p:ident, $flag:ident, $c:expr) => {
        $p.$flag = $c
    };
}

/// The pattern that binds every field of instruction `$name` by its name.
macro_rules! pattern {
    ($name:ident ()) => {
        InstKind::$name
    };
    ($name:ident ( $($f:ident : $t:ty $(= $d:expr)?),+ )) => {
        InstKind::$name($($f),+)
    };
    ($name:ident { $($f:ident : $t:ty $(= $d:expr)?),+ }) => {
        InstKind::$name { $($f),+ }
    };
}

/// Calls `$call(field, extra)` for every field bound by [`pattern!`].
macro_rules! each_field {
    ((), $call:path, $extra:expr) => {};
    (( $($f:ident : $t:ty $(= $d:expr)?),+ ), $call:path, $extra:expr) => {
        $( $call($f, $extra); )+
    };
    ({ $($f:ident : $t:ty $(= $d:expr)?),+ }, $call:path, $extra:expr) => {
        $( $call($f, $extra); )+
    };
}

/// The enum itself, one variant at a time (a variant's fields are named in the declaration
/// even where the variant is a tuple).
macro_rules! declare_enum {
    ([$($done:tt)*]) => {
        /// What an instruction does. Instructions that may deoptimize, call or collect carry
        /// a frame state ([`InstProps::state`]).
        #[derive(Clone, Debug, PartialEq)]
        pub enum InstKind { $($done)* }
    };
    ([$($done:tt)*] $(#[$doc:meta])* $name:ident () ; $($rest:tt)*) => {
        declare_enum!([$($done)* $(#[$doc])* $name,] $($rest)*);
    };
    ([$($done:tt)*] $(#[$doc:meta])* $name:ident ( $($f:ident : $t:ty $(= $d:expr)?),+ ) ;
        $($rest:tt)*) => {
        declare_enum!([$($done)* $(#[$doc])* $name($($t),+),] $($rest)*);
    };
    ([$($done:tt)*] $(#[$doc:meta])* $name:ident { $($f:ident : $t:ty $(= $d:expr)?),+ } ;
        $($rest:tt)*) => {
        declare_enum!([$($done)* $(#[$doc])* $name { $($f: $t),+ },] $($rest)*);
    };
}

/// Reads instruction `$name`'s fields from `$text` by its template; answers it.
macro_rules! read_inst {
    ($name:ident (), $syntax:literal, $text:ident, $names:ident) => {
        syntax::read($syntax, $text, &mut |_| Err("no fields".into())).map(|()| InstKind::$name)
    };
    ($name:ident ( $($f:ident : $t:ty $(= $d:expr)?),+ ), $syntax:literal, $text:ident,
        $names:ident) => {{
        $( let mut $f: Option<$t> = None; )+
        let read = syntax::read($syntax, $text, &mut |slot| read_fields!(slot, $names, $($f: $t),+));
        read.and_then(|()| {
            Ok(InstKind::$name($( filled($f, None $(.or(Some($d)))?, stringify!($f))? ),+))
        })
    }};
    ($name:ident { $($f:ident : $t:ty $(= $d:expr)?),+ }, $syntax:literal, $text:ident,
        $names:ident) => {{
        $( let mut $f: Option<$t> = None; )+
        let read = syntax::read($syntax, $text, &mut |slot| read_fields!(slot, $names, $($f: $t),+));
        read.and_then(|()| {
            Ok(InstKind::$name { $( $f: filled($f, None $(.or(Some($d)))?, stringify!($f))? ),+ })
        })
    }};
}

/// Serves the parser's request `$slot` from the fields' slots (`Option`s named as the
/// fields).
macro_rules! read_fields {
    ($slot:ident, $names:ident, $($f:ident : $t:ty),+) => {
        match $slot {
            Slot::Read(name, kind, input) => {
                $( if name == stringify!($f) {
                    $f = Some(<$t as Field>::read(kind, input, $names)?);
                    return Ok(());
                } )+
                Err(format!("no field {name}"))
            }
            Slot::Reset(name) => {
                $( if name == stringify!($f) {
                    $f = None;
                } )+
                Ok(())
            }
        }
    };
}

/// Writes the fields bound by [`pattern!`] by the template; a field is at its default when
/// it equals the declared default or, without one, its type's.
macro_rules! write_inst {
    ((), $syntax:literal, $names:ident, $out:ident) => {
        syntax::write($syntax, $out, &mut |_, _, _| {}, &|_| true)
    };
    ($fields:tt, $syntax:literal, $names:ident, $out:ident) => {
        write_inst!(@fields $fields, $syntax, $names, $out)
    };
    (@fields ( $($f:ident : $t:ty $(= $d:expr)?),+ ), $syntax:literal, $names:ident, $out:ident) => {
        write_inst!(@go [$($f : $t $(= $d)?),+], $syntax, $names, $out)
    };
    (@fields { $($f:ident : $t:ty $(= $d:expr)?),+ }, $syntax:literal, $names:ident, $out:ident) => {
        write_inst!(@go [$($f : $t $(= $d)?),+], $syntax, $names, $out)
    };
    (@go [$($f:ident : $t:ty $(= $d:expr)?),+], $syntax:literal, $names:ident, $out:ident) => {
        syntax::write(
            $syntax,
            $out,
            &mut |name, kind, out| {
                $( if name == stringify!($f) { Field::write($f, kind, $names, out); } )+
            },
            &|name| {
                $( if name == stringify!($f) {
                    let default: Option<$t> = None $(.or(Some($d)))?;
                    return default.or_else(<$t as Field>::absent).as_ref() == Some($f);
                } )+
                true
            },
        )
    };
}

/// A field read, or its default.
fn filled<T: Field>(read: Option<T>, default: Option<T>, name: &str) -> Result<T, String> {
    read.or(default)
        .or_else(T::absent)
        .ok_or_else(|| format!("no {name}"))
}

macro_rules! instructions {
    ($(
        $(#[$doc:meta])*
        $name:ident $fields:tt $syntax:literal => $result:ident $(, $prop:ident $(($cond:expr))?)* ;
    )*) => {
        declare_enum!([] $( $(#[$doc])* $name $fields ; )*);

        impl InstKind {
            /// What it may do.
            #[allow(unused_variables)]
            pub fn props(&self) -> InstProps {
                match self {
                    $( pattern!($name $fields) => {
                        #[allow(unused_mut)]
                        let mut p = InstProps::of(result_ty!($result));
                        $( set_prop!(p, $prop $(, $cond)?); )*
                        p
                    } )*
                }
            }

            /// The values it reads, in order.
            #[allow(unused_variables)]
            pub fn operands(&self) -> Vec<ValueId> {
                let mut out = Vec::new();
                match self {
                    $( pattern!($name $fields) => { each_field!($fields, Field::operands, &mut out); } )*
                }
                out
            }

            /// Rewrites every operand through `f`.
            #[allow(unused_variables)]
            pub fn map_operands(&mut self, mut f: impl FnMut(ValueId) -> ValueId) {
                match self {
                    $( pattern!($name $fields) => { each_field!($fields, Field::map_operands, &mut f); } )*
                }
            }

            /// Its variant's name (`GuardClass`), for tables that count instructions by kind.
            #[allow(unused_variables)]
            pub fn name(&self) -> &'static str {
                match self {
                    $( pattern!($name $fields) => stringify!($name), )*
                }
            }

            /// Its template ([`crate::syntax`]).
            #[allow(unused_variables)]
            pub fn syntax(&self) -> &'static str {
                match self {
                    $( pattern!($name $fields) => $syntax, )*
                }
            }

            /// Its text, codes and sites named by `names`.
            #[allow(unused_variables)]
            pub fn text(&self, names: &dyn Names) -> String {
                let mut out = String::new();
                let o = &mut out;
                match self {
                    $( pattern!($name $fields) => { write_inst!($fields, $syntax, names, o); } )*
                }
                out
            }

            /// The instruction `text` is, codes and sites named by `names`.
            pub fn parse(text: &str, names: &NameTable) -> Result<InstKind, String> {
                $(
                    if let Ok(kind) = read_inst!($name $fields, $syntax, text, names) {
                        return Ok(kind);
                    }
                )*
                Err(format!("no instruction reads `{text}`"))
            }
        }
    };
}

instructions! {
    /// A constant SOM value (an immediate).
    Const(value: Value) "const {value}" => Word, removable;
    /// A constant truth value.
    FlagConst(value: bool) "flag {value}" => Flag, removable;
    /// Stack local `slot`'s value as the activation starts: nil in a new activation; what
    /// the frame holds in one the interpreter set up or handed back at its first
    /// instruction (a loop starting there may have given it a value).
    InitialLocal(slot: u16) "initial_local {slot}" => Word, removable;
    /// Slot `k` of the interpreter's frame (a local or an operand-stack entry above them),
    /// read by an on-stack-replacement entry: the frame it takes over holds the loop's
    /// values.
    FrameSlot(slot: u16) "frame_slot {slot}" => Word, removable;
    /// The context of the interpreter's frame an on-stack-replacement entry takes over.
    FrameContext() "frame_context" => Word, removable;
    /// An entry of the VM's literal table (strings, doubles, big integers: references the
    /// collector may move, so read where used).
    Literal(index: u32) "literal {index}" => Word, removable;
    /// A global's value; an unknown global sends `unknownGlobal:` (the interpreter does).
    Global(index: u32) "global {index}" => Word, before, deopts;
    /// Field `index` of `obj` (an object with fields: the receiver of a method).
    LoadField { obj: ValueId, index: u16 } "load_field {obj}.{index}" => Word, removable;
    /// `obj`'s field `index` := `value` (the write barrier is the lowering's).
    StoreField { obj: ValueId, index: u16, value: ValueId } "store_field {obj}.{index}, {value}"
        => none, writes_fields;
    /// A new context for this activation (`context_size` slots, its outer the closure's
    /// context for a block).
    NewContext { size: u16, outer: Option<ValueId> } "new_context {size}[, outer {outer}]"
        => Word, before, allocates;
    /// A context only frame states and virtual closures hold (its slots are SSA values,
    /// each state naming what they hold there): made by the exit that rebuilds a frame
    /// holding it, nowhere else.
    VirtualContext { size: u16, outer: Option<ValueId> } "virtual_context {size}[, {outer}]"
        => Word, removable, is_virtual;
    /// The context a context was made in.
    ContextOuter(ctx: ValueId) "context_outer {ctx}" => Word, removable;
    /// The context a closure was made in.
    ClosureContext(closure: ValueId) "closure_context {closure}" => Word, removable;
    /// Slot `index` of a context.
    LoadContext { ctx: ValueId, index: u16 } "load_context {ctx}.{index}" => Word, removable;
    StoreContext { ctx: ValueId, index: u16, value: ValueId }
        "store_context {ctx}.{index}, {value}" => none;
    /// A closure over this activation.
    MakeBlock { code: CodeId, receiver: ValueId, ctx: Option<ValueId> }
        "make_block {code:code}, {receiver}[, {ctx}]" => Word, before, allocates;
    /// A closure only frame states hold (its block inlined where it was called, and no
    /// other use): made by the exit that rebuilds a frame holding it, nowhere else.
    VirtualBlock { code: CodeId, receiver: ValueId, ctx: Option<ValueId> }
        "virtual_block {code:code}, {receiver}[, {ctx}]" => Word, removable, is_virtual;
    /// `value` if it is a small integer (typed [`Ty::Int`]), else deoptimize for `reason`
    /// (the site's operand was none; at a loop entry, the frame's value was none).
    GuardInt { value: ValueId, reason: DeoptReason = DeoptReason::NotSmallInts }
        "guard_int {value}[, {reason}]" => Int, before, deopts;
    /// `value` if its class is `class`, else deoptimize for `reason`.
    GuardClass { value: ValueId, class: u32, reason: DeoptReason = DeoptReason::ReceiverClass }
        "guard_class {value}, {class:class}[, {reason}]" => Word, before, deopts;
    /// Whether `value`'s class is `class` (a class switch's test; no deopt).
    ClassIs { value: ValueId, class: u32 } "class_is {value}, {class:class}" => Flag, removable;
    /// Small-integer arithmetic; deoptimizes where the result would leave the small
    /// integers ([`IntOp::may_overflow`]), and stays where its general path may raise an
    /// error ([`IntOp::may_raise`]).
    IntBinary { op: IntOp, lhs: ValueId, rhs: ValueId } "{op} {lhs}, {rhs}"
        => Int, before(op.may_overflow()), deopts(op.may_overflow()), removable(!op.may_raise());
    IntCompare { op: IntCmp, lhs: ValueId, rhs: ValueId } "int_{op} {lhs}, {rhs}"
        => Flag, removable;
    /// Whether two values are the same word (`==` of objects that are not numbers).
    Identical(lhs: ValueId, rhs: ValueId) "identical {lhs}, {rhs}" => Flag, removable;
    /// `isNil` (`is_nil`) or `notNil` of `value` as a flag: a comparison with nil, made
    /// while the core library's definitions stand (`SiteFacts::nil_tests_standard`); a
    /// class loaded since that redefines either deoptimizes.
    NilTest { value: ValueId, is_nil: bool } "{is_nil?is_nil|not_nil} {value}"
        => Flag, before, deopts, removable;
    /// A constant double (its bits).
    FloatConst(bits: u64) "float {bits:double}" => Float, removable;
    /// `value` as a double (typed [`Ty::Float`]) if it is a Double (an immediate or a heap
    /// one) or, with `accept_int`, a small integer; else deoptimize for `reason`.
    UnboxFloat { value: ValueId, accept_int: bool, reason: DeoptReason = DeoptReason::NotDoubles }
        "unbox_float {value}{accept_int?, int too|}[, {reason}]" => Float, before, deopts;
    FloatBinary { op: FloatOp, lhs: ValueId, rhs: ValueId } "{op} {lhs}, {rhs}"
        => Float, removable, reads_doubles;
    /// Double's `sqrt`, `sin` or `cos` of a double.
    FloatUnary { op: DoubleFn, value: ValueId } "float_{op} {value}"
        => Float, removable, reads_doubles;
    /// A comparison of two doubles ([`IntCmp::apply_float`]).
    FloatCompare { op: IntCmp, lhs: ValueId, rhs: ValueId } "float_{op} {lhs}, {rhs}"
        => Flag, removable, reads_doubles;
    /// A double as a SOM value: an immediate where it has one, else a new heap Double (a
    /// box's identity is never seen, since `==` compares numbers by value). No frame state:
    /// nothing deoptimizes there, and a collection finds the values live across it in the
    /// stack maps, as for any call.
    BoxFloat(value: ValueId) "box_float {value}" => Word, allocates, removable, reads_doubles;
    /// `true` or `false` as a SOM value.
    FlagToBool(flag: ValueId) "flag_to_bool {flag}" => Word, removable;
    /// The truth of a SOM Boolean; any other value deoptimizes (the interpreter reports it).
    Truth(value: ValueId) "truth {value}" => Flag, before, deopts, removable;
    /// A send through the VM: lookup, any target, anything may happen.
    Send { site: SiteId, receiver: ValueId, args: Vec<ValueId> }
        "send {site:site}, {receiver}[, {args}]"
        => Word, after_call, calls, allocates, writes_fields;
    /// A super send, whose target is fixed by the holder's superclass.
    SuperSend { site: SiteId, receiver: ValueId, args: Vec<ValueId> }
        "super_send {site:site}, {receiver}[, {args}]"
        => Word, after_call, calls, allocates, writes_fields;
    /// A call of a known method (the class guard before it fixed the target).
    CallMethod { code: CodeId, receiver: ValueId, args: Vec<ValueId> }
        "call {code:code}, {receiver}[, {args}]"
        => Word, after_call, calls, allocates, writes_fields;
    /// `value…` of a closure (its class guard fixed that it is one).
    CallBlock { closure: ValueId, args: Vec<ValueId> } "call_block {closure}[, {args}]"
        => Word, after_call, calls, allocates, writes_fields;
    /// `Array>>at:` on an Array (class guarded); an index out of bounds goes to the
    /// interpreter (which raises the error).
    ArrayAt { array: ValueId, index: ValueId } "array_at {array}, {index}"
        => Word, before, deopts;
    ArrayAtPut { array: ValueId, index: ValueId, value: ValueId }
        "array_at_put {array}, {index}, {value}" => none, before, deopts, writes_fields;
    ArrayLength(array: ValueId) "array_length {array}" => Int, removable;
    /// String's primitive `length` on a String (class guarded): the byte length of a string
    /// of one-byte characters; any other deoptimizes (`not_ascii`: the interpreter counts
    /// its characters, and the site is not speculated on again).
    StringLength(string: ValueId) "string_length {string}" => Int, before, deopts, removable;
    /// String's primitive `=` of `lhs`, a String or (`symbol`) a Symbol (class guarded), and
    /// any `rhs`: whether their text is the same. Neither collects nor fails.
    StringEqual { lhs: ValueId, rhs: ValueId, symbol: bool }
        "{symbol?symbol|string}_equal {lhs}, {rhs}" => Flag, removable;
    /// Class's primitive `new` on `class` (class guarded).
    NewInstance(class: ValueId) "new_instance {class}" => Word, before, allocates;
    /// Class's primitive `new` on class object `class`, whose class guard fixed that its
    /// instances are plain objects (`shape`: their class id and number of fields): one, nil
    /// in each field.
    NewObject { class: ValueId, shape: PlainShape } "new_object {class}, {shape}"
        => Word, before, allocates, removable;
    /// An object only frame states hold (made by a [`InstKind::NewObject`] that nothing
    /// else used, its fields SSA values each state names): made by the exit that rebuilds
    /// a frame holding it, nowhere else.
    VirtualObject { class: ValueId, shape: PlainShape } "virtual_object {class}, {shape}"
        => Word, removable, is_virtual;
    /// A virtual object made where it escapes (a send, a return, a store into the heap):
    /// a new plain object of class object `class` with `fields` in its fields. No frame
    /// state, as for [`InstKind::BoxFloat`].
    Materialize { class: ValueId, shape: PlainShape, fields: Vec<ValueId> }
        "materialize {class}, {shape}, {fields}" => Word, allocates, removable;
    /// Array's primitive `new:` on Array (class guarded); a length that is no small
    /// integer, or a negative one, fails as the primitive does.
    NewArray { class: ValueId, length: ValueId } "new_array {class}, {length}"
        => Word, before, allocates;
    /// A loop's back-edge: the profiler and the controller are served here (a status to
    /// serve hands the activation to the interpreter at the loop head).
    Yieldpoint() "yieldpoint" => none, before, deopts;
    /// The prologue hook of a call of `code` done in place (a trivial method, a primitive):
    /// while the profiler counts calls (a CBS window, exact counts) it sees this one as the
    /// interpreter's send would show it. Neither collects nor fails.
    CallHook(code: CodeId) "call_hook {code:code}" => none;
    /// An inlined activation of `code` starts: the call `CallHook` shows the profiler, also
    /// counted as a call of `code` in this tier where calls are counted (`--count-calls`).
    EnterInlined(code: CodeId) "enter_inlined {code:code}" => none;
}

impl InstKind {
    /// Whether it may deoptimize, call or collect: it then carries a frame state.
    pub fn needs_state(&self) -> bool {
        self.props().state.is_some()
    }

    /// Whether removing it, when its result is unused, changes nothing the program can see
    /// ([`InstProps::removable`]).
    pub fn removable_if_unused(&self) -> bool {
        self.props().removable
    }

    /// Whether it calls out (a send or call: anything may happen, the frames above it are
    /// real); its frame state then resumes after the call.
    pub fn is_call(&self) -> bool {
        self.props().calls
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: ValueId = ValueId(1);
    const B: ValueId = ValueId(2);
    const C: ValueId = ValueId(3);
    const SHAPE: PlainShape = PlainShape {
        class: 7,
        fields: 2,
    };

    /// One instruction of each kind, its fields off their defaults where they have one.
    fn one_of_each() -> Vec<InstKind> {
        let mut all = values_and_contexts();
        all.extend(guards_arithmetic_and_calls());
        all
    }

    fn values_and_contexts() -> Vec<InstKind> {
        use InstKind::*;
        let (a, b) = (A, B);
        vec![
            Const(Value::from_small_int(-3)),
            Const(Value::from_symbol(4)),
            Const(Value::NIL),
            FlagConst(true),
            InitialLocal(3),
            FrameSlot(4),
            FrameContext,
            Literal(9),
            Global(8),
            LoadField { obj: a, index: 1 },
            StoreField {
                obj: a,
                index: 1,
                value: b,
            },
            NewContext {
                size: 2,
                outer: Some(a),
            },
            NewContext {
                size: 2,
                outer: None,
            },
            VirtualContext {
                size: 2,
                outer: Some(a),
            },
            ContextOuter(a),
            ClosureContext(a),
            LoadContext { ctx: a, index: 0 },
            StoreContext {
                ctx: a,
                index: 0,
                value: b,
            },
            MakeBlock {
                code: 5,
                receiver: a,
                ctx: Some(b),
            },
            VirtualBlock {
                code: 5,
                receiver: a,
                ctx: None,
            },
        ]
    }

    fn guards_arithmetic_and_calls() -> Vec<InstKind> {
        use InstKind::*;
        let (a, b, c, shape) = (A, B, C, SHAPE);
        vec![
            GuardInt {
                value: a,
                reason: DeoptReason::NotSmallInts,
            },
            GuardInt {
                value: a,
                reason: DeoptReason::LoopEntry,
            },
            GuardClass {
                value: a,
                class: 7,
                reason: DeoptReason::ReceiverClass,
            },
            ClassIs { value: a, class: 7 },
            IntBinary {
                op: IntOp::Shr,
                lhs: a,
                rhs: b,
            },
            IntCompare {
                op: IntCmp::LessEq,
                lhs: a,
                rhs: b,
            },
            Identical(a, b),
            NilTest {
                value: a,
                is_nil: false,
            },
            FloatConst((-0.5f64).to_bits()),
            FloatConst(f64::INFINITY.to_bits()),
            UnboxFloat {
                value: a,
                accept_int: true,
                reason: DeoptReason::LoopEntry,
            },
            UnboxFloat {
                value: a,
                accept_int: false,
                reason: DeoptReason::NotDoubles,
            },
            FloatBinary {
                op: FloatOp::Div,
                lhs: a,
                rhs: b,
            },
            FloatUnary {
                op: DoubleFn::Cos,
                value: a,
            },
            FloatCompare {
                op: IntCmp::Greater,
                lhs: a,
                rhs: b,
            },
            BoxFloat(a),
            FlagToBool(a),
            Truth(a),
            Send {
                site: 3,
                receiver: a,
                args: vec![b, c],
            },
            SuperSend {
                site: 3,
                receiver: a,
                args: vec![],
            },
            CallMethod {
                code: 6,
                receiver: a,
                args: vec![b],
            },
            CallBlock {
                closure: a,
                args: vec![],
            },
            ArrayAt { array: a, index: b },
            ArrayAtPut {
                array: a,
                index: b,
                value: c,
            },
            ArrayLength(a),
            StringLength(a),
            StringEqual {
                lhs: a,
                rhs: b,
                symbol: true,
            },
            NewInstance(a),
            NewObject { class: a, shape },
            VirtualObject { class: a, shape },
            Materialize {
                class: a,
                shape,
                fields: vec![b, c],
            },
            Materialize {
                class: a,
                shape,
                fields: vec![],
            },
            NewArray {
                class: a,
                length: b,
            },
            Yieldpoint,
            CallHook(5),
            EnterInlined(6),
        ]
    }

    #[test]
    fn every_instruction_reads_back_from_its_text() {
        let mut names = NameTable::default();
        names.add_code(5, "[] in T>>at:put:");
        names.add_code(6, "T>>,");
        names.add_site(3, "#at:put:");
        for kind in one_of_each() {
            let text = kind.text(&names);
            let back = InstKind::parse(&text, &names)
                .unwrap_or_else(|e| panic!("`{text}` does not read back: {e}"));
            assert_eq!(back, kind, "`{text}`");
        }
    }

    #[test]
    fn defaults_leave_the_text_as_it_was() {
        let names = NameTable::default();
        let guard = InstKind::GuardInt {
            value: ValueId(4),
            reason: DeoptReason::NotSmallInts,
        };
        assert_eq!(guard.text(&names), "guard_int v4");
        let entry = InstKind::GuardInt {
            value: ValueId(4),
            reason: DeoptReason::LoopEntry,
        };
        assert_eq!(entry.text(&names), "guard_int v4, loop_entry");
        let send = InstKind::Send {
            site: 2,
            receiver: ValueId(1),
            args: vec![],
        };
        assert_eq!(send.text(&names), "send site2, v1");
    }

    /// What the properties mean for one another: a call's state resumes after it, a
    /// deoptimization's before it; what exists only for exits has no state and goes when
    /// unused; doubles are computed on without a state.
    #[test]
    fn the_declared_properties_agree_with_one_another() {
        for kind in one_of_each() {
            let p = kind.props();
            if p.calls {
                assert_eq!(p.state, Some(Resume::AfterCall), "{kind:?}");
                assert!(p.allocates && p.writes_fields, "{kind:?}");
            }
            if p.deopts {
                assert_eq!(p.state, Some(Resume::Before), "{kind:?}");
            }
            if p.is_virtual {
                assert!(p.state.is_none() && p.removable, "{kind:?}");
            }
            if p.reads_doubles {
                assert!(p.state.is_none(), "{kind:?}");
            }
        }
    }
}
