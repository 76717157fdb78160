//! Objects in the optimizing tier: a plain object a compiled method makes (after inlining
//! `new` and its initializer) that nothing but its own field accesses, `==` and frame states
//! use is never allocated; a deoptimization while such objects are live makes them, with
//! the values their fields hold there, before the interpreter goes on.

use std::process::Command;

const PT: &str = "Pt = (
    | x y |
    x = ( ^x )
    y = ( ^y )
    setX: ax y: ay = ( x := ax. y := ay )
    ----
    x: ax y: ay = ( ^self new setX: ax y: ay )
)
";

/// Three points live in each iteration; the last call's double in `c`'s field fails a
/// small-integer guard in the version that keeps them virtual, with all three live.
const MAIN: &str = "Main = (
    run: n k: k = (
        | sum |
        sum := 0.
        1 to: n do: [:i |
            | a b c |
            a := Pt x: i y: 1.
            b := Pt x: 2 y: i.
            c := Pt x: a x + b y y: k.
            a == b ifTrue: [ sum := sum - 1 ].
            a == a ifTrue: [ sum := sum + 1 ].
            sum := sum + (c y + a x) + b x + c x ].
        ^sum
    )
    run = (
        1 to: 50 do: [:r | (self run: 100 k: 5) println ].
        (self run: 100 k: 2.5) println
    )
)
";

fn run(dir: &std::path::Path, flags: &[&str]) -> (String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_tally"))
        .args(flags)
        .arg("-cp")
        .arg(dir)
        .arg(dir.join("Main.som"))
        .output()
        .expect("run tally");
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{flags:?}:\n{stderr}");
    (String::from_utf8_lossy(&out.stdout).into_owned(), stderr)
}

fn write(dir: &std::path::Path) {
    std::fs::write(dir.join("Pt.som"), PT).unwrap();
    std::fs::write(dir.join("Main.som"), MAIN).unwrap();
}

#[test]
fn a_deopt_with_three_virtual_objects_live_makes_them_first() {
    let dir = tempfile::tempdir().expect("temp dir");
    write(dir.path());
    let (want, _) = run(dir.path(), &["--tier=interp"]);
    assert_eq!(want, format!("{}15700.0\n", "15950\n".repeat(50)));
    for flags in [
        &["--tier=opt", "--tier-log"][..],
        &["--tier=opt", "--tier-log", "--gc-stress", "1"],
    ] {
        let (got, log) = run(dir.path(), flags);
        assert_eq!(got, want, "{flags:?}: {log}");
        assert!(
            log.contains("[tier] deopt Main>>run:k: @") && !log.contains("opt failed"),
            "{flags:?}: {log}"
        );
    }
}

/// The listings of `run:k:`: once `new` and `setX:y:` are inlined, its three points are
/// virtual (no allocation), and the version that deoptimized on the last call had them.
#[test]
fn objects_that_do_not_escape_are_never_allocated() {
    let dir = tempfile::tempdir().expect("temp dir");
    write(dir.path());
    let (_, log) = run(
        dir.path(),
        &["--tier=opt", "--tier-log", "--print-code=Main>>run:k:"],
    );
    let (before, _) = log
        .split_once("[tier] deopt Main>>run:k: @")
        .unwrap_or_else(|| panic!("no deopt: {log}"));
    let last = before
        .rsplit("=== Main>>run:k: [opt]")
        .next()
        .expect("a listing");
    let ir = last.split("--- opt: Cranelift IR").next().expect("the IR");
    assert_eq!(ir.matches("= virtual_object").count(), 3, "{ir}");
    assert!(!ir.contains("= new_object"), "{ir}");
    assert!(!ir.contains("= new_instance"), "{ir}");
}
