//! The payload encoding: LEB128 varints, zigzag for signed deltas,
//! length-prefixed UTF-8 strings. Compact (most ids and deltas are one or
//! two bytes) and simple enough that the reader can check every byte.

pub struct Enc {
    pub buf: Vec<u8>,
}

impl Enc {
    pub fn new() -> Enc {
        Enc { buf: Vec::new() }
    }

    pub fn u8(&mut self, v: u8) {
        self.buf.push(v);
    }

    pub fn uv(&mut self, mut v: u64) {
        while v >= 0x80 {
            self.buf.push((v as u8) | 0x80);
            v >>= 7;
        }
        self.buf.push(v as u8);
    }

    pub fn iv(&mut self, v: i64) {
        self.uv(((v << 1) ^ (v >> 63)) as u64);
    }

    pub fn str(&mut self, s: &str) {
        self.uv(s.len() as u64);
        self.buf.extend_from_slice(s.as_bytes());
    }

    pub fn bool(&mut self, b: bool) {
        self.u8(b as u8);
    }
}

/// A checked cursor. Errors are plain reasons; the caller adds where.
pub struct Dec<'a> {
    buf: &'a [u8],
    pos: usize,
}

pub type R<T> = Result<T, String>;

impl<'a> Dec<'a> {
    pub fn new(buf: &'a [u8]) -> Dec<'a> {
        Dec { buf, pos: 0 }
    }

    pub fn remaining(&self) -> usize {
        self.buf.len() - self.pos
    }

    pub fn u8(&mut self) -> R<u8> {
        let b = *self
            .buf
            .get(self.pos)
            .ok_or_else(|| "payload ends early".to_string())?;
        self.pos += 1;
        Ok(b)
    }

    pub fn uv(&mut self) -> R<u64> {
        let mut v = 0u64;
        for shift in (0..64).step_by(7) {
            let b = self.u8()?;
            if shift == 63 && b > 1 {
                return Err("varint overflows 64 bits".into());
            }
            v |= u64::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                return Ok(v);
            }
        }
        Err("varint longer than 10 bytes".into())
    }

    pub fn u32(&mut self) -> R<u32> {
        let v = self.uv()?;
        u32::try_from(v).map_err(|_| format!("value {v} does not fit 32 bits"))
    }

    pub fn iv(&mut self) -> R<i64> {
        let v = self.uv()?;
        Ok(((v >> 1) as i64) ^ -((v & 1) as i64))
    }

    pub fn i32(&mut self) -> R<i32> {
        let v = self.iv()?;
        i32::try_from(v).map_err(|_| format!("value {v} does not fit 32 bits"))
    }

    pub fn bool(&mut self) -> R<bool> {
        match self.u8()? {
            0 => Ok(false),
            1 => Ok(true),
            b => Err(format!("invalid boolean {b}")),
        }
    }

    /// A count of items that take at least `min_item_bytes` each, checked
    /// against what is left so a corrupt count cannot make us allocate.
    pub fn count(&mut self, min_item_bytes: usize) -> R<usize> {
        let n = self.uv()?;
        if n.saturating_mul(min_item_bytes.max(1) as u64) > self.remaining() as u64 {
            return Err(format!("count {n} exceeds the payload"));
        }
        Ok(n as usize)
    }

    pub fn str(&mut self) -> R<String> {
        let n = self.count(1)?;
        let bytes = &self.buf[self.pos..self.pos + n];
        self.pos += n;
        String::from_utf8(bytes.to_vec()).map_err(|_| "string is not UTF-8".to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_round_trip() {
        let mut e = Enc::new();
        for v in [0u64, 1, 127, 128, 300, u64::MAX] {
            e.uv(v);
        }
        for v in [0i64, -1, 1, i64::MIN, i64::MAX] {
            e.iv(v);
        }
        e.str("Foo>>bar ü");
        let mut d = Dec::new(&e.buf);
        for v in [0u64, 1, 127, 128, 300, u64::MAX] {
            assert_eq!(d.uv().unwrap(), v);
        }
        for v in [0i64, -1, 1, i64::MIN, i64::MAX] {
            assert_eq!(d.iv().unwrap(), v);
        }
        assert_eq!(d.str().unwrap(), "Foo>>bar ü");
        assert_eq!(d.remaining(), 0);
        assert!(d.u8().is_err());
    }

    #[test]
    fn bad_input_is_rejected_not_trusted() {
        assert!(Dec::new(&[0xff; 11]).uv().is_err());
        assert!(Dec::new(&[0x80]).uv().is_err());
        assert!(Dec::new(&[0xff, 0xff, 0xff, 0xff, 0x0f]).count(1).is_err());
        assert!(Dec::new(&[2, 0xc3, 0x28]).str().is_err());
    }
}
