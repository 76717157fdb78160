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
