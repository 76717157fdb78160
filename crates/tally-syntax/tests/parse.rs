//! Parser tests: each construct, checked through a compact printed form of the tree so that
//! precedence and nesting are visible in the expected strings, plus spans where they matter.

use num_bigint::BigInt;
use tally_syntax::ast::*;
use tally_syntax::{parse_class, parse_method, Source, SyntaxError};

// ------------------------------------------------------------------- printing

fn lit(l: &Literal) -> String {
    match l {
        Literal::Integer(i) => i.to_string(),
        Literal::BigInteger(b) => format!("{b}n"),
        Literal::Double(d) => format!("{d:?}"),
        Literal::String(s) => format!("'{s}'"),
        Literal::Symbol(s) => format!("#{s}"),
        Literal::Array(items) => {
            format!("#({})", items.iter().map(lit).collect::<Vec<_>>().join(" "))
        }
    }
}

fn expr(e: &Expr) -> String {
    match e {
        Expr::Var(id) => id.name.clone(),
        Expr::Assign { target, value } => format!("({} := {})", target.name, expr(value)),
        Expr::Send(send) => {
            let mut out = format!("({} {}", expr(&send.receiver), send.selector);
            for arg in &send.args {
                out.push(' ');
                out.push_str(&expr(arg));
            }
            out.push(')');
            out
        }
        Expr::Block(block) => {
            let params: String = block
                .params
                .iter()
                .map(|p| format!(":{} ", p.name))
                .collect();
            let bar = if block.params.is_empty() { "" } else { "| " };
            format!("[{params}{bar}{}]", body(&block.body))
        }
        Expr::Literal(l, _) => lit(l),
    }
}

fn body(b: &Body) -> String {
    let mut out = String::new();
    if !b.locals.is_empty() {
        let names: Vec<_> = b.locals.iter().map(|l| l.name.as_str()).collect();
        out.push_str(&format!("|{}| ", names.join(" ")));
    }
    let stmts: Vec<_> = b
        .statements
        .iter()
        .map(|s| match s {
            Stmt::Expr(e) => expr(e),
            Stmt::Return { value, .. } => format!("^{}", expr(value)),
        })
        .collect();
    out.push_str(&stmts.join(". "));
    out
}

fn src(text: &str) -> Source {
    Source::new("test.som", text.to_string())
}

fn method(text: &str) -> MethodDef {
    let source = src(text);
    parse_method(&source).unwrap_or_else(|e| panic!("{}", e.render(&source)))
}

fn method_err(text: &str) -> SyntaxError {
    match parse_method(&src(text)) {
        Ok(m) => panic!("{text:?} parsed: {m:?}"),
        Err(e) => e,
    }
}

/// The printed body of `t = ( CODE )`.
fn code(text: &str) -> String {
    match method(&format!("t = ( {text} )")).body {
        MethodBody::Code(b) => body(&b),
        MethodBody::Primitive => panic!("primitive"),
    }
}

fn code_err(text: &str) -> String {
    method_err(&format!("t = ( {text} )")).message
}

fn class(text: &str) -> ClassDef {
    let source = src(text);
    parse_class(&source).unwrap_or_else(|e| panic!("{}", e.render(&source)))
}

fn class_err(text: &str) -> SyntaxError {
    match parse_class(&src(text)) {
        Ok(c) => panic!("{text:?} parsed: {c:?}"),
        Err(e) => e,
    }
}

fn slice(text: &str, span: Span) -> &str {
    &text[span.start as usize..span.end as usize]
}

// ------------------------------------------------------------------- messages

#[test]
fn message_precedence() {
    assert_eq!(code("a b c"), "((a b) c)");
    assert_eq!(code("a + b * c"), "((a + b) * c)");
    assert_eq!(
        code("a b c + d e * f g: h i + j k: l"),
        "(((((a b) c) + (d e)) * f) g:k: ((h i) + j) l)"
    );
    assert_eq!(code("a at: (b at: c) put: d"), "(a at:put: (b at: c) d)");
    assert_eq!(code("(a b: c) d"), "((a b: c) d)");
    assert_eq!(
        code("a foo: [ :x | x ] bar: #baz"),
        "(a foo:bar: [:x | x] #baz)"
    );
    // Keywords written without spaces are still separate keywords.
    assert_eq!(code("a at:1 put:2"), "(a at:put: 1 2)");
    assert_eq!(code("super foo"), "(super foo)");
}

