//! Shrinks a program that shows a divergence to a small one that still shows it: delta
//! debugging over the tree (hierarchical, as in HDD), coarse edits first — whole classes and
//! methods, halves of statement lists, single statements, an expression replaced by one of
//! its parts or a literal, literals made smaller, declarations dropped — each kept when the
//! test still says "interesting", until no edit is or time runs out.

use std::ops::ControlFlow;
use std::time::Instant;

use crate::ast::{Expr, Lit, Program, MAIN_CLASS};
use crate::walk;

/// What the shrinker did: the smallest program found and how many candidates it tested.
pub struct Shrunk {
    pub program: Program,
    pub tests: u32,
    /// The deadline came before no edit was left to try.
    pub timed_out: bool,
}

/// One kind of edit, applied to the `n`th place it can apply to; `None` once `n` is past
/// the last.
type Edit = fn(&Program, usize) -> Option<Program>;

const EDITS: [Edit; 7] = [
    remove_class,
    remove_method,
    remove_half_of_body,
    remove_statement,
    simplify_expression,
    simplify_literal,
    remove_declaration,
];

pub fn shrink(
    program: &Program,
    interesting: &mut dyn FnMut(&Program) -> bool,
    deadline: Instant,
) -> Shrunk {
    let mut best = program.clone();
    let mut tests = 0;
    loop {
        let before = best.clone();
        for edit in EDITS {
            let mut n = 0;
            while let Some(candidate) = edit(&best, n) {
                if Instant::now() > deadline {
                    return Shrunk {
                        program: best,
                        tests,
                        timed_out: true,
                    };
                }
                tests += 1;
                if interesting(&candidate) {
                    // The same number now names the next place (or a smaller form here).
                    best = candidate;
                } else {
                    n += 1;
                }
            }
        }
        if best == before {
            return Shrunk {
                program: best,
                tests,
                timed_out: false,
            };
        }
    }
}

fn remove_class(p: &Program, n: usize) -> Option<Program> {
    let index = (0..p.classes.len())
        .filter(|&i| p.classes[i].name != MAIN_CLASS)
        .nth(n)?;
    let mut q = p.clone();
    q.classes.remove(index);
    Some(q)
}

fn remove_method(p: &Program, n: usize) -> Option<Program> {
    let places = p.classes.iter().enumerate().flat_map(|(c, class)| {
        let instance = (0..class.methods.len()).map(move |m| (c, false, m));
        let meta = (0..class.class_methods.len()).map(move |m| (c, true, m));
        instance.chain(meta)
    });
    // Main>>run: is where the program starts, and it runs Main>>run.
    let is_run = |&(c, meta, m): &(usize, bool, usize)| {
        let selector = &p.classes[c].methods[m].selector;
        !meta && p.classes[c].name == MAIN_CLASS && (selector == "run" || selector == "run:")
    };
    let (c, meta, m) = places.filter(|place| !is_run(place)).nth(n)?;
    let mut q = p.clone();
    if meta {
        q.classes[c].class_methods.remove(m);
    } else {
        q.classes[c].methods.remove(m);
    }
    Some(q)
}

/// The first or second half of a statement list, for lists of two and more.
fn remove_half_of_body(p: &Program, n: usize) -> Option<Program> {
    let mut q = p.clone();
    let (list, which) = (n / 2, n % 2);
    let mut done = false;
    let found = walk::nth(
        |f| walk::bodies(&mut q, f),
        list,
        |body| {
            if body.len() >= 2 {
                let half = body.len() / 2;
                if which == 0 {
                    body.drain(..half);
                } else {
                    body.drain(half..);
                }
                done = true;
            }
        },
    );
    match (found, done) {
        (false, _) => None,
        (true, true) => Some(q),
        (true, false) => remove_half_of_body(p, n + 2 - which),
    }
}

fn remove_statement(p: &Program, n: usize) -> Option<Program> {
    let mut q = p.clone();
    let mut remaining = n;
    let mut done = false;
    walk::bodies(&mut q, &mut |body| {
        if remaining < body.len() {
            body.remove(remaining);
            done = true;
            return ControlFlow::Break(());
        }
        remaining -= body.len();
        ControlFlow::Continue(())
    });
    done.then_some(q)
}

