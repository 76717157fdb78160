//! Counter-based sampling of the call graph (Arnold & Grove, CGO 2005).
//!
//! Timer-based call-edge sampling sees only the calls that happen to
//! coincide with a tick, which biases it towards long-running callees. CBS
//! lets the tick only *open a window*; inside it, every `stride`-th method
//! entry is sampled, `samples` times. The first sample comes after a skip
//! drawn uniformly from `[1, stride]`, so that a program whose calls recur
//! with period `stride` is not always sampled at the same call.
//!
//! The tick (a signal handler) only raises [`flag::CBS_WINDOW`]; this state
//! machine lives on the VM thread and is driven from the prologue's slow
//! path, so it needs no atomics of its own.
//!
//! **Weighting.** A timer-driven tick opens windows in proportion to a
//! phase's *time*, so on its own CBS estimates edges weighted by time, not by
//! calls: where a tier makes one phase's calls much cheaper than another's,
//! that phase's edges come out below their share of the calls. Each window
//! therefore measures the call rate it ran at (entries it saw over its
//! duration on the profile clock), and every edge it sampled counts that
//! rate: summed over windows spread uniformly in time, rate × time is the
//! number of calls. Weights are calls per millisecond, so an edge's weight
//! is proportional to its estimated call count (the graph's shares are
//! what consumers use). The rate is measured with the window's own
//! overhead in it (entry hooks on every call), which evens rates out a
//! little: the correction is partial where a tier's calls are far cheaper
//! than the hook.

use super::flag::{self, YieldpointFlag};
use crate::callgraph::CallEdge;
use crate::clock;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct CbsConfig {
    /// Sample every `stride`-th entry inside a window (≥ 1).
    pub stride: u32,
    /// Samples per window (≥ 1).
    pub samples: u32,
    /// Seed of the skip generator (fixed seeds make runs reproducible).
    pub seed: u64,
}

impl Default for CbsConfig {
    fn default() -> Self {
        // Arnold & Grove's recommended setting for Jikes RVM.
        CbsConfig {
            stride: 3,
            samples: 16,
            seed: 0x9e37_79b9_7f4a_7c15,
        }
    }
}

pub struct Cbs {
    stride: u32,
    samples: u32,
    /// Entries still to skip before the next sample (0 = no window open).
    countdown: u32,
    /// Samples left in the open window.
    remaining: u32,
    rng: u64,
    windows: u64,
    sampled: u64,
    /// Entries seen since the open window opened (sampled or skipped).
    entries: u64,
    /// When the open window opened, on the profile clock.
    opened_ns: u64,
    /// The open window's sampled edges, until it closes and its rate is known.
    kept: Vec<CallEdge>,
    /// Whether the window that `kept` belongs to has closed (its weight is due).
    closed_weight: Option<u64>,
    /// The rate the last window that measured one ran at.
    last_rate: u64,
}

impl Cbs {
    pub fn new(config: CbsConfig) -> Cbs {
        Cbs {
            stride: config.stride.max(1),
            samples: config.samples.max(1),
            countdown: 0,
            remaining: 0,
            rng: config.seed | 1,
            windows: 0,
            sampled: 0,
            entries: 0,
            opened_ns: 0,
            kept: Vec::with_capacity(config.samples.max(1) as usize),
            closed_weight: None,
            last_rate: 1,
        }
    }

    /// Call from a method prologue whose flag load (`flag_value`) was
    /// non-zero. Returns whether to record this call's edge (caller,
    /// call-site index, callee).
    #[inline]
    pub fn on_method_entry(&mut self, flag_value: u8, flag: &YieldpointFlag) -> bool {
        if self.remaining == 0 {
            if flag_value & flag::CBS_WINDOW == 0 {
                return false;
            }
            self.open_window();
        }
        self.entries += 1;
        self.countdown -= 1;
        if self.countdown > 0 {
            return false;
        }
        self.sampled += 1;
        self.remaining -= 1;
        if self.remaining == 0 {
            // Ticks that arrived during the window coalesced with it; one
            // arriving after this clear opens the next window.
            flag.clear(flag::CBS_WINDOW);
            self.closed_weight = Some(self.rate_so_far());
        } else {
            self.countdown = self.stride;
        }
        true
    }

    fn open_window(&mut self) {
        self.windows += 1;
        self.remaining = self.samples;
        self.countdown = 1 + (self.next_random() % u64::from(self.stride)) as u32;
        self.entries = 0;
        self.opened_ns = clock::now_ns();
    }