#[test]
fn binary_selectors() {
    for op in [
        "<=", ">=", "~=", "==", "->", ",", "||", "&&", "|", "&", "\\\\", "@", "%", "=", "<", ">",
    ] {
        assert_eq!(code(&format!("a {op} b")), format!("(a {op} b)"), "{op}");
    }
    assert_eq!(code("a|b"), "(a | b)");
    assert_eq!(
        code("x := a | b. y := a || b"),
        "(x := (a | b)). (y := (a || b))"
    );
    assert_eq!(code("true || [ false ]"), "(true || [false])");
}

#[test]
fn minus_and_negative_literals() {
    assert_eq!(code("3 - 4"), "(3 - 4)");
    assert_eq!(code("3-4"), "(3 - 4)");
    assert_eq!(code("x - -4"), "(x - -4)");
    assert_eq!(code("x-1"), "(x - 1)");
    assert_eq!(code("a-1"), "(a - 1)");
    assert_eq!(code("x -1"), "(x - 1)");
    assert_eq!(code("3 --4"), "(3 - -4)");
    assert_eq!(code("2*-3"), "(2 * -3)");
    assert_eq!(code("-5 abs"), "(-5 abs)");
    assert_eq!(code("-5"), "-5");
    assert_eq!(code("-2.5 abs"), "(-2.5 abs)");
    assert_eq!(code("x at: -1"), "(x at: -1)");
    assert_eq!(code("0.5 - -0.5"), "(0.5 - -0.5)");
    assert_eq!(code("(-2.0 raisedTo: 8)"), "(-2.0 raisedTo: 8)");
    assert_eq!(code("x := -1"), "(x := -1)");
    // With a space, `-` is not part of a number, and a statement cannot start with it.
    assert_eq!(
        code_err("- 5"),
        "expected a statement or ')' to close the method body started at 1:5, found '-'"
    );
    assert_eq!(
        code_err("x - - 5"),
        "expected an operand after the binary selector '-', found '-'"
    );
}

#[test]
fn assignments_nest() {
    assert_eq!(code("a := b := 3"), "(a := (b := 3))");
    assert_eq!(code("a := b foo: c"), "(a := (b foo: c))");
    assert_eq!(code("a:=3"), "(a := 3)");
    assert_eq!(code("a := (b := 1) + 2"), "(a := ((b := 1) + 2))");
    assert_eq!(
        code_err("a := "),
        "expected an expression after 'a :=', found ')'"
    );
    assert_eq!(
        code_err("a := := 3"),
        "expected an expression after 'a :=', found ':='"
    );
}

#[test]
fn keyword_without_argument() {
    assert_eq!(
        code_err("x at: "),
        "expected an argument after keyword 'at:', found ')'"
    );
    assert_eq!(
        code_err("x at: 1 put: ."),
        "expected an argument after keyword 'put:', found '.'"
    );
    assert_eq!(
        code_err("x + "),
        "expected an operand after the binary selector '+', found ')'"
    );
}

#[test]
fn primitive_is_also_an_identifier() {
    assert_eq!(code("primitive foo"), "(primitive foo)");
    assert_eq!(code("x primitive"), "(x primitive)");
    assert_eq!(code("primitive := 3"), "(primitive := 3)");
    let m = method("primitive = ( ^ #primitive )");
    assert_eq!(m.selector, "primitive");
    assert!(matches!(m.body, MethodBody::Code(_)));
    let m = method("primitive: x = primitive");
    assert_eq!(m.selector, "primitive:");
    assert_eq!(m.body, MethodBody::Primitive);
}

