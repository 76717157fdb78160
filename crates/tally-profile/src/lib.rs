//! VM-agnostic profiling: samplers, counter-based call-graph sampling,
//! exhaustive ground truth, accuracy metrics, the profile file and its
//! exporters. It knows nothing of SOM, so any Rust language VM can use it.
//!
//! The crate has two halves with very different rules:
//!
//! - **The hot path** ([`hot`], [`trigger`], [`sigint`]): what the VM calls at
//!   yieldpoints and what runs in signal handlers. Allocation-free and
//!   lock-free after construction: an overloaded [`YieldpointFlag`]
//!   (Arnold & Grove) that can also trip [`TripWord`]s, the bounds a VM checks
//!   anyway at calls and returns, so those yieldpoints cost nothing of their
//!   own (see [`flag`]), the CBS state machine [`Cbs`], a [`PublishedState`]
//!   (a shadow stack the VM pushes and pops, or a [`StackView`] through which
//!   handlers read the VM's own frames in place, costing calls nothing), a
//!   pre-allocated [`SampleRing`], [`ExactCounts`] for the exhaustive mode,
//!   and the timer / perf_events [`Sampler`]. Beside them, a [`Drainer`]
//!   thread empties the ring and answers Ctrl-C for a VM whose interpreter
//!   tests the flag only at calls.
//! - **Offline** (everything else): the [`Recorder`] that turns ring
//!   contents and events into a [`Profile`], the file [`format`](mod@format),
//!   [`Symbols`] resolution through code versions, call graphs and
//!   calling-context trees, [`metrics`], [`report`]s and [`export`]s.
//!
//! How a VM uses it (a toy "interpreter" stands in for yours):
//!
//! ```
//! use tally_profile::*;
//!
//! // Once, at start-up.
//! let hot = HotState::new(HotConfig::default());
//! let mut recorder = Recorder::new(Header {
//!     vm_name: "toyvm".into(),
//!     program: "demo".into(),
//!     ..Header::default()
//! });
//! let mut cbs = Cbs::new(CbsConfig::default());
//! let mut exact = ExactCounts::new();
//! // A real VM starts a signal-driven trigger here:
//! //   let sampler = Sampler::start(hot.clone(), SamplerConfig { .. })?;
//! // This example drives the ticks by hand instead.
//! hot.set_mode(Some(Mechanism::Polling), true);
//!
//! // Names arrive as events; the hot path only sees small ids.
//! let (main, work) = (MethodId(0), MethodId(1));
//! for (m, name) in [(main, "Demo>>main"), (work, "Demo>>work")] {
//!     recorder.event(EventKind::MethodCompiled {
//!         method: m, class: ClassId(0), name: name.into(),
//!         file: "demo.src".into(), line: 1, bytecode_len: 8,
//!     });
//! }
//!
//! hot.published.push(RawFrame::interpreted(main, 0));
//! for i in 0..1000u32 {
//!     if i % 100 == 0 {
//!         hot.on_tick(); // what the SIGPROF handler does
//!     }
//!     // Call site at bci 3 of main: publish it, then the prologue.
//!     hot.published.set_top_pos(3);
//!     hot.published.push(RawFrame::interpreted(work, 0));
//!     exact.on_call(Some((main, 3)), work);
//!     let f = hot.flag.load();
//!     if f != 0 {
//!         // The slow path: all profiling work is out of line.
//!         if cbs.on_method_entry(f, &hot.flag) {
//!             // Edges wait for their window to close: its call rate is their weight.
//!             let edge = CallEdge { caller: main, callsite: 3, callee: work };
//!             cbs.keep(Some(edge), |e, w| recorder.record_edge(e, w));
//!         }
//!         if f & flag::SAMPLE != 0 {
//!             hot.take_polled_sample();
//!         }
//!         if f & flag::DRAIN != 0 {
//!             hot.flag.clear(flag::DRAIN);
//!             recorder.drain(&hot);
//!         }
//!     }
//!     exact.on_bytecodes(work, 5);
//!     hot.published.pop(); // epilogue
//! }
//! hot.settle(); // a real VM: `sampler.stop()`
//! cbs.finish(|e, w| recorder.record_edge(e, w));
//! let profile = recorder.finish(&hot, Some(exact), 0);
//!
//! assert!(profile.counters.balanced());
//! assert_eq!(profile.samples.len(), 10);
//! let flat = report::FlatProfile::new(&profile);
//! assert_eq!(flat.rows[0].name, "Demo>>work");
//! let acc = report::accuracy_against_exact(&profile, TopN::Count(1)).unwrap();
//! assert_eq!(acc.weighted, 1.0);
//! // Files, reports and exports all start from the Profile:
//! let bytes = format::encode(&profile);
//! assert_eq!(format::decode(&bytes).unwrap(), profile);
//! let folded = export::folded::to_folded(&profile);
//! assert_eq!(folded, "Demo>>main;Demo>>work 10\n");
//! ```

pub mod callgraph;
pub mod cct;
pub mod clock;
pub mod code;
pub mod drainer;
pub mod event;
pub mod export;
#[doc(hidden)]
pub mod fixtures;
pub mod format;
pub use tally_output;
#[doc(hidden)]
pub mod fuzz_support;
pub mod gc_hints;
pub mod hot;
pub mod ids;
pub mod metrics;
pub mod profile;
pub mod report;
pub mod sample;
pub mod sigint;
pub mod trigger;
pub mod validation;
pub mod values;

pub use callgraph::{CallEdge, CallGraph};
pub use cct::{Cct, CctNode};
pub use code::{
    lost_frames, CodeVersion, LogicalFrame, MethodInfo, PcMapEntry, SourcePos, Symbols,
};
pub use drainer::{Drainer, DrainerConfig, OnPeriod, UnservedStop};
pub use event::{Event, EventKind, LineEntry, TierCalls};
pub use hot::cbs::{Cbs, CbsConfig};
pub use hot::exact::ExactCounts;
pub use hot::flag::{self, TripWord, YieldpointFlag};
pub use hot::published::{PublishedState, StackView, StateCell};
pub use hot::ring::SampleRing;
pub use hot::{HotConfig, HotState, Mechanism, SampleCounters, DEFAULT_SAMPLE_DEPTH};
pub use ids::{
    ClassId, CodeVersionId, FrameMark, MethodId, RawFrame, Tier, VmState, ENTRY_BCI, GC_PAUSE,
};
pub use metrics::TopN;
pub use profile::{Header, Profile, Recorder, SamplerSettings};
pub use sample::{Origin, Sample, SampleFlags};
pub use sigint::{install_sigint_flush, sigint_received, stop_signal, SigintGuard};
pub use trigger::{
    PerfEvent, Sampler, SamplerConfig, TimerClock, Trigger, TriggerError, TriggerInfo,
    INTERRUPTED_PC_AVAILABLE,
};
