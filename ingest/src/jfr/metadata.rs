//! The metadata event: the type system of one chunk. Events and constant pools are decoded
//! from these descriptions (field order, types, constant-pool references, arrays), never
//! from hard-coded layouts, so JDK and async-profiler recordings read the same way.

use std::collections::HashMap;

use super::cursor::{Cursor, RawString, invalid};
use crate::convert::ConvertError;

/// How a value of a class is encoded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    Boolean,
    Byte,
    Char,
    Short,
    Int,
    Long,
    Float,
    Double,
    String,
    /// Its fields, in order.
    Object,
}

#[derive(Clone, Debug)]
pub(crate) struct Field {
    pub name: String,
    pub type_id: i64,
    /// Stored as a key into the constant pool of `type_id`.
    pub constant_pool: bool,
    pub array: bool,
    /// The value of a `jdk.jfr.Timestamp` or `jdk.jfr.Timespan` annotation (`TICKS`,
    /// `NANOSECONDS`, ...), if any.
    pub time_unit: Option<String>,
}

#[derive(Clone, Debug)]
pub(crate) struct Class {
    pub name: String,
    pub kind: Kind,
    pub fields: Vec<Field>,
}

impl Class {
    pub(super) fn field_index(&self, name: &str) -> Option<usize> {
        self.fields.iter().position(|f| f.name == name)
    }
}

#[derive(Debug, Default)]
pub(crate) struct Metadata {
    pub classes: HashMap<i64, Class>,
}

impl Metadata {
    pub(super) fn class(&self, id: i64, at: usize) -> Result<&Class, ConvertError> {
        self.classes
            .get(&id)
            .ok_or_else(|| invalid(at, format!("type id {id} is not described by the metadata")))
    }
}

/// One node of the metadata's element tree.
struct Element {
    name: String,
    attributes: Vec<(String, String)>,
    children: Vec<Element>,
    offset: usize,
}

impl Element {
    fn attr(&self, key: &str) -> Option<&str> {
        self.attributes
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }
}

/// The real tree is four levels deep (root, metadata, class, field, annotation).
const MAX_DEPTH: usize = 16;

/// Parses the metadata event that starts at `cur`'s position.
pub(crate) fn read(mut cur: Cursor<'_>) -> Result<Metadata, ConvertError> {
    let start = cur.pos();
    let size = cur.int()?;
    let end = usize::try_from(size)
        .ok()
        .and_then(|s| start.checked_add(s))
        .filter(|&e| e <= cur.end() && size > 0)
        .ok_or_else(|| {
            invalid(
                start,
                format!("metadata event size {size} does not fit in its chunk"),
            )
        })?;
    let mut cur = cur.region(cur.pos(), end);
    let type_at = cur.pos();
    let type_id = cur.long()?;
    if type_id != 0 {
        return Err(invalid(
            type_at,
            format!("metadata event has type {type_id}, expected 0"),
        ));
    }
    for _ in 0..3 {
        cur.long()?; // start time, duration, metadata id
    }
    let n = cur.count("metadata string", 1)?;
    let mut strings = Vec::with_capacity(n);
    for _ in 0..n {
        let at = cur.pos();
        strings.push(match cur.string()? {
            RawString::Null => String::new(),
            RawString::Text(s) => s,
            RawString::Pool(_) => return Err(invalid(at, "metadata string refers to a constant pool")),
        });
    }
    let root = element(&mut cur, &strings, 0)?;
    classes(&root)
}

fn element(cur: &mut Cursor<'_>, strings: &[String], depth: usize) -> Result<Element, ConvertError> {
    let offset = cur.pos();
    if depth > MAX_DEPTH {
        return Err(invalid(offset, "metadata elements nested too deep"));
    }
    let string = |cur: &mut Cursor<'_>| -> Result<String, ConvertError> {
        let at = cur.pos();
        let i = cur.int()?;
        usize::try_from(i)
            .ok()
            .and_then(|i| strings.get(i))
            .cloned()
            .ok_or_else(|| invalid(at, format!("metadata string index {i} out of range")))
    };
    let name = string(cur)?;
    let n = cur.count("metadata attribute", 2)?;
    let mut attributes = Vec::with_capacity(n);
    for _ in 0..n {
        attributes.push((string(cur)?, string(cur)?));
    }
    let n = cur.count("metadata element", 3)?;
    let mut children = Vec::with_capacity(n);
    for _ in 0..n {
        children.push(element(cur, strings, depth + 1)?);
    }
    Ok(Element {
        name,
        attributes,
        children,
        offset,
    })
}

/// A field's annotations as (annotation class id, value).
type Annotations = Vec<(i64, String)>;

fn classes(root: &Element) -> Result<Metadata, ConvertError> {
    let mut meta = Metadata::default();
    let elements = root
        .children
        .iter()
        .filter(|e| e.name == "metadata")
        .flat_map(|m| &m.children)
        .filter(|e| e.name == "class");
    // Annotations name their class by id, so names are resolved once all classes are known.
    let mut pending: Vec<(i64, Vec<Annotations>)> = Vec::new();
    for class in elements {
        let id = number(class, "id")?;
        let name = class.attr("name").unwrap_or_default().to_string();
        let mut fields = Vec::new();
        let mut units = Vec::new();
        for f in class.children.iter().filter(|e| e.name == "field") {
            fields.push(Field {
                name: f.attr("name").unwrap_or_default().to_string(),
                type_id: number(f, "class")?,
                constant_pool: f.attr("constantPool") == Some("true"),
                array: f.attr("dimension").is_some_and(|d| d != "0"),
                time_unit: None,
            });
            let annotations = f
                .children
                .iter()
                .filter(|a| a.name == "annotation")
                .filter_map(|a| {
                    let class = a.attr("class")?.parse::<i64>().ok()?;
                    Some((class, a.attr("value")?.to_string()))
                });
            units.push(annotations.collect());
        }
        let kind = kind_of(&name, fields.is_empty());
        pending.push((id, units));
        meta.classes.insert(id, Class { name, kind, fields });
    }
    let time_annotations: Vec<i64> = meta
        .classes
        .iter()
        .filter(|(_, c)| c.name == "jdk.jfr.Timestamp" || c.name == "jdk.jfr.Timespan")
        .map(|(&id, _)| id)
        .collect();
    for (id, units) in pending {
        if let Some(class) = meta.classes.get_mut(&id) {
            for (field, annotations) in class.fields.iter_mut().zip(units) {
                field.time_unit = annotations
                    .into_iter()
                    .find(|(c, _)| time_annotations.contains(c))
                    .map(|(_, v)| v);
            }
        }
    }
    Ok(meta)
}

fn number(e: &Element, key: &str) -> Result<i64, ConvertError> {
    let v = e.attr(key).unwrap_or_default();
    v.parse().map_err(|_| {
        invalid(
            e.offset,
            format!("metadata {} has {key} {v:?}, not a number", e.name),
        )
    })
}

fn kind_of(name: &str, no_fields: bool) -> Kind {
    if !no_fields {
        return Kind::Object;
    }
    match name {
        "boolean" => Kind::Boolean,
        "byte" => Kind::Byte,
        "char" => Kind::Char,
        "short" => Kind::Short,
        "int" => Kind::Int,
        "long" => Kind::Long,
        "float" => Kind::Float,
        "double" => Kind::Double,
        "java.lang.String" => Kind::String,
        _ => Kind::Object,
    }
}
