//! The lowering's state, grouped by what each part is for, and the small operations every
//! file of the tier uses.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use cranelift_codegen::ir::condcodes::IntCC;
use cranelift_codegen::ir::{types, Block, InstBuilder, SigRef, SourceLoc, Value};
use cranelift_codegen::isa::CallConv;
use cranelift_frontend::FunctionBuilder;
use tally_ir::{FrameStateId, ScopeId, Ty, ValueId};
use tally_vm::jit::{CompileRequest, Layout};
use tally_vm::runtime::Code;

use super::entry::Activation;
use super::exits::ExitKind;
use super::{I64, I8};
use crate::numbers;
use crate::stub_calls::StubSignatures;

/// Lowers one IR function into a Cranelift body: [`super::entry`] makes the activation,
/// the blocks follow in dominator order, and the ways out the code made are filled last.
pub(super) struct Lowerer<'a, 'f> {
    pub(super) b: FunctionBuilder<'f>,
    pub(super) layout: &'a Layout,
    pub(super) request: &'a CompileRequest,
    pub(super) ir: &'a tally_ir::Function,
    /// The activation's values, as the entry made them.
    pub(super) act: Activation,
    pub(super) sigs: Signatures,
    pub(super) map: IrMap,
    pub(super) out: WaysOut,
    pub(super) record: Recorded,
    /// The compiler's shared send probes.
    pub(super) probes: &'a super::probe::SendProbes,
    /// The profile's (and `--count-calls`') column of the version's tier.
    pub(super) column: usize,
}

/// The signatures of what the body calls.
pub(super) struct Signatures {
    pub(super) stubs: StubSignatures,
    /// The bodies', by argument count (methods, then blocks): direct calls.
    pub(super) bodies: HashMap<(usize, bool), SigRef>,
    /// The send probes', by argument count.
    pub(super) probes: HashMap<usize, SigRef>,
    pub(super) call_conv: CallConv,
}

/// Where lowering is in the IR, and what it has made of it.
pub(super) struct IrMap {
    /// Each IR value's Cranelift value, once defined.
    pub(super) values: Vec<Option<Value>>,
    /// Each IR block's Cranelift block.
    pub(super) blocks: Vec<Block>,
    /// The code of each of the IR's scopes (the request's own first).
    pub(super) scope_codes: Vec<&'static Code>,
    /// The scope of the instruction being lowered.
    pub(super) scope: ScopeId,
}

/// The blocks the ways out of the function share: made at their first use, filled once
/// every IR block is lowered (Cranelift fills one block at a time).
pub(super) struct WaysOut {
    /// The exit of each (frame state, kind): writes the frame and hands it over.
    pub(super) exits: HashMap<(FrameStateId, ExitKind), Block>,
    /// The scope each exit's frame state is in (where its code is placed).
    pub(super) exit_scopes: HashMap<FrameStateId, ScopeId>,
    /// The plans of the exits filled so far, numbered in the order they were filled (the
    /// number each passes the rebuild).
    pub(super) plans: Vec<tally_vm::jit::ExitPlan>,
    /// The address of the version's `SafepointTable`, which holds the plans once compiled.
    pub(super) table: usize,
    /// Where a call that answered `Value::NONE` leaves.
    pub(super) leave: Option<Block>,
    /// The end every exit shares once it has written its frame: hands the frame over with
    /// the status (its parameter).
    pub(super) hand_over: Option<Block>,
    /// Where the returns go (`fill_ret`), and the bytecode index of the first.
    pub(super) ret: Option<(Block, u32)>,
    /// The one block that returns from the function (`Lowerer::return_`): the entry's call
    /// through the stub is the first to return.
    pub(super) epilogue: Block,
}

