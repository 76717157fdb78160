//! Turns SOM source text into tokens, one at a time, on demand.
//!
//! The lexer is pulled by the parser rather than run to completion first, because a few SOM
//! tokens are context dependent: the parser sometimes needs to split an operator such as `||`
//! into the bar that closes a local-variable list and whatever follows. A lexer that is just a
//! position in the text (and cheap to clone for lookahead) makes that a matter of moving the
//! position back.

use crate::ast::Span;
use crate::error::SyntaxError;

#[derive(Debug, Clone, PartialEq)]
pub(crate) enum TokenKind {
    /// `foo`, including `primitive`, `self`, `nil` … (the parser gives those their meaning).
    Ident,
    /// `foo:`; keyword sequences (`at:put:`) exist only in symbols and literal arrays.
    Keyword,
    /// A binary selector: any run of `~ & | * / \ + = > < , @ % -`. Includes `=` and `|`,
    /// whose other roles the parser works out from context.
    Operator,
    /// Four or more dashes, between the instance side and the class side.
    Separator,
    /// Decimal digits only; the parser folds a preceding `-` in and picks the integer type.
    Integer,
    /// `1.5`, `1.5e10`; the text is kept so that the sign can be folded in before converting.
    Double,
    /// The decoded contents of `'…'`.
    String(String),
    /// The decoded name of `#foo`, `#at:put:`, `#+` or `#'…'`.
    Symbol(String),
    /// `#(`, which opens a literal array.
    ArrayStart,
    Colon,
    Assign,
    Caret,
    Period,
    LParen,
    RParen,
    LBracket,
    RBracket,
    Eof,
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Token {
    pub kind: TokenKind,
    pub span: Span,
}

/// Characters that make up binary selectors.
pub(crate) fn is_operator_char(c: u8) -> bool {
    matches!(
        c,
        b'~' | b'&'
            | b'|'
            | b'*'
            | b'/'
            | b'\\'
            | b'+'
            | b'='
            | b'>'
            | b'<'
            | b','
            | b'@'
            | b'%'
            | b'-'
    )
}

fn is_ident_start(c: char) -> bool {
    c.is_alphabetic()
}

fn is_ident_continue(c: char) -> bool {
    c.is_alphabetic() || c.is_ascii_digit() || c == '_'
}

#[derive(Debug, Clone)]
pub(crate) struct Lexer<'a> {
    text: &'a str,
    pos: usize,
}

impl<'a> Lexer<'a> {
    pub fn new(text: &'a str) -> Lexer<'a> {
        Lexer { text, pos: 0 }
    }

    /// Moves back (or forward) to a byte offset that starts a token; used to split operators.
    pub fn reset_to(&mut self, pos: usize) {
        self.pos = pos;
    }

    fn bytes(&self) -> &'a [u8] {
        self.text.as_bytes()
    }

    fn peek_byte(&self, at: usize) -> Option<u8> {
        self.bytes().get(at).copied()
    }

    fn char_at(&self, at: usize) -> Option<char> {
        self.text.get(at..).and_then(|rest| rest.chars().next())
    }

    /// Skips whitespace and comments. Comments are skipped here, not turned into tokens, so that
    /// they are allowed anywhere whitespace is.
    fn skip_trivia(&mut self) -> Result<(), SyntaxError> {
        loop {
            let Some(c) = self.char_at(self.pos) else {
                return Ok(());
            };
            if c == '"' {
                let start = self.pos;
                match self.text[start + 1..].find('"') {
                    Some(len) => self.pos = start + 1 + len + 1,
                    None => {
                        return Err(SyntaxError::new(
                            "unterminated comment: no closing '\"' before the end of the file",
                            Span::new(start, start + 1),
                        ))
                    }
                }
            } else if c.is_whitespace() {
                self.pos += c.len_utf8();
            } else {
                return Ok(());
            }
        }
    }

