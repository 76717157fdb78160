//! Vertical profiling (Buytaert's Javana, thesis chapter 2) and method-level phases
//! (MonitorMethod, chapter 3), the VM-agnostic half: what an
//! instrumented VM reports ([`event`]: an [`Instrument`] trait of hooks for classes, methods,
//! objects, calls and every memory access) and the tools that relate those accesses to the
//! program's methods, lines and classes. Knows nothing of SOM.
//!
//! - [`cache`]: a set-associative, write-back, write-allocate cache hierarchy simulator that
//!   tells, per access, how deep it had to go.
//! - [`cache_tool`]: the accesses through a simulated hierarchy, misses per method, per source
//!   line and per class.
//! - [`trace`]: every event as a compressed stream (the memory address trace), and its reader.
//! - [`lifetimes`]: object lifetimes per class and allocation site, and refactoring hints.
//! - [`phases`]: MonitorMethod's phase selection (θ_weight, θ_grain) with the overhead each
//!   selection is estimated to cost; [`phase_files`] the first run's times and the selection;
//!   [`counters`] the perf_events counters read at phase boundaries; [`phase_report`] the
//!   per-phase metrics with their variation and an ANOVA across phases.

pub mod cache;
pub mod cache_tool;
pub mod counters;
pub mod event;
pub mod lifetimes;
pub mod phase_files;
pub mod phase_report;
pub mod phases;
pub mod trace;

pub use event::{ClassId, Instrument, MemoryAccess, MethodId, Place, Site};
