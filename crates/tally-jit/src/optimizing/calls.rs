//! Calls: through the `ir_*` stubs (the receiver and arguments in a stack slot), straight
//! into a callee's body, the hooks a call done in place shows the profiler, and what every
//! call that may collect does first (its safepoint: the frame's `ip` and the safepoint's
//! number, and the tag its stack map is found by).

use cranelift_codegen::ir::condcodes::IntCC;
use cranelift_codegen::ir::{InstBuilder, SigRef, Value};
use cranelift_frontend::FunctionBuilder;
use tally_ir::{Inst, InstKind};
use tally_vm::jit::Stub;
use tally_vm::objects::block;

use super::driver::body_signature;
use super::entry::Caller;
use super::exits::ExitKind;
use super::heap::slot_offset;
use super::insts::state_of;
use super::lowerer::Lowerer;
use super::{flags, I32, I64};
use crate::stub_calls::{self, StubSignatures};

/// Calls `stub` with `words` (the receiver, or a block's closure, then the arguments) in a
/// stack slot and their count, `what` (a site or code id) first when the stub takes one.
/// Answers the call, for its result and its safepoint tag.
pub(super) fn call_with_operands(
    b: &mut FunctionBuilder,
    sigs: &mut StubSignatures,
    vm: Value,
    stub: Stub,
    what: Option<u32>,
    words: &[Value],
) -> cranelift_codegen::ir::Inst {
    let what = what.map(|w| b.ins().iconst(I32, w as i64));
    call_with_operands_at(b, sigs, vm, stub, what, words)
}

/// [`call_with_operands`] with `what` made already (an I32).
pub(super) fn call_with_operands_at(
    b: &mut FunctionBuilder,
    sigs: &mut StubSignatures,
    vm: Value,
    stub: Stub,
    what: Option<Value>,
    words: &[Value],
) -> cranelift_codegen::ir::Inst {
    let slot = b.create_sized_stack_slot(cranelift_codegen::ir::StackSlotData::new(
        cranelift_codegen::ir::StackSlotKind::ExplicitSlot,
        8 * words.len() as u32,
        3,
    ));
    for (k, &w) in words.iter().enumerate() {
        let address = b.ins().stack_addr(I64, slot, 8 * k as i32);
        b.ins().store(flags(), w, address, 0);
    }
    let pointer = b.ins().stack_addr(I64, slot, 0);
    let argc = b.ins().iconst(I32, words.len() as i64 - 1);
    let callee = stub_calls::address(b, stub);
    let args = match what {
        Some(w) => vec![vm, w, pointer, argc],
        None => vec![vm, pointer, argc],
    };
    stub_calls::call_at(b, sigs, callee, &args)
}

impl Lowerer<'_, '_> {
    /// Lowers a call, an allocation through a stub the frame's state goes with, or a hook or yieldpoint (its result, if any).
    pub(super) fn call_inst(&mut self, inst: &Inst) -> Result<Option<Value>, String> {
        Ok(match &inst.kind {
            InstKind::Send {
                site,
                receiver,
                args,
            }
            | InstKind::SuperSend {
                site,
                receiver,
                args,
            } => {
                let stub = if matches!(inst.kind, InstKind::SuperSend { .. }) {
                    self.layout.stubs.ir_super_send
                } else {
                    self.layout.stubs.ir_send
                };
                let v = if matches!(inst.kind, InstKind::SuperSend { .. }) {
                    self.call(stub, Some(*site), *receiver, args, inst)?
                } else {
                    self.send_through_cache(*site, *receiver, args, inst)?
                };
                // Only `Block>>restart` restarts its sender's frame (never inlined code's:
                // a method that sends it is not inlined).
                let restarts =
                    self.map.scope.0 == 0 && self.request.selector(*site) == Some("#restart");
                self.left_if_none(v, inst.state.filter(|_| restarts))?;
                Some(v)
            }
            InstKind::CallMethod {
                code,
                receiver,
                args,
            } => Some(self.call_direct(Some(*code), *receiver, args, inst)?),
            InstKind::CallBlock { closure, args } => {
                Some(self.call_direct(None, *closure, args, inst)?)
            }
            InstKind::MakeBlock {
                code,
                receiver,
                ctx,
            } => {
                let v = self.make_block(*code, *receiver, *ctx, inst.bci)?;
                self.left_if_none(v, None)?;
                Some(v)
            }
            InstKind::NewContext { size, outer } if self.map.scope.0 != 0 => {
                Some(self.inlined_context(*size, *outer, inst.bci)?)
            }
            InstKind::NewContext { .. } => Some(self.new_context(inst.bci)),
            InstKind::Yieldpoint => {
                self.yieldpoint(state_of(inst)?, inst.bci)?;
                None
            }
            InstKind::CallHook(code) => {
                self.call_hook(*code, inst.bci);
                None
            }
            InstKind::EnterInlined(code) => {
                if self.layout.count_calls {
                    let callee = self.request.callee(*code).ok_or_else(|| {
                        format!("an inlined code {code}, which the request does not name")
                    })?;
                    crate::counters::count_call(&mut self.b, callee, self.column);
                }
                self.call_hook(*code, inst.bci);
                None
            }
            other => return Err(format!("{other:?} is no call")),
        })
    }

