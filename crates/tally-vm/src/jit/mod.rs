//! Compiled code: the interface to a code generator (the `tally-jit` crate implements it; this
//! crate never depends on a compiler back end), the entry state of each `Code`, and the
//! dispatcher that runs compiled frames.
//!
//! Compiled code keeps the interpreter's frames and value-stack layout: a compiled activation
//! is an ordinary `Frame` whose receiver, arguments, locals and operands sit in the value
//! stack at the heights `bytecode::stack_heights` gives, so interpreted and compiled frames mix
//! freely and the collector finds every root where it always does. A compiled function runs
//! the top frame from its saved `ip` (one entry block per instruction) until it must leave:
//! a send that pushed a frame, a return, an instruction it leaves to the interpreter, or an
//! error. It then answers a [`Status`] to [`Vm::run_compiled`], which does what the status
//! asks and runs the new top frame, compiled or not. SOM calls therefore never nest on the
//! native stack, as in the interpreter.

mod adaptive;
mod exit_plans;
mod inlining;
mod install;
mod intrinsics;
mod ir_stubs;
mod jitdump;
mod locations;
mod native_stack;
mod phase_times;
mod rebuild;
mod request;
mod safepoints;
mod stub_report;
mod stubs;
mod values;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use tally_heap::Value;
use tally_profile::flag;

use crate::profiling::LoopMode;
use crate::runtime::{Code, Runtime};
use crate::{Vm, VmError};

pub use adaptive::{AdaptiveConfig, GeneratorFactory};
pub use exit_plans::{ExitFrame, ExitHandOver, ExitObject, ExitPlan, ExitValue, MAX_EXIT_WORDS};
pub use inlining::{frame_room, inlinable, INLINED_FRAMES_ROOM, MAX_INLINED_FRAMES};
pub use intrinsics::{marks_for as intrinsics_of_selector, Intrinsic};
pub use locations::{location_chain, pack_location, unpack_location, InlineScope, MAX_SCOPES};
pub use phase_times::{PhaseTimes, Stage};
pub use rebuild::REBUILD_FAILED;
pub use request::{
    CompileRequest, DoubleFn, ExpectedReceiver, ExpectedReceivers, ExpectedTarget, PlainShape,
    SiteFacts, Speculation,
};
pub use safepoints::{SafepointMap, SafepointTable};
pub use stubs::{Stub, StubType, Stubs};

use install::{lock, Installer};

/// Which code runs the program's methods.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Tier {
    /// Everything interpreted.
    #[default]
    Interp,
    /// Every method and block compiled by the baseline compiler at its first call.
    Baseline,
    /// The optimizing compiler at its cheap level: the same IR, guards and frame states,
    /// but nothing inlined beyond what the IR builder does in place (trivial methods), and
    /// Cranelift without its optimizations.
    Quick,
    /// The optimizing compiler, on `tally-ir`: SOM values in SSA (references across calls
    /// in Cranelift's stack maps), guards from the sites' feedback, frame states for
    /// deoptimization, native calls to compiled callees.
    Opt,
}

impl Tier {
    pub fn name(self) -> &'static str {
        match self {
            Tier::Interp => "interp",
            Tier::Baseline => "baseline",
            Tier::Quick => "quick",
            Tier::Opt => "opt",
        }
    }

    /// Whether the optimizing compiler makes this tier's code (at either level): code on
    /// Tally's IR, with guards from the sites' feedback and frame states.
    pub fn is_optimizing(self) -> bool {
        matches!(self, Tier::Quick | Tier::Opt)
    }

    /// Whether the tier inlines what the profile says to (the full level only).
    pub fn inlines(self) -> bool {
        self == Tier::Opt
    }

    /// The tier as profiles and the controller name it.
    pub fn profile_tier(self) -> tally_profile::Tier {
        match self {
            Tier::Interp => tally_profile::Tier::Interpreter,
            Tier::Baseline => tally_profile::Tier::Baseline,
            Tier::Quick => tally_profile::Tier::Quick,
            Tier::Opt => tally_profile::Tier::Optimizing,
        }
    }

    /// The VM's tier for a profile's, if the VM has it.
    pub fn from_profile_tier(tier: tally_profile::Tier) -> Option<Tier> {
        match tier {
            tally_profile::Tier::Interpreter => Some(Tier::Interp),
            tally_profile::Tier::Baseline => Some(Tier::Baseline),
            tally_profile::Tier::Quick => Some(Tier::Quick),
            tally_profile::Tier::Optimizing => Some(Tier::Opt),
            tally_profile::Tier::Other(_) => None,
        }
    }
}

/// What a compiled function (or a stub it called) answers.
#[repr(u32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Status {
    /// A stub finished in place; the compiled code goes on. Never answered by a function.
    Continue = 0,
    /// A frame was pushed (or the frames changed otherwise): run the new top frame.
    Called = 1,
    /// The top frame returns the value on top of its stack.
    Returned = 2,
    /// The interpreter takes over at the saved `ip` (rare instructions, error paths).
    Interpret = 3,
    /// An error, parked in `Vm::jit_error`.
    Error = 4,
    /// A speculation failed: the frame is exact at its saved `ip` (the instruction whose
    /// guard failed), the site and reason are in [`Layout::deopt_site`] and
    /// [`Layout::deopt_reason`], and the interpreter takes over.
    Deopt = 5,
    /// An error parked in `Vm::jit_error`, or (without one) a non-local return passed
    /// through the frame and popped it (and maybe frames below it, down to its home, whose
    /// result is on top of its caller's stack): run the frames from the new top, or leave
    /// when the loop's base frame has returned.
    Unwound = 6,
}

/// Why compiled code deoptimized (`Layout::deopt_reason`).
#[repr(u32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DeoptReason {
    /// The receiver's class was not the one the site's inline cache had seen.
    ReceiverClass = 1,
    /// An operand of a binary send was not a small integer.
    NotSmallInts = 2,
    /// Small-integer arithmetic overflowed (the result needs a big integer).
    Overflow = 3,
    /// A small-integer division, remainder or shift the code does not answer: a zero
    /// divisor, a shift beyond the word, a result that is no small integer.
    IntRange = 4,
    /// An on-stack-replacement entry found a value in the frame that is not the small
    /// integer the version's loop holds there (no site failed: the interpreter runs the loop
    /// on, its sites see the value, and the next version knows).
    LoopEntry = 5,
    /// An operand of a binary send computed on doubles was no Double (nor the small
    /// integer the site had also seen there).
    NotDoubles = 6,
    /// `isNil` or `notNil`, answered by comparing with nil, has been redefined since the
    /// compile (a class loaded that defines one of them).
    NilTests = 7,
    /// A String's `length`, read from its header, found characters of more than one byte
    /// (their count is the interpreter's).
    NotAscii = 8,
}

