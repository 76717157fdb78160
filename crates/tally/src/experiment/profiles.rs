//! From profile files to the weights the metrics compare.
//!
//! Everything is keyed by method *names* (and call-site bytecode indices), never by numeric
//! method ids: the ids are assigned as code is compiled, so two runs agree on them only as
//! long as they load the same code in the same order; names agree regardless.

use std::collections::{BTreeMap, BTreeSet};

use tally_vm::tally_profile::{CallGraph, Profile};

/// A call edge by name: (caller, call-site bytecode index, callee).
pub type EdgeKey = (String, u32, String);

/// The exact call graph of an exhaustive run (calls per edge); `None` if the run was not
/// exhaustive.
pub fn exact_graph(p: &Profile) -> Option<BTreeMap<EdgeKey, u64>> {
    let exact = p.exact.as_ref()?;
    Some(CallGraph::from_exact(exact).by_name(&p.symbols()))
}

/// The call edges CBS sampled (samples per edge).
pub fn cbs_graph(p: &Profile) -> BTreeMap<EdgeKey, u64> {
    p.cbs_edges.by_name(&p.symbols())
}

/// Self samples per method: the innermost frame of each sample.
pub fn self_samples(p: &Profile) -> BTreeMap<String, u64> {
    p.self_samples_by_name()
}

/// Total (inclusive) samples per method: samples with the method anywhere on the stack,
/// counted once per sample however often it recurs.
pub fn total_samples(p: &Profile) -> BTreeMap<String, u64> {
    let symbols = p.symbols();
    let mut out = BTreeMap::new();
    for s in &p.samples {
        let on_stack: BTreeSet<String> = symbols
            .resolve_stack(&s.frames)
            .iter()
            .map(|f| symbols.method_name(f.method))
            .collect();
        for m in on_stack {
            *out.entry(m).or_insert(0u64) += 1;
        }
    }
    out
}

/// Adds `from`'s weights to `into` (merging the runs of a reference profile).
pub fn merge<K: Ord + Clone>(into: &mut BTreeMap<K, u64>, from: &BTreeMap<K, u64>) {
    for (k, &w) in from {
        let x = into.entry(k.clone()).or_insert(0);
        *x = x.saturating_add(w);
    }
}

/// The sum of all weights.
pub fn total<K>(w: &BTreeMap<K, u64>) -> u64 {
    w.values().fold(0u64, |a, &b| a.saturating_add(b))
}

#[cfg(test)]
mod tests {
    use super::*;
    use tally_vm::tally_profile::{
        ClassId, Event, EventKind, ExactCounts, MethodId, Origin, RawFrame, Sample, SampleFlags,
        VmState,
    };

    fn profile() -> Profile {
        let named = |m: u32, name: &str| Event {
            time_ns: 0,
            kind: EventKind::MethodCompiled {
                method: MethodId(m),
                class: ClassId(0),
                name: name.into(),
                file: String::new(),
                line: 1,
                bytecode_len: 4,
            },
        };
        let sample = |frames: &[(u32, u32)]| Sample {
            time_ns: 1,
            state: VmState::Interpreting,
            origin: Origin::Immediate,
            flags: SampleFlags::NONE,
            depth: frames.len() as u32,
            frames: frames
                .iter()
                .map(|&(m, bci)| RawFrame::interpreted(MethodId(m), bci))
                .collect(),
        };
        let mut exact = ExactCounts::new();
        exact.on_call(Some((MethodId(0), 3)), MethodId(1));
        exact.on_call(Some((MethodId(0), 3)), MethodId(1));
        exact.on_call(Some((MethodId(1), 5)), MethodId(1));
        Profile {
            events: vec![named(0, "A>>main"), named(1, "A>>fib:")],
            samples: vec![
                sample(&[(1, 2), (1, 5), (0, 3)]),
                sample(&[(1, 2), (0, 3)]),
                sample(&[(0, 7)]),
            ],
            exact: Some(exact),
            ..Profile::default()
        }
    }

    #[test]
    fn weights_are_keyed_by_name() {
        let p = profile();
        let g = exact_graph(&p).unwrap();
        assert_eq!(g[&("A>>main".into(), 3, "A>>fib:".into())], 2);
        assert_eq!(g[&("A>>fib:".into(), 5, "A>>fib:".into())], 1);
        assert_eq!(total(&g), 3);
        assert!(cbs_graph(&p).is_empty());
        let s = self_samples(&p);
        assert_eq!((s["A>>fib:"], s["A>>main"]), (2, 1));
        // Recursion counts once per sample.
        let t = total_samples(&p);
        assert_eq!((t["A>>fib:"], t["A>>main"]), (2, 3));
        let mut m = s.clone();
        merge(&mut m, &t);
        assert_eq!((m["A>>fib:"], m["A>>main"]), (4, 4));
        assert!(exact_graph(&Profile::default()).is_none());
    }
}
