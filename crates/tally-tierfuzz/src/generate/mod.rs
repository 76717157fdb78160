//! The program generator: a seed gives one SOM program, always the same.
//!
//! Every program has the same skeleton, so that what the optimizing tier speculates on
//! changes while the program runs:
//!
//! - classes `K0`… sharing a protocol (`m0`, `m1:`, `m2:with:`, `mb:`, `md:`, `ms`, `keep:`,
//!   `callKept:`, `escaper`): `K0` and its subclasses (overriding some methods, some through
//!   `super`), `K4` beside them, and `K5`, which understands nothing and answers everything
//!   in `doesNotUnderstand:arguments:`;
//! - `Main`, whose `objs` array starts with `K0`s only and is refilled between sections
//!   (`phase…`) and inside them, so sends to its elements turn polymorphic and then
//!   megamorphic after the code has warmed up;
//! - section methods (`s0:`…) that `run` calls in loops, helpers (`h0…`) that call only
//!   helpers numbered higher, a bounded recursion (`rec:`), a deep one (`deep:`), blocks
//!   made, kept in `blocks` and fields, and called after their home returned (`escapedBlock:`
//!   answered by `Main` and `K0` in most programs);
//! - and, in some programs, an error that ends the run.
//!
//! Bodies are random statements over typed variables (`Scope`), whose loops are bounded by a
//! budget, so every program ends and runs for a few tens of milliseconds interpreted.

mod exprs;
mod scope;
mod stmts;

use rand::rngs::Xoshiro256PlusPlus;
use rand::{RngExt, SeedableRng};

use crate::ast::*;
use scope::{Scope, Ty};

/// How many loop iterations (roughly) one run of `Main>>run` may take, all sections together.
const RUN_BUDGET: u32 = 80_000;
/// What one call of a generated class's method may cost.
const K_METHOD_BUDGET: u32 = 4;

pub fn generate(seed: u64) -> Program {
    let mut g = Gen {
        rng: Xoshiro256PlusPlus::seed_from_u64(seed),
        next_name: 0,
        schema: Schema::default(),
    };
    g.program()
}

#[derive(Clone, Debug)]
struct Helper {
    selector: String,
    params: Vec<Ty>,
    result: Ty,
    /// The budget of its body: a call costs that much.
    cost: u32,
}

#[derive(Default)]
struct Schema {
    /// Generated classes that `new` makes instances of.
    kinds: Vec<String>,
    helpers: Vec<Helper>,
    /// `K0`, `K4` and `Main` answer `escapedBlock:` (else it is an error that ends the run).
    escapes_handled: bool,
}

pub(crate) struct Gen {
    rng: Xoshiro256PlusPlus,
    next_name: u32,
    schema: Schema,
}

impl Gen {
    fn below(&mut self, n: usize) -> usize {
        self.rng.random_range(0..n)
    }

    fn chance(&mut self, k: u32, n: u32) -> bool {
        self.rng.random_ratio(k, n)
    }

    fn pick<T: Copy>(&mut self, items: &[T]) -> T {
        items[self.below(items.len())]
    }

    fn fresh(&mut self, prefix: &str) -> String {
        self.next_name += 1;
        format!("{prefix}{}", self.next_name)
    }

    fn program(&mut self) -> Program {
        self.schema.escapes_handled = self.chance(4, 5);
        let mut classes = self.k_classes();
        self.schema.kinds = classes.iter().map(|c| c.name.clone()).collect();
        self.schema.helpers = self.helper_signatures();
        // The K classes' bodies need the kinds; generate them now.
        for class in &mut classes {
            let methods = std::mem::take(&mut class.methods);
            class.methods = methods
                .into_iter()
                .map(|m| {
                    if m.body.is_empty() {
                        self.k_method_body(class, m)
                    } else {
                        m
                    }
                })
                .collect();
        }
        classes.insert(0, self.main_class());
        Program { classes }
    }

