use super::graph::Colour;
use super::model::{build, Model};
use super::*;
use crate::event::EventKind;
use crate::fixtures::{example_profile, tier_call_counts};
use crate::ids::{MethodId, Tier};
use crate::report::{Amortization, Verdict};

fn no_source(_: &str) -> Option<String> {
    None
}

/// The example profile with exact calls per tier: `Bench>>loop` went from the interpreter to
/// the optimizing tier.
fn counted() -> crate::Profile {
    let mut p = example_profile();
    let counts = [
        (0, Tier::Interpreter, 1),
        (1, Tier::Interpreter, 40),
        (2, Tier::Interpreter, 1),
        (2, Tier::Optimizing, 1),
        (3, Tier::Interpreter, 5),
    ];
    let at = p.header.start_time_ns + 9_900_000;
    p.events.push(tier_call_counts(at, &counts, 0));
    p
}

fn node<'a>(m: &'a Model, name: &str, tier: Tier) -> &'a super::graph::GraphNode {
    m.graph
        .nodes
        .iter()
        .find(|n| m.methods[n.method as usize].name == name && n.tier == tier.to_u8())
        .unwrap_or_else(|| panic!("no node {name} [{}]", tier.name()))
}

#[test]
fn graph_nodes_are_method_tier_pairs_coloured_by_the_verdicts() {
    let p = counted();
    let m = build(&p, &no_source, &HtmlOptions::default());
    let a = Amortization::new(&p).unwrap();
    let loop_opt = a
        .recompilations
        .iter()
        .find(|r| r.name == "Bench>>loop" && r.to == Tier::Optimizing)
        .unwrap();
    let expected = match loop_opt.verdict {
        Verdict::PaidOff { .. } => Colour::Green,
        Verdict::DidNotPay { .. } => Colour::Red,
        Verdict::Unclear { .. } => Colour::Grey,
    };
    let opt = node(&m, "Bench>>loop", Tier::Optimizing);
    assert_eq!(opt.colour, expected);
    assert!(opt
        .verdict
        .as_deref()
        .unwrap()
        .contains("interpreter → optimizing"));
    // The same method's interpreter node, and a method never compiled, are blue.
    assert_eq!(
        node(&m, "Bench>>loop", Tier::Interpreter).colour,
        Colour::Blue
    );
    let fib = node(&m, "Bench>>fib:", Tier::Interpreter);
    assert_eq!((fib.colour, fib.self_samples), (Colour::Blue, 4));
    // Inlined frames are nodes of their own, in the tier of the code they ran in, called by
    // the method they were inlined into.
    let add = node(&m, "Bench>>add:", Tier::Optimizing);
    let index = |n: &super::graph::GraphNode| m.graph.nodes.iter().position(|x| std::ptr::eq(x, n));
    let (from, to) = (index(opt).unwrap(), index(add).unwrap());
    assert!(m.graph.edges.iter().any(|e| (e.from, e.to) == (from, to)));
    // Callers are drawn above their callees.
    assert!(opt.y < add.y);
    assert_eq!(m.summary.recompilations, a.recompilations.len() as u64);
}

#[test]
fn without_call_counts_recompiled_nodes_have_no_verdict_and_the_page_says_why() {
    let m = build(&example_profile(), &no_source, &HtmlOptions::default());
    assert_eq!(
        node(&m, "Bench>>loop", Tier::Optimizing).colour,
        Colour::Grey
    );
    assert!(
        m.notes.iter().any(|n| n.contains("--count-calls")),
        "{:?}",
        m.notes
    );
    assert!(!m.summary.counted);
}

#[test]
fn the_flame_tree_holds_every_sample_once() {
    let p = example_profile();
    let m = build(&p, &no_source, &HtmlOptions::default());
    let f = &m.flame;
    assert_eq!(f.value[0], p.samples.len() as u64);
    assert_eq!(f.depth[0], 0);
    // Each node's value is its own samples plus its children's (preorder with depths).
    for k in 0..f.value.len() {
        let mut children = 0;
        let mut j = k + 1;
        while j < f.value.len() && f.depth[j] > f.depth[k] {
            if f.depth[j] == f.depth[k] + 1 {
                children += f.value[j];
            }
            j += 1;
        }
        assert_eq!(f.value[k], f.self_value[k] + children, "node {k}");
    }
    // The sample without frames is under its VM state.
    assert!(f
        .method
        .iter()
        .skip(1)
        .any(|&i| m.methods[i as usize].name == "[runtime]"));
    // The inlined frame is marked.
    let add = 1 + f.method[1..]
        .iter()
        .position(|&i| m.methods[i as usize].name == "Bench>>add:")
        .unwrap();
    assert_eq!((f.inlined[add], f.tier[add]), (1, Tier::Optimizing.to_u8()));
}

