//! The campaign end to end against a stand-in for `tally`: a script that behaves like the
//! interpreter except in the optimizing tier, where any program that prints something
//! prints something else. The campaign must find that, shrink the program to a `println`
//! in `Main>>run` and save it with a script that shows the difference.

use std::os::unix::fs::PermissionsExt;
use std::time::Duration;

use tally_tierfuzz::compare::Disagreement;
use tally_tierfuzz::{fuzz, Settings};

const FAKE_TALLY: &str = r#"#!/bin/sh
case "$*" in
  *--tier=opt*) grep -q println Main.som && { echo different; exit 0; } ;;
esac
echo same
"#;

#[test]
fn a_divergence_is_found_shrunk_and_saved_with_its_command() {
    let dir = tempfile::tempdir().unwrap();
    let fake = dir.path().join("tally");
    std::fs::write(&fake, FAKE_TALLY).unwrap();
    std::fs::set_permissions(&fake, std::fs::Permissions::from_mode(0o755)).unwrap();
    let out = dir.path().join("divergences");
    let settings = Settings {
        tally: fake,
        first_seed: 11,
        programs: Some(1),
        time: None,
        out: Some(out.clone()),
        shrink_time: Duration::from_secs(120),
        only: vec!["opt".into(), "baseline-gencopy-stress".into()],
        max_divergences: 5,
    };
    let summary = fuzz(&settings, &mut |_| {}).unwrap();
    assert_eq!(summary.progress.programs, 1);
    assert_eq!(summary.divergences.len(), 1);
    let d = &summary.divergences[0];
    assert_eq!(d.config.name, "opt");
    assert_eq!(d.disagreement, Disagreement::Stdout);
    assert!(d.also_in.is_empty(), "{:?}", d.also_in);
    let listing = d.program.listing();
    assert_eq!(d.program.classes.len(), 1, "{listing}");
    // `run:` (emptied), `run` and one `println` in it.
    assert!(d.program.size() <= 5, "{listing}");
    assert!(listing.contains("println"), "{listing}");
    assert!(d.original_size > 20 * d.program.size());
    let saved = d.saved_to.as_ref().expect("saved");
    assert_eq!(saved, &out.join("seed-11-opt"));
    for file in [
        "Main.som",
        "repro.sh",
        "README.txt",
        "eager-opt.toml",
        "original/Main.som",
    ] {
        assert!(saved.join(file).is_file(), "{file}");
    }
    let readme = std::fs::read_to_string(saved.join("README.txt")).unwrap();
    assert!(
        readme.contains("line 1: expected \"same\", got \"different\""),
        "{readme}"
    );
    // The script reruns both and shows the difference.
    let repro = std::process::Command::new(saved.join("repro.sh"))
        .output()
        .unwrap();
    let shown = String::from_utf8_lossy(&repro.stdout);
    assert!(
        shown.contains("< same") && shown.contains("> different"),
        "{shown}"
    );
}
