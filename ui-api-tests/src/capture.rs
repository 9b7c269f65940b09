//! Expected values computed from an input request alone, never from Stackhouse's output:
//! a flat view of every observation (profile type, attributes in scope, frames, time,
//! value), read either from the protobuf (through the independent `opentelemetry-proto`
//! crate) or from OTLP/JSON (through serde_json).

use std::collections::{BTreeMap, HashMap};

use opentelemetry_proto::tonic::collector::profiles::v1development::ExportProfilesServiceRequest;
use opentelemetry_proto::tonic::common::v1::{AnyValue, any_value};
use serde_json::Value;

#[derive(Clone, Debug)]
pub struct Observation {
    pub profile_type: String,
    /// Resource, scope, profile and sample attributes together.
    pub attrs: HashMap<String, String>,
    /// Root first.
    pub frames: Vec<String>,
    pub time: i64,
    pub value: i64,
    pub trace_id: Option<String>,
}

/// Observations of one sample: one per (timestamp, value), one per timestamp (value 1),
/// or one per value at the profile's time.
fn expand(values: &[i64], timestamps: &[u64], profile_time: i64, mut emit: impl FnMut(i64, i64)) {
    match (values.is_empty(), timestamps.is_empty()) {
        (false, false) => values
            .iter()
            .zip(timestamps)
            .for_each(|(v, t)| emit(*t as i64, *v)),
        (true, false) => timestamps.iter().for_each(|t| emit(*t as i64, 1)),
        (false, true) => values.iter().for_each(|v| emit(profile_time, *v)),
        (true, true) => {}
    }
}

fn frame_names(lines: &[(String,)], mapping_file: Option<&str>, address: u64, out: &mut Vec<String>) {
    if lines.is_empty() {
        out.push(match mapping_file {
            Some(f) if !f.is_empty() => format!("{f}+0x{address:x}"),
            _ => format!("0x{address:x}"),
        });
    } else {
        // The last line is the caller; root-first order puts it first.
        out.extend(lines.iter().rev().map(|l| l.0.clone()));
    }
}

fn any_to_string(v: &AnyValue) -> String {
    match &v.value {
        Some(any_value::Value::StringValue(s)) => s.clone(),
        Some(any_value::Value::IntValue(i)) => i.to_string(),
        Some(any_value::Value::BoolValue(b)) => b.to_string(),
        Some(any_value::Value::DoubleValue(d)) => d.to_string(),
        other => panic!("attribute kind not used by the captures: {other:?}"),
    }
}

pub fn from_protobuf(req: &ExportProfilesServiceRequest) -> Vec<Observation> {
    let d = req.dictionary.as_ref().expect("dictionary");
    let s = |i: i32| d.string_table[i as usize].clone();
    let mut out = Vec::new();
    for rp in &req.resource_profiles {
        let mut base = HashMap::new();
        for kv in rp.resource.iter().flat_map(|r| &r.attributes) {
            base.insert(kv.key.clone(), any_to_string(kv.value.as_ref().unwrap()));
        }
        for sp in &rp.scope_profiles {
            for p in &sp.profiles {
                let st = p.sample_type.unwrap_or_default();
                let pt = p.period_type.unwrap_or_default();
                let type_id = format!(
                    "{}:{}:{}:{}",
                    s(st.type_strindex),
                    s(st.unit_strindex),
                    s(pt.type_strindex),
                    s(pt.unit_strindex)
                );
                let mut attrs = base.clone();
                for &i in &p.attribute_indices {
                    let a = &d.attribute_table[i as usize];
                    attrs.insert(s(a.key_strindex), any_to_string(a.value.as_ref().unwrap()));
                }
                for sample in &p.samples {
                    let mut frames = Vec::new();
                    let stack = &d.stack_table[sample.stack_index as usize];
                    for &li in stack.location_indices.iter().rev() {
                        let loc = &d.location_table[li as usize];
                        let lines: Vec<(String,)> = loc
                            .lines
                            .iter()
                            .map(|l| (s(d.function_table[l.function_index as usize].name_strindex),))
                            .collect();
                        let mapping = (loc.mapping_index != 0)
                            .then(|| s(d.mapping_table[loc.mapping_index as usize].filename_strindex));
                        frame_names(&lines, mapping.as_deref(), loc.address, &mut frames);
                    }
                    let mut sample_attrs = attrs.clone();
                    for &i in &sample.attribute_indices {
                        let a = &d.attribute_table[i as usize];
                        sample_attrs.insert(s(a.key_strindex), any_to_string(a.value.as_ref().unwrap()));
                    }
                    let trace_id = (sample.link_index != 0)
                        .then(|| hex::encode(&d.link_table[sample.link_index as usize].trace_id));
                    expand(
                        &sample.values,
                        &sample.timestamps_unix_nano,
                        p.time_unix_nano as i64,
                        |time, value| {
                            out.push(Observation {
                                profile_type: type_id.clone(),
                                attrs: sample_attrs.clone(),
                                frames: frames.clone(),
                                time,
                                value,
                                trace_id: trace_id.clone(),
                            });
                        },
                    );
                }
            }
        }
    }
    out
}

fn int(v: Option<&Value>) -> i64 {
    match v {
        None | Some(Value::Null) => 0,
        Some(Value::Number(n)) => n.as_i64().unwrap_or_else(|| n.as_u64().unwrap() as i64),
        Some(Value::String(s)) => s
            .parse::<i64>()
            .unwrap_or_else(|_| s.parse::<u64>().unwrap() as i64),
        Some(other) => panic!("not an integer: {other}"),
    }
}

