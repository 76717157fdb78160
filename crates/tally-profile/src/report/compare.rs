//! Comparing profiles: two runs (`compare A B`), or a run's samples with
//! its own exhaustive counts (the built-in ground truth).

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write;

use super::pct;
use crate::callgraph::CallGraph;
use crate::metrics::{overlap, unweighted_accuracy, weighted_accuracy, TopN};
use crate::profile::Profile;

/// Accuracy figures of one profile against a reference.
#[derive(Clone, Debug, PartialEq)]
pub struct Accuracy {
    /// Overlap of the method distributions.
    pub method_overlap: f64,
    pub unweighted: f64,
    pub weighted: f64,
    pub top: TopN,
    /// Overlap of the call graphs (CBS edges), when both have one.
    pub edge_overlap: Option<f64>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct MethodDiff {
    pub name: String,
    pub a_pct: f64,
    pub b_pct: f64,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Comparison {
    /// B judged with A as the reference.
    pub accuracy: Accuracy,
    /// Methods by the size of the change, largest first.
    pub methods: Vec<MethodDiff>,
}

fn accuracy(
    reference: &BTreeMap<String, u64>,
    candidate: &BTreeMap<String, u64>,
    top: TopN,
    edges: Option<f64>,
) -> Accuracy {
    Accuracy {
        method_overlap: overlap(reference, candidate),
        unweighted: unweighted_accuracy(reference, candidate, top),
        weighted: weighted_accuracy(reference, candidate, top),
        top,
        edge_overlap: edges,
    }
}

/// Compares two profiles by method *names*, since ids differ across runs.
pub fn compare(a: &Profile, b: &Profile, top: TopN) -> Comparison {
    let wa = a.self_samples_by_name();
    let wb = b.self_samples_by_name();
    let edges = (!a.cbs_edges.edges.is_empty() && !b.cbs_edges.edges.is_empty()).then(|| {
        overlap(
            &a.cbs_edges.by_name(&a.symbols()),
            &b.cbs_edges.by_name(&b.symbols()),
        )
    });
    let ta = wa.values().fold(0u64, |x, &y| x.saturating_add(y));
    let tb = wb.values().fold(0u64, |x, &y| x.saturating_add(y));
    let names: BTreeSet<&String> = wa.keys().chain(wb.keys()).collect();
    let mut methods: Vec<MethodDiff> = names
        .into_iter()
        .map(|n| MethodDiff {
            name: n.clone(),
            a_pct: pct(wa.get(n).copied().unwrap_or(0), ta),
            b_pct: pct(wb.get(n).copied().unwrap_or(0), tb),
        })
        .collect();
    methods.sort_by(|x, y| {
        let dx = (x.b_pct - x.a_pct).abs();
        let dy = (y.b_pct - y.a_pct).abs();
        dy.total_cmp(&dx).then_with(|| x.name.cmp(&y.name))
    });
    Comparison {
        accuracy: accuracy(&wa, &wb, top, edges),
        methods,
    }
}

/// Judges a profile's samples and CBS edges against its own exhaustive
/// counts (bytecodes executed per method, exact call edges). `None` if the
/// run was not exhaustive.
pub fn accuracy_against_exact(p: &Profile, top: TopN) -> Option<Accuracy> {
    let truth = p.exact_bytecodes_by_name()?;
    let exact = p.exact.as_ref()?;
    let edges = (!p.cbs_edges.edges.is_empty()).then(|| {
        let symbols = p.symbols();
        overlap(
            &CallGraph::from_exact(exact).by_name(&symbols),
            &p.cbs_edges.by_name(&symbols),
        )
    });
    Some(accuracy(&truth, &p.self_samples_by_name(), top, edges))
}

impl Comparison {
    pub fn render_text(&self, limit: usize) -> String {
        let a = &self.accuracy;
        let mut out = format!(
            "method overlap (share of samples both profiles give the same methods): {:.1} %\n\
             hot methods found ({}, unweighted accuracy): {:.1} %\n\
             hot samples found ({}, weighted accuracy): {:.1} %\n",
            a.method_overlap * 100.0,
            a.top,
            a.unweighted * 100.0,
            a.top,
            a.weighted * 100.0
        );
        if let Some(e) = a.edge_overlap {
            let _ = writeln!(
                out,
                "call-edge overlap (CBS call graphs): {:.1} %",
                e * 100.0
            );
        }
        let _ = writeln!(out, "{:>7} {:>7} {:>8}  method", "A%", "B%", "B-A");
        for m in self.methods.iter().take(limit) {
            let _ = writeln!(
                out,
                "{:>6.2}% {:>6.2}% {:>+7.2}%  {}",
                m.a_pct,
                m.b_pct,
                m.b_pct - m.a_pct,
                m.name
            );
        }
        out
    }
}

/// One line naming a profile for a comparison: file, program, samples and sampler settings.
pub fn describe(label: &str, file: &str, p: &Profile) -> String {
    let s = &p.header.sampler;
    let mut settings = format!("{} / {} at {} Hz", s.trigger, s.mechanism, s.rate_hz);
    if let Some(c) = s.cbs {
        let _ = write!(settings, ", CBS {}:{}", c.stride, c.samples);
    }
    if s.exhaustive {
        settings.push_str(", exhaustive counts");
    }
    let program = format!("{} {}", p.header.program, p.header.args.join(" "));
    format!(
        "{label}: {file}: {} — {} samples; {settings}",
        program.trim_end(),
        p.samples.len()
    )
}

/// A warning when two profiles are of different programs (or arguments), whose comparison
/// says little about sampling accuracy.
pub fn program_mismatch(a: &Profile, b: &Profile) -> Option<String> {
    let (ha, hb) = (&a.header, &b.header);
    if ha.program != hb.program {
        Some(format!(
            "the profiles are of different programs ({} and {}): the comparison shows how \
             they differ, not how accurate either is",
            ha.program, hb.program
        ))
    } else if ha.args != hb.args {
        Some(format!(
            "the profiles ran {} with different arguments ({:?} and {:?})",
            ha.program,
            ha.args.join(" "),
            hb.args.join(" ")
        ))
    } else {
        None
    }
}
