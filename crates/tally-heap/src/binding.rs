//! The MMTk side of the heap: the `VMBinding` traits and the stop-the-world rendezvous.
//!
//! # Threads and the rendezvous
//!
//! Tally has one mutator thread; MMTk collects on its own worker threads. A collection starts
//! only inside `Heap::alloc` / `Heap::collect`: MMTk calls [`Collection::block_for_gc`] on the
//! mutator thread, and that hands control to `heap::pause_mutator_for_gc`, which
//!
//! 1. copies every reference in the VM's `RootSet` into a root buffer owned by the heap,
//! 2. publishes the buffer in [`RENDEZVOUS`] and marks the mutator stopped,
//! 3. sleeps until [`Collection::resume_mutators`] bumps the epoch,
//! 4. writes the (possibly moved) references from the buffer back into the `RootSet`.
//!
//! A worker in [`Collection::stop_all_mutators`] waits for step 2 before returning, so MMTk
//! never starts tracing while the mutator can still touch the heap. Root scanning then reads
//! only the published buffer. The `RootSet` itself is only ever touched on the mutator thread,
//! so it needs no `Send`/`Sync`, and the worker never holds a pointer into the VM's data
//! structures; the buffer it does point into stays put because its owner is asleep in step 3.

use std::cell::Cell;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::ptr;
use std::sync::atomic::{AtomicPtr, AtomicU64, Ordering};
use std::sync::{Condvar, Mutex, MutexGuard, OnceLock, PoisonError};

use mmtk::util::alloc::AllocationError;
use mmtk::util::copy::{CopySemantics, GCWorkerCopyContext};
use mmtk::util::{
    Address, ObjectReference, OpaquePointer, VMMutatorThread, VMThread, VMWorkerThread,
};
use mmtk::vm::slot::{Slot, UnimplementedMemorySlice};
use mmtk::vm::{
    ActivePlan, Collection, GCThreadContext, ObjectModel, ObjectTracer, ReferenceGlue,
    RootsWorkFactory, Scanning, SlotVisitor, VMBinding, VMGlobalLogBitSpec,
    VMLocalForwardingBitsSpec, VMLocalForwardingPointerSpec, VMLocalLOSMarkNurserySpec,
    VMLocalMarkBitSpec,
};
use mmtk::{Mutator, MMTK};

use crate::object::{size_from_word1, slots_from_word1, HEADER_BYTES};
use crate::value::Value;

/// The binding type MMTk is instantiated with.
#[derive(Default)]
pub struct Tally;

impl VMBinding for Tally {
    type VMObjectModel = TallyObjectModel;
    type VMScanning = TallyScanning;
    type VMCollection = TallyCollection;
    type VMActivePlan = TallyActivePlan;
    type VMReferenceGlue = TallyReferenceGlue;
    type VMSlot = ValueSlot;
    type VMMemorySlice = UnimplementedMemorySlice<ValueSlot>;

    // Every object is a whole number of words and word-aligned, so no gaps ever need filling.
    const ALIGNMENT_VALUE: u8 = 0;
    const MIN_ALIGNMENT: usize = 8;
    const MAX_ALIGNMENT: usize = 8;
    const USE_ALLOCATION_OFFSET: bool = false;
    const ALLOC_END_ALIGNMENT: usize = 8;
}

/// The MMTk instance. MMTk's own state is process-global, so there is exactly one, leaked.
pub(crate) static MMTK_INSTANCE: OnceLock<&'static MMTK<Tally>> = OnceLock::new();

/// The single mutator, owned by the live `Heap` (null before it exists and after it is dropped).
pub(crate) static MUTATOR: AtomicPtr<Mutator<Tally>> = AtomicPtr::new(ptr::null_mut());

/// Addresses that serve as thread identities for MMTk: its `tls` values are opaque tokens, and
/// an array guarantees the two are distinct.
static THREAD_TOKENS: [u8; 2] = [0, 0];

pub(crate) fn mutator_tls() -> VMMutatorThread {
    VMMutatorThread(VMThread(OpaquePointer::from_address(Address::from_ptr(
        &THREAD_TOKENS[0],
    ))))
}

fn worker_tls() -> VMWorkerThread {
    VMWorkerThread(VMThread(OpaquePointer::from_address(Address::from_ptr(
        &THREAD_TOKENS[1],
    ))))
}

/// Ends the process after a failure that leaves the heap in an unknown state, where unwinding
/// would only let the VM run on with dangling references (or leave the other side of the
/// rendezvous waiting forever).
pub(crate) fn fatal(message: &str) -> ! {
    eprintln!("tally-heap: fatal: {message}");
    std::process::abort()
}

