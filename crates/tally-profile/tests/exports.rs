//! Every exporter, round-tripped through what its tool would read.

use std::collections::BTreeMap;

use prost::Message;
use serde_json::Value;
use tally_profile::export::{chrome, firefox, folded, pprof, pprof_proto as pb, speedscope};
use tally_profile::fixtures::example_profile;

fn schema(name: &str) -> Value {
    let path = format!("{}/tests/schemas/{name}", env!("CARGO_MANIFEST_DIR"));
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

fn assert_valid(schema: &Value, doc: &Value) {
    let validator = jsonschema::validator_for(schema).expect("schema compiles");
    let errors: Vec<String> = validator
        .iter_errors(doc)
        .map(|e| format!("{e} at {}", e.instance_path()))
        .collect();
    assert!(errors.is_empty(), "schema violations: {errors:#?}");
}

#[test]
fn pprof_decodes_with_prost_and_keeps_stacks() {
    let p = example_profile();
    let gz = pprof::to_pb_gz(&p);
    let mut raw = vec![];
    std::io::Read::read_to_end(&mut flate2::read::GzDecoder::new(&gz[..]), &mut raw).unwrap();
    let msg = pb::Profile::decode(&raw[..]).unwrap();
    assert_eq!(msg, pprof::to_message(&p));
    let s = |i: i64| msg.string_table[i as usize].as_str();
    assert_eq!(s(0), "");
    assert_eq!(msg.sample.len(), p.samples.len());
    let types: Vec<_> = msg
        .sample_type
        .iter()
        .map(|t| (s(t.r#type), s(t.unit)))
        .collect();
    assert_eq!(types, vec![("samples", "count"), ("cpu", "nanoseconds")]);
    // Rebuild the first sample's stack, innermost first.
    let funcs: BTreeMap<u64, &str> = msg.function.iter().map(|f| (f.id, s(f.name))).collect();
    let locs: BTreeMap<u64, &pb::Location> = msg.location.iter().map(|l| (l.id, l)).collect();
    let names: Vec<&str> = msg.sample[0]
        .location_id
        .iter()
        .map(|id| funcs[&locs[id].line[0].function_id])
        .collect();
    assert_eq!(names, vec!["Bench>>fib:", "Bench>>fib:", "Bench>>run"]);
    // Each location is a (method, line): the frames' bytecode indices resolve through the
    // methods' line tables (Bench>>fib: bytecode 4 is line 9, 9 is line 10; Bench>>run's 2
    // is line 4), and functions carry their header lines.
    let lines: Vec<i64> = msg.sample[0]
        .location_id
        .iter()
        .map(|id| locs[id].line[0].line)
        .collect();
    assert_eq!(lines, vec![9, 10, 4]);
    let fib = msg
        .function
        .iter()
        .find(|f| s(f.name) == "Bench>>fib:")
        .unwrap();
    assert_eq!((s(fib.filename), fib.start_line), ("Bench.som", 7));
    let fib_lines: std::collections::BTreeSet<i64> = msg
        .location
        .iter()
        .filter(|l| funcs[&l.line[0].function_id] == "Bench>>fib:")
        .map(|l| l.line[0].line)
        .collect();
    assert_eq!(
        fib_lines,
        [9, 10, 11].into_iter().collect(),
        "one location per line"
    );
    // The truncated sample (sample 3, one frame lost) ends in a truncated root, and the
    // comments say how many samples were truncated.
    let outer = *msg.sample[3].location_id.last().unwrap();
    assert_eq!(
        funcs[&locs[&outer].line[0].function_id],
        "[truncated: 1 frames]"
    );
    assert!(
        msg.comment
            .iter()
            .any(|&c| s(c).starts_with("1 of 9 samples were deeper than 128 frames")),
        "{:?}",
        msg.comment.iter().map(|&c| s(c)).collect::<Vec<_>>()
    );
    // The inlined compiled frame is one location with two lines.
    let inlined = msg
        .location
        .iter()
        .find(|l| l.line.len() == 2)
        .expect("inlined location");
    assert_eq!(funcs[&inlined.line[0].function_id], "Bench>>add:");
    assert_eq!(funcs[&inlined.line[1].function_id], "Bench>>loop");
    let label = &msg.sample[3].label[0];
    assert_eq!((s(label.key), s(label.str)), ("vm_state", "primitive"));
}

/// When Go is installed (`apt-get install golang-go`), the real tool must
/// read the file; otherwise the prost round trip above stands in.
#[test]
fn go_tool_pprof_reads_the_export() {
    let Ok(out) = std::process::Command::new("go").arg("version").output() else {
        eprintln!("go not installed; skipped");
        return;
    };
    assert!(out.status.success());
    let dir = std::env::temp_dir().join(format!("tally-pprof-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("profile.pb.gz");
    std::fs::write(&file, pprof::to_pb_gz(&example_profile())).unwrap();
    let out = std::process::Command::new("go")
        .args(["tool", "pprof", "-top", "-sample_index=samples"])
        .arg(&file)
        .env("HOME", &dir)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(text.contains("Bench>>fib:"), "{text}");
    assert!(text.contains("Bench>>add:"), "{text}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn folded_stacks_render_as_an_inferno_flame_graph() {
    let p = example_profile();
    let text = folded::to_folded(&p);
    let total: u64 = text
        .lines()
        .map(|l| l.rsplit_once(' ').unwrap().1.parse::<u64>().unwrap())
        .sum();
    assert_eq!(total, p.samples.len() as u64);
    assert!(
        text.contains("Bench>>run;Bench>>fib:;Bench>>fib: 2\n"),
        "{text}"
    );
    assert!(
        text.contains("Bench>>run;Bench>>loop [optimizing];Bench>>add: [optimizing, inlined] 1\n"),
        "{text}"
    );
    assert!(text.contains("[runtime] 1\n"), "{text}");
    assert!(
        text.contains("[truncated: 1 frames];Bench>>run;Bench>>fib: 1\n"),
        "a truncated sample hangs under its truncated root: {text}"
    );
    let svg = String::from_utf8(
        folded::to_svg(
            &text,
            &folded::FlameOptions {
                title: "example".into(),
                ..Default::default()
            },
        )
        .unwrap(),
    )
    .unwrap();
    assert!(svg.starts_with("<?xml"), "{}", &svg[..100]);
    assert!(svg.contains("<svg"));
    assert!(
        svg.contains("Bench&gt;&gt;fib:"),
        "frame names appear, escaped"
    );
}

#[test]
fn speedscope_json_matches_speedscopes_schema() {
    let p = example_profile();
    let doc = speedscope::to_json(&p);
    assert_valid(&schema("speedscope.schema.json"), &doc);
    // Round trip: the text parses back, and stacks point at real frames.
    let back: Value = serde_json::from_str(&doc.to_string()).unwrap();
    assert_eq!(back, doc);
    let frames = back["shared"]["frames"].as_array().unwrap();
    let prof = &back["profiles"][0];
    let samples = prof["samples"].as_array().unwrap();
    assert_eq!(samples.len(), p.samples.len());
    assert_eq!(prof["weights"].as_array().unwrap().len(), samples.len());
    let first: Vec<&str> = samples[0]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| {
            frames[i.as_u64().unwrap() as usize]["name"]
                .as_str()
                .unwrap()
        })
        .collect();
    assert_eq!(first, vec!["Bench>>run", "Bench>>fib:", "Bench>>fib:"]);
    let fib = &frames[samples[0][1].as_u64().unwrap() as usize];
    assert_eq!(
        (fib["file"].as_str(), fib["line"].as_u64()),
        (Some("Bench.som"), Some(7))
    );
    let cut = samples[3].as_array().unwrap();
    assert_eq!(
        frames[cut[0].as_u64().unwrap() as usize]["name"],
        "[truncated: 1 frames]"
    );
    assert!(
        prof["name"]
            .as_str()
            .unwrap()
            .contains("(1 samples truncated at 128 frames)"),
        "{}",
        prof["name"]
    );
    // And a broken document is caught, so the check has teeth.
    let mut bad = doc.clone();
    bad["profiles"][0]["type"] = Value::from("sampledd");
    let validator = jsonschema::validator_for(&schema("speedscope.schema.json")).unwrap();
    assert!(!validator.is_valid(&bad));
}

fn column_len(table: &Value, col: &str) -> usize {
    table[col]
        .as_array()
        .unwrap_or_else(|| panic!("column {col}"))
        .len()
}

#[test]
fn firefox_profile_has_the_structure_the_front_end_requires() {
    let p = example_profile();
    let doc = firefox::to_json(&p);
    assert_valid(&schema("firefox-processed.schema.json"), &doc);
    let back: Value = serde_json::from_str(&doc.to_string()).unwrap();
    let categories = back["meta"]["categories"].as_array().unwrap();
    let cat_names: Vec<&str> = categories
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    for state in [
        "interpreting",
        "primitive",
        "gc",
        "compiling",
        "runtime",
        "compiled",
    ] {
        assert!(cat_names.contains(&state), "{cat_names:?}");
    }
    let t = &back["threads"][0];
    let strings = t["stringArray"].as_array().unwrap();
    // Every table's columns have its declared length.
    for (table, cols) in [
        ("samples", &["stack", "weight"][..]),
        ("stackTable", &["frame", "prefix"][..]),
        (
            "frameTable",
            &[
                "func",
                "category",
                "address",
                "inlineDepth",
                "line",
                "column",
            ][..],
        ),
        (
            "funcTable",
            &[
                "name",
                "isJS",
                "relevantForJS",
                "resource",
                "fileName",
                "lineNumber",
            ][..],
        ),
    ] {
        let n = t[table]["length"].as_u64().unwrap() as usize;
        for c in cols {
            assert_eq!(column_len(&t[table], c), n, "{table}.{c}");
        }
    }
    let n_samples = t["samples"]["length"].as_u64().unwrap() as usize;
    assert_eq!(n_samples, p.samples.len());
    assert_eq!(column_len(&t["samples"], "timeDeltas"), n_samples);
    // Indices point into their tables; prefixes point backwards (the
    // front-end walks stacks by prefix and would loop otherwise).
    let stacks = &t["stackTable"];
    let n_stacks = stacks["length"].as_u64().unwrap();
    for s in t["samples"]["stack"].as_array().unwrap() {
        assert!(s.as_u64().unwrap() < n_stacks);
    }
    for (i, prefix) in stacks["prefix"].as_array().unwrap().iter().enumerate() {
        if let Some(pfx) = prefix.as_u64() {
            assert!((pfx as usize) < i);
        }
    }
    let n_frames = t["frameTable"]["length"].as_u64().unwrap();
    assert!(stacks["frame"]
        .as_array()
        .unwrap()
        .iter()
        .all(|f| f.as_u64().unwrap() < n_frames));
    let n_funcs = t["funcTable"]["length"].as_u64().unwrap();
    let ft = &t["frameTable"];
    assert!(ft["func"]
        .as_array()
        .unwrap()
        .iter()
        .all(|f| f.as_u64().unwrap() < n_funcs));
    assert!(ft["category"]
        .as_array()
        .unwrap()
        .iter()
        .all(|c| (c.as_u64().unwrap() as usize) < categories.len()));
    let names: Vec<&str> = t["funcTable"]["name"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| strings[i.as_u64().unwrap() as usize].as_str().unwrap())
        .collect();
    assert!(names.contains(&"Bench>>fib:"), "{names:?}");
    // The sample in GC is in the gc category.
    let gc_sample = p
        .samples
        .iter()
        .position(|s| s.state == tally_profile::VmState::Gc)
        .unwrap();
    let stack = t["samples"]["stack"][gc_sample].as_u64().unwrap() as usize;
    let frame = stacks["frame"][stack].as_u64().unwrap() as usize;
    let cat = ft["category"][frame].as_u64().unwrap() as usize;
    assert_eq!(categories[cat]["name"], "gc");

    // Source positions: the function has its file and header line; the first sample's
    // innermost frame (Bench>>fib: at bytecode 4) is on line 9, column 9, its caller (the
    // same function at bytecode 9) on line 10, and both frames share the one function.
    let fib = names.iter().position(|&n| n == "Bench>>fib:").unwrap();
    let ftab = &t["funcTable"];
    assert_eq!(
        strings[ftab["fileName"][fib].as_u64().unwrap() as usize],
        "Bench.som"
    );
    assert_eq!(ftab["lineNumber"][fib], 7);
    let leaf = t["samples"]["stack"][0].as_u64().unwrap() as usize;
    let leaf_frame = stacks["frame"][leaf].as_u64().unwrap() as usize;
    let caller = stacks["prefix"][leaf].as_u64().unwrap() as usize;
    let caller_frame = stacks["frame"][caller].as_u64().unwrap() as usize;
    assert_eq!(
        (
            ft["func"][leaf_frame].as_u64(),
            ft["line"][leaf_frame].as_u64(),
            ft["column"][leaf_frame].as_u64()
        ),
        (Some(fib as u64), Some(9), Some(9))
    );
    assert_eq!(
        (
            ft["func"][caller_frame].as_u64(),
            ft["line"][caller_frame].as_u64()
        ),
        (Some(fib as u64), Some(10))
    );
    // The truncated sample ends in a truncated root, and the product line counts it.
    assert!(names.contains(&"[truncated: 1 frames]"), "{names:?}");
    assert!(
        back["meta"]["product"]
            .as_str()
            .unwrap()
            .contains("(1 samples truncated at 128 frames)"),
        "{}",
        back["meta"]["product"]
    );
}

#[test]
fn chrome_trace_shows_the_event_timeline() {
    let p = example_profile();
    let doc = chrome::to_json(&p);
    assert_valid(&schema("chrome-trace.schema.json"), &doc);
    let back: Value = serde_json::from_str(&doc.to_string()).unwrap();
    let events = back["traceEvents"].as_array().unwrap();
    let gc = events
        .iter()
        .find(|e| e["cat"] == "gc")
        .expect("a GC slice");
    assert_eq!(gc["ph"], "X");
    assert_eq!(gc["dur"].as_f64().unwrap(), 1500.0);
    assert_eq!(gc["ts"].as_f64().unwrap(), 6000.0, "starts at its GcStart");
    assert_eq!(gc["args"]["bytes_after"], 1 << 20);
    let jit = events
        .iter()
        .find(|e| e["cat"] == "jit" && e["ph"] == "X")
        .expect("a compile slice");
    assert_eq!(jit["name"], "compile Bench>>loop [optimizing]");
    let decision = events
        .iter()
        .find(|e| e["cat"] == "jit" && e["ph"] == "i")
        .expect("the controller's decision");
    assert_eq!(
        decision["name"],
        "decide Bench>>loop interpreter -> optimizing"
    );
    assert_eq!(decision["args"]["predicted_compile_ns"], 300_000);
    let deopt = events
        .iter()
        .find(|e| e["name"] == "deopt Bench>>loop @6")
        .expect("the deoptimization");
    assert_eq!(deopt["args"]["reason"], "receiver class guard failed");
    assert_eq!(deopt["args"]["now"], "interpreter");
    let instants = events.iter().filter(|e| e["ph"] == "i").count();
    // start, class, 4 methods, the decision, the deopt, code freed, end (line tables are
    // not events on a timeline)
    assert_eq!(instants, 10);
    assert_eq!(back["otherData"]["truncated_samples"], 1);

    // The samples too: one per profile sample, each pointing at its innermost frame, whose
    // parents lead to the outermost.
    let samples = back["samples"].as_array().unwrap();
    assert_eq!(samples.len(), p.samples.len());
    let frames = back["stackFrames"].as_object().unwrap();
    let chain = |sf: &Value| {
        let mut names = Vec::new();
        let mut at = sf.as_str().map(str::to_string);
        while let Some(id) = at {
            names.push(frames[&id]["name"].as_str().unwrap().to_string());
            at = frames[&id]["parent"].as_str().map(str::to_string);
        }
        names
    };
    let first = chain(&samples[0]["sf"]);
    assert_eq!(
        first.last().map(String::as_str),
        Some("Bench>>run"),
        "{first:?}"
    );
    assert!(samples.iter().all(|s| s["tid"] == 1 && s["sf"].is_string()));
}

#[test]
fn firefox_export_has_gc_and_class_load_markers_and_source_lines() {
    let p = example_profile();
    let doc = firefox::to_json(&p);
    let thread = &doc["threads"][0];
    let strings = thread["stringArray"].as_array().unwrap();
    let markers = &thread["markers"];
    let names: Vec<&str> = markers["name"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| strings[i.as_u64().unwrap() as usize].as_str().unwrap())
        .collect();
    let gc = names.iter().position(|n| *n == "GC").expect("a GC marker");
    assert!(names.contains(&"Class load"), "{names:?}");
    // The collection's interval, relative to the profile's start: 6 ms to 7.5 ms.
    assert_eq!(markers["startTime"][gc].as_f64(), Some(6.0));
    assert_eq!(markers["endTime"][gc].as_f64(), Some(7.5));
    // The viewer's range is the whole run, so markers before the first sample (the core
    // classes' loads) are inside it.
    let meta = &doc["meta"];
    assert_eq!(meta["profilingStartTime"].as_f64(), Some(0.0));
    let end = meta["profilingEndTime"].as_f64().unwrap();
    let starts = markers["startTime"].as_array().unwrap();
    assert!(starts.iter().all(|t| t.as_f64().is_some_and(|t| t <= end)));
    let data = &markers["data"][gc];
    assert_eq!(data["type"], "TallyGC");
    assert_eq!(data["before"].as_f64(), Some(f64::from(8 << 20)));
    assert_eq!(data["after"].as_f64(), Some(f64::from(1 << 20)));
    // Functions carry their file, frames their line.
    let files = thread["funcTable"]["fileName"].as_array().unwrap();
    assert!(files.iter().any(|f| f
        .as_u64()
        .is_some_and(|i| strings[i as usize] == "Bench.som")));
    assert!(thread["frameTable"]["line"]
        .as_array()
        .unwrap()
        .iter()
        .any(|l| l.as_u64().is_some()));
}

#[test]
#[ignore = "writes example exports to $TALLY_EXPORT_DIR for manual inspection"]
fn write_example_exports() {
    let dir = std::path::PathBuf::from(std::env::var("TALLY_EXPORT_DIR").unwrap());
    let p = example_profile();
    std::fs::write(dir.join("example.pb.gz"), pprof::to_pb_gz(&p)).unwrap();
    std::fs::write(dir.join("example.folded"), folded::to_folded(&p)).unwrap();
    std::fs::write(
        dir.join("example.svg"),
        folded::to_svg(
            &folded::to_folded(&p),
            &folded::FlameOptions {
                title: "example".into(),
                ..Default::default()
            },
        )
        .unwrap(),
    )
    .unwrap();
    std::fs::write(
        dir.join("example.speedscope.json"),
        speedscope::to_json(&p).to_string(),
    )
    .unwrap();
    std::fs::write(
        dir.join("example.firefox.json"),
        firefox::to_json(&p).to_string(),
    )
    .unwrap();
    std::fs::write(
        dir.join("example.trace.json"),
        chrome::to_json(&p).to_string(),
    )
    .unwrap();
}
