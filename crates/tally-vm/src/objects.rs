//! What kinds of heap objects there are and how their slots are laid out.
//!
//! The heap stores a class id and a kind byte in every header; the kind says how to read the
//! slots and bytes, so primitives need not consult the class to know an object's shape.

/// The `kind` byte of a heap object.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Kind {
    /// An instance with named fields.
    Plain = 0,
    /// Indexable slots.
    Array = 1,
    /// UTF-8 bytes.
    String = 2,
    /// An f64 in 8 bytes.
    Double = 3,
    /// Sign byte then little-endian u32 digits of the magnitude.
    BigInt = 4,
    /// Slots: code id, outer context, receiver.
    Block = 5,
    /// Slot 0: the lexically enclosing context (or nil); slot 1: for a method's context, the
    /// index of its frame; then captured variables.
    Context = 6,
    /// Slot 0: code id (an integer). Instances of Method and Primitive.
    Method = 7,
    /// A class or metaclass. Slot 0: its class id; then class-side fields.
    Class = 8,
    /// A String whose bytes are all ASCII, so character indices are byte indices. Decided
    /// once, when the (immutable) string is made, instead of scanning it at every `charAt:`.
    AsciiString = 9,
}

impl Kind {
    /// Either representation of a String.
    pub fn is_string(self) -> bool {
        matches!(self, Kind::String | Kind::AsciiString)
    }

    pub fn from_u8(k: u8) -> Kind {
        match k {
            0 => Kind::Plain,
            1 => Kind::Array,
            2 => Kind::String,
            3 => Kind::Double,
            4 => Kind::BigInt,
            5 => Kind::Block,
            6 => Kind::Context,
            7 => Kind::Method,
            8 => Kind::Class,
            9 => Kind::AsciiString,
            _ => unreachable!("corrupt object kind {k}"),
        }
    }
}

pub mod block {
    pub const CODE: usize = 0;
    pub const CONTEXT: usize = 1;
    pub const RECEIVER: usize = 2;
    pub const SLOTS: usize = 3;
}

pub mod context {
    pub const OUTER: usize = 0;
    /// Where the method activation owning this context sits in the frame stack, so a
    /// non-local return finds its home in O(1) instead of searching the stack.
    pub const FRAME_INDEX: usize = 1;
    pub const VARIABLES: usize = 2;
}

/// Class ids of the classes the VM itself creates instances of. They are created first, in
/// this order, so their ids are constants; metaclasses follow each class.
#[derive(Debug, Clone, Copy)]
pub struct CoreClasses {
    pub object: u32,
    pub class: u32,
    pub metaclass: u32,
    pub nil: u32,
    pub boolean: u32,
    pub true_: u32,
    pub false_: u32,
    pub integer: u32,
    pub double: u32,
    pub string: u32,
    pub symbol: u32,
    pub array: u32,
    pub block: u32,
    pub block1: u32,
    pub block2: u32,
    pub block3: u32,
    pub method: u32,
    pub primitive: u32,
    pub system: u32,
}

/// The names of the core classes, in creation order.
pub const CORE_CLASS_NAMES: [&str; 19] = [
    "Object",
    "Class",
    "Metaclass",
    "Nil",
    "Boolean",
    "True",
    "False",
    "Integer",
    "Double",
    "String",
    "Symbol",
    "Array",
    "Block",
    "Block1",
    "Block2",
    "Block3",
    "Method",
    "Primitive",
    "System",
];

impl CoreClasses {
    /// Ids as assigned by creating each core class and then its metaclass.
    pub fn from_ids(ids: &[u32; 19]) -> CoreClasses {
        CoreClasses {
            object: ids[0],
            class: ids[1],
            metaclass: ids[2],
            nil: ids[3],
            boolean: ids[4],
            true_: ids[5],
            false_: ids[6],
            integer: ids[7],
            double: ids[8],
            string: ids[9],
            symbol: ids[10],
            array: ids[11],
            block: ids[12],
            block1: ids[13],
            block2: ids[14],
            block3: ids[15],
            method: ids[16],
            primitive: ids[17],
            system: ids[18],
        }
    }
}
