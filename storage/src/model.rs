//! The normalized profile model every wire format converts into, and the content-derived
//! identities that let independent ingest replicas agree on ids without coordinating.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fmt;

use xxhash_rust::xxh3::{Xxh3Default, xxh3_64, xxh3_128};

/// A hash map with foldhash, keyed per process: symbol ids and stack paths are hashed
/// millions of times per query and per flush, where SipHash dominated the profile.
pub type FastMap<K, V> = HashMap<K, V, foldhash::fast::RandomState>;

/// A map keyed by [`SymbolId`].
pub type IdMap<V> = FastMap<SymbolId, V>;

/// Content-derived identity of a function, mapping, location, stack node or attribute set:
/// xxh3-128 of the canonical fields. At 10^9 distinct rows the chance of any collision is
/// about 10^-21, so ids are compared, never the content.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default)]
pub struct SymbolId(pub [u8; 16]);

/// One 128-bit word: the derived hash of a byte array goes through the hasher's slice
/// path with a length prefix, which showed in every map keyed by ids.
impl std::hash::Hash for SymbolId {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        state.write_u128(u128::from_le_bytes(self.0));
    }
}

impl SymbolId {
    /// The id of "nothing": the empty stack, the empty attribute set, no mapping.
    pub const ZERO: SymbolId = SymbolId([0; 16]);

    pub fn is_zero(&self) -> bool {
        *self == Self::ZERO
    }

    pub fn from_slice(bytes: &[u8]) -> Option<SymbolId> {
        Some(SymbolId(bytes.try_into().ok()?))
    }

    pub fn to_hex(&self) -> String {
        hex::encode(self.0)
    }
}

impl fmt::Debug for SymbolId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_hex())
    }
}

impl fmt::Display for SymbolId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_hex())
    }
}

/// Feeds fields into xxh3-128 with a kind tag and length prefixes, so that no two different
/// field lists (or kinds) produce the same byte stream.
struct IdHasher(Xxh3Default);

impl IdHasher {
    fn new(kind: &[u8]) -> Self {
        let mut h = Xxh3Default::new();
        h.update(kind);
        h.update(&[0xff]);
        IdHasher(h)
    }

    fn str(&mut self, s: &str) -> &mut Self {
        self.0.update(&(s.len() as u64).to_le_bytes());
        self.0.update(s.as_bytes());
        self
    }

    fn u64(&mut self, v: u64) -> &mut Self {
        self.0.update(&v.to_le_bytes());
        self
    }

    fn id(&mut self, id: SymbolId) -> &mut Self {
        self.0.update(&id.0);
        self
    }

    fn finish(&self) -> SymbolId {
        nonzero(SymbolId(self.0.digest128().to_le_bytes()))
    }
}

/// The zero id is reserved for "nothing"; a real hash of zero is astronomically unlikely,
/// but must not alias it.
fn nonzero(id: SymbolId) -> SymbolId {
    if id.is_zero() { SymbolId([1; 16]) } else { id }
}

#[derive(Clone, Debug, PartialEq, Eq, Hash, Default)]
pub struct Function {
    pub name: String,
    pub system_name: String,
    pub filename: String,
    pub start_line: i64,
}

impl Function {
    pub fn id(&self) -> SymbolId {
        IdHasher::new(b"function")
            .str(&self.name)
            .str(&self.system_name)
            .str(&self.filename)
            .u64(self.start_line as u64)
            .finish()
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Hash, Default)]
pub struct Mapping {
    pub memory_start: u64,
    pub memory_limit: u64,
    pub file_offset: u64,
    pub filename: String,
    /// `process.executable.build_id.*` of the mapping when the sender gave one.
    pub build_id: String,
}

impl Mapping {
    pub fn id(&self) -> SymbolId {
        IdHasher::new(b"mapping")
            .u64(self.memory_start)
            .u64(self.memory_limit)
            .u64(self.file_offset)
            .str(&self.filename)
            .str(&self.build_id)
            .finish()
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Hash, Default)]
pub struct Line {
    pub function_id: SymbolId,
    pub line: i64,
    pub column: i64,
}

