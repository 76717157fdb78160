//! The phase-file fuzzer's seeds (`fuzz/seeds_phases`) must stay valid files, or the fuzzer
//! starts from noise.

use std::path::PathBuf;

use tally_vertical::phase_files::{MethodTimes, Phases};

fn seed(name: &str) -> String {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../fuzz/seeds_phases")
        .join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

#[test]
fn fuzz_seeds_are_valid_files() {
    let t = MethodTimes::parse(&seed("db.times")).unwrap();
    assert!(!t.methods.is_empty());
    let p = Phases::parse(&seed("db.phases")).unwrap();
    assert!(!p.methods.is_empty());
}
