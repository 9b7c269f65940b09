//! The request dictionary in flat tables: every string in one buffer, every line, stack
//! and attribute index in one array per kind, each entry a range into them.
//!
//! A collector resends hundreds of strings, functions and locations with every request,
//! and prost gives each string, each location's lines and each stack its own allocation:
//! the dictionary is most of what decoding a request costs. Decoded from the wire here it
//! costs a handful of allocations instead. Anything this decoder does not expect (a wrong
//! wire type, a group, invalid UTF-8) makes it give up, and the caller decodes the request
//! with prost, which reports the problem: both decoders accept the same bytes and read
//! them the same (`tests/flat_dictionary.rs` holds them to that).

use prost::Message;
use prost::encoding::WireType::{self, LengthDelimited as LEN, Varint as VARINT};
use stackhouse_proto::otlp_collector::ExportProfilesServiceRequest;
use stackhouse_proto::otlp_profiles::{
    Function, KeyValueAndUnit, Line, Link, Location, Mapping, ProfilesDictionary, Stack,
};

use super::samples::{Level, Samples, nested};
use super::wire::{WireError, key, len_delimited, skip_field, unexpected, varint, varints};

/// A range of one of the flat arrays.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Span {
    start: u32,
    end: u32,
}

impl Span {
    fn range(self) -> std::ops::Range<usize> {
        self.start as usize..self.end as usize
    }

    pub(crate) fn of<T>(slice: &[T], span: Span) -> &[T] {
        &slice[span.range()]
    }

    /// From `start` to the current end of `slice`; the decoders refuse requests of 4 GiB
    /// and more, so every index fits.
    pub(crate) fn since<T>(start: usize, slice: &[T]) -> Span {
        Span {
            start: start as u32,
            end: slice.len() as u32,
        }
    }

    pub(crate) fn len(self) -> usize {
        (self.end - self.start) as usize
    }
}

#[derive(Clone, Copy, Debug, Default)]
struct LocationEntry {
    mapping_index: i32,
    address: u64,
    lines: Span,
    attribute_indices: Span,
}

/// One entry of the location table, borrowed from the dictionary.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LocationRef<'d> {
    pub mapping_index: i32,
    pub address: u64,
    pub lines: &'d [Line],
    pub attribute_indices: &'d [i32],
}

#[derive(Clone, Copy, Debug, Default)]
struct LinkEntry {
    trace_id: Span,
    span_id: Span,
}

/// The tables of `ProfilesDictionary`. Mappings and attributes are few per request and
/// keep prost's types.
#[derive(Clone, Debug, Default)]
pub struct Dictionary {
    text: String,
    strings: Vec<Span>,
    functions: Vec<Function>,
    mappings: Vec<Mapping>,
    locations: Vec<LocationEntry>,
    lines: Vec<Line>,
    location_attributes: Vec<i32>,
    stacks: Vec<Span>,
    stack_locations: Vec<i32>,
    links: Vec<LinkEntry>,
    link_ids: Vec<u8>,
    attributes: Vec<KeyValueAndUnit>,
    /// The request's samples when they were decoded flat with the dictionary (the
    /// request's profiles then have none of their own): they travel together wherever a
    /// decoded request goes.
    samples: Option<Samples>,
}

impl Dictionary {
    /// The dictionary of a request prost decoded (none: every table empty).
    pub fn of(request: &ExportProfilesServiceRequest) -> Dictionary {
        request
            .dictionary
            .as_ref()
            .map(Dictionary::from)
            .unwrap_or_default()
    }

    /// The samples decoded flat with the dictionary, if they were.
    pub fn samples(&self) -> Option<&Samples> {
        self.samples.as_ref()
    }

    pub fn strings_len(&self) -> usize {
        self.strings.len()
    }

    /// String `index`; "" for index 0 (also when the table is empty) and, since every
    /// index is validated before it is read for a stored value, for one out of range.
    pub fn string(&self, index: i32) -> &str {
        usize::try_from(index)
            .ok()
            .and_then(|i| self.strings.get(i))
            .map_or("", |&span| &self.text[span.range()])
    }

