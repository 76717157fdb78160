//! [`Heap`]: allocation, explicit collection, statistics, and the mutator's half of a pause.

use std::any::Any;
use std::cell::Cell;
use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};
use std::ptr::{self, NonNull};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use mmtk::util::alloc::{AllocatorInfo, BumpPointer};
use mmtk::util::options::{GCTriggerSelector, NurserySize, PlanSelector, DEFAULT_MIN_NURSERY};
use mmtk::util::{Address, ObjectReference};
use mmtk::{memory_manager, AllocationSemantics, MMTKBuilder, Mutator, MMTK};

use crate::barrier;
use crate::binding::{fatal, mutator_tls, Tally, MMTK_INSTANCE, MUTATOR, RENDEZVOUS};
use crate::object::{header_word0, header_word1, object_size, HASH_BITS, HEADER_BYTES};
use crate::{
    GcEvent, GcKind, GcPlan, GcScope, HeapInitError, HeapOptions, HeapStats, OutOfMemory, RootSet,
    Value,
};

/// Smallest `max_heap_bytes` accepted. Below this MMTk's page-granular accounting (a semi-space
/// plan reserves half the heap for copying, and allocation buffers are taken 32 KiB at a time)
/// leaves too little room to run anything.
pub const MIN_HEAP_BYTES: usize = 2 << 20;

/// The nursery's default upper bound under the generational plans. A nursery collection
/// costs about the surviving bytes plus a fixed pause (the root hand-over, a worker
/// wake-up), so the nursery must be big enough that most objects die in it and the fixed
/// part stays small, and small enough that a program's memory is mostly its live data.
pub const DEFAULT_NURSERY_BYTES: usize = 4 << 20;

/// Smallest `--nursery`: MMTk hands out allocation buffers of 32 KiB and a nursery must hold
/// a few of them.
pub const MIN_NURSERY_BYTES: usize = 256 << 10;

/// Under a generational plan every this-many-th `--gc-stress` collection is a full one.
pub const STRESS_FULL_EVERY: u64 = 8;

/// Where the dynamic heap of a non-generational plan starts; it does not shrink below this
/// either. Every collection of those plans traces the whole heap, so a small heap means many
/// full collections while a program's live data grows.
pub const DEFAULT_MIN_HEAP_BYTES: usize = 64 << 20;

/// The same for the generational plans, whose nursery collections keep the young garbage out
/// of the mature space: the heap grows with the live data, so small programs stay small. It
/// grows only after a full collection, so the floor must also spare a program whose live data
/// climbs to tens of MiB a long series of full collections on the way.
pub const DEFAULT_GENERATIONAL_MIN_HEAP_BYTES: usize = 16 << 20;

/// The dynamic heap may grow to half the machine's memory, but never beyond this.
pub const DEFAULT_MAX_HEAP_BYTES_CAP: usize = 8 << 30;

/// Used when the machine's memory size cannot be read.
const FALLBACK_MAX_HEAP_BYTES: usize = 4 << 30;

/// GC worker threads unless `TALLY_GC_THREADS` says otherwise. One: SOM heaps are small and
/// often list-shaped, so a second worker mostly adds hand-offs (measured slower on 2 cores), and
/// the mutator is stopped during a collection anyway.
const DEFAULT_GC_THREADS: usize = 1;

/// Set by the first `Heap::new`; never reset, because MMTk cannot be initialised twice.
static CREATED: AtomicBool = AtomicBool::new(false);

/// Creates the MMTk instance. MMTk reports a failure to map its address space by panicking;
/// that becomes an error here (without the panic message on stderr), so the VM can say what
/// went wrong and exit instead of crashing.
fn init_mmtk(builder: &MMTKBuilder) -> Result<Box<MMTK<Tally>>, HeapInitError> {
    let previous_hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(|_| {}));
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        memory_manager::mmtk_init::<Tally>(builder)
    }));
    std::panic::set_hook(previous_hook);
    result.map_err(|payload| {
        let message = payload
            .downcast_ref::<String>()
            .cloned()
            .or_else(|| payload.downcast_ref::<&str>().map(|s| s.to_string()))
            .unwrap_or_else(|| "unknown failure".into());
        HeapInitError::AddressSpace(message)
    })
}

