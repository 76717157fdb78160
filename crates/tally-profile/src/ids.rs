//! The small vocabulary every other module speaks: method and code-version
//! ids, tiers, VM states, and the raw frame a sampler records.
//!
//! Ids are small integers chosen by the VM, so that the hot path stores
//! plain words and never touches a name; names arrive through
//! [`crate::EventKind`] and are joined in offline.

use std::fmt;

/// A method, as numbered by the VM. Names and metadata come from
/// [`crate::EventKind::MethodCompiled`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct MethodId(pub u32);

/// Method ids from here up never name a VM's method (packed frames carry 31-bit ids): they
/// stand for the synthetic root of a truncated stack, `[truncated: N frames]`.
const TRUNCATED_BASE: u32 = 1 << 31;

/// The leaf frame `[GC]` of a sample that stands for a garbage-collection pause
/// ([`crate::Origin::GcPause`]), above the allocation that triggered the collection.
pub const GC_PAUSE: MethodId = MethodId(u32::MAX - 1);

impl MethodId {
    /// The root a truncated sample's kept frames hang under, standing for the `lost` outer
    /// frames that did not fit (one id per count, so a report shows how much was cut).
    pub fn truncated(lost: u32) -> MethodId {
        MethodId(TRUNCATED_BASE | lost.min(u32::MAX - TRUNCATED_BASE - 2))
    }

    /// The frames a truncated root stands for, if this is one.
    pub fn truncated_frames(self) -> Option<u32> {
        (self.0 >= TRUNCATED_BASE && self.0 < GC_PAUSE.0).then(|| self.0 - TRUNCATED_BASE)
    }
}

/// The bytecode index of an interpreted frame that has made no call yet: the VM saves a
/// frame's position only at calls (and yieldpoints), so all a sample knows of such a frame is
/// that it was entered. Source positions resolve it to the method's header line.
pub const ENTRY_BCI: u32 = u32::MAX;

/// A class, as numbered by the VM (only used to group methods in reports).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ClassId(pub u32);

/// One installed piece of compiled code: method × tier × compile id. The
/// interpreter tier needs none: an interpreted frame names its method.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct CodeVersionId(pub u32);

/// Execution tiers. Kept open-ended on the wire (a byte) so that a VM with
/// more tiers than these still round-trips through the file.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Tier {
    Interpreter,
    Baseline,
    Optimizing,
    Other(u8),
}

impl Tier {
    pub fn to_u8(self) -> u8 {
        match self {
            Tier::Interpreter => 0,
            Tier::Baseline => 1,
            Tier::Optimizing => 2,
            Tier::Other(n) => n,
        }
    }

    pub fn from_u8(n: u8) -> Tier {
        match n {
            0 => Tier::Interpreter,
            1 => Tier::Baseline,
            2 => Tier::Optimizing,
            n => Tier::Other(n),
        }
    }

    /// The named tiers, lowest first: the columns of per-tier tables.
    pub const NAMED: [Tier; 3] = [Tier::Interpreter, Tier::Baseline, Tier::Optimizing];

    /// This tier's column in per-tier tables (`[_; 3]`, in the order of [`Tier::NAMED`]);
    /// unnamed tiers share the interpreter's.
    pub fn column(self) -> usize {
        match self {
            Tier::Interpreter | Tier::Other(_) => 0,
            Tier::Baseline => 1,
            Tier::Optimizing => 2,
        }
    }

    pub fn name(self) -> String {
        match self {
            Tier::Interpreter => "interpreter".into(),
            Tier::Baseline => "baseline".into(),
            Tier::Optimizing => "optimizing".into(),
            Tier::Other(n) => format!("tier{n}"),
        }
    }
}

/// What the VM was doing when a sample was taken (Cog VMProfiler-style
/// attribution to VM components, technique T6).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[repr(u8)]
pub enum VmState {
    Interpreting = 0,
    Primitive = 1,
    Gc = 2,
    Compiling = 3,
    Runtime = 4,
    /// Executing compiled code (the frame's code version says which tier).
    Compiled = 5,
}

