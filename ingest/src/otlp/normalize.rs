//! Converts validated OTLP profiles into the normalized [`Batch`]: dictionary entries
//! become content-addressed symbols, samples become rows of a series.

use std::collections::BTreeMap;

use stackhouse_proto::otlp_collector::ExportProfilesServiceRequest;
use stackhouse_proto::otlp_common::{InstrumentationScope, KeyValue};
use stackhouse_proto::otlp_profiles::{Profile, ValueType};
use stackhouse_storage::model::{
    self, AttributeSet, Batch, FastMap, Labels, ProfileRecord, ProfileType, SampleRow, Series, SymbolId,
    path_key,
};
use stackhouse_storage::symbols::{KnownReader, KnownSymbols};

use super::attributes::{dictionary_pair, key_value_pair, value_string};
use super::dictionary::{Dictionary, LocationRef};
use super::samples::{self, SampleList};
pub use super::validate::RequestError;
use super::validate::{Limits, ProfileError, TRUNCATED_FRAME, Validator, check_dictionary};
use crate::relabel::Rules;
use crate::sampling;
use crate::usage::{SeriesUsage, UsageGroups};

/// Enough to tell a sender what is wrong without letting a request of thousands of bad
/// profiles build an enormous error message.
pub const MAX_ERROR_MESSAGES: usize = 100;

/// Mapping attributes that carry a build id, most specific first.
const BUILD_ID_KEYS: [&str; 4] = [
    "process.executable.build_id.gnu",
    "process.executable.build_id.htlhash",
    "process.executable.build_id.go",
    "process.executable.build_id.profiling",
];

/// What one request contributed; rejected profiles contributed nothing to `batch`.
#[derive(Debug)]
pub struct Normalized {
    pub batch: Batch,
    pub accepted_profiles: usize,
    pub rejected_profiles: usize,
    /// One message per rejected profile, naming its position; at most
    /// [`MAX_ERROR_MESSAGES`] (`rejected_profiles` is always exact).
    pub errors: Vec<String>,
    /// Distinct stacks cut to [`Limits::max_stack_depth`].
    pub truncated_stacks: usize,
    /// Profiles the tenant's relabel rules dropped (counted in `rejected_profiles` too).
    pub relabeled_profiles: usize,
    /// Per usage group, the profiles and samples sampling left out: acknowledged, not
    /// stored, not rejected.
    pub sampled_out: BTreeMap<String, (u64, u64)>,
    /// Per series stored, its usage groups and rows; empty when the tenant has no groups.
    pub series_usage: FastMap<i64, SeriesUsage>,
}

/// Decides whether a profile may create its series: the per-tenant series limit.
pub trait SeriesAdmission {
    /// `Err` says why `series` may not be stored. Called for every accepted profile, also
    /// of series stored before, and only once the rest of the profile is valid.
    fn admit(&mut self, series: &Series) -> Result<(), String>;
}

/// No series limit.
pub struct AnySeries;

impl SeriesAdmission for AnySeries {
    fn admit(&mut self, _: &Series) -> Result<(), String> {
        Ok(())
    }
}

pub fn normalize(
    tenant: &str,
    request: &ExportProfilesServiceRequest,
    received_at_nanos: i64,
) -> Result<Normalized, RequestError> {
    let tenant_state = Tenant {
        limits: &Limits::NONE,
        series: &mut AnySeries,
        relabel: &crate::relabel::NO_RULES,
        usage: &crate::usage::NO_GROUPS,
        known: &KnownSymbols::default(),
    };
    normalize_within(
        tenant,
        request,
        &Dictionary::of(request),
        received_at_nanos,
        tenant_state,
    )
}

