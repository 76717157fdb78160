//! The runtime stubs compiled code calls: `extern "C"` functions over the same routines the
//! interpreter uses (sends, blocks, yieldpoints), so each semantic exists once. Each takes the
//! VM first; the caller has saved the top frame's `ip` and the stack height, and every heap
//! reference it needs afterwards is re-read from the value stack (a stub may collect).

use tally_heap::Value;
use tally_profile::flag;

use super::Status;
use crate::profiling::Dispatch;
use crate::{Vm, VmError};

/// How compiled code passes a stub's argument or takes its result, in the platform's C
/// calling convention.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum StubType {
    I32,
    I64,
    F64,
}

/// One stub of the table ([`Stubs`] names each): its name (listings print `stub:NAME` for
/// its address, which changes from run to run), its address and its signature. One word,
/// as the bare address it replaces was: the VM's structures, whose offsets compiled code
/// embeds, keep their layout.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Stub(usize);

/// What the table knows of a stub.
struct StubInfo {
    name: &'static str,
    address: usize,
    params: &'static [StubType],
    ret: StubType,
}

impl Stub {
    fn info(self) -> &'static StubInfo {
        &table()[self.0]
    }

    pub fn name(self) -> &'static str {
        self.info().name
    }

    pub fn address(self) -> usize {
        self.info().address
    }

    /// How compiled code passes its arguments, in order.
    pub fn params(self) -> &'static [StubType] {
        self.info().params
    }

    pub fn ret(self) -> StubType {
        self.info().ret
    }
}

/// The Rust type of a stub's parameter or result as its table entry names it.
macro_rules! stub_rust_type {
    (vm) => { *mut Vm };
    (u32) => { u32 };
    (u64) => { u64 };
    (ptr) => { *const u64 };
    (f64) => { f64 };
}

/// How compiled code passes it.
macro_rules! stub_type {
    (vm) => {
        StubType::I64
    };
    (u32) => {
        StubType::I32
    };
    (u64) => {
        StubType::I64
    };
    (ptr) => {
        StubType::I64
    };
    (f64) => {
        StubType::F64
    };
}

