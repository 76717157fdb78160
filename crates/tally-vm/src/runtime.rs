//! The VM's state outside the heap: classes, code, symbols, globals, the value stack and frames.
//!
//! Every heap reference the VM holds lives in one of the tables here, and `visit_roots` reaches
//! all of them: that is what lets the collector move objects. Rust locals holding a `Value`
//! become stale at the next allocation; code re-reads them from these tables instead.

use std::collections::HashMap;
use std::rc::Rc;

use tally_heap::{RootSet, Value};
use tally_syntax::Source;

use crate::bytecode::{CodeId, Op, SiteId};
use crate::compiler::{CodeKind, CompiledCode};
pub use crate::frames::{Frame, FrameStack};
use crate::objects::{CoreClasses, Kind};
use crate::primitives::Primitive;
pub use crate::value_stack::ValueStack;
use crate::VmOptions;

pub type ClassId = u32;
pub type Symbol = u32;

/// Interned strings: selectors, class names, symbol literals.
#[derive(Default)]
pub struct Symbols {
    names: Vec<Rc<str>>,
    index: HashMap<Rc<str>, Symbol>,
}

impl Symbols {
    pub fn intern(&mut self, name: &str) -> Symbol {
        if let Some(&s) = self.index.get(name) {
            return s;
        }
        let id = self.names.len() as Symbol;
        let rc: Rc<str> = Rc::from(name);
        self.names.push(rc.clone());
        self.index.insert(rc, id);
        id
    }

    pub fn lookup(&self, name: &str) -> Option<Symbol> {
        self.index.get(name).copied()
    }

    pub fn name(&self, s: Symbol) -> &str {
        &self.names[s as usize]
    }

    pub fn name_rc(&self, s: Symbol) -> Rc<str> {
        self.names[s as usize].clone()
    }
}

pub struct ClassInfo {
    pub name: Symbol,
    pub superclass: Option<ClassId>,
    /// For a class, its metaclass; for a metaclass, its sole instance.
    pub partner: ClassId,
    pub is_meta: bool,
    /// The heap object that stands for this class in SOM.
    pub object: Value,
    /// Names of all instance fields, inherited first.
    pub fields: Vec<String>,
    /// How many of `fields` this class declares itself (the rest are inherited).
    pub own_fields: usize,
    pub methods: HashMap<Symbol, CodeId>,
    /// Selectors in definition order, for `Class>>methods`.
    pub method_order: Vec<Symbol>,
    /// The shape of instances made by `new`.
    pub instance_kind: Kind,
    /// Whether only the VM makes instances (integers, doubles, symbols, blocks, methods,
    /// classes, booleans, nil, and subclasses of those): their primitives rely on a layout
    /// `new` cannot give, so `new` and `new:` refuse these classes.
    pub special_layout: bool,
    /// The Array answered by `Class>>methods`, made on first use (nil until then).
    pub methods_array: Value,
}

/// Methods so simple that a send can do their work without a frame.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Trivial {
    No,
    /// `^field`
    Getter(u16),
    /// `field := argument` (answers the receiver)
    Setter(u16),
    /// `^constant`
    Constant(Value),
    /// `^literal`
    Literal(u32),
    /// An empty method: answers the receiver.
    Receiver,
}

impl Trivial {
    fn recognize(kind: CodeKind, ops: &[Op]) -> Trivial {
        if kind != CodeKind::Method {
            return Trivial::No;
        }
        match *ops {
            [Op::PushField(i), Op::Return] | [Op::ReturnField(i)] => Trivial::Getter(i),
            [Op::PushLocal(1), Op::PopField(i), Op::ReturnSelf] => Trivial::Setter(i),
            [Op::PushConst(v), Op::Return] => Trivial::Constant(v),
            [Op::PushLiteral(i), Op::Return] => Trivial::Literal(i),
            [Op::ReturnSelf] => Trivial::Receiver,
            _ => Trivial::No,
        }
    }
}

