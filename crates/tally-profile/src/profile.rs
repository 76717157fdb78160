//! A whole profile in memory, and the recorder that builds one on the VM
//! thread.
//!
//! One stream: the recorder keeps every event and sample in arrival order;
//! every report, export and accuracy figure is computed from a [`Profile`],
//! so a person's report and an optimizer's decision can be checked against
//! the same data.

use std::collections::BTreeMap;
use std::path::Path;

use crate::callgraph::{CallEdge, CallGraph};
use crate::clock;
use crate::code::Symbols;
use crate::event::{Event, EventKind};
use crate::format::{ProfileStream, WriteFailure};
use crate::hot::cbs::CbsConfig;
use crate::hot::exact::ExactCounts;
use crate::hot::{HotState, SampleCounters};
use crate::ids::MethodId;
use crate::sample::Sample;

/// What produced the profile, so that a file explains itself years later.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct Header {
    pub vm_name: String,
    pub vm_version: String,
    pub program: String,
    pub args: Vec<String>,
    /// The VM's options as given (name, value).
    pub options: Vec<(String, String)>,
    /// The clock `time_ns` values are read from.
    pub clock: String,
    pub clock_resolution_ns: u64,
    /// Wall-clock time of the start, for tools that show dates.
    pub start_unix_ns: u64,
    /// `time_ns` (monotonic) at the start; timelines are relative to it.
    pub start_time_ns: u64,
    pub sampler: SamplerSettings,
}

#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct SamplerSettings {
    /// "timer", "timer-wall", "itimer", "perf" or "none".
    pub trigger: String,
    /// What actually ticked (e.g. "perf_event_open: task-clock (software)").
    pub trigger_source: String,
    /// Why the trigger differs from what was asked, if it does.
    pub trigger_note: String,
    /// "polling", "immediate" or "none".
    pub mechanism: String,
    pub rate_hz: u32,
    pub cbs: Option<CbsConfig>,
    pub exhaustive: bool,
    pub ring_slots: u32,
    pub max_frames: u32,
}

impl SamplerSettings {
    /// Whether ticks came from a wall-clock timer, so a sample stands for elapsed time
    /// (waiting included) rather than CPU time. Profiles written before the trigger was named
    /// `timer-wall` say so only in the trigger source.
    pub fn is_wall_clock(&self) -> bool {
        self.trigger == "timer-wall" || self.trigger_source.contains("CLOCK_MONOTONIC")
    }

