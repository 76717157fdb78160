//! Receiver-class value profiles end to end: baseline code counts receivers per send site,
//! the optimizing tier guards on the class a table shows dominant (where the two-entry
//! inline cache holds whichever classes came last), optimized code counts nothing, and the
//! answers stay the interpreter's.

mod common;

use common::{late_opt_calibration, run_in, text};

/// `area:`'s send sees `Sq` 18 times in 20 and `Circle` and `Tri` once each, interleaved, so
/// its inline cache ends up holding the two rare classes; its value table knows better. The
/// loop runs for a second and a half (whatever the build's speed); what it prints is the
/// sum over one fixed pass.
const POLY: &str = "Poly = (
  area: s = ( ^s area )
  run = (
    | shapes total deadline |
    shapes := Array new: 20.
    1 to: 20 do: [:i | shapes at: i put: (i = 7
        ifTrue: [Circle new]
        ifFalse: [i = 13 ifTrue: [Tri new] ifFalse: [Sq new]])].
    deadline := system ticks + 1500000.
    [system ticks < deadline] whileTrue: [
      total := 0.
      1 to: 1000 do: [:k | total := total + (self area: (shapes at: k % 20 + 1))]].
    total println
  )
)
";

fn write_program(dir: &std::path::Path) {
    std::fs::write(dir.join("Poly.som"), POLY).unwrap();
    for (class, area) in [("Sq", 4), ("Circle", 3), ("Tri", 2)] {
        std::fs::write(
            dir.join(format!("{class}.som")),
            format!("{class} = ( area = ( | x | x := {area}. ^x + 0 ) )\n"),
        )
        .unwrap();
    }
}

#[test]
fn the_optimizing_tier_guards_on_the_class_the_value_table_counted() {
    let dir = tempfile::tempdir().expect("temp dir");
    write_program(dir.path());
    let model = late_opt_calibration(dir.path());
    let want = text(&run_in(dir.path(), &["--tier=interp", "Poly.som"]).stdout);
    assert_eq!(want, "3850\n");
    for extra in [&[][..], &["--gc-stress", "100"][..]] {
        // Without inlining `run` keeps calling `area:`, so the controller always compiles it
        // on its own, where its send is a root site with the value table.
        let mut args = vec![
            "--tier=adaptive",
            "--calibration",
            &model,
            "--tier-log",
            "--inline=off",
        ];
        args.extend_from_slice(extra);
        args.push("Poly.som");
        let out = run_in(dir.path(), &args);
        let err = text(&out.stderr);
        assert_eq!(text(&out.stdout), want, "{extra:?}: {err}");
        // 18 of 20 is 90 %; the other two are below the 40 % a guard needs.
        assert!(
            err.contains("#area: guards from the value profile: Sq 90%"),
            "{extra:?}: {err}"
        );
    }
    let out = run_in(
        dir.path(),
        &[
            "--tier=adaptive",
            "--calibration",
            &model,
            "--tier-log",
            "--value-profiles=off",
            "Poly.som",
        ],
    );
    assert_eq!(text(&out.stdout), want);
    assert!(!text(&out.stderr).contains("value profile"));
}

#[test]
fn baseline_code_counts_and_optimized_code_does_not() {
    let dir = tempfile::tempdir().expect("temp dir");
    write_program(dir.path());
    let model = late_opt_calibration(dir.path());
    let out = run_in(
        dir.path(),
        &[
            "--tier=adaptive",
            "--calibration",
            &model,
            "--print-code=Poly>>",
            "Poly.som",
        ],
    );
    let err = text(&out.stderr);
    assert!(out.status.success(), "{err}");
    let listing = |header: &str| -> String {
        let start = err
            .find(header)
            .unwrap_or_else(|| panic!("no listing {header}: {err}"));
        let rest = &err[start + header.len()..];
        rest[..rest.find("\n=== ").unwrap_or(rest.len())].to_string()
    };
    // The counting send routine, with the site's table.
    assert!(listing("=== Poly>>area: [baseline]").contains("routine:send_counting"));
    assert!(!listing("=== Poly>>run [opt]").contains("record_value"));
}

#[test]
fn value_profiles_are_refused_where_no_baseline_code_counts() {
    let dir = tempfile::tempdir().expect("temp dir");
    write_program(dir.path());
    for tier in ["--tier=interp", "--tier=opt"] {
        let out = run_in(dir.path(), &[tier, "--value-profiles=on", "Poly.som"]);
        assert_eq!(out.status.code(), Some(2));
        let err = text(&out.stderr);
        assert!(err.contains("--value-profiles"), "{err}");
    }
}