/// The object heap. One per process (see [`HeapInitError::AlreadyInitialized`]).
///
/// `Heap` is neither `Send` nor `Sync`: the VM has one mutator thread, and the GC listener may
/// capture thread-bound state. Create the heap on the thread that will run the interpreter.
pub struct Heap {
    mmtk: &'static MMTK<Tally>,
    /// Owned (from `bind_mutator`, freed in `Drop`) but held as a pointer because MMTk's workers
    /// also reach it through `MUTATOR` while the mutator is parked.
    mutator: NonNull<Mutator<Tally>>,
    /// Objects larger than this go to the large object space: the copying plan cannot place
    /// them in its bump-allocated blocks, and moving them would be wasted work anyway.
    los_threshold: usize,
    /// Byte offset of the default allocator's bump pointer inside `Mutator` (see
    /// `bump_allocate`), for the plans whose default allocator has one (SemiSpace's copy
    /// space, Immix's lines); `None` sends every allocation through MMTk (MarkSweep's free
    /// lists).
    bump_pointer_offset: Option<usize>,
    plan: GcPlan,
    max_heap_bytes: usize,
    core: HeapCore,
}

/// What [`Heap::alloc`]'s fast path touches, for code that does it in place (the optimizing
/// tier's allocations): take `size` bytes at the bump pointer's cursor when they fit below
/// its limit and the allocation clock stays below the alarm (`alarm_at`), write the header
/// (`header_word0` with the next identity hash: the xorshift32 step of `hash_state`, its
/// top [`crate::object::HASH_BITS`] bits; `header_word1`) and every slot, and count the
/// bytes and the object. Anything else goes through `Heap::alloc`.
#[derive(Clone, Copy, Debug)]
pub struct InlineAllocation {
    /// Address of the bump pointer's cursor; its limit is the next word. The mutator it
    /// lives in is never freed while the heap lives.
    pub bump_pointer: usize,
    /// Larger objects go to the large-object space, through `Heap::alloc`.
    pub max_object_bytes: usize,
    /// Offsets inside `Heap` of the allocation clock (`u64`), the object count (`u64`), the
    /// alarm's clock reading (`u64`, see [`Heap::set_alarm`]) and the hash state (`u32`).
    pub allocated_bytes: usize,
    pub allocated_objects: usize,
    pub alarm_at: usize,
    pub hash_state: usize,
}

/// The part of the heap the mutator's pause handler needs; separate from `Heap` so that a
/// pause can borrow it while `Heap::alloc` is still using the mutator.
type GcListener = Box<dyn FnMut(GcEvent)>;

/// A listener added with [`Heap::add_gc_listener`], to remove it by.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GcListenerId(u32);

struct HeapCore {
    mmtk: &'static MMTK<Tally>,
    /// References copied out of the roots for the collector (see `binding` module docs).
    root_buf: Vec<Value>,
    /// What `root_buf` held before the collection, to check the write-back pass visits the
    /// same slots in the same order.
    root_check: Vec<Value>,
    /// Listeners with their ids, in the order they were added.
    listeners: Vec<(GcListenerId, GcListener)>,
    next_listener: u32,
    /// A listener panic caught inside the pause, rethrown once MMTk's frames are off the stack.
    listener_panic: Option<Box<dyn Any + Send>>,
    next_kind: GcKind,
    collections: u64,
    gc_time: Duration,
    allocated_bytes: u64,
    allocated_objects: u64,
    stress_every: Option<u64>,
    allocs_since_stress: u64,
    stress_collections: u64,
    nursery_collections: u64,
    allocated_at_last_gc: u64,
    used_after_full_gc: usize,
    /// The nursery's bound under a generational plan, 0 under the others.
    nursery_bytes: usize,
    longest_pause: Duration,
    /// See [`Heap::set_alarm`]: the share, and the allocation clock at which it rings next
    /// (`u64::MAX`: silent).
    alarm_share: Option<f64>,
    alarm_at: u64,
    hash_state: u32,
}