/// A code location. With several lines, the last one is the caller the others were
/// inlined into (as in OTLP and pprof).
#[derive(Clone, Debug, PartialEq, Eq, Hash, Default)]
pub struct Location {
    /// [`SymbolId::ZERO`] when the location has no mapping.
    pub mapping_id: SymbolId,
    pub address: u64,
    pub lines: Vec<Line>,
}

impl Location {
    pub fn id(&self) -> SymbolId {
        let mut h = IdHasher::new(b"location");
        h.id(self.mapping_id)
            .u64(self.address)
            .u64(self.lines.len() as u64);
        for line in &self.lines {
            h.id(line.function_id)
                .u64(line.line as u64)
                .u64(line.column as u64);
        }
        h.finish()
    }
}

/// One node of the stack tree: a call path is its leaf node, and walking `parent_id` up to
/// [`SymbolId::ZERO`] yields the locations leaf-first. Shared prefixes are stored once.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct StackNode {
    /// [`SymbolId::ZERO`] for a root frame.
    pub parent_id: SymbolId,
    pub location_id: SymbolId,
}

impl StackNode {
    /// The same bytes [`IdHasher`] would feed (`stack`, 0xff, parent, location), hashed in
    /// one call: ingest computes one id per frame of every stack it receives, and the
    /// streaming hasher's setup cost more than the hashing.
    pub fn id(&self) -> SymbolId {
        const TAG: &[u8] = b"stack\xff";
        let mut bytes = [0u8; TAG.len() + 32];
        bytes[..TAG.len()].copy_from_slice(TAG);
        bytes[TAG.len()..TAG.len() + 16].copy_from_slice(&self.parent_id.0);
        bytes[TAG.len() + 16..].copy_from_slice(&self.location_id.0);
        nonzero(SymbolId(xxh3_128(&bytes).to_le_bytes()))
    }
}

/// Sample-level attributes (`thread.name`, `thread.id`, …) as strings, sorted by key.
/// The empty set has id [`SymbolId::ZERO`] and is never stored.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Default)]
pub struct AttributeSet {
    pub attrs: Vec<(String, String)>,
}

impl AttributeSet {
    /// Sorts by key; for a key given twice the last value wins.
    pub fn new(mut attrs: Vec<(String, String)>) -> Self {
        attrs.reverse();
        attrs.sort_by(|a, b| a.0.cmp(&b.0));
        attrs.dedup_by(|a, b| a.0 == b.0);
        AttributeSet { attrs }
    }

    pub fn id(&self) -> SymbolId {
        if self.attrs.is_empty() {
            return SymbolId::ZERO;
        }
        let mut h = IdHasher::new(b"attributes");
        h.u64(self.attrs.len() as u64);
        for (k, v) in &self.attrs {
            h.str(k).str(v);
        }
        h.finish()
    }

    pub fn get(&self, key: &str) -> Option<&str> {
        self.attrs
            .binary_search_by(|(k, _)| k.as_str().cmp(key))
            .ok()
            .map(|i| self.attrs[i].1.as_str())
    }
}

/// `sample_type:sample_unit:period_type:period_unit`, e.g. `samples:count:cpu:nanoseconds`.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct ProfileType {
    pub sample_type: String,
    pub sample_unit: String,
    pub period_type: String,
    pub period_unit: String,
}

impl ProfileType {
    pub fn id(&self) -> String {
        format!(
            "{}:{}:{}:{}",
            self.sample_type, self.sample_unit, self.period_type, self.period_unit
        )
    }

    /// Parses an id; exactly four `:`-separated parts, the sample type not empty.
    pub fn parse(id: &str) -> Option<ProfileType> {
        let parts: Vec<&str> = id.split(':').collect();
        let [sample_type, sample_unit, period_type, period_unit] = parts.as_slice() else {
            return None;
        };
        if sample_type.is_empty() {
            return None;
        }
        Some(ProfileType {
            sample_type: sample_type.to_string(),
            sample_unit: sample_unit.to_string(),
            period_type: period_type.to_string(),
            period_unit: period_unit.to_string(),
        })
    }

