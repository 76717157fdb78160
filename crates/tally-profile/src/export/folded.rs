//! Folded stacks (`outer;…;inner count`, one line per distinct stack), the
//! input of flame-graph tools; [`to_svg`] renders one with inferno.

use std::collections::BTreeMap;

use super::frame_label;
use crate::profile::Profile;

/// One line per distinct stack, sorted, outermost frame first. Samples
/// with no frame are attributed to their VM state (`[gc]`, …) so the total
/// matches the sample count.
pub fn to_folded(p: &Profile) -> String {
    let symbols = p.symbols();
    let mut stacks: BTreeMap<String, u64> = BTreeMap::new();
    for s in &p.samples {
        let frames = symbols.resolve_sample(s);
        let key = if frames.is_empty() {
            format!("[{}]", s.state.name())
        } else {
            frames
                .iter()
                .rev()
                .map(|f| sanitize(&frame_label(&symbols, f)))
                .collect::<Vec<_>>()
                .join(";")
        };
        *stacks.entry(key).or_insert(0) += 1;
    }
    let mut out = String::new();
    for (k, n) in stacks {
        out.push_str(&k);
        out.push(' ');
        out.push_str(&n.to_string());
        out.push('\n');
    }
    out
}

/// `;` separates frames and the last space separates the count, so
/// neither may appear inside a name.
fn sanitize(name: &str) -> String {
    name.replace(';', ":").replace(['\n', '\r'], " ")
}

/// A flame graph SVG of the folded stacks.
pub fn to_svg(folded: &str, title: &str) -> Result<Vec<u8>, String> {
    let mut options = inferno::flamegraph::Options::default();
    options.title = title.to_string();
    options.count_name = "samples".to_string();
    let mut svg = Vec::new();
    inferno::flamegraph::from_lines(&mut options, folded.lines(), &mut svg)
        .map_err(|e| e.to_string())?;
    Ok(svg)
}
