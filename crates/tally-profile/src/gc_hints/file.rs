//! The hints file: a line-based text file a person can read, with a checksum over everything
//! before its last line, so an edited or damaged file is rejected rather than half-trusted.
//!
//! ```text
//! tally-gc-hints 1
//! vm 0.1.0
//! program Storage.som 5f0c6e2d8a1b3c47
//! point entry Storage>>buildTreeDepth: live 1048576 seen 12 minima 10
//! point exit Harness>>innerBenchmarkLoop: live 65536 seen 9 minima 9
//! checksum 8c2f1a3e
//! ```
//!
//! `program` names the program and a fingerprint of its source, which the VM computes; a
//! point names a method as the VM prints it. The checksum is the CRC-32 of the bytes before
//! the `checksum` line, in hex.

use std::fmt::Write as _;

/// The format version this code writes and reads.
pub const VERSION: u32 = 1;

const MAGIC: &str = "tally-gc-hints";

/// Where in a method a point is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum PointKind {
    Entry,
    Exit,
}

impl PointKind {
    pub fn name(self) -> &'static str {
        match self {
            PointKind::Entry => "entry",
            PointKind::Exit => "exit",
        }
    }

    fn parse(word: &str) -> Option<PointKind> {
        match word {
            "entry" => Some(PointKind::Entry),
            "exit" => Some(PointKind::Exit),
            _ => None,
        }
    }
}

/// Which program the hints were found for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProgramIdentity {
    /// The program as its run named it (its main class file, say); no spaces.
    pub name: String,
    /// A hash of the program's source, computed by the VM.
    pub fingerprint: u64,
}

/// One favorable collection point.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HintPoint {
    pub method: String,
    pub kind: PointKind,
    /// The median live bytes measured there.
    pub expected_live_bytes: u64,
    /// How often the profiling run measured there, and how often that was a local minimum.
    pub seen: u32,
    pub minima: u32,
}

/// A hints file's contents.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GcHints {
    pub vm_version: String,
    pub program: ProgramIdentity,
    pub points: Vec<HintPoint>,
}

/// Why a hints file was not accepted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HintsError {
    #[error("not a GC hints file (it does not start with `{MAGIC}`)")]
    NotHints,
    #[error("GC hints format version {found}, but this VM reads version {VERSION}")]
    Version { found: String },
    #[error("line {line}: {reason}")]
    Malformed { line: usize, reason: String },
    #[error(
        "checksum mismatch (stored {stored:08x}, contents give {computed:08x}): the file was \
         changed or damaged after it was written"
    )]
    Checksum { stored: u32, computed: u32 },
    #[error("the file has no checksum line: it was cut short")]
    MissingChecksum,
    #[error("written by Tally {found}, this is Tally {expected}: record the hints again")]
    OtherVm { found: String, expected: String },
    #[error(
        "written for {found_name} (source fingerprint {found:016x}), this run is {expected_name} \
         ({expected:016x}): record the hints again for this program"
    )]
    OtherProgram {
        found_name: String,
        found: u64,
        expected_name: String,
        expected: u64,
    },
}

impl GcHints {
    /// The file's text, checksum included.
    pub fn render(&self) -> String {
        let mut body = format!("{MAGIC} {VERSION}\nvm {}\n", self.vm_version);
        let _ = writeln!(
            body,
            "program {} {:016x}",
            self.program.name, self.program.fingerprint
        );
        for p in &self.points {
            let _ = writeln!(
                body,
                "point {} {} live {} seen {} minima {}",
                p.kind.name(),
                p.method,
                p.expected_live_bytes,
                p.seen,
                p.minima
            );
        }
        let crc = crc32fast::hash(body.as_bytes());
        let _ = writeln!(body, "checksum {crc:08x}");
        body
    }