/// A method or block, ready to run.
pub struct Code {
    /// This code's index in `Runtime::codes`; profiles name methods by it.
    pub id: CodeId,
    /// Set when the method's whole effect can be done at the send.
    pub trivial: Trivial,
    pub kind: CodeKind,
    pub selector: Symbol,
    pub holder: ClassId,
    pub ops: Vec<Op>,
    pub positions: Vec<(u32, u32)>,
    pub num_args: u16,
    pub num_locals: u16,
    pub context_size: u16,
    pub captured_args: Vec<(u16, u16)>,
    pub primitive: Option<Primitive>,
    pub source: u32,
    pub source_line: u32,
    /// Bytecode that is neither a primitive nor trivial (see `is_plain_frame`).
    pub plain_frame: bool,
    /// The most values this code's frame holds on the value stack (receiver, arguments,
    /// locals and operands; `bytecode::stack_heights`).
    pub max_height: u32,
    /// The free value-stack slots a frame needs once its receiver and arguments are pushed:
    /// checked on entry, so compiled code and the interpreter push without checks.
    pub room_above_arguments: u32,
    /// Compiled code for this method or block, or whether to compile it at its next call.
    pub compiled: crate::jit::CompiledSlot,
    /// The optimizing tier's direct entry of the installed version (0: none), which native code
    /// calls with the receiver and arguments in registers.
    pub direct: std::sync::atomic::AtomicUsize,
    /// The installed version can take an interpreted frame over at a loop head (entries for
    /// on-stack replacement): a frame it declined elsewhere tries again at its next back-edge.
    pub loop_entries: std::sync::atomic::AtomicBool,
    /// What compiled code may do in place of calling this code when an inline cache names
    /// it at run time (a `jit::Intrinsic`, set as the code is added: the core library's
    /// primitives in `jit::intrinsics`' table).
    pub intrinsic: std::sync::atomic::AtomicU8,
    /// Calls per tier while `--count-calls` is on (`crate::jit::TierCallCounter`).
    pub calls: crate::jit::TierCallCounter,
    /// `trivial` as two plain words, for compiled code that does trivial methods inline:
    /// the kind (`TRIVIAL_*`) and its field index or constant's bits.
    pub trivial_kind: u8,
    pub trivial_operand: u64,
    /// Whether this method's entry and exit call the VM's method hooks (`HOOK_AT_ENTRY`,
    /// `HOOK_AT_EXIT`, for GC hints and method-level phases), and whether it must keep its
    /// frame (`HOOK_KEEPS_FRAME`: never inlined): set before the program runs or when its
    /// class loads (`Vm::resolve_method_hooks`), and read by the interpreter at every frame
    /// it sets up and pops, and by the code generator.
    pub hooks: std::sync::atomic::AtomicU8,
}

/// `Code::hooks` bits.
pub const HOOK_AT_ENTRY: u8 = 1;
pub const HOOK_AT_EXIT: u8 = 2;
/// The method's hooks must run wherever it is called: compiled code does not inline it.
pub const HOOK_KEEPS_FRAME: u8 = 4;

/// `Code::trivial_kind` values.
pub const TRIVIAL_NONE: u8 = 0;
pub const TRIVIAL_GETTER: u8 = 1;
pub const TRIVIAL_SETTER: u8 = 2;
pub const TRIVIAL_CONSTANT: u8 = 3;
pub const TRIVIAL_RECEIVER: u8 = 4;

impl Trivial {
    /// The (kind, operand) pair compiled code reads; literals stay with the interpreter.
    fn encoded(self) -> (u8, u64) {
        match self {
            Trivial::Getter(i) => (TRIVIAL_GETTER, i as u64),
            Trivial::Setter(i) => (TRIVIAL_SETTER, i as u64),
            Trivial::Constant(v) => (TRIVIAL_CONSTANT, v.0),
            Trivial::Receiver => (TRIVIAL_RECEIVER, 0),
            Trivial::No | Trivial::Literal(_) => (TRIVIAL_NONE, 0),
        }
    }
}

impl Code {
    /// Whether a call with `argc` arguments just pushes a frame: bytecode, not a primitive,
    /// not done in place, arity right (everything else takes `Vm::invoke`'s general path).
    #[inline(always)]
    pub fn is_plain_frame(&self, argc: usize) -> bool {
        self.plain_frame && argc == self.num_args as usize
    }

    /// `max_height` is the frame's greatest stack height (`bytecode::stack_heights`).
    pub fn from_compiled(id: CodeId, c: CompiledCode, max_height: usize) -> Code {
        let trivial = Trivial::recognize(c.kind, &c.ops);
        let room =
            (max_height + crate::value_stack::HEADROOM).saturating_sub(1 + c.num_args as usize);
        let (trivial_kind, trivial_operand) = trivial.encoded();
        Code {
            trivial_kind,
            trivial_operand,
            hooks: Default::default(),
            compiled: Default::default(),
            direct: Default::default(),
            loop_entries: Default::default(),
            intrinsic: Default::default(),
            calls: Default::default(),
            max_height: max_height as u32,
            room_above_arguments: room as u32,
            id,
            plain_frame: trivial == Trivial::No && !c.ops.is_empty(),
            trivial,
            kind: c.kind,
            selector: c.selector,
            holder: c.holder,
            ops: c.ops,
            positions: c.positions,
            num_args: c.num_args,
            num_locals: c.num_locals,
            context_size: c.context_size,
            captured_args: c.captured_args,
            primitive: None,
            source: c.source,
            source_line: c.source_line,
        }
    }
}

