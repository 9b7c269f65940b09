//! The opentelemetry-proto v1.7.0 profiles layout, which profilers and collectors of
//! May–August 2025 send. Unlike v1.8 and later it is not a renumbering of the current
//! messages: a profile carries several sample types with one value each per sample, a
//! sample's stack is a slice (`locations_start_index`, `locations_length`) of the
//! profile's `location_indices`, the attribute table holds `KeyValue`s with string keys
//! (their units in a table of their own), and only the string table keeps a zero value at
//! index 0 (`mapping_index` and `link_index` are optional instead). So it is decoded with
//! its own messages and converted: one current profile per sample type, every table given
//! its zero value at index 0 (indices shifted by one), stacks interned into a stack table.
//!
//! The wire tells v1.7 apart from every later layout by wire types alone ([`evidence`]):
//! `Profile` fields 3, 5 and 6 are `location_indices` (packed), `duration_nanos` (varint)
//! and `period_type` (a message) in v1.7, and `time_unix_nano` (fixed64), `period_type`
//! and `period` (varint) later; an attribute table entry's field 1 is a string key in v1.7
//! and a string index later; `Sample` field 5 is `link_index` (varint) in v1.7 and the
//! timestamps (fixed64) later.

use std::collections::HashMap;

use prost::Message;
use prost::encoding::WireType;
use stackhouse_proto::otlp_collector::ExportProfilesServiceRequest;
use stackhouse_proto::otlp_common::{InstrumentationScope, KeyValue};
use stackhouse_proto::otlp_profiles as current;
use stackhouse_proto::otlp_resource::Resource;

use super::decode::DecodeError;
use super::wire::{WireError, fields};

// ---- the v1.7.0 messages (opentelemetry/proto/profiles/v1development/profiles.proto) ----

#[derive(Clone, PartialEq, Message)]
struct Request {
    #[prost(message, repeated, tag = "1")]
    resource_profiles: Vec<ResourceProfiles>,
    #[prost(message, optional, tag = "2")]
    dictionary: Option<Dictionary>,
}

#[derive(Clone, PartialEq, Message)]
struct Dictionary {
    /// v1.7's `Mapping` is the current one with four booleans more (fields 6–9), which
    /// nothing reads.
    #[prost(message, repeated, tag = "1")]
    mapping_table: Vec<current::Mapping>,
    #[prost(message, repeated, tag = "2")]
    location_table: Vec<Location>,
    #[prost(message, repeated, tag = "3")]
    function_table: Vec<current::Function>,
    #[prost(message, repeated, tag = "4")]
    link_table: Vec<current::Link>,
    #[prost(string, repeated, tag = "5")]
    string_table: Vec<String>,
    #[prost(message, repeated, tag = "6")]
    attribute_table: Vec<KeyValue>,
    #[prost(message, repeated, tag = "7")]
    attribute_units: Vec<AttributeUnit>,
}

#[derive(Clone, PartialEq, Message)]
struct AttributeUnit {
    #[prost(int32, tag = "1")]
    attribute_key_strindex: i32,
    #[prost(int32, tag = "2")]
    unit_strindex: i32,
}

#[derive(Clone, PartialEq, Message)]
struct Location {
    #[prost(int32, optional, tag = "1")]
    mapping_index: Option<i32>,
    #[prost(uint64, tag = "2")]
    address: u64,
    #[prost(message, repeated, tag = "3")]
    line: Vec<current::Line>,
    #[prost(int32, repeated, tag = "5")]
    attribute_indices: Vec<i32>,
}

#[derive(Clone, PartialEq, Message)]
struct ResourceProfiles {
    #[prost(message, optional, tag = "1")]
    resource: Option<Resource>,
    #[prost(message, repeated, tag = "2")]
    scope_profiles: Vec<ScopeProfiles>,
    #[prost(string, tag = "3")]
    schema_url: String,
}

#[derive(Clone, PartialEq, Message)]
struct ScopeProfiles {
    #[prost(message, optional, tag = "1")]
    scope: Option<InstrumentationScope>,
    #[prost(message, repeated, tag = "2")]
    profiles: Vec<Profile>,
    #[prost(string, tag = "3")]
    schema_url: String,
}

