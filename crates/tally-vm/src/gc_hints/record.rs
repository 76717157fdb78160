//! The run that records GC hints: where to measure the live data.
//!
//! Every method entry and exit is reached here (the hint bit stays raised for the whole run).
//! A measurement is a full collection, so they must be few: the allocation clock is cut into
//! windows of [`WINDOW_BYTES`], and a point is measured
//! - at its first reach in a window when it is *coarse*: reached at most [`COARSE_REACHES`]
//!   times in this window and in the one before. Phase boundaries (a benchmark's iteration, a
//!   pass of a compiler) are such points, and they are the candidates;
//! - or when a window has passed since the last measurement of any point: these sample the
//!   live-data curve between the boundaries, without which no boundary could be told to be a
//!   minimum.
//!
//! After [`MAX_MEASUREMENTS`] the run goes on unmeasured.

use tally_profile::gc_hints::{LiveMeasurement, PointKind};

use crate::bytecode::CodeId;

/// The allocation between two samples of the live-data curve, and a point's window.
pub(crate) const WINDOW_BYTES: u64 = 256 << 10;
/// The most reaches per window for a point to be measured at its first reach.
pub(crate) const COARSE_REACHES: u32 = 4;
/// The measurements a run makes at most.
pub(crate) const MAX_MEASUREMENTS: usize = 20_000;

#[derive(Clone, Copy)]
struct PointState {
    /// The window this state counts in (`u64::MAX`: never reached).
    window: u64,
    reached: u32,
    reached_in_previous_window: u32,
    measured: bool,
}

impl Default for PointState {
    fn default() -> Self {
        PointState {
            window: u64::MAX,
            reached: 0,
            reached_in_previous_window: 0,
            measured: false,
        }
    }
}

/// One measurement before method names are known.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Probe {
    pub code: CodeId,
    pub kind: PointKind,
    pub allocated_bytes: u64,
    pub live_bytes: u64,
}

#[derive(Default)]
pub(crate) struct Recording {
    /// Indexed by `2 * code + kind`.
    points: Vec<PointState>,
    /// The allocation clock at which the curve is next sampled.
    next_sample: u64,
    pub probes: Vec<Probe>,
    /// Reaches of method entries and exits, measured or not.
    pub reaches: u64,
}

impl Recording {
    /// Whether to measure at this reach of a point, with `allocated` bytes allocated so far.
    pub fn wants_measurement(&mut self, code: CodeId, kind: PointKind, allocated: u64) -> bool {
        self.reaches += 1;
        if self.probes.len() >= MAX_MEASUREMENTS {
            return false;
        }
        let index = 2 * code as usize + usize::from(kind == PointKind::Exit);
        if index >= self.points.len() {
            self.points.resize(index + 1, PointState::default());
        }
        let window = allocated / WINDOW_BYTES;
        let p = &mut self.points[index];
        if p.window != window {
            p.reached_in_previous_window = if p.window.wrapping_add(1) == window {
                p.reached
            } else {
                0
            };
            p.window = window;
            p.reached = 0;
            p.measured = false;
        }
        p.reached = p.reached.saturating_add(1);
        let coarse = p.reached <= COARSE_REACHES && p.reached_in_previous_window <= COARSE_REACHES;
        let curve_due = allocated >= self.next_sample;
        // Only the curve's own samples move its clock: boundaries measured on their own
        // account must not starve it.
        if curve_due {
            self.next_sample = allocated + WINDOW_BYTES;
        }
        if curve_due || (coarse && !p.measured) {
            p.measured = true;
            return true;
        }
        false
    }

    /// Whether the budget ran out (the run's later part went unmeasured).
    pub fn exhausted(&self) -> bool {
        self.probes.len() >= MAX_MEASUREMENTS
    }

    /// The measurements with their methods named by `name`.
    pub fn measurements(&self, name: impl Fn(CodeId) -> String) -> Vec<LiveMeasurement> {
        self.probes
            .iter()
            .map(|p| LiveMeasurement {
                method: name(p.code),
                kind: p.kind,
                allocated_bytes: p.allocated_bytes,
                live_bytes: p.live_bytes,
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_coarse_point_is_measured_once_per_window_and_a_frequent_one_only_for_the_curve() {
        let mut r = Recording::default();
        let mut measured_coarse = 0;
        let mut measured_frequent = 0;
        // Ten windows; a frequent point reached 100 times per window, a coarse one twice.
        for w in 0..10u64 {
            for i in 0..100u64 {
                let at = w * WINDOW_BYTES + i * (WINDOW_BYTES / 100);
                if r.wants_measurement(1, PointKind::Entry, at) {
                    measured_frequent += 1;
                }
                if i % 50 == 0 && r.wants_measurement(2, PointKind::Exit, at + 1) {
                    measured_coarse += 1;
                }
            }
        }
        assert_eq!(measured_coarse, 10);
        // The frequent point is measured when the curve is due, about once per window; its
        // first-window reaches do not count as coarse beyond the first few.
        assert!((9..=11).contains(&measured_frequent), "{measured_frequent}");
        assert_eq!(r.reaches, 1000 + 20);
    }

    #[test]
    fn the_budget_bounds_the_measurements() {
        let mut r = Recording::default();
        for i in 0..(MAX_MEASUREMENTS as u64 + 10) {
            if r.wants_measurement(i as CodeId, PointKind::Entry, i) {
                r.probes.push(Probe {
                    code: i as CodeId,
                    kind: PointKind::Entry,
                    allocated_bytes: i,
                    live_bytes: 0,
                });
            }
        }
        assert_eq!(r.probes.len(), MAX_MEASUREMENTS);
        assert!(r.exhausted());
        assert!(!r.wants_measurement(0, PointKind::Entry, 1 << 40));
    }
}
