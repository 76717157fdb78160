//! What a compile works from: the code (never changed once made) and copies of what it needs
//! from the VM's mutable state, taken on the VM thread. A compiler thread therefore never
//! reads the runtime while the program changes it (send sites are appended, and their
//! caches rewritten, as the program runs).

use rustc_hash::FxHashSet;

use tally_profile::values::TableSnapshot;

use tally_heap::Value;

use crate::bytecode::{CodeId, Op, SiteId};
use crate::runtime::{Code, IntOp, Runtime, NO_CLASS, TRIVIAL_NONE};

/// Counts a site's value table needs before its distribution replaces the inline cache's.
const MIN_PROFILE_COUNTS: u64 = 32;

/// What a compiler may know of one send site.
#[derive(Clone, Copy, Debug)]
pub struct SiteFacts {
    pub argc: u8,
    /// The small-integer operation the selector stands for, if any.
    pub int_op: IntOp,
    /// Speculation allowed: a binary send whose operands have so far always been small
    /// integers with a small-integer result (or that never ran). Compiled code may then guard
    /// on that and deoptimize when it fails.
    pub expects_small_ints: bool,
    /// Speculation allowed: a binary send whose pairs of operands have all been numbers
    /// with a double (never two small integers), with the operands that were integers;
    /// compiled code may compute on doubles and deoptimize when another pair comes.
    pub expects_doubles: Option<crate::operands::DoubleOperands>,
    /// Speculation allowed: the receiver classes the site's inline cache holds and what each
    /// runs there.
    pub expects_receiver: Option<ExpectedReceivers>,
    /// Speculation allowed: a send that never ran although the code around it did (its
    /// inline cache is empty while another site's is not). Compiled code may do it the
    /// short way, through the send stub, instead of spending code on a fast path.
    pub cold: bool,
    /// Speculation allowed: `isNil` and `notNil` mean what the core library says
    /// (`Runtime::nil_tests`). Compiled code may then answer them by comparing with nil,
    /// and deoptimizes if a class loaded since redefines them.
    pub nil_tests_standard: bool,
    /// The address of the value table the code counts this send's receiver classes in
    /// (`tally_profile::values::ValueTable`, multiplicative hashing: see
    /// `TableLayout`) as `class | 1 << 32`, or 0: none (only the baseline tier counts, with
    /// value profiles on).
    pub receiver_table: usize,
}

/// The most receiver classes compiled code tests at one send site before it sends.
pub const MAX_GUARDED_CLASSES: usize = crate::runtime::MAX_SEEN_CLASSES;

/// The classes a send site's inline cache holds, with their targets.
#[derive(Clone, Copy, Debug)]
pub enum ExpectedReceivers {
    /// The one class the site has seen: compiled code guards on it and deoptimizes when
    /// another comes.
    One(ExpectedReceiver),
    /// Two to [`MAX_GUARDED_CLASSES`] classes (a full cache, the classes a polymorphic site
    /// saw, or those a value profile counted): tested in turn, and any other class takes
    /// the send stub (a site that saw several classes may see another, which is no
    /// surprise worth a deopt). Made by [`ExpectedReceivers::several`].
    Several {
        classes: [ExpectedReceiver; MAX_GUARDED_CLASSES],
        len: u8,
    },
    /// The one class a value profile shows above the guard share at a site that has seen
    /// others: guarded, and any other class takes the send stub.
    OneThenSend(ExpectedReceiver),
}

impl ExpectedReceivers {
    /// The classes to guard on, in order.
    pub fn classes(&self) -> &[ExpectedReceiver] {
        match self {
            ExpectedReceivers::One(e) | ExpectedReceivers::OneThenSend(e) => {
                std::slice::from_ref(e)
            }
            ExpectedReceivers::Several { classes, len } => &classes[..*len as usize],
        }
    }

