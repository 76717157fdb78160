//! Peephole rewriting of a compiled code unit: fewer instructions for the interpreter to
//! dispatch, with the same effect.
//!
//! The compiler emits statement by statement (each statement's value is popped, an inlined
//! `ifTrue:` without `ifFalse:` leaves `nil` that the next statement pops), which leaves
//! pairs such as `StoreLocal; Pop` or `PushConst; Pop` on hot paths. Two instructions are only
//! merged when no jump lands on the second one, so every path through the code still sees the
//! same stack. Jump targets and the per-instruction source positions are remapped.

use crate::bytecode::Op;

/// What a pair of adjacent instructions becomes.
fn fuse(first: Op, second: Op) -> Option<Option<Op>> {
    Some(match (first, second) {
        (Op::StoreLocal(i), Op::Pop) => Some(Op::PopLocal(i)),
        (Op::StoreField(i), Op::Pop) => Some(Op::PopField(i)),
        (Op::StoreCtx { level, index }, Op::Pop) => Some(Op::PopCtx { level, index }),
        // A value pushed only to be dropped.
        (Op::PushConst(_), Op::Pop)
        | (Op::PushLocal(_), Op::Pop)
        | (Op::PushField(_), Op::Pop)
        | (Op::PushLiteral(_), Op::Pop)
        | (Op::Dup, Op::Pop) => None,
        // `ReturnSelf` answers slot 0 and discards the operand stack anyway.
        (Op::Pop, Op::ReturnSelf) => Some(Op::ReturnSelf),
        // Nothing falls through a return or an unconditional jump: what follows is dead unless
        // a jump lands on it (then it is not fused). The compiler ends every method with
        // `ReturnSelf`, also after a last `^expr`; dropping it lets `^field`, `^constant` …
        // be recognised as trivial methods. (`ReturnNonLocal` is not among these: when the
        // home method has returned, it sends `escapedBlock:` and execution goes on after it.)
        (first @ (Op::Return | Op::ReturnSelf | Op::Jump(_) | Op::JumpBack(_)), _) => Some(first),
        _ => return None,
    })
}

/// The superinstruction for a pair, if any (see `Op::PushLocal2` and after). Applied after
/// `fuse` has removed what it can, so the pairs are the ones the interpreter really runs.
fn superinstruction(first: Op, second: Op) -> Option<Op> {
    Some(match (first, second) {
        (Op::PushLocal(a), Op::PushLocal(b)) => Op::PushLocal2(a, b),
        (Op::Pop, Op::PushLocal(i)) => Op::PopPushLocal(i),
        (Op::Pop, Op::PushField(i)) => Op::PopPushField(i),
        (Op::PushLocal(i), Op::Send(s)) => Op::PushLocalSend(i, s),
        (Op::PushLocal(i), Op::SendBinary(s)) => Op::PushLocalSendBinary(i, s),
        (Op::PushConst(v), Op::SendBinary(s)) => Op::PushConstSendBinary(v, s),
        (Op::PushLocal(i), Op::Return) => Op::ReturnLocal(i),
        (Op::PushField(i), Op::Return) => Op::ReturnField(i),
        _ => return None,
    })
}

/// Where a fused instruction's source position comes from: a send's own position, so errors
/// and stack traces still point at the selector.
fn position_of_second(op: Op) -> bool {
    matches!(
        op,
        Op::PushLocalSend(..) | Op::PushLocalSendBinary(..) | Op::PushConstSendBinary(..)
    )
}

/// Turns each comparison send followed by a conditional jump into a compare-and-branch,
/// leaving the jump in place behind it (see `Op::SendCompareJumpIfFalse`). `is_comparison`
/// tells which send sites compare.
pub fn compare_and_branch(ops: &mut [Op], is_comparison: impl Fn(u32) -> bool) {
    for i in 0..ops.len().saturating_sub(1) {
        if let Op::SendBinary(site) = ops[i] {
            if !is_comparison(site) {
                continue;
            }
            ops[i] = match ops[i + 1] {
                Op::JumpIfFalse(t) => Op::SendCompareJumpIfFalse(site, t),
                Op::JumpIfTrue(t) => Op::SendCompareJumpIfTrue(site, t),
                _ => continue,
            };
        }
    }
}

/// Fuses frequent pairs into superinstructions (once the sends are final: `SendBinary` is
/// chosen when the code is installed).
pub fn superinstructions(ops: &mut Vec<Op>, positions: &mut Vec<(u32, u32)>) {
    rewrite_pairs(ops, positions, |a, b| {
        superinstruction(a, b).map(|op| (Some(op), position_of_second(op)))
    });
}

