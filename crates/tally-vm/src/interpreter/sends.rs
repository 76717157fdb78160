//! Sends: the inline cache's slow path, lookups, primitive and trivial calls, blocks,
//! `doesNotUnderstand:` and unknown globals. The dispatch loop does the common case of a send
//! inline and calls here for the rest.

use tally_heap::Value;

use crate::bytecode::{CodeId, SiteId};
use crate::compiler::CodeKind;
use crate::objects::{block, Kind};
use crate::primitives::Primitive;
use crate::profiling::{HooksLoop, LoopMode, VM_STATE};
use crate::runtime::{ClassId, Code, Symbol, Trivial, NO_CLASS};
use crate::{Vm, VmError};

impl Vm {
    /// A send site missed its inline cache: look the selector up for `class` and cache the
    /// answer (a miss is not cached, so `doesNotUnderstand:` is sent each time).
    #[inline(never)]
    #[cfg_attr(target_os = "linux", link_section = "tally_interpreter")]
    pub(super) fn relink(&mut self, site_id: SiteId, class: ClassId) -> Option<CodeId> {
        let selector = self.rt.sites[site_id as usize].selector;
        let found = if class == NO_CLASS {
            None
        } else {
            self.rt.lookup(class, selector)
        };
        if let Some(c) = found {
            // The newest class goes first; the previous first entry is kept as the second.
            let site = &mut self.rt.sites[site_id as usize];
            if site.cached_class2 != NO_CLASS && site.super_lookup.is_none() {
                // A third class: the second entry is dropped, and both are kept in the
                // site's list of the classes it saw.
                let seen = site.seen.get_or_insert_with(Default::default);
                seen.note(site.cached_class2, site.cached_code2, false);
                seen.note(class, c, true);
            }
            site.cached_class2 = site.cached_class;
            site.cached_code2 = site.cached_code;
            site.cached_class = class;
            site.cached_code = c;
        }
        found
    }

    /// Sends from a send site; the receiver and arguments are on the stack.
    // Inlined in every build: the loop is its only caller. Left to LLVM, a build with the
    // hooks compiled out (one loop) inlines it and a build with them (three loops) does not,
    // and the loop that runs with profiling off would differ from the compiled-out one.
    #[inline(always)]
    #[cfg_attr(target_os = "linux", link_section = "tally_interpreter")]
    pub(crate) fn send(&mut self, site_id: SiteId, is_super: bool) -> Result<(), VmError> {
        let site = &self.rt.sites[site_id as usize];
        let argc = site.argc as usize;
        let selector = site.selector;
        let recv = self.rt.stack[self.rt.stack.len() - 1 - argc];
        let class = if is_super {
            site.super_lookup.unwrap_or(NO_CLASS)
        } else {
            self.rt.class_of(recv)
        };
        let code = if site.cached_class == class {
            Some(site.cached_code)
        } else if site.cached_class2 == class {
            Some(site.cached_code2)
        } else {
            self.relink(site_id, class)
        };
        match code {
            Some(c) => self.invoke(c, argc),
            None => self.does_not_understand(selector, argc),
        }
    }

    /// A send without a site (from primitives and the VM itself).
    #[cfg_attr(target_os = "linux", link_section = "tally_interpreter")]
    pub(crate) fn send_selector(&mut self, selector: Symbol, argc: usize) -> Result<(), VmError> {
        let recv = self.rt.stack[self.rt.stack.len() - 1 - argc];
        let class = self.rt.class_of(recv);
        match self.rt.lookup(class, selector) {
            Some(c) => self.invoke(c, argc),
            None => self.does_not_understand(selector, argc),
        }
    }

    /// Runs a method whose receiver and `argc` arguments are on the stack: a primitive runs
    /// now, SOM code gets a frame. The caller's `ip` must be saved.
    #[cfg_attr(target_os = "linux", link_section = "tally_interpreter")]
    pub(crate) fn invoke(&mut self, code_id: CodeId, argc: usize) -> Result<(), VmError> {
        let code: &'static Code = self.rt.codes[code_id as usize];
        let f = self.yieldpoint_flag();
        if f != 0 {
            self.profile_prologue(code_id, f)?;
        }
        self.run_in_place_or_invoke(code, argc)
    }

    /// A trivial method done in place, or else the method invoked (after the prologue hook).
    #[inline(always)]
    #[cfg_attr(target_os = "linux", link_section = "tally_interpreter")]
    pub(super) fn run_in_place_or_invoke(
        &mut self,
        code: &'static Code,
        argc: usize,
    ) -> Result<(), VmError> {
        if code.trivial != Trivial::No
            && argc == code.num_args as usize
            && self.run_trivial(code.trivial, argc)
        {
            return Ok(());
        }
        self.invoke_unprofiled::<HooksLoop>(code, argc)
    }

