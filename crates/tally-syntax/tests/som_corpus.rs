//! Parses every `.som` file of a SOM-st/SOM checkout, when one is available.
//!
//! The checkout is not part of this repository, so the test only prints a note when it is
//! missing. Set `SOM_DIR` to point at a checkout elsewhere.

use std::path::{Path, PathBuf};

use tally_syntax::{parse_class, Source};

const DEFAULT_SOM_DIR: &str = "/work/scratch/SOM";

/// Integration tests whose header says the VM must reject them while compiling, and which are
/// syntax errors for this parser too. When the header gives `line L, column C`, the error must
/// be reported there.
///
/// `instance_fields_overlap/test.som` also expects a compile error, but detecting it needs the
/// superclass's fields, so it is the compiler's job and parses fine here.
/// `test_literals_limit_1.som` expects "too many literals", which the reference VMs report
/// while parsing before they reach the real syntax error further down (a missing period before
/// the final `^vector`); this parser reports that syntax error.
const EXPECTED_SYNTAX_ERRORS: &[(&str, &str)] = &[
    (
        "IntegrationTests/Tests/test_literals_limit_1.som",
        "expected '.' or ')' to close the method body started at 15:27, found '^'",
    ),
    (
        "IntegrationTests/Tests/str_escape_unknown.som",
        "unknown escape sequence '\\a'",
    ),
    (
        "IntegrationTests/Tests/call2.som",
        "'arg1' is already declared as a parameter",
    ),
    (
        "IntegrationTests/Tests/instance_fields_overlap2.som",
        "field 'a' is already declared",
    ),
];

fn som_dir() -> Option<PathBuf> {
    let dir = std::env::var_os("SOM_DIR")
        .map(PathBuf::from)
        .unwrap_or(DEFAULT_SOM_DIR.into());
    dir.is_dir().then_some(dir)
}

fn som_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    entries.sort();
    for path in entries {
        if path.is_dir() {
            som_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "som") {
            out.push(path);
        }
    }
}

/// The `line L, column C` that a test header gives for an expected compile error.
fn expected_position(text: &str) -> Option<(u32, u32)> {
    let header = text.strip_prefix('"')?.split('"').next()?;
    let at = header.find("', line ")?;
    let rest = &header[at + "', line ".len()..];
    let (line, rest) = rest.split_once(", column ")?;
    let column: String = rest.chars().take_while(|c| c.is_ascii_digit()).collect();
    Some((line.trim().parse().ok()?, column.parse().ok()?))
}

#[test]
fn every_som_file_parses() {
    let Some(root) = som_dir() else {
        println!(
            "note: no SOM checkout at {DEFAULT_SOM_DIR} (or $SOM_DIR); skipping the corpus test"
        );
        return;
    };
    let mut files = Vec::new();
    for sub in [
        "Smalltalk",
        "TestSuite",
        "Examples",
        "IntegrationTests/Tests",
        "SomSom",
    ] {
        let dir = root.join(sub);
        if dir.is_dir() {
            som_files(&dir, &mut files);
        }
    }
    assert!(
        files.len() > 100,
        "suspiciously few .som files under {}",
        root.display()
    );

    let mut failures = Vec::new();
    let mut expected_seen = 0;
    let mut positions_checked = 0;
    for path in &files {
        let relative = path
            .strip_prefix(&root)
            .unwrap()
            .to_string_lossy()
            .replace('\\', "/");
        let source = Source::read(path).unwrap_or_else(|e| panic!("{e}"));
        let result = parse_class(&source);
        match EXPECTED_SYNTAX_ERRORS
            .iter()
            .find(|(name, _)| *name == relative)
        {
            Some((_, message)) => {
                expected_seen += 1;
                let err = match result {
                    Ok(_) => panic!("{relative} should not parse"),
                    Err(err) => err,
                };
                assert!(
                    err.message.contains(message),
                    "{relative}: unexpected message: {}",
                    err.render(&source)
                );
                if let Some(expected) = expected_position(source.text()) {
                    assert_eq!(err.line_col(&source), expected, "{}", err.render(&source));
                    positions_checked += 1;
                }
            }
            None => {
                if let Err(err) = result {
                    failures.push(err.render(&source));
                }
            }
        }
    }
    assert_eq!(
        expected_seen,
        EXPECTED_SYNTAX_ERRORS.len(),
        "expected-error files missing"
    );
    assert_eq!(positions_checked, 3);
    assert!(
        failures.is_empty(),
        "{} files failed to parse:\n{}",
        failures.len(),
        failures.join("\n\n")
    );
    println!("parsed {} SOM files", files.len());
}

#[test]
fn class_names_match_file_names() {
    // A cheap end-to-end check that the parse is not just "no error": the class name of every
    // library and test-suite class is its file name.
    let Some(root) = som_dir() else {
        println!("note: no SOM checkout; skipping");
        return;
    };
    let mut files = Vec::new();
    som_files(&root.join("Smalltalk"), &mut files);
    som_files(&root.join("TestSuite"), &mut files);
    for path in files {
        let source = Source::read(&path).unwrap();
        let class = parse_class(&source).unwrap_or_else(|e| panic!("{}", e.render(&source)));
        assert_eq!(class.name.name, path.file_stem().unwrap().to_str().unwrap());
        assert_eq!(
            class.span.end as usize,
            source.text().trim_end().len(),
            "{}",
            path.display()
        );
    }
}
