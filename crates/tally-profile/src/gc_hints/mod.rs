//! GC hints (Buytaert et al., "GCH: Hints for Triggering Garbage Collections", HiPEAC 2005):
//! method entries and exits at which a program's live data is repeatedly at a local minimum
//! are favorable points to collect, since a collection there copies or marks little.
//!
//! [`analysis`] finds such points in the live-data measurements of a profiling run, and
//! [`file`] writes and reads them as a hints file, which a later run checks against itself
//! (VM version, program) before it trusts them.

pub mod analysis;
pub mod file;

pub use analysis::{favorable_points, AnalysisSettings, LiveMeasurement};
pub use file::{GcHints, HintPoint, HintsError, PointKind, ProgramIdentity};
