//! Arithmetic and comparisons in place: small integers, immediate doubles, symbols and
//! strings, Booleans; compare-and-branch and conditional jumps.

use super::*;

impl Translator<'_, '_> {
    /// A branch on `int(a) cc int(b)`: the jump behind a compare-and-branch.
    pub(super) fn both_ints(&mut self, a: Value, b: Value) -> Value {
        let both = self.b.ins().band(a, b);
        and_imm(&mut self.b, both, 1)
    }

    /// A binary send from `site` with receiver and argument in slots `h - 2` and `h - 1`,
    /// resuming at `i + 1`.
    pub(super) fn send_binary(&mut self, site: u32, h: i32, i: usize) -> Result<(), String> {
        let op = self.site(site).int_op;
        let next = self.block(i + 1)?;
        let slow = self.b.create_block();
        self.b.set_cold_block(slow);
        if op != IntOp::None && op != IntOp::And && op != IntOp::Or {
            let not_numbers = self.symbol_test_block(op, slow);
            let (a, b, ints, doubles) = self.number_operands(op, h, not_numbers);
            if let Some((x, y)) = doubles {
                let v = numbers::float_op(&mut self.b, op, x, y, slow);
                self.set_slot(h - 2, v);
                self.jump(next);
            }
            if not_numbers != slow {
                self.compare_non_numbers(op, h, not_numbers, slow, |t, c| {
                    let v = numbers::boolean(&mut t.b, c);
                    t.set_slot(h - 2, v);
                    t.jump(next);
                });
            }
            self.b.switch_to_block(ints);
            if op == IntOp::FloatDiv {
                // Two small integers: their quotient as a double, as Integer's `//` makes it.
                let one = self.b.ins().iconst(I64, 1);
                let x = self.b.ins().sshr(a, one);
                let y = self.b.ins().sshr(b, one);
                let x = self.b.ins().fcvt_from_sint(types::F64, x);
                let y = self.b.ins().fcvt_from_sint(types::F64, y);
                let q = numbers::float_quotient(&mut self.b, x, y, slow);
                let v = numbers::encode_small_float(&mut self.b, q, slow);
                self.set_slot(h - 2, v);
                self.jump(next);
            } else if let Some(r) = numbers::int_arith(&mut self.b, op, a, b, slow) {
                self.set_slot(h - 2, r);
                self.jump(next);
            } else {
                self.jump(slow);
            }
        } else if op == IntOp::And || op == IntOp::Or {
            let a = self.slot(h - 2);
            let b = self.slot(h - 1);
            let r = numbers::bool_op(&mut self.b, op, a, b, slow).expect("&& or ||");
            self.set_slot(h - 2, r);
            self.jump(next);
        } else {
            self.jump(slow);
        }
        self.b.switch_to_block(slow);
        self.send_stub(self.layout.stubs.send_binary, site, h, i)
    }

    /// The operands of a binary `op` in slots `h - 2` and `h - 1`, split by kind: answers them
    /// tagged, the (empty) block taken when both are small integers, and, when `op` has a
    /// double form, the two as doubles, with the builder in the block where they are (operands
    /// of neither kind, and doubles `op` cannot take, jump to `slow`).
    pub(super) fn number_operands(
        &mut self,
        op: IntOp,
        h: i32,
        slow: Block,
    ) -> (Value, Value, Block, Option<(Value, Value)>) {
        let a = self.slot(h - 2);
        let b = self.slot(h - 1);
        let ints = self.both_ints(a, b);
        let int_block = self.b.create_block();
        let others = self.b.create_block();
        self.b.ins().brif(ints, int_block, &[], others, &[]);
        self.b.switch_to_block(others);
        let doubles = numbers::float_operands(&mut self.b, op, a, b, slow);
        if doubles.is_none() {
            self.jump(slow);
        }
        (a, b, int_block, doubles)
    }

    /// Where operands that are not numbers go: for `=` and `~=` a new block that tests for
    /// two symbols (`symbols_compare`), for other operations `slow`.
    pub(super) fn symbol_test_block(&mut self, op: IntOp, slow: Block) -> Block {
        if matches!(op, IntOp::Equal | IntOp::NotEqual) {
            self.b.create_block()
        } else {
            slow
        }
    }

    /// From `at`, `=` or `~=` of operands that are not numbers (slots `h - 2` and `h - 1`),
    /// where it needs no send: two symbols (`symbols_compare`), and for `=` a String receiver
    /// (`strings_equal`). `answer` gets each condition with the builder in its block and
    /// must leave that block; anything else goes to `slow`.
    pub(super) fn compare_non_numbers(
        &mut self,
        op: IntOp,
        h: i32,
        at: Block,
        slow: Block,
        mut answer: impl FnMut(&mut Self, Value),
    ) {
        let string = self
            .layout
            .string_with_primitive_equal
            .filter(|_| op == IntOp::Equal);
        let not_symbols = match string {
            Some(_) => self.b.create_block(),
            None => slow,
        };
        let c = self.symbols_compare(op, h, at, not_symbols);
        answer(self, c);
        if let Some(string) = string {
            let c = self.strings_equal(string, h, not_symbols, slow);
            answer(self, c);
        }
    }

