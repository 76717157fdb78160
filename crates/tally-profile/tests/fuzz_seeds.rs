//! The profile fuzzer's seeds (`fuzz/seeds_profile`) must stay valid
//! files, or the fuzzer starts from noise. Regenerate them after a format
//! change with `cargo test -p tally-profile --test fuzz_seeds -- --ignored`.

use std::path::PathBuf;

use tally_profile::fixtures::example_profile;
use tally_profile::format::{decode, encode};
use tally_profile::Profile;

fn seeds_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/seeds_profile")
}

fn seeds() -> Vec<(&'static str, Profile)> {
    let full = example_profile();
    let mut small = full.clone();
    small.samples.truncate(2);
    small.exact = None;
    small.cbs_edges = Default::default();
    small.cbs_samples = 0;
    vec![
        ("example.tprof", full),
        ("small.tprof", small),
        ("empty.tprof", Profile::default()),
    ]
}

#[test]
fn fuzz_seeds_are_valid_profiles() {
    for (name, expected) in seeds() {
        let bytes = std::fs::read(seeds_dir().join(name)).unwrap();
        assert_eq!(decode(&bytes).unwrap(), expected, "{name}");
    }
}

/// A file written by format 1.0, kept as written: newer readers still read it.
#[test]
fn a_format_1_0_seed_still_reads() {
    let bytes = std::fs::read(seeds_dir().join("example-1.0.tprof")).unwrap();
    assert_eq!(&bytes[10..12], &0u16.to_le_bytes(), "minor version 0");
    let mut expected = example_profile();
    // Not in 1.0: merged ticks, line tables (1.2), tier decisions (1.3), deopts (1.4),
    // bytecode listings (1.6), a collection's plan and scope (1.9; the example of 1.0 named
    // the plan where the cause is now).
    expected.counters.ticks_merged = 0;
    // Nor samples skipped for pacing (1.10), one of the example's taken samples.
    expected.counters.taken -= expected.counters.dropped_slow;
    expected.counters.dropped_slow = 0;
    for e in &mut expected.events {
        match &mut e.kind {
            tally_profile::EventKind::GcStart { kind } => *kind = "semispace".into(),
            tally_profile::EventKind::GcEnd {
                kind, plan, scope, ..
            } => {
                *kind = "semispace".into();
                *plan = String::new();
                *scope = "full".into();
            }
            _ => {}
        }
    }
    expected.events.retain(|e| {
        !matches!(
            e.kind,
            tally_profile::EventKind::MethodLines { .. }
                | tally_profile::EventKind::MethodBytecodes { .. }
                | tally_profile::EventKind::TierDecision { .. }
                | tally_profile::EventKind::Deoptimized { .. }
        )
    });
    assert_eq!(decode(&bytes).unwrap(), expected);
}

#[test]
#[ignore = "writes the seed files"]
fn write_fuzz_seeds() {
    std::fs::create_dir_all(seeds_dir()).unwrap();
    for (name, p) in seeds() {
        std::fs::write(seeds_dir().join(name), encode(&p)).unwrap();
    }
}

/// The GC hints fuzzer's seed (`fuzz/seeds_gc_hints`) must stay a valid hints file.
#[test]
fn the_gc_hints_seed_reads() {
    let path =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/seeds_gc_hints/example.hints");
    let text = std::fs::read_to_string(path).unwrap();
    let hints = tally_profile::gc_hints::GcHints::parse(&text).unwrap();
    assert_eq!(hints.points.len(), 2);
    assert_eq!(hints.render(), text);
}
