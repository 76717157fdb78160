//! The adapter: the `EntryPoint` the dispatcher enters a body through, which reads the
//! receiver and arguments from the frame, picks the way in (a new activation, a loop-head
//! entry) and turns the body's value into a status.

use cranelift_codegen::ir::condcodes::IntCC;
use cranelift_codegen::ir::{Function, InstBuilder};
use cranelift_frontend::{FunctionBuilder, FunctionBuilderContext};
use tally_vm::jit::{Layout, Status};

use super::driver::body_signature;
use super::entry::Caller;
use super::{flags, I32, I64};

/// What an adapter calls: the body it was made with, or (an adapter shared by every body
/// of its shape without loop-head entries) the body installed for the frame's code.
#[derive(Clone, Copy)]
pub(crate) enum AdapterBody<F = cranelift_codegen::ir::FuncRef> {
    Known(F),
    OfFrame,
}

/// The activations an adapter enters: a method's or a block's, with `argc` arguments.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub(crate) struct AdapterShape {
    pub argc: usize,
    pub is_block: bool,
}

impl AdapterShape {
    pub(crate) fn of(code: &tally_vm::runtime::Code) -> AdapterShape {
        AdapterShape {
            argc: code.num_args as usize,
            is_block: code.kind == tally_vm::compiler::CodeKind::Block,
        }
    }
}

/// Writes the adapter the dispatcher calls (an `EntryPoint`) into `func`: for a new frame
/// (`resume` 0: a call from the baseline tier's code, [`Caller::FreshFromCompiled`]; or the
/// top frame at `ip` 0, [`Caller::Dispatcher`]) it reads the receiver and arguments from
/// the frame's slots and runs `body` for the frame; a frame stopped at `osr[k]` (a loop
/// head) enters the body there ([`Caller::LoopEntry`]); a frame left elsewhere goes back to
/// the interpreter. The body's value is pushed for `Status::Returned`; `Value::NONE` gives
/// the status its exit left in `Layout::exit_status`, or `Status::Unwound`.
#[allow(clippy::too_many_arguments)]
pub(crate) fn lower_adapter(
    func: &mut Function,
    builder_context: &mut FunctionBuilderContext,
    shape: AdapterShape,
    layout: &Layout,
    body: AdapterBody,
    osr: &[u32],
    target: cranelift_codegen::isa::TargetFrontendConfig,
    call_conv: cranelift_codegen::isa::CallConv,
) {
    let mut b = FunctionBuilder::new(func, builder_context);
    let entry = b.create_block();
    b.append_block_params_for_function_params(entry);
    b.switch_to_block(entry);
    let params = b.block_params(entry).to_vec();
    let (vm, frame_in, bp_in, resume) = (params[0], params[1], params[2], params[3]);
    let resumed = b.create_block();
    let join = b.create_block();
    b.append_block_param(join, I64);
    b.append_block_param(join, I64);
    b.append_block_param(join, I32);
    let fresh = b.ins().iconst(I32, Caller::FreshFromCompiled.code());
    b.ins().brif(
        resume,
        resumed,
        &[],
        join,
        &[frame_in.into(), bp_in.into(), fresh.into()],
    );
    b.switch_to_block(resumed);
    let frame_stack = b.ins().load(I64, flags(), vm, layout.frame_stack);
    let depth = b.ins().load(I64, flags(), frame_stack, layout.frames_len);
    let frames = b.ins().load(I64, flags(), frame_stack, layout.frames_base);
    let minus_one = b.ins().iconst(I64, -1);
    let top = b.ins().iadd(depth, minus_one);
    let size = b.ins().iconst(I64, layout.frame_size as i64);
    let offset = b.ins().imul(top, size);
    let frame = b.ins().iadd(frames, offset);
    let ip = b.ins().load(I32, flags(), frame, layout.frame_ip);
    let bp = b.ins().uload32(flags(), frame, layout.frame_bp);
    let elsewhere = b.create_block();
    b.set_cold_block(elsewhere);
    let mut next = b.create_block();
    let new = b.ins().iconst(I32, Caller::Dispatcher.code());
    b.ins()
        .brif(ip, next, &[], join, &[frame.into(), bp.into(), new.into()]);
    for (k, &bci) in osr.iter().enumerate() {
        b.switch_to_block(next);
        next = b.create_block();
        let here = b.ins().icmp_imm_u(IntCC::Equal, ip, i64::from(bci));
        let entry = b.ins().iconst(I32, Caller::LoopEntry(k as u32).code());
        b.ins().brif(
            here,
            join,
            &[frame.into(), bp.into(), entry.into()],
            next,
            &[],
        );
    }
    b.switch_to_block(next);
    b.ins().jump(elsewhere, &[]);
    b.switch_to_block(elsewhere);
    let status = b.ins().iconst(I32, Status::Interpret as i64);
    b.ins().return_(&[status]);

    b.switch_to_block(join);
    let frame = b.block_params(join)[0];
    let bp = b.block_params(join)[1];
    let caller = b.block_params(join)[2];
    let stack = b.ins().load(I64, flags(), vm, layout.stack_base);
    let eight = b.ins().iconst(I64, 8);
    let bp_bytes = b.ins().imul(bp, eight);
    let slots = b.ins().iadd(stack, bp_bytes);
    let mut args = vec![vm, caller];
    for k in 0..=shape.argc as i32 {
        args.push(b.ins().load(I64, flags(), slots, 8 * k));
    }
    if shape.is_block {
        args.push(
            b.ins()
                .load(I64, flags(), frame, layout.native.frame_closure),
        );
    }
    let call = match body {
        AdapterBody::Known(body) => b.ins().call(body, &args),
        AdapterBody::OfFrame => {
            // The body installed for the frame's code (`Code::direct`): read where the
            // dispatcher entered through this adapter, which the VM installed with it.
            let calls = &layout.calls;
            let id = b.ins().uload32(flags(), frame, calls.frame_code);
            let codes = b.ins().load(I64, flags(), vm, calls.codes_base);
            let offset = b.ins().imul(id, eight);
            let at = b.ins().iadd(codes, offset);
            let code = b.ins().load(I64, flags(), at, 0);
            let direct = b.ins().load(I64, flags(), code, layout.code_direct);
            let sig = b.import_signature(body_signature(call_conv, shape.argc, shape.is_block));
            b.ins().call_indirect(sig, direct, &args)
        }
    };
    let result = b.inst_results(call)[0];
    let returned = b.create_block();
    let left = b.create_block();
    b.ins().brif(result, returned, &[], left, &[]);

    b.switch_to_block(returned);
    let len = b.ins().load(I64, flags(), vm, layout.stack_len);
    let offset = b.ins().imul(len, eight);
    let slot = b.ins().iadd(stack, offset);
    b.ins().store(flags(), result, slot, 0);
    let one64 = b.ins().iconst(I64, 1);
    let len = b.ins().iadd(len, one64);
    b.ins().store(flags(), len, vm, layout.stack_len);
    let status = b.ins().iconst(I32, Status::Returned as i64);
    b.ins().return_(&[status]);

    b.switch_to_block(left);
    let status = b.ins().load(I32, flags(), vm, layout.exit_status);
    let zero = b.ins().iconst(I32, 0);
    b.ins().store(flags(), zero, vm, layout.exit_status);
    let unwound = b.ins().iconst(I32, Status::Unwound as i64);
    let status = b.ins().select(status, status, unwound);
    b.ins().return_(&[status]);
    b.seal_all_blocks();
    b.finalize(target);
}
