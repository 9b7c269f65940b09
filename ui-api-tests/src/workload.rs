//! A deterministic workload for the query tests: several services and hosts, threads,
//! traces and spans, profile ids, resource and profile attributes, two profile types,
//! samples with and without their own timestamps.
//!
//! The plain description ([`ProfileSpec`], [`SampleSpec`]) is the source of truth: the
//! OTLP requests are encoded from it with the independent `opentelemetry-proto` types, and
//! the tests compute every expected value from its flat view ([`Obs`]), never from a
//! server answer.

use rand::rngs::SmallRng;
use rand::seq::IndexedRandom;
use rand::{Rng, SeedableRng};
use std::collections::{BTreeMap, BTreeSet, HashMap};

use opentelemetry_proto::tonic::collector::profiles::v1development::ExportProfilesServiceRequest;
use opentelemetry_proto::tonic::common::v1::{AnyValue, KeyValue, any_value};
use opentelemetry_proto::tonic::profiles::v1development::{
    Function, KeyValueAndUnit, Line, Link, Location, Mapping, Profile, ProfilesDictionary, ResourceProfiles,
    Sample, ScopeProfiles, Stack, ValueType,
};
use opentelemetry_proto::tonic::resource::v1::Resource;

/// Key-value pairs in the order sent.
pub type Attrs = Vec<(String, String)>;

pub const SECOND: i64 = 1_000_000_000;
/// Minute-aligned start of the data (2023-11-14T22:14:00Z).
pub const T0: i64 = 1_700_000_040 * SECOND;
pub const CPU: &str = "samples:count:cpu:nanoseconds";
pub const OFF_CPU: &str = "off_cpu:nanoseconds::";
/// A range that holds every sample with room on both sides.
pub const FROM: i64 = T0 - 60 * SECOND;
pub const TO: i64 = T0 + 8 * 60 * SECOND;

pub const TRACES: [&str; 3] = [
    "4bf92f3577b34da6a3ce929d0e0e4736",
    "0af7651916cd43dd8448eb211c80319c",
    "5b8efff798038103d269b633813fc60c",
];
/// `(trace index, span id)`: three spans in the first trace, two in the second, one in
/// the third.
pub const LINKS: [(usize, &str); 6] = [
    (0, "00f067aa0ba902b7"),
    (0, "b7ad6b7169203331"),
    (0, "e457b5a2e4d86bd1"),
    (1, "53995c3f42cd8ad8"),
    (1, "d75597dee50b0cac"),
    (2, "a3ce929d0e0e4736"),
];

/// A Rust symbol as a native profiler sends it, and how it reads (as `rustfilt` and
/// `c++filt -s rust` print it, the hash left out).
pub const MANGLED_ONLY: (&str, &str) = ("_ZN4core3fmt5write17h7a6a4e8d3b1f2c5eE", "core::fmt::write");

/// One location of a stack.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Loc {
    /// One line of a named function.
    Func(&'static str),
    /// Several lines (inlined functions), caller first.
    Inline(&'static [&'static str]),
    /// A function sent with only its system name, mangled: [`MANGLED_ONLY`].
    System,
    /// No lines: an address, in a mapping or not.
    Addr {
        mapping: Option<&'static str>,
        address: u64,
    },
}

impl Loc {
    /// Frame names as DESIGN.md defines them, caller first.
    pub fn frames(&self) -> Vec<String> {
        match self {
            Loc::Func(name) => vec![name.to_string()],
            Loc::System => vec![MANGLED_ONLY.1.to_string()],
            Loc::Inline(names) => names.iter().map(|n| n.to_string()).collect(),
            Loc::Addr {
                mapping: Some(file),
                address,
            } => vec![format!("{file}+0x{address:x}")],
            Loc::Addr {
                mapping: None,
                address,
            } => vec![format!("0x{address:x}")],
        }
    }
}

#[derive(Clone, Debug)]
pub struct SampleSpec {
    /// Caller first.
    pub stack: Vec<Loc>,
    pub value: i64,
    /// `None`: the sample has no timestamps and sits at the profile's time.
    pub time: Option<i64>,
    pub attrs: Vec<(String, String)>,
    /// `(trace id, span id)` in hex.
    pub link: Option<(String, String)>,
}

