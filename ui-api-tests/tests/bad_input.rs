//! Bad input gets a clear error, no panic, and the valid part of a request is stored.

// One dependency list serves all of the package's tests, benches and binaries.
#![allow(unused_crate_dependencies)]

use opentelemetry_proto::tonic::collector::profiles::v1development::profiles_service_client::ProfilesServiceClient;
use opentelemetry_proto::tonic::collector::profiles::v1development::{
    ExportProfilesServiceRequest, ExportProfilesServiceResponse,
};
use prost::Message;
use ui_api_tests::client::{Api, gzip};
use ui_api_tests::requests::{PROFILE_TYPE, dictionary, profile, request};
use ui_api_tests::server::{Options, Server};
use ui_api_tests::testdata;

const T0: u64 = 1_700_000_000_000_000_000;

/// `google.rpc.Status`, as OTLP/HTTP answers errors in protobuf.
#[derive(Clone, PartialEq, prost::Message)]
struct RpcStatus {
    #[prost(int32, tag = "1")]
    code: i32,
    #[prost(string, tag = "2")]
    message: String,
}

async fn post_pb(api: &Api, req: &ExportProfilesServiceRequest) -> (u16, Vec<u8>) {
    let (status, ct, body) = api
        .post_otlp("application/x-protobuf", false, req.encode_to_vec())
        .await;
    assert_eq!(ct, "application/x-protobuf");
    (status, body)
}

async fn total(api: &Api, service: &str) -> i64 {
    api.flamegraph(
        PROFILE_TYPE,
        &format!("{{service.name=\"{service}\"}}"),
        // Every profile of these tests sits at T0.
        T0 as i64,
        T0 as i64 + 1,
        None,
    )
    .await["total"]
        .as_i64()
        .unwrap()
}

