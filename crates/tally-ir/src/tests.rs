//! Functions built from bytecode the compiler makes (as `tally disasm` lists it), checked
//! through their text form and the verifier.

use std::collections::HashMap;

use tally_heap::Value;
use tally_vm::bytecode::{Op, SiteId};
use tally_vm::compiler::{CodeKind, CompiledCode};
use tally_vm::jit::{ExpectedReceiver, ExpectedReceivers, ExpectedTarget, SiteFacts};
use tally_vm::operands::DoubleOperands;
use tally_vm::runtime::{Code, IntOp};

use crate::build::{build, Sites};
use crate::passes::optimize;
use crate::print::print;
use crate::verify::verify;
use crate::{Function, InstKind, Terminator, Ty};

struct Facts(HashMap<SiteId, SiteFacts>);

impl Sites for Facts {
    fn facts(&self, site: SiteId) -> Option<SiteFacts> {
        self.0.get(&site).copied()
    }
}

fn site(argc: u8, int_op: IntOp, small_ints: bool) -> SiteFacts {
    SiteFacts {
        argc,
        int_op,
        expects_small_ints: small_ints,
        expects_doubles: None,
        expects_receiver: None,
        cold: false,
        nil_tests_standard: false,
        receiver_table: 0,
    }
}

fn code(
    id: u32,
    kind: CodeKind,
    args: u16,
    locals: u16,
    context: u16,
    captured: Vec<(u16, u16)>,
    ops: Vec<Op>,
) -> &'static Code {
    let positions = vec![(1, 1); ops.len()];
    let compiled = CompiledCode {
        kind,
        selector: 0,
        holder: 0,
        ops,
        positions,
        num_args: args,
        num_locals: locals,
        context_size: context,
        captured_args: captured,
        source_line: 1,
        source: 0,
    };
    Box::leak(Box::new(Code::from_compiled(id, compiled, 16)))
}

fn names(id: u32) -> String {
    match id {
        1 => "T>>sum:".into(),
        2 => "[] in T>>each:".into(),
        n => format!("code{n}"),
    }
}

/// Builds, optimizes and verifies; answers the function and its text (which reads back).
fn compile(c: &Code, sites: &[(SiteId, SiteFacts)]) -> (Function, String) {
    compile_as(c, sites, false)
}

fn compile_as(c: &Code, sites: &[(SiteId, SiteFacts)], osr: bool) -> (Function, String) {
    let facts = Facts(sites.iter().copied().collect());
    let mut f = build(c, &names(c.id), &facts, osr).expect("builds");
    verify(&f).unwrap_or_else(|e| panic!("built IR invalid: {e}\n{}", print(&f, &names)));
    reads_back(&f);
    optimize(&mut f, c, &|_| None, &mut crate::passes::Unobserved)
        .unwrap_or_else(|e| panic!("{e}\n{}", print(&f, &names)));
    verify(&f).unwrap_or_else(|e| panic!("optimized IR invalid: {e}\n{}", print(&f, &names)));
    reads_back(&f);
    let text = print(&f, &names);
    (f, text)
}

/// `f`'s text parses into a function that prints the same and verifies.
fn reads_back(f: &Function) {
    let text = print(f, &names);
    let mut table = crate::NameTable::default();
    table.add_code(1, names(1));
    table.add_code(2, names(2));
    let back = crate::parse::parse(&text, &table).unwrap_or_else(|e| panic!("{e}\n{text}"));
    assert_eq!(print(&back, &names), text);
    verify(&back).unwrap_or_else(|e| panic!("read back, invalid: {e}\n{text}"));
}

fn count(f: &Function, pred: impl Fn(&InstKind) -> bool) -> usize {
    f.blocks
        .iter()
        .flat_map(|b| b.insts.iter())
        .filter(|&&i| pred(&f.insts[i.index()].kind))
        .count()
}

/// `sum: n = ( | s | s := 0. 1 to: n do: [:i | s := s + i]. ^s )`
fn sum() -> &'static Code {
    sum_from(Value::from_small_int(0))
}

