//! End-to-end tests of whole stacks and source lines in profiles: a deep recursion keeps its
//! real root, a stack deeper than `--sample-depth` hangs under a `[truncated: N frames]` root
//! that every output counts, and samples resolve to the source lines of their frames.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Output;

use prost::Message;
use tally_vm::tally_profile::export::pprof_proto as pb;

mod common;
use common::run_in;

/// Recurses 2,000 frames deep, then spins there, so nearly every sample is 2,000 deep.
const DEEP: &[u8] = b"Deep = (
    run = ( (self down: 2000) println )
    down: n = ( n = 0 ifTrue: [ ^self spin ]. ^self down: n - 1 )
    spin = ( | x | x := 0. 1 to: 12000000 do: [:i | x := x + i. x > 1000000 ifTrue: [ x := 0 ]]. ^x )
)";

/// `work` spends its time on two lines, one call on each.
const LINES: &[u8] = b"Lines = (
    run = ( 1 to: 4 do: [:i | self work ] )
    work = (
        self spin: 4000000.
        self spin: 4000000
    )
    spin: n = ( | x | x := 0. 1 to: n do: [:i | x := x + i. x > 1000000 ifTrue: [ x := 0 ]]. ^x )
)";

fn ok(o: Output) -> String {
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn read(dir: &Path, name: &str) -> String {
    std::fs::read_to_string(dir.join(name)).unwrap()
}

/// Folded stacks as (stack, count).
fn folded(text: &str) -> Vec<(String, u64)> {
    text.lines()
        .map(|l| {
            let (stack, n) = l.rsplit_once(' ').unwrap();
            (stack.to_string(), n.parse().unwrap())
        })
        .collect()
}

fn pprof(path: &Path) -> pb::Profile {
    let gz = std::fs::read(path).unwrap();
    let mut raw = vec![];
    std::io::Read::read_to_end(&mut flate2::read::GzDecoder::new(&gz[..]), &mut raw).unwrap();
    pb::Profile::decode(&raw[..]).unwrap()
}

#[test]
fn a_2000_deep_recursion_keeps_its_real_root() {
    let d = tempfile::tempdir().unwrap();
    std::fs::write(d.path().join("Deep.som"), DEEP).unwrap();
    ok(run_in(d.path(), &["--profile=deep.profile", "Deep.som"]));
    let report = ok(run_in(d.path(), &["report", "deep.profile"]));
    assert!(!report.contains("[truncated"), "{report}");
    ok(run_in(
        d.path(),
        &["export", "folded", "deep.profile", "-o", "deep.folded"],
    ));
    let stacks = folded(&read(d.path(), "deep.folded"));
    let total: u64 = stacks.iter().map(|s| s.1).sum();
    let deep: u64 = stacks
        .iter()
        .filter(|(s, _)| s.split(';').count() > 2000)
        .map(|s| s.1)
        .sum();
    assert!(total >= 20 && deep * 2 >= total, "{deep} of {total} deep");
    for (stack, _) in &stacks {
        assert!(
            stack.starts_with("Deep>>run") || stack.starts_with('['),
            "every stack starts at the program's root: {}",
            &stack[..stack.len().min(200)]
        );
    }
}

#[test]
fn a_stack_deeper_than_the_sample_depth_hangs_under_a_truncated_root_everywhere() {
    let d = tempfile::tempdir().unwrap();
    std::fs::write(d.path().join("Deep.som"), DEEP).unwrap();
    ok(run_in(
        d.path(),
        &["--profile=cut.profile", "--sample-depth", "100", "Deep.som"],
    ));
    let report = ok(run_in(d.path(), &["report", "cut.profile"]));
    assert!(
        report.contains("samples were deeper than 100 frames (--sample-depth)"),
        "{report}"
    );
    // 2,001 `down:` frames (2000 down to 0), `run` and `spin`, less the 100 kept.
    assert!(report.contains("[truncated: 1903 frames]"), "{report}");

    ok(run_in(
        d.path(),
        &["export", "folded", "cut.profile", "-o", "cut.folded"],
    ));
    let stacks = folded(&read(d.path(), "cut.folded"));
    let cut: u64 = stacks
        .iter()
        .filter(|(s, _)| s.starts_with("[truncated: 1903 frames];Deep>>down:"))
        .map(|s| s.1)
        .sum();
    let total: u64 = stacks.iter().map(|s| s.1).sum();
    assert!(
        cut * 2 >= total,
        "{cut} of {total} under the truncated root"
    );
    assert!(
        stacks
            .iter()
            .all(|(s, _)| s.starts_with("Deep>>run") || s.starts_with('[')),
        "no kept frame poses as the root"
    );

    ok(run_in(
        d.path(),
        &["export", "pprof", "cut.profile", "-o", "cut.pb.gz"],
    ));
    let msg = pprof(&d.path().join("cut.pb.gz"));
    let s = |i: i64| msg.string_table[i as usize].as_str();
    assert!(
        msg.comment
            .iter()
            .any(|&c| s(c).contains("samples were deeper than 100 frames")),
        "pprof comments"
    );
    assert!(msg
        .function
        .iter()
        .any(|f| s(f.name) == "[truncated: 1903 frames]"));

    for (format, needle) in [
        ("speedscope", "samples truncated"),
        ("firefox", "samples truncated"),
        ("chrome", "\"truncated_samples\":"),
        ("flamegraph", "samples truncated"),
    ] {
        let out = format!("cut.{format}");
        ok(run_in(
            d.path(),
            &["export", format, "cut.profile", "-o", &out],
        ));
        let text = read(d.path(), &out);
        assert!(text.contains(needle), "{format} says how many were cut");
        if format != "chrome" {
            assert!(
                text.contains("[truncated: 1903 frames]"),
                "{format} has the root"
            );
        }
    }
}

#[test]
fn samples_resolve_to_source_lines_in_the_report_pprof_and_the_listing() {
    let d = tempfile::tempdir().unwrap();
    std::fs::write(d.path().join("Lines.som"), LINES).unwrap();
    ok(run_in(d.path(), &["--profile=l.profile", "Lines.som"]));

    // The call tree names the caller's line of each call.
    let report = ok(run_in(d.path(), &["report", "l.profile"]));
    assert!(report.contains("Lines>>work @Lines.som:2"), "{report}");
    assert!(report.contains("Lines>>spin: @Lines.som:4"), "{report}");
    assert!(report.contains("Lines>>spin: @Lines.som:5"), "{report}");

    // pprof: one location per (method, line); `work`'s samples sit on its two call lines.
    ok(run_in(
        d.path(),
        &["export", "pprof", "l.profile", "-o", "l.pb.gz"],
    ));
    let msg = pprof(&d.path().join("l.pb.gz"));
    let s = |i: i64| msg.string_table[i as usize].as_str();
    let work = msg
        .function
        .iter()
        .find(|f| s(f.name) == "Lines>>work")
        .expect("work");
    assert_eq!((s(work.filename), work.start_line), ("Lines.som", 3));
    let mut by_line: BTreeMap<i64, u64> = BTreeMap::new();
    let locs: BTreeMap<u64, &pb::Location> = msg.location.iter().map(|l| (l.id, l)).collect();
    for sample in &msg.sample {
        for id in &sample.location_id {
            let line = &locs[id].line[0];
            if line.function_id == work.id {
                *by_line.entry(line.line).or_default() += 1;
            }
        }
    }
    // A sample taken where `work`'s frame is pushed (a profiler hook due at the push) sees
    // it entered with no call yet: its header line (3). That happens at a handful of its 4
    // calls at most.
    let all: u64 = by_line.values().sum();
    let header = by_line.get(&3).copied().unwrap_or(0);
    assert!(
        by_line.contains_key(&4)
            && by_line.contains_key(&5)
            && by_line.keys().all(|l| [3, 4, 5].contains(l))
            && header * 20 <= all,
        "{by_line:?}"
    );

    // The listing agrees with pprof line by line (total column).
    let listing = ok(run_in(
        d.path(),
        &["report", "--lines", "Lines>>work", "l.profile"],
    ));
    for (line, n) in &by_line {
        let row = listing
            .lines()
            .find(|l| l.split_whitespace().nth(2) == Some(&line.to_string()))
            .unwrap_or_else(|| panic!("line {line} in {listing}"));
        assert_eq!(
            row.split_whitespace().nth(1),
            Some(n.to_string().as_str()),
            "{listing}"
        );
        assert!(
            row.contains("self spin: 4000000"),
            "source shown: {listing}"
        );
    }

    // A source file that is gone is said to be gone; the counts remain.
    std::fs::remove_file(d.path().join("Lines.som")).unwrap();
    let listing = ok(run_in(
        d.path(),
        &["report", "--lines", "work", "l.profile"],
    ));
    assert!(listing.contains("note: cannot read Lines.som"), "{listing}");
    let o = run_in(d.path(), &["report", "--lines", "nosuch", "l.profile"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr).contains("no method named like 'nosuch'"));
}
