//! Type feedback of a binary send site: what its operands have been, for the optimizing
//! tier's speculation on small integers or on doubles.

use tally_heap::Value;

use crate::runtime::ClassId;

/// The kinds of operand pairs a binary send site has seen in the interpreter (compiled code
/// records nothing). Two small integers cost the fast path one test once recorded.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct OperandKinds(u8);

/// A pair other than two small integers with a small-integer result has come.
const NOT_TWO_INTS: u8 = 1;
/// Two small integers came (with a small-integer result or not).
const INT_PAIR: u8 = 1 << 1;
/// A pair that is neither two small integers nor a double with a double or small integer.
const OTHER: u8 = 1 << 2;
/// In a pair of numbers with a double: the receiver was a small integer.
const RECEIVER_INT: u8 = 1 << 3;
/// In a pair of numbers with a double: the argument was a small integer.
const ARGUMENT_INT: u8 = 1 << 4;

/// Which operands of a site that has only seen doubles (each with a double or a small
/// integer) were small integers: compiled code converts those and guards the others.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DoubleOperands {
    pub receiver_may_be_int: bool,
    pub argument_may_be_int: bool,
}

impl OperandKinds {
    /// Only two small integers with a small-integer result so far (or nothing).
    #[inline(always)]
    pub fn only_small_ints(self) -> bool {
        self.0 & NOT_TWO_INTS == 0
    }

    /// Records two small integers whose answer the fast path gave.
    #[inline(always)]
    pub fn note_small_ints(&mut self) {
        if self.0 & INT_PAIR == 0 {
            self.0 |= INT_PAIR;
        }
    }

    /// Records a pair the small-integer fast path did not answer: `a` and `b` (a boxed
    /// double is an object of class `double`), or two small integers that overflowed. Out
    /// of line: the interpreter's dispatch loop keeps only the call.
    #[inline(never)]
    pub fn note_other(&mut self, a: Value, b: Value, double: ClassId) {
        let is_double = |v: Value| v.is_small_float() || (v.is_ref() && v.class_id() == double);
        self.0 |= NOT_TWO_INTS;
        let (da, db) = (is_double(a), is_double(b));
        if a.is_int() && b.is_int() {
            self.0 |= INT_PAIR;
        } else if (da || a.is_int()) && (db || b.is_int()) {
            if a.is_int() {
                self.0 |= RECEIVER_INT;
            }
            if b.is_int() {
                self.0 |= ARGUMENT_INT;
            }
        } else {
            self.0 |= OTHER;
        }
    }

    /// The operands, when every pair so far had a double and each operand was a double or
    /// a small integer, and never both small integers (whose answer is an Integer): the
    /// site computes on doubles.
    pub fn only_doubles(self) -> Option<DoubleOperands> {
        let only = self.0 & NOT_TWO_INTS != 0 && self.0 & (INT_PAIR | OTHER) == 0;
        let kinds = DoubleOperands {
            receiver_may_be_int: self.0 & RECEIVER_INT != 0,
            argument_may_be_int: self.0 & ARGUMENT_INT != 0,
        };
        // Both may be integers: one pair of two integers would need an Integer answer.
        (only && !(kinds.receiver_may_be_int && kinds.argument_may_be_int)).then_some(kinds)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const DOUBLE: ClassId = 7;

    fn float(d: f64) -> Value {
        Value::from_small_float(d).expect("an immediate double")
    }

    #[test]
    fn small_integers_alone_keep_small_integer_speculation() {
        let mut k = OperandKinds::default();
        k.note_small_ints();
        assert!(k.only_small_ints());
        assert_eq!(k.only_doubles(), None);
    }

    #[test]
    fn small_integers_before_doubles_end_double_speculation() {
        let mut k = OperandKinds::default();
        k.note_small_ints();
        k.note_other(float(0.5), float(0.5), DOUBLE);
        assert!(!k.only_small_ints());
        assert_eq!(k.only_doubles(), None);
    }

    #[test]
    fn doubles_with_integers_name_the_integer_side() {
        let mut k = OperandKinds::default();
        k.note_other(float(1.5), float(2.5), DOUBLE);
        assert_eq!(
            k.only_doubles(),
            Some(DoubleOperands {
                receiver_may_be_int: false,
                argument_may_be_int: false
            })
        );
        k.note_other(float(1.5), Value::from_small_int(3), DOUBLE);
        assert_eq!(
            k.only_doubles(),
            Some(DoubleOperands {
                receiver_may_be_int: false,
                argument_may_be_int: true
            })
        );
        assert!(!k.only_small_ints());
    }

    #[test]
    fn integers_on_both_sides_or_other_values_end_double_speculation() {
        let mut k = OperandKinds::default();
        k.note_other(Value::from_small_int(2), float(0.5), DOUBLE);
        k.note_other(float(0.5), Value::from_small_int(2), DOUBLE);
        assert_eq!(k.only_doubles(), None);

        let mut k = OperandKinds::default();
        k.note_other(float(0.5), float(0.5), DOUBLE);
        k.note_small_ints();
        assert_eq!(k.only_doubles(), None, "two integers after doubles");

        let mut k = OperandKinds::default();
        k.note_other(float(0.5), Value::NIL, DOUBLE);
        assert_eq!(k.only_doubles(), None);

        let mut k = OperandKinds::default();
        k.note_other(Value::from_small_int(1), Value::from_small_int(2), DOUBLE);
        assert_eq!(k.only_doubles(), None, "an overflow");
    }
}