    /// A class switch over `classes` (the first [`MAX_GUARDED_CLASSES`] of them), falling
    /// back to a send; one class guarded before a send; `None` for none.
    pub fn several(classes: &[ExpectedReceiver]) -> Option<ExpectedReceivers> {
        let (&first, _) = classes.split_first()?;
        if classes.len() == 1 {
            return Some(ExpectedReceivers::OneThenSend(first));
        }
        let len = classes.len().min(MAX_GUARDED_CLASSES);
        let mut all = [first; MAX_GUARDED_CLASSES];
        all[..len].copy_from_slice(&classes[..len]);
        Some(ExpectedReceivers::Several {
            classes: all,
            len: len as u8,
        })
    }

    /// Whether a receiver of none of the classes deoptimizes (else it takes the send stub).
    pub fn deopt_on_miss(&self) -> bool {
        matches!(self, ExpectedReceivers::One(_))
    }
}

/// A receiver class a send site has seen, and its target there.
#[derive(Clone, Copy, Debug)]
pub struct ExpectedReceiver {
    pub class: u32,
    /// The method the class finds: a call done in place still runs its prologue hook.
    pub code: crate::bytecode::CodeId,
    pub target: ExpectedTarget,
}

/// What a monomorphic site runs, as far as compiled code can do it without the send stub.
#[derive(Clone, Copy)]
pub enum ExpectedTarget {
    /// A trivial method (`Code::trivial_kind`, `Code::trivial_operand`): done in place.
    Trivial {
        kind: u8,
        operand: u64,
    },
    /// Bytecode with a plain frame: its frame pushed and its compiled code (if it has some
    /// when the send runs) called directly.
    Method(&'static Code),
    /// `Array>>at:`, `Array>>at:put:`, `Array>>length` on instances of Array itself.
    ArrayAt,
    ArrayAtPut,
    ArrayLength,
    /// `value`, `value:` … of a block class: the closure's code called directly.
    BlockValue,
    /// `Object>>==` on a class whose instances are neither numbers nor immediates: identity
    /// of the two words (numbers compare by value, so their classes are left out).
    Identical,
    /// String's primitive `=` on a String (`symbol` false) or a Symbol (true): the same word
    /// is equal, a symbol equals only itself, text is compared by the `string_equal` stub.
    StringEqual {
        symbol: bool,
    },
    /// Class's primitive `new` on a class: a new instance, made without the send; `plain`:
    /// the instances' class and number of fields when the guarded class's instances are
    /// plain objects (nil in each field; `None` for other shapes, and for a super send,
    /// whose receiver may be a subclass).
    NewInstance {
        plain: Option<PlainShape>,
    },
    /// Array's primitive `new:` on Array itself: a new Array, made without the send.
    NewArray,
    /// String's primitive `length` on String itself: the length of a string of one-byte
    /// characters read from its header (others are counted by the interpreter).
    StringLength,
    /// Any other primitive: called through the call stub, without the send's lookup.
    Primitive(&'static Code),
    /// Double's primitive `sqrt`, `sin` or `cos` on a Double: computed on the unboxed double.
    DoubleMath(DoubleFn),
}

/// The instances of a class that are plain objects: their class and number of fields.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PlainShape {
    pub class: u32,
    pub fields: u16,
}

/// A function of one double that compiled code computes for Double's primitive of its
/// name (IEEE: NaN and the infinities in, NaN and the infinities out, as the primitive).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DoubleFn {
    Sqrt,
    Sin,
    Cos,
}

impl DoubleFn {
    pub fn name(self) -> &'static str {
        match self {
            DoubleFn::Sqrt => "sqrt",
            DoubleFn::Sin => "sin",
            DoubleFn::Cos => "cos",
        }
    }

    pub fn apply(self, x: f64) -> f64 {
        match self {
            DoubleFn::Sqrt => x.sqrt(),
            DoubleFn::Sin => x.sin(),
            DoubleFn::Cos => x.cos(),
        }
    }
}

