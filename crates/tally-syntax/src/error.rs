//! Syntax errors and their rendering as compiler-style diagnostics.

use crate::ast::Span;
use crate::source::Source;

/// A syntax error: what was expected and what was found, and where.
///
/// The error carries only a span, not a line number, so that it stays cheap to create; the
/// [`Source`] turns it into `file:line:column` when it is shown.
/// Longest source line a diagnostic shows whole; longer ones are shown as a window of this
/// many characters around the error.
pub const LINE_WINDOW: usize = 120;

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
    /// `file:line:column: error: message`, the line, and carets under the span. A line longer
    /// than [`LINE_WINDOW`] characters is shown as a window around the column, with `…` where
    /// it is cut, so that a huge generated line does not flood the terminal.
    pub fn render(&self, source: &Source) -> String {
        let (line, column) = source.line_col(self.span.start);
        let text = source.line_text(line);
        let chars: Vec<char> = text.chars().collect();
        let col = column as usize - 1; // 0-based character index of the error
        let width = if self.span.end > self.span.start {
            let (end_line, end_column) = source.line_col(self.span.end);
            if end_line == line {
                (end_column as usize).saturating_sub(column as usize)
            } else {
                (chars.len() + 1).saturating_sub(column as usize)
            }
        } else {
            0
        }
        .max(1);
        let (from, to) = if chars.len() <= LINE_WINDOW {
            (0, chars.len())
        } else {
            let from = col
                .saturating_sub(LINE_WINDOW / 2)
                .min(chars.len() - LINE_WINDOW);
            (from, from + LINE_WINDOW)
        };
        let cut_left = if from > 0 { "…" } else { "" };
        let cut_right = if to < chars.len() { "…" } else { "" };
        let shown: String = chars[from..to].iter().collect();
        let before: String = std::iter::repeat_n(' ', cut_left.chars().count())
            .chain(
                chars[from..col.clamp(from, to)]
                    .iter()
                    .map(|&c| if c == '\t' { '\t' } else { ' ' }),
            )
            .collect();
        let carets = "^".repeat(width.min(to.saturating_sub(col).max(1)));
        format!(
            "{}:{}:{}: error: {}\n{cut_left}{shown}{cut_right}\n{before}{carets}",
            source.path(),
            line,
            column,
            self.message,
        )
    }

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
    fn shows_a_window_of_a_huge_line() {
        let line = format!("x := {}; y", "1".repeat(1_000_000));
        let src = Source::new("a.som", line);
        let at = 5 + 1_000_000;
        let err = SyntaxError::new("bad", Span::new(at, at + 1));
        let out = err.render(&src);
        assert!(out.len() < 1000, "{} bytes", out.len());
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(lines[0], format!("a.som:1:{}: error: bad", at + 1));
        assert!(lines[1].starts_with('…') && lines[1].contains("1; y"));
        let caret_col = lines[2].chars().count() - 1;
        assert_eq!(lines[1].chars().nth(caret_col), Some(';'));
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
