//! The engine's pprof profile (`perftools.profiles`) as `SelectMergeProfile` answers it,
//! under Pyroscope's package name (`google.v1`). The two messages have the same fields
//! but for `Line.column`, which Pyroscope's lacks and a decoder of our bytes would drop
//! too. Pyroscope's messages are built without `..`, so a field added to them fails to
//! compile here instead of going missing.

use stackhouse_proto::pprof;
use stackhouse_proto::pyroscope_profile as pyroscope;

pub(crate) fn to_pyroscope(p: pprof::Profile) -> pyroscope::Profile {
    pyroscope::Profile {
        sample_type: p.sample_type.into_iter().map(value_type).collect(),
        sample: p.sample.into_iter().map(sample).collect(),
        mapping: p.mapping.into_iter().map(mapping).collect(),
        location: p.location.into_iter().map(location).collect(),
        function: p.function.into_iter().map(function).collect(),
        string_table: p.string_table,
        drop_frames: p.drop_frames,
        keep_frames: p.keep_frames,
        time_nanos: p.time_nanos,
        duration_nanos: p.duration_nanos,
        period_type: p.period_type.map(value_type),
        period: p.period,
        comment: p.comment,
        default_sample_type: p.default_sample_type,
    }
}

fn value_type(v: pprof::ValueType) -> pyroscope::ValueType {
    pyroscope::ValueType {
        r#type: v.r#type,
        unit: v.unit,
    }
}

fn sample(s: pprof::Sample) -> pyroscope::Sample {
    pyroscope::Sample {
        location_id: s.location_id,
        value: s.value,
        label: s
            .label
            .into_iter()
            .map(|l| pyroscope::Label {
                key: l.key,
                str: l.str,
                num: l.num,
                num_unit: l.num_unit,
            })
            .collect(),
    }
}

fn mapping(m: pprof::Mapping) -> pyroscope::Mapping {
    pyroscope::Mapping {
        id: m.id,
        memory_start: m.memory_start,
        memory_limit: m.memory_limit,
        file_offset: m.file_offset,
        filename: m.filename,
        build_id: m.build_id,
        has_functions: m.has_functions,
        has_filenames: m.has_filenames,
        has_line_numbers: m.has_line_numbers,
        has_inline_frames: m.has_inline_frames,
    }
}

fn location(l: pprof::Location) -> pyroscope::Location {
    pyroscope::Location {
        id: l.id,
        mapping_id: l.mapping_id,
        address: l.address,
        line: l
            .line
            .into_iter()
            .map(|l| pyroscope::Line {
                function_id: l.function_id,
                line: l.line,
            })
            .collect(),
        is_folded: l.is_folded,
    }
}

fn function(f: pprof::Function) -> pyroscope::Function {
    pyroscope::Function {
        id: f.id,
        name: f.name,
        system_name: f.system_name,
        filename: f.filename,
        start_line: f.start_line,
    }
}

#[cfg(test)]
mod tests {
    use prost::Message;

    use super::*;

    /// The conversion answers what decoding our encoded profile as Pyroscope's would.
    #[test]
    fn same_as_decoding_the_encoded_profile() {
        let profile = pprof::Profile {
            sample_type: vec![pprof::ValueType { r#type: 1, unit: 2 }],
            sample: vec![pprof::Sample {
                location_id: vec![1],
                value: vec![7],
                label: vec![pprof::Label {
                    key: 3,
                    str: 4,
                    num: 5,
                    num_unit: 6,
                }],
            }],
            mapping: vec![pprof::Mapping {
                id: 1,
                memory_start: 0x1000,
                memory_limit: 0x2000,
                file_offset: 8,
                filename: 5,
                build_id: 6,
                has_functions: true,
                ..Default::default()
            }],
            location: vec![pprof::Location {
                id: 1,
                mapping_id: 1,
                address: 0x1234,
                line: vec![pprof::Line {
                    function_id: 1,
                    line: 42,
                    column: 3,
                }],
                is_folded: false,
            }],
            function: vec![pprof::Function {
                id: 1,
                name: 7,
                system_name: 7,
                filename: 8,
                start_line: 40,
            }],
            string_table: (0..9).map(|i| format!("s{i}")).collect(),
            time_nanos: 10,
            duration_nanos: 20,
            period_type: Some(pprof::ValueType { r#type: 1, unit: 2 }),
            period: 100,
            comment: vec![8],
            default_sample_type: 1,
            ..Default::default()
        };
        let decoded = pyroscope::Profile::decode(profile.encode_to_vec().as_slice()).unwrap();
        assert_eq!(to_pyroscope(profile), decoded);
    }
}