    /// The classes of the protocol, with their fields and the selectors each defines (bodies
    /// come later, once every class is known).
    fn k_classes(&mut self) -> Vec<Class> {
        let protocol = [
            "m0",
            "m1:",
            "m2:with:",
            "mb:",
            "md:",
            "ms",
            "keep:",
            "callKept:",
            "escaper",
        ];
        let root = |name: &str| Class {
            name: name.to_string(),
            superclass: None,
            fields: vec!["a".into(), "b".into(), "kept".into()],
            methods: protocol.iter().map(|s| stub_method(s)).collect(),
            class_fields: vec!["count".into()],
            class_methods: vec![new_calling_init(), count()],
        };
        let mut classes = vec![root("K0")];
        let subclass = |g: &mut Gen, name: &str, parent: &str, field: &str| {
            let mut methods = vec![stub_method("init")];
            for s in protocol {
                if g.chance(1, 2) {
                    methods.push(stub_method(s));
                }
            }
            Class {
                name: name.to_string(),
                superclass: Some(parent.to_string()),
                fields: vec![field.to_string()],
                methods,
                class_fields: vec![],
                class_methods: vec![],
            }
        };
        let with_k1 = self.chance(3, 4);
        if with_k1 {
            classes.push(subclass(self, "K1", "K0", "c"));
        }
        if self.chance(1, 2) {
            classes.push(subclass(self, "K2", "K0", "c"));
        }
        if with_k1 && self.chance(1, 2) {
            classes.push(subclass(self, "K3", "K1", "e"));
        }
        if self.chance(2, 3) {
            classes.push(root("K4"));
        }
        if self.chance(1, 2) {
            classes.push(self.dnu_class());
        }
        for class in &mut classes {
            if class.superclass.is_none() && class.name != "K5" {
                class.methods.insert(0, stub_method("init"));
                if self.schema.escapes_handled {
                    class.methods.push(stub_method("escapedBlock:"));
                }
            }
        }
        classes
    }

    /// `K5` defines none of the protocol: `doesNotUnderstand:arguments:` answers each send
    /// with a value of the kind the protocol promises.
    fn dnu_class(&mut self) -> Class {
        let answer = |sel: &str, value: Expr| -> Stmt {
            Stmt::Expr(binary(
                binary(var("sel"), "==", symbol(sel)),
                "ifTrue:",
                block(&[], &[], vec![Stmt::Return(value)]),
            ))
        };
        let n = self.below(50) as i128;
        let body = vec![
            answer("md:", double("0.5")),
            answer("ms", string("dnu")),
            answer("keep:", var("self")),
            answer("escaper", block_of(&["x"], binary(var("x"), "-", int(n)))),
            Stmt::Return(binary(
                unary(var("args"), "length"),
                "+",
                unary(var("sel"), "length"),
            )),
        ];
        Class {
            name: "K5".into(),
            superclass: None,
            fields: vec![],
            methods: vec![Method {
                selector: "doesNotUnderstand:arguments:".into(),
                params: vec!["sel".into(), "args".into()],
                locals: vec![],
                body,
            }],
            class_fields: vec![],
            class_methods: vec![],
        }
    }

    fn helper_signatures(&mut self) -> Vec<Helper> {
        let n = 2 + self.below(4);
        (0..n)
            .map(|h| {
                let params: Vec<Ty> = (0..self.below(3))
                    .map(|_| self.pick(&[Ty::Int, Ty::Int, Ty::Double, Ty::Blk, Ty::Obj]))
                    .collect();
                let selector = if params.is_empty() {
                    format!("h{h}")
                } else {
                    format!("h{h}:{}", "with:".repeat(params.len() - 1))
                };
                Helper {
                    selector,
                    params,
                    result: self.pick(&[Ty::Int, Ty::Int, Ty::Double, Ty::Str]),
                    cost: self.pick(&[1, 4, 16, 40]),
                }
            })
            .collect()
    }

    /// The scope of a method of a generated class: its fields, `self`, its arguments.
    fn k_scope(&self, class: &Class) -> Scope {
        let mut sc = Scope::new(K_METHOD_BUDGET, usize::MAX);
        sc.in_k_class = true;
        sc.add_read_only("self", Ty::Obj);
        sc.add("a", Ty::Int);
        sc.add("b", Ty::Int);
        sc.add("kept", Ty::Blk);
        if class.name != "K0" && class.name != "K4" {
            sc.add(&class.fields[0], Ty::Int);
        }
        sc
    }

