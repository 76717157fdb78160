//! Embeds every `stdlib/*.som` file in the binary, so `tally Hello.som` needs no class path.
use std::fs;
use std::path::Path;

fn main() {
    // The manifest directory of this build, read when the script runs: a script binary
    // reused from a build of another checkout must not read that checkout's library.
    let manifest = std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR");
    let dir = Path::new(&manifest).join("stdlib");
    println!("cargo:rerun-if-changed={}", dir.display());
    // No library is an error, not an empty embedded library.
    let mut entries: Vec<String> = fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", dir.display()))
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".som"))
        .collect();
    entries.sort();
    let mut out = String::from("/// (class name, source) of every class in the embedded library.\npub static EMBEDDED: &[(&str, &str)] = &[\n");
    for name in &entries {
        println!("cargo:rerun-if-changed={}", dir.join(name).display());
        let class = name.trim_end_matches(".som");
        out.push_str(&format!(
            "    ({class:?}, include_str!({:?})),\n",
            dir.join(name).display().to_string()
        ));
    }
    out.push_str("];\n");
    let dest = Path::new(&std::env::var("OUT_DIR").expect("OUT_DIR")).join("embedded_stdlib.rs");
    fs::write(dest, out).expect("write embedded_stdlib.rs");
}
