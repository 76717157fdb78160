//! Recursive-descent parser for SOM class files (grammar: SOM-st/SOM `specification/SOM.g4`).
//!
//! Every error names what was expected and what was found, and points at the token found;
//! when the problem is an unclosed construct, the message also says where it was opened,
//! because that is usually where the mistake is.

use std::collections::HashMap;

use num_bigint::BigInt;

use crate::ast::*;
use crate::error::SyntaxError;
use crate::lexer::{Lexer, Token, TokenKind};
use crate::source::Source;

/// How deeply constructs may nest before the parser gives up.
///
/// Passes over the tree (the compiler, `Debug`, `PartialEq`) recurse into nested constructs, so
/// an unbounded depth would let a hostile or generated file overflow the stack of whoever
/// walks the tree. Real code nests a few dozen levels at most. Each parenthesis, block, literal
/// array, assignment and keyword message counts as a level. Unary and binary message chains
/// (`a b c d`, `1 + 2 + 3`) do not: the tree grows one level per message there, but every pass
/// walks a chain's receivers in a loop ([`crate::ast::Expr::span`], `Drop` of
/// [`crate::ast::Send`], the compiler), so a flat chain of any length is fine.
pub const MAX_NESTING_DEPTH: usize = 1000;

/// Longest accepted integer literal. Decimal-to-binary conversion of big integers takes time
/// quadratic in the number of digits (a megabyte of digits takes seconds), and no program
/// needs literals this long; Python has a similar limit (4300 digits) for the same reason.
pub const MAX_INTEGER_DIGITS: usize = 10_000;

pub(crate) struct Parser<'a> {
    source: &'a Source,
    text: &'a str,
    lexer: Lexer<'a>,
    /// The current, not yet consumed token.
    tok: Token,
    /// Depth of the tree being built, counted as [`MAX_NESTING_DEPTH`] describes.
    depth: usize,
    /// Brackets consumed and not yet closed, which is what the parser's recursion (and so its
    /// stack use) is proportional to, and the bound [`max_bracket_depth`] promised for it.
    open_brackets: usize,
    bracket_bound: usize,
}

/// What closes a body: used for the check and for messages about it.
#[derive(Clone, Copy)]
enum Closer {
    Method,
    Block,
}

impl Closer {
    fn kind(self) -> TokenKind {
        match self {
            Closer::Method => TokenKind::RParen,
            Closer::Block => TokenKind::RBracket,
        }
    }

    fn char(self) -> char {
        match self {
            Closer::Method => ')',
            Closer::Block => ']',
        }
    }

    fn what(self) -> &'static str {
        match self {
            Closer::Method => "method body",
            Closer::Block => "block",
        }
    }
}

/// The scope a declared name belongs to, for duplicate-name messages.
#[derive(Clone, Copy)]
enum Owner {
    Method,
    Block,
}

impl Owner {
    fn name(self) -> &'static str {
        match self {
            Owner::Method => "method",
            Owner::Block => "block",
        }
    }
}

type PResult<T> = Result<T, SyntaxError>;

impl<'a> Parser<'a> {
    pub fn new(source: &'a Source) -> PResult<Parser<'a>> {
        let text = source.text();
        let mut lexer = Lexer::new(text);
        let tok = lexer.next_token()?;
        Ok(Parser {
            source,
            text,
            lexer,
            tok,
            depth: 0,
            open_brackets: 0,
            bracket_bound: max_bracket_depth(text),
        })
    }

    // ---------------------------------------------------------------- token plumbing

    /// Consumes the current token and returns it.
    fn advance(&mut self) -> PResult<Token> {
        match self.tok.kind {
            TokenKind::LParen | TokenKind::LBracket | TokenKind::ArrayStart => {
                self.open_brackets += 1;
                debug_assert!(
                    self.open_brackets <= self.bracket_bound,
                    "bracket pre-scan underestimated the nesting"
                );
            }
            TokenKind::RParen | TokenKind::RBracket => {
                self.open_brackets = self.open_brackets.saturating_sub(1)
            }
            _ => {}
        }
        let next = self.lexer.next_token()?;
        Ok(std::mem::replace(&mut self.tok, next))
    }

    /// The token after the current one, if it lexes; lexing errors surface later, when the
    /// parser actually gets there.
    fn peek(&self) -> Option<Token> {
        self.lexer.clone().next_token().ok()
    }

    fn peek2(&self) -> Option<(Token, Token)> {
        let mut lexer = self.lexer.clone();
        let first = lexer.next_token().ok()?;
        let second = lexer.next_token().ok()?;
        Some((first, second))
    }

    fn slice(&self, span: Span) -> &'a str {
        &self.text[span.start as usize..span.end as usize]
    }

