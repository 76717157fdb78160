//! A method sample as it is stored and analysed: when, in what VM state,
//! and the stack (innermost frame first), before name resolution.

use crate::ids::{RawFrame, VmState};

/// Which mechanism took the sample (Buytaert et al.'s design space).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum Origin {
    /// Recorded by the VM at a yieldpoint after a trigger set the flag.
    Polling = 0,
    /// Recorded inside the signal handler from published VM state.
    Immediate = 1,
    /// Stands for time the VM thread spent waiting in a garbage collection, which a CPU-time
    /// trigger cannot see: the collector runs on other threads while the VM thread is blocked.
    /// [`crate::Recorder::attribute_gc_pause`] adds these at the profile's rate, on the stack
    /// of the allocation that triggered the collection.
    GcPause = 2,
}

impl Origin {
    pub fn from_u8(n: u8) -> Origin {
        match n {
            1 => Origin::Immediate,
            2 => Origin::GcPause,
            _ => Origin::Polling,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Origin::Polling => "polling",
            Origin::Immediate => "immediate",
            Origin::GcPause => "gc-pause",
        }
    }
}

/// Facts about a sample's quality that consumers may want to discount.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct SampleFlags(pub u8);

impl SampleFlags {
    pub const NONE: SampleFlags = SampleFlags(0);
    /// The stack was deeper than the sample could hold; outer frames are
    /// missing.
    pub const TRUNCATED: SampleFlags = SampleFlags(1);
    /// Taken on a thread other than the VM thread (process-directed
    /// signal): the stack snapshot may mix two adjacent stack shapes.
    pub const FOREIGN_THREAD: SampleFlags = SampleFlags(2);

    pub fn contains(self, other: SampleFlags) -> bool {
        self.0 & other.0 == other.0
    }

    pub fn with(self, other: SampleFlags) -> SampleFlags {
        SampleFlags(self.0 | other.0)
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Sample {
    pub time_ns: u64,
    pub state: VmState,
    pub origin: Origin,
    pub flags: SampleFlags,
    /// The full stack depth at the time (may exceed `frames.len()`).
    pub depth: u32,
    /// Innermost first.
    pub frames: Vec<RawFrame>,
}
