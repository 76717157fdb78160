//! Source text plus the line table that diagnostics and stack traces need.

use std::path::Path;

/// A source file with a line table, for turning spans into line:column and printing diagnostics.
///
/// The line table is built once up front so that every later lookup is a binary search: the
/// compiler asks for line numbers of many nodes, and diagnostics ask for whole lines.
#[derive(Debug, Clone)]
pub struct Source {
    path: String,
    text: String,
    /// Byte offset where each line starts; `line_starts[0] == 0`. Only `\n` ends a line, so
    /// `\r\n` files get the same numbering as editors show (the `\r` is trimmed from line text).
    line_starts: Vec<u32>,
}

/// Why a file could not be turned into a [`Source`].
#[derive(Debug, thiserror::Error)]
pub enum SourceError {
    #[error("{path}: {error}")]
    Io {
        path: String,
        #[source]
        error: std::io::Error,
    },
    #[error(
        "{path}:{line}:{column}: error: the file is not valid UTF-8 (invalid byte 0x{byte:02x} at byte offset {offset})"
    )]
    NotUtf8 {
        path: String,
        offset: usize,
        line: u32,
        column: u32,
        byte: u8,
    },
    /// NUL bytes never occur in text files; catching them here gives "this is a binary file"
    /// instead of a baffling "unexpected character" from the lexer.
    #[error(
        "{path}:{line}:{column}: error: the file contains a NUL byte at byte offset {offset}; is it a binary file?"
    )]
    Binary {
        path: String,
        offset: usize,
        line: u32,
        column: u32,
    },
    /// A directory, FIFO, socket or device: reading a FIFO would wait for a writer forever.
    #[error("{path}: error: {kind}, not a source file")]
    NotAFile { path: String, kind: &'static str },
    /// Spans are `u32` offsets, so bigger files cannot be described.
    #[error("{path}: error: the file is too large ({size} bytes; at most 4 GiB - 1 is supported)")]
    TooLarge { path: String, size: usize },
}

const UTF8_BOM: &[u8] = b"\xEF\xBB\xBF";

/// What `path` is when it exists but is not a regular file (following symbolic links), in
/// words for an error message: "is a directory", "is a FIFO", …; `None` for a regular file
/// and for a path that does not exist (whose error the caller reports its own way).
pub fn not_a_regular_file(path: &Path) -> Option<&'static str> {
    use std::os::unix::fs::FileTypeExt;
    let t = std::fs::metadata(path).ok()?.file_type();
    if t.is_file() {
        None
    } else if t.is_dir() {
        Some("is a directory")
    } else if t.is_fifo() {
        Some("is a FIFO (named pipe)")
    } else if t.is_socket() {
        Some("is a socket")
    } else if t.is_char_device() {
        Some("is a character device")
    } else if t.is_block_device() {
        Some("is a block device")
    } else {
        Some("is not a regular file")
    }
}

impl Source {
    /// Texts longer than `u32::MAX` bytes are truncated: spans cannot address them, and
    /// truncating keeps this constructor infallible (use [`Source::read`] for a clear error).
    pub fn new(path: impl Into<String>, mut text: String) -> Source {
        if text.len() > u32::MAX as usize {
            let mut cut = u32::MAX as usize;
            while !text.is_char_boundary(cut) {
                cut -= 1;
            }
            text.truncate(cut);
        }
        let mut line_starts = vec![0u32];
        line_starts.extend(
            text.bytes()
                .enumerate()
                .filter(|&(_, b)| b == b'\n')
                .map(|(i, _)| i as u32 + 1),
        );
        Source {
            path: path.into(),
            text,
            line_starts,
        }
    }

    /// Reads a file; rejects non-UTF-8 / binary content with a clear error (which byte offset, line).
    pub fn read(path: &Path) -> Result<Source, SourceError> {
        let name = path.display().to_string();
        if let Some(kind) = not_a_regular_file(path) {
            return Err(SourceError::NotAFile { path: name, kind });
        }
        let bytes = std::fs::read(path).map_err(|error| SourceError::Io {
            path: name.clone(),
            error,
        })?;
        Source::from_bytes(name, bytes)
    }

    /// The checks of [`Source::read`] without the file system, so that they can be tested and
    /// used on input that did not come from a file (e.g. standard input).
    /// A leading UTF-8 byte-order mark is dropped: editors on some systems write one, and it
    /// carries no meaning in a UTF-8 file.
    pub fn from_bytes(path: impl Into<String>, mut bytes: Vec<u8>) -> Result<Source, SourceError> {
        let path = path.into();
        if bytes.starts_with(UTF8_BOM) {
            bytes.drain(..UTF8_BOM.len());
        }
        if bytes.len() > u32::MAX as usize {
            return Err(SourceError::TooLarge {
                path,
                size: bytes.len(),
            });
        }
        match String::from_utf8(bytes) {
            Ok(text) => {
                if let Some(offset) = text.bytes().position(|b| b == 0) {
                    let (line, column) = position_in(&text.as_bytes()[..offset]);
                    return Err(SourceError::Binary {
                        path,
                        offset,
                        line,
                        column,
                    });
                }
                Ok(Source::new(path, text))
            }
            Err(err) => {
                let offset = err.utf8_error().valid_up_to();
                let bytes = err.as_bytes();
                let (line, column) = position_in(&bytes[..offset]);
                Err(SourceError::NotUtf8 {
                    path,
                    offset,
                    line,
                    column,
                    byte: bytes[offset],
                })
            }
        }
    }

    pub fn path(&self) -> &str {
        &self.path
    }

