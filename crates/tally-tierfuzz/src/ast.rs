//! A generated program as a tree: what the generator builds, the shrinker cuts down and the
//! printer writes out as SOM source, one file per class.
//!
//! The tree is deliberately plain (names as strings, every send a `Send`), so the shrinker can
//! treat all statements and expressions alike without knowing what the generator meant.

use std::fmt::Write as _;

/// The class every program starts in: the runner runs `Main.som`.
pub const MAIN_CLASS: &str = "Main";

#[derive(Clone, Debug, PartialEq)]
pub struct Program {
    pub classes: Vec<Class>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Class {
    pub name: String,
    /// `None` is Object.
    pub superclass: Option<String>,
    pub fields: Vec<String>,
    pub methods: Vec<Method>,
    pub class_fields: Vec<String>,
    pub class_methods: Vec<Method>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Method {
    /// `run`, `+`, `at:put:`.
    pub selector: String,
    pub params: Vec<String>,
    pub locals: Vec<String>,
    pub body: Vec<Stmt>,
}

#[derive(Clone, Debug, PartialEq)]
pub enum Stmt {
    Expr(Expr),
    Return(Expr),
}

#[derive(Clone, Debug, PartialEq)]
pub enum Expr {
    Lit(Lit),
    /// A local, argument, field, pseudo-variable (`self`, `super`, `nil`, `true`, `false`)
    /// or global.
    Var(String),
    Assign(String, Box<Expr>),
    Send(Box<Expr>, String, Vec<Expr>),
    Block(Box<Block>),
}

#[derive(Clone, Debug, PartialEq)]
pub struct Block {
    pub params: Vec<String>,
    pub locals: Vec<String>,
    pub body: Vec<Stmt>,
}

#[derive(Clone, Debug, PartialEq)]
pub enum Lit {
    Int(i128),
    /// Kept as the text the generator chose (`1.0e300`, `-0.5`): SOM's literal syntax.
    Double(String),
    Str(String),
    Sym(String),
    Array(Vec<Lit>),
}

/// Shorthands the generator and the shrinker build trees with.
pub fn var(name: &str) -> Expr {
    Expr::Var(name.to_string())
}

pub fn int(n: i128) -> Expr {
    Expr::Lit(Lit::Int(n))
}

pub fn double(text: &str) -> Expr {
    Expr::Lit(Lit::Double(text.to_string()))
}

pub fn string(text: &str) -> Expr {
    Expr::Lit(Lit::Str(text.to_string()))
}

pub fn symbol(text: &str) -> Expr {
    Expr::Lit(Lit::Sym(text.to_string()))
}

pub fn send(receiver: Expr, selector: &str, args: Vec<Expr>) -> Expr {
    Expr::Send(Box::new(receiver), selector.to_string(), args)
}

pub fn unary(receiver: Expr, selector: &str) -> Expr {
    send(receiver, selector, Vec::new())
}

pub fn binary(receiver: Expr, selector: &str, arg: Expr) -> Expr {
    send(receiver, selector, vec![arg])
}

pub fn assign(name: &str, value: Expr) -> Expr {
    Expr::Assign(name.to_string(), Box::new(value))
}

pub fn block(params: &[&str], locals: &[&str], body: Vec<Stmt>) -> Expr {
    Expr::Block(Box::new(Block {
        params: params.iter().map(|p| p.to_string()).collect(),
        locals: locals.iter().map(|l| l.to_string()).collect(),
        body,
    }))
}

/// A block whose body is one expression, its value.
pub fn block_of(params: &[&str], value: Expr) -> Expr {
    block(params, &[], vec![Stmt::Expr(value)])
}

impl Program {
    /// Each class's source, by file name (`Main.som`, …).
    pub fn sources(&self) -> Vec<(String, String)> {
        self.classes
            .iter()
            .map(|c| (format!("{}.som", c.name), c.source()))
            .collect()
    }

    /// All classes in one text, for reports.
    pub fn listing(&self) -> String {
        self.sources()
            .into_iter()
            .map(|(_, s)| s)
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// Statements and expressions in the whole program: the size the shrinker reduces.
    pub fn size(&self) -> usize {
        let mut n = 0;
        for class in &self.classes {
            for m in class.methods.iter().chain(&class.class_methods) {
                n += 1 + body_size(&m.body);
            }
        }
        n
    }
}

fn body_size(body: &[Stmt]) -> usize {
    body.iter()
        .map(|s| match s {
            Stmt::Expr(e) | Stmt::Return(e) => 1 + expr_size(e),
        })
        .sum()
}

fn expr_size(e: &Expr) -> usize {
    match e {
        Expr::Lit(_) | Expr::Var(_) => 1,
        Expr::Assign(_, v) => 1 + expr_size(v),
        Expr::Send(r, _, args) => 1 + expr_size(r) + args.iter().map(expr_size).sum::<usize>(),
        Expr::Block(b) => 1 + body_size(&b.body),
    }
}

impl Class {
    pub fn source(&self) -> String {
        let mut s = String::new();
        match &self.superclass {
            Some(sup) => writeln!(s, "{} = {} (", self.name, sup).unwrap(),
            None => writeln!(s, "{} = (", self.name).unwrap(),
        }
        if !self.fields.is_empty() {
            writeln!(s, "    | {} |", self.fields.join(" ")).unwrap();
        }
        for m in &self.methods {
            m.write(&mut s);
        }
        if !self.class_fields.is_empty() || !self.class_methods.is_empty() {
            writeln!(s, "    ----").unwrap();
            if !self.class_fields.is_empty() {
                writeln!(s, "    | {} |", self.class_fields.join(" ")).unwrap();
            }
            for m in &self.class_methods {
                m.write(&mut s);
            }
        }
        writeln!(s, ")").unwrap();
        s
    }
}

impl Method {
    fn write(&self, s: &mut String) {
        write!(s, "\n    {} = (", pattern(&self.selector, &self.params)).unwrap();
        if !self.locals.is_empty() {
            write!(s, "\n        | {} |", self.locals.join(" ")).unwrap();
        }
        for (i, stmt) in self.body.iter().enumerate() {
            s.push_str("\n        ");
            write_stmt(s, stmt, 2);
            if i + 1 < self.body.len() {
                s.push('.');
            }
        }
        s.push_str("\n    )\n");
    }
}

fn pattern(selector: &str, params: &[String]) -> String {
    if params.is_empty() {
        selector.to_string()
    } else if is_binary(selector) {
        format!("{selector} {}", params[0])
    } else {
        keywords(selector)
            .zip(params)
            .map(|(k, p)| format!("{k} {p}"))
            .collect::<Vec<_>>()
            .join(" ")
    }
}

fn is_binary(selector: &str) -> bool {
    !selector.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
}

/// `at:put:` → `at:`, `put:`.
fn keywords(selector: &str) -> impl Iterator<Item = &str> {
    selector.split_inclusive(':')
}

fn write_stmt(s: &mut String, stmt: &Stmt, indent: usize) {
    match stmt {
        Stmt::Expr(e) => write_expr(s, e, indent),
        Stmt::Return(e) => {
            s.push('^');
            write_expr(s, e, indent);
        }
    }
}

/// Writes `e`; nested sends and assignments are parenthesized wherever they are a receiver or
/// an argument, so precedence never changes what the tree says.
fn write_expr(s: &mut String, e: &Expr, indent: usize) {
    match e {
        Expr::Lit(l) => write_lit(s, l),
        Expr::Var(v) => s.push_str(v),
        Expr::Assign(name, value) => {
            write!(s, "{name} := ").unwrap();
            write_expr(s, value, indent);
        }
        Expr::Send(receiver, selector, args) => {
            write_operand(s, receiver, indent);
            if args.is_empty() {
                write!(s, " {selector}").unwrap();
            } else if is_binary(selector) {
                write!(s, " {selector} ").unwrap();
                write_operand(s, &args[0], indent);
            } else {
                for (k, arg) in keywords(selector).zip(args) {
                    write!(s, " {k} ").unwrap();
                    write_operand(s, arg, indent);
                }
            }
        }
        Expr::Block(b) => write_block(s, b, indent),
    }
}

fn write_operand(s: &mut String, e: &Expr, indent: usize) {
    let bare = match e {
        Expr::Send(..) | Expr::Assign(..) => false,
        // Negative literals too: `x - (-1)`, `(-1) abs` leave no doubt about the minus.
        Expr::Lit(Lit::Int(n)) => *n >= 0,
        Expr::Lit(Lit::Double(t)) => !t.starts_with('-'),
        _ => true,
    };
    if bare {
        write_expr(s, e, indent);
    } else {
        s.push('(');
        write_expr(s, e, indent);
        s.push(')');
    }
}

fn write_block(s: &mut String, b: &Block, indent: usize) {
    s.push('[');
    for p in &b.params {
        write!(s, " :{p}").unwrap();
    }
    if !b.params.is_empty() {
        s.push_str(" |");
    }
    if !b.locals.is_empty() {
        write!(s, " | {} |", b.locals.join(" ")).unwrap();
    }
    let long = b.body.len() > 1 || body_size(&b.body) > 12;
    for (i, stmt) in b.body.iter().enumerate() {
        if long {
            s.push('\n');
            s.push_str(&"    ".repeat(indent + 1));
        } else {
            s.push(' ');
        }
        write_stmt(s, stmt, indent + 1);
        if i + 1 < b.body.len() {
            s.push('.');
        }
    }
    if long {
        s.push('\n');
        s.push_str(&"    ".repeat(indent));
        s.push(']');
    } else {
        s.push_str(" ]");
    }
}

fn write_lit(s: &mut String, l: &Lit) {
    match l {
        Lit::Int(n) => write!(s, "{n}").unwrap(),
        Lit::Double(t) => s.push_str(t),
        Lit::Str(t) => write!(s, "'{}'", t.replace('\'', "\\'")).unwrap(),
        Lit::Sym(t) => write!(s, "#{t}").unwrap(),
        Lit::Array(items) => {
            s.push_str("#(");
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    s.push(' ');
                }
                write_lit(s, item);
            }
            s.push(')');
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nested_sends_are_parenthesized_and_keywords_interleave_their_arguments() {
        let e = send(
            binary(var("a"), "+", int(-1)),
            "at:put:",
            vec![unary(var("i"), "abs"), block_of(&["x"], var("x"))],
        );
        let mut s = String::new();
        write_expr(&mut s, &e, 0);
        assert_eq!(s, "(a + (-1)) at: (i abs) put: [ :x | x ]");
    }

    #[test]
    fn a_class_prints_its_fields_methods_and_class_side() {
        let class = Class {
            name: "K".into(),
            superclass: Some("B".into()),
            fields: vec!["x".into()],
            methods: vec![Method {
                selector: "at:put:".into(),
                params: vec!["i".into(), "v".into()],
                locals: vec![],
                body: vec![Stmt::Return(var("v"))],
            }],
            class_fields: vec![],
            class_methods: vec![Method {
                selector: "make".into(),
                params: vec![],
                locals: vec!["t".into()],
                body: vec![Stmt::Return(unary(var("self"), "new"))],
            }],
        };
        assert_eq!(
            class.source(),
            "K = B (\n    | x |\n\n    at: i put: v = (\n        ^v\n    )\n    ----\n\n    make = (\n        | t |\n        ^self new\n    )\n)\n"
        );
    }
}
