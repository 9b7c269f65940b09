//! A deterministic fleet: hosts × processes, each sampled at `hz` on every core and
//! exporting one OTLP request (v1.10 layout) every 5 s (or as configured). Stacks are
//! 10–120 frames deep, grown from each other so they share prefixes, and picked with a
//! Zipf-like popularity; frames come from the shared eBPF capture plus synthetic ones.
//! Optionally (the fleet phase): timestamps on each core's sampling cadence, pods that are
//! replaced (a churning `k8s.pod.name`), and stacks that end in a host's own frame.

use rand::rngs::SmallRng;
use rand::{Rng, RngCore, SeedableRng};
use std::collections::HashMap;

use prost::Message;
use stackhouse_proto::otlp_collector::ExportProfilesServiceRequest;
use stackhouse_proto::otlp_common::{AnyValue, InstrumentationScope, KeyValue, any_value};
use stackhouse_proto::otlp_profiles::{
    Function, KeyValueAndUnit, Line, Link, Location, Mapping, Profile, ProfilesDictionary, ResourceProfiles,
    Sample, ScopeProfiles, Stack, ValueType,
};
use stackhouse_proto::otlp_resource::Resource;

/// One export per process per this long, as the eBPF profiler does.
pub const EXPORT_NANOS: i64 = 5_000_000_000;

/// Picks indices `0..n` with probability ∝ 1 / (rank + 1)^s: a few hot entries, a long tail.
#[derive(Clone, Debug)]
pub struct Zipf {
    cdf: Vec<f64>,
}

impl Zipf {
    pub fn new(n: usize, s: f64) -> Zipf {
        let mut total = 0.0;
        let cdf = (0..n.max(1))
            .map(|r| {
                total += 1.0 / ((r + 1) as f64).powf(s);
                total
            })
            .collect::<Vec<_>>();
        Zipf {
            cdf: cdf.into_iter().map(|c| c / total).collect(),
        }
    }

    pub fn pick(&self, rng: &mut SmallRng) -> usize {
        let u = rng.random::<f64>();
        self.cdf.partition_point(|&c| c < u).min(self.cdf.len() - 1)
    }
}

#[derive(Clone, Debug)]
pub struct FleetConfig {
    pub hosts: usize,
    pub processes_per_host: usize,
    pub cores: usize,
    pub hz: u32,
    /// Length of the generated data; rounded down to whole exports.
    pub seconds: u64,
    /// Start of the data (unix nanos); every request covers `[t, t + 5 s)`.
    pub start_nanos: i64,
    pub seed: u64,
    /// Distinct programs; process `p` runs service `p % services`.
    pub services: usize,
    /// Distinct stacks per service.
    pub stacks_per_service: usize,
    /// Share of samples that carry a trace link.
    pub linked_share: f64,
    /// Share of ticks a core is busy; the profiler samples only then.
    pub busy: f64,
    /// How long one export covers: the eBPF profiler's 5 s, or a collector's longer batch.
    pub export_nanos: i64,
    /// Timestamps on each core's sampling cadence (a fixed phase per core, plus jitter of
    /// up to 1 % of the period) rather than anywhere inside the tick.
    pub cadence: bool,
    /// Pods are replaced this often, each replacement a new `k8s.pod.name`, so that series
    /// churn as they do on Kubernetes. `None`: no pod label.
    pub pod_lifetime_nanos: Option<i64>,
    /// Share of samples whose stack ends in a frame of their own host (kernels and libraries
    /// differ across hosts), so that distinct stacks grow with the fleet.
    pub host_variants: f64,
}

impl FleetConfig {
    /// A fleet with the defaults of the ingest workload: 80 % busy cores, 5 s exports,
    /// timestamps anywhere in their tick, no pods, no per-host stacks.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        hosts: usize,
        processes_per_host: usize,
        cores: usize,
        hz: u32,
        seconds: u64,
        start_nanos: i64,
        seed: u64,
    ) -> FleetConfig {
        FleetConfig {
            hosts,
            processes_per_host,
            cores,
            hz,
            seconds,
            start_nanos,
            seed,
            services: processes_per_host.clamp(1, 8),
            stacks_per_service: 2000,
            linked_share: 0.1,
            busy: 0.8,
            export_nanos: EXPORT_NANOS,
            cadence: false,
            pod_lifetime_nanos: None,
            host_variants: 0.0,
        }
    }
}

