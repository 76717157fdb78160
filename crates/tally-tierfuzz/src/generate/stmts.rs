//! Statements: assignments, prints, loops (inlined `to:do:` and `whileTrue:`, and real
//! blocks passed to `do:`), conditionals, stores into arrays and fields, blocks kept for later,
//! returns (non-local inside blocks), and sends for their effect.

use super::scope::{Scope, Ty};
use super::Gen;
use crate::ast::*;

/// Kinds a fresh local may get.
const LOCAL_KINDS: [Ty; 8] = [
    Ty::Int,
    Ty::Int,
    Ty::Double,
    Ty::Bool,
    Ty::Str,
    Ty::Sym,
    Ty::Obj,
    Ty::Blk,
];

/// Deepest nesting of loops, blocks and conditionals, so listings stay readable.
const MAX_DEPTH: u32 = 3;

impl Gen {
    /// Appends a few statements to `out`, declaring their new locals in `locals`.
    pub(super) fn statements(
        &mut self,
        n: usize,
        sc: &mut Scope,
        out: &mut Vec<Stmt>,
        locals: &mut Vec<String>,
    ) {
        for _ in 0..n {
            self.statement(sc, out, locals);
        }
    }

    pub(super) fn statement(
        &mut self,
        sc: &mut Scope,
        out: &mut Vec<Stmt>,
        locals: &mut Vec<String>,
    ) {
        let nested = sc.depth < MAX_DEPTH;
        match self.below(18) {
            0..=2 => self.assignment(sc, out, locals),
            3 | 4 => {
                let ty = self.pick(&[Ty::Int, Ty::Int, Ty::Double, Ty::Bool, Ty::Str, Ty::Sym]);
                let e = self.expr(ty, sc, 3);
                out.push(Stmt::Expr(unary(e, "println")));
            }
            // What class an object is, as printed by the library: `K1`, `instance of K1`.
            15 if !sc.in_k_class => {
                let o = self.obj_expr(sc, 2);
                let printed = match self.below(3) {
                    0 => unary(o, "class"),
                    1 => unary(unary(o, "class"), "name"),
                    _ => unary(o, "asString"),
                };
                out.push(Stmt::Expr(unary(printed, "println")));
            }
            // A block value passed to the library's loop, called once per iteration.
            16 if sc.calls() && sc.budget >= 2 => {
                let n = self.loop_count(sc.budget).min(20);
                let blk = self.blk_expr(sc, 2);
                out.push(Stmt::Expr(send(
                    int(1),
                    "to:do:",
                    vec![int(n as i128), blk],
                )));
            }
            5 if nested && sc.budget >= 2 => self.counted_loop(sc, out),
            6 if nested && sc.budget >= 2 => self.while_true(sc, out, locals),
            7 if nested => self.conditional(sc, out, locals),
            8 => {
                if let Some(a) = self.pick_assignable(Ty::Arr, sc) {
                    let index = binary(
                        binary(self.int_expr(sc, 2), "%", unary(var(&a), "length")),
                        "+",
                        int(1),
                    );
                    let value = self.int_expr(sc, 2);
                    out.push(Stmt::Expr(send(var(&a), "at:put:", vec![index, value])));
                } else {
                    self.assignment(sc, out, locals);
                }
            }
            9 => self.store(sc, out),
            10 if sc.returns.is_some() && nested => {
                let ty = sc.returns.unwrap();
                let value = self.expr(ty, sc, 2);
                let cond = self.expr(Ty::Bool, sc, 2);
                out.push(Stmt::Expr(binary(
                    cond,
                    "ifTrue:",
                    block(&[], &[], vec![Stmt::Return(value)]),
                )));
            }
            11 if sc.returns == Some(Ty::Int) && nested && sc.budget >= 6 => {
                self.do_with_return(sc, out)
            }
            12 => self.keep_block(sc, out),
            // A field written reflectively, behind the compiled code's back.
            13 if sc.in_k_class && self.chance(1, 3) => {
                let value = self.int_expr(sc, 2);
                let value = self.bounded(Ty::Int, value, sc);
                out.push(Stmt::Expr(send(
                    var("self"),
                    "instVarAt:put:",
                    vec![int(self.below(2) as i128 + 1), value],
                )));
            }
            13 => {
                let target = if sc.in_k_class { "a" } else { "acc" };
                let e = self.int_expr(sc, 2);
                let sum = self.bounded(Ty::Int, binary(var(target), "+", e), sc);
                out.push(Stmt::Expr(assign(target, sum)));
            }
            _ => {
                let ty = self.pick(&[Ty::Int, Ty::Double, Ty::Str]);
                let e = self.expr(ty, sc, 2);
                out.push(Stmt::Expr(e));
            }
        }
    }

