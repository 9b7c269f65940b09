//! Per-tenant bounds on what is stored, set by flags and overridden per tenant in the config
//! file, over gRPC with the independent `opentelemetry-proto` client: the series limit, the
//! label names per series and the stack depth. A refused profile is named in
//! `partial_success` and the rest of its request is stored; a too deep stack is stored cut.

// One dependency list serves all of the package's tests, benches and binaries.
#![allow(unused_crate_dependencies)]

use std::time::{SystemTime, UNIX_EPOCH};

use opentelemetry_proto::tonic::collector::profiles::v1development::profiles_service_client::ProfilesServiceClient;
use opentelemetry_proto::tonic::collector::profiles::v1development::{
    ExportProfilesPartialSuccess, ExportProfilesServiceRequest,
};
use opentelemetry_proto::tonic::common::v1::{AnyValue, KeyValue, any_value};
use opentelemetry_proto::tonic::profiles::v1development::{Function, Line, Location, Stack};
use ui_api_tests::client::Api;
use ui_api_tests::requests::{PROFILE_TYPE, STRINGS, dictionary, profile, request};
use ui_api_tests::server::{Options, Server};

fn now() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_nanos() as u64
}

async fn export(
    server: &Server,
    tenant: &str,
    request: ExportProfilesServiceRequest,
) -> Option<ExportProfilesPartialSuccess> {
    let mut client = ProfilesServiceClient::connect(server.grpc()).await.unwrap();
    let mut request = tonic::Request::new(request);
    request
        .metadata_mut()
        .insert("x-scope-orgid", tenant.parse().unwrap());
    client
        .export(request)
        .await
        .expect("accepted")
        .into_inner()
        .partial_success
}

/// The folded flame graph of `tenant`: path → value.
async fn folded(server: &Server, tenant: &str) -> std::collections::BTreeMap<String, i64> {
    let now = now() as i64;
    Api::new(server.http())
        .with_tenant(tenant)
        .folded(PROFILE_TYPE, "{}", now - 3_600_000_000_000, now + 60_000_000_000)
        .await
}

async fn server() -> (Server, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("stackhouse.yaml");
    std::fs::write(
        &config,
        "ingest-max-series: 2\ningest-max-label-names: 3\ningest-max-stack-depth: 4\n\
         tenants:\n  big:\n    ingest-max-series: 10\n    ingest-max-stack-depth: 0\n",
    )
    .unwrap();
    let server = Server::start(Options {
        extra_args: vec!["--config".into(), config.display().to_string()],
        ..Options::default()
    })
    .await;
    (server, dir)
}

#[tokio::test(flavor = "multi_thread")]
async fn the_series_limit_refuses_new_series_and_keeps_known_ones() {
    let (server, _dir) = server().await;
    let t = now();
    for (service, value) in [("one", 1), ("two", 2)] {
        assert_eq!(
            export(
                &server,
                "small",
                request(service, vec![profile(t, 1, value)], dictionary())
            )
            .await,
            None
        );
    }
    let refused = export(
        &server,
        "small",
        request("three", vec![profile(t, 1, 4)], dictionary()),
    )
    .await
    .expect("the third series is refused");
    assert_eq!(refused.rejected_profiles, 1);
    assert!(
        refused.error_message.contains("limit of 2 series"),
        "{}",
        refused.error_message
    );
    assert!(
        refused.error_message.contains("service.name=\"three\""),
        "{}",
        refused.error_message
    );
    // Known series keep being accepted.
    assert_eq!(
        export(
            &server,
            "small",
            request("one", vec![profile(t, 2, 8)], dictionary())
        )
        .await,
        None
    );
    assert_eq!(folded(&server, "small").await.values().sum::<i64>(), 1 + 2 + 8);

    // The config file's override for tenant "big".
    for (service, value) in [("one", 1), ("two", 2), ("three", 4)] {
        assert_eq!(
            export(
                &server,
                "big",
                request(service, vec![profile(t, 1, value)], dictionary())
            )
            .await,
            None
        );
    }
    assert_eq!(folded(&server, "big").await.values().sum::<i64>(), 1 + 2 + 4);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_series_with_too_many_labels_is_refused_alone() {
    let (server, _dir) = server().await;
    let t = now();
    let mut wide = request("wide", vec![profile(t, 1, 16)], dictionary());
    let attributes = &mut wide.resource_profiles[0].resource.as_mut().unwrap().attributes;
    for key in ["host.name", "k8s.pod.name", "k8s.namespace.name"] {
        attributes.push(KeyValue {
            key: key.into(),
            value: Some(AnyValue {
                value: Some(any_value::Value::StringValue("x".into())),
            }),
            ..Default::default()
        });
    }
    let mut both = request("narrow", vec![profile(t, 1, 32)], dictionary());
    both.resource_profiles.extend(wide.resource_profiles);
    let refused = export(&server, "labels", both)
        .await
        .expect("the wide one is refused");
    assert_eq!(refused.rejected_profiles, 1);
    assert!(
        refused
            .error_message
            .contains("series has 4 labels, more than the tenant's limit of 3"),
        "{}",
        refused.error_message
    );
    assert_eq!(folded(&server, "labels").await.values().sum::<i64>(), 32);
}

/// The test dictionary plus functions f0..f9 and stack 3: f9 (leaf) … f0 (root).
fn deep_request(t: u64) -> ExportProfilesServiceRequest {
    let mut dict = dictionary();
    let mut stack = Vec::new();
    for i in 0..10 {
        dict.string_table.push(format!("f{i}"));
        dict.function_table.push(Function {
            name_strindex: (STRINGS.len() + i) as i32,
            ..Default::default()
        });
        dict.location_table.push(Location {
            lines: vec![Line {
                function_index: dict.function_table.len() as i32 - 1,
                ..Default::default()
            }],
            ..Default::default()
        });
        stack.insert(0, dict.location_table.len() as i32 - 1);
    }
    dict.stack_table.push(Stack {
        location_indices: stack,
    });
    request("deep", vec![profile(t, 3, 64), profile(t, 1, 5)], dict)
}

#[tokio::test(flavor = "multi_thread")]
async fn deep_stacks_are_stored_cut_below_a_marker_and_reported() {
    let (server, _dir) = server().await;
    let t = now();
    let warning = export(&server, "deep", deep_request(t)).await.expect("a warning");
    assert_eq!(warning.rejected_profiles, 0, "nothing refused");
    assert!(
        warning
            .error_message
            .contains("1 stacks deeper than 4 frames (--ingest-max-stack-depth)"),
        "{}",
        warning.error_message
    );
    let stored = folded(&server, "deep").await;
    assert_eq!(
        stored,
        [
            (
                "f0;f1;f2;[truncated: stack deeper than the limit]".to_string(),
                64
            ),
            ("main;foo".to_string(), 5)
        ]
        .into()
    );
    // Tenant "big" has no depth limit in the config file.
    assert_eq!(export(&server, "big", deep_request(t)).await, None);
    let whole = folded(&server, "big").await;
    assert_eq!(whole.get("f0;f1;f2;f3;f4;f5;f6;f7;f8;f9"), Some(&64), "{whole:?}");
}