#[derive(Clone, Debug)]
pub struct ProfileSpec {
    pub profile_type: &'static str,
    pub resource: Vec<(String, String)>,
    pub attrs: Vec<(String, String)>,
    pub time: i64,
    pub duration: i64,
    pub period: i64,
    /// Hex.
    pub profile_id: Option<String>,
    pub samples: Vec<SampleSpec>,
}

/// One observation: what one sample recorded at one time.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Obs {
    pub profile_type: String,
    /// Index into [`Workload::profiles`].
    pub profile: usize,
    /// Resource and profile attributes: the series labels.
    pub labels: BTreeMap<String, String>,
    pub sample_attrs: BTreeMap<String, String>,
    pub frames: Vec<String>,
    pub time: i64,
    pub value: i64,
    pub trace_id: Option<String>,
    pub span_id: Option<String>,
    pub profile_id: Option<String>,
}

impl Obs {
    /// The value of `key` in the sample's scope, the sample attribute winning.
    pub fn attr(&self, key: &str) -> Option<&str> {
        self.sample_attrs
            .get(key)
            .or_else(|| self.labels.get(key))
            .map(String::as_str)
    }

    /// The value of a group_by key as the group node names it (`""` when absent).
    pub fn group_value(&self, key: &str) -> String {
        match key {
            "trace_id" => self.trace_id.clone().unwrap_or_default(),
            "span_id" => self.span_id.clone().unwrap_or_default(),
            "profile_id" => self.profile_id.clone().unwrap_or_default(),
            _ => self.attr(key).unwrap_or("").to_string(),
        }
    }

    /// `k1=v1,k2=v2`, as group nodes are named.
    pub fn group_name(&self, keys: &[&str]) -> String {
        keys.iter()
            .map(|k| format!("{k}={}", self.group_value(k)))
            .collect::<Vec<_>>()
            .join(",")
    }
}

