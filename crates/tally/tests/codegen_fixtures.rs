//! Code-generation fixtures: each `tests/codegen/NAME.som` is a SOM class whose header comment
//! names listings to check (`check bytecode Class>>selector`, `check baseline-asm Class`) and
//! whose end holds the expected listings in comments, so that any change in what the bytecode
//! compiler or the baseline tier makes of the class shows as a diff. The format is described
//! in `tests/codegen/README.md`.
//!
//! Listings come from the `tally` binary (`tally disasm`, run in the fixture's directory with
//! `-cp .`), one VM per process as the heap requires. On a mismatch the test fails with a
//! unified diff per listing, named by fixture and check, its line numbers the fixture's.
//! `TALLY_BLESS=1 cargo test -p tally --test codegen_fixtures` instead rewrites the expected
//! listings of every fixture in place (and writes them for a new fixture): review the
//! diff with `git diff tests/codegen` before committing.

mod common;

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Opens an expected listing: `"=== LISTING TARGET` at the start of a line.
const BLOCK_START: &str = "\"=== ";
/// Lines of unchanged context around each change in a diff.
const CONTEXT: usize = 3;

/// The listings a fixture can check.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Listing {
    /// `tally disasm TARGET`: bytecode with source positions.
    Bytecode,
    /// `tally disasm --tier=baseline --show=machine TARGET`: the baseline tier's machine code
    /// (x86-64, the one target its template compiler writes for), jumps as offsets and
    /// the addresses it calls by name.
    BaselineAsm,
    /// The same under SemiSpace (`--gc=semispace`), a collector without a write barrier.
    SemispaceBaselineAsm,
    /// `tally disasm --tier=opt --show=tally-ir TARGET`: Tally's IR with its frame states.
    TallyIr,
}

impl Listing {
    fn parse(word: &str) -> Option<Listing> {
        match word {
            "bytecode" => Some(Listing::Bytecode),
            "baseline-asm" => Some(Listing::BaselineAsm),
            "semispace-baseline-asm" => Some(Listing::SemispaceBaselineAsm),
            "tally-ir" => Some(Listing::TallyIr),
            _ => None,
        }
    }

    fn name(self) -> &'static str {
        match self {
            Listing::Bytecode => "bytecode",
            Listing::BaselineAsm => "baseline-asm",
            Listing::SemispaceBaselineAsm => "semispace-baseline-asm",
            Listing::TallyIr => "tally-ir",
        }
    }

    fn disasm_flags(self) -> &'static [&'static str] {
        match self {
            Listing::Bytecode => &[],
            Listing::BaselineAsm => &["--tier=baseline", "--show=machine"],
            Listing::SemispaceBaselineAsm => {
                &["--gc=semispace", "--tier=baseline", "--show=machine"]
            }
            Listing::TallyIr => &["--tier=opt", "--show=tally-ir"],
        }
    }
}

/// One `check LISTING TARGET` line of a fixture's header, or one expected listing.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Check {
    listing: Listing,
    /// What `tally disasm` takes: `Class>>selector`, `Class class>>selector` or `Class`.
    target: String,
}

impl Check {
    fn parse(spec: &str) -> Option<Check> {
        // Trimmed first, so what follows the first space is never blank.
        let (word, target) = spec.trim().split_once(' ')?;
        Some(Check {
            listing: Listing::parse(word)?,
            target: target.trim().to_string(),
        })
    }

    fn heading(&self) -> String {
        format!("{} {}", self.listing.name(), self.target)
    }

    /// The command that makes the listing, for messages.
    fn command(&self) -> String {
        let mut words = vec!["tally", "disasm", "-cp", "."];
        words.extend(self.listing.disasm_flags());
        words.push(&self.target);
        words.join(" ")
    }
}

/// An expected listing as the fixture holds it.
struct Expected {
    check: Check,
    /// The fixture's line number (from 1) of the listing's first line.
    first_line: usize,
    /// The listing, unescaped.
    text: String,
}