/// [`sum`] with `s` starting at `start`.
fn sum_from(start: Value) -> &'static Code {
    let int = |v| Value::from_small_int(v);
    code(
        1,
        CodeKind::Method,
        1,
        3,
        0,
        vec![],
        vec![
            Op::PushConst(start),
            Op::PopLocal(2),
            Op::PushConst(int(1)),
            Op::Dup,
            Op::PopLocal(3),
            Op::PushLocal(1),
            Op::PopLocal(4),
            Op::PushLocal2(3, 4),
            Op::SendCompareJumpIfFalse(0, 17),
            Op::JumpIfFalse(17),
            Op::PushLocal2(2, 3),
            Op::SendBinary(1),
            Op::PopLocal(2),
            Op::PushLocal(3),
            Op::PushConstSendBinary(int(1), 2),
            Op::PopLocal(3),
            Op::JumpBack(7),
            Op::PopPushLocal(2),
            Op::Return,
        ],
    )
}

fn int(v: i64) -> Value {
    Value::from_small_int(v)
}

fn small_ints(argc: u8, op: IntOp) -> SiteFacts {
    site(argc, op, true)
}

#[test]
fn a_counting_loop_keeps_its_values_in_ssa_with_no_guard_left_inside() {
    let sites = [
        (0, small_ints(1, IntOp::LessEq)),
        (1, small_ints(1, IntOp::Add)),
        (2, small_ints(1, IntOp::Add)),
    ];
    let (f, text) = compile(sum(), &sites);
    // The loop head merges `s` and `i`, both proven small integers by what flows in (the
    // values are named in `tests/ir/pipeline-counting-loop.tir`).
    let head = f
        .blocks
        .iter()
        .skip(1)
        .find(|b| b.params.len() == 2)
        .unwrap_or_else(|| panic!("a loop head merging two values: {text}"));
    assert!(head.params.iter().all(|&p| f.ty(p) == Ty::Int), "{text}");
    // One guard, on the argument `n`; `s + i` and `i + 1` deoptimize only on overflow.
    assert_eq!(
        count(&f, |k| matches!(k, InstKind::GuardInt { .. })),
        1,
        "{text}"
    );
    let adds_the_merged_values = f.insts.iter().any(|i| {
        matches!(i.kind, InstKind::IntBinary { op: crate::IntOp::Add, lhs, rhs, .. }
            if [lhs, rhs] == head.params[..])
    });
    assert!(adds_the_merged_values, "{text}");
    assert!(text.contains("yieldpoint"), "{text}");
    // The comparison's Boolean never exists: the branch tests its flag.
    assert_eq!(
        count(&f, |k| matches!(
            k,
            InstKind::FlagToBool(_) | InstKind::Truth(_)
        )),
        0,
        "{text}"
    );
    // Frame states: `n` is dead once the limit is copied, `s` dead where `s + i` redoes.
    let at = |bci: u32| {
        f.states
            .iter()
            .find(|s| s.bci == bci)
            .unwrap_or_else(|| panic!("a state at {bci}: {text}"))
    };
    assert_eq!(at(11).locals[1..3], [None, None], "{text}");
    assert_eq!(at(11).stack.len(), 3, "{text}");
    assert!(
        at(7).locals[1].is_none() && at(7).locals[2].is_some(),
        "{text}"
    );
}

/// `s := 0.0` and `s + i` at a site that saw only doubles (with integer arguments): `s` is
/// a double through the loop, unboxed nowhere inside it, boxed once for the return; frame
/// states hold the double itself (their exits box it).
#[test]
fn a_loop_of_doubles_keeps_them_unboxed_until_they_are_returned() {
    let doubles = SiteFacts {
        expects_doubles: Some(DoubleOperands {
            receiver_may_be_int: false,
            argument_may_be_int: true,
        }),
        ..site(1, IntOp::Add, false)
    };
    let sites = [
        (0, small_ints(1, IntOp::LessEq)),
        (1, doubles),
        (2, small_ints(1, IntOp::Add)),
    ];
    let zero = Value::from_small_float(0.0).expect("an immediate");
    let (f, text) = compile(sum_from(zero), &sites);
    let floats: Vec<_> = f
        .blocks
        .iter()
        .flat_map(|b| &b.params)
        .filter(|&&p| f.ty(p) == Ty::Float)
        .collect();
    assert_eq!(floats.len(), 1, "{text}");
    assert!(text.contains("float_add"), "{text}");
    let boxes = count(&f, |k| matches!(k, InstKind::BoxFloat(_)));
    assert_eq!(boxes, 1, "{text}");
    // The integer `i` converted, never a guard on `s`.
    let unboxes: Vec<String> = text
        .lines()
        .filter(|l| l.contains("= unbox_float"))
        .map(String::from)
        .collect();
    assert_eq!(unboxes.len(), 1, "{text}");
    assert!(unboxes[0].contains("int too"), "{text}");
    let s = *floats[0];
    assert!(
        f.states.iter().any(|st| st.values().any(|v| v == s)),
        "{text}"
    );
    let returned = f.blocks.iter().find_map(|b| match b.term {
        Terminator::Return(v) => Some(v),
        _ => None,
    });
    let returned = returned.expect("a return");
    assert_eq!(
        f.def_inst(returned).map(|i| &i.kind),
        Some(&InstKind::BoxFloat(s)),
        "{text}"
    );
}

