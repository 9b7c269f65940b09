//! A small independent reader of a recording's raw constant-pool keys, for what `jfr print`
//! cannot show: which chunk defines the stack trace or thread an event refers to. It
//! shares no code with `stackhouse-ingest`; it follows the chunk layout and the rule of
//! `../shared/reference/jfr-constant-pools.md` §3 that reproduces `jfr print`'s nulls:
//!
//! - each chunk's pools are read from all its checkpoint events;
//! - events are walked in byte order; each top-level constant-pool field of each event
//!   type has a one-entry memo (key → resolved value) that survives chunk boundaries and
//!   is emptied when a chunk's metadata id differs from the previous chunk's;
//! - a key equal to the memo's gives the memo's value, otherwise the value is the own
//!   chunk's constant (null when absent or 0) and becomes the memo.
//!
//! Alongside, [`Resolution::converter`] is what a converter that resolves a dangling key
//! in the latest earlier chunk defining it gets. Values are decoded into the JSON shape
//! `jfr print --json` writes (symbols flattened to their string), so the expected paths
//! are named by [`crate::jfr_reader`].

use std::collections::HashMap;

use serde_json::{Map, Value as Json};

const METADATA: i64 = 0;
const CHECKPOINT: i64 = 1;

/// A decoded value before references are followed.
#[derive(Clone, Debug)]
enum V {
    Int(i64),
    Float(f64),
    Str(Option<String>),
    Ref(i64, i64),
    Obj(i64, Vec<(String, V)>),
    Arr(Vec<V>),
}

impl V {
    fn field(&self, name: &str) -> Option<&V> {
        match self {
            V::Obj(_, fields) => fields.iter().find(|(n, _)| n == name).map(|(_, v)| v),
            _ => None,
        }
    }
}

struct Field {
    name: String,
    type_id: i64,
    pool: bool,
    array: bool,
}

struct Class {
    name: String,
    fields: Vec<Field>,
}

struct Reader<'a> {
    data: &'a [u8],
    pos: usize,
    compressed: bool,
}

impl Reader<'_> {
    fn u8(&mut self) -> u8 {
        let b = self.data[self.pos];
        self.pos += 1;
        b
    }

    fn fixed(&mut self, n: usize) -> i64 {
        let mut v = 0u64;
        for _ in 0..n {
            v = (v << 8) | u64::from(self.u8());
        }
        v as i64
    }

    fn varint(&mut self) -> i64 {
        let mut v = 0u64;
        for i in 0..9 {
            let b = self.u8();
            if i == 8 {
                return (v | (u64::from(b) << 56)) as i64;
            }
            v |= u64::from(b & 0x7f) << (7 * i);
            if b < 0x80 {
                break;
            }
        }
        v as i64
    }

    fn int(&mut self, size: usize) -> i64 {
        if self.compressed {
            self.varint()
        } else {
            self.fixed(size)
        }
    }

    fn string(&mut self) -> Option<String> {
        match self.u8() {
            0 => None,
            1 => Some(String::new()),
            3 | 5 => {
                let n = self.int(4) as usize;
                let bytes = &self.data[self.pos..self.pos + n];
                self.pos += n;
                Some(String::from_utf8_lossy(bytes).into_owned())
            }
            4 => {
                let n = self.int(4) as usize;
                let chars: Vec<u16> = (0..n).map(|_| self.int(2) as u16).collect();
                Some(String::from_utf16_lossy(&chars))
            }
            other => panic!("string encoding {other} at {}", self.pos),
        }
    }
}

/// One chunk: its classes, metadata id, header clock and pools.
struct Chunk {
    classes: HashMap<i64, Class>,
    metadata_id: i64,
    ticks_per_second: f64,
    pool: HashMap<(i64, i64), V>,
}

impl Chunk {
    fn value(&self, r: &mut Reader<'_>, type_id: i64) -> V {
        let class = &self.classes[&type_id];
        match class.name.as_str() {
            "boolean" | "byte" => V::Int(i64::from(r.u8())),
            "short" => V::Int(r.int(2)),
            "char" => V::Int(r.int(2)),
            "int" => V::Int(r.int(4)),
            "long" => V::Int(r.int(8)),
            "float" => V::Float(f64::from(f32::from_bits(r.fixed(4) as u32))),
            "double" => V::Float(f64::from_bits(r.fixed(8) as u64)),
            // Encoding 2 is a reference into the string pool.
            "java.lang.String" if r.data[r.pos] == 2 => {
                r.u8();
                V::Ref(type_id, r.int(8))
            }
            "java.lang.String" => V::Str(r.string()),
            _ => V::Obj(
                type_id,
                class
                    .fields
                    .iter()
                    .map(|f| (f.name.clone(), self.field(r, f)))
                    .collect(),
            ),
        }
    }

