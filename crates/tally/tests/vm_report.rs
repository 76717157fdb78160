//! `tally report --vm` end to end: the VM profiler's split by component, and inside compiled
//! code the samples by bytecode range.

mod common;

use common::{eager_opt_calibration, run_adaptive_profiled, run_in, text};

/// `round` calls `spin:` twenty times; once `spin:` is optimized, nearly all of the run is
/// its loop (line 4) in its optimized code. The outer loop runs for two seconds (a debug build
/// compiles slowly, and other tests share the machine).
const LOOP: &str = "Loop = (
  spin: n = ( | s |
    s := 0.
    1 to: n do: [:i | s := s + (i * 3) - i].
    ^s )
  round = ( | total | total := 0. 1 to: 20 do: [:k | total := total + (self spin: 500)]. ^total )
  run = ( | total deadline |
    total := 0. deadline := system ticks + 2000000.
    [system ticks < deadline] whileTrue: [ total := total + self round ].
    total > 0 ifTrue: ['done' println] )
)
";

/// The samples count at the start of the first line of `section` that contains `needle`.
fn samples_on(section: &str, needle: &str) -> Option<u64> {
    section
        .lines()
        .find(|l| l.contains(needle))
        .and_then(|l| l.split_whitespace().next()?.parse().ok())
}

#[test]
fn samples_in_an_optimized_loop_land_on_its_bytecode_range() {
    let dir = tempfile::tempdir().expect("temp dir");
    std::fs::write(dir.path().join("Loop.som"), LOOP).unwrap();
    // `spin:`'s own code is what is read: with inlining on, `round`'s compile (with `spin:`
    // inlined) may win the race with it and take the samples.
    let (_, err) = run_adaptive_profiled(dir.path(), "loop.tprof", &["--inline=off"], "Loop.som");
    assert!(err.contains("[tier] opt Loop>>spin: ("), "{err}");
    let report = run_in(
        dir.path(),
        &[
            "report",
            "--vm",
            "--top",
            "10",
            "--min-percent",
            "0",
            "loop.tprof",
        ],
    );
    assert!(report.status.success(), "{}", text(&report.stderr));
    let report = text(&report.stdout);
    assert!(report.contains("samples in generated code"), "{report}");
    assert!(report.contains("samples in the VM's own code"), "{report}");
    // `spin:`'s optimized code: its samples, and those on its loop's line.
    let start = report
        .find("Loop>>spin: [optimizing]:")
        .unwrap_or_else(|| panic!("spin:'s optimized code has samples: {report}"));
    let section = &report[start..];
    let section = &section[..section[1..].find("\n\n").map_or(section.len(), |e| e + 1)];
    let all = section
        .split_once("]: ")
        .and_then(|(_, rest)| rest.split_whitespace().next()?.parse::<u64>().ok())
        .expect("the method's sample count");
    let on_loop = samples_on(section, "Loop.som:4")
        .unwrap_or_else(|| panic!("a range on spin:'s loop line: {section}"));
    assert!(all >= 50, "too few samples to judge: {section}");
    assert!(
        on_loop * 100 >= all * 90,
        "{on_loop} of {all} samples on the loop's range: {section}"
    );
    // The range lists its bytecodes and its source line.
    assert!(section.contains("PushConstSendBinary(3) #*"), "{section}");
    assert!(
        section.contains("| 1 to: n do: [:i | s := s + (i * 3) - i]."),
        "{section}"
    );
}

#[test]
fn the_vm_report_refuses_to_combine_with_lines() {
    let dir = tempfile::tempdir().expect("temp dir");
    let out = run_in(
        dir.path(),
        &["report", "--vm", "--lines", "X", "none.tprof"],
    );
    assert!(!out.status.success());
    assert!(
        text(&out.stderr).contains("cannot be used with"),
        "{}",
        text(&out.stderr)
    );
}

/// `make` spends its time in the `Array new:` primitive and the collections it causes;
/// `fill` calls it from a loop. Once both are compiled, their frames carry their tier.
const ALLOC: &str = "Alloc = (
  make = ( ^Array new: 3000 )
  fill = ( | n | n := 0. 1 to: 50 do: [:i | n := n + self make length]. ^n )
  run = ( | total deadline |
    total := 0. deadline := system ticks + 2000000.
    [system ticks < deadline] whileTrue: [ total := total + self fill ].
    total > 0 ifTrue: ['done' println] )
)
";