#[derive(Clone, PartialEq, Message)]
struct Profile {
    /// v1.7's `ValueType` has `aggregation_temporality` (field 3) more, which nothing reads.
    #[prost(message, repeated, tag = "1")]
    sample_type: Vec<current::ValueType>,
    #[prost(message, repeated, tag = "2")]
    sample: Vec<Sample>,
    #[prost(int32, repeated, tag = "3")]
    location_indices: Vec<i32>,
    #[prost(int64, tag = "4")]
    time_nanos: i64,
    #[prost(int64, tag = "5")]
    duration_nanos: i64,
    #[prost(message, optional, tag = "6")]
    period_type: Option<current::ValueType>,
    #[prost(int64, tag = "7")]
    period: i64,
    #[prost(bytes = "vec", tag = "10")]
    profile_id: Vec<u8>,
    #[prost(uint32, tag = "11")]
    dropped_attributes_count: u32,
    #[prost(string, tag = "12")]
    original_payload_format: String,
    #[prost(bytes = "vec", tag = "13")]
    original_payload: Vec<u8>,
    #[prost(int32, repeated, tag = "14")]
    attribute_indices: Vec<i32>,
}

#[derive(Clone, PartialEq, Message)]
struct Sample {
    #[prost(int32, tag = "1")]
    locations_start_index: i32,
    #[prost(int32, tag = "2")]
    locations_length: i32,
    #[prost(int64, repeated, tag = "3")]
    value: Vec<i64>,
    #[prost(int32, repeated, tag = "4")]
    attribute_indices: Vec<i32>,
    #[prost(int32, optional, tag = "5")]
    link_index: Option<i32>,
    #[prost(uint64, repeated, tag = "6")]
    timestamps_unix_nano: Vec<u64>,
}

// ---- telling v1.7 from later layouts -----------------------------------------------------

/// The first field whose wire type only v1.7, or only later layouts, can have.
#[derive(Debug)]
pub(super) struct Evidence {
    pub v1_7: bool,
    pub why: String,
}

/// Reads the wire types of the fields that tell v1.7 apart (this module's doc), up to the
/// first that decides. Profiles' own fields are read first; samples only when no profile
/// field decides, and the dictionary's attribute table last, since walking thousands of
/// entries for every request would cost as much as the rest of the scan.
pub(super) fn evidence(bytes: &[u8]) -> Result<Option<Evidence>, WireError> {
    let mut profiles = Vec::new();
    let mut dictionary = None;
    for f in fields(bytes) {
        let f = f?;
        match (f.number, f.wire) {
            (1, WireType::LengthDelimited) => {
                let r = profiles.len();
                for (s, scope) in fields(f.payload)
                    .filter(|f| {
                        f.as_ref()
                            .is_ok_and(|f| (f.number, f.wire) == (2, WireType::LengthDelimited))
                    })
                    .enumerate()
                {
                    let profiles_of_scope = fields(scope?.payload).filter(|f| {
                        f.as_ref()
                            .is_ok_and(|f| (f.number, f.wire) == (2, WireType::LengthDelimited))
                    });
                    for (p, profile) in profiles_of_scope.enumerate() {
                        let at = format!("resource_profiles[{r}].scope_profiles[{s}].profiles[{p}]");
                        profiles.push((at, profile?.payload));
                    }
                }
            }
            (2, WireType::LengthDelimited) => dictionary = Some(f.payload),
            _ => {}
        }
    }
    for (at, body) in &profiles {
        if let Some(found) = profile_evidence(body, at)? {
            return Ok(Some(found));
        }
    }
    for (at, body) in &profiles {
        let samples = fields(body).filter(|f| {
            f.as_ref()
                .is_ok_and(|f| (f.number, f.wire) == (2, WireType::LengthDelimited))
        });
        for (n, sample) in samples.enumerate() {
            for f in fields(sample?.payload) {
                let f = f?;
                if (f.number, f.wire) == (5, WireType::SixtyFourBit) {
                    return Ok(Some(Evidence {
                        v1_7: false,
                        why: format!(
                            "{at}.samples[{n}] field 5 is fixed64 (timestamps_unix_nano, v1.8 and later)"
                        ),
                    }));
                }
            }
        }
    }
    let Some(dictionary) = dictionary else {
        return Ok(None);
    };
    let attributes = fields(dictionary).filter(|f| {
        f.as_ref()
            .is_ok_and(|f| (f.number, f.wire) == (6, WireType::LengthDelimited))
    });
    for (n, entry) in attributes.enumerate() {
        let key = fields(entry?.payload)
            .map_while(Result::ok)
            .find(|f| f.number == 1);
        let at = format!("dictionary.attribute_table[{n}] field 1");
        match key.map(|f| f.wire) {
            Some(WireType::LengthDelimited) => {
                return Ok(Some(Evidence {
                    v1_7: true,
                    why: format!("{at} is a string (v1.7's key)"),
                }));
            }
            Some(WireType::Varint) => {
                return Ok(Some(Evidence {
                    v1_7: false,
                    why: format!("{at} is a varint (key_strindex, v1.8 and later)"),
                }));
            }
            _ => {}
        }
    }
    Ok(None)
}

