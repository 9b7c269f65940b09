//! The receivers decode the dictionary into flat tables with their own wire reader: it must
//! accept and refuse the same bytes as prost and read the same values, including the wire
//! forms real encoders rarely write (unpacked indices, a message sent twice, unknown
//! fields). prost is the independent decoder every expectation comes from.

// One dependency list serves all of the package's tests, benches and binaries.
#![allow(unused_crate_dependencies)]

mod common;

use common::{CAPTURE_PB, SPAN_ID, STRINGS, TRACE_ID, two_profiles};
use prost::Message;
use prost::encoding::{WireType, encode_key, encode_varint};
use stackhouse_ingest::otlp::{AnySeries, Dictionary, Limits, Tenant, normalize, normalize_within};
use stackhouse_ingest::otlp::{dictionary, layout};
use stackhouse_proto::otlp_collector::ExportProfilesServiceRequest;
use stackhouse_proto::otlp_profiles::ResourceProfiles;
use stackhouse_storage::symbols::KnownSymbols;

/// The flat decoder alone, held to prost's reading whenever it reads the bytes (`None`:
/// it leaves them to prost).
fn flat(bytes: &[u8]) -> Option<Dictionary> {
    let (request, dictionary) = dictionary::decode_request(bytes)?;
    let expected =
        ExportProfilesServiceRequest::decode(bytes).expect("prost reads what the flat decoder reads");
    assert_eq!(
        resource_profiles(&request, &dictionary),
        expected.resource_profiles
    );
    assert_eq!(dictionary.to_proto(), expected.dictionary.unwrap_or_default());
    Some(dictionary)
}

/// Decodes `bytes` as the receivers do and as prost does and asserts they agree; the
/// receivers' reading when both accept.
fn both(bytes: &[u8]) -> Result<(ExportProfilesServiceRequest, Dictionary), String> {
    let prost = layout::decode_protobuf(bytes, None);
    let flat = layout::decode_protobuf_flat(bytes, None);
    match (prost, flat) {
        (
            Ok(expected),
            Ok(layout::Decoded {
                request, dictionary, ..
            }),
        ) => {
            assert_eq!(
                request.dictionary, None,
                "the flat reading leaves no dictionary behind"
            );
            assert_eq!(
                resource_profiles(&request, &dictionary),
                expected.resource_profiles
            );
            assert_eq!(dictionary.to_proto(), expected.dictionary.unwrap_or_default());
            Ok((request, dictionary))
        }
        (Err(a), Err(b)) => {
            assert_eq!(a.to_string(), b.to_string());
            Err(a.to_string())
        }
        (a, b) => panic!("prost and the flat decoder disagree: {a:?} vs {b:?}"),
    }
}

/// The request's resource profiles with the samples it was decoded with, wherever they are.
fn resource_profiles(
    request: &ExportProfilesServiceRequest,
    dictionary: &Dictionary,
) -> Vec<ResourceProfiles> {
    match dictionary.samples() {
        Some(samples) => {
            let profiles = request.resource_profiles.iter().flat_map(|r| &r.scope_profiles);
            assert!(
                profiles.flat_map(|s| &s.profiles).all(|p| p.samples.is_empty()),
                "samples decoded flat are not decoded twice"
            );
            samples.restore(&request.resource_profiles)
        }
        None => request.resource_profiles.clone(),
    }
}

fn capture() -> Vec<u8> {
    std::fs::read(CAPTURE_PB).unwrap_or_else(|e| panic!("the shared capture {CAPTURE_PB} is required: {e}"))
}

#[test]
fn the_ebpf_capture_reads_as_prost_reads_it() {
    let bytes = capture();
    let expected = ExportProfilesServiceRequest::decode(bytes.as_slice()).unwrap();
    let want = expected.dictionary.unwrap();
    let (_, dictionary) = both(&bytes).unwrap();
    flat(&bytes).expect("the flat decoder reads the capture");
    assert!(
        want.location_table.len() > 100,
        "the capture has a real dictionary"
    );
    assert_eq!(dictionary.strings_len(), want.string_table.len());
    for (i, s) in want.string_table.iter().enumerate() {
        assert_eq!(dictionary.string(i as i32), s);
    }
    for (i, l) in want.location_table.iter().enumerate() {
        let got = dictionary.location(i).unwrap();
        assert_eq!((got.mapping_index, got.address), (l.mapping_index, l.address));
        assert_eq!(got.lines, l.lines.as_slice());
    }
    for (i, s) in want.stack_table.iter().enumerate() {
        assert_eq!(dictionary.stack(i).unwrap(), s.location_indices.as_slice());
    }
}