    fn is(&self, kind: &TokenKind) -> bool {
        &self.tok.kind == kind
    }

    fn is_operator(&self, op: &str) -> bool {
        self.tok.kind == TokenKind::Operator && self.slice(self.tok.span) == op
    }

    /// True for `|` and for operators that start with one (`||`, `|-`), which the lexer
    /// could not know to split.
    fn starts_with_bar(&self) -> bool {
        self.tok.kind == TokenKind::Operator && self.slice(self.tok.span).starts_with('|')
    }

    /// Turns an operator starting with `|` into just that bar, leaving the rest of it to be
    /// lexed again as the next token.
    fn split_bar(&mut self) {
        debug_assert!(self.starts_with_bar());
        let start = self.tok.span.start as usize;
        if self.tok.span.end as usize > start + 1 {
            self.tok.span = Span::new(start, start + 1);
            self.lexer.reset_to(start + 1);
        }
    }

    /// Consumes a single `|`, splitting it off a longer operator if needed.
    fn take_bar(&mut self) -> PResult<Token> {
        self.split_bar();
        self.advance()
    }

    fn ident(&self, tok: &Token) -> Ident {
        Ident {
            name: self.slice(tok.span).to_string(),
            span: tok.span,
        }
    }

    /// `L:C` of an offset, for "started at" in messages.
    fn at(&self, offset: u32) -> String {
        let (line, column) = self.source.line_col(offset);
        format!("{line}:{column}")
    }

    /// How a token is named in "found …".
    fn describe(&self, tok: &Token) -> String {
        if tok.kind == TokenKind::Eof {
            return "end of file".to_string();
        }
        let text = self.slice(tok.span);
        let mut shown: String = text.lines().next().unwrap_or("").chars().take(32).collect();
        if shown.len() < text.len() {
            shown.push('…');
        }
        match tok.kind {
            TokenKind::String(_) => format!("string {shown}"),
            TokenKind::Symbol(_) => format!("symbol {shown}"),
            TokenKind::Integer | TokenKind::Double => format!("number {shown}"),
            _ => format!("'{shown}'"),
        }
    }

    /// `expected {what}, found {current token}`, pointing at the current token.
    fn expected(&self, what: impl std::fmt::Display) -> SyntaxError {
        SyntaxError::new(
            format!("expected {what}, found {}", self.describe(&self.tok)),
            self.tok.span,
        )
    }

    /// Counts one more level of nesting at the current token.
    fn deeper(&mut self) -> PResult<()> {
        self.depth += 1;
        if self.depth > MAX_NESTING_DEPTH {
            return Err(SyntaxError::new(
                format!(
                    "nesting too deep: more than {MAX_NESTING_DEPTH} levels (the limit) of parentheses, blocks, literal arrays, assignments or keyword messages"
                ),
                self.tok.span,
            ));
        }
        Ok(())
    }

    pub(crate) fn expect_end(&self, after: &str) -> PResult<()> {
        if self.is(&TokenKind::Eof) {
            Ok(())
        } else {
            Err(self.expected(format_args!("the end of the file after {after}")))
        }
    }

    // ---------------------------------------------------------------- classes