// ------------------------------------------------------------------- literals

#[test]
fn integers() {
    assert_eq!(
        code("0. 42. 9223372036854775807"),
        "0. 42. 9223372036854775807"
    );
    let m = method("t = ( ^ 9223372036854775808 )");
    let MethodBody::Code(b) = &m.body else {
        panic!()
    };
    let Stmt::Return {
        value: Expr::Literal(Literal::BigInteger(big), _),
        ..
    } = &b.statements[0]
    else {
        panic!("{:?}", b.statements)
    };
    assert_eq!(big, &"9223372036854775808".parse::<BigInt>().unwrap());
    // The sign is folded before choosing a representation.
    assert_eq!(code("-9223372036854775808"), "-9223372036854775808");
    assert!(matches!(
        literal_of("-9223372036854775808"),
        Literal::Integer(i64::MIN)
    ));
    assert_eq!(code("-9223372036854775809"), "-9223372036854775809n");
    assert_eq!(
        code("123456789012345678901234567890 + -123456789012345678901234567890"),
        "(123456789012345678901234567890n + -123456789012345678901234567890n)"
    );
    let long = "9".repeat(10_001);
    assert_eq!(
        code_err(&long),
        "integer literal with 10001 digits is too long (at most 10000 digits)"
    );
    assert!(matches!(
        literal_of(&"9".repeat(10_000)),
        Literal::BigInteger(_)
    ));
}

fn literal_of(text: &str) -> Literal {
    let m = method(&format!("t = ( {text} )"));
    let MethodBody::Code(mut b) = m.body else {
        panic!()
    };
    match b.statements.remove(0) {
        Stmt::Expr(Expr::Literal(l, _)) => l,
        other => panic!("{other:?}"),
    }
}

#[test]
fn doubles() {
    assert_eq!(literal_of("1.5"), Literal::Double(1.5));
    assert_eq!(literal_of("-2.25"), Literal::Double(-2.25));
    assert_eq!(literal_of("1.5e10"), Literal::Double(1.5e10));
    assert_eq!(
        literal_of("1.6069380442589903e60"),
        Literal::Double(1.6069380442589903e60)
    );
    assert_eq!(literal_of("2.0e-3"), Literal::Double(0.002));
    assert_eq!(literal_of("-3.0E+2"), Literal::Double(-300.0));
    // `1.` then a non-digit: the integer 1 and a period.
    assert_eq!(code("x := 1. y := 2"), "(x := 1). (y := 2)");
    assert_eq!(code("^ 1."), "^1");
    assert_eq!(code("1.5e foo"), "((1.5 e) foo)");
    assert_eq!(
        code_err("2e-3"),
        "a number with an exponent needs a fractional part: write 2.0e-3 instead of 2e-3"
    );
    assert_eq!(
        code_err("1.0e999"),
        "number 1.0e999 is too large for a double"
    );
}

#[test]
fn strings_and_symbols() {
    assert_eq!(code(r"'a\nb' , 'c\td\\\''"), "('a\nb' , 'c\td\\'')");
    assert_eq!(code("'multi\nline'"), "'multi\nline'");
    assert_eq!(
        code("#foo. #at:put:. #+. #'hello world'. #foo:"),
        "#foo. #at:put:. #+. #hello world. #foo:"
    );
    assert_eq!(
        code("x perform: #between:and: with: 1"),
        "(x perform:with: #between:and: 1)"
    );
    // `''` is not an escape in SOM: it is one string followed by another.
    assert_eq!(
        code_err("'it''s'"),
        "expected '.' or ')' to close the method body started at 1:5, found string 's'"
    );
}

