#![no_main]
//! Feeds arbitrary bytes to the profile reader: nothing may panic, allocate without bound or
//! take long; every rejection must render; whatever is accepted must survive a write/read round
//! trip unchanged and be safe to analyse (reports and exports run on it).

use libfuzzer_sys::fuzz_target;
use tally_profile::format::{decode, decode_partial, encode};

fuzz_target!(|data: &[u8]| {
    // A file cut short reads up to its last complete chunk: that too must be total, agree
    // with the strict reader on complete files, and write back as a complete file.
    match decode_partial(data) {
        Ok(read) => {
            if read.cut.is_some() {
                assert!(decode(data).is_err(), "a cut file must not read as complete");
                assert!(!read.cut.as_ref().unwrap().to_string().is_empty());
                let again = decode(&encode(&read.profile)).expect("what we read must write back");
                assert_eq!(again, read.profile);
                tally_profile::fuzz_support::analyse(&read.profile);
            }
        }
        Err(err) => assert!(!err.to_string().is_empty()),
    }
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