    pub fn functions(&self) -> &[Function] {
        &self.functions
    }

    pub fn mappings(&self) -> &[Mapping] {
        &self.mappings
    }

    pub fn attributes(&self) -> &[KeyValueAndUnit] {
        &self.attributes
    }

    pub fn locations_len(&self) -> usize {
        self.locations.len()
    }

    pub fn location(&self, index: usize) -> Option<LocationRef<'_>> {
        self.locations.get(index).map(|l| LocationRef {
            mapping_index: l.mapping_index,
            address: l.address,
            lines: Span::of(&self.lines, l.lines),
            attribute_indices: Span::of(&self.location_attributes, l.attribute_indices),
        })
    }

    pub fn stacks_len(&self) -> usize {
        self.stacks.len()
    }

    /// The location indices of stack `index`, leaf first.
    pub fn stack(&self, index: usize) -> Option<&[i32]> {
        self.stacks
            .get(index)
            .map(|&s| Span::of(&self.stack_locations, s))
    }

    pub fn links_len(&self) -> usize {
        self.links.len()
    }

    /// The trace id and span id of link `index`, as sent (lengths not checked).
    pub fn link(&self, index: usize) -> Option<(&[u8], &[u8])> {
        self.links.get(index).map(|l| {
            (
                Span::of(&self.link_ids, l.trace_id),
                Span::of(&self.link_ids, l.span_id),
            )
        })
    }

    /// The same tables in prost's types, for comparing with what prost decodes.
    pub fn to_proto(&self) -> ProfilesDictionary {
        ProfilesDictionary {
            mapping_table: self.mappings.clone(),
            location_table: (0..self.locations.len())
                .filter_map(|i| self.location(i))
                .map(|l| Location {
                    mapping_index: l.mapping_index,
                    address: l.address,
                    lines: l.lines.to_vec(),
                    attribute_indices: l.attribute_indices.to_vec(),
                })
                .collect(),
            function_table: self.functions.clone(),
            link_table: (0..self.links.len())
                .filter_map(|i| self.link(i))
                .map(|(trace_id, span_id)| Link {
                    trace_id: trace_id.to_vec(),
                    span_id: span_id.to_vec(),
                })
                .collect(),
            string_table: self
                .strings
                .iter()
                .map(|&s| self.text[s.range()].to_string())
                .collect(),
            attribute_table: self.attributes.clone(),
            stack_table: (0..self.stacks.len())
                .filter_map(|i| self.stack(i))
                .map(|s| Stack {
                    location_indices: s.to_vec(),
                })
                .collect(),
        }
    }

    fn push_string(&mut self, s: &str) {
        let start = self.text.len() as u32;
        self.text.push_str(s);
        self.strings.push(Span {
            start,
            end: self.text.len() as u32,
        });
    }

    fn push_location(&mut self, mapping_index: i32, address: u64, lines: &[Line], attributes: &[i32]) {
        let lines_at = self.lines.len() as u32;
        self.lines.extend_from_slice(lines);
        let attributes_at = self.location_attributes.len() as u32;
        self.location_attributes.extend_from_slice(attributes);
        self.locations.push(LocationEntry {
            mapping_index,
            address,
            lines: Span {
                start: lines_at,
                end: self.lines.len() as u32,
            },
            attribute_indices: Span {
                start: attributes_at,
                end: self.location_attributes.len() as u32,
            },
        });
    }

    fn push_stack(&mut self, locations: &[i32]) {
        let start = self.stack_locations.len() as u32;
        self.stack_locations.extend_from_slice(locations);
        self.end_stack(start);
    }

    /// Ends the stack whose locations were appended from `start` on.
    fn end_stack(&mut self, start: u32) {
        self.stacks.push(Span {
            start,
            end: self.stack_locations.len() as u32,
        });
    }

    fn push_link(&mut self, trace_id: &[u8], span_id: &[u8]) {
        let trace_id = push_bytes(&mut self.link_ids, trace_id);
        let span_id = push_bytes(&mut self.link_ids, span_id);
        self.links.push(LinkEntry { trace_id, span_id });
    }
}