#[test]
fn literal_arrays() {
    assert_eq!(code("#()"), "#()");
    assert_eq!(code("#(1 2.5 'str' #sym)"), "#(1 2.5 'str' #sym)");
    assert_eq!(code("#(-1 -200.0 2)"), "#(-1 -200.0 2)");
    assert_eq!(
        code("#(4 5 6 'a' -7 -8.0 #(9.0 #a) #b #())"),
        "#(4 5 6 'a' -7 -8.0 #(9.0 #a) #b #())"
    );
    // Bare names, keywords and selectors are symbols; bare parentheses nest.
    assert_eq!(
        code("#(foo bar: at:put: + - ( nested 1 ))"),
        "#(#foo #bar: #at:put: #+ #- #(#nested 1))"
    );
    assert_eq!(code("#(at: put:)"), "#(#at: #put:)");
    assert_eq!(code("#(#(#(1)))"), "#(#(#(1)))");
    assert_eq!(code("#(primitive)"), "#(#primitive)");
    assert_eq!(code("#(1 \"comment\" 2)"), "#(1 2)");
    assert_eq!(
        code("#(922337203685477580700 -922337203685477580700)"),
        "#(922337203685477580700n -922337203685477580700n)"
    );
    for word in ["true", "false", "nil"] {
        assert_eq!(
            code_err(&format!("#(1 {word})")),
            format!("'{word}' is not allowed in a literal array: SOM literal arrays hold only numbers, strings, symbols and arrays (write #{word} for the symbol)")
        );
    }
    assert_eq!(
        code_err("#(1 [ 2 ])"),
        "expected a literal or ')' to close the literal array started at 1:7, found '['"
    );
    assert_eq!(
        method_err("t = ( #(1 2").message,
        "expected a literal or ')' to close the literal array started at 1:7, found end of file"
    );
}

// ------------------------------------------------------------------- blocks and bodies

#[test]
fn blocks() {
    assert_eq!(code("[]"), "[]");
    assert_eq!(code("[:a | ]"), "[:a | ]");
    assert_eq!(
        code("[:a :b | | t | t := a. t]"),
        "[:a :b | |t| (t := a). t]"
    );
    assert_eq!(code("[ | t | t ]"), "[|t| t]");
    assert_eq!(code("[:a||t| t]"), "[:a | |t| t]");
    assert_eq!(code("[:a:b| a]"), "[:a :b | a]");
    assert_eq!(code("[:a|-1]"), "[:a | -1]");
    assert_eq!(code("[:x | x | y ]"), "[:x | (x | y)]");
    assert_eq!(code("[ ^ 1 ]"), "[^1]");
    assert_eq!(code("[ 1. 2. ]"), "[1. 2]");
    assert_eq!(code("[ [ [ ] ] ]"), "[[[]]]");
    assert_eq!(
        code_err("[:a a]"),
        "expected '|' after the parameters of the block started at 1:7, found 'a'"
    );
    assert_eq!(
        code_err("[: | ]"),
        "expected a block parameter name after ':', found '|'"
    );
    assert_eq!(
        code_err("[ 1 "),
        "expected '.' or ']' to close the block started at 1:7, found ')'"
    );
}

#[test]
fn statements_and_returns() {
    assert_eq!(code(""), "");
    assert_eq!(code("| a b |"), "|a b| ");
    assert_eq!(code("||"), "");
    assert_eq!(code("| a | a"), "|a| a");
    assert_eq!(code("a. b."), "a. b");
    assert_eq!(code("^ x"), "^x");
    assert_eq!(code("^ x."), "^x");
    assert_eq!(code("a. ^ b"), "a. ^b");
    assert_eq!(
        code_err("^ a. b"),
        "expected ')' to close the method body started at 1:5, found 'b' (a return must be the last statement)"
    );
    assert_eq!(
        code_err("a b: c d: e f g := 3"),
        "expected '.' or ')' to close the method body started at 1:5, found ':='"
    );
    assert_eq!(
        code_err("a.. b"),
        "expected a statement or ')' to close the method body started at 1:5, found '.'"
    );
    assert_eq!(
        code_err("| a b"),
        "expected a local variable name or '|' to end the declarations started at 1:7, found ')'"
    );
    assert_eq!(
        code_err("(a b. c"),
        "expected ')' to close the parenthesis opened at 1:7, found '.'"
    );
    assert_eq!(
        code_err("(a b"),
        "expected '.' or ')' to close the method body started at 1:5, found end of file"
    );
}