/// `Layout::deopt_site` of a deoptimization no send site's guard made (`LoopEntry`).
pub const NO_DEOPT_SITE: u32 = u32::MAX;

impl DeoptReason {
    fn from_u32(r: u32) -> Option<DeoptReason> {
        Some(match r {
            1 => DeoptReason::ReceiverClass,
            2 => DeoptReason::NotSmallInts,
            3 => DeoptReason::Overflow,
            4 => DeoptReason::IntRange,
            5 => DeoptReason::LoopEntry,
            6 => DeoptReason::NotDoubles,
            7 => DeoptReason::NilTests,
            8 => DeoptReason::NotAscii,
            _ => return None,
        })
    }

    pub fn describe(self) -> &'static str {
        match self {
            DeoptReason::ReceiverClass => "receiver class guard failed",
            DeoptReason::NotSmallInts => "small-integer guard failed",
            DeoptReason::Overflow => "small-integer overflow",
            DeoptReason::IntRange => "small-integer operands out of the operation's range",
            DeoptReason::LoopEntry => {
                "a loop entry found a value that is not the number the loop holds"
            }
            DeoptReason::NotDoubles => "double guard failed",
            DeoptReason::NilTests => "isNil or notNil redefined",
            DeoptReason::NotAscii => "a string's length found characters of more than a byte",
        }
    }
}

/// A compiled function: runs the top frame of `vm` from its saved `ip` when `resume` is 1.
/// With `resume` 0 the frame is new (its `ip` 0), at `frame` with base `bp`: compiled code
/// calling compiled code directly passes what it just wrote instead of having the callee read
/// it back.
pub type EntryPoint = unsafe extern "C" fn(
    vm: *mut Vm,
    frame: *mut crate::frames::Frame,
    bp: u64,
    resume: u32,
) -> u32;

/// Where compiled code finds the VM's state: byte offsets from the `*mut Vm` it is given,
/// offsets inside the frame stack and frames, the yieldpoint flag, and the stubs.
#[derive(Clone, Debug)]
pub struct Layout {
    /// `vm.rt.stack`'s first slot (a pointer) and its height (a `usize`).
    pub stack_base: i32,
    pub stack_len: i32,
    /// `vm.rt.frames` (a pointer to the `FrameStack`), and in it the frame array's first
    /// frame (a pointer) and the number of live frames (a `usize`).
    pub frame_stack: i32,
    pub frames_base: i32,
    pub frames_len: i32,
    /// Size of a `Frame` and the offsets of its fields `ip` (u32), `bp` (u32), `ctx` (Value)
    /// and `mark` (u32, `tally_profile::FrameMark`).
    pub frame_size: i32,
    pub frame_ip: i32,
    pub frame_bp: i32,
    pub frame_ctx: i32,
    pub frame_mark: i32,
    /// The yieldpoint flag's byte and the bits that ask a back-edge to call
    /// `Stubs::back_edge`.
    pub yieldpoint_flag: usize,
    pub yieldpoint_bits: u8,
    /// The bits that ask a call done in place to call `Stubs::ir_call_hook`: none when the
    /// profiler does not count calls, whose code then leaves the test out.
    pub call_hook_bits: u8,
    pub stubs: Stubs,
    /// For sends that push the callee's frame and call its code directly:
    pub calls: CallLayout,
    /// Offsets from the `*mut Vm` of the two u32s a failing guard writes before it answers
    /// `Status::Deopt`: its send site and its `DeoptReason`.
    pub deopt_site: i32,
    pub deopt_reason: i32,
    /// And the u32 id of the code whose compiled version holds the guard (with inlining,
    /// not always the top frame's).
    pub deopt_code: i32,
    /// The u8 an `ir_*` stub sets when its call restarted the calling frame.
    pub restarted: i32,
    /// The u32 an `ir` body run for the dispatcher leaves the status of an exit in (it
    /// answers `Value::NONE` then); 0 when it left for an error or an unwinding.
    pub exit_status: i32,
    /// Offset of the address of the exit buffer, where an exit stores its values for
    /// `Stubs::ir_exit`.
    pub exit_buffer: i32,
    /// In a `Code`: `direct` (a `usize`) and `intrinsic` (a u8).
    pub code_direct: i32,
    pub code_intrinsic: i32,
    /// Where native code finds its frame's `NativeActivation`.
    pub native: NativeLayout,
    /// Class ids speculative code tests for.
    pub array_class: u32,
    pub string_class: u32,
    /// The object kind (`objects::Kind`) of strings whose characters are their bytes.
    pub ascii_string_kind: u8,
    /// `--count-calls`: compiled code counts its direct calls and inlined bodies in
    /// `Code::calls` (`TierCallCounter::offset_in_code`).
    pub count_calls: bool,
    /// A profile is recorded: compiled code marks its frames (`Frame::mark`).
    pub mark_frames: bool,
    /// String's class id when its `=` is the core library's primitive (equal characters,
    /// `Stubs::string_equal`), so that compiled code may answer `aString = x` without a send;
    /// None when the program's library defines it otherwise.
    pub string_with_primitive_equal: Option<u32>,
    /// The generational plans' unlog-bit table (`tally_heap::barrier::unlog_table`): stores
    /// of references into the heap check it and call `Stubs::write_barrier`. `None` under a
    /// plan without a write barrier, whose code stores bare.
    pub unlog_table: Option<u64>,
    /// The byte that is 1 while hooked methods' compiled code must call the `method_hook`
    /// stub at their entry and exit (`method_hooks::METHOD_HOOKS_ARMED`).
    pub method_hooks_armed: usize,
    /// What the optimizing tier needs to allocate plain objects and Arrays in place of the
    /// heap's fast path; `None`: every allocation takes its stub (`--gc-stress`, which
    /// counts allocations; MarkSweep's free lists; an instrumented run, which sees each
    /// object made; listings made without a running heap).
    pub alloc: Option<AllocLayout>,
}

