//! The ways out of the function: exits that have the VM rebuild the frames a frame state
//! describes (from the exit's plan, [`super::exit_plan`]) and hand the activation to the
//! interpreter (a failed guard, an instruction left to the interpreter, a yieldpoint's
//! status, a restart), the hand-over every exit ends in, and the block calls that answered
//! `Value::NONE` leave through.

use cranelift_codegen::ir::condcodes::IntCC;
use cranelift_codegen::ir::{Block, InstBuilder, SourceLoc, Value};
use std::collections::HashMap;

use tally_ir::{FrameStateId, Resume, Ty};
use tally_vm::jit::{DeoptReason, REBUILD_FAILED};

use super::exit_plan::Stored;
use super::lowerer::Lowerer;
use super::{flags, I32, I64};
use crate::stub_calls;

/// How an exit hands the activation over.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub(super) enum ExitKind {
    /// A speculation failed (the reason is the exit block's parameter).
    Deopt,
    /// The interpreter does the instruction (no speculation failed).
    Interpret,
    /// A yieldpoint's stub answered this status (an error, or frames to run).
    Status,
    /// A call restarted the frame (`Block>>restart`): its receiver, arguments and locals
    /// are written, an empty operand stack; `ip` is as the primitive left it (0).
    Restart,
}

impl Lowerer<'_, '_> {
    /// The exit of frame state `state` for `kind`: has the VM rebuild the interpreter's
    /// frames and returns. A `Deopt` exit takes the reason (I32), a `Status` exit the
    /// status (I32).
    /// Filled by [`Lowerer::finish`].
    pub(super) fn exit(&mut self, state: FrameStateId, kind: ExitKind) -> Result<Block, String> {
        if let Some(&b) = self.out.exits.get(&(state, kind)) {
            return Ok(b);
        }
        let fs = &self.ir.states[state.index()];
        let resumes = if kind == ExitKind::Restart {
            Resume::AfterCall
        } else {
            Resume::Before
        };
        if fs.resume != resumes || (kind == ExitKind::Restart && fs.outer.is_some()) {
            return Err(format!(
                "an exit to {state} (after a call, or restarting inlined code), which this \
                 tier cannot rebuild"
            ));
        }
        let mut outer = fs.outer;
        while let Some(o) = outer {
            if self.ir.states[o.index()].resume != Resume::AfterCall {
                return Err(format!(
                    "{state}'s outer state {o} is not suspended in a call"
                ));
            }
            outer = self.ir.states[o.index()].outer;
        }
        let exit = self.b.create_block();
        self.b.set_cold_block(exit);
        if matches!(kind, ExitKind::Deopt | ExitKind::Status) {
            self.b.append_block_param(exit, I32);
        }
        self.out.exits.insert((state, kind), exit);
        self.out.exit_scopes.insert(state, self.map.scope);
        Ok(exit)
    }

    /// Fills the exits and the leave block.
    pub(super) fn finish(&mut self) -> Result<(), String> {
        let mut exits: Vec<_> = self.out.exits.iter().map(|(&k, &b)| (k, b)).collect();
        exits.sort_by_key(|&((s, _), b)| (s, b));
        for ((state, kind), exit) in exits {
            self.fill_exit(state, kind, exit)?;
        }
        // After the exits, which may be the first to leave (an allocation that fails).
        if let Some(leave) = self.out.leave {
            // For the dispatcher, `Value::NONE` (the dispatcher sorts errors from
            // unwinding); for a direct call, the value of a non-local return that ended at
            // this frame, or `Value::NONE`.
            self.b.switch_to_block(leave);
            let (framed, direct) = self.leave_by_caller();
            self.b.switch_to_block(framed);
            let none = self.iconst(I64, 0);
            self.return_(none);
            self.b.switch_to_block(direct);
            let stub = self.layout.stubs.ir_left;
            let call = stub_calls::call(
                &mut self.b,
                &mut self.sigs.stubs,
                stub,
                &[self.act.vm, self.act.frame],
            );
            let v = self.b.inst_results(call)[0];
            self.return_(v);
        }
        if let Some(hand_over) = self.out.hand_over {
            self.fill_hand_over(hand_over);
        }
        if let Some((ret, bci)) = self.out.ret {
            self.fill_ret(ret, bci);
        }
        let epilogue = self.out.epilogue;
        self.b.switch_to_block(epilogue);
        let bci = self
            .out
            .ret
            .map_or(crate::pc_map::SHARED_EXIT, |(_, bci)| bci);
        self.b.set_srcloc(SourceLoc::new(bci));
        let v = self.b.block_params(epilogue)[0];
        self.b.ins().return_(&[v]);
        Ok(())
    }