impl std::fmt::Debug for ExpectedTarget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ExpectedTarget::Trivial { kind, operand } => {
                write!(f, "Trivial {{ kind: {kind}, operand: {operand:#x} }}")
            }
            ExpectedTarget::Method(code) => write!(f, "Method({:p})", *code),
            ExpectedTarget::ArrayAt => f.write_str("ArrayAt"),
            ExpectedTarget::ArrayAtPut => f.write_str("ArrayAtPut"),
            ExpectedTarget::ArrayLength => f.write_str("ArrayLength"),
            ExpectedTarget::BlockValue => f.write_str("BlockValue"),
            ExpectedTarget::Identical => f.write_str("Identical"),
            ExpectedTarget::StringEqual { symbol } => {
                write!(f, "StringEqual {{ symbol: {symbol} }}")
            }
            ExpectedTarget::NewInstance { plain } => {
                write!(f, "NewInstance {{ plain: {plain:?} }}")
            }
            ExpectedTarget::NewArray => f.write_str("NewArray"),
            ExpectedTarget::StringLength => f.write_str("StringLength"),
            ExpectedTarget::Primitive(code) => write!(f, "Primitive({:p})", *code),
            ExpectedTarget::DoubleMath(op) => write!(f, "DoubleMath({op:?})"),
        }
    }
}

/// One method or block to compile.
pub struct CompileRequest {
    pub code: &'static Code,
    /// `Class>>selector` (or `[] in Class>>selector`), for logs, listings and symbols.
    pub name: String,
    /// Its source file, for debug line tables.
    pub file: String,
    /// The facts of every site the code sends from, sorted by site.
    sites: Vec<(SiteId, SiteFacts)>,
    /// The selector of each site, sorted by site, and the names of the codes the code
    /// creates closures of or may call directly: what listings call them.
    selectors: Vec<(SiteId, String)>,
    code_names: Vec<(CodeId, String)>,
    /// An activation of the code is running, stopped past its first instruction (in the
    /// interpreter, or in a version since invalidated): a version that can only be entered
    /// at a call would leave its loops interpreted, so this one gets an entry at each loop
    /// head (on-stack replacement), in the tiers that have them.
    pub osr: bool,
    /// The calls the compile may inline, sorted: a send site and a method called there. The
    /// facts of every site of such a method, and of the blocks it and the code make, are in
    /// `sites`.
    inlined: Vec<(SiteId, CodeId)>,
    /// The blocks the code and the methods it may inline make, sorted by id.
    blocks: Vec<&'static Code>,
    /// The bytecodes the compile may inline in all (methods and blocks, each copy counted).
    pub inline_budget: usize,
    /// Why each considered call was or was not inlined, for `--tier-log`.
    pub inline_log: Vec<String>,
    /// The literals the code and the methods and blocks it may inline push that are
    /// immediates (doubles, small integers, symbols), sorted by index: constants, since a
    /// literal never changes and an immediate never moves.
    immediate_literals: Vec<(u32, Value)>,
}

/// Whether a compile may speculate, and on what not: sites whose guard failed before.
#[derive(Clone, Copy)]
pub enum Speculation<'a> {
    Off,
    Except(&'a FxHashSet<SiteId>),
}

/// What a compile may know of send site `s` (see [`SiteFacts`]); `ran`: whether the code
/// sending from it has run.
fn site_facts(rt: &Runtime, s: SiteId, speculation: Speculation, ran: bool) -> SiteFacts {
    let site = &rt.sites[s as usize];
    let allowed = match speculation {
        Speculation::Off => false,
        Speculation::Except(failed) => !failed.contains(&s),
    };
    SiteFacts {
        argc: site.argc,
        int_op: site.int_op,
        expects_small_ints: allowed
            && site.int_op != IntOp::None
            && site.operands.only_small_ints(),
        expects_doubles: site
            .operands
            .only_doubles()
            .filter(|&k| allowed && site.int_op.has_double_form(k)),
        // A guard chain that sends on a miss never deoptimizes, so a site whose earlier
        // guard failed may still have one.
        expects_receiver: match speculation {
            Speculation::Off => None,
            Speculation::Except(_) => {
                expected_receivers(rt, s).filter(|r| allowed || !r.deopt_on_miss())
            }
        },
        cold: allowed && ran && site.cached_class == NO_CLASS && site.int_op == IntOp::None,
        nil_tests_standard: allowed && rt.nil_tests.standard(),
        receiver_table: 0,
    }
}