    pub fn next_token(&mut self) -> Result<Token, SyntaxError> {
        self.skip_trivia()?;
        let start = self.pos;
        let Some(c) = self.char_at(start) else {
            return Ok(Token {
                kind: TokenKind::Eof,
                span: Span::new(start, start),
            });
        };
        let kind = match c {
            '(' => self.single(TokenKind::LParen),
            ')' => self.single(TokenKind::RParen),
            '[' => self.single(TokenKind::LBracket),
            ']' => self.single(TokenKind::RBracket),
            '^' => self.single(TokenKind::Caret),
            '.' => self.single(TokenKind::Period),
            ':' => {
                if self.peek_byte(start + 1) == Some(b'=') {
                    self.pos += 2;
                    TokenKind::Assign
                } else {
                    self.single(TokenKind::Colon)
                }
            }
            '\'' => TokenKind::String(self.string()?),
            '#' => self.pound()?,
            '0'..='9' => self.number()?,
            c if is_ident_start(c) => {
                self.ident();
                if self.colon_follows() {
                    self.pos += 1;
                    TokenKind::Keyword
                } else {
                    TokenKind::Ident
                }
            }
            '-' if self.text[start..].starts_with("----") => {
                self.pos = start
                    + self.text[start..]
                        .bytes()
                        .take_while(|&b| b == b'-')
                        .count();
                TokenKind::Separator
            }
            _ if c.is_ascii() && is_operator_char(c as u8) => {
                self.operator();
                TokenKind::Operator
            }
            other => return Err(self.unexpected_char(other, start)),
        };
        Ok(Token {
            kind,
            span: Span::new(start, self.pos),
        })
    }

    fn single(&mut self, kind: TokenKind) -> TokenKind {
        self.pos += 1;
        kind
    }

    fn unexpected_char(&self, c: char, start: usize) -> SyntaxError {
        let span = Span::new(start, start + c.len_utf8());
        let shown = if c.is_control() || c.is_whitespace() {
            format!("U+{:04X}", c as u32)
        } else {
            format!("'{c}'")
        };
        let hint = match c {
            '$' => " (SOM has no character literals; write a one-character string such as 'a')",
            '{' | '}' => " (SOM has no brace arrays; use #( … ) or Array new:)",
            ';' => " (SOM has no cascades)",
            '_' => " (identifiers must start with a letter, and assignment is written ':=')",
            _ => "",
        };
        SyntaxError::new(format!("unexpected character {shown}{hint}"), span)
    }

    /// Consumes identifier characters starting at an identifier start.
    fn ident(&mut self) {
        let rest = &self.text[self.pos..];
        let len = rest
            .find(|c: char| !is_ident_continue(c))
            .unwrap_or(rest.len());
        self.pos += len;
    }

    /// A colon right after an identifier makes it a keyword, except in `x:=`, where it starts
    /// an assignment: treating it as the keyword `x:` would make `x:=1` unparseable.
    fn colon_follows(&self) -> bool {
        self.peek_byte(self.pos) == Some(b':') && self.peek_byte(self.pos + 1) != Some(b'=')
    }

    /// Consumes a run of operator characters.
    ///
    /// A `-` directly before a digit is left out of a longer run, so that `3*-4` is `3 * -4` and
    /// `x--1` is `x - -1`: a selector ending in `-` followed by a number is never what is meant.
    fn operator(&mut self) {
        let start = self.pos;
        let mut end = start;
        while self.peek_byte(end).is_some_and(is_operator_char) {
            end += 1;
        }
        if end - start > 1
            && self.bytes()[end - 1] == b'-'
            && self.peek_byte(end).is_some_and(|b| b.is_ascii_digit())
        {
            end -= 1;
        }
        self.pos = end;
    }

    /// Lexes `[0-9]+` with an optional fraction `.[0-9]+` and, after a fraction, an optional
    /// exponent `e[+-]?[0-9]+`.
    ///
    /// SOM's grammar has no exponents, but VMs print large doubles with one (`1.0e60`), so
    /// accepting them lets printed values be pasted back. Without a fraction (`2e-3`) it is an
    /// error rather than the SOM reading `2 e - 3`, which is never what the writer meant.
    /// `1.` followed by a non-digit is the integer 1 and a statement-ending period.
    fn number(&mut self) -> Result<TokenKind, SyntaxError> {
        let start = self.pos;
        let digits = |lexer: &Lexer, from: usize| -> usize {
            lexer.bytes()[from..]
                .iter()
                .take_while(|b| b.is_ascii_digit())
                .count()
        };
        self.pos += digits(self, self.pos);
        let mut kind = TokenKind::Integer;
        if self.peek_byte(self.pos) == Some(b'.')
            && self
                .peek_byte(self.pos + 1)
                .is_some_and(|b| b.is_ascii_digit())
        {
            self.pos += 1;
            self.pos += digits(self, self.pos);
            kind = TokenKind::Double;
        }
        if let Some(b'e' | b'E') = self.peek_byte(self.pos) {
            let mut at = self.pos + 1;
            if matches!(self.peek_byte(at), Some(b'+' | b'-')) {
                at += 1;
            }
            let exp_digits = digits(self, at);
            if exp_digits > 0 {
                if kind == TokenKind::Integer {
                    let written = &self.text[start..at + exp_digits];
                    let mantissa = &self.text[start..self.pos];
                    return Err(SyntaxError::new(
                        format!(
                            "a number with an exponent needs a fractional part: write {mantissa}.0{} instead of {written}",
                            &written[mantissa.len()..]
                        ),
                        Span::new(start, at + exp_digits),
                    ));
                }
                self.pos = at + exp_digits;
            }
        }
        Ok(kind)
    }

