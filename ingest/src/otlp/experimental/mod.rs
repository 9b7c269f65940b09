//! The seed format, OTLP profiles `v1experimental` (OTEP 239, opentelemetry-proto v1.3.x):
//! `ProfileContainer`s wrapping an extended pprof `Profile`, converted into one request
//! of the current layout through [`RequestBuilder`], one profile per sample type.
//!
//! How the format is read, where the OTEP leaves room:
//! - **Stack order.** A sample's `locations_start_index`/`locations_length` slice (of
//!   `location_indices`, or of `location` itself when `location_indices` is empty) is read
//!   **root first**: the OTEP's only worked example encodes `foo;bar;baz` as the slice
//!   `[foo, bar, baz]` and `foo;bar` as the first two entries of that same slice, which
//!   only reads right root first. The deprecated `location_index` list is read **leaf
//!   first**, as its field comment states (pprof's order). Senders that filled the slice
//!   leaf first (the 2024 OTel eBPF profiler did) are stored with their stacks reversed;
//!   nothing on the wire tells the two apart.
//! - **Indices** are 0-based into the profile's own tables, without v1development's
//!   reserved zero entry: `mapping_index` 0 means "no mapping" only when the profile has
//!   no mappings; `link` means "no link" only when `link_table` is empty (or the entry it
//!   points at is empty). A sample without a link in a profile whose `link_table[0]` is
//!   a real link cannot be told from one linked to it; it reads as linked.
//! - **Links as attributes.** A sample attribute or label keyed `trace_id` / `span_id`
//!   (bytes, or a hex string) is the sample's link, as in the OTEP's example, and is not
//!   kept as an attribute.
//! - **Timestamps** (`timestamps` in the OTEP, `timestamps_unix_nano` in v1.3) are unix
//!   nanoseconds, stored as sent. A sample with one value per sample type and one
//!   timestamp keeps both; a sample with values and several timestamps is refused, since
//!   the format does not say how a value divides among its timestamps; a sample with
//!   timestamps but no values counts one per timestamp.
//! - Profile time is the container's `start_time_unix_nano`, duration `end - start`;
//!   when the container has no start, the pprof `time_nanos`/`duration_nanos`.
//! - Not carried over (the stored model has no place for them): location attributes,
//!   `is_folded`, `type_index`, comments, `drop_frames`/`keep_frames`,
//!   `default_sample_type`, aggregation temporality, `stacktrace_id_index`.
//!
//! A container that breaks any of this is refused alone, named by its position; the rest
//! of the request converts.

use std::collections::HashMap;

use prost::Message;
use stackhouse_proto::otlp_common::{AnyValue, KeyValue, any_value::Value};
use stackhouse_proto::otlp_experimental as x;
use stackhouse_proto::otlp_experimental_collector::ExportProfilesServiceRequest as ExperimentalRequest;
use stackhouse_proto::otlp_profiles::{KeyValueAndUnit, Profile, ResourceProfiles, Sample, ScopeProfiles};

use super::decode::{self, DecodeError, JsonPath};
use super::normalize::MAX_ERROR_MESSAGES;
use crate::convert::{Conversion, FrameLine, MappingSpec, RequestBuilder};

const REQUEST_MESSAGE: &str =
    "opentelemetry.proto.collector.profiles.v1experimental.ExportProfilesServiceRequest";

const CONTAINERS: JsonPath = &[
    ("resourceProfiles", "resource_profiles"),
    ("scopeProfiles", "scope_profiles"),
    ("profiles", "profiles"),
];
const LINK_TABLES: JsonPath = &[
    ("resourceProfiles", "resource_profiles"),
    ("scopeProfiles", "scope_profiles"),
    ("profiles", "profiles"),
    ("profile", "profile"),
    ("linkTable", "link_table"),
];
const SAMPLES: JsonPath = &[
    ("resourceProfiles", "resource_profiles"),
    ("scopeProfiles", "scope_profiles"),
    ("profiles", "profiles"),
    ("profile", "profile"),
    ("sample", "sample"),
];

