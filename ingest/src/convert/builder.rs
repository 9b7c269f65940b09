//! Builds one OTLP request (v1.10 layout) from any other format, interning every string,
//! function, mapping, location, stack, attribute and link once, so that converters only
//! describe samples and the shared OTLP validation and normalization do the rest.

use std::collections::HashMap;

use stackhouse_proto::otlp_collector::ExportProfilesServiceRequest;
use stackhouse_proto::otlp_common::{AnyValue, InstrumentationScope, KeyValue, any_value::Value};
use stackhouse_proto::otlp_profiles::{
    Function, KeyValueAndUnit, Line, Link, Location, Mapping, Profile, ProfilesDictionary, ResourceProfiles,
    ScopeProfiles, Stack, ValueType,
};
use stackhouse_proto::otlp_resource::Resource;

/// A frame's source line; `function` is an index from [`RequestBuilder::function`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct FrameLine {
    pub function: i32,
    pub line: i64,
    pub column: i64,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct MappingSpec {
    pub memory_start: u64,
    pub memory_limit: u64,
    pub file_offset: u64,
    pub filename: String,
    /// Stored as `process.executable.build_id.gnu` when not empty.
    pub build_id: String,
}

#[derive(Default)]
pub struct RequestBuilder {
    dict: ProfilesDictionary,
    strings: HashMap<String, i32>,
    functions: HashMap<(i32, i32, i32, i64), i32>,
    mappings: HashMap<MappingSpec, i32>,
    locations: HashMap<(i32, u64, Vec<FrameLine>), i32>,
    stacks: HashMap<Vec<i32>, i32>,
    attributes: HashMap<(i32, AttrValue, i32), i32>,
    links: HashMap<(Vec<u8>, Vec<u8>), i32>,
    /// Resources in first-seen order, each with its scopes in first-seen order.
    resources: Vec<(ResourceAttrs, Vec<ScopeProfiles>)>,
    profiles: usize,
}

type ResourceAttrs = Vec<(String, String)>;

/// The hashable part of an attribute value.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum AttrValue {
    Str(String),
    Int(i64),
}

impl RequestBuilder {
    pub fn new() -> RequestBuilder {
        let mut b = RequestBuilder::default();
        // Index 0 of every table is its zero value.
        b.dict.string_table.push(String::new());
        b.strings.insert(String::new(), 0);
        b.dict.mapping_table.push(Mapping::default());
        b.dict.location_table.push(Location::default());
        b.dict.function_table.push(Function::default());
        b.dict.link_table.push(Link::default());
        b.dict.attribute_table.push(KeyValueAndUnit::default());
        b.dict.stack_table.push(Stack::default());
        b
    }

    pub fn string(&mut self, s: &str) -> i32 {
        if let Some(&i) = self.strings.get(s) {
            return i;
        }
        let i = self.dict.string_table.len() as i32;
        self.dict.string_table.push(s.to_string());
        self.strings.insert(s.to_string(), i);
        i
    }

    pub fn value_type(&mut self, type_: &str, unit: &str) -> ValueType {
        ValueType {
            type_strindex: self.string(type_),
            unit_strindex: self.string(unit),
        }
    }

    pub fn function(&mut self, name: &str, system_name: &str, filename: &str, start_line: i64) -> i32 {
        let key = (
            self.string(name),
            self.string(system_name),
            self.string(filename),
            start_line,
        );
        let table = &mut self.dict.function_table;
        *self.functions.entry(key).or_insert_with(|| {
            table.push(Function {
                name_strindex: key.0,
                system_name_strindex: key.1,
                filename_strindex: key.2,
                start_line: key.3,
            });
            table.len() as i32 - 1
        })
    }

    /// Index 0 ("no mapping") for the default spec.
    pub fn mapping(&mut self, spec: &MappingSpec) -> i32 {
        if *spec == MappingSpec::default() {
            return 0;
        }
        if let Some(&i) = self.mappings.get(spec) {
            return i;
        }
        let attribute_indices = if spec.build_id.is_empty() {
            Vec::new()
        } else {
            vec![self.attribute_str("process.executable.build_id.gnu", &spec.build_id)]
        };
        let mapping = Mapping {
            memory_start: spec.memory_start,
            memory_limit: spec.memory_limit,
            file_offset: spec.file_offset,
            filename_strindex: self.string(&spec.filename),
            attribute_indices,
        };
        self.dict.mapping_table.push(mapping);
        let i = self.dict.mapping_table.len() as i32 - 1;
        self.mappings.insert(spec.clone(), i);
        i
    }

