//! Bounded reads of JFR's primitive encodings. Every read checks the region's end and
//! reports the absolute byte offset in the (decompressed) input, so a malformed recording
//! becomes an error that says where it broke, never a panic or a huge allocation.

use crate::convert::ConvertError;

pub(crate) fn invalid(offset: usize, message: impl std::fmt::Display) -> ConvertError {
    ConvertError::invalid("jfr", format!("{message} at byte offset {offset}"))
}

/// A string field as stored: JFR strings may be inline or references into the
/// `java.lang.String` constant pool.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum RawString {
    Null,
    Text(String),
    Pool(i64),
}

#[derive(Clone, Copy)]
pub(crate) struct Cursor<'a> {
    data: &'a [u8],
    pos: usize,
    end: usize,
    /// Integers as LEB128 varints (the chunk header's feature bit) instead of big endian.
    compressed: bool,
}

impl<'a> Cursor<'a> {
    /// Reads `data[pos..end]`; `end` is clamped to the data.
    pub(super) fn new(data: &'a [u8], pos: usize, end: usize, compressed: bool) -> Cursor<'a> {
        let end = end.min(data.len());
        Cursor {
            data,
            pos: pos.min(end),
            end,
            compressed,
        }
    }

    pub(super) fn pos(&self) -> usize {
        self.pos
    }

    pub(super) fn end(&self) -> usize {
        self.end
    }

    pub(super) fn remaining(&self) -> usize {
        self.end - self.pos
    }

    /// The same data from `pos` up to `end` (both absolute, clamped to this cursor's end).
    pub(super) fn region(&self, pos: usize, end: usize) -> Cursor<'a> {
        Cursor::new(self.data, pos, end.min(self.end), self.compressed)
    }

