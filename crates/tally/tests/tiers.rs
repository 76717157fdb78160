//! Differential test of the tiers: generated SOM programs (integer and double arithmetic that
//! overflows into big integers, comparisons and branches, inlined and real loops, sends with
//! arguments, blocks with and without non-local returns, fields, receivers whose class
//! changes inside a loop) run interpreted and in every compiled tier, and must print the same.

use std::fmt::Write as _;
use std::process::Command;

/// A small deterministic generator (xorshift64*), so a failing program is reproducible from
/// its seed.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    fn pick<'a>(&mut self, items: &[&'a str]) -> &'a str {
        items[self.below(items.len() as u64) as usize]
    }
}

/// An integer-valued expression over the names in `vars`, at most `depth` levels deep.
fn int_expr(r: &mut Rng, vars: &[&str], depth: u32) -> String {
    if depth == 0 || r.below(4) == 0 {
        return match r.below(6) {
            0 => "4611686018427387903".to_string(),
            1 => format!("-{}", r.below(50)),
            2 | 3 => r.pick(vars).to_string(),
            _ => r.below(100).to_string(),
        };
    }
    let (a, b) = (int_expr(r, vars, depth - 1), int_expr(r, vars, depth - 1));
    match r.below(12) {
        0 => format!("({a} + {b})"),
        1 => format!("({a} - {b})"),
        2 => format!("({a} * {b})"),
        3 => format!("({a} % 97)"),
        4 => format!("({a} < {b} ifTrue: [{a}] ifFalse: [{b}])"),
        // Not inside `combine:with:` itself (whose variables are x and y).
        5 if vars[0] != "x" => format!("(self combine: {a} with: {b})"),
        6 => format!("([:x | x + {b}] value: {a})"),
        7 => format!("(self firstAbove: {a} in: {b})"),
        8 => format!("({a} = {b} ifTrue: [1] ifFalse: [{a} & 255])"),
        // Doubles: immediate and boxed results, mixed with integers, compared.
        9 => format!("((({a} * 0.5) + 1.25 - ({b} * 2.5)) asInteger)"),
        10 => format!("(({a} * 1.5) < ({b} + 0.25) ifTrue: [{a}] ifFalse: [({b} * 1.0e300 * 1.0e10) > 1.0 ifTrue: [1] ifFalse: [2]])"),
        _ => format!("({a} max: {b})"),
    }
}

/// A statement of `run`, over the locals `vars`.
fn statement(r: &mut Rng, vars: &[&str], out: &mut String) {
    let target = r.pick(vars);
    let e = int_expr(r, vars, 3);
    match r.below(8) {
        0 | 1 => writeln!(out, "    {target} := {e}.").unwrap(),
        2 => writeln!(out, "    1 to: {} do: [:i | {target} := {target} + {e} + i].", r.below(20)).unwrap(),
        3 => writeln!(
            out,
            "    k := 0. [k < {}] whileTrue: [k := k + 1. {target} := ({target} + {e}) % 1000003].",
            r.below(30)
        )
        .unwrap(),
        4 => writeln!(out, "    {e} println.").unwrap(),
        // The receiver's class changes inside the loop: small integer, double, big integer.
        5 => writeln!(
            out,
            "    1 to: 12 do: [:i | | v | v := i % 3 = 0 ifTrue: [i + 0.5] ifFalse: [i % 3 = 1 ifTrue: [i * 4611686018427387903] ifFalse: [i]]. {target} := ({target} + (v * 2) - v) asInteger]."
        )
        .unwrap(),
        6 => writeln!(out, "    field := field + {e}. field println.").unwrap(),
        _ => writeln!(out, "    {target} := #(3 1 4 1 5) inject: {target} into: [:acc :x | acc + (x * {e})].").unwrap(),
    }
}