/// Binary selectors the interpreter answers directly when both operands are small integers:
/// the result is what Integer's methods would compute, without a lookup or a frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IntOp {
    None,
    Add,
    Sub,
    Mul,
    Less,
    Greater,
    LessEq,
    GreaterEq,
    Equal,
    NotEqual,
    BitAnd,
    /// `//`: the quotient as a Double (of two integers too); a zero divisor takes the
    /// general path, which reports it (Integer's) or answers infinity (Double's).
    FloatDiv,
    /// `&&`: only Booleans are answered in place (the argument is not a block here; a literal
    /// block argument is inlined by the compiler).
    And,
    /// `||`, likewise.
    Or,
    /// `/`: the quotient truncated toward zero.
    Div,
    /// `%`: the remainder with the divisor's sign (floored).
    Mod,
    /// `rem:`: the remainder with the receiver's sign (truncated).
    Rem,
    /// `bitXor:`.
    BitXor,
    /// `<<`.
    ShiftLeft,
    /// `>>>`: the receiver's 64-bit pattern shifted right, zeros coming in.
    ShiftRight,
}

impl IntOp {
    /// Whether compiled code may compute it on doubles for operands like `kinds`: the
    /// arithmetic and comparisons Double answers, with an Integer receiver only where
    /// Integer's primitive answers as Double's does (not `=` and `~=`, where Integer decides
    /// equality itself, nor `//`, where Integer reports a zero divisor).
    pub fn has_double_form(self, kinds: crate::operands::DoubleOperands) -> bool {
        match self {
            IntOp::Add | IntOp::Sub | IntOp::Mul => true,
            IntOp::Less | IntOp::Greater | IntOp::LessEq | IntOp::GreaterEq => true,
            IntOp::Equal | IntOp::NotEqual | IntOp::FloatDiv => !kinds.receiver_may_be_int,
            _ => false,
        }
    }

    pub fn for_selector(name: &str) -> IntOp {
        match name {
            "+" => IntOp::Add,
            "-" => IntOp::Sub,
            "*" => IntOp::Mul,
            "<" => IntOp::Less,
            ">" => IntOp::Greater,
            "<=" => IntOp::LessEq,
            ">=" => IntOp::GreaterEq,
            "=" => IntOp::Equal,
            "~=" | "<>" => IntOp::NotEqual,
            "&" => IntOp::BitAnd,
            "//" => IntOp::FloatDiv,
            "&&" => IntOp::And,
            "||" => IntOp::Or,
            "/" => IntOp::Div,
            "%" => IntOp::Mod,
            "rem:" => IntOp::Rem,
            "bitXor:" => IntOp::BitXor,
            "<<" => IntOp::ShiftLeft,
            ">>>" => IntOp::ShiftRight,
            _ => IntOp::None,
        }
    }

    /// Whether the result is a Boolean (what a conditional jump may test directly).
    pub fn is_comparison(self) -> bool {
        matches!(
            self,
            IntOp::Less
                | IntOp::Greater
                | IntOp::LessEq
                | IntOp::GreaterEq
                | IntOp::Equal
                | IntOp::NotEqual
                | IntOp::And
                | IntOp::Or
        )
    }

    /// The result for two Booleans (`&&`, `||`, `=`, `~=`: what the core libraries answer for
    /// them; neither defines `&` or `|` on Booleans), or None.
    #[inline(always)]
    pub fn apply_bool(self, a: Value, b: Value) -> Option<Value> {
        let is_bool = |v: Value| v == Value::TRUE || v == Value::FALSE;
        if !is_bool(a) || !is_bool(b) {
            return None;
        }
        let (x, y) = (a == Value::TRUE, b == Value::TRUE);
        Some(Value::from_bool(match self {
            IntOp::And => x && y,
            IntOp::Or => x || y,
            IntOp::Equal => x == y,
            IntOp::NotEqual => x != y,
            _ => return None,
        }))
    }

