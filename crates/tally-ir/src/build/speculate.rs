//! Speculation on the sites' feedback ([`SiteFacts`]): small-integer and double arithmetic
//! behind guards on the operands, a receiver class the inline cache saw guarded (or several
//! switched on) with its target done in place or called directly, and the sends left.

use super::*;

impl Builder<'_> {
    /// `isNil` (`is_nil`) or `notNil` of the value on top, while the core library's
    /// definitions stand: a comparison with nil that deoptimizes to the state before the
    /// send if a class loaded since redefines either.
    pub(super) fn nil_test(
        &mut self,
        s: &mut State,
        is_nil: bool,
        i: usize,
        before: &[ValueId],
    ) -> Result<(), String> {
        let state = self.state(s, i, Resume::Before, before);
        let value = pop(s)?;
        let kind = InstKind::NilTest { value, is_nil };
        let flag = self.value(s, kind, i, Some(state));
        let v = self.value(s, InstKind::FlagToBool(flag), i, None);
        s.stack.push(v);
        Ok(())
    }

    /// `v` as a small integer, behind a guard that deoptimizes to `state` (the state before
    /// the send whose operand it is).
    pub(super) fn guard_int(
        &mut self,
        s: &State,
        v: ValueId,
        i: usize,
        state: FrameStateId,
    ) -> ValueId {
        let kind = InstKind::GuardInt {
            value: v,
            reason: DeoptReason::NotSmallInts,
        };
        self.value(s, kind, i, Some(state))
    }

    /// A binary send: small-integer arithmetic in place where the site only ever saw small
    /// integers, else a send (guarded by receiver class where the cache says).
    pub(super) fn binary(
        &mut self,
        s: &mut State,
        site: SiteId,
        i: usize,
        before: &[ValueId],
    ) -> Result<(), String> {
        let facts = self.facts(site);
        let compare = |op| match op {
            SiteOp::Less => Some(IntCmp::Less),
            SiteOp::Greater => Some(IntCmp::Greater),
            SiteOp::LessEq => Some(IntCmp::LessEq),
            SiteOp::GreaterEq => Some(IntCmp::GreaterEq),
            SiteOp::Equal => Some(IntCmp::Equal),
            SiteOp::NotEqual => Some(IntCmp::NotEqual),
            _ => None,
        };
        if let Some(kinds) = facts.expects_doubles.filter(|_| facts.argc == 1) {
            let float = FloatOp::of_site(facts.int_op)
                .map(Err)
                .or_else(|| compare(facts.int_op).map(Ok));
            if let Some(float) = float {
                return self.double_binary(s, float, kinds, i, before);
            }
        }
        let arith = IntOp::of_site(facts.int_op)
            .map(Err)
            .or_else(|| compare(facts.int_op).map(Ok));
        let Some(arith) = arith.filter(|_| facts.expects_small_ints && facts.argc == 1) else {
            return self.send(s, site, i, before, false);
        };
        let state = self.state(s, i, Resume::Before, before);
        let (receiver, args) = self.operands(s, 1)?;
        let lhs = self.guard_int(s, receiver, i, state);
        let rhs = self.guard_int(s, args[0], i, state);
        let v = match arith {
            Err(op) => {
                let st = op.may_overflow().then_some(state);
                self.value(s, InstKind::IntBinary { op, lhs, rhs }, i, st)
            }
            Ok(op) => {
                let flag = self.value(s, InstKind::IntCompare { op, lhs, rhs }, i, None);
                self.value(s, InstKind::FlagToBool(flag), i, None)
            }
        };
        s.stack.push(v);
        Ok(())
    }

    /// A binary send at a site that saw only doubles (with doubles or small integers): done
    /// on doubles behind guards on the operands, its result boxed (a later pass keeps
    /// doubles unboxed where they flow into more arithmetic, frame states and loops).
    pub(super) fn double_binary(
        &mut self,
        s: &mut State,
        op: Result<IntCmp, FloatOp>,
        kinds: DoubleOperands,
        i: usize,
        before: &[ValueId],
    ) -> Result<(), String> {
        let state = self.state(s, i, Resume::Before, before);
        let (receiver, args) = self.operands(s, 1)?;
        let lhs = self.double(s, receiver, kinds.receiver_may_be_int, state, i);
        let rhs = self.double(s, args[0], kinds.argument_may_be_int, state, i);
        let v = match op {
            Err(op) => {
                let r = self.value(s, InstKind::FloatBinary { op, lhs, rhs }, i, None);
                self.value(s, InstKind::BoxFloat(r), i, None)
            }
            Ok(op) => {
                let flag = self.value(s, InstKind::FloatCompare { op, lhs, rhs }, i, None);
                self.value(s, InstKind::FlagToBool(flag), i, None)
            }
        };
        s.stack.push(v);
        Ok(())
    }

    /// `v` as a double: the double a box was made of, a constant's, or `v` unboxed behind a
    /// guard that deoptimizes to `state` (taking small integers too with `accept_int`).
    pub(super) fn double(
        &mut self,
        s: &State,
        v: ValueId,
        accept_int: bool,
        state: FrameStateId,
        i: usize,
    ) -> ValueId {
        if let Some(InstKind::BoxFloat(d)) = self.f.def_inst(v).map(|d| &d.kind) {
            return *d;
        }
        let constant = self.f.const_value(v).and_then(|c| {
            c.as_small_float()
                .or_else(|| c.as_int().filter(|_| accept_int).map(|n| n as f64))
        });
        if let Some(d) = constant {
            return self.value(s, InstKind::FloatConst(d.to_bits()), i, None);
        }
        let kind = InstKind::UnboxFloat {
            value: v,
            accept_int,
            reason: DeoptReason::NotDoubles,
        };
        self.value(s, kind, i, Some(state))
    }

    /// A send: the receiver classes the site saw done in place or called directly behind
    /// their guards, the rest sent.
    pub(super) fn send(
        &mut self,
        s: &mut State,
        site: SiteId,
        i: usize,
        before: &[ValueId],
        is_super: bool,
    ) -> Result<(), String> {
        let facts = self.facts(site);
        let guard_state = self.state(s, i, Resume::Before, before);
        let (receiver, args) = self.operands(s, facts.argc as usize)?;
        if is_super {
            // Its target is fixed: called directly or done in place, no guard.
            let v = match facts.expects_receiver {
                Some(ExpectedReceivers::One(e)) => {
                    self.target(s, e, site, receiver, &args, i, guard_state)?
                }
                _ => self.call(s, site, receiver, args, i, true),
            };
            s.stack.push(v);
            return Ok(());
        }
        let Some(expected) = facts.expects_receiver else {
            let v = self.call(s, site, receiver, args, i, is_super);
            s.stack.push(v);
            return Ok(());
        };
        if let ExpectedReceivers::One(e) = expected {
            if matches!(e.target, ExpectedTarget::BlockValue)
                && self
                    .known_block(receiver)
                    .is_some_and(|(b, _)| b.num_args as usize == args.len())
            {
                // A closure this function makes, of the arity the send passes: its class is
                // the block class of that arity, the one the cache saw.
                let v = self.target(s, e, site, receiver, &args, i, guard_state)?;
                s.stack.push(v);
                return Ok(());
            }
            // A double's target unboxes the receiver, which is its guard.
            let checked = if matches!(e.target, ExpectedTarget::DoubleMath(_)) {
                receiver
            } else {
                let guard = InstKind::GuardClass {
                    value: receiver,
                    class: e.class,
                    reason: DeoptReason::ReceiverClass,
                };
                self.value(s, guard, i, Some(guard_state))
            };
            let v = self.target(s, e, site, checked, &args, i, guard_state)?;
            s.stack.push(v);
            return Ok(());
        }
        // A class switch: each class the site expects in turn, then the send. Classes that
        // reach the same method share one copy of its code.
        let join = self.f.add_block(self.act.scope, i as u32);
        let result = self.f.add_param(join, Ty::Word);
        let mut targets: Vec<(ExpectedReceiver, Vec<u32>)> = Vec::new();
        for e in expected.classes() {
            match targets.iter_mut().find(|(t, _)| t.code == e.code) {
                Some((_, classes)) => classes.push(e.class),
                None => targets.push((*e, vec![e.class])),
            }
        }
        for (e, classes) in targets {
            let hit = self.f.add_block(self.act.scope, i as u32);
            for class in classes {
                let flag = self.value(
                    s,
                    InstKind::ClassIs {
                        value: receiver,
                        class,
                    },
                    i,
                    None,
                );
                let miss = self.f.add_block(self.act.scope, i as u32);
                self.f.blocks[s.block.index()].term = Terminator::Branch {
                    cond: flag,
                    then: Edge {
                        block: hit,
                        args: vec![],
                    },
                    otherwise: Edge {
                        block: miss,
                        args: vec![],
                    },
                };
                s.block = miss;
            }
            let mut in_hit = State {
                block: hit,
                ..s.clone()
            };
            let v = self.target(&mut in_hit, e, site, receiver, &args, i, guard_state)?;
            self.f.blocks[in_hit.block.index()].term = Terminator::Jump(Edge {
                block: join,
                args: vec![v],
            });
        }
        let v = self.call(s, site, receiver, args, i, false);
        self.f.blocks[s.block.index()].term = Terminator::Jump(Edge {
            block: join,
            args: vec![v],
        });
        s.block = join;
        s.stack.push(result);
        Ok(())
    }

    /// A send through the VM, or a super send.
    pub(super) fn call(
        &mut self,
        s: &State,
        site: SiteId,
        receiver: ValueId,
        args: Vec<ValueId>,
        i: usize,
        is_super: bool,
    ) -> ValueId {
        let kind = if is_super {
            InstKind::SuperSend {
                site,
                receiver,
                args,
            }
        } else {
            InstKind::Send {
                site,
                receiver,
                args,
            }
        };
        self.value(s, kind, i, None)
    }

    /// What one expected receiver class runs at the site, done in place or called.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn target(
        &mut self,
        s: &mut State,
        e: ExpectedReceiver,
        site: SiteId,
        receiver: ValueId,
        args: &[ValueId],
        i: usize,
        guard_state: FrameStateId,
    ) -> Result<ValueId, String> {
        let in_place = match e.target {
            ExpectedTarget::Trivial { kind, .. } => matches!(
                kind,
                TRIVIAL_GETTER | TRIVIAL_SETTER | TRIVIAL_CONSTANT | TRIVIAL_RECEIVER
            ),
            ExpectedTarget::Method(_) | ExpectedTarget::Primitive(_) => false,
            ExpectedTarget::ArrayAt
            | ExpectedTarget::ArrayAtPut
            | ExpectedTarget::ArrayLength
            | ExpectedTarget::StringLength
            | ExpectedTarget::BlockValue
            | ExpectedTarget::Identical
            | ExpectedTarget::StringEqual { .. }
            | ExpectedTarget::NewInstance { .. }
            | ExpectedTarget::NewArray
            | ExpectedTarget::DoubleMath(_) => true,
        };
        if in_place {
            // A method called directly runs its hook at its entry; a `value…` calls the
            // closure's body that way, but the primitive's own call is done here.
            self.push(s, InstKind::CallHook(e.code), i, None);
        }
        Ok(match e.target {
            ExpectedTarget::Trivial { kind, operand } => match kind {
                TRIVIAL_GETTER => self.value(
                    s,
                    InstKind::LoadField {
                        obj: receiver,
                        index: operand as u16,
                    },
                    i,
                    None,
                ),
                TRIVIAL_SETTER => {
                    let kind = InstKind::StoreField {
                        obj: receiver,
                        index: operand as u16,
                        value: args[0],
                    };
                    self.push(s, kind, i, None);
                    receiver
                }
                TRIVIAL_CONSTANT => self.constant(s.block, Value(operand), i as u32),
                TRIVIAL_RECEIVER => receiver,
                _ => self.call(s, site, receiver, args.to_vec(), i, false),
            },
            ExpectedTarget::Method(code) if self.inlines(site, code) => {
                let mut entry = vec![receiver];
                entry.extend_from_slice(args);
                return self.inline_activation(s, code, entry, None, None, false, i);
            }
            ExpectedTarget::Method(code) | ExpectedTarget::Primitive(code) => {
                let kind = InstKind::CallMethod {
                    code: code.id,
                    receiver,
                    args: args.to_vec(),
                };
                self.value(s, kind, i, None)
            }
            ExpectedTarget::ArrayAt => {
                let index = self.guard_int(s, args[0], i, guard_state);
                let kind = InstKind::ArrayAt {
                    array: receiver,
                    index,
                };
                self.value(s, kind, i, Some(guard_state))
            }
            ExpectedTarget::ArrayAtPut => {
                let index = self.guard_int(s, args[0], i, guard_state);
                let kind = InstKind::ArrayAtPut {
                    array: receiver,
                    index,
                    value: args[1],
                };
                self.push(s, kind, i, Some(guard_state));
                args[1]
            }
            ExpectedTarget::ArrayLength => self.value(s, InstKind::ArrayLength(receiver), i, None),
            ExpectedTarget::StringLength => {
                let kind = InstKind::StringLength(receiver);
                self.value(s, kind, i, Some(guard_state))
            }
            ExpectedTarget::BlockValue => {
                if let Some(v) = self.inline_block(s, receiver, args, i)? {
                    return Ok(v);
                }
                let kind = InstKind::CallBlock {
                    closure: receiver,
                    args: args.to_vec(),
                };
                self.value(s, kind, i, None)
            }
            ExpectedTarget::Identical => {
                let flag = self.value(s, InstKind::Identical(receiver, args[0]), i, None);
                self.value(s, InstKind::FlagToBool(flag), i, None)
            }
            ExpectedTarget::StringEqual { symbol } => {
                let kind = InstKind::StringEqual {
                    lhs: receiver,
                    rhs: args[0],
                    symbol,
                };
                let flag = self.value(s, kind, i, None);
                self.value(s, InstKind::FlagToBool(flag), i, None)
            }
            ExpectedTarget::NewInstance { plain: None } => {
                let kind = InstKind::NewInstance(receiver);
                self.value(s, kind, i, Some(guard_state))
            }
            ExpectedTarget::NewInstance { plain: Some(shape) } => {
                let kind = InstKind::NewObject {
                    class: receiver,
                    shape,
                };
                self.value(s, kind, i, Some(guard_state))
            }
            ExpectedTarget::NewArray => {
                let kind = InstKind::NewArray {
                    class: receiver,
                    length: args[0],
                };
                self.value(s, kind, i, Some(guard_state))
            }
            ExpectedTarget::DoubleMath(op) => {
                let x = self.double(s, receiver, false, guard_state, i);
                let r = self.value(s, InstKind::FloatUnary { op, value: x }, i, None);
                self.value(s, InstKind::BoxFloat(r), i, None)
            }
        })
    }
}