fn program(seed: u64) -> String {
    let mut r = Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1);
    let vars = ["a", "b", "c"];
    let mut s = String::new();
    writeln!(s, "Gen = (\n  | field |").unwrap();
    let body = int_expr(&mut r, &["x", "y"], 2);
    writeln!(s, "  combine: x with: y = ( ^{body} )").unwrap();
    writeln!(
        s,
        "  firstAbove: x in: y = ( #(5 10 20 40) do: [:e | e > (x % 50) ifTrue: [^e + y]]. ^y )"
    )
    .unwrap();
    writeln!(
        s,
        "  run = (\n    | a b c k |\n    a := 1. b := 2. c := 3. field := 0."
    )
    .unwrap();
    for _ in 0..8 {
        statement(&mut r, &vars, &mut s);
    }
    writeln!(
        s,
        "    a println. b println. c println. field println\n  )\n)"
    )
    .unwrap();
    s
}

fn run(dir: &std::path::Path, flags: &[&str]) -> (String, String, Option<i32>) {
    let out = Command::new(env!("CARGO_BIN_EXE_tally"))
        .args(flags)
        .arg(dir.join("Gen.som"))
        .output()
        .expect("run tally");
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
        out.status.code(),
    )
}

#[test]
fn generated_programs_print_the_same_in_every_tier() {
    let dir = tempfile::tempdir().expect("temp dir");
    let tiers: [&[&str]; 2] = [
        &["--tier=baseline"],
        &["--tier=baseline", "--gc-stress", "50"],
    ];
    for seed in 0..40 {
        let source = program(seed);
        std::fs::write(dir.path().join("Gen.som"), &source).unwrap();
        let (want, want_err, want_status) = run(dir.path(), &["--tier=interp"]);
        assert_eq!(
            want_status,
            Some(0),
            "seed {seed}: the interpreter failed:\n{want_err}\n{source}"
        );
        assert!(want.lines().count() >= 4, "seed {seed} printed too little");
        for flags in tiers {
            let (got, err, status) = run(dir.path(), flags);
            assert_eq!(
                (got.as_str(), status),
                (want.as_str(), want_status),
                "seed {seed}, {flags:?}:\n{err}\nprogram:\n{source}"
            );
        }
    }
}

/// `--perf-map` writes `/tmp/perf-PID.map` in perf's format: one `START SIZE NAME` line per
/// compiled function, hexadecimal, the name carrying the tier, ranges disjoint.
#[test]
fn the_perf_map_names_every_compiled_function() {
    let dir = tempfile::tempdir().expect("temp dir");
    std::fs::write(
        dir.path().join("Fib.som"),
        "Fib = ( fib: n = ( n < 2 ifTrue: [^n]. ^(self fib: n - 1) + (self fib: n - 2) ) run = ( (self fib: 15) println ) )",
    )
    .unwrap();
    let child = Command::new(env!("CARGO_BIN_EXE_tally"))
        .args(["--tier=baseline", "--perf-map"])
        .arg(dir.path().join("Fib.som"))
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("run tally");
    let map_path = format!("/tmp/perf-{}.map", child.id());
    let out = child.wait_with_output().expect("wait");
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "610");
    let map = std::fs::read_to_string(&map_path).expect("the perf map was written");
    std::fs::remove_file(&map_path).ok();
    let mut ranges = Vec::new();
    for line in map.lines() {
        let mut parts = line.splitn(3, ' ');
        let start = u64::from_str_radix(parts.next().unwrap(), 16).expect("hex start");
        let size = u64::from_str_radix(parts.next().unwrap(), 16).expect("hex size");
        let name = parts.next().expect("a name");
        assert!(size > 0, "{line}");
        assert!(name.ends_with(" [baseline]"), "{line}");
        ranges.push((start, start + size, name.to_string()));
    }
    assert!(
        ranges.iter().any(|(_, _, n)| n == "Fib>>fib: [baseline]"),
        "{map}"
    );
    assert!(
        ranges.iter().any(|(_, _, n)| n == "Fib>>run [baseline]"),
        "{map}"
    );
    ranges.sort();
    for pair in ranges.windows(2) {
        assert!(pair[0].1 <= pair[1].0, "overlapping: {pair:?}");
    }
}