    /// Reads a hints file's text: well-formed, its own version, and its checksum right. Says
    /// nothing yet about whether it fits this run ([`GcHints::check_fits`]).
    pub fn parse(text: &str) -> Result<GcHints, HintsError> {
        if !text.starts_with(MAGIC) {
            return Err(HintsError::NotHints);
        }
        let Some(at) = text.rfind("\nchecksum ") else {
            return Err(HintsError::MissingChecksum);
        };
        let (body, tail) = text.split_at(at + 1);
        let tail_line = tail.trim_end_matches('\n');
        let stored = tail_line
            .strip_prefix("checksum ")
            .filter(|h| h.len() == 8 && !tail_line.contains('\n'))
            .and_then(|h| u32::from_str_radix(h, 16).ok())
            .ok_or_else(|| HintsError::Malformed {
                line: body.lines().count() + 1,
                reason: format!("expected `checksum` and 8 hex digits, found `{tail_line}`"),
            })?;
        let computed = crc32fast::hash(body.as_bytes());
        if stored != computed {
            return Err(HintsError::Checksum { stored, computed });
        }

        let mut lines = body.lines().enumerate().map(|(i, l)| (i + 1, l));
        let malformed = |line: usize, reason: String| HintsError::Malformed { line, reason };
        let (_, first) = lines.next().ok_or(HintsError::NotHints)?;
        let version = first[MAGIC.len()..].trim();
        if version != VERSION.to_string() {
            return Err(HintsError::Version {
                found: version.to_string(),
            });
        }
        let mut field = |name: &str| -> Result<(usize, String), HintsError> {
            match lines.next() {
                Some((n, l)) => match l.strip_prefix(name).and_then(|r| r.strip_prefix(' ')) {
                    Some(rest) if !rest.is_empty() => Ok((n, rest.to_string())),
                    _ => Err(malformed(n, format!("expected `{name} …`, found `{l}`"))),
                },
                None => Err(HintsError::MissingChecksum),
            }
        };
        let (_, vm_version) = field("vm")?;
        let (n, program) = field("program")?;
        let program = match program.split(' ').collect::<Vec<_>>()[..] {
            [name, hash] if hash.len() == 16 => ProgramIdentity {
                name: name.to_string(),
                fingerprint: u64::from_str_radix(hash, 16)
                    .map_err(|_| malformed(n, format!("`{hash}` is not a hex fingerprint")))?,
            },
            _ => {
                return Err(malformed(
                    n,
                    format!("expected `program NAME FINGERPRINT`, found `program {program}`"),
                ))
            }
        };
        let mut points = Vec::new();
        for (n, line) in lines {
            points.push(parse_point(line).map_err(|reason| malformed(n, reason))?);
        }
        Ok(GcHints {
            vm_version,
            program,
            points,
        })
    }

    /// Whether these hints were found by this VM for this program.
    pub fn check_fits(
        &self,
        vm_version: &str,
        program: &ProgramIdentity,
    ) -> Result<(), HintsError> {
        if self.vm_version != vm_version {
            return Err(HintsError::OtherVm {
                found: self.vm_version.clone(),
                expected: vm_version.to_string(),
            });
        }
        if self.program != *program {
            return Err(HintsError::OtherProgram {
                found_name: self.program.name.clone(),
                found: self.program.fingerprint,
                expected_name: program.name.clone(),
                expected: program.fingerprint,
            });
        }
        Ok(())
    }
}