fn kv(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn cpu_stacks() -> Vec<Vec<Loc>> {
    use Loc::*;
    vec![
        vec![Func("main"), Func("handle"), Func("parse")],
        vec![Func("main"), Func("handle"), Func("compute")],
        vec![
            Func("main"),
            Func("handle"),
            Func("compute"),
            Inline(&["outer_inl", "inner_inl"]),
        ],
        vec![
            Func("main"),
            Func("recurse"),
            Func("recurse"),
            Func("recurse"),
            Func("compute"),
        ],
        vec![Func("main"), Func("recurse"), Func("recurse"), System],
        vec![
            Func("main"),
            Addr {
                mapping: Some("libc.so.6"),
                address: 0x1a2b,
            },
        ],
        vec![
            Func("main"),
            Func("handle"),
            Addr {
                mapping: None,
                address: 0x3c4d,
            },
        ],
        vec![
            Func("gc"),
            Addr {
                mapping: Some("libc.so.6"),
                address: 0x99f0,
            },
        ],
        // Self value on a node that also has children.
        vec![Func("main"), Func("handle")],
    ]
}

fn off_cpu_stacks() -> Vec<Vec<Loc>> {
    use Loc::*;
    vec![
        vec![
            Func("main"),
            Func("handle"),
            Func("io_wait"),
            Addr {
                mapping: Some("libc.so.6"),
                address: 0x99f0,
            },
        ],
        vec![Func("main"), Func("recurse"), Func("recurse"), Func("io_wait")],
        vec![Func("main"), Func("lock")],
    ]
}

fn thread(rng: &mut SmallRng) -> Vec<(String, String)> {
    match rng.random_range(0..9) {
        0..=2 => kv(&[("thread.name", "main")]),
        3..=4 => kv(&[("thread.name", "worker-1")]),
        5..=6 => kv(&[("thread.name", "worker-2")]),
        7 => Vec::new(),
        _ => kv(&[("thread.id", "77")]),
    }
}

fn link(rng: &mut SmallRng) -> Option<(String, String)> {
    if rng.random_range(0..3) == 0 {
        return None;
    }
    let (trace, span) = *LINKS.choose(rng).expect("not empty");
    Some((TRACES[trace].to_string(), span.to_string()))
}

pub fn resources() -> Vec<Vec<(String, String)>> {
    vec![
        kv(&[("service.name", "checkout"), ("host.name", "host-a")]),
        kv(&[("service.name", "checkout"), ("host.name", "host-b")]),
        kv(&[("service.name", "payments"), ("host.name", "host-a")]),
    ]
}

/// `pp` `type` `minute` `resource`, padded: readable in failure messages.
fn profile_id(kind: u8, minute: usize, resource: usize) -> String {
    format!("{kind:02x}{minute:02x}{resource:02x}{}", "ab".repeat(13))
}

pub struct Workload {
    pub profiles: Vec<ProfileSpec>,
}

impl Workload {
    pub fn new() -> Workload {
        let mut rng = SmallRng::seed_from_u64(0x5eed_1234_abcd_0001);
        let cpu_stacks = cpu_stacks();
        let off_stacks = off_cpu_stacks();
        let mut profiles = Vec::new();
        for minute in 0..5usize {
            for (r, resource) in resources().into_iter().enumerate() {
                // Profiles start 7 s apart per resource, so a 60 s step from T0 cuts all but
                // the first resource's profiles.
                let time = T0 + minute as i64 * 60 * SECOND + r as i64 * 7 * SECOND;
                let timestamped = !matches!((minute, r), (2, 2) | (4, 1));
                let mut samples = Vec::new();
                let n = 8 + rng.random_range(0..8);
                for i in 0..n {
                    let mut when = time + rng.random_range(0..120) as i64 * SECOND / 2;
                    if i == 1 {
                        // Two samples of one series at one timestamp: one point for avg.
                        when = samples.first().and_then(|s: &SampleSpec| s.time).unwrap_or(when);
                    }
                    samples.push(SampleSpec {
                        stack: cpu_stacks.choose(&mut rng).expect("not empty").clone(),
                        value: 1 + rng.random_range(0..20) as i64,
                        time: timestamped.then_some(when),
                        attrs: thread(&mut rng),
                        link: link(&mut rng),
                    });
                }
                if minute == 0 && r == 0 {
                    samples.push(SampleSpec {
                        stack: Vec::new(),
                        value: 3,
                        time: Some(time + 5 * SECOND),
                        attrs: kv(&[("thread.name", "main")]),
                        link: None,
                    });
                }
                let attrs = if minute % 2 == 0 {
                    kv(&[("profile.mode", "continuous")])
                } else {
                    Vec::new()
                };
                profiles.push(ProfileSpec {
                    profile_type: CPU,
                    resource: resource.clone(),
                    attrs,
                    time,
                    duration: 60 * SECOND,
                    period: 10_000_000,
                    profile_id: (!(minute == 3 && r == 0)).then(|| profile_id(1, minute, r)),
                    samples,
                });
                if r != 1 {
                    let time = T0 + minute as i64 * 60 * SECOND + 30 * SECOND;
                    let samples = (0..3 + rng.random_range(0..4))
                        .map(|_| SampleSpec {
                            stack: off_stacks.choose(&mut rng).expect("not empty").clone(),
                            value: 1000 * (1 + rng.random_range(0..90) as i64),
                            time: None,
                            attrs: thread(&mut rng),
                            link: link(&mut rng),
                        })
                        .collect();
                    profiles.push(ProfileSpec {
                        profile_type: OFF_CPU,
                        resource,
                        attrs: kv(&[("profile.mode", "sampled")]),
                        time,
                        duration: 10 * SECOND,
                        period: 0,
                        profile_id: Some(profile_id(2, minute, r)),
                        samples,
                    });
                }
            }
        }
        Workload { profiles }
    }

    /// The same workload `by` nanoseconds later: for queries relative to now (`now-15m`).
    pub fn shifted(mut self, by: i64) -> Workload {
        for p in &mut self.profiles {
            p.time += by;
            for s in &mut p.samples {
                s.time = s.time.map(|t| t + by);
            }
        }
        self
    }

    pub fn observations(&self) -> Vec<Obs> {
        let mut out = Vec::new();
        for (i, p) in self.profiles.iter().enumerate() {
            let mut labels: BTreeMap<String, String> = p.resource.iter().cloned().collect();
            labels.extend(p.attrs.iter().cloned());
            for s in &p.samples {
                out.push(Obs {
                    profile_type: p.profile_type.to_string(),
                    profile: i,
                    labels: labels.clone(),
                    sample_attrs: s.attrs.iter().cloned().collect(),
                    frames: s.stack.iter().flat_map(Loc::frames).collect(),
                    time: s.time.unwrap_or(p.time),
                    value: s.value,
                    trace_id: s.link.as_ref().map(|l| l.0.clone()),
                    span_id: s.link.as_ref().map(|l| l.1.clone()),
                    profile_id: p.profile_id.clone(),
                });
            }
        }
        out
    }

    /// One request per resource, each with its own dictionary (indices differ between
    /// requests; the content is the same).
    pub fn requests(&self) -> Vec<ExportProfilesServiceRequest> {
        let mut by_resource: Vec<(&Attrs, Vec<&ProfileSpec>)> = Vec::new();
        for p in &self.profiles {
            match by_resource.iter_mut().find(|(r, _)| **r == p.resource) {
                Some((_, list)) => list.push(p),
                None => by_resource.push((&p.resource, vec![p])),
            }
        }
        by_resource
            .into_iter()
            .map(|(resource, profiles)| {
                let mut dict = Dict::new();
                let profiles = profiles.iter().map(|p| dict.profile(p)).collect();
                ExportProfilesServiceRequest {
                    resource_profiles: vec![ResourceProfiles {
                        resource: Some(Resource {
                            attributes: resource
                                .iter()
                                .map(|(k, v)| KeyValue {
                                    key: k.clone(),
                                    value: Some(string_value(v)),
                                    ..Default::default()
                                })
                                .collect(),
                            ..Default::default()
                        }),
                        scope_profiles: vec![ScopeProfiles {
                            profiles,
                            ..Default::default()
                        }],
                        ..Default::default()
                    }],
                    dictionary: Some(dict.finish()),
                }
            })
            .collect()
    }
}

impl Workload {
    /// Sends every request over OTLP gRPC to `endpoint` with the independent client and
    /// checks that nothing was rejected; returns the observations the server now holds.
    pub async fn export_grpc(&self, endpoint: String) -> Vec<Obs> {
        use opentelemetry_proto::tonic::collector::profiles::v1development::profiles_service_client::ProfilesServiceClient;
        let mut client = ProfilesServiceClient::connect(endpoint)
            .await
            .expect("connecting");
        for request in self.requests() {
            let response = client
                .export(request)
                .await
                .expect("export accepted")
                .into_inner();
            assert!(
                response
                    .partial_success
                    .as_ref()
                    .is_none_or(|p| p.rejected_profiles == 0),
                "nothing rejected: {response:?}"
            );
        }
        self.observations()
    }
}

impl Default for Workload {
    fn default() -> Self {
        Workload::new()
    }
}

fn string_value(v: &str) -> AnyValue {
    AnyValue {
        value: Some(any_value::Value::StringValue(v.to_string())),
    }
}

/// Interns a request's dictionary tables; index 0 of each is its zero value.
struct Dict {
    d: ProfilesDictionary,
    strings: HashMap<String, i32>,
    functions: HashMap<(i32, i32), i32>,
    mappings: HashMap<i32, i32>,
    locations: HashMap<Loc, i32>,
    stacks: HashMap<Vec<i32>, i32>,
    attributes: HashMap<(String, String), i32>,
    links: HashMap<(String, String), i32>,
}

impl Dict {
    fn new() -> Dict {
        let mut dict = Dict {
            d: ProfilesDictionary {
                string_table: Vec::new(),
                function_table: vec![Function::default()],
                mapping_table: vec![Mapping::default()],
                location_table: vec![Location::default()],
                stack_table: vec![Stack::default()],
                attribute_table: vec![KeyValueAndUnit::default()],
                link_table: vec![Link::default()],
            },
            strings: HashMap::new(),
            functions: HashMap::new(),
            mappings: HashMap::new(),
            locations: HashMap::new(),
            stacks: HashMap::new(),
            attributes: HashMap::new(),
            links: HashMap::new(),
        };
        dict.string("");
        dict
    }

    fn string(&mut self, s: &str) -> i32 {
        if let Some(&i) = self.strings.get(s) {
            return i;
        }
        let i = self.d.string_table.len() as i32;
        self.d.string_table.push(s.to_string());
        self.strings.insert(s.to_string(), i);
        i
    }

    fn function(&mut self, name: &str, system_name: &str) -> i32 {
        let key = (self.string(name), self.string(system_name));
        if let Some(&i) = self.functions.get(&key) {
            return i;
        }
        let i = self.d.function_table.len() as i32;
        let filename_strindex = self.string("src/app.rs");
        self.d.function_table.push(Function {
            name_strindex: key.0,
            system_name_strindex: key.1,
            filename_strindex,
            start_line: 0,
        });
        self.functions.insert(key, i);
        i
    }

    fn mapping(&mut self, file: &str) -> i32 {
        let name = self.string(file);
        if let Some(&i) = self.mappings.get(&name) {
            return i;
        }
        let i = self.d.mapping_table.len() as i32;
        self.d.mapping_table.push(Mapping {
            memory_start: 0,
            memory_limit: 0x1000_0000,
            file_offset: 0,
            filename_strindex: name,
            attribute_indices: Vec::new(),
        });
        self.mappings.insert(name, i);
        i
    }

    fn location(&mut self, loc: &Loc) -> i32 {
        if let Some(&i) = self.locations.get(loc) {
            return i;
        }
        let line = |function_index| Line {
            function_index,
            line: 0,
            column: 0,
        };
        let location = match loc {
            Loc::Func(name) => Location {
                lines: vec![line(self.function(name, ""))],
                ..Default::default()
            },
            Loc::System => Location {
                lines: vec![line(self.function("", MANGLED_ONLY.0))],
                ..Default::default()
            },
            // OTLP lists the innermost line first; the last line is the caller.
            Loc::Inline(names) => Location {
                lines: names.iter().rev().map(|n| line(self.function(n, ""))).collect(),
                ..Default::default()
            },
            Loc::Addr { mapping, address } => Location {
                mapping_index: mapping.map_or(0, |m| self.mapping(m)),
                address: *address,
                ..Default::default()
            },
        };
        let i = self.d.location_table.len() as i32;
        self.d.location_table.push(location);
        self.locations.insert(loc.clone(), i);
        i
    }

    fn stack(&mut self, stack: &[Loc]) -> i32 {
        if stack.is_empty() {
            return 0;
        }
        // Leaf first on the wire.
        let indices: Vec<i32> = stack.iter().rev().map(|l| self.location(l)).collect();
        if let Some(&i) = self.stacks.get(&indices) {
            return i;
        }
        let i = self.d.stack_table.len() as i32;
        self.d.stack_table.push(Stack {
            location_indices: indices.clone(),
        });
        self.stacks.insert(indices, i);
        i
    }

    fn attribute(&mut self, key: &str, value: &str) -> i32 {
        let k = (key.to_string(), value.to_string());
        if let Some(&i) = self.attributes.get(&k) {
            return i;
        }
        let i = self.d.attribute_table.len() as i32;
        let key_strindex = self.string(key);
        self.d.attribute_table.push(KeyValueAndUnit {
            key_strindex,
            value: Some(string_value(value)),
            unit_strindex: 0,
        });
        self.attributes.insert(k, i);
        i
    }

    fn link(&mut self, link: &Option<(String, String)>) -> i32 {
        let Some(link) = link else { return 0 };
        if let Some(&i) = self.links.get(link) {
            return i;
        }
        let i = self.d.link_table.len() as i32;
        self.d.link_table.push(Link {
            trace_id: hex::decode(&link.0).unwrap(),
            span_id: hex::decode(&link.1).unwrap(),
        });
        self.links.insert(link.clone(), i);
        i
    }

    fn value_type(&mut self, ty: &str, unit: &str) -> Option<ValueType> {
        (!ty.is_empty() || !unit.is_empty()).then(|| ValueType {
            type_strindex: self.string(ty),
            unit_strindex: self.string(unit),
        })
    }

    fn profile(&mut self, p: &ProfileSpec) -> Profile {
        let parts: Vec<&str> = p.profile_type.split(':').collect();
        let mut samples: Vec<Sample> = Vec::new();
        for s in &p.samples {
            let stack_index = self.stack(&s.stack);
            let attribute_indices: Vec<i32> = s.attrs.iter().map(|(k, v)| self.attribute(k, v)).collect();
            let link_index = self.link(&s.link);
            // Timestamped samples of one stack, attributes and link share one OTLP sample,
            // as profilers send them.
            if let Some(t) = s.time
                && let Some(existing) = samples.iter_mut().find(|x| {
                    x.stack_index == stack_index
                        && x.attribute_indices == attribute_indices
                        && x.link_index == link_index
                        && !x.timestamps_unix_nano.is_empty()
                })
            {
                existing.values.push(s.value);
                existing.timestamps_unix_nano.push(t as u64);
                continue;
            }
            samples.push(Sample {
                stack_index,
                attribute_indices,
                link_index,
                values: vec![s.value],
                timestamps_unix_nano: s.time.map(|t| vec![t as u64]).unwrap_or_default(),
            });
        }
        Profile {
            sample_type: self.value_type(parts[0], parts[1]),
            period_type: self.value_type(parts[2], parts[3]),
            period: p.period,
            time_unix_nano: p.time as u64,
            duration_nano: p.duration as u64,
            profile_id: p
                .profile_id
                .as_ref()
                .map(|id| hex::decode(id).unwrap())
                .unwrap_or_default(),
            attribute_indices: p.attrs.iter().map(|(k, v)| self.attribute(k, v)).collect(),
            samples,
            ..Default::default()
        }
    }

    fn finish(self) -> ProfilesDictionary {
        self.d
    }
}

// ---- Expected values, from observations alone ----

/// `root;…;leaf → summed value` over non-empty stacks, zero sums left out.
pub fn folded<'a>(obs: impl IntoIterator<Item = &'a Obs>) -> BTreeMap<String, i64> {
    let mut out = BTreeMap::new();
    for o in obs {
        if !o.frames.is_empty() {
            *out.entry(o.frames.join(";")).or_insert(0) += o.value;
        }
    }
    out.retain(|_, v| *v != 0);
    out
}