// ---------------------------------------------------------------------------------------------
// Rendezvous

pub(crate) struct Rendezvous {
    state: Mutex<RendezvousState>,
    changed: Condvar,
}

struct RendezvousState {
    /// The mutator has published its roots and is asleep until the epoch changes.
    stopped: bool,
    /// Bumped by every `resume_mutators`.
    epoch: u64,
    /// The published root buffer (address, length in values); valid while `stopped`.
    roots: usize,
    roots_len: usize,
}

pub(crate) static RENDEZVOUS: Rendezvous = Rendezvous {
    state: Mutex::new(RendezvousState {
        stopped: false,
        epoch: 0,
        roots: 0,
        roots_len: 0,
    }),
    changed: Condvar::new(),
};

impl Rendezvous {
    fn lock(&self) -> MutexGuard<'_, RendezvousState> {
        // A panic while holding this lock aborts (see `fatal`), so poisoning carries no meaning.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Mutator side: publish the root buffer, then sleep until the collection is over.
    pub(crate) fn park_mutator(&self, roots: *mut Value, len: usize) {
        let mut st = self.lock();
        st.roots = roots as usize;
        st.roots_len = len;
        st.stopped = true;
        let epoch = st.epoch;
        self.changed.notify_all();
        while st.epoch == epoch {
            st = self
                .changed
                .wait(st)
                .unwrap_or_else(PoisonError::into_inner);
        }
    }

    fn wait_until_stopped(&self) {
        let mut st = self.lock();
        while !st.stopped {
            st = self
                .changed
                .wait(st)
                .unwrap_or_else(PoisonError::into_inner);
        }
    }

    fn resume(&self) {
        let mut st = self.lock();
        st.stopped = false;
        st.roots = 0;
        st.roots_len = 0;
        st.epoch += 1;
        self.changed.notify_all();
    }

    fn published_roots(&self) -> (usize, usize) {
        let st = self.lock();
        debug_assert!(st.stopped, "roots read while the mutator runs");
        (st.roots, st.roots_len)
    }
}

// ---------------------------------------------------------------------------------------------
// Slots

/// A word that holds a `Value`: a field of an object or an entry of the root buffer. Only
/// `…000` non-zero values are references; everything else is an immediate the GC skips.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub struct ValueSlot(Address);

impl ValueSlot {
    /// A slot for the write barrier's slow path, which names the store's slot; MMTk's object
    /// barrier remembers the whole object and never loads or stores through it.
    pub(crate) fn at(address: Address) -> ValueSlot {
        ValueSlot(address)
    }
}

impl Slot for ValueSlot {
    fn load(&self) -> Option<ObjectReference> {
        // SAFETY: slots MMTk loads from are made only for words inside objects being scanned in
        // the current collection, or for entries of the published root buffer, which is not touched by its
        // owner until the collection ends. Both are 8-aligned, initialised words.
        let v = Value(unsafe { self.0.load::<u64>() });
        if v.is_ref() {
            ObjectReference::from_raw_address(Address::from_ptr(v.0 as usize as *const u8))
        } else {
            None
        }
    }

