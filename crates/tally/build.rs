//! Links the release binary's functions in the order `scripts/text-order` recorded
//! (`text-order.txt`): the functions that typical runs execute, together at the front of the
//! code, so that a run's resident code is what it executes rather than 64 KiB around each of
//! them (the kernel maps a binary's code a 64 KiB window at a time). Peak memory of small
//! programs is mostly code: see BENCHMARKS.md, "Memory".
//!
//! Only release builds for x86-64 Linux, whose default linker (LLD, Rust's since 1.90) reads a
//! symbol ordering file; names the file lists that the build does not have are ignored, and
//! functions it does not list follow the listed ones. The dynamic relocations are packed too
//! (DT_RELR, which needs glibc 2.36). `TALLY_TEXT_ORDER=off` links without either (for a linker
//! other than LLD).

use std::env;
use std::path::Path;

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-changed=text-order.txt");
    println!("cargo:rerun-if-env-changed=TALLY_TEXT_ORDER");
    let release = env::var("PROFILE").is_ok_and(|profile| profile == "release");
    let os = env::var("CARGO_CFG_TARGET_OS").unwrap_or_default();
    let arch = env::var("CARGO_CFG_TARGET_ARCH").unwrap_or_default();
    let wanted = env::var("TALLY_TEXT_ORDER").map_or(true, |value| value != "off");
    let manifest = env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR");
    let order = Path::new(&manifest).join("text-order.txt");
    if release && os == "linux" && arch == "x86_64" && wanted && order.is_file() {
        println!(
            "cargo:rustc-link-arg-bins=-Wl,--symbol-ordering-file={}",
            order.display()
        );
        println!("cargo:rustc-link-arg-bins=-Wl,--no-warn-symbol-ordering");
        // The dynamic relocations in the compact form (DT_RELR, glibc 2.36): the loader reads
        // all of them at start-up, and the usual form is 230 KiB here.
        println!("cargo:rustc-link-arg-bins=-Wl,-z,pack-relative-relocs");
    }
}