#[test]
fn duplicate_names() {
    assert_eq!(
        method_err("m: a m: a = ( )").message,
        "'a' is already declared as a parameter of this method (at 1:4)"
    );
    assert_eq!(method_err("m: a m: a = ( )").span, Span::new(8, 9));
    assert_eq!(
        code_err("| x y x |"),
        "'x' is already declared as a local variable of this method (at 1:9)"
    );
    assert_eq!(
        method_err("m: a = ( | a | )").message,
        "'a' is already declared as a parameter of this method (at 1:4)"
    );
    assert_eq!(
        code_err("[:a :a | ]"),
        "'a' is already declared as a parameter of this block (at 1:9)"
    );
    assert_eq!(
        code_err("[:a | | a | ]"),
        "'a' is already declared as a parameter of this block (at 1:9)"
    );
    // Shadowing an enclosing scope is fine.
    assert_eq!(code("| a | [:a | | b | a ]"), "|a| [:a | |b| a]");
    let err = class_err("Foo = ( | a b a | )");
    assert_eq!(
        err.message,
        "field 'a' is already declared in this class (at 1:11)"
    );
    assert_eq!(err.span, Span::new(14, 15));
    // The two sides of a class are separate.
    let c = class("Foo = ( | a | ---- | a | )");
    assert_eq!(c.class_fields[0].name, "a");
}

// ------------------------------------------------------------------- methods

#[test]
fn method_patterns() {
    let m = method("foo = ( ^ 1 )");
    assert_eq!((m.selector.as_str(), m.params.len()), ("foo", 0));
    let m = method("at: i put: v = ( ^ v )");
    assert_eq!(m.selector, "at:put:");
    assert_eq!(
        m.params.iter().map(|p| p.name.as_str()).collect::<Vec<_>>(),
        ["i", "v"]
    );
    for op in [
        "+", "-", "=", "==", "~=", "<=", "|", "||", "&&", ",", "->", "\\\\", "@",
    ] {
        let m = method(&format!("{op} other = ( ^ other )"));
        assert_eq!(m.selector, op);
        assert_eq!(m.params[0].name, "other");
    }
    let m = method("hash = primitive");
    assert_eq!(m.body, MethodBody::Primitive);
    assert_eq!(m.span, Span::new(0, 16));
    assert_eq!(
        method_err("foo ( )").message,
        "expected '=' after the method pattern 'foo', found '('"
    );
    assert_eq!(
        method_err("foo = 3").message,
        "expected '(' or 'primitive' after '=' in the definition of 'foo', found number 3"
    );
    assert_eq!(
        method_err("at: = ( )").message,
        "expected a parameter name after 'at:', found '='"
    );
    assert_eq!(
        method_err("+ = ( )").message,
        "expected a parameter name after the binary selector '+', found '='"
    );
    assert_eq!(
        method_err("foo = ( ) bar").message,
        "expected the end of the file after the method definition, found 'bar'"
    );
    assert_eq!(
        method_err("").message,
        "expected a method definition, found end of file"
    );
}