impl Heap {
    /// Starts MMTk with the plan `options` names and binds the calling thread as the mutator.
    pub fn new(options: HeapOptions) -> Result<Heap, HeapInitError> {
        if let Some(requested) = options.max_heap_bytes.or(options.min_heap_bytes) {
            if requested < MIN_HEAP_BYTES {
                return Err(HeapInitError::HeapTooSmall {
                    requested,
                    minimum: MIN_HEAP_BYTES,
                });
            }
        }
        if let Some(requested) = options.nursery_bytes {
            if requested < MIN_NURSERY_BYTES {
                return Err(HeapInitError::NurseryTooSmall {
                    requested,
                    minimum: MIN_NURSERY_BYTES,
                });
            }
        }
        if options.gc_stress_every == Some(0) {
            return Err(HeapInitError::ZeroStressInterval);
        }
        if CREATED.swap(true, Ordering::SeqCst) {
            return Err(HeapInitError::AlreadyInitialized);
        }

        let (trigger, max_heap_bytes) = match options.max_heap_bytes {
            Some(max) => (GCTriggerSelector::FixedHeapSize(max), max),
            None => {
                let max = default_max_heap_bytes();
                let min = options
                    .min_heap_bytes
                    .unwrap_or(options.plan.default_min_heap_bytes())
                    .min(max);
                (GCTriggerSelector::DynamicHeapSize(min, max), max)
            }
        };
        let threads = gc_threads();
        // Environment variables (MMTK_*) are ignored on purpose: the plan must be one the
        // binding supports, and the heap size comes from the VM's own flags.
        let mut builder = MMTKBuilder::new_no_env_vars();
        let selector = match options.plan {
            GcPlan::SemiSpace => PlanSelector::SemiSpace,
            GcPlan::GenCopy => PlanSelector::GenCopy,
            GcPlan::GenImmix => PlanSelector::GenImmix,
            GcPlan::Immix => PlanSelector::Immix,
            GcPlan::MarkSweep => PlanSelector::MarkSweep,
        };
        // A fixed heap keeps three quarters for the mature space.
        let nursery = options
            .nursery_bytes
            .unwrap_or(match options.max_heap_bytes {
                Some(max) => DEFAULT_NURSERY_BYTES.min(max / 4).max(MIN_NURSERY_BYTES),
                None => DEFAULT_NURSERY_BYTES,
            });
        let valid = builder.options.plan.set(selector)
            && builder.options.threads.set(threads)
            && builder.options.gc_trigger.set(trigger)
            && builder.options.nursery.set(NurserySize::Bounded {
                min: nursery.min(DEFAULT_MIN_NURSERY),
                max: nursery,
            });
        assert!(
            valid,
            "MMTk rejected options that are valid by construction"
        );

        let mmtk: &'static MMTK<Tally> = Box::leak(init_mmtk(&builder)?);
        if MMTK_INSTANCE.set(mmtk).is_err() {
            unreachable!("CREATED guards MMTK_INSTANCE");
        }
        barrier::enable_for(mmtk);
        memory_manager::initialize_collection(mmtk, mutator_tls().0);
        let mutator = NonNull::from(Box::leak(memory_manager::bind_mutator(mmtk, mutator_tls())));
        MUTATOR.store(mutator.as_ptr(), Ordering::Release);
        let selector = memory_manager::get_allocator_mapping(mmtk, AllocationSemantics::Default);
        let bump_pointer_offset = match AllocatorInfo::new::<Tally>(selector) {
            AllocatorInfo::BumpPointer {
                bump_pointer_offset,
            } => Some(bump_pointer_offset),
            AllocatorInfo::Unimplemented | AllocatorInfo::None => None,
        };

        Ok(Heap {
            mmtk,
            mutator,
            los_threshold: mmtk
                .get_plan()
                .constraints()
                .max_non_los_default_alloc_bytes,
            bump_pointer_offset,
            plan: options.plan,
            max_heap_bytes,
            core: HeapCore {
                nursery_bytes: if options.plan.is_generational() {
                    nursery
                } else {
                    0
                },
                mmtk,
                root_buf: Vec::new(),
                root_check: Vec::new(),
                listeners: Vec::new(),
                next_listener: 0,
                listener_panic: None,
                next_kind: GcKind::Allocation,
                collections: 0,
                gc_time: Duration::ZERO,
                allocated_bytes: 0,
                allocated_objects: 0,
                stress_every: options.gc_stress_every,
                allocs_since_stress: 0,
                stress_collections: 0,
                nursery_collections: 0,
                allocated_at_last_gc: 0,
                used_after_full_gc: 0,
                longest_pause: Duration::ZERO,
                alarm_share: None,
                alarm_at: u64::MAX,
                hash_state: 0x9e37_79b9,
            },
        })
    }

