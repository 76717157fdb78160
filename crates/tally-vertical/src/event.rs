//! What an instrumented VM reports, and the trait its tools implement.
//!
//! The VM calls an [`Instrument`] at every event of an instrumented run: classes and methods
//! as they are defined, objects as they are made, methods as they are entered and left, and
//! every memory access the program makes (a frame slot, an object's field, an array's
//! element). Each hook has an empty default, so a tool implements only what it reads.

/// A class, numbered by the VM.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ClassId(pub u32);

/// A method or block, numbered by the VM.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct MethodId(pub u32);

impl MethodId {
    /// The site of what the VM does before any method runs (the objects it makes to start
    /// the program).
    pub const NONE: MethodId = MethodId(u32::MAX);
}

/// Whether an access reads or writes.
pub use crate::cache::AccessKind;

/// What an access touched.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Place {
    /// An argument or local in the frame (the VM's value stack).
    FrameSlot,
    /// An instance variable of an object.
    Field,
    /// An indexed slot of an array (or byte of a string).
    Element,
    /// A variable captured by a block, in a heap context.
    ContextSlot,
    /// A new object's header and slots, written when it is made.
    Initialization,
    /// An object's header, read at a send to find the receiver's class.
    Header,
}

impl Place {
    pub fn name(self) -> &'static str {
        match self {
            Place::FrameSlot => "frame slot",
            Place::Field => "field",
            Place::Element => "element",
            Place::ContextSlot => "context slot",
            Place::Initialization => "initialization",
            Place::Header => "header",
        }
    }
}

/// Where in the program an access happened.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Site {
    pub method: MethodId,
    /// Bytecode index in the method.
    pub bci: u32,
    /// Source line (1-based; 0 when unknown).
    pub line: u32,
}

/// One memory access of the program.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MemoryAccess {
    pub address: u64,
    pub size: u32,
    pub kind: AccessKind,
    pub place: Place,
    pub site: Site,
    /// The object accessed and its class, when the place is inside one.
    pub object: Option<(u64, ClassId)>,
}

/// An object the program made.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NewObject {
    pub address: u64,
    pub class: ClassId,
    /// Header and slots, in bytes.
    pub size: u32,
    /// The method that made it (where `new` ran, often a library's)…
    pub site: Site,
    /// …and the one that called that method, if any.
    pub caller: Option<Site>,
}

/// A tool of an instrumented run. Every hook runs on the VM thread, in the middle of the
/// program: it must not call back into the VM.
pub trait Instrument {
    /// A class was defined.
    fn class_loaded(&mut self, _class: ClassId, _name: &str) {}
    /// A method or block was defined: its printable name and source file.
    fn method_defined(&mut self, _method: MethodId, _name: &str, _source: &str) {}
    /// The program made an object.
    fn object_created(&mut self, _object: &NewObject) {}
    /// A frame of `method` was set up.
    fn method_entered(&mut self, _method: MethodId) {}
    /// A frame of `method` was left: returned from, or `unwound` by a non-local return or
    /// an error.
    fn method_exited(&mut self, _method: MethodId, _unwound: bool) {}
    /// The program read or wrote memory.
    fn access(&mut self, _access: &MemoryAccess) {}
    /// The run is over: the tool's report, or why it could not finish (say a file it wrote
    /// failed).
    fn finish(&mut self) -> Result<String, String> {
        Ok(String::new())
    }
}
