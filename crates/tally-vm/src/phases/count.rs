//! The second run of MonitorMethod: counters read at the entry and exit of the selected
//! methods only, at the start and end of every collection, and around every compilation.
//!
//! Between two readings the program was in the innermost open phase (or in the rest of the
//! program, when none is open): the counts go to that activation. A phase's interval is one
//! activation with the time of the phases nested in it taken out; a recursive phase's nested
//! activations belong to its outermost one. Frames left without their exit hook close at the
//! next hook that finds a frame at or below their depth, as in the recording.

use std::time::Instant;

use rustc_hash::FxHashMap;
use tally_vertical::counters::{threads_named, CountedEvent, CounterGroup, Thread};
use tally_vertical::phase_report::{Interval, PhaseData, PhaseKind};

use crate::bytecode::CodeId;

/// More than the counted events (seven at most).
const MAX_EVENTS: usize = 8;
/// What MMTk's worker threads are called (`tally_heap`'s binding names them).
const GC_THREAD_NAME: &str = "tally-gc";

#[derive(Clone, Copy, Default)]
struct Counts {
    wall_ns: u64,
    events: [u64; MAX_EVENTS],
    allocated: u64,
}

impl Counts {
    fn add(&mut self, d: &Counts) {
        self.wall_ns += d.wall_ns;
        for (a, b) in self.events.iter_mut().zip(d.events) {
            *a += b;
        }
        self.allocated += d.allocated;
    }

    fn interval(&self, events: usize, allocation: bool) -> Interval {
        Interval {
            wall_ns: self.wall_ns,
            counts: self.events[..events].to_vec(),
            allocated_bytes: allocation.then_some(self.allocated),
        }
    }
}

struct Open {
    phase: usize,
    depth: usize,
    counts: Counts,
}

/// A group and its last reading.
struct Reader {
    group: CounterGroup,
    last: [u64; MAX_EVENTS],
}

impl Reader {
    fn open(thread: Thread) -> std::io::Result<Reader> {
        let mut r = Reader {
            group: CounterGroup::open(thread)?,
            last: [0; MAX_EVENTS],
        };
        r.delta()?;
        Ok(r)
    }

    /// The counts since the last reading.
    fn delta(&mut self) -> std::io::Result<[u64; MAX_EVENTS]> {
        let mut now = [0; MAX_EVENTS];
        let n = self.group.events().len();
        self.group.read(&mut now[..n])?;
        let mut d = [0; MAX_EVENTS];
        for i in 0..n {
            d[i] = now[i].saturating_sub(self.last[i]);
        }
        self.last = now;
        Ok(d)
    }
}

/// Where the rest of the program and the collections are among the phases.
const REST: usize = 0;

pub(crate) struct Counting {
    vm_thread: Reader,
    events: Vec<CountedEvent>,
    start: Instant,
    last_wall: u64,
    last_allocated: u64,
    stack: Vec<Open>,
    /// The rest of the program since it was last left.
    rest: Counts,
    /// `REST`, the methods in the selection's order, then the collections.
    phases: Vec<PhaseData>,
    gc: usize,
    open_per_phase: Vec<u32>,
    by_name: FxHashMap<String, usize>,
    /// Per code: `UNKNOWN`, `NO_PHASE`, or its phase.
    by_code: Vec<u32>,
    gc_workers: Vec<Reader>,
    /// The VM thread's counts and the workers' when the running collection started.
    in_gc: Option<Counts>,
    pub(crate) readings: u64,
    /// The first failed reading, if any (the counts then stop growing).
    pub(crate) failure: Option<String>,
}

impl Counting {
    pub(crate) fn new(methods: &[String], allocated: u64) -> std::io::Result<Counting> {
        let vm_thread = Reader::open(Thread::Calling)?;
        let events = vm_thread.group.events().to_vec();
        let phase = |name: &str, kind| PhaseData {
            name: name.into(),
            kind,
            events: events.clone(),
            intervals: Vec::new(),
        };
        let mut phases = vec![phase("(rest of the program)", PhaseKind::Rest)];
        let mut by_name = FxHashMap::default();
        for m in methods {
            by_name.insert(m.clone(), phases.len());
            phases.push(phase(m, PhaseKind::Method));
        }
        let gc = phases.len();
        phases.push(phase("(garbage collection)", PhaseKind::Gc));
        let mut c = Counting {
            vm_thread,
            events,
            start: Instant::now(),
            last_wall: 0,
            last_allocated: allocated,
            stack: Vec::new(),
            rest: Counts::default(),
            open_per_phase: vec![0; phases.len()],
            phases,
            gc,
            by_name,
            by_code: Vec::new(),
            gc_workers: Vec::new(),
            in_gc: None,
            readings: 0,
            failure: None,
        };
        c.open_gc_workers();
        Ok(c)
    }