/// Whether any send of `code` has run (a compile at the first call knows nothing of which
/// of its sends are cold).
fn has_run(rt: &Runtime, code: &Code) -> bool {
    code.ops
        .iter()
        .filter_map(|op| op.site())
        .any(|s| rt.sites[s as usize].cached_class != NO_CLASS)
}

/// Whether `code` has a back-edge.
fn has_loops(code: &Code) -> bool {
    code.ops
        .iter()
        .any(|op| matches!(op, crate::bytecode::Op::JumpBack(_)))
}

impl CompileRequest {
    /// Copies what compiling `code` needs from `rt`, with type feedback from its send
    /// sites where `speculation` allows it.
    pub fn new(code: &'static Code, rt: &Runtime, speculation: Speculation) -> CompileRequest {
        let ran = has_run(rt, code);
        let mut sites: Vec<(SiteId, SiteFacts)> = code
            .ops
            .iter()
            .filter_map(|op| op.site())
            .map(|s| (s, site_facts(rt, s, speculation, ran)))
            .collect();
        sites.sort_unstable_by_key(|&(s, _)| s);
        sites.dedup_by_key(|&mut (s, _)| s);
        let selectors = sites
            .iter()
            .map(|&(s, _)| {
                let selector = rt.symbols.name(rt.sites[s as usize].selector);
                (s, format!("#{selector}"))
            })
            .collect();
        let mut named: Vec<CodeId> = code
            .ops
            .iter()
            .filter_map(|op| match *op {
                Op::PushBlock(c) => Some(c),
                _ => None,
            })
            .chain(
                sites
                    .iter()
                    .filter_map(|(_, f)| f.expects_receiver)
                    .flat_map(|r| {
                        r.classes()
                            .iter()
                            .filter_map(|e| match e.target {
                                ExpectedTarget::Method(c) => Some(c.id),
                                _ => None,
                            })
                            .collect::<Vec<_>>()
                    }),
            )
            .collect();
        named.sort_unstable();
        named.dedup();
        let code_names = named
            .into_iter()
            .map(|c| (c, rt.code_name(rt.codes[c as usize])))
            .collect();
        let mut request = CompileRequest {
            code,
            name: rt.code_name(code),
            file: rt.source_path(code),
            sites,
            selectors,
            code_names,
            osr: has_loops(code)
                && rt
                    .frames
                    .live()
                    .iter()
                    .any(|f| f.code == code.id && f.ip != 0),
            inlined: Vec::new(),
            blocks: Vec::new(),
            inline_budget: 0,
            inline_log: Vec::new(),
            immediate_literals: Vec::new(),
        };
        request.add_literals_of(rt, code);
        request
    }

    /// Records the immediate literals `code` pushes.
    fn add_literals_of(&mut self, rt: &Runtime, code: &Code) {
        for op in &code.ops {
            let Op::PushLiteral(n) = *op else { continue };
            let Some(&v) = rt.literals.get(n as usize) else {
                continue;
            };
            if v.is_ref() {
                continue;
            }
            if let Err(k) = self
                .immediate_literals
                .binary_search_by_key(&n, |&(x, _)| x)
            {
                self.immediate_literals.insert(k, (n, v));
            }
        }
    }

    /// Literal `n`'s value, if it is an immediate some code of the compile pushes.
    pub fn immediate_literal(&self, n: u32) -> Option<Value> {
        self.immediate_literals
            .binary_search_by_key(&n, |&(x, _)| x)
            .ok()
            .map(|k| self.immediate_literals[k].1)
    }

    /// Whether the compile may inline `callee` where `site` calls it.
    pub fn inlines(&self, site: SiteId, callee: CodeId) -> bool {
        self.inlined.binary_search(&(site, callee)).is_ok()
    }