    fn field(&self, r: &mut Reader<'_>, f: &Field) -> V {
        let one = |r: &mut Reader<'_>| {
            if f.pool {
                V::Ref(f.type_id, r.int(8))
            } else {
                self.value(r, f.type_id)
            }
        };
        if f.array {
            let n = r.int(4);
            V::Arr((0..n).map(|_| one(r)).collect())
        } else {
            one(r)
        }
    }

    fn type_named(&self, name: &str) -> Option<i64> {
        self.classes
            .iter()
            .find(|(_, c)| c.name == name)
            .map(|(&id, _)| id)
    }

    /// A value as `jfr print --json` shows it: references followed (a missing one is
    /// null), symbols as their string.
    fn json(&self, v: &V, depth: usize) -> Json {
        assert!(depth < 64, "reference cycle");
        match v {
            V::Int(i) => Json::from(*i),
            V::Float(f) => Json::from(*f),
            V::Str(s) => s.clone().map_or(Json::Null, Json::String),
            V::Ref(ty, key) => match self.pool.get(&(*ty, *key)) {
                Some(v) => self.json(v, depth + 1),
                None => Json::Null,
            },
            V::Arr(items) => Json::Array(items.iter().map(|i| self.json(i, depth + 1)).collect()),
            V::Obj(ty, fields) if self.classes[ty].name == "jdk.types.Symbol" => {
                self.json(&fields[0].1, depth + 1)
            }
            V::Obj(_, fields) => Json::Object(
                fields
                    .iter()
                    .map(|(n, v)| (n.clone(), self.json(v, depth + 1)))
                    .collect::<Map<_, _>>(),
            ),
        }
    }
}

fn read_metadata(r: &mut Reader<'_>) -> (i64, HashMap<i64, Class>) {
    for _ in 0..2 {
        r.int(8); // start time, duration
    }
    let id = r.int(8);
    let n = r.int(4);
    let strings: Vec<String> = (0..n).map(|_| r.string().unwrap_or_default()).collect();
    struct El {
        name: String,
        attrs: HashMap<String, String>,
        children: Vec<El>,
    }
    fn element(r: &mut Reader<'_>, s: &[String]) -> El {
        let name = s[r.int(4) as usize].clone();
        let n = r.int(4);
        let attrs = (0..n)
            .map(|_| (s[r.int(4) as usize].clone(), s[r.int(4) as usize].clone()))
            .collect();
        let n = r.int(4);
        let children = (0..n).map(|_| element(r, s)).collect();
        El {
            name,
            attrs,
            children,
        }
    }
    let root = element(r, &strings);
    let mut classes = HashMap::new();
    for class in root
        .children
        .iter()
        .filter(|e| e.name == "metadata")
        .flat_map(|m| &m.children)
        .filter(|e| e.name == "class")
    {
        let fields = class
            .children
            .iter()
            .filter(|e| e.name == "field")
            .map(|f| Field {
                name: f.attrs["name"].clone(),
                type_id: f.attrs["class"].parse().expect("field class id"),
                pool: f.attrs.get("constantPool").is_some_and(|v| v == "true"),
                array: f.attrs.get("dimension").is_some_and(|v| v == "1"),
            })
            .collect();
        let id = class.attrs["id"].parse().expect("class id");
        let name = class.attrs["name"].clone();
        classes.insert(id, Class { name, fields });
    }
    (id, classes)
}

/// How one reference of an event resolves.
#[derive(Clone, Debug, Default)]
pub struct Resolution {
    /// What `jfr print` shows (memo, else own chunk), `Json::Null` when null.
    pub printed: Json,
    /// Own chunk, else the latest earlier chunk that defines the key; `Json::Null` when none.
    pub converter: Json,
    /// The key is not in the event's own chunk but an earlier chunk defines it.
    pub from_earlier_chunk: bool,
}

/// One event of a counted type, in byte order.
#[derive(Debug)]
pub struct RawEvent {
    pub type_name: String,
    pub stack: Resolution,
    /// `sampledThread`, else `eventThread`.
    pub thread: Resolution,
    /// Integer fields (`tlabSize`, `allocationSize`, `weight`, `samples`, `size`).
    pub ints: HashMap<String, i64>,
    /// `duration` converted from ticks as the JDK converts it.
    pub duration_nanos: i64,
}

