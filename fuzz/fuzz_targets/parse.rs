#![no_main]
//! Feeds arbitrary bytes to the class and method parsers: nothing may panic, overflow the stack
//! or take long, and every error must render.

use libfuzzer_sys::fuzz_target;
use tally_syntax::{parse_class, parse_method, Source};

fuzz_target!(|data: &[u8]| {
    // Lossy conversion keeps the structure of almost-valid inputs instead of discarding them.
    let text = String::from_utf8_lossy(data).into_owned();
    let source = Source::new("fuzz.som", text);
    match parse_class(&source) {
        Ok(class) => {
            // Spans must stay inside the text, or diagnostics and line tables would be wrong.
            assert!(class.span.start <= class.span.end);
            assert!(class.span.end as usize <= source.text().len());
        }
        Err(err) => {
            assert!(err.span.start <= err.span.end, "{err:?}");
            assert!(err.span.end as usize <= source.text().len(), "{err:?}");
            let rendered = err.render(&source);
            assert!(rendered.starts_with("fuzz.som:"));
        }
    }
    if let Err(err) = parse_method(&source) {
        let _ = err.render(&source);
    }
});
