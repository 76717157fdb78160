//! The generated classes `K0`…: a root with fields `a`, `b` and `kept`, subclasses that
//! override part of the protocol (some through `super`), a second root beside it, and `K5`,
//! which answers every send in `doesNotUnderstand:arguments:`.

use super::exprs::if_else;
use super::scope::{Scope, Ty};
use super::{Gen, K_METHOD_BUDGET};
use crate::ast::*;

impl Gen {
    /// The classes of the protocol, with their fields and the selectors each defines (bodies
    /// come later, once every class is known).
    pub(super) fn k_classes(&mut self) -> Vec<Class> {
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

    pub(super) fn k_method_body(&mut self, class: &Class, m: Method) -> Method {
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

/// `new`, which counts the instances made of each class in a class-side field (each
/// subclass has its own) and sends `init`.
fn new_calling_init() -> Method {
    let previous = if_else(unary(var("count"), "isNil"), int(0), var("count"));
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
