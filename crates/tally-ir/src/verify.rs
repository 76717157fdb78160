//! The IR's invariants, checked: run after building and after every pass in tests and debug
//! builds, so a pass that breaks one fails where it did, not in the machine code.

use crate::dom::DomTree;
use crate::{
    Block, BlockId, FrameStateId, Function, Inst, InstId, InstKind, Terminator, Ty, ValueDef,
    ValueId,
};

/// Where each value is defined: its block and its position there (parameters before every
/// instruction).
fn definitions(f: &Function) -> Vec<Option<(BlockId, usize)>> {
    let mut at = vec![None; f.values.len()];
    for (b, block) in f.blocks.iter().enumerate() {
        for &p in &block.params {
            at[p.index()] = Some((BlockId(b as u32), 0));
        }
        for (k, &i) in block.insts.iter().enumerate() {
            if let Some(v) = f.insts[i.index()].result {
                at[v.index()] = Some((BlockId(b as u32), k + 1));
            }
        }
    }
    at
}

/// Whether `v` is an object only frame states hold (made by exits alone).
fn is_virtual(f: &Function, v: ValueId) -> bool {
    f.def_inst(v).is_some_and(|i| i.kind.props().is_virtual)
}

/// The first broken invariant, described, if any.
pub fn verify(f: &Function) -> Result<(), String> {
    let v = Verifier {
        f,
        dom: DomTree::new(f),
        defs: definitions(f),
    };
    v.definitions_listed()?;
    for (b, block) in f.blocks.iter().enumerate() {
        let b = BlockId(b as u32);
        if !v.dom.is_reachable(b) {
            continue;
        }
        for (k, &i) in block.insts.iter().enumerate() {
            v.inst(b, k + 1, i)?;
        }
        v.terminator(b, block)?;
    }
    Ok(())
}

struct Verifier<'f> {
    f: &'f Function,
    dom: DomTree,
    defs: Vec<Option<(BlockId, usize)>>,
}