    /// A block the code, or a method it may inline, makes: its bytecode, for inlining it
    /// where it is called.
    pub fn block(&self, id: CodeId) -> Option<&'static Code> {
        self.blocks
            .binary_search_by_key(&id, |c| c.id)
            .ok()
            .map(|k| self.blocks[k])
    }

    /// Copies the facts and selectors of `code`'s sites, and the names of `code` and the
    /// blocks it makes, that the request does not hold yet: for a method or block the
    /// compile may inline.
    pub(crate) fn add_sites_of(&mut self, rt: &Runtime, code: &Code, speculation: Speculation) {
        self.add_literals_of(rt, code);
        let ran = has_run(rt, code);
        for s in code.ops.iter().filter_map(|op| op.site()) {
            if let Err(k) = self.sites.binary_search_by_key(&s, |&(x, _)| x) {
                self.sites
                    .insert(k, (s, site_facts(rt, s, speculation, ran)));
                let selector = rt.symbols.name(rt.sites[s as usize].selector);
                let k = self.selectors.partition_point(|(x, _)| *x < s);
                self.selectors.insert(k, (s, format!("#{selector}")));
            }
        }
        for c in std::iter::once(code.id).chain(code.ops.iter().filter_map(|op| match *op {
            Op::PushBlock(c) => Some(c),
            _ => None,
        })) {
            if let Err(k) = self.code_names.binary_search_by_key(&c, |(x, _)| *x) {
                self.code_names
                    .insert(k, (c, rt.code_name(rt.codes[c as usize])));
            }
        }
    }

    /// Records that the compile may inline `callee` where `site` calls it.
    pub(crate) fn inline(&mut self, site: SiteId, callee: CodeId) {
        if let Err(k) = self.inlined.binary_search(&(site, callee)) {
            self.inlined.insert(k, (site, callee));
        }
    }

    /// Records a block the compile may inline (its sites' facts must be added too).
    pub(crate) fn add_block(&mut self, code: &'static Code) {
        if let Err(k) = self.blocks.binary_search_by_key(&code.id, |c| c.id) {
            self.blocks.insert(k, code);
        }
    }

    /// The method `id` when a site expects to call it (`ExpectedTarget::Method`, or a
    /// primitive's `ExpectedTarget::Primitive`): compiled code calls it directly or inlines
    /// it; or a block the compile may inline.
    pub fn callee(&self, id: CodeId) -> Option<&'static Code> {
        self.sites
            .iter()
            .filter_map(|(_, f)| f.expects_receiver)
            .flat_map(|r| r.classes().to_vec())
            .find_map(|e| match e.target {
                ExpectedTarget::Method(c) | ExpectedTarget::Primitive(c) if c.id == id => Some(c),
                _ => None,
            })
            .or_else(|| self.block(id))
    }

    /// The selector of `site` as a listing shows it (`#at:put:`).
    pub fn selector(&self, site: SiteId) -> Option<&str> {
        let k = self
            .selectors
            .binary_search_by_key(&site, |(s, _)| *s)
            .ok()?;
        Some(&self.selectors[k].1)
    }

    /// The name of a code the request's code refers to (the code itself, a block it
    /// creates, a method a site calls).
    pub fn code_name(&self, id: CodeId) -> Option<&str> {
        if id == self.code.id {
            return Some(&self.name);
        }
        let k = self
            .code_names
            .binary_search_by_key(&id, |(c, _)| *c)
            .ok()?;
        Some(&self.code_names[k].1)
    }

    /// Gives each plain send (not a super send, not a binary or nil-test send) a value
    /// table to count its receiver classes in: code compiled from the request profiles.
    pub(crate) fn with_value_tables(mut self, profiles: &mut super::values::SiteProfiles) -> Self {
        let owner = self.code.id;
        for op in &self.code.ops {
            let (Op::Send(site) | Op::PushLocalSend(_, site)) = *op else {
                continue;
            };
            if let Ok(k) = self.sites.binary_search_by_key(&site, |&(s, _)| s) {
                self.sites[k].1.receiver_table = profiles.table_address(site, owner);
            }
        }
        self
    }

    /// Replaces what the inline caches say about the sends' receivers by what the sites'
    /// value tables counted, where a table has counted enough (`tables`: per site in the
    /// request's site order): the classes above `share` of a site's receivers are guarded
    /// (at most [`MAX_GUARDED_CLASSES`], most frequent first); a site whose table holds one
    /// class and nothing else deoptimizes on a miss (unless its guard failed before), any
    /// other sends.
    /// Answers the sites it set, each with the guarded classes and their shares.
    pub(crate) fn with_receiver_profiles(
        &mut self,
        rt: &Runtime,
        tables: &[TableSnapshot],
        share: f64,
        speculation: Speculation,
    ) -> Vec<(SiteId, Vec<(u32, f64)>)> {
        let mut applied = Vec::new();
        let Speculation::Except(failed) = speculation else {
            return applied;
        };
        for ((site, facts), table) in self.sites.iter_mut().zip(tables) {
            if table.total() < MIN_PROFILE_COUNTS
                || facts.expects_small_ints
                || facts.expects_doubles.is_some()
            {
                continue;
            }
            let s = &rt.sites[*site as usize];
            if s.super_lookup.is_some() {
                continue;
            }
            let mut guarded = Vec::new();
            let mut shares = Vec::new();
            for (value, class_share) in table
                .values_above(share)
                .into_iter()
                .take(MAX_GUARDED_CLASSES)
            {
                // Counted as `class | 1 << 32` (never 0): the low half is the class.
                let class = value as u32;
                let target = rt
                    .find_method(class, s.selector)
                    .and_then(|code| expected_receiver(rt, class, code, s.argc));
                match target {
                    Some(e) => {
                        guarded.push(e);
                        shares.push((class, class_share));
                    }
                    // A class the compiled code cannot guard or serve without the stub:
                    // the inline cache's facts stay.
                    None => break,
                }
            }
            facts.expects_receiver = match guarded[..] {
                [] => continue,
                [one] if table.entries.len() == 1 && table.other == 0 && !failed.contains(site) => {
                    Some(ExpectedReceivers::One(one))
                }
                _ => ExpectedReceivers::several(&guarded),
            };
            applied.push((*site, shares));
        }
        applied
    }

    /// The request's send sites, in the order its facts are kept.
    pub(crate) fn site_ids(&self) -> Vec<SiteId> {
        self.sites.iter().map(|&(s, _)| s).collect()
    }

    /// How many sites the compile may speculate on.
    pub fn speculating_sites(&self) -> usize {
        self.sites
            .iter()
            .filter(|(_, f)| {
                f.expects_small_ints || f.expects_doubles.is_some() || f.expects_receiver.is_some()
            })
            .count()
    }

    /// The facts of `site`; an error for a site the code does not send from.
    pub fn site(&self, site: SiteId) -> Result<SiteFacts, String> {
        self.sites
            .binary_search_by_key(&site, |&(s, _)| s)
            .map(|i| self.sites[i].1)
            .map_err(|_| format!("send site {site} is not one of {}'s", self.name))
    }
}