/// A code frame the generator can put in a stack.
#[derive(Clone, Debug)]
struct Frame {
    /// Index into `Universe::mappings`, or none.
    mapping: Option<usize>,
    address: u64,
    /// `(function index, line)` per line, callee first; empty for unsymbolized frames.
    lines: Vec<(usize, i64)>,
}

#[derive(Clone, Debug)]
struct FunctionDef {
    name: String,
    filename: String,
}

#[derive(Clone, Debug)]
struct MappingDef {
    filename: String,
    start: u64,
    limit: u64,
    offset: u64,
}

/// Everything shared by the fleet: frames and, per service, its stacks (root first).
#[derive(Clone, Debug)]
struct Universe {
    functions: Vec<FunctionDef>,
    mappings: Vec<MappingDef>,
    frames: Vec<Frame>,
    /// Frames taken from the capture (`0..captured`) come first.
    captured: usize,
    services: Vec<Vec<Vec<u32>>>,
    popularity: Zipf,
}

/// One generated request and what it holds.
#[derive(Clone, Debug)]
pub struct Generated {
    pub request: ExportProfilesServiceRequest,
    /// Sample timestamps in the request: the rows it becomes.
    pub samples: usize,
    /// Start of the 5 s window it covers.
    pub window_start: i64,
}

pub struct Workload {
    config: FleetConfig,
    universe: Universe,
}

impl Workload {
    /// `capture` is the shared eBPF export whose frames seed the frame pool.
    pub fn new(config: FleetConfig, capture: &ExportProfilesServiceRequest) -> Workload {
        let universe = Universe::build(&config, capture);
        Workload { config, universe }
    }

    pub fn config(&self) -> &FleetConfig {
        &self.config
    }

    pub fn processes(&self) -> usize {
        self.config.hosts * self.config.processes_per_host
    }

    pub fn windows(&self) -> usize {
        (self.config.seconds as i64 * 1_000_000_000 / self.config.export_nanos) as usize
    }

    /// The time the requests cover: whole exports from the start.
    pub fn range_nanos(&self) -> (i64, i64) {
        let c = &self.config;
        (
            c.start_nanos,
            c.start_nanos + self.windows() as i64 * c.export_nanos,
        )
    }

