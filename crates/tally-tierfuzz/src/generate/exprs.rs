//! Expressions of a requested kind (`Ty`) over the variables in scope.
//!
//! Each kind has leaves (literals, variables) and compound forms that reach the places the
//! tiers treat specially: arithmetic that overflows into big integers, divisions and shifts,
//! doubles with their special values, comparisons of mixed numbers and NaN, sends to the
//! generated classes (polymorphic through `objs`), blocks called, passed and kept, helpers,
//! recursion, strings and symbols.

use super::scope::{Scope, Ty};
use super::Gen;
use crate::ast::*;

/// Integer literals at the edges of the small-integer range (62 bits and a sign) and of the
/// machine word, where compiled code must fall back to big integers.
const INT_EDGES: [i128; 10] = [
    4_611_686_018_427_387_903,
    -4_611_686_018_427_387_904,
    4_611_686_018_427_387_904,
    9_223_372_036_854_775_807,
    -9_223_372_036_854_775_808,
    2_147_483_648,
    4_294_967_295,
    1 << 31,
    -1,
    170_141_183_460_469_231_731_687_303_715_884_105_727,
];

const DOUBLE_LITERALS: [&str; 12] = [
    "0.0", "1.5", "-2.25", "0.1", "1.0e300", "1.0e-300", "3.0", "-0.5", "1.0e15", "2.5e-10",
    "123.456", "-1.0e308",
];

const STRINGS: [&str; 7] = ["", "a", "abc", "hello", "ab'c", "x y", "12"];
const SYMBOLS: [&str; 7] = ["foo", "m1:", "+", "at:put:", "abc", "m0", "zork"];

impl Gen {
    pub(super) fn expr(&mut self, ty: Ty, sc: &Scope, depth: u32) -> Expr {
        match ty {
            Ty::Int => self.int_expr(sc, depth),
            Ty::Double => self.double_expr(sc, depth),
            Ty::Bool => self.bool_expr(sc, depth),
            Ty::Str => self.str_expr(sc, depth),
            Ty::Sym => self.sym_expr(sc, depth),
            Ty::Obj => self.obj_expr(sc, depth),
            Ty::Blk => self.blk_expr(sc, depth),
            Ty::Arr => self.arr_expr(sc, depth),
        }
    }

    fn var_of(&mut self, ty: Ty, sc: &Scope) -> Option<Expr> {
        let names = sc.of(ty);
        if names.is_empty() {
            None
        } else {
            Some(var(names[self.below(names.len())]))
        }
    }

    pub(super) fn int_leaf(&mut self, sc: &Scope) -> Expr {
        if self.chance(1, 2) {
            if let Some(v) = self.var_of(Ty::Int, sc) {
                return v;
            }
        }
        if self.chance(1, 8) {
            int(INT_EDGES[self.below(INT_EDGES.len())])
        } else {
            int(self.below(41) as i128 - 10)
        }
    }

