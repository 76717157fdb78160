//! The optimizing tier's inlining, end to end: inlined code answers what the interpreter
//! answers (guards failing inside it, collections during it), the tier log says what was
//! inlined, and samples taken in inlined code name the inlined method, its line and the mark.

mod common;

use common::{late_opt_calibration, run_adaptive_profiled, run_in, text};

/// Hot sends to small methods (a leaf with a loop, a chain two deep, a method answering a
/// primitive's result) for long enough (two seconds: a debug build compiles slowly, and other
/// tests share the machine) that the loop runs in optimized code with them inlined; then
/// receivers and operands the compiled code never saw, at the same sends: a string where an
/// array was (a class guard in inlined code fails) and an overflow. What is printed does not
/// depend on how many times the loops ran.
const INLINE: &str = "Inline = (
  | log |
  sumTo: n = ( | s | s := 0. 1 to: n do: [:i | s := s + i]. ^s )
  twice: x = ( ^(self sumTo: x) + (self sumTo: x) )
  add: a to: b = ( ^a + b )
  sizeOf: x = ( ^x length )
  note: x = ( log := x. ^x )
  boom: x = ( ^x frobnicate )
  classes = (
    | total k tail deadline |
    total := 0. k := 0. tail := 0.
    deadline := system ticks + 2000000.
    [tail < 10] whileTrue: [
      k := k + 1.
      system ticks > deadline ifTrue: [tail := tail + 1].
      total := total + (self twice: k % 20) - (self twice: k % 20).
      total := self add: total to: (self sizeOf: (tail > 5 ifTrue: ['ab'] ifFalse: [#(1 2 3)])) - 3.
      self note: tail ].
    ^total
  )
  overflow = (
    | total k tail deadline |
    total := 0. k := 0. tail := 0.
    deadline := system ticks + 2000000.
    [tail < 10] whileTrue: [
      k := k + 1.
      system ticks > deadline ifTrue: [tail := tail + 1].
      total := self add: total to: (tail >= 5 ifTrue: [4611686018427387000] ifFalse: [0]) ].
    ^total
  )
  run = (
    self classes println.
    log println.
    self overflow println.
    self boom: 3
  )
)
";

/// Runs `Inline.som` in `dir` with `flags`: (stdout, stderr, exit status).
fn run_inline(dir: &std::path::Path, flags: &[&str]) -> (String, String, Option<i32>) {
    let mut args = flags.to_vec();
    args.push("Inline.som");
    let out = run_in(dir, &args);
    (text(&out.stdout), text(&out.stderr), out.status.code())
}

#[test]
fn inlined_code_answers_what_the_interpreter_answers() {
    let dir = tempfile::tempdir().expect("temp dir");
    std::fs::write(dir.path().join("Inline.som"), INLINE).unwrap();
    let model = late_opt_calibration(dir.path());
    let (want, want_err, want_status) = run_inline(dir.path(), &["--tier=interp"]);
    assert_eq!(want_status, Some(1), "{want_err}");
    assert!(want_err.contains("frobnicate"), "{want_err}");
    let mut inlined_somewhere = false;
    let mut deopt_in_inlined = false;
    for extra in [&[][..], &["--gc-stress", "200"][..]] {
        let mut flags = vec!["--tier=adaptive", "--calibration", &model, "--tier-log"];
        flags.extend_from_slice(extra);
        let (got, err, status) = run_inline(dir.path(), &flags);
        assert_eq!(
            (got.as_str(), status),
            (want.as_str(), want_status),
            "{extra:?}:\n{err}"
        );
        assert!(err.contains("[tier] inlining from CBS"), "{err}");
        // The error's trace is the interpreter's: inlined or not, every activation has its
        // frame.
        let trace = |e: &str| {
            e.lines()
                .filter(|l| !l.starts_with("[tier]"))
                .collect::<Vec<_>>()
                .join("\n")
        };
        assert_eq!(trace(&err), trace(&want_err), "{extra:?}");
        inlined_somewhere |= err.contains("inlined Inline>>");
        deopt_in_inlined |= err.contains("(inlined into Inline>>");
    }
    assert!(inlined_somewhere, "nothing was inlined");
    assert!(
        deopt_in_inlined,
        "no guard failed in inlined code (the test's point)"
    );
}

#[test]
fn inlining_can_be_turned_off_and_is_only_for_the_adaptive_tier() {
    let dir = tempfile::tempdir().expect("temp dir");
    std::fs::write(dir.path().join("Inline.som"), INLINE).unwrap();
    let model = late_opt_calibration(dir.path());
    let (want, _, _) = run_inline(dir.path(), &["--tier=interp"]);
    for (flag, says) in [
        ("--inline=off", "[tier] no inlining"),
        ("--inline=samples", "[tier] inlining from timer samples"),
    ] {
        let flags = [
            "--tier=adaptive",
            "--calibration",
            &model,
            "--tier-log",
            flag,
        ];
        let (got, err, _) = run_inline(dir.path(), &flags);
        assert_eq!(got, want, "{flag}");
        assert!(err.contains(says), "{flag}: {err}");
        if flag == "--inline=off" {
            assert!(!err.contains(" inlined "), "{err}");
        }
    }
    let (_, err, status) = run_inline(dir.path(), &["--tier=opt", "--inline=cbs"]);
    assert_eq!(status, Some(2));
    assert!(
        err.contains("--inline") && err.contains("needs --tier=adaptive"),
        "{err}"
    );
}

/// `step:`'s body is on its own lines (4 and 5), apart from its header (line 2). The loop
/// runs for a second and a half, whatever the build's speed.
const HOT: &str = "Hot = (
  step: i = (
    | s |
    s := i. 1 to: 3 do: [:j | s := s + j].
    ^s )
  twice: x = ( ^(self step: x) + (self step: x + 1) )
  run = (
    | total k deadline |
    total := 0. k := 0.
    deadline := system ticks + 1500000.
    [system ticks < deadline] whileTrue: [
      1 to: 1000 do: [:i | total := total + (self twice: i)]].
    'done' println
  )
)
";

#[test]
fn a_sample_in_inlined_code_names_the_inlined_method_its_line_and_the_mark() {
    let dir = tempfile::tempdir().expect("temp dir");
    std::fs::write(dir.path().join("Hot.som"), HOT).unwrap();
    let (_, err) = run_adaptive_profiled(dir.path(), "hot.tprof", &[], "Hot.som");
    assert!(err.contains("inlined Hot>>step: into Hot>>twice:"), "{err}");
    let report = run_in(dir.path(), &["report", "hot.tprof"]);
    let report = text(&report.stdout);
    // In the call tree the inlined callee sits under its call site in the method it was
    // inlined into, marked.
    let step_lines: Vec<&str> = report
        .lines()
        .filter(|l| l.contains("Hot>>step: @Hot.som:6"))
        .collect();
    assert!(
        step_lines.iter().any(|l| l.contains("[inlined")),
        "{report}"
    );
    // Per line: samples in the inlined code carry its exact bytecode index, so they fall on
    // the body's line, not only on the lines of calls or the header.
    let lines = run_in(
        dir.path(),
        &["report", "hot.tprof", "--lines", "Hot>>step:"],
    );
    let lines = text(&lines.stdout);
    // Rows: self, total, line number, source.
    let self_on = |n: &str| -> u64 {
        lines
            .lines()
            .find_map(|l| {
                let cols: Vec<&str> = l.split_whitespace().collect();
                (cols.get(2) == Some(&n)).then(|| cols[0].parse().unwrap_or(0))
            })
            .unwrap_or(0)
    };
    assert!(self_on("4") > 0, "{lines}");
}