/// What the version records besides its code.
#[derive(Default)]
pub(super) struct Recorded {
    /// Safepoints numbered so far, and for each the activations inlined into the frame's
    /// that it is made from (innermost first, as `SafepointMap::inlined` keeps them).
    pub(super) safepoints: u32,
    pub(super) inlined_at: Vec<Vec<(u32, u32)>>,
    /// The sites the code speculates at.
    pub(super) speculated: BTreeSet<u32>,
    /// Cranelift instructions written, by what they lower (`CodeVolume`'s rows).
    pub(super) volume: BTreeMap<&'static str, u64>,
}

impl Lowerer<'_, '_> {
    /// How many Cranelift instructions the function holds so far.
    pub(super) fn instructions_so_far(&self) -> u64 {
        self.b.func.dfg.num_insts() as u64
    }

    /// Counts the instructions written since `before` as lowering `what`.
    pub(super) fn count_volume(&mut self, what: &'static str, before: u64) {
        let written = self.instructions_so_far().saturating_sub(before);
        *self.record.volume.entry(what).or_insert(0) += written;
    }

    pub(super) fn iconst(&mut self, ty: types::Type, v: i64) -> Value {
        self.b.ins().iconst(ty, v)
    }

    pub(super) fn add_imm(&mut self, x: Value, imm: i64) -> Value {
        numbers::add_imm(&mut self.b, x, imm)
    }

    pub(super) fn cmp_imm(&mut self, cc: IntCC, x: Value, imm: i64) -> Value {
        numbers::cmp_imm(&mut self.b, cc, x, imm)
    }

    pub(super) fn and_imm(&mut self, x: Value, imm: i64) -> Value {
        numbers::and_imm(&mut self.b, x, imm)
    }

    pub(super) fn ty_of(ty: Ty) -> types::Type {
        match ty {
            Ty::Word | Ty::Int => I64,
            Ty::Flag => I8,
            Ty::Float => types::F64,
        }
    }

    /// The Cranelift value of IR value `v`.
    pub(super) fn val(&self, v: ValueId) -> Result<Value, String> {
        self.map.values[v.index()].ok_or_else(|| format!("{v} is used before it is lowered"))
    }

    /// Defines IR value `v` as `x`; a SOM value that may be a reference goes into the stack
    /// maps of the calls it lives across.
    pub(super) fn define(&mut self, v: ValueId, x: Value) {
        // A constant immediate (nil, true, false, a small integer, a symbol) is no reference:
        // kept out of the stack maps, it is neither spilled nor reloaded.
        let immediate = self.ir.const_value(v).is_some_and(|c| !c.is_ref());
        if self.ir.ty(v) == Ty::Word && self.b.func.dfg.value_type(x) == I64 && !immediate {
            self.b.declare_value_needs_stack_map(x);
        }
        self.map.values[v.index()] = Some(x);
    }

    /// The send site of the current scope's instruction at `bci`, if it sends.
    pub(super) fn site_at(&self, bci: u32) -> Option<u32> {
        self.code().ops.get(bci as usize)?.site()
    }

    /// The code of the scope being lowered.
    pub(super) fn code(&self) -> &'static tally_vm::runtime::Code {
        self.map.scope_codes[self.map.scope.index()]
    }

    /// The code a frame state describes an activation of.
    pub(super) fn state_code(
        &self,
        state: FrameStateId,
    ) -> Result<&'static tally_vm::runtime::Code, String> {
        let id = self.ir.states[state.index()].code;
        self.map
            .scope_codes
            .iter()
            .copied()
            .find(|c| c.id == id)
            .ok_or_else(|| format!("{state} describes code {id}, of no scope"))
    }

    /// Places the next instructions on the current scope's bytecode `bci` (the pc map's
    /// location).
    pub(super) fn set_location(&mut self, bci: u32) {
        let loc = if bci >= crate::pc_map::SHARED_EXIT {
            bci
        } else {
            tally_vm::jit::pack_location(self.map.scope.0, bci)
        };
        self.b.set_srcloc(SourceLoc::new(loc));
    }
}