fn profile_evidence(body: &[u8], at: &str) -> Result<Option<Evidence>, WireError> {
    for f in fields(body) {
        let f = f?;
        let (v1_7, what) = match (f.number, f.wire) {
            (3, WireType::LengthDelimited | WireType::Varint) => {
                (true, "an integer list (v1.7's location_indices)")
            }
            (3, WireType::SixtyFourBit) => (false, "fixed64 (time_unix_nano, v1.8 and later)"),
            (5, WireType::Varint) => (true, "a varint (v1.7's duration_nanos)"),
            (5, WireType::LengthDelimited) => (false, "a message (period_type, v1.8 and later)"),
            (6, WireType::LengthDelimited) => (true, "a message (v1.7's period_type)"),
            (6, WireType::Varint) => (false, "a varint (period, v1.8 and later)"),
            _ => continue,
        };
        return Ok(Some(Evidence {
            v1_7,
            why: format!("{at} field {} is {what}", f.number),
        }));
    }
    Ok(None)
}

// ---- conversion --------------------------------------------------------------------------

/// A v1.7 request in the current messages, with the profiles that could not be converted
/// left out and named.
#[derive(Debug, Default)]
pub struct Converted {
    pub request: ExportProfilesServiceRequest,
    pub rejected: Vec<String>,
}

pub(super) fn convert(bytes: &[u8]) -> Result<Converted, DecodeError> {
    let old = Request::decode(bytes)?;
    let mut tables = Tables::new(old.dictionary.unwrap_or_default());
    let mut rejected = Vec::new();
    let mut resource_profiles = Vec::with_capacity(old.resource_profiles.len());
    for (r, rp) in old.resource_profiles.into_iter().enumerate() {
        let mut scope_profiles = Vec::with_capacity(rp.scope_profiles.len());
        for (s, sp) in rp.scope_profiles.into_iter().enumerate() {
            let mut profiles = Vec::new();
            for (p, profile) in sp.profiles.into_iter().enumerate() {
                match tables.profiles(profile) {
                    Ok(converted) => profiles.extend(converted),
                    Err(e) => rejected.push(format!(
                        "resource_profiles[{r}].scope_profiles[{s}].profiles[{p}]: {e}"
                    )),
                }
            }
            scope_profiles.push(current::ScopeProfiles {
                scope: sp.scope,
                profiles,
                schema_url: sp.schema_url,
            });
        }
        resource_profiles.push(current::ResourceProfiles {
            resource: rp.resource,
            scope_profiles,
            schema_url: rp.schema_url,
        });
    }
    Ok(Converted {
        request: ExportProfilesServiceRequest {
            resource_profiles,
            dictionary: Some(tables.finish()),
        },
        rejected,
    })
}

