//! A request's samples in flat arrays: one fixed-size record per sample, and every
//! sample's values, timestamps and attribute indices in one array per kind, each record
//! holding ranges into them.
//!
//! prost gives every sample its own `Vec` for each repeated field, one to three
//! allocations per sample, which made the samples what decoding a request spends most
//! of its allocations on once the dictionary was flat. Decoded here they cost a handful
//! per request. Validation and normalization read either form through [`SampleList`],
//! since requests that reach them through prost (other layouts, other formats, JSON) keep
//! prost's samples.

use prost::encoding::WireType::{LengthDelimited as LEN, SixtyFourBit as I64, Varint as VARINT};
use stackhouse_proto::otlp_profiles::{Profile, ResourceProfiles, Sample};

use super::dictionary::Span;
use super::wire::{WireError, key, len_delimited, skip, skip_field, take, unexpected, varint, varints};

#[derive(Clone, Copy, Debug, Default)]
struct Entry {
    stack_index: i32,
    link_index: i32,
    attribute_indices: Span,
    values: Span,
    timestamps: Span,
}

/// Every sample of a request, decoded from the wire, with the range each profile (counted
/// in request order) has of them.
#[derive(Clone, Debug, Default)]
pub struct Samples {
    entries: Vec<Entry>,
    attribute_indices: Vec<i32>,
    values: Vec<i64>,
    timestamps: Vec<u64>,
    /// Per profile in request order: its range of `entries`.
    profiles: Vec<Span>,
}

/// One sample, borrowed from prost's `Sample` or from the flat arrays.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct SampleRef<'a> {
    pub(crate) stack_index: i32,
    pub(crate) attribute_indices: &'a [i32],
    pub(crate) link_index: i32,
    pub(crate) values: &'a [i64],
    pub(crate) timestamps_unix_nano: &'a [u64],
}

impl<'a> From<&'a Sample> for SampleRef<'a> {
    fn from(s: &'a Sample) -> Self {
        SampleRef {
            stack_index: s.stack_index,
            attribute_indices: &s.attribute_indices,
            link_index: s.link_index,
            values: &s.values,
            timestamps_unix_nano: &s.timestamps_unix_nano,
        }
    }
}

/// The samples of one profile in either form.
#[derive(Clone, Copy, Debug)]
pub(crate) enum SampleList<'a> {
    Decoded(&'a [Sample]),
    Flat(&'a Samples, Span),
}

impl<'a> SampleList<'a> {
    pub(crate) fn len(self) -> usize {
        match self {
            SampleList::Decoded(s) => s.len(),
            SampleList::Flat(_, span) => span.len(),
        }
    }

    pub(crate) fn iter(self) -> impl Iterator<Item = SampleRef<'a>> {
        let (decoded, flat): (&[Sample], _) = match self {
            SampleList::Decoded(s) => (s, None),
            SampleList::Flat(samples, span) => (&[], Some((samples, Span::of(&samples.entries, span)))),
        };
        // One of the two is empty: chained, the loop needs no boxed iterator.
        let flat = flat
            .into_iter()
            .flat_map(|(samples, entries)| entries.iter().map(move |e| samples.view(e)));
        decoded.iter().map(SampleRef::from).chain(flat)
    }
}

impl Samples {
    fn view(&self, e: &Entry) -> SampleRef<'_> {
        SampleRef {
            stack_index: e.stack_index,
            attribute_indices: Span::of(&self.attribute_indices, e.attribute_indices),
            link_index: e.link_index,
            values: Span::of(&self.values, e.values),
            timestamps_unix_nano: Span::of(&self.timestamps, e.timestamps),
        }
    }

    /// The samples of profile `index` (in request order), if the request had that many.
    pub(crate) fn profile(&self, index: usize) -> Option<SampleList<'_>> {
        self.profiles.get(index).map(|&span| SampleList::Flat(self, span))
    }

    /// `resource_profiles` with these samples put back into prost's types, for comparing
    /// with what prost decodes.
    pub fn restore(&self, resource_profiles: &[ResourceProfiles]) -> Vec<ResourceProfiles> {
        let mut out = resource_profiles.to_vec();
        let profiles = out
            .iter_mut()
            .flat_map(|r| &mut r.scope_profiles)
            .flat_map(|s| &mut s.profiles);
        for (j, profile) in profiles.enumerate() {
            if let Some(list) = self.profile(j) {
                profile.samples = list
                    .iter()
                    .map(|s| Sample {
                        stack_index: s.stack_index,
                        attribute_indices: s.attribute_indices.to_vec(),
                        link_index: s.link_index,
                        values: s.values.to_vec(),
                        timestamps_unix_nano: s.timestamps_unix_nano.to_vec(),
                    })
                    .collect();
            }
        }
        out
    }
}

