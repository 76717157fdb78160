//! The ways out of the function: exits that write the frames a frame state describes and
//! hand the activation to the interpreter (a failed guard, an instruction left to the
//! interpreter, a yieldpoint's status, a restart), the shared tails of inlined code's
//! exits, the hand-over every exit ends in, and the block calls that answered
//! `Value::NONE` leave through.

use cranelift_codegen::ir::{Block, InstBuilder, SourceLoc, Value};
use tally_ir::{FrameStateId, Resume, Ty};
use tally_vm::jit::{DeoptReason, Status};

use super::lowerer::Lowerer;
use super::{flags, I32, I64, I8, NIL};
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

/// Where an exit writes a frame of its chain: byte offsets from the frame's own first value
/// slot and from its own record.
#[derive(Clone, Copy)]
pub(super) struct FramePlace {
    slots: i32,
    record: i32,
}

impl FramePlace {
    /// The frame `level` records above the frame's own, its values `below` slots above the
    /// frame's own first.
    fn at(below: i64, level: usize, frame_size: i32) -> FramePlace {
        let offset = |bytes: i64| i32::try_from(bytes).expect("an exit's frames within 2 GiB");
        FramePlace {
            slots: offset(8 * below),
            record: offset(i64::from(frame_size) * level as i64),
        }
    }
}