    /// The answer for any two operands when it needs no send: small integers (`apply`), an
    /// immediate double with a double or integer (`apply_float`), two symbols
    /// (`apply_symbols`), or Booleans (`apply_bool`).
    /// The one definition the interpreter and the compiled tiers' stub share.
    #[inline(always)]
    pub fn answer(self, a: Value, b: Value) -> Option<Value> {
        if a.is_int() && b.is_int() {
            self.apply(a.int_unchecked(), b.int_unchecked())
        } else if a.is_small_float() || b.is_small_float() {
            self.apply_float(a, b)
        } else if a.as_symbol().is_some() && b.as_symbol().is_some() {
            self.apply_symbols(a, b)
        } else {
            self.apply_bool(a, b)
        }
    }

    /// `=` and `~=` of two symbols: symbols are interned, so equal text is the same symbol
    /// and String's `=` (which Symbol inherits) answers identity.
    #[inline(always)]
    pub fn apply_symbols(self, a: Value, b: Value) -> Option<Value> {
        match self {
            IntOp::Equal => Some(Value::from_bool(a == b)),
            IntOp::NotEqual => Some(Value::from_bool(a != b)),
            _ => None,
        }
    }

    /// The result for two small integers, or None when it must take the general path
    /// (overflow into a big integer, a zero divisor, a shift the primitive refuses or whose
    /// result is no small integer).
    #[inline(always)]
    pub fn apply(self, a: i64, b: i64) -> Option<Value> {
        Some(match self {
            IntOp::Add => return a.checked_add(b).and_then(Value::from_int),
            IntOp::Sub => return a.checked_sub(b).and_then(Value::from_int),
            IntOp::Mul => return a.checked_mul(b).and_then(Value::from_int),
            IntOp::Less => Value::from_bool(a < b),
            IntOp::Greater => Value::from_bool(a > b),
            IntOp::LessEq => Value::from_bool(a <= b),
            IntOp::GreaterEq => Value::from_bool(a >= b),
            IntOp::Equal => Value::from_bool(a == b),
            IntOp::NotEqual => Value::from_bool(a != b),
            IntOp::BitAnd => Value::from_small_int(a & b),
            // As Integer's `//` primitive computes it for two small integers.
            IntOp::FloatDiv if b != 0 => return Value::from_small_float(a as f64 / b as f64),
            IntOp::Div => return a.checked_div(b).and_then(Value::from_int),
            IntOp::Mod => {
                let r = a.checked_rem(b)?;
                let floored = if r != 0 && (r < 0) != (b < 0) {
                    r + b
                } else {
                    r
                };
                Value::from_small_int(floored)
            }
            IntOp::Rem => Value::from_small_int(a.checked_rem(b)?),
            IntOp::BitXor => Value::from_small_int(a ^ b),
            IntOp::ShiftLeft if (0..63).contains(&b) && (a << b) >> b == a => {
                return Value::from_int(a << b)
            }
            // A negative receiver's pattern shifted right may need a big integer; a shift
            // beyond the word is left to the primitive, which refuses the largest.
            IntOp::ShiftRight if a >= 0 && (0..64).contains(&b) => Value::from_small_int(a >> b),
            IntOp::FloatDiv
            | IntOp::And
            | IntOp::Or
            | IntOp::None
            | IntOp::ShiftLeft
            | IntOp::ShiftRight => return None,
        })
    }

    /// The result for two operands of which at least one is an immediate double and the other
    /// an immediate double or small integer (converted as Double's primitives convert it), or
    /// None for the general path: a result that is not an immediate double, bit operations,
    /// and equality between an integer and a double (Integer's `=` decides that).
    #[inline(always)]
    pub fn apply_float(self, a: Value, b: Value) -> Option<Value> {
        let both_floats = a.is_small_float() && b.is_small_float();
        let x = a
            .as_small_float()
            .or_else(|| a.as_int().map(|i| i as f64))?;
        let y = b
            .as_small_float()
            .or_else(|| b.as_int().map(|i| i as f64))?;
        // Immediate doubles are never NaN, so the ordered comparisons agree with however
        // Double's library methods derive them from `<` and `=`.
        Some(match self {
            IntOp::Add => return Value::from_small_float(x + y),
            IntOp::Sub => return Value::from_small_float(x - y),
            IntOp::Mul => return Value::from_small_float(x * y),
            IntOp::FloatDiv if y != 0.0 => return Value::from_small_float(x / y),
            IntOp::Less => Value::from_bool(x < y),
            IntOp::Greater => Value::from_bool(x > y),
            IntOp::LessEq => Value::from_bool(x <= y),
            IntOp::GreaterEq => Value::from_bool(x >= y),
            IntOp::Equal if both_floats => Value::from_bool(x == y),
            IntOp::NotEqual if both_floats => Value::from_bool(x != y),
            _ => return None,
        })
    }
}