    /// What one sample's period measures: "wall" or "cpu" (the names pprof tools expect).
    pub fn time_kind(&self) -> &'static str {
        if self.is_wall_clock() {
            "wall"
        } else {
            "cpu"
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct Profile {
    pub header: Header,
    pub events: Vec<Event>,
    pub samples: Vec<Sample>,
    /// Call edges sampled by CBS, each sample weighted by its window's call rate (calls per
    /// millisecond; see [`crate::Cbs`]): edge weights are proportional to call counts.
    pub cbs_edges: CallGraph,
    /// How many edges CBS sampled (the graph's weights are rates, not counts).
    pub cbs_samples: u64,
    /// Ground truth, when the exhaustive mode was on.
    pub exact: Option<ExactCounts>,
    pub counters: SampleCounters,
}

impl Profile {
    pub fn symbols(&self) -> Symbols {
        Symbols::from_events(&self.events)
    }

    /// Samples per method (innermost frame = self time), keyed by name so
    /// that profiles of different runs compare.
    pub fn self_samples_by_name(&self) -> BTreeMap<String, u64> {
        let symbols = self.symbols();
        let mut out = BTreeMap::new();
        for s in &self.samples {
            let frames = symbols.resolve_stack(&s.frames);
            if let Some(top) = frames.first() {
                *out.entry(symbols.method_name(top.method)).or_insert(0) += 1;
            }
        }
        out
    }

    /// The ground-truth method weights (executed bytecodes per method),
    /// keyed by name — the "perfect profile" sampled profiles are judged
    /// against.
    pub fn exact_bytecodes_by_name(&self) -> Option<BTreeMap<String, u64>> {
        let exact = self.exact.as_ref()?;
        let symbols = self.symbols();
        let mut out = BTreeMap::new();
        for (i, &n) in exact.bytecodes.iter().enumerate() {
            if n > 0 {
                let x = out
                    .entry(symbols.method_name(MethodId(i as u32)))
                    .or_insert(0);
                *x = u64::saturating_add(*x, n);
            }
        }
        Some(out)
    }

    /// Samples whose stack was deeper than the sampler kept (`--sample-depth`): their
    /// innermost frames sit under a `[truncated: N frames]` root.
    pub fn truncated_samples(&self) -> u64 {
        self.samples
            .iter()
            .filter(|s| crate::code::lost_frames(s).is_some())
            .count() as u64
    }

    /// A sentence on truncated samples for reports and exports, if there are any.
    pub fn truncation_note(&self) -> Option<String> {
        let n = self.truncated_samples();
        (n > 0).then(|| {
            format!(
                "{n} of {} samples were deeper than {} frames (--sample-depth); their innermost frames sit under a [truncated: N frames] root",
                self.samples.len(),
                self.header.sampler.max_frames
            )
        })
    }

    /// Duration from the first to the last event or sample.
    pub fn duration_ns(&self) -> u64 {
        let start = self.header.start_time_ns;
        let end = self
            .events
            .iter()
            .map(|e| e.time_ns)
            .chain(self.samples.iter().map(|s| s.time_ns))
            .max()
            .unwrap_or(start);
        end.saturating_sub(start)
    }

    /// Writes the file whole or not at all ([`tally_output`]): a reader (or a crash) never
    /// sees half a profile.
    pub fn write_file(
        &self,
        path: &Path,
        if_exists: tally_output::IfExists,
    ) -> Result<(), tally_output::OutputError> {
        crate::format::write_file(self, path, if_exists)
    }

    pub fn read(path: &Path) -> Result<Profile, crate::format::ReadError> {
        crate::format::read_file(path)
    }
}

/// Builds a [`Profile`] on the VM thread: events as they happen, samples
/// drained from the ring at safepoints, CBS edges as they are taken.
pub struct Recorder {
    profile: Profile,
    /// The file the profile streams to, once [`Recorder::stream_to`] opened it.
    stream: Option<ProfileStream>,
    /// The fraction of a sample [`Recorder::attribute_gc_pause`] still owes.
    gc_pause_carry: f64,
    /// A deliberately broken profile ([`Recorder::credit_callers`]).
    credit_callers: bool,
}

impl Recorder {
    /// Starts recording; stamps the start times and emits `ProgramStart`.
    pub fn new(mut header: Header) -> Recorder {
        header.start_time_ns = clock::now_ns();
        header.start_unix_ns = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(0);
        if header.clock.is_empty() {
            header.clock = clock::CLOCK_NAME.to_string();
            header.clock_resolution_ns = clock::resolution_ns();
        }
        let start = header.start_time_ns;
        let mut r = Recorder {
            profile: Profile {
                header,
                ..Profile::default()
            },
            stream: None,
            gc_pause_carry: 0.0,
            credit_callers: false,
        };
        r.event_at(start, EventKind::ProgramStart);
        r
    }

    pub fn header_mut(&mut self) -> &mut Header {
        &mut self.profile.header
    }

    pub fn event(&mut self, kind: EventKind) {
        self.event_at(clock::now_ns(), kind);
    }

    pub fn event_at(&mut self, time_ns: u64, kind: EventKind) {
        self.profile.events.push(Event { time_ns, kind });
    }

    /// Moves the ring's samples into the profile. Call at safepoints, and
    /// whenever the flag shows [`crate::flag::DRAIN`]; the VM thread clears that bit
    /// itself (clearing the last bit re-arms the trip words, and this runs on
    /// the drain thread and the collector's too, which would race with the VM
    /// thread's own changes of an armed value).
    pub fn drain(&mut self, hot: &HotState) -> usize {
        let first = self.profile.samples.len();
        let n = hot.drain_into(&mut self.profile.samples);
        if self.credit_callers {
            for s in &mut self.profile.samples[first..] {
                if s.frames.len() > 1 {
                    s.frames.remove(0);
                    s.depth = s.depth.saturating_sub(1);
                }
            }
        }
        n
    }

    /// For testing checks of samplers only: from now on every sample is credited to the
    /// caller of the method it was taken in (its innermost frame dropped), a sampler as wrong
    /// as a sampler can be while looking plausible.
    pub fn credit_callers(&mut self) {
        self.credit_callers = true;
    }

    /// Samples for a collection the VM thread waited in from `start_ns` to `end_ns`, less the
    /// `on_cpu_ns` of it that the thread itself ran (its part of the pause, which its CPU-time
    /// trigger sampled already), at the profile's rate, on the stack published now (the
    /// allocation that triggered it), in state GC. A CPU-time trigger takes no sample of a thread that is blocked, and the
    /// collector works on threads of its own, so without these a CPU profile would show no GC
    /// at all; with them the `[GC]` share of samples is the share of the run's time the VM
    /// thread spent waiting for collections, the figure the GC events give. Fractions of a
    /// sample carry over to the next collection, so many short pauses add up. Nothing is
    /// added when the trigger counts wall-clock time (it samples the blocked thread itself)
    /// or takes no method samples.
    pub fn attribute_gc_pause(
        &mut self,
        hot: &HotState,
        start_ns: u64,
        end_ns: u64,
        on_cpu_ns: u64,
    ) {
        let s = &self.profile.header.sampler;
        let samples_taken = !matches!(s.mechanism.as_str(), "" | "none")
            && !matches!(s.trigger.as_str(), "" | "none");
        if !samples_taken || s.is_wall_clock() || s.rate_hz == 0 || end_ns <= start_ns {
            return;
        }
        let period_ns = 1e9 / f64::from(s.rate_hz);
        let max = s.max_frames.max(1) as usize;
        // At the rate the trigger delivers, not the one asked for: a CPU-time timer above the
        // kernel tick has most of its expiries merged, and pauses counted at the nominal rate
        // would outweigh the running time sampled at the real one.
        let c = hot.counters();
        let delivered = c.taken.max(c.cbs_ticks);
        let delivered_share = if delivered + c.ticks_merged == 0 {
            1.0
        } else {
            delivered as f64 / (delivered + c.ticks_merged) as f64
        };
        let waited_ns = (end_ns - start_ns).saturating_sub(on_cpu_ns);
        let due = self.gc_pause_carry + waited_ns as f64 / period_ns * delivered_share;
        let n = due.floor() as u64;
        self.gc_pause_carry = due - n as f64;
        if n == 0 {
            return;
        }
        // Keep samples in time order: what the ring holds was taken before this collection.
        self.drain(hot);
        let mut frames = Vec::new();
        let (_, depth) = hot.published.snapshot(
            |_, word| frames.push(crate::ids::RawFrame::unpack(word)),
            max,
            None,
        );
        let flags = if depth as usize > frames.len() {
            crate::sample::SampleFlags::TRUNCATED
        } else {
            crate::sample::SampleFlags::NONE
        };
        let step = (end_ns - start_ns) / n;
        for i in 0..n {
            self.profile.samples.push(Sample {
                time_ns: start_ns + step / 2 + i * step,
                state: crate::ids::VmState::Gc,
                origin: crate::sample::Origin::GcPause,
                flags,
                depth,
                frames: frames.clone(),
            });
        }
    }

    /// A call edge chosen by [`crate::Cbs::on_method_entry`], with the weight
    /// [`crate::Cbs::keep`] gave it (its window's call rate).
    pub fn record_edge(&mut self, edge: CallEdge, weight: u64) {
        self.profile.cbs_edges.add(edge, weight);
        self.profile.cbs_samples += 1;
    }

    pub fn samples(&self) -> &[Sample] {
        &self.profile.samples
    }

    /// The CBS call graph so far.
    pub fn cbs_edges(&self) -> &CallGraph {
        &self.profile.cbs_edges
    }

    pub fn events(&self) -> &[Event] {
        &self.profile.events
    }

    /// Ends the run: drains what is left, emits `ProgramEnd`, and takes the
    /// final counters (stop the [`crate::Sampler`] first so they are
    /// settled) and the exhaustive counts if any.
    pub fn finish(mut self, hot: &HotState, exact: Option<ExactCounts>, exit_code: i32) -> Profile {
        self.finish_in_place(hot, exact, exit_code);
        self.profile
    }

    /// [`Recorder::finish`], then the final file at `path` ([`Recorder::write_final`]).
    pub fn finish_to_file(
        mut self,
        hot: &HotState,
        exact: Option<ExactCounts>,
        exit_code: i32,
        path: &Path,
    ) -> Result<Profile, WriteFailure> {
        self.finish_in_place(hot, exact, exit_code);
        let p = std::mem::take(&mut self.profile);
        self.write_final(&p, path)?;
        Ok(p)
    }

    fn finish_in_place(&mut self, hot: &HotState, exact: Option<ExactCounts>, exit_code: i32) {
        self.drain(hot);
        self.event(EventKind::ProgramEnd { exit_code });
        self.profile.counters = hot.counters();
        self.profile.exact = exact;
    }

    /// Starts streaming the profile to the run's own stream of `path`
    /// ([`crate::format::ProfileStream`]): the header is written now, so it must be complete.
    /// From here on [`Recorder::flush`] appends what arrived, and [`Recorder::write_final`]
    /// ends the file and renames it.
    pub fn stream_to(
        &mut self,
        path: &Path,
        if_exists: tally_output::IfExists,
    ) -> Result<&Path, tally_output::OutputError> {
        let stream = ProfileStream::start(path, &self.profile.header, if_exists)?;
        Ok(self.stream.insert(stream).partial())
    }

    /// Collects the drained samples and appends them and the new events to the stream, if
    /// there is one. Meant for the drain thread (not the VM's), which calls it every period.
    /// A failed append is answered once, and tried again each period.
    pub fn flush(&mut self, hot: &HotState) -> std::io::Result<()> {
        self.drain(hot);
        match self.stream.as_mut() {
            Some(stream) => stream.catch_up(&self.profile.events, &self.profile.samples),
            None => Ok(()),
        }
    }

    /// Writes `p` (this recorder's finished profile or snapshot) as the final file: the rest
    /// of the stream and its end, then the rename; or, without a stream, the whole file at
    /// `path` (never over an existing one).
    pub fn write_final(&mut self, p: &Profile, path: &Path) -> Result<(), WriteFailure> {
        match self.stream.take() {
            Some(s) => s.finish(p).map(|_| ()),
            None => p
                .write_file(path, tally_output::IfExists::Refuse)
                .map_err(|error| WriteFailure { error, kept: None }),
        }
    }

    /// Drops the stream and its file: for a run that never started, which must not replace
    /// an existing profile.
    pub fn discard(&mut self) {
        if let Some(s) = self.stream.take() {
            s.discard();
        }
    }

    /// A copy of the profile so far (for a SIGINT flush that then exits).
    pub fn snapshot(&mut self, hot: &HotState, exit_code: i32) -> Profile {
        self.drain(hot);
        let mut p = self.profile.clone();
        p.events.push(Event {
            time_ns: clock::now_ns(),
            kind: EventKind::ProgramEnd { exit_code },
        });
        p.counters = hot.counters();
        p
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hot::{HotConfig, Mechanism};

    fn gc_samples_for_a_pause(merged_per_delivered: u64, on_cpu_ns: u64) -> usize {
        let hot = HotState::new(HotConfig::default());
        hot.set_mode(Some(Mechanism::Immediate), false);
        let mut header = Header::default();
        header.sampler.trigger = "timer".into();
        header.sampler.mechanism = "immediate".into();
        header.sampler.rate_hz = 1000;
        header.sampler.max_frames = 8;
        let mut r = Recorder::new(header);
        for _ in 0..10 {
            hot.on_tick();
            hot.note_merged_ticks(merged_per_delivered);
        }
        r.attribute_gc_pause(&hot, 1_000_000_000, 1_100_000_000, on_cpu_ns); // 100 ms
        r.samples()
            .iter()
            .filter(|s| s.origin == crate::sample::Origin::GcPause)
            .count()
    }

    /// A pause gets the samples the trigger would really have taken in it: at 1000 Hz, 100
    /// for 100 ms when every tick comes, 25 when the kernel merges three expiries of four.
    #[test]
    fn a_gc_pause_is_sampled_at_the_rate_the_trigger_delivers() {
        assert_eq!(gc_samples_for_a_pause(0, 0), 100);
        assert_eq!(gc_samples_for_a_pause(3, 0), 25);
    }

    /// The part of a pause the VM thread ran itself was sampled by its CPU-time trigger: only
    /// the time it waited gets samples of the pause's own.
    #[test]
    fn the_vm_threads_own_work_in_a_pause_is_not_counted_twice() {
        assert_eq!(gc_samples_for_a_pause(0, 30_000_000), 70);
        assert_eq!(gc_samples_for_a_pause(0, 200_000_000), 0);
    }
}
