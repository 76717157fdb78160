//! Calls of the VM's runtime stubs from the optimizing tier's code. Each stub is declared once, with its
//! signature, in the VM's table (`tally_vm::jit::Stubs`); a function imports the Cranelift
//! signature of each shape it calls once, and every call names the stub alone, so no call
//! can pair an address with another stub's signature.

use cranelift_codegen::ir::{types, AbiParam, Function, Inst, InstBuilder, SigRef, Signature};
use cranelift_codegen::isa::CallConv;
use cranelift_frontend::FunctionBuilder;
use tally_vm::jit::{Stub, StubType};

fn cranelift_type(t: StubType) -> types::Type {
    match t {
        StubType::I32 => types::I32,
        StubType::I64 => types::I64,
        StubType::F64 => types::F64,
    }
}

/// The Cranelift signature compiled code calls `stub` with.
fn signature(stub: &Stub, call_conv: CallConv) -> Signature {
    let mut sig = Signature::new(call_conv);
    let params = stub
        .params()
        .iter()
        .map(|&t| AbiParam::new(cranelift_type(t)));
    sig.params.extend(params);
    sig.returns.push(AbiParam::new(cranelift_type(stub.ret())));
    sig
}

/// The stub signatures imported into one function: the first ones each its own, the others
/// one per shape.
pub(crate) struct StubSignatures {
    call_conv: CallConv,
    imported: Vec<(Stub, SigRef)>,
}

impl StubSignatures {
    /// Imports the signatures of `first` into `func` now, in that order and each its own
    /// (as the tier's listings have always numbered them); the others are imported at their
    /// first call, or share one of the same shape.
    pub(crate) fn new(func: &mut Function, call_conv: CallConv, first: &[Stub]) -> StubSignatures {
        let imported = first
            .iter()
            .map(|stub| (*stub, func.import_signature(signature(stub, call_conv))))
            .collect();
        StubSignatures {
            call_conv,
            imported,
        }
    }

    /// `stub`'s signature in `func`.
    pub(crate) fn of(&mut self, func: &mut Function, stub: &Stub) -> SigRef {
        let shape = |s: &Stub| (s.params(), s.ret());
        let own = self.imported.iter().find(|(s, _)| s == stub);
        let same = || self.imported.iter().find(|(s, _)| shape(s) == shape(stub));
        if let Some(&(_, sig)) = own.or_else(same) {
            return sig;
        }
        let sig = func.import_signature(signature(stub, self.call_conv));
        self.imported.push((*stub, sig));
        sig
    }
}

/// A stub's address made in a function, to call it after its arguments are made.
#[derive(Clone, Copy)]
pub(crate) struct StubAddress {
    stub: Stub,
    value: cranelift_codegen::ir::Value,
}

/// `stub`'s address in the block being built.
pub(crate) fn address(b: &mut FunctionBuilder, stub: Stub) -> StubAddress {
    StubAddress {
        stub,
        value: b.ins().iconst(types::I64, stub.address() as i64),
    }
}

/// Calls the stub at `callee` with `args`.
pub(crate) fn call_at(
    b: &mut FunctionBuilder,
    sigs: &mut StubSignatures,
    callee: StubAddress,
    args: &[cranelift_codegen::ir::Value],
) -> Inst {
    let sig = sigs.of(b.func, &callee.stub);
    b.ins().call_indirect(sig, callee.value, args)
}

/// Calls `stub` with `args` (its address made after them).
pub(crate) fn call(
    b: &mut FunctionBuilder,
    sigs: &mut StubSignatures,
    stub: Stub,
    args: &[cranelift_codegen::ir::Value],
) -> Inst {
    let callee = address(b, stub);
    call_at(b, sigs, callee, args)
}