    /// Requests in time order: window by window, process by process.
    pub fn requests(&self) -> impl Iterator<Item = Generated> + '_ {
        (0..self.windows()).flat_map(move |w| (0..self.processes()).map(move |p| self.request(p, w)))
    }

    pub fn request_count(&self) -> usize {
        self.windows() * self.processes()
    }

    /// The request of process `process` for window `window`; independent of the others,
    /// so any subset can be generated in any order with the same bytes.
    pub fn request(&self, process: usize, window: usize) -> Generated {
        let c = &self.config;
        let mut rng = SmallRng::seed_from_u64(
            c.seed ^ (process as u64).wrapping_mul(0x2545_F491_4F6C_DD1D) ^ (window as u64) << 40,
        );
        let service = process % c.services.max(1);
        let host = process / c.processes_per_host.max(1);
        let window_start = c.start_nanos + window as i64 * c.export_nanos;
        let period = 1_000_000_000 / i64::from(c.hz.max(1));
        let ticks = c.export_nanos / period;
        // Each core's profiler timer fires at its own phase of the period.
        let phases: Vec<i64> = (0..c.cores)
            .map(|core| (mix(c.seed ^ (process as u64) << 20 ^ core as u64) % period as u64) as i64)
            .collect();
        let jitter = (period / 100).max(1);
        let threads: Vec<String> = std::iter::once("main".to_string())
            .chain((0..c.cores * 2).map(|i| format!("worker-{i}")))
            .chain(["gc".to_string(), "io".to_string()])
            .collect();
        let thread_pick = Zipf::new(threads.len(), 0.8);
        let traces: Vec<([u8; 16], [u8; 8])> = (0..4)
            .map(|_| {
                let mut trace = [0u8; 16];
                trace[..8].copy_from_slice(&rng.next_u64().to_le_bytes());
                trace[8..].copy_from_slice(&rng.next_u64().to_le_bytes());
                (trace, rng.next_u64().max(1).to_le_bytes())
            })
            .collect();

        let mut dict = DictBuilder::new(&self.universe);
        let mut samples: Vec<Sample> = Vec::new();
        let mut by_key: HashMap<(i32, i32, i32), usize> = HashMap::new();
        let mut count = 0;
        // Every (tick, core) is a slot; the profiler sees a core only in its busy slots.
        let slots = ticks as usize * c.cores;
        let mut slot = next_busy(&mut rng, 0, slots, c.busy);
        while slot < slots {
            let (tick, core) = ((slot / c.cores) as i64, slot % c.cores);
            let stack = self.universe.popularity.pick(&mut rng);
            let variant = (c.host_variants > 0.0 && rng.random::<f64>() < c.host_variants).then_some(host);
            let stack_index = dict.stack(service, stack, variant);
            let attr = dict.thread(&threads[thread_pick.pick(&mut rng)]);
            let link = if rng.random::<f64>() < c.linked_share {
                let (trace, span) = traces[rng.random_range(0..traces.len() as u64) as usize];
                dict.link(trace, span)
            } else {
                0
            };
            let t = if c.cadence {
                let offset = rng.random_range(0..=2 * jitter as u64) as i64 - jitter;
                (window_start + tick * period + phases[core] + offset)
                    .clamp(window_start, window_start + c.export_nanos - 1)
            } else {
                window_start + tick * period + rng.random_range(0..period as u64) as i64
            };
            let at = *by_key.entry((stack_index, attr, link)).or_insert_with(|| {
                samples.push(Sample {
                    stack_index,
                    attribute_indices: vec![attr],
                    link_index: link,
                    values: Vec::new(),
                    timestamps_unix_nano: Vec::new(),
                });
                samples.len() - 1
            });
            samples[at].timestamps_unix_nano.push(t as u64);
            count += 1;
            slot = next_busy(&mut rng, slot + 1, slots, c.busy);
        }
        let string = |d: &mut DictBuilder<'_>, s: &str| d.string(s);
        let sample_type = ValueType {
            type_strindex: string(&mut dict, "samples"),
            unit_strindex: string(&mut dict, "count"),
        };
        let period_type = ValueType {
            type_strindex: string(&mut dict, "cpu"),
            unit_strindex: string(&mut dict, "nanoseconds"),
        };
        let profile = Profile {
            sample_type: Some(sample_type),
            samples,
            time_unix_nano: window_start as u64,
            duration_nano: c.export_nanos as u64,
            period_type: Some(period_type),
            period,
            ..Default::default()
        };
        let kv = |key: &str, value: String| KeyValue {
            key: key.to_string(),
            value: Some(AnyValue {
                value: Some(any_value::Value::StringValue(value)),
            }),
            ..Default::default()
        };
        let mut attributes = vec![
            kv("service.name", format!("service-{service}")),
            kv("host.name", format!("host-{host:04}")),
            kv("process.pid", format!("{}", 1000 + process)),
            kv("process.executable.name", format!("svc{service}")),
        ];
        if let Some(lifetime) = c.pod_lifetime_nanos {
            // Replacements of one pod are staggered across the fleet, as rollouts are.
            let stagger = (mix(c.seed ^ process as u64) % lifetime.max(1) as u64) as i64;
            let generation = (window_start - c.start_nanos + stagger).div_euclid(lifetime.max(1));
            let suffix = mix(process as u64 ^ (generation as u64) << 32) & 0xf_ffff;
            attributes.push(kv("k8s.pod.name", format!("service-{service}-{suffix:05x}")));
        }
        let resource = Resource {
            attributes,
            ..Default::default()
        };
        let request = ExportProfilesServiceRequest {
            resource_profiles: vec![ResourceProfiles {
                resource: Some(resource),
                scope_profiles: vec![ScopeProfiles {
                    scope: Some(InstrumentationScope {
                        name: "stackhouse-bench".to_string(),
                        ..Default::default()
                    }),
                    profiles: vec![profile],
                    schema_url: String::new(),
                }],
                schema_url: String::new(),
            }],
            dictionary: Some(dict.finish()),
        };
        Generated {
            request,
            samples: count,
            window_start,
        }
    }

    /// Every request encoded as it goes on the wire.
    pub fn encoded(&self) -> Vec<(Vec<u8>, usize)> {
        self.requests()
            .map(|g| (g.request.encode_to_vec(), g.samples))
            .collect()
    }
}