/// What normalizing a request of one tenant consults besides the request.
pub struct Tenant<'t> {
    pub limits: &'t Limits,
    pub series: &'t mut dyn SeriesAdmission,
    /// The tenant's relabel rules, applied to every series before it is admitted.
    pub relabel: &'t Rules,
    /// The tenant's usage groups, whose sampling rates apply here.
    pub usage: &'t UsageGroups,
    /// What the tenant has stored: a stack or location found here brings no symbols into
    /// the batch.
    pub known: &'t KnownSymbols,
}

/// [`normalize`] holding every profile to a tenant's limits and series admission, and
/// leaving out the stack nodes the tenant has stored. `dict` is the request's dictionary
/// ([`Dictionary::of`] the request, or as the receiver decoded it from the wire); the
/// request's own `dictionary` field is not read, nor are its profiles' samples when `dict`
/// holds them ([`Dictionary::samples`]).
pub fn normalize_within(
    tenant: &str,
    request: &ExportProfilesServiceRequest,
    dict: &Dictionary,
    received_at_nanos: i64,
    state: Tenant<'_>,
) -> Result<Normalized, RequestError> {
    check_dictionary(dict)?;
    let limits = state.limits;
    let mut validator = Validator::new(dict).within(limits.window);
    let mut interner = Interner::new(dict, state);
    let mut out = Normalized {
        batch: Batch::new(tenant),
        accepted_profiles: 0,
        rejected_profiles: 0,
        errors: Vec::new(),
        truncated_stacks: 0,
        relabeled_profiles: 0,
        sampled_out: BTreeMap::new(),
        series_usage: FastMap::default(),
    };
    // The interner holds its known-symbol reader for the whole request, so every lookup
    // it makes reads this one generation.
    out.batch.known_generation = Some(interner.known.generation());
    let flat = dict.samples();
    // Profiles in request order, as the flat samples are counted.
    let mut index = 0;
    for (r, resource_profiles) in request.resource_profiles.iter().enumerate() {
        let resource = resource_profiles
            .resource
            .as_ref()
            .map_or(&[][..], |r| &r.attributes);
        // Shared by every profile of the resource; string conversion is safe before
        // validation (an index out of range reads as "").
        let resource_labels = interner.resource_labels(resource);
        for (s, scope_profiles) in resource_profiles.scope_profiles.iter().enumerate() {
            let scope = scope_profiles.scope.as_ref();
            for (p, profile) in scope_profiles.profiles.iter().enumerate() {
                let samples = samples::of(flat, index, profile);
                index += 1;
                // Validating first keeps a rejected profile from adding anything at all.
                let added = validator
                    .check_profile(resource, scope, profile, samples)
                    .and_then(|()| {
                        interner.add_profile(
                            &mut out.batch,
                            &resource_labels,
                            scope,
                            profile,
                            samples,
                            received_at_nanos,
                        )
                    });
                match added {
                    Ok(true) => out.accepted_profiles += 1,
                    Ok(false) => {}
                    Err(e) => {
                        out.rejected_profiles += 1;
                        if out.errors.len() < MAX_ERROR_MESSAGES {
                            out.errors.push(format!(
                                "resource_profiles[{r}].scope_profiles[{s}].profiles[{p}]: {e}"
                            ));
                        }
                    }
                }
            }
        }
    }
    out.truncated_stacks = interner.truncated_stacks;
    out.relabeled_profiles = interner.relabeled;
    out.sampled_out = interner.sampled_out;
    out.series_usage = interner.series_usage;
    Ok(out)
}

/// A sample's trace and span id, each `None` when not set.
type SampleLink = (Option<[u8; 16]>, Option<[u8; 8]>);

/// Index 0 of a table is its zero value, also when the sender omitted the table.
const ZERO_LOCATION: LocationRef<'static> = LocationRef {
    mapping_index: 0,
    address: 0,
    lines: &[],
    attribute_indices: &[],
};