    pub(crate) fn events(&self) -> &[CountedEvent] {
        &self.events
    }

    /// The phase of `code`, named by `name` the first time it is asked about.
    pub(crate) fn phase_of(
        &mut self,
        code: CodeId,
        name: impl FnOnce() -> String,
    ) -> Option<usize> {
        const UNKNOWN: u32 = u32::MAX;
        const NO_PHASE: u32 = u32::MAX - 1;
        let i = code as usize;
        if i >= self.by_code.len() {
            self.by_code.resize(i + 1, UNKNOWN);
        }
        if self.by_code[i] == UNKNOWN {
            self.by_code[i] = self.by_name.get(&name()).map_or(NO_PHASE, |&p| p as u32);
        }
        (self.by_code[i] != NO_PHASE).then_some(self.by_code[i] as usize)
    }

    fn read(&mut self, allocated: Option<u64>) -> Counts {
        self.readings += 1;
        let events = match self.vm_thread.delta() {
            Ok(d) => d,
            Err(e) => {
                self.failure.get_or_insert_with(|| e.to_string());
                [0; MAX_EVENTS]
            }
        };
        let wall = self.start.elapsed().as_nanos() as u64;
        let mut d = Counts {
            wall_ns: wall.saturating_sub(self.last_wall),
            events,
            allocated: 0,
        };
        self.last_wall = wall;
        if let Some(a) = allocated {
            d.allocated = a.saturating_sub(self.last_allocated);
            self.last_allocated = a;
        }
        d
    }

    /// Counts since the last reading go to the innermost open phase.
    fn charge(&mut self, d: &Counts) {
        match self.stack.last_mut() {
            Some(o) => o.counts.add(d),
            None => self.rest.add(d),
        }
    }

    pub(crate) fn entered(&mut self, phase: usize, depth: usize, allocated: u64) {
        let d = self.read(Some(allocated));
        self.charge(&d);
        self.close_down_to(depth, true);
        if self.stack.is_empty() {
            self.close_rest();
        }
        self.open_per_phase[phase] += 1;
        self.stack.push(Open {
            phase,
            depth,
            counts: Counts::default(),
        });
    }

    pub(crate) fn exited(&mut self, phase: usize, depth: usize, allocated: u64) {
        let d = self.read(Some(allocated));
        self.charge(&d);
        self.close_down_to(depth, false);
        if self
            .stack
            .last()
            .is_some_and(|o| o.depth == depth && o.phase == phase)
        {
            let o = self.stack.pop().expect("just looked");
            self.close(o);
        }
    }

    /// The frames above `depth` are gone.
    pub(crate) fn unwound(&mut self, depth: usize, allocated: u64) {
        let d = self.read(Some(allocated));
        self.charge(&d);
        self.close_down_to(depth, false);
    }

    fn close_down_to(&mut self, depth: usize, inclusive: bool) {
        while let Some(o) = self.stack.last() {
            if o.depth > depth || (inclusive && o.depth == depth) {
                let o = self.stack.pop().expect("just looked");
                self.close(o);
            } else {
                break;
            }
        }
    }

    fn close(&mut self, o: Open) {
        self.open_per_phase[o.phase] -= 1;
        if self.open_per_phase[o.phase] > 0 {
            // A nested activation of a phase open further down: part of the outermost.
            if let Some(outer) = self.stack.iter_mut().rev().find(|x| x.phase == o.phase) {
                outer.counts.add(&o.counts);
                return;
            }
        }
        let n = self.events.len();
        self.phases[o.phase]
            .intervals
            .push(o.counts.interval(n, true));
    }

    fn close_rest(&mut self) {
        if self.rest.wall_ns > 0 {
            let n = self.events.len();
            self.phases[REST]
                .intervals
                .push(self.rest.interval(n, true));
        }
        self.rest = Counts::default();
    }