/// A fixture split into the part people write and the part blessing writes.
struct Fixture {
    /// The header comment and the class: everything before the first expected listing.
    source: String,
    checks: Vec<Check>,
    expected: Vec<Expected>,
}

fn parse_fixture(text: &str) -> Result<Fixture, String> {
    let Some(header) = text.trim_start().strip_prefix('"') else {
        return Err("the file must start with a header comment naming its checks".into());
    };
    let header = &header[..header.find('"').ok_or("the header comment is not closed")?];
    let mut checks = Vec::new();
    for line in header.lines() {
        if let Some(spec) = line.trim().strip_prefix("check ") {
            checks.push(Check::parse(spec).ok_or_else(|| {
                format!(
                    "bad check line {:?}: expected `check bytecode TARGET` or \
                     `check baseline-asm TARGET`",
                    line.trim()
                )
            })?);
        }
    }
    if checks.is_empty() {
        return Err("the header comment names nothing to check (`check LISTING TARGET`)".into());
    }
    let lines: Vec<&str> = text.lines().collect();
    let start = lines
        .iter()
        .position(|l| l.starts_with(BLOCK_START))
        .unwrap_or(lines.len());
    let source: String = lines[..start].iter().map(|l| format!("{l}\n")).collect();
    let mut expected = Vec::new();
    let mut at = start;
    while at < lines.len() {
        let line = lines[at];
        if line.trim().is_empty() {
            at += 1;
            continue;
        }
        let spec = line.strip_prefix(BLOCK_START).ok_or_else(|| {
            format!(
                "line {}: expected `{BLOCK_START}LISTING TARGET` or a blank line in the \
                 expected listings, found {line:?}",
                at + 1
            )
        })?;
        let check = Check::parse(spec)
            .ok_or_else(|| format!("line {}: bad expected-listing heading {line:?}", at + 1))?;
        let first_line = at + 2;
        let end = (at + 1..lines.len())
            .find(|&i| lines[i] == "\"")
            .ok_or_else(|| {
                format!(
                    "line {}: the listing {} has no closing line holding only a '\"'",
                    at + 1,
                    check.heading()
                )
            })?;
        let text = lines[at + 1..end]
            .iter()
            .map(|l| format!("{}\n", l.replace("\"\"", "\"")))
            .collect();
        expected.push(Expected {
            check,
            first_line,
            text,
        });
        at = end + 1;
    }
    Ok(Fixture {
        source,
        checks,
        expected,
    })
}

/// A listing as fixtures hold it: no trailing spaces or blank lines, every line ended.
fn normalise(listing: &str) -> String {
    let mut out: String = listing
        .lines()
        .map(|l| format!("{}\n", l.trim_end()))
        .collect();
    while out.ends_with("\n\n") {
        out.pop();
    }
    out
}

/// `listing` as a SOM comment under its heading. A comment cannot hold a `"`, so each is
/// doubled: the SOM lexer reads `""` as one comment ending where the next begins, and the
/// fixture stays a loadable class file.
fn render(check: &Check, listing: &str) -> String {
    format!(
        "{BLOCK_START}{}\n{}\"\n",
        check.heading(),
        listing.replace('"', "\"\"")
    )
}

/// The listing `check` names, from `tally disasm` run in `dir`.
fn run_listing(dir: &Path, check: &Check) -> Result<String, String> {
    let out = Command::new(common::tally())
        .arg("disasm")
        .args(["-cp", "."])
        .args(check.listing.disasm_flags())
        .arg(&check.target)
        .current_dir(dir)
        .output()
        .map_err(|e| format!("cannot run tally: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "{} failed: {}",
            check.command(),
            common::text(&out.stderr).trim()
        ));
    }
    let listing = normalise(&common::text(&out.stdout));
    // A compile the code generator's own verifier refuses is a bug, never an expected
    // listing (blessing one would freeze it in).
    if listing.contains("Verifier(") {
        return Err(format!(
            "{} made code Cranelift's verifier refuses:\n{listing}",
            check.command()
        ));
    }
    Ok(listing)
}

