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
///
/// `Quick` is the optimizing compiler at its cheap level (no inlining beyond trivial
/// methods, Cranelift without its optimizations); `Optimizing` its full level. Their wire
/// bytes (and columns) are in the order the tiers were added; [`Tier::rank`] orders them by
/// what they make: interpreter, baseline, quick, optimizing.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Tier {
    Interpreter,
    Baseline,
    Quick,
    Optimizing,
    Other(u8),
}

impl Tier {
    pub fn to_u8(self) -> u8 {
        match self {
            Tier::Interpreter => 0,
            Tier::Baseline => 1,
            Tier::Optimizing => 2,
            Tier::Quick => 3,
            Tier::Other(n) => n,
        }
    }

    pub fn from_u8(n: u8) -> Tier {
        match n {
            0 => Tier::Interpreter,
            1 => Tier::Baseline,
            2 => Tier::Optimizing,
            3 => Tier::Quick,
            n => Tier::Other(n),
        }
    }

    /// How many columns per-tier tables have.
    pub const COLUMNS: usize = 4;

    /// The named tiers, in column order: the columns of per-tier tables.
    pub const NAMED: [Tier; Tier::COLUMNS] = [
        Tier::Interpreter,
        Tier::Baseline,
        Tier::Optimizing,
        Tier::Quick,
    ];

    /// The named tiers, lowest first (by [`Tier::rank`]): how reports list them.
    pub const RANKED: [Tier; Tier::COLUMNS] = [
        Tier::Interpreter,
        Tier::Baseline,
        Tier::Quick,
        Tier::Optimizing,
    ];

    /// This tier's column in per-tier tables (`[_; Tier::COLUMNS]`, in the order of
    /// [`Tier::NAMED`], which is the wire byte's); unnamed tiers share the interpreter's.
    pub const fn column(self) -> usize {
        match self {
            Tier::Interpreter | Tier::Other(_) => 0,
            Tier::Baseline => 1,
            Tier::Optimizing => 2,
            Tier::Quick => 3,
        }
    }

    /// Where the tier stands among the others: a tier of higher rank makes faster code at a
    /// higher compile cost, and the controller only ever moves a method up.
    pub const fn rank(self) -> u8 {
        match self {
            Tier::Interpreter | Tier::Other(_) => 0,
            Tier::Baseline => 1,
            Tier::Quick => 2,
            Tier::Optimizing => 3,
        }
    }

