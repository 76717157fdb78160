//! Snapshot tests of rendered diagnostics: the exact text a user sees for common mistakes.

use tally_syntax::{parse_class, Source};

fn render(path: &str, text: &str) -> String {
    let source = Source::new(path, text.to_string());
    match parse_class(&source) {
        Ok(class) => panic!("{path} parsed: {class:?}"),
        Err(err) => err.render(&source),
    }
}

#[test]
fn unterminated_string() {
    let text = "Foo = (\n    run = (\n        'hello println\n    )\n)\n";
    assert_eq!(
        render("string.som", text),
        "string.som:3:9: error: unterminated string: no closing ' before the end of the file
        'hello println
        ^"
    );
}

#[test]
fn unterminated_comment() {
    let text = "Foo = (\n    \"a comment that\n    never ends\n    run = ( ^ 1 )\n)\n";
    assert_eq!(
        render("comment.som", text),
        "comment.som:2:5: error: unterminated comment: no closing '\"' before the end of the file
    \"a comment that
    ^"
    );
}

#[test]
fn missing_close_paren_of_class() {
    let text = "Foo = (\n    run = (\n        ^ 1 + 2\n)\n";
    assert_eq!(
        render("paren.som", text),
        "paren.som:5:1: error: expected a method definition, '----' or ')' to close the class body started at 1:7, found end of file

^"
    );
}

#[test]
fn missing_close_paren_in_expression() {
    let text = "Foo = (\n    run = (\n        | x |\n        x := (1 + 2.\n        ^ x\n    )\n)\n";
    assert_eq!(
        render("expr.som", text),
        "expr.som:4:20: error: expected ')' to close the parenthesis opened at 4:14, found '.'
        x := (1 + 2.
                   ^"
    );
}

#[test]
fn statement_after_return() {
    let text = "Foo = (\n  run = (\n    ^ 1.\n    self foo\n  )\n)\n";
    assert_eq!(
        render("ret.som", text),
        "ret.som:4:5: error: expected ')' to close the method body started at 2:9, found 'self' (a return must be the last statement)
    self foo
    ^^^^"
    );
}

#[test]
fn bad_token() {
    let text = "Foo = (\n    run = ( | c | c := $a. ^ c )\n)\n";
    assert_eq!(
        render("char.som", text),
        "char.som:2:24: error: unexpected character '$' (SOM has no character literals; write a one-character string such as 'a')
    run = ( | c | c := $a. ^ c )
                       ^"
    );
}

#[test]
fn keyword_without_argument() {
    let text = "Foo = (\n    run = (\n        dict at: 1 put: .\n    )\n)\n";
    assert_eq!(
        render("kw.som", text),
        "kw.som:3:25: error: expected an argument after keyword 'put:', found '.'
        dict at: 1 put: .
                        ^"
    );
}

#[test]
fn missing_class_name() {
    let text = "\"A class without a name\"\n= Object (\n)\n";
    assert_eq!(
        render("noname.som", text),
        "noname.som:2:1: error: expected a class name at the start of the file, found '='
= Object (
^"
    );
}

#[test]
fn unexpected_end_of_file() {
    let text = "Foo = (\n    run = ( ^ self foo: ";
    assert_eq!(
        render("eof.som", text),
        "eof.som:2:25: error: expected an argument after keyword 'foo:', found end of file
    run = ( ^ self foo: 
                        ^"
    );
}

#[test]
fn missing_period_underlines_the_whole_token() {
    let text = "Foo = (\n\trun = (\n\t\tx := 1\n\t\tifTrue: [ 2 ]\n\t\ty := 3\n\t)\n)\n";
    assert_eq!(
        render("tabs.som", text),
        "tabs.som:5:5: error: expected '.' or ')' to close the method body started at 2:8, found ':='
\t\ty := 3
\t\t  ^^"
    );
}

#[test]
fn unknown_escape() {
    let text = "Foo = (\n    run = ( ^ 'tab\\q' )\n)\n";
    assert_eq!(
        render("esc.som", text),
        "esc.som:2:19: error: unknown escape sequence '\\q' in string (known: \\t \\b \\n \\r \\f \\0 \\' \\\\)
    run = ( ^ 'tab\\q' )
                  ^^"
    );
}

#[test]
fn duplicate_parameter() {
    let text = "Foo = (\n    m: arg1 m: arg1 = ( )\n)\n";
    assert_eq!(
        render("dup.som", text),
        "dup.som:2:16: error: 'arg1' is already declared as a parameter of this method (at 2:8)
    m: arg1 m: arg1 = ( )
               ^^^^"
    );
}
