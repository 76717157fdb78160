//! The send probes: one function per shape of send (argument count, and for one argument
//! whether the selector is a keyword), shared by every version of the compiler, that does
//! what a send whose receiver class the compile did not know does at run time: the
//! receiver's class, the site's inline cache, a direct call of a hit with a body, a trivial
//! method in place, else the send stub. A body calls its shape's probe instead of writing
//! all of that at each such send: that code was the largest part of what small methods
//! compiled, and what Cranelift spent most of its time on.
//!
//! The probe is invisible to the VM: the body that calls it has made the call a safepoint
//! (its frame's `ip` and safepoint number written, its references in the call's stack map),
//! and the probe holds no reference across its own calls, so the collector, stack walks and
//! samples see the calling body's record as they would at any of its calls.

use cranelift_codegen::ir::{AbiParam, Function, InstBuilder, Signature};
use cranelift_codegen::isa::{CallConv, TargetFrontendConfig};
use cranelift_frontend::{FunctionBuilder, FunctionBuilderContext};
use tally_vm::jit::Layout;

use super::calls::call_with_operands_at;
use super::driver::body_signature;
use super::emit::Emitter;
use super::entry::Caller;
use super::{flags, I32, I64};
use crate::stub_calls::StubSignatures;

/// Sends with more arguments than this write their probe inline.
pub(crate) const MAX_PROBE_ARGC: usize = 3;

/// What a probe is made for: sends of `argc` arguments; `keyword` (one argument only)
/// whether their selector ends in a colon, so that a setter may be done in place.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub(crate) struct ProbeShape {
    pub argc: usize,
    pub keyword: bool,
}

impl ProbeShape {
    /// The probe of a send of `argc` arguments with `selector`, if sends that wide have one.
    pub(crate) fn of(selector: &str, argc: usize) -> Option<ProbeShape> {
        (argc <= MAX_PROBE_ARGC).then(|| ProbeShape {
            argc,
            keyword: argc == 1 && selector.ends_with(':'),
        })
    }

    /// Every shape, in [`SendProbes`]' order.
    pub(crate) fn all() -> impl Iterator<Item = ProbeShape> {
        (0..=MAX_PROBE_ARGC).flat_map(|argc| {
            let keyword = if argc == 1 {
                &[false, true][..]
            } else {
                &[false][..]
            };
            keyword
                .iter()
                .map(move |&keyword| ProbeShape { argc, keyword })
        })
    }

    /// The name listings show for its address.
    pub(crate) fn name(self) -> String {
        format!(
            "probe:send{}{}",
            self.argc,
            if self.keyword { "k" } else { "" }
        )
    }
}

/// The probes' addresses, by shape.
#[derive(Clone, Debug, Default)]
pub(crate) struct SendProbes {
    pub(crate) addresses: Vec<(ProbeShape, usize)>,
}

impl SendProbes {
    pub(crate) fn address(&self, shape: ProbeShape) -> Option<usize> {
        self.addresses
            .iter()
            .find(|(s, _)| *s == shape)
            .map(|&(_, a)| a)
    }
}

/// A probe's signature: `(vm, site, receiver, arguments…) -> Value`, `Value::NONE` as a
/// body's (leave).
pub(crate) fn probe_signature(call_conv: CallConv, argc: usize) -> Signature {
    let mut sig = Signature::new(call_conv);
    sig.params.push(AbiParam::new(I64));
    sig.params.push(AbiParam::new(I32));
    for _ in 0..=argc {
        sig.params.push(AbiParam::new(I64));
    }
    sig.returns.push(AbiParam::new(I64));
    sig
}

/// Writes the probe of `shape` into `func`.
pub(crate) fn lower_send_probe(
    func: &mut Function,
    builder_context: &mut FunctionBuilderContext,
    shape: ProbeShape,
    layout: &Layout,
    target: TargetFrontendConfig,
    call_conv: CallConv,
) {
    func.signature = probe_signature(call_conv, shape.argc);
    let mut stubs = StubSignatures::new(func, call_conv, &[layout.stubs.ir_send]);
    let mut b = FunctionBuilder::new(func, builder_context);
    let entry = b.create_block();
    b.append_block_params_for_function_params(entry);
    b.switch_to_block(entry);
    let params = b.block_params(entry).to_vec();
    let (vm, site, recv, args) = (params[0], params[1], params[2], &params[3..]);
    let slow = b.create_block();
    b.set_cold_block(slow);
    let done = b.create_block();
    let result = b.append_block_param(done, I64);
    let mut e = Emitter {
        b: &mut b,
        layout,
        vm,
        stubs: &mut stubs,
    };
    let class = e.receiver_class(recv, slow);
    let site64 = e.b.ins().uextend(I64, site);
    let code = e.cached_code(site64, class, slow);
    let target_code = e.code_address(code);
    let direct =
        e.b.ins()
            .load(I64, flags(), target_code, layout.code_direct);
    let call = e.b.create_block();
    let frameless = e.b.create_block();
    e.b.ins().brif(direct, call, &[], frameless, &[]);
    // A hit without a body: a trivial method done in place while no profiler hook is due,
    // anything else (primitives included) by the stub.
    e.b.switch_to_block(frameless);
    e.unless_flag_raised(slow);
    e.trivial_in_place(shape.keyword, target_code, recv, args, done, slow);

    b.switch_to_block(call);
    let sig = b.import_signature(body_signature(call_conv, shape.argc, false));
    let caller = b.ins().iconst(I32, Caller::Direct.code());
    let mut call_args = vec![vm, caller, recv];
    call_args.extend_from_slice(args);
    let made = b.ins().call_indirect(sig, direct, &call_args);
    let v = b.inst_results(made)[0];
    b.ins().jump(done, &[v.into()]);

    b.switch_to_block(slow);
    let mut words = vec![recv];
    words.extend_from_slice(args);
    let stub = layout.stubs.ir_send;
    let made = call_with_operands_at(&mut b, &mut stubs, vm, stub, Some(site), &words);
    let v = b.inst_results(made)[0];
    b.ins().jump(done, &[v.into()]);

    b.switch_to_block(done);
    b.ins().return_(&[result]);
    b.seal_all_blocks();
    b.finalize(target);
}