    pub fn name(self) -> String {
        match self {
            Tier::Interpreter => "interpreter".into(),
            Tier::Baseline => "baseline".into(),
            Tier::Optimizing => "optimizing".into(),
            Tier::Quick => "quick".into(),
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

/// One frame as the hot path sees it: an interpreted method at a bytecode index; a frame that
/// compiled code runs, as the VM's frame stack records it (the method, the bytecode index of
/// its last call, and the mark compiled code leaves on its frames: the tier, and whether the
/// frame stands for a method inlined into the code outside it), whose pc only the innermost
/// frame's sample knows; or compiled code at a pc offset, resolved later through the code
/// version's pc map. It packs into one `u64` so that the signal handler can copy it with a
/// single atomic load (no torn frames).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum RawFrame {
    Interpreted {
        method: MethodId,
        bci: u32,
    },
    InTier {
        method: MethodId,
        bci: u32,
        tier: Tier,
        inlined: bool,
    },
    Compiled {
        code: CodeVersionId,
        pc_offset: u32,
    },
}

const COMPILED_BIT: u64 = 1 << 63;
/// Code version ids are 31 bits on the wire of a packed frame; the top bit says which kind.
pub const MAX_PACKED_ID: u32 = (1 << 31) - 1;
/// Method ids are 28 bits: above them, a method's frame carries its mark (bits 60–62).
pub const MAX_PACKED_METHOD: u32 = (1 << 28) - 1;
const MARK_SHIFT: u32 = 60;

/// The mark a VM leaves on a frame compiled code runs: the tier's number in the low two bits
/// (0, the interpreter, means no mark) and [`FrameMark::INLINED`]. A VM keeps it in the frame
/// (a `u32`) and hands it to [`RawFrame::from_mark`] when a sampler reads the frame.
pub struct FrameMark;

impl FrameMark {
    pub const TIER_MASK: u32 = 0b11;
    pub const INLINED: u32 = 0b100;

    /// The mark of a frame running code of `tier` (tiers above 3 share 3).
    pub const fn of(tier: u8, inlined: bool) -> u32 {
        let t = if tier > 3 { 3 } else { tier as u32 };
        t | if inlined { FrameMark::INLINED } else { 0 }
    }
}

impl RawFrame {
    pub fn interpreted(method: MethodId, bci: u32) -> RawFrame {
        RawFrame::Interpreted { method, bci }
    }

    /// The frame of `method` at `bci` as a frame stack records it, with the frame's mark
    /// (see [`FrameMark`]): interpreted when the mark names no compiled tier.
    pub fn from_mark(method: MethodId, bci: u32, mark: u32) -> RawFrame {
        match mark & FrameMark::TIER_MASK {
            0 => RawFrame::Interpreted { method, bci },
            t => RawFrame::InTier {
                method,
                bci,
                tier: Tier::from_u8(t as u8),
                inlined: mark & FrameMark::INLINED != 0,
            },
        }
    }

    /// The method a frame stack's frame names (`None` for a compiled pc, which needs its
    /// code version).
    pub fn frame_method(self) -> Option<MethodId> {
        match self {
            RawFrame::Interpreted { method, .. } | RawFrame::InTier { method, .. } => Some(method),
            RawFrame::Compiled { .. } => None,
        }
    }

    /// Method ids above [`MAX_PACKED_METHOD`] and code ids above [`MAX_PACKED_ID`] lose
    /// their top bits; VMs number methods densely from zero, so this is a documented limit,
    /// not a hazard.
    pub fn pack(self) -> u64 {
        let method_word = |method: MethodId, bci: u32, mark: u32| -> u64 {
            (u64::from(mark) << MARK_SHIFT)
                | (u64::from(method.0 & MAX_PACKED_METHOD) << 32)
                | u64::from(bci)
        };
        match self {
            RawFrame::Interpreted { method, bci } => method_word(method, bci, 0),
            RawFrame::InTier {
                method,
                bci,
                tier,
                inlined,
            } => method_word(method, bci, FrameMark::of(tier.to_u8(), inlined)),
            RawFrame::Compiled { code, pc_offset } => {
                COMPILED_BIT | (u64::from(code.0 & MAX_PACKED_ID) << 32) | u64::from(pc_offset)
            }
        }
    }

    pub fn unpack(word: u64) -> RawFrame {
        let pos = word as u32;
        if word & COMPILED_BIT != 0 {
            RawFrame::Compiled {
                code: CodeVersionId(((word >> 32) as u32) & MAX_PACKED_ID),
                pc_offset: pos,
            }
        } else {
            let method = MethodId(((word >> 32) as u32) & MAX_PACKED_METHOD);
            RawFrame::from_mark(method, pos, (word >> MARK_SHIFT) as u32 & 0b111)
        }
    }

    /// The same frame with a new position (bytecode index or pc offset).
    pub fn with_pos(self, pos: u32) -> RawFrame {
        match self {
            RawFrame::Interpreted { method, .. } => RawFrame::Interpreted { method, bci: pos },
            RawFrame::InTier {
                method,
                tier,
                inlined,
                ..
            } => RawFrame::InTier {
                method,
                bci: pos,
                tier,
                inlined,
            },
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
            RawFrame::interpreted(MethodId(MAX_PACKED_METHOD), u32::MAX),
            RawFrame::Compiled {
                code: CodeVersionId(MAX_PACKED_ID),
                pc_offset: 0x1234,
            },
            RawFrame::InTier {
                method: MethodId(MAX_PACKED_METHOD),
                bci: ENTRY_BCI,
                tier: Tier::Optimizing,
                inlined: true,
            },
            RawFrame::InTier {
                method: MethodId(3),
                bci: 9,
                tier: Tier::Baseline,
                inlined: false,
            },
            RawFrame::InTier {
                method: MethodId(3),
                bci: 9,
                tier: Tier::Quick,
                inlined: true,
            },
        ] {
            assert_eq!(RawFrame::unpack(f.pack()), f);
        }
    }

    #[test]
    fn tiers_keep_their_wire_bytes_and_columns_and_rank_by_what_they_make() {
        for (t, byte) in Tier::NAMED.iter().zip(0u8..) {
            assert_eq!((t.to_u8(), t.column()), (byte, byte as usize));
            assert_eq!(Tier::from_u8(byte), *t);
            let mark = FrameMark::of(t.column() as u8, false);
            let frame = RawFrame::from_mark(MethodId(1), 2, mark);
            let tier = match frame {
                RawFrame::Interpreted { .. } => Tier::Interpreter,
                RawFrame::InTier { tier, .. } => tier,
                RawFrame::Compiled { .. } => unreachable!(),
            };
            assert_eq!(tier, *t, "a frame mark names the tier");
        }
        assert_eq!(Tier::from_u8(9), Tier::Other(9));
        let ranks: Vec<u8> = Tier::RANKED.iter().map(|t| t.rank()).collect();
        assert_eq!(ranks, [0, 1, 2, 3]);
        assert!(Tier::Quick.rank() < Tier::Optimizing.rank());
        assert_eq!(Tier::Quick.name(), "quick");
    }

    #[test]
    fn a_frame_marked_by_no_compiled_tier_is_interpreted_and_old_words_read_the_same() {
        assert_eq!(
            RawFrame::from_mark(MethodId(5), 2, FrameMark::INLINED),
            RawFrame::interpreted(MethodId(5), 2)
        );
        assert_eq!(
            RawFrame::from_mark(MethodId(5), 2, FrameMark::of(2, true)),
            RawFrame::InTier {
                method: MethodId(5),
                bci: 2,
                tier: Tier::Optimizing,
                inlined: true
            }
        );
        // Words written before frames carried marks: method ids below 2^28, nothing above.
        let old = (u64::from(12345u32) << 32) | 7;
        assert_eq!(
            RawFrame::unpack(old),
            RawFrame::interpreted(MethodId(12345), 7)
        );
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
