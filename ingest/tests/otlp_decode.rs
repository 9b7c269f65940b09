//! Wire decoding errors and the OTLP/JSON rules that differ from plain protojson.

// One dependency list serves all of the package's tests, benches and binaries.
#![allow(unused_crate_dependencies)]

use prost::Message;
use stackhouse_ingest::otlp::{DecodeError, decode_json, decode_protobuf};

#[test]
fn truncated_protobuf_is_an_error() {
    let bytes = std::fs::read("/work/shared/testdata/otlp/ebpf-cpu-offcpu.v1_10.pb").unwrap();
    let err = decode_protobuf(&bytes[..bytes.len() / 2]).unwrap_err();
    assert!(matches!(err, DecodeError::Protobuf(_)));
    assert!(
        err.to_string()
            .starts_with("failed to decode ExportProfilesServiceRequest: "),
        "{err}"
    );
}

#[test]
fn invalid_json_names_the_position() {
    let err = decode_json(b"{\"resourceProfiles\": [}").unwrap_err();
    assert!(matches!(err, DecodeError::Json(_)));
    assert!(err.to_string().contains("line 1 column 23"), "{err}");
}

#[test]
fn wrong_json_types_are_errors() {
    let err = decode_json(br#"{"resourceProfiles": 5}"#).unwrap_err();
    assert!(matches!(err, DecodeError::JsonMapping(_)), "{err}");
}

const HEX_IDS: &str = r#"{
  "resourceProfiles": [{
    "scopeProfiles": [{
      "profiles": [{
        "profileId": "0102030405060708090a0b0c0d0e0f10",
        "timeUnixNano": 1700000000000000000,
        "durationNano": "5000000000",
        "samples": [{"stackIndex": 1, "linkIndex": 1, "values": [1, "2"], "futureField": {"x": 1}}]
      }]
    }]
  }],
  "dictionary": {
    "stringTable": [""],
    "linkTable": [{}, {"traceId": "5B8EFFF798038103D269B633813FC60C", "spanId": "eee19b7ec3c1b174"}]
  },
  "somethingNew": true
}"#;

#[test]
fn hex_ids_and_otlp_json_rules() {
    let request = decode_json(HEX_IDS.as_bytes()).unwrap();
    let link = &request.dictionary.as_ref().unwrap().link_table[1];
    assert_eq!(hex::encode(&link.trace_id), "5b8efff798038103d269b633813fc60c");
    assert_eq!(hex::encode(&link.span_id), "eee19b7ec3c1b174");
    let profile = &request.resource_profiles[0].scope_profiles[0].profiles[0];
    assert_eq!(profile.profile_id, (1..=16).collect::<Vec<u8>>());
    assert_eq!(
        profile.time_unix_nano, 1_700_000_000_000_000_000,
        "64-bit ints as numbers"
    );
    assert_eq!(profile.duration_nano, 5_000_000_000, "and as strings");
    assert_eq!(profile.samples[0].values, [1, 2]);
    assert_eq!(profile.samples[0].link_index, 1);
}

#[test]
fn proto_field_names_are_accepted() {
    let snake = HEX_IDS
        .replace("resourceProfiles", "resource_profiles")
        .replace("scopeProfiles", "scope_profiles")
        .replace("profileId", "profile_id")
        .replace("timeUnixNano", "time_unix_nano")
        .replace("stackIndex", "stack_index")
        .replace("linkTable", "link_table")
        .replace("traceId", "trace_id")
        .replace("spanId", "span_id");
    assert_eq!(
        decode_json(snake.as_bytes()).unwrap(),
        decode_json(HEX_IDS.as_bytes()).unwrap()
    );
}

#[test]
fn base64_ids_are_not_mistaken_for_hex() {
    // "W47/95gDgQPSabYzgT/GDA==" is the trace id above in base64, which OTLP/JSON does not use.
    let json = HEX_IDS.replace("5B8EFFF798038103D269B633813FC60C", "W47/95gDgQPSabYzgT/GDA==");
    let err = decode_json(json.as_bytes()).unwrap_err();
    assert!(
        err.to_string()
            .contains("dictionary.linkTable[1].traceId: invalid hex id"),
        "{err}"
    );
}

#[test]
fn json_and_protobuf_agree_on_a_round_trip() {
    let request = decode_json(HEX_IDS.as_bytes()).unwrap();
    assert_eq!(decode_protobuf(&request.encode_to_vec()).unwrap(), request);
}
