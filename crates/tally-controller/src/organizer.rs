//! The organizer: turns method samples into time per method and tier (Jikes RVM's method
//! listener and hot-method organizer in one). A sample names the innermost frame; an
//! interpreted frame names its method, a compiled one its code version, which the organizer
//! maps back to the method and tier it was installed for.

use std::collections::HashMap;

use tally_profile::{CallEdge, CodeVersionId, MethodId, RawFrame, Sample, Tier, VmState};

/// What the organizer knows of one method.
#[derive(Clone, Debug, Default)]
pub struct MethodRecord {
    /// Its size in bytecodes: what compile times are predicted from.
    pub bytecodes: u32,
    /// Samples taken while it was the innermost frame, per tier it ran in.
    pub samples: [u64; Tier::COLUMNS],
    /// The tier its calls run in now (the highest installed).
    pub(crate) installed: Option<Tier>,
    /// A compile the controller asked for and that has not finished yet.
    pub(crate) pending: Option<Tier>,
    /// Tiers that could not compile it: never asked again.
    pub(crate) failed: [bool; Tier::COLUMNS],
    /// Versions installed for it, to bound recompilation.
    pub(crate) compiles: u32,
}

impl MethodRecord {
    /// The tier its calls run in now.
    pub fn tier(&self) -> Tier {
        self.installed.unwrap_or(Tier::Interpreter)
    }

    pub fn total_samples(&self) -> u64 {
        self.samples.iter().sum()
    }
}

#[derive(Default)]
pub struct Organizer {
    /// By `MethodId` (VMs number methods densely from zero).
    methods: Vec<MethodRecord>,
    versions: HashMap<CodeVersionId, (MethodId, Tier)>,
    /// Samples that named no method the organizer can place (unknown version, a state in
    /// which compiling cannot help).
    pub(crate) ignored: u64,
}

impl Organizer {
    pub(crate) fn record_mut(&mut self, method: MethodId) -> &mut MethodRecord {
        let i = method.0 as usize;
        if i >= self.methods.len() {
            self.methods.resize(i + 1, MethodRecord::default());
        }
        &mut self.methods[i]
    }

    pub fn record(&self, method: MethodId) -> Option<&MethodRecord> {
        self.methods.get(method.0 as usize)
    }

    /// Every method with at least one sample, with its record.
    pub fn sampled(&self) -> impl Iterator<Item = (MethodId, &MethodRecord)> {
        self.methods
            .iter()
            .enumerate()
            .filter(|(_, r)| r.total_samples() > 0)
            .map(|(i, r)| (MethodId(i as u32), r))
    }

    pub(crate) fn version_installed(
        &mut self,
        version: CodeVersionId,
        method: MethodId,
        tier: Tier,
    ) {
        self.versions.insert(version, (method, tier));
    }

    /// Where a sample's time went: the method and the tier of its innermost frame. Samples
    /// of the collector, the compiler, primitives and the runtime are not the method's code
    /// running, and compiling it would not shorten them.
    pub(crate) fn place(&self, sample: &Sample) -> Option<(MethodId, Tier)> {
        if !matches!(sample.state, VmState::Interpreting | VmState::Compiled) {
            return None;
        }
        match *sample.frames.first()? {
            RawFrame::Interpreted { method, .. } => Some((method, Tier::Interpreter)),
            RawFrame::InTier { method, tier, .. } => Some((method, tier)),
            RawFrame::Compiled { code, .. } => self.versions.get(&code).copied(),
        }
    }

    /// The call edge a sample's two innermost frames show: the caller's method and call
    /// site (a caller waits at its send) and the callee's method. `None` for samples with
    /// one frame, callers in compiled code (their call site needs the pc map) and a method
    /// calling itself (which may be a method inlined into itself's compiled frame, and is
    /// never inlined anyway).
    pub(crate) fn edge(&self, sample: &Sample) -> Option<CallEdge> {
        let callee = match *sample.frames.first()? {
            RawFrame::Interpreted { method, .. } | RawFrame::InTier { method, .. } => method,
            RawFrame::Compiled { code, .. } => self.versions.get(&code)?.0,
        };
        // A caller's frame, compiled or not, saved its position at the call.
        let (RawFrame::Interpreted { method, bci } | RawFrame::InTier { method, bci, .. }) =
            *sample.frames.get(1)?
        else {
            return None;
        };
        (method != callee).then_some(CallEdge {
            caller: method,
            callsite: bci,
            callee,
        })
    }

    /// Adds `samples`; answers the methods they fell in, each once, in order of first sample.
    pub(crate) fn observe(&mut self, samples: &[Sample]) -> Vec<MethodId> {
        let mut touched = Vec::new();
        for s in samples {
            match self.place(s) {
                Some((method, tier)) => {
                    let r = self.record_mut(method);
                    r.samples[tier.column()] += 1;
                    if !touched.contains(&method) {
                        touched.push(method);
                    }
                }
                None => self.ignored += 1,
            }
        }
        touched
    }
}
