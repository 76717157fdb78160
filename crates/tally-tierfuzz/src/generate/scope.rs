//! What the generator knows at a point of a method: the variables in scope with the kind of
//! value each holds, what a `^` may return there, and how much looping is left.

/// The kind of value a variable or expression holds. The generator keeps programs mostly
/// well-typed so they run to their end instead of stopping at the first error; errors are
/// put in on purpose (see `Errors`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ty {
    Int,
    /// A number, mostly a Double, now and then an Integer: the kind under a compiled
    /// site changes.
    Double,
    Bool,
    Str,
    Sym,
    /// An instance of one of the generated classes (they share a protocol).
    Obj,
    /// A one-argument block from Int to Int.
    Blk,
    /// An Array of Ints.
    Arr,
}

impl Ty {
    /// The prefix of variables of this kind (`n1`, `d2`, …), so a listing reads easily.
    pub fn prefix(self) -> &'static str {
        match self {
            Ty::Int => "n",
            Ty::Double => "d",
            Ty::Bool => "b",
            Ty::Str => "s",
            Ty::Sym => "y",
            Ty::Obj => "o",
            Ty::Blk => "k",
            Ty::Arr => "a",
        }
    }
}

#[derive(Clone, Debug)]
pub struct Scope {
    pub vars: Vec<(String, Ty)>,
    /// Names that may be read but never assigned (arguments, block parameters, `objs`).
    pub read_only: Vec<String>,
    /// What `^` returns here (inside a block: a non-local return), if the method has a result
    /// of a known kind.
    pub returns: Option<Ty>,
    /// How many more times the code here may run, multiplied over enclosing loops and
    /// recursion: a loop of n iterations divides it by n. Keeps every program short.
    pub budget: u32,
    /// Helpers (`Main>>hN…`) callable from here: those with a higher number than the method
    /// being generated, so calls never recurse without bound.
    pub first_helper: usize,
    /// Inside a generated class (`K…`), which sees its fields but not Main's.
    pub in_k_class: bool,
    /// Nesting of blocks and loops, to keep the text readable.
    pub depth: u32,
    /// Inside a block that may be kept and called from anywhere: it calls no block, helper
    /// or method of the generated classes, so no chain of calls can come back to it.
    pub leaf: bool,
}

impl Scope {
    pub fn new(budget: u32, first_helper: usize) -> Self {
        Scope {
            vars: Vec::new(),
            read_only: Vec::new(),
            returns: None,
            budget,
            first_helper,
            in_k_class: false,
            depth: 0,
            leaf: false,
        }
    }

    pub fn of(&self, ty: Ty) -> Vec<&str> {
        self.vars
            .iter()
            .filter(|(_, t)| *t == ty)
            .map(|(n, _)| n.as_str())
            .collect()
    }

    pub fn assignable(&self, ty: Ty) -> Vec<&str> {
        self.of(ty)
            .into_iter()
            .filter(|n| !self.read_only.iter().any(|r| r == n))
            .collect()
    }

    pub fn add(&mut self, name: &str, ty: Ty) {
        self.vars.push((name.to_string(), ty));
    }

    /// May code here call blocks, helpers and the generated classes' methods?
    pub fn calls(&self) -> bool {
        !self.leaf && !self.in_k_class
    }

    pub fn add_read_only(&mut self, name: &str, ty: Ty) {
        self.add(name, ty);
        self.read_only.push(name.to_string());
    }
}
