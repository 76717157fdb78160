//! Tally's bytecode: a stack machine whose every instruction has a bytecode index (its position
//! in `Code::ops`), so samples, call edges and later the JIT's pc maps can name a place in a
//! method. Yieldpoints, where a profiler may poll, are the method prologue (frame entry), the
//! epilogue (every return) and the loop back-edge `JumpBack`.

use tally_heap::Value;

/// Index into the VM's table of send sites.
pub type SiteId = u32;
/// Index into the VM's table of code (methods and blocks).
pub type CodeId = u32;

#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Op {
    /// Push a stack slot of the current frame: 0 is the receiver, then arguments, then locals.
    PushLocal(u16),
    /// Store the top of stack into a frame slot, leaving it on the stack.
    StoreLocal(u16),
    /// Store the top of stack into a frame slot and pop it.
    PopLocal(u16),
    /// Push a variable of a context: start at the frame's context and follow `outer` `level` times.
    PushCtx {
        level: u8,
        index: u16,
    },
    StoreCtx {
        level: u8,
        index: u16,
    },
    PopCtx {
        level: u8,
        index: u16,
    },
    /// Push/store a field of the receiver.
    PushField(u16),
    StoreField(u16),
    PopField(u16),
    /// Push a value from the VM's literal table (strings, doubles, big integers, arrays).
    PushLiteral(u32),
    /// Push an immediate value (small integer, symbol, nil, true, false).
    PushConst(Value),
    /// Push a global by its slot in the VM's global table; unknown globals are resolved at run time.
    PushGlobal(u32),
    /// Make a closure over the current frame.
    PushBlock(CodeId),
    Pop,
    Dup,
    Send(SiteId),
    /// A send of a binary arithmetic or comparison selector (`+`, `<`, `=` …): the same as
    /// `Send`, but small-integer operands are answered in place, without a lookup or frame.
    SendBinary(SiteId),
    SuperSend(SiteId),
    /// Return the top of stack from this frame (to the caller of the method or block).
    Return,
    /// Return the top of stack from the block's home method.
    ReturnNonLocal,
    /// Method end without `^`: return the receiver.
    ReturnSelf,
    Jump(u32),
    JumpIfTrue(u32),
    JumpIfFalse(u32),
    /// Backward jump closing a loop: a yieldpoint.
    JumpBack(u32),

    // Superinstructions: frequent pairs fused by the peephole pass (`peephole.rs`), one
    // dispatch instead of two. Each does exactly what its two parts do in order.
    /// `PushLocal(a); PushLocal(b)`
    PushLocal2(u16, u16),
    /// `Pop; PushLocal(i)`: the next statement starts with a local.
    PopPushLocal(u16),
    /// `Pop; PushField(i)`
    PopPushField(u16),
    /// `PushLocal(i); Send(site)`: the last argument (or the receiver) is a local.
    PushLocalSend(u16, SiteId),
    /// `PushLocal(i); SendBinary(site)`
    PushLocalSendBinary(u16, SiteId),
    /// `PushConst(v); SendBinary(site)`: `i + 1`, `n > 0` …
    PushConstSendBinary(Value, SiteId),
    /// `PushLocal(i); Return`
    ReturnLocal(u16),
    /// `PushField(i); Return`
    ReturnField(u16),
    /// A comparison `SendBinary(site)` whose result a `JumpIfFalse(target)` right after it
    /// tests: numbers are compared and branched on at once. That `JumpIfFalse` stays in place
    /// after this instruction; a real send returns to it, and the fast path skips it.
    SendCompareJumpIfFalse(SiteId, u32),
    /// The same with `JumpIfTrue(target)`.
    SendCompareJumpIfTrue(SiteId, u32),
    /// A send of `isNil`: answered by comparing the receiver with nil while the core library's
    /// definitions stand (`Runtime::nil_tests`), else sent.
    SendIsNil(SiteId),
    /// A send of `notNil`, likewise.
    SendNotNil(SiteId),
}

/// How an instruction moves the operand stack: how many values it needs on top (`pops`, taken
/// off before it pushes), how many it leaves (`pushes`), and where control goes next.
struct Effect {
    pops: usize,
    pushes: usize,
    /// The most values above the starting height at any moment (a return's answer is pushed
    /// before the frame goes).
    peak: usize,
}

impl Op {
    /// The send site this instruction uses, if it sends.
    pub fn site(self) -> Option<SiteId> {
        match self {
            Op::Send(s)
            | Op::SendBinary(s)
            | Op::SuperSend(s)
            | Op::PushLocalSend(_, s)
            | Op::PushLocalSendBinary(_, s)
            | Op::PushConstSendBinary(_, s)
            | Op::SendCompareJumpIfFalse(s, _)
            | Op::SendCompareJumpIfTrue(s, _)
            | Op::SendIsNil(s)
            | Op::SendNotNil(s) => Some(s),
            _ => None,
        }
    }