    /// The signature of a body taking `argc` arguments (and a closure).
    pub(super) fn body_sig(&mut self, argc: usize, is_block: bool) -> SigRef {
        if let Some(&s) = self.sigs.bodies.get(&(argc, is_block)) {
            return s;
        }
        let sig = self
            .b
            .import_signature(body_signature(self.sigs.call_conv, argc, is_block));
        self.sigs.bodies.insert((argc, is_block), sig);
        sig
    }

    /// The signature of the send probe for `argc` arguments, imported at its first use.
    pub(super) fn probe_sig(&mut self, argc: usize) -> SigRef {
        if let Some(&s) = self.sigs.probes.get(&argc) {
            return s;
        }
        let sig = super::probe::probe_signature(self.sigs.call_conv, argc);
        let sig = self.b.import_signature(sig);
        self.sigs.probes.insert(argc, sig);
        sig
    }

    /// Makes the next call a safepoint: the frame's `ip` (one past the call at the current
    /// scope's `bci`, as the interpreter leaves it; in inlined code, one past the call the
    /// outermost inlined method stands for) and the safepoint's number; answers the number,
    /// which the call is tagged with. The number also tells stack walks which activations
    /// inlined into the frame's the call is made from.
    pub(super) fn safepoint(&mut self, bci: u32) -> u32 {
        let k = self.record.safepoints;
        self.record.safepoints += 1;
        let chain = self.ir.scope_chain(self.map.scope, bci);
        let &(_, own_bci) = chain.last().expect("the own scope");
        self.record.inlined_at.push(
            chain[..chain.len() - 1]
                .iter()
                .map(|&(scope, at)| (self.map.scope_codes[scope.index()].id, at + 1))
                .collect(),
        );
        let ip = self.iconst(I32, own_bci as i64 + 1);
        self.b
            .ins()
            .store(flags(), ip, self.act.frame, self.layout.frame_ip);
        let n = self.iconst(I32, k as i64);
        self.b
            .ins()
            .store(flags(), n, self.act.native, self.layout.native.safepoint);
        k
    }

    /// Tags call `inst` with safepoint `k`, so its stack map can be found.
    pub(super) fn tag(&mut self, inst: cranelift_codegen::ir::Inst, k: u32) {
        self.b
            .func
            .debug_tags
            .set(inst, [cranelift_codegen::ir::DebugTag::User(k)]);
    }

    /// A call through an `ir_*` stub (a safepoint): the receiver (or closure) and the
    /// arguments in a stack slot, `what` (a site or code id) first when the stub takes one.
    /// The caller tests for `Value::NONE` (`left_if_none`).
    pub(super) fn call(
        &mut self,
        stub: Stub,
        what: Option<u32>,
        receiver: tally_ir::ValueId,
        args: &[tally_ir::ValueId],
        inst: &Inst,
    ) -> Result<Value, String> {
        let words = std::iter::once(receiver)
            .chain(args.iter().copied())
            .map(|v| self.val(v))
            .collect::<Result<Vec<Value>, String>>()?;
        let k = self.safepoint(inst.bci);
        let vm = self.act.vm;
        let call = call_with_operands(&mut self.b, &mut self.sigs.stubs, vm, stub, what, &words);
        self.tag(call, k);
        Ok(self.b.inst_results(call)[0])
    }

    /// The activation's context: for the dispatcher, the one the frame's set-up made; for a
    /// direct call, a new one (a safepoint: it allocates).
    pub(super) fn new_context(&mut self, bci: u32) -> Value {
        let framed = self.b.create_block();
        let direct = self.b.create_block();
        let join = self.b.create_block();
        let ctx = self.b.append_block_param(join, I64);
        self.b.ins().brif(self.act.caller, framed, &[], direct, &[]);
        self.b.switch_to_block(framed);
        let made = self
            .b
            .ins()
            .load(I64, flags(), self.act.frame, self.layout.frame_ctx);
        self.b.ins().jump(join, &[made.into()]);
        self.b.switch_to_block(direct);
        let code = self.iconst(I32, self.request.code.id as i64);
        let stub = self.layout.stubs.ir_new_context;
        let new = self.safepoint_call(stub, &[self.act.vm, code], bci);
        let leave = self.leave();
        self.b.ins().brif(new, join, &[new.into()], leave, &[]);
        self.b.switch_to_block(join);
        ctx
    }