/// Checks one fixture against the listings `tally` makes now; with `bless`, rewrites its
/// expected listings instead (only when they changed). The error names the fixture.
fn check_fixture(path: &Path, bless: bool) -> Result<(), String> {
    let shown = path.display();
    let text = std::fs::read_to_string(path).map_err(|e| format!("{shown}: {e}"))?;
    let fixture = parse_fixture(&text).map_err(|e| format!("{shown}: {e}"))?;
    let dir = path.parent().expect("a fixture's directory");
    let mut actual = Vec::new();
    for check in &fixture.checks {
        actual.push(run_listing(dir, check).map_err(|e| format!("{shown}: {e}"))?);
    }
    if bless {
        let mut blessed = format!("{}\n", fixture.source.trim_end());
        for (check, listing) in fixture.checks.iter().zip(&actual) {
            blessed.push('\n');
            blessed.push_str(&render(check, listing));
        }
        if blessed != text {
            std::fs::write(path, blessed).map_err(|e| format!("{shown}: {e}"))?;
            eprintln!("blessed {shown}");
        }
        return Ok(());
    }
    let mut problems = String::new();
    for (check, listing) in fixture.checks.iter().zip(&actual) {
        let Some(expected) = fixture.expected.iter().find(|e| e.check == *check) else {
            let _ = writeln!(
                problems,
                "{shown}: no expected listing for `check {}`",
                check.heading()
            );
            continue;
        };
        if expected.text != *listing {
            let _ = writeln!(
                problems,
                "{shown}: {} differs from its expected listing (- expected, + now):\n\
                 --- {shown}\n+++ {}\n{}",
                check.heading(),
                check.command(),
                unified_diff(&expected.text, listing, expected.first_line)
            );
        }
    }
    for extra in &fixture.expected {
        if !fixture.checks.contains(&extra.check) {
            let _ = writeln!(
                problems,
                "{shown}:{}: an expected listing for {}, which the header does not check",
                extra.first_line - 1,
                extra.check.heading()
            );
        }
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(problems)
    }
}

/// An edit turning one list of lines into another.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Edit {
    Keep,
    Remove,
    Add,
}

/// The shortest edit script from `old` to `new` (by longest common subsequence, over what
/// lies between their common first and last lines, so that a small change in a long listing
/// costs little).
fn edit_script<'a>(old: &[&'a str], new: &[&'a str]) -> Vec<(Edit, &'a str)> {
    let head = old.iter().zip(new).take_while(|(a, b)| a == b).count();
    let tail = old[head..]
        .iter()
        .rev()
        .zip(new[head..].iter().rev())
        .take_while(|(a, b)| a == b)
        .count();
    let (old_mid, new_mid) = (&old[head..old.len() - tail], &new[head..new.len() - tail]);
    let width = new_mid.len() + 1;
    // common[i * width + j]: the longest common subsequence of old_mid[i..] and new_mid[j..].
    let mut common = vec![0u32; (old_mid.len() + 1) * width];
    for i in (0..old_mid.len()).rev() {
        for j in (0..new_mid.len()).rev() {
            common[i * width + j] = if old_mid[i] == new_mid[j] {
                common[(i + 1) * width + j + 1] + 1
            } else {
                common[(i + 1) * width + j].max(common[i * width + j + 1])
            };
        }
    }
    let mut script: Vec<(Edit, &str)> = old[..head].iter().map(|l| (Edit::Keep, *l)).collect();
    let (mut i, mut j) = (0, 0);
    while i < old_mid.len() || j < new_mid.len() {
        if i < old_mid.len() && j < new_mid.len() && old_mid[i] == new_mid[j] {
            script.push((Edit::Keep, old_mid[i]));
            (i, j) = (i + 1, j + 1);
        } else if j == new_mid.len()
            || (i < old_mid.len() && common[(i + 1) * width + j] >= common[i * width + j + 1])
        {
            script.push((Edit::Remove, old_mid[i]));
            i += 1;
        } else {
            script.push((Edit::Add, new_mid[j]));
            j += 1;
        }
    }
    script.extend(old[old.len() - tail..].iter().map(|l| (Edit::Keep, *l)));
    script
}

