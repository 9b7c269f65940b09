//! Structural checks of a decoded request before anything is normalized: every dictionary
//! reference in bounds, ids of the right length, sample shapes consistent, times
//! representable. Normalization relies on these checks and does not repeat them.

use super::dictionary::{Dictionary, LocationRef};
use super::samples::{SampleList, SampleRef};
use stackhouse_proto::otlp_common::{AnyValue, InstrumentationScope, KeyValue, any_value::Value};
use stackhouse_proto::otlp_profiles::{Function, KeyValueAndUnit, Mapping, Profile};

/// Problems that make the whole request meaningless, because every profile shares the
/// dictionary.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum RequestError {
    #[error("dictionary.string_table[0] must be the empty string, got {0:?}")]
    NonEmptyFirstString(String),
    #[error("dictionary.{0}[0] must be the zero value")]
    NonZeroFirstEntry(&'static str),
}

/// Why one profile was rejected; the other profiles of the request are unaffected.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ProfileError {
    #[error("{field} {index} out of range ({table} has {len} entries)")]
    IndexOutOfRange {
        field: &'static str,
        index: i64,
        table: &'static str,
        len: usize,
    },
    #[error("{field} must be empty or {expected} bytes, got {len}")]
    IdLength {
        field: &'static str,
        expected: usize,
        len: usize,
    },
    #[error("unknown profile type: sample_type has no type name")]
    UnknownProfileType,
    #[error("values has {values} entries but timestamps_unix_nano has {timestamps}")]
    ShapeMismatch { values: usize, timestamps: usize },
    #[error("{field} {value} does not fit in a signed 64-bit nanosecond time")]
    TimeOutOfRange { field: &'static str, value: u64 },
    #[error("time_unix_nano {time} + duration_nano {duration} overflows a signed 64-bit nanosecond time")]
    DurationOverflow { time: u64, duration: u64 },
    #[error(
        "{field} {time} is older than the tenant's retention allows (oldest accepted now: {oldest}); \
         it would be deleted at the next retention run"
    )]
    TooOld {
        field: &'static str,
        time: i64,
        oldest: i64,
    },
    #[error(
        "{field} {time} is too far in the future (newest accepted now: {newest}); check the sender's clock"
    )]
    TooNew {
        field: &'static str,
        time: i64,
        newest: i64,
    },
    #[error("series has {count} labels, more than the tenant's limit of {max} label names per series")]
    TooManyLabels { count: usize, max: usize },
    /// The tenant's relabel rules dropped the series (rule numbers count from 0).
    #[error("dropped by the tenant's relabel rule {rule} (action {action})")]
    Relabeled { rule: usize, action: &'static str },
    /// The series would be new and the tenant may not have more (the message says why).
    #[error("{0}")]
    SeriesRefused(String),
    #[error("{at}: {source}")]
    At { at: String, source: Box<ProfileError> },
}

trait Context<T> {
    fn at(self, at: impl FnOnce() -> String) -> Result<T, ProfileError>;
}

impl<T> Context<T> for Result<T, ProfileError> {
    // Called for every sample and table entry, nearly always with `Ok`.
    #[inline]
    fn at(self, at: impl FnOnce() -> String) -> Result<T, ProfileError> {
        self.map_err(|source| ProfileError::At {
            at: at(),
            source: Box::new(source),
        })
    }
}

