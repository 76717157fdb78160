//! Where machine code of an optimized version runs in the bytecode: a *location* packs the
//! inline scope (0: the version's own code; others: methods inlined into it) and the
//! bytecode index into the one `u32` Cranelift keeps per instruction, so the pc map and the
//! profiler can name the whole chain of activations a pc runs for.

use crate::bytecode::CodeId;

/// The bytecode index takes the low bits of a location (methods are far shorter).
const BCI_BITS: u32 = 20;
const BCI_MASK: u32 = (1 << BCI_BITS) - 1;

/// The most scopes one version has; a location's scope number stays below it (the top
/// values are the code generators' markers, such as the shared exits').
pub const MAX_SCOPES: u32 = (1 << (32 - BCI_BITS)) - 2;

/// Bytecode index `bci` of scope `scope`.
pub fn pack_location(scope: u32, bci: u32) -> u32 {
    debug_assert!(scope < MAX_SCOPES && bci <= BCI_MASK);
    scope << BCI_BITS | (bci & BCI_MASK)
}

/// The scope and bytecode index of a location.
pub fn unpack_location(loc: u32) -> (u32, u32) {
    (loc >> BCI_BITS, loc & BCI_MASK)
}

/// One activation a version runs: its own code's (scope 0) or a method inlined at a call of
/// its parent scope (`parent`: that scope and the call's bytecode index).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InlineScope {
    pub code: CodeId,
    pub parent: Option<(u32, u32)>,
}

/// The activations location `loc` runs for, innermost first, each with its bytecode index
/// (the inlined calls' for the outer ones); the last is the version's own. `scopes` empty:
/// a version that inlines nothing, whose code is `own`.
pub fn location_chain(scopes: &[InlineScope], own: CodeId, loc: u32) -> Vec<(CodeId, u32)> {
    let (mut scope, bci) = unpack_location(loc);
    let Some(first) = scopes.get(scope as usize) else {
        return vec![(own, bci)];
    };
    let mut out = vec![(first.code, bci)];
    while let Some((parent, at)) = scopes[scope as usize].parent {
        out.push((scopes[parent as usize].code, at));
        scope = parent;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_location_names_its_scope_and_bytecode_and_its_chain_the_calls_out() {
        let loc = pack_location(2, 17);
        assert_eq!(unpack_location(loc), (2, 17));
        assert_eq!(pack_location(0, 9), 9, "the own scope's are plain indices");
        let scopes = [
            InlineScope {
                code: 10,
                parent: None,
            },
            InlineScope {
                code: 11,
                parent: Some((0, 4)),
            },
            InlineScope {
                code: 12,
                parent: Some((1, 6)),
            },
        ];
        assert_eq!(
            location_chain(&scopes, 10, loc),
            vec![(12, 17), (11, 6), (10, 4)]
        );
        assert_eq!(location_chain(&[], 10, 9), vec![(10, 9)]);
    }
}
