//! Tally's object heap: a precise, moving (semi-space copying) garbage collector built on MMTk.
//!
//! The VM sees three things: [`Value`] (a tagged word, see [`value`]), the object accessors on
//! `Value` (see [`object`] for the layout and the rule that makes them safe to call), and
//! [`Heap`], which allocates and collects. Collection happens only inside [`Heap::alloc`] and
//! [`Heap::collect`]; each takes the VM's [`RootSet`] so the collector can find and update every
//! reference the VM holds. Any reference *not* reachable from those roots is stale after the
//! call, because objects move.
//!
//! MMTk's state is process-global, so a process gets one `Heap`, ever: tests that need a heap
//! either share one or run in their own process (each file under `tests/` is its own process).
//!
//! Collections run on MMTk worker threads while the mutator waits; there is one worker unless
//! the environment variable `TALLY_GC_THREADS` asks for more (see `heap::gc_threads`).

pub mod barrier;
mod binding;
mod heap;
pub mod object;
pub mod value;

use std::time::Duration;

pub use heap::{
    GcListenerId, Heap, InlineAllocation, DEFAULT_GENERATIONAL_MIN_HEAP_BYTES,
    DEFAULT_MAX_HEAP_BYTES_CAP, DEFAULT_MIN_HEAP_BYTES, DEFAULT_NURSERY_BYTES, MIN_HEAP_BYTES,
    MIN_NURSERY_BYTES, STRESS_FULL_EVERY,
};
pub use value::Value;

/// Everything the GC must treat as a root. The VM implements this on its runtime state
/// (value stack, globals, literal tables, class table, handles).
///
/// A collection calls `visit_roots` twice on the mutator thread: once to read the roots before
/// the collection and once to write the moved references back after it. Both calls must visit
/// the same slots in the same order (the heap checks this and aborts if they differ), which holds
/// naturally because nothing can change the VM's state in between.
pub trait RootSet {
    /// Calls `visit` once for every root slot; the GC may overwrite the slot with the moved
    /// object's new address. Slots that are not references (immediates, `Value::NONE`) may be
    /// passed too and are ignored.
    fn visit_roots(&mut self, visit: &mut dyn FnMut(&mut Value));
}

/// No roots at all, e.g. before the VM has any state.
impl RootSet for () {
    fn visit_roots(&mut self, _visit: &mut dyn FnMut(&mut Value)) {}
}

impl RootSet for Value {
    fn visit_roots(&mut self, visit: &mut dyn FnMut(&mut Value)) {
        visit(self)
    }
}

impl RootSet for [Value] {
    fn visit_roots(&mut self, visit: &mut dyn FnMut(&mut Value)) {
        self.iter_mut().for_each(visit)
    }
}

impl<const N: usize> RootSet for [Value; N] {
    fn visit_roots(&mut self, visit: &mut dyn FnMut(&mut Value)) {
        self.iter_mut().for_each(visit)
    }
}

impl RootSet for Vec<Value> {
    fn visit_roots(&mut self, visit: &mut dyn FnMut(&mut Value)) {
        self.iter_mut().for_each(visit)
    }
}

/// The garbage collector (`--gc`): an MMTk plan this binding supports. The default is
/// GenImmix, which beat SemiSpace on AWFY in time and, on the allocation-heavy benchmarks,
/// in memory (BENCHMARKS.md, "Memory and collectors").
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum GcPlan {
    /// Two copying halves; every collection copies the live objects to the other half.
    SemiSpace,
    /// Generational: a copying nursery, and a semi-space mature space collected only when
    /// a nursery collection cannot make enough room. Needs the write barrier.
    GenCopy,
    /// Generational: a copying nursery, and an Immix (mark-region) mature space. Needs the
    /// write barrier.
    #[default]
    GenImmix,
    /// Mark-region (Immix): marks 256-byte lines of 32 KiB blocks, allocates into the free
    /// lines of reused blocks, and copies objects only to defragment.
    Immix,
    /// Mark-sweep over size-class free lists: objects never move.
    MarkSweep,
}

impl GcPlan {
    pub const ALL: [GcPlan; 5] = [
        GcPlan::SemiSpace,
        GcPlan::GenCopy,
        GcPlan::GenImmix,
        GcPlan::Immix,
        GcPlan::MarkSweep,
    ];

    /// The name `--gc` takes and reports print.
    pub fn name(self) -> &'static str {
        match self {
            GcPlan::SemiSpace => "semispace",
            GcPlan::GenCopy => "gencopy",
            GcPlan::GenImmix => "genimmix",
            GcPlan::Immix => "immix",
            GcPlan::MarkSweep => "marksweep",
        }
    }

    pub fn from_name(name: &str) -> Option<GcPlan> {
        GcPlan::ALL.into_iter().find(|p| p.name() == name)
    }

    /// Whether the plan collects a nursery on its own (and so needs the write barrier).
    pub fn is_generational(self) -> bool {
        matches!(self, GcPlan::GenCopy | GcPlan::GenImmix)
    }

    /// Where the dynamic heap starts without `--heap-min`.
    pub fn default_min_heap_bytes(self) -> usize {
        if self.is_generational() {
            DEFAULT_GENERATIONAL_MIN_HEAP_BYTES
        } else {
            DEFAULT_MIN_HEAP_BYTES
        }
    }
}