impl Universe {
    fn build(config: &FleetConfig, capture: &ExportProfilesServiceRequest) -> Universe {
        let mut rng = SmallRng::seed_from_u64(config.seed ^ 0x5EED);
        let mut u = Universe {
            functions: Vec::new(),
            mappings: Vec::new(),
            frames: Vec::new(),
            captured: 0,
            services: Vec::new(),
            popularity: Zipf::new(config.stacks_per_service, 1.1),
        };
        u.add_captured(capture);
        // Each service has its own binary and code, on top of the captured runtime frames.
        let per_service = 400;
        for s in 0..config.services.max(1) {
            let mapping = u.mappings.len();
            u.mappings.push(MappingDef {
                filename: format!("/usr/local/bin/svc{s}"),
                start: 0x400000,
                limit: 0x400000 + (64 << 20),
                offset: 0,
            });
            for f in 0..per_service {
                let function = u.functions.len();
                u.functions.push(FunctionDef {
                    name: format!("svc{s}::module{}::function_{f}", f % 23),
                    filename: format!("src/module{}.rs", f % 23),
                });
                u.frames.push(Frame {
                    mapping: Some(mapping),
                    address: 0x401000 + (f as u64) * 0x140,
                    lines: vec![(function, 10 + (f as i64 % 500))],
                });
            }
        }
        let synthetic_start = u.captured;
        for s in 0..config.services.max(1) {
            let own = synthetic_start + s * per_service..synthetic_start + (s + 1) * per_service;
            let stacks = u.grow_stacks(&mut rng, config.stacks_per_service, own);
            u.services.push(stacks);
        }
        u
    }

    /// Frames of the capture's location table, with their mappings and functions.
    fn add_captured(&mut self, capture: &ExportProfilesServiceRequest) {
        let Some(dict) = &capture.dictionary else {
            return;
        };
        let s = |i: i32| {
            dict.string_table
                .get(usize::try_from(i).unwrap_or(0))
                .cloned()
                .unwrap_or_default()
        };
        let mapping_base = self.mappings.len();
        for m in &dict.mapping_table {
            self.mappings.push(MappingDef {
                filename: s(m.filename_strindex),
                start: m.memory_start,
                limit: m.memory_limit,
                offset: m.file_offset,
            });
        }
        let function_base = self.functions.len();
        for f in &dict.function_table {
            self.functions.push(FunctionDef {
                name: s(f.name_strindex),
                filename: s(f.filename_strindex),
            });
        }
        for l in dict.location_table.iter().skip(1) {
            let mapping = usize::try_from(l.mapping_index)
                .ok()
                .filter(|&i| i > 0 && i < dict.mapping_table.len())
                .map(|i| mapping_base + i);
            let lines = l
                .lines
                .iter()
                .filter_map(|line| {
                    let i = usize::try_from(line.function_index).ok()?;
                    (i > 0 && i < dict.function_table.len()).then_some((function_base + i, line.line))
                })
                .collect();
            self.frames.push(Frame {
                mapping,
                address: l.address,
                lines,
            });
        }
        self.captured = self.frames.len();
    }

