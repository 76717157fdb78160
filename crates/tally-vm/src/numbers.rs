//! Numbers: small integers are immediates, larger ones heap big integers; doubles are
//! immediate small floats when their exponent allows (`Value::from_small_float`: zeros and
//! magnitudes of about 5.9e-39 to 6.8e38) and heap boxes otherwise (infinities, NaN,
//! subnormals, huge and tiny magnitudes). Every integer result goes through `int_result` and
//! every double through `new_double`, so a value that fits an immediate is always one:
//! equality of numbers never depends on representation.

use num_bigint::{BigInt, Sign};
use num_traits::ToPrimitive;
use tally_heap::Value;

use crate::objects::Kind;
use crate::{Vm, VmError};

/// An integer operand, whichever way it is stored.
#[derive(Debug, Clone)]
pub enum Int {
    Small(i64),
    Big(BigInt),
}

impl Int {
    pub fn to_big(&self) -> BigInt {
        match self {
            Int::Small(i) => BigInt::from(*i),
            Int::Big(b) => b.clone(),
        }
    }
}

/// SOM prints doubles in the shortest form that reads back to the same value, switching to
/// exponent notation for very large and very small magnitudes, as other SOM VMs do.
pub fn format_double(d: f64) -> String {
    if d.is_nan() {
        return "NaN".into();
    }
    if d.is_infinite() {
        return if d > 0.0 {
            "Infinity".into()
        } else {
            "-Infinity".into()
        };
    }
    let a = d.abs();
    if a != 0.0 && !(1e-4..1e16).contains(&a) {
        let s = format!("{d:e}");
        // Rust writes `1e16`; SOM VMs write a mantissa with a fraction: `1.0e16`.
        match s.split_once('e') {
            Some((m, e)) if !m.contains('.') => format!("{m}.0e{e}"),
            _ => s,
        }
    } else {
        let s = format!("{d}");
        if s.contains('.') {
            s
        } else {
            format!("{s}.0")
        }
    }
}

impl Vm {
    /// A Double: immediate when it can be (no allocation), otherwise a heap box.
    #[inline]
    pub(crate) fn new_double(&mut self, d: f64) -> Result<Value, VmError> {
        match Value::from_small_float(d) {
            Some(v) => Ok(v),
            None => self.new_boxed_double(d),
        }
    }

    #[cold]
    #[inline(never)]
    fn new_boxed_double(&mut self, d: f64) -> Result<Value, VmError> {
        let v = self.alloc(self.rt.core.double, Kind::Double, 0, Value::NIL, 8)?;
        v.bytes_mut().copy_from_slice(&d.to_le_bytes());
        Ok(v)
    }

    /// The value of a Double, immediate or boxed.
    #[inline]
    pub(crate) fn double_of(&self, v: Value) -> Option<f64> {
        if let Some(d) = v.as_small_float() {
            return Some(d);
        }
        self.boxed_double_of(v)
    }

    /// The value of a heap-boxed Double.
    #[inline]
    pub(crate) fn boxed_double_of(&self, v: Value) -> Option<f64> {
        if v.is_ref() && Kind::from_u8(v.kind()) == Kind::Double {
            let b: [u8; 8] = v.bytes()[..8].try_into().ok()?;
            Some(f64::from_le_bytes(b))
        } else {
            None
        }
    }

    pub(crate) fn new_bigint(&mut self, b: &BigInt) -> Result<Value, VmError> {
        let (sign, digits) = b.to_u32_digits();
        let v = self.alloc(
            self.rt.core.integer,
            Kind::BigInt,
            0,
            Value::NIL,
            1 + 4 * digits.len(),
        )?;
        let bytes = v.bytes_mut();
        bytes[0] = (sign == Sign::Minus) as u8;
        for (i, d) in digits.iter().enumerate() {
            bytes[1 + 4 * i..5 + 4 * i].copy_from_slice(&d.to_le_bytes());
        }
        Ok(v)
    }

    pub(crate) fn int_of(&self, v: Value) -> Option<Int> {
        if let Some(i) = v.as_int() {
            return Some(Int::Small(i));
        }
        if v.is_ref() && Kind::from_u8(v.kind()) == Kind::BigInt {
            let bytes = v.bytes();
            let n = (bytes.len() - 1) / 4;
            let digits: Vec<u32> = (0..n)
                .map(|i| {
                    u32::from_le_bytes(bytes[1 + 4 * i..5 + 4 * i].try_into().expect("4 bytes"))
                })
                .collect();
            let sign = if bytes[0] == 1 {
                Sign::Minus
            } else {
                Sign::Plus
            };
            let b = BigInt::from_slice(sign, &digits);
            return Some(Int::Big(b));
        }
        None
    }

    /// The canonical value of an integer result: immediate when it fits.
    pub(crate) fn int_result(&mut self, b: BigInt) -> Result<Value, VmError> {
        if let Some(v) = b.to_i64().and_then(Value::from_int) {
            return Ok(v);
        }
        self.new_bigint(&b)
    }

    pub(crate) fn i64_result(&mut self, i: i64) -> Result<Value, VmError> {
        match Value::from_int(i) {
            Some(v) => Ok(v),
            None => self.new_bigint(&BigInt::from(i)),
        }
    }

    pub(crate) fn new_string(&mut self, s: &[u8]) -> Result<Value, VmError> {
        let kind = if s.is_ascii() {
            Kind::AsciiString
        } else {
            Kind::String
        };
        let v = self.alloc(self.rt.core.string, kind, 0, Value::NIL, s.len())?;
        v.bytes_mut()[..s.len()].copy_from_slice(s);
        Ok(v)
    }
}

#[cfg(test)]
mod tests {
    use super::format_double;

    #[test]
    fn doubles_print_like_other_som_vms() {
        assert_eq!(format_double(1.0), "1.0");
        assert_eq!(format_double(1.1), "1.1");
        assert_eq!(format_double(100000.19879879123), "100000.19879879123");
        assert_eq!(format_double(1152921504606846976.0), "1.152921504606847e18");
        assert_eq!(format_double(0.1 + 0.2), "0.30000000000000004");
        assert_eq!(
            format_double(9.334522916791713e-61),
            "9.334522916791713e-61"
        );
        assert_eq!(
            format_double(-1.8446744073709552e19),
            "-1.8446744073709552e19"
        );
        assert_eq!(format_double(1e16), "1.0e16");
        assert_eq!(format_double(0.0), "0.0");
        assert_eq!(format_double(f64::NAN), "NaN");
    }
}
