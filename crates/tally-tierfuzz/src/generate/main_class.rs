//! `Main`: `run:` and `run`, the sections `run` calls, the helpers they call, the phases that
//! refill `objs`, and the methods every program has (`setUp`, `rec:`, `deep:`, `makeAdder:`,
//! `makeEscaper`, `escapedBlock:`).

use super::exprs::if_else;
use super::scope::{Scope, Ty};
use super::{Gen, RUN_BUDGET};
use crate::ast::*;

impl Gen {
    pub(super) fn main_class(&mut self) -> Class {
        let mut methods = vec![self.set_up(), make_adder(), make_escaper(), deep()];
        methods.push(self.rec());
        if self.schema.escapes_handled {
            methods.push(Method {
                selector: "escapedBlock:".into(),
                params: vec!["blk".into()],
                locals: vec![],
                body: vec![
                    Stmt::Expr(assign("escapes", binary(var("escapes"), "+", int(1)))),
                    Stmt::Return(binary(var("escapes"), "*", int(100))),
                ],
            });
        }
        for h in 0..self.schema.helpers.len() {
            methods.push(self.helper(h));
        }
        let sections = 2 + self.below(3);
        let mut run = Vec::new();
        let mut phases = 0;
        let per_section = RUN_BUDGET / sections as u32;
        for s in 0..sections {
            let rounds = self.pick(&[1, 3, 20, 100, 300]);
            let (method, error_inside) = self.section(s, per_section / rounds, rounds);
            methods.push(method);
            self.call_section(s, rounds, &mut run);
            if !error_inside && self.chance(1, 2) {
                phases += 1;
                methods.push(self.phase(phases));
                run.push(Stmt::Expr(unary(var("self"), &format!("phase{phases}"))));
                if self.chance(1, 2) {
                    // The same section again, now that its sends meet other classes.
                    self.call_section(s, rounds, &mut run);
                }
            }
            if error_inside {
                break;
            }
        }
        run.push(Stmt::Expr(unary(var("escapes"), "println")));
        for kind in self.schema.kinds.clone() {
            if kind != "K5" {
                run.push(Stmt::Expr(unary(unary(var(&kind), "count"), "println")));
            }
        }
        if self.chance(1, 4) {
            let depth = 1000 + self.below(9000) as i128;
            run.push(Stmt::Expr(unary(
                binary(var("self"), "deep:", int(depth)),
                "println",
            )));
        }
        if self.chance(1, 5) {
            run.push(self.fatal_error());
        }
        run.insert(0, Stmt::Expr(unary(var("self"), "setUp")));
        methods.insert(
            0,
            Method {
                selector: "run".into(),
                params: vec![],
                locals: vec![],
                body: run,
            },
        );
        methods.insert(0, run_repeated());
        Class {
            name: MAIN_CLASS.into(),
            superclass: None,
            fields: ["objs", "blocks", "acc", "escapes"]
                .iter()
                .map(|f| f.to_string())
                .collect(),
            methods,
            class_fields: vec![],
            class_methods: vec![],
        }
    }

    fn call_section(&mut self, s: usize, rounds: u32, run: &mut Vec<Stmt>) {
        let call = |r: Expr| binary(var("self"), &format!("s{s}:"), r);
        let sum = self.bounded(
            Ty::Int,
            binary(var("acc"), "+", call(var("r"))),
            &self.main_scope(1, 0),
        );
        run.push(Stmt::Expr(assign("acc", int(0))));
        if rounds == 1 {
            run.push(Stmt::Expr(assign("acc", call(int(1)))));
        } else {
            run.push(Stmt::Expr(send(
                int(1),
                "to:do:",
                vec![int(rounds as i128), block_of(&["r"], assign("acc", sum))],
            )));
        }
        run.push(Stmt::Expr(unary(var("acc"), "println")));
    }

    /// The scope of a Main method: the fields it may read and assign.
    fn main_scope(&self, budget: u32, first_helper: usize) -> Scope {
        let mut sc = Scope::new(budget, first_helper);
        sc.add("acc", Ty::Int);
        sc
    }