#[test]
fn without_feedback_every_send_goes_through_the_vm_and_resumes_after_the_call() {
    let sites = [
        (0, site(1, IntOp::LessEq, false)),
        (1, site(1, IntOp::Add, false)),
        (2, site(1, IntOp::Add, false)),
    ];
    let (f, text) = compile(sum(), &sites);
    assert_eq!(
        count(&f, |k| matches!(k, InstKind::Send { .. })),
        3,
        "{text}"
    );
    assert_eq!(
        count(&f, |k| matches!(k, InstKind::GuardInt { .. })),
        0,
        "{text}"
    );
    // The comparison's answer is tested as a SOM Boolean (anything else deoptimizes).
    assert_eq!(count(&f, |k| matches!(k, InstKind::Truth(_))), 1, "{text}");
    // A send's state resumes after it, without its receiver and argument on the stack.
    let sends: Vec<_> = f
        .states
        .iter()
        .filter(|s| s.resume == crate::Resume::AfterCall)
        .collect();
    assert_eq!(sends.len(), 3, "{text}");
    assert!(sends.iter().all(|s| s.stack.len() == 1), "{text}");
}

/// `max: a with: b = ( ^a > b ifTrue: [a] ifFalse: [b] )`
#[test]
fn a_conditional_merges_its_arms_into_one_parameter() {
    let c = code(
        3,
        CodeKind::Method,
        2,
        0,
        0,
        vec![],
        vec![
            Op::PushLocal2(1, 2),
            Op::SendCompareJumpIfFalse(0, 5),
            Op::JumpIfFalse(5),
            Op::PushLocal(1),
            Op::Jump(6),
            Op::PushLocal(2),
            Op::Return,
        ],
    );
    let (f, text) = compile(c, &[(0, small_ints(1, IntOp::Greater))]);
    let join = f
        .blocks
        .iter()
        .find(|b| matches!(b.term, crate::Terminator::Return(_)))
        .unwrap();
    assert_eq!(join.params.len(), 1, "{text}");
    assert_eq!(
        count(&f, |k| matches!(k, InstKind::GuardInt { .. })),
        2,
        "{text}"
    );
}

/// `bump = ( count := count + 1. ^count )`
#[test]
fn fields_are_loaded_and_stored_on_the_receiver() {
    let c = code(
        4,
        CodeKind::Method,
        0,
        0,
        0,
        vec![],
        vec![
            Op::PushField(0),
            Op::PushConstSendBinary(int(1), 0),
            Op::PopField(0),
            Op::ReturnField(0),
        ],
    );
    let (f, text) = compile(c, &[(0, small_ints(1, IntOp::Add))]);
    let receiver = f.blocks[0].params[0];
    let on_receiver = |k: &InstKind| match *k {
        InstKind::LoadField { obj, index } | InstKind::StoreField { obj, index, .. } => {
            obj == receiver && index == 0
        }
        _ => false,
    };
    assert_eq!(count(&f, on_receiver), 2, "{text}");
    // The guard's state is before the fused instruction: its constant not yet pushed.
    let state = &f.states[0];
    assert_eq!(
        (state.bci, state.resume),
        (1, crate::Resume::Before),
        "{text}"
    );
    assert_eq!(state.stack.len(), 1, "{text}");
}

