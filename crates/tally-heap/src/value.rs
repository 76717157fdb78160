//! The one-word value every SOM slot holds.
//!
//! Encoding (low bits):
//! - `…1`   small integer, 63-bit two's complement in the upper bits;
//! - `…000` (non-zero) reference to a heap object: the address of its header;
//! - `…010` symbol: the interned symbol's id in the upper bits;
//! - `…100` special constant: nil, true, false;
//! - `…110` small float: a double whose exponent lies in a window around 1 (see below);
//! - `0`    never a SOM value: marks "no value" in VM-internal slots.
//!
//! Immediates keep the common cases (integers, symbols, booleans, most doubles) out of the
//! heap, and the GC needs only one test (`is_ref`) to find the pointers.
//!
//! ## Small floats
//!
//! An IEEE double is sign (1 bit), biased exponent (11) and mantissa (52). Rotating the word
//! left by one puts the sign at the bottom: `exponent | mantissa | sign`. A small float keeps
//! that rotated word with the exponent rebased by [`SMALL_FLOAT_EXP_BASE`], so that only 8
//! exponent bits remain, and stores it in the 61 bits above the tag. The window is the 256
//! biased exponents `896..=1151`, i.e. magnitudes in `[2^-127, 2^129)` (about `5.9e-39` to
//! `6.8e38`), the range of single floats. The rebased payloads 0 and 1 (exponent 896, mantissa
//! 0) stand for `+0.0` and `-0.0`, so the two doubles `±2^-127` themselves are left boxed.
//! Everything else (infinities, NaNs, subnormals, magnitudes outside the window) is a boxed
//! heap Double. Decoding is exact: a small float reads back to the very same bits.

use std::fmt;

#[derive(Clone, Copy, PartialEq, Eq, Hash)]
#[repr(transparent)]
pub struct Value(pub u64);

// SAFETY: a `Value` is one `u64`; all-zero is `Value::NONE`, a valid value.
unsafe impl bytemuck::Zeroable for Value {}

const INT_TAG: u64 = 0b1;
const TAG_MASK: u64 = 0b111;
const SYMBOL_TAG: u64 = 0b010;
const SPECIAL_TAG: u64 = 0b100;
const FLOAT_TAG: u64 = 0b110;

/// Bits of the IEEE double mantissa.
const MANTISSA_BITS: u32 = 52;
/// The smallest biased exponent of the small-float window (`1023 - 127`).
pub const SMALL_FLOAT_EXP_BASE: u64 = 896;
/// The number of exponents in the window (8 bits' worth).
pub const SMALL_FLOAT_EXP_COUNT: u64 = 256;
/// `SMALL_FLOAT_EXP_BASE` where it sits in a rotated double (above mantissa and sign).
const ROTATED_EXP_OFFSET: u64 = SMALL_FLOAT_EXP_BASE << (MANTISSA_BITS + 1);
/// Rebased rotated payloads must be below this: 8 exponent bits, mantissa and sign.
const PAYLOAD_LIMIT: u64 = SMALL_FLOAT_EXP_COUNT << (MANTISSA_BITS + 1);

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

    /// The immediate encoding of `d`, when it has one (see the module docs for which doubles
    /// do). Decoding the result gives back exactly the bits of `d`.
    #[inline(always)]
    pub fn from_small_float(d: f64) -> Option<Value> {
        let rotated = d.to_bits().rotate_left(1);
        // ±0.0 rotate to 0 and 1, which are also their payloads.
        let payload = if rotated <= 1 {
            rotated
        } else {
            let p = rotated.wrapping_sub(ROTATED_EXP_OFFSET);
            // Outside the window, or ±2^-127, whose payloads 0 and 1 belong to the zeros.
            if p.wrapping_sub(2) >= PAYLOAD_LIMIT - 2 {
                return None;
            }
            p
        };
        Some(Value((payload << 3) | FLOAT_TAG))
    }

    #[inline(always)]
    pub fn is_small_float(self) -> bool {
        self.0 & TAG_MASK == FLOAT_TAG
    }

    #[inline(always)]
    pub fn as_small_float(self) -> Option<f64> {
        if self.is_small_float() {
            Some(self.small_float_unchecked())
        } else {
            None
        }
    }

    /// Callers guarantee `is_small_float()`.
    #[inline(always)]
    pub fn small_float_unchecked(self) -> f64 {
        debug_assert!(self.is_small_float());
        let payload = self.0 >> 3;
        let rotated = if payload <= 1 {
            payload
        } else {
            payload + ROTATED_EXP_OFFSET
        };
        f64::from_bits(rotated.rotate_right(1))
    }
}

