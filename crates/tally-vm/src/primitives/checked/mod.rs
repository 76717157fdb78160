//! The checked boundary between SOM values and the primitives' view of memory.
//!
//! Every primitive decodes its receiver and arguments through these accessors, which check
//! the value's kind before reading it as a reference, a number or text, and answer a SOM
//! error on a mismatch, never a wrong read or a panic. A receiver is checked like an
//! argument: sends and reflection already guarantee its class (ordinary sends by lookup,
//! reflection with `check_invocation`, `Class>>new` by refusing classes whose instances have
//! a special layout), so the check costs a compare on the fast path and catches any breach of
//! those invariants as an error instead of memory unsafety. Runtime stubs of other tiers call
//! the same functions, so the guarantee carries to every tier.

mod refs;
mod scalars;

pub(crate) use scalars::Operand;

#[cfg(test)]
mod tests {
    use tally_heap::Value;

    use crate::objects::Kind;
    use crate::primitives::TABLES;
    use crate::{Vm, VmError, VmOptions};

    /// Primitives that hand control to SOM code or end the process rather than answer (they
    /// need a running interpreter; the end-to-end robustness sweep covers them), or that
    /// write to the process's stdout/stderr.
    const NOT_DIRECT: &[&str] = &[
        "value",
        "value:",
        "value:with:",
        "value:with:with:",
        "restart",
        "perform:",
        "perform:withArguments:",
        "perform:inSuperclass:",
        "perform:withArguments:inSuperclass:",
        "invokeOn:with:",
        "exit:",
        "halt",
        "inspect",
        "printString:",
        "printNewline",
        "errorPrint:",
        "errorPrintln:",
        "printStackTrace",
    ];

    /// One value of each shape a primitive may be handed, left on the VM's stack (a GC root).
    fn push_samples(vm: &mut Vm) -> usize {
        let samples = [
            Value::from_small_int(3),
            Value::NIL,
            Value::TRUE,
            Value::from_symbol(vm.rt.symbols.intern("foo")),
            vm.rt.classes[vm.rt.core.object as usize].object,
            vm.rt.classes[vm.rt.core.integer as usize].object,
        ];
        vm.rt.stack.extend(samples);
        let big = vm
            .int_result(num_bigint::BigInt::from(1u128 << 100))
            .unwrap();
        vm.rt.stack.push(big);
        let d = vm.new_double(1.5).unwrap();
        vm.rt.stack.push(d);
        let s = vm.new_string("ab\u{e9}".as_bytes()).unwrap();
        vm.rt.stack.push(s);
        let a = vm
            .alloc(vm.rt.core.array, Kind::Array, 2, Value::NIL, 0)
            .unwrap();
        vm.rt.stack.push(a);
        let o = vm
            .alloc(vm.rt.core.object, Kind::Plain, 0, Value::NIL, 0)
            .unwrap();
        vm.rt.stack.push(o);
        vm.rt.stack.len()
    }

    fn arity(selector: &str) -> usize {
        if selector.ends_with(':') {
            selector.matches(':').count()
        } else if selector.starts_with(|c: char| c.is_alphabetic()) {
            0
        } else {
            1
        }
    }

    /// Every primitive, called directly with every sample as its receiver and as each of its
    /// arguments, answers a value or a SOM error: the typed layer checks the receiver too, so
    /// even a call that no send could make (an Integer primitive on a String) cannot read
    /// memory the wrong way or panic.
    #[test]
    fn every_primitive_answers_or_errs_for_every_kind_of_receiver_and_argument() {
        crate::test_process::in_own_process(
            "primitives::checked::tests::every_primitive_answers_or_errs_for_every_kind_of_receiver_and_argument",
            || {
                let mut vm = Vm::new(VmOptions::default()).unwrap();
                let base = vm.rt.stack.len();
                let top = push_samples(&mut vm);
                let kinds = top - base;
                let (mut calls, mut errors) = (0, 0);
                for (class, side, table) in TABLES {
                    for (selector, primitive) in table.iter() {
                        if NOT_DIRECT.contains(selector) {
                            continue;
                        }
                        let argc = arity(selector);
                        for combo in 0..kinds.pow(argc as u32 + 1) {
                            let mut k = combo;
                            for _ in 0..=argc {
                                let v = vm.rt.stack[base + k % kinds];
                                vm.rt.stack.push(v);
                                k /= kinds;
                            }
                            let what = format!(
                                "{class}{} >> {selector} (combo {combo})",
                                if *side { " class" } else { "" }
                            );
                            match primitive(&mut vm, argc) {
                                Ok(()) => assert_eq!(vm.rt.stack.len(), top + 1, "{what} left its answer"),
                                Err(VmError::Runtime { .. }) => errors += 1,
                                Err(e) => panic!("{what}: not a SOM error: {e:?}"),
                            }
                            vm.rt.stack.truncate(top);
                            calls += 1;
                        }
                    }
                }
                assert!(calls > 1000, "{calls} calls");
                assert!(
                    errors > 100,
                    "wrong kinds give SOM errors ({errors} of {calls})"
                );
            },
        );
    }
}
