//! `tally validate`: a sampler checked against delays of known size, and a broken one caught.

mod common;

use common::{read_json, run_in as tally, text};

/// `work:` is the hot method, `light:` a warm one, `seven` a trivial one (a constant,
/// answered without a frame: nothing can be injected at its entry).
const PROGRAM: &str = "Val = (
    seven = ( ^7 )
    work: n = ( | s | s := 0. 1 to: n do: [:i | s := s + (i * i) ]. ^s )
    light: i = ( | t | t := i + self seven. ^t * 2 )
    run = (
        | s |
        s := 0.
        1 to: 100000 do: [:i | s := s + (self work: 40) + (self light: i) ].
        s println
    )
)
";

#[test]
fn a_sampler_that_credits_the_caller_is_caught_and_the_real_one_is_not() {
    let d = tempfile::tempdir().unwrap();
    std::fs::write(d.path().join("Val.som"), PROGRAM).unwrap();
    let o = tally(
        d.path(),
        &[
            "validate",
            "--tiers=interp",
            "--samplers=perf,cbs",
            "--perf-rate=1000",
            "--mechanisms=immediate",
            "--amounts=50",
            "--broken-sampler",
            "-o",
            "out",
            "--",
            "Val.som",
        ],
    );
    let err = text(&o.stderr);
    assert!(o.status.success(), "{err}");
    // Progress: every run is announced with its number out of all of them.
    assert!(err.contains("tally validate: [1/"), "{err}");
    assert!(err.contains("left]"), "{err}");
    let json = read_json(&d.path().join("out/validate.json"));
    let places = json["places"].as_array().unwrap();
    let methods: Vec<&str> = places
        .iter()
        .map(|p| p["method"].as_str().unwrap())
        .collect();
    assert!(methods.contains(&"Val>>work:"), "{methods:?}");
    assert!(!methods.contains(&"Val>>seven"), "{methods:?}");
    let check = &json["delay_check"];
    let measured = check["measured_ms"].as_f64().unwrap();
    let injected = check["injected_ms"].as_f64().unwrap();
    assert!(injected > 0.0 && measured > 0.0, "{check}");
    let configs = json["configurations"].as_array().unwrap();
    assert_eq!(configs.len(), 3);
    let (real, cbs, broken) = (&configs[0], &configs[1], &configs[2]);
    // CBS is checked for what it estimates, the calls into each place, with and without.
    assert_eq!(cbs["name"], "interp cbs 3:32@250");
    assert!(cbs["places"][0]["credited_without_ns"].is_array(), "{cbs}");
    assert_eq!(broken["broken"], true);
    let error = |c: &serde_json::Value| c["median_error"].as_f64().unwrap();
    // Crediting callers moves the delay out of every place: all of it is missed.
    assert!(error(broken) < -0.5, "{broken}");
    assert_eq!(broken["flagged"], true);
    // The real sampler credits most of it where it was injected.
    assert!(error(real) > error(broken) + 0.3, "{real}");
    let md = std::fs::read_to_string(d.path().join("out/validate.md")).unwrap();
    assert!(md.contains("credits each sample to the caller"), "{md}");
    assert_eq!(md, text(&o.stdout));
    let svg = std::fs::read_to_string(d.path().join("out/validate.svg")).unwrap();
    assert!(svg.starts_with("<svg") && svg.contains("interp perf@1000 immediate broken"));

    // The output is not overwritten without --force.
    let again = tally(d.path(), &["validate", "-o", "out", "--", "Val.som"]);
    assert_eq!(again.status.code(), Some(1));
    assert!(text(&again.stderr).contains("not empty"));
}

#[test]
fn places_that_cannot_be_delayed_and_bad_amounts_are_refused() {
    let d = tempfile::tempdir().unwrap();
    std::fs::write(d.path().join("Val.som"), PROGRAM).unwrap();
    let o = tally(
        d.path(),
        &[
            "validate",
            "-q",
            "--place=Val>>seven",
            "-o",
            "a",
            "--",
            "Val.som",
        ],
    );
    assert_eq!(o.status.code(), Some(1));
    assert!(
        text(&o.stderr).contains("--place Val>>seven: it runs without a frame of its own"),
        "{}",
        text(&o.stderr)
    );
    let o = tally(
        d.path(),
        &[
            "validate",
            "-q",
            "--place=Val>>nothing",
            "-o",
            "b",
            "--",
            "Val.som",
        ],
    );
    assert_eq!(o.status.code(), Some(1));
    assert!(
        text(&o.stderr).contains("never called it"),
        "{}",
        text(&o.stderr)
    );
    let o = tally(d.path(), &["validate", "--amounts=0", "--", "Val.som"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        text(&o.stderr).contains("--amounts 0"),
        "{}",
        text(&o.stderr)
    );
    // A program that fails stops the validation, with its error and the runs so far kept.
    std::fs::write(d.path().join("Bad.som"), "Bad = ( run = ( ^1/0 ) )\n").unwrap();
    let o = tally(d.path(), &["validate", "-q", "-o", "c", "--", "Bad.som"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        text(&o.stderr).contains("reference run"),
        "{}",
        text(&o.stderr)
    );
    assert!(read_json(&d.path().join("c/validate.json"))["runs"].is_array());
}
