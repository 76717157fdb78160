//! `tally vertical`: instrumented runs end to end.

mod common;

use common::run_in as tally;

/// Stores 4096 elements in order, then reads them back in order.
const WALK: &str = "Walk = ( run = ( | a sum |
    a := Array new: 4096.
    1 to: 4096 do: [:i | a at: i put: i].
    sum := 0.
    1 to: 4096 do: [:i | sum := sum + (a at: i)].
    sum println ) )";

/// The columns of a report row: label, accesses, then misses and rate per level.
fn row<'a>(report: &'a str, label: &str) -> Vec<&'a str> {
    let line = report
        .lines()
        .find(|l| l.starts_with(label))
        .unwrap_or_else(|| panic!("no row {label} in\n{report}"));
    line[label.len()..].split_whitespace().collect()
}

#[test]
fn a_sequential_walk_misses_once_per_line_and_is_attributed_to_its_line_and_class() {
    let d = tempfile::tempdir().unwrap();
    std::fs::write(d.path().join("Walk.som"), WALK).unwrap();
    // An L1 of 1 KiB cannot hold the 32 KiB array; the L2 of 64 KiB can. Fully associative,
    // the L1 keeps the lines used at every step (the frame's, the array's header) and
    // streams the elements through.
    let o = tally(
        d.path(),
        &[
            "vertical",
            "cache",
            "--levels",
            "L1:1K:64:16,L2:64K:64:4",
            "--",
            "Walk.som",
        ],
    );
    let report = String::from_utf8_lossy(&o.stderr).into_owned();
    assert!(o.status.success(), "{report}");
    assert_eq!(String::from_utf8_lossy(&o.stdout), "8390656\n");
    // The array's making (one store over all of it), the start-up's argument Array made,
    // 8192 sends to the array (each reads its header) and 8192 element accesses over
    // 4096 × 8 bytes = 512 lines (513 if the first element does not start a line). L1: the
    // making misses, the first header read misses (the making streamed the header out), and
    // each walk misses each element line once. L2 kept every line since the array was made.
    let array = row(&report, "Array ");
    assert_eq!(array[0], "16386", "{report}");
    let l1: u64 = array[1].parse().unwrap();
    let l2: u64 = array[3].parse().unwrap();
    assert!((1026..=1028).contains(&l1), "{report}");
    assert_eq!(l2, 1, "{report}");
    // The hottest method is the program's, and its table names the lines with the accesses.
    assert!(report.contains("misses by line of Walk>>run"), "{report}");
    let store_line = row(&report, "    3  1 to: 4096 do: [:i | a at: i put: i].");
    assert!(store_line[0].parse::<u64>().unwrap() >= 4096, "{report}");
}

#[test]
fn bad_levels_and_a_missing_program_are_errors() {
    let d = tempfile::tempdir().unwrap();
    std::fs::write(d.path().join("Walk.som"), WALK).unwrap();
    let o = tally(
        d.path(),
        &[
            "vertical",
            "cache",
            "--levels",
            "L1:1000:64:2",
            "--",
            "Walk.som",
        ],
    );
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("--levels"));
    let o = tally(d.path(), &["vertical", "cache", "--", "Nope.som"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr).contains("cannot find the file Nope.som"));
}

#[test]
fn a_trace_is_written_as_the_run_goes_and_reads_back_counted() {
    let d = tempfile::tempdir().unwrap();
    std::fs::write(d.path().join("Walk.som"), WALK).unwrap();
    let o = tally(
        d.path(),
        &["vertical", "trace", "-o", "walk.trace", "--", "Walk.som"],
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(String::from_utf8_lossy(&o.stdout), "8390656\n");
    let o = tally(d.path(), &["vertical", "read", "walk.trace"]);
    let summary = String::from_utf8_lossy(&o.stdout).into_owned();
    assert!(o.status.success(), "{summary}");
    // The walks: 4096 element stores, then 4096 loads; and the run's one method entered and
    // left (with the println it calls).
    assert!(summary.contains("4096  element load"), "{summary}");
    assert!(summary.contains("4096  element store"), "{summary}");
    assert!(summary.contains("object made"), "{summary}");
    // Not over an existing trace without --force.
    let o = tally(
        d.path(),
        &["vertical", "trace", "-o", "walk.trace", "--", "Walk.som"],
    );
    assert_eq!(o.status.code(), Some(2));
    // A trace cut short is refused with the reason.
    let bytes = std::fs::read(d.path().join("walk.trace")).unwrap();
    std::fs::write(d.path().join("cut.trace"), &bytes[..bytes.len() / 2]).unwrap();
    let o = tally(d.path(), &["vertical", "read", "cut.trace"]);
    assert_eq!(o.status.code(), Some(1));
    let e = String::from_utf8_lossy(&o.stderr).into_owned();
    assert!(e.contains("cut.trace"), "{e}");
    std::fs::write(d.path().join("text.trace"), b"hello").unwrap();
    let o = tally(d.path(), &["vertical", "read", "text.trace"]);
    assert!(String::from_utf8_lossy(&o.stderr).contains("not a Tally trace"));
}

/// Makes 2000 short-lived points (garbage at once) and one long-lived table.
const CHURN: &str = "Churn = (
    run = ( | table sum |
        table := Array new: 100.
        sum := 0.
        1 to: 2000 do: [:i | | p |
            p := Array with: i with: i + 1.
            sum := sum + (p at: 1) ].
        1 to: 100 do: [:i | table at: i put: i ].
        sum println.
        (table at: 100) println ) )";

#[test]
fn lifetimes_name_the_site_of_short_lived_objects_with_file_and_line() {
    let d = tempfile::tempdir().unwrap();
    std::fs::write(d.path().join("Churn.som"), CHURN).unwrap();
    let o = tally(
        d.path(),
        &["vertical", "lifetimes", "--short", "1K", "--", "Churn.som"],
    );
    let report = String::from_utf8_lossy(&o.stderr).into_owned();
    assert!(o.status.success(), "{report}");
    assert_eq!(String::from_utf8_lossy(&o.stdout), "2001000\n100\n");
    // `Array with:with:`, called at line 6, makes the 2000 points; each is last used on line
    // 7 (the to:do: loop's block is inlined into run).
    let hint = report
        .lines()
        .find(|l| l.starts_with("Array at ") && l.contains("called from Churn.som:6"))
        .unwrap_or_else(|| panic!("no hint for line 6 in\n{report}"));
    assert!(hint.contains("(Array class>>with:with:)"), "{hint}");
    assert!(
        hint.contains(": 2000 of 2000 objects short-lived"),
        "{hint}"
    );
    assert!(
        report.contains("last used at Churn.som:7 (Churn>>run) (2000)"),
        "{report}"
    );
    // The table, made at line 3 and used to the end, is no hint.
    assert!(!report.contains("Churn.som:3"), "{report}");
}
