//! Folded stacks (`outer;…;inner count`, one line per distinct stack), the
//! input of flame-graph tools; [`to_svg`] renders one with inferno.

use std::collections::BTreeMap;

use super::sample_labels;
use crate::profile::Profile;

/// One line per distinct stack, sorted, outermost frame first. Samples
/// with no frame are attributed to their VM state (`[gc]`, …) so the total
/// matches the sample count.
pub fn to_folded(p: &Profile) -> String {
    let symbols = p.symbols();
    let mut stacks: BTreeMap<String, u64> = BTreeMap::new();
    for s in &p.samples {
        let key = sample_labels(&symbols, s)
            .iter()
            .map(|l| sanitize(l))
            .collect::<Vec<_>>()
            .join(";");
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

/// How a flame graph is drawn (the options of inferno's own command that users ask for).
#[derive(Clone, Debug, Default)]
pub struct FlameOptions {
    pub title: String,
    /// Roots at the top (an icicle graph) instead of the bottom.
    pub inverted: bool,
    /// Image width in pixels; inferno's default (1200) when `None`.
    pub width: Option<usize>,
}

impl FlameOptions {
    fn inferno(&self) -> inferno::flamegraph::Options<'static> {
        let mut options = inferno::flamegraph::Options::default();
        options.title = self.title.clone();
        options.count_name = "samples".to_string();
        options.image_width = self.width;
        if self.inverted {
            options.direction = inferno::flamegraph::Direction::Inverted;
        }
        options
    }
}

/// Why a flame graph of `folded` cannot be drawn, in words (inferno's own error for an empty
/// input is a bare "No stack counts found").
fn require_stacks(folded: &str, which: &str) -> Result<(), String> {
    if folded.trim().is_empty() {
        return Err(format!(
            "{which} has no samples, so there is no flame graph to draw: the run may have \
             ended before the first tick, or it took no stack samples (`--sampler none`, \
             which records only CBS call edges or exhaustive counts)"
        ));
    }
    Ok(())
}

/// A flame graph SVG of the folded stacks.
pub fn to_svg(folded: &str, flame: &FlameOptions) -> Result<Vec<u8>, String> {
    require_stacks(folded, "the profile")?;
    let mut options = flame.inferno();
    let mut svg = Vec::new();
    inferno::flamegraph::from_lines(&mut options, folded.lines(), &mut svg)
        .map_err(|e| e.to_string())?;
    Ok(svg)
}

/// A differential flame graph: the shape of `after`, each frame coloured red where it took a
/// larger share of samples than in `before` and blue where smaller (inferno's differential
/// mode, which normalizes the two totals so runs of different lengths compare).
pub fn to_diff_svg(before: &str, after: &str, flame: &FlameOptions) -> Result<Vec<u8>, String> {
    require_stacks(before, "the first profile")?;
    require_stacks(after, "the second profile")?;
    let mut lines = Vec::new();
    let diff = inferno::differential::Options {
        normalize: true,
        ..Default::default()
    };
    inferno::differential::from_readers(diff, before.as_bytes(), after.as_bytes(), &mut lines)
        .map_err(|e| e.to_string())?;
    let lines = String::from_utf8(lines).map_err(|e| e.to_string())?;
    let mut options = flame.inferno();
    let mut svg = Vec::new();
    inferno::flamegraph::from_lines(&mut options, lines.lines(), &mut svg)
        .map_err(|e| e.to_string())?;
    Ok(svg)
}