/// A unified diff from `old` to `new` in hunks with `CONTEXT` lines around each change,
/// numbering lines from `first_line` (where the listing starts in its fixture).
fn unified_diff(old: &str, new: &str, first_line: usize) -> String {
    let old: Vec<&str> = old.lines().collect();
    let new: Vec<&str> = new.lines().collect();
    let script = edit_script(&old, &new);
    let changes: Vec<usize> = (0..script.len())
        .filter(|&k| script[k].0 != Edit::Keep)
        .collect();
    let mut hunks: Vec<(usize, usize)> = Vec::new();
    for &k in &changes {
        match hunks.last_mut() {
            Some((_, last)) if k - *last <= 2 * CONTEXT => *last = k,
            _ => hunks.push((k, k)),
        }
    }
    let mut out = String::new();
    for (first, last) in hunks {
        let from = first.saturating_sub(CONTEXT);
        let to = (last + CONTEXT + 1).min(script.len());
        let lines_before = |edit: Edit| script[..from].iter().filter(|s| s.0 != edit).count();
        let count = |edit: Edit| script[from..to].iter().filter(|s| s.0 != edit).count();
        let _ = writeln!(
            out,
            "@@ -{},{} +{},{} @@",
            first_line + lines_before(Edit::Add),
            count(Edit::Add),
            first_line + lines_before(Edit::Remove),
            count(Edit::Remove)
        );
        for (edit, line) in &script[from..to] {
            let mark = match edit {
                Edit::Keep => ' ',
                Edit::Remove => '-',
                Edit::Add => '+',
            };
            let _ = writeln!(out, "{mark}{line}");
        }
    }
    out
}

fn fixtures_dir() -> PathBuf {
    std::fs::canonicalize(common::repo().join("tests/codegen")).expect("tests/codegen exists")
}

fn fixture_files() -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(fixtures_dir())
        .expect("tests/codegen is readable")
        .map(|e| e.expect("a directory entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "som"))
        .collect();
    files.sort();
    files
}

/// Every fixture's listings are the ones it expects (or, with `TALLY_BLESS=1`, become them).
#[test]
fn every_fixture_matches_its_listings() {
    let bless = std::env::var("TALLY_BLESS").is_ok_and(|v| v == "1");
    let files = fixture_files();
    assert!(
        files.len() >= 8,
        "expected the code-generation fixtures in {}, found {}",
        fixtures_dir().display(),
        files.len()
    );
    let failures: Vec<String> = files
        .iter()
        .filter_map(|f| check_fixture(f, bless).err())
        .collect();
    assert!(
        failures.is_empty(),
        "{} of {} code-generation fixtures differ from what tally makes now; if the change \
         is intended, run `TALLY_BLESS=1 cargo test -p tally --test codegen_fixtures` and \
         review `git diff tests/codegen`:\n\n{}",
        failures.len(),
        files.len(),
        failures.join("\n")
    );
}

/// A fixture whose expected listing is wrong fails with a diff naming the fixture, the check
/// and the line; blessing rewrites it to what it was, after which it passes. (On a copy in a
/// temporary directory: the fixtures themselves may be being blessed meanwhile.)
#[test]
fn a_wrong_expectation_fails_with_a_diff_until_blessed() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("Countdown.som");
    std::fs::write(
        &path,
        "\"A loop.\n\ncheck bytecode Countdown>>from:\n\"\nCountdown = (\n    \
         from: n = ( | k | k := n. [ k > 0 ] whileTrue: [ k := k - 1 ]. ^k )\n)\n",
    )
    .unwrap();
    check_fixture(&path, true).expect("blessing succeeds");
    let good = std::fs::read_to_string(&path).unwrap();
    let marker = "JumpBack(";
    let line = good
        .lines()
        .position(|l| l.contains(marker))
        .expect("the loop's listing has a JumpBack");
    let wrong: String = good
        .lines()
        .enumerate()
        .map(|(i, l)| match i == line {
            true => format!("{}\n", l.replace(marker, "Jump(")),
            false => format!("{l}\n"),
        })
        .collect();
    std::fs::write(&path, &wrong).unwrap();

    let err = check_fixture(&path, false).expect_err("a wrong listing must fail");
    let shown = path.display().to_string();
    assert!(
        err.contains(&format!("{shown}: bytecode Countdown>>from: differs")),
        "{err}"
    );
    // The hunk starts three lines of context above the changed line (numbered from 1).
    assert!(err.contains(&format!("\n@@ -{},", line - 2)), "{err}");
    let removed = format!("\n-{}\n", wrong.lines().nth(line).unwrap());
    let added = format!("\n+{}\n", good.lines().nth(line).unwrap());
    assert!(err.contains(&removed) && err.contains(&added), "{err}");

    check_fixture(&path, true).expect("blessing succeeds");
    assert_eq!(std::fs::read_to_string(&path).unwrap(), good);
    check_fixture(&path, false).expect("a blessed fixture passes");
}