    /// Calls per millisecond since the window opened (at least 1): the entries after the
    /// one that opened it over the time since. A window of one entry measures nothing and
    /// takes the previous window's rate.
    fn rate_so_far(&mut self) -> u64 {
        if self.entries > 1 {
            let elapsed = clock::now_ns().saturating_sub(self.opened_ns).max(1);
            let rate = u128::from(self.entries - 1) * 1_000_000 / u128::from(elapsed);
            self.last_rate = rate.clamp(1, u128::from(u64::MAX)) as u64;
        }
        self.last_rate
    }

    /// Keeps the edge of the entry [`Cbs::on_method_entry`] just chose, and hands every
    /// edge of the window to `add` with its weight once the window has closed. Call it
    /// after each `true` from `on_method_entry`, with `None` when the entry has no caller
    /// to name (the sample still counts toward closing the window).
    pub fn keep(&mut self, edge: Option<CallEdge>, add: impl FnMut(CallEdge, u64)) {
        if let Some(e) = edge {
            self.kept.push(e);
        }
        if let Some(weight) = self.closed_weight.take() {
            self.hand_over(weight, add);
        }
    }

    /// At the end of a run: the edges of a window still open, weighted with the rate it
    /// ran at so far.
    pub fn finish(&mut self, add: impl FnMut(CallEdge, u64)) {
        if !self.kept.is_empty() {
            let weight = self
                .closed_weight
                .take()
                .unwrap_or_else(|| self.rate_so_far());
            self.hand_over(weight, add);
        }
    }

    fn hand_over(&mut self, weight: u64, mut add: impl FnMut(CallEdge, u64)) {
        for e in self.kept.drain(..) {
            add(e, weight);
        }
    }

    /// xorshift64*: tiny, allocation-free, good enough for a skip.
    fn next_random(&mut self) -> u64 {
        let mut x = self.rng;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.rng = x;
        x.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 32
    }

    pub fn windows_opened(&self) -> u64 {
        self.windows
    }

    pub fn edges_sampled(&self) -> u64 {
        self.sampled
    }

