//! The robustness sweep: every primitive of the core library is invoked (through
//! `Primitive>>invokeOn:with:`) on wrong receivers, with arguments of every kind and with the
//! wrong number of arguments, and `new` / `new:` are sent to every class. Every run must end
//! with exit 0 or a SOM error (exit 1): never a signal, a panic (101) or an abort.
//!
//! A SOM error ends the process, so the cases are numbered and one generated program runs them
//! from a given number on, announcing each on stderr before running it; after an error the
//! next process resumes behind the case that ended the last. Cases that succeed share a
//! process. With `SOM` set to a SOM-st/SOM checkout, the sweep also runs over its
//! `Smalltalk/` library (given with `-cp`, so it replaces ours).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, Mutex};

/// Values of every shape the VM knows, as SOM expressions; receivers and arguments are drawn
/// from them.
const POOL: &[&str] = &[
    "nil",
    "true",
    "3",
    "-7",
    "0",
    "(1073741824 * 1073741824 * 1073741824)",
    "3.5",
    "(0.0 - 2.5)",
    "'str'",
    "''",
    "#sym",
    "(Array new: 2)",
    "[:x | x]",
    "Object new",
    "Object",
    "(Object methods at: 1)",
];

/// Indices (1-based) into `POOL` of the arguments each primitive gets on a right receiver:
/// one value of each shape a primitive may decode (nil, small and big integers, a double, a
/// string, a symbol, an array, a plain object).
const ARGUMENTS: &[usize] = &[1, 3, 6, 7, 9, 11, 12, 14];

/// Primitives left out, each for a reason that is no fault: `exit:` ends the process with the
/// code it is given, and `restart` restarts the method that sent it (the sweep's own loop),
/// by design a loop without end.
const EXCLUDED: &[&str] = &["exit:", "restart"];

fn class_names(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .expect("library directory")
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter_map(|n| n.strip_suffix(".som").map(str::to_string))
        .collect();
    names.sort();
    names
}

/// The sweep program: `run: args` runs cases `args at: 2` up to (not including) `args at: 3`,
/// or with a negative start prints how many cases there are.
fn program(classes: &[String]) -> String {
    let mut s = String::from("RobustnessSweep = (\n  | index start stop pool |\n");
    s.push_str("  pool = (\n    | p |\n");
    s.push_str(&format!("    p := Array new: {}.\n", POOL.len()));
    for (i, v) in POOL.iter().enumerate() {
        s.push_str(&format!("    p at: {} put: {v}.\n", i + 1));
    }
    s.push_str("    ^p\n  )\n");
    s.push_str(&format!(
        "  arguments = ( | a | a := Array new: {}. {} ^a )\n",
        ARGUMENTS.len(),
        ARGUMENTS
            .iter()
            .enumerate()
            .map(|(i, v)| format!("a at: {} put: {v}.", i + 1))
            .collect::<String>()
    ));
    s.push_str("  classes = (\n    | c |\n");
    s.push_str(&format!("    c := Array new: {}.\n", classes.len()));
    for (i, c) in classes.iter().enumerate() {
        s.push_str(&format!("    c at: {} put: {c}.\n", i + 1));
    }
    s.push_str("    ^c\n  )\n");
    let excluded: Vec<String> = EXCLUDED.iter().map(|e| format!("#{e}")).collect();
    s.push_str(&format!(
        "  excluded: sel = ( ^{} )\n",
        excluded
            .iter()
            .map(|e| format!("(sel == {e})"))
            .collect::<Vec<_>>()
            .join(" or: [")
            + &"]".repeat(excluded.len().saturating_sub(1))
    ));
    s.push_str(
        r#"
  arityOf: sel = (
    | s n |
    s := sel asString.
    n := 0.
    1 to: s length do: [:i | (s charAt: i) = ':' ifTrue: [n := n + 1]].
    (n = 0 and: [(s charAt: 1) isLetters not]) ifTrue: [n := 1].
    ^n
  )

  is: r instanceOf: cls = (
    | c |
    c := r class.
    [c == nil] whileFalse: [c == cls ifTrue: [^true]. c := c superclass].
    ^false
  )

  args: n of: v = (
    | a |
    a := Array new: n.
    1 to: n do: [:i | a at: i put: v].
    ^a
  )

  case: aBlock = (
    (index >= start and: [index < stop]) ifTrue: [
      system errorPrintln: ('@case ' concatenate: index asString).
      aBlock value].
    index := index + 1
  )

  sweepPrimitive: m = (
    | k wrong right |
    k := self arityOf: m signature.
    wrong := 0.
    right := false.
    1 to: self pool length do: [:r |
      | recv |
      recv := self pool at: r.
      (self is: recv instanceOf: m holder)
        ifTrue: [
          right ifFalse: [
            right := true.
            self arguments do: [:a | self case: [m invokeOn: (self pool at: r) with: (self args: k of: (self pool at: a))]].
            self case: [m invokeOn: (self pool at: r) with: (self args: k + 1 of: 3)].
            k > 0 ifTrue: [self case: [m invokeOn: (self pool at: r) with: (self args: k - 1 of: 3)]]]]
        ifFalse: [
          "Two wrong receivers per primitive, a different pair each time, so that
           every shape is tried as a wrong receiver across the library."
          (wrong < 2 and: [(r + index) % 5 = 0 or: [r = self pool length]]) ifTrue: [
            wrong := wrong + 1.
            self case: [m invokeOn: (self pool at: r) with: (self args: k of: 3)]]]].
    (self is: m holder instanceOf: m holder) ifFalse: [
      self arguments do: [:a | self case: [m invokeOn: m holder with: (self args: k of: (self pool at: a))]]]
  )

  sweepSide: side = (
    side methods do: [:m |
      (m class == Primitive and: [(self excluded: m signature) not])
        ifTrue: [self sweepPrimitive: m]]
  )

  run: args = (
    start := (args at: 2) asInteger.
    stop := (args at: 3) asInteger.
    start < 0 ifTrue: [start := 0. stop := 0].
    index := 0.
    self classes do: [:c |
      self sweepSide: c.
      self sweepSide: c class].
    self classes do: [:c |
      self case: [c new].
      self case: [c new: 3].
      self case: [c new: 'x'].
      self case: [c new: -1]].
    system errorPrintln: ('@done ' concatenate: index asString)
  )
)
"#,
    );
    s
}

