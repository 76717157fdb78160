//! End-to-end tests of the `tally` command: how it runs programs and how it reports bad input.

use std::path::Path;
use std::process::{Command, Output};

fn tally(dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_tally"))
        .args(args)
        .current_dir(dir)
        .output()
        .expect("run tally")
}

fn write(dir: &Path, name: &str, text: &[u8]) {
    std::fs::write(dir.join(name), text).expect("write fixture");
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

#[test]
fn hello_world_runs_from_the_embedded_library_without_a_class_path() {
    let d = tempfile::tempdir().unwrap();
    write(
        d.path(),
        "Hello.som",
        b"Hello = ( run = ( 'Hello, world' println ) )",
    );
    let o = tally(d.path(), &["Hello.som"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(stdout(&o), "Hello, world\n");
}

#[test]
fn a_class_is_found_by_name_on_the_class_path_and_gets_its_arguments() {
    let d = tempfile::tempdir().unwrap();
    std::fs::create_dir(d.path().join("lib")).unwrap();
    write(
        &d.path().join("lib"),
        "Echo.som",
        b"Echo = ( run: args = ( args do: [:a | a println] ) )",
    );
    let o = tally(d.path(), &["-cp", "lib", "Echo", "one", "-two"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(stdout(&o), "Echo\none\n-two\n");
}

#[test]
fn syntax_errors_name_file_line_and_column_and_show_the_line() {
    let d = tempfile::tempdir().unwrap();
    write(d.path(), "Bad.som", b"Bad = (\n  run = ( 1 + ).\n)\n");
    let o = tally(d.path(), &["Bad.som"]);
    assert_eq!(o.status.code(), Some(1));
    let e = stderr(&o);
    assert!(e.starts_with("Bad.som:2:15: error: "), "{e}");
    assert!(e.contains("\n  run = ( 1 + ).\n"), "{e}");
    assert!(e.contains("              ^"), "{e}");
}

#[test]
fn an_unknown_class_says_where_it_was_looked_for() {
    let d = tempfile::tempdir().unwrap();
    let o = tally(d.path(), &["-cp", "a:b", "Nowhere"]);
    assert_eq!(o.status.code(), Some(1));
    let e = stderr(&o);
    assert_eq!(e.lines().count(), 1, "{e}");
    assert!(e.contains("cannot find class Nowhere"), "{e}");
    assert!(
        e.contains("a/Nowhere.som") && e.contains("b/Nowhere.som"),
        "{e}"
    );
}

#[test]
fn a_missing_file_is_one_clear_line() {
    let d = tempfile::tempdir().unwrap();
    let o = tally(d.path(), &["Missing.som"]);
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(stderr(&o).trim(), "cannot find the file Missing.som");
}

#[test]
fn a_primitive_failure_prints_the_message_and_a_som_stack_trace() {
    let d = tempfile::tempdir().unwrap();
    write(
        d.path(),
        "Div.som",
        b"Div = (\n  run = ( ^self divide )\n  divide = ( ^1 / 0 )\n)\n",
    );
    let o = tally(d.path(), &["Div.som"]);
    assert_eq!(o.status.code(), Some(1));
    let e = stderr(&o);
    let run = e.find("line 2, column").expect("frame of run");
    let divide = e.find("line 3, column").expect("frame of divide");
    assert!(run < divide, "outermost frame first: {e}");
    assert!(e.contains("Div>>run") && e.contains("Div>>divide"), "{e}");
    assert!(e.trim_end().ends_with("Division by zero."), "{e}");
}

#[test]
fn an_unhandled_does_not_understand_reports_and_traces() {
    let d = tempfile::tempdir().unwrap();
    write(d.path(), "Dnu.som", b"Dnu = ( run = ( ^3 frobnicate: 4 ) )");
    let o = tally(d.path(), &["Dnu.som"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stdout(&o).contains("ERROR: Method frobnicate: not found in class Integer"),
        "{}",
        stdout(&o)
    );
    assert!(stderr(&o).contains("Dnu>>run"), "{}", stderr(&o));
}

#[test]
fn error_colon_reports_and_traces() {
    let d = tempfile::tempdir().unwrap();
    write(
        d.path(),
        "Err.som",
        b"Err = ( run = ( self error: 'it broke' ) )",
    );
    let o = tally(d.path(), &["Err.som"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stdout(&o).contains("ERROR: it broke"));
    assert!(stderr(&o).contains("Err>>run"), "{}", stderr(&o));
}

#[test]
fn infinite_recursion_is_a_stack_overflow_not_a_crash() {
    let d = tempfile::tempdir().unwrap();
    write(
        d.path(),
        "Rec.som",
        b"Rec = ( run = ( ^self down: 0 ) down: n = ( ^self down: n + 1 ) )",
    );
    let o = tally(d.path(), &["--max-stack-depth", "5000", "Rec.som"]);
    assert_eq!(o.status.code(), Some(1));
    let e = stderr(&o);
    assert!(e.contains("stack overflow"), "{e}");
    assert!(
        e.contains("Rec>>down:") && e.contains("repeats 4998 more times"),
        "{e}"
    );
    assert!(e.lines().count() < 20, "recursion is folded: {e}");
}

#[test]
fn heap_exhaustion_is_reported_with_heap_figures() {
    let d = tempfile::tempdir().unwrap();
    write(
        d.path(),
        "Oom.som",
        b"Oom = ( run = ( | v | v := nil. 1 to: 100000000 do: [:i | v := Array with: v with: (Array new: 100)] ) )",
    );
    let o = tally(d.path(), &["--heap-size", "8M", "Oom.som"]);
    assert_eq!(o.status.code(), Some(1));
    let e = stderr(&o);
    assert!(e.contains("out of memory"), "{e}");
    assert!(e.contains("heap limit 8388608 bytes"), "{e}");
    assert!(e.contains("Oom>>run"), "{e}");
}

/// `--heap-min` is where the growing heap starts: a program that allocates 35 MB of garbage
/// collects many times within 4 MiB, once or not at all within SemiSpace's default 64 MiB;
/// the generational default starts at 16 MiB.
#[test]
fn the_heap_starts_at_heap_min() {
    let d = tempfile::tempdir().unwrap();
    write(
        d.path(),
        "Min.som",
        b"Min = ( run = ( | v | 1 to: 200000 do: [:i | v := Array new: 20]. 'ok' println ) )",
    );
    let collections = |args: &[&str]| -> (u64, String) {
        let o = tally(d.path(), args);
        assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
        let e = stderr(&o);
        let n = e
            .split_once("): ")
            .and_then(|(_, rest)| rest.split_whitespace().next()?.parse().ok())
            .unwrap_or_else(|| panic!("no collection count: {e}"));
        (n, e)
    };
    let semispace = ["--gc=semispace", "--gc-stats"];
    let (small, e) = collections(&[&semispace[..], &["--heap-min", "4M", "Min.som"]].concat());
    assert!(e.contains("of 4194304 bytes"), "{e}");
    let (default, e) = collections(&[&semispace[..], &["Min.som"]].concat());
    assert!(e.contains("of 67108864 bytes"), "{e}");
    assert!(small >= 5 && default <= 2, "{small} against {default}");
    let (_, e) = collections(&["--gc-stats", "Min.som"]);
    assert!(
        e.contains("gc (genimmix)") && e.contains("of 16777216 bytes"),
        "{e}"
    );
}

/// Every collector reports running out of its heap the same way.
#[test]
fn heap_exhaustion_is_reported_under_every_collector() {
    let d = tempfile::tempdir().unwrap();
    write(
        d.path(),
        "Oom.som",
        b"Oom = ( run = ( | v | v := nil. 1 to: 100000000 do: [:i | v := Array with: v with: (Array new: 100)] ) )",
    );
    for plan in ["genimmix", "gencopy", "semispace", "immix", "marksweep"] {
        let o = tally(d.path(), &["--gc", plan, "--heap-size", "8M", "Oom.som"]);
        assert_eq!(o.status.code(), Some(1), "{plan}");
        let e = stderr(&o);
        assert!(e.contains("out of memory"), "{plan}: {e}");
        assert!(e.contains("Oom>>run"), "{plan}: {e}");
    }
}

#[test]
fn binary_source_is_rejected_clearly() {
    let d = tempfile::tempdir().unwrap();
    write(d.path(), "Bin.som", b"\xff\xfeBin = ( )");
    let o = tally(d.path(), &["Bin.som"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("not valid UTF-8"), "{}", stderr(&o));
}

#[test]
fn exit_status_comes_from_system_exit() {
    let d = tempfile::tempdir().unwrap();
    write(
        d.path(),
        "Quit.som",
        b"Quit = ( run = ( 'bye' println. system exit: 42 ) )",
    );
    let o = tally(d.path(), &["Quit.som"]);
    assert_eq!(o.status.code(), Some(42));
    assert_eq!(stdout(&o), "bye\n", "output is flushed before exiting");
}

#[test]
fn bad_options_are_rejected_with_usage() {
    let d = tempfile::tempdir().unwrap();
    let o = tally(d.path(), &["--heap-size", "lots", "X"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("not a size"), "{}", stderr(&o));
    let o = tally(d.path(), &["--heap-min", "1M", "X"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).contains("heap size of 1048576 bytes is below the minimum"),
        "{}",
        stderr(&o)
    );
    let o = tally(d.path(), &["--heap-min", "8M", "--heap-size", "64M", "X"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("cannot be used with"), "{}", stderr(&o));
    let o = tally(d.path(), &["--gc", "refcount", "X"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o)
            .contains("unknown collector 'refcount'; choose one of semispace, gencopy, genimmix, immix, marksweep"),
        "{}",
        stderr(&o)
    );
    let o = tally(d.path(), &[]);
    assert_eq!(o.status.code(), Some(2));
}

#[test]
fn help_explains_the_class_path_and_the_run_convention() {
    let d = tempfile::tempdir().unwrap();
    let o = tally(d.path(), &["--help"]);
    assert!(o.status.success());
    let h = stdout(&o);
    assert!(
        h.contains("-cp")
            && h.contains("run:")
            && h.contains("--gc-stress")
            && h.contains("--heap-size"),
        "{h}"
    );
}

/// `tally disasm` prints each instruction with its index, named operands and source position,
/// then the blocks the method creates; an unknown method is a clear error.
#[test]
fn disasm_prints_bytecode_with_source_positions_and_blocks() {
    let d = tempfile::tempdir().unwrap();
    std::fs::write(
        d.path().join("Dis.som"),
        "Dis = (\n  twice: x = (\n    ^[ :y | y + y ] value: x\n  )\n)\n",
    )
    .unwrap();
    let out = tally(d.path(), &["disasm", "-cp", ".", "Dis>>twice:"]);
    let text = stdout(&out);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(text.starts_with("Dis>>twice:  ("), "{text}");
    assert!(text.contains("Dis.som:2; 1 argument(s)"), "{text}");
    assert!(text.contains("PushBlock [] in Dis>>twice:"), "{text}");
    assert!(text.contains("#value:"), "{text}");
    assert!(text.contains("3:5"), "the block's line and column: {text}");
    assert!(
        text.contains("^[ :y | y + y ] value: x"),
        "the source line: {text}"
    );
    // The block follows, with its own code.
    let block = text.split("\n\n").nth(1).expect("the block's section");
    assert!(block.starts_with("[] in Dis>>twice:"), "{block}");
    assert!(block.contains("#+"), "{block}");
    let out = tally(d.path(), &["disasm", "-cp", ".", "Dis>>nothing"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("Dis has no method nothing"));
}

/// `disasm --tier=baseline` adds what the baseline tier's template compiler makes of the
/// method: its machine instructions under the bytecode index each run serves.
#[test]
fn disasm_shows_the_baseline_machine_code_by_bytecode_index() {
    let d = tempfile::tempdir().unwrap();
    std::fs::write(
        d.path().join("Inc.som"),
        "Inc = ( inc: x = ( ^x + 1 ) )
",
    )
    .unwrap();
    let out = tally(
        d.path(),
        &["disasm", "-cp", ".", "--tier=baseline", "Inc>>inc:"],
    );
    let text = stdout(&out);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(text.contains("PushConstSendBinary"), "{text}");
    let machine = text
        .split("--- baseline: machine code")
        .nth(1)
        .expect("a machine-code section");
    assert!(machine.contains("\n@0:\n"), "{machine}");
    assert!(machine.contains("\n@1:\n"), "{machine}");
    // The inline small-integer add, its overflow to the operation's routine.
    assert!(machine.contains("jo "), "{machine}");
    assert!(machine.contains("routine:binary:Add"), "{machine}");
}

/// `disasm --show` prints only the parts asked for, each method's and block's heading kept;
/// the stubs and the yieldpoint flag appear by name, never as their run-to-run addresses.
#[test]
fn disasm_show_picks_the_parts_and_names_stubs_and_the_flag() {
    let d = tempfile::tempdir().unwrap();
    write(
        d.path(),
        "Down.som",
        b"Down = ( from: n = ( | k | k := n. [ k > 0 ] whileTrue: [ k := k - 1 ]. ^k ) )\n",
    );
    let run = |args: &[&str]| {
        let mut all = vec!["disasm", "-cp", "."];
        all.extend_from_slice(args);
        all.push("Down>>from:");
        tally(d.path(), &all)
    };
    let out = run(&["--tier=opt", "--show=ir"]);
    let ir = stdout(&out);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(ir.starts_with("Down>>from:  ("), "{ir}");
    assert!(!ir.contains("JumpBack"), "no bytecode rows: {ir}");
    assert!(ir.contains("--- opt: Cranelift IR"), "{ir}");
    assert!(!ir.contains("--- opt: machine"), "{ir}");
    assert!(!ir.contains("--- opt: Tally IR"), "{ir}");
    assert!(ir.contains("addr:yieldpoint_flag"), "{ir}");

    let out = run(&["--tier=baseline", "--show=bytecode,machine"]);
    let text = stdout(&out);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(text.contains("JumpBack(2)"), "{text}");
    assert!(text.contains("--- baseline: machine code"), "{text}");
    assert!(text.contains("addr:yieldpoint_flag"), "{text}");
    assert!(text.contains("trampoline:back_edge"), "{text}");
    assert_eq!(
        stdout(&run(&["--tier=baseline", "--show=bytecode,machine"])),
        text,
        "the same machine code in every run"
    );
    let out = run(&["--tier=baseline", "--show=ir"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stdout(&out).contains("--- baseline: no IR"),
        "{}",
        stdout(&out)
    );

    let out = run(&["--show=ir"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("need a compiling tier"),
        "{}",
        stderr(&out)
    );
}

/// `Loop>>run` sums a loop the optimizing tier compiles with on-stack-replacement entries.
const LOOP: &[u8] =
    b"Loop = ( run = ( | s | s := 0. 1 to: 2000 do: [:i | s := s + i]. s println ) )";

#[test]
fn time_passes_prints_every_phase_of_compilation_at_exit() {
    let d = tempfile::tempdir().unwrap();
    write(d.path(), "Loop.som", LOOP);
    let o = tally(d.path(), &["--tier=opt", "--time-passes", "Loop.som"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(stdout(&o), "2001000\n");
    let e = stderr(&o);
    let table = e
        .split_once("--time-passes: ")
        .map(|(_, t)| t)
        .unwrap_or_else(|| panic!("no table: {e}"));
    for phase in [
        "tally-ir  build",
        "tally-ir  trim-states",
        "tally-ir  fold",
        "tally-ir  dce",
        "lowering  lower",
        "cranelift Register allocation",
        "module    define",
        "module    finalize",
        "vm        install",
    ] {
        assert!(table.contains(phase), "{phase} missing: {table}");
    }
    // What lowering wrote: the rows add up to the total the header states, and the entry,
    // the exits and the loop's arithmetic are among them.
    let (header, rows) = e
        .split_once(" Cranelift instructions written by the optimizing tier's lowering")
        .unwrap_or_else(|| panic!("no instruction table: {e}"));
    let total: u64 = header.rsplit(' ').next().unwrap().parse().unwrap();
    let rows: Vec<(u64, &str)> = rows
        .lines()
        .skip(2)
        .map(|l| {
            let cells: Vec<&str> = l.split_whitespace().collect();
            (cells[0].parse().unwrap(), cells[3])
        })
        .collect();
    assert_eq!(rows.iter().map(|r| r.0).sum::<u64>(), total, "{e}");
    for what in ["entry", "exits", "IntBinary"] {
        assert!(rows.iter().any(|r| r.1 == what && r.0 > 0), "{what}: {e}");
    }
}

#[test]
fn print_ir_after_prints_the_ir_after_the_passes_named() {
    let d = tempfile::tempdir().unwrap();
    write(d.path(), "Loop.som", LOOP);
    let args = [
        "disasm",
        "-cp",
        ".",
        "--tier=opt",
        "--show=tally-ir",
        "--print-ir-after=build,virtualize-contexts",
        "Loop>>run",
    ];
    let o = tally(d.path(), &args);
    assert!(o.status.success(), "{}", stderr(&o));
    let e = stderr(&o);
    assert!(
        e.contains("--- Tally IR of Loop>>run after build (step 0)\nfunction Loop>>run: "),
        "{e}"
    );
    assert!(
        e.contains("--- Tally IR of Loop>>run after virtualize-contexts (step "),
        "{e}"
    );
    assert!(!e.contains("after fold"), "{e}");
    let o = tally(
        d.path(),
        &["--tier=opt", "--print-ir-after=folding", "Loop.som"],
    );
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("no phase is called `folding`; the phases are build, trim-states,"),
        "{}",
        stderr(&o)
    );
}
