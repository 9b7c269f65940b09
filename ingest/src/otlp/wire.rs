//! The protobuf wire format read by hand, for what prost's generated decoders cannot do:
//! telling OTLP layouts apart field by field ([`super::layout`]) and decoding the
//! dictionary straight into flat tables ([`super::dictionary`]). Both run on every request,
//! so the readers are small, inlined and allocate only to describe an error.

use std::fmt;

use prost::encoding::{WireType, decode_varint};

#[derive(Debug)]
pub(crate) struct WireError(pub(crate) String);

impl fmt::Display for WireError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl From<prost::DecodeError> for WireError {
    fn from(e: prost::DecodeError) -> WireError {
        WireError(e.to_string())
    }
}

/// One field: number, wire type, the bytes after the key, and a length-delimited payload.
pub(crate) struct Field<'a> {
    pub(crate) number: u32,
    pub(crate) wire: WireType,
    pub(crate) value: &'a [u8],
    pub(crate) payload: &'a [u8],
}

/// Iterates the fields of one message body.
pub(crate) struct Fields<'a> {
    rest: &'a [u8],
}

impl<'a> Fields<'a> {
    fn next_field(&mut self) -> Result<Field<'a>, WireError> {
        let (number, wire) = key(&mut self.rest)?;
        let start = self.rest;
        let payload = match wire {
            WireType::LengthDelimited => len_delimited(&mut self.rest)?,
            _ => {
                skip(&mut self.rest, number, wire)?;
                &[][..]
            }
        };
        let value = &start[..start.len() - self.rest.len()];
        Ok(Field {
            number,
            wire,
            value,
            payload,
        })
    }
}

impl<'a> Iterator for Fields<'a> {
    type Item = Result<Field<'a>, WireError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.rest.is_empty() {
            return None;
        }
        let field = self.next_field();
        if field.is_err() {
            self.rest = &[];
        }
        Some(field)
    }
}

pub(crate) fn fields(body: &[u8]) -> Fields<'_> {
    Fields { rest: body }
}

/// One varint. Most are indices below 16384, one or two bytes each: those are read here,
/// inlined into every reader, and only longer ones call prost's decoder (the dictionary's
/// tens of thousands of varints per request, the stacks' location indices mostly two bytes
/// long, made that call a sixth of decoding).
#[inline(always)]
pub(crate) fn varint(buf: &mut &[u8]) -> Result<u64, WireError> {
    let bytes: &[u8] = buf;
    match bytes {
        [byte, rest @ ..] if *byte < 0x80 => {
            *buf = rest;
            Ok(u64::from(*byte))
        }
        [low, high, rest @ ..] if *high < 0x80 => {
            *buf = rest;
            Ok(u64::from(low & 0x7f) | (u64::from(*high) << 7))
        }
        _ => long_varint(buf),
    }
}

#[inline(never)]
fn long_varint(buf: &mut &[u8]) -> Result<u64, WireError> {
    Ok(decode_varint(buf)?)
}

/// Field number and wire type; field 0 and numbers beyond 2^29 - 1 are invalid. Keys of
/// fields 1 to 15 are one byte: read here, inlined, as every field of every entry starts
/// with one.
#[inline(always)]
pub(crate) fn key(buf: &mut &[u8]) -> Result<(u32, WireType), WireError> {
    let bytes: &[u8] = buf;
    if let [byte @ 0x08..=0x7f, rest @ ..] = bytes {
        let wire = match byte & 7 {
            0 => Some(WireType::Varint),
            1 => Some(WireType::SixtyFourBit),
            2 => Some(WireType::LengthDelimited),
            3 => Some(WireType::StartGroup),
            4 => Some(WireType::EndGroup),
            5 => Some(WireType::ThirtyTwoBit),
            _ => None,
        };
        if let Some(wire) = wire {
            *buf = rest;
            return Ok((u32::from(byte >> 3), wire));
        }
    }
    split_key(varint(buf)?)
}

#[inline]
fn split_key(key: u64) -> Result<(u32, WireType), WireError> {
    let number = u32::try_from(key >> 3)
        .ok()
        .filter(|&n| (1..=536_870_911).contains(&n))
        .ok_or_else(|| WireError(format!("invalid field number in key {key}")))?;
    let wire =
        WireType::try_from(key & 7).map_err(|_| WireError(format!("invalid wire type {}", key & 7)))?;
    Ok((number, wire))
}

#[inline]
pub(crate) fn take<'a>(rest: &mut &'a [u8], len: usize) -> Result<&'a [u8], WireError> {
    let Some((head, tail)) = rest.split_at_checked(len) else {
        return Err(WireError("buffer underflow".into()));
    };
    *rest = tail;
    Ok(head)
}