    /// `lines` callee first: the last line is the caller, as in pprof and OTLP.
    pub fn location(&mut self, mapping: i32, address: u64, lines: &[FrameLine]) -> i32 {
        let key = (mapping, address, lines.to_vec());
        let table = &mut self.dict.location_table;
        *self.locations.entry(key).or_insert_with(|| {
            table.push(Location {
                mapping_index: mapping,
                address,
                lines: lines
                    .iter()
                    .map(|l| Line {
                        function_index: l.function,
                        line: l.line,
                        column: l.column,
                    })
                    .collect(),
                attribute_indices: Vec::new(),
            });
            table.len() as i32 - 1
        })
    }

    /// A location with one line of a function known only by name: the common case for
    /// formats that carry frame names (folded, speedscope, JFR).
    pub fn named_frame(&mut self, name: &str, filename: &str, line: i64) -> i32 {
        let function = self.function(name, "", filename, 0);
        self.location(
            0,
            0,
            &[FrameLine {
                function,
                line,
                column: 0,
            }],
        )
    }

    /// `locations` leaf first, as OTLP stacks are.
    pub fn stack(&mut self, locations: &[i32]) -> i32 {
        if let Some(&i) = self.stacks.get(locations) {
            return i;
        }
        self.dict.stack_table.push(Stack {
            location_indices: locations.to_vec(),
        });
        let i = self.dict.stack_table.len() as i32 - 1;
        self.stacks.insert(locations.to_vec(), i);
        i
    }

    pub fn attribute_str(&mut self, key: &str, value: &str) -> i32 {
        self.attribute(key, AttrValue::Str(value.to_string()), "")
    }

    /// A numeric attribute with its unit ("" when it has none), like a pprof numeric label.
    pub fn attribute_int(&mut self, key: &str, value: i64, unit: &str) -> i32 {
        self.attribute(key, AttrValue::Int(value), unit)
    }

    fn attribute(&mut self, key: &str, value: AttrValue, unit: &str) -> i32 {
        let k = (self.string(key), value, self.string(unit));
        if let Some(&i) = self.attributes.get(&k) {
            return i;
        }
        let any = match &k.1 {
            AttrValue::Str(s) => Value::StringValue(s.clone()),
            AttrValue::Int(v) => Value::IntValue(*v),
        };
        self.dict.attribute_table.push(KeyValueAndUnit {
            key_strindex: k.0,
            value: Some(AnyValue { value: Some(any) }),
            unit_strindex: k.2,
        });
        let i = self.dict.attribute_table.len() as i32 - 1;
        self.attributes.insert(k, i);
        i
    }

    /// Ids of 16 and 8 bytes, or empty for "unknown"; both empty is "no link" (index 0).
    pub fn link(&mut self, trace_id: &[u8], span_id: &[u8]) -> i32 {
        if trace_id.is_empty() && span_id.is_empty() {
            return 0;
        }
        let key = (trace_id.to_vec(), span_id.to_vec());
        let table = &mut self.dict.link_table;
        *self.links.entry(key).or_insert_with(|| {
            table.push(Link {
                trace_id: trace_id.to_vec(),
                span_id: span_id.to_vec(),
            });
            table.len() as i32 - 1
        })
    }

    /// Adds a finished profile under the resource with exactly these attributes (string
    /// values; `service.name` among them) and the scope named `scope` ("" for none).
    pub fn push_profile(&mut self, resource: &[(String, String)], scope: &str, profile: Profile) {
        self.profiles += 1;
        let r = match self.resources.iter().position(|(attrs, _)| attrs == resource) {
            Some(r) => r,
            None => {
                self.resources.push((resource.to_vec(), Vec::new()));
                self.resources.len() - 1
            }
        };
        let scopes = &mut self.resources[r].1;
        let scope_name = |s: &ScopeProfiles| s.scope.as_ref().map_or("", |s| s.name.as_str()).to_string();
        match scopes.iter_mut().find(|s| scope_name(s) == scope) {
            Some(s) => s.profiles.push(profile),
            None => scopes.push(ScopeProfiles {
                scope: (!scope.is_empty()).then(|| InstrumentationScope {
                    name: scope.to_string(),
                    ..Default::default()
                }),
                profiles: vec![profile],
                schema_url: String::new(),
            }),
        }
    }

    /// Profiles pushed so far.
    pub fn profile_count(&self) -> usize {
        self.profiles
    }

    pub fn finish(self) -> ExportProfilesServiceRequest {
        let resource_profiles = self
            .resources
            .into_iter()
            .map(|(attrs, scope_profiles)| ResourceProfiles {
                resource: Some(Resource {
                    attributes: attrs
                        .into_iter()
                        .map(|(key, value)| KeyValue {
                            key,
                            value: Some(AnyValue {
                                value: Some(Value::StringValue(value)),
                            }),
                            ..Default::default()
                        })
                        .collect(),
                    ..Default::default()
                }),
                scope_profiles,
                schema_url: String::new(),
            })
            .collect();
        ExportProfilesServiceRequest {
            resource_profiles,
            dictionary: Some(self.dict),
        }
    }
}