    pub(super) fn bytes(&mut self, n: usize) -> Result<&'a [u8], ConvertError> {
        if n > self.remaining() {
            return Err(invalid(
                self.pos,
                format!("truncated data: {n} bytes needed, {} left", self.remaining()),
            ));
        }
        let s = &self.data[self.pos..self.pos + n];
        self.pos += n;
        Ok(s)
    }

    pub(super) fn u8(&mut self) -> Result<u8, ConvertError> {
        Ok(self.bytes(1)?[0])
    }

    fn fixed<const N: usize>(&mut self) -> Result<[u8; N], ConvertError> {
        let mut out = [0u8; N];
        out.copy_from_slice(self.bytes(N)?);
        Ok(out)
    }

    /// JFR's varint: 7 bits per byte, least significant first, the ninth byte holds 8 bits,
    /// so a 64-bit value never needs more than nine bytes.
    pub(super) fn varlong(&mut self) -> Result<u64, ConvertError> {
        let start = self.pos;
        let mut value = 0u64;
        for i in 0..9 {
            let b = self.u8().map_err(|_| invalid(start, "truncated varint"))?;
            if i == 8 {
                return Ok(value | (u64::from(b) << 56));
            }
            value |= u64::from(b & 0x7f) << (7 * i);
            if b & 0x80 == 0 {
                return Ok(value);
            }
        }
        unreachable!("the loop returns by its ninth byte")
    }

    pub(super) fn long(&mut self) -> Result<i64, ConvertError> {
        if self.compressed {
            Ok(self.varlong()? as i64)
        } else {
            Ok(i64::from_be_bytes(self.fixed::<8>()?))
        }
    }

    /// Compressed ints are varlongs truncated to 32 bits, as the JDK reads them.
    pub(super) fn int(&mut self) -> Result<i32, ConvertError> {
        if self.compressed {
            Ok(self.varlong()? as i32)
        } else {
            Ok(i32::from_be_bytes(self.fixed::<4>()?))
        }
    }

    pub(super) fn short(&mut self) -> Result<i16, ConvertError> {
        if self.compressed {
            Ok(self.varlong()? as i16)
        } else {
            Ok(i16::from_be_bytes(self.fixed::<2>()?))
        }
    }

    pub(super) fn f32(&mut self) -> Result<f32, ConvertError> {
        Ok(f32::from_be_bytes(self.fixed::<4>()?))
    }

    pub(super) fn f64(&mut self) -> Result<f64, ConvertError> {
        Ok(f64::from_be_bytes(self.fixed::<8>()?))
    }

    /// A count of items that take at least `min_size` bytes each (at least one byte is
    /// assumed), refused when the rest of the region could not hold them: this is what
    /// keeps a forged count from allocating more than the input's size.
    pub(super) fn count(&mut self, what: &str, min_size: usize) -> Result<usize, ConvertError> {
        let at = self.pos;
        let n = self.int()?;
        let fits = usize::try_from(n)
            .ok()
            .filter(|&n| n.saturating_mul(min_size.max(1)) <= self.remaining());
        fits.ok_or_else(|| {
            invalid(
                at,
                format!(
                    "{what} count {n} does not fit in the {} bytes left",
                    self.remaining()
                ),
            )
        })
    }

    pub(super) fn string(&mut self) -> Result<RawString, ConvertError> {
        let at = self.pos;
        match self.u8()? {
            0 => Ok(RawString::Null),
            1 => Ok(RawString::Text(String::new())),
            2 => Ok(RawString::Pool(self.long()?)),
            3 => {
                let n = self.count("string byte", 1)?;
                Ok(RawString::Text(
                    String::from_utf8_lossy(self.bytes(n)?).into_owned(),
                ))
            }
            4 => {
                let n = self.count("string char", 1)?;
                let mut units = Vec::with_capacity(n);
                for _ in 0..n {
                    units.push(self.short()? as u16);
                }
                Ok(RawString::Text(String::from_utf16_lossy(&units)))
            }
            5 => {
                let n = self.count("string byte", 1)?;
                Ok(RawString::Text(
                    self.bytes(n)?.iter().map(|&b| char::from(b)).collect(),
                ))
            }
            other => Err(invalid(at, format!("unknown string encoding {other}"))),
        }
    }

    pub(super) fn skip_string(&mut self) -> Result<(), ConvertError> {
        let at = self.pos;
        match self.u8()? {
            0 | 1 => Ok(()),
            2 => self.long().map(drop),
            3 | 5 => {
                let n = self.count("string byte", 1)?;
                self.bytes(n).map(drop)
            }
            4 => {
                let n = self.count("string char", 1)?;
                (0..n).try_for_each(|_| self.short().map(drop))
            }
            other => Err(invalid(at, format!("unknown string encoding {other}"))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varints_and_fixed_ints() {
        let data = [0x96, 0x01, 0xff, 0xff, 0xff, 0xff, 0x0f, 0, 0, 0, 7];
        let mut c = Cursor::new(&data, 0, data.len(), true);
        assert_eq!(c.long().unwrap(), 150);
        assert_eq!(c.int().unwrap(), -1);
        let mut c = Cursor::new(&data, 7, data.len(), false);
        assert_eq!(c.int().unwrap(), 7);
        let nine = [0xff; 9];
        assert_eq!(Cursor::new(&nine, 0, 9, true).varlong().unwrap(), u64::MAX);
    }

    #[test]
    fn truncation_and_counts_name_the_offset() {
        let data = [0x80, 0x80];
        let e = Cursor::new(&data, 0, 2, true).varlong().unwrap_err().to_string();
        assert!(e.contains("truncated varint at byte offset 0"), "{e}");
        let data = [5, 1, 2];
        let e = Cursor::new(&data, 0, 3, true)
            .count("frame", 1)
            .unwrap_err()
            .to_string();
        assert!(e.contains("frame count 5 does not fit"), "{e}");
        let data = [3, 4, b'a'];
        assert!(Cursor::new(&data, 0, 3, true).string().is_err());
    }

    #[test]
    fn strings() {
        let data = [3, 2, b'h', b'i', 4, 1, 0x41, 5, 1, 0xe9, 2, 7, 0, 1];
        let mut c = Cursor::new(&data, 0, data.len(), true);
        assert_eq!(c.string().unwrap(), RawString::Text("hi".into()));
        assert_eq!(c.string().unwrap(), RawString::Text("A".into()));
        assert_eq!(c.string().unwrap(), RawString::Text("é".into()));
        assert_eq!(c.string().unwrap(), RawString::Pool(7));
        assert_eq!(c.string().unwrap(), RawString::Null);
        assert_eq!(c.string().unwrap(), RawString::Text(String::new()));
    }
}
