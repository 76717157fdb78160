//! pprof export (`.pb.gz`): opens in `go tool pprof`, Pyroscope and
//! friends.
//!
//! One *location* per (method, source line): each line entry carries the
//! line of the frame's bytecode index (a caller's call, the innermost
//! frame's last call, or the method's header line for a frame that has made
//! no call yet; see [`crate::Symbols::position`]), so `pprof -list` spreads a
//! method's time over its lines, and each function carries its header line
//! as `start_line`. Compiled frames with inlining become one location with
//! several lines, innermost first, as pprof expects. A truncated sample ends
//! in a `[truncated: N frames]` location, and the comments say how many
//! samples were truncated. Each sample
//! carries two values (samples, and CPU time estimated as one tick
//! period) and a `vm_state` label for filtering (`-tagfocus`).

use std::collections::HashMap;
use std::io::Write;

use prost::Message;

use super::pprof_proto as pb;
use crate::code::{lost_frames, LogicalFrame, Symbols};
use crate::ids::{MethodId, Tier};
use crate::profile::Profile;

struct Strings {
    table: Vec<String>,
    index: HashMap<String, i64>,
}

impl Strings {
    fn new() -> Strings {
        let mut s = Strings {
            table: vec![],
            index: HashMap::new(),
        };
        s.get(""); // pprof requires string 0 to be empty
        s
    }

    fn get(&mut self, s: &str) -> i64 {
        if let Some(&i) = self.index.get(s) {
            return i;
        }
        let i = self.table.len() as i64;
        self.table.push(s.to_string());
        self.index.insert(s.to_string(), i);
        i
    }
}

/// The uncompressed protobuf message.
pub fn to_message(p: &Profile) -> pb::Profile {
    let symbols = p.symbols();
    let mut strings = Strings::new();
    let mut functions: HashMap<MethodId, u64> = HashMap::new();
    let mut function_list = vec![];
    let mut locations: HashMap<Vec<(MethodId, i64)>, u64> = HashMap::new();
    let mut location_list = vec![];
    let period_ns = 1_000_000_000 / i64::from(p.header.sampler.rate_hz.max(1));
    let state_key = strings.get("vm_state");

    let mut function_id = |m: MethodId, strings: &mut Strings, list: &mut Vec<pb::Function>| {
        *functions.entry(m).or_insert_with(|| {
            let info = symbols.methods.get(&m);
            let name = strings.get(&symbols.method_name(m));
            let f = pb::Function {
                id: list.len() as u64 + 1,
                name,
                system_name: name,
                filename: strings.get(info.map(|i| i.file.as_str()).unwrap_or("")),
                start_line: info.map(|i| i64::from(i.line)).unwrap_or(0),
            };
            list.push(f);
            list.len() as u64
        })
    };

    let mut samples = vec![];
    let mut logical: Vec<LogicalFrame> = vec![];
    for s in &p.samples {
        let mut ids = Vec::with_capacity(s.frames.len() + 1);
        let truncated_root = lost_frames(s).map(|lost| LogicalFrame {
            method: MethodId::truncated(lost),
            bci: 0,
            tier: Tier::Interpreter,
            inlined: false,
        });
        for raw in s.frames.iter().map(Some).chain([None]) {
            logical.clear();
            match raw {
                Some(&raw) => symbols.resolve_into(raw, &mut logical),
                None => logical.extend(truncated_root),
            }
            if logical.is_empty() {
                continue;
            }
            let key: Vec<(MethodId, i64)> = logical
                .iter()
                .map(|f| (f.method, line_of(&symbols, f)))
                .collect();
            let id = match locations.get(&key) {
                Some(&id) => id,
                None => {
                    let lines = logical
                        .iter()
                        .zip(&key)
                        .map(|(f, &(_, line))| pb::Line {
                            function_id: function_id(f.method, &mut strings, &mut function_list),
                            line,
                            column: 0,
                        })
                        .collect();
                    let id = location_list.len() as u64 + 1;
                    location_list.push(pb::Location {
                        id,
                        mapping_id: 0,
                        address: 0,
                        line: lines,
                        is_folded: false,
                    });
                    locations.insert(key, id);
                    id
                }
            };
            ids.push(id);
        }
        samples.push(pb::Sample {
            location_id: ids,
            value: vec![1, period_ns],
            label: vec![pb::Label {
                key: state_key,
                str: strings.get(s.state.name()),
                num: 0,
                num_unit: 0,
            }],
        });
    }

    let samples_t = pb::ValueType {
        r#type: strings.get("samples"),
        unit: strings.get("count"),
    };
    let cpu_t = pb::ValueType {
        r#type: strings.get(p.header.sampler.time_kind()),
        unit: strings.get("nanoseconds"),
    };
    let comment = [strings.get(&format!(
        "{} {} {} {}; sampler: {} {} at {} Hz",
        p.header.vm_name,
        p.header.vm_version,
        p.header.program,
        p.header.args.join(" "),
        p.header.sampler.trigger,
        p.header.sampler.mechanism,
        p.header.sampler.rate_hz
    ))]
    .into_iter()
    .chain(p.truncation_note().map(|n| strings.get(&n)))
    .collect();
    pb::Profile {
        sample_type: vec![samples_t, cpu_t.clone()],
        sample: samples,
        mapping: vec![],
        location: location_list,
        function: function_list,
        drop_frames: 0,
        keep_frames: 0,
        time_nanos: p.header.start_unix_ns as i64,
        duration_nanos: p.duration_ns() as i64,
        period_type: Some(cpu_t),
        period: period_ns,
        comment,
        default_sample_type: 0,
        string_table: strings.table,
    }
}

/// The source line of a frame's position (0 where the profile has no source for it, as for
/// a truncated root).
fn line_of(symbols: &Symbols, f: &LogicalFrame) -> i64 {
    symbols
        .position(f.method, f.bci)
        .map(|pos| i64::from(pos.line))
        .unwrap_or(0)
}

/// The gzip-compressed protobuf, as `.pb.gz` files hold it.
pub fn to_pb_gz(p: &Profile) -> Vec<u8> {
    let bytes = to_message(p).encode_to_vec();
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    gz.write_all(&bytes).expect("writing to a Vec cannot fail");
    gz.finish().expect("writing to a Vec cannot fail")
}