/// Whether `isNil` and `notNil` mean what the core library says (`Object` answers false and
/// true, `Nil` true and false, as constants) and nothing else redefines them: then a send of
/// either is answered by comparing the receiver with nil, without a lookup.
#[derive(Debug, Default, Clone, Copy)]
pub struct NilTests {
    /// One bit per standard definition seen: Object>>isNil, Object>>notNil, Nil>>isNil,
    /// Nil>>notNil.
    standard: u8,
    /// Some other class (or a metaclass) defines one of them, or defines it differently.
    redefined: bool,
}

impl NilTests {
    /// Where compiled code reads the two fields (`standard` must be `0b1111`, `redefined` 0).
    pub(crate) const STANDARD_OFFSET: usize = std::mem::offset_of!(NilTests, standard);
    pub(crate) const REDEFINED_OFFSET: usize = std::mem::offset_of!(NilTests, redefined);

    #[inline(always)]
    pub fn standard(self) -> bool {
        self.standard == 0b1111 && !self.redefined
    }

    /// Notes a method definition (every one passes here as classes load).
    pub fn observe(
        &mut self,
        symbols: &Symbols,
        core: &CoreClasses,
        class: ClassId,
        selector: Symbol,
        trivial: Trivial,
    ) {
        let is_nil = match symbols.name(selector) {
            "isNil" => true,
            "notNil" => false,
            _ => return,
        };
        let (bit, answer) = if class == core.object {
            (if is_nil { 0 } else { 1 }, !is_nil)
        } else if class == core.nil {
            (if is_nil { 2 } else { 3 }, is_nil)
        } else {
            self.redefined = true;
            return;
        };

        if trivial == Trivial::Constant(Value::from_bool(answer)) {
            self.standard |= 1 << bit;
        } else {
            self.redefined = true;
        }
    }
}

/// A send site: its selector, and a two-entry inline cache (class → code).
pub struct Site {
    pub selector: Symbol,
    pub int_op: IntOp,
    pub argc: u8,
    pub super_lookup: Option<ClassId>,
    pub cached_class: ClassId,
    pub cached_code: CodeId,
    /// The second entry of the polymorphic cache: a site that sees two receiver classes
    /// (nil or an object, a leaf or a node) still never looks up.
    pub cached_class2: ClassId,
    pub cached_code2: CodeId,
    /// Type feedback of a binary send: what its operands have been. The optimizing tier
    /// speculates on small integers at sites that saw nothing else, on doubles at sites
    /// that saw only doubles (with doubles or small integers).
    pub operands: crate::operands::OperandKinds,
    /// Times compiled code took a send stub at this site (for `--tier-log`'s summary of
    /// what compiled code could not do on its own).
    pub stub_sends: u64,
    /// The classes a site whose cache overflowed has seen (made at its third class): what
    /// the optimizing tier switches on at a polymorphic site, which the two-entry cache
    /// alone would hide.
    pub seen: Option<Box<SeenClasses>>,
}

/// The receiver classes a polymorphic send site has seen, with their targets and how often
/// each missed the inline cache (its two entries hold the most recent classes, so the miss
/// counts of a site that keeps cycling through its classes follow their frequencies), up
/// to [`MAX_SEEN_CLASSES`]; past that the site is megamorphic and the list is no longer
/// kept.
#[derive(Clone, Debug, Default)]
pub struct SeenClasses {
    entries: Vec<(ClassId, CodeId, u32)>,
    megamorphic: bool,
}

/// The most receiver classes a site's [`SeenClasses`] keeps: as many as a compiled class
/// switch tests before it sends.
pub const MAX_SEEN_CLASSES: usize = 4;

impl SeenClasses {
    /// Notes that receivers of `class` reach `code` at the site; `missed`: one of them just
    /// missed the cache (else the class is only being evicted from it).
    pub fn note(&mut self, class: ClassId, code: CodeId, missed: bool) {
        if self.megamorphic {
            return;
        }
        let add = u32::from(missed);
        if let Some(e) = self.entries.iter_mut().find(|e| e.0 == class) {
            e.1 = code;
            e.2 = e.2.saturating_add(add);
        } else if self.entries.len() < MAX_SEEN_CLASSES {
            self.entries.push((class, code, add));
        } else {
            self.megamorphic = true;
            self.entries = Vec::new();
        }
    }