fn ints(v: Option<&Value>) -> Vec<i64> {
    v.and_then(Value::as_array)
        .map(|a| a.iter().map(|x| int(Some(x))).collect())
        .unwrap_or_default()
}

fn json_any(v: &Value) -> String {
    if let Some(s) = v.get("stringValue") {
        return s.as_str().unwrap().to_string();
    }
    if let Some(i) = v.get("intValue") {
        return int(Some(i)).to_string();
    }
    if let Some(b) = v.get("boolValue") {
        return b.as_bool().unwrap().to_string();
    }
    if let Some(d) = v.get("doubleValue") {
        return d.as_f64().unwrap().to_string();
    }
    panic!("attribute kind not used by the captures: {v}")
}

/// The same flattening, from the OTLP/JSON rendering (lowerCamelCase keys, 64-bit integers
/// as strings, absent fields meaning zero).
pub fn from_json(doc: &Value) -> Vec<Observation> {
    let d = &doc["dictionary"];
    let table = |name: &str| d.get(name).and_then(Value::as_array).cloned().unwrap_or_default();
    let strings: Vec<String> = table("stringTable")
        .iter()
        .map(|v| v.as_str().unwrap_or("").to_string())
        .collect();
    let (attributes, stacks, locations, functions, mappings, links) = (
        table("attributeTable"),
        table("stackTable"),
        table("locationTable"),
        table("functionTable"),
        table("mappingTable"),
        table("linkTable"),
    );
    let s = |v: Option<&Value>| strings[int(v) as usize].clone();
    let attr = |i: i64| {
        let a = &attributes[i as usize];
        (s(a.get("keyStrindex")), json_any(&a["value"]))
    };
    let mut out = Vec::new();
    for rp in doc["resourceProfiles"].as_array().unwrap() {
        let mut base = HashMap::new();
        for kv in rp["resource"]
            .get("attributes")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            base.insert(kv["key"].as_str().unwrap().to_string(), json_any(&kv["value"]));
        }
        for sp in rp["scopeProfiles"].as_array().unwrap() {
            for p in sp["profiles"].as_array().unwrap() {
                let st = &p["sampleType"];
                let pt = p.get("periodType").cloned().unwrap_or(Value::Null);
                let type_id = format!(
                    "{}:{}:{}:{}",
                    s(st.get("typeStrindex")),
                    s(st.get("unitStrindex")),
                    s(pt.get("typeStrindex")),
                    s(pt.get("unitStrindex"))
                );
                let mut attrs = base.clone();
                for i in ints(p.get("attributeIndices")) {
                    let (k, v) = attr(i);
                    attrs.insert(k, v);
                }
                let time = int(p.get("timeUnixNano"));
                for sample in p["samples"].as_array().unwrap() {
                    let stack = &stacks[int(sample.get("stackIndex")) as usize];
                    let mut frames = Vec::new();
                    for li in ints(stack.get("locationIndices")).into_iter().rev() {
                        let loc = &locations[li as usize];
                        let lines: Vec<(String,)> = loc
                            .get("lines")
                            .and_then(Value::as_array)
                            .into_iter()
                            .flatten()
                            .map(|l| {
                                (s(
                                    functions[int(l.get("functionIndex")) as usize].get("nameStrindex")
                                ),)
                            })
                            .collect();
                        let mi = int(loc.get("mappingIndex"));
                        let mapping = (mi != 0).then(|| s(mappings[mi as usize].get("filenameStrindex")));
                        frame_names(
                            &lines,
                            mapping.as_deref(),
                            int(loc.get("address")) as u64,
                            &mut frames,
                        );
                    }
                    let mut sample_attrs = attrs.clone();
                    for i in ints(sample.get("attributeIndices")) {
                        let (k, v) = attr(i);
                        sample_attrs.insert(k, v);
                    }
                    let li = int(sample.get("linkIndex"));
                    let trace_id = (li != 0).then(|| {
                        links[li as usize]
                            .get("traceId")
                            .and_then(Value::as_str)
                            .unwrap_or("")
                            .to_lowercase()
                    });
                    let timestamps: Vec<u64> = ints(sample.get("timestampsUnixNano"))
                        .into_iter()
                        .map(|t| t as u64)
                        .collect();
                    expand(&ints(sample.get("values")), &timestamps, time, |time, value| {
                        out.push(Observation {
                            profile_type: type_id.clone(),
                            attrs: sample_attrs.clone(),
                            frames: frames.clone(),
                            time,
                            value,
                            trace_id: trace_id.clone(),
                        });
                    });
                }
            }
        }
    }
    out
}

/// `root;…;leaf → summed value`, the shape of a folded flamegraph (empty stacks left out).
pub fn folded<'a>(observations: impl IntoIterator<Item = &'a Observation>) -> BTreeMap<String, i64> {
    let mut out = BTreeMap::new();
    for o in observations {
        if !o.frames.is_empty() {
            *out.entry(o.frames.join(";")).or_insert(0) += o.value;
        }
    }
    out.retain(|_, v| *v != 0);
    out
}

pub fn total<'a>(observations: impl IntoIterator<Item = &'a Observation>) -> i64 {
    observations.into_iter().map(|o| o.value).sum()
}
