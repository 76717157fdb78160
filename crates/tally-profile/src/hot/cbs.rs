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

use super::flag::{self, YieldpointFlag};

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
        } else {
            self.countdown = self.stride;
        }
        true
    }

    fn open_window(&mut self) {
        self.windows += 1;
        self.remaining = self.samples;
        self.countdown = 1 + (self.next_random() % u64::from(self.stride)) as u32;
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