    /// The classes seen with their targets, those that missed most first; none once the
    /// site saw more than [`MAX_SEEN_CLASSES`].
    pub fn by_frequency(&self) -> Vec<(ClassId, CodeId)> {
        let mut e = self.entries.clone();
        e.sort_by_key(|&(_, _, n)| std::cmp::Reverse(n));
        e.into_iter().map(|(c, code, _)| (c, code)).collect()
    }

    /// Whether the site saw more classes than are kept.
    pub fn megamorphic(&self) -> bool {
        self.megamorphic
    }
}

pub const NO_CLASS: ClassId = u32::MAX;

pub struct Runtime {
    pub stack: ValueStack,
    pub frames: Box<FrameStack>,
    pub symbols: Symbols,
    pub classes: Vec<ClassInfo>,
    pub core: CoreClasses,
    pub globals: Vec<Value>,
    pub global_names: Vec<Symbol>,
    pub global_slots: HashMap<Symbol, u32>,
    pub literals: Vec<Value>,
    /// Code is never freed or changed once made (one VM per process), so frames and the
    /// interpreter hold plain references.
    pub codes: Vec<&'static Code>,
    pub sites: Vec<Site>,
    pub sources: Vec<Rc<Source>>,
    /// Values a primitive must keep across an allocation.
    pub handles: Vec<Value>,
    /// Classes whose superclass chain is being loaded, outermost first: a superclass already
    /// on it closes a cycle, reported instead of recursing without end.
    pub loading: Vec<Symbol>,
    /// (class, selector) → method; cleared when methods change.
    pub lookup_cache: rustc_hash::FxHashMap<(ClassId, Symbol), Option<CodeId>>,
    /// Block classes by number of parameters (Block1 takes none).
    pub block_classes: Vec<ClassId>,
    /// Whether `isNil`/`notNil` sends may be answered without a lookup.
    pub nil_tests: NilTests,
    /// `--count-calls`: the interpreter counts each frame it sets up in `Code::calls`.
    pub count_calls: bool,
    /// The methods whose entries and exits call the method hooks (GC hints, phases), with
    /// their `Code::hooks` bits; `None` when nothing hooks methods.
    pub(crate) hooked_methods: Option<crate::method_hooks::HookedMethods>,
    /// Samples go into a profile: compiled code marks the frames it runs with its tier
    /// (`Frame::mark`), which only the profile's reports read.
    pub mark_frames: bool,
    /// The profiler counts calls (counter-based sampling, exhaustive counts): compiled code
    /// runs the prologue hook of the calls it does in place (`jit::Layout::call_hook_bits`).
    pub counts_calls_in_place: bool,
    /// The first entries of `sites` and `codes`, kept current as they grow (`add_site`,
    /// `add_code`), for compiled code, which probes inline caches and finds callees itself.
    pub(crate) sites_base: *const Site,
    pub(crate) codes_base: *const &'static Code,
    /// The first entries of `literals` and `globals`, kept current as they grow
    /// (`add_literal`, `global_slot`), for compiled code, which reads them where it uses
    /// them (the collector may move what they hold; a global may be assigned).
    pub(crate) literals_base: *const Value,
    pub(crate) globals_base: *const Value,
}

impl RootSet for Runtime {
    fn visit_roots(&mut self, visit: &mut dyn FnMut(&mut Value)) {
        for v in self.stack.iter_mut() {
            visit(v);
        }
        for f in self.frames.live_mut() {
            visit(&mut f.ctx);
            visit(&mut f.closure);
        }
        self.frames.visit_native_roots(visit);
        for v in self.globals.iter_mut() {
            visit(v);
        }
        for v in self.literals.iter_mut() {
            visit(v);
        }
        for c in self.classes.iter_mut() {
            visit(&mut c.object);
            visit(&mut c.methods_array);
        }
        for v in self.handles.iter_mut() {
            visit(v);
        }
    }
}

impl Runtime {
    /// `max_frames` is the deepest call stack; the frame array is reserved for it up front.
    pub fn new(max_frames: usize) -> Runtime {
        Runtime {
            // A frame holds a handful of values on average; deep recursion through wide frames
            // overflows here before the frame stack does, reported the same way.
            stack: ValueStack::with_capacity(
                max_frames.saturating_mul(16).saturating_add(1 << 16),
                crate::jit::INLINED_FRAMES_ROOM,
            ),
            frames: FrameStack::with_capacity(max_frames, crate::jit::MAX_INLINED_FRAMES),
            symbols: Symbols::default(),
            classes: Vec::new(),
            core: CoreClasses::from_ids(&[0; 19]),
            globals: Vec::new(),
            global_names: Vec::new(),
            global_slots: HashMap::new(),
            literals: Vec::new(),
            codes: Vec::new(),
            sites: Vec::new(),
            sources: Vec::new(),
            handles: Vec::new(),
            loading: Vec::new(),
            lookup_cache: Default::default(),
            block_classes: Vec::new(),
            nil_tests: NilTests::default(),
            count_calls: false,
            hooked_methods: Default::default(),
            mark_frames: false,
            counts_calls_in_place: false,
            sites_base: std::ptr::null(),
            codes_base: std::ptr::null(),
            literals_base: std::ptr::null(),
            globals_base: std::ptr::null(),
        }
    }