pub(crate) fn check_dictionary(dict: &Dictionary) -> Result<(), RequestError> {
    if dict.strings_len() > 0 && !dict.string(0).is_empty() {
        return Err(RequestError::NonEmptyFirstString(dict.string(0).to_string()));
    }
    let zero_attribute = |a: &KeyValueAndUnit| {
        a.key_strindex == 0 && a.unit_strindex == 0 && a.value.as_ref().is_none_or(|v| v.value.is_none())
    };
    let first_is_zero = [
        (
            "mapping_table",
            dict.mappings().first().is_none_or(|m| *m == Mapping::default()),
        ),
        (
            "location_table",
            dict.location(0).is_none_or(|l| {
                l.mapping_index == 0 && l.address == 0 && l.lines.is_empty() && l.attribute_indices.is_empty()
            }),
        ),
        (
            "function_table",
            dict.functions().first().is_none_or(|f| *f == Function::default()),
        ),
        (
            "link_table",
            dict.link(0)
                .is_none_or(|(trace_id, span_id)| trace_id.is_empty() && span_id.is_empty()),
        ),
        (
            "attribute_table",
            dict.attributes().first().is_none_or(zero_attribute),
        ),
        ("stack_table", dict.stack(0).is_none_or(<[i32]>::is_empty)),
    ];
    match first_is_zero.into_iter().find(|(_, zero)| !zero) {
        Some((table, _)) => Err(RequestError::NonZeroFirstEntry(table)),
        None => Ok(()),
    }
}

/// Bounds-checks an index into a table of `len` entries. Index 0 is the zero value of
/// every table and stays valid when a sender leaves the table out entirely.
fn index(field: &'static str, index: i32, table: &'static str, len: usize) -> Result<usize, ProfileError> {
    match usize::try_from(index) {
        Ok(0) => Ok(0),
        Ok(i) if i < len => Ok(i),
        _ => Err(ProfileError::IndexOutOfRange {
            field,
            index: index.into(),
            table,
            len,
        }),
    }
}

fn id_length(field: &'static str, id: &[u8], expected: usize) -> Result<(), ProfileError> {
    if id.is_empty() || id.len() == expected {
        Ok(())
    } else {
        Err(ProfileError::IdLength {
            field,
            expected,
            len: id.len(),
        })
    }
}

fn time(field: &'static str, value: u64) -> Result<i64, ProfileError> {
    i64::try_from(value).map_err(|_| ProfileError::TimeOutOfRange { field, value })
}

/// The times a tenant may send now, inclusive: older samples would be deleted by retention
/// within a minute of being acknowledged, and times far ahead are a sender's clock bug.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TimeWindow {
    pub oldest: i64,
    pub newest: i64,
}

/// What one tenant may send, checked while normalizing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    pub window: TimeWindow,
    /// Stacks deeper than this keep their root-most frames below a [`TRUNCATED_FRAME`]
    /// marker, so the total stays right and the flame graph keeps its entry points; 0: any.
    pub max_stack_depth: usize,
    /// A profile whose series has more labels than this is refused; 0: any number.
    pub max_label_names: usize,
}

/// The function name of the frame standing for the frames cut off a too deep stack.
pub const TRUNCATED_FRAME: &str = "[truncated: stack deeper than the limit]";

impl Limits {
    pub const NONE: Limits = Limits {
        window: TimeWindow::ANY,
        max_stack_depth: 0,
        max_label_names: 0,
    };
}

impl TimeWindow {
    pub const ANY: TimeWindow = TimeWindow {
        oldest: i64::MIN,
        newest: i64::MAX,
    };

    fn check(&self, field: &'static str, time: i64) -> Result<(), ProfileError> {
        if time < self.oldest {
            return Err(ProfileError::TooOld {
                field,
                time,
                oldest: self.oldest,
            });
        }
        if time > self.newest {
            return Err(ProfileError::TooNew {
                field,
                time,
                newest: self.newest,
            });
        }
        Ok(())
    }
}

/// Checks profiles against one dictionary, remembering which dictionary entries were
/// already found valid: many profiles and samples share the same stacks.
pub(crate) struct Validator<'a> {
    dict: &'a Dictionary,
    stack_ok: Vec<bool>,
    location_ok: Vec<bool>,
    function_ok: Vec<bool>,
    mapping_ok: Vec<bool>,
    attribute_ok: Vec<bool>,
    window: TimeWindow,
}