fn push_bytes(arena: &mut Vec<u8>, bytes: &[u8]) -> Span {
    let start = arena.len() as u32;
    arena.extend_from_slice(bytes);
    Span {
        start,
        end: arena.len() as u32,
    }
}

impl From<&ProfilesDictionary> for Dictionary {
    fn from(d: &ProfilesDictionary) -> Dictionary {
        let mut out = Dictionary {
            functions: d.function_table.clone(),
            mappings: d.mapping_table.clone(),
            attributes: d.attribute_table.clone(),
            ..Dictionary::default()
        };
        for s in &d.string_table {
            out.push_string(s);
        }
        for l in &d.location_table {
            out.push_location(l.mapping_index, l.address, &l.lines, &l.attribute_indices);
        }
        for s in &d.stack_table {
            out.push_stack(&s.location_indices);
        }
        for l in &d.link_table {
            out.push_link(&l.trace_id, &l.span_id);
        }
        out
    }
}

// ---- the wire -------------------------------------------------------------------------

/// An OTLP/protobuf request of the v1.10 layout with its dictionary and samples decoded
/// flat; the returned request has no dictionary and its profiles no samples (see
/// [`Dictionary::samples`]). `None`: the bytes hold something only prost's decoder handles
/// or reports, so decode them with it.
pub fn decode_request(bytes: &[u8]) -> Option<(ExportProfilesServiceRequest, Dictionary)> {
    // Spans are u32; a request this large is refused long before by the body limit.
    if u32::try_from(bytes.len()).is_err() {
        return None;
    }
    decode_flat(bytes).ok()
}

fn decode_flat(bytes: &[u8]) -> Result<(ExportProfilesServiceRequest, Dictionary), WireError> {
    let mut dictionary = Dictionary::default();
    let mut samples = Samples::default();
    // The resource profiles without their samples, for prost: the few fields above the
    // samples are not worth a decoder of their own.
    let mut rest = Vec::new();
    let mut inner = Vec::new();
    let mut buf = bytes;
    while !buf.is_empty() {
        match key(&mut buf)? {
            (1, LEN) => {
                inner.clear();
                samples.strip(Level::ResourceProfiles, len_delimited(&mut buf)?, &mut inner)?;
                nested(&mut rest, 1, &inner);
            }
            // A message field sent twice merges, and merging repeated fields appends.
            (2, LEN) => dictionary.decode(len_delimited(&mut buf)?)?,
            (number @ (1 | 2), wire) => return Err(unexpected(number, wire)),
            (number, wire) => skip_field(&mut buf, number, wire)?,
        }
    }
    let request = ExportProfilesServiceRequest::decode(rest.as_slice())?;
    dictionary.samples = Some(samples);
    Ok((request, dictionary))
}

impl Dictionary {
    fn decode(&mut self, mut buf: &[u8]) -> Result<(), WireError> {
        // The strings are most of a dictionary's bytes: one allocation for all of them
        // instead of one per doubling.
        self.text.reserve(buf.len());
        // Reused for every entry: one location's lines and indices before they are copied.
        let mut lines = Vec::new();
        let mut indices = Vec::new();
        while !buf.is_empty() {
            match key(&mut buf)? {
                (1, LEN) => self.mappings.push(Mapping::decode(len_delimited(&mut buf)?)?),
                (2, LEN) => {
                    let (mapping_index, address) =
                        location(len_delimited(&mut buf)?, &mut lines, &mut indices)?;
                    self.push_location(mapping_index, address, &lines, &indices);
                }
                (3, LEN) => self.functions.push(function(len_delimited(&mut buf)?)?),
                (4, LEN) => {
                    let (trace_id, span_id) = link(len_delimited(&mut buf)?)?;
                    self.push_link(trace_id, span_id);
                }
                (5, LEN) => self.push_string(
                    std::str::from_utf8(len_delimited(&mut buf)?)
                        .map_err(|e| WireError(format!("string: {e}")))?,
                ),
                (6, LEN) => self
                    .attributes
                    .push(KeyValueAndUnit::decode(len_delimited(&mut buf)?)?),
                (7, LEN) => {
                    // Read straight into the flat array: stacks are most of a dictionary's
                    // entries.
                    let start = self.stack_locations.len() as u32;
                    let mut entry = len_delimited(&mut buf)?;
                    while !entry.is_empty() {
                        match key(&mut entry)? {
                            (1, wire) => int32s(wire, &mut entry, &mut self.stack_locations)?,
                            (number, wire) => skip_field(&mut entry, number, wire)?,
                        }
                    }
                    self.end_stack(start);
                }
                (number @ 1..=7, wire) => return Err(unexpected(number, wire)),
                (number, wire) => skip_field(&mut buf, number, wire)?,
            }
        }
        Ok(())
    }
}