/// [`tally_heap::InlineAllocation`] as compiled code uses it: the counters' offsets from the
/// `*mut Vm`, and the kinds it writes.
#[derive(Clone, Copy, Debug)]
pub struct AllocLayout {
    /// Address of the bump pointer's cursor (its limit is the next word).
    pub bump_pointer: usize,
    pub max_object_bytes: usize,
    /// Offsets from the `*mut Vm`: the allocation clock and object count (`u64`), the
    /// alarm's clock reading (`u64`) and the identity-hash state (`u32`).
    pub allocated_bytes: i32,
    pub allocated_objects: i32,
    pub alarm_at: i32,
    pub hash_state: i32,
    pub plain_kind: u8,
    pub array_kind: u8,
    /// Whether Array (in the program's library) has no named fields: its instances are
    /// then their elements alone, which is what compiled code makes.
    pub array_is_bare: bool,
}

/// Offsets for the optimizing tier's native activations (`frames::NativeActivation`).
#[derive(Clone, Debug)]
pub struct NativeLayout {
    /// In the frame stack: the distance (an `isize`) from a frame to its record.
    pub delta: i32,
    /// In a record: `fp` and `table` (`usize`s), `safepoint` (u32).
    pub fp: i32,
    pub table: i32,
    pub safepoint: i32,
    /// In a frame: `closure` (a Value).
    pub frame_closure: i32,
}

/// What compiled code needs to do a send itself: probe the site's inline cache, find the
/// callee's code, push its frame (as `Vm::enter` does) and call its compiled function.
#[derive(Clone, Debug)]
pub struct CallLayout {
    /// Offsets from the `*mut Vm`: the value stack's capacity (a `usize`), the first send site
    /// and the first `&Code` (pointers), the lowest native stack pointer at which compiled
    /// code may still call compiled code directly (a `usize`).
    pub stack_capacity: i32,
    pub sites_base: i32,
    pub codes_base: i32,
    /// `vm.rt.literals_base` and `vm.rt.globals_base`: the literal and global tables' first
    /// entries (pointers; the tables grow as classes load, so read each time).
    pub literals_base: i32,
    pub globals_base: i32,
    pub native_stack_limit: i32,
    /// In the frame stack: the push limit and the exit depth (`usize`s; see `FrameStack`).
    pub frames_limit: i32,
    pub frames_exit_depth: i32,
    /// A frame's `code` (u32) and `closure` (Value) fields.
    pub frame_code: i32,
    pub frame_closure: i32,
    /// A send site's size and its two cache entries (class ids and code ids, u32 each).
    pub site_size: i32,
    pub site_class1: i32,
    pub site_code1: i32,
    pub site_class2: i32,
    pub site_code2: i32,
    /// In a `Code`: the compiled entry (`usize`), `plain_frame` (u8), `num_args`,
    /// `num_locals`, `context_size` (u16 each), `room_above_arguments` (u32).
    pub code_compiled: i32,
    pub code_plain_frame: i32,
    pub code_num_args: i32,
    pub code_num_locals: i32,
    pub code_context_size: i32,
    pub code_room: i32,
    /// `trivial_kind` (u8) and `trivial_operand` (u64).
    pub code_trivial_kind: i32,
    pub code_trivial_operand: i32,
    /// The class id of small integers.
    pub integer_class: u32,
    /// The class id of symbols, all of them immediates (tag `010`): a class guard for it
    /// tests the tag.
    pub symbol_class: u32,
    /// The class id of doubles: immediate ones (tag `110`) carry no header to read it from.
    pub double_class: u32,
    /// The classes whose usual instances are the immediates `nil`, `true` and `false`, with
    /// those words: a class guard for them compares the word.
    pub immediate_classes: [(u32, u64); 3],
    /// Offsets from the `*mut Vm` of the two bytes that say whether `isNil`/`notNil` mean
    /// what the core library says (`NilTests::standard`): the first must be `0b1111`, the
    /// second 0.
    pub nil_tests_standard: i32,
    pub nil_tests_redefined: i32,
}