fn jump_target(op: Op) -> Option<u32> {
    match op {
        Op::Jump(t)
        | Op::JumpIfTrue(t)
        | Op::JumpIfFalse(t)
        | Op::JumpBack(t)
        | Op::SendCompareJumpIfFalse(_, t)
        | Op::SendCompareJumpIfTrue(_, t) => Some(t),
        _ => None,
    }
}

fn with_target(op: Op, t: u32) -> Op {
    match op {
        Op::SendCompareJumpIfFalse(s, _) => Op::SendCompareJumpIfFalse(s, t),
        Op::SendCompareJumpIfTrue(s, _) => Op::SendCompareJumpIfTrue(s, t),
        Op::Jump(_) => Op::Jump(t),
        Op::JumpIfTrue(_) => Op::JumpIfTrue(t),
        Op::JumpIfFalse(_) => Op::JumpIfFalse(t),
        Op::JumpBack(_) => Op::JumpBack(t),
        other => other,
    }
}

/// Rewrites `ops` (and `positions`, one per instruction) until no pair fuses any more.
pub fn optimize(ops: &mut Vec<Op>, positions: &mut Vec<(u32, u32)>) {
    while optimize_once(ops, positions) {}
}

fn optimize_once(ops: &mut Vec<Op>, positions: &mut Vec<(u32, u32)>) -> bool {
    rewrite_pairs(ops, positions, |a, b| fuse(a, b).map(|op| (op, false)))
}