    /// `value`, kept from growing without bound when it is assigned over and over (in loops,
    /// to fields): an integer stays below 2^100 in magnitude (`rem:` keeps its sign, and big
    /// integers stay possible), a string or symbol inside a loop at most 24 characters.
    pub(super) fn bounded(&mut self, ty: Ty, value: Expr, sc: &Scope) -> Expr {
        match ty {
            Ty::Int => {
                let modulus = self.pick(&[
                    1_000_003,
                    4_611_686_018_427_387_903,
                    1_267_650_600_228_229_401_496_703_205_653,
                ]);
                binary(value, "rem:", int(modulus))
            }
            Ty::Str | Ty::Sym if sc.depth > 0 => {
                let t = self.fresh("t");
                let mut head = send(var(&t), "primSubstringFrom:to:", vec![int(1), int(24)]);
                if ty == Ty::Sym {
                    head = unary(head, "asSymbol");
                }
                let clipped = super::exprs::if_else(
                    binary(unary(var(&t), "length"), ">", int(24)),
                    head,
                    var(&t),
                );
                binary(block_of(&[&t], clipped), "value:", value)
            }
            _ => value,
        }
    }

    fn pick_assignable(&mut self, ty: Ty, sc: &Scope) -> Option<String> {
        let names = sc.assignable(ty);
        if names.is_empty() {
            None
        } else {
            Some(names[self.below(names.len())].to_string())
        }
    }

    fn assignment(&mut self, sc: &mut Scope, out: &mut Vec<Stmt>, locals: &mut Vec<String>) {
        let ty = LOCAL_KINDS[self.below(LOCAL_KINDS.len())];
        let name = match self.pick_assignable(ty, sc) {
            Some(name) if self.chance(2, 3) => name,
            _ => {
                let name = self.fresh(ty.prefix());
                locals.push(name.clone());
                name
            }
        };
        let value = self.expr(ty, sc, 3);
        let value = self.bounded(ty, value, sc);
        if !sc.vars.iter().any(|(n, _)| *n == name) {
            sc.add(&name, ty);
        }
        out.push(Stmt::Expr(assign(&name, value)));
    }

    /// A counted loop: mostly `1 to: n do: [:i | …]`, which the bytecode compiler inlines
    /// (sometimes with a Double limit), else a real block passed to the library's
    /// `to:by:do:`, `downTo:do:`, `timesRepeat:` or an Array's `do:`, whose `^` returns
    /// through the library's frames.
    fn counted_loop(&mut self, sc: &mut Scope, out: &mut Vec<Stmt>) {
        let n = self.loop_count(sc.budget);
        let i = self.fresh("i");
        let mut inner = sc.clone();
        inner.add_read_only(&i, Ty::Int);
        inner.budget = sc.budget / n;
        inner.depth += 1;
        let mut body = Vec::new();
        let mut locals = Vec::new();
        let k = self.below(3) + 1;
        self.statements(k, &mut inner, &mut body, &mut locals);
        let limit = int(n as i128);
        let with_i = |i: String| {
            Expr::Block(Box::new(Block {
                params: vec![i],
                locals: locals.clone(),
                body: body.clone(),
            }))
        };
        let looped = match self.below(8) {
            0 => send(
                int(1),
                "to:do:",
                vec![binary(limit, "+", double("0.5")), with_i(i)],
            ),
            1 => send(int(1), "to:by:do:", vec![limit, int(2), with_i(i)]),
            2 => send(limit, "downTo:do:", vec![int(1), with_i(i)]),
            3 => binary(binary(int(1), "to:", limit), "do:", with_i(i)),
            // The body does not use `i` then: rename it away.
            4 => binary(
                limit,
                "timesRepeat:",
                block(
                    &[],
                    &[],
                    vec![Stmt::Expr(send(
                        block(
                            &[&i],
                            &locals.iter().map(String::as_str).collect::<Vec<_>>(),
                            body.clone(),
                        ),
                        "value:",
                        vec![int(0)],
                    ))],
                ),
            ),
            _ => send(int(1), "to:do:", vec![limit, with_i(i)]),
        };
        out.push(Stmt::Expr(looped));
    }

    /// `[k < n] whileTrue: [… k := k + 1]` over a fresh counter.
    fn while_true(&mut self, sc: &mut Scope, out: &mut Vec<Stmt>, locals: &mut Vec<String>) {
        let n = self.loop_count(sc.budget);
        let k = self.fresh("w");
        locals.push(k.clone());
        out.push(Stmt::Expr(assign(&k, int(0))));
        let mut inner = sc.clone();
        inner.add_read_only(&k, Ty::Int);
        inner.budget = sc.budget / n;
        inner.depth += 1;
        let mut body = vec![Stmt::Expr(assign(&k, binary(var(&k), "+", int(1))))];
        let mut block_locals = Vec::new();
        let m = self.below(3) + 1;
        self.statements(m, &mut inner, &mut body, &mut block_locals);
        out.push(Stmt::Expr(binary(
            block_of(&[], binary(var(&k), "<", int(n as i128))),
            "whileTrue:",
            Expr::Block(Box::new(Block {
                params: vec![],
                locals: block_locals,
                body,
            })),
        )));
    }

