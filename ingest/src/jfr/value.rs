//! Generic values: any event or constant decoded from its metadata description, with
//! constant-pool references left unresolved (pools may refer to each other and to entries
//! written later in the chunk).

use super::cursor::{Cursor, RawString, invalid};
use super::metadata::{Field, Kind, Metadata};
use crate::convert::ConvertError;

#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Value {
    Null,
    Bool(bool),
    Int(i64),
    Float(f64),
    Str(String),
    /// A key into the constant pool of `type_id`; `at` is where the reference was read.
    Ref {
        type_id: i64,
        key: i64,
        at: usize,
    },
    Array(Vec<Value>),
    Object {
        type_id: i64,
        fields: Vec<Value>,
    },
}

impl Value {
    pub(super) fn as_int(&self) -> Option<i64> {
        match self {
            Value::Int(v) => Some(*v),
            Value::Bool(b) => Some(i64::from(*b)),
            Value::Float(f) => Some(*f as i64),
            _ => None,
        }
    }

    /// The named field of an object, per its class's metadata.
    pub(super) fn field<'v>(&'v self, meta: &Metadata, name: &str) -> Option<&'v Value> {
        let Value::Object { type_id, fields } = self else {
            return None;
        };
        let i = meta.classes.get(type_id)?.field_index(name)?;
        fields.get(i)
    }
}

/// Real types nest a handful of levels; a forged metadata cycle must not exhaust the stack.
const MAX_DEPTH: usize = 32;

/// One value of class `type_id` stored inline (not a pool reference, not an array).
pub(crate) fn read(
    meta: &Metadata,
    cur: &mut Cursor<'_>,
    type_id: i64,
    depth: usize,
) -> Result<Value, ConvertError> {
    let at = cur.pos();
    if depth > MAX_DEPTH {
        return Err(invalid(at, "values nested too deep"));
    }
    let class = meta.class(type_id, at)?;
    Ok(match class.kind {
        Kind::Boolean => Value::Bool(cur.u8()? != 0),
        Kind::Byte => Value::Int(i64::from(cur.u8()? as i8)),
        Kind::Char | Kind::Short => Value::Int(i64::from(cur.short()?)),
        Kind::Int => Value::Int(i64::from(cur.int()?)),
        Kind::Long => Value::Int(cur.long()?),
        Kind::Float => Value::Float(f64::from(cur.f32()?)),
        Kind::Double => Value::Float(cur.f64()?),
        Kind::String => match cur.string()? {
            RawString::Null => Value::Null,
            RawString::Text(s) => Value::Str(s),
            RawString::Pool(key) => Value::Ref { type_id, key, at },
        },
        Kind::Object => {
            let mut fields = Vec::with_capacity(class.fields.len());
            for field in &class.fields {
                fields.push(read_field(meta, cur, field, depth + 1)?);
            }
            Value::Object { type_id, fields }
        }
    })
}

pub(crate) fn read_field(
    meta: &Metadata,
    cur: &mut Cursor<'_>,
    field: &Field,
    depth: usize,
) -> Result<Value, ConvertError> {
    let one = |cur: &mut Cursor<'_>| -> Result<Value, ConvertError> {
        if field.constant_pool {
            let at = cur.pos();
            Ok(Value::Ref {
                type_id: field.type_id,
                key: cur.long()?,
                at,
            })
        } else {
            read(meta, cur, field.type_id, depth)
        }
    };
    if !field.array {
        return one(cur);
    }
    let n = cur.count("array element", 1)?;
    let mut items = Vec::with_capacity(n);
    for _ in 0..n {
        items.push(one(cur)?);
    }
    Ok(Value::Array(items))
}

/// Moves past one inline value of class `type_id` without building it.
pub(crate) fn skip(
    meta: &Metadata,
    cur: &mut Cursor<'_>,
    type_id: i64,
    depth: usize,
) -> Result<(), ConvertError> {
    let at = cur.pos();
    if depth > MAX_DEPTH {
        return Err(invalid(at, "values nested too deep"));
    }
    let class = meta.class(type_id, at)?;
    match class.kind {
        Kind::Boolean | Kind::Byte => cur.u8().map(drop),
        Kind::Char | Kind::Short => cur.short().map(drop),
        Kind::Int => cur.int().map(drop),
        Kind::Long => cur.long().map(drop),
        Kind::Float => cur.f32().map(drop),
        Kind::Double => cur.f64().map(drop),
        Kind::String => cur.skip_string(),
        Kind::Object => {
            for field in &class.fields {
                let n = if field.array {
                    cur.count("array element", 1)?
                } else {
                    1
                };
                for _ in 0..n {
                    if field.constant_pool {
                        cur.long()?;
                    } else {
                        skip(meta, cur, field.type_id, depth + 1)?;
                    }
                }
            }
            Ok(())
        }
    }
}