/// Every event of the `types` named, with its stack and thread resolved both ways.
pub fn read(data: &[u8], types: &[&str]) -> Vec<RawEvent> {
    let mut chunks: Vec<Chunk> = Vec::new();
    let mut out = Vec::new();
    // (type name, field) → (key, printed value).
    let mut memo: HashMap<(String, String), (i64, Json)> = HashMap::new();
    let mut start = 0;
    while start < data.len() {
        let header = |i: usize| i64::from_be_bytes(data[start + i..start + i + 8].try_into().unwrap());
        assert_eq!(&data[start..start + 4], b"FLR\0", "chunk magic at {start}");
        let size = header(8) as usize;
        let metadata_at = start + header(24) as usize;
        let ticks_per_second = header(56) as f64;
        let compressed = data[start + 67] & 1 != 0;
        let end = start + size;
        let reader = |pos: usize| Reader {
            data: &data[..end],
            pos,
            compressed,
        };
        let mut r = reader(metadata_at);
        r.int(4); // size
        assert_eq!(r.int(8), METADATA);
        let (metadata_id, classes) = read_metadata(&mut r);
        let mut chunk = Chunk {
            classes,
            metadata_id,
            ticks_per_second,
            pool: HashMap::new(),
        };
        // Event bodies, after size and type, in byte order.
        let mut events = Vec::new();
        let mut pos = start + 68;
        while pos < end {
            let mut r = reader(pos);
            let size = r.int(4) as usize;
            let type_id = r.int(8);
            events.push((type_id, r.pos));
            pos += size;
        }
        for &(_, body) in events.iter().filter(|(t, _)| *t == CHECKPOINT) {
            let mut r = reader(body);
            for _ in 0..3 {
                r.int(8);
            }
            r.u8();
            for _ in 0..r.int(4) {
                let ty = r.int(8);
                for _ in 0..r.int(4) {
                    let key = r.int(8);
                    let v = chunk.value(&mut r, ty);
                    chunk.pool.insert((ty, key), v);
                }
            }
        }
        if chunks.last().is_none_or(|c| c.metadata_id != chunk.metadata_id) {
            memo.clear();
        }
        for &(type_id, body) in &events {
            if type_id == METADATA || type_id == CHECKPOINT {
                continue;
            }
            let Some(class) = chunk.classes.get(&type_id) else {
                continue;
            };
            if !types.contains(&class.name.as_str()) {
                continue;
            }
            let event = chunk.value(&mut reader(body), type_id);
            let mut resolve = |field: &str| -> Option<Resolution> {
                let Some(&V::Ref(ty, key)) = event.field(field) else {
                    return None;
                };
                let own = chunk.pool.get(&(ty, key)).map(|v| chunk.json(v, 0));
                let slot = (class.name.clone(), field.to_string());
                let printed = match memo.get(&slot) {
                    Some((k, v)) if *k == key => v.clone(),
                    _ => {
                        let v = own.clone().unwrap_or(Json::Null);
                        memo.insert(slot, (key, v.clone()));
                        v
                    }
                };
                let type_name = &chunk.classes[&ty].name;
                let earlier = || {
                    chunks.iter().rev().find_map(|c| {
                        let ty = c.type_named(type_name)?;
                        c.pool.get(&(ty, key)).map(|v| c.json(v, 0))
                    })
                };
                let (converter, from_earlier_chunk) = match own {
                    Some(v) => (v, false),
                    None if key == 0 => (Json::Null, false),
                    None => earlier().map_or((Json::Null, false), |v| (v, true)),
                };
                Some(Resolution {
                    printed,
                    converter,
                    from_earlier_chunk,
                })
            };
            let stack = resolve("stackTrace").unwrap_or_default();
            let thread = resolve("sampledThread")
                .or_else(|| resolve("eventThread"))
                .unwrap_or_default();
            let mut ints = HashMap::new();
            if let V::Obj(_, fields) = &event {
                for (name, v) in fields {
                    if let V::Int(i) = v {
                        ints.insert(name.clone(), *i);
                    }
                }
            }
            let ticks = ints.get("duration").copied().unwrap_or(0);
            // `jdk.jfr.internal.consumer.TimeConverter.convertTimespan`.
            let duration_nanos = (ticks as f64 / (chunk.ticks_per_second / 1_000_000_000.0)) as i64;
            out.push(RawEvent {
                type_name: class.name.clone(),
                stack,
                thread,
                ints,
                duration_nanos,
            });
        }
        chunks.push(chunk);
        start = end;
    }
    out
}