    fn store(&self, object: ObjectReference) {
        // SAFETY: as in `load`; MMTk stores the new address of the object the slot referred to,
        // and no other thread writes the same slot.
        unsafe {
            self.0
                .store::<u64>(object.to_raw_address().as_usize() as u64)
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Object model

pub struct TallyObjectModel;

/// Header word 1 (sizes) of an object MMTk handed us.
fn word1(object: ObjectReference) -> u64 {
    // SAFETY: MMTk passes only references to objects allocated by `Heap::alloc`, which all have
    // two header words; word 1 is never overwritten by forwarding, so it is readable even while
    // another worker is forwarding the object.
    unsafe { (object.to_raw_address() + 8usize).load::<u64>() }
}

impl ObjectModel<Tally> for TallyObjectModel {
    // SemiSpace needs neither the log bit nor the mark bit for its copy spaces, but the common
    // spaces it brings along (immortal, large objects) do: side metadata keeps them out of the
    // header, which has no spare bits.
    const GLOBAL_LOG_BIT_SPEC: VMGlobalLogBitSpec = VMGlobalLogBitSpec::side_first();
    // The forwarding pointer replaces header word 0 of a dead copy; the forwarding state lives
    // in its two low bits, which the layout keeps zero in live objects.
    const LOCAL_FORWARDING_POINTER_SPEC: VMLocalForwardingPointerSpec =
        VMLocalForwardingPointerSpec::in_header(0);
    const LOCAL_FORWARDING_BITS_SPEC: VMLocalForwardingBitsSpec =
        VMLocalForwardingBitsSpec::in_header(0);
    const LOCAL_MARK_BIT_SPEC: VMLocalMarkBitSpec = VMLocalMarkBitSpec::side_first();
    const LOCAL_LOS_MARK_NURSERY_SPEC: VMLocalLOSMarkNurserySpec =
        VMLocalLOSMarkNurserySpec::side_after(Self::LOCAL_MARK_BIT_SPEC.as_spec());

    const UNIFIED_OBJECT_REFERENCE_ADDRESS: bool = true;
    const OBJECT_REF_OFFSET_LOWER_BOUND: isize = 0;

    fn copy(
        from: ObjectReference,
        semantics: CopySemantics,
        copy_context: &mut GCWorkerCopyContext<Tally>,
    ) -> ObjectReference {
        let bytes = size_from_word1(word1(from));
        let dst = copy_context.alloc_copy(from, bytes, 8, 0, semantics);
        // SAFETY: `from` is a live object of `bytes` bytes that this worker has claimed for
        // forwarding, and `dst` is a fresh to-space region of the same size, so the ranges are
        // valid and disjoint.
        unsafe {
            ptr::copy_nonoverlapping(
                from.to_raw_address().to_ptr::<u8>(),
                dst.to_mut_ptr::<u8>(),
                bytes,
            )
        };
        let to = ObjectReference::from_raw_address(dst)
            .unwrap_or_else(|| fatal("the copying allocator returned a null address"));
        // Clears the "being forwarded" bits that were copied along with header word 0.
        copy_context.post_copy(to, bytes, semantics);
        to
    }

    fn copy_to(from: ObjectReference, to: ObjectReference, region: Address) -> Address {
        let bytes = size_from_word1(word1(from));
        let dst = to.to_raw_address();
        debug_assert_eq!(dst, region);
        if dst != from.to_raw_address() {
            // SAFETY: compacting plans call this with a reserved destination big enough for the
            // object; `copy` (memmove) tolerates the overlap sliding compaction produces.
            unsafe {
                ptr::copy(
                    from.to_raw_address().to_ptr::<u8>(),
                    dst.to_mut_ptr::<u8>(),
                    bytes,
                )
            };
        }
        dst + bytes
    }

    fn get_reference_when_copied_to(_from: ObjectReference, to: Address) -> ObjectReference {
        ObjectReference::from_raw_address(to)
            .unwrap_or_else(|| fatal("asked for an object reference at address 0"))
    }

    fn get_current_size(object: ObjectReference) -> usize {
        size_from_word1(word1(object))
    }

    fn get_size_when_copied(object: ObjectReference) -> usize {
        size_from_word1(word1(object))
    }

    fn get_align_when_copied(_object: ObjectReference) -> usize {
        8
    }

    fn get_align_offset_when_copied(_object: ObjectReference) -> usize {
        0
    }

    fn get_type_descriptor(_reference: ObjectReference) -> &'static [i8] {
        unimplemented!("Tally objects have no type descriptors")
    }

    fn ref_to_object_start(object: ObjectReference) -> Address {
        object.to_raw_address()
    }

    fn ref_to_header(object: ObjectReference) -> Address {
        object.to_raw_address()
    }

    fn dump_object(object: ObjectReference) {
        // SAFETY: as in `word1`: every object has two readable header words.
        let w0 = unsafe { object.to_raw_address().load::<u64>() };
        eprintln!(
            "object {object:?}: header {w0:#018x} {:#018x}",
            word1(object)
        );
    }
}

// ---------------------------------------------------------------------------------------------
// Scanning

pub struct TallyScanning;

/// Roots per work packet: enough to amortise a packet, few enough to share among workers.
const ROOTS_PER_PACKET: usize = 4096;

/// How many objects one `scan_object_and_trace_edges` call may scan eagerly (see there).
const EAGER_SCAN_BUDGET: usize = 1024;

thread_local! {
    /// Each GC worker's stack for eager scanning, kept to avoid an allocation per object.
    static EAGER_STACK: Cell<Vec<ObjectReference>> = const { Cell::new(Vec::new()) };
}

/// Whether `object` has already been claimed for copying in this collection (or lives outside
/// the copy spaces, where the bits stay zero and tracing does not move it anyway).
fn is_forwarded_or_being_forwarded(object: ObjectReference) -> bool {
    <TallyObjectModel as ObjectModel<Tally>>::LOCAL_FORWARDING_BITS_SPEC.load_atomic::<Tally, u8>(
        object,
        None,
        Ordering::Relaxed,
    ) != 0
}

/// Traces every reference slot of `object`, storing the new addresses, and pushes the children
/// this call copied onto `copied`.
fn trace_slots<OT: ObjectTracer>(
    object: ObjectReference,
    tracer: &mut OT,
    copied: &mut Vec<ObjectReference>,
) {
    let base = object.to_raw_address() + HEADER_BYTES;
    for i in 0..slots_from_word1(word1(object)) {
        let slot = base + i * 8;
        // SAFETY: `object` is a live object (to-space or large) whose copy is complete, and `i` is
        // below its slot count, so the word lies inside it. Atomic because another worker may scan
        // the same object at the same time (eager scanning duplicates work), storing the same
        // values.
        let v = Value(unsafe { slot.atomic_load::<AtomicU64>(Ordering::Relaxed) });
        if !v.is_ref() {
            continue;
        }
        let Some(child) =
            ObjectReference::from_raw_address(Address::from_ptr(v.0 as usize as *const u8))
        else {
            continue;
        };
        let unclaimed = !is_forwarded_or_being_forwarded(child);
        let moved = tracer.trace_object(child);
        if moved != child {
            // SAFETY: as for the load above.
            unsafe {
                slot.atomic_store::<AtomicU64>(
                    moved.to_raw_address().as_usize() as u64,
                    Ordering::Relaxed,
                )
            };
            if unclaimed {
                copied.push(moved);
            }
        }
    }
}

impl Scanning<Tally> for TallyScanning {
    /// Tally traces objects itself (`scan_object_and_trace_edges`) so that it can scan what it
    /// copies right away; see there.
    fn support_slot_enqueuing(_tls: VMWorkerThread, _object: ObjectReference) -> bool {
        false
    }

    fn scan_object<SV: SlotVisitor<ValueSlot>>(
        _tls: VMWorkerThread,
        object: ObjectReference,
        slot_visitor: &mut SV,
    ) {
        let base = object.to_raw_address() + HEADER_BYTES;
        for i in 0..slots_from_word1(word1(object)) {
            let slot = base + i * 8;
            // SAFETY: `object` is a live object being scanned and `i` is below its slot count,
            // so the word lies inside it.
            let v = Value(unsafe { slot.load::<u64>() });
            // Filtering here keeps immediates (most slots) out of MMTk's slot queues.
            if v.is_ref() {
                slot_visitor.visit_slot(ValueSlot(slot));
            }
        }
    }

    /// Traces `object`'s references and then, depth first, those of the objects this call
    /// copied, up to [`EAGER_SCAN_BUDGET`] objects.
    ///
    /// Why: MMTk turns each batch of newly copied objects into a new work packet (with a fresh
    /// 32 KiB queue). For a linked list each batch is one object, which made collections cost
    /// microseconds per list node. Scanning copies at once, Cheney-style, turns that into one
    /// batch per budget's worth of objects and also places children next to their parents.
    /// The objects scanned eagerly are still queued by MMTk and scanned a second time; that scan
    /// finds every child already moved and only re-reads the slots.
    fn scan_object_and_trace_edges<OT: ObjectTracer>(
        _tls: VMWorkerThread,
        object: ObjectReference,
        object_tracer: &mut OT,
    ) {
        let mut stack = EAGER_STACK.with(Cell::take);
        trace_slots(object, object_tracer, &mut stack);
        let mut budget = EAGER_SCAN_BUDGET;
        while let Some(next) = stack.pop() {
            if budget == 0 {
                // The rest are in MMTk's queue already and will be scanned from there.
                stack.clear();
                break;
            }
            budget -= 1;
            trace_slots(next, object_tracer, &mut stack);
        }
        EAGER_STACK.with(|s| s.set(stack));
    }

    fn notify_initial_thread_scan_complete(_partial_scan: bool, _tls: VMWorkerThread) {}

    fn scan_roots_in_mutator_thread(
        _tls: VMWorkerThread,
        _mutator: &'static mut Mutator<Tally>,
        mut factory: impl RootsWorkFactory<ValueSlot>,
    ) {
        // The only mutator's roots are the buffer it published before parking; it holds
        // nothing but references (immediates were dropped while filling it).
        let (start, len) = RENDEZVOUS.published_roots();
        let mut i = 0;
        while i < len {
            let end = (i + ROOTS_PER_PACKET).min(len);
            let slots = (i..end)
                .map(|j| ValueSlot(Address::from_ptr((start + j * 8) as *const Value)))
                .collect();
            factory.create_process_roots_work(slots);
            i = end;
        }
    }

    fn scan_vm_specific_roots(_tls: VMWorkerThread, _factory: impl RootsWorkFactory<ValueSlot>) {
        // Every root, globals included, comes through the mutator's `RootSet`.
    }

    fn supports_return_barrier() -> bool {
        false
    }

    fn prepare_for_roots_re_scanning() {}
}

// ---------------------------------------------------------------------------------------------
// Collection

pub struct TallyCollection;

impl Collection<Tally> for TallyCollection {
    fn stop_all_mutators<F>(_tls: VMWorkerThread, mut mutator_visitor: F)
    where
        F: FnMut(&'static mut Mutator<Tally>),
    {
        RENDEZVOUS.wait_until_stopped();
        let m = MUTATOR.load(Ordering::Acquire);
        if !m.is_null() {
            // SAFETY: the mutator lives in a leaked-until-drop box owned by `Heap`, and its
            // thread is asleep in `park_mutator` inside `Heap::alloc`/`collect` (we just waited
            // for that), so MMTk may use it until `resume_mutators`.
            mutator_visitor(unsafe { &mut *m });
        }
    }

    fn resume_mutators(_tls: VMWorkerThread) {
        RENDEZVOUS.resume();
    }

    fn block_for_gc(_tls: VMMutatorThread) {
        crate::heap::pause_mutator_for_gc();
    }

    fn spawn_gc_thread(_tls: VMThread, ctx: GCThreadContext<Tally>) {
        let GCThreadContext::Worker(worker) = ctx;
        let mmtk = *MMTK_INSTANCE
            .get()
            .unwrap_or_else(|| fatal("GC thread requested before MMTk was published"));
        std::thread::Builder::new()
            .name("tally-gc".into())
            .spawn(move || {
                // A panicking worker would leave the mutator parked forever: crash instead.
                let run = catch_unwind(AssertUnwindSafe(move || worker.run(worker_tls(), mmtk)));
                if run.is_err() {
                    fatal("a GC worker thread panicked");
                }
            })
            .unwrap_or_else(|e| fatal(&format!("cannot spawn a GC worker thread: {e}")));
    }

    fn out_of_memory(_tls: VMThread, err_kind: AllocationError) {
        match err_kind {
            // Returning makes MMTk's allocation return a null address, which `Heap::alloc`
            // turns into `Err(OutOfMemory)`.
            AllocationError::HeapOutOfMemory => {}
            // MMTk cannot continue after the OS refused memory (it would hit `unreachable!`).
            AllocationError::MmapOutOfMemory => {
                fatal("the operating system refused to map more memory for the heap")
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Active plan

pub struct TallyActivePlan;

impl ActivePlan<Tally> for TallyActivePlan {
    fn is_mutator(tls: VMThread) -> bool {
        tls == mutator_tls().0
    }

    fn mutator(_tls: VMMutatorThread) -> &'static mut Mutator<Tally> {
        let m = MUTATOR.load(Ordering::Acquire);
        if m.is_null() {
            fatal("MMTk asked for the mutator after the heap was dropped");
        }
        // SAFETY: non-null means the `Heap` owning the box is alive; MMTk asks for it only from
        // the mutator's own allocation path or while the mutator is parked.
        unsafe { &mut *m }
    }

    fn mutators<'a>() -> Box<dyn Iterator<Item = &'a mut Mutator<Tally>> + 'a> {
        let m = MUTATOR.load(Ordering::Acquire);
        // SAFETY: as in `mutator`; called during a pause, when the mutator is parked.
        Box::new(unsafe { m.as_mut() }.into_iter())
    }

    fn number_of_mutators() -> usize {
        usize::from(!MUTATOR.load(Ordering::Acquire).is_null())
    }
}

// ---------------------------------------------------------------------------------------------
// Reference glue: SOM has no weak references or finalizers, so none of this is ever called.

pub struct TallyReferenceGlue;

impl ReferenceGlue<Tally> for TallyReferenceGlue {
    type FinalizableType = ObjectReference;

    fn clear_referent(_new_reference: ObjectReference) {
        unimplemented!("Tally has no weak references")
    }

    fn get_referent(_object: ObjectReference) -> Option<ObjectReference> {
        unimplemented!("Tally has no weak references")
    }

    fn set_referent(_reff: ObjectReference, _referent: ObjectReference) {
        unimplemented!("Tally has no weak references")
    }

    fn enqueue_references(_references: &[ObjectReference], _tls: VMWorkerThread) {}
}