    pub fn parse_class(&mut self) -> PResult<ClassDef> {
        if !self.is(&TokenKind::Ident) {
            return Err(self.expected("a class name at the start of the file"));
        }
        let name_tok = self.advance()?;
        let name = self.ident(&name_tok);
        if !self.is_operator("=") {
            return Err(self.expected(format_args!("'=' after the class name '{}'", name.name)));
        }
        self.advance()?;
        let superclass = if self.is(&TokenKind::Ident) {
            let tok = self.advance()?;
            Some(self.ident(&tok))
        } else {
            None
        };
        if !self.is(&TokenKind::LParen) {
            return Err(match &superclass {
                Some(sup) => self.expected(format_args!(
                    "'(' to start the body of class '{}' after its superclass '{}'",
                    name.name, sup.name
                )),
                None => self.expected(format_args!(
                    "a superclass name or '(' to start the body of class '{}'",
                    name.name
                )),
            });
        }
        let open = self.advance()?.span;

        let instance_fields = self.parse_fields()?;
        let instance_methods = self.parse_methods(open, true)?;
        let (class_fields, class_methods) = if self.is(&TokenKind::Separator) {
            self.advance()?;
            let fields = self.parse_fields()?;
            let methods = self.parse_methods(open, false)?;
            (fields, methods)
        } else {
            (Vec::new(), Vec::new())
        };
        // parse_methods stops only at ')' (or '----' on the instance side, consumed above).
        let close = self.advance()?.span;
        self.expect_end(&format!("the definition of class '{}'", name.name))?;
        Ok(ClassDef {
            span: name.span.to(close),
            name,
            superclass,
            instance_fields,
            instance_methods,
            class_fields,
            class_methods,
        })
    }

    /// `| a b c |` at the start of either side of a class, if present.
    ///
    /// A bar there may also start a binary method named `|` or `||` (`|| other = ( … )` in
    /// Boolean.som), which the two tokens after it tell apart: a name and then `=`.
    fn parse_fields(&mut self) -> PResult<Vec<Ident>> {
        if !self.starts_with_bar() {
            return Ok(Vec::new());
        }
        if let Some((first, second)) = self.peek2() {
            if first.kind == TokenKind::Ident
                && second.kind == TokenKind::Operator
                && self.slice(second.span) == "="
            {
                return Ok(Vec::new());
            }
        }
        let open = self.take_bar()?;
        let mut fields: Vec<Ident> = Vec::new();
        // A map, not a scan of `fields`, so that thousands of fields stay linear.
        let mut seen: HashMap<&str, Span> = HashMap::new();
        loop {
            if self.is(&TokenKind::Ident) {
                let tok = self.advance()?;
                let field = self.ident(&tok);
                if let Some(first) = seen.insert(self.slice(tok.span), tok.span) {
                    return Err(SyntaxError::new(
                        format!(
                            "field '{}' is already declared in this class (at {})",
                            field.name,
                            self.at(first.start)
                        ),
                        field.span,
                    ));
                }
                fields.push(field);
            } else if self.starts_with_bar() {
                self.take_bar()?;
                return Ok(fields);
            } else {
                return Err(self.expected(format_args!(
                    "a field name or '|' to end the field declarations started at {}",
                    self.at(open.span.start)
                )));
            }
        }
    }

    /// Method definitions up to the `)` that closes the class (or `----` on the instance side).
    fn parse_methods(&mut self, class_open: Span, instance_side: bool) -> PResult<Vec<MethodDef>> {
        let mut methods = Vec::new();
        loop {
            match self.tok.kind {
                TokenKind::RParen => return Ok(methods),
                TokenKind::Separator if instance_side => return Ok(methods),
                TokenKind::Ident | TokenKind::Keyword | TokenKind::Operator => {
                    methods.push(self.parse_method_def()?);
                }
                _ => {
                    let what = if instance_side {
                        "a method definition, '----' or ')'"
                    } else {
                        "a method definition or ')'"
                    };
                    return Err(self.expected(format_args!(
                        "{what} to close the class body started at {}",
                        self.at(class_open.start)
                    )));
                }
            }
        }
    }

    // ---------------------------------------------------------------- methods

