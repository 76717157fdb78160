#![no_main]
//! Feeds arbitrary bytes to the profile reader: nothing may panic, allocate without bound or
//! take long; every rejection must render; whatever is accepted must survive a write/read round
//! trip unchanged and be safe to analyse (reports and exports run on it).

use libfuzzer_sys::fuzz_target;
use tally_profile::format::{decode, encode};

fuzz_target!(|data: &[u8]| {
    match decode(data) {
        Ok(profile) => {
            let again = decode(&encode(&profile)).expect("a profile we wrote must read back");
            assert_eq!(again, profile);
            tally_profile::fuzz_support::analyse(&profile);
        }
        Err(err) => {
            assert!(!err.to_string().is_empty());
        }
    }
});