/// The current dictionary under construction from v1.7's.
struct Tables {
    dictionary: current::ProfilesDictionary,
    /// Entries of v1.7's location table (for bounds checks).
    locations: usize,
    stacks: HashMap<Vec<i32>, i32>,
}

/// Each sample type becomes a profile with every sample: without a bound, a small request
/// naming many types would become an enormous one. pprof-style profiles carry a handful.
const MAX_SAMPLE_TYPES: usize = 32;

/// The most location indices the distinct sample slices of one profile copy into stacks.
const MAX_COPIED_INDICES: usize = 16 << 20;

/// `table` with the zero value at index 0, where the current layout keeps it.
fn with_zero<T: Default>(mut table: Vec<T>) -> Vec<T> {
    table.insert(0, T::default());
    table
}

/// Index `i` of a v1.7 table in the current one, whose index 0 is the zero value.
fn shift(i: i32) -> i32 {
    i.saturating_add(1)
}

fn shift_all(indices: Vec<i32>) -> Vec<i32> {
    indices.into_iter().map(shift).collect()
}

impl Tables {
    fn new(old: Dictionary) -> Tables {
        let mut strings = old.string_table;
        if strings.is_empty() {
            strings.push(String::new());
        }
        let mut interned: HashMap<String, i32> = HashMap::new();
        let units: HashMap<String, i32> = old
            .attribute_units
            .iter()
            .filter_map(|u| {
                let key = strings.get(usize::try_from(u.attribute_key_strindex).ok()?)?;
                Some((key.clone(), u.unit_strindex))
            })
            .collect();
        let mut attribute_table = vec![current::KeyValueAndUnit::default()];
        for kv in old.attribute_table {
            let key_strindex = match interned.get(&kv.key) {
                Some(&i) => i,
                None => {
                    let i = i32::try_from(strings.len()).unwrap_or(i32::MAX);
                    strings.push(kv.key.clone());
                    interned.insert(kv.key.clone(), i);
                    i
                }
            };
            attribute_table.push(current::KeyValueAndUnit {
                key_strindex,
                value: kv.value,
                unit_strindex: units.get(&kv.key).copied().unwrap_or(0),
            });
        }
        let mappings = old
            .mapping_table
            .into_iter()
            .map(|m| current::Mapping {
                attribute_indices: shift_all(m.attribute_indices),
                ..m
            })
            .collect();
        let functions = old.function_table;
        let locations = old.location_table.len();
        let location_table = old
            .location_table
            .into_iter()
            .map(|l| current::Location {
                mapping_index: l.mapping_index.map_or(0, shift),
                address: l.address,
                lines: l
                    .line
                    .into_iter()
                    .map(|line| current::Line {
                        function_index: shift(line.function_index),
                        ..line
                    })
                    .collect(),
                attribute_indices: shift_all(l.attribute_indices),
            })
            .collect();
        Tables {
            dictionary: current::ProfilesDictionary {
                mapping_table: with_zero(mappings),
                location_table: with_zero(location_table),
                function_table: with_zero(functions),
                link_table: with_zero(old.link_table),
                string_table: strings,
                attribute_table,
                stack_table: vec![current::Stack::default()],
            },
            locations,
            stacks: HashMap::new(),
        }
    }

    fn stack(&mut self, locations: Vec<i32>) -> i32 {
        if let Some(&i) = self.stacks.get(&locations) {
            return i;
        }
        let i = i32::try_from(self.dictionary.stack_table.len()).unwrap_or(i32::MAX);
        self.dictionary.stack_table.push(current::Stack {
            location_indices: locations.clone(),
        });
        self.stacks.insert(locations, i);
        i
    }