#[test]
fn spans() {
    let text = "Foo = (\n  at: i put: v = ( ^ i foo: v bar: -3 )\n  b = ( [:x | x] )\n)";
    let c = class(text);
    assert_eq!(slice(text, c.span), text);
    assert_eq!(slice(text, c.name.span), "Foo");
    let m = &c.instance_methods[0];
    assert_eq!(slice(text, m.span), "at: i put: v = ( ^ i foo: v bar: -3 )");
    assert_eq!(slice(text, m.params[1].span), "v");
    let MethodBody::Code(b) = &m.body else {
        panic!()
    };
    assert_eq!(slice(text, b.end), ")");
    assert_eq!(b.end.start as usize, text.find(" )\n  b").unwrap() + 1);
    let Stmt::Return { value, span } = &b.statements[0] else {
        panic!()
    };
    assert_eq!(slice(text, *span), "^ i foo: v bar: -3");
    assert_eq!(slice(text, value.span()), "i foo: v bar: -3");
    let Expr::Send(send) = value else { panic!() };
    assert_eq!(slice(text, send.selector_span), "foo: v bar:");
    assert_eq!(slice(text, send.args[1].span()), "-3");

    let MethodBody::Code(b) = &c.instance_methods[1].body else {
        panic!()
    };
    let Stmt::Expr(Expr::Block(block)) = &b.statements[0] else {
        panic!()
    };
    assert_eq!(slice(text, block.span), "[:x | x]");
    assert_eq!(slice(text, block.body.end), "]");
    assert_eq!(slice(text, block.params[0].span), "x");

    let text = "t = ( a := b + c. #(1 #(2)) size. 'str' foo )";
    let m = method(text);
    let MethodBody::Code(b) = &m.body else {
        panic!()
    };
    let spans: Vec<_> = b
        .statements
        .iter()
        .map(|s| match s {
            Stmt::Expr(e) => slice(text, e.span()),
            Stmt::Return { span, .. } => slice(text, *span),
        })
        .collect();
    assert_eq!(spans, ["a := b + c", "#(1 #(2)) size", "'str' foo"]);
}

// ------------------------------------------------------------------- classes

#[test]
fn class_structure() {
    let c = class(
        "Foo = Bar ( |a b| m1 = ( ^ a ) m2: x = primitive ---- | c | m3 = ( ^ c ) + o = ( ) )",
    );
    assert_eq!(c.name.name, "Foo");
    assert_eq!(c.superclass.as_ref().unwrap().name, "Bar");
    assert_eq!(
        c.instance_fields
            .iter()
            .map(|f| f.name.as_str())
            .collect::<Vec<_>>(),
        ["a", "b"]
    );
    assert_eq!(
        c.instance_methods
            .iter()
            .map(|m| m.selector.as_str())
            .collect::<Vec<_>>(),
        ["m1", "m2:"]
    );
    assert_eq!(
        c.class_fields
            .iter()
            .map(|f| f.name.as_str())
            .collect::<Vec<_>>(),
        ["c"]
    );
    assert_eq!(
        c.class_methods
            .iter()
            .map(|m| m.selector.as_str())
            .collect::<Vec<_>>(),
        ["m3", "+"]
    );

    let c = class("Foo = ( )");
    assert_eq!(c.superclass, None);
    assert!(c.instance_fields.is_empty() && c.instance_methods.is_empty());
    let c = class("Foo = nil ( )");
    assert_eq!(c.superclass.unwrap().name, "nil");
    let c = class("Foo=(------------ x = ( ) )");
    assert_eq!(c.class_methods[0].selector, "x");
    let c = class("\"header\" Foo = ( ) \"trailer\"\n");
    assert_eq!(c.name.name, "Foo");
}

#[test]
fn bars_at_the_start_of_a_class_body() {
    // A binary method named `||` or `|` right after `(`, not fields.
    let c = class("Boolean = ( || boolean = ( ^ self or: boolean ) )");
    assert!(c.instance_fields.is_empty());
    assert_eq!(c.instance_methods[0].selector, "||");
    let c = class("B = ( | other = ( ^ other ) )");
    assert!(c.instance_fields.is_empty());
    assert_eq!(c.instance_methods[0].selector, "|");
    // Fields, including an empty list written `||` or `| |`.
    let c = class("B = ( | a | | other = ( ) )");
    assert_eq!(c.instance_fields[0].name, "a");
    assert_eq!(c.instance_methods[0].selector, "|");
    assert!(class("B = ( || )").instance_fields.is_empty());
    assert!(class("B = ( | | foo = ( ) )").instance_fields.is_empty());
    assert_eq!(
        class("B = ( ---- || a = ( ) )").class_methods[0].selector,
        "||"
    );
}

