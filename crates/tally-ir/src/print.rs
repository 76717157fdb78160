//! The IR as text: blocks with their parameters, one instruction a line with its type, its
//! bytecode index and its frame state, then the frame states. Stable from run to run (no
//! addresses), so listings can be fixtures.
//!
//! ```text
//! function Loop>>run: 4 blocks, 12 values, 3 frame states
//! block0(v0: word):
//!     v1 = const nil                          @0
//!     jump block1(v0, v1)
//! block1(v2: word, v3: word):                 @2
//!     v4 = guard_int v3                        @5  fs0
//!     ...
//! fs0: Loop>>run @5 before  locals [v2, v3]  stack [v3, v5]
//! ```

use std::fmt::Write;

use tally_heap::Value;

use crate::{FrameState, Function, InstKind, Resume, Terminator, ValueId};

/// What a listing calls codes and send sites.
pub trait Names {
    /// A code's name (`Class>>selector`, `[] in Class>>selector`).
    fn code(&self, id: u32) -> String;
    /// A send site, as a listing shows it (its selector, where known).
    fn site(&self, site: u32) -> String {
        format!("site{site}")
    }
}

impl<F: Fn(u32) -> String> Names for F {
    fn code(&self, id: u32) -> String {
        self(id)
    }
}

/// The function as text, codes and sites named by `names`.
pub fn print(f: &Function, names: &dyn Names) -> String {
    let name_of = |id: u32| names.code(id);
    let name_of = &name_of;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "function {}: {} blocks, {} values, {} frame states",
        f.name,
        f.blocks.len(),
        f.values.len(),
        f.states.len()
    );
    for (b, block) in f.blocks.iter().enumerate() {
        let params: Vec<String> = block
            .params
            .iter()
            .map(|&p| format!("{p}: {}", f.ty(p).name()))
            .collect();
        let head = format!("block{b}({}):", params.join(", "));
        let scope = if block.scope.0 == 0 {
            String::new()
        } else {
            format!(" in {}", block.scope)
        };
        let _ = writeln!(out, "{head:<40} @{}{scope}", block.bci);
        for &i in &block.insts {
            let inst = &f.insts[i.index()];
            let text = match inst.result {
                Some(v) => format!("    {v} = {}", inst_text(&inst.kind, names)),
                None => format!("    {}", inst_text(&inst.kind, names)),
            };
            let ty = inst
                .result
                .map_or(String::new(), |v| format!(": {}", f.ty(v).name()));
            let state = inst.state.map_or(String::new(), |s| format!("  {s}"));
            let _ = writeln!(out, "{:<40} @{}{state}", format!("{text}{ty}"), inst.bci);
        }
        let _ = writeln!(out, "    {}", term_text(&block.term));
    }
    for (k, state) in f.states.iter().enumerate() {
        let _ = writeln!(out, "fs{k}: {}", state_text(state, name_of));
    }
    for (k, scope) in f.scopes.iter().enumerate().skip(1) {
        if let Some((parent, bci)) = scope.parent {
            let _ = writeln!(
                out,
                "s{k}: {} inlined in {parent} @{bci}",
                name_of(scope.code)
            );
        }
    }
    out
}

