//! pprof (`perftools.profiles.Profile`, raw or gzipped) into OTLP profiles: one OTLP profile
//! per sample type (and per `profile_id` label value); `trace_id`/`span_id` labels become
//! links, a `profile_id` label the profile id (see [`labels`]), other labels sample
//! attributes (string labels as strings, numeric ones as integers with their unit).
//!
//! Choices users see:
//! - invalid UTF-8 in the string table is stored with U+FFFD replacement characters rather
//!   than refusing the profile ([`decode`]);
//! - a `trace_id`/`span_id`/`profile_id` label whose value is not such an id stays a plain
//!   attribute ([`labels`]);
//! - samples whose value is 0 for a sample type are left out of that type's profile;
//! - function, location and mapping ids are looked up by id; a table with no ids at all
//!   (all 0, as the .NET profiler writes) is positional, referenced from 1;
//! - with a `previous_profile`, cumulative types ([`config::is_cumulative`]) store the
//!   positive growth per sample ([`delta`]).

mod config;
mod decode;
mod delta;
mod labels;
mod resolve;

use std::collections::HashMap;

use stackhouse_proto::otlp_profiles::{Profile, Sample, ValueType};

use crate::convert::{ConvertError, Converted, RequestBuilder, Source};
use decode::Decoded;
use resolve::Resolver;

/// The optional parts of a Pyroscope multipart upload.
#[derive(Clone, Copy, Debug, Default)]
pub struct PprofOptions<'a> {
    /// The previous cumulative profile: cumulative sample types are stored as the difference.
    pub previous: Option<&'a [u8]>,
    /// Pyroscope's `sample_type_config` JSON.
    pub sample_type_config: Option<&'a [u8]>,
}

