//! Programs at the edges of what the parser and compiler accept: long flat send chains, many
//! methods and locals, the limits of the bytecode (each named in its message with its value),
//! huge lines in diagnostics, a byte-order mark, and paths that are not regular files.

mod common;

use std::path::Path;
use std::process::Output;

use common::{run, text};

/// A directory for one test's files, removed when the test ends (pass or fail).
fn scratch(name: &str) -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix(&format!("tally-source-limits-{name}-"))
        .tempdir()
        .unwrap()
}

fn run_program(dir: &Path, class: &str, source: &str) -> Output {
    let file = dir.join(format!("{class}.som"));
    std::fs::write(&file, source).unwrap();
    run(&[file.to_str().unwrap()])
}

fn assert_som_error(out: &Output, needle: &str) {
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "stderr: {err}");
    assert!(err.contains(needle), "expected {needle:?} in: {err}");
}

#[test]
fn flat_chains_of_five_thousand_sends_parse_compile_and_run() {
    let dir = scratch("chains");
    let binary = vec!["1"; 5000].join(" + ");
    let unary = " abs".repeat(5000);
    let mixed = " + 1 negated negated".repeat(2000);
    let src = format!(
        "Chains = ( run = ( ({binary}) println. (-3{unary}) println. (0{mixed}) println ) )"
    );
    let out = run_program(dir.path(), "Chains", &src);
    assert!(out.status.success(), "stderr: {}", text(&out.stderr));
    assert_eq!(text(&out.stdout), "5000\n3\n2000\n");
}

#[test]
fn a_class_with_a_hundred_thousand_methods_loads() {
    let dir = scratch("methods");
    let mut src = String::from("Many = ( run = ( (self m99999) println )\n");
    for i in 0..100_000 {
        src.push_str(&format!("  m{i} = ( ^{i} )\n"));
    }
    src.push_str(")\n");
    let out = run_program(dir.path(), "Many", &src);
    assert!(out.status.success(), "stderr: {}", text(&out.stderr));
    assert_eq!(text(&out.stdout), "99999\n");
}

#[test]
fn locals_up_to_the_slot_limit_work_and_beyond_it_are_named_errors() {
    let dir = scratch("locals");
    let names = |n: usize| {
        (0..n)
            .map(|i| format!("l{i}"))
            .collect::<Vec<_>>()
            .join(" ")
    };
    // The last of 60,000 locals keeps its own slot (no wrap-around onto the first ones).
    let src = format!(
        "Locals = ( run = ( | {} | l0 := 1. l59999 := 2. (l0 + l59999) println ) )",
        names(60_000)
    );
    let out = run_program(dir.path(), "Locals", &src);
    assert!(out.status.success(), "stderr: {}", text(&out.stderr));
    assert_eq!(text(&out.stdout), "3\n");

    let src = format!("TooMany = ( run = ( | {} | ^nil ) )", names(100_000));
    let out = run_program(dir.path(), "TooMany", &src);
    assert_som_error(&out, "more than 65534 arguments and local variables");
    assert_som_error(&out, "(the limit)");
}

#[test]
fn more_send_arguments_than_the_bytecode_holds_is_a_named_error() {
    let dir = scratch("args");
    let keywords: String = (0..300).map(|i| format!(" k{i}: 1")).collect();
    let src = format!("Args = ( run = ( self{keywords} ) )");
    let out = run_program(dir.path(), "Args", &src);
    assert_som_error(
        &out,
        "a message with 300 arguments: at most 255 (the limit)",
    );
}

#[test]
fn block_nesting_error_names_its_limit() {
    let dir = scratch("blocks");
    let src = format!(
        "Blocks = ( run = ( ^{}nil{} ) )",
        "[ ".repeat(250),
        " ]".repeat(250)
    );
    let out = run_program(dir.path(), "Blocks", &src);
    assert_som_error(
        &out,
        "more than 200 blocks (not inlined) inside one another (the limit)",
    );
}

#[test]
fn a_syntax_error_on_a_huge_line_shows_a_window_around_the_column() {
    let dir = scratch("huge");
    let src = format!("Huge = ( run = ( {} println ) )", "7".repeat(1_000_000));
    let out = run_program(dir.path(), "Huge", &src);
    assert_som_error(&out, "integer literal with 1000000 digits is too long");
    assert!(
        out.stderr.len() < 2_000,
        "{} bytes of stderr",
        out.stderr.len()
    );
    assert!(text(&out.stderr).contains('…'));
}

#[test]
fn a_leading_byte_order_mark_is_skipped() {
    let dir = scratch("bom");
    let out = run_program(
        dir.path(),
        "Bom",
        "\u{feff}Bom = ( run = ( 42 println ) )\n",
    );
    assert!(out.status.success(), "stderr: {}", text(&out.stderr));
    assert_eq!(text(&out.stdout), "42\n");
}

#[test]
fn paths_that_are_not_regular_files_are_named_for_what_they_are() {
    let dir = scratch("kinds");
    let sub = dir.path().join("Dir.som");
    std::fs::create_dir_all(&sub).unwrap();
    let out = run(&[sub.to_str().unwrap()]);
    assert_som_error(&out, "is a directory");

    let fifo = dir.path().join("Pipe.som");
    let made = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap();
    assert!(made.success());
    // Opening a FIFO would wait for a writer; the type is checked before anything is opened.
    let out = run(&[fifo.to_str().unwrap()]);
    assert_som_error(&out, "is a FIFO");
    let out = run(&["-cp", dir.path().to_str().unwrap(), "Pipe"]);
    assert_som_error(&out, "is a FIFO");

    let out = run(&["/dev/null"]);
    assert_som_error(&out, "is a character device");
}