pub fn total<'a>(obs: impl IntoIterator<Item = &'a Obs>) -> i64 {
    obs.into_iter().map(|o| o.value).sum()
}

/// `(self, total)` of every node of the call tree, keyed by its path (root-first frames);
/// the synthetic root is the empty path.
pub fn node_values(
    folded: &BTreeMap<String, i64>,
    empty_stack_value: i64,
) -> BTreeMap<Vec<String>, (i64, i64)> {
    let mut out: BTreeMap<Vec<String>, (i64, i64)> = BTreeMap::new();
    let root = out.entry(Vec::new()).or_default();
    root.0 += empty_stack_value;
    root.1 += empty_stack_value;
    for (path, &v) in folded {
        let frames: Vec<String> = path.split(';').map(str::to_string).collect();
        for depth in 0..=frames.len() {
            out.entry(frames[..depth].to_vec()).or_default().1 += v;
        }
        out.entry(frames).or_default().0 += v;
    }
    out
}

/// Every function name with `(self, total)`: self where it is the leaf, total where it is
/// anywhere on the stack (once per stack).
pub fn top<'a>(obs: impl IntoIterator<Item = &'a Obs>) -> BTreeMap<String, (i64, i64)> {
    let mut out: BTreeMap<String, (i64, i64)> = BTreeMap::new();
    for o in obs {
        if let Some(leaf) = o.frames.last() {
            out.entry(leaf.clone()).or_default().0 += o.value;
        }
        let distinct: BTreeSet<&String> = o.frames.iter().collect();
        for f in distinct {
            out.entry(f.clone()).or_default().1 += o.value;
        }
    }
    out
}

/// Sum and avg per bucket: buckets lie on the step's grid, `[k*step, (k+1)*step)` (the
/// first one cut by `from`, which must come before every observation); avg divides by the
/// distinct (series, timestamp) points of the bucket.
pub fn buckets<'a>(
    obs: impl IntoIterator<Item = &'a Obs>,
    from: i64,
    step: i64,
) -> BTreeMap<i64, (i64, f64)> {
    let mut sums: BTreeMap<i64, i64> = BTreeMap::new();
    let mut points: BTreeMap<i64, BTreeSet<(String, i64)>> = BTreeMap::new();
    for o in obs {
        assert!(o.time >= from, "an observation before the range");
        let start = o.time.div_euclid(step) * step;
        *sums.entry(start).or_default() += o.value;
        points.entry(start).or_default().insert((series_key(o), o.time));
    }
    sums.into_iter()
        .map(|(t, sum)| (t, (sum, sum as f64 / points[&t].len() as f64)))
        .collect()
}

/// A series is one profile type with one label set.
pub fn series_key(o: &Obs) -> String {
    format!("{}|{:?}", o.profile_type, o.labels)
}
