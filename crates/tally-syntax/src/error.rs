//! Syntax errors and their rendering as compiler-style diagnostics.

use crate::ast::Span;
use crate::source::Source;

/// A syntax error: what was expected and what was found, and where.
///
/// The error carries only a span, not a line number, so that it stays cheap to create; the
/// [`Source`] turns it into `file:line:column` when it is shown.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{message}")]
pub struct SyntaxError {
    pub message: String,
    pub span: Span,
}

impl SyntaxError {
    pub fn new(message: impl Into<String>, span: Span) -> SyntaxError {
        SyntaxError {
            message: message.into(),
            span,
        }
    }

    /// `file:line:column: error: message`, then the offending source line, then a caret line under the span (^^^ for the span's width on that line).
    ///
    /// The caret line copies the tabs of the source line so that the carets line up in a
    /// terminal whatever its tab width. There is no trailing newline: callers decide how to
    /// terminate it (`eprintln!`).
    pub fn render(&self, source: &Source) -> String {
        let (line, column) = source.line_col(self.span.start);
        let text = source.line_text(line);
        let before: String = text
            .chars()
            .take(column as usize - 1)
            .map(|c| if c == '\t' { '\t' } else { ' ' })
            .collect();
        let width = if self.span.end > self.span.start {
            let (end_line, end_column) = source.line_col(self.span.end);
            if end_line == line {
                end_column.saturating_sub(column)
            } else {
                // A span running onto later lines is underlined to the end of its first line.
                (text.chars().count() as u32 + 1).saturating_sub(column)
            }
        } else {
            0
        };
        let carets = "^".repeat(width.max(1) as usize);
        format!(
            "{}:{}:{}: error: {}\n{}\n{}{}",
            source.path(),
            line,
            column,
            self.message,
            text,
            before,
            carets
        )
    }

    /// Where the error starts, as 1-based line and column.
    pub fn line_col(&self, source: &Source) -> (u32, u32) {
        source.line_col(self.span.start)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_caret_under_span() {
        let src = Source::new("a.som", "Foo = (\n  bar baz\n)".to_string());
        let err = SyntaxError::new("oops", Span::new(14, 17));
        assert_eq!(
            err.render(&src),
            "a.som:2:7: error: oops\n  bar baz\n      ^^^"
        );
    }

    #[test]
    fn keeps_tabs_so_carets_align() {
        let src = Source::new("a.som", "\t\tx := ;".to_string());
        let err = SyntaxError::new("bad", Span::new(7, 8));
        assert_eq!(
            err.render(&src),
            "a.som:1:8: error: bad\n\t\tx := ;\n\t\t     ^"
        );
    }

    #[test]
    fn empty_and_multi_line_spans() {
        let src = Source::new("a.som", "ab\ncd".to_string());
        // Empty span at the very end: one caret after the last character.
        let eof = SyntaxError::new("eof", Span::new(5, 5));
        assert_eq!(eof.render(&src), "a.som:2:3: error: eof\ncd\n  ^");
        // A span crossing a line break is underlined to the end of its first line.
        let multi = SyntaxError::new("multi", Span::new(1, 5));
        assert_eq!(multi.render(&src), "a.som:1:2: error: multi\nab\n ^");
        // Wide characters count as one column each.
        let src = Source::new("u.som", "'çç' ?".to_string());
        let err = SyntaxError::new("q", Span::new(7, 8));
        assert_eq!(err.render(&src), "u.som:1:6: error: q\n'çç' ?\n     ^");
    }
}