    /// The type a count of CPU samples is shown as in time: `samples:count:cpu:nanoseconds`
    /// (a sample every `period` ns of CPU, as the OTel eBPF profiler sends) becomes
    /// `cpu:nanoseconds:cpu:nanoseconds`, each sample worth one period, as Pyroscope
    /// converts it at ingest. `None` for every other type.
    pub fn in_time(&self) -> Option<ProfileType> {
        (self.sample_type == "samples"
            && self.sample_unit == "count"
            && self.period_type == "cpu"
            && self.period_unit == "nanoseconds")
            .then(|| ProfileType {
                sample_type: self.period_type.clone(),
                sample_unit: self.period_unit.clone(),
                ..self.clone()
            })
    }

    /// The counted type [`ProfileType::in_time`] shows as this one, if any.
    pub fn counted(&self) -> Option<ProfileType> {
        let counted = ProfileType {
            sample_type: "samples".into(),
            sample_unit: "count".into(),
            ..self.clone()
        };
        (counted.in_time().as_ref() == Some(self)).then_some(counted)
    }
}

pub type Labels = BTreeMap<String, String>;

/// A series: one profile type of one source (resource, scope and profile attributes).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Series {
    pub id: i64,
    pub profile_type: ProfileType,
    pub labels: Labels,
    /// The sampling period in `period_unit`, as last sent (not part of the identity).
    pub period: i64,
}

impl Series {
    pub fn new(profile_type: ProfileType, labels: Labels, period: i64) -> Series {
        Series {
            id: Self::id_of(&profile_type, &labels),
            profile_type,
            labels,
            period,
        }
    }

    /// 64-bit: a tenant has at most millions of series, and the catalog refuses a second
    /// label set under an existing id instead of merging them.
    pub fn id_of(profile_type: &ProfileType, labels: &Labels) -> i64 {
        let mut buf = Vec::with_capacity(256);
        for s in [
            &profile_type.sample_type,
            &profile_type.sample_unit,
            &profile_type.period_type,
            &profile_type.period_unit,
        ] {
            buf.extend_from_slice(&(s.len() as u64).to_le_bytes());
            buf.extend_from_slice(s.as_bytes());
        }
        for (k, v) in labels {
            buf.extend_from_slice(&(k.len() as u64).to_le_bytes());
            buf.extend_from_slice(k.as_bytes());
            buf.extend_from_slice(&(v.len() as u64).to_le_bytes());
            buf.extend_from_slice(v.as_bytes());
        }
        xxh3_64(&buf) as i64
    }
}

/// One observation: a value at a time for a stack.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SampleRow {
    pub time_nanos: i64,
    pub series_id: i64,
    /// Leaf node of the stack tree; [`SymbolId::ZERO`] for an empty stack.
    pub stack_id: SymbolId,
    pub value: i64,
    /// [`SymbolId::ZERO`] when the sample has no attributes.
    pub attr_set_id: SymbolId,
    pub trace_id: Option<[u8; 16]>,
    pub span_id: Option<[u8; 8]>,
    pub profile_id: Option<[u8; 16]>,
}

/// What the catalog keeps about a profile that carried a `profile_id`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProfileRecord {
    pub profile_id: [u8; 16],
    pub series_id: i64,
    pub start_nanos: i64,
    pub end_nanos: i64,
    pub sample_count: i64,
    /// Resource attributes alone: the series labels merge them with scope and profile
    /// attributes, and then neither side can be told apart.
    pub resource: Labels,
    /// The profile's own attributes (OTLP `Profile.attribute_indices`).
    pub attributes: Labels,
}

/// What tells one stored profile from another: a retried export carries the same profile
/// id, series and start time, and is not stored twice.
pub type ProfileKey = ([u8; 16], i64, i64);

