//! Objects in the optimizing tier (partial escape analysis): a plain object a compiled
//! method makes (after inlining `new` and its initializer) is virtual — never allocated —
//! until it escapes, and made where it does, on that path only; a deoptimization while such
//! objects are live makes them (one inside another included), with the values their fields
//! hold there, before the interpreter goes on.

mod common;
use common::run_main as run;

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

/// The optimizing tier prints `want` (with a collection at every allocation too), no
/// compile fails, and its log shows `event`.
fn compiled_prints(dir: &std::path::Path, want: &str, event: &str) {
    for flags in [
        &["--tier=opt", "--tier-log"][..],
        &["--tier=opt", "--tier-log", "--gc-stress", "1"],
    ] {
        let (got, log) = run(dir, flags);
        assert_eq!(got, want, "{flags:?}: {log}");
        assert!(
            log.contains(event) && !log.contains("opt failed"),
            "{flags:?}: {log}"
        );
    }
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
    compiled_prints(dir.path(), &want, "[tier] deopt Main>>run:k: @");
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

/// Writes `main` and `Pt` into a new directory.
fn program(main: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("temp dir");
    std::fs::write(dir.path().join("Pt.som"), PT).unwrap();
    std::fs::write(dir.path().join("Main.som"), main).unwrap();
    dir
}

/// The IR of the last version of `method` the listing shows.
fn last_ir(listing: &str, method: &str) -> String {
    let last = listing
        .rsplit(&format!("=== {method} [opt]"))
        .next()
        .expect("a listing");
    last.split("--- opt: Cranelift IR")
        .next()
        .expect("the IR")
        .to_string()
}

/// The IR of `Main>>run`'s last version, where one object is virtual, never allocated where
/// it is made, and made at exactly one escape: with the made object's value.
fn made_once_in_run(dir: &std::path::Path) -> (String, String) {
    let (_, listing) = run(dir, &["--tier=opt", "--print-code=Main>>run"]);
    let ir = last_ir(&listing, "Main>>run");
    assert_eq!(ir.matches("= virtual_object").count(), 1, "{ir}");
    assert!(!ir.contains("= new_object"), "{ir}");
    let made: Vec<&str> = ir.lines().filter(|l| l.contains("= materialize")).collect();
    assert_eq!(made.len(), 1, "{ir}");
    let object = made[0]
        .split_whitespace()
        .next()
        .expect("its value")
        .to_string();
    (ir, object)
}

/// `p` escapes (its `hashcode` sent, then stored into a field) on one iteration in a
/// thousand: made there only, it is virtual on the others, and its identity hash is the one
/// it keeps once stored. The first call's double fails a guard, so the method's next version
/// is compiled with the sites' feedback (and `step:with:` inlined into `run`).
const RARE_ESCAPE: &str = "Main = (
    | kept hashes |
    step: i with: w = (
        | p s h |
        p := Pt x: i y: w.
        s := p x + p y.
        (i rem: 1000) = 0 ifTrue: [
            h := p hashcode.
            kept := p.
            (kept hashcode = h) ifTrue: [ hashes := hashes + 1 ] ].
        ^s
    )
    run = (
        | sum |
        hashes := 0.
        sum := self step: 1 with: 1.5.
        1 to: 30000 do: [:i | sum := sum + (self step: i with: 1) ].
        sum println.
        hashes println.
        kept x println.
        (kept == kept) println
    )
)
";

#[test]
fn an_object_that_escapes_on_a_rare_path_is_made_there_only() {
    let dir = program(RARE_ESCAPE);
    let (want, _) = run(dir.path(), &["--tier=interp"]);
    assert_eq!(want, "450045002.5\n30\n30000\ntrue\n");
    compiled_prints(dir.path(), &want, "[tier] opt Main>>run (");
    // Made where `hashcode` takes it, on the rare path: the send gets the made object.
    let (ir, object) = made_once_in_run(dir.path());
    assert!(
        ir.lines()
            .any(|l| l.contains("send #hashcode") && l.contains(&format!(" {object}:"))),
        "{ir}"
    );
}

/// Three points, one inside another (`q`'s x is `p`), all virtual; the last calls' double
/// fails a guard while all three are live, with `p` held only in `q`'s field: the exit
/// makes the three and puts `p` into `q`.
const NESTED: &str = "Main = (
    step: i with: k = (
        | p q r |
        p := Pt x: i y: k.
        q := Pt x: p y: 2.
        r := Pt x: 3 y: i.
        ^(p y + 1) + (q x) x + q y + r x + r y
    )
    run = (
        | sum |
        sum := self step: 1 with: 1.5.
        1 to: 3000 do: [:i | sum := sum + (self step: i with: 1) ].
        sum println.
        sum := 0.
        1 to: 10 do: [:i | sum := sum + (self step: i with: 0.25) ].
        sum println
    )
)
";

#[test]
fn a_deopt_with_an_object_inside_another_makes_both() {
    let dir = program(NESTED);
    let (want, _) = run(dir.path(), &["--tier=interp"]);
    assert_eq!(want, "9024009.5\n172.5\n");
    compiled_prints(
        dir.path(),
        &want,
        "[tier] deopt Main>>step:with: @14 (#+) (inlined into Main>>run)",
    );
    let (_, listing) = run(
        dir.path(),
        &["--tier=opt", "--tier-log", "--print-code=Main>>run"],
    );
    let (before, _) = listing
        .split_once("(inlined into Main>>run)")
        .unwrap_or_else(|| panic!("no deopt in inlined code: {listing}"));
    let ir = last_ir(before, "Main>>run");
    assert_eq!(ir.matches("= virtual_object").count(), 3, "{ir}");
    assert!(
        !ir.contains("= materialize") && !ir.contains("= new_object"),
        "{ir}"
    );
    // The deopt's state: `q` and `r` in locals, `p` only inside `q`.
    let state = ir
        .lines()
        .find(|l| l.contains("Main>>step:with: @14 before"))
        .unwrap_or_else(|| panic!("no state at @14: {ir}"));
    assert_eq!(state.matches("= [").count(), 3, "{state}");
}

/// `p` escapes only by a store into a field of the receiver, on one iteration in a thousand
/// (its fields read before): the store takes the object made there, and nothing else
/// allocates it.
const RARE_STORE: &str = "Main = (
    | kept count |
    step: i with: w = (
        | p s |
        p := Pt x: i y: w.
        s := p x + p y.
        (i rem: 1000) = 0 ifTrue: [ kept := p. count := count + 1 ].
        ^s
    )
    run = (
        | sum |
        count := 0.
        sum := self step: 1 with: 1.5.
        1 to: 30000 do: [:i | sum := sum + (self step: i with: 1) ].
        sum println.
        count println.
        kept x println
    )
)
";

#[test]
fn an_object_stored_into_a_field_on_a_rare_path_is_made_there_only() {
    let dir = program(RARE_STORE);
    let (want, _) = run(dir.path(), &["--tier=interp"]);
    assert_eq!(want, "450045002.5\n30\n30000\n");
    compiled_prints(dir.path(), &want, "[tier] opt Main>>run (");
    let (ir, object) = made_once_in_run(dir.path());
    assert!(
        ir.lines().any(|l| {
            let t = l.trim_start();
            t.starts_with("store_field") && t.contains(&format!(", {object} "))
        }),
        "{ir}"
    );
}