impl Layout {
    pub fn new(rt: &Runtime) -> Layout {
        use std::mem::offset_of;
        let stack = offset_of!(Vm, rt.stack);
        let frame = |o: usize| o as i32;
        let calls = CallLayout {
            stack_capacity: (stack + crate::value_stack::ValueStack::CAPACITY_OFFSET) as i32,
            sites_base: offset_of!(Vm, rt.sites_base) as i32,
            codes_base: offset_of!(Vm, rt.codes_base) as i32,
            literals_base: offset_of!(Vm, rt.literals_base) as i32,
            globals_base: offset_of!(Vm, rt.globals_base) as i32,
            native_stack_limit: offset_of!(Vm, jit.native_stack_limit) as i32,
            frames_limit: crate::frames::FrameStack::LIMIT_OFFSET as i32,
            frames_exit_depth: crate::frames::FrameStack::EXIT_DEPTH_OFFSET as i32,
            frame_code: frame(offset_of!(crate::frames::Frame, code)),
            frame_closure: frame(offset_of!(crate::frames::Frame, closure)),
            site_size: std::mem::size_of::<crate::runtime::Site>() as i32,
            site_class1: offset_of!(crate::runtime::Site, cached_class) as i32,
            site_code1: offset_of!(crate::runtime::Site, cached_code) as i32,
            site_class2: offset_of!(crate::runtime::Site, cached_class2) as i32,
            site_code2: offset_of!(crate::runtime::Site, cached_code2) as i32,
            code_compiled: offset_of!(Code, compiled) as i32,
            code_plain_frame: offset_of!(Code, plain_frame) as i32,
            code_num_args: offset_of!(Code, num_args) as i32,
            code_num_locals: offset_of!(Code, num_locals) as i32,
            code_context_size: offset_of!(Code, context_size) as i32,
            code_room: offset_of!(Code, room_above_arguments) as i32,
            code_trivial_kind: offset_of!(Code, trivial_kind) as i32,
            code_trivial_operand: offset_of!(Code, trivial_operand) as i32,
            integer_class: rt.core.integer,
            symbol_class: rt.core.symbol,
            double_class: rt.core.double,
            immediate_classes: [
                (rt.core.nil, Value::NIL.0),
                (rt.core.true_, Value::TRUE.0),
                (rt.core.false_, Value::FALSE.0),
            ],
            nil_tests_standard: (offset_of!(Vm, rt.nil_tests)
                + crate::runtime::NilTests::STANDARD_OFFSET) as i32,
            nil_tests_redefined: (offset_of!(Vm, rt.nil_tests)
                + crate::runtime::NilTests::REDEFINED_OFFSET)
                as i32,
        };
        Layout {
            calls,
            stack_base: (stack + crate::value_stack::ValueStack::BASE_OFFSET) as i32,
            stack_len: (stack + crate::value_stack::ValueStack::LEN_OFFSET) as i32,
            frame_stack: offset_of!(Vm, rt.frames) as i32,
            frames_base: crate::frames::FrameStack::BASE_OFFSET as i32,
            frames_len: crate::frames::FrameStack::LEN_OFFSET as i32,
            frame_size: std::mem::size_of::<crate::frames::Frame>() as i32,
            frame_ip: offset_of!(crate::frames::Frame, ip) as i32,
            frame_bp: offset_of!(crate::frames::Frame, bp) as i32,
            frame_ctx: offset_of!(crate::frames::Frame, ctx) as i32,
            frame_mark: offset_of!(crate::frames::Frame, mark) as i32,
            yieldpoint_flag: crate::profiling::YIELDPOINT.bits_address() as usize,
            yieldpoint_bits: flag::ALL_YIELDPOINTS,
            call_hook_bits: if rt.counts_calls_in_place {
                CALL_HOOK_BITS
            } else {
                0
            },
            stubs: Stubs::new(),
            native: NativeLayout {
                delta: crate::frames::FrameStack::NATIVE_DELTA_OFFSET as i32,
                fp: offset_of!(crate::frames::NativeActivation, fp) as i32,
                table: offset_of!(crate::frames::NativeActivation, table) as i32,
                safepoint: offset_of!(crate::frames::NativeActivation, safepoint) as i32,
                frame_closure: frame(offset_of!(crate::frames::Frame, closure)),
            },
            deopt_site: offset_of!(Vm, jit.deopt.site) as i32,
            deopt_reason: offset_of!(Vm, jit.deopt.reason) as i32,
            deopt_code: offset_of!(Vm, jit.deopt.code) as i32,
            restarted: offset_of!(Vm, jit.restarted) as i32,
            exit_status: offset_of!(Vm, jit.exit_status) as i32,
            exit_buffer: offset_of!(Vm, jit.exit_buffer.address) as i32,
            code_direct: offset_of!(Code, direct) as i32,
            code_intrinsic: offset_of!(Code, intrinsic) as i32,
            array_class: rt.core.array,
            string_class: rt.core.string,
            ascii_string_kind: crate::objects::Kind::AsciiString as u8,
            count_calls: rt.count_calls,
            mark_frames: rt.mark_frames,
            string_with_primitive_equal: string_with_primitive_equal(rt),
            unlog_table: tally_heap::barrier::unlog_table(),
            method_hooks_armed: crate::method_hooks::METHOD_HOOKS_ARMED.as_ptr() as usize,
            alloc: None,
        }
    }
}

/// String's class id when `String>>=` is defined in String itself as a primitive (the one
/// the VM binds to String's `=`: equal characters).
fn string_with_primitive_equal(rt: &Runtime) -> Option<u32> {
    let string = rt.core.string;
    let equal = rt.symbols.lookup("=")?;
    let code = &rt.codes[rt.find_method(string, equal)? as usize];
    (code.holder == string && code.primitive.is_some()).then_some(string)
}

/// Machine code made for one `Code`.
pub struct NativeCode {
    pub entry: EntryPoint,
    /// Bytes of machine code.
    pub size: usize,
    /// (offset of the first byte, bytecode index) for each run of machine code, sorted; a
    /// run goes on to the next entry's offset. `None`: code of no one instruction (the
    /// entry's dispatch, shared exits).
    pub pc_map: Vec<(u32, Option<u32>)>,
    /// Send sites the code speculates at (guards that deoptimize, class switches on what a
    /// site saw); 0 for code that runs whatever the program does.
    pub speculations: u32,
    /// The stack maps of code that keeps references in its native frame across calls (the
    /// optimizing tier); the VM keeps the table as long as it runs, since activations of an
    /// invalidated version may still be suspended.
    pub safepoints: Option<Arc<SafepointTable>>,
    /// The optimizing tier's direct entry (`Code::direct`), and where the machine code that
    /// samples and symbols describe starts, when `entry` is a small adapter elsewhere.
    pub direct: Option<usize>,
    pub code_start: Option<usize>,
    /// The loop heads an interpreted frame may enter the code at (on-stack replacement) in
    /// the optimizing tier, whose code is entered only at a call otherwise; empty in the
    /// baseline tier's, which resumes a frame at any instruction boundary.
    pub osr_entries: Vec<u32>,
    /// The activations the code runs, its own first, then the methods inlined into it
    /// (`pc_map`'s locations name them); empty: its own alone.
    pub scopes: Vec<InlineScope>,
    /// The closures and the contexts the code never allocates (made only by the exits whose
    /// frames hold them), for the tier log.
    pub never_made: NeverMade,
    /// Functions the compile made besides the version, which later versions of its tier
    /// share (the optimizing tier's send probes, an adapter shared by a shape): named for
    /// external profilers as the versions are.
    pub shared: Vec<SharedCode>,
}

/// A function compiled code calls that belongs to no one version.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SharedCode {
    pub name: String,
    pub start: usize,
    pub size: usize,
}

/// What a version of optimized code keeps out of the heap.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct NeverMade {
    pub closures: u32,
    pub contexts: u32,
}

impl NativeCode {
    /// The first byte of the code `size` and `pc_map` describe.
    pub fn start(&self) -> usize {
        self.code_start.unwrap_or(self.entry as usize)
    }
}

/// A compiler back end. The VM asks it for code when a method or block is first called under
/// a compiling tier; what it answers must keep the contract in the module docs.
pub trait CodeGenerator {
    /// The tier this generator compiles for.
    fn tier(&self) -> Tier;

    /// Compiles the request's code. May run on a thread other than the VM's: everything it
    /// reads of the VM is in the request.
    fn compile(&mut self, request: &CompileRequest, layout: &Layout) -> Result<NativeCode, String>;

    /// What compiling the request's code makes, as text for people (`tally disasm`): the
    /// back end's IR and the machine code, each annotated with the bytecode index it came
    /// from. Nothing is installed.
    fn listing(&mut self, request: &CompileRequest, layout: &Layout) -> Result<String, String>;
}

/// A `Code`'s compiled state: 0 to interpret, [`CompiledSlot::REQUESTED`] to compile at the
/// next call, else the entry point. One load tells the interpreter whether to look further.
#[derive(Default)]
pub struct CompiledSlot(AtomicUsize);

