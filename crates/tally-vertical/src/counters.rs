//! Counting perf_events for one thread, read all at once (MonitorMethod's counters).
//!
//! The group always has the software events the kernel counts for any thread (CPU time, page
//! faults, context switches); it adds the hardware ones (cycles, instructions, cache and
//! branch misses) where a PMU accepts them, and says which it has. One `read` of the group
//! is one system call, whatever the number of events.

use std::fs::File;
use std::io::{self, Read};
use std::os::fd::{AsRawFd, FromRawFd};

use perf_event::events::{Hardware, Software};
use perf_event::{Builder, Counter, Group};

/// The most events a group holds, its leader included.
const MAX_MEMBERS: usize = 1 + CountedEvent::SOFTWARE.len() + CountedEvent::HARDWARE.len();
/// A group read: the number of values, the times enabled and running, then a value and an
/// id per member (`PERF_FORMAT_GROUP | TOTAL_TIME_ENABLED | TOTAL_TIME_RUNNING | ID`, as
/// `Group::builder` sets it).
const READ_WORDS: usize = 3 + 2 * MAX_MEMBERS;

/// An event a [`CounterGroup`] may count.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CountedEvent {
    /// The thread's CPU time, in nanoseconds.
    TaskClock,
    PageFaults,
    ContextSwitches,
    Cycles,
    Instructions,
    CacheMisses,
    BranchMisses,
}

impl CountedEvent {
    pub const SOFTWARE: [CountedEvent; 3] = [
        CountedEvent::TaskClock,
        CountedEvent::PageFaults,
        CountedEvent::ContextSwitches,
    ];
    pub const HARDWARE: [CountedEvent; 4] = [
        CountedEvent::Cycles,
        CountedEvent::Instructions,
        CountedEvent::CacheMisses,
        CountedEvent::BranchMisses,
    ];

    /// The name `perf` gives it.
    pub fn name(self) -> &'static str {
        match self {
            CountedEvent::TaskClock => "task-clock",
            CountedEvent::PageFaults => "page-faults",
            CountedEvent::ContextSwitches => "context-switches",
            CountedEvent::Cycles => "cycles",
            CountedEvent::Instructions => "instructions",
            CountedEvent::CacheMisses => "cache-misses",
            CountedEvent::BranchMisses => "branch-misses",
        }
    }

    fn builder(self) -> Builder<'static> {
        match self {
            CountedEvent::TaskClock => Builder::new(Software::TASK_CLOCK),
            CountedEvent::PageFaults => Builder::new(Software::PAGE_FAULTS),
            CountedEvent::ContextSwitches => Builder::new(Software::CONTEXT_SWITCHES),
            CountedEvent::Cycles => Builder::new(Hardware::CPU_CYCLES),
            CountedEvent::Instructions => Builder::new(Hardware::INSTRUCTIONS),
            CountedEvent::CacheMisses => Builder::new(Hardware::CACHE_MISSES),
            CountedEvent::BranchMisses => Builder::new(Hardware::BRANCH_MISSES),
        }
    }
}

/// Which thread a group counts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Thread {
    /// The thread that opens the group.
    Calling,
    /// Another thread of this process, by its kernel thread id.
    Id(i32),
}

/// A group of counters of one thread, enabled from its opening on.
pub struct CounterGroup {
    _group: Group,
    /// Kept open (dropping one closes its counter); read through the group, in this order.
    _members: Vec<Counter>,
    events: Vec<CountedEvent>,
    /// The group leader's descriptor, duplicated: read directly into a buffer on the stack,
    /// since a reading sits on the program's path at every phase boundary.
    leader: File,
}

