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
//! * `x:=1` (no spaces) is an assignment, and `3*-4` is `3 * -4`;
//! * a name declared twice in one scope (fields of one side of a class, parameters and locals
//!   of one method or block) is an error.
//!
//! Nesting is bounded by [`MAX_NESTING_DEPTH`] so that no input can overflow the stack here or
//! in later passes over the tree.

pub mod ast;
mod error;
mod lexer;
mod parser;
mod source;

pub use error::SyntaxError;
pub use parser::{MAX_INTEGER_DIGITS, MAX_NESTING_DEPTH};
pub use source::{Source, SourceError};

/// Parses a whole class file: `Name = Super ( fields methods ---- class-fields class-methods )`.
pub fn parse_class(source: &Source) -> Result<ast::ClassDef, SyntaxError> {
    on_parser_stack(|| parser::Parser::new(source)?.parse_class())
}

/// Parses a single method definition (`foo: x = ( … )` or `foo = primitive`) and nothing else;
/// for tests and a REPL, where there is no surrounding class.
pub fn parse_method(source: &Source) -> Result<ast::MethodDef, SyntaxError> {
    on_parser_stack(|| {
        let mut parser = parser::Parser::new(source)?;
        let method = parser.parse_method_def()?;
        parser.expect_end("the method definition")?;
        Ok(method)
    })
}

/// Stack for the parser thread. Unoptimised builds use up to ~12 KiB per nesting level, so
/// [`MAX_NESTING_DEPTH`] levels need about 12 MiB; the rest is headroom. Only the pages
/// actually touched are backed by memory.
const PARSER_STACK_SIZE: usize = 64 << 20;

/// Runs the parser on a thread of its own with a known, large stack.
///
/// The recursive-descent parser needs stack in proportion to the nesting depth of the input,
/// and the caller's stack may be small (test threads get 2 MiB). Bounding the depth alone is
/// not enough to make every input safe whatever the calling thread; a dedicated thread is.
/// Spawning costs a few microseconds, negligible next to reading a file. If no thread can be
/// spawned, parsing runs on the caller's stack.
fn on_parser_stack<T: Send>(parse: impl Fn() -> T + Sync) -> T {
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
