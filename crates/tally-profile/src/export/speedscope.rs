//! speedscope's file format (one "sampled" profile): each sample is a list
//! of indices into a shared frame table, outermost first, weighted by the
//! sampling period in nanoseconds so speedscope shows time.
//!
//! A speedscope frame is a function (its views merge samples by frame), so each carries its
//! method's file and header line; per-line time is in the pprof and Firefox exports and
//! `tally report --lines`. A truncated sample ends in a `[truncated: N frames]` frame and the
//! profile's name says how many samples were truncated.

use std::collections::HashMap;

use serde_json::{json, Value};

use super::sample_stack;
use crate::profile::Profile;

pub const SCHEMA_URL: &str = "https://www.speedscope.app/file-format-schema.json";

pub fn to_json(p: &Profile) -> Value {
    let symbols = p.symbols();
    let mut frames: Vec<Value> = vec![];
    let mut index: HashMap<String, usize> = HashMap::new();
    let mut intern = |label: String, file: &str, line: u32, frames: &mut Vec<Value>| {
        *index.entry(label.clone()).or_insert_with(|| {
            let mut f = json!({ "name": label });
            if !file.is_empty() {
                f["file"] = json!(file);
                f["line"] = json!(line);
            }
            frames.push(f);
            frames.len() - 1
        })
    };
    let period = 1_000_000_000u64 / u64::from(p.header.sampler.rate_hz.max(1));
    let mut samples = vec![];
    for s in &p.samples {
        let stack: Vec<usize> = sample_stack(&symbols, s)
            .into_iter()
            .map(|(label, frame)| {
                let info = frame.and_then(|f| symbols.methods.get(&f.method));
                intern(
                    label,
                    info.map(|i| i.file.as_str()).unwrap_or(""),
                    info.map(|i| i.line).unwrap_or(0),
                    &mut frames,
                )
            })
            .collect();
        samples.push(stack);
    }
    let n = samples.len() as u64;
    let name = if p.header.program.is_empty() {
        "profile".to_string()
    } else {
        p.header.program.clone()
    };
    let truncated = p.truncated_samples();
    let name = if truncated > 0 {
        format!(
            "{name} ({truncated} samples truncated at {} frames)",
            p.header.sampler.max_frames
        )
    } else {
        name
    };
    json!({
        "$schema": SCHEMA_URL,
        "name": name,
        "exporter": format!("tally-profile {}", env!("CARGO_PKG_VERSION")),
        "activeProfileIndex": 0,
        "shared": { "frames": frames },
        "profiles": [{
            "type": "sampled",
            // speedscope's only unit is time; the name says which clock it is.
            "name": format!(
                "{name} ({})",
                if p.header.sampler.is_wall_clock() { "wall-clock time" } else { "CPU time" }
            ),
            "unit": "nanoseconds",
            "startValue": 0,
            "endValue": n * period,
            "samples": samples,
            "weights": vec![period; n as usize],
        }],
    })
}
