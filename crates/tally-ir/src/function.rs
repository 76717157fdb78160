//! The IR's data: a function's blocks, instructions, values and frame states, each in an
//! arena indexed by a newtype id.

use tally_heap::Value;
use tally_vm::bytecode::CodeId;
use tally_vm::runtime::IntOp as SiteOp;

use crate::InstKind;

macro_rules! id {
    ($(#[$doc:meta])* $name:ident, $prefix:literal) => {
        $(#[$doc])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub struct $name(pub u32);

        impl $name {
            pub fn index(self) -> usize {
                self.0 as usize
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                write!(f, concat!($prefix, "{}"), self.0)
            }
        }
    };
}

id!(
    /// An SSA value: a block parameter or an instruction's result.
    ValueId,
    "v"
);
id!(
    /// A basic block; `BlockId(0)` is the entry.
    BlockId,
    "block"
);
id!(
    /// An instruction in the function's arena (its block lists it).
    InstId,
    "i"
);
id!(
    /// A frame state in the function's arena.
    FrameStateId,
    "fs"
);
id!(
    /// An activation the function runs: `ScopeId(0)` is the compiled code's own, the others
    /// are methods inlined into it (no frame of their own).
    ScopeId,
    "s"
);

/// What a value is known to be.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ty {
    /// Any SOM value: a tagged word (an immediate or a reference the collector may move).
    Word,
    /// A SOM value known to be a small integer (still tagged: no reference).
    Int,
    /// A machine truth value (a comparison's), not a SOM value.
    Flag,
    /// A double in a machine register, not a SOM value: made from a Double or a small
    /// integer, boxed again (an immediate or a heap Double) where a SOM value is needed; a
    /// frame state may hold one, which its exit boxes.
    Float,
}

impl Ty {
    pub fn name(self) -> &'static str {
        match self {
            Ty::Word => "word",
            Ty::Int => "int",
            Ty::Flag => "flag",
            Ty::Float => "float",
        }
    }
}

/// Where a value comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ValueDef {
    Param { block: BlockId, index: u32 },
    Inst(InstId),
}

#[derive(Clone, Debug, PartialEq)]
pub struct ValueData {
    pub def: ValueDef,
    pub ty: Ty,
}

/// Small-integer arithmetic (the instruction deoptimizes where the VM's own answer would
/// take the general path: `IntOp::may_overflow`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IntOp {
    Add,
    Sub,
    Mul,
    BitAnd,
    /// `/`, truncated.
    Div,
    /// `%`, floored.
    Mod,
    /// `rem:`, truncated.
    Rem,
    BitXor,
    /// `<<`.
    Shl,
    /// `>>>` of a non-negative receiver.
    Shr,
}

impl IntOp {
    pub fn name(self) -> &'static str {
        match self {
            IntOp::Add => "int_add",
            IntOp::Sub => "int_sub",
            IntOp::Mul => "int_mul",
            IntOp::BitAnd => "int_and",
            IntOp::Div => "int_div",
            IntOp::Mod => "int_mod",
            IntOp::Rem => "int_rem",
            IntOp::BitXor => "int_xor",
            IntOp::Shl => "int_shl",
            IntOp::Shr => "int_shr",
        }
    }

    /// The send-site operation it does (`tally_vm::runtime::IntOp`), whose `apply` is the one
    /// definition of its result.
    pub fn site_op(self) -> SiteOp {
        match self {
            IntOp::Add => SiteOp::Add,
            IntOp::Sub => SiteOp::Sub,
            IntOp::Mul => SiteOp::Mul,
            IntOp::BitAnd => SiteOp::BitAnd,
            IntOp::Div => SiteOp::Div,
            IntOp::Mod => SiteOp::Mod,
            IntOp::Rem => SiteOp::Rem,
            IntOp::BitXor => SiteOp::BitXor,
            IntOp::Shl => SiteOp::ShiftLeft,
            IntOp::Shr => SiteOp::ShiftRight,
        }
    }

    pub(crate) const ALL: [IntOp; 10] = [
        IntOp::Add,
        IntOp::Sub,
        IntOp::Mul,
        IntOp::BitAnd,
        IntOp::Div,
        IntOp::Mod,
        IntOp::Rem,
        IntOp::BitXor,
        IntOp::Shl,
        IntOp::Shr,
    ];

    /// The operation a send site's operation is, if it is arithmetic (`site_op`'s inverse).
    pub fn of_site(op: SiteOp) -> Option<IntOp> {
        IntOp::ALL.into_iter().find(|o| o.site_op() == op)
    }

    /// The result, `None` where the VM takes the general path (it leaves the small integers,
    /// a zero divisor, a shift out of range).
    pub fn apply(self, a: i64, b: i64) -> Option<i64> {
        self.site_op().apply(a, b)?.as_int()
    }

    /// Whether the operation may take the general path (the instruction then needs a state).
    pub fn may_overflow(self) -> bool {
        !matches!(self, IntOp::BitAnd | IntOp::BitXor)
    }

    /// Whether its general path may raise an error (a zero divisor, a negative or too large
    /// shift): then it is done even when its result is unused.
    pub fn may_raise(self) -> bool {
        matches!(
            self,
            IntOp::Div | IntOp::Mod | IntOp::Rem | IntOp::Shl | IntOp::Shr
        )
    }
}