fn location(
    mut buf: &[u8],
    lines: &mut Vec<Line>,
    attributes: &mut Vec<i32>,
) -> Result<(i32, u64), WireError> {
    lines.clear();
    attributes.clear();
    let (mut mapping_index, mut address) = (0, 0);
    while !buf.is_empty() {
        match key(&mut buf)? {
            (1, VARINT) => mapping_index = varint(&mut buf)? as i32,
            (2, VARINT) => address = varint(&mut buf)?,
            (3, LEN) => lines.push(line(len_delimited(&mut buf)?)?),
            (4, wire) => int32s(wire, &mut buf, attributes)?,
            (number @ 1..=3, wire) => return Err(unexpected(number, wire)),
            (number, wire) => skip_field(&mut buf, number, wire)?,
        }
    }
    Ok((mapping_index, address))
}

fn line(mut buf: &[u8]) -> Result<Line, WireError> {
    let mut line = Line::default();
    while !buf.is_empty() {
        match key(&mut buf)? {
            (1, VARINT) => line.function_index = varint(&mut buf)? as i32,
            (2, VARINT) => line.line = varint(&mut buf)? as i64,
            (3, VARINT) => line.column = varint(&mut buf)? as i64,
            (number @ 1..=3, wire) => return Err(unexpected(number, wire)),
            (number, wire) => skip_field(&mut buf, number, wire)?,
        }
    }
    Ok(line)
}

fn function(mut buf: &[u8]) -> Result<Function, WireError> {
    let mut f = Function::default();
    while !buf.is_empty() {
        match key(&mut buf)? {
            (1, VARINT) => f.name_strindex = varint(&mut buf)? as i32,
            (2, VARINT) => f.system_name_strindex = varint(&mut buf)? as i32,
            (3, VARINT) => f.filename_strindex = varint(&mut buf)? as i32,
            (4, VARINT) => f.start_line = varint(&mut buf)? as i64,
            (number @ 1..=4, wire) => return Err(unexpected(number, wire)),
            (number, wire) => skip_field(&mut buf, number, wire)?,
        }
    }
    Ok(f)
}

/// A singular `bytes` field sent twice keeps its last value, as prost does.
fn link(mut buf: &[u8]) -> Result<(&[u8], &[u8]), WireError> {
    let (mut trace_id, mut span_id): (&[u8], &[u8]) = (&[], &[]);
    while !buf.is_empty() {
        match key(&mut buf)? {
            (1, LEN) => trace_id = len_delimited(&mut buf)?,
            (2, LEN) => span_id = len_delimited(&mut buf)?,
            (number @ (1 | 2), wire) => return Err(unexpected(number, wire)),
            (number, wire) => skip_field(&mut buf, number, wire)?,
        }
    }
    Ok((trace_id, span_id))
}

/// A repeated int32.
fn int32s(wire: WireType, buf: &mut &[u8], out: &mut Vec<i32>) -> Result<(), WireError> {
    varints(wire, buf, out, |v| v as i32)
}