    /// MMTk starts its workers with the first collection's request or before: look for them
    /// until they are there.
    fn open_gc_workers(&mut self) {
        if !self.gc_workers.is_empty() {
            return;
        }
        for tid in threads_named(GC_THREAD_NAME) {
            match Reader::open(Thread::Id(tid)) {
                Ok(r) => self.gc_workers.push(r),
                Err(e) => {
                    self.failure
                        .get_or_insert_with(|| format!("cannot count GC thread {tid}: {e}"));
                }
            }
        }
    }

    /// A collection starts: what ran until now was the mutator's.
    pub(crate) fn gc_started(&mut self) {
        let d = self.read(None);
        self.charge(&d);
        self.open_gc_workers();
        for w in &mut self.gc_workers {
            // Their counts since the last collection are idle time: dropped.
            let _ = w.delta();
        }
        self.in_gc = Some(Counts::default());
    }

    /// The collection is over: the VM thread's counts in the pause and the workers' make its
    /// interval.
    pub(crate) fn gc_ended(&mut self) {
        let Some(mut counts) = self.in_gc.take() else {
            return;
        };
        let d = self.read(None);
        counts.add(&d);
        for w in &mut self.gc_workers {
            if let Ok(e) = w.delta() {
                counts.add(&Counts {
                    wall_ns: 0,
                    events: e,
                    allocated: 0,
                });
            }
        }
        let n = self.events.len();
        self.phases[self.gc]
            .intervals
            .push(counts.interval(n, false));
    }

    /// The end of the run: everything open closed; the phases' intervals, and the run's
    /// time.
    pub(crate) fn finish(&mut self, allocated: u64) -> (Vec<PhaseData>, u64) {
        let d = self.read(Some(allocated));
        self.charge(&d);
        self.close_down_to(0, false);
        self.close_rest();
        let run_ns = self.start.elapsed().as_nanos() as u64;
        (std::mem::take(&mut self.phases), run_ns)
    }
}

/// The compilation phase: each compilation an interval, counted on the thread that compiles
/// (the compiler thread, or the VM thread in the fixed tiers).
#[derive(Default)]
pub(crate) struct CompileCounting {
    /// One group per compiling thread, by kernel thread id.
    readers: Vec<(i32, Reader)>,
    started: Option<(Instant, usize)>,
    pub(crate) intervals: Vec<Interval>,
    pub(crate) events: Vec<CountedEvent>,
    pub(crate) failure: Option<String>,
}

impl CompileCounting {
    pub(crate) fn begin(&mut self) {
        // SAFETY: gettid has no preconditions and cannot fail.
        let tid = unsafe { libc::syscall(libc::SYS_gettid) } as i32;
        let i = match self.readers.iter().position(|(t, _)| *t == tid) {
            Some(i) => i,
            None => match Reader::open(Thread::Calling) {
                Ok(r) => {
                    if self.events.is_empty() {
                        self.events = r.group.events().to_vec();
                    }
                    self.readers.push((tid, r));
                    self.readers.len() - 1
                }
                Err(e) => {
                    self.failure.get_or_insert_with(|| e.to_string());
                    return;
                }
            },
        };
        let _ = self.readers[i].1.delta();
        self.started = Some((Instant::now(), i));
    }