#[test]
fn a_normalized_request_is_the_same_either_way() {
    let bytes = capture();
    let (request, dictionary) = both(&bytes).unwrap();
    let prost = ExportProfilesServiceRequest::decode(bytes.as_slice()).unwrap();
    let tenant = Tenant {
        limits: &Limits::NONE,
        series: &mut AnySeries,
        relabel: &stackhouse_ingest::relabel::NO_RULES,
        usage: &stackhouse_ingest::usage::NO_GROUPS,
        known: &KnownSymbols::default(),
    };
    let flat = normalize_within("t", &request, &dictionary, 7, tenant).unwrap();
    let want = normalize("t", &prost, 7).unwrap();
    assert_eq!(flat.batch.samples, want.batch.samples);
    assert_eq!(flat.batch.stacks, want.batch.stacks);
    assert_eq!(flat.batch.locations, want.batch.locations);
    assert_eq!(flat.batch.functions, want.batch.functions);
    let total: i64 = prost
        .resource_profiles
        .iter()
        .flat_map(|r| &r.scope_profiles)
        .flat_map(|s| &s.profiles)
        .flat_map(|p| &p.samples)
        // A sample without values counts 1 at each of its timestamps.
        .map(|s| match s.values.is_empty() {
            true => s.timestamps_unix_nano.len() as i64,
            false => s.values.iter().sum::<i64>(),
        })
        .sum();
    assert_eq!(flat.batch.samples.iter().map(|s| s.value).sum::<i64>(), total);
}

#[test]
fn a_hand_built_request_keeps_every_value() {
    let bytes = two_profiles().encode_to_vec();
    let (_, dictionary) = both(&bytes).unwrap();
    flat(&bytes).expect("the flat decoder reads the request");
    for (i, s) in STRINGS.iter().enumerate() {
        assert_eq!(dictionary.string(i as i32), *s);
    }
    assert_eq!(
        dictionary.string(STRINGS.len() as i32),
        "",
        "out of range reads as empty"
    );
    assert_eq!(dictionary.link(1), Some((&TRACE_ID[..], &SPAN_ID[..])));
}

fn len_field(out: &mut Vec<u8>, tag: u32, bytes: &[u8]) {
    encode_key(tag, WireType::LengthDelimited, out);
    encode_varint(bytes.len() as u64, out);
    out.extend_from_slice(bytes);
}

fn varint_field(out: &mut Vec<u8>, tag: u32, value: u64) {
    encode_key(tag, WireType::Varint, out);
    encode_varint(value, out);
}

fn message(build: impl FnOnce(&mut Vec<u8>)) -> Vec<u8> {
    let mut out = Vec::new();
    build(&mut out);
    out
}

/// A request of just a dictionary message, as field 2.
fn request_of(dictionaries: &[Vec<u8>]) -> Vec<u8> {
    message(|out| dictionaries.iter().for_each(|d| len_field(out, 2, d)))
}

#[test]
fn a_dictionary_sent_twice_is_merged_table_by_table() {
    let first = message(|d| {
        len_field(d, 5, b"");
        len_field(d, 5, b"a");
    });
    let second = message(|d| len_field(d, 5, b"b"));
    let bytes = request_of(&[first, second]);
    both(&bytes).unwrap();
    let dictionary = flat(&bytes).expect("the flat decoder reads a repeated dictionary");
    assert_eq!(dictionary.strings_len(), 3);
    assert_eq!(dictionary.string(2), "b");
}

#[test]
fn unpacked_and_packed_indices_read_alike() {
    let unpacked = message(|s| {
        varint_field(s, 1, 3);
        varint_field(s, 1, 4);
    });
    let packed = message(|s| len_field(s, 1, &[5, 6]));
    // Both forms in one stack: prost appends them in wire order.
    let mixed = message(|s| {
        varint_field(s, 1, 7);
        len_field(s, 1, &[8]);
    });
    let dict = message(|d| {
        len_field(d, 7, &[]);
        for stack in [&unpacked, &packed, &mixed] {
            len_field(d, 7, stack);
        }
    });
    let bytes = request_of(&[dict]);
    both(&bytes).unwrap();
    let dictionary = flat(&bytes).expect("the flat decoder reads unpacked indices");
    assert_eq!(dictionary.stack(1), Some(&[3, 4][..]));
    assert_eq!(dictionary.stack(2), Some(&[5, 6][..]));
    assert_eq!(dictionary.stack(3), Some(&[7, 8][..]));
}

