//! The crate's invariant holds only if every file Tally writes goes through it: no other
//! crate's code (tests aside) creates, writes or renames files by itself, except the files
//! listed in `EXEMPT`, each with its reason.

use std::path::{Path, PathBuf};

/// Calls that make or replace a file.
const WRITES: &[&str] = &[
    "fs::write(",
    "File::create(",
    "fs::rename(",
    "OpenOptions::new()",
    "Writer::from_path(",
    "NamedTempFile",
];

/// Files that write files themselves, and why they may.
const EXEMPT: &[(&str, &str)] = &[
    (
        "tally-bench/src/cpu.rs",
        "lock files, held open and locked: never an output, never replaced",
    ),
    (
        "tally-tierfuzz/src/run.rs",
        "the fuzzer's scratch directory: the programs of its child runs, and the files the \
         children write their output into as they run",
    ),
    (
        "tally-vm/src/jit/jitdump.rs",
        "perf's jitdump protocol: perf finds the file by its fixed name in the mmap that the \
         running VM makes of it, so it is written in place as code is compiled",
    ),
    (
        "tally-vm/src/jit/mod.rs",
        "perf's map protocol: /tmp/perf-PID.map, appended as code is compiled",
    ),
];

/// Whether `line` calls `call` (not something whose name ends like it: `OutputFile::create`).
fn calls(line: &str, call: &str) -> bool {
    line.match_indices(call).any(|(at, _)| {
        !line[..at]
            .chars()
            .next_back()
            .is_some_and(|c| c.is_alphanumeric() || c == '_')
    })
}

fn sources(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            sources(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The code of a source file that is not a test: up to its first `#[cfg(test)]` (test
/// modules stand at the end of their files), none of a `tests.rs`.
fn non_test_code(path: &Path) -> String {
    if path.file_name().is_some_and(|n| n == "tests.rs") {
        return String::new();
    }
    let text = std::fs::read_to_string(path).unwrap();
    match text.find("#[cfg(test)]") {
        Some(at) => text[..at].to_string(),
        None => text,
    }
}

#[test]
fn every_file_is_written_through_tally_output() {
    let crates = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut found = Vec::new();
    for krate in std::fs::read_dir(&crates).unwrap() {
        let krate = krate.unwrap().path();
        if krate.file_name().is_some_and(|n| n == "tally-output") {
            continue;
        }
        let mut files = Vec::new();
        if krate.join("src").is_dir() {
            sources(&krate.join("src"), &mut files);
        }
        for file in files {
            let relative = file
                .strip_prefix(&crates)
                .unwrap()
                .to_string_lossy()
                .into_owned();
            if EXEMPT.iter().any(|(exempt, _)| *exempt == relative) {
                continue;
            }
            for (n, line) in non_test_code(&file).lines().enumerate() {
                if WRITES.iter().any(|w| calls(line, w)) {
                    found.push(format!("{relative}:{}: {}", n + 1, line.trim()));
                }
            }
        }
    }
    assert!(
        found.is_empty(),
        "files written without tally_output (use tally_output::write, OutputFile or Stream, \
         or add the file to EXEMPT with its reason):\n{}",
        found.join("\n")
    );
}

#[test]
fn the_exempt_files_still_write_files() {
    let crates = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    for (file, why) in EXEMPT {
        let code = non_test_code(&crates.join(file));
        assert!(
            WRITES.iter().any(|w| calls(&code, w)),
            "{file} is exempt ({why}) but writes no file any more: drop it from EXEMPT"
        );
    }
}