impl fmt::Debug for Value {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(i) = self.as_int() {
            write!(f, "Int({i})")
        } else if let Some(d) = self.as_small_float() {
            write!(f, "Float({d:?})")
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
        for v in [
            Value::NIL,
            Value::from_symbol(7),
            Value::from_small_int(3),
            Value(0x1000),
        ] {
            assert!(!v.is_small_float(), "{v:?}");
            assert_eq!(v.as_small_float(), None);
        }
    }

    const MANTISSA_MASK: u64 = (1 << 52) - 1;
    const SIGN: u64 = 1 << 63;

    /// A double from its fields: sign, biased exponent, mantissa.
    fn double(negative: bool, exponent: u64, mantissa: u64) -> f64 {
        assert!(exponent < 2048 && mantissa <= MANTISSA_MASK);
        f64::from_bits(((negative as u64) << 63) | (exponent << 52) | mantissa)
    }

    /// Which doubles must be small floats, stated from the fields rather than the encoder's
    /// arithmetic: the zeros, and every exponent in 896..=1151 except the two values ±2^-127.
    fn should_encode(d: f64) -> bool {
        let bits = d.to_bits();
        let (exponent, mantissa) = ((bits >> 52) & 0x7ff, bits & MANTISSA_MASK);
        if exponent == 0 {
            return mantissa == 0;
        }
        (896..=1151).contains(&exponent) && !(exponent == 896 && mantissa == 0)
    }

    /// Checks everything about one double: that it encodes exactly when it should, that the
    /// word is a small float and nothing else, and that it reads back bit for bit.
    fn check(d: f64) {
        let v = Value::from_small_float(d);
        assert_eq!(
            v.is_some(),
            should_encode(d),
            "{d:e} ({:#018x})",
            d.to_bits()
        );
        let Some(v) = v else { return };
        assert!(v.is_small_float(), "{d:e}");
        assert_eq!(v.0 & TAG_MASK, FLOAT_TAG);
        assert!(!v.is_ref() && !v.is_int() && !v.is_nil(), "{d:e}");
        assert_eq!(v.as_symbol(), None);
        assert_ne!(v, Value::NONE);
        let back = v.as_small_float().expect("a small float decodes");
        assert_eq!(back.to_bits(), d.to_bits(), "{d:e} read back as {back:e}");
        assert_eq!(v.small_float_unchecked().to_bits(), d.to_bits());
    }

    #[test]
    fn zeros_are_small_floats_and_keep_their_sign() {
        let pos = Value::from_small_float(0.0).unwrap();
        let neg = Value::from_small_float(-0.0).unwrap();
        assert_ne!(pos, neg);
        assert_eq!(pos.as_small_float().unwrap().to_bits(), 0.0f64.to_bits());
        assert_eq!(neg.as_small_float().unwrap().to_bits(), (-0.0f64).to_bits());
        assert!(neg.as_small_float().unwrap().is_sign_negative());
        check(0.0);
        check(-0.0);
    }

    #[test]
    fn ordinary_doubles_round_trip() {
        for d in [
            1.0,
            -1.0,
            -1.5,
            0.5,
            0.1,
            0.1 + 0.2,
            std::f64::consts::PI,
            -std::f64::consts::E,
            2.0,
            1e-30,
            -1e-30,
            1e30,
            -1e30,
            1e-38,
            1e38,
            -1e38,
            3.4e38,
            f32::MAX as f64,
            f32::MIN_POSITIVE as f64,
            123456789.125,
            4294967296.0,
            9007199254740993.0,
        ] {
            assert!(Value::from_small_float(d).is_some(), "{d:e}");
            check(d);
        }
    }

    #[test]
    fn special_and_extreme_doubles_stay_boxed() {
        for d in [
            f64::INFINITY,
            f64::NEG_INFINITY,
            f64::NAN,
            -f64::NAN,
            f64::from_bits(0x7ff0_0000_0000_0001), // signalling NaN
            f64::from_bits(0xfff8_dead_beef_0001), // negative NaN with a payload
            f64::MAX,
            f64::MIN,
            f64::MIN_POSITIVE,
            -f64::MIN_POSITIVE,
            f64::from_bits(1), // smallest subnormal
            -f64::from_bits(1),
            f64::from_bits(MANTISSA_MASK), // largest subnormal
            f64::EPSILON * f64::MIN_POSITIVE,
            1e39,
            -1e39,
            1e-39,
            1e300,
            1e-300,
            1e30 * 1e30,
            1e-30 / 1e30,
        ] {
            assert!(Value::from_small_float(d).is_none(), "{d:e}");
            check(d);
        }
    }