/// Arithmetic on doubles (IEEE, as Double's primitives do it: `//` by zero is an infinity
/// or NaN, no error).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FloatOp {
    Add,
    Sub,
    Mul,
    Div,
}

impl FloatOp {
    pub(crate) const ALL: [FloatOp; 4] = [FloatOp::Add, FloatOp::Sub, FloatOp::Mul, FloatOp::Div];

    pub fn name(self) -> &'static str {
        match self {
            FloatOp::Add => "float_add",
            FloatOp::Sub => "float_sub",
            FloatOp::Mul => "float_mul",
            FloatOp::Div => "float_div",
        }
    }

    /// The operation a send site's operation is, if Double has it.
    pub fn of_site(op: SiteOp) -> Option<FloatOp> {
        match op {
            SiteOp::Add => Some(FloatOp::Add),
            SiteOp::Sub => Some(FloatOp::Sub),
            SiteOp::Mul => Some(FloatOp::Mul),
            SiteOp::FloatDiv => Some(FloatOp::Div),
            _ => None,
        }
    }

    pub fn apply(self, a: f64, b: f64) -> f64 {
        match self {
            FloatOp::Add => a + b,
            FloatOp::Sub => a - b,
            FloatOp::Mul => a * b,
            FloatOp::Div => a / b,
        }
    }
}

/// A comparison of small integers, or of doubles ([`crate::InstKind::FloatCompare`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IntCmp {
    Less,
    Greater,
    LessEq,
    GreaterEq,
    Equal,
    NotEqual,
}

impl IntCmp {
    pub(crate) const ALL: [IntCmp; 6] = [
        IntCmp::Less,
        IntCmp::Greater,
        IntCmp::LessEq,
        IntCmp::GreaterEq,
        IntCmp::Equal,
        IntCmp::NotEqual,
    ];

    pub fn name(self) -> &'static str {
        match self {
            IntCmp::Less => "lt",
            IntCmp::Greater => "gt",
            IntCmp::LessEq => "le",
            IntCmp::GreaterEq => "ge",
            IntCmp::Equal => "eq",
            IntCmp::NotEqual => "ne",
        }
    }

    /// The comparison of two doubles as the core libraries answer it: `<` and `=` are
    /// primitives (false when either is NaN); `<=` is `<` or `=`; `>` is not (`<` or `=`),
    /// `>=` not `<`, `~=` not `=` (all three true when either is NaN).
    pub fn apply_float(self, a: f64, b: f64) -> bool {
        use std::cmp::Ordering::{Equal, Less};
        match self {
            IntCmp::Less => a < b,
            IntCmp::LessEq => a <= b,
            IntCmp::Greater => !matches!(a.partial_cmp(&b), Some(Less | Equal)),
            IntCmp::GreaterEq => a.partial_cmp(&b) != Some(Less),
            IntCmp::Equal => a == b,
            IntCmp::NotEqual => a != b,
        }
    }

    pub fn apply(self, a: i64, b: i64) -> bool {
        match self {
            IntCmp::Less => a < b,
            IntCmp::Greater => a > b,
            IntCmp::LessEq => a <= b,
            IntCmp::GreaterEq => a >= b,
            IntCmp::Equal => a == b,
            IntCmp::NotEqual => a != b,
        }
    }
}