    /// `pattern = primitive` or `pattern = ( body )`.
    pub fn parse_method_def(&mut self) -> PResult<MethodDef> {
        let start = self.tok.span;
        let mut params: Vec<Ident> = Vec::new();
        let mut scope = Scope::new(Owner::Method);
        let selector = match self.tok.kind {
            TokenKind::Ident => {
                let tok = self.advance()?;
                self.slice(tok.span).to_string()
            }
            TokenKind::Operator => {
                let tok = self.advance()?;
                let selector = self.slice(tok.span).to_string();
                if !self.is(&TokenKind::Ident) {
                    return Err(self.expected(format_args!(
                        "a parameter name after the binary selector '{selector}'"
                    )));
                }
                let param = self.advance()?;
                scope.declare(self, param.span, "a parameter")?;
                params.push(self.ident(&param));
                selector
            }
            TokenKind::Keyword => {
                let mut selector = String::new();
                while self.is(&TokenKind::Keyword) {
                    let kw = self.advance()?;
                    let kw_text = self.slice(kw.span);
                    selector.push_str(kw_text);
                    if !self.is(&TokenKind::Ident) {
                        return Err(
                            self.expected(format_args!("a parameter name after '{kw_text}'"))
                        );
                    }
                    let tok = self.advance()?;
                    scope.declare(self, tok.span, "a parameter")?;
                    params.push(self.ident(&tok));
                }
                selector
            }
            _ => return Err(self.expected("a method definition")),
        };
        if !self.is_operator("=") {
            return Err(self.expected(format_args!("'=' after the method pattern '{selector}'")));
        }
        self.advance()?;
        if self.is(&TokenKind::Ident) && self.slice(self.tok.span) == "primitive" {
            let end = self.advance()?.span;
            return Ok(MethodDef {
                selector,
                params,
                body: MethodBody::Primitive,
                span: start.to(end),
            });
        }
        if !self.is(&TokenKind::LParen) {
            return Err(self.expected(format_args!(
                "'(' or 'primitive' after '=' in the definition of '{selector}'"
            )));
        }
        let open = self.advance()?.span;
        let body = self.parse_body(open, Closer::Method, scope)?;
        let span = start.to(body.end);
        Ok(MethodDef {
            selector,
            params,
            body: MethodBody::Code(body),
            span,
        })
    }

    // ---------------------------------------------------------------- bodies

    /// `| locals | statements` up to and including the closer.
    fn parse_body(&mut self, open: Span, closer: Closer, scope: Scope<'a>) -> PResult<Body> {
        let locals = if self.starts_with_bar() {
            self.parse_locals(scope)?
        } else {
            Vec::new()
        };
        let mut statements = Vec::new();
        let close_kind = closer.kind();
        loop {
            if self.is(&close_kind) {
                break;
            }
            if self.is(&TokenKind::Caret) {
                let caret = self.advance()?.span;
                let value = self.parse_expression()?;
                let span = caret.to(value.span());
                statements.push(Stmt::Return { value, span });
                if self.is(&TokenKind::Period) {
                    self.advance()?;
                }
                if !self.is(&close_kind) {
                    let mut err = self.expected(format_args!(
                        "'{}' to close the {} started at {}",
                        closer.char(),
                        closer.what(),
                        self.at(open.start)
                    ));
                    err.message
                        .push_str(" (a return must be the last statement)");
                    return Err(err);
                }
                break;
            }
            if !self.starts_primary() {
                return Err(self.expected(format_args!(
                    "a statement or '{}' to close the {} started at {}",
                    closer.char(),
                    closer.what(),
                    self.at(open.start)
                )));
            }
            statements.push(Stmt::Expr(self.parse_expression()?));
            if self.is(&TokenKind::Period) {
                self.advance()?;
            } else if !self.is(&close_kind) {
                return Err(self.expected(format_args!(
                    "'.' or '{}' to close the {} started at {}",
                    closer.char(),
                    closer.what(),
                    self.at(open.start)
                )));
            }
        }
        let end = self.advance()?.span;
        Ok(Body {
            locals,
            statements,
            end,
        })
    }

