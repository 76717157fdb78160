//! The controller: Jikes RVM's cost/benefit model. A method that has run for time T_j in
//! tier j is assumed to run as long again (the future is estimated as the past); moved to
//! tier i it would take C_i (compiling) + T_j·S_j/S_i (running faster). The controller picks
//! the tier i that minimizes that sum, and recompiles when the sum beats staying (T_j).

use tally_profile::{CallGraph, CodeVersionId, MethodId, Sample, Tier};

use crate::model::CostModel;
use crate::organizer::{MethodRecord, Organizer};

/// How often one method may be compiled: a method whose speculation keeps failing is
/// recompiled a bounded number of times, then stays where it is.
pub const MAX_COMPILES_PER_METHOD: u32 = 4;

/// A recompilation the controller asks for, with the figures it was decided on.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Decision {
    pub method: MethodId,
    pub from: Tier,
    pub to: Tier,
    /// T_j: the time the method has run, as if all of it had run in `from`.
    pub past_ns: f64,
    /// C_i: the predicted compile time.
    pub compile_ns: f64,
    /// T_j·S_j/S_i: the predicted time of the same work in `to`.
    pub future_ns: f64,
}

impl Decision {
    /// What the controller expects to gain: T_j − (C_i + T_j·S_j/S_i), positive.
    pub fn benefit_ns(&self) -> f64 {
        self.past_ns - (self.compile_ns + self.future_ns)
    }
}

pub struct Controller {
    model: CostModel,
    organizer: Organizer,
    /// The time one sample stands for.
    sample_ns: f64,
    /// The tiers the VM can compile to.
    tiers: Vec<Tier>,
    /// Call edges from the samples' two innermost frames (one per sample that has them): the
    /// inliner's call graph when it is fed by timer samples instead of CBS.
    sample_edges: CallGraph,
}

impl Controller {
    /// A controller for samples taken every `sample_ns` of the program's time, choosing
    /// among `tiers` (the compiling tiers the VM has).
    pub fn new(model: CostModel, sample_ns: f64, tiers: &[Tier]) -> Controller {
        Controller {
            model,
            organizer: Organizer::default(),
            sample_ns,
            tiers: tiers.iter().copied().filter(model_has).collect(),
            sample_edges: CallGraph::default(),
        }
    }

    /// The call graph the samples' adjacent frames show so far (empty when samples keep one
    /// frame).
    pub fn sample_call_graph(&self) -> &CallGraph {
        &self.sample_edges
    }

    pub fn model(&self) -> &CostModel {
        &self.model
    }

    /// How many bytecodes the compile `d` asks for may inline: what its predicted gain pays
    /// for at the target tier's compile rate. Inlining makes the compile bigger than the root
    /// the decision priced, and a compile whose gain is small cannot afford much of it.
    pub fn affordable_inlining(&self, d: &Decision) -> u32 {
        let Some(cost) = self.model.tier(d.to) else {
            return 0;
        };
        if cost.compile_per_bytecode_ns <= 0.0 {
            return u32::MAX;
        }
        let bytecodes = d.benefit_ns().max(0.0) / cost.compile_per_bytecode_ns;
        bytecodes.min(f64::from(u32::MAX)) as u32
    }

    pub fn organizer(&self) -> &Organizer {
        &self.organizer
    }

    /// A method exists with `bytecodes` instructions (compile times are predicted from it).
    pub fn method_defined(&mut self, method: MethodId, bytecodes: u32) {
        self.organizer.record_mut(method).bytecodes = bytecodes;
    }

    /// Code for `method` in `tier` runs now, as `version`: its samples count in that tier.
    pub fn code_installed(&mut self, version: CodeVersionId, method: MethodId, tier: Tier) {
        self.organizer.version_installed(version, method, tier);
        let r = self.organizer.record_mut(method);
        r.installed = Some(higher(r.installed, tier));
        r.compiles += 1;
        if r.pending == Some(tier) {
            r.pending = None;
        }
    }