#[test]
fn class_errors() {
    assert_eq!(
        class_err("").message,
        "expected a class name at the start of the file, found end of file"
    );
    assert_eq!(
        class_err("= ( )").message,
        "expected a class name at the start of the file, found '='"
    );
    assert_eq!(
        class_err("Foo ( )").message,
        "expected '=' after the class name 'Foo', found '('"
    );
    assert_eq!(
        class_err("Foo = Bar Baz ( )").message,
        "expected '(' to start the body of class 'Foo' after its superclass 'Bar', found 'Baz'"
    );
    assert_eq!(
        class_err("Foo = 3").message,
        "expected a superclass name or '(' to start the body of class 'Foo', found number 3"
    );
    assert_eq!(
        class_err("Foo = ( ) x").message,
        "expected the end of the file after the definition of class 'Foo', found 'x'"
    );
    assert_eq!(
        class_err("Foo = ( ---- ---- )").message,
        "expected a method definition or ')' to close the class body started at 1:7, found '----'"
    );
    assert_eq!(class_err("Foo = ( 3 )").message, "expected a method definition, '----' or ')' to close the class body started at 1:7, found number 3");
    assert_eq!(
        class_err("Foo = ( | a 3 | )").message,
        "expected a field name or '|' to end the field declarations started at 1:9, found number 3"
    );
    assert_eq!(class_err("Foo = ( m = ( ^ 1 )").message, "expected a method definition, '----' or ')' to close the class body started at 1:7, found end of file");
}

// ------------------------------------------------------------------- robustness

/// Runs `f` on a thread with the small stack that test threads (and many embedders) get, so
/// that a stack-hungry parser fails here rather than in production.
fn on_small_stack<T: std::marker::Send + 'static>(
    f: impl FnOnce() -> T + std::marker::Send + 'static,
) -> T {
    std::thread::Builder::new()
        .stack_size(2 << 20)
        .spawn(f)
        .unwrap()
        .join()
        .unwrap()
}

#[test]
fn deep_nesting_within_the_limit_parses() {
    on_small_stack(|| {
        let n = 990;
        for (open, close) in [("(", ")"), ("[", "]"), ("#(", ")")] {
            let text = format!("t = ( {}1{} )", open.repeat(n), close.repeat(n));
            let source = Source::new("deep.som", text);
            parse_method(&source).unwrap_or_else(|e| panic!("{open}: {}", e.message));
        }
        let text = format!("t = ( x{} )", " foo".repeat(990));
        parse_method(&Source::new("chain.som", text)).unwrap();
        let text = format!("t = ( {}1 )", "a := ".repeat(990));
        parse_method(&Source::new("assign.som", text)).unwrap();
        let text = format!("t = ( 1{} )", " + 1".repeat(990));
        parse_method(&Source::new("sum.som", text)).unwrap();
        // Keyword arguments and statements are flat: no limit.
        let text = format!("t = ( Array{} )", " with: 1".repeat(5000));
        parse_method(&Source::new("flat.som", text)).unwrap();
    });
}

#[test]
fn moderate_nesting_parses_on_the_callers_small_stack() {
    // Up to 64 brackets deep, parsing runs on the calling thread: check that even an
    // unoptimised build fits in a small stack.
    let n = 30;
    let text = format!(
        "t = ( {}x{} )",
        "[:a | a foo: (b bar: #(#(1)) baz: ".repeat(n),
        ") ]".repeat(n)
    );
    std::thread::Builder::new()
        .stack_size(1 << 20)
        .spawn(move || parse_method(&Source::new("moderate.som", text)).unwrap())
        .unwrap()
        .join()
        .unwrap();
}