/// `each: arr = ( | t | t := 0. arr do: [:x | t := t + x]. ^t )` and its block.
#[test]
fn contexts_and_closures_are_values_of_the_activation() {
    let method = code(
        5,
        CodeKind::Method,
        1,
        0,
        3,
        vec![],
        vec![
            Op::PushConst(int(0)),
            Op::PopCtx { level: 0, index: 2 },
            Op::PushLocal(1),
            Op::PushBlock(2),
            Op::Send(0),
            Op::Pop,
            Op::PushCtx { level: 0, index: 2 },
            Op::Return,
        ],
    );
    let (f, text) = compile(method, &[(0, site(1, IntOp::None, false))]);
    assert!(text.contains("new_context 3"), "{text}");
    assert!(text.contains("make_block [] in T>>each:"), "{text}");
    assert_eq!(
        count(&f, |k| matches!(k, InstKind::LoadContext { .. })),
        1,
        "{text}"
    );
    // Every state of the activation names its context.
    assert!(
        f.states.iter().skip(1).all(|s| s.context.is_some()),
        "{text}"
    );
    let block = code(
        2,
        CodeKind::Block,
        1,
        0,
        0,
        vec![],
        vec![
            Op::PushCtx { level: 0, index: 2 },
            Op::PushLocalSendBinary(1, 0),
            Op::StoreCtx { level: 0, index: 2 },
            Op::Return,
        ],
    );
    let (f, text) = compile(block, &[(0, small_ints(1, IntOp::Add))]);
    // A block's entry takes its closure after its arguments, and its context is the closure's
    // (`tests/ir/pipeline-block.tir` names them).
    let entry = &f.blocks[0].params;
    assert_eq!(entry.len(), 3, "{text}");
    let closure = entry[2];
    assert_eq!(
        count(&f, |k| *k == InstKind::ClosureContext(closure)),
        1,
        "{text}"
    );
    assert!(f.states.iter().all(|s| s.closure.is_some()), "{text}");
}

/// `keep: a = ( [a] value. ^a )`: `a` lives in the context its block shares, and SOM never
/// assigns an argument, so reading it back there is the argument itself (which is what lets
/// a block passed as an argument and called from an inlined block be inlined too).
#[test]
fn a_captured_argument_read_from_the_context_is_the_argument() {
    let method = code(
        6,
        CodeKind::Method,
        1,
        0,
        3,
        vec![(1, 2)],
        vec![
            Op::PushBlock(2),
            Op::Send(0),
            Op::Pop,
            Op::PushCtx { level: 0, index: 2 },
            Op::Return,
        ],
    );
    let (f, text) = compile(method, &[(0, site(0, IntOp::None, false))]);
    assert!(text.contains("new_context 3"), "{text}");
    assert_eq!(
        count(&f, |k| matches!(k, InstKind::LoadContext { .. })),
        0,
        "{text}"
    );
    let argument = f.blocks[0].params[1];
    let returns_it = f
        .blocks
        .iter()
        .any(|b| b.term == Terminator::Return(argument));
    assert!(returns_it, "{text}");
}

#[test]
fn constants_fold_and_a_dominating_guard_is_not_repeated() {
    // ^(3 + 4) + (a + 1) + (a + 2), all speculated small integers.
    let c = code(
        6,
        CodeKind::Method,
        1,
        0,
        0,
        vec![],
        vec![
            Op::PushConst(int(3)),
            Op::PushConstSendBinary(int(4), 0),
            Op::PushLocal(1),
            Op::PushConstSendBinary(int(1), 1),
            Op::SendBinary(2),
            Op::PushLocal(1),
            Op::PushConstSendBinary(int(2), 3),
            Op::SendBinary(4),
            Op::Return,
        ],
    );
    let add = small_ints(1, IntOp::Add);
    let (f, text) = compile(c, &[(0, add), (1, add), (2, add), (3, add), (4, add)]);
    assert!(text.contains("const 7"), "{text}");
    // `a` is checked once; the sums are small integers by their own definition.
    assert_eq!(
        count(&f, |k| matches!(k, InstKind::GuardInt { .. })),
        1,
        "{text}"
    );
    assert_eq!(
        count(&f, |k| matches!(k, InstKind::IntBinary { .. })),
        4,
        "{text}"
    );
}