    pub(super) fn int_expr(&mut self, sc: &Scope, depth: u32) -> Expr {
        if depth == 0 || self.chance(1, 4) {
            return self.int_leaf(sc);
        }
        let d = depth - 1;
        match self.below(22) {
            0..=3 => {
                let op = self.pick(&["+", "-", "*", "+"]);
                binary(self.int_expr(sc, d), op, self.int_expr(sc, d))
            }
            4 => {
                let op = self.pick(&["/", "%", "rem:"]);
                let divisor = self.nonzero(sc, d);
                send(self.int_expr(sc, d), op, vec![divisor])
            }
            5 => self.bits(sc, d),
            6 => {
                let op = self.pick(&["max:", "min:"]);
                binary(self.int_expr(sc, d), op, self.int_expr(sc, d))
            }
            7 => {
                let op = self.pick(&["abs", "negated", "as32BitSignedValue", "hashcode"]);
                unary(self.int_expr(sc, d), op)
            }
            // A double back to an integer, where it is finite and not too large (a NaN
            // fails both comparisons).
            8 => {
                let x = self.double_expr(sc, d);
                // `+ 0.0`: a Double expression may hold an Integer (see `double_leaf`).
                let x = binary(x, "+", double("0.0"));
                let op = self.pick(&["asInteger", "round"]);
                let inside = binary(
                    binary(x.clone(), "<", double("1.0e15")),
                    "and:",
                    block_of(&[], binary(x.clone(), ">", double("-1.0e15"))),
                );
                if_else(inside, unary(x, op), int(0))
            }
            9 => if_else(
                self.bool_expr(sc, d),
                self.int_expr(sc, d),
                self.int_expr(sc, d),
            ),
            10 => {
                let x = self.fresh("x");
                let mut inner = sc.clone();
                inner.add_read_only(&x, Ty::Int);
                let body = self.int_expr(&inner, d);
                binary(block_of(&[&x], body), "value:", self.int_expr(sc, d))
            }
            11 if !sc.leaf => binary(self.blk_expr(sc, d), "value:", self.int_expr(sc, d)),
            12 if sc.calls() => self.protocol_send(sc, d),
            13 if sc.calls() => self.helper_call(Ty::Int, sc, d),
            14 if sc.calls() && sc.budget >= 30 => binary(
                var("self"),
                "rec:",
                binary(self.int_expr(sc, d), "%", int(25)),
            ),
            15 => self.array_int(sc, d),
            16 => {
                let s = self.str_expr(sc, d);
                if self.chance(1, 2) {
                    unary(s, "length")
                } else {
                    binary(s, "indexOf:", self.str_expr(sc, d))
                }
            }
            17 => binary(
                binary(self.int_expr(sc, d), "+", self.int_expr(sc, d)),
                "%",
                int(1_000_003),
            ),
            // A field read reflectively: index 1 is `a` in every generated class but K5.
            19 if sc.in_k_class => binary(var("self"), "instVarAt:", int(1)),
            // A two-argument block given one: the library's `value:` passes nil for the
            // second.
            20 => {
                let (x, y) = (self.fresh("x"), self.fresh("y"));
                let body = if_else(unary(var(&y), "isNil"), var(&x), int(-1));
                binary(block_of(&[&x, &y], body), "value:", self.int_expr(sc, d))
            }
            18 if sc.calls() => {
                // A send whose selector is data: megamorphic by selector.
                let sel = self.pick(&["m0", "m1:", "callKept:"]);
                let args = if sel == "m0" {
                    send(var("Array"), "new", vec![])
                } else {
                    binary(var("Array"), "with:", self.int_expr(sc, d))
                };
                send(
                    self.obj_expr(sc, d),
                    "perform:withArguments:",
                    vec![symbol(sel), args],
                )
            }
            _ => self.int_leaf(sc),
        }
    }

    /// An integer that is never 0: divisors. Some are negative (the quotient's sign and the
    /// one small quotient that needs a big integer, min / -1).
    fn nonzero(&mut self, sc: &Scope, depth: u32) -> Expr {
        match self.below(3) {
            0 => {
                let n = self.below(9) as i128 + 1;
                int(if self.chance(1, 3) { -n } else { n })
            }
            1 => binary(binary(self.int_expr(sc, depth), "%", int(5)), "+", int(1)),
            _ => binary(binary(self.int_expr(sc, depth), "%", int(4)), "-", int(5)),
        }
    }

    fn bits(&mut self, sc: &Scope, d: u32) -> Expr {
        let a = self.int_expr(sc, d);
        match self.below(4) {
            0 => binary(a, "&", self.int_expr(sc, d)),
            1 => binary(a, "bitXor:", self.int_expr(sc, d)),
            2 => binary(
                binary(a, "%", int(1 << 20)),
                "<<",
                binary(self.int_expr(sc, d), "%", int(70)),
            ),
            _ => binary(a, ">>>", binary(self.int_expr(sc, d), "%", int(70))),
        }
    }

    fn array_int(&mut self, sc: &Scope, d: u32) -> Expr {
        let a = self.arr_expr(sc, d);
        match self.below(4) {
            0 => unary(a, "length"),
            1 => {
                // Every Arr has at least one element.
                let index = binary(
                    binary(self.int_expr(sc, d), "%", unary(a.clone(), "length")),
                    "+",
                    int(1),
                );
                binary(a, "at:", index)
            }
            2 => {
                let (acc, e) = (self.fresh("acc"), self.fresh("e"));
                let mut inner = sc.clone();
                inner.add_read_only(&acc, Ty::Int);
                inner.add_read_only(&e, Ty::Int);
                inner.budget = sc.budget / 8;
                let step = self.int_expr(&inner, d);
                send(
                    a,
                    "inject:into:",
                    vec![self.int_expr(sc, d), block_of(&[&acc, &e], step)],
                )
            }
            _ => unary(a, "sum"),
        }
    }