    fn loop_count(&mut self, budget: u32) -> u32 {
        let most = budget.min(300);
        // Often long enough to get hot, sometimes short.
        if self.chance(1, 2) {
            most
        } else {
            2 + self.below(most as usize - 1) as u32
        }
    }

    fn conditional(&mut self, sc: &mut Scope, out: &mut Vec<Stmt>, locals: &mut Vec<String>) {
        let cond = self.expr(Ty::Bool, sc, 2);
        let mut arm = |g: &mut Gen| {
            let mut inner = sc.clone();
            inner.depth += 1;
            let mut body = Vec::new();
            let mut block_locals = Vec::new();
            let k = g.below(2) + 1;
            g.statements(k, &mut inner, &mut body, &mut block_locals);
            // Inlined blocks cannot declare locals in every tier's compiler alike; hoist them.
            locals.extend(block_locals);
            body
        };
        let then = arm(self);
        if self.chance(1, 2) {
            let otherwise = arm(self);
            out.push(Stmt::Expr(send(
                cond,
                "ifTrue:ifFalse:",
                vec![block(&[], &[], then), block(&[], &[], otherwise)],
            )));
        } else {
            let op = self.pick(&["ifTrue:", "ifFalse:"]);
            out.push(Stmt::Expr(binary(cond, op, block(&[], &[], then))));
        }
    }

    /// A real block passed to `do:`, which returns from the method when it finds an element:
    /// a non-local return through a library method's frame.
    fn do_with_return(&mut self, sc: &mut Scope, out: &mut Vec<Stmt>) {
        let array = self.arr_expr(sc, 2);
        let e = self.fresh("e");
        let mut inner = sc.clone();
        inner.add_read_only(&e, Ty::Int);
        inner.budget = sc.budget / 6;
        inner.depth += 1;
        let mut body = Vec::new();
        let mut block_locals = Vec::new();
        if self.chance(1, 2) {
            self.statement(&mut inner, &mut body, &mut block_locals);
        }
        let cond = binary(var(&e), ">", self.int_expr(&inner, 2));
        let value = binary(var(&e), "+", self.int_expr(&inner, 2));
        body.push(Stmt::Expr(binary(
            cond,
            "ifTrue:",
            block(&[], &[], vec![Stmt::Return(value)]),
        )));
        out.push(Stmt::Expr(binary(
            array,
            "do:",
            Expr::Block(Box::new(Block {
                params: vec![e],
                locals: block_locals,
                body,
            })),
        )));
    }

    /// Changes the classes in `objs` (Main) or a field (a generated class): sites that saw one
    /// class start seeing others.
    fn store(&mut self, sc: &mut Scope, out: &mut Vec<Stmt>) {
        if sc.in_k_class {
            let field = self.pick(&["a", "b"]);
            let value = self.int_expr(sc, 2);
            let value = self.bounded(Ty::Int, value, sc);
            out.push(Stmt::Expr(assign(field, value)));
            return;
        }
        let index = binary(
            binary(self.int_expr(sc, 2), "%", unary(var("objs"), "length")),
            "+",
            int(1),
        );
        let kinds = self.schema.kinds.clone();
        let object = unary(var(&kinds[self.below(kinds.len())]), "new");
        out.push(Stmt::Expr(send(
            var("objs"),
            "at:put:",
            vec![index, object],
        )));
    }

    /// Keeps a block where it outlives the code that made it: in `blocks` or an object's
    /// `kept` field (through `keep:`), to be called later from elsewhere.
    fn keep_block(&mut self, sc: &mut Scope, out: &mut Vec<Stmt>) {
        let blk = self.blk_expr(sc, 2);
        if sc.in_k_class {
            out.push(Stmt::Expr(assign("kept", blk)));
        } else if self.chance(1, 2) {
            let index = binary(
                binary(self.int_expr(sc, 1), "%", unary(var("blocks"), "length")),
                "+",
                int(1),
            );
            out.push(Stmt::Expr(send(var("blocks"), "at:put:", vec![index, blk])));
        } else {
            let receiver = self.obj_expr(sc, 1);
            out.push(Stmt::Expr(binary(receiver, "keep:", blk)));
        }
    }
}