/// One instruction: what it does, the value it defines, its frame state, and the bytecode
/// index it comes from (for the pc map).
#[derive(Clone, Debug, PartialEq)]
pub struct Inst {
    pub kind: InstKind,
    pub result: Option<ValueId>,
    pub state: Option<FrameStateId>,
    pub bci: u32,
}

/// A control-flow edge with the values for the target's parameters.
#[derive(Clone, Debug, PartialEq)]
pub struct Edge {
    pub block: BlockId,
    pub args: Vec<ValueId>,
}

/// How a block ends.
#[derive(Clone, Debug, PartialEq)]
pub enum Terminator {
    Jump(Edge),
    /// On a [`Ty::Flag`].
    Branch {
        cond: ValueId,
        then: Edge,
        otherwise: Edge,
    },
    Return(ValueId),
    /// `^` in a block: returns from the home method, which the interpreter finds (the
    /// activation is handed to it in this state).
    ReturnNonLocal {
        value: ValueId,
        state: FrameStateId,
    },
    /// Hands the activation to the interpreter in this state (what the tier does not compile).
    Deopt(FrameStateId),
    /// The first block of a version with on-stack-replacement entries: a new activation
    /// goes to `normal`; an interpreted frame the dispatcher hands over at a loop head goes
    /// to that head's entry, which reads the frame's values.
    Enter {
        normal: Edge,
        osr: Vec<OsrEntry>,
    },
    /// Not reached (a block under construction, or whose predecessors are gone).
    Unreachable,
}

/// Where an interpreted frame stopped at loop head `bci` enters compiled code.
#[derive(Clone, Debug, PartialEq)]
pub struct OsrEntry {
    pub bci: u32,
    pub edge: Edge,
    /// The operand stack's height at the loop head (what the frame holds above its locals).
    pub height: u32,
}

impl Terminator {
    pub fn edges(&self) -> Vec<&Edge> {
        match self {
            Terminator::Jump(e) => vec![e],
            Terminator::Branch {
                then, otherwise, ..
            } => vec![then, otherwise],
            Terminator::Enter { normal, osr } => std::iter::once(normal)
                .chain(osr.iter().map(|o| &o.edge))
                .collect(),
            _ => vec![],
        }
    }

    pub fn edges_mut(&mut self) -> Vec<&mut Edge> {
        match self {
            Terminator::Jump(e) => vec![e],
            Terminator::Branch {
                then, otherwise, ..
            } => vec![then, otherwise],
            Terminator::Enter { normal, osr } => std::iter::once(normal)
                .chain(osr.iter_mut().map(|o| &mut o.edge))
                .collect(),
            _ => vec![],
        }
    }

    pub fn successors(&self) -> Vec<BlockId> {
        self.edges().into_iter().map(|e| e.block).collect()
    }

    /// The values it reads (edge arguments included).
    pub fn operands(&self) -> Vec<ValueId> {
        let mut out = match self {
            Terminator::Branch { cond, .. } => vec![*cond],
            Terminator::Return(v) | Terminator::ReturnNonLocal { value: v, .. } => vec![*v],
            _ => vec![],
        };
        for e in self.edges() {
            out.extend(e.args.iter().copied());
        }
        out
    }

    pub fn map_operands(&mut self, mut f: impl FnMut(ValueId) -> ValueId) {
        match self {
            Terminator::Branch { cond, .. } => *cond = f(*cond),
            Terminator::Return(v) | Terminator::ReturnNonLocal { value: v, .. } => *v = f(*v),
            _ => {}
        }
        for e in self.edges_mut() {
            e.args.iter_mut().for_each(|a| *a = f(*a));
        }
    }

    pub fn state(&self) -> Option<FrameStateId> {
        match self {
            Terminator::ReturnNonLocal { state, .. } | Terminator::Deopt(state) => Some(*state),
            _ => None,
        }
    }
}

/// One activation the function runs: the compiled code's own (scope 0), or a method inlined
/// at a call of its parent's.
#[derive(Clone, Debug, PartialEq)]
pub struct Scope {
    pub code: CodeId,
    /// The scope it was inlined into and the bytecode index of that call there.
    pub parent: Option<(ScopeId, u32)>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Block {
    /// The activation whose code its instructions come from.
    pub scope: ScopeId,
    pub params: Vec<ValueId>,
    pub insts: Vec<InstId>,
    pub term: Terminator,
    /// The bytecode index it starts at (blocks a send's class switch adds have their send's).
    pub bci: u32,
}

/// Where the interpreter resumes an activation a frame state describes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Resume {
    /// At `bci`, with `stack` as it was before that instruction: the instruction runs again
    /// (a guard's state: nothing the instruction changes has happened yet).
    Before,
    /// Suspended in the call made by the instruction at `bci`: `stack` holds what is below
    /// the call's receiver and arguments; the call's result is pushed on it and the
    /// interpreter goes on at `bci + 1`.
    AfterCall,
}