    /// A send of the generated classes' protocol to an object: which method runs depends on
    /// the receiver's class, so the site turns polymorphic as `objs` changes.
    fn protocol_send(&mut self, sc: &Scope, d: u32) -> Expr {
        let receiver = self.obj_expr(sc, d);
        match self.below(5) {
            0 => unary(receiver, "m0"),
            1 => binary(receiver, "m1:", self.int_expr(sc, d)),
            2 => send(
                receiver,
                "m2:with:",
                vec![self.int_expr(sc, d), self.int_expr(sc, d)],
            ),
            3 => binary(receiver, "mb:", self.blk_expr(sc, d)),
            _ => binary(receiver, "callKept:", self.int_expr(sc, d)),
        }
    }

    /// A call of a Main helper that answers `ty`, if one is callable from here.
    fn helper_call(&mut self, ty: Ty, sc: &Scope, d: u32) -> Expr {
        let candidates: Vec<usize> = (sc.first_helper..self.schema.helpers.len())
            .filter(|&h| {
                self.schema.helpers[h].result == ty && self.schema.helpers[h].cost <= sc.budget
            })
            .collect();
        if candidates.is_empty() {
            return self.expr(ty, sc, 0);
        }
        let h = candidates[self.below(candidates.len())];
        let helper = self.schema.helpers[h].clone();
        let args = helper.params.iter().map(|&p| self.expr(p, sc, d)).collect();
        send(var("self"), &helper.selector, args)
    }

    /// A Double expression's leaf: a variable, a literal, a special value (infinities, NaN,
    /// −0.0), or now and then an integer.
    pub(super) fn double_leaf(&mut self, sc: &Scope) -> Expr {
        if self.chance(1, 2) {
            if let Some(v) = self.var_of(Ty::Double, sc) {
                return v;
            }
        }
        let infinity = || unary(var("Double"), "PositiveInfinity");
        match self.below(9) {
            // Any number goes where a Double does: a variable that held doubles gets an
            // integer (small or big) and sites that only saw one kind see the other.
            8 => self.int_leaf(sc),
            0 => infinity(),
            1 => binary(double("0.0"), "-", infinity()),
            2 => binary(infinity(), "-", infinity()),
            3 => binary(double("0.0"), "*", double("-1.0")),
            _ => double(DOUBLE_LITERALS[self.below(DOUBLE_LITERALS.len())]),
        }
    }

    fn double_expr(&mut self, sc: &Scope, depth: u32) -> Expr {
        if depth == 0 || self.chance(1, 4) {
            return self.double_leaf(sc);
        }
        let d = depth - 1;
        match self.below(11) {
            0..=2 => {
                let op = self.pick(&["+", "-", "*", "//"]);
                binary(self.double_expr(sc, d), op, self.double_expr(sc, d))
            }
            // Mixed with integers, on either side.
            3 => {
                let op = self.pick(&["+", "-", "*"]);
                binary(self.double_expr(sc, d), op, self.int_expr(sc, d))
            }
            4 => binary(self.int_expr(sc, d), "//", self.nonzero(sc, d)),
            5 => {
                let op = self.pick(&["sqrt", "sin", "cos", "abs", "negated"]);
                let x = self.double_expr(sc, d);
                if op == "sin" || op == "cos" {
                    unary(binary(x, "+", double("0.0")), op)
                } else {
                    unary(x, op)
                }
            }
            6 => unary(self.int_expr(sc, d), "asDouble"),
            7 => if_else(
                self.bool_expr(sc, d),
                self.double_expr(sc, d),
                self.double_expr(sc, d),
            ),
            8 if sc.calls() => binary(self.obj_expr(sc, d), "md:", self.double_expr(sc, d)),
            9 if sc.calls() => self.helper_call(Ty::Double, sc, d),
            // Double's `%` fails on a zero divisor: these are not.
            _ => {
                let divisor = self.pick(&["1.5", "-2.25", "0.1", "3.0", "1.0e-300"]);
                binary(self.double_expr(sc, d), "%", double(divisor))
            }
        }
    }