impl ProfileRecord {
    pub fn key(&self) -> ProfileKey {
        (self.profile_id, self.series_id, self.start_nanos)
    }
}

/// Normalized data of one or more requests of one tenant, symbols deduplicated by id.
#[derive(Clone, Debug, Default)]
pub struct Batch {
    pub tenant: String,
    pub series: HashMap<i64, Series>,
    pub samples: Vec<SampleRow>,
    pub stacks: IdMap<StackNode>,
    pub locations: IdMap<Location>,
    pub functions: IdMap<Function>,
    pub mappings: IdMap<Mapping>,
    pub attr_sets: IdMap<AttributeSet>,
    pub profiles: Vec<ProfileRecord>,
    /// The call paths this batch brings nodes for, by [`path_key`] (over the content keys
    /// of their frames) to their leaf node, and the locations it brings, by the hash of
    /// their content as the sender wrote it: once committed, the writer remembers both so
    /// that ingest need not build them again.
    pub path_keys: FastMap<u128, SymbolId>,
    pub location_keys: FastMap<u128, SymbolId>,
    /// The oldest [`KnownSymbols`](crate::symbols::KnownSymbols) generation whose lookups
    /// this batch was built with (a symbol found there is used without being brought);
    /// `None` when it was built without any.
    pub known_generation: Option<u64>,
}

/// Identifies a call path by one 16-byte key per frame (leaf first; ingest uses the
/// content keys of the frames' locations, so that a stored path is found without looking
/// its locations up) in one hash over the path, instead of one hash per frame as its node
/// ids need; only a lookup key, never stored.
/// The ids are copied into `buf` (reused by the caller) and hashed in one call: feeding the
/// streaming hasher 16 bytes at a time cost most of a known stack's lookup.
pub fn path_key(frames_leaf_first: &[SymbolId], buf: &mut Vec<u8>) -> u128 {
    buf.clear();
    for id in frames_leaf_first {
        buf.extend_from_slice(&id.0);
    }
    xxh3_128(buf)
}

impl Batch {
    pub fn new(tenant: impl Into<String>) -> Batch {
        Batch {
            tenant: tenant.into(),
            ..Default::default()
        }
    }

    pub fn add_function(&mut self, function: Function) -> SymbolId {
        let id = function.id();
        self.functions.entry(id).or_insert(function);
        id
    }

    pub fn add_mapping(&mut self, mapping: Mapping) -> SymbolId {
        let id = mapping.id();
        self.mappings.entry(id).or_insert(mapping);
        id
    }

    pub fn add_location(&mut self, location: Location) -> SymbolId {
        let id = location.id();
        self.locations.entry(id).or_insert(location);
        id
    }

    /// Adds a call path given leaf-first (as OTLP and pprof order it) and returns the id
    /// of its leaf node; the empty path is [`SymbolId::ZERO`].
    pub fn add_stack(&mut self, locations_leaf_first: &[SymbolId]) -> SymbolId {
        let mut parent_id = SymbolId::ZERO;
        for &location_id in locations_leaf_first.iter().rev() {
            let node = StackNode {
                parent_id,
                location_id,
            };
            let id = node.id();
            self.stacks.entry(id).or_insert(node);
            parent_id = id;
        }
        parent_id
    }

    pub fn add_attr_set(&mut self, set: AttributeSet) -> SymbolId {
        let id = set.id();
        if !id.is_zero() {
            self.attr_sets.entry(id).or_insert(set);
        }
        id
    }

    pub fn add_series(&mut self, series: Series) -> i64 {
        let id = series.id;
        self.series.insert(id, series);
        id
    }

    pub fn is_empty(&self) -> bool {
        self.samples.is_empty() && self.profiles.is_empty()
    }