    pub fn text(&self) -> &str {
        &self.text
    }

    /// How many lines the text has (an empty text has one, empty, line).
    pub fn line_count(&self) -> u32 {
        self.line_starts.len() as u32
    }

    /// 1-based line and column (column in characters) of a byte offset.
    ///
    /// Offsets past the end are clamped to the end, and offsets inside a multi-byte character
    /// count as that character, so that a slightly wrong span still yields a usable position.
    pub fn line_col(&self, offset: u32) -> (u32, u32) {
        let offset = self.clamp(offset);
        let line_index = self
            .line_starts
            .partition_point(|&start| start as usize <= offset)
            - 1;
        let line_start = self.line_starts[line_index] as usize;
        let column = self.text[line_start..offset].chars().count() as u32 + 1;
        (line_index as u32 + 1, column)
    }

    /// The text of a 1-based line without its line terminator; empty for lines that do not exist.
    pub fn line_text(&self, line: u32) -> &str {
        let Some(index) = (line as usize).checked_sub(1) else {
            return "";
        };
        let Some(&start) = self.line_starts.get(index) else {
            return "";
        };
        let end = self
            .line_starts
            .get(index + 1)
            .map_or(self.text.len(), |&next| next as usize - 1);
        let text = &self.text[start as usize..end];
        text.strip_suffix('\r').unwrap_or(text)
    }

    /// The largest char boundary not after `offset` (and not after the end).
    fn clamp(&self, offset: u32) -> usize {
        let mut offset = (offset as usize).min(self.text.len());
        while !self.text.is_char_boundary(offset) {
            offset -= 1;
        }
        offset
    }
}

/// Line and character column just after `prefix`, which must be valid UTF-8.
fn position_in(prefix: &[u8]) -> (u32, u32) {
    let line = prefix.iter().filter(|&&b| b == b'\n').count() as u32 + 1;
    let line_start = prefix
        .iter()
        .rposition(|&b| b == b'\n')
        .map_or(0, |i| i + 1);
    // Counting the bytes that do not continue a character counts characters.
    let column = prefix[line_start..]
        .iter()
        .filter(|&&b| (b & 0xC0) != 0x80)
        .count() as u32
        + 1;
    (line, column)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn line_col_counts_characters_not_bytes() {
        let src = Source::new("t.som", "ab\nçé x\n\nlast".to_string());
        assert_eq!(src.line_col(0), (1, 1));
        assert_eq!(src.line_col(2), (1, 3)); // the newline itself belongs to line 1
        assert_eq!(src.line_col(3), (2, 1));
        // 'x' is after two 2-byte characters and a space: byte 3 + 5 = 8, column 4.
        assert_eq!(src.line_col(8), (2, 4));
        assert_eq!(src.line_col(10), (3, 1));
        assert_eq!(src.line_col(11), (4, 1));
        assert_eq!(src.line_col(15), (4, 5)); // end of text
        assert_eq!(src.line_col(999), (4, 5)); // clamped
        assert_eq!(src.line_col(4), (2, 1)); // inside 'ç': counts as that character
    }

    #[test]
    fn line_text_strips_terminators() {
        let src = Source::new("t.som", "one\r\ntwo\n\nfour".to_string());
        assert_eq!(src.line_count(), 4);
        assert_eq!(src.line_text(1), "one");
        assert_eq!(src.line_text(2), "two");
        assert_eq!(src.line_text(3), "");
        assert_eq!(src.line_text(4), "four");
        assert_eq!(src.line_text(0), "");
        assert_eq!(src.line_text(5), "");
        let trailing = Source::new("t.som", "a\n".to_string());
        assert_eq!(trailing.line_count(), 2);
        assert_eq!(trailing.line_text(2), "");
    }

    #[test]
    fn rejects_invalid_utf8_with_position() {
        let err = Source::from_bytes("bad.som", b"Foo = (\n  x\xff )".to_vec()).unwrap_err();
        match &err {
            SourceError::NotUtf8 {
                offset,
                line,
                column,
                byte,
                ..
            } => {
                assert_eq!((*offset, *line, *column, *byte), (11, 2, 4, 0xff));
            }
            other => panic!("unexpected {other:?}"),
        }
        assert_eq!(
            err.to_string(),
            "bad.som:2:4: error: the file is not valid UTF-8 (invalid byte 0xff at byte offset 11)"
        );
    }

    #[test]
    fn rejects_nul_bytes_as_binary() {
        let err = Source::from_bytes("bin.som", b"ab\ncd\0ef".to_vec()).unwrap_err();
        assert_eq!(
            err.to_string(),
            "bin.som:2:3: error: the file contains a NUL byte at byte offset 5; is it a binary file?"
        );
    }

    #[test]
    fn read_reports_missing_files_and_reads_real_ones() {
        let dir = std::env::temp_dir().join(format!("tally-syntax-src-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let missing = dir.join("missing.som");
        assert!(matches!(
            Source::read(&missing),
            Err(SourceError::Io { .. })
        ));
        let file = dir.join("ok.som");
        std::fs::write(&file, "Foo = ()\n").unwrap();
        let src = Source::read(&file).unwrap();
        assert_eq!(src.text(), "Foo = ()\n");
        assert!(src.path().ends_with("ok.som"));
        let binary = dir.join("bin.som");
        std::fs::write(&binary, [0x89, b'P', b'N', b'G']).unwrap();
        assert!(matches!(
            Source::read(&binary),
            Err(SourceError::NotUtf8 { offset: 0, .. })
        ));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