/// Smaller forms of an expression: each of its parts that is an expression itself (a send's
/// receiver or an argument, an assignment's value) and the literals 0 and nil.
fn replacements(e: &Expr) -> Vec<Expr> {
    let mut out: Vec<Expr> = match e {
        Expr::Lit(_) | Expr::Var(_) => Vec::new(),
        Expr::Assign(_, value) => vec![(**value).clone()],
        Expr::Send(receiver, _, args) => std::iter::once((**receiver).clone())
            .chain(args.iter().cloned())
            .collect(),
        Expr::Block(_) => Vec::new(),
    };
    out.retain(|r| !matches!(r, Expr::Block(_)) || matches!(e, Expr::Send(..)));
    if !matches!(e, Expr::Lit(_) | Expr::Var(_)) {
        out.push(Expr::Lit(Lit::Int(0)));
        out.push(Expr::Var("nil".into()));
    }
    out
}

fn simplify_expression(p: &Program, n: usize) -> Option<Program> {
    let mut remaining = n;
    let mut q = p.clone();
    let mut done = false;
    walk::exprs(&mut q, &mut |e| {
        let options = replacements(e);
        if remaining < options.len() {
            *e = options[remaining].clone();
            done = true;
            return ControlFlow::Break(());
        }
        remaining -= options.len();
        ControlFlow::Continue(())
    });
    done.then_some(q)
}

/// Integers towards 0 (halved, then 0), literal arrays one element shorter.
fn smaller_literals(l: &Lit) -> Vec<Lit> {
    match l {
        Lit::Int(0) => Vec::new(),
        Lit::Int(v) if v.abs() <= 2 => vec![Lit::Int(0)],
        Lit::Int(v) => vec![Lit::Int(0), Lit::Int(v / 2)],
        Lit::Array(items) => (0..items.len())
            .map(|i| {
                let mut fewer = items.clone();
                fewer.remove(i);
                Lit::Array(fewer)
            })
            .collect(),
        Lit::Str(s) if !s.is_empty() => vec![Lit::Str(String::new())],
        _ => Vec::new(),
    }
}

fn simplify_literal(p: &Program, n: usize) -> Option<Program> {
    let mut remaining = n;
    let mut q = p.clone();
    let mut done = false;
    walk::exprs(&mut q, &mut |e| {
        if let Expr::Lit(l) = e {
            let options = smaller_literals(l);
            if remaining < options.len() {
                *l = options[remaining].clone();
                done = true;
                return ControlFlow::Break(());
            }
            remaining -= options.len();
        }
        ControlFlow::Continue(())
    });
    done.then_some(q)
}

fn remove_declaration(p: &Program, n: usize) -> Option<Program> {
    let mut remaining = n;
    let mut q = p.clone();
    let mut done = false;
    walk::declarations(&mut q, &mut |names| {
        if remaining < names.len() {
            names.remove(remaining);
            done = true;
            return ControlFlow::Break(());
        }
        remaining -= names.len();
        ControlFlow::Continue(())
    });
    done.then_some(q)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::generate::generate;

    /// A stand-in for a divergence: the program prints something that mentions `needle`.
    fn mentions(p: &Program, needle: &str) -> bool {
        p.listing().contains(needle)
    }

    #[test]
    fn a_program_shrinks_to_little_more_than_what_makes_it_interesting() {
        let program = generate(7);
        assert!(mentions(&program, "rec:"));
        let before = program.size();
        let shrunk = shrink(
            &program,
            &mut |p| mentions(p, "rec:"),
            Instant::now() + std::time::Duration::from_secs(60),
        );
        assert!(!shrunk.timed_out);
        assert!(mentions(&shrunk.program, "rec:"));
        assert!(
            shrunk.program.size() * 10 < before,
            "{} of {before}:\n{}",
            shrunk.program.size(),
            shrunk.program.listing()
        );
        // Main>>run stays: the program must still start somewhere.
        assert!(shrunk.program.listing().contains("run = ("));
    }

    #[test]
    fn every_edit_makes_the_program_smaller_or_its_literals_closer_to_zero() {
        let program = generate(3);
        for edit in EDITS {
            let mut n = 0;
            while let Some(candidate) = edit(&program, n) {
                assert_ne!(candidate, program);
                n += 1;
            }
        }
    }
}
