//! The function's ways in: a new activation's prologue (the locals nil, the context made),
//! and, with on-stack-replacement entries, an entry at each loop head that reads the
//! interpreted frame's values.

use super::*;

impl Builder<'_> {
    /// The entry's parameters: receiver, arguments and, for a block, its closure.
    pub(super) fn entry_params(&mut self, entry: BlockId) -> Vec<ValueId> {
        let mut params = Vec::new();
        for _ in 0..=self.act.code.num_args {
            params.push(self.f.add_param(entry, Ty::Word));
        }
        if self.act.code.kind == CodeKind::Block {
            self.act.closure = Some(self.f.add_param(entry, Ty::Word));
        }
        self.act.args = params.clone();
        params
    }

    /// An entry that chooses between the prologue and an entry at each loop head.
    pub(super) fn entries(&mut self, entry: BlockId, slots: usize, loop_heads: &[usize]) {
        let params = self.entry_params(entry);
        // What the closure's context is does not depend on the way in.
        let outer = self.outer_context(entry);
        let normal = self.f.add_block(self.act.scope, 0);
        self.prologue(entry, normal, slots, outer);
        let mut osr = Vec::new();
        for &head in loop_heads {
            let block = self.f.add_block(self.act.scope, head as u32);
            let height = self.act.heights[head].expect("a reachable loop head");
            let mut args = Vec::new();
            for k in params.len()..slots + height {
                let v = self
                    .f
                    .push_inst(block, InstKind::FrameSlot(k as u16), None, head as u32)
                    .expect("a value");
                args.push(v);
            }
            if self.act.carry_context {
                let v = self
                    .f
                    .push_inst(block, InstKind::FrameContext, None, head as u32)
                    .expect("a value");
                args.push(v);
            }
            let target = self.block_for(head);
            self.f.blocks[block.index()].term = Terminator::Jump(Edge {
                block: target,
                args,
            });
            osr.push(crate::OsrEntry {
                bci: head as u32,
                edge: Edge {
                    block,
                    args: Vec::new(),
                },
                height: height as u32,
            });
        }
        self.f.blocks[entry.index()].term = Terminator::Enter {
            normal: Edge {
                block: normal,
                args: Vec::new(),
            },
            osr,
        };
    }

    /// A block's closure's context, read in `block` (None for a method).
    pub(super) fn outer_context(&mut self, block: BlockId) -> Option<ValueId> {
        let c = self.act.closure?;
        self.f
            .push_inst(block, InstKind::ClosureContext(c), None, 0)
    }

    /// The prologue of a new activation, in `block`: the locals nil, the context made; then
    /// the jump to instruction 0. Without on-stack-replacement entries `block` is `entry`.
    /// `outer` is the closure's context when the entry has read it already.
    pub(super) fn prologue(
        &mut self,
        entry: BlockId,
        block: BlockId,
        slots: usize,
        outer: Option<ValueId>,
    ) {
        let code = self.act.code;
        let params = if entry == block {
            self.entry_params(entry)
        } else {
            self.f.blocks[entry.index()].params[..=code.num_args as usize].to_vec()
        };
        let mut locals = params.clone();
        for k in locals.len()..slots {
            let v = self
                .f
                .push_inst(block, InstKind::InitialLocal(k as u16), None, 0)
                .expect("a value");
            locals.push(v);
        }
        let outer = if entry == block {
            self.outer_context(block)
        } else {
            outer
        };
        let context = if code.context_size > 0 {
            let state = self.f.add_state(FrameState {
                code: code.id,
                bci: 0,
                resume: Resume::Before,
                locals: locals.iter().map(|&v| Some(v)).collect(),
                stack: Vec::new(),
                context: None,
                closure: self.act.closure,
                outer: None,
                virtuals: Vec::new(),
            });
            Some(self.new_context(block, &locals, outer, state))
        } else {
            outer
        };
        let mut args = locals.split_off(self.act.args.len());
        if self.act.carry_context {
            args.extend(context);
        } else {
            self.act.context = context;
        }
        let first = self.block_for(0);
        self.f.blocks[block.index()].term = Terminator::Jump(Edge { block: first, args });
    }
}
