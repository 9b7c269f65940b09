//! Chunks: the 68-byte header, the metadata it points to, the constant pools (checkpoint
//! events) and the events in between. A recording is one or more chunks back to back.

use std::collections::HashMap;
use std::rc::Rc;

use super::cursor::{Cursor, invalid};
use super::metadata::{self, Metadata};
use super::value::{self, Value};
use crate::convert::ConvertError;

pub(crate) const HEADER_SIZE: usize = 68;
const MAGIC: &[u8; 4] = b"FLR\0";
const METADATA_EVENT: i64 = 0;
const CHECKPOINT_EVENT: i64 = 1;

#[derive(Clone, Copy, Debug)]
pub(crate) struct Header {
    /// Absolute offset of the chunk in the input.
    pub start: usize,
    pub size: usize,
    pub start_nanos: i64,
    pub duration_nanos: i64,
    pub start_ticks: i64,
    pub ticks_per_second: i64,
    pub compressed: bool,
}

impl Header {
    pub(super) fn read(data: &[u8], start: usize) -> Result<(Header, usize, usize), ConvertError> {
        let left = data.len() - start;
        if left < HEADER_SIZE {
            return Err(invalid(
                start,
                format!("truncated chunk header ({left} of {HEADER_SIZE} bytes)"),
            ));
        }
        let h = &data[start..start + HEADER_SIZE];
        if &h[0..4] != MAGIC {
            return Err(invalid(
                start,
                "bad magic: not a flight recording chunk (expected \"FLR\\0\")",
            ));
        }
        let u64_at = |i: usize| u64::from_be_bytes(h[i..i + 8].try_into().expect("8 bytes"));
        let major = u16::from_be_bytes([h[4], h[5]]);
        let minor = u16::from_be_bytes([h[6], h[7]]);
        if major != 2 {
            return Err(invalid(
                start + 4,
                format!("unsupported format version {major}.{minor} (only 2.x is supported)"),
            ));
        }
        let size = u64_at(8);
        if size < HEADER_SIZE as u64 || size > left as u64 {
            return Err(invalid(
                start + 8,
                format!("chunk size {size} does not fit in the {left} bytes left (truncated recording?)"),
            ));
        }
        let size = size as usize;
        let offset = |i: usize, what: &str| -> Result<usize, ConvertError> {
            let v = u64_at(i);
            if v < HEADER_SIZE as u64 || v >= size as u64 {
                return Err(invalid(
                    start + i,
                    format!("{what} offset {v} is outside the chunk of {size} bytes"),
                ));
            }
            Ok(start + v as usize)
        };
        let constant_pool = offset(16, "constant pool")?;
        let metadata = offset(24, "metadata")?;
        let ticks_per_second = u64_at(56) as i64;
        if ticks_per_second <= 0 {
            return Err(invalid(
                start + 56,
                format!("ticks per second {ticks_per_second} is not positive"),
            ));
        }
        let header = Header {
            start,
            size,
            start_nanos: u64_at(32) as i64,
            duration_nanos: u64_at(40) as i64,
            start_ticks: u64_at(48) as i64,
            ticks_per_second,
            compressed: h[67] & 1 != 0,
        };
        Ok((header, constant_pool, metadata))
    }

    pub(super) fn end(&self) -> usize {
        self.start + self.size
    }

    /// Computed as the JDK does (`jdk.jfr.internal.consumer.TimeConverter`), so that
    /// timestamps agree with `jfr print` to the nanosecond.
    pub(super) fn ticks_to_unix_nanos(&self, ticks: i64) -> i64 {
        self.start_nanos
            .saturating_add(self.ticks_to_nanos(ticks.wrapping_sub(self.start_ticks)))
    }

    pub(super) fn ticks_to_nanos(&self, ticks: i64) -> i64 {
        let divisor = self.ticks_per_second as f64 / 1_000_000_000.0;
        (ticks as f64 / divisor) as i64
    }
}

/// One event's body, after its size and type.
pub(crate) struct Event<'a> {
    pub type_id: i64,
    pub offset: usize,
    pub body: Cursor<'a>,
}

/// Where a constant's value is: from its start to the end of its checkpoint event, read
/// with the metadata and integer encoding of its chunk.
#[derive(Clone)]
struct Constant {
    start: usize,
    end: usize,
    meta: Rc<Metadata>,
    compressed: bool,
}

pub(crate) struct Chunk<'a> {
    pub header: Header,
    pub meta: Rc<Metadata>,
    data: &'a [u8],
    /// (type id, key) → constant.
    pool: HashMap<(i64, i64), Constant>,
}

impl<'a> Chunk<'a> {
    /// Keys resolve in their own chunk only, as in the JDK's parser (which merely reuses an
    /// earlier chunk's object for a key it sees again); the converter alone looks an
    /// event's dangling stack or thread up in earlier chunks ([`Chunk::translate`]).
    pub(super) fn read(data: &'a [u8], start: usize) -> Result<Chunk<'a>, ConvertError> {
        let (header, _, metadata_at) = Header::read(data, start)?;
        let all = Cursor::new(data, header.start, header.end(), header.compressed);
        let meta = Rc::new(metadata::read(all.region(metadata_at, header.end()))?);
        let mut chunk = Chunk {
            header,
            meta,
            data,
            pool: HashMap::new(),
        };
        // Every checkpoint event is indexed (rather than following the `delta` chain from
        // the header), so forged deltas cannot loop and flushed pools are all seen.
        let mut checkpoints = Vec::new();
        chunk.events(|e| {
            if e.type_id == CHECKPOINT_EVENT {
                checkpoints.push((e.offset, e.body));
            }
            Ok(())
        })?;
        for (_, body) in checkpoints {
            chunk.index_checkpoint(body)?;
        }
        Ok(chunk)
    }

    fn cursor(&self, pos: usize, end: usize) -> Cursor<'a> {
        Cursor::new(self.data, pos, end, self.header.compressed)
    }