#[test]
fn unknown_fields_are_skipped_and_a_repeated_id_keeps_its_last_value() {
    let line = message(|l| {
        varint_field(l, 1, 2);
        varint_field(l, 2, 42);
        varint_field(l, 9, 1);
    });
    let location = message(|l| {
        varint_field(l, 1, 1);
        encode_key(15, WireType::SixtyFourBit, l);
        l.extend_from_slice(&[0; 8]);
        varint_field(l, 2, 0x1000);
        len_field(l, 3, &line);
        encode_key(16, WireType::ThirtyTwoBit, l);
        l.extend_from_slice(&[0; 4]);
    });
    let link = message(|l| {
        len_field(l, 1, &[1; 16]);
        len_field(l, 1, &TRACE_ID);
        len_field(l, 2, &SPAN_ID);
    });
    let dict = message(|d| {
        len_field(d, 2, &[]);
        len_field(d, 2, &location);
        len_field(d, 4, &[]);
        len_field(d, 4, &link);
        len_field(d, 99, b"from a later version");
    });
    let bytes = request_of(&[dict]);
    both(&bytes).unwrap();
    let dictionary = flat(&bytes).expect("the flat decoder skips unknown fields");
    let location = dictionary.location(1).unwrap();
    assert_eq!((location.mapping_index, location.address), (1, 0x1000));
    assert_eq!(
        (location.lines[0].function_index, location.lines[0].line),
        (2, 42)
    );
    assert_eq!(dictionary.link(1), Some((&TRACE_ID[..], &SPAN_ID[..])));
}

#[test]
fn an_unknown_group_is_left_to_prost_which_skips_it() {
    let dict = message(|d| {
        len_field(d, 5, b"");
        encode_key(20, WireType::StartGroup, d);
        varint_field(d, 1, 5);
        encode_key(20, WireType::EndGroup, d);
        len_field(d, 5, b"x");
    });
    let bytes = request_of(&[dict]);
    assert!(flat(&bytes).is_none(), "groups are left to prost");
    let (_, dictionary) = both(&bytes).unwrap();
    assert_eq!(dictionary.string(1), "x");
}

#[test]
fn malformed_dictionaries_are_refused_with_prosts_message() {
    let cases: Vec<(&str, Vec<u8>)> = vec![
        ("invalid UTF-8", message(|d| len_field(d, 5, &[0xff, 0xfe]))),
        ("a string as a varint", message(|d| varint_field(d, 5, 1))),
        ("a location index as 32-bit", {
            let stack = message(|s| {
                encode_key(1, WireType::ThirtyTwoBit, s);
                s.extend_from_slice(&[0; 4]);
            });
            message(|d| len_field(d, 7, &stack))
        }),
        ("a length beyond the message", {
            let mut d = message(|d| len_field(d, 5, b"abc"));
            d.truncate(d.len() - 1);
            d
        }),
        (
            "a packed varint cut short",
            message(|d| len_field(d, 7, &message(|s| len_field(s, 1, &[0x80])))),
        ),
    ];
    for (what, dict) in cases {
        let bytes = request_of(&[dict]);
        assert!(flat(&bytes).is_none(), "{what}: left to prost");
        let message = both(&bytes).expect_err(what);
        assert!(
            message.contains("ExportProfilesServiceRequest"),
            "{what}: {message}"
        );
    }
}

/// A request of one profile holding `samples` (each an encoded `Sample`), with a
/// dictionary and sample type enough for it to be valid.
fn request_with_samples(samples: &[Vec<u8>]) -> Vec<u8> {
    let value_type = message(|v| {
        varint_field(v, 1, 1);
        varint_field(v, 2, 2);
    });
    let profile = message(|p| {
        len_field(p, 1, &value_type);
        for s in samples {
            len_field(p, 2, s);
        }
        // A field after the samples: the rest of the profile keeps its order.
        encode_key(3, WireType::SixtyFourBit, p);
        p.extend_from_slice(&7u64.to_le_bytes());
    });
    let scope = message(|s| len_field(s, 2, &profile));
    let resource = message(|r| len_field(r, 2, &scope));
    let dict = message(|d| {
        for s in ["", "samples", "count"] {
            len_field(d, 5, s.as_bytes());
        }
    });
    message(|out| {
        len_field(out, 1, &resource);
        len_field(out, 2, &dict);
    })
}

fn fixed64s(values: &[u64]) -> Vec<u8> {
    values.iter().flat_map(|v| v.to_le_bytes()).collect()
}

