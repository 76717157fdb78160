#![no_main]
//! Feeds arbitrary text to the GC hints reader: nothing may panic; every rejection must render;
//! whatever is accepted must render back to the same hints.

use libfuzzer_sys::fuzz_target;
use tally_profile::gc_hints::GcHints;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    match GcHints::parse(&text) {
        Ok(hints) => assert_eq!(GcHints::parse(&hints.render()), Ok(hints)),
        Err(err) => assert!(!err.to_string().is_empty()),
    }
});
