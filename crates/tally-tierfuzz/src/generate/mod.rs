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
//! Bodies are random statements (`stmts.rs`) and expressions (`exprs.rs`) over typed
//! variables (`Scope`), whose loops are bounded by a budget, so every program ends, within
//! tens to hundreds of milliseconds interpreted. `classes.rs` makes the `K` classes,
//! `main_class.rs` Main.

mod classes;
mod exprs;
mod main_class;
mod scope;
mod stmts;

use rand::rngs::Xoshiro256PlusPlus;
use rand::{RngExt, SeedableRng};

use crate::ast::*;
use scope::Ty;

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
}
