//! AST → bytecode.
//!
//! Two passes per method. The first (`analyze`) finds which variables are *captured* — read or
//! written by a block that is not inlined — and whether any block returns non-locally. The
//! second (`emit`) places captured variables in a heap context (they must outlive the frame)
//! and all others in stack slots, and inlines control structures whose arguments are literal
//! blocks: inlined blocks do not create scopes at run time, their variables become slots of
//! the enclosing method or block.

use std::collections::{HashMap, HashSet};

use tally_heap::Value;
use tally_syntax::ast::{self, BlockDef, Body, Expr, Ident, Literal, MethodDef, Span, Stmt};

use crate::bytecode::{CodeId, Op, SiteId};
use crate::objects::context;
use crate::scoped_names::ScopedNames;

/// A compile-time error with the span to blame.
#[derive(Debug, Clone)]
pub struct CompileError {
    pub message: String,
    pub span: Span,
}

/// What the compiler needs from the VM: interning and registration of shared tables.
pub trait CompileEnv {
    fn intern(&mut self, name: &str) -> u32;
    /// Registers a send site; `super_lookup` is the class where a super send starts looking.
    fn add_site(&mut self, selector: u32, argc: u8, super_lookup: Option<u32>) -> SiteId;
    /// Materializes a literal in the VM's literal table (strings, doubles, big integers, arrays).
    fn add_literal(&mut self, literal: &Literal) -> Result<u32, String>;
    fn global_slot(&mut self, name: u32) -> u32;
    fn add_code(&mut self, code: CompiledCode) -> CodeId;
}

/// What the compiler knows about the class a method belongs to.
pub struct ClassContext<'a> {
    /// All fields of instances, inherited first.
    pub fields: &'a [String],
    /// Where super sends start: the superclass of the method's holder.
    pub super_class: Option<u32>,
    pub holder: u32,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CodeKind {
    Method,
    Block,
}

/// One unit of bytecode: a method or a block.
#[derive(Debug, Clone)]
pub struct CompiledCode {
    pub kind: CodeKind,
    /// For methods, the selector; for blocks, the selector of the enclosing method.
    pub selector: u32,
    pub holder: u32,
    pub ops: Vec<Op>,
    /// Source position (line, column; 1-based) of each op, for stack traces.
    pub positions: Vec<(u32, u32)>,
    pub num_args: u16,
    /// Stack slots after the arguments.
    pub num_locals: u16,
    /// Variables in the heap context (0: the frame has no context of its own).
    pub context_size: u16,
    /// Arguments that are captured: copied from their stack slot into the context at entry.
    pub captured_args: Vec<(u16, u16)>,
    pub source_line: u32,
    /// The file the code came from (index into the VM's source table).
    pub source: u32,
}

/// Where a variable lives.
#[derive(Debug, Clone, Copy)]
enum Slot {
    Stack(u16),
    /// Index in the context of the scope that declares it.
    Context(u16),
}

#[derive(Debug, Clone, Copy)]
struct VarRef {
    /// Index of the real (non-inlined) scope that declares the variable.
    scope: usize,
    slot: Slot,
}

/// A method or non-inlined block being emitted.
struct Scope {
    kind: CodeKind,
    ops: Vec<Op>,
    positions: Vec<(u32, u32)>,
    num_args: u16,
    next_stack: u16,
    next_context: u16,
    captured_args: Vec<(u16, u16)>,
    /// True when this scope has its own context (it declares captured variables or is a method
    /// whose blocks return non-locally).
    has_context: bool,
}

/// Control structures compiled inline when their arguments are literal blocks.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Inline {
    IfTrue,
    IfFalse,
    IfTrueIfFalse,
    IfFalseIfTrue,
    WhileTrue,
    WhileFalse,
    And,
    Or,
    ToDo,
}

fn literal_block(e: &Expr, params: usize) -> Option<&BlockDef> {
    match e {
        Expr::Block(b) if b.params.len() == params => Some(b),
        _ => None,
    }
}