    /// A cheap estimate of the memory the batch holds: fixed-size rows times their count
    /// plus the string bytes of symbols and labels. Hash map overhead is left out; the
    /// estimate only has to grow with the batch so a budget over it bounds memory.
    pub fn estimated_bytes(&self) -> usize {
        use std::mem::size_of;
        let labels = |l: &Labels| l.iter().map(|(k, v)| k.len() + v.len()).sum::<usize>();
        let series: usize = self
            .series
            .values()
            .map(|s| {
                let t = &s.profile_type;
                size_of::<Series>()
                    + t.sample_type.len()
                    + t.sample_unit.len()
                    + t.period_type.len()
                    + t.period_unit.len()
                    + labels(&s.labels)
            })
            .sum();
        let locations: usize = self
            .locations
            .values()
            .map(|l| size_of::<(SymbolId, Location)>() + l.lines.len() * size_of::<Line>())
            .sum();
        let functions: usize = self
            .functions
            .values()
            .map(|f| {
                size_of::<(SymbolId, Function)>() + f.name.len() + f.system_name.len() + f.filename.len()
            })
            .sum();
        let mappings: usize = self
            .mappings
            .values()
            .map(|m| size_of::<(SymbolId, Mapping)>() + m.filename.len() + m.build_id.len())
            .sum();
        let attr_sets: usize = self
            .attr_sets
            .values()
            .map(|a| {
                size_of::<(SymbolId, AttributeSet)>()
                    + a.attrs
                        .iter()
                        .map(|(k, v)| size_of::<(String, String)>() + k.len() + v.len())
                        .sum::<usize>()
            })
            .sum();
        let profiles: usize = self
            .profiles
            .iter()
            .map(|p| size_of::<ProfileRecord>() + labels(&p.resource) + labels(&p.attributes))
            .sum();
        self.tenant.len()
            + self.samples.len() * size_of::<SampleRow>()
            + self.stacks.len() * size_of::<(SymbolId, StackNode)>()
            + (self.path_keys.len() + self.location_keys.len()) * size_of::<(u128, SymbolId)>()
            + series
            + locations
            + functions
            + mappings
            + attr_sets
            + profiles
    }

    /// Removes the profiles whose keys are in `keys`, with their samples, and returns how
    /// many profiles went. Samples know their profile by id and series only, so a profile
    /// stays when another one of the batch has its id and series but not its key.
    pub fn remove_profiles(&mut self, keys: &HashSet<ProfileKey>) -> usize {
        if keys.is_empty() {
            return 0;
        }
        let pair = |p: &ProfileRecord| (p.profile_id, p.series_id);
        let kept: HashSet<([u8; 16], i64)> = self
            .profiles
            .iter()
            .filter(|p| !keys.contains(&p.key()))
            .map(pair)
            .collect();
        let removed: HashSet<([u8; 16], i64)> = self
            .profiles
            .iter()
            .filter(|p| keys.contains(&p.key()))
            .map(pair)
            .filter(|p| !kept.contains(p))
            .collect();
        if removed.is_empty() {
            return 0;
        }
        let before = self.profiles.len();
        self.profiles.retain(|p| !removed.contains(&pair(p)));
        self.samples.retain(|s| {
            !s.profile_id
                .is_some_and(|id| removed.contains(&(id, s.series_id)))
        });
        before - self.profiles.len()
    }

    /// Removes the samples, profiles and definitions of `series`, and returns how many
    /// samples went. Symbols stay: content-addressed, they are harmless unreferenced.
    pub fn remove_series(&mut self, series: &HashSet<i64>) -> usize {
        if series.is_empty() {
            return 0;
        }
        let before = self.samples.len();
        self.samples.retain(|s| !series.contains(&s.series_id));
        self.profiles.retain(|p| !series.contains(&p.series_id));
        self.series.retain(|id, _| !series.contains(id));
        before - self.samples.len()
    }

