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
    let report = text(&run_in(dir.path(), &["report", "alloc.tprof"]).stdout);
    // Interpreter, baseline, quick, optimizing.
    let row = |name: &str| -> [u64; 4] {
        let line = report
            .lines()
            .skip_while(|l| !l.starts_with("methods with compiled code"))
            .find(|l| l.contains(&format!("  {name} (")))
            .unwrap_or_else(|| panic!("no tier row for {name}: {report}"));
        let n: Vec<u64> = line
            .split_whitespace()
            .take(4)
            .map(|w| w.parse().unwrap())
            .collect();
        [n[0], n[1], n[2], n[3]]
    };
    let make = row("Alloc>>make");
    let all: u64 = make.iter().sum();
    assert!(all >= 50, "too few samples to judge: {report}");
    assert!(
        make[0] * 100 <= all * 20,
        "{make:?}: most of make's samples (in its primitive) should be in compiled tiers: {report}"
    );
    // The caller's frame: stacks name `fill` in its compiled tier under `make` (which runs
    // in `fill`'s code when it is inlined there). Whether `fill` has its own code or runs
    // inlined in `run`'s depends on which compile the controller finishes first, so both
    // labels are accepted.
    let out = run_in(
        dir.path(),
        &["export", "folded", "-o", "alloc.folded", "alloc.tprof"],
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    let folded = std::fs::read_to_string(dir.path().join("alloc.folded")).unwrap();
    assert!(
        folded.lines().any(
            |l| l.contains("Alloc>>fill [optimizing") && l.contains(";Alloc>>make [optimizing")
        ),
        "{folded}"
    );
}