    /// `| a b |`; the current token starts with a bar.
    fn parse_locals(&mut self, mut scope: Scope<'a>) -> PResult<Vec<Ident>> {
        let open = self.take_bar()?;
        let mut locals: Vec<Ident> = Vec::new();
        loop {
            if self.is(&TokenKind::Ident) {
                let tok = self.advance()?;
                scope.declare(self, tok.span, "a local variable")?;
                locals.push(self.ident(&tok));
            } else if self.starts_with_bar() {
                self.take_bar()?;
                return Ok(locals);
            } else {
                return Err(self.expected(format_args!(
                    "a local variable name or '|' to end the declarations started at {}",
                    self.at(open.span.start)
                )));
            }
        }
    }

    /// `[ :a :b | body ]`; the current token is the `[`.
    fn parse_block(&mut self) -> PResult<BlockDef> {
        let open = self.advance()?.span;
        let mut params: Vec<Ident> = Vec::new();
        let mut scope = Scope::new(Owner::Block);
        // `[:a:b | …]` lexes as `:`, keyword `a:`, `b`: the keyword's colon introduces the
        // next parameter.
        let mut pending_colon = false;
        loop {
            if self.is(&TokenKind::Colon) {
                self.advance()?;
            } else if !pending_colon {
                break;
            }
            pending_colon = false;
            let param = match self.tok.kind {
                TokenKind::Ident => {
                    let tok = self.advance()?;
                    self.ident(&tok)
                }
                TokenKind::Keyword => {
                    let tok = self.advance()?;
                    pending_colon = true;
                    let span = Span {
                        start: tok.span.start,
                        end: tok.span.end - 1,
                    };
                    Ident {
                        name: self.slice(span).to_string(),
                        span,
                    }
                }
                _ => return Err(self.expected("a block parameter name after ':'")),
            };
            scope.declare(self, param.span, "a parameter")?;
            params.push(param);
        }
        if !params.is_empty() {
            if !self.starts_with_bar() {
                return Err(self.expected(format_args!(
                    "'|' after the parameters of the block started at {}",
                    self.at(open.start)
                )));
            }
            self.take_bar()?;
        }
        let body = self.parse_body(open, Closer::Block, scope)?;
        let span = open.to(body.end);
        Ok(BlockDef { params, body, span })
    }

    // ---------------------------------------------------------------- expressions

    /// `a := b := evaluation`.
    fn parse_expression(&mut self) -> PResult<Expr> {
        let saved = self.depth;
        let mut targets = Vec::new();
        while self.is(&TokenKind::Ident)
            && self
                .peek()
                .is_some_and(|next| next.kind == TokenKind::Assign)
        {
            self.deeper()?;
            let tok = self.advance()?;
            targets.push(self.ident(&tok));
            self.advance()?; // :=
        }
        let Some(primary) = self.parse_primary()? else {
            return Err(match targets.last() {
                Some(target) => {
                    self.expected(format_args!("an expression after '{} :='", target.name))
                }
                None => self.expected("an expression"),
            });
        };
        let mut expr = self.parse_messages(primary)?;
        for target in targets.into_iter().rev() {
            expr = Expr::Assign {
                target,
                value: Box::new(expr),
            };
        }
        self.depth = saved;
        Ok(expr)
    }

    /// Unary messages, then binary messages, then at most one keyword message.
    fn parse_messages(&mut self, receiver: Expr) -> PResult<Expr> {
        let mut expr = self.parse_unary_messages(receiver)?;
        expr = self.parse_binary_messages(expr)?;
        if self.is(&TokenKind::Keyword) {
            self.deeper()?;
            let mut selector = String::new();
            let mut args = Vec::new();
            let first = self.tok.span;
            let mut last = first;
            while self.is(&TokenKind::Keyword) {
                let kw = self.advance()?;
                last = kw.span;
                let kw_text = self.slice(kw.span);
                selector.push_str(kw_text);
                let saved = self.depth;
                let Some(arg) = self.parse_primary()? else {
                    return Err(
                        self.expected(format_args!("an argument after keyword '{kw_text}'"))
                    );
                };
                let arg = self.parse_unary_messages(arg)?;
                let arg = self.parse_binary_messages(arg)?;
                self.depth = saved;
                args.push(arg);
            }
            expr = Expr::Send(Box::new(Send {
                receiver: expr,
                selector,
                args,
                selector_span: first.to(last),
            }));
        }
        Ok(expr)
    }