/// Blessing a new fixture (a header and a class, nothing expected yet) writes its listings,
/// escaping each `"` so that the file stays a SOM class, and the fixture then passes; a
/// check without its listing, or a listing no check names, is an error.
#[test]
fn blessing_writes_the_listings_of_a_new_fixture() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("Quote.som");
    let source = "\"Strings with a double quote.\n\ncheck bytecode Quote>>text\n\"\n\
                  Quote = (\n    text = ( ^'say \"hi\"' size )\n)\n";
    std::fs::write(&path, source).unwrap();
    let err = check_fixture(&path, false).expect_err("nothing is expected yet");
    assert!(
        err.contains("no expected listing for `check bytecode Quote>>text`"),
        "{err}"
    );

    check_fixture(&path, true).expect("blessing succeeds");
    let blessed = std::fs::read_to_string(&path).unwrap();
    assert!(blessed.starts_with(source), "{blessed}");
    assert!(
        blessed.contains("\n\"=== bytecode Quote>>text\n"),
        "{blessed}"
    );
    assert!(
        blessed.contains("PushLiteral 'say \"\"hi\"\"'"),
        "{blessed}"
    );
    // Checking loads the blessed file again: it is still a SOM class.
    check_fixture(&path, false).expect("a blessed fixture passes");

    let unchecked = blessed.replace("check bytecode Quote>>text", "check bytecode Quote");
    std::fs::write(&path, unchecked).unwrap();
    let err = check_fixture(&path, false).expect_err("the header changed");
    assert!(
        err.contains("no expected listing for `check bytecode Quote`"),
        "{err}"
    );
    assert!(
        err.contains(
            "an expected listing for bytecode Quote>>text, which the header does not check"
        ),
        "{err}"
    );
}

#[test]
fn diffs_number_lines_from_the_listing_start_and_keep_context() {
    let old = "a\nb\nc\nd\ne\nf\ng\nh\ni\nj\n";
    let new = "a\nb\nc\nd\nE\nf\ng\nh\ni\nj\nk\n";
    assert_eq!(
        unified_diff(old, new, 10),
        "@@ -11,9 +11,10 @@\n b\n c\n d\n-e\n+E\n f\n g\n h\n i\n j\n+k\n"
    );
    assert_eq!(unified_diff(old, old, 1), "");
    // Changes far apart are separate hunks.
    let old: String = ('a'..='t').map(|c| format!("{c}\n")).collect();
    let new = old.replace("b\n", "B\n").replace("r\n", "");
    assert_eq!(
        unified_diff(&old, &new, 1),
        "@@ -1,5 +1,5 @@\n a\n-b\n+B\n c\n d\n e\n@@ -15,6 +15,5 @@\n o\n p\n q\n-r\n s\n t\n"
    );
}