/// How many converted entries (values, indices, payload bytes) a container may turn into
/// per byte it takes on the wire.
const MAX_EXPANSION: usize = 16;

/// Mapping attributes that carry a build id when `Mapping.build_id` is empty.
const BUILD_ID_KEYS: [&str; 4] = [
    "process.executable.build_id.gnu",
    "process.executable.build_id.htlhash",
    "process.executable.build_id.go",
    "process.executable.build_id.profiling",
];

pub fn from_protobuf(bytes: &[u8]) -> Result<Conversion, DecodeError> {
    Ok(convert(&ExperimentalRequest::decode(bytes)?))
}

/// OTLP/JSON of the v1experimental request: hex `profileId` and link ids like the current
/// layout, and the OTEP's `timestamps` accepted for v1.3's `timestampsUnixNano`.
pub fn from_json(bytes: &[u8]) -> Result<Conversion, DecodeError> {
    let mut root = decode::parse_json(bytes)?;
    decode::hex_ids_to_base64(&mut root, LINK_TABLES, CONTAINERS)?;
    decode::visit_objects(&mut root, SAMPLES, "", &mut |sample, at| {
        let Some(timestamps) = sample.remove("timestamps") else {
            return Ok(());
        };
        if sample.contains_key("timestampsUnixNano") || sample.contains_key("timestamps_unix_nano") {
            return Err(DecodeError::JsonMapping(format!(
                "{at}: both timestamps and timestampsUnixNano are set"
            )));
        }
        sample.insert("timestampsUnixNano".into(), timestamps);
        Ok(())
    })?;
    Ok(convert(&decode::decode_json_value(root, REQUEST_MESSAGE)?))
}

/// Converts every container it can; the others are counted and named in `errors`.
pub fn convert(request: &ExperimentalRequest) -> Conversion {
    let mut b = RequestBuilder::new();
    let mut extra = ExtraAttributes::default();
    let mut rejected_profiles = 0;
    let mut errors = Vec::new();
    let mut resource_profiles = Vec::with_capacity(request.resource_profiles.len());
    for (r, rp) in request.resource_profiles.iter().enumerate() {
        let resource_attrs = rp.resource.as_ref().map_or(&[][..], |r| &r.attributes);
        let mut scope_profiles = Vec::with_capacity(rp.scope_profiles.len());
        for (s, sp) in rp.scope_profiles.iter().enumerate() {
            let scope_attrs = sp.scope.as_ref().map_or(&[][..], |s| &s.attributes);
            let mut profiles = Vec::new();
            for (p, container) in sp.profiles.iter().enumerate() {
                let converted = if uses_string_indices(resource_attrs) || uses_string_indices(scope_attrs) {
                    Err(
                        "resource or scope attributes use key_strindex or string_value_strindex, \
                         which v1experimental does not have"
                            .to_string(),
                    )
                } else {
                    Container::new(&mut b, &mut extra, container).and_then(Container::convert)
                };
                match converted {
                    Ok(converted) => profiles.extend(converted),
                    Err(e) => {
                        rejected_profiles += 1;
                        if errors.len() < MAX_ERROR_MESSAGES {
                            errors.push(format!(
                                "resource_profiles[{r}].scope_profiles[{s}].profiles[{p}]: {e}"
                            ));
                        }
                    }
                }
            }
            scope_profiles.push(ScopeProfiles {
                scope: sp.scope.clone(),
                profiles,
                schema_url: sp.schema_url.clone(),
            });
        }
        resource_profiles.push(ResourceProfiles {
            resource: rp.resource.clone(),
            scope_profiles,
            schema_url: rp.schema_url.clone(),
        });
    }
    let mut request = b.finish();
    extra.append(&mut request, resource_profiles);
    Conversion {
        request,
        dictionary: None,
        rejected_profiles,
        errors,
        ..Conversion::default()
    }
}