    /// Allocates an object: header with `class_id` and `kind`, then `slots` slots all set to
    /// `fill`, then `bytes` zero bytes.
    ///
    /// May collect garbage: afterwards every `Value` the caller holds outside `roots` is stale
    /// (`fill` itself is kept alive and updated by the heap). On `Err` a collection may also have
    /// happened.
    pub fn alloc(
        &mut self,
        roots: &mut dyn RootSet,
        class_id: u32,
        kind: u8,
        slots: usize,
        fill: Value,
        bytes: usize,
    ) -> Result<Value, OutOfMemory> {
        // The fill value is a root of its own: a collection during this call may move it.
        let mut locals = [fill];

        if let Some(every) = self.core.stress_every {
            self.core.allocs_since_stress += 1;
            if self.core.allocs_since_stress >= every {
                self.core.allocs_since_stress = 0;
                self.core.stress_collections += 1;
                // Nursery collections promote everything live every N allocations, which is
                // what exposes a missing write barrier; the occasional full one exercises the
                // mature space's own collection.
                let full = !self.plan.is_generational()
                    || self
                        .core
                        .stress_collections
                        .is_multiple_of(STRESS_FULL_EVERY);
                self.collect_as(roots, &mut locals, GcKind::Stress, full);
            }
        }

        let Some(size) = object_size(slots, bytes) else {
            let requested = slots
                .saturating_mul(8)
                .saturating_add(bytes)
                .saturating_add(HEADER_BYTES);
            return Err(self.out_of_memory(requested));
        };
        let addr = match self.bump_allocate(size) {
            Some(addr) => addr,
            None => match self.alloc_slow(roots, &mut locals, size) {
                Some(addr) => addr,
                // MMTk returns null only after `Collection::out_of_memory` said the heap is full.
                None => return Err(self.out_of_memory(size)),
            },
        };

        let fill = locals[0];
        let hash = self.core.next_hash();
        let start = addr.to_mut_ptr::<u64>();
        // SAFETY: MMTk just gave us `size` bytes at `start`, 8-aligned and owned by nobody else;
        // `object_size` made `size` exactly header + slots + padded bytes, so every write below
        // stays inside the region, and together they initialise all of it.
        unsafe {
            start.write(header_word0(class_id, kind, hash));
            start.add(1).write(header_word1(slots, bytes));
            let slot_base = start.add(2).cast::<Value>();
            for i in 0..slots {
                slot_base.add(i).write(fill);
            }
            let byte_len = size - HEADER_BYTES - slots * 8;
            if byte_len > 0 {
                ptr::write_bytes(slot_base.add(slots).cast::<u8>(), 0, byte_len);
            }
        }

        self.core.allocated_bytes += size as u64;
        self.core.allocated_objects += 1;
        Ok(Value(addr.as_usize() as u64))
    }

    /// The allocation fast path: MMTk's own bump pointer for the default allocator, used in
    /// place (MMTk's porting guide describes this; `AllocatorInfo` gives its offset) instead
    /// of through `memory_manager::alloc`, which resolves the allocator dynamically on every
    /// call. Both bump allocators' own fast paths are this test; what does not fit (a new
    /// buffer, Immix's next free lines or a medium object's overflow block) is the slow path.
    #[inline]
    fn bump_allocate(&mut self, size: usize) -> Option<Address> {
        if size > self.los_threshold {
            return None;
        }
        let offset = self.bump_pointer_offset?;
        // SAFETY: `offset` is MMTk's offset of the default allocator's `BumpPointer` inside
        // `Mutator` (`AllocatorInfo::BumpPointer`); the mutator is alive while `self` is, and
        // only this thread touches it outside a pause.
        let bump = unsafe {
            &mut *self
                .mutator
                .as_ptr()
                .cast::<u8>()
                .add(offset)
                .cast::<BumpPointer>()
        };
        // Sizes are multiples of 8 and buffers start 8-aligned, so no alignment step is needed.
        let start = bump.cursor;
        let end = start + size;
        if end > bump.limit {
            return None;
        }
        bump.cursor = end;
        // Skipping `post_alloc` is fine here: for the copy space and Immix space it only sets
        // valid-object bits, an MMTk feature this crate does not enable.
        Some(start)
    }