/// The table of stubs: each entry's signature is checked against its function's when the
/// table is made, so the declaration compiled code calls through cannot drift from the
/// function it calls.
macro_rules! stub_table {
    ($(
        $(#[$doc:meta])*
        $name:ident = $f:path : ($($p:ident),*) -> $r:ident;
    )*) => {
        /// Every stub compiled code calls, declared once with its signature; both tiers call
        /// through these entries.
        #[derive(Clone, Debug)]
        pub struct Stubs {
            $( $(#[$doc])* pub $name: Stub, )*
        }

        /// The stubs' places in the table.
        #[allow(non_camel_case_types)]
        enum Entry {
            $( $name, )*
        }

        /// The table, made once.
        fn table() -> &'static [StubInfo] {
            static TABLE: std::sync::OnceLock<Vec<StubInfo>> = std::sync::OnceLock::new();
            TABLE.get_or_init(|| {
                vec![$( StubInfo {
                    name: stringify!($name),
                    address: {
                        let f: extern "C" fn($(stub_rust_type!($p)),*) -> stub_rust_type!($r) = $f;
                        f as usize
                    },
                    params: &[$(stub_type!($p)),*],
                    ret: stub_type!($r),
                }, )*]
            })
        }

        impl Stubs {
            pub(super) fn new() -> Stubs {
                Stubs {
                    $( $name: Stub(Entry::$name as usize), )*
                }
            }

            /// Every stub, in the table's order.
            pub fn all(&self) -> Vec<Stub> {
                vec![$(self.$name),*]
            }
        }
    };
}

stub_table! {
    /// A send from a site (inline cache, lookup, primitive, frame).
    send = send: (vm, u32) -> u32;
    /// A super send.
    super_send = super_send: (vm, u32) -> u32;
    /// A binary send whose small-integer fast path failed: doubles and Booleans answered in
    /// place, anything else sent.
    send_binary = send_binary: (vm, u32) -> u32;
    /// `(vm, site, is_nil)`: `isNil` (1) or `notNil` (0).
    send_nil_test = send_nil_test: (vm, u32, u32) -> u32;
    /// `(vm, code)`: pushes a new closure of block `code` over the top frame.
    push_block = push_block: (vm, u32) -> u32;
    /// `(vm, index)`: a literal.
    literal = literal: (vm, u32) -> u64;
    /// `(vm, slot)`: a global's value, `Value::NONE` when undefined.
    global = global: (vm, u32) -> u64;
    /// A loop back-edge whose flag test found a bit raised.
    back_edge = back_edge: (vm) -> u32;
    /// The epilogue yieldpoint after compiled code popped a directly called frame and found
    /// the exit depth tripped.
    epilogue = epilogue: (vm) -> u32;
    /// `(vm, table, value) -> 0`: counts `value` in the value table at address `table`, the
    /// out-of-line path of the count compiled code makes inline
    /// (`tally_profile::values::ValueTable::record_slow`).
    record_value = record_value: (vm, u64, u64) -> u32;
    /// `(vm, string, other) -> 0 | 1`: String's `=` primitive for a receiver that is a String
    /// (exactly), as a pure function: no allocation, no frames, no failure.
    string_equal = string_equal: (vm, u64, u64) -> u32;
    /// `(vm, object) -> 0`: the write barrier's slow path (`tally_heap::barrier::remember`)
    /// for an old object compiled code stored a reference into; pure like `string_equal`.
    write_barrier = write_barrier: (vm, u64) -> u32;
    /// `(vm, kind)`: the method hooks (GC hints, phases) of the method whose frame is on
    /// top, at its entry (`kind` 0) or before its return (1), while `method_hooks_armed` is
    /// set.
    method_hook = method_hook: (vm, u32) -> u32;
    /// The optimizing tier's calls, each run to completion (`ir_stubs`), answering the
    /// result or `Value::NONE` (leave): `(vm, site, operands, argc)` a send, a super send;
    /// `(vm, code, operands, argc)` a method's call; `(vm, operands, argc)` a block's.
    ir_send = super::ir_stubs::send: (vm, u32, ptr, u32) -> u64;
    ir_super_send = super::ir_stubs::super_send: (vm, u32, ptr, u32) -> u64;
    ir_call_method = super::ir_stubs::call_method: (vm, u32, ptr, u32) -> u64;
    ir_call_block = super::ir_stubs::call_block: (vm, ptr, u32) -> u64;
    /// `(vm, code, receiver, context)`: a new closure (`Value::NONE`: an error).
    ir_make_block = super::ir_stubs::make_block: (vm, u32, u64, u64) -> u64;
    /// `(vm, code)`: the context of a directly called activation of `code`.
    ir_new_context = super::ir_stubs::new_context: (vm, u32) -> u64;
    /// `(vm, size, outer)`: the context of an inlined activation (`Value::NONE`: an error).
    ir_inlined_context = super::ir_stubs::inlined_context: (vm, u64, u64) -> u64;
    /// `(vm, code) -> 0`: the profiler's prologue hook of a call of `code` that compiled
    /// code does in place, while a bit of `Layout::call_hook_bits` is raised.
    ir_call_hook = super::ir_stubs::call_hook: (vm, u32) -> u32;
    /// `(vm, class)`: `Class>>new` of a class object (`Value::NONE`: an error).
    ir_new_instance = super::ir_stubs::new_instance: (vm, u64) -> u64;
    /// `(vm, class, n)`: `Array class>>new:` (`Value::NONE`: an error).
    ir_new_indexable = super::ir_stubs::new_indexable: (vm, u64, u64) -> u64;
    /// `(vm, bits)`: a heap Double of a double no immediate holds (`Value::NONE`: an error).
    ir_box_double = super::ir_stubs::box_double: (vm, u64) -> u64;
    /// Double's `sin` and `cos` (no VM: they neither allocate nor fail).
    double_sin = super::ir_stubs::double_sin: (f64) -> f64;
    double_cos = super::ir_stubs::double_cos: (f64) -> f64;
    /// `(vm, table, exit, param) -> status`: the frames an exit of the version whose tables
    /// are at `table` describes, rebuilt from its plan and the exit buffer (`param`: the
    /// failed guard's reason, or a yieldpoint's status); `rebuild::REBUILD_FAILED` with an
    /// error parked.
    ir_exit = super::rebuild::exit: (vm, u64, u32, u32) -> u32;
    /// `(vm, frame, status)`: a directly called activation's frame, left to the
    /// interpreter, run to its return.
    ir_interpret = super::ir_stubs::interpret: (vm, u64, u32) -> u64;
    /// `(vm, frame)`: what a directly called activation whose call answered `Value::NONE`
    /// returns (its own value when a non-local return ended at it).
    ir_left = super::ir_stubs::left: (vm, u64) -> u64;
}

/// Runs `body` on the VM behind `vm` and turns its outcome into a status: `Continue` when the
/// frames are as they were (the same depth, the top one still at the `ip` the compiled code
/// saved), `Called` when they changed (a frame pushed, or `restart` moved the top one back to
/// its start), `Error` with the error parked. A panic (a VM bug) must not unwind through
/// compiled frames: it becomes a fatal error.
fn guarded(vm: *mut Vm, body: impl FnOnce(&mut Vm) -> Result<(), VmError>) -> u32 {
    // SAFETY: compiled code passes on the `*mut Vm` the dispatcher gave it, which points at
    // the live VM; the dispatcher holds no other reference while compiled code runs.
    let vm = unsafe { &mut *vm };
    let depth = vm.rt.frames.len();
    let ip = vm.rt.frames.top().ip;
    let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| body(&mut *vm)));
    let result = match outcome {
        Ok(r) => r,
        Err(_) => Err(VmError::Fatal("the VM failed inside compiled code".into())),
    };
    match result {
        Ok(()) if vm.rt.frames.len() == depth && vm.rt.frames.top().ip == ip => {
            Status::Continue as u32
        }
        Ok(()) => Status::Called as u32,
        Err(e) => {
            vm.jit.error = Some(e);
            Status::Error as u32
        }
    }
}

