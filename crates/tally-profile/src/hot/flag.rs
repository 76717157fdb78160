//! The overloaded yieldpoint flag (Arnold & Grove, CGO 2005).
//!
//! The interpreter already has to check *something* at its yieldpoints; by
//! making that something one byte whose bits say what is wanted, profiling
//! adds no instruction to the path where nothing is wanted: the prologue and
//! epilogue test `flag != 0`, the loop back-edge tests
//! `flag & ALL_YIELDPOINTS != 0`, and everything else happens out of line.
//!
//! Bits are set by signal handlers (timer tick, SIGINT) and cleared by the
//! VM thread when it has served the request.

use std::sync::atomic::{AtomicU8, Ordering};

/// A method sample is pending (polling mechanism): served at the next
/// yieldpoint of any kind.
pub const SAMPLE: u8 = 1 << 0;
/// A counter-based-sampling window is open: only prologues (and epilogues)
/// need to look, since CBS samples call edges.
pub const CBS_WINDOW: u8 = 1 << 1;
/// The sample ring is filling up: drain it at the next yieldpoint.
pub const DRAIN: u8 = 1 << 2;
/// SIGINT arrived: flush the profile and stop at the next yieldpoint.
pub const STOP: u8 = 1 << 3;

/// Exhaustive counting is on: every prologue goes out of line for the
/// exact call counts. Raised once for the whole run.
pub const EXACT: u8 = 1 << 4;

/// The bits that loop back-edges must act on. `CBS_WINDOW` is absent on
/// purpose: that is the "prologue/epilogue-only" level of the flag.
pub const ALL_YIELDPOINTS: u8 = SAMPLE | DRAIN | STOP;

/// What a yieldpoint of a given kind must do, given one load of the flag.
/// Three levels: 0 (nothing), prologue/epilogue-only, all yieldpoints.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Level {
    Nothing,
    CallsOnly,
    All,
}

pub struct YieldpointFlag(AtomicU8);

impl Default for YieldpointFlag {
    fn default() -> Self {
        YieldpointFlag::new()
    }
}

impl YieldpointFlag {
    pub const fn new() -> YieldpointFlag {
        YieldpointFlag(AtomicU8::new(0))
    }

    /// The fast-path read. Relaxed: a request seen one yieldpoint late is
    /// harmless, and a relaxed byte load is as cheap as a plain one.
    #[inline(always)]
    pub fn load(&self) -> u8 {
        self.0.load(Ordering::Relaxed)
    }

    #[inline(always)]
    pub fn level(&self) -> Level {
        level_of(self.load())
    }

    /// Sets `bits`, returning the previous value (so a handler can tell a
    /// fresh request from one that coalesced with a pending request).
    /// Async-signal-safe.
    #[inline]
    pub fn raise(&self, bits: u8) -> u8 {
        self.0.fetch_or(bits, Ordering::AcqRel)
    }

    /// Clears `bits`, returning the previous value.
    #[inline]
    pub fn clear(&self, bits: u8) -> u8 {
        self.0.fetch_and(!bits, Ordering::AcqRel)
    }
}

/// Classifies an already-loaded flag value.
#[inline(always)]
pub fn level_of(value: u8) -> Level {
    if value == 0 {
        Level::Nothing
    } else if value & ALL_YIELDPOINTS == 0 {
        Level::CallsOnly
    } else {
        Level::All
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn levels_follow_the_bits() {
        let f = YieldpointFlag::new();
        assert_eq!(f.level(), Level::Nothing);
        f.raise(CBS_WINDOW);
        assert_eq!(f.level(), Level::CallsOnly);
        assert_eq!(f.load() & ALL_YIELDPOINTS, 0, "back-edges stay quiet");
        let before = f.raise(SAMPLE);
        assert_eq!(before, CBS_WINDOW);
        assert_eq!(f.level(), Level::All);
        f.clear(SAMPLE | CBS_WINDOW);
        assert_eq!(f.level(), Level::Nothing);
    }

    #[test]
    fn a_second_raise_reports_coalescing() {
        let f = YieldpointFlag::new();
        assert_eq!(f.raise(SAMPLE) & SAMPLE, 0);
        assert_eq!(f.raise(SAMPLE) & SAMPLE, SAMPLE);
    }
}
