//! Calls of the VM's runtime stubs from either tier. Each stub is declared once, with its
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

/// The stub signatures imported into one function, one per shape.
pub(crate) struct StubSignatures {
    call_conv: CallConv,
    imported: Vec<((&'static [StubType], StubType), SigRef)>,
}

impl StubSignatures {
    /// Imports the signatures of `first`'s stubs into `func` now, in that order, so that a
    /// tier's listings number them the same from one function to the next; the others are
    /// imported at their first call.
    pub(crate) fn new(func: &mut Function, call_conv: CallConv, first: &[Stub]) -> StubSignatures {
        let mut sigs = StubSignatures {
            call_conv,
            imported: Vec::new(),
        };
        for stub in first {
            sigs.of(func, stub);
        }
        sigs
    }

    /// `stub`'s signature in `func`.
    pub(crate) fn of(&mut self, func: &mut Function, stub: &Stub) -> SigRef {
        let shape = (stub.params(), stub.ret());
        if let Some(&(_, sig)) = self.imported.iter().find(|(s, _)| *s == shape) {
            return sig;
        }
        let sig = func.import_signature(signature(stub, self.call_conv));
        self.imported.push((shape, sig));
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