impl CompiledSlot {
    const REQUESTED: usize = 1;

    /// Whether there is compiled code or a compile is due: the interpreter's one test.
    #[inline(always)]
    pub fn is_set(&self) -> bool {
        self.0.load(Ordering::Relaxed) != 0
    }

    fn entry(&self) -> Option<EntryPoint> {
        match self.0.load(Ordering::Relaxed) {
            0 | Self::REQUESTED => None,
            // SAFETY: only `install` stores other values, and it stores entry points.
            a => Some(unsafe { std::mem::transmute::<usize, EntryPoint>(a) }),
        }
    }

    fn request(&self) {
        let _ = self
            .0
            .compare_exchange(0, Self::REQUESTED, Ordering::Relaxed, Ordering::Relaxed);
    }

    fn install(&self, entry: EntryPoint) {
        self.0.store(entry as usize, Ordering::Relaxed);
    }

    fn clear(&self) {
        self.0.store(0, Ordering::Relaxed);
    }
}

/// A method's calls per tier (interpreter, baseline, optimizing: `Tier::column` of the
/// profile's tiers), counted under `--count-calls` for the amortization analysis's N(m,i):
/// the interpreter counts each frame it sets up by the tier that runs it (the installed
/// version's, `tier`), compiled code counts its direct calls at entry and each inlined body
/// it enters. Beside them the loop back-edges the method's own code took in each tier (its
/// inlined copies included): the work its calls did, which tells calls that did more or less
/// work from code that ran faster or slower. Plain loads and stores from the VM thread:
/// other threads only read.
#[derive(Default)]
pub struct TierCallCounter {
    pub counts: [std::sync::atomic::AtomicU64; tally_profile::Tier::COLUMNS],
    pub loops: [std::sync::atomic::AtomicU64; tally_profile::Tier::COLUMNS],
    /// The column of the tier of the entry in `Code::compiled` (0 while interpreted).
    tier: std::sync::atomic::AtomicU8,
}

impl TierCallCounter {
    /// One call run in the tier of column `column`.
    #[inline]
    pub fn count(&self, column: usize) {
        let c = &self.counts[column];
        c.store(c.load(Ordering::Relaxed) + 1, Ordering::Relaxed);
    }

    /// One call run by whatever `Code::compiled` holds now.
    #[inline]
    pub fn count_current(&self, compiled: &CompiledSlot) {
        let column = if compiled.entry().is_some() {
            self.tier.load(Ordering::Relaxed) as usize
        } else {
            0
        };
        self.count(column);
    }

    /// The installed entry's tier changed.
    pub(crate) fn set_tier(&self, tier: Tier) {
        self.tier
            .store(tier.profile_tier().column() as u8, Ordering::Relaxed);
    }

    /// One back-edge taken in the tier of column `column`.
    #[inline]
    pub fn count_loop(&self, column: usize) {
        let c = &self.loops[column];
        c.store(c.load(Ordering::Relaxed) + 1, Ordering::Relaxed);
    }

    pub fn get(&self, column: usize) -> u64 {
        self.counts[column].load(Ordering::Relaxed)
    }

    /// Back-edges taken in the tier of `column`.
    pub fn loops(&self, column: usize) -> u64 {
        self.loops[column].load(Ordering::Relaxed)
    }

    /// The column of the installed entry's tier (also the profile's tier number).
    pub(crate) fn tier_column(&self) -> u8 {
        self.tier.load(Ordering::Relaxed)
    }

    /// Where compiled code finds the installed entry's tier column (a `u8`) in a `Code`.
    pub fn tier_offset_in_code() -> i32 {
        (std::mem::offset_of!(Code, calls) + std::mem::offset_of!(TierCallCounter, tier)) as i32
    }

    /// Where compiled code finds the counter of `column` in a `Code`.
    pub fn offset_in_code(column: usize) -> i32 {
        (std::mem::offset_of!(Code, calls)
            + std::mem::offset_of!(TierCallCounter, counts)
            + 8 * column) as i32
    }

    /// Where compiled code finds the back-edge counter of `column` in a `Code`.
    pub fn loops_offset_in_code(column: usize) -> i32 {
        (std::mem::offset_of!(Code, calls)
            + std::mem::offset_of!(TierCallCounter, loops)
            + 8 * column) as i32
    }
}

/// The VM's compiling state.
#[derive(Default)]
pub(crate) struct Jit {
    /// The generator of a compile-at-first-call tier (`--tier=baseline`), run on the VM
    /// thread.
    generator: Option<Box<dyn CodeGenerator>>,
    /// `--tier=adaptive`: the controller and the compiler thread.
    adaptive: Option<adaptive::Adaptive>,
    layout: Option<Layout>,
    /// Shared with the compiler thread.
    installer: Arc<Mutex<Installer>>,
    /// The error a stub met, for the dispatcher to return.
    pub(crate) error: Option<VmError>,
    /// Below this native stack pointer, compiled code stops calling compiled code directly
    /// and lets the dispatcher run the callee, which unwinds the chain of native frames: SOM
    /// recursion may go far deeper than the native stack; the optimizing tier's calls, which nest,
    /// end in a stack overflow (`native_stack`). Set when the generator is set.
    pub(crate) native_stack_limit: usize,
    /// Written by a failing guard (`Status::Deopt`).
    pub(crate) deopt: DeoptRecord,
    /// 1 when an `ir_*` stub answered `Value::NONE` because the call restarted the calling
    /// frame (`Block>>restart`): its native code hands the frame, at its start with its
    /// locals, to the interpreter, and clears this.
    pub(crate) restarted: u8,
    /// See `Layout::exit_status`.
    pub(crate) exit_status: u32,
    /// What an exit hands the rebuild of its frames (`Layout::exit_buffer`).
    pub(crate) exit_buffer: exit_plans::ExitBuffer,
    /// `--no-speculation`: compiles never speculate.
    pub(crate) no_speculation: bool,
    /// What optimizing compiles inline (`--inline`).
    pub(crate) inline_policy: tally_controller::InlinePolicy,
    /// Where the inliner's call graph comes from (`--inline-by`); `None`: static heuristics.
    pub(crate) inline_graph: Option<tally_controller::CallGraphSource>,
    /// The CBS configuration that collects it, for [`tally_controller::CallGraphSource::Cbs`].
    pub(crate) inline_graph_cbs: tally_profile::CbsConfig,
    /// A call graph read from a recorded profile (`--inline-graph`), which then weighs the
    /// inliner's choices instead of one collected as the program runs.
    recorded_graph: Option<inlining::RecordedGraph>,
    /// Receiver-class value profiles, when on.
    values: Option<values::SiteProfiles>,
    /// `--no-osr`: a loop running in the interpreter does not move into compiled code at
    /// its back-edge.
    pub(crate) no_osr: bool,
    /// Sites whose speculation failed: later compiles do the generic send there.
    failed_sites: rustc_hash::FxHashSet<crate::bytecode::SiteId>,
    /// Compiles of each code under a compile-at-first-call tier: after
    /// `MAX_SPECULATIVE_COMPILES` the next compile does not speculate, so a method whose
    /// guards keep failing stops being recompiled.
    compiles: rustc_hash::FxHashMap<crate::bytecode::CodeId, u32>,
}