    pub fn window_open(&self) -> bool {
        self.remaining > 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs `entries` method entries after one tick; returns the indices
    /// (1-based) of the sampled ones.
    fn window(cbs: &mut Cbs, flag: &YieldpointFlag, entries: u32) -> Vec<u32> {
        flag.raise(flag::CBS_WINDOW);
        let mut hits = vec![];
        for i in 1..=entries {
            let v = flag.load();
            if v != 0 && cbs.on_method_entry(v, flag) {
                hits.push(i);
            }
        }
        hits
    }

    #[test]
    fn samples_every_stride_th_entry_samples_times() {
        let flag = YieldpointFlag::new();
        let mut cbs = Cbs::new(CbsConfig {
            stride: 5,
            samples: 4,
            seed: 42,
        });
        let hits = window(&mut cbs, &flag, 100);
        assert_eq!(hits.len(), 4);
        assert!((1..=5).contains(&hits[0]), "initial skip in [1, stride]");
        for w in hits.windows(2) {
            assert_eq!(w[1] - w[0], 5);
        }
        assert_eq!(flag.load(), 0, "the window closes itself");
        assert!(!cbs.window_open());
        assert_eq!(cbs.windows_opened(), 1);
    }

    #[test]
    fn entries_outside_a_window_are_not_sampled() {
        let flag = YieldpointFlag::new();
        let mut cbs = Cbs::new(CbsConfig::default());
        // A flag raised for another reason (a polling sample) does not
        // open a window.
        flag.raise(flag::SAMPLE);
        assert!(!cbs.on_method_entry(flag.load(), &flag));
        assert_eq!(cbs.windows_opened(), 0);
    }

    #[test]
    fn stride_one_samples_consecutive_entries() {
        let flag = YieldpointFlag::new();
        let mut cbs = Cbs::new(CbsConfig {
            stride: 1,
            samples: 3,
            seed: 7,
        });
        assert_eq!(window(&mut cbs, &flag, 10), vec![1, 2, 3]);
    }

    #[test]
    fn ticks_during_a_window_coalesce() {
        let flag = YieldpointFlag::new();
        let mut cbs = Cbs::new(CbsConfig {
            stride: 2,
            samples: 2,
            seed: 1,
        });
        flag.raise(flag::CBS_WINDOW);
        let mut n = 0;
        for _ in 0..3 {
            flag.raise(flag::CBS_WINDOW); // tick mid-window
            if cbs.on_method_entry(flag.load(), &flag) {
                n += 1;
            }
        }
        for _ in 0..10 {
            let v = flag.load();
            if v != 0 && cbs.on_method_entry(v, &flag) {
                n += 1;
            }
        }
        assert_eq!(n, 2);
        assert_eq!(cbs.windows_opened(), 1);
    }

    fn some_edge() -> CallEdge {
        CallEdge {
            caller: crate::ids::MethodId(0),
            callsite: 1,
            callee: crate::ids::MethodId(2),
        }
    }

    /// Runs one window in which every entry takes about `entry_ns`; returns the weights
    /// its edges were handed.
    fn weighted_window(cbs: &mut Cbs, flag: &YieldpointFlag, entry_ns: u64) -> Vec<u64> {
        flag.raise(flag::CBS_WINDOW);
        let mut weights = vec![];
        while flag.load() != 0 {
            let start = clock::now_ns();
            while clock::now_ns() - start < entry_ns {}
            if cbs.on_method_entry(flag.load(), flag) {
                let edge = some_edge();
                cbs.keep(Some(edge), |_, w| weights.push(w));
            }
        }
        weights
    }

    #[test]
    fn a_windows_edges_arrive_when_it_closes_weighted_by_its_call_rate() {
        let flag = YieldpointFlag::new();
        let mut cbs = Cbs::new(CbsConfig {
            stride: 2,
            samples: 8,
            seed: 3,
        });
        // A window preempted on a busy machine measures a lower rate, never a higher one:
        // of a few windows each, the fastest is the one to judge.
        let mut fast = vec![0];
        let mut slow = vec![0];
        for _ in 0..5 {
            let f = weighted_window(&mut cbs, &flag, 2_000);
            let s = weighted_window(&mut cbs, &flag, 20_000);
            assert_eq!((f.len(), s.len()), (8, 8), "all at the close, none lost");
            assert!(f.iter().all(|&w| w == f[0]) && s.iter().all(|&w| w == s[0]));
            fast = fast.max(f);
            slow = slow.max(s);
        }
        // 2 us a call is 500 calls per ms, 20 us is 50, less what the loop itself adds per
        // call (a clock reading, more in a debug build or on a busy machine), which weighs
        // more on the fast window. The entry that opens a window starts its clock: the rate
        // counts the ones after.
        assert!((200..=500).contains(&fast[0]), "fast window: {}", fast[0]);
        assert!((30..=50).contains(&slow[0]), "slow window: {}", slow[0]);
        let ratio = fast[0] as f64 / slow[0] as f64;
        assert!((6.0..=11.0).contains(&ratio), "{} / {}", fast[0], slow[0]);
    }

    #[test]
    fn a_window_open_at_the_end_is_handed_over_by_finish() {
        let flag = YieldpointFlag::new();
        let mut cbs = Cbs::new(CbsConfig {
            stride: 1,
            samples: 10,
            seed: 3,
        });
        flag.raise(flag::CBS_WINDOW);
        for _ in 0..4 {
            assert!(cbs.on_method_entry(flag.load(), &flag));
            cbs.keep(None, |_, _| unreachable!("the window is still open"));
            let edge = some_edge();
            cbs.keep(Some(edge), |_, _| unreachable!("the window is still open"));
        }
        let mut handed = 0;
        cbs.finish(|_, w| {
            assert!(w >= 1);
            handed += 1;
        });
        assert_eq!(handed, 4);
        cbs.finish(|_, _| unreachable!("nothing is left"));
    }

    #[test]
    fn initial_skip_is_uniform_over_one_to_stride() {
        let stride = 8u32;
        let flag = YieldpointFlag::new();
        let mut cbs = Cbs::new(CbsConfig {
            stride,
            samples: 1,
            seed: 12345,
        });
        let windows = 16_000;
        let mut histogram = vec![0u32; stride as usize + 1];
        for _ in 0..windows {
            let hits = window(&mut cbs, &flag, stride);
            assert_eq!(hits.len(), 1);
            histogram[hits[0] as usize] += 1;
        }
        assert_eq!(histogram[0], 0);
        // Chi-square goodness of fit against uniform, 7 degrees of
        // freedom: the 0.999 quantile is 24.32.
        let expected = f64::from(windows) / f64::from(stride);
        let chi2: f64 = histogram[1..]
            .iter()
            .map(|&o| (f64::from(o) - expected).powi(2) / expected)
            .sum();
        assert!(
            chi2 < 24.32,
            "skips not uniform: {histogram:?}, chi2 = {chi2}"
        );
    }
}
