//! The first run of MonitorMethod: every method's calls and inclusive time, read from a clock
//! at each hooked entry and exit.
//!
//! A shadow stack holds the open activations with their frame depths. A frame left without
//! its exit hook (a non-local return, an error) is closed at the next hook that finds a frame
//! at or below its depth. A recursive method's time counts once, in its outermost
//! activation. The hooks' own cost, calibrated on the VM's hook path before the program
//! runs (`Vm::record_method_times`), is taken out of the activations they fall in and of the
//! run.

use std::time::Instant;

use tally_vertical::phases::MethodTime;

use crate::bytecode::CodeId;

struct Open {
    depth: usize,
    code: CodeId,
    start_ns: u64,
    /// Probes taken before this activation's entry probe.
    probes_at_start: u64,
    outermost: bool,
}

#[derive(Clone, Copy, Default)]
struct Times {
    calls: u64,
    inclusive_ns: u64,
    /// Activations open now (recursion).
    open: u32,
}

pub(crate) struct Recording {
    start: Instant,
    stack: Vec<Open>,
    per_code: Vec<Times>,
    probes: u64,
    /// What one probe costs, taken out of the times.
    pub(crate) probe_ns: f64,
}

impl Recording {
    pub(crate) fn new(probe_ns: f64) -> Recording {
        Recording {
            start: Instant::now(),
            stack: Vec::new(),
            per_code: Vec::new(),
            probes: 0,
            probe_ns,
        }
    }

    fn now(&self) -> u64 {
        self.start.elapsed().as_nanos() as u64
    }

    pub(crate) fn entered(&mut self, code: CodeId, depth: usize) {
        let now = self.now();
        self.close_down_to(depth, now, true);
        let i = code as usize;
        if i >= self.per_code.len() {
            self.per_code.resize(i + 1, Times::default());
        }
        let t = &mut self.per_code[i];
        t.calls += 1;
        t.open += 1;
        // Its own entry probe counts as inside: the part of the entry hook after its clock
        // reading and the part of the exit hook before it make about one probe.
        self.stack.push(Open {
            depth,
            code,
            start_ns: now,
            probes_at_start: self.probes,
            outermost: t.open == 1,
        });
        self.probes += 1;
    }

    pub(crate) fn exited(&mut self, code: CodeId, depth: usize) {
        let now = self.now();
        self.close_down_to(depth, now, false);
        if self
            .stack
            .last()
            .is_some_and(|o| o.depth == depth && o.code == code)
        {
            let open = self.stack.pop().expect("just looked");
            self.close(open, now);
        }
        self.probes += 1;
    }

    /// The frames above `depth` are gone.
    pub(crate) fn unwound(&mut self, depth: usize) {
        let now = self.now();
        self.close_down_to(depth, now, false);
        self.probes += 1;
    }

    /// Closes the activations above `depth` (and at it, when `inclusive`).
    fn close_down_to(&mut self, depth: usize, now: u64, inclusive: bool) {
        while let Some(o) = self.stack.last() {
            if o.depth > depth || (inclusive && o.depth == depth) {
                let o = self.stack.pop().expect("just looked");
                self.close(o, now);
            } else {
                break;
            }
        }
    }

    fn close(&mut self, o: Open, now: u64) {
        let t = &mut self.per_code[o.code as usize];
        t.open -= 1;
        if o.outermost {
            let probes = self.probes - o.probes_at_start;
            let cost = (probes as f64 * self.probe_ns) as u64;
            t.inclusive_ns += now.saturating_sub(o.start_ns).saturating_sub(cost);
        }
    }

