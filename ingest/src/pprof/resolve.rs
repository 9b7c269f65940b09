//! Interning a pprof profile's samples into the request builder, resolving pprof ids on
//! the way; the special labels become links and profile ids here.

use super::decode::Decoded;
use super::labels::{self, Special};
use crate::convert::{ConvertError, FrameLine, MappingSpec, RequestBuilder};

/// A pprof sample in builder terms.
pub(crate) struct Resolved {
    pub stack: i32,
    pub attributes: Vec<i32>,
    pub link: i32,
    pub profile_id: Option<[u8; 16]>,
}

/// Interns the profile's functions, mappings and locations into the builder on first use.
pub(crate) struct Resolver<'a> {
    d: &'a Decoded,
    pub builder: &'a mut RequestBuilder,
    locations: Vec<Option<i32>>,
    functions: Vec<Option<i32>>,
    mappings: Vec<Option<i32>>,
}

impl<'a> Resolver<'a> {
    pub(super) fn new(d: &'a Decoded, builder: &'a mut RequestBuilder) -> Resolver<'a> {
        Resolver {
            d,
            builder,
            locations: vec![None; d.profile.location.len()],
            functions: vec![None; d.profile.function.len()],
            mappings: vec![None; d.profile.mapping.len()],
        }
    }

    pub(super) fn sample(&mut self, i: usize) -> Result<Resolved, ConvertError> {
        let d = self.d;
        let s = &d.profile.sample[i];
        let mut stack = Vec::with_capacity(s.location_id.len());
        // pprof location ids are leaf first, like OTLP stacks.
        for &id in &s.location_id {
            let li = d.location(i, id)?;
            stack.push(self.location(li)?);
        }
        let mut out = Resolved {
            stack: if stack.is_empty() {
                0
            } else {
                self.builder.stack(&stack)
            },
            attributes: Vec::with_capacity(s.label.len()),
            link: 0,
            profile_id: None,
        };
        let (mut trace, mut span): (Option<[u8; 16]>, Option<[u8; 8]>) = (None, None);
        for (k, l) in s.label.iter().enumerate() {
            let field = |f: &str| format!("sample {i}: label[{k}].{f}");
            let key = d.str(l.key, || field("key"))?;
            if l.str != 0 {
                let value = d.str(l.str, || field("str"))?;
                // A repeated special label keeps its first value; later ones stay attributes.
                match labels::special(key, value) {
                    Some(Special::Trace(id)) if trace.is_none() => trace = Some(id),
                    Some(Special::Span(id)) if span.is_none() => span = Some(id),
                    Some(Special::Profile(id)) if out.profile_id.is_none() => {
                        out.profile_id = Some(id).filter(|id| *id != [0; 16]);
                    }
                    _ => out.attributes.push(self.builder.attribute_str(key, value)),
                }
            } else {
                let unit = d.str(l.num_unit, || field("num_unit"))?;
                out.attributes.push(self.builder.attribute_int(key, l.num, unit));
            }
        }
        out.link = self.builder.link(
            trace.as_ref().map_or(&[][..], |t| &t[..]),
            span.as_ref().map_or(&[][..], |s| &s[..]),
        );
        Ok(out)
    }

    fn location(&mut self, li: usize) -> Result<i32, ConvertError> {
        if let Some(l) = self.locations[li] {
            return Ok(l);
        }
        let d = self.d;
        let loc = &d.profile.location[li];
        let mapping = match d.mapping(li, loc.mapping_id)? {
            Some(mi) => self.mapping(mi)?,
            None => 0,
        };
        let mut lines = Vec::with_capacity(loc.line.len());
        for line in &loc.line {
            let function = match d.function(li, line.function_id)? {
                Some(fi) => self.function(fi)?,
                None => 0,
            };
            lines.push(FrameLine {
                function,
                line: line.line,
                column: line.column,
            });
        }
        let l = self.builder.location(mapping, loc.address, &lines);
        self.locations[li] = Some(l);
        Ok(l)
    }

    fn function(&mut self, fi: usize) -> Result<i32, ConvertError> {
        if let Some(f) = self.functions[fi] {
            return Ok(f);
        }
        let d = self.d;
        let f = &d.profile.function[fi];
        let field = |name: &str| format!("function id {}: {name}", f.id);
        let name = d.str(f.name, || field("name"))?;
        let system_name = d.str(f.system_name, || field("system_name"))?;
        let filename = d.str(f.filename, || field("filename"))?;
        let index = self.builder.function(name, system_name, filename, f.start_line);
        self.functions[fi] = Some(index);
        Ok(index)
    }

    fn mapping(&mut self, mi: usize) -> Result<i32, ConvertError> {
        if let Some(m) = self.mappings[mi] {
            return Ok(m);
        }
        let d = self.d;
        let m = &d.profile.mapping[mi];
        let field = |name: &str| format!("mapping id {}: {name}", m.id);
        let spec = MappingSpec {
            memory_start: m.memory_start,
            memory_limit: m.memory_limit,
            file_offset: m.file_offset,
            filename: d.str(m.filename, || field("filename"))?.to_string(),
            build_id: d.str(m.build_id, || field("build_id"))?.to_string(),
        };
        let index = self.builder.mapping(&spec);
        self.mappings[mi] = Some(index);
        Ok(index)
    }
}