    /// The end the exits share (`hand_over`), created at the first exit.
    pub(super) fn hand_over(&mut self) -> Block {
        if let Some(b) = self.out.hand_over {
            return b;
        }
        let b = self.b.create_block();
        self.b.set_cold_block(b);
        self.b.append_block_param(b, I32);
        self.out.hand_over = Some(b);
        b
    }

    /// Hands the frame an exit wrote over with its status: for the dispatcher, the status
    /// through the adapter; for a direct call, the interpreter runs the frame to its return
    /// here. It runs for no one bytecode (`SHARED_EXIT`).
    pub(super) fn fill_hand_over(&mut self, hand_over: Block) {
        let layout = self.layout;
        self.b.switch_to_block(hand_over);
        self.b
            .set_srcloc(SourceLoc::new(crate::pc_map::SHARED_EXIT));
        let status = self.b.block_params(hand_over)[0];
        let (framed, direct) = self.leave_by_caller();
        self.b.switch_to_block(framed);
        self.b
            .ins()
            .store(flags(), status, self.act.vm, layout.exit_status);
        let none = self.iconst(I64, 0);
        self.return_(none);
        self.b.switch_to_block(direct);
        let args = [self.act.vm, self.act.frame, status];
        let call = stub_calls::call(
            &mut self.b,
            &mut self.sigs.stubs,
            layout.stubs.ir_interpret,
            &args,
        );
        let result = self.b.inst_results(call)[0];
        self.return_(result);
    }

    /// Fills the exit of `state` for `kind`: stores the values its plan names in the exit
    /// buffer, then calls the rebuild (`Stubs::ir_exit`), which makes what the code kept
    /// virtual and writes the frames of the state's inline chain, and hands the frame over
    /// with the status it answers (or leaves, when an allocation failed).
    pub(super) fn fill_exit(
        &mut self,
        state: FrameStateId,
        kind: ExitKind,
        exit: Block,
    ) -> Result<(), String> {
        let fs = &self.ir.states[state.index()];
        self.b.switch_to_block(exit);
        self.map.scope = self.out.exit_scopes[&state];
        self.set_location(fs.bci);
        let param = self.b.block_params(exit).first().copied();
        let layout = self.layout;
        let site = if kind == ExitKind::Deopt {
            let site = self
                .state_code(state)?
                .ops
                .get(fs.bci as usize)
                .and_then(|op| op.site());
            if let Some(site) = site {
                self.record.speculated.insert(site);
            }
            site
        } else {
            None
        };
        let (plan, stored) = self.exit_plan(state, kind, site)?;
        // Doubles are boxed here, before anything is stored (a heap box is made at a
        // safepoint, which may collect), rather than handed raw to the rebuild: a raw
        // double's use in every exit changes how the register allocator spills the doubles
        // a loop carries, at the loop's cost.
        let mut boxes = HashMap::new();
        for s in &stored.words {
            if let Stored::Ir(v) = *s {
                if self.ir.ty(v) == Ty::Float {
                    let d = self.val(v)?;
                    let w = self.box_float(d, fs.bci)?;
                    self.b.declare_value_needs_stack_map(w);
                    boxes.insert(v, w);
                }
            }
        }
        let buffer = self
            .b
            .ins()
            .load(I64, flags(), self.act.vm, layout.exit_buffer);
        for (k, s) in stored.words.iter().enumerate() {
            let v = match *s {
                Stored::Ir(v) => match boxes.get(&v) {
                    Some(&w) => w,
                    None => self.val(v)?,
                },
                Stored::Param(p) => self.act.params[p],
            };
            if self.b.func.dfg.value_type(v) != I64 {
                return Err(format!("an exit to {state} holds a value that is no word"));
            }
            self.b.ins().store(flags(), v, buffer, 8 * k as i32);
        }
        // The rebuild may collect: this frame's stack maps are stale from here on.
        self.clear_native();
        let index = self.out.plans.len() as i64;
        self.out.plans.push(plan);
        let table = self.iconst(I64, self.out.table as i64);
        let index = self.iconst(I32, index);
        let param = match param {
            Some(p) => p,
            None => self.iconst(I32, 0),
        };
        let call = stub_calls::call(
            &mut self.b,
            &mut self.sigs.stubs,
            layout.stubs.ir_exit,
            &[self.act.vm, table, index, param],
        );
        let status = self.b.inst_results(call)[0];
        let failed = self.cmp_imm(IntCC::Equal, status, REBUILD_FAILED as i64);
        let leave = self.leave();
        let hand_over = self.hand_over();
        self.b
            .ins()
            .brif(failed, leave, &[], hand_over, &[status.into()]);
        Ok(())
    }

