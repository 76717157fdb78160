//! Blocks and the control flow between them: an IR block's parameters, instructions and
//! terminator, and the returns, which share one block per function (the hooks at a
//! method's exit there too).

use std::sync::atomic::Ordering::Relaxed;

use cranelift_codegen::ir::condcodes::IntCC;
use cranelift_codegen::ir::{Block, InstBuilder, SourceLoc, TrapCode, Value};
use tally_ir::{BlockId, Terminator};
use tally_vm::jit::Status;
use tally_vm::runtime::HOOK_AT_EXIT;
use tally_vm::tally_profile::gc_hints::PointKind;

use super::entry::Caller;
use super::exits::ExitKind;
use super::lowerer::Lowerer;
use super::{flags, I32, I64};
use crate::stub_calls;

impl Lowerer<'_, '_> {
    /// Lowers one IR block: its parameters, instructions and terminator.
    pub(super) fn block(&mut self, id: BlockId) -> Result<(), String> {
        let ir = self.ir;
        let block = &ir.blocks[id.index()];
        let blk = self.map.blocks[id.index()];
        self.b.switch_to_block(blk);
        self.map.scope = block.scope;
        self.set_location(block.bci);
        for &p in &block.params {
            let x = self.b.append_block_param(blk, Self::ty_of(ir.ty(p)));
            self.define(p, x);
        }
        for &i in &block.insts {
            let inst = &ir.insts[i.index()];
            self.set_location(inst.bci);
            self.inst(inst)?;
        }
        let bci = block
            .insts
            .last()
            .map_or(block.bci, |&i| ir.insts[i.index()].bci);
        self.terminator(&block.term, bci)
    }

    pub(super) fn edge_args(
        &self,
        e: &tally_ir::Edge,
    ) -> Result<Vec<cranelift_codegen::ir::BlockArg>, String> {
        e.args
            .iter()
            .map(|&a| self.val(a).map(Into::into))
            .collect()
    }

    /// Ends the block whose last instruction (or start) is at `bci`.
    pub(super) fn terminator(&mut self, term: &Terminator, bci: u32) -> Result<(), String> {
        match term {
            Terminator::Jump(e) => {
                let args = self.edge_args(e)?;
                self.b.ins().jump(self.map.blocks[e.block.index()], &args);
            }
            Terminator::Branch {
                cond,
                then,
                otherwise,
            } => {
                let c = self.val(*cond)?;
                let t = self.edge_args(then)?;
                let o = self.edge_args(otherwise)?;
                self.b.ins().brif(
                    c,
                    self.map.blocks[then.block.index()],
                    &t,
                    self.map.blocks[otherwise.block.index()],
                    &o,
                );
            }
            Terminator::Return(v) => {
                let v = self.val(*v)?;
                if self.request.code.hooks.load(Relaxed) & HOOK_AT_EXIT != 0 {
                    self.method_hook(PointKind::Exit, bci);
                }
                let ret = self.ret(bci);
                self.b.ins().jump(ret, &[v.into()]);
            }
            Terminator::ReturnNonLocal { state, .. } | Terminator::Deopt(state) => {
                let exit = self.exit(*state, ExitKind::Interpret)?;
                self.b.ins().jump(exit, &[]);
            }
            Terminator::Enter { normal, osr } => {
                // The caller says which loop head the frame stopped at; any other caller
                // makes a new activation.
                let mut switch = cranelift_frontend::Switch::new();
                for (k, o) in osr.iter().enumerate() {
                    let caller = Caller::LoopEntry(k as u32).code() as u128;
                    switch.set_entry(caller, self.map.blocks[o.edge.block.index()]);
                }
                let normal = self.map.blocks[normal.block.index()];
                switch.emit(&mut self.b, self.act.caller, normal);
            }
            Terminator::Unreachable => {
                self.b.ins().trap(TrapCode::unwrap_user(1));
            }
        }
        Ok(())
    }

    /// The block every return jumps to with its value (created at the first, whose
    /// bytecode index, `bci`, its code is placed on).
    pub(super) fn ret(&mut self, bci: u32) -> Block {
        if let Some((b, _)) = self.out.ret {
            return b;
        }
        let b = self.b.create_block();
        self.b.append_block_param(b, I64);
        self.out.ret = Some((b, bci));
        b
    }

    /// Fills `ret`, which returns its parameter: for the dispatcher the adapter pushes it and
    /// answers `Status::Returned` (the dispatcher pops the frame); a direct call pops its
    /// frame.
    pub(super) fn fill_ret(&mut self, ret: Block, bci: u32) {
        self.b.switch_to_block(ret);
        self.b.set_srcloc(SourceLoc::new(bci));
        let v = self.b.block_params(ret)[0];
        let (framed, direct) = self.leave_by_caller();
        self.b.switch_to_block(direct);
        self.add_to_depth(-1);
        self.return_(v);
        self.b.switch_to_block(framed);
        self.return_(v);
    }

    /// Returns `v` through the one epilogue every way out of the function shares (Cranelift
    /// writes an epilogue at each `return`: restoring registers and the frame, some twenty
    /// bytes).
    pub(super) fn return_(&mut self, v: Value) {
        let epilogue = self.out.epilogue;
        self.b.ins().jump(epilogue, &[v.into()]);
    }

    /// A hooked method's entry or exit hook (GC hints, phases) while the hooks are armed,
    /// as the interpreter runs it; a safepoint, since a hook may collect. An error leaves.
    pub(super) fn method_hook(&mut self, kind: PointKind, bci: u32) {
        let address = self.iconst(I64, self.layout.method_hooks_armed as i64);
        let armed = self.b.ins().uload8(I32, flags(), address, 0);
        let hook = self.b.create_block();
        let go_on = self.b.create_block();
        self.b.set_cold_block(hook);
        self.b.ins().brif(armed, hook, &[], go_on, &[]);
        self.b.switch_to_block(hook);
        let k = self.safepoint(bci);
        let stub = stub_calls::address(&mut self.b, self.layout.stubs.method_hook);
        let kind = self.iconst(I32, i64::from(kind == PointKind::Exit));
        let call = stub_calls::call_at(
            &mut self.b,
            &mut self.sigs.stubs,
            stub,
            &[self.act.vm, kind],
        );
        self.tag(call, k);
        let status = self.b.inst_results(call)[0];
        let ok = self.cmp_imm(IntCC::Equal, status, Status::Continue as i64);
        let leave = self.leave();
        self.b.ins().brif(ok, go_on, &[], leave, &[]);
        self.b.switch_to_block(go_on);
    }
}