    /// Installs `code` (never freed: `codes` hands out `&'static` references).
    pub fn add_code(&mut self, code: Code) -> CodeId {
        let id = self.codes.len() as CodeId;
        debug_assert_eq!(code.id, id);
        self.codes.push(Box::leak(Box::new(code)));
        self.codes_base = self.codes.as_ptr();
        id
    }

    /// Adds a literal to the table compiled code and the interpreter read; answers its index.
    pub fn add_literal(&mut self, v: Value) -> u32 {
        self.literals.push(v);
        self.literals_base = self.literals.as_ptr();
        self.literals.len() as u32 - 1
    }

    pub fn add_site(&mut self, site: Site) -> SiteId {
        let id = self.sites.len() as SiteId;
        self.sites.push(site);
        self.sites_base = self.sites.as_ptr();
        id
    }

    pub fn global_slot(&mut self, name: Symbol) -> u32 {
        if let Some(&s) = self.global_slots.get(&name) {
            return s;
        }
        let s = self.globals.len() as u32;
        self.globals.push(Value::NONE);
        self.globals_base = self.globals.as_ptr();
        self.global_names.push(name);
        self.global_slots.insert(name, s);
        s
    }

    pub fn global(&self, name: Symbol) -> Option<Value> {
        let v = self.globals[*self.global_slots.get(&name)? as usize];
        (v != Value::NONE).then_some(v)
    }

    pub fn set_global(&mut self, name: Symbol, value: Value) {
        let s = self.global_slot(name);
        self.globals[s as usize] = value;
    }

    /// The class of any value, immediates included.
    #[inline]
    pub fn class_of(&self, v: Value) -> ClassId {
        if v.is_int() {
            self.core.integer
        } else if v.is_ref() {
            v.class_id()
        } else if v.is_small_float() {
            self.core.double
        } else if v.as_symbol().is_some() {
            self.core.symbol
        } else if v == Value::NIL {
            self.core.nil
        } else if v == Value::TRUE {
            self.core.true_
        } else {
            self.core.false_
        }
    }

    /// Method lookup along the superclass chain, without memoizing (for readers that may
    /// not change the runtime: compile requests).
    pub fn find_method(&self, class: ClassId, selector: Symbol) -> Option<CodeId> {
        if let Some(&r) = self.lookup_cache.get(&(class, selector)) {
            return r;
        }
        let mut c = Some(class);
        while let Some(id) = c {
            let info = self.classes.get(id as usize)?;
            if let Some(&m) = info.methods.get(&selector) {
                return Some(m);
            }
            c = info.superclass;
        }
        None
    }

    /// Method lookup along the superclass chain, memoized.
    pub fn lookup(&mut self, class: ClassId, selector: Symbol) -> Option<CodeId> {
        if let Some(&r) = self.lookup_cache.get(&(class, selector)) {
            return r;
        }
        let mut c = Some(class);
        let mut found = None;
        while let Some(id) = c {
            let info = &self.classes[id as usize];
            if let Some(&m) = info.methods.get(&selector) {
                found = Some(m);
                break;
            }
            c = info.superclass;
        }
        self.lookup_cache.insert((class, selector), found);
        found
    }

    pub fn class_name(&self, class: ClassId) -> String {
        let info = &self.classes[class as usize];
        if info.is_meta {
            format!(
                "{} class",
                self.symbols.name(self.classes[info.partner as usize].name)
            )
        } else {
            self.symbols.name(info.name).to_string()
        }
    }

    /// The path of the file `code` was compiled from (empty when unknown).
    pub fn source_path(&self, code: &Code) -> String {
        self.sources
            .get(code.source as usize)
            .map(|s| s.path().to_string())
            .unwrap_or_default()
    }

    /// `Holder>>selector`, as stack traces and method printing show it.
    pub fn code_name(&self, code: &Code) -> String {
        let base = format!(
            "{}>>{}",
            self.class_name(code.holder),
            self.symbols.name(code.selector)
        );
        match code.kind {
            CodeKind::Method => base,
            CodeKind::Block => format!("[] in {base}"),
        }
    }