fn receiver(class: u32, target: ExpectedTarget) -> ExpectedReceiver {
    // The method's id is only named by the call hooks of targets done in place.
    ExpectedReceiver {
        class,
        code: 90 + class,
        target,
    }
}

#[test]
fn a_monomorphic_site_is_guarded_and_a_polymorphic_one_switches_on_the_class() {
    // `^x foo` twice over: the first site saw class 7 only (a getter of field 1), the second
    // classes 7 and 8 (the getter, and a method called directly).
    let callee = code(9, CodeKind::Method, 0, 0, 0, vec![], vec![Op::ReturnSelf]);
    let c = code(
        10,
        CodeKind::Method,
        1,
        0,
        0,
        vec![],
        vec![
            Op::PushLocal(1),
            Op::Send(0),
            Op::Pop,
            Op::PushLocal(1),
            Op::Send(1),
            Op::Return,
        ],
    );
    let getter = receiver(
        7,
        ExpectedTarget::Trivial {
            kind: tally_vm::runtime::TRIVIAL_GETTER,
            operand: 1,
        },
    );
    let mut one = site(0, IntOp::None, false);
    one.expects_receiver = Some(ExpectedReceivers::One(getter));
    let mut two = site(0, IntOp::None, false);
    two.expects_receiver =
        ExpectedReceivers::several(&[getter, receiver(8, ExpectedTarget::Method(callee))]);
    let (f, text) = compile(c, &[(0, one), (1, two)]);
    assert_eq!(
        count(&f, |k| matches!(k, InstKind::GuardClass { .. })),
        1,
        "{text}"
    );
    // The guard proved class 7 for the second site: its first test is constant, so the
    // getter is taken; the rest of the switch is dead.
    assert_eq!(
        count(&f, |k| matches!(k, InstKind::ClassIs { .. })),
        0,
        "{text}"
    );
    assert_eq!(
        count(&f, |k| matches!(
            k,
            InstKind::CallMethod { .. } | InstKind::Send { .. }
        )),
        0,
        "{text}"
    );
    // Each getter done in place keeps its call visible to the profiler: a hook naming the
    // method the cache found (`receiver` numbers it 90 + class).
    assert_eq!(
        count(&f, |k| matches!(k, InstKind::CallHook(97))),
        2,
        "{text}"
    );
    // Without the first site's guard, the switch stays: class 7's getter, class 8's call,
    // the send for the rest.
    let c2 = code(
        11,
        CodeKind::Method,
        1,
        0,
        0,
        vec![],
        vec![Op::PushLocal(1), Op::Send(1), Op::Return],
    );
    let (f, text) = compile(c2, &[(1, two)]);
    assert_eq!(
        count(&f, |k| matches!(k, InstKind::ClassIs { .. })),
        2,
        "{text}"
    );
    assert_eq!(
        count(&f, |k| matches!(k, InstKind::CallMethod { .. })),
        1,
        "{text}"
    );
    assert_eq!(
        count(&f, |k| matches!(k, InstKind::Send { .. })),
        1,
        "{text}"
    );
    assert!(text.contains("call code9, v"), "{text}");
    // The method called directly runs its hook at its own entry.
    assert_eq!(
        count(&f, |k| matches!(k, InstKind::CallHook(_))),
        1,
        "{text}"
    );
}

#[test]
fn a_switch_over_four_classes_keeps_one_copy_of_each_target() {
    // `^x foo`, the site having seen four classes: 7 and 10 find the same getter, 8 and 9
    // the same method.
    let callee = code(9, CodeKind::Method, 0, 0, 0, vec![], vec![Op::ReturnSelf]);
    let c = code(
        11,
        CodeKind::Method,
        1,
        0,
        0,
        vec![],
        vec![Op::PushLocal(1), Op::Send(0), Op::Return],
    );
    let getter = |class| ExpectedReceiver {
        class,
        code: 97,
        target: ExpectedTarget::Trivial {
            kind: tally_vm::runtime::TRIVIAL_GETTER,
            operand: 1,
        },
    };
    let method = |class| ExpectedReceiver {
        class,
        code: 9,
        target: ExpectedTarget::Method(callee),
    };
    let mut four = site(0, IntOp::None, false);
    four.expects_receiver =
        ExpectedReceivers::several(&[getter(7), method(8), method(9), getter(10)]);
    let (f, text) = compile(c, &[(0, four)]);
    let tests: Vec<u32> = f
        .insts
        .iter()
        .filter_map(|i| match i.kind {
            InstKind::ClassIs { class, .. } => Some(class),
            _ => None,
        })
        .collect();
    assert_eq!(tests, [7, 10, 8, 9], "{text}");
    assert_eq!(
        count(&f, |k| matches!(k, InstKind::LoadField { .. })),
        1,
        "{text}"
    );
    assert_eq!(
        count(&f, |k| matches!(k, InstKind::CallMethod { .. })),
        1,
        "{text}"
    );
    // A fifth class is sent, not deoptimized.
    assert_eq!(
        count(&f, |k| matches!(k, InstKind::Send { .. })),
        1,
        "{text}"
    );
    assert_eq!(
        count(&f, |k| matches!(k, InstKind::GuardClass { .. })),
        0,
        "{text}"
    );
}