/// Maps each dictionary index to its symbol id at most once per request: the dictionary is
/// shared by every profile of the request, and hashing content is the expensive part.
/// Only validated entries are interned, so every cached id has its symbol in the batch.
struct Interner<'a, 'l> {
    dict: &'a Dictionary,
    limits: &'l Limits,
    series: &'l mut dyn SeriesAdmission,
    relabel: &'l Rules,
    /// Profiles the relabel rules dropped.
    relabeled: usize,
    usage: &'l UsageGroups,
    /// Per usage group, profiles and samples sampled out.
    sampled_out: BTreeMap<String, (u64, u64)>,
    series_usage: FastMap<i64, SeriesUsage>,
    known: KnownReader<'l>,
    truncated_stacks: usize,
    /// The marker frame of truncated stacks, once interned.
    truncated_frame: Option<SymbolId>,
    functions: Vec<Option<SymbolId>>,
    mappings: Vec<Option<SymbolId>>,
    locations: Vec<Option<SymbolId>>,
    /// Content keys of the request's locations: a stored stack is found by its frames'
    /// keys alone, so the locations of known stacks are never looked up one by one.
    location_keys: Vec<Option<u128>>,
    stacks: Vec<Option<SymbolId>>,
    attr_sets: FastMap<&'a [i32], SymbolId>,
    /// Reused buffers for the frame keys and the location ids of one stack.
    frame_keys: Vec<SymbolId>,
    path: Vec<SymbolId>,
    /// Reused buffer for the content of one location.
    content: Vec<u8>,
}

/// Validation checks every index before interning reads it; this check stays so that a
/// gap in validation refuses the profile instead of panicking the request.
fn slot(index: i32, len: usize, table: &'static str) -> Result<usize, ProfileError> {
    usize::try_from(index)
        .ok()
        .filter(|&i| i < len.max(1))
        .ok_or_else(|| out_of_range(index, table, len))
}

/// Entry `index` of `table`, the zero value for index 0 of an empty table.
fn entry_or_zero<T: Copy + Default>(table: &[T], index: i32, name: &'static str) -> Result<T, ProfileError> {
    let i = slot(index, table.len(), name)?;
    Ok(table.get(i).copied().unwrap_or_default())
}

/// Entry `index` of `table`, which must exist (index 0 included).
fn entry<'t, T>(table: &'t [T], index: i32, name: &'static str) -> Result<&'t T, ProfileError> {
    table
        .get(slot(index, table.len(), name)?)
        .ok_or_else(|| out_of_range(index, name, table.len()))
}

fn out_of_range(index: i32, table: &'static str, len: usize) -> ProfileError {
    ProfileError::IndexOutOfRange {
        field: "index",
        index: index.into(),
        table,
        len,
    }
}

fn cache(len: usize) -> Vec<Option<SymbolId>> {
    vec![None; len.max(1)]
}

impl<'a, 'l> Interner<'a, 'l> {
    fn new(dict: &'a Dictionary, tenant: Tenant<'l>) -> Self {
        Interner {
            dict,
            limits: tenant.limits,
            series: tenant.series,
            relabel: tenant.relabel,
            relabeled: 0,
            usage: tenant.usage,
            sampled_out: BTreeMap::new(),
            series_usage: FastMap::default(),
            known: tenant.known.reader(),
            truncated_stacks: 0,
            truncated_frame: None,
            functions: cache(dict.functions().len()),
            mappings: cache(dict.mappings().len()),
            locations: cache(dict.locations_len()),
            location_keys: vec![None; dict.locations_len().max(1)],
            stacks: cache(dict.stacks_len()),
            attr_sets: FastMap::default(),
            frame_keys: Vec::new(),
            path: Vec::new(),
            content: Vec::new(),
        }
    }