    /// `state` and the states it is inlined into, the frame's own activation first.
    pub(super) fn chain_outermost_first(&self, state: FrameStateId) -> Vec<FrameStateId> {
        let mut chain = vec![state];
        while let Some(o) = self.ir.states[chain.last().expect("a state").index()].outer {
            chain.push(o);
        }
        chain.reverse();
        chain
    }

    /// Goes on in a new block when `ok` holds, else deoptimizes to `state` for `reason`.
    pub(super) fn guard(
        &mut self,
        ok: Value,
        state: FrameStateId,
        reason: DeoptReason,
    ) -> Result<(), String> {
        let exit = self.exit(state, ExitKind::Deopt)?;
        let go_on = self.b.create_block();
        let reason = self.iconst(I32, reason as i64);
        self.b.ins().brif(ok, go_on, &[], exit, &[reason.into()]);
        self.b.switch_to_block(go_on);
        Ok(())
    }

    /// Goes on in a new block when `ok` holds, else hands the frame to the interpreter in
    /// `state` (which redoes the instruction and raises what it raises).
    pub(super) fn check(&mut self, ok: Value, state: FrameStateId) -> Result<(), String> {
        let exit = self.exit(state, ExitKind::Interpret)?;
        let go_on = self.b.create_block();
        self.b.ins().brif(ok, go_on, &[], exit, &[]);
        self.b.switch_to_block(go_on);
        Ok(())
    }

    pub(super) fn clear_native(&mut self) {
        let zero = self.iconst(I64, 0);
        self.b
            .ins()
            .store(flags(), zero, self.act.native, self.layout.native.fp);
    }

    /// The start of every way out: clears the native record, then branches on who called
    /// the body, answering the blocks for a frame its caller set up (the dispatcher's, or the
    /// baseline tier's) and for a direct call.
    pub(super) fn leave_by_caller(&mut self) -> (Block, Block) {
        self.clear_native();
        let framed = self.b.create_block();
        let direct = self.b.create_block();
        self.b.ins().brif(self.act.caller, framed, &[], direct, &[]);
        (framed, direct)
    }

    /// Where a call that answered `Value::NONE` goes: the frame is gone or an error is
    /// parked; this answers `Value::NONE` too (the adapter makes it `Status::Unwound`, and
    /// the dispatcher looks for the error first).
    /// Filled by [`Lowerer::finish`] (Cranelift fills one block at a time).
    pub(super) fn leave(&mut self) -> Block {
        if let Some(b) = self.out.leave {
            return b;
        }
        let leave = self.b.create_block();
        self.b.set_cold_block(leave);
        self.out.leave = Some(leave);
        leave
    }

    /// Pushes (or, `n` negative, pops) `n` frames: the frame stack's depth changes by `n`.
    pub(super) fn add_to_depth(&mut self, n: i64) {
        let layout = self.layout;
        let frame_stack = self
            .b
            .ins()
            .load(I64, flags(), self.act.vm, layout.frame_stack);
        let depth = self
            .b
            .ins()
            .load(I64, flags(), frame_stack, layout.frames_len);
        let depth = self.add_imm(depth, n);
        self.b
            .ins()
            .store(flags(), depth, frame_stack, layout.frames_len);
    }
}