    /// The context of an inlined activation: `size` slots, `outer` as its outer context (a
    /// safepoint: it allocates).
    pub(super) fn inlined_context(
        &mut self,
        size: u16,
        outer: Option<tally_ir::ValueId>,
        bci: u32,
    ) -> Result<Value, String> {
        let outer = match outer {
            Some(o) => self.val(o)?,
            None => self.iconst(I64, super::NIL),
        };
        let k = self.safepoint(bci);
        let stub = stub_calls::address(&mut self.b, self.layout.stubs.ir_inlined_context);
        let size = self.iconst(I64, i64::from(size));
        let call = stub_calls::call_at(
            &mut self.b,
            &mut self.sigs.stubs,
            stub,
            &[self.act.vm, size, outer],
        );
        self.tag(call, k);
        let ctx = self.b.inst_results(call)[0];
        self.left_if_none(ctx, None)?;
        Ok(ctx)
    }

    /// A call of a known method (`code`) or of a closure's block (`None`, `receiver` the
    /// closure, whose class guard fixed its arity): straight into the callee's body with the
    /// receiver and arguments in registers when its code has one installed, else through
    /// the stub. Both are safepoints.
    pub(super) fn call_direct(
        &mut self,
        code: Option<u32>,
        receiver: tally_ir::ValueId,
        args: &[tally_ir::ValueId],
        inst: &Inst,
    ) -> Result<Value, String> {
        let (target, mut operands) = match code {
            Some(c) => {
                let callee: &tally_vm::runtime::Code = self.request.callee(c).ok_or_else(|| {
                    format!("a call of code {c}, which the request does not name")
                })?;
                let address = self.iconst(I64, callee as *const _ as i64);
                (address, vec![self.val(receiver)?])
            }
            None => {
                let closure = self.val(receiver)?;
                let address = self.closure_code(closure);
                let recv = self
                    .b
                    .ins()
                    .load(I64, flags(), closure, slot_offset(block::RECEIVER));
                (address, vec![recv])
            }
        };
        if let Some(c) = code.filter(|&c| {
            self.request
                .callee(c)
                .is_some_and(|callee| callee.primitive.is_some())
        }) {
            // A primitive has no body to call directly: the stub runs it.
            let v = self.call(
                self.layout.stubs.ir_call_method,
                Some(c),
                receiver,
                args,
                inst,
            )?;
            self.left_if_none(v, None)?;
            return Ok(v);
        }
        for &a in args {
            operands.push(self.val(a)?);
        }
        if code.is_none() {
            operands.push(self.val(receiver)?);
        }
        let direct = self
            .b
            .ins()
            .load(I64, flags(), target, self.layout.code_direct);
        let fast = self.b.create_block();
        let slow = self.b.create_block();
        let join = self.b.create_block();
        let result = self.b.append_block_param(join, I64);
        self.b.ins().brif(direct, fast, &[], slow, &[]);

        self.b.switch_to_block(fast);
        let k = self.safepoint(inst.bci);
        let sig = self.body_sig(args.len(), code.is_none());
        let direct_call = self.iconst(I32, Caller::Direct.code());
        let mut call_args = vec![self.act.vm, direct_call];
        call_args.extend(operands.iter().copied());
        let call = self.b.ins().call_indirect(sig, direct, &call_args);
        self.tag(call, k);
        let v = self.b.inst_results(call)[0];
        self.b.ins().jump(join, &[v.into()]);

        self.b.switch_to_block(slow);
        let stub = match code {
            Some(_) => self.layout.stubs.ir_call_method,
            None => self.layout.stubs.ir_call_block,
        };
        let v = self.call(stub, code, receiver, args, inst)?;
        self.b.ins().jump(join, &[v.into()]);
        self.b.switch_to_block(join);
        // A method or block body never restarts its caller.
        self.left_if_none(result, None)?;
        Ok(result)
    }