    /// `tier` could not compile `method`: it stays where it is and is not asked again.
    pub fn compile_failed(&mut self, method: MethodId, tier: Tier) {
        let r = self.organizer.record_mut(method);
        r.failed[tier.column()] = true;
        r.pending = None;
    }

    /// `method`'s code in `tier` was thrown away (its speculation failed): its calls run in
    /// `now` again, and it may be recompiled, boundedly.
    pub fn code_invalidated(&mut self, method: MethodId, now: Tier) {
        let r = self.organizer.record_mut(method);
        r.installed = (now != Tier::Interpreter).then_some(now);
        r.pending = None;
    }

    /// Takes a batch of samples and answers the recompilations they justify, at most one per
    /// method, each marked pending until [`Controller::code_installed`] or
    /// [`Controller::compile_failed`] reports back.
    pub fn observe(&mut self, samples: &[Sample]) -> Vec<Decision> {
        for s in samples {
            if let Some(edge) = self.organizer.edge(s) {
                self.sample_edges.add(edge, 1);
            }
        }
        let touched = self.organizer.observe(samples);
        let mut decisions = Vec::new();
        for method in touched {
            let Some(r) = self.organizer.record(method) else {
                continue;
            };
            if let Some(d) = self.consider(method, r) {
                self.organizer.record_mut(method).pending = Some(d.to);
                decisions.push(d);
            }
        }
        decisions
    }

    /// The cost/benefit test for one method.
    fn consider(&self, method: MethodId, r: &MethodRecord) -> Option<Decision> {
        if r.pending.is_some() || r.compiles >= MAX_COMPILES_PER_METHOD || r.bytecodes == 0 {
            return None;
        }
        let from = r.tier();
        let s_from = self.model.speedup(from);
        // The time spent so far, each sample converted to what it would have taken in
        // `from`: a sample in a slower tier stands for less work.
        let past_ns: f64 = Tier::NAMED
            .iter()
            .map(|&t| {
                r.samples[t.column()] as f64 * self.sample_ns * self.model.speedup(t) / s_from
            })
            .sum();
        let mut best: Option<Decision> = None;
        for &to in &self.tiers {
            if to.rank() <= from.rank() || r.failed[to.column()] {
                continue;
            }
            let cost = self.model.tier(to)?;
            let d = Decision {
                method,
                from,
                to,
                past_ns,
                compile_ns: cost.compile_ns(r.bytecodes),
                future_ns: past_ns * s_from / cost.speedup,
            };
            if best.is_none_or(|b| d.compile_ns + d.future_ns < b.compile_ns + b.future_ns) {
                best = Some(d);
            }
        }
        best.filter(|d| d.benefit_ns() > 0.0)
    }
}

fn model_has(tier: &Tier) -> bool {
    matches!(tier, Tier::Baseline | Tier::Quick | Tier::Optimizing)
}