    /// Where code that allocates in place of [`Heap::alloc`]'s fast path finds what that
    /// path reads and writes; `None` when every allocation must come here: a plan without a
    /// bump pointer, or `--gc-stress`, which counts allocations.
    pub fn inline_allocation(&self) -> Option<InlineAllocation> {
        if self.core.stress_every.is_some() {
            return None;
        }
        let offset = self.bump_pointer_offset?;
        Some(InlineAllocation {
            bump_pointer: self.mutator.as_ptr() as usize + offset,
            max_object_bytes: self.los_threshold,
            allocated_bytes: std::mem::offset_of!(Heap, core.allocated_bytes),
            allocated_objects: std::mem::offset_of!(Heap, core.allocated_objects),
            alarm_at: std::mem::offset_of!(Heap, core.alarm_at),
            hash_state: std::mem::offset_of!(Heap, core.hash_state),
        })
    }

    /// The collector this heap runs.
    pub fn plan(&self) -> GcPlan {
        self.plan
    }

    /// Everything the fast path cannot do: a new buffer, a large object, or a collection.
    #[cold]
    fn alloc_slow(
        &mut self,
        roots: &mut dyn RootSet,
        locals: &mut [Value],
        size: usize,
    ) -> Option<Address> {
        // A request larger than the whole heap can never succeed. MMTk 0.32 reports it through
        // `Collection::out_of_memory` and then retries it forever, so it never reaches MMTk.
        if size > self.max_heap_bytes {
            return None;
        }
        let semantics = if size > self.los_threshold {
            AllocationSemantics::Los
        } else {
            AllocationSemantics::Default
        };
        let mutator = self.mutator;
        let addr = with_pause_context(&mut self.core, roots, locals, GcKind::Allocation, || {
            // SAFETY: the mutator box is alive while `self` is; MMTk's workers touch it only
            // while this thread is parked inside this very call (see `binding`).
            memory_manager::alloc(unsafe { &mut *mutator.as_ptr() }, size, 8, 0, semantics)
        });
        let object = ObjectReference::from_raw_address(addr)?;
        // SAFETY: as above; no collection can start here.
        memory_manager::post_alloc(unsafe { &mut *mutator.as_ptr() }, object, size, semantics);
        Some(addr)
    }

    /// A full collection now (SOM's `System>>fullGC`).
    pub fn collect(&mut self, roots: &mut dyn RootSet) {
        self.collect_as(roots, &mut [], GcKind::Explicit, true);
    }

    /// A collection for a GC hint ([`GcKind::Hint`], [`GcKind::Probe`]): the nursery
    /// (`full == false`; a full one under the non-generational plans) or the whole heap.
    pub fn collect_for(&mut self, roots: &mut dyn RootSet, kind: GcKind, full: bool) {
        self.collect_as(roots, &mut [], kind, full);
    }

    /// Bytes allocated so far; cheap, for a caller that watches the allocation clock.
    #[inline]
    pub fn allocated_bytes(&self) -> u64 {
        self.core.allocated_bytes
    }

    /// Collections so far, of any scope; cheap.
    #[inline]
    pub fn collections(&self) -> u64 {
        self.core.collections
    }

    /// Makes the allocation alarm ring in every collection cycle once `share` of the cycle's
    /// room is allocated: of the nursery under a generational plan, of the heap left free by
    /// the last collection under the others. `None` silences it. GC hints use it so the VM
    /// looks for a favorable point only when a collection is near.
    pub fn set_alarm(&mut self, share: Option<f64>) {
        self.core.alarm_share = share;
        self.core.rearm_alarm();
    }

    /// Whether the alarm rang since it was last taken; it then stays silent until the next
    /// collection or [`Heap::snooze_alarm`]. One comparison: callers test it on every
    /// allocation.
    #[inline]
    pub fn take_alarm(&mut self) -> bool {
        if self.core.allocated_bytes < self.core.alarm_at {
            return false;
        }
        self.core.alarm_at = u64::MAX;
        true
    }

    /// Rings the alarm again after another `bytes` allocated (unless a collection re-arms it
    /// first).
    pub fn snooze_alarm(&mut self, bytes: u64) {
        if self.core.alarm_share.is_some() {
            self.core.alarm_at = self.core.allocated_bytes.saturating_add(bytes);
        }
    }

