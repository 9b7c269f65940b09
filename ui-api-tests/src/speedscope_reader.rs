//! speedscope files read with serde_json alone: sampled profiles weigh each sample's stack,
//! evented profiles give each stack the time between consecutive events while it is open.
//! Profile types by `unit`: `none` is `samples:count`, `bytes` is `space:bytes`, a time unit
//! is `wall:<unit>`; no period.

use std::collections::{BTreeMap, HashMap};

use serde_json::Value;

use crate::capture::Observation;
use crate::formats::Expected;

fn profile_type(unit: &str) -> String {
    match unit {
        "none" | "" => "samples:count::".to_string(),
        "bytes" => "space:bytes::".to_string(),
        time => format!("wall:{time}::"),
    }
}

fn int(v: &Value, what: &str) -> i64 {
    v.as_i64()
        .unwrap_or_else(|| panic!("{what}: not an integer: {v}"))
}

pub fn expected(doc: &Value) -> Expected {
    let names: Vec<String> = doc["shared"]["frames"]
        .as_array()
        .expect("shared.frames")
        .iter()
        .map(|f| f["name"].as_str().expect("frame name").to_string())
        .collect();
    let frames =
        |indices: &[i64]| -> Vec<String> { indices.iter().map(|&i| names[i as usize].clone()).collect() };
    let mut observations = Vec::new();
    let (mut profiles, mut samples) = (0, 0);
    for p in doc["profiles"].as_array().expect("profiles") {
        profiles += 1;
        let ty = profile_type(p["unit"].as_str().unwrap_or("none"));
        let mut attrs = HashMap::new();
        if let Some(name) = p["name"].as_str() {
            attrs.insert("profile.name".to_string(), name.to_string());
        }
        let mut push = |stack: Vec<String>, value: i64| {
            observations.push(Observation {
                profile_type: ty.clone(),
                attrs: attrs.clone(),
                frames: stack,
                time: 0,
                value,
                trace_id: None,
            });
        };
        match p["type"].as_str() {
            Some("sampled") => {
                let stacks = p["samples"].as_array().unwrap();
                let weights = p["weights"].as_array().unwrap();
                assert_eq!(stacks.len(), weights.len());
                for (s, w) in stacks.iter().zip(weights) {
                    let indices: Vec<i64> = s.as_array().unwrap().iter().map(|i| int(i, "frame")).collect();
                    push(frames(&indices), int(w, "weight"));
                    samples += 1;
                }
            }
            Some("evented") => {
                let mut open: Vec<i64> = Vec::new();
                let mut self_time: BTreeMap<Vec<i64>, i64> = BTreeMap::new();
                let mut last: Option<i64> = None;
                for e in p["events"].as_array().unwrap() {
                    let at = int(&e["at"], "at");
                    if let Some(prev) = last
                        && !open.is_empty()
                        && at > prev
                    {
                        *self_time.entry(open.clone()).or_insert(0) += at - prev;
                    }
                    last = Some(at);
                    let frame = int(&e["frame"], "frame");
                    match e["type"].as_str().unwrap() {
                        "O" => open.push(frame),
                        "C" => assert_eq!(open.pop(), Some(frame), "balanced events"),
                        t => panic!("event type {t}"),
                    }
                }
                samples += self_time.len();
                for (stack, value) in self_time {
                    push(frames(&stack), value);
                }
            }
            t => panic!("speedscope profile type {t:?}"),
        }
    }
    Expected {
        observations,
        profiles,
        samples,
        span: None,
    }
}