    /// In `at`: when the operands in slots `h - 2` and `h - 1` are two symbols, the answer of
    /// `=` or `~=` as a condition (`IntOp::apply_symbols`: interned, so identity), with the
    /// builder in a new block; anything else goes to `slow`.
    pub(super) fn symbols_compare(&mut self, op: IntOp, h: i32, at: Block, slow: Block) -> Value {
        self.b.switch_to_block(at);
        let a = self.slot(h - 2);
        let b = self.slot(h - 1);
        let ta = and_imm(&mut self.b, a, 7);
        let tb = and_imm(&mut self.b, b, 7);
        let sa = cmp_imm(&mut self.b, IntCC::Equal, ta, SYMBOL_TAG);
        let sb = cmp_imm(&mut self.b, IntCC::Equal, tb, SYMBOL_TAG);
        let both = self.b.ins().band(sa, sb);
        let go = self.b.create_block();
        self.b.ins().brif(both, go, &[], slow, &[]);
        self.b.switch_to_block(go);
        let cc = if op == IntOp::Equal {
            IntCC::Equal
        } else {
            IntCC::NotEqual
        };
        self.b.ins().icmp(cc, a, b)
    }

    /// In `at`: when the receiver in slot `h - 2` is a String (the class itself, whose `=` is
    /// the primitive: `Layout::string_with_primitive_equal`), String's `=` with the argument in
    /// slot `h - 1` as a condition, through the pure `string_equal` stub (no sync: it neither
    /// allocates nor touches frames), with the builder in a new block; anything else goes to
    /// `slow`.
    pub(super) fn strings_equal(&mut self, string: u32, h: i32, at: Block, slow: Block) -> Value {
        self.b.switch_to_block(at);
        let a = self.slot(h - 2);
        let b = self.slot(h - 1);
        let class = self.object_class(a, slow);
        let is_string = cmp_imm(&mut self.b, IntCC::Equal, class, string as i64);
        let go = self.b.create_block();
        self.b.ins().brif(is_string, go, &[], slow, &[]);
        self.b.switch_to_block(go);
        let call = stub_calls::call(
            &mut self.b,
            &mut self.sigs,
            self.layout.stubs.string_equal,
            &[self.vm, a, b],
        );
        let equal = self.b.inst_results(call)[0];
        cmp_imm(&mut self.b, IntCC::NotEqual, equal, 0)
    }

    /// A comparison answered and branched on at once for small integers (to `target` when
    /// its truth is `jump_if`, else past the conditional jump at `i + 1`); sent otherwise, and
    /// that jump tests the answer.
    pub(super) fn compare_and_branch(
        &mut self,
        site: u32,
        target: u32,
        jump_if: bool,
        h: i32,
        i: usize,
    ) -> Result<(), String> {
        let op = self.site(site).int_op;
        let slow = self.b.create_block();
        self.b.set_cold_block(slow);
        if let Some(cc) = compare_cc(op) {
            let (taken, not_taken) = (self.block(target as usize)?, self.block(i + 2)?);
            let branch = |t: &mut Self, c: Value| {
                if jump_if {
                    t.b.ins().brif(c, taken, &[], not_taken, &[]);
                } else {
                    t.b.ins().brif(c, not_taken, &[], taken, &[]);
                }
            };
            let not_numbers = self.symbol_test_block(op, slow);
            let (a, b, ints, doubles) = self.number_operands(op, h, not_numbers);
            if let Some((x, y)) = doubles {
                let c = self.b.ins().fcmp(float_cc(op).expect("a comparison"), x, y);
                branch(self, c);
            }
            if not_numbers != slow {
                self.compare_non_numbers(op, h, not_numbers, slow, branch);
            }
            self.b.switch_to_block(ints);
            let c = self.b.ins().icmp(cc, a, b);
            branch(self, c);
        } else {
            self.jump(slow);
        }
        self.b.switch_to_block(slow);
        self.send_stub(self.layout.stubs.send_binary, site, h, i)
    }

    pub(super) fn conditional_jump(
        &mut self,
        target: u32,
        if_true: bool,
        h: i32,
        i: usize,
    ) -> Result<(), String> {
        let v = self.slot(h - 1);
        let (taken, next) = (self.block(target as usize)?, self.block(i + 1)?);
        let (jump_on, fall_on) = if if_true {
            (TRUE, FALSE)
        } else {
            (FALSE, TRUE)
        };
        let jumps = cmp_imm(&mut self.b, IntCC::Equal, v, jump_on);
        let other = self.b.create_block();
        self.b.ins().brif(jumps, taken, &[], other, &[]);
        self.b.switch_to_block(other);
        let falls = cmp_imm(&mut self.b, IntCC::Equal, v, fall_on);
        let not_boolean = self.interpret_block(i, h);
        self.b.ins().brif(falls, next, &[], not_boolean, &[]);
        Ok(())
    }
}