    /// The prologue hook of a call of `code` done in place: while a bit of
    /// `Layout::call_hook_bits` is raised, the stub runs it with this activation's `ip` at
    /// `bci` (the call's site). Not a safepoint: the stub neither collects nor fails.
    pub(super) fn call_hook(&mut self, code: u32, bci: u32) {
        if self.layout.call_hook_bits == 0 {
            return;
        }
        let raised = self.flag_bits(self.layout.call_hook_bits);
        let hook = self.b.create_block();
        let go_on = self.b.create_block();
        self.b.set_cold_block(hook);
        self.b.ins().brif(raised, hook, &[], go_on, &[]);
        self.b.switch_to_block(hook);
        // Numbered like a safepoint, though the call is none (it neither collects nor is
        // tagged): the number tells the hook which inlined activations make the call.
        self.safepoint(bci);
        let stub = stub_calls::address(&mut self.b, self.layout.stubs.ir_call_hook);
        let code = self.iconst(I32, code as i64);
        stub_calls::call_at(
            &mut self.b,
            &mut self.sigs.stubs,
            stub,
            &[self.act.vm, code],
        );
        self.b.ins().jump(go_on, &[]);
        self.b.switch_to_block(go_on);
    }

    /// Leaves when a stub answered `Value::NONE`; for a call (with its frame state after
    /// the call), to the interpreter at the frame's start when the call restarted it.
    pub(super) fn left_if_none(
        &mut self,
        v: Value,
        after: Option<tally_ir::FrameStateId>,
    ) -> Result<(), String> {
        let leave = self.leave();
        let go_on = self.b.create_block();
        let Some(state) = after else {
            self.b.ins().brif(v, go_on, &[], leave, &[]);
            self.b.switch_to_block(go_on);
            return Ok(());
        };
        let none = self.b.create_block();
        self.b.set_cold_block(none);
        self.b.ins().brif(v, go_on, &[], none, &[]);
        self.b.switch_to_block(none);
        let restart = self.exit(state, ExitKind::Restart)?;
        let flag = self
            .b
            .ins()
            .uload8(I32, flags(), self.act.vm, self.layout.restarted);
        self.b.ins().brif(flag, restart, &[], leave, &[]);
        self.b.switch_to_block(go_on);
        Ok(())
    }

    /// A loop's back-edge: when the yieldpoint flag has a bit raised, the `back_edge` stub
    /// serves it (a safepoint); a status other than `Continue` writes the frame at the loop
    /// head and returns it.
    pub(super) fn yieldpoint(
        &mut self,
        state: tally_ir::FrameStateId,
        bci: u32,
    ) -> Result<(), String> {
        if self.layout.count_calls {
            let code = self.code();
            crate::counters::count_loop(&mut self.b, code, self.column);
        }
        let raised = self.flag_bits(self.layout.yieldpoint_bits);
        let serve = self.b.create_block();
        let go_on = self.b.create_block();
        self.b.set_cold_block(serve);
        self.b.ins().brif(raised, serve, &[], go_on, &[]);
        self.b.switch_to_block(serve);
        let exit = self.exit(state, ExitKind::Status)?;
        let k = self.safepoint(bci);
        let stub = self.layout.stubs.back_edge;
        let call = stub_calls::call(&mut self.b, &mut self.sigs.stubs, stub, &[self.act.vm]);
        self.tag(call, k);
        let status = self.b.inst_results(call)[0];
        let done = self.cmp_imm(IntCC::Equal, status, tally_vm::jit::Status::Continue as i64);
        self.b.ins().brif(done, go_on, &[], exit, &[status.into()]);
        self.b.switch_to_block(go_on);
        Ok(())
    }

    /// A new closure of block `code` over `receiver` and `ctx` (a safepoint: it allocates);
    /// `Value::NONE` when the allocation failed (the error is parked).
    pub(super) fn make_block(
        &mut self,
        code: u32,
        receiver: tally_ir::ValueId,
        ctx: Option<tally_ir::ValueId>,
        bci: u32,
    ) -> Result<Value, String> {
        let r = self.val(receiver)?;
        let c = match ctx {
            Some(c) => self.val(c)?,
            None => self.iconst(I64, super::NIL),
        };
        let k = self.safepoint(bci);
        let stub = stub_calls::address(&mut self.b, self.layout.stubs.ir_make_block);
        let code = self.iconst(I32, code as i64);
        let call = stub_calls::call_at(
            &mut self.b,
            &mut self.sigs.stubs,
            stub,
            &[self.act.vm, code, r, c],
        );
        self.tag(call, k);
        Ok(self.b.inst_results(call)[0])
    }

    /// Calls `stub` with `args` as a safepoint at `bci`; answers its result.
    pub(super) fn safepoint_call(
        &mut self,
        stub: tally_vm::jit::Stub,
        args: &[Value],
        bci: u32,
    ) -> Value {
        let k = self.safepoint(bci);
        let call = stub_calls::call(&mut self.b, &mut self.sigs.stubs, stub, args);
        self.tag(call, k);
        self.b.inst_results(call)[0]
    }
}