    pub(crate) fn end(&mut self) {
        let Some((start, i)) = self.started.take() else {
            return;
        };
        let wall_ns = start.elapsed().as_nanos() as u64;
        if let Ok(events) = self.readers[i].1.delta() {
            let n = self.events.len();
            self.intervals.push(
                Counts {
                    wall_ns,
                    events,
                    allocated: 0,
                }
                .interval(n, false),
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn counting(methods: &[&str]) -> Option<Counting> {
        let names: Vec<String> = methods.iter().map(|s| s.to_string()).collect();
        // Where perf_event_open is forbidden there is nothing to test.
        Counting::new(&names, 0).ok()
    }

    /// Runs `ns` of this thread's CPU time (and so at least as much wall time): what the
    /// counters see does not shrink when the test suite leaves the thread waiting for a CPU.
    fn spin(ns: u64) {
        let t = crate::clock::thread_cpu_time();
        while ((crate::clock::thread_cpu_time() - t).as_nanos() as u64) < ns {
            std::hint::spin_loop();
        }
    }

    #[test]
    fn nested_phases_take_their_time_out_of_the_outer_one() {
        let Some(mut c) = counting(&["A>>outer", "A>>inner"]) else {
            return;
        };
        // The spans are timed here too, so that time the thread waited for a CPU (the test
        // suite shares the machine) is in both what is checked and what it is checked
        // against.
        spin(300_000); // rest
        let outer_in = Instant::now();
        c.entered(1, 1, 0);
        spin(1_000_000);
        let inner_in = Instant::now();
        c.entered(2, 2, 100);
        spin(2_000_000);
        let inner_out = Instant::now();
        c.exited(2, 2, 1_100);
        spin(1_000_000);
        let outer_out = Instant::now();
        c.exited(1, 1, 1_200);
        let (phases, run_ns) = c.finish(1_200);
        let wall = |p: usize| phases[p].intervals.iter().map(|i| i.wall_ns).sum::<u64>();
        let ns = |d: std::time::Duration| d.as_nanos() as u64;
        assert_eq!(phases[1].intervals.len(), 1);
        assert_eq!(phases[2].intervals.len(), 1);
        // The outer phase is its own time (about 2 ms), not the inner one's too (4 ms).
        let outer_own = ns(inner_in - outer_in) + ns(outer_out - inner_out);
        let inner = ns(inner_out - inner_in);
        let near = |measured: u64, timed: u64| measured.abs_diff(timed) < 500_000;
        assert!(near(wall(1), outer_own), "{} against {outer_own}", wall(1));
        assert!(near(wall(2), inner), "{} against {inner}", wall(2));
        assert!(wall(1) < outer_own + inner / 2, "{}", wall(1));
        assert!(wall(0) >= 300_000);
        assert!(wall(0) + wall(1) + wall(2) <= run_ns);
        // Allocation: 1,000 bytes inside `inner`, 100 + 100 in `outer`.
        assert_eq!(phases[2].intervals[0].allocated_bytes, Some(1_000));
        assert_eq!(phases[1].intervals[0].allocated_bytes, Some(200));
        // CPU time was counted: the threads spun.
        assert!(phases[2].intervals[0].counts[0] > 1_000_000);
    }

    #[test]
    fn recursion_is_one_interval_and_unwound_frames_close() {
        let Some(mut c) = counting(&["A>>rec"]) else {
            return;
        };
        c.entered(1, 1, 0);
        c.entered(1, 2, 0);
        c.entered(1, 3, 0);
        // A non-local return from depth 3 lands at depth 1.
        c.unwound(1, 0);
        c.exited(1, 1, 0);
        c.entered(1, 1, 0);
        c.exited(1, 1, 0);
        let (phases, _) = c.finish(0);
        assert_eq!(phases[1].intervals.len(), 2);
        assert_eq!(c.readings, 8);
    }

    #[test]
    fn a_collection_is_an_interval_of_its_own() {
        let Some(mut c) = counting(&["A>>run"]) else {
            return;
        };
        // The method's two spans, bracketed by this clock however long the thread waits.
        let in_before = Instant::now();
        c.entered(1, 1, 0);
        spin(500_000);
        c.gc_started();
        let gc_in = Instant::now();
        spin(1_000_000);
        let gc_out = Instant::now();
        c.gc_ended();
        c.exited(1, 1, 0);
        let out = Instant::now();
        let method_most = (gc_in - in_before + (out - gc_out)).as_nanos() as u64;
        let (phases, _) = c.finish(0);
        let gc = &phases[c.gc];
        assert_eq!(gc.kind, PhaseKind::Gc);
        assert_eq!(gc.intervals.len(), 1);
        assert!(gc.intervals[0].wall_ns >= 1_000_000);
        assert_eq!(gc.intervals[0].allocated_bytes, None);
        // The pause is not the method's.
        let method = phases[1].intervals[0].wall_ns;
        assert!(method <= method_most, "{method} > {method_most}");
    }

    #[test]
    fn compilations_are_counted_on_the_thread_that_compiles() {
        let mut c = CompileCounting::default();
        c.begin();
        if c.failure.is_some() {
            return;
        }
        spin(200_000);
        c.end();
        let worker = std::thread::spawn(move || {
            c.begin();
            spin(200_000);
            c.end();
            c
        });
        let c = worker.join().unwrap();
        assert_eq!(c.readers.len(), 2);
        assert_eq!(c.intervals.len(), 2);
        assert!(c.intervals.iter().all(|i| i.counts[0] > 100_000));
    }
}