    /// One current profile per sample type of `old` (one when it names none).
    fn profiles(&mut self, old: Profile) -> Result<Vec<current::Profile>, String> {
        if let Some(&bad) = old
            .location_indices
            .iter()
            .find(|&&i| usize::try_from(i).is_ok_and(|i| i >= self.locations) || i < 0)
        {
            return Err(format!(
                "location_indices has {bad}, beyond the {} entries of location_table",
                self.locations
            ));
        }
        if old.sample_type.len() > MAX_SAMPLE_TYPES {
            return Err(format!(
                "{} sample types, more than the {MAX_SAMPLE_TYPES} read from one profile",
                old.sample_type.len()
            ));
        }
        let types = old.sample_type.len().max(1);
        let mut samples: Vec<Vec<current::Sample>> = vec![Vec::with_capacity(old.sample.len()); types];
        // Samples share slices; each distinct one is copied once, and at most
        // MAX_COPIED_INDICES in all, so overlapping slices cannot blow a request up.
        let mut slices: HashMap<(Option<usize>, usize), i32> = HashMap::new();
        let mut copied = 0usize;
        for (n, sample) in old.sample.iter().enumerate() {
            let start = usize::try_from(sample.locations_start_index).ok();
            let length = usize::try_from(sample.locations_length).ok();
            let slice = start
                .zip(length)
                .and_then(|(start, length)| old.location_indices.get(start..start.checked_add(length)?));
            let Some(slice) = slice else {
                return Err(format!(
                    "sample[{n}]: locations_start_index {} and locations_length {} lie beyond the {} \
                     entries of location_indices",
                    sample.locations_start_index,
                    sample.locations_length,
                    old.location_indices.len()
                ));
            };
            if !sample.value.is_empty() && sample.value.len() != old.sample_type.len() {
                return Err(format!(
                    "sample[{n}] has {} values for {} sample types",
                    sample.value.len(),
                    old.sample_type.len()
                ));
            }
            let key = (start, slice.len());
            let stack_index = match slices.get(&key) {
                Some(&i) => i,
                None => {
                    copied += slice.len();
                    if copied > MAX_COPIED_INDICES {
                        return Err(format!(
                            "its samples' location slices hold more than {MAX_COPIED_INDICES} \
                             locations in all"
                        ));
                    }
                    let i = self.stack(shift_all(slice.to_vec()));
                    slices.insert(key, i);
                    i
                }
            };
            for (t, out) in samples.iter_mut().enumerate() {
                // The current layout pairs values with timestamps one to one: a value over
                // several timestamps keeps its value and leaves the time to the profile's.
                let (values, timestamps) = match (sample.value.get(t), sample.timestamps_unix_nano.as_slice())
                {
                    (Some(&v), [one]) => (vec![v], vec![*one]),
                    (Some(&v), _) => (vec![v], Vec::new()),
                    (None, ts) => (Vec::new(), ts.to_vec()),
                };
                out.push(current::Sample {
                    stack_index,
                    attribute_indices: shift_all(sample.attribute_indices.clone()),
                    link_index: sample.link_index.map_or(0, shift),
                    values,
                    timestamps_unix_nano: timestamps,
                });
            }
        }
        let attribute_indices = shift_all(old.attribute_indices);
        let mut out = Vec::with_capacity(types);
        for (t, samples) in samples.into_iter().enumerate() {
            out.push(current::Profile {
                sample_type: old.sample_type.get(t).cloned(),
                samples,
                time_unix_nano: u64::try_from(old.time_nanos).unwrap_or(0),
                duration_nano: u64::try_from(old.duration_nanos).unwrap_or(0),
                period_type: old.period_type,
                period: old.period,
                profile_id: old.profile_id.clone(),
                dropped_attributes_count: old.dropped_attributes_count,
                original_payload_format: if t == 0 {
                    old.original_payload_format.clone()
                } else {
                    String::new()
                },
                // Kept once, not once per sample type.
                original_payload: if t == 0 {
                    old.original_payload.clone()
                } else {
                    Vec::new()
                },
                attribute_indices: attribute_indices.clone(),
            });
        }
        Ok(out)
    }