    /// The end of the run: the per-code times (codes never called left out), and the run's
    /// time less the hooks'.
    pub(crate) fn finish(&mut self, name: impl Fn(CodeId) -> String) -> (Vec<MethodTime>, u64) {
        let now = self.now();
        self.close_down_to(0, now, false);
        let run_ns = now.saturating_sub((self.probes as f64 * self.probe_ns) as u64);
        let methods = self
            .per_code
            .iter()
            .enumerate()
            .filter(|(_, t)| t.calls > 0)
            .map(|(code, t)| MethodTime {
                name: name(code as CodeId),
                calls: t.calls,
                inclusive_ns: t.inclusive_ns,
            })
            .collect();
        (methods, run_ns)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn recording() -> Recording {
        Recording::new(0.0)
    }

    fn spin(ns: u64) {
        let t = Instant::now();
        while (t.elapsed().as_nanos() as u64) < ns {
            std::hint::spin_loop();
        }
    }

    fn by_code(methods: &[MethodTime], name: &str) -> MethodTime {
        methods.iter().find(|m| m.name == name).unwrap().clone()
    }

    #[test]
    fn inclusive_time_holds_the_callees_and_recursion_counts_once() {
        // The hooks are bracketed by this clock, so that however long the thread waits for
        // a CPU, rec's time lies between the two brackets.
        let mut r = recording();
        r.entered(1, 1); // outer
        let before_in = Instant::now();
        r.entered(2, 2); // rec
        let after_in = Instant::now();
        spin(1_000_000);
        let nested_in = Instant::now();
        r.entered(2, 3); // rec again, nested
        spin(1_000_000);
        r.exited(2, 3);
        let nested = nested_in.elapsed().as_nanos() as u64;
        let before_out = Instant::now();
        r.exited(2, 2);
        let after_out = Instant::now();
        r.exited(1, 1);
        let (m, run_ns) = r.finish(|c| format!("m{c}"));
        let outer = by_code(&m, "m1");
        let rec = by_code(&m, "m2");
        assert_eq!((outer.calls, rec.calls), (1, 2));
        // rec's time counted once: the nested activation (1 ms or more) is inside the outer
        // one, not added to it.
        let least = (before_out - after_in).as_nanos() as u64;
        let most = (after_out - before_in).as_nanos() as u64;
        assert!(least >= 2_000_000 && nested >= 1_000_000);
        assert!(
            rec.inclusive_ns >= least && rec.inclusive_ns <= most,
            "{rec:?}: not within [{least}, {most}] (the nested activation took {nested})"
        );
        assert!(outer.inclusive_ns >= rec.inclusive_ns);
        assert!(run_ns >= outer.inclusive_ns);
    }

    #[test]
    fn frames_left_without_an_exit_hook_close_at_the_next_hook() {
        let mut r = recording();
        r.entered(1, 1);
        r.entered(2, 2);
        let before_in = Instant::now();
        r.entered(3, 3);
        spin(500_000);
        // A non-local return from 3 lands in 1: 2 and 3 are gone, closed at the unwind, not
        // at 1's exit 2 ms later.
        r.unwound(1);
        let after_unwind = Instant::now();
        spin(2_000_000);
        r.exited(1, 1);
        // A frame at depth 2 left by an error; the next entry at depth 2 closes it.
        r.entered(4, 2);
        r.entered(5, 2);
        r.exited(5, 2);
        let (m, _) = r.finish(|c| format!("m{c}"));
        let three = by_code(&m, "m3");
        let most = (after_unwind - before_in).as_nanos() as u64;
        assert!(three.inclusive_ns <= most, "{three:?}, more than {most}");
        assert!(by_code(&m, "m1").inclusive_ns >= 2_500_000);
        assert_eq!(by_code(&m, "m4").calls, 1);
        assert_eq!(by_code(&m, "m5").calls, 1);
        assert!(r.stack.is_empty());
    }

    #[test]
    fn the_probe_cost_is_taken_out() {
        let mut r = Recording::new(1_000.0);
        r.entered(1, 1);
        for _ in 0..1000 {
            r.entered(2, 2);
            r.exited(2, 2);
        }
        r.exited(1, 1);
        let (m, run_ns) = r.finish(|c| format!("m{c}"));
        // 2,001 probes inside at a pretended 1 µs each: 2 ms taken out of far less leaves 0;
        // the run likewise.
        assert_eq!(by_code(&m, "m1").inclusive_ns, 0);
        assert_eq!(run_ns, 0);
        assert_eq!(r.probes, 2002);
    }
}