impl Verifier<'_> {
    /// Every value placed in a block is the one its definition lists.
    fn definitions_listed(&self) -> Result<(), String> {
        let f = self.f;
        for (v, data) in f.values.iter().enumerate() {
            let listed = match data.def {
                // A parameter of a block dead code elimination dropped names no block now.
                ValueDef::Param { block, index } => f
                    .blocks
                    .get(block.index())
                    .and_then(|b| b.params.get(index as usize))
                    .is_some_and(|&p| p.index() == v),
                ValueDef::Inst(i) => f.insts[i.index()].result.is_some_and(|r| r.index() == v),
            };
            if self.defs[v].is_some() && !listed {
                return Err(format!("v{v}'s definition does not list it"));
            }
        }
        Ok(())
    }

    /// `v`, used at position `pos` of block `b` (instructions 1.., the terminator after
    /// them), is defined where it dominates the use.
    fn dominates(&self, v: ValueId, b: BlockId, pos: usize, what: &str) -> Result<(), String> {
        let Some((db, dpos)) = self.defs.get(v.index()).copied().flatten() else {
            return Err(format!("{what} in {b} uses {v}, which nothing defines"));
        };
        let ok = if db == b {
            dpos < pos
        } else {
            self.dom.dominates(db, b)
        };
        if ok {
            Ok(())
        } else {
            Err(format!(
                "{what} in {b} uses {v}, defined where it does not dominate"
            ))
        }
    }

    /// The values of state `s` and of the states it is inlined into dominate their use.
    fn state_dominated(
        &self,
        s: FrameStateId,
        b: BlockId,
        pos: usize,
        what: &str,
    ) -> Result<(), String> {
        for v in self.f.chain_values(s) {
            self.dominates(v, b, pos, &format!("{s} (or an outer state) of {what}"))?;
        }
        Ok(())
    }

    /// Instruction `i`, at position `pos` of block `b`: its operands, its result and its
    /// frame state as its declaration says.
    fn inst(&self, b: BlockId, pos: usize, i: InstId) -> Result<(), String> {
        let f = self.f;
        let inst = &f.insts[i.index()];
        let props = inst.kind.props();
        for v in inst.kind.operands() {
            self.dominates(v, b, pos, &format!("{i}"))?;
            if (f.ty(v) == Ty::Float) != props.reads_doubles {
                return Err(format!("{i} reads {} {v}", f.ty(v).name()));
            }
            // A virtual object exists only for exits: what reads it must be one too.
            let virtual_use = matches!(
                inst.kind,
                InstKind::VirtualBlock { ctx: Some(c), .. }
                    | InstKind::VirtualContext { outer: Some(c), .. } if c == v
            );
            if is_virtual(f, v) && !virtual_use {
                return Err(format!("{i} uses the virtual {v}"));
            }
        }
        self.result(i, inst)?;
        let resumes = inst.state.map(|s| f.states[s.index()].resume);
        if props.state != resumes {
            return Err(format!(
                "{i} ({:?}) has a frame state resuming {resumes:?}, its declaration {:?}",
                inst.kind, props.state
            ));
        }
        if let Some(s) = inst.state {
            self.state_dominated(s, b, pos, &format!("{i}"))?;
        }
        Ok(())
    }

    /// `inst` defines a value of the type its declaration gives (a word folded to a
    /// constant small integer keeps the integer's type).
    fn result(&self, i: InstId, inst: &Inst) -> Result<(), String> {
        let declared = inst.kind.props().result;
        let actual = inst.result.map(|r| self.f.ty(r));
        let fits = actual == declared || (declared == Some(Ty::Word) && actual == Some(Ty::Int));
        if fits {
            Ok(())
        } else {
            Err(format!(
                "{i} ({:?}) defines {actual:?}, its declaration {declared:?}",
                inst.kind
            ))
        }
    }

    /// Block `b`'s terminator: its operands, its state, its edges.
    fn terminator(&self, b: BlockId, block: &Block) -> Result<(), String> {
        let f = self.f;
        let end = block.insts.len() + 1;
        for v in block.term.operands() {
            self.dominates(v, b, end, "the terminator")?;
            if is_virtual(f, v) {
                return Err(format!("the terminator of {b} uses the virtual {v}"));
            }
        }
        if let Some(s) = block.term.state() {
            self.state_dominated(s, b, end, "the terminator")?;
        }
        if let Terminator::Enter { normal, osr } = &block.term {
            // Only the first block chooses the way in, and every way in starts from its
            // parameters alone: no value is defined on one way and used on another.
            if b != f.entry() {
                return Err(format!("{b} is not the entry but enters"));
            }
            if std::iter::once(normal)
                .chain(osr.iter().map(|o| &o.edge))
                .any(|e| !e.args.is_empty())
            {
                return Err("an entry edge passes values".into());
            }
            let mut bcis: Vec<u32> = osr.iter().map(|o| o.bci).collect();
            bcis.sort_unstable();
            bcis.dedup();
            if bcis.len() != osr.len() {
                return Err("two on-stack-replacement entries at one loop head".into());
            }
        }
        if block.term == Terminator::Unreachable {
            return Err(format!("{b} is reachable but has no terminator"));
        }
        self.edges(b, &block.term)
    }

    /// A terminator reads doubles only to pass them on, to parameters of their type, as
    /// many as the target takes.
    fn edges(&self, b: BlockId, term: &Terminator) -> Result<(), String> {
        let f = self.f;
        let passed: Vec<ValueId> = term.edges().iter().flat_map(|e| e.args.clone()).collect();
        for v in term.operands() {
            if f.ty(v) == Ty::Float && !passed.contains(&v) {
                return Err(format!("the terminator of {b} reads the double {v}"));
            }
        }
        for e in term.edges() {
            let params = &f.blocks[e.block.index()].params;
            for (&a, &p) in e.args.iter().zip(params) {
                if (f.ty(a) == Ty::Float) != (f.ty(p) == Ty::Float) {
                    return Err(format!(
                        "{b} passes {} {a} to {}'s {} {p}",
                        f.ty(a).name(),
                        e.block,
                        f.ty(p).name(),
                    ));
                }
            }
            if e.args.len() != params.len() {
                return Err(format!(
                    "{b} passes {} values to {}, which takes {}",
                    e.args.len(),
                    e.block,
                    params.len()
                ));
            }
        }
        Ok(())
    }
}