    /// `sN: r`, called `rounds` times; some change `objs` in their last round, while their
    /// code is hot, and some end the run there with an error.
    fn section(&mut self, s: usize, budget: u32, rounds: u32) -> (Method, bool) {
        let mut sc = self.main_scope(budget.max(1), 0);
        sc.add_read_only("r", Ty::Int);
        sc.returns = Some(Ty::Int);
        let mut body = Vec::new();
        let mut locals = Vec::new();
        let last_round = || binary(var("r"), "=", int(rounds as i128));
        if rounds > 1 && self.chance(1, 3) {
            let kinds = self.schema.kinds.clone();
            let kind = kinds[self.below(kinds.len())].clone();
            let slot = self.below(6) as i128 + 1;
            body.push(Stmt::Expr(binary(
                last_round(),
                "ifTrue:",
                block(
                    &[],
                    &[],
                    vec![Stmt::Expr(send(
                        var("objs"),
                        "at:put:",
                        vec![int(slot), unary(var(&kind), "new")],
                    ))],
                ),
            )));
        }
        let n = 2 + self.below(5);
        self.statements(n, &mut sc, &mut body, &mut locals);
        // Not in the first section: the run would end before most of it ran.
        let error_inside = s > 0 && self.chance(1, 12);
        if error_inside {
            let error = self.fatal_error();
            body.push(Stmt::Expr(binary(
                last_round(),
                "ifTrue:",
                block(&[], &[], vec![error]),
            )));
        }
        let value = self.int_expr(&sc, 3);
        body.push(Stmt::Return(value));
        let method = Method {
            selector: format!("s{s}:"),
            params: vec!["r".into()],
            locals,
            body,
        };
        (method, error_inside)
    }

    fn helper(&mut self, h: usize) -> Method {
        let helper = self.schema.helpers[h].clone();
        let mut sc = self.main_scope(helper.cost, h + 1);
        let params: Vec<String> = helper
            .params
            .iter()
            .map(|&ty| {
                let name = self.fresh(&format!("p{}", ty.prefix()));
                sc.add_read_only(&name, ty);
                name
            })
            .collect();
        sc.returns = Some(helper.result);
        let mut body = Vec::new();
        let mut locals = Vec::new();
        let n = 1 + self.below(4);
        self.statements(n, &mut sc, &mut body, &mut locals);
        let value = self.expr(helper.result, &sc, 3);
        body.push(Stmt::Return(value));
        Method {
            selector: helper.selector,
            params,
            locals,
            body,
        }
    }

    /// `rec: n`: recursion at most 25 deep (callers pass `x % 25`).
    fn rec(&mut self) -> Method {
        let mut sc = self.main_scope(1, usize::MAX);
        sc.add_read_only("n", Ty::Int);
        let step = self.int_expr(&sc, 2);
        let base_case = binary(
            binary(var("n"), "<=", int(0)),
            "ifTrue:",
            block(&[], &[], vec![Stmt::Return(int(1))]),
        );
        // Sometimes the base case returns from inside a block the library's `do:` runs: a
        // non-local return out of every recursion level's own `do:`.
        let base_case = if self.chance(1, 2) {
            binary(
                Expr::Lit(Lit::Array(vec![Lit::Int(1)])),
                "do:",
                block(&["e"], &[], vec![Stmt::Expr(base_case)]),
            )
        } else {
            base_case
        };
        Method {
            selector: "rec:".into(),
            params: vec!["n".into()],
            locals: vec![],
            body: vec![
                Stmt::Expr(base_case),
                Stmt::Return(binary(
                    binary(var("self"), "rec:", binary(var("n"), "-", int(1))),
                    "+",
                    step,
                )),
            ],
        }
    }

    fn set_up(&mut self) -> Method {
        let mut body = vec![
            Stmt::Expr(assign("acc", int(0))),
            Stmt::Expr(assign("escapes", int(0))),
            Stmt::Expr(assign("objs", binary(var("Array"), "new:", int(6)))),
            Stmt::Expr(send(
                int(1),
                "to:do:",
                vec![
                    int(6),
                    block_of(
                        &["i"],
                        send(
                            var("objs"),
                            "at:put:",
                            vec![var("i"), unary(var("K0"), "new")],
                        ),
                    ),
                ],
            )),
            Stmt::Expr(assign("blocks", binary(var("Array"), "new:", int(4)))),
        ];
        let mut sc = self.main_scope(1, usize::MAX);
        sc.leaf = true;
        for i in 1..=4 {
            let x = "x";
            let mut inner = sc.clone();
            inner.add_read_only(x, Ty::Int);
            let value = self.int_expr(&inner, 2);
            body.push(Stmt::Expr(send(
                var("blocks"),
                "at:put:",
                vec![int(i), block_of(&[x], value)],
            )));
        }
        Method {
            selector: "setUp".into(),
            params: vec![],
            locals: vec![],
            body,
        }
    }