/// A sample taken in a primitive, or in a caller's frame, of compiled code belongs to that
/// code's tier: compiled code marks its frames, so the samples no longer fall to the
/// interpreter just because the pc was outside generated code. The controller sends what it
/// samples straight to the optimizing tier: the frames' tiers are what is checked, not when
/// a controller fed by samples (which credit a primitive's time to no compiled version)
/// decides to compile.
#[test]
fn samples_in_primitives_and_callers_of_compiled_code_keep_its_tier() {
    let dir = tempfile::tempdir().expect("temp dir");
    std::fs::write(dir.path().join("Alloc.som"), ALLOC).unwrap();
    let model = eager_opt_calibration(dir.path());
    let out = run_in(
        dir.path(),
        &[
            "--tier=adaptive",
            "--calibration",
            &model,
            "--profile=alloc.tprof",
            "Alloc.som",
        ],
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    let out = run_in(
        dir.path(),
        &["export", "folded", "-o", "alloc.folded", "alloc.tprof"],
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    let folded = std::fs::read_to_string(dir.path().join("alloc.folded")).unwrap();
    // `make`'s samples (in its primitive, or the collections it causes): in a compiled tier,
    // in its own code or inlined into `fill`'s (which of the two depends on whether the
    // controller compiles `make` before `fill`; it cannot see time in a primitive).
    let (mut compiled, mut interpreted) = (0u64, 0u64);
    for line in folded.lines() {
        let (stack, count) = line.rsplit_once(' ').expect("a count");
        let count: u64 = count.parse().expect("a count");
        match stack.split(';').find(|f| f.starts_with("Alloc>>make")) {
            Some(f) if f.starts_with("Alloc>>make [optimizing") => compiled += count,
            Some(_) => interpreted += count,
            None => {}
        }
    }
    let all = compiled + interpreted;
    assert!(all >= 50, "too few samples to judge: {folded}");
    assert!(
        interpreted * 100 <= all * 20,
        "{interpreted} of make's {all} samples (in its primitive) interpreted: {folded}"
    );
    // The caller's frame: stacks name `fill` in its compiled tier under `make` (which runs
    // in `fill`'s code when it is inlined there). Whether `fill` has its own code or runs
    // inlined in `run`'s depends on which compile the controller finishes first, so both
    // labels are accepted.
    assert!(
        folded.lines().any(
            |l| l.contains("Alloc>>fill [optimizing") && l.contains(";Alloc>>make [optimizing")
        ),
        "{folded}"
    );
}

/// `round` calls `step:` (too small to be worth much, with inlining off a real call) a
/// thousand times: a good part of `step:`'s time is its entry and return, where its frame
/// record is not on top of the stack yet, or any more.
const CALLS: &str = "Calls = (
  step: x = ( ^x + 1 )
  round = ( | s | s := 0. 1 to: 1000 do: [:i | s := self step: s]. ^s )
  run = ( | total deadline |
    total := 0. deadline := system ticks + 1500000.
    [system ticks < deadline] whileTrue: [ total := total + self round ].
    total > 0 ifTrue: ['done' println] )
)
";

/// A sample whose pc is in `step:`'s code while the frame on top is its caller's is `step:`
/// running, not code of no known version: nearly every sample in generated code names its
/// version (half of them did not when such samples kept the caller's frame).
#[test]
fn samples_in_a_callees_entry_and_return_are_the_callees() {
    let dir = tempfile::tempdir().expect("temp dir");
    std::fs::write(dir.path().join("Calls.som"), CALLS).unwrap();
    let (_, err) = run_adaptive_profiled(dir.path(), "calls.tprof", &["--inline=off"], "Calls.som");
    assert!(err.contains("[tier] opt Calls>>step: ("), "{err}");
    let report = run_in(dir.path(), &["report", "--vm", "calls.tprof"]);
    assert!(report.status.success(), "{}", text(&report.stderr));
    let report = text(&report.stdout);
    let generated = samples_on(&report, "samples in generated code")
        .unwrap_or_else(|| panic!("samples in generated code: {report}"));
    let unplaced = samples_on(&report, "unknown version").unwrap_or(0);
    assert!(generated >= 100, "too few samples to judge: {report}");
    // Shared code (a baseline version's routines, the send probes) names no version either:
    // a few percent, where the callee's entry and return took half of them.
    assert!(
        unplaced * 100 <= generated * 10,
        "{unplaced} of {generated} samples in generated code name no version: {report}"
    );
    assert!(report.contains("Calls>>step: [optimizing]:"), "{report}");
}