#[test]
fn the_timeline_has_the_compiles_deopts_and_collections_and_bins_every_sample() {
    let p = example_profile();
    let m = build(&p, &no_source, &HtmlOptions::default());
    let t = &m.timeline;
    assert_eq!(t.compiles.len(), 1);
    assert_eq!(t.compiles[0].compile_ns, 250_000);
    assert_eq!(t.deopts.len(), 1);
    assert_eq!(t.gcs.len(), 1);
    assert_eq!(
        (t.gcs[0].bytes_before, t.gcs[0].bytes_after),
        (8 << 20, 1 << 20)
    );
    let binned: u32 = t.bins.iter().flatten().sum();
    assert_eq!(binned as usize, p.samples.len());
    assert!(t.categories.iter().any(|c| c == "optimizing"));
    assert!(t.categories.iter().any(|c| c == "interpreter"));
}

#[test]
fn the_source_view_has_each_line_with_its_samples_and_says_when_text_is_missing() {
    let p = example_profile();
    let text: String = (1..=25).map(|l| format!("line {l}\n")).collect();
    let read = |file: &str| (file == "Bench.som").then(|| text.clone());
    let m = build(&p, &read, &HtmlOptions::default());
    let fib = m
        .lines
        .iter()
        .find(|l| m.methods[l.method as usize].name == "Bench>>fib:")
        .unwrap();
    assert_eq!(fib.missing, None);
    // Header line 7 to its last bytecode's line 11.
    assert_eq!(fib.rows.first().unwrap().0, 7);
    assert_eq!(fib.rows.last().unwrap().0, 11);
    let line9 = fib.rows.iter().find(|r| r.0 == 9).unwrap();
    assert_eq!(line9.1, "line 9");
    assert_eq!((line9.2, line9.3), (3, 3));
    assert_eq!(fib.self_samples, 4);

    let blind = build(&p, &no_source, &HtmlOptions::default());
    assert!(blind.lines[0]
        .missing
        .as_deref()
        .unwrap()
        .contains("could not be read"));
}

#[test]
fn program_names_cannot_become_markup() {
    let mut p = example_profile();
    let hostile = "Evil>><</script><img src=x onerror=alert(1)>&amp;";
    for e in &mut p.events {
        if let EventKind::MethodCompiled {
            method, name, file, ..
        } = &mut e.kind
        {
            if *method == MethodId(1) {
                *name = hostile.to_string();
                *file = "a'\"<b>.som".to_string();
            }
        }
    }
    p.header.program = "<i>prog</i>".into();
    let page = render_html(&p, &no_source, &HtmlOptions::default());
    for raw in ["<img", "</script><img", "<i>prog", "<b>.som", "&amp;amp;"] {
        assert!(!page.contains(raw), "{raw} got into the page as markup");
    }
    // Two script elements, ours: the data and the code; and the name is in the data.
    assert_eq!(page.matches("<script").count(), 2);
    let start = page.find("id=\"profile-data\">").unwrap() + "id=\"profile-data\">".len();
    let end = start + page[start..].find("</script>").unwrap();
    let data: serde_json::Value = serde_json::from_str(&page[start..end]).unwrap();
    let names: Vec<&str> = data["methods"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["name"].as_str().unwrap())
        .collect();
    assert!(names.contains(&hostile), "{names:?}");
    assert!(page.contains("<title>Tally profile: &lt;i&gt;prog&lt;/i&gt;"));
}

#[test]
fn the_page_asks_for_nothing_outside_itself() {
    let page = render_html(&example_profile(), &no_source, &HtmlOptions::default());
    assert!(page.contains("default-src 'none'"));
    for external in ["src=\"http", "href=\"http", "@import", "url(http", "fetch("] {
        assert!(!page.contains(external), "{external}");
    }
    assert!(!page.contains("/*SCRIPT*/") && !page.contains("<!--DATA-->"));
}

#[test]
fn the_graph_keeps_the_heaviest_nodes_and_counts_the_rest() {
    let p = example_profile();
    let options = HtmlOptions {
        graph_max_nodes: 2,
        ..HtmlOptions::default()
    };
    let m = build(&p, &no_source, &options);
    assert_eq!(m.graph.nodes.len(), 2);
    let all = build(&p, &no_source, &HtmlOptions::default());
    assert_eq!(m.graph.left_out, all.graph.nodes.len() - 2);
    // Bench>>run is on every framed stack.
    assert_eq!(
        m.methods[m.graph.nodes[0].method as usize].name,
        "Bench>>run"
    );
}
