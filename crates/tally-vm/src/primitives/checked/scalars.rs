//! Numbers, text, symbols and indices: each accessor checks the value's kind (immediate or
//! boxed) before decoding it. Immediates decode inline; boxed values and errors take a cold
//! path, so the interpreter's arithmetic fast paths stay a tag test.

use tally_heap::Value;

use crate::numbers::Int;
use crate::objects::Kind;
use crate::runtime::Symbol;
use crate::{Vm, VmError};

/// A numeric argument: an integer of any size or a double.
pub(crate) enum Operand {
    Int(Int),
    Double(f64),
}

impl Vm {
    /// An Integer (small or big).
    #[inline]
    pub(crate) fn int_arg(&self, v: Value) -> Result<Int, VmError> {
        self.int_of(v).ok_or_else(|| self.expected_int(v))
    }

    /// A small Integer (big ones do not fit the sizes and indices it is used for).
    #[inline]
    pub(crate) fn small_int_arg(&self, v: Value) -> Result<i64, VmError> {
        v.as_int().ok_or_else(|| self.expected_int(v))
    }

    /// A Double (immediate or boxed) that a Double primitive runs on.
    #[inline(always)]
    pub(crate) fn double_arg(&self, v: Value) -> Result<f64, VmError> {
        match v.as_small_float() {
            Some(d) => Ok(d),
            None => self.boxed_double_arg(v),
        }
    }

    #[cold]
    #[inline(never)]
    fn boxed_double_arg(&self, v: Value) -> Result<f64, VmError> {
        self.boxed_double_of(v).ok_or_else(|| {
            self.error(format!(
                "Expected object of type 'Double' but got type '{}'.",
                self.type_name(v)
            ))
        })
    }

    /// The argument of a Double primitive as a double. Small floats and small integers are
    /// decoded in place; boxed doubles, big integers and errors take the cold path.
    #[inline(always)]
    pub(crate) fn double_operand(&self, v: Value) -> Result<f64, VmError> {
        if let Some(d) = v.as_small_float() {
            return Ok(d);
        }
        if let Some(i) = v.as_int() {
            return Ok(i as f64);
        }
        self.boxed_double_operand(v)
    }

    #[cold]
    #[inline(never)]
    fn boxed_double_operand(&self, v: Value) -> Result<f64, VmError> {
        match self.numeric_operand(v)? {
            Operand::Double(d) => Ok(d),
            Operand::Int(i) => self.int_to_double(&i),
        }
    }

    /// The other operand of an arithmetic primitive. Immediates (small integers, small
    /// floats) are decoded without touching the heap.
    #[inline]
    pub(crate) fn numeric_operand(&self, v: Value) -> Result<Operand, VmError> {
        if let Some(i) = v.as_int() {
            return Ok(Operand::Int(Int::Small(i)));
        }
        if let Some(d) = v.as_small_float() {
            return Ok(Operand::Double(d));
        }
        self.boxed_numeric_operand(v)
    }

    #[inline(never)]
    fn boxed_numeric_operand(&self, v: Value) -> Result<Operand, VmError> {
        if let Some(i) = self.int_of(v) {
            return Ok(Operand::Int(i));
        }
        if let Some(d) = self.boxed_double_of(v) {
            return Ok(Operand::Double(d));
        }
        Err(self.error(format!(
            "Expected a numeric type but got type '{}'.",
            self.type_name(v)
        )))
    }

    /// A Symbol.
    #[inline]
    pub(crate) fn symbol_arg(&self, v: Value) -> Result<Symbol, VmError> {
        v.as_symbol().ok_or_else(|| self.expected_symbol(v))
    }

    /// The characters of a String or Symbol without copying. The slice points into the heap
    /// (or the symbol table): use it before the next allocation.
    #[inline]
    pub(crate) fn text_arg(&self, v: Value) -> Result<&[u8], VmError> {
        self.text_slice(v).ok_or_else(|| self.expected_string(v))
    }

    /// The characters of a String or Symbol, copied: valid across allocation.
    pub(crate) fn text_arg_owned(&self, v: Value) -> Result<Vec<u8>, VmError> {
        self.text_arg(v).map(<[u8]>::to_vec)
    }

    /// The text of a String or Symbol as a Rust string (invalid UTF-8 replaced).
    pub(crate) fn text_arg_string(&self, v: Value) -> Result<String, VmError> {
        self.text_arg(v)
            .map(|b| String::from_utf8_lossy(b).into_owned())
    }

    /// The characters of a String or Symbol, or None for any other value (for primitives
    /// such as `=` whose answer for other kinds is simply false).
    #[inline]
    pub(crate) fn text_slice(&self, v: Value) -> Option<&[u8]> {
        if let Some(s) = v.as_symbol() {
            return Some(self.rt.symbols.name(s).as_bytes());
        }
        if v.is_ref() && Kind::from_u8(v.kind()).is_string() {
            return Some(&v.bytes()[..v.byte_len()]);
        }
        None
    }

    /// The text of a String or Symbol as a Rust string (invalid UTF-8 replaced).
    pub(crate) fn text_of(&self, v: Value) -> Option<String> {
        self.text_slice(v)
            .map(|b| String::from_utf8_lossy(b).into_owned())
    }

    /// Whether the character indices of a String or Symbol are its byte indices.
    #[inline]
    pub(crate) fn is_ascii_text(&self, v: Value) -> bool {
        if let Some(s) = v.as_symbol() {
            return self.rt.symbols.name(s).is_ascii();
        }
        v.is_ref() && Kind::from_u8(v.kind()) == Kind::AsciiString
    }

    /// A 1-based index into something of length `len`, answered 0-based, or the error SOM
    /// VMs report.
    #[inline]
    pub(crate) fn index_arg(&self, v: Value, len: usize, what: &str) -> Result<usize, VmError> {
        let i = self.small_int_arg(v)?;
        if i < 0 {
            return Err(self.error("Can't represent as unsigned machine integer."));
        }
        if i == 0 || i as usize > len {
            return Err(self.error(format!("Index {i} not valid for {what} of length {len}.")));
        }
        Ok(i as usize - 1)
    }

    /// A non-negative size, such as the length of a new Array.
    pub(crate) fn size_arg(&self, v: Value) -> Result<usize, VmError> {
        let n = self.small_int_arg(v)?;
        usize::try_from(n).map_err(|_| self.error("Can't represent as unsigned machine integer."))
    }

    // The wording of these errors follows other SOM VMs (the SOM integration tests check it).

    #[cold]
    #[inline(never)]
    pub(crate) fn expected_int(&self, v: Value) -> VmError {
        self.error(format!(
            "Expected object of type 'Int' but got type '{}'.",
            self.type_name(v)
        ))
    }

    #[cold]
    #[inline(never)]
    pub(crate) fn expected_symbol(&self, v: Value) -> VmError {
        let class = self.rt.class_name(self.rt.class_of(v));
        self.error(format!(
            "Expected instance of 'Symbol' but got instance of '{class}'."
        ))
    }

    #[cold]
    #[inline(never)]
    pub(crate) fn expected_string(&self, v: Value) -> VmError {
        self.error(format!(
            "Expected object of type 'String_' but got type '{}'.",
            self.type_name(v)
        ))
    }
}