#[test]
fn the_verifier_catches_a_use_its_definition_does_not_dominate() {
    let (mut f, _) = compile(
        sum(),
        &[
            (0, small_ints(1, IntOp::LessEq)),
            (1, small_ints(1, IntOp::Add)),
            (2, small_ints(1, IntOp::Add)),
        ],
    );
    // Return, from the loop's exit, a value the loop body defines.
    let body_value = f.insts.iter().rev().find_map(|i| match i.kind {
        InstKind::IntBinary { .. } => i.result,
        _ => None,
    });
    let exit = f
        .blocks
        .iter()
        .position(|b| matches!(b.term, crate::Terminator::Return(_)))
        .unwrap();
    f.blocks[exit].term = crate::Terminator::Return(body_value.unwrap());
    let err = verify(&f).unwrap_err();
    assert!(err.contains("does not dominate"), "{err}");
}

/// Builds with on-stack-replacement entries, optimizes and verifies.
fn compile_with_osr(c: &Code, sites: &[(SiteId, SiteFacts)]) -> (Function, String) {
    compile_as(c, sites, true)
}

#[test]
fn a_loop_head_entry_reads_the_frame_and_checks_it_once() {
    let sites = [
        (0, small_ints(1, IntOp::LessEq)),
        (1, small_ints(1, IntOp::Add)),
        (2, small_ints(1, IntOp::Add)),
    ];
    let (f, text) = compile_with_osr(sum(), &sites);
    assert_eq!(
        f.osr_entries().iter().map(|o| o.bci).collect::<Vec<_>>(),
        vec![7],
        "{text}"
    );
    assert!(text.contains("osr at 7 (stack 1): "), "{text}");
    // `s`, `i` and the limit come from the frame; the receiver and `n` are the entry's.
    for slot in 2..=4 {
        assert!(text.contains(&format!("frame_slot {slot}")), "{text}");
    }
    assert!(!text.contains("frame_slot 1"), "{text}");
    // What comes from the frame is checked once, at the entry, where the loop's other ways
    // in make `s` and `i` small integers: the loop itself checks only the limit.
    let entry = f.osr_entries()[0].edge.block;
    let guards_in = |b: &crate::Block| {
        b.insts
            .iter()
            .filter(|&&i| matches!(f.insts[i.index()].kind, InstKind::GuardInt { .. }))
            .count()
    };
    assert!(guards_in(&f.blocks[entry.index()]) >= 2, "{text}");
    let head = f.blocks[entry.index()].term.successors()[0];
    let typed = f.blocks[head.index()]
        .params
        .iter()
        .filter(|&&p| f.ty(p) == crate::Ty::Int)
        .count();
    assert!(typed >= 2, "`s` and `i` are small integers: {text}");
    let elsewhere: usize = f
        .blocks
        .iter()
        .enumerate()
        .filter(|&(b, _)| b != entry.index())
        .map(|(_, b)| guards_in(b))
        .sum();
    assert_eq!(elsewhere, 1, "{text}");
    // Without the entry the same method guards only `n` (the test above).
    let (plain, _) = compile(sum(), &sites);
    assert!(plain.osr_entries().is_empty());
}