/// How the heap is collected, sized and stressed; `Default` gives GenImmix, the dynamic heap
/// and no stress.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HeapOptions {
    /// `--gc`: the collector.
    pub plan: GcPlan,
    /// Upper bound of the heap in bytes (`--heap-size`); `None` = a dynamic heap that starts at
    /// the plan's [`GcPlan::default_min_heap_bytes`] and grows with the live data up to half the machine's memory,
    /// capped at [`DEFAULT_MAX_HEAP_BYTES_CAP`].
    pub max_heap_bytes: Option<usize>,
    /// `--heap-min`: where the dynamic heap starts, and the least it keeps after shrinking;
    /// `None` = [`GcPlan::default_min_heap_bytes`]. Ignored with `max_heap_bytes` (a fixed heap).
    pub min_heap_bytes: Option<usize>,
    /// `--nursery`: under a generational plan, the most the nursery holds before a nursery
    /// collection; `None` = [`DEFAULT_NURSERY_BYTES`]. Ignored by the other plans.
    pub nursery_bytes: Option<usize>,
    /// `--gc-stress N`: force a collection every N allocations: a full one, or under a
    /// generational plan a nursery one with every [`STRESS_FULL_EVERY`]th full.
    pub gc_stress_every: Option<u64>,
}

/// Why `Heap::new` refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HeapInitError {
    /// MMTk keeps process-global state (its address-space map, side metadata, worker threads)
    /// that cannot be set up twice, so even dropping the first heap does not allow a second.
    #[error("a heap already exists in this process (MMTk supports one heap per process)")]
    AlreadyInitialized,
    #[error("heap size of {requested} bytes is below the minimum of {minimum} bytes")]
    HeapTooSmall { requested: usize, minimum: usize },
    #[error("nursery size of {requested} bytes is below the minimum of {minimum} bytes")]
    NurseryTooSmall { requested: usize, minimum: usize },
    #[error("the GC stress interval must be at least 1 allocation")]
    ZeroStressInterval,
    /// MMTk maps its spaces and side metadata at fixed addresses; that fails when something
    /// else already occupies them (another mapping, a tool such as valgrind, a tight ulimit).
    #[error("MMTk could not set up its address space: {0}")]
    AddressSpace(String),
}

/// The heap could not satisfy an allocation even after collecting (or the object can never
/// fit). The heap stays usable: dropping roots and allocating again may succeed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "out of memory: cannot allocate an object of {requested_bytes} bytes \
     ({heap_used_bytes} bytes in use, heap limit {heap_limit_bytes} bytes)"
)]
pub struct OutOfMemory {
    pub requested_bytes: usize,
    pub heap_used_bytes: usize,
    pub heap_limit_bytes: usize,
}

/// What started a collection.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum GcKind {
    /// An allocation found the heap full.
    Allocation,
    /// [`Heap::collect`], i.e. SOM's `System>>fullGC`.
    Explicit,
    /// The `--gc-stress` interval came round.
    Stress,
    /// A GC hint: the program reached a point where little of the heap is expected to be
    /// live ([`Heap::collect_for`]).
    Hint,
    /// A full collection that measures the live data, for a run that records GC hints.
    Probe,
}

/// How much of the heap a collection traced.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum GcScope {
    /// Only the nursery (and the objects the write barrier remembered) of a generational plan.
    Nursery,
    /// Every space: every collection of a non-generational plan.
    Full,
}

impl GcScope {
    pub fn name(self) -> &'static str {
        match self {
            GcScope::Nursery => "nursery",
            GcScope::Full => "full",
        }
    }
}

/// Delivered to the listeners added with [`Heap::add_gc_listener`], on the mutator thread, while
/// the mutator is inside `alloc`/`collect`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GcEvent {
    /// Sent before the mutator stops for a collection.
    Start {
        kind: GcKind,
        heap_used_bytes: usize,
    },
    /// Sent after the mutator has resumed; `duration` is the whole pause as the mutator saw it,
    /// root copying included.
    End {
        kind: GcKind,
        /// Decided by MMTk during the pause, so only the end can say it.
        scope: GcScope,
        heap_used_before: usize,
        heap_used_after: usize,
        duration: Duration,
    },
}

/// A snapshot of the heap's counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct HeapStats {
    /// Collections so far, of every kind.
    pub collections: u64,
    /// How many of them collected only the nursery (generational plans).
    pub nursery_collections: u64,
    /// Objects the write barrier remembered (its slow path), generational plans only.
    pub barrier_slow_calls: u64,
    /// Total pause time of those collections.
    pub gc_time: Duration,
    /// The longest collection.
    pub longest_pause: Duration,
    /// Sum of the sizes of all objects allocated so far (header and padding included).
    pub allocated_bytes: u64,
    pub allocated_objects: u64,
    /// Memory in use now, in whole pages (objects plus partly filled allocation buffers).
    pub heap_used_bytes: usize,
    /// Current heap limit: a collection is triggered when usage (plus the copy reserve) reaches
    /// it. Fixed for `--heap-size`; moves between min and max for the dynamic heap.
    pub heap_limit_bytes: usize,
    /// What can be allocated before the plan collects (the heap less what is in use and a
    /// copying plan's reserve).
    pub heap_available_bytes: usize,
    /// The most the heap may ever grow to.
    pub heap_max_bytes: usize,
    /// Bytes allocated since the last collection (of any scope).
    pub allocated_since_gc: u64,
    /// Heap in use right after the last full collection: the live data then, plus what
    /// survived in partly used blocks; 0 before the first.
    pub used_after_full_gc: usize,
    /// The nursery's bound under a generational plan, 0 under the others.
    pub nursery_bytes: usize,
}