/// The payload of a length-delimited field whose key was read.
#[inline]
pub(crate) fn len_delimited<'a>(rest: &mut &'a [u8]) -> Result<&'a [u8], WireError> {
    let len = varint(rest)?;
    take(rest, usize::try_from(len).unwrap_or(usize::MAX))
}

/// Skips the value of field `number` whose key was read, a group included.
#[inline]
pub(crate) fn skip(rest: &mut &[u8], number: u32, wire: WireType) -> Result<(), WireError> {
    match wire {
        WireType::Varint => varint(rest).map(drop),
        WireType::SixtyFourBit => take(rest, 8).map(drop),
        WireType::ThirtyTwoBit => take(rest, 4).map(drop),
        WireType::LengthDelimited => len_delimited(rest).map(drop),
        WireType::StartGroup => skip_group(rest, number, 0),
        WireType::EndGroup => Err(WireError(format!("unexpected end of group {number}"))),
    }
}

fn skip_group(rest: &mut &[u8], number: u32, depth: u32) -> Result<(), WireError> {
    if depth > 100 {
        return Err(WireError("groups nested too deeply".into()));
    }
    loop {
        let (n, wire) = key(rest)?;
        match wire {
            WireType::EndGroup if n == number => return Ok(()),
            WireType::EndGroup => return Err(WireError(format!("end of group {n} inside group {number}"))),
            WireType::StartGroup => skip_group(rest, n, depth + 1)?,
            _ => skip(rest, n, wire)?,
        }
    }
}

/// Skips an unknown field; groups (deprecated, never sent by OTLP encoders) are left to
/// prost.
#[inline]
pub(crate) fn skip_field(buf: &mut &[u8], number: u32, wire: WireType) -> Result<(), WireError> {
    match wire {
        WireType::StartGroup | WireType::EndGroup => Err(unexpected(number, wire)),
        _ => skip(buf, number, wire),
    }
}

/// A known field with a wire type the flat decoders do not read; prost will say what is
/// wrong.
#[cold]
pub(crate) fn unexpected(number: u32, wire: WireType) -> WireError {
    WireError(format!("field {number} has wire type {wire:?}"))
}

/// A repeated varint field, packed or (as decoders must also accept) one varint per field,
/// each converted as prost converts it (`as i32`, `as i64`).
#[inline]
pub(crate) fn varints<T>(
    wire: WireType,
    buf: &mut &[u8],
    out: &mut Vec<T>,
    convert: fn(u64) -> T,
) -> Result<(), WireError> {
    match wire {
        WireType::Varint => out.push(convert(varint(buf)?)),
        WireType::LengthDelimited => {
            let mut packed = len_delimited(buf)?;
            // Every varint takes at least a byte: room for all of them at once.
            out.reserve(packed.len());
            while !packed.is_empty() {
                out.push(convert(varint(&mut packed)?));
            }
        }
        _ => return Err(unexpected(0, wire)),
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varints_of_every_length_read_as_prost_writes_them() {
        let values = [
            0,
            1,
            127,
            128,
            300,
            16_383,
            16_384,
            2_097_151,
            u64::from(u32::MAX),
            u64::MAX,
        ];
        for v in values {
            let mut bytes = Vec::new();
            prost::encoding::encode_varint(v, &mut bytes);
            bytes.push(0x2a);
            let mut buf = &bytes[..];
            assert_eq!(varint(&mut buf).unwrap(), v);
            assert_eq!(buf, &[0x2a], "{v}: exactly its own bytes are consumed");
        }
        // Keys: the one-byte ones read inline as the general reader reads them.
        for number in [1u32, 2, 15, 16, 2047, 536_870_911] {
            for wire in 0..8u64 {
                let mut bytes = Vec::new();
                prost::encoding::encode_varint(u64::from(number) << 3 | wire, &mut bytes);
                let expected = split_key(u64::from(number) << 3 | wire).map_err(|e| e.0);
                assert_eq!(key(&mut &bytes[..]).map_err(|e| e.0), expected, "{number}/{wire}");
            }
        }
        assert!(key(&mut &[0x02u8][..]).is_err(), "field 0");
        // Non-canonical (padded) and cut-off varints read as prost reads them.
        let mut padded: &[u8] = &[0x80, 0x00];
        assert_eq!(varint(&mut padded).unwrap(), 0);
        assert!(varint(&mut &[0x80u8][..]).is_err());
        assert!(varint(&mut &[0xffu8, 0xff][..]).is_err());
    }
}
