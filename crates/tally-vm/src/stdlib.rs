//! Tally's own standard library, compiled into the binary (see `build.rs`).

include!(concat!(env!("OUT_DIR"), "/embedded_stdlib.rs"));

/// The source of an embedded class, if the library has it.
pub fn embedded(class: &str) -> Option<&'static str> {
    EMBEDDED
        .iter()
        .find(|(name, _)| *name == class)
        .map(|(_, src)| *src)
}