    /// `phaseN`: puts instances of other classes into `objs`, from one slot to all of them.
    fn phase(&mut self, n: usize) -> Method {
        let kinds = self.schema.kinds.clone();
        let slots = if self.chance(1, 2) {
            6
        } else {
            1 + self.below(3)
        };
        let body = (0..slots)
            .map(|_| {
                let slot = self.below(6) as i128 + 1;
                let kind = &kinds[self.below(kinds.len())];
                Stmt::Expr(send(
                    var("objs"),
                    "at:put:",
                    vec![int(slot), unary(var(kind), "new")],
                ))
            })
            .collect();
        Method {
            selector: format!("phase{n}"),
            params: vec![],
            locals: vec![],
            body,
        }
    }

    /// A statement that ends the run with a SOM error: every tier must print the same
    /// message and trace and exit with the same status.
    fn fatal_error(&mut self) -> Stmt {
        let e = match self.below(9) {
            0 => unary(var("nil"), "m0"),
            1 => binary(var("self"), "error:", string("boom")),
            2 => binary(binary(var("Array"), "new:", int(3)), "at:", int(4)),
            3 => binary(int(7), "/", int(0)),
            4 => binary(unary(var("self"), "makeEscaper"), "value:", int(5)),
            5 => send(string("abc"), "substringFrom:to:", vec![int(2), int(9)]),
            6 => unary(unary(var("Double"), "PositiveInfinity"), "asInteger"),
            7 => binary(int(1), "<<", binary(int(1), "<<", int(200))),
            _ => binary(unary(var("objs"), "first"), "zork:", int(3)),
        };
        Stmt::Expr(unary(e, "println"))
    }
}

/// `run: args`, where the VM starts: `run`, as many times as the program's argument says
/// (once without one).
fn run_repeated() -> Method {
    let has_argument = binary(unary(var("args"), "length"), ">", int(1));
    let repeats = unary(binary(var("args"), "at:", int(2)), "asInteger");
    Method {
        selector: "run:".into(),
        params: vec!["args".into()],
        locals: vec![],
        body: vec![Stmt::Expr(if_else(
            has_argument,
            binary(
                repeats,
                "timesRepeat:",
                block_of(&[], unary(var("self"), "run")),
            ),
            unary(var("self"), "run"),
        ))],
    }
}

/// `makeAdder: n = ( ^[:x | x + n] )`: a block that outlives the method, with its argument.
fn make_adder() -> Method {
    Method {
        selector: "makeAdder:".into(),
        params: vec!["n".into()],
        locals: vec![],
        body: vec![Stmt::Return(block_of(
            &["x"],
            binary(var("x"), "+", var("n")),
        ))],
    }
}

/// `makeEscaper`: a block whose `^` escaped when it runs.
fn make_escaper() -> Method {
    Method {
        selector: "makeEscaper".into(),
        params: vec![],
        locals: vec![],
        body: vec![Stmt::Return(block(
            &["x"],
            &[],
            vec![Stmt::Return(var("x"))],
        ))],
    }
}

/// `deep: n`: recursion thousands deep, through a block, past the native stack the compiled
/// tiers recurse on.
fn deep() -> Method {
    Method {
        selector: "deep:".into(),
        params: vec!["n".into()],
        locals: vec![],
        body: vec![
            Stmt::Expr(binary(
                binary(var("n"), "<=", int(0)),
                "ifTrue:",
                block(&[], &[], vec![Stmt::Return(int(0))]),
            )),
            Stmt::Return(binary(
                block_of(
                    &["m"],
                    binary(binary(var("self"), "deep:", var("m")), "+", int(1)),
                ),
                "value:",
                binary(var("n"), "-", int(1)),
            )),
        ],
    }
}
