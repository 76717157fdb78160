//! Value profiles after OpenJ9's JProfiling: per profiled site a small table of the values
//! seen there (receiver classes at sends, classes at type tests, integers where specializing
//! pays) with their frequencies and an "other" count.
//!
//! - [`table`]: the table, its inlinable common path and its out-of-line slow path;
//! - [`hashing`]: value → slot by bit extraction (`pext`, or a shift table giving the same
//!   index) or a multiplicative hash, and choosing the bits;
//! - [`maintenance`]: the run's tables and the background pass that resets tables a phase
//!   change left behind and forgets tables no code refers to;
//! - [`history`]: the best and the most recent profile per method, for recompiles.
//!
//! VM-agnostic: values are 64-bit words (a class id, a tagged integer, an address), owners
//! are the VM's method ids.

pub mod hashing;
pub mod history;
pub mod maintenance;
pub mod table;

pub use hashing::{pext_is_fast, Hashing};
pub use history::{ProfileHistory, ProfileSnapshot};
pub use maintenance::{Maintainer, PassPolicy, PassReport, ValueProfiles};
pub use table::{TableLayout, TableSnapshot, ValueTable, MAX_SLOTS};
