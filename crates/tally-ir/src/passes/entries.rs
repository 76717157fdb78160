//! What an entry at a loop head reads from the interpreter's frame is not known to be a small
//! integer, so every loop variable merging it would stay a word, checked again on each
//! iteration (and, as a reference, spilled for the stack maps). Where everything else that
//! reaches a loop head's parameter is a small integer, the entry checks the frame's value
//! instead, once: a frame holding something else deoptimizes (`DeoptReason::LoopEntry`, no
//! site failed): the version goes, the interpreter runs the loop on, its sites see the value,
//! and the next version's loop does not expect a small integer there.

use std::collections::{HashMap, HashSet};

use tally_vm::jit::DeoptReason;
use tally_vm::runtime::Code;

use crate::{BlockId, FrameState, FrameStateId, Function, InstKind, Resume, Terminator, ValueId};

pub fn check(f: &mut Function, code: &Code) {
    let entries: Vec<(BlockId, u32, u32)> = f
        .osr_entries()
        .iter()
        .map(|o| (o.edge.block, o.bci, o.height))
        .collect();
    if entries.is_empty() {
        return;
    }
    skip_dead_slots(f, code, &entries);
    let ints = integer_params(f);
    for (block, bci, height) in entries {
        let Terminator::Jump(edge) = &f.blocks[block.index()].term else {
            continue;
        };
        let (target, args) = (edge.block, edge.args.clone());
        let params = f.blocks[target.index()].params.clone();
        let mut state: Option<FrameStateId> = None;
        let mut checked = args.clone();
        for (k, (&a, &p)) in args.iter().zip(&params).enumerate() {
            if !ints.contains(&p) || !from_frame(f, a) {
                continue;
            }
            let st = *state.get_or_insert_with(|| entry_state(f, code, block, bci, height));
            checked[k] = f
                .push_inst(
                    block,
                    InstKind::GuardInt {
                        value: a,
                        reason: DeoptReason::LoopEntry,
                    },
                    Some(st),
                    bci,
                )
                .expect("a guard has a value");
        }
        if let Terminator::Jump(edge) = &mut f.blocks[block.index()].term {
            edge.args = checked;
        }
    }
}

/// An entry does not read the locals that are dead at its loop head (the loop writes each
/// before reading it): the frame may hold anything there — an exit writes nil into the
/// slots its state does not hold — and a check of such a slot would fail on every entry,
/// sending each iteration back to the interpreter. The loop's parameter gets nil instead.
fn skip_dead_slots(f: &mut Function, code: &Code, entries: &[(BlockId, u32, u32)]) {
    let live = super::states::live_locals(code);
    let locals = 1 + code.num_args as usize + code.num_locals as usize;
    for &(block, bci, _) in entries {
        let Some(live_here) = live.get(bci as usize) else {
            continue;
        };
        let Terminator::Jump(edge) = &f.blocks[block.index()].term else {
            continue;
        };
        let dead: Vec<usize> = edge
            .args
            .iter()
            .enumerate()
            .filter(|&(_, &a)| match f.def_inst(a).map(|i| &i.kind) {
                Some(InstKind::FrameSlot(k)) => {
                    let k = *k as usize;
                    k < locals && !live_here[k]
                }
                _ => false,
            })
            .map(|(j, _)| j)
            .collect();
        if dead.is_empty() {
            continue;
        }
        let nil = f
            .push_inst(block, InstKind::Const(tally_heap::Value::NIL), None, bci)
            .expect("a value");
        if let Terminator::Jump(edge) = &mut f.blocks[block.index()].term {
            for j in dead {
                edge.args[j] = nil;
            }
        }
    }
}

/// Whether `v` was read from the interpreter's frame at an entry.
pub(super) fn from_frame(f: &Function, v: ValueId) -> bool {
    matches!(f.def_inst(v).map(|i| &i.kind), Some(InstKind::FrameSlot(_)))
}

/// The block parameters that are small integers whenever the frame's values are.
fn integer_params(f: &Function) -> HashSet<ValueId> {
    crate::passes::guards::int_params(f, |a| from_frame(f, a))
}

/// The state of the frame at the loop head the entry `block` enters (at `bci`, with `height`
/// operands): the activation's receiver and arguments, the rest read from the frame.
pub(super) fn entry_state(
    f: &mut Function,
    code: &Code,
    block: BlockId,
    bci: u32,
    height: u32,
) -> FrameStateId {
    let mut slots: HashMap<u16, ValueId> = HashMap::new();
    let mut context = None;
    for &i in &f.blocks[block.index()].insts {
        let inst = &f.insts[i.index()];
        match (&inst.kind, inst.result) {
            (InstKind::FrameSlot(k), Some(v)) => {
                slots.insert(*k, v);
            }
            (InstKind::FrameContext, Some(v)) => context = Some(v),
            _ => {}
        }
    }
    let mut slot = |f: &mut Function, k: usize| {
        *slots.entry(k as u16).or_insert_with(|| {
            f.push_inst(block, InstKind::FrameSlot(k as u16), None, bci)
                .expect("a value")
        })
    };
    let entry_params = f.blocks[f.entry().index()].params.clone();
    let args = 1 + code.num_args as usize;
    let locals_len = args + code.num_locals as usize;
    let mut locals: Vec<Option<ValueId>> = entry_params[..args].iter().map(|&v| Some(v)).collect();
    for k in args..locals_len {
        locals.push(Some(slot(f, k)));
    }
    let stack = (locals_len..locals_len + height as usize)
        .map(|k| slot(f, k))
        .collect();
    if code.context_size > 0 {
        if context.is_none() {
            context = f.push_inst(block, InstKind::FrameContext, None, bci);
        }
    } else {
        // A block's closure's context, the same in every state (read in the entry block).
        context = f
            .states
            .iter()
            .filter(|s| s.code == code.id && s.outer.is_none())
            .find_map(|s| s.context);
    }
    let closure = match code.kind {
        tally_vm::compiler::CodeKind::Block => entry_params.last().copied(),
        _ => None,
    };
    f.add_state(FrameState {
        code: code.id,
        bci,
        resume: Resume::Before,
        locals,
        stack,
        context,
        closure,
        outer: None,
        virtuals: Vec::new(),
    })
}