    fn bool_expr(&mut self, sc: &Scope, depth: u32) -> Expr {
        if depth == 0 || self.chance(1, 6) {
            if let Some(v) = self.var_of(Ty::Bool, sc) {
                return v;
            }
            return var(self.pick(&["true", "false"]));
        }
        let d = depth - 1;
        let cmp = ["<", ">", "<=", ">=", "=", "~="];
        match self.below(11) {
            0..=2 => {
                let op = self.pick(&cmp);
                binary(self.int_expr(sc, d), op, self.int_expr(sc, d))
            }
            3 | 4 => {
                let op = self.pick(&cmp);
                let (a, b) = match self.below(3) {
                    0 => (self.double_expr(sc, d), self.double_expr(sc, d)),
                    1 => (self.double_expr(sc, d), self.int_expr(sc, d)),
                    _ => (self.int_expr(sc, d), self.double_expr(sc, d)),
                };
                binary(a, op, b)
            }
            5 => {
                let (a, b) = self.pick(&[
                    (Ty::Int, Ty::Int),
                    (Ty::Double, Ty::Double),
                    (Ty::Sym, Ty::Sym),
                    (Ty::Str, Ty::Str),
                    (Ty::Obj, Ty::Obj),
                    (Ty::Str, Ty::Sym),
                    (Ty::Sym, Ty::Str),
                ]);
                let op = self.pick(&["==", "=", "~="]);
                binary(self.expr(a, sc, d), op, self.expr(b, sc, d))
            }
            6 => unary(self.bool_expr(sc, d), "not"),
            7 => {
                let op = self.pick(&["and:", "or:", "&&", "||"]);
                let right = self.bool_expr(sc, d);
                // The argument may be a block or, not inlined then, a Boolean.
                let right = if self.chance(3, 4) {
                    block_of(&[], right)
                } else {
                    right
                };
                binary(self.bool_expr(sc, d), op, right)
            }
            8 => {
                let ty = self.pick(&[Ty::Obj, Ty::Int, Ty::Str]);
                unary(self.expr(ty, sc, d), self.pick(&["isNil", "notNil"]))
            }
            9 => binary(
                self.obj_expr(sc, d),
                "respondsTo:",
                symbol(self.pick(&["m0", "m1:", "escaper", "zork", "init"])),
            ),
            _ => send(
                self.int_expr(sc, d),
                "between:and:",
                vec![self.int_expr(sc, d), self.int_expr(sc, d)],
            ),
        }
    }

    fn str_expr(&mut self, sc: &Scope, depth: u32) -> Expr {
        if depth == 0 || self.chance(1, 3) {
            if self.chance(1, 2) {
                if let Some(v) = self.var_of(Ty::Str, sc) {
                    return v;
                }
            }
            return string(STRINGS[self.below(STRINGS.len())]);
        }
        let d = depth - 1;
        match self.below(6) {
            0 => binary(self.str_expr(sc, d), "+", self.str_expr(sc, d)),
            1 => {
                let ty = self.pick(&[Ty::Int, Ty::Double, Ty::Sym, Ty::Bool]);
                binary(self.str_expr(sc, d), "+", self.expr(ty, sc, d))
            }
            2 => {
                let ty = self.pick(&[Ty::Int, Ty::Double, Ty::Sym]);
                unary(self.expr(ty, sc, d), "asString")
            }
            3 if sc.calls() => unary(self.obj_expr(sc, d), "ms"),
            4 => {
                let s = self.str_expr(sc, d);
                if_else(
                    binary(unary(s.clone(), "length"), ">", int(1)),
                    send(
                        s.clone(),
                        "substringFrom:to:",
                        vec![int(2), unary(s.clone(), "length")],
                    ),
                    s,
                )
            }
            _ => binary(self.str_expr(sc, d), "concatenate:", self.str_expr(sc, d)),
        }
    }

    fn sym_expr(&mut self, sc: &Scope, depth: u32) -> Expr {
        if depth == 0 || self.chance(1, 2) {
            if self.chance(1, 2) {
                if let Some(v) = self.var_of(Ty::Sym, sc) {
                    return v;
                }
            }
            return symbol(SYMBOLS[self.below(SYMBOLS.len())]);
        }
        let d = depth - 1;
        match self.below(3) {
            0 => unary(self.str_expr(sc, d), "asSymbol"),
            1 => binary(self.sym_expr(sc, d), "concatenate:", self.str_expr(sc, d)),
            _ => if_else(
                self.bool_expr(sc, d),
                self.sym_expr(sc, d),
                self.sym_expr(sc, d),
            ),
        }
    }

