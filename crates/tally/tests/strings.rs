//! Strings in the optimizing tier: a `length` send whose cache saw Strings is done in place
//! behind a class guard (`string_length`), reading the length of a string of one-byte
//! characters from its header; a string of wider characters deoptimizes, the interpreter
//! counts its characters, and the site's next version sends `length` again.

mod common;
use common::run_main;

const MAIN: &str = "Main = (
    lengthOf: s = ( ^s length )
    run = ( | t k start |
        k := 0.
        start := system ticks.
        [ (system ticks - start) < 300000 ] whileTrue: [ k := k + (self lengthOf: 'hello, world') ].
        t := 0.
        1 to: 1000 do: [ :i | t := t + (self lengthOf: 'h\u{e9}llo w\u{f6}rld') ].
        t println.
        (self lengthOf: 'hello') println.
        (self lengthOf: #symbol) println )
)";

#[test]
fn a_strings_length_is_read_in_place_and_wide_characters_are_counted_by_the_interpreter() {
    let dir = tempfile::tempdir().expect("temp dir");
    std::fs::write(dir.path().join("Main.som"), MAIN).expect("write Main.som");
    let (want, _) = run_main(dir.path(), &["--tier=interp"]);
    assert_eq!(want, "11000\n5\n6\n");
    let model = common::eager_opt_calibration(dir.path());
    let flags = [
        "--tier=adaptive",
        "--calibration",
        &model,
        "--tier-log",
        "--print-ir-after=virtualize-objects",
    ];
    let (got, log) = run_main(dir.path(), &flags);
    assert_eq!(got, want, "{log}");
    assert!(log.contains("= string_length v"), "{log}");
    assert!(
        log.contains("(#length): a string's length found characters of more than a byte"),
        "{log}"
    );
    let (stressed, log) = run_main(dir.path(), &[&flags[..3], &["--gc-stress", "50"]].concat());
    assert_eq!(stressed, want, "{log}");
}