    /// Moves everything of `other` (same tenant) into `self`.
    pub fn merge(&mut self, other: Batch) {
        debug_assert_eq!(self.tenant, other.tenant);
        self.series.extend(other.series);
        self.samples.extend(other.samples);
        self.stacks.extend(other.stacks);
        self.locations.extend(other.locations);
        self.functions.extend(other.functions);
        self.mappings.extend(other.mappings);
        self.attr_sets.extend(other.attr_sets);
        self.profiles.extend(other.profiles);
        self.path_keys.extend(other.path_keys);
        self.location_keys.extend(other.location_keys);
        // The oldest lookups decide whether the merged batch must be checked.
        self.known_generation = match (self.known_generation, other.known_generation) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
    }
}

/// What joins the tenants of a read over several (`X-Scope-OrgID: a|b`): no tenant name
/// contains it, so a tenant string holding it names a union and nothing else.
pub const TENANT_SEPARATOR: char = '|';

/// The tenants `tenant` names: itself, or the members of a union.
pub fn member_tenants(tenant: &str) -> impl Iterator<Item = &str> {
    tenant.split(TENANT_SEPARATOR)
}

/// Whether `tenant` names a union of tenants.
pub fn is_union(tenant: &str) -> bool {
    tenant.contains(TENANT_SEPARATOR)
}

/// Half-open time range `[start, end)` in unix nanoseconds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TimeRange {
    pub start: i64,
    pub end: i64,
}

impl TimeRange {
    pub const ALL: TimeRange = TimeRange {
        start: i64::MIN,
        end: i64::MAX,
    };

    pub fn contains(&self, t: i64) -> bool {
        self.start <= t && t < self.end
    }

    /// Whether the closed interval `[min, max]` of some data overlaps this range.
    pub fn overlaps(&self, min: i64, max: i64) -> bool {
        min < self.end && max >= self.start
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shared_prefixes_share_nodes() {
        let mut b = Batch::new("t");
        let [a, bb, c] = [1u8, 2, 3].map(|i| SymbolId([i; 16]));
        let s1 = b.add_stack(&[c, bb, a]);
        let s2 = b.add_stack(&[bb, a]);
        assert_eq!(b.stacks.len(), 3, "a, a;b, a;b;c");
        assert_eq!(b.stacks[&s1].parent_id, s2);
        assert_ne!(s1, s2);
        assert_eq!(b.add_stack(&[]), SymbolId::ZERO);
    }

    #[test]
    fn path_keys_tell_paths_apart_whatever_the_buffer_held() {
        let [a, b] = [1u8, 2].map(|i| SymbolId([i; 16]));
        let mut buf = vec![9u8; 100];
        let ab = path_key(&[a, b], &mut buf);
        let mut concatenated = [1u8; 32];
        concatenated[16..].fill(2);
        assert_eq!(ab, xxh3_128(&concatenated), "one hash over the ids in order");
        assert_ne!(path_key(&[b, a], &mut buf), ab);
        assert_ne!(path_key(&[a], &mut buf), ab);
        assert_eq!(path_key(&[a, b], &mut Vec::new()), ab);
    }

    #[test]
    fn ids_depend_on_every_field() {
        let f = Function {
            name: "a".into(),
            filename: "b".into(),
            ..Default::default()
        };
        let g = Function {
            name: "ab".into(),
            ..Default::default()
        };
        assert_ne!(f.id(), g.id(), "length prefixes keep field boundaries");
        let set = AttributeSet::new(vec![
            ("b".into(), "1".into()),
            ("a".into(), "2".into()),
            ("b".into(), "3".into()),
        ]);
        assert_eq!(
            set.attrs,
            vec![("a".into(), "2".into()), ("b".into(), "3".into())]
        );
        assert_eq!(AttributeSet::default().id(), SymbolId::ZERO);
    }

    #[test]
    fn profile_type_round_trips() {
        let t = ProfileType::parse("off_cpu:nanoseconds::").unwrap();
        assert_eq!(t.period_type, "");
        assert_eq!(t.id(), "off_cpu:nanoseconds::");
        assert!(ProfileType::parse("a:b:c").is_none());
        assert!(ProfileType::parse(":b:c:d").is_none());
    }
}
