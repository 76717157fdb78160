//! Method hooks: calls into the VM at the entry and exit of chosen methods, shared by GC
//! hints (`gc_hints`), method-level phases (`phases`) and injected delays (`inject`). A run
//! uses one of them at a time.
//!
//! Hooked methods carry bits in their code (`Code::hooks`), set by name before the program
//! runs and as classes load. The interpreter tests them at every frame it sets up and pops
//! in its loops with entry hooks (a run with hooks never runs the plain loop, which has no
//! such test, so runs without hooks pay nothing), and where it invokes a method from a
//! primitive or from compiled code's send stub. Compiled code of a hooked method calls the
//! `method_hook` stub at its fresh entry and before its return while [`METHOD_HOOKS_ARMED`]
//! is set, and so does compiled code that inlines one, once the inlined method's frame is
//! pushed and before it is popped. A method whose bits include `HOOK_KEEPS_FRAME` is never
//! inlined: its hooks may collect (GC hints), which an inlined body's values would not
//! survive. Hooks of the others (phases) must not collect.
//!
//! The entry hook runs once the frame is set up. The exit hook runs, in the interpreter, once
//! the frame is popped and its result is on the caller's stack, and in compiled code just
//! before the pop: both are points where a collection may already happen, so every value is
//! where the collector finds it. Each hook is told the depth of the frame it is about (its
//! position in the frame stack, counting from 1), so that frames left by a non-local return
//! or an error, which run no exit hook, can be told apart.

use std::sync::atomic::{AtomicBool, Ordering};

use rustc_hash::FxHashMap;
use tally_profile::gc_hints::PointKind;

use crate::compiler::CodeKind;
use crate::runtime::Code;
use crate::{Vm, VmError};

/// Set while hooked methods' compiled code must call the `method_hook` stub: while a
/// collection is near in a run with GC hints, always in a phases run. A `static` so compiled
/// code tests it with one load from a fixed address.
pub(crate) static METHOD_HOOKS_ARMED: AtomicBool = AtomicBool::new(false);

/// Which methods have hooks, and their `Code::hooks` bits.
pub(crate) enum HookedMethods {
    /// Every method (not blocks).
    All(u8),
    /// By name (`Holder>>selector`).
    Named(FxHashMap<String, u8>),
}

impl Vm {
    /// Hooks `methods`, from now on and as classes load, and makes the interpreter run a
    /// loop that tests the hooks. One user of hooks per run.
    pub(crate) fn hook_methods(&mut self, methods: HookedMethods) -> Result<(), VmError> {
        if self.rt.hooked_methods.is_some() {
            return Err(VmError::Fatal(
                "GC hints, method-level phases and injected delays cannot be used in the same run"
                    .into(),
            ));
        }
        self.rt.hooked_methods = Some(methods);
        self.resolve_method_hooks(0);
        if self.dispatch == crate::profiling::Dispatch::Plain {
            self.dispatch = crate::profiling::Dispatch::Entries;
        }
        Ok(())
    }

    /// Sets the hook bits of the methods from `codes[first]` on.
    pub(crate) fn resolve_method_hooks(&mut self, first: usize) {
        let Some(methods) = &self.rt.hooked_methods else {
            return;
        };
        for code in &self.rt.codes[first..] {
            if code.kind != CodeKind::Method {
                continue;
            }
            let bits = match methods {
                HookedMethods::All(bits) => *bits,
                HookedMethods::Named(named) => match named.get(&self.rt.code_name(code)) {
                    Some(&b) => b,
                    None => continue,
                },
            };
            code.hooks.store(bits, Ordering::Relaxed);
        }
    }

    /// A hooked method's entry (its frame, at `depth`, set up) or exit (around its frame's
    /// pop). May collect.
    #[cold]
    #[inline(never)]
    pub(crate) fn method_hook(
        &mut self,
        code: &'static Code,
        kind: PointKind,
        depth: usize,
    ) -> Result<(), VmError> {
        if self.phases.is_some() {
            self.phase_hook(code, kind, depth);
        }
        if self.injection.is_some() && kind == PointKind::Entry {
            self.run_injected_delay();
        }
        if self.gc_hints.is_some() {
            self.gc_hint_at(code, kind)?;
        }
        Ok(())
    }

    /// `method_hook` for compiled code, at the entry or before the return of the method whose
    /// frame is on top.
    pub(crate) fn method_hook_in_compiled(&mut self, kind: PointKind) -> Result<(), VmError> {
        let code: &'static Code = self.rt.codes[self.rt.frames.top().code as usize];
        self.method_hook(code, kind, self.rt.frames.len())
    }

    /// A non-local return left the frames above `depth` without their exit hooks.
    #[cold]
    #[inline(never)]
    pub(crate) fn method_hooks_unwound(&mut self, depth: usize) {
        if self.phases.is_some() {
            self.phases_unwound(depth);
        }
    }
}
