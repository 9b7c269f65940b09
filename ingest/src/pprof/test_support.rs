//! Reads a built OTLP request back into plain values (profile type ids, root-first frame
//! name paths, attributes, links) so converter tests compare against values they compute
//! from their own input; shared by the pprof, folded and speedscope tests.

use std::collections::BTreeMap;

use stackhouse_proto::otlp_collector::ExportProfilesServiceRequest;
use stackhouse_proto::otlp_common::any_value::Value;
use stackhouse_proto::otlp_profiles::{ProfilesDictionary, ValueType};

#[derive(Debug)]
pub(crate) struct ProfileView {
    pub type_id: String,
    pub time: u64,
    pub duration: u64,
    pub period: i64,
    pub profile_id: Vec<u8>,
    pub attributes: Vec<String>,
    pub resource: Vec<(String, String)>,
    pub scope: String,
    pub samples: Vec<SampleView>,
}

#[derive(Debug)]
pub(crate) struct SampleView {
    /// Function names root first (a location's lines are callee first, so reversed too).
    pub path: Vec<String>,
    /// `key=value`, or `key=value unit` for numbers with a unit.
    pub attributes: Vec<String>,
    pub trace_id: Vec<u8>,
    pub span_id: Vec<u8>,
    pub value: i64,
}

impl ProfileView {
    pub(crate) fn total(&self) -> i64 {
        self.samples.iter().map(|s| s.value).sum()
    }

    /// Value per `;`-joined root-first path.
    pub(crate) fn by_path(&self) -> BTreeMap<String, i64> {
        let mut out = BTreeMap::new();
        for s in &self.samples {
            *out.entry(s.path.join(";")).or_default() += s.value;
        }
        out
    }
}

fn attribute(dict: &ProfilesDictionary, i: i32) -> String {
    let a = &dict.attribute_table[i as usize];
    let key = &dict.string_table[a.key_strindex as usize];
    let unit = &dict.string_table[a.unit_strindex as usize];
    let value = match a.value.as_ref().and_then(|v| v.value.as_ref()) {
        Some(Value::StringValue(s)) => s.clone(),
        Some(Value::IntValue(v)) => v.to_string(),
        other => format!("{other:?}"),
    };
    if unit.is_empty() {
        format!("{key}={value}")
    } else {
        format!("{key}={value} {unit}")
    }
}

/// Every profile of the request, in order. Also checks that the request passes the OTLP
/// validation and normalization with no profile refused.
pub(crate) fn profiles(request: &ExportProfilesServiceRequest) -> Vec<ProfileView> {
    let n = crate::otlp::normalize("test", request, 1).expect("request normalizes");
    assert_eq!(n.rejected_profiles, 0, "refused by normalization: {:?}", n.errors);

    let dict = request.dictionary.as_ref().expect("dictionary");
    let s = |i: i32| dict.string_table[i as usize].clone();
    let type_part = |t: Option<ValueType>| {
        t.map_or((String::new(), String::new()), |t| {
            (s(t.type_strindex), s(t.unit_strindex))
        })
    };
    let mut out = Vec::new();
    for rp in &request.resource_profiles {
        let resource: Vec<(String, String)> = rp
            .resource
            .iter()
            .flat_map(|r| &r.attributes)
            .map(|kv| {
                let v = match kv.value.as_ref().and_then(|v| v.value.as_ref()) {
                    Some(Value::StringValue(s)) => s.clone(),
                    other => format!("{other:?}"),
                };
                (kv.key.clone(), v)
            })
            .collect();
        for sp in &rp.scope_profiles {
            for p in &sp.profiles {
                let (st, su) = type_part(p.sample_type);
                let (pt, pu) = type_part(p.period_type);
                let samples = p
                    .samples
                    .iter()
                    .map(|sample| {
                        let stack = &dict.stack_table[sample.stack_index as usize];
                        let mut path: Vec<String> = stack
                            .location_indices
                            .iter()
                            .flat_map(|&l| &dict.location_table[l as usize].lines)
                            .map(|line| s(dict.function_table[line.function_index as usize].name_strindex))
                            .collect();
                        path.reverse();
                        let link = &dict.link_table[sample.link_index as usize];
                        assert_eq!(sample.values.len(), 1, "one value per sample");
                        SampleView {
                            path,
                            attributes: sample
                                .attribute_indices
                                .iter()
                                .map(|&i| attribute(dict, i))
                                .collect(),
                            trace_id: link.trace_id.clone(),
                            span_id: link.span_id.clone(),
                            value: sample.values[0],
                        }
                    })
                    .collect();
                out.push(ProfileView {
                    type_id: format!("{st}:{su}:{pt}:{pu}"),
                    time: p.time_unix_nano,
                    duration: p.duration_nano,
                    period: p.period,
                    profile_id: p.profile_id.clone(),
                    attributes: p.attribute_indices.iter().map(|&i| attribute(dict, i)).collect(),
                    resource: resource.clone(),
                    scope: sp.scope.as_ref().map_or(String::new(), |s| s.name.clone()),
                    samples,
                });
            }
        }
    }
    out
}