/// The receiver classes and targets of a send site's inline cache, and of the classes it saw
/// beyond those when it is polymorphic (up to [`MAX_GUARDED_CLASSES`]; a megamorphic site
/// gets its cache's two), when compiled code can do them without the send stub: a site that
/// saw one class needs that one (a miss deoptimizes), one that saw several switches on those
/// it can do and sends the rest. A super send's one entry is its fixed target (the cache's
/// class is where its lookup starts), served when it is a method called directly or a
/// trivial method, or Class's `new` (`super new` on a class side): those need no class of
/// their receiver (which is `self`).
pub(crate) fn expected_receivers(rt: &Runtime, site: SiteId) -> Option<ExpectedReceivers> {
    let s = &rt.sites[site as usize];
    if s.cached_class == NO_CLASS {
        return None;
    }
    if let Some(start) = s.super_lookup {
        let mut e = expected_receiver(rt, start, s.cached_code, s.argc)?;
        if let ExpectedTarget::NewInstance { plain } = &mut e.target {
            *plain = None;
        }
        return matches!(
            e.target,
            ExpectedTarget::Method(_)
                | ExpectedTarget::Trivial { .. }
                | ExpectedTarget::NewInstance { .. }
        )
        .then_some(ExpectedReceivers::One(e));
    }
    if s.cached_class2 == NO_CLASS {
        return expected_receiver(rt, s.cached_class, s.cached_code, s.argc)
            .map(ExpectedReceivers::One);
    }
    let mut seen = vec![
        (s.cached_class, s.cached_code),
        (s.cached_class2, s.cached_code2),
    ];
    if let Some(more) = s.seen.as_deref().filter(|m| !m.megamorphic()) {
        for (class, code) in more.by_frequency() {
            if !seen.iter().any(|&(c, _)| c == class) {
                seen.push((class, code));
            }
        }
    }
    let served: Vec<ExpectedReceiver> = seen
        .into_iter()
        .filter_map(|(class, code)| expected_receiver(rt, class, code, s.argc))
        .collect();
    ExpectedReceivers::several(&served)
}