fn inline_kind(send: &ast::Send) -> Option<Inline> {
    let a = &send.args;
    let k = match send.selector.as_str() {
        "ifTrue:" if literal_block(&a[0], 0).is_some() => Inline::IfTrue,
        "ifFalse:" if literal_block(&a[0], 0).is_some() => Inline::IfFalse,
        "ifTrue:ifFalse:"
            if literal_block(&a[0], 0).is_some() && literal_block(&a[1], 0).is_some() =>
        {
            Inline::IfTrueIfFalse
        }
        "ifFalse:ifTrue:"
            if literal_block(&a[0], 0).is_some() && literal_block(&a[1], 0).is_some() =>
        {
            Inline::IfFalseIfTrue
        }
        "whileTrue:"
            if literal_block(&send.receiver, 0).is_some() && literal_block(&a[0], 0).is_some() =>
        {
            Inline::WhileTrue
        }
        "whileFalse:"
            if literal_block(&send.receiver, 0).is_some() && literal_block(&a[0], 0).is_some() =>
        {
            Inline::WhileFalse
        }
        "and:" | "&&" if literal_block(&a[0], 0).is_some() => Inline::And,
        "or:" | "||" if literal_block(&a[0], 0).is_some() => Inline::Or,
        "to:do:" if literal_block(&a[1], 1).is_some() => Inline::ToDo,
        _ => return None,
    };
    if matches!(&send.receiver, Expr::Var(v) if v.name == "super") {
        return None;
    }
    Some(k)
}

const PSEUDO_VARIABLES: [&str; 5] = ["self", "super", "nil", "true", "false"];

/// Which parts of an inlined send are literal blocks compiled in place: (receiver, arguments).
/// Blocks (not inlined) inside one another: a block reaches an outer variable through one
/// context per level, and the bytecode names that level in one byte.
const MAX_BLOCK_NESTING: usize = 200;

/// Arguments plus locals of one method or block, and fields of one class: the bytecode names
/// a stack slot, context slot or field in 16 bits (slot 0 of the stack is the receiver).
const MAX_VARIABLES: usize = u16::MAX as usize - 1;

/// A send site records its argument count in one byte.
const MAX_SEND_ARGUMENTS: usize = u8::MAX as usize;

/// A field's index as the bytecode holds it.
fn field_index(i: usize, id: &Ident) -> Result<u16, CompileError> {
    u16::try_from(i).map_err(|_| CompileError {
        message: format!(
            "the field '{}' is number {} of its class: at most {} fields are supported (the limit)",
            id.name,
            i + 1,
            u16::MAX
        ),
        span: id.span,
    })
}

/// A chain of sends that are not inlined (`a foo bar`, `1 + 2 + 3`), outermost first, and the
/// receiver it starts from. Both passes walk a chain in a loop rather than by recursion: the
/// tree of a chain is one level deeper per message, and flat chains of any length are legal.
fn plain_chain(send: &ast::Send) -> (&Expr, Vec<&ast::Send>) {
    let mut chain = vec![send];
    let mut receiver = &send.receiver;
    while let Expr::Send(inner) = receiver {
        if inline_kind(inner).is_some() {
            break;
        }
        chain.push(inner);
        receiver = &inner.receiver;
    }
    (receiver, chain)
}

fn inlined_parts(kind: Inline) -> (bool, [bool; 2]) {
    match kind {
        Inline::IfTrue | Inline::IfFalse | Inline::And | Inline::Or => (false, [true, false]),
        Inline::IfTrueIfFalse | Inline::IfFalseIfTrue => (false, [true, true]),
        Inline::WhileTrue | Inline::WhileFalse => (true, [true, false]),
        Inline::ToDo => (false, [false, true]),
    }
}

/// Key of the method's own scope in `Analysis::scopes_with_context`; blocks use their span start.
const METHOD_SCOPE: u32 = u32::MAX;

// ---------------------------------------------------------------------------------------------
// Pass 1: which declarations are captured, and where non-local returns are.

#[derive(Default)]
struct Analysis {
    /// Declarations (by the span start of the declaring identifier) used from an inner real scope.
    captured: HashSet<u32>,
    /// True when some non-inlined block in the method contains `^`.
    has_non_local_return: bool,
    /// Real scopes (by key) that declare a captured variable and so need a context.
    scopes_with_context: HashSet<u32>,
}

struct Analyzer {
    out: Analysis,
    /// Visible names: (name, declaring real scope depth, declaration key).
    env: ScopedNames<(usize, u32)>,
    depth: usize,
    /// Key of each open real scope, innermost last.
    scope_keys: Vec<u32>,
    /// Declaration key → key of the real scope that declares it.
    declared_in: HashMap<u32, u32>,
}