    fn parse_unary_messages(&mut self, mut expr: Expr) -> PResult<Expr> {
        while self.is(&TokenKind::Ident) {
            let tok = self.advance()?;
            expr = Expr::Send(Box::new(Send {
                receiver: expr,
                selector: self.slice(tok.span).to_string(),
                args: Vec::new(),
                selector_span: tok.span,
            }));
        }
        Ok(expr)
    }

    fn parse_binary_messages(&mut self, mut expr: Expr) -> PResult<Expr> {
        while self.is(&TokenKind::Operator) {
            let op = self.advance()?;
            let selector = self.slice(op.span);
            let saved = self.depth;
            let Some(operand) = self.parse_primary()? else {
                return Err(self.expected(format_args!(
                    "an operand after the binary selector '{selector}'"
                )));
            };
            let operand = self.parse_unary_messages(operand)?;
            self.depth = saved;
            expr = Expr::Send(Box::new(Send {
                receiver: expr,
                selector: selector.to_string(),
                args: vec![operand],
                selector_span: op.span,
            }));
        }
        Ok(expr)
    }

    /// Whether the current token can start a primary (and so an expression).
    fn starts_primary(&self) -> bool {
        match self.tok.kind {
            TokenKind::Ident
            | TokenKind::LParen
            | TokenKind::LBracket
            | TokenKind::Integer
            | TokenKind::Double
            | TokenKind::String(_)
            | TokenKind::Symbol(_)
            | TokenKind::ArrayStart => true,
            TokenKind::Operator => self.negative_number_follows(),
            _ => false,
        }
    }

    /// A `-` immediately followed by a number is a negative literal wherever a primary can
    /// stand (`-5 abs`, `x - -4`, `at: -1`); with a space in between it is not.
    fn negative_number_follows(&self) -> bool {
        self.is_operator("-")
            && self.peek().is_some_and(|next| {
                matches!(next.kind, TokenKind::Integer | TokenKind::Double)
                    && next.span.start == self.tok.span.end
            })
    }

    /// A variable, `( expression )`, a block or a literal; `None` (nothing consumed) when the
    /// current token cannot start one, so that the caller can say what it needed.
    fn parse_primary(&mut self) -> PResult<Option<Expr>> {
        let saved = self.depth;
        let expr = match &self.tok.kind {
            TokenKind::Ident => {
                let tok = self.advance()?;
                Expr::Var(self.ident(&tok))
            }
            TokenKind::LParen => {
                self.deeper()?;
                let open = self.advance()?.span;
                let inner = self.parse_expression()?;
                if !self.is(&TokenKind::RParen) {
                    return Err(self.expected(format_args!(
                        "')' to close the parenthesis opened at {}",
                        self.at(open.start)
                    )));
                }
                self.advance()?;
                inner
            }
            TokenKind::LBracket => {
                self.deeper()?;
                Expr::Block(Box::new(self.parse_block()?))
            }
            TokenKind::Integer | TokenKind::Double => {
                let tok = self.advance()?;
                Expr::Literal(self.number(&tok, None)?, tok.span)
            }
            TokenKind::Operator if self.negative_number_follows() => {
                let minus = self.advance()?;
                let tok = self.advance()?;
                let span = minus.span.to(tok.span);
                Expr::Literal(self.number(&tok, Some(span))?, span)
            }
            TokenKind::String(_) => {
                let tok = self.advance()?;
                let TokenKind::String(value) = tok.kind else {
                    unreachable!()
                };
                Expr::Literal(Literal::String(value), tok.span)
            }
            TokenKind::Symbol(_) => {
                let tok = self.advance()?;
                let TokenKind::Symbol(value) = tok.kind else {
                    unreachable!()
                };
                Expr::Literal(Literal::Symbol(value), tok.span)
            }
            TokenKind::ArrayStart => {
                let (literal, span) = self.parse_literal_array()?;
                Expr::Literal(literal, span)
            }
            _ => return Ok(None),
        };
        self.depth = saved;
        Ok(Some(expr))
    }