/// What the optimizing tier does in place for receivers of `class` of an intrinsic's
/// primitive ([`super::intrinsics`]).
fn speculated_target(
    rt: &Runtime,
    class: u32,
    what: super::intrinsics::Speculated,
) -> ExpectedTarget {
    use super::intrinsics::Speculated as S;
    match what {
        S::ArrayAt => ExpectedTarget::ArrayAt,
        S::ArrayAtPut => ExpectedTarget::ArrayAtPut,
        S::ArrayLength => ExpectedTarget::ArrayLength,
        S::BlockValue => ExpectedTarget::BlockValue,
        S::Identical => ExpectedTarget::Identical,
        S::StringEqual => ExpectedTarget::StringEqual {
            symbol: class == rt.core.symbol,
        },
        S::DoubleMath(f) => ExpectedTarget::DoubleMath(f),
        S::NewInstance => {
            let instances = rt.classes.get(class as usize).map(|c| c.partner);
            let plain = instances.and_then(|id| {
                let c = rt.classes.get(id as usize)?;
                let plain = c.instance_kind == crate::objects::Kind::Plain && !c.special_layout;
                Some(PlainShape {
                    class: id,
                    fields: u16::try_from(c.fields.len()).ok().filter(|_| plain)?,
                })
            });
            ExpectedTarget::NewInstance { plain }
        }
        S::NewArray => ExpectedTarget::NewArray,
        S::StringLength => ExpectedTarget::StringLength,
    }
}

/// What receivers of `class` run at a site whose cache says `code`, when compiled code can do
/// it without the send stub (or, for a primitive it does not do itself, call it without the
/// lookup).
fn expected_receiver(
    rt: &Runtime,
    class: u32,
    code: crate::bytecode::CodeId,
    argc: u8,
) -> Option<ExpectedReceiver> {
    let id = code;
    let code: &'static Code = rt.codes[code as usize];
    let argc = argc as usize;
    let target = if code.trivial_kind != TRIVIAL_NONE && argc == code.num_args as usize {
        ExpectedTarget::Trivial {
            kind: code.trivial_kind,
            operand: code.trivial_operand,
        }
    } else if code.is_plain_frame(argc) {
        // With a context or without: the optimizing tier's body makes it at a direct call.
        ExpectedTarget::Method(code)
    } else if code.primitive.is_some() {
        let selector = rt.symbols.name(code.selector);
        match super::intrinsics::speculated(rt, class, code, argc) {
            Some(what) => speculated_target(rt, class, what),
            // Arithmetic and comparisons: the send's fast path does immediate doubles in
            // place, faster than the call stub (a site that saw only doubles computes on
            // them unboxed without a send at all).
            None if class == rt.core.double && IntOp::for_selector(selector) != IntOp::None => {
                return None
            }
            // `restart` moves its sender's frame, which only the send's way back handles; a
            // primitive the send's fast path does itself (`Code::intrinsic`) is done there
            // faster than through the call stub.
            None if selector == "restart"
                || code.intrinsic.load(std::sync::atomic::Ordering::Relaxed)
                    != super::Intrinsic::None as u8 =>
            {
                return None
            }
            None => ExpectedTarget::Primitive(code),
        }
    } else {
        return None;
    };
    Some(ExpectedReceiver {
        class,
        code: id,
        target,
    })
}