    /// A nursery collection now under a generational plan (MMTk may still decide on a full
    /// one, when the mature space has too little room); a full collection under any other.
    pub fn collect_nursery(&mut self, roots: &mut dyn RootSet) {
        self.collect_as(roots, &mut [], GcKind::Explicit, false);
    }

    fn collect_as(
        &mut self,
        roots: &mut dyn RootSet,
        locals: &mut [Value],
        kind: GcKind,
        full: bool,
    ) {
        let mmtk = self.mmtk;
        with_pause_context(&mut self.core, roots, locals, kind, || {
            // `force` so the request is never ignored; `exhaustive` makes a generational plan
            // collect the whole heap (the other plans always do).
            mmtk.handle_user_collection_request(mutator_tls(), true, full);
        });
    }

    pub fn stats(&self) -> HeapStats {
        HeapStats {
            collections: self.core.collections,
            nursery_collections: self.core.nursery_collections,
            barrier_slow_calls: barrier::slow_calls(),
            gc_time: self.core.gc_time,
            longest_pause: self.core.longest_pause,
            allocated_bytes: self.core.allocated_bytes,
            allocated_objects: self.core.allocated_objects,
            heap_used_bytes: memory_manager::used_bytes(self.mmtk),
            heap_limit_bytes: memory_manager::total_bytes(self.mmtk),
            heap_available_bytes: available_bytes(self.mmtk),
            heap_max_bytes: self.max_heap_bytes,
            allocated_since_gc: self.core.allocated_bytes - self.core.allocated_at_last_gc,
            used_after_full_gc: self.core.used_after_full_gc,
            nursery_bytes: self.core.nursery_bytes,
        }
    }

    /// Adds a listener that sees a [`GcEvent::Start`] and a [`GcEvent::End`] for every
    /// collection (after the listeners added before it), until it is removed.
    ///
    /// It runs on the mutator thread in the middle of `alloc`/`collect`, so it must not touch
    /// heap objects. If it panics, the collection still completes and the panic resumes when
    /// `alloc`/`collect` returns.
    pub fn add_gc_listener(&mut self, listener: impl FnMut(GcEvent) + 'static) -> GcListenerId {
        let id = GcListenerId(self.core.next_listener);
        self.core.next_listener += 1;
        self.core.listeners.push((id, Box::new(listener)));
        id
    }

    /// Removes the listener `id` (nothing if it is gone already).
    pub fn remove_gc_listener(&mut self, id: GcListenerId) {
        self.core.listeners.retain(|(i, _)| *i != id);
    }

    /// Changes the `--gc-stress` interval; `None` or `Some(0)` turns stressing off.
    pub fn set_gc_stress_every(&mut self, every: Option<u64>) {
        self.core.stress_every = every.filter(|&n| n > 0);
        self.core.allocs_since_stress = 0;
    }

    fn out_of_memory(&self, requested_bytes: usize) -> OutOfMemory {
        OutOfMemory {
            requested_bytes,
            heap_used_bytes: memory_manager::used_bytes(self.mmtk),
            heap_limit_bytes: self.max_heap_bytes,
        }
    }
}

impl Drop for Heap {
    fn drop(&mut self) {
        // No collection can be running: they only happen inside `alloc`/`collect`, which borrow
        // the heap. Unpublish first so MMTk can never see a freed mutator.
        MUTATOR.store(ptr::null_mut(), Ordering::Release);
        // SAFETY: the pointer came from `Box::leak` in `new` and nothing else frees it.
        let mut mutator = unsafe { Box::from_raw(self.mutator.as_ptr()) };
        memory_manager::destroy_mutator(&mut mutator);
        // MMTk itself stays: it is leaked and process-global, and its parked worker threads end
        // with the process.
    }
}

/// `TALLY_GC_THREADS` (a positive number, capped at the machine's parallelism) overrides the
/// default, for experiments.
fn gc_threads() -> usize {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    std::env::var("TALLY_GC_THREADS")
        .ok()
        .and_then(|s| s.trim().parse::<usize>().ok())
        .filter(|&n| n > 0)
        .map_or(DEFAULT_GC_THREADS, |n| n.min(cores))
}