    // ---------------------------------------------------------------- literals

    /// Converts a number token; `negative` is the span of `-` and the number when there is a
    /// minus to fold in.
    ///
    /// The sign is applied before choosing the representation so that `-9223372036854775808`
    /// is an `Integer`, not a `BigInteger`.
    fn number(&self, tok: &Token, negative: Option<Span>) -> PResult<Literal> {
        let digits = self.slice(tok.span);
        let span = negative.unwrap_or(tok.span);
        if tok.kind == TokenKind::Double {
            let value: f64 = digits
                .parse()
                .map_err(|_| SyntaxError::new(format!("invalid number {digits}"), span))?;
            if !value.is_finite() {
                return Err(SyntaxError::new(
                    format!("number {digits} is too large for a double"),
                    span,
                ));
            }
            return Ok(Literal::Double(if negative.is_some() {
                -value
            } else {
                value
            }));
        }
        if digits.len() > MAX_INTEGER_DIGITS {
            return Err(SyntaxError::new(
                format!(
                    "integer literal with {} digits is too long (at most {MAX_INTEGER_DIGITS} digits)",
                    digits.len()
                ),
                span,
            ));
        }
        let signed = if negative.is_some() {
            format!("-{digits}")
        } else {
            digits.to_string()
        };
        if let Ok(value) = signed.parse::<i64>() {
            return Ok(Literal::Integer(value));
        }
        match signed.parse::<BigInt>() {
            Ok(value) => Ok(Literal::BigInteger(value)),
            Err(_) => Err(SyntaxError::new(format!("invalid number {signed}"), span)),
        }
    }

    /// `#( … )` (current token `#(`) or, nested inside one, a bare `( … )`.
    ///
    /// Elements are numbers, strings, symbols and arrays; as in Smalltalk-80, bare names,
    /// keywords and binary selectors are symbols (`#(foo at:put: +)` = `#(#foo #at:put: #+)`).
    /// `true`, `false` and `nil` are rejected: readers expect the objects, but the AST can only
    /// hold literals, and quietly making them symbols would be a trap.
    fn parse_literal_array(&mut self) -> PResult<(Literal, Span)> {
        self.deeper()?;
        let open = self.advance()?.span;
        let mut elements = Vec::new();
        loop {
            match &self.tok.kind {
                TokenKind::RParen => break,
                TokenKind::Integer | TokenKind::Double => {
                    let tok = self.advance()?;
                    elements.push(self.number(&tok, None)?);
                }
                TokenKind::Operator if self.negative_number_follows() => {
                    let minus = self.advance()?;
                    let tok = self.advance()?;
                    elements.push(self.number(&tok, Some(minus.span.to(tok.span)))?);
                }
                TokenKind::Operator => {
                    let tok = self.advance()?;
                    elements.push(Literal::Symbol(self.slice(tok.span).to_string()));
                }
                TokenKind::String(_) | TokenKind::Symbol(_) => {
                    let tok = self.advance()?;
                    elements.push(match tok.kind {
                        TokenKind::String(value) => Literal::String(value),
                        TokenKind::Symbol(value) => Literal::Symbol(value),
                        _ => unreachable!(),
                    });
                }
                TokenKind::ArrayStart | TokenKind::LParen => {
                    let saved = self.depth;
                    let (nested, _) = self.parse_literal_array()?;
                    self.depth = saved;
                    elements.push(nested);
                }
                TokenKind::Ident => {
                    let name = self.slice(self.tok.span);
                    if matches!(name, "true" | "false" | "nil") {
                        return Err(SyntaxError::new(
                            format!(
                                "'{name}' is not allowed in a literal array: SOM literal arrays hold only numbers, strings, symbols and arrays (write #{name} for the symbol)"
                            ),
                            self.tok.span,
                        ));
                    }
                    self.advance()?;
                    elements.push(Literal::Symbol(name.to_string()));
                }
                TokenKind::Keyword => {
                    // Adjacent keywords form one selector: `at:put:`.
                    let first = self.advance()?;
                    let mut end = first.span.end;
                    while self.is(&TokenKind::Keyword) && self.tok.span.start == end {
                        end = self.advance()?.span.end;
                    }
                    let name = self.slice(Span {
                        start: first.span.start,
                        end,
                    });
                    elements.push(Literal::Symbol(name.to_string()));
                }
                _ => {
                    return Err(self.expected(format_args!(
                        "a literal or ')' to close the literal array started at {}",
                        self.at(open.start)
                    )))
                }
            }
        }
        let close = self.advance()?.span;
        Ok((Literal::Array(elements), open.to(close)))
    }
}