#[test]
fn samples_in_every_wire_form_read_as_prost_reads_them() {
    let mut packed_values = Vec::new();
    for v in [3u64, (-2i64) as u64, 300] {
        encode_varint(v, &mut packed_values);
    }
    let samples = vec![
        // Packed, as real encoders write.
        message(|s| {
            varint_field(s, 1, 0);
            len_field(s, 2, &[1, 2]);
            len_field(s, 4, &packed_values);
            len_field(s, 5, &fixed64s(&[10, 11, 12]));
        }),
        // Unpacked, a singular field twice (the last wins), a repeated one in two parts,
        // unknown fields of every non-group wire type.
        message(|s| {
            varint_field(s, 1, 9);
            varint_field(s, 1, 0);
            varint_field(s, 4, 5);
            varint_field(s, 2, 3);
            len_field(s, 4, &[6]);
            encode_key(5, WireType::SixtyFourBit, s);
            s.extend_from_slice(&20u64.to_le_bytes());
            len_field(s, 5, &fixed64s(&[21]));
            varint_field(s, 3, 1);
            varint_field(s, 9, 1);
            len_field(s, 10, b"later");
            encode_key(11, WireType::ThirtyTwoBit, s);
            s.extend_from_slice(&[0; 4]);
        }),
        // Nothing but timestamps, and nothing at all.
        message(|s| len_field(s, 5, &fixed64s(&[30]))),
        Vec::new(),
    ];
    let bytes = request_with_samples(&samples);
    // Unpacked fields make the layout ambiguous, so the receivers would refuse this
    // request: the flat decoder alone is held to prost here.
    flat(&bytes).expect("the flat decoder reads every form");
    let (request, dictionary) = dictionary::decode_request(&bytes).unwrap();
    let got = dictionary.samples().unwrap().restore(&request.resource_profiles);
    let got = &got[0].scope_profiles[0].profiles[0];
    assert_eq!(got.time_unix_nano, 7);
    assert_eq!(got.samples.len(), 4);
    assert_eq!(got.samples[0].values, [3, -2, 300]);
    assert_eq!(got.samples[1].values, [5, 6]);
    assert_eq!(got.samples[1].timestamps_unix_nano, [20, 21]);
    assert_eq!(got.samples[1].link_index, 1);
}

#[test]
fn malformed_samples_are_refused_with_prosts_message() {
    let cases: Vec<(&str, Vec<u8>)> = vec![
        (
            "packed timestamps of 7 bytes",
            message(|s| len_field(s, 5, &[0; 7])),
        ),
        ("a timestamp as a varint", message(|s| varint_field(s, 5, 1))),
        ("values as 64-bit", {
            message(|s| {
                encode_key(4, WireType::SixtyFourBit, s);
                s.extend_from_slice(&[0; 8]);
            })
        }),
        (
            "a stack index as length-delimited",
            message(|s| len_field(s, 1, &[1])),
        ),
        ("packed values cut short", message(|s| len_field(s, 4, &[0x80]))),
    ];
    for (what, sample) in cases {
        let bytes = request_with_samples(&[sample]);
        assert!(flat(&bytes).is_none(), "{what}: left to prost");
        // The layout scan refuses some of them before any decoder runs; either way the
        // receivers answer what they answered before.
        both(&bytes).expect_err(what);
    }
    // A group is legal (skipped); prost reads it, as it reads every group.
    let grouped = message(|s| {
        varint_field(s, 1, 0);
        encode_key(20, WireType::StartGroup, s);
        varint_field(s, 1, 5);
        encode_key(20, WireType::EndGroup, s);
        len_field(s, 5, &fixed64s(&[1]));
    });
    let bytes = request_with_samples(&[grouped]);
    assert!(flat(&bytes).is_none(), "groups are left to prost");
    both(&bytes).unwrap();
}

/// prost refuses messages nested more than 100 deep; the parts above the samples are read
/// by prost at the depth they have in the request, so the limit falls where it falls for
/// prost reading the whole request.
#[test]
fn the_nesting_limit_is_prosts() {
    use stackhouse_proto::otlp_common::{AnyValue, ArrayValue, KeyValue, any_value::Value};
    use stackhouse_proto::otlp_profiles::{Profile, ScopeProfiles};
    use stackhouse_proto::otlp_resource::Resource;
    let (mut accepted, mut refused) = (0, 0);
    for depth in 40..60 {
        let mut value = AnyValue {
            value: Some(Value::IntValue(1)),
        };
        for _ in 0..depth {
            value = AnyValue {
                value: Some(Value::ArrayValue(ArrayValue { values: vec![value] })),
            };
        }
        let request = ExportProfilesServiceRequest {
            resource_profiles: vec![ResourceProfiles {
                resource: Some(Resource {
                    attributes: vec![KeyValue {
                        value: Some(value),
                        ..Default::default()
                    }],
                    ..Default::default()
                }),
                scope_profiles: vec![ScopeProfiles {
                    profiles: vec![Profile::default()],
                    ..Default::default()
                }],
                ..Default::default()
            }],
            ..Default::default()
        };
        match both(&request.encode_to_vec()) {
            Ok(_) => accepted += 1,
            Err(_) => refused += 1,
        }
    }
    assert!(accepted > 0 && refused > 0, "the depths straddle the limit");
}
