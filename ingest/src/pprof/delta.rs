//! Pyroscope's `previous_profile`: for cumulative sample types the stored value is the
//! growth since the previous profile, per identical sample. Two profiles share no ids, so
//! samples are matched by what they resolve to: each location's address and function
//! names, and the sorted labels.

use std::collections::HashMap;

use super::decode::Decoded;
use crate::convert::ConvertError;

/// A sample's identity across profiles: (address, function names) per location leaf
/// first, then the sorted labels as (key, string value, number, unit).
pub(crate) type Key = (Vec<(u64, Vec<String>)>, Vec<(String, String, i64, String)>);

pub(crate) fn key(d: &Decoded, sample: usize) -> Result<Key, ConvertError> {
    let s = &d.profile.sample[sample];
    let mut frames = Vec::with_capacity(s.location_id.len());
    for &id in &s.location_id {
        let li = d.location(sample, id)?;
        let loc = &d.profile.location[li];
        let mut names = Vec::with_capacity(loc.line.len());
        for line in &loc.line {
            let name = match d.function(li, line.function_id)? {
                Some(f) => d.str(d.profile.function[f].name, || {
                    format!("function id {}: name", line.function_id)
                })?,
                None => "",
            };
            names.push(name.to_string());
        }
        frames.push((loc.address, names));
    }
    let mut labels = Vec::with_capacity(s.label.len());
    for (k, l) in s.label.iter().enumerate() {
        let field = |f: &str| format!("sample {sample}: label[{k}].{f}");
        labels.push((
            d.str(l.key, || field("key"))?.to_string(),
            d.str(l.str, || field("str"))?.to_string(),
            l.num,
            d.str(l.num_unit, || field("num_unit"))?.to_string(),
        ));
    }
    labels.sort();
    Ok((frames, labels))
}

/// The previous profile's total per sample key (`keys`, one per sample) of the sample
/// type `(type, unit)`; empty when it has no such type (then nothing is subtracted).
pub(crate) fn previous_sums(
    d: &Decoded,
    keys: &[Key],
    sample_type: (&str, &str),
) -> Result<HashMap<Key, i64>, ConvertError> {
    let mut index = None;
    for i in 0..d.profile.sample_type.len() {
        if d.sample_type(i)? == sample_type {
            index = Some(i);
            break;
        }
    }
    let mut sums = HashMap::new();
    let Some(t) = index else {
        return Ok(sums);
    };
    for (i, (s, key)) in d.profile.sample.iter().zip(keys).enumerate() {
        let v = *s.value.get(t).ok_or_else(|| {
            d.err(format_args!(
                "sample {i} has {} values but sample_type has {} entries",
                s.value.len(),
                d.profile.sample_type.len()
            ))
        })?;
        let sum: &mut i64 = sums.entry(key.clone()).or_default();
        *sum = sum.saturating_add(v);
    }
    Ok(sums)
}

/// `(first sample index, current total − previous total)` per distinct key of `keys`
/// (one per sample), keeping only positive differences.
pub(crate) fn subtract(
    keys: &[Key],
    values: impl Iterator<Item = i64>,
    previous: &HashMap<Key, i64>,
) -> Vec<(usize, i64)> {
    let mut totals: Vec<(usize, i64)> = Vec::new();
    let mut slots: HashMap<&Key, usize> = HashMap::new();
    for (i, (key, v)) in keys.iter().zip(values).enumerate() {
        let slot = *slots.entry(key).or_insert_with(|| {
            totals.push((i, 0));
            totals.len() - 1
        });
        totals[slot].1 = totals[slot].1.saturating_add(v);
    }
    totals
        .into_iter()
        .map(|(first, total)| {
            let before = previous.get(&keys[first]).copied().unwrap_or(0);
            (first, total.saturating_sub(before))
        })
        .filter(|&(_, v)| v > 0)
        .collect()
}
