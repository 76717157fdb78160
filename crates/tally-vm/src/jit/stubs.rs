//! The runtime stubs compiled code calls: `extern "C"` functions over the same routines the
//! interpreter uses (sends, blocks, yieldpoints), so each semantic exists once. Each takes the
//! VM first; the caller has saved the top frame's `ip` and the stack height, and every heap
//! reference it needs afterwards is re-read from the value stack (a stub may collect).

use tally_heap::Value;
use tally_profile::flag;

use super::Status;
use crate::profiling::Dispatch;
use crate::{Vm, VmError};

/// Addresses of the stubs, for code generators.
#[derive(Clone, Debug)]
pub struct Stubs {
    /// `(vm, site) -> Status`: a send from a site (inline cache, lookup, primitive, frame).
    pub send: usize,
    /// `(vm, site) -> Status`: a super send.
    pub super_send: usize,
    /// `(vm, site) -> Status`: a binary send whose small-integer fast path failed: doubles
    /// and Booleans answered in place, anything else sent.
    pub send_binary: usize,
    /// `(vm, site, is_nil) -> Status`: `isNil` (1) or `notNil` (0).
    pub send_nil_test: usize,
    /// `(vm, code) -> Status`: pushes a new closure of block `code` over the top frame.
    pub push_block: usize,
    /// `(vm, index) -> Value`: a literal.
    pub literal: usize,
    /// `(vm, slot) -> Value`: a global's value, `Value::NONE` when undefined.
    pub global: usize,
    /// `(vm) -> Status`: a loop back-edge whose flag test found a bit raised.
    pub back_edge: usize,
    /// `(vm) -> Status`: the epilogue yieldpoint after compiled code popped a directly
    /// called frame and found the exit depth tripped.
    pub epilogue: usize,
    /// `(vm, table, value) -> 0`: counts `value` in the value table at address `table`, the
    /// out-of-line path of the count compiled code makes inline
    /// (`tally_profile::values::ValueTable::record_slow`).
    pub record_value: usize,
    /// `(vm, string, other) -> 0 | 1`: String's `=` primitive for a receiver that is a String
    /// (exactly), as a pure function: no allocation, no frames, no failure.
    pub string_equal: usize,
    /// `(vm, object) -> 0`: the write barrier's slow path (`tally_heap::barrier::remember`)
    /// for an old object compiled code stored a reference into; pure like `string_equal`.
    pub write_barrier: usize,
    /// `(vm, kind) -> Status`: the method hooks (GC hints, phases) of the method whose frame
    /// is on top, at its entry (`kind` 0) or before its return (1), while
    /// `method_hooks_armed` is set.
    pub method_hook: usize,
    /// The optimizing tier's calls, each run to completion (`ir_stubs`), answering the result or
    /// `Value::NONE` (leave): `(vm, site, operands, argc)` a send, a super send;
    /// `(vm, code, operands, argc)` a method's call; `(vm, operands, argc)` a block's.
    pub ir_send: usize,
    pub ir_super_send: usize,
    pub ir_call_method: usize,
    pub ir_call_block: usize,
    /// `(vm, code, receiver, context) -> Value`: a new closure (`Value::NONE`: an error).
    pub ir_make_block: usize,
    /// `(vm, code) -> Value`: the context of a directly called activation of `code`.
    pub ir_new_context: usize,
    /// `(vm, code) -> Value`: the context of the top frame's activation of `code`, made at an
    /// exit of a version that kept it virtual (`Value::NONE`: an error).
    pub ir_home_context: usize,
    /// `(vm, size, outer) -> Value`: the context of an inlined activation (`Value::NONE`: an
    /// error).
    pub ir_inlined_context: usize,
    /// `(vm, code) -> 0`: the profiler's prologue hook of a call of `code` that compiled code
    /// does in place, while a bit of `Layout::call_hook_bits` is raised.
    pub ir_call_hook: usize,
    /// `(vm, class) -> Value`: `Class>>new` of a class object (`Value::NONE`: an error).
    pub ir_new_instance: usize,
    /// `(vm, class, n) -> Value`: `Array class>>new:` (`Value::NONE`: an error).
    pub ir_new_indexable: usize,
    /// `(vm, bits) -> Value`: a heap Double of a double no immediate holds (`Value::NONE`:
    /// an error).
    pub ir_box_double: usize,
    /// `(f64) -> f64`: Double's `sin` and `cos` (no VM: they neither allocate nor fail).
    pub double_sin: usize,
    pub double_cos: usize,
    /// `(vm, frame, status) -> Value`: a directly called activation's frame, left to the
    /// interpreter, run to its return.
    pub ir_interpret: usize,
    /// `(vm, frame) -> Value`: what a directly called activation whose call answered
    /// `Value::NONE` returns (its own value when a non-local return ended at it).
    pub ir_left: usize,
}