/// Counts a trip through a send stub at `site` (see `Site::stub_sends`).
fn count_stub_send(vm: &mut Vm, site: u32) {
    if let Some(s) = vm.rt.sites.get_mut(site as usize) {
        s.stub_sends += 1;
    }
}

extern "C" fn record_value(_vm: *mut Vm, table: u64, value: u64) -> u32 {
    // SAFETY: compiled code passes the address of a table the VM keeps alive for as long as
    // any code refers to it (`SiteProfiles` holds every table for the VM's life).
    let table = unsafe { &*(table as usize as *const tally_profile::values::ValueTable) };
    table.record_slow(value);
    0
}

extern "C" fn string_equal(vm: *mut Vm, string: u64, other: u64) -> u32 {
    // SAFETY: as for `guarded`; this stub only reads the VM.
    let vm = unsafe { &*vm };
    let equal = match (vm.text_slice(Value(string)), vm.text_slice(Value(other))) {
        (Some(a), Some(b)) => a == b,
        _ => false,
    };
    u32::from(equal)
}

extern "C" fn write_barrier(_vm: *mut Vm, object: u64) -> u32 {
    tally_heap::barrier::remember(object);
    0
}

extern "C" fn method_hook(vm: *mut Vm, kind: u32) -> u32 {
    let kind = if kind == 0 {
        tally_profile::gc_hints::PointKind::Entry
    } else {
        tally_profile::gc_hints::PointKind::Exit
    };
    guarded(vm, |vm| vm.method_hook_in_compiled(kind))
}

extern "C" fn send(vm: *mut Vm, site: u32) -> u32 {
    send_from(vm, site, false)
}

extern "C" fn super_send(vm: *mut Vm, site: u32) -> u32 {
    send_from(vm, site, true)
}

/// A send, or (`is_super`) a super send, from `site`.
fn send_from(vm: *mut Vm, site: u32, is_super: bool) -> u32 {
    guarded(vm, |vm| {
        count_stub_send(vm, site);
        vm.send(site, is_super)
    })
}

extern "C" fn send_binary(vm: *mut Vm, site: u32) -> u32 {
    guarded(vm, |vm| {
        count_stub_send(vm, site);
        if vm.answer_binary_in_place(site) {
            return Ok(());
        }
        vm.send(site, false)
    })
}

extern "C" fn send_nil_test(vm: *mut Vm, site: u32, is_nil: u32) -> u32 {
    guarded(vm, |vm| {
        count_stub_send(vm, site);
        if vm.rt.nil_tests.standard() {
            let top = vm.rt.stack.last_mut().expect("receiver");
            *top = Value::from_bool((*top == Value::NIL) == (is_nil != 0));
            return Ok(());
        }
        vm.send(site, false)
    })
}

extern "C" fn push_block(vm: *mut Vm, code: u32) -> u32 {
    guarded(vm, |vm| vm.push_block(code))
}

extern "C" fn literal(vm: *mut Vm, index: u32) -> u64 {
    // SAFETY: as in `guarded`.
    let vm = unsafe { &*vm };
    vm.rt.literals[index as usize].0
}

extern "C" fn global(vm: *mut Vm, slot: u32) -> u64 {
    // SAFETY: as in `guarded`.
    let vm = unsafe { &*vm };
    vm.rt.globals[slot as usize].0
}

extern "C" fn back_edge(vm: *mut Vm) -> u32 {
    guarded(vm, |vm| {
        let f = vm.yieldpoint_flag();
        // A loop that tests the flag at back-edges serves everything there; the others serve
        // ring drains and stop requests, which would otherwise wait for the next call, and
        // the controller's flag, which compiled loops would otherwise test true (and call
        // this stub for) at every back-edge until some call served it.
        let wanted = match vm.running_loop {
            Some(Dispatch::Hooks | Dispatch::Counting) => f,
            _ => f & (flag::DRAIN | flag::STOP | flag::CONTROLLER),
        };
        if wanted != 0 {
            vm.profile_yieldpoint(wanted)?;
        }
        Ok(())
    })
}

extern "C" fn epilogue(vm: *mut Vm) -> u32 {
    guarded(vm, |vm| {
        // What the dispatch loop running now would do at a tripped return.
        let f = match vm.running_loop {
            Some(Dispatch::Plain) | None => 0,
            Some(_) => vm.yieldpoint_flag(),
        };
        if f & flag::ALL_YIELDPOINTS != 0 {
            vm.profile_yieldpoint(f)?;
        }
        vm.rearm_idle_bounds();
        Ok(())
    })
}
