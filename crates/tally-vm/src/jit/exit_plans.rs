//! What an exit of optimized code leaves behind, described instead of written out: the
//! frames of its inline chain, the objects the code kept virtual, and how the activation is
//! handed over. The exit stores the values it holds into the VM's exit buffer
//! ([`ExitBuffer`]) and calls one stub (`Stubs::ir_exit`), which rebuilds the interpreter's
//! frames from the plan (`exits::rebuild`). An exit is then a handful of stores and a call,
//! whatever its chain holds: the code that materializes objects and writes frame records is
//! the VM's, once, instead of every exit's.

use tally_heap::Value;

use crate::bytecode::CodeId;

/// The values an exit may hand over in the buffer, at most: a compile whose exit needs more
/// fails.
pub const MAX_EXIT_WORDS: usize = 512;

/// Where a value of a rebuilt frame or object comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ExitValue {
    /// The buffer's `k`-th word: a SOM value (a reference, or an immediate the code
    /// computed; a double the exit boxed).
    Word(u16),
    /// A value that holds no reference, known when the code was compiled (nil, a small
    /// integer, a symbol's immediate).
    Const(Value),
    /// The plan's `k`-th object, made by the rebuild.
    Made(u16),
}

/// An object the code kept virtual, made by the rebuild before any frame is written; its
/// slots are filled once every object is made (one may hold another).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ExitObject {
    /// An instance of `class` (`Class>>new`), with its fields.
    Instance {
        class: ExitValue,
        fields: Vec<ExitValue>,
    },
    /// The context of the frame's own activation, an activation of `code`
    /// (`Vm::new_home_context`), with its slots.
    HomeContext { code: CodeId, slots: Vec<ExitValue> },
    /// The context of an inlined activation: `size` slots, `outer` (nil when none), then
    /// its slots.
    Context {
        size: u16,
        outer: Option<ExitValue>,
        slots: Vec<ExitValue>,
    },
    /// A closure of block `code` over `receiver` and `ctx` (nil when none).
    Closure {
        code: CodeId,
        receiver: ExitValue,
        ctx: Option<ExitValue>,
    },
}

/// One frame of the chain, outermost first. The first is the frame's own activation, whose
/// record exists (only its `ip` and values are written); each other one is pushed above it
/// with its code, context and closure.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExitFrame {
    pub code: CodeId,
    /// The next instruction to run (not written for [`ExitHandOver::Restart`]).
    pub ip: u32,
    pub context: Option<ExitValue>,
    pub closure: Option<ExitValue>,
    /// Its receiver, arguments, locals and operands, bottom first.
    pub slots: Vec<ExitValue>,
}

/// How the rebuilt activation is handed over, as the exit's status.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ExitHandOver {
    /// A speculation at `site` of the version of `code` failed (the reason is the stub's
    /// parameter): `Status::Deopt`, with the `DeoptRecord` written.
    Deopt { site: u32, code: CodeId },
    /// The interpreter does the next instruction: `Status::Interpret`.
    Interpret,
    /// The status a yieldpoint's stub answered (the stub's parameter).
    Status,
    /// A call restarted the frame: its locals are written, not its `ip` (the primitive set
    /// it), and `Jit::restarted` is cleared: `Status::Interpret`.
    Restart,
}

/// One exit's plan.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExitPlan {
    pub hand_over: ExitHandOver,
    /// How many words the exit stored.
    pub words: u16,
    /// Made in this order: a context's outer, and a closure's context, come before it.
    pub objects: Vec<ExitObject>,
    pub frames: Vec<ExitFrame>,
}

/// The VM's exit buffer: the words an exit stores for the rebuild. The collector does not
/// see it: the rebuild reads the words into roots before anything allocates.
pub(crate) struct ExitBuffer {
    /// `slots`' address, where compiled code finds it (`Layout::exit_buffer`).
    pub(crate) address: usize,
    slots: Box<[u64]>,
}

impl ExitBuffer {
    /// The `k`-th word an exit stored.
    pub(crate) fn word(&self, k: u16) -> Value {
        Value(self.slots[k as usize])
    }
}

impl Default for ExitBuffer {
    fn default() -> ExitBuffer {
        let slots = vec![0u64; MAX_EXIT_WORDS].into_boxed_slice();
        ExitBuffer {
            address: slots.as_ptr() as usize,
            slots,
        }
    }
}