    /// A send the loop does without a frame of its own (a primitive or trivial method), with
    /// the flag the loop read: the prologue hook if it is raised, then the method.
    #[inline(always)]
    pub(super) fn invoke_frameless<M: LoopMode>(
        &mut self,
        code: &'static Code,
        argc: usize,
        f: u8,
    ) -> Result<(), VmError> {
        if M::ENTRY_HOOKS && f != 0 {
            return self.invoke_after_hook::<M>(code, argc, f);
        }
        self.invoke_unprofiled::<M>(code, argc)
    }

    /// The prologue hook of a frameless send, then the send: out of line, so the loop pays
    /// for it only when the flag is raised. The loop with entry hooks alone
    /// (`M::LOOP_HOOKS` false) hands back to the plain one here once the hook has closed the
    /// sampling window (see `Dispatch::Entries`).
    #[cold]
    #[inline(never)]
    #[cfg_attr(target_os = "linux", link_section = "tally_interpreter")]
    pub(super) fn invoke_after_hook<M: LoopMode>(
        &mut self,
        code: &'static Code,
        argc: usize,
        f: u8,
    ) -> Result<(), VmError> {
        self.profile_prologue(code.id, f)?;
        self.run_in_place_or_invoke(code, argc)?;
        if !M::LOOP_HOOKS && self.loop_switch_due() {
            return Err(VmError::SwitchLoop);
        }
        Ok(())
    }

    /// `invoke` after the prologue hook, for anything but a trivial method done in place.
    ///
    /// `M` is the calling loop's mode (see `execute_loop`); the loops without loop hooks never
    /// run where primitive calls must publish their state.
    #[cfg_attr(target_os = "linux", link_section = "tally_interpreter")]
    pub(super) fn invoke_unprofiled<M: LoopMode>(
        &mut self,
        code: &'static Code,
        argc: usize,
    ) -> Result<(), VmError> {
        if let Some(p) = code.primitive {
            if M::LOOP_HOOKS && self.publishes_states() {
                return self.run_primitive_in_state(p, argc);
            }
            return p(self, argc);
        }
        if code.ops.is_empty() || argc != code.num_args as usize {
            return Err(self.uninvokable(code, argc));
        }
        let bp = self.rt.stack.len() - 1 - argc;
        self.enter_after_prologue(code, bp, Value::NONE)
    }

    /// Why `code` cannot run with `argc` arguments. Out of line so that `invoke_unprofiled`,
    /// on the path of every primitive call, saves no registers and keeps its tail calls.
    #[cold]
    #[inline(never)]
    pub(super) fn uninvokable(&self, code: &'static Code, argc: usize) -> VmError {
        if code.ops.is_empty() {
            return self.error(format!(
                "primitive {} is not implemented by Tally",
                self.rt.code_name(code)
            ));
        }
        self.error(format!(
            "{} takes {} arguments but was sent {argc}",
            self.rt.code_name(code),
            code.num_args
        ))
    }

    /// A primitive run while samples are taken: the VM state says so for its duration. Out of
    /// line and small, so the path without sampling keeps its tail call and saves no registers.
    #[inline(never)]
    pub(super) fn run_primitive_in_state(
        &mut self,
        p: Primitive,
        argc: usize,
    ) -> Result<(), VmError> {
        let previous = VM_STATE.set(tally_profile::VmState::Primitive);
        // Matched rather than held and returned: copying the whole `Result` back reads words
        // the primitive has just written in smaller pieces, a store-forwarding stall on every
        // primitive call of a sampled run.
        match p(self, argc) {
            Ok(()) => {
                VM_STATE.set(previous);
                Ok(())
            }
            Err(e) => {
                VM_STATE.set(previous);
                Err(e)
            }
        }
    }

    /// Does a trivial method's work in place of the receiver and arguments; false when the
    /// receiver does not have the field (the method then runs normally and reports it).
    #[inline]
    #[cfg_attr(target_os = "linux", link_section = "tally_interpreter")]
    pub(super) fn run_trivial(&mut self, trivial: Trivial, argc: usize) -> bool {
        let len = self.rt.stack.len();
        let recv = self.rt.stack[len - 1 - argc];
        let result = match trivial {
            Trivial::Getter(i) => match self.field(recv, i as usize) {
                Some(v) => v,
                None => return false,
            },
            Trivial::Setter(i) => {
                if !self.set_field(recv, i as usize, self.rt.stack[len - 1]) {
                    return false;
                }
                recv
            }
            Trivial::Constant(v) => v,
            Trivial::Literal(i) => self.rt.literals[i as usize],
            Trivial::Receiver => recv,
            Trivial::No => return false,
        };
        self.rt.stack.truncate(len - argc);
        self.rt.stack[len - 1 - argc] = result;
        true
    }