#[test]
fn excessive_nesting_is_an_error_not_a_crash() {
    on_small_stack(|| {
        let n = 100_000;
        let cases = [
            format!("t = ( {}1{} )", "(".repeat(n), ")".repeat(n)),
            format!("t = ( {}1{} )", "[".repeat(n), "]".repeat(n)),
            format!("t = ( {}", "[:a | ".repeat(n)),
            format!("t = ( #{}1{} )", "(".repeat(n), ")".repeat(n)),
            format!("t = ( {}1 )", "a := ".repeat(n)),
            format!("t = ( x{} )", " a: (b".repeat(n)),
        ];
        for text in cases {
            let source = Source::new("deep.som", text);
            let err = parse_method(&source).unwrap_err();
            assert!(
                err.message.starts_with("nesting too deep"),
                "{}",
                err.message
            );
            let (line, _) = err.line_col(&source);
            assert_eq!(line, 1);
        }
    });
}

#[test]
fn flat_message_chains_of_any_length_parse_on_a_small_stack() {
    // A chain is one tree level per message, but not nesting: every pass walks it in a loop
    // (and `Drop` of the tree too, which this test exercises on a small stack).
    on_small_stack(|| {
        let n = 100_000;
        for text in [
            format!("t = ( x{} )", " foo".repeat(n)),
            format!("t = ( 1{} )", " + 1".repeat(n)),
            format!("t = ( x{} )", " - -1".repeat(n)),
        ] {
            assert!(parse_method(&Source::new("chain.som", text)).is_ok());
        }
    });
}

#[test]
fn large_inputs_parse_in_linear_time() {
    // Quadratic behaviour would make these take minutes; linear takes milliseconds.
    let statements = "x := x + 1. y foo: 'bar' baz: #(1 2 3). ".repeat(20_000);
    let text = format!("Big = ( run = ( | x y | {statements} ) )");
    let c = parse_class(&Source::new("big.som", text)).unwrap();
    let MethodBody::Code(b) = &c.instance_methods[0].body else {
        panic!()
    };
    assert_eq!(b.statements.len(), 40_000);

    let methods = "m = ( ^ 1 ) ".repeat(20_000);
    let c = parse_class(&Source::new("many.som", format!("Many = ( {methods} )"))).unwrap();
    assert_eq!(c.instance_methods.len(), 20_000);

    let comment = format!("\"{}\" Foo = ( )", "x".repeat(1 << 20));
    parse_class(&Source::new("comment.som", comment)).unwrap();
    let string = format!("Foo = ( s = ( ^ '{}' ) )", "y".repeat(1 << 20));
    parse_class(&Source::new("string.som", string)).unwrap();
    let array = format!(
        "Foo = ( s = ( ^ #({}) ) )",
        "1 foo #bar 'x' ".repeat(20_000)
    );
    parse_class(&Source::new("array.som", array)).unwrap();
    // Declarations are checked for duplicates without comparing every pair.
    let names: String = (0..20_000).map(|i| format!(" v{i}")).collect();
    let keywords: String = (0..20_000).map(|i| format!(" k: p{i}")).collect();
    let text = format!(
        "Foo = ( |{names} | {keywords} = ( |{names} | [{}| |{names} | ] ) )",
        names.replace(" v", " :b")
    );
    let c = parse_class(&Source::new("decls.som", text)).unwrap();
    assert_eq!(c.instance_fields.len(), 20_000);
    assert_eq!(c.instance_methods[0].params.len(), 20_000);
    let bars = format!("Foo = ( s = ( {} ) )", "a || b. ".repeat(20_000));
    parse_class(&Source::new("bars.som", bars)).unwrap();
}

#[test]
fn fuzz_seeds_are_valid() {
    // The seed corpus should exercise the parser's success paths, so every seed must parse.
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/seeds");
    let Ok(entries) = std::fs::read_dir(&dir) else {
        println!("note: no fuzz seeds at {}; skipping", dir.display());
        return;
    };
    let mut count = 0;
    for entry in entries {
        let path = entry.unwrap().path();
        let source = Source::read(&path).unwrap();
        let name = path.file_name().unwrap().to_str().unwrap();
        let result = if name.starts_with("method") {
            parse_method(&source).map(drop)
        } else {
            parse_class(&source).map(drop)
        };
        if let Err(err) = result {
            panic!("{}", err.render(&source));
        }
        count += 1;
    }
    assert!(count >= 5, "only {count} seeds");
}