impl<'a> Validator<'a> {
    pub(crate) fn new(dict: &'a Dictionary) -> Self {
        Validator {
            dict,
            window: TimeWindow::ANY,
            stack_ok: vec![false; dict.stacks_len()],
            location_ok: vec![false; dict.locations_len()],
            function_ok: vec![false; dict.functions().len()],
            mapping_ok: vec![false; dict.mappings().len()],
            attribute_ok: vec![false; dict.attributes().len()],
        }
    }

    /// Refuses profiles with a time outside `window`.
    pub(crate) fn within(mut self, window: TimeWindow) -> Self {
        self.window = window;
        self
    }

    pub(crate) fn check_profile(
        &mut self,
        resource_attributes: &[KeyValue],
        scope: Option<&InstrumentationScope>,
        profile: &Profile,
        samples: SampleList<'_>,
    ) -> Result<(), ProfileError> {
        for (i, kv) in resource_attributes.iter().enumerate() {
            self.key_value(kv).at(|| format!("resource.attributes[{i}]"))?;
        }
        for (i, kv) in scope.map_or(&[][..], |s| &s.attributes).iter().enumerate() {
            self.key_value(kv).at(|| format!("scope.attributes[{i}]"))?;
        }
        let sample_type = profile.sample_type.unwrap_or_default();
        self.string("type_strindex", sample_type.type_strindex)
            .at(|| "sample_type".into())?;
        self.string("unit_strindex", sample_type.unit_strindex)
            .at(|| "sample_type".into())?;
        if self.dict.string(sample_type.type_strindex).is_empty() {
            return Err(ProfileError::UnknownProfileType);
        }
        let period_type = profile.period_type.unwrap_or_default();
        self.string("type_strindex", period_type.type_strindex)
            .at(|| "period_type".into())?;
        self.string("unit_strindex", period_type.unit_strindex)
            .at(|| "period_type".into())?;
        let start = time("time_unix_nano", profile.time_unix_nano)?;
        // 0 is "not set": the profile then sits at the time it was received.
        if profile.time_unix_nano != 0 {
            self.window.check("time_unix_nano", start)?;
        }
        if i64::try_from(profile.duration_nano)
            .ok()
            .and_then(|d| start.checked_add(d))
            .is_none()
        {
            return Err(ProfileError::DurationOverflow {
                time: profile.time_unix_nano,
                duration: profile.duration_nano,
            });
        }
        id_length("profile_id", &profile.profile_id, 16)?;
        self.attributes(&profile.attribute_indices)?;
        for (n, sample) in samples.iter().enumerate() {
            self.sample(sample).at(|| format!("sample {n}"))?;
        }
        Ok(())
    }

    fn sample(&mut self, sample: SampleRef<'_>) -> Result<(), ProfileError> {
        self.stack(sample.stack_index)?;
        self.attributes(sample.attribute_indices)?;
        self.link(sample.link_index)?;
        let (values, timestamps) = (sample.values.len(), sample.timestamps_unix_nano.len());
        if values != 0 && timestamps != 0 && values != timestamps {
            return Err(ProfileError::ShapeMismatch { values, timestamps });
        }
        for &t in sample.timestamps_unix_nano {
            self.window
                .check("timestamps_unix_nano", time("timestamps_unix_nano", t)?)?;
        }
        Ok(())
    }

    fn string(&self, field: &'static str, i: i32) -> Result<usize, ProfileError> {
        index(field, i, "string_table", self.dict.strings_len())
    }

    fn stack(&mut self, i: i32) -> Result<(), ProfileError> {
        let dict = self.dict;
        let i = index("stack_index", i, "stack_table", dict.stacks_len())?;
        if i == 0 || self.stack_ok[i] {
            return Ok(());
        }
        for &location in dict.stack(i).unwrap_or_default() {
            self.location(location).at(|| format!("stack_table[{i}]"))?;
        }
        self.stack_ok[i] = true;
        Ok(())
    }