    fn k_method_body(&mut self, class: &Class, m: Method) -> Method {
        let mut sc = self.k_scope(class);
        let subclass = class.superclass.is_some();
        let (params, result): (Vec<(&str, Ty)>, Option<Ty>) = match m.selector.as_str() {
            "init" => (vec![], None),
            "m0" => (vec![], Some(Ty::Int)),
            // Its argument is the escaped block: calling it would escape again.
            "escapedBlock:" => {
                sc.leaf = true;
                (vec![], Some(Ty::Int))
            }
            "m1:" | "callKept:" => (vec![("n", Ty::Int)], Some(Ty::Int)),
            "m2:with:" => (vec![("n", Ty::Int), ("m", Ty::Int)], Some(Ty::Int)),
            "mb:" => (vec![("k", Ty::Blk)], Some(Ty::Int)),
            "md:" => (vec![("d", Ty::Double)], Some(Ty::Double)),
            "ms" => (vec![], Some(Ty::Str)),
            "keep:" => (vec![("k", Ty::Blk)], None),
            _ => (vec![], Some(Ty::Blk)),
        };
        for (p, ty) in &params {
            sc.add_read_only(p, *ty);
        }
        sc.returns = result;
        let mut body = Vec::new();
        let mut locals = Vec::new();
        match m.selector.as_str() {
            "init" => {
                if subclass {
                    body.push(Stmt::Expr(unary(var("super"), "init")));
                    let field = class.fields[0].clone();
                    let value = int(self.below(30) as i128 - 5);
                    body.push(Stmt::Expr(assign(&field, value)));
                } else {
                    for field in ["a", "b"] {
                        let value = int(self.below(30) as i128 - 5);
                        body.push(Stmt::Expr(assign(field, value)));
                    }
                    let blk = self.literal_block(&sc, 1);
                    body.push(Stmt::Expr(assign("kept", blk)));
                }
            }
            "keep:" => body.push(Stmt::Expr(assign("kept", var("k")))),
            "callKept:" => body.push(Stmt::Return(binary(var("kept"), "value:", var("n")))),
            // A block that returns from `escaper` when its argument is large: called after
            // `escaper` returned, that return has escaped.
            "escaper" => {
                let limit = self.int_expr(&sc, 1);
                let value = self.int_expr(&sc, 1);
                body.push(Stmt::Return(block(
                    &["x"],
                    &[],
                    vec![
                        Stmt::Expr(binary(
                            binary(var("x"), ">", limit),
                            "ifTrue:",
                            block(&[], &[], vec![Stmt::Return(var("x"))]),
                        )),
                        Stmt::Expr(binary(var("x"), "+", value)),
                    ],
                )));
            }
            selector => {
                let k = self.below(3);
                self.statements(k, &mut sc, &mut body, &mut locals);
                let ty = result.expect("a protocol method answers something");
                let value = if subclass && ty == Ty::Int && self.chance(1, 3) {
                    // The inherited method, through super, sometimes from inside a block.
                    let args = params.iter().map(|(p, _)| var(p)).collect();
                    let mut inherited = send(var("super"), selector, args);
                    if self.chance(1, 2) {
                        inherited = unary(block_of(&[], inherited), "value");
                    }
                    binary(inherited, "+", self.int_expr(&sc, 2))
                } else {
                    self.expr(ty, &sc, 3)
                };
                body.push(Stmt::Return(value));
            }
        }
        let params = if m.selector == "escapedBlock:" {
            vec!["blk".to_string()]
        } else {
            params.iter().map(|(p, _)| p.to_string()).collect()
        };
        Method {
            selector: m.selector,
            params,
            locals,
            body,
        }
    }

    fn main_class(&mut self) -> Class {
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
        body: vec![Stmt::Expr(exprs::if_else(
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

/// A method whose body `k_method_body` fills in.
fn stub_method(selector: &str) -> Method {
    Method {
        selector: selector.to_string(),
        params: vec![],
        locals: vec![],
        body: vec![],
    }
}

/// `new = ( ^super new init )` on a root class's class side.
/// `new`, which counts the instances made of each class in a class-side field (each
/// subclass has its own) and sends `init`.
fn new_calling_init() -> Method {
    let previous = exprs::if_else(unary(var("count"), "isNil"), int(0), var("count"));
    Method {
        selector: "new".into(),
        params: vec![],
        locals: vec![],
        body: vec![
            Stmt::Expr(assign("count", binary(previous, "+", int(1)))),
            Stmt::Return(unary(unary(var("super"), "new"), "init")),
        ],
    }
}

/// `count`: the instances `new` made of this class.
fn count() -> Method {
    Method {
        selector: "count".into(),
        params: vec![],
        locals: vec![],
        body: vec![Stmt::Return(var("count"))],
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
