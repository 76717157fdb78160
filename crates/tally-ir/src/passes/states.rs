//! Frame states describe only the locals the bytecode still reads from where they resume:
//! a dead local is neither kept alive for deoptimization nor written into the rebuilt frame
//! (which gets nil there). The receiver is always kept (a rebuilt frame answers `self`, and
//! stack traces name its class).

use std::collections::HashMap;

use tally_vm::bytecode::{CodeId, Op};
use tally_vm::runtime::Code;

use crate::{Function, Resume};

/// Drops the dead locals of `f`'s frame states, those of `code` and of the methods inlined
/// into it (`inlined` finds their code).
pub fn trim(f: &mut Function, code: &Code, inlined: &dyn Fn(CodeId) -> Option<&'static Code>) {
    let mut lives: HashMap<CodeId, Vec<Vec<bool>>> = HashMap::new();
    for state in &mut f.states {
        let live = match lives.entry(state.code) {
            std::collections::hash_map::Entry::Occupied(e) => e.into_mut(),
            std::collections::hash_map::Entry::Vacant(e) => {
                let c = if state.code == code.id {
                    code
                } else {
                    match inlined(state.code) {
                        Some(c) => c,
                        None => continue,
                    }
                };
                e.insert(live_locals(c))
            }
        };
        let at = match state.resume {
            Resume::Before => state.bci as usize,
            Resume::AfterCall => state.bci as usize + 1,
        };
        let Some(live_here) = live.get(at) else {
            continue;
        };
        for (slot, value) in state.locals.iter_mut().enumerate() {
            if slot > 0 && !live_here[slot] {
                *value = None;
            }
        }
    }
}

/// For each instruction, which frame slots (receiver, arguments, locals) some path from it
/// reads before writing: a backward dataflow over the bytecode.
pub fn live_locals(code: &Code) -> Vec<Vec<bool>> {
    let ops = &code.ops;
    let slots = 1 + code.num_args as usize + code.num_locals as usize;
    let mut live = vec![vec![false; slots]; ops.len() + 1];
    let mut changed = true;
    while changed {
        changed = false;
        for i in (0..ops.len()).rev() {
            let mut out = vec![false; slots];
            for s in successors(ops[i], i) {
                if let Some(l) = live.get(s) {
                    for (o, &x) in out.iter_mut().zip(l) {
                        *o |= x;
                    }
                }
            }
            let (uses, def) = uses_and_def(ops[i]);
            if let Some(d) = def {
                out[d as usize] = false;
            }
            for u in uses {
                out[u as usize] = true;
            }
            if out != live[i] {
                live[i] = out;
                changed = true;
            }
        }
    }
    live
}

/// The slots an instruction reads and the one it writes.
fn uses_and_def(op: Op) -> (Vec<u16>, Option<u16>) {
    match op {
        Op::PushLocal(l)
        | Op::PopPushLocal(l)
        | Op::PushLocalSend(l, _)
        | Op::PushLocalSendBinary(l, _)
        | Op::ReturnLocal(l) => (vec![l], None),
        Op::PushLocal2(a, b) => (vec![a, b], None),
        Op::StoreLocal(l) | Op::PopLocal(l) => (vec![], Some(l)),
        _ => (vec![], None),
    }
}

/// Where control may go after instruction `i`.
fn successors(op: Op, i: usize) -> Vec<usize> {
    match op {
        Op::Return
        | Op::ReturnNonLocal
        | Op::ReturnSelf
        | Op::ReturnLocal(_)
        | Op::ReturnField(_) => {
            vec![]
        }
        Op::Jump(t) | Op::JumpBack(t) => vec![t as usize],
        Op::JumpIfTrue(t) | Op::JumpIfFalse(t) => vec![i + 1, t as usize],
        Op::SendCompareJumpIfFalse(_, t) | Op::SendCompareJumpIfTrue(_, t) => {
            vec![i + 1, t as usize, i + 2]
        }
        _ => vec![i + 1],
    }
}