/// An upper bound on how deeply brackets (`(`, `[`, `#(`) nest in `text` as the parser will
/// see them, found by a quick scan that skips comments and strings like the lexer does.
///
/// The parser recurses only into brackets, so this bounds its stack use before it starts,
/// which lets [`crate::parse_class`] run ordinary files on the caller's stack.
pub(crate) fn max_bracket_depth(text: &str) -> usize {
    let bytes = text.as_bytes();
    let (mut depth, mut max, mut i) = (0usize, 0usize, 0usize);
    while i < bytes.len() {
        match bytes[i] {
            b'(' | b'[' => {
                depth += 1;
                max = max.max(depth);
            }
            b')' | b']' => depth = depth.saturating_sub(1),
            b'"' => match bytes[i + 1..].iter().position(|&b| b == b'"') {
                Some(len) => i += len + 1,
                None => break,
            },
            b'\'' => {
                i += 1;
                while i < bytes.len() && bytes[i] != b'\'' {
                    i += if bytes[i] == b'\\' { 2 } else { 1 };
                }
            }
            _ => {}
        }
        i += 1;
    }
    max
}

/// The names declared by one method or block (parameters, then locals), to reject a name
/// declared twice in one scope, as SOM VMs do (IntegrationTests/call2.som): the second would be
/// unreachable. Shadowing a name of an enclosing scope is allowed. A map rather than a scan of
/// the lists keeps thousands of declarations linear.
struct Scope<'a> {
    owner: Owner,
    /// Where each name was first declared, and as what.
    names: HashMap<&'a str, (Span, &'static str)>,
}

impl<'a> Scope<'a> {
    fn new(owner: Owner) -> Scope<'a> {
        Scope {
            owner,
            names: HashMap::new(),
        }
    }

    fn declare(&mut self, parser: &Parser<'a>, span: Span, kind: &'static str) -> PResult<()> {
        let name = parser.slice(span);
        match self.names.insert(name, (span, kind)) {
            Some((first, first_kind)) => Err(SyntaxError::new(
                format!(
                    "'{name}' is already declared as {first_kind} of this {} (at {})",
                    self.owner.name(),
                    parser.at(first.start)
                ),
                span,
            )),
            None => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::max_bracket_depth;

    #[test]
    fn bracket_prescan_skips_comments_and_strings() {
        assert_eq!(max_bracket_depth(""), 0);
        assert_eq!(max_bracket_depth("Foo = ( m = ( [ #( 1 ) ] ) )"), 4);
        assert_eq!(max_bracket_depth("( ) ( ) [ ]"), 1);
        assert_eq!(max_bracket_depth("\"(((\" ( '[[[' )"), 1);
        assert_eq!(max_bracket_depth(r"( 'it\'s (' ( ) )"), 2);
        assert_eq!(max_bracket_depth(r"( '\\' ( ) )"), 2);
        assert_eq!(max_bracket_depth("#'(' ("), 1);
        // Stray closers cannot hide later openers.
        assert_eq!(max_bracket_depth(") ) ) ( ("), 2);
        // Unterminated comments and strings end the scan (the lexer stops there too).
        assert_eq!(max_bracket_depth("( \"((("), 1);
        assert_eq!(max_bracket_depth("( '(((\\"), 1);
    }
}
