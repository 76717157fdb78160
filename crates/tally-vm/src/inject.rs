//! Delays of known size injected at a known place (`--inject-delay METHOD=DURATION`), the
//! ground truth to check samplers against (after Burchell & Marr): every entry of the method
//! runs a busy loop of a calibrated CPU cost before its first instruction.
//!
//! The place is a method hook (`method_hooks`), so every tier runs the delay at the same
//! point: the interpreter where it sets the frame up, compiled code at its entry, code that
//! inlined the method where the inlined frame is pushed. The loop is one chain of dependent
//! arithmetic, so its speed is the chain's latency, the same wherever it is called from; it
//! lives in the interpreter's code section, so a sampler that classifies by program counter
//! sees it as the method's interpretation, never as a primitive.

use crate::method_hooks::{HookedMethods, METHOD_HOOKS_ARMED};
use crate::runtime::HOOK_AT_ENTRY;
use crate::{Vm, VmError};

/// The injection of one run, and what it did.
#[derive(Debug, Clone, PartialEq)]
pub struct DelayInjection {
    /// `Holder>>selector`.
    pub method: String,
    /// The delay asked for at each entry.
    pub delay_ns: u64,
    /// Loop iterations per delay, from the calibration.
    pub iterations: u64,
    /// The calibrated cost of one iteration on this machine.
    pub ns_per_iteration: f64,
    /// Entries delayed. Each is not timed (a clock reading would add its own cost where the
    /// delay is): the CPU time injected is `delays × iterations × ns_per_iteration`.
    pub delays: u64,
}

impl DelayInjection {
    /// The CPU time the delays are calibrated to have taken.
    pub fn injected_ns(&self) -> f64 {
        self.delays as f64 * self.iterations as f64 * self.ns_per_iteration
    }
}

/// `iterations` steps of a non-linear recurrence (multiply, add, shift, xor), each depending
/// on the last: no compiler can fold it into fewer steps (a linear one was, to 0.12 ns a
/// step), so it runs at the latency of its chain. The result keeps the loop from being
/// dropped. Fences on both sides keep the processor from running the program's own
/// instructions in the shadow of the chain, which hid up to a fifth of a short delay: the
/// delay's cost is then its iterations' whatever surrounds it.
#[cfg_attr(target_os = "linux", link_section = "tally_interpreter")]
#[inline(never)]
fn busy(iterations: u64) -> u64 {
    serialize();
    let mut x = std::hint::black_box(0x9e37_79b9_7f4a_7c15_u64);
    for _ in 0..iterations {
        x = x
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407)
            ^ (x >> 29);
    }
    let x = std::hint::black_box(x);
    serialize();
    x
}

/// Waits for every earlier instruction to complete before any later one starts.
#[inline(always)]
fn serialize() {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: `lfence` only orders execution; it reads and writes no memory or register.
    unsafe {
        std::arch::asm!("lfence", options(nomem, nostack, preserves_flags));
    }
    #[cfg(target_arch = "aarch64")]
    // SAFETY: `isb` only flushes the pipeline; it reads and writes no memory or register.
    unsafe {
        std::arch::asm!("isb", options(nomem, nostack, preserves_flags));
    }
}

/// The thread CPU time `busy(iterations)` takes: the fastest of `tries` (noise only adds).
fn cpu_ns_of(iterations: u64, tries: u32) -> f64 {
    (0..tries)
        .map(|_| {
            let t = crate::clock::thread_cpu_time();
            busy(iterations);
            (crate::clock::thread_cpu_time() - t).as_nanos() as f64
        })
        .fold(f64::INFINITY, f64::min)
}

/// The CPU cost of one loop iteration on this machine.
fn calibrate() -> f64 {
    const ITERATIONS: u64 = 2_000_000;
    busy(ITERATIONS / 10);
    cpu_ns_of(ITERATIONS, 7) / ITERATIONS as f64
}

impl Vm {
    /// Delays every entry of `method` (`Holder>>selector`) by `delay_ns` of busy CPU work
    /// from now on. Asks for the method hooks, so not with GC hints or phases.
    pub fn inject_delay(&mut self, method: &str, delay_ns: u64) -> Result<(), VmError> {
        if !method.contains(">>") {
            return Err(VmError::Load(format!(
                "error: `{method}` is not a method name (write Holder>>selector)"
            )));
        }
        if self.injection.is_some() {
            return Err(VmError::Fatal("a delay was injected twice".into()));
        }
        let ns_per_iteration = calibrate();
        let iterations = (delay_ns as f64 / ns_per_iteration).round() as u64;
        self.hook_methods(HookedMethods::Named(
            std::iter::once((method.to_string(), HOOK_AT_ENTRY)).collect(),
        ))?;
        self.injection = Some(Box::new(DelayInjection {
            method: method.to_string(),
            delay_ns,
            iterations,
            ns_per_iteration,
            delays: 0,
        }));
        METHOD_HOOKS_ARMED.store(true, std::sync::atomic::Ordering::Relaxed);
        Ok(())
    }

    /// What the injection did, if the run has one.
    pub fn injection(&self) -> Option<&DelayInjection> {
        self.injection.as_deref()
    }

    /// An entry of the delayed method.
    pub(crate) fn run_injected_delay(&mut self) {
        if let Some(i) = self.injection.as_deref_mut() {
            busy(i.iterations);
            i.delays += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_loop_takes_about_its_calibrated_time() {
        let per = calibrate();
        assert!(per > 0.05 && per < 50.0, "{per} ns per iteration");
        let iterations = (2_000_000.0 / per) as u64;
        // Thread CPU time, so a busy machine's preemption does not count.
        let best = cpu_ns_of(iterations, 5);
        assert!((1_600_000.0..2_600_000.0).contains(&best), "{best} ns");
    }
}