impl Analyzer {
    fn new() -> Analyzer {
        Analyzer {
            out: Analysis::default(),
            env: ScopedNames::new(),
            depth: 0,
            scope_keys: vec![METHOD_SCOPE],
            declared_in: HashMap::new(),
        }
    }

    fn finish(mut self) -> Analysis {
        for key in &self.out.captured {
            if let Some(scope) = self.declared_in.get(key) {
                self.out.scopes_with_context.insert(*scope);
            }
        }
        self.out
    }

    fn declare(&mut self, id: &Ident) {
        self.env.push(&id.name, (self.depth, id.span.start));
        self.declared_in
            .insert(id.span.start, *self.scope_keys.last().expect("scope"));
    }

    fn use_name(&mut self, name: &str) {
        if let Some((_, &(depth, key))) = self.env.lookup(name) {
            if depth != self.depth {
                self.out.captured.insert(key);
            }
        }
    }

    fn body(&mut self, body: &Body) {
        let mark = self.env.len();
        for l in &body.locals {
            self.declare(l);
        }
        for s in &body.statements {
            match s {
                Stmt::Expr(e) => self.expr(e),
                Stmt::Return { value, .. } => {
                    if self.depth > 0 {
                        self.out.has_non_local_return = true;
                    }
                    self.expr(value)
                }
            }
        }
        self.env.truncate(mark);
    }

    fn inlined_block(&mut self, b: &BlockDef) {
        let mark = self.env.len();
        for p in &b.params {
            self.declare(p);
        }
        self.body(&b.body);
        self.env.truncate(mark);
    }