    /// Calls `f` for every event of the chunk, metadata and checkpoints included.
    pub(super) fn events(
        &self,
        mut f: impl FnMut(Event<'a>) -> Result<(), ConvertError>,
    ) -> Result<(), ConvertError> {
        let end = self.header.end();
        let mut pos = self.header.start + HEADER_SIZE;
        while pos < end {
            let mut cur = self.cursor(pos, end);
            let size = cur.int()?;
            let event_end = usize::try_from(size)
                .ok()
                .filter(|&s| s > 0)
                .and_then(|s| pos.checked_add(s))
                .filter(|&e| e <= end)
                .ok_or_else(|| {
                    invalid(
                        pos,
                        format!(
                            "event size {size} does not fit in the {} bytes left in the chunk",
                            end - pos
                        ),
                    )
                })?;
            let mut cur = self.cursor(cur.pos(), event_end);
            let type_id = cur.long()?;
            f(Event {
                type_id,
                offset: pos,
                body: cur,
            })?;
            pos = event_end;
        }
        Ok(())
    }

    fn index_checkpoint(&mut self, mut cur: Cursor<'a>) -> Result<(), ConvertError> {
        for _ in 0..3 {
            cur.long()?; // start time, duration, delta to the previous checkpoint
        }
        cur.u8()?; // flush / type mask
        let pools = cur.count("constant pool", 2)?;
        for _ in 0..pools {
            let at = cur.pos();
            let type_id = cur.long()?;
            self.meta.class(type_id, at)?;
            let n = cur.count("constant", 1)?;
            for _ in 0..n {
                let key = cur.long()?;
                let start = cur.pos();
                value::skip(&self.meta, &mut cur, type_id, 0)?;
                let constant = Constant {
                    start,
                    end: cur.end(),
                    meta: Rc::clone(&self.meta),
                    compressed: self.header.compressed,
                };
                self.pool.insert((type_id, key), constant);
            }
        }
        Ok(())
    }

    /// Decodes an event's fields (its class from the metadata); `None` for types the
    /// metadata does not describe and for the metadata and checkpoint events themselves.
    pub(super) fn decode(&self, event: &Event<'a>) -> Result<Option<Value>, ConvertError> {
        if event.type_id == METADATA_EVENT || event.type_id == CHECKPOINT_EVENT {
            return Ok(None);
        }
        if !self.meta.classes.contains_key(&event.type_id) {
            return Ok(None);
        }
        let mut body = event.body;
        value::read(&self.meta, &mut body, event.type_id, 0).map(Some)
    }

    /// Follows a constant-pool reference (other values are returned as they are). Key 0
    /// without an entry is JFR's null; any other missing key is an error.
    pub(super) fn resolve(&self, v: &Value) -> Result<Value, ConvertError> {
        let Value::Ref { type_id, key, at } = *v else {
            return Ok(v.clone());
        };
        match self.pool.get(&(type_id, key)) {
            Some(c) => {
                let mut cur = Cursor::new(self.data, c.start, c.end, c.compressed);
                value::read(&c.meta, &mut cur, type_id, 0)
            }
            None if key == 0 => Ok(Value::Null),
            None => {
                let class = self.meta.classes.get(&type_id).map_or("?", |c| c.name.as_str());
                Err(invalid(
                    at,
                    format!("reference to missing constant {key} of {class}"),
                ))
            }
        }
    }

    /// Like [`Chunk::resolve`], with a missing constant as null: the JDK writes events whose
    /// thread or stack trace is not in their chunk's pools (`jfr print` shows null).
    pub(super) fn resolve_or_null(&self, v: &Value) -> Result<Value, ConvertError> {
        match v {
            Value::Ref { type_id, key, .. } if !self.pool.contains_key(&(*type_id, *key)) => Ok(Value::Null),
            _ => self.resolve(v),
        }
    }

    /// Whether `v` resolves here: not a reference, key 0 (null), or a key in this chunk's
    /// pools.
    pub(super) fn defines(&self, v: &Value) -> bool {
        match *v {
            Value::Ref { type_id, key, .. } => key == 0 || self.pool.contains_key(&(type_id, key)),
            _ => true,
        }
    }

    /// `v`, a reference made in chunk `from`, as a reference into this chunk if this
    /// chunk's pools hold its key (type ids are per chunk: the type is matched by name).
    pub(super) fn translate(&self, from: &Chunk<'_>, v: &Value) -> Option<Value> {
        let Value::Ref { type_id, key, at } = *v else {
            return None;
        };
        let name = &from.meta.classes.get(&type_id)?.name;
        let (&type_id, _) = self.meta.classes.iter().find(|(_, c)| &c.name == name)?;
        self.pool
            .contains_key(&(type_id, key))
            .then_some(Value::Ref { type_id, key, at })
    }

    /// A string field, resolving `java.lang.String` pool references and symbols (a
    /// one-field object such as `jdk.types.Symbol`); `None` for null.
    pub(super) fn text(&self, v: &Value) -> Result<Option<String>, ConvertError> {
        let mut v = self.resolve(v)?;
        // Symbol → String → pool entry: a short chain; more means a forged cycle.
        for _ in 0..4 {
            match v {
                Value::Null => return Ok(None),
                Value::Str(s) => return Ok(Some(s)),
                Value::Object { ref fields, .. } if fields.len() == 1 => v = self.resolve(&fields[0])?,
                Value::Ref { .. } => v = self.resolve(&v)?,
                _ => return Ok(None),
            }
        }
        Ok(None)
    }
}