    /// Lexes a string starting at its opening quote and returns its decoded contents.
    ///
    /// Backslash escapes are SOM's (`\t \b \n \r \f \0 \' \\`); any other escape is an error, as
    /// in the SOM reference implementations (IntegrationTests/str_escape_unknown.som), because
    /// silently dropping or keeping the backslash hides typos such as `\e`. `''` is not an
    /// escape: it ends the string (SOM's grammar), so `'it''s'` is two strings in a row.
    fn string(&mut self) -> Result<String, SyntaxError> {
        let start = self.pos;
        let mut value = String::new();
        let mut i = start + 1;
        loop {
            let rest = &self.text[i..];
            let Some(stop) = rest.find(['\'', '\\']) else {
                return Err(SyntaxError::new(
                    "unterminated string: no closing ' before the end of the file",
                    Span::new(start, start + 1),
                ));
            };
            value.push_str(&rest[..stop]);
            i += stop;
            if self.bytes()[i] == b'\'' {
                self.pos = i + 1;
                return Ok(value);
            }
            let Some(escaped) = self.char_at(i + 1) else {
                return Err(SyntaxError::new(
                    "unterminated string: no closing ' before the end of the file",
                    Span::new(start, start + 1),
                ));
            };
            value.push(match escaped {
                't' => '\t',
                'b' => '\u{8}',
                'n' => '\n',
                'r' => '\r',
                'f' => '\u{c}',
                '0' => '\0',
                '\'' => '\'',
                '\\' => '\\',
                other => {
                    let shown = if other.is_control() || other.is_whitespace() {
                        format!("U+{:04X}", other as u32)
                    } else {
                        other.to_string()
                    };
                    return Err(SyntaxError::new(
                        format!(
                            "unknown escape sequence '\\{shown}' in string (known: \\t \\b \\n \\r \\f \\0 \\' \\\\)"
                        ),
                        Span::new(i, i + 1 + other.len_utf8()),
                    ));
                }
            });
            i += 1 + escaped.len_utf8();
        }
    }

