//! Names visible at a point of a method, innermost last, with lookups in constant time.
//!
//! The compiler declares names scope by scope and forgets them when a scope closes, and looks
//! each use up from the innermost declaration outwards. A plain list made both the duplicate
//! check at each declaration and every lookup linear in the number of visible names, so a
//! method with many locals compiled in quadratic time.

use std::collections::HashMap;

pub(crate) struct ScopedNames<V> {
    /// Declarations in order, innermost last.
    names: Vec<(String, V)>,
    /// For each name, the positions in `names` that declare it, innermost last.
    positions: HashMap<String, Vec<usize>>,
}

impl<V> ScopedNames<V> {
    pub(crate) fn new() -> ScopedNames<V> {
        ScopedNames {
            names: Vec::new(),
            positions: HashMap::new(),
        }
    }

    /// How many names are declared: a mark to [`ScopedNames::truncate`] back to.
    pub(crate) fn len(&self) -> usize {
        self.names.len()
    }

    pub(crate) fn push(&mut self, name: &str, value: V) {
        self.positions
            .entry(name.to_string())
            .or_default()
            .push(self.names.len());
        self.names.push((name.to_string(), value));
    }

    /// Forgets every name declared since `mark`.
    pub(crate) fn truncate(&mut self, mark: usize) {
        while self.names.len() > mark {
            let (name, _) = self.names.pop().expect("longer than mark");
            if let Some(stack) = self.positions.get_mut(&name) {
                stack.pop();
                if stack.is_empty() {
                    self.positions.remove(&name);
                }
            }
        }
    }

    /// The innermost declaration of `name`, with its position.
    pub(crate) fn lookup(&self, name: &str) -> Option<(usize, &V)> {
        let &pos = self.positions.get(name)?.last()?;
        Some((pos, &self.names[pos].1))
    }

    /// Whether `name` was declared at or after `mark` (in the scope that began there).
    pub(crate) fn declared_since(&self, name: &str, mark: usize) -> bool {
        self.lookup(name).is_some_and(|(pos, _)| pos >= mark)
    }
}

#[cfg(test)]
mod tests {
    use super::ScopedNames;

    #[test]
    fn inner_declarations_hide_outer_ones_until_their_scope_closes() {
        let mut n = ScopedNames::new();
        n.push("a", 1);
        n.push("b", 2);
        let mark = n.len();
        n.push("a", 3);
        assert_eq!(n.lookup("a"), Some((2, &3)));
        assert!(n.declared_since("a", mark));
        assert!(!n.declared_since("b", mark));
        n.truncate(mark);
        assert_eq!(n.lookup("a"), Some((0, &1)));
        assert_eq!(n.lookup("c"), None);
        n.truncate(0);
        assert_eq!(n.lookup("a"), None);
        assert_eq!(n.len(), 0);
    }
}