    fn effect(self, argc: impl Fn(SiteId) -> usize) -> Effect {
        let e = |pops, pushes| Effect {
            pops,
            pushes,
            peak: pushes.saturating_sub(pops),
        };
        match self {
            Op::PushLocal(_)
            | Op::PushCtx { .. }
            | Op::PushField(_)
            | Op::PushLiteral(_)
            | Op::PushConst(_)
            | Op::PushGlobal(_)
            | Op::PushBlock(_) => e(0, 1),
            Op::Dup => e(1, 2),
            Op::StoreLocal(_) | Op::StoreCtx { .. } | Op::StoreField(_) => e(1, 1),
            Op::PopLocal(_) | Op::PopCtx { .. } | Op::PopField(_) | Op::Pop => e(1, 0),
            Op::Send(s) | Op::SendBinary(s) | Op::SuperSend(s) => e(argc(s) + 1, 1),
            Op::SendIsNil(_) | Op::SendNotNil(_) => e(1, 1),
            Op::Return | Op::ReturnNonLocal => e(1, 0),
            Op::ReturnSelf | Op::ReturnLocal(_) | Op::ReturnField(_) => Effect {
                pops: 0,
                pushes: 0,
                peak: 1,
            },
            Op::Jump(_) | Op::JumpBack(_) => e(0, 0),
            Op::JumpIfTrue(_) | Op::JumpIfFalse(_) => e(1, 0),
            Op::PushLocal2(..) => e(0, 2),
            Op::PopPushLocal(_) | Op::PopPushField(_) => e(1, 1),
            Op::PushLocalSend(_, s)
            | Op::PushLocalSendBinary(_, s)
            | Op::PushConstSendBinary(_, s) => {
                // The pushed local is the send's last argument (or its receiver).
                Effect {
                    pops: argc(s),
                    pushes: 1,
                    peak: 1,
                }
            }
            // Answered in place, the comparison also drops its result (the jump behind it is
            // skipped); sent, it leaves the result for that jump.
            Op::SendCompareJumpIfFalse(s, _) | Op::SendCompareJumpIfTrue(s, _) => e(argc(s) + 1, 1),
        }
    }

    /// Where control may go after this instruction at index `at`.
    fn successors(self, at: usize) -> [Option<(usize, isize)>; 3] {
        let next = Some((at + 1, 0));
        match self {
            Op::Return
            | Op::ReturnNonLocal
            | Op::ReturnSelf
            | Op::ReturnLocal(_)
            | Op::ReturnField(_) => [None, None, None],
            Op::Jump(t) | Op::JumpBack(t) => [Some((t as usize, 0)), None, None],
            Op::JumpIfTrue(t) | Op::JumpIfFalse(t) => [next, Some((t as usize, 0)), None],
            // Sent: on to the jump behind with the result; answered in place: to the target or
            // past that jump, without it (the height adjustment is relative to `next`'s).
            Op::SendCompareJumpIfFalse(_, t) | Op::SendCompareJumpIfTrue(_, t) => {
                [next, Some((t as usize, -1)), Some((at + 2, -1))]
            }
            _ => [next, None, None],
        }
    }
}

/// The operand stack's height (values above the frame's base, receiver included) before
/// each instruction, `None` where no path reaches, and the greatest height reached anywhere.
/// `start` is the height on entry: receiver, arguments and stack locals. Compiled code and the
/// interpreter agree on these heights because every path to an instruction leaves the same
/// number of values (the compiler emits structured code); a mismatch is a compiler bug,
/// reported as an error.
pub fn stack_heights(
    ops: &[Op],
    start: usize,
    argc: impl Fn(SiteId) -> usize,
) -> Result<(Vec<Option<u32>>, usize), String> {
    let mut heights: Vec<Option<u32>> = vec![None; ops.len()];
    let mut max = start;
    let mut work = Vec::new();
    if !ops.is_empty() {
        heights[0] = Some(start as u32);
        work.push(0usize);
    }
    while let Some(at) = work.pop() {
        let h = heights[at].expect("queued with a height") as usize;
        let op = ops[at];
        let effect = op.effect(&argc);
        let Some(base) = h.checked_sub(effect.pops) else {
            return Err(format!(
                "{op:?} at {at} needs {} values, has {h}",
                effect.pops
            ));
        };
        max = max.max(h + effect.peak);
        let after = base + effect.pushes;
        for (to, adjust) in op.successors(at).into_iter().flatten() {
            let Some(slot) = heights.get_mut(to) else {
                return Err(format!("{op:?} at {at} leaves the code"));
            };
            let height = (after as isize + adjust) as u32;
            match *slot {
                None => {
                    *slot = Some(height);
                    work.push(to);
                }
                Some(seen) if seen != height => {
                    return Err(format!(
                        "instruction {to} is reached with {seen} and with {height} values"
                    ))
                }
                Some(_) => {}
            }
        }
    }
    Ok((heights, max))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn heights_follow_pushes_sends_and_both_sides_of_a_branch() {
        // ^ a < b ifTrue: [1] ifFalse: [2], with `<` a one-argument send.
        let ops = [
            Op::PushLocal2(1, 2),
            Op::SendCompareJumpIfFalse(0, 5),
            Op::JumpIfFalse(5),
            Op::PushConst(Value::from_small_int(1)),
            Op::Return,
            Op::PushConst(Value::from_small_int(2)),
            Op::Return,
        ];
        let (h, max) = stack_heights(&ops, 3, |_| 1).unwrap();
        assert_eq!(
            h,
            [
                Some(3),
                Some(5),
                Some(4),
                Some(3),
                Some(4),
                Some(3),
                Some(4)
            ]
        );
        assert_eq!(max, 5);
    }

    #[test]
    fn returns_count_the_answer_and_dead_code_has_no_height() {
        let ops = [Op::ReturnLocal(0), Op::Pop];
        let (h, max) = stack_heights(&ops, 1, |_| 0).unwrap();
        assert_eq!(h, [Some(1), None]);
        assert_eq!(max, 2);
    }

    #[test]
    fn paths_that_disagree_are_an_error() {
        let ops = [
            Op::PushConst(Value::TRUE),
            Op::JumpIfFalse(3),
            Op::PushConst(Value::NIL),
            Op::ReturnSelf,
        ];
        assert!(stack_heights(&ops, 1, |_| 0).is_err());
    }
}
