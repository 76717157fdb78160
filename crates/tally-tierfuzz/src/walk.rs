//! Visits every statement list and every expression of a program in one fixed order, so the
//! shrinker can name a place by its number and edit it.

use std::ops::ControlFlow;

use crate::ast::{Block, Expr, Method, Program, Stmt};

/// Calls `f` on each method body and block body, outermost first, until it breaks.
pub fn bodies(program: &mut Program, f: &mut dyn FnMut(&mut Vec<Stmt>) -> ControlFlow<()>) {
    let _ = for_each_method(program, &mut |m| {
        f(&mut m.body)?;
        stmts_bodies(&mut m.body, f)
    });
}

/// Calls `f` on each expression, parents before their children, until it breaks.
pub fn exprs(program: &mut Program, f: &mut dyn FnMut(&mut Expr) -> ControlFlow<()>) {
    let _ = for_each_method(program, &mut |m| stmts_exprs(&mut m.body, f));
}

/// Calls `f` on each list of declared names (fields, locals of methods and blocks).
pub fn declarations(program: &mut Program, f: &mut dyn FnMut(&mut Vec<String>) -> ControlFlow<()>) {
    let _ = (|| {
        for class in &mut program.classes {
            f(&mut class.fields)?;
            f(&mut class.class_fields)?;
        }
        for_each_method(program, &mut |m| {
            f(&mut m.locals)?;
            stmts_exprs(&mut m.body, &mut |e| match e {
                Expr::Block(b) => f(&mut b.locals),
                _ => ControlFlow::Continue(()),
            })
        })
    })();
}

fn for_each_method(
    program: &mut Program,
    f: &mut dyn FnMut(&mut Method) -> ControlFlow<()>,
) -> ControlFlow<()> {
    for class in &mut program.classes {
        for m in class
            .methods
            .iter_mut()
            .chain(class.class_methods.iter_mut())
        {
            f(m)?;
        }
    }
    ControlFlow::Continue(())
}

fn stmts_bodies(
    body: &mut [Stmt],
    f: &mut dyn FnMut(&mut Vec<Stmt>) -> ControlFlow<()>,
) -> ControlFlow<()> {
    for stmt in body {
        let (Stmt::Expr(e) | Stmt::Return(e)) = stmt;
        expr_bodies(e, f)?;
    }
    ControlFlow::Continue(())
}

fn expr_bodies(
    e: &mut Expr,
    f: &mut dyn FnMut(&mut Vec<Stmt>) -> ControlFlow<()>,
) -> ControlFlow<()> {
    match e {
        Expr::Lit(_) | Expr::Var(_) => ControlFlow::Continue(()),
        Expr::Assign(_, value) => expr_bodies(value, f),
        Expr::Send(receiver, _, args) => {
            expr_bodies(receiver, f)?;
            for arg in args {
                expr_bodies(arg, f)?;
            }
            ControlFlow::Continue(())
        }
        Expr::Block(b) => {
            let Block { body, .. } = b.as_mut();
            f(body)?;
            stmts_bodies(body, f)
        }
    }
}

fn stmts_exprs(
    body: &mut [Stmt],
    f: &mut dyn FnMut(&mut Expr) -> ControlFlow<()>,
) -> ControlFlow<()> {
    for stmt in body {
        let (Stmt::Expr(e) | Stmt::Return(e)) = stmt;
        expr_exprs(e, f)?;
    }
    ControlFlow::Continue(())
}

fn expr_exprs(e: &mut Expr, f: &mut dyn FnMut(&mut Expr) -> ControlFlow<()>) -> ControlFlow<()> {
    f(e)?;
    match e {
        Expr::Lit(_) | Expr::Var(_) => ControlFlow::Continue(()),
        Expr::Assign(_, value) => expr_exprs(value, f),
        Expr::Send(receiver, _, args) => {
            expr_exprs(receiver, f)?;
            for arg in args {
                expr_exprs(arg, f)?;
            }
            ControlFlow::Continue(())
        }
        Expr::Block(b) => stmts_exprs(&mut b.body, f),
    }
}

/// Applies `edit` to the `n`th item a walk visits; answers whether there was one.
pub fn nth<T: ?Sized>(
    walk: impl FnOnce(&mut dyn FnMut(&mut T) -> ControlFlow<()>),
    n: usize,
    edit: impl FnOnce(&mut T),
) -> bool {
    let mut seen = 0;
    let mut edit = Some(edit);
    walk(&mut |item| {
        if seen == n {
            (edit.take().unwrap())(item);
            return ControlFlow::Break(());
        }
        seen += 1;
        ControlFlow::Continue(())
    });
    edit.is_none()
}