/// One left-to-right pass replacing adjacent pairs (`rule` answers the replacement, none to
/// delete both, and whether it takes the second one's position); answers whether anything
/// changed.
fn rewrite_pairs(
    ops: &mut Vec<Op>,
    positions: &mut Vec<(u32, u32)>,
    rule: impl Fn(Op, Op) -> Option<(Option<Op>, bool)>,
) -> bool {
    let mut is_target = vec![false; ops.len() + 1];
    for &op in ops.iter() {
        if let Some(t) = jump_target(op) {
            is_target[t as usize] = true;
        }
    }
    // `new_index[i]`: where old instruction i (or, if it is gone, the next survivor) lands.
    let mut new_index = vec![0u32; ops.len() + 1];
    let mut out_ops = Vec::with_capacity(ops.len());
    let mut out_pos = Vec::with_capacity(ops.len());
    let mut changed = false;
    let mut i = 0;
    while i < ops.len() {
        new_index[i] = out_ops.len() as u32;
        if i + 1 < ops.len() && !is_target[i + 1] {
            if let Some((merged, second_position)) = rule(ops[i], ops[i + 1]) {
                new_index[i + 1] = out_ops.len() as u32;
                if let Some(op) = merged {
                    out_ops.push(op);
                    out_pos.push(positions[if second_position { i + 1 } else { i }]);
                }
                changed = true;
                i += 2;
                continue;
            }
        }
        out_ops.push(ops[i]);
        out_pos.push(positions[i]);
        i += 1;
    }
    new_index[ops.len()] = out_ops.len() as u32;
    if !changed {
        return false;
    }
    for op in out_ops.iter_mut() {
        if let Some(t) = jump_target(*op) {
            *op = with_target(*op, new_index[t as usize]);
        }
    }
    *ops = out_ops;
    *positions = out_pos;
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use tally_heap::Value;

    fn run(ops: Vec<Op>) -> Vec<Op> {
        let mut ops = ops;
        let mut pos: Vec<(u32, u32)> = (0..ops.len() as u32).map(|i| (i, 1)).collect();
        optimize(&mut ops, &mut pos);
        assert_eq!(ops.len(), pos.len());
        ops
    }

    #[test]
    fn store_then_pop_becomes_one_instruction() {
        assert_eq!(
            run(vec![
                Op::PushLocal(1),
                Op::StoreLocal(2),
                Op::Pop,
                Op::ReturnSelf
            ]),
            vec![Op::PushLocal(1), Op::PopLocal(2), Op::ReturnSelf]
        );
    }

    #[test]
    fn dropped_values_vanish_and_jumps_follow() {
        // if-without-else leaves nil that the next statement pops; the jump over the body
        // lands on the PushConst, so it must land on what follows the removed pair.
        let ops = vec![
            Op::PushLocal(1),
            Op::JumpIfFalse(4),
            Op::PushLocal(2),
            Op::Jump(5),
            Op::PushConst(Value::NIL),
            Op::Pop,
            Op::PushLocal(3),
            Op::Return,
        ];
        // Op 5 (Pop) is a jump target (from 3), so the pair 4-5 stays; op 2-3 does not fuse.
        assert_eq!(run(ops.clone()), ops);
        let ops = vec![
            Op::PushConst(Value::NIL),
            Op::Pop,
            Op::PushLocal(1),
            Op::JumpIfFalse(0),
            Op::Return,
        ];
        assert_eq!(
            run(ops),
            vec![Op::PushLocal(1), Op::JumpIfFalse(0), Op::Return]
        );
    }

    #[test]
    fn a_pop_that_a_jump_lands_on_is_kept() {
        let ops = vec![
            Op::PushLocal(1),
            Op::JumpIfTrue(3),
            Op::StoreLocal(2),
            Op::Pop,
            Op::PushLocal(3),
            Op::Return,
        ];
        assert_eq!(run(ops.clone()), ops);
    }

    #[test]
    fn a_jump_may_land_on_the_first_of_a_pair() {
        // Landing on the fused instruction does both parts, as landing on the first did.
        let ops = vec![
            Op::PushLocal(1),
            Op::JumpIfTrue(3),
            Op::StoreLocal(2),
            Op::Pop,
            Op::ReturnSelf,
        ];
        assert_eq!(
            run(ops),
            vec![
                Op::PushLocal(1),
                Op::JumpIfTrue(3),
                Op::StoreLocal(2),
                Op::ReturnSelf
            ]
        );
    }

    #[test]
    fn superinstructions_keep_the_send_position() {
        let mut ops = vec![
            Op::PushField(0),
            Op::PushLocal(1),
            Op::Send(7),
            Op::Pop,
            Op::PushLocal(2),
            Op::Return,
        ];
        let mut pos = vec![(1, 1), (1, 5), (1, 9), (1, 9), (2, 1), (2, 1)];
        superinstructions(&mut ops, &mut pos);
        assert_eq!(
            ops,
            vec![
                Op::PushField(0),
                Op::PushLocalSend(1, 7),
                Op::PopPushLocal(2),
                Op::Return
            ]
        );
        assert_eq!(pos, vec![(1, 1), (1, 9), (1, 9), (2, 1)]);
    }

    #[test]
    fn compare_and_branch_keeps_the_jump_behind_it() {
        let mut ops = vec![
            Op::PushLocal(1),
            Op::PushLocal(2),
            Op::SendBinary(4),
            Op::JumpIfFalse(7),
            Op::PushLocal(1),
            Op::SendBinary(5),
            Op::JumpIfTrue(0),
            Op::ReturnSelf,
        ];
        compare_and_branch(&mut ops, |site| site == 4);
        assert_eq!(ops[2], Op::SendCompareJumpIfFalse(4, 7));
        assert_eq!(ops[3], Op::JumpIfFalse(7));
        assert_eq!(ops[5], Op::SendBinary(5), "site 5 does not compare");
        // Fusing around it retargets its jump like any other.
        let mut pos = vec![(1, 1); ops.len()];
        superinstructions(&mut ops, &mut pos);
        assert_eq!(
            ops,
            vec![
                Op::PushLocal2(1, 2),
                Op::SendCompareJumpIfFalse(4, 5),
                Op::JumpIfFalse(5),
                Op::PushLocalSendBinary(1, 5),
                Op::JumpIfTrue(0),
                Op::ReturnSelf,
            ]
        );
    }

    #[test]
    fn code_after_a_return_is_dropped_unless_a_jump_lands_on_it() {
        assert_eq!(
            run(vec![
                Op::PushConst(Value::FALSE),
                Op::Return,
                Op::ReturnSelf
            ]),
            vec![Op::PushConst(Value::FALSE), Op::Return]
        );
        let ops = vec![
            Op::PushLocal(1),
            Op::JumpIfFalse(4),
            Op::PushLocal(2),
            Op::Return,
            Op::ReturnSelf,
        ];
        assert_eq!(run(ops.clone()), ops);
    }

    #[test]
    fn fusions_cascade() {
        // Dup; Pop vanishes, which makes StoreLocal; Pop adjacent.
        assert_eq!(
            run(vec![
                Op::PushLocal(1),
                Op::StoreLocal(2),
                Op::Dup,
                Op::Pop,
                Op::Pop,
                Op::PushLocal(2),
                Op::Return
            ]),
            vec![
                Op::PushLocal(1),
                Op::PopLocal(2),
                Op::PushLocal(2),
                Op::Return
            ]
        );
    }
}