/// What a failing guard leaves for the dispatcher.
#[repr(C)]
#[derive(Default, Clone, Copy)]
pub(crate) struct DeoptRecord {
    site: u32,
    reason: u32,
    /// The code whose compiled version the guard is in (the top frame's, or one that
    /// inlined it).
    code: u32,
}

/// Speculative compiles of one code under a compile-at-first-call tier, at most.
const MAX_SPECULATIVE_COMPILES: u32 = 4;

/// The flag's bits for which a call that compiled code does in place runs the profiler's
/// prologue hook (`Stubs::ir_call_hook`): what counts calls. The rest wait for a safepoint.
pub const CALL_HOOK_BITS: u8 = flag::CBS_WINDOW | flag::EXACT;

/// How [`Vm::run_compiled`] hands back to the interpreter.
pub(crate) enum Exit {
    /// The loop's base frame returned this value.
    Returned(Value),
    /// The top frame runs interpreted from its saved `ip`.
    Interpret,
}

impl Jit {
    /// Counts every compilation from now on as an interval of the compilation phase (a
    /// phases run), or stops and answers what was counted.
    pub(crate) fn set_compile_counting(&self, counting: Option<crate::phases::CompileCounting>) {
        lock(&self.installer).compile_counting = counting;
    }

    pub(crate) fn take_compile_counting(&self) -> Option<crate::phases::CompileCounting> {
        lock(&self.installer).compile_counting.take()
    }

    /// Whether code may be compiled (the dispatch loops then run compiled frames).
    pub(crate) fn is_on(&self) -> bool {
        self.generator.is_some() || self.adaptive.is_some()
    }

    /// Stops the compiler thread, if any, and lets go of the profile: called before the
    /// profile is finished.
    pub(crate) fn stop(&mut self) {
        if let Some(a) = self.adaptive.as_mut() {
            a.stop();
        }
        let mut installer = lock(&self.installer);
        installer.profile = None;
        installer.controller = None;
    }
}

impl Vm {
    /// `--no-speculation`: compiled code never guards on what the program did so far.
    pub fn disable_speculation(&mut self) {
        self.jit.no_speculation = true;
    }

    /// `--inline=off`: optimizing compiles inline no method.
    pub fn disable_inlining(&mut self) {
        self.jit.inline_policy.enabled = false;
    }

    /// `--inline-by`: the call graph that weighs the inliner's choices under
    /// `--tier=adaptive` (`None`: the static heuristics). Set before [`Vm::set_adaptive`],
    /// which has the profiler feed it (`cbs` configures CBS when it is the source and the
    /// run records no profile of its own).
    pub fn set_inline_call_graph(
        &mut self,
        source: Option<tally_controller::CallGraphSource>,
        cbs: tally_profile::CbsConfig,
    ) {
        self.jit.inline_graph = source;
        self.jit.inline_graph_cbs = cbs;
    }

    /// `--inline-graph`: the inliner reads this call graph (edges by name: caller, call
    /// site, callee, weight), recorded by an earlier run, instead of collecting one.
    pub fn set_recorded_inline_graph(&mut self, edges: Vec<(String, u32, String, u64)>) {
        self.jit.recorded_graph = Some(inlining::RecordedGraph::new(edges));
    }

    /// The inliner's call graph as it stands, when one is kept.
    pub(crate) fn inline_weights(&mut self) -> Option<inlining::EdgeWeights> {
        if let Some(g) = self.jit.recorded_graph.as_mut() {
            return Some(g.weights(&self.rt));
        }
        let source = self.jit.inline_graph?;
        let p = self.profiler.as_deref();
        Some(match source {
            tally_controller::CallGraphSource::Exhaustive => {
                let mut w = inlining::EdgeWeights::default();
                if let Some(exact) = p.and_then(|p| p.exact.as_ref()) {
                    for (e, &n) in &exact.edges {
                        w.add(e.caller.0, e.callsite, e.callee.0, n);
                    }
                }
                w
            }
            tally_controller::CallGraphSource::Cbs => match p {
                Some(p) => inlining::EdgeWeights::from_graph(p.recorder().cbs_edges()),
                None => inlining::EdgeWeights::default(),
            },
            tally_controller::CallGraphSource::TimerSamples => {
                match p.and_then(|p| p.call_graph.as_ref()) {
                    Some(g) => inlining::EdgeWeights::from_graph(
                        &g.lock().unwrap_or_else(|e| e.into_inner()),
                    ),
                    None => inlining::EdgeWeights::default(),
                }
            }
        })
    }

    /// `--no-osr`: loops running in the interpreter stay there until their activation next
    /// returns from a call (frames resume in whatever code is installed at that point).
    pub fn disable_osr(&mut self) {
        self.jit.no_osr = true;
    }

    /// Value profiles from now on: baseline code counts each send's receiver classes in a
    /// table per site, and optimizing compiles guard on what the tables counted
    /// (`values.rs`).
    pub fn enable_value_profiles(&mut self) {
        if self.jit.values.is_none() {
            self.jit.values = Some(values::SiteProfiles::start());
        }
    }