    /// `n` stacks, root first: each after the first extends a prefix of an earlier (often
    /// popular) one, so call paths share their roots as real programs do.
    fn grow_stacks(&self, rng: &mut SmallRng, n: usize, own: std::ops::Range<usize>) -> Vec<Vec<u32>> {
        let mut stacks: Vec<Vec<u32>> = Vec::with_capacity(n);
        let parents = Zipf::new(n, 0.9);
        let frame = |rng: &mut SmallRng| -> u32 {
            // Mostly the service's own code; runtime and kernel frames from the capture.
            if self.captured > 0 && rng.random::<f64>() < 0.3 {
                rng.random_range(0..self.captured as u64) as u32
            } else {
                (own.start + rng.random_range(0..own.len() as u64) as usize) as u32
            }
        };
        for k in 0..n {
            // Depth 10..=120, most stacks 20–60 deep.
            let depth = 10 + (rng.random::<f64>().powf(1.6) * 110.0) as usize;
            let mut stack = if k == 0 {
                Vec::new()
            } else {
                let parent = &stacks[parents.pick(rng) % k];
                let keep = 1 + rng.random_range(0..parent.len() as u64) as usize;
                parent[..keep.min(parent.len())].to_vec()
            };
            let target = depth.max(stack.len() + 1).min(120);
            while stack.len() < target {
                stack.push(frame(rng));
            }
            stacks.push(stack);
        }
        stacks
    }
}

/// A request's dictionary, built from the frames its samples use (index 0 of every table
/// is the zero value).
struct DictBuilder<'u> {
    universe: &'u Universe,
    dict: ProfilesDictionary,
    strings: HashMap<String, i32>,
    functions: HashMap<usize, i32>,
    mappings: HashMap<usize, i32>,
    locations: HashMap<u32, i32>,
    stacks: HashMap<(usize, usize, Option<usize>), i32>,
    threads: HashMap<String, i32>,
    links: HashMap<([u8; 16], [u8; 8]), i32>,
}