impl Stubs {
    pub(super) fn new() -> Stubs {
        Stubs {
            send: send as *const () as usize,
            super_send: super_send as *const () as usize,
            send_binary: send_binary as *const () as usize,
            send_nil_test: send_nil_test as *const () as usize,
            push_block: push_block as *const () as usize,
            literal: literal as *const () as usize,
            global: global as *const () as usize,
            back_edge: back_edge as *const () as usize,
            epilogue: epilogue as *const () as usize,
            record_value: record_value as *const () as usize,
            string_equal: string_equal as *const () as usize,
            write_barrier: write_barrier as *const () as usize,
            method_hook: method_hook as *const () as usize,
            ir_send: super::ir_stubs::send as *const () as usize,
            ir_super_send: super::ir_stubs::super_send as *const () as usize,
            ir_call_method: super::ir_stubs::call_method as *const () as usize,
            ir_call_block: super::ir_stubs::call_block as *const () as usize,
            ir_make_block: super::ir_stubs::make_block as *const () as usize,
            ir_new_context: super::ir_stubs::new_context as *const () as usize,
            ir_home_context: super::ir_stubs::home_context as *const () as usize,
            ir_inlined_context: super::ir_stubs::inlined_context as *const () as usize,
            ir_call_hook: super::ir_stubs::call_hook as *const () as usize,
            ir_new_instance: super::ir_stubs::new_instance as *const () as usize,
            ir_new_indexable: super::ir_stubs::new_indexable as *const () as usize,
            ir_box_double: super::ir_stubs::box_double as *const () as usize,
            double_sin: super::ir_stubs::double_sin as *const () as usize,
            double_cos: super::ir_stubs::double_cos as *const () as usize,
            ir_interpret: super::ir_stubs::interpret as *const () as usize,
            ir_left: super::ir_stubs::left as *const () as usize,
        }
    }

    /// Each stub's address with its field's name, so listings can print `stub:send` where
    /// compiled code holds an address that changes from run to run (ASLR). The pattern names
    /// every field, so a stub added later does not compile until it is named here too.
    pub fn named(&self) -> [(&'static str, usize); 29] {
        let Stubs {
            send,
            super_send,
            send_binary,
            send_nil_test,
            push_block,
            literal,
            global,
            back_edge,
            epilogue,
            record_value,
            string_equal,
            write_barrier,
            method_hook,
            ir_send,
            ir_super_send,
            ir_call_method,
            ir_call_block,
            ir_make_block,
            ir_new_context,
            ir_home_context,
            ir_inlined_context,
            ir_call_hook,
            ir_new_instance,
            ir_new_indexable,
            ir_box_double,
            double_sin,
            double_cos,
            ir_interpret,
            ir_left,
        } = self;
        [
            ("send", *send),
            ("super_send", *super_send),
            ("send_binary", *send_binary),
            ("send_nil_test", *send_nil_test),
            ("push_block", *push_block),
            ("literal", *literal),
            ("global", *global),
            ("back_edge", *back_edge),
            ("epilogue", *epilogue),
            ("record_value", *record_value),
            ("string_equal", *string_equal),
            ("write_barrier", *write_barrier),
            ("method_hook", *method_hook),
            ("ir_send", *ir_send),
            ("ir_super_send", *ir_super_send),
            ("ir_call_method", *ir_call_method),
            ("ir_call_block", *ir_call_block),
            ("ir_make_block", *ir_make_block),
            ("ir_new_context", *ir_new_context),
            ("ir_home_context", *ir_home_context),
            ("ir_inlined_context", *ir_inlined_context),
            ("ir_call_hook", *ir_call_hook),
            ("ir_new_instance", *ir_new_instance),
            ("ir_new_indexable", *ir_new_indexable),
            ("ir_box_double", *ir_box_double),
            ("double_sin", *double_sin),
            ("double_cos", *double_cos),
            ("ir_interpret", *ir_interpret),
            ("ir_left", *ir_left),
        ]
    }
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
    guarded(vm, |vm| {
        count_stub_send(vm, site);
        vm.send(site, false)
    })
}

extern "C" fn super_send(vm: *mut Vm, site: u32) -> u32 {
    guarded(vm, |vm| {
        count_stub_send(vm, site);
        vm.send(site, true)
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
        Ok(())
    })
}
