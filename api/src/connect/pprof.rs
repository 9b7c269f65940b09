//! The engine's pprof profile (`perftools.profiles`) as `SelectMergeProfile` answers it,
//! under Pyroscope's package name (`google.v1`). The two messages have the same fields
//! but for `Line.column`, which Pyroscope's lacks and a decoder of our bytes would drop
//! too. Each message is destructured without `..`, so a field added on either side fails
//! to compile here instead of going missing.

use stackhouse_proto::pprof;
use stackhouse_proto::pyroscope_profile as pyroscope;

pub fn to_pyroscope(p: pprof::Profile) -> pyroscope::Profile {
    let pprof::Profile {
        sample_type,
        sample,
        mapping,
        location,
        function,
        string_table,
        drop_frames,
        keep_frames,
        time_nanos,
        duration_nanos,
        period_type,
        period,
        comment,
        default_sample_type,
    } = p;
    pyroscope::Profile {
        sample_type: sample_type.into_iter().map(value_type).collect(),
        sample: sample.into_iter().map(self::sample).collect(),
        mapping: mapping.into_iter().map(self::mapping).collect(),
        location: location.into_iter().map(self::location).collect(),
        function: function.into_iter().map(self::function).collect(),
        string_table,
        drop_frames,
        keep_frames,
        time_nanos,
        duration_nanos,
        period_type: period_type.map(value_type),
        period,
        comment,
        default_sample_type,
    }
}

fn value_type(v: pprof::ValueType) -> pyroscope::ValueType {
    let pprof::ValueType { r#type, unit } = v;
    pyroscope::ValueType { r#type, unit }
}

fn sample(s: pprof::Sample) -> pyroscope::Sample {
    let pprof::Sample {
        location_id,
        value,
        label,
    } = s;
    pyroscope::Sample {
        location_id,
        value,
        label: label
            .into_iter()
            .map(|l| {
                let pprof::Label {
                    key,
                    str,
                    num,
                    num_unit,
                } = l;
                pyroscope::Label {
                    key,
                    str,
                    num,
                    num_unit,
                }
            })
            .collect(),
    }
}

fn mapping(m: pprof::Mapping) -> pyroscope::Mapping {
    let pprof::Mapping {
        id,
        memory_start,
        memory_limit,
        file_offset,
        filename,
        build_id,
        has_functions,
        has_filenames,
        has_line_numbers,
        has_inline_frames,
    } = m;
    pyroscope::Mapping {
        id,
        memory_start,
        memory_limit,
        file_offset,
        filename,
        build_id,
        has_functions,
        has_filenames,
        has_line_numbers,
        has_inline_frames,
    }
}

fn location(l: pprof::Location) -> pyroscope::Location {
    let pprof::Location {
        id,
        mapping_id,
        address,
        line,
        is_folded,
    } = l;
    pyroscope::Location {
        id,
        mapping_id,
        address,
        line: line
            .into_iter()
            .map(|l| {
                let pprof::Line {
                    function_id,
                    line,
                    column: _,
                } = l;
                pyroscope::Line { function_id, line }
            })
            .collect(),
        is_folded,
    }
}

fn function(f: pprof::Function) -> pyroscope::Function {
    let pprof::Function {
        id,
        name,
        system_name,
        filename,
        start_line,
    } = f;
    pyroscope::Function {
        id,
        name,
        system_name,
        filename,
        start_line,
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