#[test]
fn a_loop_head_entry_takes_the_context_from_the_frame() {
    // `| c | (in the context) c := 0. [true] whileTrue: [c := c + 1]`
    let method = code(
        6,
        CodeKind::Method,
        0,
        0,
        1,
        vec![],
        vec![
            Op::PushConst(int(0)),
            Op::PopCtx { level: 0, index: 0 },
            Op::PushCtx { level: 0, index: 0 },
            Op::PushConstSendBinary(int(1), 0),
            Op::PopCtx { level: 0, index: 0 },
            Op::JumpBack(2),
        ],
    );
    let (f, text) = compile_with_osr(method, &[(0, small_ints(1, IntOp::Add))]);
    assert!(text.contains("frame_context"), "{text}");
    assert!(text.contains("new_context 1"), "{text}");
    // The loop's states name the context that came in, whichever way it came.
    let head = f.osr_entries()[0].edge.block;
    let target = f.blocks[head.index()].term.successors()[0];
    let ctx_param = *f.blocks[target.index()]
        .params
        .last()
        .expect("the context is a parameter of the loop head");
    assert!(
        f.states
            .iter()
            .filter(|s| s.bci >= 2)
            .all(|s| s.context == Some(ctx_param)),
        "{text}"
    );
}

/// `nested: n = ( | s i j | s := 0. i := 0.
///   [i < n] whileTrue: [j := 0. [j < n] whileTrue: [s := s + j. j := j + 1]. i := i + 1].
///   ^s )`
fn nested() -> &'static Code {
    code(
        7,
        CodeKind::Method,
        1,
        3,
        0,
        vec![],
        vec![
            Op::PushConst(int(0)),
            Op::PopLocal(2),
            Op::PushConst(int(0)),
            Op::PopLocal(3),
            Op::PushLocal2(3, 1),
            Op::SendCompareJumpIfFalse(0, 23),
            Op::JumpIfFalse(23),
            Op::PushConst(int(0)),
            Op::PopLocal(4),
            Op::PushLocal2(4, 1),
            Op::SendCompareJumpIfFalse(1, 19),
            Op::JumpIfFalse(19),
            Op::PushLocal2(2, 4),
            Op::SendBinary(2),
            Op::PopLocal(2),
            Op::PushLocal(4),
            Op::PushConstSendBinary(int(1), 3),
            Op::PopLocal(4),
            Op::JumpBack(9),
            Op::PushLocal(3),
            Op::PushConstSendBinary(int(1), 4),
            Op::PopLocal(3),
            Op::JumpBack(4),
            Op::PushLocal(2),
            Op::Return,
        ],
    )
}

/// `nested`'s sites: two comparisons and three additions, all of small integers so far.
fn nested_sites() -> [(SiteId, SiteFacts); 5] {
    [
        (0, small_ints(1, IntOp::Less)),
        (1, small_ints(1, IntOp::Less)),
        (2, small_ints(1, IntOp::Add)),
        (3, small_ints(1, IntOp::Add)),
        (4, small_ints(1, IntOp::Add)),
    ]
}

#[test]
fn values_that_only_circle_nested_loops_are_not_merged() {
    let sites = nested_sites();
    // With an entry at each loop head, the receiver and `n` reach the inner loop's head three
    // ways (the entry, the outer loop, its own back-edge): still the entry's values.
    let (f, text) = compile_with_osr(nested(), &sites);
    assert_eq!(f.osr_entries().len(), 2, "{text}");
    let entry = f.entry();
    let arguments = &f.blocks[entry.index()].params;
    for block in &f.blocks {
        for e in block.term.edges() {
            assert!(
                e.args.iter().all(|a| !arguments.contains(a)),
                "an argument passed to {}: {text}",
                e.block.index()
            );
        }
    }
}

#[test]
fn a_counter_the_inner_loop_leaves_alone_stays_a_small_integer_there() {
    let sites = nested_sites();
    let (f, text) = compile_with_osr(nested(), &sites);
    // `s`, `i` and `j` at the inner loop's head: its back-edge passes `i` as it is.
    let inner = f
        .osr_entries()
        .iter()
        .find(|o| o.bci == 9)
        .expect("an entry at the inner loop's head");
    let head = f.blocks[inner.edge.block.index()].term.successors()[0];
    let params = &f.blocks[head.index()].params;
    assert_eq!(params.len(), 3, "{text}");
    assert!(params.iter().all(|&p| f.ty(p) == crate::Ty::Int), "{text}");
}