impl VmState {
    pub const ALL: [VmState; 6] = [
        VmState::Interpreting,
        VmState::Primitive,
        VmState::Gc,
        VmState::Compiling,
        VmState::Runtime,
        VmState::Compiled,
    ];

    pub fn from_u8(n: u8) -> Option<VmState> {
        VmState::ALL.get(n as usize).copied()
    }

    pub fn name(self) -> &'static str {
        match self {
            VmState::Interpreting => "interpreting",
            VmState::Primitive => "primitive",
            VmState::Gc => "gc",
            VmState::Compiling => "compiling",
            VmState::Runtime => "runtime",
            VmState::Compiled => "compiled",
        }
    }
}

impl fmt::Display for VmState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// One frame as the hot path sees it: either an interpreted method at a
/// bytecode index, or compiled code at a pc offset that is resolved later
/// through the code version's pc map. It packs into one `u64` so that the
/// signal handler can copy it with a single atomic load (no torn frames).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum RawFrame {
    Interpreted { method: MethodId, bci: u32 },
    Compiled { code: CodeVersionId, pc_offset: u32 },
}

const COMPILED_BIT: u64 = 1 << 63;
/// Ids are 31 bits on the wire of a packed frame; the top bit says which kind.
pub const MAX_PACKED_ID: u32 = (1 << 31) - 1;

impl RawFrame {
    pub fn interpreted(method: MethodId, bci: u32) -> RawFrame {
        RawFrame::Interpreted { method, bci }
    }

    /// Ids above [`MAX_PACKED_ID`] lose their top bit; VMs number methods
    /// densely from zero, so this is a documented limit, not a hazard.
    pub fn pack(self) -> u64 {
        match self {
            RawFrame::Interpreted { method, bci } => {
                (u64::from(method.0 & MAX_PACKED_ID) << 32) | u64::from(bci)
            }
            RawFrame::Compiled { code, pc_offset } => {
                COMPILED_BIT | (u64::from(code.0 & MAX_PACKED_ID) << 32) | u64::from(pc_offset)
            }
        }
    }

    pub fn unpack(word: u64) -> RawFrame {
        let id = ((word >> 32) as u32) & MAX_PACKED_ID;
        let pos = word as u32;
        if word & COMPILED_BIT != 0 {
            RawFrame::Compiled {
                code: CodeVersionId(id),
                pc_offset: pos,
            }
        } else {
            RawFrame::Interpreted {
                method: MethodId(id),
                bci: pos,
            }
        }
    }

    /// The same frame with a new position (bytecode index or pc offset).
    pub fn with_pos(self, pos: u32) -> RawFrame {
        match self {
            RawFrame::Interpreted { method, .. } => RawFrame::Interpreted { method, bci: pos },
            RawFrame::Compiled { code, .. } => RawFrame::Compiled {
                code,
                pc_offset: pos,
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_pack_and_unpack() {
        for f in [
            RawFrame::interpreted(MethodId(0), 0),
            RawFrame::interpreted(MethodId(MAX_PACKED_ID), u32::MAX),
            RawFrame::Compiled {
                code: CodeVersionId(7),
                pc_offset: 0x1234,
            },
        ] {
            assert_eq!(RawFrame::unpack(f.pack()), f);
        }
    }

    #[test]
    fn tiers_and_states_round_trip_through_bytes() {
        for n in 0..=255u8 {
            assert_eq!(Tier::from_u8(n).to_u8(), n);
        }
        for s in VmState::ALL {
            assert_eq!(VmState::from_u8(s as u8), Some(s));
        }
        assert_eq!(VmState::from_u8(6), None);
    }

    #[test]
    fn truncated_roots_are_never_real_methods() {
        assert_eq!(MethodId::truncated(372).truncated_frames(), Some(372));
        assert_eq!(MethodId(MAX_PACKED_ID).truncated_frames(), None);
        assert_eq!(MethodId(u32::MAX).truncated_frames(), None);
        assert_eq!(
            MethodId::truncated(u32::MAX).truncated_frames(),
            Some(u32::MAX - (1 << 31) - 2)
        );
        assert_eq!(GC_PAUSE.truncated_frames(), None);
    }
}