    #[test]
    fn window_edges() {
        for negative in [false, true] {
            // Smallest encodable magnitude: 2^-127 has the zeros' payload, so one ulp above it.
            let lowest = double(negative, 896, 1);
            assert!(Value::from_small_float(lowest).is_some());
            check(lowest);
            // ±2^-127 itself, and everything below the window.
            assert!(Value::from_small_float(double(negative, 896, 0)).is_none());
            assert!(Value::from_small_float(double(negative, 895, MANTISSA_MASK)).is_none());
            assert!(Value::from_small_float(double(negative, 895, 0)).is_none());
            // Bottom exponent with larger mantissas.
            check(double(negative, 896, 2));
            check(double(negative, 896, MANTISSA_MASK));
            // Largest encodable magnitude, just below 2^129, and one past it.
            let highest = double(negative, 1151, MANTISSA_MASK);
            assert!(Value::from_small_float(highest).is_some());
            check(highest);
            assert!(Value::from_small_float(double(negative, 1152, 0)).is_none());
            check(double(negative, 1151, 0));
            check(double(negative, 1152, 0));
        }
        assert_eq!(
            Value::from_small_float(double(false, 1151, MANTISSA_MASK))
                .unwrap()
                .as_small_float(),
            Some(f64::from_bits((1151 << 52) | MANTISSA_MASK))
        );
        assert!(Value::from_small_float(2f64.powi(128)).is_some());
        assert!(Value::from_small_float(2f64.powi(129)).is_none());
        assert!(Value::from_small_float(2f64.powi(-126)).is_some());
        assert!(Value::from_small_float(2f64.powi(-127)).is_none());
        assert!(Value::from_small_float(2f64.powi(-128)).is_none());
    }

    #[test]
    fn every_exponent_and_sign() {
        for exponent in 0..2048 {
            for mantissa in [
                0,
                1,
                2,
                0x8_0000_0000_0000,
                MANTISSA_MASK - 1,
                MANTISSA_MASK,
            ] {
                for negative in [false, true] {
                    check(double(negative, exponent, mantissa));
                }
            }
        }
    }

    #[test]
    fn encoding_keeps_distinct_doubles_distinct() {
        let ds = [0.0, -0.0, 1.0, -1.0, 1.5, -1.5, 2.0, 0.5, 1e-30, 1e30];
        for (i, a) in ds.iter().enumerate() {
            for (j, b) in ds.iter().enumerate() {
                let (va, vb) = (
                    Value::from_small_float(*a).unwrap(),
                    Value::from_small_float(*b).unwrap(),
                );
                assert_eq!(va == vb, i == j, "{a:e} vs {b:e}");
            }
        }
    }

    /// SplitMix64: a small deterministic generator, so failures reproduce.
    struct Rng(u64);

    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
            let mut z = self.0;
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            z ^ (z >> 31)
        }

        /// Uniform in [0, 1).
        fn unit(&mut self) -> f64 {
            (self.next() >> 11) as f64 / (1u64 << 53) as f64
        }
    }

    #[test]
    fn random_bit_patterns_round_trip() {
        let mut rng = Rng(0x5eed_f10a_7000_0001);
        for _ in 0..1_000_000 {
            check(f64::from_bits(rng.next()));
        }
        // Uniform bits rarely land in the window (1 in 8): also sample exponents near it.
        for _ in 0..1_000_000 {
            let bits = rng.next();
            let exponent = 880 + (bits >> 52) % 290;
            check(double(bits & SIGN != 0, exponent, bits & MANTISSA_MASK));
        }
    }

    #[test]
    fn every_magnitude_between_1e_minus_30_and_1e30_is_immediate() {
        let mut rng = Rng(42);
        for _ in 0..1_000_000 {
            let magnitude = 10f64.powf(rng.unit() * 60.0 - 30.0).clamp(1e-30, 1e30);
            let d = if rng.next() & 1 == 0 {
                magnitude
            } else {
                -magnitude
            };
            assert!(Value::from_small_float(d).is_some(), "{d:e}");
            check(d);
        }
        for d in [1e-30, 1e30, -1e-30, -1e30] {
            assert!(Value::from_small_float(d).is_some(), "{d:e}");
        }
    }

    #[test]
    fn debug_shows_small_floats() {
        assert_eq!(
            format!("{:?}", Value::from_small_float(1.5).unwrap()),
            "Float(1.5)"
        );
        assert_eq!(
            format!("{:?}", Value::from_small_float(-0.0).unwrap()),
            "Float(-0.0)"
        );
    }
}
