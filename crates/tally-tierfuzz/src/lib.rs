//! A differential fuzzer of Tally's tiers.
//!
//! A seed generates a SOM program (`generate`) built to reach what the compiled tiers treat
//! specially: classes and subclasses whose sends turn polymorphic and megamorphic after the
//! code warmed up, blocks kept, passed and escaping (non-local returns included), doubles with
//! their special values, integers overflowing into big integers, strings, symbols, arrays,
//! recursion and SOM errors. The `tally` binary runs it interpreted and in every configuration
//! of `Tally::configs` (each compiled tier, collectors, collections every few allocations);
//! each run must print, fail and exit as the interpreter's did (`compare`). A divergence is
//! shrunk over the program's tree (`shrink`) and saved with the command that shows it
//! (`campaign`).
//!
//! The fuzzer runs `tally` as a subprocess and depends on none of the VM's crates: a crash is
//! an outcome to report, and the same binary is what users run.

pub mod ast;
pub mod campaign;
pub mod compare;
pub mod generate;
pub mod run;
pub mod shrink;
mod walk;

pub use campaign::{fuzz, Divergence, Progress, Settings, Summary};
pub use generate::generate;
pub use run::{Config, Tally};