fn list(vs: &[ValueId]) -> String {
    vs.iter()
        .map(|v| v.to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

fn value_text(v: Value) -> String {
    if v == Value::NIL {
        "nil".into()
    } else if v == Value::TRUE {
        "true".into()
    } else if v == Value::FALSE {
        "false".into()
    } else if let Some(i) = v.as_int() {
        i.to_string()
    } else if let Some(s) = v.as_symbol() {
        format!("#symbol{s}")
    } else {
        format!("{:#x}", v.0)
    }
}

fn inst_text(k: &InstKind, names: &dyn Names) -> String {
    let name_of = |id: u32| names.code(id);
    use InstKind::*;
    match k {
        Const(v) => format!("const {}", value_text(*v)),
        FlagConst(b) => format!("flag {b}"),
        Literal(n) => format!("literal {n}"),
        Global(n) => format!("global {n}"),
        LoadField { obj, index } => format!("load_field {obj}.{index}"),
        StoreField { obj, index, value } => format!("store_field {obj}.{index}, {value}"),
        NewContext { size, outer } => match outer {
            Some(o) => format!("new_context {size}, outer {o}"),
            None => format!("new_context {size}"),
        },
        ContextOuter(c) => format!("context_outer {c}"),
        ClosureContext(c) => format!("closure_context {c}"),
        InitialLocal(k) => format!("initial_local {k}"),
        FrameSlot(k) => format!("frame_slot {k}"),
        FrameContext => "frame_context".into(),
        LoadContext { ctx, index } => format!("load_context {ctx}.{index}"),
        StoreContext { ctx, index, value } => format!("store_context {ctx}.{index}, {value}"),
        MakeBlock {
            code,
            receiver,
            ctx,
        } => match ctx {
            Some(c) => format!("make_block {}, {receiver}, {c}", name_of(*code)),
            None => format!("make_block {}, {receiver}", name_of(*code)),
        },
        VirtualContext { size, outer } => match outer {
            Some(o) => format!("virtual_context {size}, {o}"),
            None => format!("virtual_context {size}"),
        },
        VirtualBlock {
            code,
            receiver,
            ctx,
        } => match ctx {
            Some(c) => format!("virtual_block {}, {receiver}, {c}", name_of(*code)),
            None => format!("virtual_block {}, {receiver}", name_of(*code)),
        },
        GuardInt(v) => format!("guard_int {v}"),
        GuardClass { value, class } => format!("guard_class {value}, class{class}"),
        ClassIs { value, class } => format!("class_is {value}, class{class}"),
        IntBinary { op, lhs, rhs } => format!("{} {lhs}, {rhs}", op.name()),
        IntCompare { op, lhs, rhs } => format!("int_{} {lhs}, {rhs}", op.name()),
        Identical(a, b) => format!("identical {a}, {b}"),
        NilTest { value, is_nil } => match is_nil {
            true => format!("is_nil {value}"),
            false => format!("not_nil {value}"),
        },
        FloatConst(bits) => format!("float {:?}", f64::from_bits(*bits)),
        UnboxFloat { value, accept_int } => match accept_int {
            true => format!("unbox_float {value}, int too"),
            false => format!("unbox_float {value}"),
        },
        FloatBinary { op, lhs, rhs } => format!("{} {lhs}, {rhs}", op.name()),
        FloatCompare { op, lhs, rhs } => format!("float_{} {lhs}, {rhs}", op.name()),
        BoxFloat(v) => format!("box_float {v}"),
        FloatUnary { op, value } => format!("float_{} {value}", op.name()),
        FlagToBool(v) => format!("flag_to_bool {v}"),
        Truth(v) => format!("truth {v}"),
        Send {
            site,
            receiver,
            args,
        } => format!(
            "send {}, {}",
            names.site(*site),
            list(&[vec![*receiver], args.clone()].concat())
        ),
        SuperSend {
            site,
            receiver,
            args,
        } => format!(
            "super_send {}, {}",
            names.site(*site),
            list(&[vec![*receiver], args.clone()].concat())
        ),
        CallMethod {
            code,
            receiver,
            args,
        } => format!(
            "call {}, {}",
            name_of(*code),
            list(&[vec![*receiver], args.clone()].concat())
        ),
        CallBlock { closure, args } => {
            format!(
                "call_block {}",
                list(&[vec![*closure], args.clone()].concat())
            )
        }
        ArrayAt { array, index } => format!("array_at {array}, {index}"),
        ArrayAtPut {
            array,
            index,
            value,
        } => format!("array_at_put {array}, {index}, {value}"),
        ArrayLength(a) => format!("array_length {a}"),
        StringEqual { lhs, rhs, symbol } => {
            let of = if *symbol { "symbol" } else { "string" };
            format!("{of}_equal {lhs}, {rhs}")
        }
        NewInstance(c) => format!("new_instance {c}"),
        NewObject { class, shape } => {
            format!(
                "new_object {class}, class{} of {} fields",
                shape.class, shape.fields
            )
        }
        Materialize {
            class,
            shape,
            fields,
        } => format!(
            "materialize {class}, class{} of {} fields, {}",
            shape.class,
            shape.fields,
            list(fields)
        ),
        VirtualObject { class, shape } => {
            format!(
                "virtual_object {class}, class{} of {} fields",
                shape.class, shape.fields
            )
        }
        NewArray { class, length } => format!("new_array {class}, {length}"),
        Yieldpoint => "yieldpoint".into(),
        CallHook(code) => format!("call_hook {}", name_of(*code)),
        EnterInlined(code) => format!("enter_inlined {}", name_of(*code)),
    }
}

fn term_text(t: &Terminator) -> String {
    let edge = |e: &crate::Edge| format!("{}({})", e.block, list(&e.args));
    match t {
        Terminator::Jump(e) => format!("jump {}", edge(e)),
        Terminator::Branch {
            cond,
            then,
            otherwise,
        } => format!("branch {cond}, {}, {}", edge(then), edge(otherwise)),
        Terminator::Return(v) => format!("return {v}"),
        Terminator::ReturnNonLocal { value, state } => format!("return_non_local {value}  {state}"),
        Terminator::Deopt(s) => format!("deopt {s}"),
        Terminator::Enter { normal, osr } => {
            let mut text = format!("enter {}", edge(normal));
            for o in osr {
                text.push_str(&format!(", osr at {}: {}", o.bci, edge(&o.edge)));
            }
            text
        }
        Terminator::Unreachable => "unreachable".into(),
    }
}

fn state_text(s: &FrameState, name_of: &dyn Fn(u32) -> String) -> String {
    let locals: Vec<String> = s
        .locals
        .iter()
        .map(|l| l.map_or("-".to_string(), |v| v.to_string()))
        .collect();
    let resume = match s.resume {
        Resume::Before => "before",
        Resume::AfterCall => "after call",
    };
    let mut text = format!(
        "{} @{} {resume}  locals [{}]  stack [{}]",
        name_of(s.code),
        s.bci,
        locals.join(", "),
        list(&s.stack)
    );
    if let Some(c) = s.context {
        let _ = write!(text, "  context {c}");
    }
    if let Some(c) = s.closure {
        let _ = write!(text, "  closure {c}");
    }
    for (c, slots) in &s.virtuals {
        let _ = write!(text, "  {c} = [{}]", list(slots));
    }
    if let Some(o) = s.outer {
        let _ = write!(text, "  in {o}");
    }
    text
}
