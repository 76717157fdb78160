//! The one-word value every SOM slot holds.
//!
//! Encoding (low bits):
//! - `…1`   small integer, 63-bit two's complement in the upper bits;
//! - `…000` (non-zero) reference to a heap object: the address of its header;
//! - `…010` symbol: the interned symbol's id in the upper bits;
//! - `…100` special constant: nil, true, false;
//! - `0`    never a SOM value: marks "no value" in VM-internal slots.
//!
//! Immediates keep the common cases (integers, symbols, booleans) out of the heap, and the GC
//! needs only one test (`is_ref`) to find the pointers.

use std::fmt;

#[derive(Clone, Copy, PartialEq, Eq, Hash)]
#[repr(transparent)]
pub struct Value(pub u64);

const INT_TAG: u64 = 0b1;
const TAG_MASK: u64 = 0b111;
const SYMBOL_TAG: u64 = 0b010;
const SPECIAL_TAG: u64 = 0b100;

impl Value {
    pub const NONE: Value = Value(0);
    pub const NIL: Value = Value(SPECIAL_TAG);
    pub const TRUE: Value = Value((1 << 3) | SPECIAL_TAG);
    pub const FALSE: Value = Value((2 << 3) | SPECIAL_TAG);

    /// Smallest and largest integers that fit the immediate encoding.
    pub const MIN_INT: i64 = i64::MIN >> 1;
    pub const MAX_INT: i64 = i64::MAX >> 1;

    #[inline(always)]
    pub fn from_int(i: i64) -> Option<Value> {
        if (Self::MIN_INT..=Self::MAX_INT).contains(&i) {
            Some(Value(((i << 1) as u64) | INT_TAG))
        } else {
            None
        }
    }

    /// Callers guarantee `MIN_INT <= i <= MAX_INT`.
    #[inline(always)]
    pub fn from_small_int(i: i64) -> Value {
        debug_assert!((Self::MIN_INT..=Self::MAX_INT).contains(&i));
        Value(((i << 1) as u64) | INT_TAG)
    }

    #[inline(always)]
    pub fn is_int(self) -> bool {
        self.0 & INT_TAG != 0
    }

    #[inline(always)]
    pub fn as_int(self) -> Option<i64> {
        if self.is_int() {
            Some((self.0 as i64) >> 1)
        } else {
            None
        }
    }

    /// Callers guarantee `is_int()`.
    #[inline(always)]
    pub fn int_unchecked(self) -> i64 {
        (self.0 as i64) >> 1
    }

    #[inline(always)]
    pub fn is_ref(self) -> bool {
        self.0 & TAG_MASK == 0 && self.0 != 0
    }

    #[inline(always)]
    pub fn from_symbol(id: u32) -> Value {
        Value(((id as u64) << 3) | SYMBOL_TAG)
    }

    #[inline(always)]
    pub fn as_symbol(self) -> Option<u32> {
        if self.0 & TAG_MASK == SYMBOL_TAG {
            Some((self.0 >> 3) as u32)
        } else {
            None
        }
    }

    #[inline(always)]
    pub fn from_bool(b: bool) -> Value {
        if b {
            Value::TRUE
        } else {
            Value::FALSE
        }
    }

    #[inline(always)]
    pub fn is_nil(self) -> bool {
        self == Value::NIL
    }

    pub fn bits(self) -> u64 {
        self.0
    }
}

impl fmt::Debug for Value {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(i) = self.as_int() {
            write!(f, "Int({i})")
        } else if let Some(s) = self.as_symbol() {
            write!(f, "Symbol#{s}")
        } else if *self == Value::NIL {
            f.write_str("nil")
        } else if *self == Value::TRUE {
            f.write_str("true")
        } else if *self == Value::FALSE {
            f.write_str("false")
        } else if *self == Value::NONE {
            f.write_str("NONE")
        } else {
            write!(f, "Ref({:#x})", self.0)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integers_round_trip_at_the_edges() {
        for i in [0, 1, -1, Value::MAX_INT, Value::MIN_INT, 42, -1 << 40] {
            let v = Value::from_int(i).unwrap();
            assert!(v.is_int() && !v.is_ref());
            assert_eq!(v.as_int(), Some(i));
        }
        assert!(Value::from_int(Value::MAX_INT + 1).is_none());
        assert!(Value::from_int(Value::MIN_INT - 1).is_none());
    }

    #[test]
    fn immediates_are_not_references() {
        for v in [
            Value::NIL,
            Value::TRUE,
            Value::FALSE,
            Value::from_symbol(7),
            Value::NONE,
        ] {
            assert!(!v.is_ref(), "{v:?}");
            assert!(!v.is_int(), "{v:?}");
        }
        assert_eq!(Value::from_symbol(7).as_symbol(), Some(7));
        assert!(Value(0x1000).is_ref());
    }
}