/// Attribute values the builder does not intern (bool, double, bytes, arrays, maps, strings
/// with a unit), kept aside under placeholder indices `-1, -2, ...` and appended to the
/// dictionary once the builder is finished.
#[derive(Default)]
struct ExtraAttributes {
    table: Vec<KeyValueAndUnit>,
    seen: HashMap<Vec<u8>, i32>,
}

impl ExtraAttributes {
    fn intern(&mut self, b: &mut RequestBuilder, key: &str, value: Option<&AnyValue>, unit: &str) -> i32 {
        let entry = KeyValueAndUnit {
            key_strindex: b.string(key),
            value: value.cloned(),
            unit_strindex: b.string(unit),
        };
        let table = &mut self.table;
        *self.seen.entry(entry.encode_to_vec()).or_insert_with(|| {
            table.push(entry);
            -(table.len() as i32)
        })
    }

    fn append(
        self,
        request: &mut stackhouse_proto::otlp_collector::ExportProfilesServiceRequest,
        resource_profiles: Vec<ResourceProfiles>,
    ) {
        let dict = request.dictionary.get_or_insert_with(Default::default);
        let base = dict.attribute_table.len() as i32;
        dict.attribute_table.extend(self.table);
        let fix = |indices: &mut Vec<i32>| {
            for i in indices.iter_mut().filter(|i| **i < 0) {
                *i = base - *i - 1;
            }
        };
        request.resource_profiles = resource_profiles;
        for profile in request
            .resource_profiles
            .iter_mut()
            .flat_map(|rp| &mut rp.scope_profiles)
            .flat_map(|sp| &mut sp.profiles)
        {
            fix(&mut profile.attribute_indices);
            for sample in &mut profile.samples {
                fix(&mut sample.attribute_indices);
            }
        }
    }
}

/// Interns one attribute: strings and integers through the builder, the rest aside.
fn intern_value(
    b: &mut RequestBuilder,
    extra: &mut ExtraAttributes,
    key: &str,
    value: Option<&AnyValue>,
    unit: &str,
) -> i32 {
    match value.and_then(|v| v.value.as_ref()) {
        Some(Value::StringValue(s)) if unit.is_empty() => b.attribute_str(key, s),
        Some(Value::IntValue(v)) => b.attribute_int(key, *v, unit),
        _ => extra.intern(b, key, value, unit),
    }
}

/// True when attributes use v1development's dictionary references, which mean nothing in
/// a v1experimental request and would be read against the converted dictionary.
fn uses_string_indices(attributes: &[KeyValue]) -> bool {
    fn value(v: &AnyValue) -> bool {
        match &v.value {
            Some(Value::StringValueStrindex(_)) => true,
            Some(Value::ArrayValue(a)) => a.values.iter().any(value),
            Some(Value::KvlistValue(l)) => uses_string_indices(&l.values),
            _ => false,
        }
    }
    attributes
        .iter()
        .any(|kv| kv.key_strindex != 0 || kv.value.as_ref().is_some_and(value))
}

/// A sample's link, from `Sample.link` or its `trace_id`/`span_id` attributes.
#[derive(Default, PartialEq)]
struct LinkIds {
    trace_id: Vec<u8>,
    span_id: Vec<u8>,
}

/// One container being converted, with its tables already interned in the builder.
struct Container<'a> {
    b: &'a mut RequestBuilder,
    extra: &'a mut ExtraAttributes,
    container: &'a x::ProfileContainer,
    profile: &'a x::Profile,
    /// Builder indices of the profile's locations.
    locations: Vec<i32>,
    units: HashMap<&'a str, &'a str>,
}