/// What the interpreter's frame of an activation holds at one point of compiled code.
#[derive(Clone, Debug, PartialEq)]
pub struct FrameState {
    pub code: CodeId,
    pub bci: u32,
    pub resume: Resume,
    /// The receiver, arguments and stack locals, in slot order; `None` where the bytecode
    /// reads the slot no more from here on (the frame gets nil).
    pub locals: Vec<Option<ValueId>>,
    /// The operand stack above the locals.
    pub stack: Vec<ValueId>,
    /// The activation's context (its own, or a block's closure's), if it has one.
    pub context: Option<ValueId>,
    /// The closure a block activation runs, if it is one.
    pub closure: Option<ValueId>,
    /// The caller this activation was inlined into, suspended in the call.
    pub outer: Option<FrameStateId>,
    /// What the slots of each virtual context ([`InstKind::VirtualContext`]) hold here: an
    /// exit at this state makes every one its chain refers to with these values (the
    /// innermost state's, as the outer states' were taken before the inlined calls ran).
    pub virtuals: Vec<(ValueId, Vec<ValueId>)>,
}

impl FrameState {
    /// Every value it holds, its outer states' not included.
    pub fn values(&self) -> impl Iterator<Item = ValueId> + '_ {
        self.locals
            .iter()
            .flatten()
            .chain(self.stack.iter())
            .chain(self.context.iter())
            .chain(self.closure.iter())
            .chain(
                self.virtuals
                    .iter()
                    .flat_map(|(c, slots)| std::iter::once(c).chain(slots)),
            )
            .copied()
    }

    pub fn map_values(&mut self, mut f: impl FnMut(ValueId) -> ValueId) {
        for l in self.locals.iter_mut().flatten() {
            *l = f(*l);
        }
        for s in &mut self.stack {
            *s = f(*s);
        }
        if let Some(c) = &mut self.context {
            *c = f(*c);
        }
        if let Some(c) = &mut self.closure {
            *c = f(*c);
        }
        for (c, slots) in &mut self.virtuals {
            *c = f(*c);
            slots.iter_mut().for_each(|v| *v = f(*v));
        }
    }
}

/// One method or block in SSA form.
#[derive(Clone, Debug, PartialEq)]
pub struct Function {
    pub code: CodeId,
    /// `Class>>selector` (or `[] in Class>>selector`).
    pub name: String,
    pub blocks: Vec<Block>,
    pub insts: Vec<Inst>,
    pub values: Vec<ValueData>,
    pub states: Vec<FrameState>,
    /// Scope 0 is `code`'s; the rest are inlined, each after its parent.
    pub scopes: Vec<Scope>,
}

impl Function {
    pub fn new(code: CodeId, name: String) -> Function {
        Function {
            code,
            name,
            blocks: Vec::new(),
            insts: Vec::new(),
            values: Vec::new(),
            states: Vec::new(),
            scopes: vec![Scope { code, parent: None }],
        }
    }

    /// The scopes from `scope` out to the compiled code's own, each with the bytecode index
    /// it is at: `bci` for `scope`, the inlined call for each outer one.
    pub fn scope_chain(&self, scope: ScopeId, bci: u32) -> Vec<(ScopeId, u32)> {
        let mut out = vec![(scope, bci)];
        let mut s = scope;
        while let Some((parent, at)) = self.scopes[s.index()].parent {
            out.push((parent, at));
            s = parent;
        }
        out
    }

    pub fn add_scope(&mut self, code: CodeId, parent: ScopeId, bci: u32) -> ScopeId {
        self.scopes.push(Scope {
            code,
            parent: Some((parent, bci)),
        });
        ScopeId(self.scopes.len() as u32 - 1)
    }

    pub fn entry(&self) -> BlockId {
        BlockId(0)
    }

    /// The loop heads an interpreted frame may enter this version at.
    pub fn osr_entries(&self) -> &[OsrEntry] {
        match &self.blocks.first().map(|b| &b.term) {
            Some(Terminator::Enter { osr, .. }) => osr,
            _ => &[],
        }
    }

