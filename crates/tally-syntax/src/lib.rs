//! SOM source → syntax tree.
//!
//! The accepted language is SOM's grammar (SOM-st/SOM `specification/SOM.g4`) with a few
//! deliberate, documented extensions and restrictions, chosen so that everything the SOM
//! reference sources contain parses and so that likely mistakes are reported instead of
//! silently meaning something else:
//!
//! * doubles may have an exponent after a fractional part (`1.5e10`, `2.0e-3`); `2e-3` is an
//!   error rather than the SOM reading `2 e - 3`;
//! * unknown string escapes (`'\a'`) are errors, as in the SOM reference VMs;
//! * literal arrays also accept bare names, keywords and binary selectors as symbols and bare
//!   `( … )` as nested arrays; `true`/`false`/`nil` inside them are errors;
//! * `x:=1` (no spaces) is an assignment, `3*-4` is `3 * -4`, and `[:a:b | …]` declares two
//!   parameters (SOM's reference lexer rejects or misreads all three);
//! * a `-` is folded into a number only when it touches it (`-5`, `x - -4`), never across a
//!   space (`- 5` is not a number);
//! * a name declared twice in one scope (fields of one side of a class, parameters and locals
//!   of one method or block) is an error.
//!
//! No input can make the parser panic, overflow its stack or take more than linear time:
//! nesting is bounded by [`MAX_NESTING_DEPTH`] (which also protects later passes over the
//! tree), integer literals by [`MAX_INTEGER_DIGITS`], and deeply bracketed input is parsed on a
//! thread with a large stack.

pub mod ast;
mod error;
mod lexer;
mod parser;
mod source;

pub use error::SyntaxError;
pub use parser::{MAX_INTEGER_DIGITS, MAX_NESTING_DEPTH};
pub use source::{not_a_regular_file, Source, SourceError};

/// Parses a whole class file: `Name = Super ( fields methods ---- class-fields class-methods )`.
pub fn parse_class(source: &Source) -> Result<ast::ClassDef, SyntaxError> {
    on_parser_stack(source.text(), || parser::Parser::new(source)?.parse_class())
}

/// Parses a single method definition (`foo: x = ( … )` or `foo = primitive`) and nothing else;
/// for tests and a REPL, where there is no surrounding class.
pub fn parse_method(source: &Source) -> Result<ast::MethodDef, SyntaxError> {
    on_parser_stack(source.text(), || {
        let mut parser = parser::Parser::new(source)?;
        let method = parser.parse_method_def()?;
        parser.expect_end("the method definition")?;
        Ok(method)
    })
}

/// Bracket nesting up to which the parser runs on the caller's stack. Unoptimised builds use
/// up to ~12 KiB of stack per level, so this stays under 1 MiB even in a 2 MiB test thread;
/// real code rarely nests more than a dozen levels.
const SHALLOW_BRACKETS: usize = 64;

/// Stack for the parser thread used for deeper input: [`MAX_NESTING_DEPTH`] levels at ~12 KiB
/// need about 12 MiB; the rest is headroom. Only the pages actually touched are backed by
/// memory.
const PARSER_STACK_SIZE: usize = 64 << 20;

/// Runs the parser on the caller's stack when the input is shallow, and otherwise on a thread
/// of its own with a known, large stack.
///
/// The recursive-descent parser needs stack in proportion to the bracket nesting of the input,
/// and the caller's stack may be small (test threads get 2 MiB), so bounding the depth alone
/// does not make every input safe on every thread. A quick scan bounds the nesting up front;
/// only unusual input pays for spawning a thread (~0.1 ms). If no thread can be spawned,
/// parsing runs on the caller's stack.
fn on_parser_stack<T: Send>(text: &str, parse: impl Fn() -> T + Sync) -> T {
    if parser::max_bracket_depth(text) <= SHALLOW_BRACKETS {
        return parse();
    }
    std::thread::scope(|scope| {
        let spawned = std::thread::Builder::new()
            .name("tally-syntax parser".to_string())
            .stack_size(PARSER_STACK_SIZE)
            .spawn_scoped(scope, &parse);
        match spawned {
            Ok(handle) => handle
                .join()
                .unwrap_or_else(|panic| std::panic::resume_unwind(panic)),
            Err(_) => parse(),
        }
    })
}
