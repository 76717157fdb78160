//! Doubles in the optimizing tier: sites that saw only doubles compute on them unboxed, in
//! registers through loops, and box them only where a SOM value is needed — exits
//! included, where NaN, the infinities, −0.0 and subnormals must come back exactly.

mod common;
use common::run_main as run;

/// `accumulate:last:` keeps four special doubles in loop variables (a subnormal sum, −0.0,
/// +∞ and NaN: the last two are heap Doubles, the others immediates); its last call passes
/// an integer where the site has only seen doubles, so the version deoptimizes inside the
/// loop with all four live and its exit boxes them. `escape:` is a loop of doubles that
/// sends nothing: its only way out of compiled code is an exit. `compare:with:` compares
/// every pair of 1.5, −0.0, 0.0, +∞ and NaN (true of `>`, `>=` and `~=` with NaN, as the
/// libraries derive them from `<` and `=`).
const MAIN: &str = "Main = (
    accumulate: n last: y = (
        | acc lo big q d r |
        acc := 0.0. lo := 0.0 * -1.0. big := Double PositiveInfinity. q := big - big.
        1 to: n do: [:i |
            d := i = n ifTrue: [y] ifFalse: [1.0e-310].
            acc := acc + d.
            lo := lo * 1.0.
            big := big * 2.0.
            q := q + 1.0 ].
        r := Array new: 4.
        r at: 1 put: acc. r at: 2 put: lo. r at: 3 put: big. r at: 4 put: q.
        ^r
    )
    escape: cr = (
        | zr zi k |
        zr := 0.0. zi := 0.0. k := 0.
        [ (k < 50) and: [ ((zr * zr) + (zi * zi)) <= 4.0 ] ] whileTrue: [
            | t |
            t := (zr * zr) - (zi * zi) + cr.
            zi := (2.0 * zr * zi) + cr.
            zr := t.
            k := k + 1 ].
        ^k
    )
    compare: a with: b = (
        ^(a < b) asString + (a <= b) asString + (a > b) asString
            + (a >= b) asString + (a = b) asString + (a ~= b) asString
    )
    show: r = ( r do: [:e | e print. ' ' print ]. '' println )
    run = (
        | sum specials |
        1 to: 20 do: [:k | self show: (self accumulate: 10 last: 1.0e-310) ].
        self show: (self accumulate: 10 last: 3).
        sum := 0.
        -20 to: 20 do: [:k | sum := sum + (self escape: k // 40.0) ].
        sum println.
        specials := Array new: 5.
        specials at: 1 put: 1.5. specials at: 2 put: 0.0 * -1.0. specials at: 3 put: 0.0.
        specials at: 4 put: Double PositiveInfinity.
        specials at: 5 put: (specials at: 4) - (specials at: 4).
        1 to: 20 do: [:k |
            specials do: [:a | specials do: [:b | (self compare: a with: b) print. ' ' print ] ].
            '' println ]
    )
)
";

#[test]
fn special_doubles_stay_exact_through_unboxed_loops_and_a_deopt() {
    let dir = tempfile::tempdir().expect("temp dir");
    std::fs::write(dir.path().join("Main.som"), MAIN).unwrap();
    let (want, _) = run(dir.path(), &["--tier=interp"]);
    let usual = "9.99999999999997e-310 -0.0 Infinity NaN \n";
    let sums = format!("{}3.0 -0.0 Infinity NaN \n1800\n", usual.repeat(20));
    assert!(want.starts_with(&sums), "{want}");
    let comparisons: Vec<&str> = want[sums.len()..].lines().collect();
    assert_eq!(comparisons.len(), 20, "{want}");
    let pairs: Vec<&str> = comparisons[0].split_whitespace().collect();
    // < <= > >= = ~= of −0.0 and 0.0, and of NaN and 1.5.
    assert_eq!(pairs[7], "falsetruefalsetruetruefalse", "{want}");
    assert_eq!(pairs[20], "falsefalsetruetruefalsetrue", "{want}");
    for flags in [
        &["--tier=opt", "--tier-log"][..],
        &["--tier=opt", "--tier-log", "--gc-stress", "1"],
        &["--tier=opt", "--tier-log", "--inline=off"],
    ] {
        let (got, log) = run(dir.path(), flags);
        assert_eq!(got, want, "{flags:?}: {log}");
        assert!(
            log.contains("[tier] deopt Main>>accumulate:last: @")
                && log.contains("(#+): double guard failed"),
            "{flags:?}: {log}"
        );
        assert!(!log.contains("opt failed"), "{flags:?}: {log}");
        // Its first version speculated on small integers; the second computes on doubles.
        assert!(
            log.matches("[tier] opt Main>>escape: (").count() >= 2,
            "{flags:?}: {log}"
        );
    }
}

/// The listing of the version that saw doubles: its loop variables are doubles (block
/// parameters typed `float`), multiplied as doubles, and not boxed inside the loop.
#[test]
fn a_loop_of_doubles_keeps_its_variables_unboxed() {
    let dir = tempfile::tempdir().expect("temp dir");
    std::fs::write(dir.path().join("Main.som"), MAIN).unwrap();
    let (_, listing) = run(dir.path(), &["--tier=opt", "--print-code=Main>>escape:"]);
    let last = listing
        .rsplit("=== Main>>escape: [opt]")
        .next()
        .expect("a listing");
    let ir = last.split("--- opt: Cranelift IR").next().expect("the IR");
    let params: Vec<&str> = ir
        .lines()
        .filter(|l| l.starts_with("block") && l.contains(": float"))
        .collect();
    assert!(!params.is_empty(), "{ir}");
    assert!(ir.contains("float_mul"), "{ir}");
    assert!(ir.contains("float_le"), "{ir}");
    assert!(!ir.contains("= box_float"), "{ir}");
}