fn default_max_heap_bytes() -> usize {
    match system_total_memory() {
        Some(total) => usize::try_from(total / 2)
            .unwrap_or(usize::MAX)
            .clamp(DEFAULT_MIN_HEAP_BYTES, DEFAULT_MAX_HEAP_BYTES_CAP),
        None => FALLBACK_MAX_HEAP_BYTES,
    }
}

/// The machine's physical memory, from `MemTotal` in `/proc/meminfo` (Linux, the only OS
/// the VM supports); `None` where that cannot be read.
fn system_total_memory() -> Option<u64> {
    let meminfo = std::fs::read_to_string("/proc/meminfo").ok()?;
    parse_mem_total(&meminfo)
}

/// `MemTotal:  16314420 kB` → bytes.
fn parse_mem_total(meminfo: &str) -> Option<u64> {
    let line = meminfo.lines().find(|l| l.starts_with("MemTotal:"))?;
    let mut words = line["MemTotal:".len()..].split_whitespace();
    let amount: u64 = words.next()?.parse().ok()?;
    let unit = match words.next() {
        Some("kB") => 1024,
        Some(_) => return None,
        None => 1,
    };
    amount.checked_mul(unit)
}

/// What can be allocated before the plan collects: the heap less what is in use and what a
/// copying collection must keep in reserve.
fn available_bytes(mmtk: &MMTK<Tally>) -> usize {
    mmtk.get_plan().get_available_pages() << mmtk::util::constants::LOG_BYTES_IN_PAGE
}

impl HeapCore {
    /// Sets the alarm for the cycle that starts now ([`Heap::set_alarm`]).
    fn rearm_alarm(&mut self) {
        let mmtk = self.mmtk;
        self.alarm_at = match self.alarm_share {
            None => u64::MAX,
            Some(share) => {
                let room = if self.nursery_bytes > 0 {
                    self.nursery_bytes
                } else {
                    available_bytes(mmtk)
                };
                self.allocated_bytes + (room as f64 * share) as u64
            }
        };
    }

    fn next_hash(&mut self) -> u32 {
        // xorshift32: cheap, and spreads consecutive allocations across the hash range.
        // Compiled code that allocates in place steps the same state the same way
        // (`InlineAllocation::hash_state`).
        let mut x = self.hash_state;
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        self.hash_state = x;
        x >> (32 - HASH_BITS)
    }