impl Lowerer<'_, '_> {
    /// The exit of frame state `state` for `kind`: writes the interpreter's frame and
    /// returns. A `Deopt` exit takes the reason (I32), a `Status` exit the status (I32).
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
        let mut tails: Vec<_> = self
            .out
            .outer_tails
            .iter()
            .map(|(&caller, (tail, held))| (caller, *tail, held.clone()))
            .collect();
        tails.sort_by_key(|&(caller, ..)| caller);
        for (caller, tail, held) in tails {
            self.fill_outer_tail(caller, tail, &held)?;
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

    /// Fills the exit of `state` for `kind`: writes the frame it describes — and, for a
    /// state of inlined code, the frames of its whole inline chain, each above the one it
    /// was inlined into, suspended in its call — then hands the innermost over. The frames
    /// of the chain a state is inlined into are the same for every exit of the inlined
    /// code (its caller's values were fixed at the call): they are written once, by the
    /// tail of that outer chain ([`Lowerer::fill_outer_tail`]), which every such exit
    /// jumps to after writing its own frame.
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
        let chain = self.chain_outermost_first(state);
        self.out.boxes.clear();
        self.materialize(&chain, state, fs.bci)?;
        let outer = &chain[..chain.len() - 1];
        // Where the innermost frame goes: above the values of the frames of its chain.
        let below: i64 = outer.iter().map(|&o| self.frame_height(o)).sum();
        let level = outer.len();
        let at = FramePlace::at(below, level, layout.frame_size);
        let bp = if level == 0 {
            self.act.bp
        } else {
            self.add_imm(self.act.bp, below)
        };
        let height = self.write_frame(state, level, kind, at, bp)?;
        let len = self.add_imm(bp, height);
        let status = match kind {
            ExitKind::Interpret | ExitKind::Restart => self.iconst(I32, Status::Interpret as i64),
            ExitKind::Status => param.expect("a status"),
            ExitKind::Deopt => {
                let code = self.request.code;
                let site = self
                    .state_code(state)?
                    .ops
                    .get(fs.bci as usize)
                    .and_then(|op| op.site());
                if let Some(site) = site {
                    self.record.speculated.insert(site);
                }
                let site = site.unwrap_or(tally_vm::jit::NO_DEOPT_SITE);
                let site = self.iconst(I32, site as i64);
                self.b
                    .ins()
                    .store(flags(), site, self.act.vm, layout.deopt_site);
                let reason = param.expect("a reason");
                self.b
                    .ins()
                    .store(flags(), reason, self.act.vm, layout.deopt_reason);
                let id = self.iconst(I32, code.id as i64);
                self.b
                    .ins()
                    .store(flags(), id, self.act.vm, layout.deopt_code);
                self.iconst(I32, Status::Deopt as i64)
            }
        };
        let Some(&caller) = outer.last() else {
            self.b
                .ins()
                .store(flags(), len, self.act.vm, layout.stack_len);
            let hand_over = self.hand_over();
            self.b.ins().jump(hand_over, &[status.into()]);
            return Ok(());
        };
        // The outer chain's tail, with the objects this exit made that its frames hold.
        let mut held = self.virtuals_of(outer).concat();
        held.extend(self.floats_of(outer));
        let tail = match self.out.outer_tails.get(&caller) {
            Some((tail, same)) if *same == held => *tail,
            Some(_) => {
                return Err(format!(
                    "exits inlined at {caller} disagree on the objects its chain holds"
                ))
            }
            None => {
                let tail = self.b.create_block();
                self.b.set_cold_block(tail);
                self.b.append_block_param(tail, I32);
                self.b.append_block_param(tail, I64);
                for _ in &held {
                    self.b.append_block_param(tail, I64);
                }
                self.out.outer_tails.insert(caller, (tail, held.clone()));
                tail
            }
        };
        let mut args: Vec<cranelift_codegen::ir::BlockArg> = vec![status.into(), len.into()];
        for &v in &held {
            args.push(self.word(v)?.into());
        }
        self.b.ins().jump(tail, &args);
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

    /// The values a frame of `state` holds in the value stack: its locals and operands.
    pub(super) fn frame_height(&self, state: FrameStateId) -> i64 {
        let fs = &self.ir.states[state.index()];
        (fs.locals.len() + fs.stack.len()) as i64
    }

    /// Writes the frame of `state`, the `level`-th of its exit's chain (0: the frame's own
    /// activation, whose frame record exists; above, an inlined activation's, whose record
    /// is written too), its values at `at.slots` bytes past the frame's own first slot and
    /// its record `at.record` bytes past the frame's own record (stores take them as
    /// immediate offsets, so an exit computes no addresses; `bp` is the values' index);
    /// answers the number of values written.
    pub(super) fn write_frame(
        &mut self,
        state: FrameStateId,
        level: usize,
        kind: ExitKind,
        at: FramePlace,
        bp: Value,
    ) -> Result<i64, String> {
        let layout = self.layout;
        let (slots, frame) = (self.act.slots, self.act.frame);
        let fs = &self.ir.states[state.index()];
        // One nil for the slots and the record that hold none (each an instruction less for
        // Cranelift to go through).
        let mut nil = None;
        let mut nil_word = |l: &mut Self| *nil.get_or_insert_with(|| l.iconst(I64, NIL));
        if level > 0 {
            let code = self.iconst(I64, fs.code as i64);
            self.b.ins().store(flags(), code, frame, at.record);
            // `bp` with a clear mark: the interpreter runs it.
            self.b
                .ins()
                .store(flags(), bp, frame, at.record + layout.frame_bp);
            let ctx = match fs.context {
                Some(c) => self.word(c)?,
                None => nil_word(self),
            };
            self.b
                .ins()
                .store(flags(), ctx, frame, at.record + layout.frame_ctx);
            let closure = match fs.closure {
                Some(c) => self.word(c)?,
                None => self.iconst(I64, 0),
            };
            self.b.ins().store(
                flags(),
                closure,
                frame,
                at.record + layout.native.frame_closure,
            );
        }
        let fs = &self.ir.states[state.index()];
        let (locals, stack, resume, bci) = (fs.locals.clone(), fs.stack.clone(), fs.resume, fs.bci);
        let mut k = 0i32;
        for (slot, l) in locals.iter().enumerate() {
            // The receiver and arguments of the frame's own activation never change (SOM
            // does not assign them): the interpreter may read them where the bytecode
            // does not (an escaped block's receiver, a restarted method's arguments).
            let v = match (l, self.act.params.get(slot).filter(|_| level == 0)) {
                (Some(v), _) => self.word(*v)?,
                (None, Some(&p)) => p,
                (None, None) => nil_word(self),
            };
            self.b.ins().store(flags(), v, slots, at.slots + 8 * k);
            k += 1;
        }
        if kind == ExitKind::Restart {
            // The primitive emptied the operand stack and set `ip` 0.
            let zero = self.iconst(I8, 0);
            self.b
                .ins()
                .store(flags(), zero, self.act.vm, layout.restarted);
        } else {
            for s in stack {
                let v = self.word(s)?;
                self.b.ins().store(flags(), v, slots, at.slots + 8 * k);
                k += 1;
            }
            let ip = match resume {
                Resume::Before => bci,
                Resume::AfterCall => bci + 1,
            };
            let ip = self.iconst(I32, ip as i64);
            self.b
                .ins()
                .store(flags(), ip, frame, at.record + layout.frame_ip);
        }
        Ok(k as i64)
    }

    /// Fills the tail the exits of code inlined at `caller`'s call share: with the status,
    /// the value stack's new length and the objects the exit made (`held`, in its params),
    /// it writes the frames of `caller`'s chain, outermost first, pushes their records
    /// beyond the frame's own with the exit's one, and hands the innermost over.
    pub(super) fn fill_outer_tail(
        &mut self,
        caller: FrameStateId,
        tail: Block,
        held: &[tally_ir::ValueId],
    ) -> Result<(), String> {
        let layout = self.layout;
        self.b.switch_to_block(tail);
        self.b
            .set_srcloc(SourceLoc::new(crate::pc_map::SHARED_EXIT));
        let params = self.b.block_params(tail).to_vec();
        let (status, len) = (params[0], params[1]);
        self.out.boxes.clear();
        for (&v, &p) in held.iter().zip(&params[2..]) {
            if self.ir.ty(v) == Ty::Float {
                self.out.boxes.insert(v, p);
            } else {
                self.define(v, p);
            }
        }
        let chain = self.chain_outermost_first(caller);
        let mut below = 0i64;
        for (level, &st) in chain.iter().enumerate() {
            let at = FramePlace::at(below, level, layout.frame_size);
            let bp = if level == 0 {
                self.act.bp
            } else {
                self.add_imm(self.act.bp, below)
            };
            below += self.write_frame(st, level, ExitKind::Interpret, at, bp)?;
        }
        self.b
            .ins()
            .store(flags(), len, self.act.vm, layout.stack_len);
        // The exit's own frame and those of the chain beyond the frame's own.
        self.add_to_depth(chain.len() as i64);
        let hand_over = self.hand_over();
        self.b.ins().jump(hand_over, &[status.into()]);
        Ok(())
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