impl CounterGroup {
    /// Opens the software events on `thread`, and each hardware event the kernel accepts
    /// (none where there is no PMU, as in most virtual machines).
    pub fn open(thread: Thread) -> io::Result<CounterGroup> {
        let target = |b: &mut Builder<'static>| {
            if let Thread::Id(tid) = thread {
                b.observe_pid(tid);
            }
            b.any_cpu();
        };
        let mut leader = Group::builder();
        target(&mut leader);
        let mut group = leader.build_group()?;
        let mut members = Vec::new();
        let mut events = Vec::new();
        for event in CountedEvent::SOFTWARE {
            let mut b = event.builder();
            target(&mut b);
            members.push(group.add(&b)?);
            events.push(event);
        }
        for event in CountedEvent::HARDWARE {
            let mut b = event.builder();
            target(&mut b);
            // Refused without a PMU (ENOENT, EOPNOTSUPP) or under a strict
            // perf_event_paranoid: the group counts without it.
            if let Ok(counter) = group.add(&b) {
                members.push(counter);
                events.push(event);
            }
        }
        group.enable()?;
        // SAFETY: dup of a descriptor this group owns and keeps open; the new descriptor is
        // owned by nothing else, so the File may close it.
        let leader = unsafe {
            let fd = libc::dup(group.as_counter().as_raw_fd());
            if fd < 0 {
                return Err(io::Error::last_os_error());
            }
            File::from_raw_fd(fd)
        };
        Ok(CounterGroup {
            _group: group,
            _members: members,
            events,
            leader,
        })
    }

    /// The events counted, in the order [`CounterGroup::read`] gives them.
    pub fn events(&self) -> &[CountedEvent] {
        &self.events
    }

    /// Whether hardware events are among them.
    pub fn has_hardware(&self) -> bool {
        self.events
            .iter()
            .any(|e| CountedEvent::HARDWARE.contains(e))
    }

    /// The counts since the group was opened, into `out` (one per event, in order).
    pub fn read(&mut self, out: &mut [u64]) -> io::Result<()> {
        let mut bytes = [0u8; READ_WORDS * 8];
        let n = (&self.leader).read(&mut bytes)?;
        let word = |i: usize| {
            let b = bytes.get(i * 8..i * 8 + 8)?;
            Some(u64::from_ne_bytes(b.try_into().expect("eight bytes")))
        };
        let members = word(0).unwrap_or(0) as usize;
        if n < 24 || members != self.events.len() + 1 || n < (3 + 2 * members) * 8 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("a counter group read gave {n} bytes for {members} counters"),
            ));
        }
        // The leader (a dummy event) first, then the members in the order they were added.
        for (i, slot) in out.iter_mut().enumerate().take(self.events.len()) {
            *slot = word(3 + 2 * (i + 1)).unwrap_or(0);
        }
        Ok(())
    }
}

/// The kernel thread ids of this process's threads named `name` (as
/// `std::thread::Builder::name` sets it, cut to 15 bytes).
pub fn threads_named(name: &str) -> Vec<i32> {
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
        return Vec::new();
    };
    let mut ids: Vec<i32> = tasks
        .flatten()
        .filter(|task| {
            std::fs::read_to_string(task.path().join("comm"))
                .is_ok_and(|comm| comm.trim_end() == name)
        })
        .filter_map(|task| task.file_name().to_str()?.parse().ok())
        .collect();
    ids.sort_unstable();
    ids
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_calling_thread_s_cpu_time_grows_while_it_works() {
        // Containers may forbid perf_event_open entirely; there is nothing to test then.
        let Ok(mut group) = CounterGroup::open(Thread::Calling) else {
            return;
        };
        assert_eq!(&group.events()[..3], &CountedEvent::SOFTWARE);
        let mut before = vec![0; group.events().len()];
        let mut after = before.clone();
        group.read(&mut before).unwrap();
        let mut x = 0u64;
        for i in 0..5_000_000u64 {
            x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(i));
        }
        group.read(&mut after).unwrap();
        // At least a millisecond of CPU time for five million multiply-adds is far too much;
        // at least some is certain.
        assert!(after[0] > before[0], "{before:?} {after:?}");
    }

    #[test]
    fn another_thread_is_counted_by_its_id() {
        let (tx, rx) = std::sync::mpsc::channel();
        let (stop_tx, stop_rx) = std::sync::mpsc::channel::<()>();
        let worker = std::thread::Builder::new()
            .name("counted-worker".into())
            .spawn(move || {
                // SAFETY: gettid has no preconditions and cannot fail.
                let tid = unsafe { libc::syscall(libc::SYS_gettid) } as i32;
                tx.send(tid).unwrap();
                let mut x = 0u64;
                while stop_rx.try_recv().is_err() {
                    x = std::hint::black_box(x.wrapping_add(1));
                }
            })
            .unwrap();
        let tid = rx.recv().unwrap();
        assert_eq!(threads_named("counted-worker"), [tid]);
        let Ok(mut group) = CounterGroup::open(Thread::Id(tid)) else {
            stop_tx.send(()).unwrap();
            worker.join().unwrap();
            return;
        };
        let mut first = vec![0; group.events().len()];
        group.read(&mut first).unwrap();
        std::thread::sleep(std::time::Duration::from_millis(30));
        let mut second = first.clone();
        group.read(&mut second).unwrap();
        stop_tx.send(()).unwrap();
        worker.join().unwrap();
        // The worker spins: its CPU time grows while this thread sleeps.
        assert!(second[0] > first[0], "{first:?} {second:?}");
    }
}