    /// What compiles may speculate on now.
    pub(crate) fn speculation(&self) -> Speculation<'_> {
        if self.jit.no_speculation {
            Speculation::Off
        } else {
            Speculation::Except(&self.jit.failed_sites)
        }
    }

    /// The top frame's compiled code failed a guard (`Status::Deopt`) and left the frame
    /// exact at the guarded instruction. The site is never speculated on again (a binary
    /// send's number guard aside: its feedback records what failed it); the
    /// version, if it still runs, is invalidated: the method falls back to its last code
    /// that does not speculate (or the interpreter), and is recompiled without that
    /// speculation at its next call (compile-at-first-call tiers) or when the controller
    /// decides again (adaptive).
    #[cold]
    #[inline(never)]
    pub(crate) fn deoptimized(&mut self) {
        let DeoptRecord { site, reason, code } = std::mem::take(&mut self.jit.deopt);
        let frame = self.rt.frames.top();
        // The frame the interpreter takes over (an inlined method's, when the guard was in
        // inlined code) and the code whose version is invalidated (the one that inlined it).
        let at: &'static Code = self.rt.codes[frame.code as usize];
        let code: &'static Code = self.rt.codes.get(code as usize).copied().unwrap_or(at);
        let ip = frame.ip;
        let reason = DeoptReason::from_u32(reason);
        // A binary send's operands that failed a number guard are recorded in its type
        // feedback when the interpreter does the send again: the next version speculates
        // on what the feedback then says (doubles where small integers failed), each
        // failure adding to it, so the site need not be given up.
        let numbers = matches!(
            reason,
            Some(
                DeoptReason::NotSmallInts
                    | DeoptReason::Overflow
                    | DeoptReason::IntRange
                    | DeoptReason::NotDoubles
            )
        );
        let binary = self
            .rt
            .sites
            .get(site as usize)
            .is_some_and(|s| s.int_op != crate::runtime::IntOp::None && s.argc == 1);
        if site != NO_DEOPT_SITE && !(numbers && binary) {
            self.jit.failed_sites.insert(site);
        }
        let fell_back_to = lock(&self.jit.installer).invalidate(code);
        if self.jit.generator.is_some() && fell_back_to.is_some() {
            code.compiled.request();
            // The frame's next back-edge compiles the new version and, in tiers with
            // on-stack-replacement entries, moves its loop into it.
            if !self.jit.no_osr {
                crate::profiling::YIELDPOINT.raise(tally_profile::flag::CONTROLLER);
            }
        }
        let inlined_into = if at.id == code.id {
            String::new()
        } else {
            format!(" (inlined into {})", self.rt.code_name(code))
        };
        let installer = lock(&self.jit.installer);
        if let Some(p) = self.profiler.as_deref() {
            p.recorder().event(tally_profile::EventKind::Deoptimized {
                method: tally_profile::MethodId(at.id),
                bci: ip,
                reason: format!(
                    "{}{inlined_into}",
                    reason.map_or("unknown", DeoptReason::describe)
                ),
                now: fell_back_to.map(Tier::profile_tier),
            });
        }
        if installer.log {
            drop(installer);
            let selector = self.rt.sites.get(site as usize).map_or(String::new(), |s| {
                format!(" (#{})", self.rt.symbols.name(s.selector))
            });
            let what = match fell_back_to {
                Some(t) => format!("invalidated, now {}", t.name()),
                None => "version already invalidated".to_string(),
            };
            let line = format!(
                "[tier] deopt {} @{ip}{selector}{inlined_into}: {}; {what}\n",
                self.rt.code_name(at),
                reason.map_or("unknown reason", DeoptReason::describe),
            );
            self.write_err(line.as_bytes());
        }
    }

    /// Makes `generator` compile every method and block at its first call from now on
    /// (`log`: one line on stderr per compile).
    pub fn set_code_generator(&mut self, generator: Box<dyn CodeGenerator>, log: bool) {
        self.jit.generator = Some(generator);
        self.prepare_compiled_code(log);
        self.code_added(0);
    }

    /// What running compiled code needs whoever compiles it: the layout, the native stack
    /// limit, and the installer's log and profile; answers the layout.
    fn prepare_compiled_code(&mut self, log: bool) -> Layout {
        let mut layout = Layout::new(&self.rt);
        layout.alloc = self.alloc_layout();
        self.jit.layout = Some(layout.clone());
        let here = std::hint::black_box(0u8);
        self.jit.native_stack_limit =
            native_stack::native_stack_limit(std::ptr::addr_of!(here) as usize);
        let mut installer = lock(&self.jit.installer);
        installer.log = log;
        installer.profile = self.profiler.as_deref().map(|p| install::ProfileLink {
            hot: p.hot.clone(),
            recorder: p.recorder.clone(),
        });
        layout
    }

    /// How compiled code may allocate in place (`Layout::alloc`).
    fn alloc_layout(&self) -> Option<AllocLayout> {
        if self.instrumentation.is_some() {
            return None;
        }
        let a = self.heap.inline_allocation()?;
        let heap = std::mem::offset_of!(Vm, heap);
        let at = |o: usize| i32::try_from(heap + o).ok();
        Some(AllocLayout {
            bump_pointer: a.bump_pointer,
            max_object_bytes: a.max_object_bytes,
            allocated_bytes: at(a.allocated_bytes)?,
            allocated_objects: at(a.allocated_objects)?,
            alarm_at: at(a.alarm_at)?,
            hash_state: at(a.hash_state)?,
            plain_kind: crate::objects::Kind::Plain as u8,
            array_kind: crate::objects::Kind::Array as u8,
            array_is_bare: self.rt.classes[self.rt.core.array as usize]
                .fields
                .is_empty(),
        })
    }

    /// Writes a perf map (`START SIZE NAME`, hexadecimal, one line per compiled function;
    /// names carry the tier) to `/tmp/perf-PID.map` as functions are compiled; answers its path.
    pub fn write_perf_map(&mut self) -> Result<std::path::PathBuf, VmError> {
        let path = std::path::PathBuf::from(format!("/tmp/perf-{}.map", std::process::id()));
        let file = std::fs::File::create(&path).map_err(|e| {
            VmError::Fatal(format!("--perf-map: cannot create {}: {e}", path.display()))
        })?;
        lock(&self.jit.installer).perf_map = Some(std::io::BufWriter::new(file));
        Ok(path)
    }

    /// Writes perf's jitdump file `dir/jit-PID.dump` as functions are compiled (their code,
    /// names with the tier, and source lines); answers its path. An existing file is an error.
    pub fn write_jitdump(&mut self, dir: &std::path::Path) -> Result<std::path::PathBuf, VmError> {
        let (dump, path) = jitdump::JitDump::create(dir).map_err(|e| {
            VmError::Fatal(format!(
                "--jitdump: cannot create jit-{}.dump in {}: {e}",
                std::process::id(),
                dir.display()
            ))
        })?;
        lock(&self.jit.installer).jitdump = Some(dump);
        Ok(path)
    }

    /// Prints, on stderr, the IR and machine code of every compiled method or block whose
    /// name (`Class>>selector`, `[] in Class>>selector`) contains `pattern`.
    pub fn print_code(&mut self, pattern: &str) {
        lock(&self.jit.installer).print_code = Some(pattern.to_string());
    }

    /// The code generator writes on stderr as it compiles (`--print-ir-after`): the program's
    /// output is flushed before each compile, so the two keep their order.
    pub fn compiles_write_stderr(&mut self) {
        lock(&self.jit.installer).writes_stderr = true;
    }

    /// Adds the time of every installation to `times` (`--time-passes`; the code generator
    /// adds its phases).
    pub fn time_installations(&mut self, times: std::sync::Arc<PhaseTimes>) {
        lock(&self.jit.installer).phase_times = Some(times);
    }

    /// New codes from `from` on: under a compile-at-first-call tier they are marked for
    /// compiling at their first call; under the adaptive one the controller learns their
    /// sizes.
    pub(crate) fn code_added(&self, from: usize) {
        self.announce_to_controller(from);
        for code in &self.rt.codes[from..] {
            code.intrinsic
                .store(self.intrinsic_of(code), Ordering::Relaxed);
        }
        if self.jit.generator.is_none() {
            return;
        }
        for code in &self.rt.codes[from..] {
            if code.plain_frame {
                code.compiled.request();
            }
        }
    }

    /// `Code::intrinsic` of `code`.
    fn intrinsic_of(&self, code: &Code) -> u8 {
        intrinsics::at_run_time(&self.rt, code) as u8
    }

    /// Compiles `code` now, on the VM thread; false (and interpreted for good) when it cannot
    /// be compiled.
    #[inline(never)]
    fn compile_native(&mut self, code: &'static Code) -> bool {
        self.profile_announce_bytecodes(&[code.id]);
        let weights = self.inline_weights();
        let (Some(generator), Some(layout)) =
            (self.jit.generator.as_deref_mut(), self.jit.layout.as_ref())
        else {
            code.compiled.clear();
            return false;
        };
        let compiles = self.jit.compiles.entry(code.id).or_insert(0);
        *compiles += 1;
        let speculation = if self.jit.no_speculation || *compiles > MAX_SPECULATIVE_COMPILES {
            Speculation::Off
        } else {
            Speculation::Except(&self.jit.failed_sites)
        };
        let mut request = CompileRequest::new(code, &self.rt, speculation);
        request.osr &= !self.jit.no_osr;
        if generator.tier() == Tier::Baseline {
            if let Some(values) = self.jit.values.as_mut() {
                request = request.with_value_tables(values);
            }
        } else if generator.tier().inlines() {
            request.plan_inlining(
                &self.rt,
                speculation,
                &self.jit.inline_policy,
                weights.as_ref(),
            );
        }
        let mut installer = lock(&self.jit.installer);
        if installer.writes_stderr() {
            use std::io::Write as _;
            let _ = self.out.flush();
        }
        let previous = self
            .profiler
            .is_some()
            .then(|| crate::profiling::VM_STATE.set(tally_profile::VmState::Compiling));
        let installed = installer.compile(generator, layout, &request);
        if let Some(state) = previous {
            crate::profiling::VM_STATE.set(state);
        }
        if !installed {
            code.compiled.clear();
        }
        installed
    }

    /// Runs compiled frames from the top frame on, for the dispatch loop in mode `M` whose
    /// base depth is `base_depth`, until a frame must be interpreted or the base frame returns.
    #[inline(never)]
    #[cfg_attr(target_os = "linux", link_section = "tally_interpreter")]
    pub(crate) fn run_compiled<M: LoopMode>(&mut self, base_depth: usize) -> Result<Exit, VmError> {
        loop {
            let code: &'static Code = self.rt.codes[self.rt.frames.top().code as usize];
            let entry = match code.compiled.entry() {
                Some(e) => e,
                None => {
                    if !code.compiled.is_set() || !self.compile_native(code) {
                        return Ok(Exit::Interpret);
                    }
                    code.compiled.entry().expect("just installed")
                }
            };
            if self.rt.mark_frames {
                // The frame is entered or resumed here; direct calls and inlined bodies mark
                // their frames as they push them.
                self.rt.frames.top_mut().mark =
                    tally_profile::FrameMark::of(code.calls.tier_column(), false);
            }
            // SAFETY: the entry point was made by the code generator for this code under the
            // contract of the module docs; the top frame is this code's and its `ip` is one
            // the code was left at (an instruction boundary of the same code).
            let status = unsafe { entry(self as *mut Vm, std::ptr::null_mut(), 0, 1) };
            match status {
                s if s == Status::Called as u32 => {}
                s if s == Status::Returned as u32 => {
                    let result = self.rt.stack.pop().expect("a returned value");
                    self.pop_frame(result);
                    let depth = self.rt.frames.len();
                    if depth <= self.rt.frames.exit_depth() {
                        let f = self.entry_flag::<M>();
                        let done = depth <= base_depth;
                        if f & flag::ALL_YIELDPOINTS != 0 {
                            self.profile_yieldpoint(f)?;
                        }
                        if done {
                            return Ok(Exit::Returned(result));
                        }
                    }
                }
                s if s == Status::Interpret as u32 => {
                    // A version with loop-head entries declined a frame stopped elsewhere
                    // (returned to after a call): its next back-edge, served, enters it.
                    if code.loop_entries.load(std::sync::atomic::Ordering::Relaxed)
                        && !self.jit.no_osr
                        && self.rt.frames.top().ip != 0
                    {
                        crate::profiling::YIELDPOINT.raise(tally_profile::flag::CONTROLLER);
                    }
                    return Ok(Exit::Interpret);
                }
                s if s == Status::Unwound as u32 => {
                    // Native code leaves the same way for an error its call met.
                    if let Some(e) = self.jit.error.take() {
                        return Err(e);
                    }
                    if self.rt.frames.len() <= base_depth {
                        let result = *self.rt.stack.last().expect("a returned value");
                        return Ok(Exit::Returned(result));
                    }
                }
                s if s == Status::Deopt as u32 => {
                    self.deoptimized();
                    return Ok(Exit::Interpret);
                }
                _ => {
                    return Err(self.jit.error.take().unwrap_or_else(|| {
                        VmError::Fatal("compiled code failed without an error".into())
                    }))
                }
            }
        }
    }
}
