//! GC hints end to end: a recording run finds the boundaries of a phased program, the hints
//! make collections there in every tier without changing what the program prints, and a
//! hints file that does not fit is refused with the reason.

mod common;

use std::process::Output;

use common::{run_in as tally, text};

/// Rounds that each build a tree (live while the round walks it, garbage after), entered and
/// left through `begin:` and `finish:`, and a log that lives to the end.
const ROUNDS: &str = r#"
Rounds = (
    | log |
    build: depth = (
        | node |
        node := Array new: 3.
        node at: 3 put: depth.
        depth > 0 ifTrue: [
            node at: 1 put: (self build: depth - 1).
            node at: 2 put: (self build: depth - 1) ].
        ^node
    )
    sum: node = (
        (node at: 1) isNil ifTrue: [ ^node at: 3 ].
        ^(node at: 3) + (self sum: (node at: 1)) + (self sum: (node at: 2))
    )
    begin: i = ( ^13 - (i rem: 2) )
    finish: total = ( ^Array with: total with: total * 2 )
    round: i = (
        | tree total |
        tree := self build: (self begin: i).
        total := (self sum: tree) + (self sum: tree).
        ^self finish: total
    )
    run = (
        | all |
        log := Array new: 30.
        1 to: 30 do: [:i | log at: i put: (self round: i) ].
        all := 0.
        log do: [:entry | all := all + (entry at: 1) + (entry at: 2) ].
        ('rounds ' + all asString) println.
        ((log at: 1) at: 1) println.
        ((log at: 2) at: 2) println
    )
)
"#;

/// Another program, for hints that were not recorded for it.
const OTHER: &str = "Other = ( run = ( 'other' println ) )";

fn stderr(o: &Output) -> String {
    text(&o.stderr)
}

fn stdout(o: &Output) -> String {
    text(&o.stdout)
}

/// A directory with the programs and the hints recorded for `Rounds.som`.
fn recorded() -> tempfile::TempDir {
    let d = tempfile::tempdir().unwrap();
    std::fs::write(d.path().join("Rounds.som"), ROUNDS).unwrap();
    std::fs::write(d.path().join("Other.som"), OTHER).unwrap();
    let o = tally(
        d.path(),
        &["--gc-hints-record", "rounds.hints", "Rounds.som"],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let e = stderr(&o);
    assert!(
        e.contains("favorable point(s) written to rounds.hints"),
        "{e}"
    );
    d
}

fn hinted_collections(stderr: &str) -> u64 {
    let line = stderr
        .lines()
        .find(|l| l.starts_with("gc hints: "))
        .unwrap_or_else(|| panic!("no hints line in {stderr}"));
    let collected = line.split_once("collected ").unwrap().1;
    let words: Vec<&str> = collected.split_whitespace().collect();
    // "N nursery, M full"
    words[0].parse::<u64>().unwrap() + words[2].parse::<u64>().unwrap()
}

#[test]
fn the_recording_finds_the_round_boundaries() {
    let d = recorded();
    let text = std::fs::read_to_string(d.path().join("rounds.hints")).unwrap();
    let points: Vec<&str> = text.lines().filter(|l| l.starts_with("point ")).collect();
    assert!(
        points
            .iter()
            .any(|p| p.contains("Rounds>>begin:") || p.contains("Rounds>>finish:")),
        "{text}"
    );
    // Inside a round live data is high: the tree's own methods are no favorable points.
    assert!(points.iter().all(|p| !p.contains("Rounds>>sum:")), "{text}");
}

#[test]
fn hints_collect_in_every_tier_and_never_change_the_output() {
    let d = recorded();
    let plain = tally(d.path(), &["--tier=interp", "Rounds.som"]);
    assert!(plain.status.success(), "{}", stderr(&plain));
    assert!(stdout(&plain).starts_with("rounds "), "{}", stdout(&plain));
    for tier in ["interp", "baseline", "opt", "adaptive"] {
        for heap in [
            ["--gc=genimmix", "--nursery=1M"],
            ["--gc=semispace", "--heap-size=8M"],
        ] {
            let tier_flag = format!("--tier={tier}");
            let mut args = vec![tier_flag.as_str(), "--gc-stats"];
            args.extend(heap);
            args.extend(["--gc-hints", "rounds.hints", "Rounds.som"]);
            let o = tally(d.path(), &args);
            let e = stderr(&o);
            assert!(o.status.success(), "{args:?}: {e}");
            assert_eq!(stdout(&o), stdout(&plain), "{args:?}");
            assert!(
                hinted_collections(&e) > 0,
                "{args:?}: no hinted collection\n{e}"
            );
        }
    }
}

#[test]
fn a_hints_file_that_does_not_fit_is_refused_with_the_reason() {
    let d = recorded();
    let good = std::fs::read(d.path().join("rounds.hints")).unwrap();
    let mut flipped = good.clone();
    // A digit in a point's live bytes: the file still parses, its checksum does not match.
    let at = good
        .windows(5)
        .position(|w| w == b"live ")
        .expect("a point")
        + 5;
    flipped[at] = if flipped[at] == b'1' { b'2' } else { b'1' };
    std::fs::write(d.path().join("flipped.hints"), &flipped).unwrap();
    let cut = good.len() - "checksum 01234567\n".len();
    std::fs::write(d.path().join("cut.hints"), &good[..cut]).unwrap();
    std::fs::write(d.path().join("text.hints"), b"hello\n").unwrap();
    let cases = [
        ("flipped.hints", "Rounds.som", "checksum mismatch"),
        ("cut.hints", "Rounds.som", "cut short"),
        ("text.hints", "Rounds.som", "not a GC hints file"),
        ("missing.hints", "Rounds.som", "No such file"),
        (
            "rounds.hints",
            "Other.som",
            "record the hints again for this program",
        ),
    ];
    for (file, program, why) in cases {
        let o = tally(d.path(), &["--gc-hints", file, program]);
        let e = stderr(&o);
        assert_eq!(o.status.code(), Some(1), "{file} {program}: {e}");
        assert!(e.contains(why) && e.contains(file), "{file} {program}: {e}");
        assert!(stdout(&o).is_empty(), "{file} {program} ran");
        // Asked to, the run goes on without them, and says so.
        let o = tally(
            d.path(),
            &["--gc-hints", file, "--gc-hints-optional", program],
        );
        let e = stderr(&o);
        assert!(o.status.success(), "{file} {program}: {e}");
        assert!(e.contains("warning") && e.contains(why), "{e}");
        assert!(!stdout(&o).is_empty());
    }
}

#[test]
fn a_recording_never_overwrites_a_file_and_needs_the_interpreter() {
    let d = recorded();
    let before = std::fs::read(d.path().join("rounds.hints")).unwrap();
    let o = tally(
        d.path(),
        &["--gc-hints-record", "rounds.hints", "Other.som"],
    );
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("--force"), "{}", stderr(&o));
    assert_eq!(
        std::fs::read(d.path().join("rounds.hints")).unwrap(),
        before
    );
    for flags in [["--tier=opt"], ["--gc=genimmix"]] {
        let mut args = flags.to_vec();
        args.extend(["--gc-hints-record", "new.hints", "Rounds.som"]);
        let o = tally(d.path(), &args);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", stderr(&o));
        assert!(!d.path().join("new.hints").exists());
    }
}