    /// Lexes what follows `#`: a symbol, or `(` opening a literal array.
    ///
    /// Keyword sequences such as `at:put:` are only recognised here, so that `a at:1 put:2` in
    /// code still reads as keywords separated by arguments.
    fn pound(&mut self) -> Result<TokenKind, SyntaxError> {
        let start = self.pos;
        self.pos += 1;
        let Some(c) = self.char_at(self.pos) else {
            return Err(SyntaxError::new(
                "expected a selector, a string or '(' after '#', found the end of the file",
                Span::new(start, start + 1),
            ));
        };
        match c {
            '(' => {
                self.pos += 1;
                Ok(TokenKind::ArrayStart)
            }
            '\'' => Ok(TokenKind::Symbol(self.string()?)),
            c if is_ident_start(c) => {
                let name_start = self.pos;
                self.ident();
                if self.colon_follows() {
                    self.pos += 1;
                    // More keyword parts, but only complete ones: `#at:put` is `#at:` then `put`.
                    loop {
                        let save = self.pos;
                        match self.char_at(self.pos) {
                            Some(c) if is_ident_start(c) => {
                                self.ident();
                                if self.colon_follows() {
                                    self.pos += 1;
                                } else {
                                    self.pos = save;
                                    break;
                                }
                            }
                            _ => break,
                        }
                    }
                }
                Ok(TokenKind::Symbol(
                    self.text[name_start..self.pos].to_string(),
                ))
            }
            c if c.is_ascii() && is_operator_char(c as u8) => {
                let name_start = self.pos;
                while self.peek_byte(self.pos).is_some_and(is_operator_char) {
                    self.pos += 1;
                }
                Ok(TokenKind::Symbol(
                    self.text[name_start..self.pos].to_string(),
                ))
            }
            other => {
                let shown = if other.is_control() || other.is_whitespace() {
                    format!("U+{:04X}", other as u32)
                } else {
                    format!("'{other}'")
                };
                Err(SyntaxError::new(
                    format!("expected a selector, a string or '(' after '#', found {shown}"),
                    Span::new(start, self.pos + other.len_utf8()),
                ))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lex(text: &str) -> Vec<(TokenKind, &str)> {
        let mut lexer = Lexer::new(text);
        let mut out = Vec::new();
        loop {
            let tok = lexer
                .next_token()
                .unwrap_or_else(|e| panic!("{text:?}: {e:?}"));
            if tok.kind == TokenKind::Eof {
                return out;
            }
            out.push((
                tok.kind,
                &text[tok.span.start as usize..tok.span.end as usize],
            ));
        }
    }

    fn kinds(text: &str) -> Vec<TokenKind> {
        lex(text).into_iter().map(|(k, _)| k).collect()
    }

    fn lex_err(text: &str) -> SyntaxError {
        let mut lexer = Lexer::new(text);
        loop {
            match lexer.next_token() {
                Ok(tok) if tok.kind == TokenKind::Eof => panic!("{text:?} lexed without error"),
                Ok(_) => {}
                Err(e) => return e,
            }
        }
    }

    use TokenKind::*;

    #[test]
    fn identifiers_keywords_and_primitive() {
        assert_eq!(
            lex("foo bar_1 x2 at: primitive çà"),
            vec![
                (Ident, "foo"),
                (Ident, "bar_1"),
                (Ident, "x2"),
                (Keyword, "at:"),
                (Ident, "primitive"),
                (Ident, "çà")
            ]
        );
        // Keyword sequences are not lexed in code: `at:put:` is two keywords.
        assert_eq!(lex("at:put:"), vec![(Keyword, "at:"), (Keyword, "put:")]);
        assert_eq!(lex("at:1"), vec![(Keyword, "at:"), (Integer, "1")]);
        // `primitiveFoo` is one identifier, not `primitive` then `Foo`.
        assert_eq!(lex("primitiveFoo"), vec![(Ident, "primitiveFoo")]);
    }

    #[test]
    fn assignment_without_spaces() {
        assert_eq!(
            lex("x:=3"),
            vec![(Ident, "x"), (Assign, ":="), (Integer, "3")]
        );
        assert_eq!(
            lex("x := y"),
            vec![(Ident, "x"), (Assign, ":="), (Ident, "y")]
        );
        assert_eq!(lex(": x"), vec![(Colon, ":"), (Ident, "x")]);
    }

    #[test]
    fn comments_are_whitespace() {
        assert_eq!(
            kinds("a\"c\"b \"multi\nline\" c"),
            vec![Ident, Ident, Ident]
        );
        assert_eq!(kinds("\"\"x"), vec![Ident]);
        let err = lex_err("a \"never closed");
        assert_eq!(err.span, Span::new(2, 3));
        assert!(err.message.starts_with("unterminated comment"));
    }

    #[test]
    fn separators_and_operators() {
        assert_eq!(lex("----"), vec![(Separator, "----")]);
        assert_eq!(
            lex("------------ x"),
            vec![(Separator, "------------"), (Ident, "x")]
        );
        assert_eq!(lex("---"), vec![(Operator, "---")]);
        assert_eq!(
            lex("<= >= ~= == -> , || | & \\\\ @ %"),
            vec![
                (Operator, "<="),
                (Operator, ">="),
                (Operator, "~="),
                (Operator, "=="),
                (Operator, "->"),
                (Operator, ","),
                (Operator, "||"),
                (Operator, "|"),
                (Operator, "&"),
                (Operator, "\\\\"),
                (Operator, "@"),
                (Operator, "%")
            ]
        );
    }

    #[test]
    fn minus_before_digits_is_split_off_operator_runs() {
        assert_eq!(
            lex("3-4"),
            vec![(Integer, "3"), (Operator, "-"), (Integer, "4")]
        );
        assert_eq!(
            lex("3*-4"),
            vec![
                (Integer, "3"),
                (Operator, "*"),
                (Operator, "-"),
                (Integer, "4")
            ]
        );
        assert_eq!(
            lex("x--1"),
            vec![
                (Ident, "x"),
                (Operator, "-"),
                (Operator, "-"),
                (Integer, "1")
            ]
        );
        // Not before a digit: the run stays whole.
        assert_eq!(
            lex("a -> b"),
            vec![(Ident, "a"), (Operator, "->"), (Ident, "b")]
        );
    }

    #[test]
    fn numbers() {
        assert_eq!(
            lex("0 42 1.5 10.25"),
            vec![
                (Integer, "0"),
                (Integer, "42"),
                (Double, "1.5"),
                (Double, "10.25")
            ]
        );
        assert_eq!(lex("1."), vec![(Integer, "1"), (Period, ".")]);
        assert_eq!(
            lex("1.x"),
            vec![(Integer, "1"), (Period, "."), (Ident, "x")]
        );
        assert_eq!(
            lex("1.5e10 2.0E-3 3.0e+2"),
            vec![(Double, "1.5e10"), (Double, "2.0E-3"), (Double, "3.0e+2")]
        );
        // An `e` not followed by digits is a unary message.
        assert_eq!(lex("1.5e"), vec![(Double, "1.5"), (Ident, "e")]);
        assert_eq!(lex("2even"), vec![(Integer, "2"), (Ident, "even")]);
        let err = lex_err("x := 2e-3");
        assert_eq!(err.span, Span::new(5, 9));
        assert_eq!(
            err.message,
            "a number with an exponent needs a fractional part: write 2.0e-3 instead of 2e-3"
        );
    }

    #[test]
    fn strings_and_escapes() {
        assert_eq!(kinds("'abc'"), vec![String("abc".into())]);
        assert_eq!(
            kinds(r"'\t\b\n\r\f\0\'\\'"),
            vec![String("\t\u{8}\n\r\u{c}\0'\\".into())]
        );
        assert_eq!(kinds("'two\nlines'"), vec![String("two\nlines".into())]);
        assert_eq!(
            kinds("'ü\"no comment\"'"),
            vec![String("ü\"no comment\"".into())]
        );
        // `''` is not an escaped quote: it is two strings.
        assert_eq!(
            kinds("'it''s'"),
            vec![String("it".into()), String("s".into())]
        );
        assert_eq!(kinds("''"), vec![String("".into())]);

        let err = lex_err("x := 'abc");
        assert_eq!(err.span, Span::new(5, 6));
        assert!(err.message.starts_with("unterminated string"));
        let err = lex_err("'abc\\");
        assert_eq!(err.span, Span::new(0, 1));
        let err = lex_err("  '\\a'");
        assert_eq!(err.span, Span::new(3, 5));
        assert!(
            err.message.starts_with("unknown escape sequence '\\a'"),
            "{}",
            err.message
        );
        let err = lex_err("'\\é'");
        assert_eq!(err.span, Span::new(1, 4));
    }

    #[test]
    fn symbols() {
        assert_eq!(kinds("#foo"), vec![Symbol("foo".into())]);
        assert_eq!(kinds("#foo:"), vec![Symbol("foo:".into())]);
        assert_eq!(kinds("#at:put:"), vec![Symbol("at:put:".into())]);
        assert_eq!(kinds("#+"), vec![Symbol("+".into())]);
        assert_eq!(kinds("#~="), vec![Symbol("~=".into())]);
        assert_eq!(kinds("#'hello world'"), vec![Symbol("hello world".into())]);
        assert_eq!(kinds("#primitive"), vec![Symbol("primitive".into())]);
        // Only complete keyword parts are part of a symbol.
        assert_eq!(kinds("#at:put"), vec![Symbol("at:".into()), Ident]);
        assert_eq!(kinds("#("), vec![ArrayStart]);
        assert_eq!(lex_err("# foo").span, Span::new(0, 2));
        assert_eq!(lex_err("#").span, Span::new(0, 1));
        assert_eq!(
            lex_err("#1").message,
            "expected a selector, a string or '(' after '#', found '1'"
        );
    }

    #[test]
    fn punctuation_and_bad_characters() {
        assert_eq!(
            kinds("( ) [ ] ^ . : :="),
            vec![LParen, RParen, LBracket, RBracket, Caret, Period, Colon, Assign]
        );
        let err = lex_err("x $a");
        assert_eq!(err.span, Span::new(2, 3));
        assert!(err.message.starts_with("unexpected character '$'"));
        let err = lex_err("x \u{1}");
        assert_eq!(err.message, "unexpected character U+0001");
        let err = lex_err("x → y");
        assert_eq!(err.span, Span::new(2, 5));
        let err = lex_err("_x");
        assert!(err.message.contains("identifiers must start with a letter"));
    }

    #[test]
    fn unicode_whitespace_is_skipped() {
        assert_eq!(
            kinds("a\u{a0}b\u{2028}c\r\n\t\u{c}d"),
            vec![Ident, Ident, Ident, Ident]
        );
    }
}