    fn finish(self) -> current::ProfilesDictionary {
        self.dictionary
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn location(function: i32) -> Location {
        Location {
            mapping_index: None,
            address: 0,
            line: vec![current::Line {
                function_index: function,
                ..Default::default()
            }],
            attribute_indices: Vec::new(),
        }
    }

    /// Strings: "", cpu, nanoseconds, samples, count, a, b, c. Functions a, b, c at
    /// locations 0, 1, 2 (v1.7 tables have no zero value).
    fn request(profiles: Vec<Profile>) -> Vec<u8> {
        let strings = ["", "cpu", "nanoseconds", "samples", "count", "a", "b", "c"];
        let dictionary = Dictionary {
            location_table: vec![location(0), location(1), location(2)],
            function_table: (5..8)
                .map(|name| current::Function {
                    name_strindex: name,
                    ..Default::default()
                })
                .collect(),
            string_table: strings.map(String::from).to_vec(),
            ..Default::default()
        };
        Request {
            resource_profiles: vec![ResourceProfiles {
                scope_profiles: vec![ScopeProfiles {
                    profiles,
                    ..Default::default()
                }],
                ..Default::default()
            }],
            dictionary: Some(dictionary),
        }
        .encode_to_vec()
    }

    fn two_types(samples: Vec<Sample>, location_indices: Vec<i32>) -> Profile {
        Profile {
            sample_type: vec![
                current::ValueType {
                    type_strindex: 1,
                    unit_strindex: 2,
                },
                current::ValueType {
                    type_strindex: 3,
                    unit_strindex: 4,
                },
            ],
            sample: samples,
            location_indices,
            time_nanos: 1_700_000_000_000_000_000,
            ..Default::default()
        }
    }

    fn sample(start: i32, length: i32, value: Vec<i64>) -> Sample {
        Sample {
            locations_start_index: start,
            locations_length: length,
            value,
            ..Default::default()
        }
    }

    /// Function names of a converted stack, leaf first.
    fn names(d: &current::ProfilesDictionary, stack: i32) -> Vec<&str> {
        d.stack_table[stack as usize]
            .location_indices
            .iter()
            .map(|&l| {
                let function = d.location_table[l as usize].lines[0].function_index;
                d.string_table[d.function_table[function as usize].name_strindex as usize].as_str()
            })
            .collect()
    }

    #[test]
    fn each_sample_type_becomes_a_profile_and_a_bad_profile_is_left_out_alone() {
        let good = two_types(
            vec![sample(0, 3, vec![10, 1]), sample(1, 2, vec![20, 2])],
            vec![2, 1, 0],
        );
        let bad = two_types(vec![sample(1, 5, vec![1, 1])], vec![0, 1]);
        let miscounted = two_types(vec![sample(0, 1, vec![1])], vec![0]);
        let bytes = request(vec![good, bad, miscounted]);
        assert!(
            evidence(&bytes).unwrap().is_some_and(|e| e.v1_7),
            "v1.7 by its wire"
        );

        let converted = convert(&bytes).unwrap();
        assert_eq!(converted.rejected.len(), 2, "{:?}", converted.rejected);
        assert!(
            converted.rejected[0]
                .starts_with("resource_profiles[0].scope_profiles[0].profiles[1]: sample[0]")
                && converted.rejected[0].contains("beyond the 2 entries of location_indices"),
            "{}",
            converted.rejected[0]
        );
        assert!(
            converted.rejected[1].contains("1 values for 2 sample types"),
            "{}",
            converted.rejected[1]
        );
        let d = converted.request.dictionary.as_ref().unwrap();
        let profiles = &converted.request.resource_profiles[0].scope_profiles[0].profiles;
        assert_eq!(profiles.len(), 2, "one profile per sample type of the good one");
        for (profile, (type_name, values)) in profiles.iter().zip([("cpu", [10, 20]), ("samples", [1, 2])]) {
            let sample_type = profile.sample_type.as_ref().unwrap();
            assert_eq!(d.string_table[sample_type.type_strindex as usize], type_name);
            let got: Vec<(Vec<&str>, i64)> = profile
                .samples
                .iter()
                .map(|s| (names(d, s.stack_index), s.values[0]))
                .collect();
            assert_eq!(
                got,
                vec![(vec!["c", "b", "a"], values[0]), (vec!["b", "a"], values[1])]
            );
            assert_eq!(profile.time_unix_nano, 1_700_000_000_000_000_000);
        }
    }
}
