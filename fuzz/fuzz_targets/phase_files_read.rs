#![no_main]
//! Feeds arbitrary text to the readers of MonitorMethod's two files: nothing may panic;
//! every rejection must render; whatever is accepted must render back to a file that reads
//! the same, and a selection made from accepted method times must be accepted too.

use libfuzzer_sys::fuzz_target;
use tally_vertical::phase_files::{MethodTimes, Phases};
use tally_vertical::phases::{select, Thresholds};

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    match MethodTimes::parse(text) {
        Ok(t) => {
            assert_eq!(MethodTimes::parse(&t.render()).unwrap(), t);
            let s = select(
                &t.method_times(),
                t.run_ns,
                t.count_probe_ns,
                Thresholds {
                    weight: 0.0,
                    grain_ns: 0.0,
                },
            );
            let p = Phases::from_selection(&t, &s);
            if !p.methods.is_empty() && p.methods.iter().all(|m| m.contains(">>")) {
                assert_eq!(Phases::parse(&p.render()).unwrap(), p);
            }
        }
        Err(e) => assert!(!e.to_string().is_empty()),
    }
    match Phases::parse(text) {
        Ok(p) => assert_eq!(Phases::parse(&p.render()).unwrap(), p),
        Err(e) => assert!(!e.to_string().is_empty()),
    }
});