impl<'a> Container<'a> {
    fn new(
        b: &'a mut RequestBuilder,
        extra: &'a mut ExtraAttributes,
        container: &'a x::ProfileContainer,
    ) -> Result<Container<'a>, String> {
        let profile = container.profile.as_ref().ok_or("profile is missing")?;
        if profile.string_table.first().is_some_and(|s| !s.is_empty()) {
            return Err("profile.string_table[0] must be the empty string".into());
        }
        let mut c = Container {
            b,
            extra,
            container,
            profile,
            locations: Vec::new(),
            units: HashMap::new(),
        };
        for (i, u) in profile.attribute_units.iter().enumerate() {
            let at = |f: &str| format!("profile.attribute_units[{i}].{f}");
            let key = c.string(u.attribute_key, || at("attribute_key"))?;
            let unit = c.string(u.unit, || at("unit"))?;
            c.units.insert(key, unit);
        }
        let functions = (profile.function.iter().enumerate())
            .map(|(i, f)| {
                let at = |field: &str| format!("profile.function[{i}].{field}");
                let name = c.string(f.name, || at("name"))?;
                let system_name = c.string(f.system_name, || at("system_name"))?;
                let filename = c.string(f.filename, || at("filename"))?;
                Ok(c.b.function(name, system_name, filename, f.start_line))
            })
            .collect::<Result<Vec<i32>, String>>()?;
        let mappings = (profile.mapping.iter().enumerate())
            .map(|(i, m)| c.mapping(i, m))
            .collect::<Result<Vec<i32>, String>>()?;
        for (i, location) in profile.location.iter().enumerate() {
            let at = || format!("profile.location[{i}]");
            let mapping = match usize::try_from(location.mapping_index) {
                Ok(0) if mappings.is_empty() => 0,
                Ok(m) if m < mappings.len() => mappings[m],
                _ => {
                    return Err(out_of_range(
                        &format!("{}.mapping_index", at()),
                        location.mapping_index,
                        "profile.mapping",
                        mappings.len(),
                    ));
                }
            };
            let lines = (location.line.iter().enumerate())
                .map(|(l, line)| {
                    let function = *usize::try_from(line.function_index)
                        .ok()
                        .and_then(|f| functions.get(f))
                        .ok_or_else(|| {
                            out_of_range(
                                &format!("{}.line[{l}].function_index", at()),
                                line.function_index,
                                "profile.function",
                                functions.len(),
                            )
                        })?;
                    Ok(FrameLine {
                        function,
                        line: line.line,
                        column: line.column,
                    })
                })
                .collect::<Result<Vec<_>, String>>()?;
            c.attribute_refs(&location.attributes, || format!("{}.attributes", at()))?;
            c.locations.push(c.b.location(mapping, location.address, &lines));
        }
        Ok(c)
    }

    fn mapping(&mut self, i: usize, m: &x::Mapping) -> Result<i32, String> {
        let at = |field: &str| format!("profile.mapping[{i}].{field}");
        let attributes = self.attribute_refs(&m.attributes, || at("attributes"))?;
        let mut build_id = self.string(m.build_id, || at("build_id"))?;
        if build_id.is_empty() {
            let keyed = |key: &str| {
                attributes
                    .iter()
                    .find_map(|kv| match kv.value.as_ref().and_then(|v| v.value.as_ref()) {
                        Some(Value::StringValue(s)) if kv.key == key => Some(s.as_str()),
                        _ => None,
                    })
            };
            build_id = BUILD_ID_KEYS.iter().find_map(|k| keyed(k)).unwrap_or("");
        }
        let spec = MappingSpec {
            memory_start: m.memory_start,
            memory_limit: m.memory_limit,
            file_offset: m.file_offset,
            filename: self.string(m.filename, || at("filename"))?.to_string(),
            build_id: build_id.to_string(),
        };
        Ok(self.b.mapping(&spec))
    }

    /// A string table entry; an empty table reads as `[""]`.
    fn string(&self, i: i64, at: impl FnOnce() -> String) -> Result<&'a str, String> {
        let table = &self.profile.string_table;
        match usize::try_from(i) {
            Ok(0) if table.is_empty() => Ok(""),
            Ok(i) if i < table.len() => Ok(&table[i]),
            _ => Err(out_of_range(&at(), i, "profile.string_table", table.len())),
        }
    }

    fn attribute_refs(&self, indices: &[u64], at: impl Fn() -> String) -> Result<Vec<&'a KeyValue>, String> {
        let table = &self.profile.attribute_table;
        indices
            .iter()
            .enumerate()
            .map(|(n, &i)| {
                usize::try_from(i).ok().and_then(|i| table.get(i)).ok_or_else(|| {
                    out_of_range(
                        &format!("{}[{n}]", at()),
                        i,
                        "profile.attribute_table",
                        table.len(),
                    )
                })
            })
            .collect()
    }

    fn convert(mut self) -> Result<Vec<Profile>, String> {
        let profile = self.profile;
        if uses_string_indices(&self.container.attributes) || uses_string_indices(&profile.attribute_table) {
            return Err(
                "attributes use key_strindex or string_value_strindex, which v1experimental does not have"
                    .into(),
            );
        }
        let profile_id = match self.container.profile_id.as_slice() {
            id if id.iter().all(|&b| b == 0) => Vec::new(),
            id if id.len() == 16 => id.to_vec(),
            id => return Err(format!("profile_id must be 16 bytes, got {}", id.len())),
        };
        let (time, duration) = self.time()?;
        if profile.sample_type.is_empty() && !profile.sample.is_empty() {
            return Err("profile has samples but no sample_type".into());
        }
        self.check_expansion()?;
        let mut attribute_indices = Vec::with_capacity(self.container.attributes.len());
        for kv in &self.container.attributes {
            let unit = self.units.get(kv.key.as_str()).copied().unwrap_or("");
            attribute_indices.push(intern_value(self.b, self.extra, &kv.key, kv.value.as_ref(), unit));
        }
        let period_type = match &profile.period_type {
            Some(t) => Some(self.value_type(t, "profile.period_type")?),
            None => None,
        };
        let sample_types = (profile.sample_type.iter().enumerate())
            .map(|(i, t)| self.value_type(t, &format!("profile.sample_type[{i}]")))
            .collect::<Result<Vec<_>, String>>()?;
        let mut out: Vec<Profile> = sample_types
            .into_iter()
            .map(|sample_type| Profile {
                sample_type: Some(sample_type),
                samples: Vec::with_capacity(profile.sample.len()),
                time_unix_nano: time,
                duration_nano: duration,
                period_type,
                period: profile.period,
                profile_id: profile_id.clone(),
                dropped_attributes_count: self.container.dropped_attributes_count,
                original_payload_format: self.container.original_payload_format.clone(),
                original_payload: self.container.original_payload.clone(),
                attribute_indices: attribute_indices.clone(),
            })
            .collect();
        for (n, sample) in profile.sample.iter().enumerate() {
            let converted = self
                .sample(sample, out.len())
                .map_err(|e| format!("profile.sample[{n}]: {e}"))?;
            for (profile, sample) in out.iter_mut().zip(converted) {
                profile.samples.push(sample);
            }
        }
        Ok(out)
    }

    /// Every sample type gets its own copy of the samples' attributes and timestamps and of
    /// the container's attributes and payload: refuse containers whose copies would be out
    /// of proportion to their size (many sample types and long lists), to bound memory.
    fn check_expansion(&self) -> Result<(), String> {
        let (c, p) = (self.container, self.profile);
        let per_type = p.sample.iter().fold(
            c.attributes.len().saturating_add(c.original_payload.len()),
            |n, s| n.saturating_add(s.attributes.len() + s.label.len() + s.timestamps_unix_nano.len() + 2),
        );
        let copies = per_type.saturating_mul(p.sample_type.len());
        let size = c.encoded_len();
        let limit = size.saturating_mul(MAX_EXPANSION).saturating_add(1 << 16);
        if copies > limit {
            return Err(format!(
                "splitting the profile into its {} sample types would copy {copies} entries, more than \
                 {MAX_EXPANSION} times the container's {size} bytes",
                p.sample_type.len()
            ));
        }
        Ok(())
    }

    fn value_type(
        &mut self,
        t: &x::ValueType,
        at: &str,
    ) -> Result<stackhouse_proto::otlp_profiles::ValueType, String> {
        let type_ = self.string(t.r#type, || format!("{at}.type"))?;
        let unit = self.string(t.unit, || format!("{at}.unit"))?;
        Ok(self.b.value_type(type_, unit))
    }

    fn time(&self) -> Result<(u64, u64), String> {
        let (c, p) = (self.container, self.profile);
        if c.start_time_unix_nano != 0 {
            let duration = match c.end_time_unix_nano {
                0 => u64::try_from(p.duration_nanos).unwrap_or(0),
                end => end.checked_sub(c.start_time_unix_nano).ok_or_else(|| {
                    format!(
                        "end_time_unix_nano {end} is before start_time_unix_nano {}",
                        c.start_time_unix_nano
                    )
                })?,
            };
            return Ok((c.start_time_unix_nano, duration));
        }
        let time = u64::try_from(p.time_nanos)
            .map_err(|_| format!("profile.time_nanos {} is negative", p.time_nanos))?;
        let duration = u64::try_from(p.duration_nanos)
            .map_err(|_| format!("profile.duration_nanos {} is negative", p.duration_nanos))?;
        Ok((time, duration))
    }

    /// One converted sample per sample type.
    fn sample(&mut self, sample: &x::Sample, types: usize) -> Result<Vec<Sample>, String> {
        let stack = self.stack(sample)?;
        let stack_index = if stack.is_empty() { 0 } else { self.b.stack(&stack) };
        let mut link = self.link(sample.link)?;
        let mut attr_link = LinkIds::default();
        let mut attribute_indices = Vec::with_capacity(sample.attributes.len() + sample.label.len());
        for kv in self.attribute_refs(&sample.attributes, || "attributes".into())? {
            let value = kv.value.as_ref().and_then(|v| v.value.as_ref());
            match kv.key.as_str() {
                "trace_id" => attr_link.trace_id = id_value(value, 16, "trace_id attribute")?,
                "span_id" => attr_link.span_id = id_value(value, 8, "span_id attribute")?,
                key => {
                    let unit = self.units.get(key).copied().unwrap_or("");
                    attribute_indices.push(intern_value(self.b, self.extra, key, kv.value.as_ref(), unit));
                }
            }
        }
        for (l, label) in sample.label.iter().enumerate() {
            let at = |f: &str| format!("label[{l}].{f}");
            let key = self.string(label.key, || at("key"))?;
            if label.str != 0 {
                let value = self.string(label.str, || at("str"))?;
                let string = Value::StringValue(value.to_string());
                match key {
                    "trace_id" => attr_link.trace_id = id_value(Some(&string), 16, "trace_id label")?,
                    "span_id" => attr_link.span_id = id_value(Some(&string), 8, "span_id label")?,
                    _ => attribute_indices.push(self.b.attribute_str(key, value)),
                }
            } else {
                let unit = self.string(label.num_unit, || at("num_unit"))?;
                attribute_indices.push(self.b.attribute_int(key, label.num, unit));
            }
        }
        if attr_link != LinkIds::default() {
            if link != LinkIds::default() && link != attr_link {
                return Err(format!(
                    "link {} and its trace_id/span_id attributes name different spans",
                    sample.link
                ));
            }
            link = attr_link;
        }
        let link_index = self.b.link(&link.trace_id, &link.span_id);
        let timestamps = &sample.timestamps_unix_nano;
        let values: Vec<Vec<i64>> = match (sample.value.len(), timestamps.len()) {
            (0, t) if t > 0 => vec![Vec::new(); types],
            (v, t) if v == types && t <= 1 => sample.value.iter().map(|&v| vec![v]).collect(),
            (v, _) if v != types => {
                return Err(format!("has {v} values but the profile has {types} sample types"));
            }
            (_, t) => {
                return Err(format!(
                    "has one value per sample type and {t} timestamps: v1experimental does not say how a \
                     value divides among several timestamps"
                ));
            }
        };
        Ok(values
            .into_iter()
            .map(|values| Sample {
                stack_index,
                attribute_indices: attribute_indices.clone(),
                link_index,
                values,
                timestamps_unix_nano: timestamps.clone(),
            })
            .collect())
    }

    /// Builder location indices, leaf first.
    fn stack(&self, sample: &x::Sample) -> Result<Vec<i32>, String> {
        let p = self.profile;
        if sample.locations_length == 0 {
            return (sample.location_index.iter().enumerate())
                .map(|(n, &i)| {
                    usize::try_from(i)
                        .ok()
                        .and_then(|i| self.locations.get(i).copied())
                        .ok_or_else(|| {
                            out_of_range(
                                &format!("location_index[{n}]"),
                                i,
                                "profile.location",
                                p.location.len(),
                            )
                        })
                })
                .collect();
        }
        let (start, len) = (sample.locations_start_index, sample.locations_length);
        let (table, name) = if p.location_indices.is_empty() {
            (p.location.len(), "profile.location")
        } else {
            (p.location_indices.len(), "profile.location_indices")
        };
        let end = start.checked_add(len).filter(|&end| end <= table as u64).ok_or_else(|| {
            format!("locations_start_index {start} + locations_length {len} is beyond {name} ({table} entries)")
        })?;
        // Root first in the slice (see the module documentation): reversed into leaf first.
        (start as usize..end as usize)
            .rev()
            .map(|k| {
                let i = if p.location_indices.is_empty() {
                    k as i64
                } else {
                    p.location_indices[k]
                };
                usize::try_from(i)
                    .ok()
                    .and_then(|i| self.locations.get(i).copied())
                    .ok_or_else(|| {
                        out_of_range(
                            &format!("profile.location_indices[{k}]"),
                            i,
                            "profile.location",
                            p.location.len(),
                        )
                    })
            })
            .collect()
    }

    fn link(&self, index: u64) -> Result<LinkIds, String> {
        let table = &self.profile.link_table;
        if table.is_empty() {
            return match index {
                0 => Ok(LinkIds::default()),
                i => Err(out_of_range("link", i, "profile.link_table", 0)),
            };
        }
        let link = usize::try_from(index)
            .ok()
            .and_then(|i| table.get(i))
            .ok_or_else(|| out_of_range("link", index, "profile.link_table", table.len()))?;
        let ids = LinkIds {
            trace_id: link.trace_id.clone(),
            span_id: link.span_id.clone(),
        };
        if ![0, 16].contains(&ids.trace_id.len()) || ![0, 8].contains(&ids.span_id.len()) {
            return Err(format!(
                "profile.link_table[{index}] has a {}-byte trace_id and a {}-byte span_id (expected 16 and 8)",
                ids.trace_id.len(),
                ids.span_id.len()
            ));
        }
        Ok(ids)
    }
}

/// A trace or span id from an attribute value: bytes, or a hex string (`0x` optional).
fn id_value(value: Option<&Value>, len: usize, what: &str) -> Result<Vec<u8>, String> {
    let id = match value {
        Some(Value::BytesValue(b)) => b.clone(),
        Some(Value::StringValue(s)) => {
            let hex_digits = s.strip_prefix("0x").unwrap_or(s);
            hex::decode(hex_digits).map_err(|e| format!("{what} {s:?} is not hex: {e}"))?
        }
        _ => return Err(format!("{what} must be bytes or a hex string")),
    };
    if id.len() != len {
        return Err(format!("{what} must be {len} bytes, got {}", id.len()));
    }
    Ok(id)
}

fn out_of_range(field: &str, index: impl std::fmt::Display, table: &str, len: usize) -> String {
    format!("{field} {index} out of range ({table} has {len} entries)")
}

#[cfg(test)]
mod tests;