impl<'u> DictBuilder<'u> {
    fn new(universe: &'u Universe) -> DictBuilder<'u> {
        let dict = ProfilesDictionary {
            mapping_table: vec![Mapping::default()],
            location_table: vec![Location::default()],
            function_table: vec![Function::default()],
            link_table: vec![Link::default()],
            string_table: vec![String::new()],
            attribute_table: vec![KeyValueAndUnit::default()],
            stack_table: vec![Stack::default()],
        };
        DictBuilder {
            universe,
            dict,
            strings: HashMap::from([(String::new(), 0)]),
            functions: HashMap::new(),
            mappings: HashMap::new(),
            locations: HashMap::new(),
            stacks: HashMap::new(),
            threads: HashMap::new(),
            links: HashMap::new(),
        }
    }

    fn finish(self) -> ProfilesDictionary {
        self.dict
    }

    fn string(&mut self, s: &str) -> i32 {
        if let Some(&i) = self.strings.get(s) {
            return i;
        }
        let i = self.dict.string_table.len() as i32;
        self.dict.string_table.push(s.to_string());
        self.strings.insert(s.to_string(), i);
        i
    }

    fn function(&mut self, f: usize) -> i32 {
        if let Some(&i) = self.functions.get(&f) {
            return i;
        }
        let def = &self.universe.functions[f];
        let function = Function {
            name_strindex: self.string(&def.name),
            system_name_strindex: 0,
            filename_strindex: self.string(&def.filename),
            start_line: 0,
        };
        let i = self.dict.function_table.len() as i32;
        self.dict.function_table.push(function);
        self.functions.insert(f, i);
        i
    }

    fn mapping(&mut self, m: usize) -> i32 {
        if let Some(&i) = self.mappings.get(&m) {
            return i;
        }
        let def = &self.universe.mappings[m];
        let mapping = Mapping {
            memory_start: def.start,
            memory_limit: def.limit,
            file_offset: def.offset,
            filename_strindex: self.string(&def.filename),
            attribute_indices: Vec::new(),
        };
        let i = self.dict.mapping_table.len() as i32;
        self.dict.mapping_table.push(mapping);
        self.mappings.insert(m, i);
        i
    }

    fn location(&mut self, frame: u32) -> i32 {
        if let Some(&i) = self.locations.get(&frame) {
            return i;
        }
        let def = &self.universe.frames[frame as usize];
        let mapping_index = def.mapping.map_or(0, |m| self.mapping(m));
        let lines = def
            .lines
            .iter()
            .map(|&(f, line)| Line {
                function_index: self.function(f),
                line,
                column: 0,
            })
            .collect();
        let location = Location {
            mapping_index,
            address: def.address,
            lines,
            attribute_indices: Vec::new(),
        };
        let i = self.dict.location_table.len() as i32;
        self.dict.location_table.push(location);
        self.locations.insert(frame, i);
        i
    }

    /// Stack `stack` of `service`; with `variant`, ending in a frame of that host.
    fn stack(&mut self, service: usize, stack: usize, variant: Option<usize>) -> i32 {
        if let Some(&i) = self.stacks.get(&(service, stack, variant)) {
            return i;
        }
        let frames = &self.universe.services[service][stack];
        // OTLP lists the leaf first.
        let leaf = variant
            .filter(|_| self.universe.captured > 0)
            .map(|host| (mix(host as u64 ^ (stack as u64) << 24) % self.universe.captured as u64) as u32);
        let location_indices = leaf
            .into_iter()
            .chain(frames.iter().rev().copied())
            .map(|f| self.location(f))
            .collect();
        let i = self.dict.stack_table.len() as i32;
        self.dict.stack_table.push(Stack { location_indices });
        self.stacks.insert((service, stack, variant), i);
        i
    }

    fn thread(&mut self, name: &str) -> i32 {
        if let Some(&i) = self.threads.get(name) {
            return i;
        }
        let attribute = KeyValueAndUnit {
            key_strindex: self.string("thread.name"),
            value: Some(AnyValue {
                value: Some(any_value::Value::StringValue(name.to_string())),
            }),
            unit_strindex: 0,
        };
        let i = self.dict.attribute_table.len() as i32;
        self.dict.attribute_table.push(attribute);
        self.threads.insert(name.to_string(), i);
        i
    }

    fn link(&mut self, trace: [u8; 16], span: [u8; 8]) -> i32 {
        if let Some(&i) = self.links.get(&(trace, span)) {
            return i;
        }
        let i = self.dict.link_table.len() as i32;
        self.dict.link_table.push(Link {
            trace_id: trace.to_vec(),
            span_id: span.to_vec(),
        });
        self.links.insert((trace, span), i);
        i
    }
}

/// The first busy slot at or after `from` (`slots` when none is). A mostly busy fleet
/// draws once per slot; a mostly idle one jumps to the next busy slot with one draw of the
/// geometric gap, so that a month of idle cores does not cost a draw per tick.
fn next_busy(rng: &mut SmallRng, mut from: usize, slots: usize, busy: f64) -> usize {
    if busy >= 0.5 {
        while from < slots && rng.random::<f64>() < 1.0 - busy {
            from += 1;
        }
        return from.min(slots);
    }
    if busy <= 0.0 {
        return slots;
    }
    // P(gap = k) = (1 - busy)^k · busy.
    let u: f64 = rng.random::<f64>();
    let gap = ((1.0 - u).ln() / (1.0 - busy).ln()).floor();
    if gap.is_finite() && gap < (slots - from.min(slots)) as f64 {
        from + gap as usize
    } else {
        slots
    }
}

/// A 64-bit mix (splitmix64's finalizer): stable per-entity choices without an RNG stream.
fn mix(mut x: u64) -> u64 {
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

/// Reads the shared eBPF capture (`$STACKHOUSE_TESTDATA/otlp/…`, default
/// `/work/shared/testdata`) with our proto types.
pub fn load_capture() -> anyhow::Result<ExportProfilesServiceRequest> {
    use anyhow::Context;
    let dir = std::env::var("STACKHOUSE_TESTDATA").unwrap_or_else(|_| "/work/shared/testdata".into());
    let path = std::path::Path::new(&dir).join("otlp/ebpf-cpu-offcpu.v1_10.pb");
    let bytes = std::fs::read(&path).with_context(|| {
        format!(
            "reading the ebpf capture {}; set STACKHOUSE_TESTDATA",
            path.display()
        )
    })?;
    ExportProfilesServiceRequest::decode(bytes.as_slice())
        .with_context(|| format!("decoding the ebpf capture {}", path.display()))
}