    /// Records binary send `site`'s operands `a` and `b` in its type feedback; `answered`:
    /// the fast path gave the answer (two small integers then need no more than a test).
    #[inline(always)]
    pub(crate) fn note_operands(&mut self, site: SiteId, a: Value, b: Value, answered: bool) {
        let double = self.rt.core.double;
        let kinds = &mut self.rt.sites[site as usize].operands;
        if answered && a.is_int() && b.is_int() {
            kinds.note_small_ints();
        } else {
            kinds.note_other(a, b, double);
        }
    }

    /// Answers a binary send from `site` in place when IntOp knows the answer for its operands
    /// (small integers, immediate doubles, Booleans); false when it must be sent.
    #[inline]
    pub(crate) fn answer_binary_in_place(&mut self, site: SiteId) -> bool {
        let int_op = self.rt.sites[site as usize].int_op;
        let len = self.rt.stack.len();
        let (a, b) = (self.rt.stack[len - 2], self.rt.stack[len - 1]);
        let answer = int_op.answer(a, b);
        self.note_operands(site, a, b, answer.is_some());
        match answer {
            Some(r) => {
                self.rt.stack.truncate(len - 1);
                self.rt.stack[len - 2] = r;
                true
            }
            None => false,
        }
    }

    /// Pushes a new closure of block `id` over the top frame (its context and receiver).
    #[cfg_attr(target_os = "linux", link_section = "tally_interpreter")]
    pub(crate) fn push_block(&mut self, id: CodeId) -> Result<(), VmError> {
        let b = self.alloc(
            self.block_class_for(id),
            Kind::Block,
            block::SLOTS,
            Value::NIL,
            0,
        )?;
        let f = self.rt.frames.top();
        b.init_slot(block::CODE, Value::from_small_int(id as i64));
        b.init_slot(block::CONTEXT, f.ctx);
        b.init_slot(block::RECEIVER, self.rt.stack[f.bp()]);
        self.push(b);
        Ok(())
    }

    /// Evaluates the closure at the bottom of the `argc + 1` values on top of the stack.
    #[cfg_attr(target_os = "linux", link_section = "tally_interpreter")]
    pub(crate) fn invoke_block(&mut self, argc: usize) -> Result<(), VmError> {
        let bp = self.rt.stack.len() - 1 - argc;
        let closure = self.rt.stack[bp];
        let code_id = self.block_ref(closure)?;
        let code: &'static Code = self.rt.codes[code_id as usize];
        if code.num_args as usize != argc {
            return Err(self.error(format!(
                "a block with {} parameter(s) was evaluated with {argc} argument(s)",
                code.num_args
            )));
        }
        debug_assert_eq!(code.kind, CodeKind::Block);
        self.rt.stack[bp] = closure.slot(block::RECEIVER);
        self.enter(code, bp, closure)
    }

    #[cfg_attr(target_os = "linux", link_section = "tally_interpreter")]
    pub(super) fn does_not_understand(
        &mut self,
        selector: Symbol,
        argc: usize,
    ) -> Result<(), VmError> {
        let recv = self.rt.stack[self.rt.stack.len() - 1 - argc];
        let class = self.rt.class_of(recv);
        let dnu = self.rt.symbols.intern("doesNotUnderstand:arguments:");
        let Some(handler) = self.rt.lookup(class, dnu) else {
            return Err(self.error(format!(
                "Method {} not found in class {}",
                self.rt.symbols.name(selector),
                self.rt.class_name(class)
            )));
        };
        let args = self.alloc(self.rt.core.array, Kind::Array, argc, Value::NIL, 0)?;
        let first = self.rt.stack.len() - argc;
        for i in 0..argc {
            args.init_slot(i, self.rt.stack[first + i]);
        }
        self.rt.stack.truncate(first);
        self.push(Value::from_symbol(selector));
        self.push(args);
        self.invoke(handler, 2)
    }

    /// A global that is not defined yet: load the class of that name from the class path, or
    /// ask the receiver (`unknownGlobal:`).
    // Inlined in every build: the loop is its only caller. Left to LLVM, a build with the
    // hooks compiled out (one loop) inlines it and a build with them (three loops) does not,
    // and the loop that runs with profiling off would differ from the compiled-out one.
    #[inline(always)]
    pub(super) fn unknown_global(&mut self, slot: u32) -> Result<(), VmError> {
        let name = self.rt.global_names[slot as usize];
        if let Some(class) = self.load_class(name)? {
            let obj = self.rt.classes[class as usize].object;
            self.push(obj);
            return Ok(());
        }
        let recv = self.rt.stack[self.rt.frames.top().bp()];
        let sel = self.rt.symbols.intern("unknownGlobal:");
        if self.rt.lookup(self.rt.class_of(recv), sel).is_none() {
            return Err(self.error(format!("unknown global '{}'", self.rt.symbols.name(name))));
        }
        self.push(recv);
        self.push(Value::from_symbol(name));
        self.send_selector(sel, 1)
    }
}