    fn str(&self, index: i32) -> &'a str {
        self.dict.string(index)
    }

    fn add_profile(
        &mut self,
        batch: &mut Batch,
        resource: &Labels,
        scope: Option<&InstrumentationScope>,
        profile: &'a Profile,
        samples: SampleList<'a>,
        received_at_nanos: i64,
    ) -> Result<bool, ProfileError> {
        let attributes = self.profile_attributes(profile)?;
        let profile_type = ProfileType {
            sample_type: self.value_type_part(profile.sample_type, |t| t.type_strindex),
            sample_unit: self.value_type_part(profile.sample_type, |t| t.unit_strindex),
            period_type: self.value_type_part(profile.period_type, |t| t.type_strindex),
            period_unit: self.value_type_part(profile.period_type, |t| t.unit_strindex),
        };
        let mut labels = self.labels(resource, scope, &attributes);
        if !self.relabel.is_empty() {
            labels = self.relabel.apply(labels, &profile_type.id()).map_err(|rule| {
                self.relabeled += 1;
                ProfileError::Relabeled {
                    rule,
                    action: self.relabel.rule(rule).map_or("?", |r| r.action()),
                }
            })?;
        }
        let profile_id = nonzero_id::<16>(&profile.profile_id);
        // Validated: both fit in i64 and so does their sum.
        let start = profile.time_unix_nano as i64;
        let time = if start == 0 { received_at_nanos } else { start };
        let membership = if self.usage.is_empty() {
            Default::default()
        } else {
            self.usage.membership(&labels)
        };
        // The lowest rate of the usage groups the series is in.
        let sampled = self
            .usage
            .of(membership)
            .filter(|g| g.sample_rate < 1.0)
            .min_by(|a, b| a.sample_rate.total_cmp(&b.sample_rate))
            .map(|g| (g.sample_rate, g.name.clone()));
        let rate = sampled.as_ref().map_or(1.0, |(rate, _)| *rate);
        if let Some((rate, group)) = sampled {
            let key = match profile_id {
                Some(id) => id.to_vec(),
                None => [
                    Series::id_of(&profile_type, &labels).to_le_bytes(),
                    time.to_le_bytes(),
                ]
                .concat(),
            };
            if !sampling::kept(rate, &key) {
                let out = self.sampled_out.entry(group).or_default();
                out.0 += 1;
                out.1 += samples.len() as u64;
                return Ok(false);
            }
            labels.insert(sampling::SAMPLE_RATE_LABEL.to_string(), rate.to_string());
        }
        let series = Series::new(profile_type, labels, profile.period);
        let labels = series.labels.len();
        if self.limits.max_label_names > 0 && labels > self.limits.max_label_names {
            return Err(ProfileError::TooManyLabels {
                count: labels,
                max: self.limits.max_label_names,
            });
        }
        let series_id = series.id;
        let rows_before = batch.samples.len();
        // A refused profile leaves no rows and no series behind; symbols it interned are
        // content-addressed and harmless unreferenced.
        let added = self
            .add_samples(batch, samples, series_id, profile_id, time, rate)
            .and_then(|()| self.series.admit(&series).map_err(ProfileError::SeriesRefused));
        if let Err(e) = added {
            batch.samples.truncate(rows_before);
            return Err(e);
        }
        batch.add_series(series);
        if !self.usage.is_empty() {
            let usage = self.series_usage.entry(series_id).or_insert(SeriesUsage {
                membership,
                samples: 0,
            });
            usage.samples += (batch.samples.len() - rows_before) as u64;
        }
        if let Some(profile_id) = profile_id {
            batch.profiles.push(ProfileRecord {
                profile_id,
                series_id,
                start_nanos: time,
                end_nanos: time.saturating_add(profile.duration_nano as i64),
                sample_count: (batch.samples.len() - rows_before) as i64,
                resource: resource.clone(),
                attributes,
            });
        }
        Ok(true)
    }

    fn add_samples(
        &mut self,
        batch: &mut Batch,
        samples: SampleList<'a>,
        series_id: i64,
        profile_id: Option<[u8; 16]>,
        time: i64,
        rate: f64,
    ) -> Result<(), ProfileError> {
        // At least a row per sample: growing the batch's rows by doubling copied them
        // over and over.
        batch.samples.reserve(samples.len());
        for sample in samples.iter() {
            let stack_id = self.stack(batch, sample.stack_index)?;
            let attr_set_id = self.attr_set(batch, sample.attribute_indices)?;
            let (trace_id, span_id) = self.link(sample.link_index)?;
            let row = |time_nanos, value| SampleRow {
                time_nanos,
                series_id,
                stack_id,
                value: sampling::scaled(value, rate),
                attr_set_id,
                trace_id,
                span_id,
                profile_id,
            };
            let timestamps = sample.timestamps_unix_nano.iter().map(|&t| t as i64);
            match (sample.values.is_empty(), sample.timestamps_unix_nano.is_empty()) {
                (false, false) => batch
                    .samples
                    .extend(timestamps.zip(sample.values).map(|(t, &v)| row(t, v))),
                (true, false) => batch.samples.extend(timestamps.map(|t| row(t, 1))),
                (false, true) => batch.samples.extend(sample.values.iter().map(|&v| row(time, v))),
                (true, true) => {}
            }
        }
        Ok(())
    }

    fn value_type_part(&self, value_type: Option<ValueType>, part: fn(&ValueType) -> i32) -> String {
        value_type.map_or("", |t| self.str(part(&t))).to_string()
    }

    /// Series labels: resource, then scope, then profile attributes; the more specific one
    /// wins a key.
    fn labels(&self, resource: &Labels, scope: Option<&InstrumentationScope>, attributes: &Labels) -> Labels {
        let mut labels = resource.clone();
        if let Some(scope) = scope {
            if !scope.name.is_empty() {
                insert_label(&mut labels, ("otel.scope.name".to_string(), scope.name.clone()));
            }
            for kv in &scope.attributes {
                insert_label(&mut labels, key_value_pair(kv, self.dict));
            }
        }
        labels.extend(attributes.iter().map(|(k, v)| (k.clone(), v.clone())));
        labels
    }

    fn resource_labels(&self, resource: &[KeyValue]) -> Labels {
        let mut labels = Labels::new();
        for kv in resource {
            insert_label(&mut labels, key_value_pair(kv, self.dict));
        }
        labels
    }

    /// The profile's own attributes (`Profile.attribute_indices`, validated in range).
    fn profile_attributes(&self, profile: &Profile) -> Result<Labels, ProfileError> {
        let mut labels = Labels::new();
        for &i in profile.attribute_indices.iter().filter(|&&i| i != 0) {
            let attribute = entry(self.dict.attributes(), i, "attribute_table")?;
            insert_label(&mut labels, dictionary_pair(attribute, self.dict));
        }
        Ok(labels)
    }

    fn attr_set(&mut self, batch: &mut Batch, indices: &'a [i32]) -> Result<SymbolId, ProfileError> {
        if indices.is_empty() {
            return Ok(SymbolId::ZERO);
        }
        if let Some(&id) = self.attr_sets.get(indices) {
            return Ok(id);
        }
        let mut pairs = Vec::with_capacity(indices.len());
        for &i in indices.iter().filter(|&&i| i != 0) {
            let pair = dictionary_pair(entry(self.dict.attributes(), i, "attribute_table")?, self.dict);
            if !pair.0.is_empty() {
                pairs.push(pair);
            }
        }
        let id = batch.add_attr_set(AttributeSet::new(pairs));
        self.attr_sets.insert(indices, id);
        Ok(id)
    }

    fn link(&self, index: i32) -> Result<SampleLink, ProfileError> {
        let i = slot(index, self.dict.links_len(), "link_table")?;
        Ok(match self.dict.link(i).filter(|_| i != 0) {
            Some((trace_id, span_id)) => (nonzero_id(trace_id), nonzero_id(span_id)),
            None => (None, None),
        })
    }

    fn stack(&mut self, batch: &mut Batch, index: i32) -> Result<SymbolId, ProfileError> {
        let dict = self.dict;
        let i = slot(index, dict.stacks_len(), "stack_table")?;
        if i == 0 {
            return Ok(SymbolId::ZERO);
        }
        if let Some(id) = self.stacks[i] {
            return Ok(id);
        }
        let locations = dict
            .stack(i)
            .ok_or_else(|| out_of_range(index, "stack_table", dict.stacks_len()))?;
        let mut keys = std::mem::take(&mut self.frame_keys);
        let found = self.stack_keyed(batch, locations, &mut keys);
        self.frame_keys = keys;
        let id = found?;
        self.stacks[i] = Some(id);
        Ok(id)
    }

    /// The leaf node of the call path `locations` (leaf first), found by its frames'
    /// content keys among the stored paths, or else built from the locations' ids.
    fn stack_keyed(
        &mut self,
        batch: &mut Batch,
        locations: &[i32],
        keys: &mut Vec<SymbolId>,
    ) -> Result<SymbolId, ProfileError> {
        keys.clear();
        for &location in locations {
            let key = self.location_key(batch, location)?;
            keys.push(SymbolId(key.to_le_bytes()));
        }
        let max = self.limits.max_stack_depth;
        // Leaf-first: the root-most frames are at the end. Keep `max - 1` root-most frames
        // and the marker in the leaf's place; the marker's id is its key.
        let truncated = max > 0 && locations.len() > max;
        let kept = if truncated {
            let marker = self.truncated_frame(batch);
            keys.drain(..locations.len() - max);
            keys[0] = marker;
            self.truncated_stacks += 1;
            &locations[locations.len() - max + 1..]
        } else {
            locations
        };
        let key = path_key(keys, &mut self.content);
        if let Some(id) = self.known.path(key) {
            return Ok(id);
        }
        let mut path = std::mem::take(&mut self.path);
        path.clear();
        if truncated {
            path.push(self.truncated_frame(batch));
        }
        let mut built = Ok(());
        for &location in kept {
            match self.location(batch, location) {
                Ok(id) => path.push(id),
                Err(e) => {
                    built = Err(e);
                    break;
                }
            }
        }
        let id = built.map(|()| batch.add_stack(&path));
        self.path = path;
        let id = id?;
        batch.path_keys.insert(key, id);
        Ok(id)
    }

    fn truncated_frame(&mut self, batch: &mut Batch) -> SymbolId {
        *self.truncated_frame.get_or_insert_with(|| {
            let function_id = batch.add_function(model::Function {
                name: TRUNCATED_FRAME.to_string(),
                ..model::Function::default()
            });
            batch.add_location(model::Location {
                mapping_id: SymbolId::ZERO,
                address: 0,
                lines: vec![model::Line {
                    function_id,
                    line: 0,
                    column: 0,
                }],
            })
        })
    }

    fn location(&mut self, batch: &mut Batch, index: i32) -> Result<SymbolId, ProfileError> {
        let dict = self.dict;
        let i = slot(index, dict.locations_len(), "location_table")?;
        if let Some(id) = self.locations[i] {
            return Ok(id);
        }
        let key = self.location_key(batch, index)?;
        if let Some(id) = self.known.location(key) {
            self.locations[i] = Some(id);
            return Ok(id);
        }
        let location = dict.location(i).unwrap_or(ZERO_LOCATION);
        let mapping_id = self.mapping(batch, location.mapping_index)?;
        let mut lines = Vec::with_capacity(location.lines.len());
        for line in location.lines {
            lines.push(model::Line {
                function_id: self.function(batch, line.function_index)?,
                line: line.line,
                column: line.column,
            });
        }
        let id = batch.add_location(model::Location {
            mapping_id,
            address: location.address,
            lines,
        });
        batch.location_keys.insert(key, id);
        self.locations[i] = Some(id);
        Ok(id)
    }

    /// One hash over everything a location's id is made of, read straight from the
    /// request: no string is copied and no function id computed. Computed once per
    /// location of the request.
    fn location_key(&mut self, batch: &mut Batch, index: i32) -> Result<u128, ProfileError> {
        let dict = self.dict;
        let i = slot(index, dict.locations_len(), "location_table")?;
        if let Some(key) = self.location_keys[i] {
            return Ok(key);
        }
        let location = dict.location(i).unwrap_or(ZERO_LOCATION);
        let mapping_id = self.mapping(batch, location.mapping_index)?;
        let buf = &mut self.content;
        buf.clear();
        buf.extend_from_slice(&mapping_id.0);
        buf.extend_from_slice(&location.address.to_le_bytes());
        for line in location.lines {
            let function = entry_or_zero(dict.functions(), line.function_index, "function_table")?;
            for index in [
                function.name_strindex,
                function.system_name_strindex,
                function.filename_strindex,
            ] {
                let s = dict.string(index);
                buf.extend_from_slice(&(s.len() as u64).to_le_bytes());
                buf.extend_from_slice(s.as_bytes());
            }
            for v in [function.start_line, line.line, line.column] {
                buf.extend_from_slice(&v.to_le_bytes());
            }
        }
        let key = xxhash_rust::xxh3::xxh3_128(buf);
        self.location_keys[i] = Some(key);
        Ok(key)
    }

    fn mapping(&mut self, batch: &mut Batch, index: i32) -> Result<SymbolId, ProfileError> {
        let i = slot(index, self.dict.mappings().len(), "mapping_table")?;
        if i == 0 {
            return Ok(SymbolId::ZERO);
        }
        if let Some(id) = self.mappings[i] {
            return Ok(id);
        }
        let mapping = entry(self.dict.mappings(), index, "mapping_table")?;
        let id = batch.add_mapping(model::Mapping {
            memory_start: mapping.memory_start,
            memory_limit: mapping.memory_limit,
            file_offset: mapping.file_offset,
            filename: self.str(mapping.filename_strindex).to_string(),
            build_id: self.build_id(&mapping.attribute_indices)?,
        });
        self.mappings[i] = Some(id);
        Ok(id)
    }

    fn build_id(&self, attribute_indices: &[i32]) -> Result<String, ProfileError> {
        let mut attributes = Vec::with_capacity(attribute_indices.len());
        for &i in attribute_indices.iter().filter(|&&i| i != 0) {
            attributes.push(entry(self.dict.attributes(), i, "attribute_table")?);
        }
        Ok(BUILD_ID_KEYS
            .iter()
            .find_map(|&key| attributes.iter().find(|a| self.str(a.key_strindex) == key))
            .map(|a| value_string(a.value.as_ref(), self.dict))
            .unwrap_or_default())
    }

    fn function(&mut self, batch: &mut Batch, index: i32) -> Result<SymbolId, ProfileError> {
        let i = slot(index, self.dict.functions().len(), "function_table")?;
        if let Some(id) = self.functions[i] {
            return Ok(id);
        }
        let function = self.dict.functions().get(i).copied().unwrap_or_default();
        let id = batch.add_function(model::Function {
            name: self.str(function.name_strindex).to_string(),
            system_name: self.str(function.system_name_strindex).to_string(),
            filename: self.str(function.filename_strindex).to_string(),
            start_line: function.start_line,
        });
        self.functions[i] = Some(id);
        Ok(id)
    }
}

/// A later attribute overrides an earlier one of the same key; one without a key is
/// dropped, since it cannot be selected on.
fn insert_label(labels: &mut Labels, (key, value): (String, String)) {
    if !key.is_empty() {
        labels.insert(key, value);
    }
}

/// Ids are validated to be empty or exactly `N` bytes; all-zero means "not set" in OTLP.
fn nonzero_id<const N: usize>(bytes: &[u8]) -> Option<[u8; N]> {
    <[u8; N]>::try_from(bytes)
        .ok()
        .filter(|id| id.iter().any(|&b| b != 0))
}