// ---- the wire -------------------------------------------------------------------------

/// The messages above the samples, down to the profile whose field 2 they are.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Level {
    ResourceProfiles,
    ScopeProfiles,
    Profile,
}

impl Samples {
    /// Copies the message `body` at `level` to `out` without its samples, which are
    /// decoded into the flat arrays instead. Everything else is left to prost, which reads
    /// the copy at the same nesting depth as the original request, so its recursion limit
    /// and its errors are the same.
    pub(crate) fn strip(
        &mut self,
        level: Level,
        mut body: &[u8],
        out: &mut Vec<u8>,
    ) -> Result<(), WireError> {
        let first = self.entries.len();
        let mut inner = Vec::new();
        while !body.is_empty() {
            let field = body;
            let (number, wire) = key(&mut body)?;
            match (level, number, wire) {
                (Level::Profile, 2, LEN) => self.sample(len_delimited(&mut body)?)?,
                (Level::ResourceProfiles, 2, LEN) => {
                    inner.clear();
                    self.strip(Level::ScopeProfiles, len_delimited(&mut body)?, &mut inner)?;
                    nested(out, 2, &inner);
                }
                (Level::ScopeProfiles, 2, LEN) => {
                    inner.clear();
                    self.strip(Level::Profile, len_delimited(&mut body)?, &mut inner)?;
                    nested(out, 2, &inner);
                }
                (_, 2, wire) => return Err(unexpected(2, wire)),
                _ => {
                    skip(&mut body, number, wire)?;
                    out.extend_from_slice(&field[..field.len() - body.len()]);
                }
            }
        }
        if level == Level::Profile {
            self.profiles.push(Span::since(first, &self.entries));
        }
        Ok(())
    }

    /// One sample, as prost reads it: a singular field sent twice keeps its last value,
    /// repeated ones append, packed or not; groups and wrong wire types are left to prost.
    fn sample(&mut self, mut buf: &[u8]) -> Result<(), WireError> {
        let (attributes, values, timestamps) = (
            self.attribute_indices.len(),
            self.values.len(),
            self.timestamps.len(),
        );
        let (mut stack_index, mut link_index) = (0, 0);
        while !buf.is_empty() {
            match key(&mut buf)? {
                (1, VARINT) => stack_index = varint(&mut buf)? as i32,
                (2, wire) => varints(wire, &mut buf, &mut self.attribute_indices, |v| v as i32)?,
                (3, VARINT) => link_index = varint(&mut buf)? as i32,
                (4, wire) => varints(wire, &mut buf, &mut self.values, |v| v as i64)?,
                (5, I64) => self.timestamps.push(fixed64(take(&mut buf, 8)?)),
                (5, LEN) => {
                    let packed = len_delimited(&mut buf)?;
                    if packed.len() % 8 != 0 {
                        return Err(unexpected(5, LEN));
                    }
                    self.timestamps.extend(packed.chunks_exact(8).map(fixed64));
                }
                (number @ 1..=5, wire) => return Err(unexpected(number, wire)),
                (number, wire) => skip_field(&mut buf, number, wire)?,
            }
        }
        self.entries.push(Entry {
            stack_index,
            link_index,
            attribute_indices: Span::since(attributes, &self.attribute_indices),
            values: Span::since(values, &self.values),
            timestamps: Span::since(timestamps, &self.timestamps),
        });
        Ok(())
    }
}

/// Writes field `number` holding `payload` as a length-delimited message.
pub(crate) fn nested(out: &mut Vec<u8>, number: u32, payload: &[u8]) {
    prost::encoding::encode_key(number, LEN, out);
    prost::encoding::encode_varint(payload.len() as u64, out);
    out.extend_from_slice(payload);
}

fn fixed64(bytes: &[u8]) -> u64 {
    let mut le = [0; 8];
    le.copy_from_slice(bytes);
    u64::from_le_bytes(le)
}

/// A profile's samples: the flat ones when the request was decoded flat, else prost's.
pub(crate) fn of<'a>(flat: Option<&'a Samples>, index: usize, profile: &'a Profile) -> SampleList<'a> {
    flat.and_then(|s| s.profile(index))
        .unwrap_or(SampleList::Decoded(&profile.samples))
}