/// `point KIND METHOD live N seen N minima N`; the method may contain spaces
/// (`Foo class>>bar`), so the numbers are read from the end.
fn parse_point(line: &str) -> Result<HintPoint, String> {
    let rest = line
        .strip_prefix("point ")
        .ok_or_else(|| format!("expected `point …`, found `{line}`"))?;
    let (kind, rest) = rest
        .split_once(' ')
        .ok_or_else(|| format!("a point without a method: `{line}`"))?;
    let kind = PointKind::parse(kind)
        .ok_or_else(|| format!("`{kind}` is not a point kind (entry or exit)"))?;
    let words: Vec<&str> = rest.rsplitn(7, ' ').collect();
    let [minima, minima_key, seen, seen_key, live, live_key, method] = words[..] else {
        return Err(format!(
            "expected `point {} METHOD live N seen N minima N`, found `{line}`",
            kind.name()
        ));
    };
    if (live_key, seen_key, minima_key) != ("live", "seen", "minima") || method.is_empty() {
        return Err(format!(
            "expected `point {} METHOD live N seen N minima N`, found `{line}`",
            kind.name()
        ));
    }
    let number = |w: &str| {
        w.parse::<u64>()
            .map_err(|_| format!("`{w}` is not a number"))
    };
    let count = |w: &str| {
        w.parse::<u32>()
            .map_err(|_| format!("`{w}` is not a count"))
    };
    let (seen, minima) = (count(seen)?, count(minima)?);
    if minima > seen {
        return Err(format!("{minima} minima out of {seen} measurements"));
    }
    Ok(HintPoint {
        method: method.to_string(),
        kind,
        expected_live_bytes: number(live)?,
        seen,
        minima,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn example() -> GcHints {
        GcHints {
            vm_version: "0.1.0".into(),
            program: ProgramIdentity {
                name: "Storage.som".into(),
                fingerprint: 0x5f0c_6e2d_8a1b_3c47,
            },
            points: vec![
                HintPoint {
                    method: "Storage>>buildTreeDepth:".into(),
                    kind: PointKind::Entry,
                    expected_live_bytes: 1 << 20,
                    seen: 12,
                    minima: 10,
                },
                HintPoint {
                    method: "Storage class>>new".into(),
                    kind: PointKind::Exit,
                    expected_live_bytes: 4096,
                    seen: 3,
                    minima: 3,
                },
            ],
        }
    }

    #[test]
    fn hints_round_trip_through_their_text() {
        let h = example();
        let text = h.render();
        assert!(
            text.starts_with("tally-gc-hints 1\nvm 0.1.0\nprogram Storage.som 5f0c6e2d8a1b3c47\n")
        );
        assert!(text.contains("point exit Storage class>>new live 4096 seen 3 minima 3\n"));
        assert_eq!(GcHints::parse(&text), Ok(h));
    }

    #[test]
    fn any_changed_byte_is_caught_by_the_checksum_or_the_parser() {
        let text = example().render();
        let checksum_line = text.rfind("checksum").unwrap();
        for i in 0..checksum_line {
            let mut bytes = text.clone().into_bytes();
            bytes[i] ^= 0x01;
            let Ok(changed) = String::from_utf8(bytes) else {
                continue;
            };
            assert!(
                GcHints::parse(&changed).is_err(),
                "byte {i} changed unnoticed"
            );
        }
    }

    #[test]
    fn damaged_files_say_what_is_wrong() {
        let text = example().render();
        let e = |t: &str| GcHints::parse(t).unwrap_err().to_string();
        assert!(e("profile data").contains("not a GC hints file"));
        let cut = &text[..text.rfind("checksum").unwrap()];
        assert!(e(cut).contains("cut short"), "{}", e(cut));
        let edited = text.replace("live 4096", "live 4097");
        assert!(e(&edited).contains("checksum mismatch"), "{}", e(&edited));
        // The text with `from` replaced by `to` and its checksum made right again.
        let rechecksummed = |from: &str, to: &str| {
            let mut t = text.replace(from, to);
            t.truncate(t.rfind("checksum").unwrap());
            let crc = crc32fast::hash(t.as_bytes());
            t.push_str(&format!("checksum {crc:08x}\n"));
            t
        };
        let other = rechecksummed("tally-gc-hints 1", "tally-gc-hints 2");
        assert!(e(&other).contains("version 2"), "{}", e(&other));
        // A bad point line: the line number is named.
        let bad = rechecksummed("seen 3 minima 3", "seen 3 minima 4");
        assert_eq!(e(&bad), "line 5: 4 minima out of 3 measurements");
    }

    #[test]
    fn cut_and_garbled_text_is_rejected_without_a_panic() {
        let text = example().render();
        // Every cut but the final newline's loses something the checksum or parser notices.
        for end in 0..text.len() - 1 {
            if text.is_char_boundary(end) {
                assert!(GcHints::parse(&text[..end]).is_err(), "cut at {end}");
            }
        }
        let mut x: u32 = 0x2545_f491;
        for _ in 0..2000 {
            let mut bytes = text.clone().into_bytes();
            for _ in 0..4 {
                x ^= x << 13;
                x ^= x >> 17;
                x ^= x << 5;
                let i = x as usize % bytes.len();
                bytes[i] = (x >> 8) as u8;
            }
            let garbled = String::from_utf8_lossy(&bytes);
            if let Err(e) = GcHints::parse(&garbled) {
                assert!(!e.to_string().is_empty());
            }
        }
    }

    #[test]
    fn hints_of_another_vm_or_program_do_not_fit() {
        let h = example();
        let me = h.program.clone();
        assert_eq!(h.check_fits("0.1.0", &me), Ok(()));
        let e = h.check_fits("0.2.0", &me).unwrap_err().to_string();
        assert!(e.contains("Tally 0.1.0, this is Tally 0.2.0"), "{e}");
        let other = ProgramIdentity {
            fingerprint: 1,
            ..me
        };
        let e = h.check_fits("0.1.0", &other).unwrap_err().to_string();
        assert!(e.contains("record the hints again for this program"), "{e}");
    }
}
