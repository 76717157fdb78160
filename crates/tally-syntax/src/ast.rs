//! The syntax tree of one SOM class file.
//!
//! The tree keeps source spans on every node that can be blamed for an error later: the compiler
//! turns spans into line numbers for stack traces, and the parser uses them for diagnostics.
//! Control structures (`ifTrue:`, `whileTrue:` …) are ordinary sends here; the compiler decides
//! what to inline.

use num_bigint::BigInt;

/// A half-open byte range `[start, end)` into the source text.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Span {
    pub start: u32,
    pub end: u32,
}

impl Span {
    pub fn new(start: usize, end: usize) -> Span {
        Span {
            start: start as u32,
            end: end as u32,
        }
    }

    /// The smallest span covering both.
    pub fn to(self, other: Span) -> Span {
        Span {
            start: self.start.min(other.start),
            end: self.end.max(other.end),
        }
    }
}

/// A name as written, with where it was written.
#[derive(Debug, Clone, PartialEq)]
pub struct Ident {
    pub name: String,
    pub span: Span,
}

#[derive(Debug, Clone, PartialEq)]
pub struct ClassDef {
    pub name: Ident,
    /// `None` when the source says `Foo = ( … )`: the superclass is then `Object`
    /// (the VM decides; `nil` as a superclass is written `Foo = nil ( … )`).
    pub superclass: Option<Ident>,
    pub instance_fields: Vec<Ident>,
    pub instance_methods: Vec<MethodDef>,
    pub class_fields: Vec<Ident>,
    pub class_methods: Vec<MethodDef>,
    pub span: Span,
}

#[derive(Debug, Clone, PartialEq)]
pub struct MethodDef {
    /// The full selector: `foo`, `+`, `at:put:`.
    pub selector: String,
    pub params: Vec<Ident>,
    pub body: MethodBody,
    /// From the start of the pattern to the closing parenthesis.
    pub span: Span,
}

#[derive(Debug, Clone, PartialEq)]
pub enum MethodBody {
    /// `foo = primitive`: the VM supplies the implementation.
    Primitive,
    Code(Body),
}

/// The contents of a method or block: `| locals | statements`.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Body {
    pub locals: Vec<Ident>,
    pub statements: Vec<Stmt>,
    /// Where the closing `)` or `]` is: an implicit return is blamed on it.
    pub end: Span,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Stmt {
    Expr(Expr),
    /// `^ expr`; `span` covers the caret and the expression.
    Return {
        value: Expr,
        span: Span,
    },
}

#[derive(Debug, Clone, PartialEq)]
pub enum Expr {
    /// A variable read; also `self`, `super`, `nil`, `true`, `false` and globals.
    Var(Ident),
    /// `target := value`; chained assignments nest.
    Assign {
        target: Ident,
        value: Box<Expr>,
    },
    Send(Box<Send>),
    Block(Box<BlockDef>),
    Literal(Literal, Span),
}

#[derive(Debug, Clone, PartialEq)]
pub struct Send {
    /// For `super foo`, this is `Expr::Var` named `super`.
    pub receiver: Expr,
    pub selector: String,
    pub args: Vec<Expr>,
    /// The selector as written (for a keyword send, from the first keyword to the last).
    pub selector_span: Span,
}

#[derive(Debug, Clone, PartialEq)]
pub struct BlockDef {
    pub params: Vec<Ident>,
    pub body: Body,
    pub span: Span,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Literal {
    /// Fits in 64 bits (negative literals are folded in by the parser).
    Integer(i64),
    /// Does not fit in 64 bits.
    BigInteger(BigInt),
    Double(f64),
    String(String),
    Symbol(String),
    Array(Vec<Literal>),
}

impl Expr {
    /// From the first token of the expression to its last. Walks message chains in a loop, not
    /// by recursion: a chain of thousands of messages is one level of the tree per message.
    pub fn span(&self) -> Span {
        self.first_span().to(self.last_span())
    }

    fn first_span(&self) -> Span {
        let mut e = self;
        loop {
            match e {
                Expr::Send(send) => e = &send.receiver,
                Expr::Var(id) | Expr::Assign { target: id, .. } => return id.span,
                Expr::Block(block) => return block.span,
                Expr::Literal(_, span) => return *span,
            }
        }
    }

    fn last_span(&self) -> Span {
        let mut e = self;
        loop {
            match e {
                Expr::Send(send) => match send.args.last() {
                    Some(arg) => e = arg,
                    None => return send.selector_span,
                },
                Expr::Assign { value, .. } => e = value,
                Expr::Var(id) => return id.span,
                Expr::Block(block) => return block.span,
                Expr::Literal(_, span) => return *span,
            }
        }
    }
}

/// Drops message chains in a loop: the derived drop would recurse once per message of a
/// chain (`1 + 1 + … + 1` is a left-deep tree), and a long flat chain is legal SOM.
impl Drop for Send {
    fn drop(&mut self) {
        let placeholder = || Expr::Literal(Literal::Integer(0), Span::default());
        let mut next = std::mem::replace(&mut self.receiver, placeholder());
        while let Expr::Send(mut inner) = next {
            next = std::mem::replace(&mut inner.receiver, placeholder());
        }
    }
}