#[derive(Default)]
struct Tally {
    processes: usize,
    cases_run: usize,
    exits: std::collections::BTreeMap<String, usize>,
    failures: Vec<String>,
}

fn run(flags: &[&str], cp: &Path, start: usize, stop: usize) -> (Option<i32>, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_tally"))
        .args(flags)
        .arg("-cp")
        .arg(cp)
        .arg("RobustnessSweep")
        .arg(start.to_string())
        .arg(stop.to_string())
        .output()
        .expect("run tally");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn marker(stderr: &str, tag: &str) -> Option<usize> {
    stderr
        .lines()
        .rev()
        .find_map(|l| l.strip_prefix(tag).and_then(|n| n.trim().parse().ok()))
}

/// Runs cases `start..stop`, a new process after each one that ends its process.
fn sweep_range(flags: &[&str], cp: &Path, start: usize, stop: usize, tally: &Mutex<Tally>) {
    let mut next = start;
    while next < stop {
        let (code, stderr) = run(flags, cp, next, stop);
        let last = marker(&stderr, "@case ");
        let done = marker(&stderr, "@done ").is_some();
        let mut t = tally.lock().unwrap();
        t.processes += 1;
        let key = match code {
            Some(c) => format!("exit {c}"),
            None => "signal".to_string(),
        };
        *t.exits.entry(key).or_default() += 1;
        let ran_to = match last {
            Some(l) => l + 1,
            None => next,
        };
        t.cases_run += ran_to - next;
        let ok = matches!(code, Some(0) | Some(1));
        if !ok || (code == Some(0) && !done) {
            let tail: String = stderr.lines().rev().take(12).collect::<Vec<_>>().join("\n");
            t.failures
                .push(format!("{flags:?} case {last:?}: exit {code:?}\n{tail}"));
        }
        if last.is_none() || (code == Some(0) && done) {
            // Nothing more ran (a failure before the first case), or the range is finished.
            if last.is_none() && !done {
                t.failures
                    .push(format!("{flags:?} no case ran from {next}: {stderr}"));
            }
            break;
        }
        next = ran_to;
    }
}

fn sweep(library: &Path, label: &str) {
    let dir = tempdir(label);
    let classes = class_names(library);
    std::fs::write(dir.join("RobustnessSweep.som"), program(&classes)).unwrap();
    // The library first on the class path, so it defines the core classes.
    let cp = std::env::join_paths([library, dir.as_path()]).unwrap();
    let cp = PathBuf::from(cp);
    let (code, stderr) = run_count(&cp);
    let total = marker(&stderr, "@done ").unwrap_or_else(|| {
        panic!("the sweep program did not count its cases (exit {code:?}):\n{stderr}")
    });
    let tally = Arc::new(Mutex::new(Tally::default()));
    let threads = 2;
    let chunk = total.div_ceil(threads);
    std::thread::scope(|s| {
        for t in 0..threads {
            let (tally, cp) = (tally.clone(), cp.clone());
            s.spawn(move || sweep_range(&[], &cp, t * chunk, ((t + 1) * chunk).min(total), &tally));
        }
    });
    // A subset under GC stress: the first cases (Array's, Block's, … primitives).
    let stressed = total.min(150);
    sweep_range(&["--gc-stress", "50"], &cp, 0, stressed, &tally);
    let t = tally.lock().unwrap();
    println!(
        "{label}: {} classes, {total} cases ({stressed} more under --gc-stress); {} cases run in {} processes; exits {:?}; {} failures",
        classes.len(),
        t.cases_run,
        t.processes,
        t.exits,
        t.failures.len()
    );
    assert!(
        t.failures.is_empty(),
        "{label}: {} runs crashed or failed:\n{}",
        t.failures.len(),
        t.failures.join("\n\n")
    );
    assert_eq!(t.cases_run, total + stressed, "every case ran");
    let _ = std::fs::remove_dir_all(&dir);
}

fn run_count(cp: &Path) -> (Option<i32>, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_tally"))
        .arg("-cp")
        .arg(cp)
        .arg("RobustnessSweep")
        .arg("-1")
        .arg("0")
        .output()
        .expect("run tally");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn tempdir(label: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("tally-sweep-{label}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

#[test]
fn every_primitive_survives_wrong_receivers_arguments_and_arity() {
    let ours = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tally-vm/stdlib");
    sweep(&ours, "tally");
    match std::env::var_os("SOM") {
        Some(som) => sweep(&PathBuf::from(som).join("Smalltalk"), "som"),
        None => println!("SOM is not set: the sweep over SOM-st/SOM's core library is skipped"),
    }
}