    fn location(&mut self, i: i32) -> Result<(), ProfileError> {
        let dict = self.dict;
        let i = index("location_index", i, "location_table", dict.locations_len())?;
        if i == 0 || self.location_ok[i] {
            return Ok(());
        }
        let Some(location) = dict.location(i) else {
            return Ok(());
        };
        self.location_refs(location)
            .at(|| format!("location_table[{i}]"))?;
        self.location_ok[i] = true;
        Ok(())
    }

    fn location_refs(&mut self, location: LocationRef<'_>) -> Result<(), ProfileError> {
        self.mapping(location.mapping_index)?;
        for line in location.lines {
            self.function(line.function_index)?;
        }
        self.attributes(location.attribute_indices)
    }

    fn mapping(&mut self, i: i32) -> Result<(), ProfileError> {
        let dict = self.dict;
        let i = index("mapping_index", i, "mapping_table", dict.mappings().len())?;
        if i == 0 || self.mapping_ok[i] {
            return Ok(());
        }
        let mapping = &dict.mappings()[i];
        self.string("filename_strindex", mapping.filename_strindex)
            .and_then(|_| self.attributes(&mapping.attribute_indices))
            .at(|| format!("mapping_table[{i}]"))?;
        self.mapping_ok[i] = true;
        Ok(())
    }

    fn function(&mut self, i: i32) -> Result<(), ProfileError> {
        let dict = self.dict;
        let i = index("function_index", i, "function_table", dict.functions().len())?;
        if i == 0 || self.function_ok[i] {
            return Ok(());
        }
        let f = &dict.functions()[i];
        self.string("name_strindex", f.name_strindex)
            .and_then(|_| self.string("system_name_strindex", f.system_name_strindex))
            .and_then(|_| self.string("filename_strindex", f.filename_strindex))
            .at(|| format!("function_table[{i}]"))?;
        self.function_ok[i] = true;
        Ok(())
    }

    fn attributes(&mut self, indices: &[i32]) -> Result<(), ProfileError> {
        indices.iter().try_for_each(|&i| self.attribute(i))
    }

    fn attribute(&mut self, i: i32) -> Result<(), ProfileError> {
        let dict = self.dict;
        let i = index("attribute_index", i, "attribute_table", dict.attributes().len())?;
        if i == 0 || self.attribute_ok[i] {
            return Ok(());
        }
        let attr = &dict.attributes()[i];
        self.string("key_strindex", attr.key_strindex)
            .and_then(|_| self.string("unit_strindex", attr.unit_strindex))
            .and_then(|_| self.any_value(attr.value.as_ref()))
            .at(|| format!("attribute_table[{i}]"))?;
        self.attribute_ok[i] = true;
        Ok(())
    }

    fn link(&self, i: i32) -> Result<(), ProfileError> {
        let i = index("link_index", i, "link_table", self.dict.links_len())?;
        let Some((trace_id, span_id)) = self.dict.link(i).filter(|_| i != 0) else {
            return Ok(());
        };
        id_length("trace_id", trace_id, 16).at(|| format!("link_table[{i}]"))?;
        id_length("span_id", span_id, 8).at(|| format!("link_table[{i}]"))
    }

    fn key_value(&self, kv: &KeyValue) -> Result<(), ProfileError> {
        self.string("key_strindex", kv.key_strindex)?;
        self.any_value(kv.value.as_ref())
    }

    fn any_value(&self, value: Option<&AnyValue>) -> Result<(), ProfileError> {
        match value.and_then(|v| v.value.as_ref()) {
            Some(Value::StringValueStrindex(i)) => self.string("string_value_strindex", *i).map(drop),
            Some(Value::ArrayValue(array)) => array.values.iter().try_for_each(|v| self.any_value(Some(v))),
            Some(Value::KvlistValue(list)) => list.values.iter().try_for_each(|kv| self.key_value(kv)),
            _ => Ok(()),
        }
    }
}