    pub(super) fn obj_expr(&mut self, sc: &Scope, depth: u32) -> Expr {
        if sc.in_k_class {
            // Another instance would run `init`, which may be running now.
            return var("self");
        }
        if self.chance(1, 3) {
            if let Some(v) = self.var_of(Ty::Obj, sc) {
                return v;
            }
        }
        if self.chance(1, 6) {
            let kinds = self.schema.kinds.clone();
            return unary(var(&kinds[self.below(kinds.len())]), "new");
        }
        let index = binary(
            binary(
                self.int_expr(sc, depth.saturating_sub(1)),
                "%",
                unary(var("objs"), "length"),
            ),
            "+",
            int(1),
        );
        binary(var("objs"), "at:", index)
    }

    /// A one-argument block from Int to Int: written here (it may capture and assign the
    /// variables in scope, and return non-locally), made by a method (`makeAdder:`), taken
    /// from where it was kept, or made by an object (whose block may have escaped its home).
    pub(super) fn blk_expr(&mut self, sc: &Scope, depth: u32) -> Expr {
        if self.chance(1, 3) {
            if let Some(v) = self.var_of(Ty::Blk, sc) {
                return v;
            }
        }
        let d = depth.saturating_sub(1);
        match self.below(6) {
            0 | 1 => self.literal_block(sc, d),
            2 if !sc.in_k_class => binary(var("self"), "makeAdder:", self.int_expr(sc, d)),
            3 if !sc.in_k_class => {
                let index = binary(
                    binary(self.int_expr(sc, d), "%", unary(var("blocks"), "length")),
                    "+",
                    int(1),
                );
                binary(var("blocks"), "at:", index)
            }
            4 if self.schema.escapes_handled => unary(self.obj_expr(sc, d), "escaper"),
            5 if self.schema.escapes_handled && !sc.in_k_class => unary(var("self"), "makeEscaper"),
            _ => self.literal_block(sc, d),
        }
    }

    pub(super) fn literal_block(&mut self, sc: &Scope, d: u32) -> Expr {
        let x = self.fresh("x");
        let mut inner = sc.clone();
        inner.add_read_only(&x, Ty::Int);
        inner.depth += 1;
        // A block is called from anywhere, any number of times: what it does must be cheap,
        // and call nothing that could call it again.
        inner.budget = 1;
        inner.leaf = true;
        let mut body = Vec::new();
        let mut locals = Vec::new();
        if self.chance(1, 3) {
            self.statement(&mut inner, &mut body, &mut locals);
        }
        let value = self.int_expr(&inner, d);
        body.push(Stmt::Expr(value));
        Expr::Block(Box::new(Block {
            params: vec![x],
            locals,
            body,
        }))
    }

    pub(super) fn arr_expr(&mut self, sc: &Scope, depth: u32) -> Expr {
        if self.chance(1, 2) {
            if let Some(v) = self.var_of(Ty::Arr, sc) {
                return v;
            }
        }
        let d = depth.saturating_sub(1);
        match self.below(6) {
            0 => {
                let n = self.below(5) + 1;
                let items = (0..n)
                    .map(|_| Lit::Int(self.below(200) as i128 - 50))
                    .collect();
                Expr::Lit(Lit::Array(items))
            }
            1 => send(
                var("Array"),
                "new:withAll:",
                vec![int(self.below(6) as i128 + 1), self.int_expr(sc, d)],
            ),
            2 => send(
                var("Array"),
                "with:with:with:",
                vec![
                    self.int_expr(sc, d),
                    self.int_expr(sc, d),
                    self.int_expr(sc, d),
                ],
            ),
            3 => {
                let x = self.fresh("x");
                let mut inner = sc.clone();
                inner.add_read_only(&x, Ty::Int);
                inner.budget = 1;
                inner.leaf = true;
                let body = self.int_expr(&inner, d);
                binary(self.arr_expr(sc, d), "collect:", block_of(&[&x], body))
            }
            4 => binary(int(1), "to:", int(self.below(6) as i128 + 1)),
            _ => unary(self.arr_expr(sc, d), "copy"),
        }
    }
}

/// `cond ifTrue: [a] ifFalse: [b]`, which the bytecode compiler inlines.
pub fn if_else(cond: Expr, a: Expr, b: Expr) -> Expr {
    send(
        cond,
        "ifTrue:ifFalse:",
        vec![block_of(&[], a), block_of(&[], b)],
    )
}
