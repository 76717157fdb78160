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

use crate::{FrameState, Function, Resume, Terminator, ValueId};

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
                Some(v) => format!("    {v} = {}", inst.kind.text(names)),
                None => format!("    {}", inst.kind.text(names)),
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
                text.push_str(&format!(
                    ", osr at {} (stack {}): {}",
                    o.bci,
                    o.height,
                    edge(&o.edge)
                ));
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