/// `data` and `previous` may be gzipped; neither may inflate past `limit` bytes.
pub fn convert(
    data: &[u8],
    options: &PprofOptions<'_>,
    source: &Source,
    limit: usize,
    builder: &mut RequestBuilder,
) -> Result<Converted, ConvertError> {
    let config = config::parse(options.sample_type_config)?;
    let current = decode::decode(data, limit, "")?;
    let previous = match options.previous.filter(|p| !p.is_empty()) {
        Some(p) => Some(decode::decode(p, limit, "previous_profile: ")?),
        None => None,
    };
    let n_types = current.profile.sample_type.len();
    for (i, s) in current.profile.sample.iter().enumerate() {
        if s.value.len() != n_types {
            return Err(current.err(format_args!(
                "sample {i} has {} values but sample_type has {n_types} entries",
                s.value.len()
            )));
        }
    }

    let mut resolver = Resolver::new(&current, builder);
    let samples = (0..current.profile.sample.len())
        .map(|i| resolver.sample(i))
        .collect::<Result<Vec<_>, _>>()?;
    let period_type = match current.profile.period_type {
        Some(t) => Some(resolver.builder.value_type(
            current.str(t.r#type, || "period_type.type".into())?,
            current.str(t.unit, || "period_type.unit".into())?,
        )),
        None => None,
    };

    // One OTLP profile per profile id, in first-seen order.
    let mut groups: Vec<Option<[u8; 16]>> = Vec::new();
    let mut group_index: HashMap<Option<[u8; 16]>, usize> = HashMap::new();
    let group_of: Vec<usize> = samples
        .iter()
        .map(|s| {
            *group_index.entry(s.profile_id).or_insert_with(|| {
                groups.push(s.profile_id);
                groups.len() - 1
            })
        })
        .collect();
    if groups.is_empty() {
        groups.push(None);
    }

    let mut keys = Keys::default();
    let mut profiles = Vec::with_capacity(n_types * groups.len());
    for t in 0..n_types {
        let template = template(&current, t, &config, source, period_type, resolver.builder)?;
        let mut by_group: Vec<Profile> = groups
            .iter()
            .map(|g| Profile {
                profile_id: g.map(|id| id.to_vec()).unwrap_or_default(),
                ..template.clone()
            })
            .collect();
        for (s, v) in kept_values(&current, previous.as_ref(), t, &config, &mut keys)? {
            let r = &samples[s];
            by_group[group_of[s]].samples.push(Sample {
                stack_index: r.stack,
                attribute_indices: r.attributes.clone(),
                link_index: r.link,
                values: vec![v],
                timestamps_unix_nano: Vec::new(),
            });
        }
        profiles.extend(by_group);
    }

    let mut out = Converted::default();
    for profile in profiles {
        out.profiles += 1;
        out.samples += profile.samples.len();
        builder.push_profile(&source.resource, &source.scope, profile);
    }
    Ok(out)
}

/// Sample type `t`'s OTLP profile without samples: type (renamed and re-united by the
/// config), period, and time from the profile, else from the source.
fn template(
    current: &Decoded,
    t: usize,
    config: &config::Config,
    source: &Source,
    period_type: Option<ValueType>,
    builder: &mut RequestBuilder,
) -> Result<Profile, ConvertError> {
    let (type_name, unit) = current.sample_type(t)?;
    let type_config = config.get(type_name).cloned().unwrap_or_default();
    let unit = match type_config.units.as_deref() {
        Some(units) => crate::folded::unit_name(Some(units)),
        None => unit.to_string(),
    };
    let profile = Profile {
        sample_type: Some(
            builder.value_type(type_config.display_name.as_deref().unwrap_or(type_name), &unit),
        ),
        period_type,
        period: current.profile.period,
        time_unix_nano: positive(current.profile.time_nanos)
            .or(source.time_nanos.and_then(positive))
            .unwrap_or(0),
        duration_nano: positive(current.profile.duration_nanos)
            .or(source.duration_nanos.and_then(positive))
            .unwrap_or(0),
        ..Default::default()
    };
    if profile
        .time_unix_nano
        .checked_add(profile.duration_nano)
        .is_none_or(|end| end > i64::MAX as u64)
    {
        return Err(current.err(format_args!(
            "time {} + duration {} overflows a 64-bit nanosecond time",
            profile.time_unix_nano, profile.duration_nano
        )));
    }
    Ok(profile)
}

/// Sample keys of both profiles, computed once and only when a type needs them.
#[derive(Default)]
struct Keys {
    current: Option<Vec<delta::Key>>,
    previous: Option<Vec<delta::Key>>,
}

fn keys_of(d: &Decoded) -> Result<Vec<delta::Key>, ConvertError> {
    (0..d.profile.sample.len()).map(|i| delta::key(d, i)).collect()
}

/// `(sample index, value)` of sample type `t` to store: non-zero values as sent, or for a
/// cumulative type with a previous profile the positive growth per distinct sample.
fn kept_values(
    current: &Decoded,
    previous: Option<&Decoded>,
    t: usize,
    config: &config::Config,
    keys: &mut Keys,
) -> Result<Vec<(usize, i64)>, ConvertError> {
    let (type_name, unit) = current.sample_type(t)?;
    let values = current.profile.sample.iter().map(|s| s.value[t]);
    let Some(previous) = previous.filter(|_| config::is_cumulative(config, type_name)) else {
        return Ok(values.enumerate().filter(|&(_, v)| v != 0).collect());
    };
    if keys.current.is_none() {
        keys.current = Some(keys_of(current)?);
    }
    if keys.previous.is_none() {
        keys.previous = Some(keys_of(previous)?);
    }
    let (Some(current_keys), Some(previous_keys)) = (&keys.current, &keys.previous) else {
        return Ok(Vec::new());
    };
    let sums = delta::previous_sums(previous, previous_keys, (type_name, unit))?;
    Ok(delta::subtract(current_keys, values, &sums))
}

fn positive(v: i64) -> Option<u64> {
    u64::try_from(v).ok().filter(|&v| v > 0)
}

#[cfg(test)]
pub(crate) mod test_support;
#[cfg(test)]
mod tests;