#[tokio::test(flavor = "multi_thread")]
async fn one_invalid_profile_is_rejected_and_the_valid_one_stored() {
    let server = Server::start(Options::default()).await;
    let api = Api::new(server.http());
    let mut grpc = ProfilesServiceClient::connect(server.grpc()).await.unwrap();

    // Each case: one valid profile (value 7) and one broken one, in one request.
    let mut broken_dict = dictionary();
    broken_dict.location_table[3].lines[0].function_index = 77;
    let mut bad_string = dictionary();
    bad_string.function_table[3].name_strindex = 500;
    let mut bad_location = dictionary();
    bad_location.stack_table[2].location_indices = vec![3, 42, 1];
    let mut bad_attr = profile(T0, 1, 5);
    bad_attr.samples[0].attribute_indices = vec![9];
    let mut bad_link = profile(T0, 1, 5);
    bad_link.samples[0].link_index = 3;
    let mut bad_shape = profile(T0, 1, 5);
    bad_shape.samples[0].timestamps_unix_nano = vec![T0, T0 + 1];
    let cases = vec![
        (
            "stack",
            vec![profile(T0, 1, 7), profile(T0, 999, 5)],
            dictionary(),
            "stack",
        ),
        (
            "function",
            vec![profile(T0, 1, 7), profile(T0, 2, 5)],
            broken_dict,
            "function",
        ),
        (
            "string",
            vec![profile(T0, 1, 7), profile(T0, 2, 5)],
            bad_string,
            "string",
        ),
        (
            "location",
            vec![profile(T0, 1, 7), profile(T0, 2, 5)],
            bad_location,
            "location",
        ),
        (
            "attribute",
            vec![profile(T0, 1, 7), bad_attr],
            dictionary(),
            "attribute",
        ),
        ("link", vec![profile(T0, 1, 7), bad_link], dictionary(), "link"),
        (
            "shape",
            vec![profile(T0, 1, 7), bad_shape],
            dictionary(),
            "timestamps",
        ),
    ];
    for (i, (name, profiles, dict, needle)) in cases.into_iter().enumerate() {
        let service = format!("svc-{name}");
        let req = request(&service, profiles, dict);
        let (status, body) = post_pb(&api, &req).await;
        assert_eq!(status, 200, "{name}");
        let resp = ExportProfilesServiceResponse::decode(&body[..]).unwrap();
        let partial = resp
            .partial_success
            .unwrap_or_else(|| panic!("{name}: partial success expected"));
        assert_eq!(partial.rejected_profiles, 1, "{name}");
        assert!(
            partial.error_message.contains(needle),
            "{name}: {:?} names {needle}",
            partial.error_message
        );
        assert_eq!(
            total(&api, &service).await,
            7,
            "{name}: the valid profile is stored"
        );

        // The same over gRPC, to a distinct service name.
        let service = format!("grpc-{name}-{i}");
        let mut req = req;
        req.resource_profiles[0].resource.as_mut().unwrap().attributes[0].value =
            Some(opentelemetry_proto::tonic::common::v1::AnyValue {
                value: Some(
                    opentelemetry_proto::tonic::common::v1::any_value::Value::StringValue(service.clone()),
                ),
            });
        let resp = grpc
            .export(req)
            .await
            .expect("grpc accepts the valid part")
            .into_inner();
        assert_eq!(resp.partial_success.unwrap().rejected_profiles, 1, "grpc {name}");
        assert_eq!(
            total(&api, &service).await,
            7,
            "grpc {name}: the valid profile is stored"
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn undecodable_and_unacceptable_bodies_get_clear_errors() {
    let limit = 256 * 1024;
    let server = Server::start(Options {
        extra_args: vec!["--max-message-bytes".into(), limit.to_string()],
        ..Default::default()
    })
    .await;
    let api = Api::new(server.http());
    let capture = std::fs::read(testdata("otlp/ebpf-cpu-offcpu.v1_10.pb")).unwrap();

    // Truncated protobuf.
    let (status, ct, body) = api
        .post_otlp(
            "application/x-protobuf",
            false,
            capture[..capture.len() / 2].to_vec(),
        )
        .await;
    assert_eq!((status, ct.as_str()), (400, "application/x-protobuf"));
    let rpc = RpcStatus::decode(&body[..]).unwrap();
    assert_eq!(rpc.code, tonic::Code::InvalidArgument as i32);
    assert!(rpc.message.contains("decode"), "{}", rpc.message);

    // Wrong content type.
    let (status, _, body) = api.post_otlp("text/plain", false, capture.clone()).await;
    assert_eq!(status, 415, "{}", String::from_utf8_lossy(&body));
    assert!(String::from_utf8_lossy(&body).contains("content type"));

    // Invalid JSON.
    let (status, _, body) = api
        .post_otlp("application/json", false, b"{\"resourceProfiles\": [".to_vec())
        .await;
    assert_eq!(status, 400);
    assert!(
        String::from_utf8_lossy(&body).to_lowercase().contains("json"),
        "{}",
        String::from_utf8_lossy(&body)
    );

    // Oversized body, raw and gzipped; a gzip bomb (64 MiB of zeros in ~64 KiB).
    let big = vec![0u8; limit + 1];
    let (status, _, _) = api.post_otlp("application/x-protobuf", false, big.clone()).await;
    assert_eq!(status, 413);
    let bomb = gzip(&vec![0u8; 64 << 20]);
    assert!(bomb.len() < limit);
    let (status, _, body) = api.post_otlp("application/x-protobuf", true, bomb.clone()).await;
    assert_eq!(status, 413, "{}", String::from_utf8_lossy(&body));
    let rpc = RpcStatus::decode(&body[..]).unwrap();
    assert!(rpc.message.contains("limit"), "{}", rpc.message);

    // Bad gzip.
    let (status, _, _) = api
        .post_otlp("application/x-protobuf", true, b"not gzip at all".to_vec())
        .await;
    assert_eq!(status, 400);

    // gRPC: truncated → INVALID_ARGUMENT, oversized and bomb → RESOURCE_EXHAUSTED.
    let channel = tonic::transport::Endpoint::from_shared(server.grpc())
        .unwrap()
        .connect()
        .await
        .unwrap();
    let mut raw = tonic::client::Grpc::new(channel.clone());
    let path = http::uri::PathAndQuery::from_static(
        "/opentelemetry.proto.collector.profiles.v1development.ProfilesService/Export",
    );
    raw.ready().await.unwrap();
    let status = raw
        .unary::<_, ExportProfilesServiceResponse, _>(
            tonic::Request::new(capture[..capture.len() / 2].to_vec()),
            path.clone(),
            RawCodec,
        )
        .await
        .unwrap_err();
    assert_eq!(status.code(), tonic::Code::InvalidArgument, "{status:?}");
    assert!(status.message().contains("decode"), "{status:?}");

    let mut client = ProfilesServiceClient::new(channel.clone()).max_encoding_message_size(usize::MAX);
    let mut huge = ExportProfilesServiceRequest::decode(&capture[..]).unwrap();
    huge.dictionary
        .as_mut()
        .unwrap()
        .string_table
        .push("x".repeat(limit));
    let status = client.export(huge.clone()).await.unwrap_err();
    assert_eq!(status.code(), tonic::Code::ResourceExhausted, "{status:?}");
    let mut gz = ProfilesServiceClient::new(channel).send_compressed(tonic::codec::CompressionEncoding::Gzip);
    let status = gz.export(huge).await.unwrap_err();
    assert_eq!(status.code(), tonic::Code::ResourceExhausted, "{status:?}");

    // Still healthy and still accepting.
    let (status, _, _) = api.post_otlp("application/x-protobuf", false, capture).await;
    assert_eq!(status, 200);
}

/// Sends raw bytes as a gRPC message, to put undecodable data on the wire.
#[derive(Clone, Default)]
struct RawCodec;

impl tonic::codec::Codec for RawCodec {
    type Encode = Vec<u8>;
    type Decode = ExportProfilesServiceResponse;
    type Encoder = RawEncoder;
    type Decoder = tonic_prost::ProstDecoder<ExportProfilesServiceResponse>;

    fn encoder(&mut self) -> RawEncoder {
        RawEncoder
    }

    fn decoder(&mut self) -> Self::Decoder {
        tonic_prost::ProstDecoder::default()
    }
}

#[derive(Clone, Default)]
struct RawEncoder;

impl tonic::codec::Encoder for RawEncoder {
    type Item = Vec<u8>;
    type Error = tonic::Status;

    fn encode(&mut self, item: Vec<u8>, dst: &mut tonic::codec::EncodeBuf<'_>) -> Result<(), tonic::Status> {
        use bytes::BufMut;
        dst.put_slice(&item);
        Ok(())
    }
}