    pub fn add_block(&mut self, scope: ScopeId, bci: u32) -> BlockId {
        self.blocks.push(Block {
            scope,
            params: Vec::new(),
            insts: Vec::new(),
            term: Terminator::Unreachable,
            bci,
        });
        BlockId(self.blocks.len() as u32 - 1)
    }

    pub fn add_param(&mut self, block: BlockId, ty: Ty) -> ValueId {
        let index = self.blocks[block.index()].params.len() as u32;
        let v = self.new_value(ValueDef::Param { block, index }, ty);
        self.blocks[block.index()].params.push(v);
        v
    }

    fn new_value(&mut self, def: ValueDef, ty: Ty) -> ValueId {
        self.values.push(ValueData { def, ty });
        ValueId(self.values.len() as u32 - 1)
    }

    /// Appends an instruction to `block`; answers its result, of the type its declaration
    /// gives ([`crate::InstProps::result`]).
    pub fn push_inst(
        &mut self,
        block: BlockId,
        kind: InstKind,
        state: Option<FrameStateId>,
        bci: u32,
    ) -> Option<ValueId> {
        let id = InstId(self.insts.len() as u32);
        let result = kind
            .props()
            .result
            .map(|t| self.new_value(ValueDef::Inst(id), t));
        self.insts.push(Inst {
            kind,
            result,
            state,
            bci,
        });
        self.blocks[block.index()].insts.push(id);
        result
    }

    /// Every value state `s` and the states it is inlined into hold.
    pub fn chain_values(&self, s: FrameStateId) -> Vec<ValueId> {
        let mut out = Vec::new();
        let mut next = Some(s);
        while let Some(k) = next {
            let state = &self.states[k.index()];
            out.extend(state.values());
            next = state.outer;
        }
        out
    }

    pub fn add_state(&mut self, state: FrameState) -> FrameStateId {
        self.states.push(state);
        FrameStateId(self.states.len() as u32 - 1)
    }

    pub fn ty(&self, v: ValueId) -> Ty {
        self.values[v.index()].ty
    }

    pub fn def(&self, v: ValueId) -> ValueDef {
        self.values[v.index()].def
    }

    /// The instruction that defines `v`, if an instruction does.
    pub fn def_inst(&self, v: ValueId) -> Option<&Inst> {
        match self.def(v) {
            ValueDef::Inst(i) => Some(&self.insts[i.index()]),
            ValueDef::Param { .. } => None,
        }
    }

    /// The constant `v` is, if it is one.
    pub fn const_value(&self, v: ValueId) -> Option<Value> {
        match self.def_inst(v)?.kind {
            InstKind::Const(c) => Some(c),
            _ => None,
        }
    }

    /// The small integer `v` is, if it is a constant one.
    pub fn const_int(&self, v: ValueId) -> Option<i64> {
        self.const_value(v)?.as_int()
    }

    pub fn const_flag(&self, v: ValueId) -> Option<bool> {
        match self.def_inst(v)?.kind {
            InstKind::FlagConst(b) => Some(b),
            _ => None,
        }
    }

    /// The blocks each block's edges come from.
    pub fn predecessors(&self) -> Vec<Vec<BlockId>> {
        let mut preds = vec![Vec::new(); self.blocks.len()];
        for (b, block) in self.blocks.iter().enumerate() {
            for s in block.term.successors() {
                preds[s.index()].push(BlockId(b as u32));
            }
        }
        preds
    }

    /// Replaces every use of each key of `map` by its value, followed through the map (a
    /// value replaced by one that is itself replaced ends at the last; a cycle stops after
    /// as many steps as the map has entries).
    pub fn replace_through(&mut self, map: &std::collections::HashMap<ValueId, ValueId>) {
        self.replace_uses(|mut v| {
            for _ in 0..=map.len() {
                match map.get(&v) {
                    Some(&r) => v = r,
                    None => break,
                }
            }
            v
        });
    }

    /// Replaces every use of a value (instructions, terminators, frame states) through `f`.
    pub fn replace_uses(&mut self, f: impl Fn(ValueId) -> ValueId) {
        for inst in &mut self.insts {
            inst.kind.map_operands(&f);
        }
        for block in &mut self.blocks {
            block.term.map_operands(&f);
        }
        for state in &mut self.states {
            state.map_values(&f);
        }
    }
}