    fn notify(&mut self, event: GcEvent) {
        for (_, listener) in self.listeners.iter_mut() {
            if let Err(payload) = catch_unwind(AssertUnwindSafe(|| listener(event))) {
                // Unwinding through MMTk's allocation frames would leave its state half-updated.
                self.listener_panic.get_or_insert(payload);
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// The mutator's half of a pause

/// What `block_for_gc` needs from the `alloc`/`collect` call it interrupts.
struct PauseContext<'a> {
    core: &'a mut HeapCore,
    roots: &'a mut dyn RootSet,
    /// Values the heap itself holds across the call (the fill value of `alloc`).
    locals: &'a mut [Value],
}

thread_local! {
    /// The `PauseContext` of the `alloc`/`collect` call running on this thread, or null.
    /// MMTk's `block_for_gc` has no parameter through which the binding could pass it.
    static ACTIVE_PAUSE_CONTEXT: Cell<*mut ()> = const { Cell::new(ptr::null_mut()) };
}

/// Runs `f` (a call into MMTk that may collect) with the pause context published for
/// `block_for_gc`, then rethrows any listener panic caught during the pause.
fn with_pause_context<R>(
    core: &mut HeapCore,
    roots: &mut dyn RootSet,
    locals: &mut [Value],
    kind: GcKind,
    f: impl FnOnce() -> R,
) -> R {
    struct Unpublish;
    impl Drop for Unpublish {
        fn drop(&mut self) {
            ACTIVE_PAUSE_CONTEXT.with(|c| c.set(ptr::null_mut()));
        }
    }

    core.next_kind = kind;
    let mut ctx = PauseContext {
        core,
        roots,
        locals,
    };
    let previous =
        ACTIVE_PAUSE_CONTEXT.with(|c| c.replace((&mut ctx as *mut PauseContext<'_>).cast::<()>()));
    debug_assert!(previous.is_null(), "nested heap calls");
    let unpublish = Unpublish;
    let result = f();
    drop(unpublish);
    if let Some(payload) = ctx.core.listener_panic.take() {
        resume_unwind(payload);
    }
    result
}

/// Called by `Collection::block_for_gc`, on the mutator thread, when MMTk has decided to collect.
pub(crate) fn pause_mutator_for_gc() {
    let ctx = ACTIVE_PAUSE_CONTEXT.with(Cell::get);
    if ctx.is_null() {
        fatal("MMTk blocked the mutator for a collection outside Heap::alloc/collect");
    }
    // SAFETY: a non-null pointer was published by `with_pause_context` on this thread and points
    // to its local `PauseContext`, which outlives the call into MMTk that led here; that frame
    // does not touch the context until the call returns, so this is the only live access.
    let ctx = unsafe { &mut *ctx.cast::<PauseContext<'_>>() };
    ctx.pause();
}

impl PauseContext<'_> {
    fn pause(&mut self) {
        let kind = self.core.next_kind;
        let mmtk = self.core.mmtk;
        let used_before = memory_manager::used_bytes(mmtk);
        self.core.notify(GcEvent::Start {
            kind,
            heap_used_bytes: used_before,
        });
        let started = Instant::now();

        let core = &mut *self.core;
        let roots = &mut *self.roots;
        let locals = &mut *self.locals;

        // 1. Copy the references out of the roots.
        core.root_buf.clear();
        let buf = &mut core.root_buf;
        let read = catch_unwind(AssertUnwindSafe(|| {
            let mut take = |v: &mut Value| {
                if v.is_ref() {
                    buf.push(*v)
                }
            };
            roots.visit_roots(&mut take);
            locals.iter_mut().for_each(&mut take);
        }));
        if read.is_err() {
            // MMTk is already waiting for this thread: there is no way to call the GC off.
            fatal("the VM's RootSet panicked while the collector was reading it");
        }
        core.root_check.clone_from(&core.root_buf);

        // 2./3. Publish them and sleep while MMTk's workers collect (and rewrite the buffer).
        RENDEZVOUS.park_mutator(core.root_buf.as_mut_ptr(), core.root_buf.len());

        // 4. Write the new addresses back into the same slots.
        let (buf, check) = (&core.root_buf, &core.root_check);
        let mut next = 0;
        let mut consistent = true;
        let written = catch_unwind(AssertUnwindSafe(|| {
            let mut put = |v: &mut Value| {
                if v.is_ref() {
                    if next < buf.len() && *v == check[next] {
                        *v = buf[next];
                    } else {
                        consistent = false;
                    }
                    next += 1;
                }
            };
            roots.visit_roots(&mut put);
            locals.iter_mut().for_each(&mut put);
        }));
        if written.is_err() || !consistent || next != buf.len() {
            fatal("the VM's RootSet visited different slots after the collection than before it");
        }

        let duration = started.elapsed();
        let used_after = memory_manager::used_bytes(mmtk);
        let scope = match mmtk.get_plan().generational() {
            Some(generational) if !generational.last_collection_full_heap() => GcScope::Nursery,
            _ => GcScope::Full,
        };
        if scope == GcScope::Nursery {
            core.nursery_collections += 1;
        } else {
            core.used_after_full_gc = used_after;
        }
        core.allocated_at_last_gc = core.allocated_bytes;
        core.rearm_alarm();
        core.collections += 1;
        core.gc_time += duration;
        core.longest_pause = core.longest_pause.max(duration);
        core.notify(GcEvent::End {
            kind,
            scope,
            heap_used_before: used_before,
            heap_used_after: used_after,
            duration,
        });
    }
}

#[cfg(test)]
mod tests {
    use super::parse_mem_total;

    #[test]
    fn mem_total_is_read_in_bytes() {
        let meminfo = "MemTotal:        8000000 kB\nMemFree:  100 kB\n";
        assert_eq!(parse_mem_total(meminfo), Some(8_000_000 * 1024));
    }

    #[test]
    fn mem_total_missing_or_odd_is_none() {
        assert_eq!(parse_mem_total("MemFree: 100 kB\n"), None);
        assert_eq!(parse_mem_total("MemTotal: lots kB\n"), None);
        assert_eq!(parse_mem_total("MemTotal: 100 MB\n"), None);
    }

    #[test]
    fn this_machine_reports_its_memory() {
        assert!(super::system_total_memory().is_some_and(|b| b > 0));
    }
}