    fn expr(&mut self, e: &Expr) {
        match e {
            Expr::Var(id) => self.use_name(&id.name),
            Expr::Assign { target, value } => {
                self.use_name(&target.name);
                self.expr(value);
            }
            Expr::Literal(..) => {}
            Expr::Block(b) => {
                self.depth += 1;
                self.scope_keys.push(b.span.start);
                let mark = self.env.len();
                for p in &b.params {
                    self.declare(p);
                }
                self.body(&b.body);
                self.env.truncate(mark);
                self.scope_keys.pop();
                self.depth -= 1;
            }
            Expr::Send(send) => match inline_kind(send) {
                Some(kind) => {
                    let (receiver_inlined, args_inlined) = inlined_parts(kind);
                    let parts = std::iter::once((&send.receiver, receiver_inlined))
                        .chain(send.args.iter().zip(args_inlined));
                    for (part, inlined) in parts {
                        match part {
                            Expr::Block(b) if inlined => self.inlined_block(b),
                            other => self.expr(other),
                        }
                    }
                }
                None => {
                    let (innermost, chain) = plain_chain(send);
                    self.expr(innermost);
                    for s in chain.iter().rev() {
                        for a in &s.args {
                            self.expr(a);
                        }
                    }
                }
            },
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Pass 2: emission.

pub struct MethodCompiler<'a, 'e> {
    env: &'e mut dyn CompileEnv,
    class: &'a ClassContext<'a>,
    analysis: Analysis,
    scopes: Vec<Scope>,
    /// Visible variables, innermost last.
    names: ScopedNames<VarRef>,
    selector: u32,
    source: u32,
    source_text: &'a tally_syntax::Source,
    position: (u32, u32),
    /// How many inlined blocks enclose the code being emitted, within the current real scope.
    inline_depth: u32,
}

/// Compiles one method definition (not a primitive) into code registered with `env`.
pub fn compile_method(
    env: &mut dyn CompileEnv,
    class: &ClassContext,
    method: &MethodDef,
    body: &Body,
    source: u32,
    source_text: &tally_syntax::Source,
) -> Result<CodeId, CompileError> {
    let mut analyzer = Analyzer::new();
    for p in &method.params {
        analyzer.declare(p);
    }
    analyzer.body(body);
    let analysis = analyzer.finish();
    let selector = env.intern(&method.selector);
    let mut c = MethodCompiler {
        env,
        class,
        analysis,
        scopes: Vec::new(),
        names: ScopedNames::new(),
        selector,
        source,
        source_text,
        position: source_text.line_col(method.span.start),
        inline_depth: 0,
    };
    let needs_context =
        c.analysis.has_non_local_return || c.analysis.scopes_with_context.contains(&METHOD_SCOPE);
    c.open_scope(CodeKind::Method, &method.params, needs_context)?;
    c.body_statements(body, false)?;
    c.position = c.source_text.line_col(body.end.start);
    c.emit(Op::ReturnSelf);
    let line = c.source_text.line_col(method.span.start).0;
    Ok(c.close_scope(line))
}

fn err<T>(message: impl Into<String>, span: Span) -> Result<T, CompileError> {
    Err(CompileError {
        message: message.into(),
        span,
    })
}

impl<'a, 'e> MethodCompiler<'a, 'e> {
    fn scope(&mut self) -> &mut Scope {
        self.scopes.last_mut().expect("a scope is open")
    }

    fn emit(&mut self, op: Op) -> usize {
        let pos = self.position;
        let s = self.scope();
        s.ops.push(op);
        s.positions.push(pos);
        s.ops.len() - 1
    }

    fn here(&mut self) -> u32 {
        self.scope().ops.len() as u32
    }

    fn patch(&mut self, at: usize, target: u32) {
        let op = &mut self.scope().ops[at];
        *op = match *op {
            Op::Jump(_) => Op::Jump(target),
            Op::JumpIfTrue(_) => Op::JumpIfTrue(target),
            Op::JumpIfFalse(_) => Op::JumpIfFalse(target),
            other => unreachable!("patching {other:?}"),
        };
    }

    fn check_shadowing(&self, id: &Ident, scope_start: usize) -> Result<(), CompileError> {
        if PSEUDO_VARIABLES.contains(&id.name.as_str()) {
            return err(
                format!("'{}' is a reserved name and cannot be declared", id.name),
                id.span,
            );
        }
        if self.names.declared_since(&id.name, scope_start) {
            return err(
                format!("Variable '{}' shadows another of the same name", id.name),
                id.span,
            );
        }
        Ok(())
    }

    /// Declares a variable in the innermost real scope: in the context when captured.
    fn declare(&mut self, id: &Ident, mark: usize) -> Result<VarRef, CompileError> {
        self.check_shadowing(id, mark)?;
        let scope = self.scopes.len() - 1;
        let captured = self.analysis.captured.contains(&id.span.start);
        let s = self.scope();
        if s.next_stack as usize > MAX_VARIABLES || s.next_context as usize > MAX_VARIABLES {
            return err(
                format!(
                    "more than {MAX_VARIABLES} arguments and local variables in one method or block (the limit)"
                ),
                id.span,
            );
        }
        let slot = if captured {
            s.next_context += 1;
            Slot::Context(s.next_context)
        } else {
            s.next_stack += 1;
            Slot::Stack(s.next_stack - 1)
        };
        let r = VarRef { scope, slot };
        self.names.push(&id.name, r);
        Ok(r)
    }

    fn open_scope(
        &mut self,
        kind: CodeKind,
        params: &[Ident],
        force_context: bool,
    ) -> Result<usize, CompileError> {
        if let Some(p) = params.get(MAX_VARIABLES) {
            return err(
                format!("more than {MAX_VARIABLES} arguments (the limit)"),
                p.span,
            );
        }
        self.scopes.push(Scope {
            kind,
            ops: Vec::new(),
            positions: Vec::new(),
            num_args: params.len() as u16,
            next_stack: 1, // slot 0: the receiver
            // Context slots before the variables: the outer context and the home frame index.
            next_context: context::VARIABLES as u16 - 1,
            captured_args: Vec::new(),
            has_context: force_context,
        });
        let mark = self.names.len();
        for (i, p) in params.iter().enumerate() {
            self.check_shadowing(p, mark)?;
            let scope = self.scopes.len() - 1;
            let stack_slot = (i + 1) as u16;
            let slot = if self.analysis.captured.contains(&p.span.start) {
                let s = self.scope();
                s.next_context += 1;
                let c = s.next_context;
                s.captured_args.push((stack_slot, c));
                Slot::Context(c)
            } else {
                Slot::Stack(stack_slot)
            };
            self.names.push(&p.name, VarRef { scope, slot });
        }
        self.scope().next_stack = params.len() as u16 + 1;
        Ok(mark)
    }

    fn close_scope(&mut self, line: u32) -> CodeId {
        let mut s = self.scopes.pop().expect("scope open");
        crate::peephole::optimize(&mut s.ops, &mut s.positions);
        let code = CompiledCode {
            kind: s.kind,
            selector: self.selector,
            holder: self.class.holder,
            ops: s.ops,
            positions: s.positions,
            num_args: s.num_args,
            num_locals: s.next_stack - 1 - s.num_args,
            context_size: if s.has_context { s.next_context + 1 } else { 0 },
            captured_args: s.captured_args,
            source_line: line,
            source: self.source,
        };
        self.env.add_code(code)
    }

    /// Context hops from the current scope's frame context to `scope`'s context.
    fn context_level(&self, target: usize) -> u8 {
        let current = self.scopes.len() - 1;
        // A frame's context is its own if it has one, else its closure's: count the scopes with
        // a context from the current one (inclusive) down to the target (exclusive).
        (target + 1..=current)
            .filter(|&i| self.scope_has_context(i))
            .count() as u8
    }

    fn scope_has_context(&self, i: usize) -> bool {
        self.scopes[i].has_context
    }

    fn lookup(&self, name: &str) -> Option<VarRef> {
        self.names.lookup(name).map(|(_, r)| *r)
    }

    fn body_statements(&mut self, body: &Body, keep_value: bool) -> Result<(), CompileError> {
        let mark = self.names.len();
        for l in &body.locals {
            let r = self.declare(l, mark)?;
            // Locals of inlined blocks reuse slots across iterations: start each entry at nil.
            if self.inline_depth > 0 {
                self.emit(Op::PushConst(Value::NIL));
                self.store(r, true);
            }
        }
        if body.statements.is_empty() && keep_value {
            self.emit(Op::PushConst(Value::NIL));
        }
        let n = body.statements.len();
        for (i, s) in body.statements.iter().enumerate() {
            let last = i + 1 == n;
            match s {
                Stmt::Expr(e) => {
                    self.expr(e)?;
                    if !(last && keep_value) {
                        self.emit(Op::Pop);
                    }
                }
                Stmt::Return { value, span } => {
                    self.expr(value)?;
                    self.position = self.source_text.line_col(span.start);
                    let in_block = self.scopes.last().map(|s| s.kind) == Some(CodeKind::Block);
                    if in_block {
                        self.emit(Op::ReturnNonLocal);
                        // Reached only when the home method has returned: `escapedBlock:`'s
                        // answer is then the block's value.
                        self.emit(Op::Return);
                    } else {
                        self.emit(Op::Return);
                    }
                    // The value slot an inlined block must leave is never reached; keep the
                    // stack shape consistent for the code that follows.
                    if last && keep_value {
                        self.emit(Op::PushConst(Value::NIL));
                    }
                    break;
                }
            }
        }
        self.names.truncate(mark);
        Ok(())
    }

    fn store(&mut self, r: VarRef, pop: bool) {
        match r.slot {
            Slot::Stack(i) => {
                self.emit(if pop {
                    Op::PopLocal(i)
                } else {
                    Op::StoreLocal(i)
                });
            }
            Slot::Context(index) => {
                let level = self.context_level(r.scope);
                self.emit(if pop {
                    Op::PopCtx { level, index }
                } else {
                    Op::StoreCtx { level, index }
                });
            }
        }
    }

    fn load(&mut self, r: VarRef) {
        match r.slot {
            Slot::Stack(i) => {
                self.emit(Op::PushLocal(i));
            }
            Slot::Context(index) => {
                let level = self.context_level(r.scope);
                self.emit(Op::PushCtx { level, index });
            }
        }
    }

    fn variable(&mut self, id: &Ident) -> Result<(), CompileError> {
        self.position = self.source_text.line_col(id.span.start);
        match id.name.as_str() {
            "self" | "super" => {
                self.emit(Op::PushLocal(0));
                return Ok(());
            }
            "nil" => {
                self.emit(Op::PushConst(Value::NIL));
                return Ok(());
            }
            "true" => {
                self.emit(Op::PushConst(Value::TRUE));
                return Ok(());
            }
            "false" => {
                self.emit(Op::PushConst(Value::FALSE));
                return Ok(());
            }
            _ => {}
        }
        if let Some(r) = self.lookup(&id.name) {
            self.load(r);
        } else if let Some(i) = self.class.fields.iter().rposition(|f| *f == id.name) {
            self.emit(Op::PushField(field_index(i, id)?));
        } else {
            let sym = self.env.intern(&id.name);
            let slot = self.env.global_slot(sym);
            self.emit(Op::PushGlobal(slot));
        }
        Ok(())
    }

    fn assign(&mut self, target: &Ident, value: &Expr) -> Result<(), CompileError> {
        self.expr(value)?;
        self.position = self.source_text.line_col(target.span.start);
        if let Some(r) = self.lookup(&target.name) {
            self.store(r, false);
        } else if let Some(i) = self.class.fields.iter().rposition(|f| *f == target.name) {
            self.emit(Op::StoreField(field_index(i, target)?));
        } else if PSEUDO_VARIABLES.contains(&target.name.as_str()) {
            return err(format!("cannot assign to '{}'", target.name), target.span);
        } else {
            return err(
                format!(
                    "cannot assign to '{}': no local, argument or field of that name is in scope (globals are set with `system global:put:`)",
                    target.name
                ),
                target.span,
            );
        }
        Ok(())
    }

    fn expr(&mut self, e: &Expr) -> Result<(), CompileError> {
        match e {
            Expr::Var(id) => self.variable(id),
            Expr::Assign { target, value } => self.assign(target, value),
            Expr::Literal(lit, span) => {
                self.position = self.source_text.line_col(span.start);
                self.literal(lit, *span)
            }
            Expr::Block(b) => self.block(b),
            Expr::Send(send) => self.send(send),
        }
    }

    fn literal(&mut self, lit: &Literal, span: Span) -> Result<(), CompileError> {
        match lit {
            Literal::Integer(i) => {
                if let Some(v) = Value::from_int(*i) {
                    self.emit(Op::PushConst(v));
                    return Ok(());
                }
            }
            Literal::Symbol(s) => {
                let sym = self.env.intern(s);
                self.emit(Op::PushConst(Value::from_symbol(sym)));
                return Ok(());
            }
            _ => {}
        }
        let idx = self
            .env
            .add_literal(lit)
            .map_err(|m| CompileError { message: m, span })?;
        self.emit(Op::PushLiteral(idx));
        Ok(())
    }

    fn block(&mut self, b: &BlockDef) -> Result<(), CompileError> {
        if self.scopes.len() > MAX_BLOCK_NESTING {
            return err(
                format!(
                    "blocks nested too deeply: more than {MAX_BLOCK_NESTING} blocks (not inlined) inside one another (the limit)"
                ),
                b.span,
            );
        }
        let saved_inline = std::mem::replace(&mut self.inline_depth, 0);
        let has_context = self.analysis.scopes_with_context.contains(&b.span.start);
        let mark = self.open_scope(CodeKind::Block, &b.params, has_context)?;
        self.position = self.source_text.line_col(b.span.start);
        self.body_statements(&b.body, true)?;
        self.position = self.source_text.line_col(b.body.end.start);
        self.emit(Op::Return);
        self.names.truncate(mark);
        let line = self.source_text.line_col(b.span.start).0;
        let id = self.close_scope(line);
        self.inline_depth = saved_inline;
        self.position = self.source_text.line_col(b.span.start);
        self.emit(Op::PushBlock(id));
        Ok(())
    }

    /// The body of a literal block compiled in place; leaves its value on the stack.
    fn inline_block(&mut self, b: &BlockDef) -> Result<(), CompileError> {
        self.inline_depth += 1;
        self.body_statements(&b.body, true)?;
        self.inline_depth -= 1;
        Ok(())
    }

    fn send(&mut self, send: &ast::Send) -> Result<(), CompileError> {
        if let Some(kind) = inline_kind(send) {
            return self.inline_send(kind, send);
        }
        let (innermost, chain) = plain_chain(send);
        self.expr(innermost)?;
        for s in chain.iter().rev() {
            self.plain_send(s)?;
        }
        Ok(())
    }

    /// Emits one send whose receiver is already on the stack: its arguments, then the send.
    fn plain_send(&mut self, send: &ast::Send) -> Result<(), CompileError> {
        let is_super = matches!(&send.receiver, Expr::Var(v) if v.name == "super");
        if send.args.len() > MAX_SEND_ARGUMENTS {
            return err(
                format!(
                    "a message with {} arguments: at most {MAX_SEND_ARGUMENTS} (the limit)",
                    send.args.len()
                ),
                send.selector_span,
            );
        }
        for a in &send.args {
            self.expr(a)?;
        }
        self.position = self.source_text.line_col(send.selector_span.start);
        let sel = self.env.intern(&send.selector);
        let site = self.env.add_site(
            sel,
            send.args.len() as u8,
            if is_super {
                self.class.super_class
            } else {
                None
            },
        );
        self.emit(if is_super {
            Op::SuperSend(site)
        } else {
            Op::Send(site)
        });
        Ok(())
    }

    fn send_selector(&mut self, selector: &str, argc: u8) {
        let sel = self.env.intern(selector);
        let site = self.env.add_site(sel, argc, None);
        self.emit(Op::Send(site));
    }

    fn inline_send<'x>(&mut self, kind: Inline, send: &'x ast::Send) -> Result<(), CompileError> {
        let block = |e: &'x Expr| -> &'x BlockDef {
            match e {
                Expr::Block(b) => b,
                _ => unreachable!("inline_kind checked for literal blocks"),
            }
        };
        let pos = self.source_text.line_col(send.selector_span.start);
        match kind {
            Inline::IfTrue | Inline::IfFalse => {
                self.expr(&send.receiver)?;
                self.position = pos;
                let j = self.emit(if kind == Inline::IfTrue {
                    Op::JumpIfFalse(0)
                } else {
                    Op::JumpIfTrue(0)
                });
                self.inline_block(block(&send.args[0]))?;
                let end = self.emit(Op::Jump(0));
                let t = self.here();
                self.patch(j, t);
                self.emit(Op::PushConst(Value::NIL));
                let t = self.here();
                self.patch(end, t);
            }
            Inline::IfTrueIfFalse | Inline::IfFalseIfTrue => {
                self.expr(&send.receiver)?;
                self.position = pos;
                let j = self.emit(if kind == Inline::IfTrueIfFalse {
                    Op::JumpIfFalse(0)
                } else {
                    Op::JumpIfTrue(0)
                });
                self.inline_block(block(&send.args[0]))?;
                let end = self.emit(Op::Jump(0));
                let t = self.here();
                self.patch(j, t);
                self.inline_block(block(&send.args[1]))?;
                let t = self.here();
                self.patch(end, t);
            }
            Inline::And | Inline::Or => {
                self.expr(&send.receiver)?;
                self.position = pos;
                let j = self.emit(if kind == Inline::And {
                    Op::JumpIfFalse(0)
                } else {
                    Op::JumpIfTrue(0)
                });
                self.inline_block(block(&send.args[0]))?;
                let end = self.emit(Op::Jump(0));
                let t = self.here();
                self.patch(j, t);
                self.emit(Op::PushConst(Value::from_bool(kind == Inline::Or)));
                let t = self.here();
                self.patch(end, t);
            }
            Inline::WhileTrue | Inline::WhileFalse => {
                let top = self.here();
                self.inline_block(block(&send.receiver))?;
                self.position = pos;
                let exit = self.emit(if kind == Inline::WhileTrue {
                    Op::JumpIfFalse(0)
                } else {
                    Op::JumpIfTrue(0)
                });
                self.inline_block(block(&send.args[0]))?;
                self.emit(Op::Pop);
                self.emit(Op::JumpBack(top));
                let t = self.here();
                self.patch(exit, t);
                self.emit(Op::PushConst(Value::NIL));
            }
            Inline::ToDo => {
                let body = block(&send.args[1]);
                self.expr(&send.receiver)?;
                self.emit(Op::Dup);
                let mark = self.names.len();
                let counter = self.declare(&body.params[0], mark)?;
                self.store(counter, true);
                self.expr(&send.args[0])?;
                self.position = pos;
                let s = self.scope();
                let limit = s.next_stack;
                s.next_stack += 1;
                self.emit(Op::PopLocal(limit));
                let top = self.here();
                self.load(counter);
                self.emit(Op::PushLocal(limit));
                self.send_selector("<=", 1);
                let exit = self.emit(Op::JumpIfFalse(0));
                // The loop variable is declared above; the block's own locals are in its body.
                self.inline_depth += 1;
                self.body_statements(&body.body, true)?;
                self.inline_depth -= 1;
                self.emit(Op::Pop);
                self.position = pos;
                self.load(counter);
                self.emit(Op::PushConst(Value::from_small_int(1)));
                self.send_selector("+", 1);
                self.store(counter, true);
                self.emit(Op::JumpBack(top));
                let t = self.here();
                self.patch(exit, t);
                self.names.truncate(mark);
            }
        }
        Ok(())
    }
}