    /// Whether `code`'s hooks must run wherever it is called (a GC hint or a phase names it),
    /// so that it is never inlined.
    pub fn keeps_frame(&self, code: &Code) -> bool {
        code.hooks.load(std::sync::atomic::Ordering::Relaxed) & HOOK_KEEPS_FRAME != 0
    }

    pub fn is_kind_of(&self, class: ClassId, ancestor: ClassId) -> bool {
        let mut c = Some(class);
        while let Some(id) = c {
            if id == ancestor {
                return true;
            }
            c = self.classes[id as usize].superclass;
        }
        false
    }
}

impl Default for Runtime {
    fn default() -> Self {
        Runtime::new(VmOptions::default().max_stack_depth)
    }
}

#[cfg(test)]
mod tests {
    use super::{IntOp, SeenClasses, MAX_SEEN_CLASSES};
    use tally_heap::Value;

    #[test]
    fn seen_classes_keep_the_most_missed_first_until_the_site_turns_megamorphic() {
        let mut seen = SeenClasses::default();
        seen.note(10, 100, false);
        seen.note(11, 101, true);
        seen.note(12, 102, true);
        seen.note(12, 102, true);
        assert_eq!(seen.by_frequency(), [(12, 102), (11, 101), (10, 100)]);
        seen.note(13, 103, true);
        assert_eq!(seen.by_frequency().len(), MAX_SEEN_CLASSES);
        assert!(!seen.megamorphic());
        seen.note(14, 104, true);
        assert!(seen.megamorphic());
        assert!(seen.by_frequency().is_empty());
        seen.note(10, 100, true);
        assert!(seen.by_frequency().is_empty(), "megamorphic stays so");
    }

    /// What Integer's primitive answers for two small integers, computed wide: `None` for
    /// an error (a zero divisor, a negative shift) or a shift the primitive refuses.
    fn primitive(op: IntOp, a: i64, b: i64) -> Option<i128> {
        let (x, y) = (i128::from(a), i128::from(b));
        Some(match op {
            IntOp::Div if b != 0 => x / y,
            IntOp::Mod if b != 0 => {
                x.rem_euclid(y) + if y < 0 && x.rem_euclid(y) != 0 { y } else { 0 }
            }
            IntOp::Rem if b != 0 => x % y,
            IntOp::BitXor => x ^ y,
            IntOp::ShiftLeft if (0..=64).contains(&b) => x << b,
            IntOp::ShiftRight if b >= 0 => {
                if b >= 64 {
                    0
                } else {
                    i128::from((a as u64) >> b)
                }
            }
            _ => return None,
        })
    }

    /// Each operation the interpreter and compiled code answer in place gives what the
    /// primitive gives, and leaves to the primitive what it cannot: a result beyond the
    /// small integers, a zero divisor, a shift out of range.
    #[test]
    fn divisions_remainders_bits_and_shifts_in_place_agree_with_the_primitives() {
        let values = [
            Value::MIN_INT,
            Value::MIN_INT + 1,
            -1_000_003,
            -64,
            -63,
            -7,
            -2,
            -1,
            0,
            1,
            2,
            3,
            7,
            62,
            63,
            64,
            65,
            1_000_003,
            Value::MAX_INT - 1,
            Value::MAX_INT,
        ];
        let ops = [
            IntOp::Div,
            IntOp::Mod,
            IntOp::Rem,
            IntOp::BitXor,
            IntOp::ShiftLeft,
            IntOp::ShiftRight,
        ];
        for op in ops {
            for &a in &values {
                for &b in &values {
                    let fast = op.apply(a, b).map(|v| i128::from(v.as_int().unwrap()));
                    let exact = primitive(op, a, b);
                    let small = exact.filter(|&r| {
                        (i128::from(Value::MIN_INT)..=i128::from(Value::MAX_INT)).contains(&r)
                    });
                    match fast {
                        Some(r) => assert_eq!(Some(r), exact, "{op:?} {a} {b}"),
                        // Left to the primitive: no small result, or a shift the code
                        // does not try (beyond the word, a negative receiver's pattern).
                        None => assert!(
                            small.is_none()
                                || (op == IntOp::ShiftLeft && b >= 63)
                                || (op == IntOp::ShiftRight && (a < 0 || b >= 64)),
                            "{op:?} {a} {b} = {small:?} not answered in place"
                        ),
                    }
                }
            }
        }
    }
}
