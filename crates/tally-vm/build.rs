//! Embeds every `stdlib/*.som` file in the binary, so `tally Hello.som` needs no class path.
use std::fs;
use std::path::Path;

fn main() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("stdlib");
    println!("cargo:rerun-if-changed={}", dir.display());
    let mut entries: Vec<String> = fs::read_dir(&dir)
        .map(|rd| {
            rd.filter_map(|e| e.ok())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n.ends_with(".som"))
                .collect()
        })
        .unwrap_or_default();
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