fn higher(a: Option<Tier>, b: Tier) -> Tier {
    match a {
        Some(a) if a.rank() > b.rank() => a,
        _ => b,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tally_profile::{Origin, RawFrame, SampleFlags, VmState};

    const MS: f64 = 1e6;

    fn interpreted(method: u32) -> Sample {
        Sample {
            time_ns: 0,
            state: VmState::Interpreting,
            origin: Origin::Immediate,
            flags: SampleFlags::NONE,
            depth: 1,
            frames: vec![RawFrame::interpreted(MethodId(method), 0)],
        }
    }

    fn compiled(version: u32) -> Sample {
        Sample {
            state: VmState::Compiled,
            frames: vec![RawFrame::Compiled {
                code: CodeVersionId(version),
                pc_offset: 0,
            }],
            ..interpreted(0)
        }
    }

    /// Baseline 2x faster, 1 ms to compile; optimizing 5x, 4 ms; samples 1 ms apart.
    fn controller() -> Controller {
        let mut model = CostModel::default();
        model.baseline.speedup = 2.0;
        model.baseline.compile_fixed_ns = 1.0 * MS;
        model.baseline.compile_per_bytecode_ns = 0.0;
        model.optimizing.speedup = 5.0;
        model.optimizing.compile_fixed_ns = 4.0 * MS;
        model.optimizing.compile_per_bytecode_ns = 0.0;
        let mut c = Controller::new(model, MS, &[Tier::Baseline, Tier::Optimizing]);
        c.method_defined(MethodId(7), 20);
        c
    }

    #[test]
    fn a_method_is_compiled_once_its_past_time_outweighs_the_compile() {
        let mut c = controller();
        // 1 ms: staying (1) beats baseline (1 + 0.5) and optimizing (4 + 0.2).
        assert!(c.observe(&[interpreted(7)]).is_empty());
        // 3 ms: baseline costs 1 + 1.5 = 2.5 < 3; optimizing 4 + 0.6 does not pay yet.
        let d = c.observe(&[interpreted(7), interpreted(7)]);
        assert_eq!(d.len(), 1);
        assert_eq!((d[0].from, d[0].to), (Tier::Interpreter, Tier::Baseline));
        assert!((d[0].past_ns - 3.0 * MS).abs() < 1.0);
        assert!((d[0].benefit_ns() - 0.5 * MS).abs() < 1.0);
    }

    #[test]
    fn the_cheapest_total_wins_and_a_pending_compile_is_not_asked_twice() {
        let mut c = controller();
        // 20 ms: optimizing (4 + 4 = 8) beats baseline (1 + 10 = 11).
        let batch = vec![interpreted(7); 20];
        let d = c.observe(&batch);
        assert_eq!(d[0].to, Tier::Optimizing);
        assert!(c.observe(&batch).is_empty(), "pending");
        c.code_installed(CodeVersionId(1), MethodId(7), Tier::Optimizing);
        // Samples in the optimized code now count as optimized time; nothing higher exists.
        assert!(c.observe(&vec![compiled(1); 100]).is_empty());
        let r = c.organizer().record(MethodId(7)).unwrap();
        assert_eq!(r.samples, [40, 0, 100, 0]);
        assert_eq!(r.tier(), Tier::Optimizing);
    }

    #[test]
    fn a_compile_may_inline_what_its_gain_pays_for() {
        let mut c = controller();
        c.model.optimizing.compile_per_bytecode_ns = 0.05 * MS;
        // 20 ms: optimizing costs 4 + 1 (20 bytecodes) + 4 = 9 ms, a gain of 11 ms, which
        // pays for 220 more bytecodes of compile at 0.05 ms each.
        let d = c.observe(&vec![interpreted(7); 20]);
        assert_eq!(d[0].to, Tier::Optimizing);
        assert_eq!(c.affordable_inlining(&d[0]), 220);
        let barely = Decision {
            past_ns: d[0].compile_ns + d[0].future_ns + 0.01 * MS,
            ..d[0]
        };
        assert_eq!(c.affordable_inlining(&barely), 0);
    }

    #[test]
    fn baseline_samples_count_as_less_interpreter_time() {
        let mut c = controller();
        let _ = c.observe(&vec![interpreted(7); 3]);
        c.code_installed(CodeVersionId(1), MethodId(7), Tier::Baseline);
        // In baseline: past = 3 interpreted ms at half cost (1.5) + 6 baseline ms = 7.5 ms;
        // optimizing costs 4 + 7.5·2/5 = 7 < 7.5.
        let d = c.observe(&vec![compiled(1); 6]);
        assert_eq!(d.len(), 1);
        assert_eq!((d[0].from, d[0].to), (Tier::Baseline, Tier::Optimizing));
        assert!((d[0].past_ns - 7.5 * MS).abs() < 1.0, "{d:?}");
    }

    #[test]
    fn failures_and_the_recompile_bound_stop_further_compiles() {
        let mut c = controller();
        let d = c.observe(&vec![interpreted(7); 20]);
        c.compile_failed(MethodId(7), d[0].to);
        let d = c.observe(&vec![interpreted(7); 20]);
        assert_eq!(
            d[0].to,
            Tier::Baseline,
            "the failed tier is not asked again"
        );
        let mut c = controller();
        for v in 0..MAX_COMPILES_PER_METHOD {
            c.code_installed(CodeVersionId(v), MethodId(7), Tier::Baseline);
            c.code_invalidated(MethodId(7), Tier::Interpreter);
        }
        assert!(c.observe(&vec![interpreted(7); 100]).is_empty());
    }

    /// Baseline 2x (1 ms), quick 5x (2 ms), optimizing 10x (10 ms); samples 1 ms apart.
    fn leveled() -> Controller {
        let mut model = CostModel::default();
        for (t, speedup, fixed) in [
            (&mut model.baseline, 2.0, 1.0),
            (&mut model.quick, 5.0, 2.0),
            (&mut model.optimizing, 10.0, 10.0),
        ] {
            *t = crate::model::TierCost {
                speedup,
                compile_fixed_ns: fixed * MS,
                compile_per_bytecode_ns: 0.0,
                expansion: 1.0,
            };
        }
        let tiers = [Tier::Baseline, Tier::Quick, Tier::Optimizing];
        let mut c = Controller::new(model, MS, &tiers);
        c.method_defined(MethodId(7), 20);
        c
    }

    #[test]
    fn every_level_above_the_method_is_priced_and_the_cheapest_total_wins() {
        let mut c = leveled();
        // 5 ms: baseline 1 + 2.5, quick 2 + 1 = 3, optimizing 10 + 0.5.
        let d = c.observe(&vec![interpreted(7); 5]);
        assert_eq!((d[0].from, d[0].to), (Tier::Interpreter, Tier::Quick));
        // 60 ms: quick 2 + 12 = 14, optimizing 10 + 6 = 16; 100 ms: 2 + 20 against 10 + 10.
        let mut c = leveled();
        assert_eq!(c.observe(&vec![interpreted(7); 60])[0].to, Tier::Quick);
        let mut c = leveled();
        assert_eq!(
            c.observe(&vec![interpreted(7); 100])[0].to,
            Tier::Optimizing
        );
    }

    #[test]
    fn a_method_moves_from_the_quick_level_to_the_full_one_once_its_time_there_pays() {
        let mut c = leveled();
        let _ = c.observe(&vec![interpreted(7); 5]);
        c.code_installed(CodeVersionId(1), MethodId(7), Tier::Quick);
        // In quick: the 5 interpreted ms count as 1 quick ms. With 15 quick samples, 16 ms:
        // optimizing costs 10 + 8 = 18, staying 16. With 20 more, 36 ms: 10 + 18 < 36.
        assert!(c.observe(&vec![compiled(1); 15]).is_empty());
        let d = c.observe(&vec![compiled(1); 20]);
        assert_eq!((d[0].from, d[0].to), (Tier::Quick, Tier::Optimizing));
        assert!((d[0].past_ns - 36.0 * MS).abs() < 1.0, "{d:?}");
        // Never down: once optimized, no level below is asked for.
        c.code_installed(CodeVersionId(2), MethodId(7), Tier::Optimizing);
        c.code_installed(CodeVersionId(3), MethodId(7), Tier::Quick);
        assert_eq!(
            c.organizer().record(MethodId(7)).unwrap().tier(),
            Tier::Optimizing
        );
    }

    #[test]
    fn samples_outside_the_methods_code_are_not_counted() {
        let mut c = controller();
        let mut gc = interpreted(7);
        gc.state = VmState::Gc;
        let unknown = compiled(99);
        assert!(c.observe(&[gc, unknown]).is_empty());
        assert_eq!(c.organizer().ignored, 2);
        assert!(c.organizer().record(MethodId(7)).unwrap().total_samples() == 0);
    }
}
