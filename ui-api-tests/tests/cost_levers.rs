//! The write path's cost levers, from the opentelemetry-proto crate's client: relabel rules
//! (Prometheus `relabel_config`) shaping series before the series limit counts them, usage
//! groups counting samples and bytes per group, and sampling per usage group. Every
//! expectation is computed here from the rules and the input.

// One dependency list serves all of the package's tests, benches and binaries.
#![allow(unused_crate_dependencies)]

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;
use std::time::{SystemTime, UNIX_EPOCH};

use opentelemetry_proto::tonic::collector::profiles::v1development::profiles_service_client::ProfilesServiceClient;
use opentelemetry_proto::tonic::collector::profiles::v1development::{
    ExportProfilesPartialSuccess, ExportProfilesServiceRequest,
};
use opentelemetry_proto::tonic::common::v1::{AnyValue, KeyValue, any_value};
use serde_json::Value;
use ui_api_tests::client::Api;
use ui_api_tests::requests::{PROFILE_TYPE, dictionary, profile, request};
use ui_api_tests::server::{Options, Server, binary};

fn now() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_nanos() as u64
}

fn attr(key: &str, value: &str) -> KeyValue {
    KeyValue {
        key: key.into(),
        value: Some(AnyValue {
            value: Some(any_value::Value::StringValue(value.into())),
        }),
        ..Default::default()
    }
}

/// One profile of `value` on stack main;foo from `service` on `host`, with `id` as its
/// profile id when given.
fn export_of(service: &str, host: &str, value: i64, ids: &[u128], t: u64) -> ExportProfilesServiceRequest {
    let profiles = if ids.is_empty() {
        vec![profile(t, 1, value)]
    } else {
        ids.iter()
            .map(|id| {
                let mut p = profile(t, 1, value);
                p.profile_id = id.to_be_bytes().to_vec();
                p
            })
            .collect()
    };
    let mut r = request(service, profiles, dictionary());
    let resource = r.resource_profiles[0].resource.as_mut().unwrap();
    resource.attributes.push(attr("host.name", host));
    r
}

async fn export(
    server: &Server,
    tenant: &str,
    r: ExportProfilesServiceRequest,
) -> Option<ExportProfilesPartialSuccess> {
    let mut client = ProfilesServiceClient::connect(server.grpc()).await.unwrap();
    let mut r = tonic::Request::new(r);
    r.metadata_mut().insert("x-scope-orgid", tenant.parse().unwrap());
    client
        .export(r)
        .await
        .expect("accepted")
        .into_inner()
        .partial_success
}

fn config(dir: &Path, text: &str) -> Vec<String> {
    let path = dir.join("stackhouse.yaml");
    std::fs::write(&path, text).unwrap();
    vec!["--config".into(), path.display().to_string()]
}

/// `service.name` → total of `tenant`'s flame graph over the last hour.
async fn totals(server: &Server, tenant: &str, services: &[&str]) -> BTreeMap<String, i64> {
    let t = now() as i64;
    let api = Api::new(server.http()).with_tenant(tenant);
    let mut out = BTreeMap::new();
    for s in services {
        let folded = api
            .folded(
                PROFILE_TYPE,
                &format!("{{service.name={s:?}}}"),
                t - 3_600_000_000_000,
                t + 60_000_000_000,
            )
            .await;
        out.insert(s.to_string(), folded.values().sum());
    }
    out
}

async fn json(server: &Server, tenant: &str, path: &str) -> Value {
    let t = now() as i64;
    let (status, body) = Api::new(server.http())
        .with_tenant(tenant)
        .get_json(
            path,
            &[
                ("from", (t - 3_600_000_000_000).to_string()),
                ("to", (t + 60_000_000_000).to_string()),
            ],
        )
        .await;
    assert_eq!(status, 200, "{path}: {body}");
    body
}

async fn metric(server: &Server, name: &str, labels: &[&str]) -> f64 {
    server.metric(name, labels).await
}

const RULES: &str = r#"
ingest-max-series: 2
ingest-relabel-rules:
  - source_labels: [service.name]
    regex: "(.*)-canary"
    target_label: service.name
    replacement: "$1"
  - source_labels: [service.name, host.name]
    separator: "@"
    regex: "debug-.*@.*"
    action: drop
  - action: labeldrop
    regex: "host\\.name"
tenants:
  raw:
    ingest-relabel-rules: []
"#;

#[tokio::test(flavor = "multi_thread")]
async fn relabeling_shapes_series_before_the_series_limit_counts_them() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(Options {
        extra_args: config(dir.path(), RULES),
        ..Options::default()
    })
    .await;
    let t = now();
    // (service, host, value) as sent; after the rules: canaries join their service, the
    // host label goes, debug services are dropped: two series, api and web.
    let sends = [
        ("api", "h1", 3),
        ("api-canary", "h2", 5),
        ("web", "h1", 7),
        ("web-canary", "h3", 11),
        ("debug-x", "h1", 13),
    ];
    for tenant in ["shaped", "raw"] {
        for (service, host, value) in sends {
            let partial = export(&server, tenant, export_of(service, host, value, &[], t)).await;
            let rejected = partial.as_ref().map_or(0, |p| p.rejected_profiles);
            match (tenant, service) {
                ("shaped", "debug-x") => {
                    assert_eq!(rejected, 1, "{partial:?}");
                    let message = &partial.unwrap().error_message;
                    assert!(message.contains("relabel rule 1 (action drop)"), "{message}");
                }
                ("shaped", _) => assert_eq!(rejected, 0, "{service}: {partial:?}"),
                // No rules: api, api-canary are the limit's two series.
                ("raw", "api" | "api-canary") => assert_eq!(rejected, 0, "{service}: {partial:?}"),
                ("raw", _) => {
                    assert_eq!(rejected, 1, "{service}: {partial:?}");
                    assert!(partial.unwrap().error_message.contains("series"));
                }
                _ => unreachable!(),
            }
        }
    }
    let services = ["api", "web", "api-canary", "web-canary", "debug-x"];
    assert_eq!(
        totals(&server, "shaped", &services).await,
        BTreeMap::from([
            ("api".into(), 3 + 5),
            ("web".into(), 7 + 11),
            ("api-canary".into(), 0),
            ("web-canary".into(), 0),
            ("debug-x".into(), 0),
        ])
    );
    let names = json(&server, "shaped", "/api/v1/labels").await;
    assert!(!names.to_string().contains("host.name"), "{names}");
    let values = json(&server, "shaped", "/api/v1/labels/service.name/values").await;
    assert_eq!(values["values"], serde_json::json!(["api", "web"]));
    assert_eq!(
        totals(&server, "raw", &services).await,
        BTreeMap::from([
            ("api".into(), 3),
            ("web".into(), 0),
            ("api-canary".into(), 5),
            ("web-canary".into(), 0),
            ("debug-x".into(), 0),
        ])
    );
    assert_eq!(
        metric(
            &server,
            "stackhouse_ingest_rejections_total",
            &["reason=\"relabel_drop\""]
        )
        .await,
        1.0
    );
}

#[test]
fn a_bad_rule_or_too_many_groups_stops_the_server_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let bad_rule = config(
        dir.path(),
        "ingest-relabel-rules:\n  - source_labels: [a]\n    action: keep\n  - regex: \"([a-z\"\n    target_label: b\n",
    );
    let groups: BTreeMap<String, String> = (0..51).map(|i| (format!("g{i}"), "{}".to_string())).collect();
    let too_many = vec![
        "--usage-groups".to_string(),
        serde_json::to_string(&groups).unwrap(),
    ];
    for (args, expected) in [
        (
            bad_rule,
            "relabel rule 1 (action replace): invalid regex \"([a-z\"",
        ),
        (too_many, "51 usage groups, more than the limit of 50"),
    ] {
        let out = Command::new(binary())
            .arg("serve")
            .args(&args)
            .arg("--data-dir")
            .arg(dir.path())
            .output()
            .unwrap();
        assert!(!out.status.success(), "{args:?} started");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains(expected), "{stderr}");
    }
}

const GROUPS: &str = r#"
compaction-interval: 1h
usage-groups:
  checkout: '{service.name="checkout"}'
  cart:
    selector: '{service.name="cart"}'
    sample_rate: 0.1
"#;

/// Distinct profile ids, the same on every run.
fn ids(range: std::ops::Range<u128>) -> Vec<u128> {
    range
        .map(|i| (i + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15_f39c_c060_5ced_c835))
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn usage_groups_count_what_each_group_sends_and_stores_and_sampling_keeps_totals() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(Options {
        extra_args: config(dir.path(), GROUPS),
        ..Options::default()
    })
    .await;
    let t = now();
    let tenant = "shop";
    // checkout: 40 profiles of 3; other (misc): 15 of 2; cart: 10,000 of 7, sampled at 0.1.
    const CART: u128 = 10_000;
    for chunk in ids(0..40).chunks(10) {
        assert!(
            export(&server, tenant, export_of("checkout", "h", 3, chunk, t))
                .await
                .is_none()
        );
    }
    assert!(
        export(&server, tenant, export_of("misc", "h", 2, &ids(40..55), t))
            .await
            .is_none()
    );
    let cart_ids = ids(1_000..1_000 + CART);
    for chunk in cart_ids.chunks(500) {
        let partial = export(&server, tenant, export_of("cart", "h", 7, chunk, t)).await;
        assert!(
            partial.as_ref().is_none_or(|p| p.rejected_profiles == 0),
            "{partial:?}"
        );
    }
    let group = |g: &str| format!("group=\"{g}\"");
    let sampled_out = metric(
        &server,
        "stackhouse_usage_sampled_out_profiles_total",
        &[&group("cart")],
    )
    .await;
    let kept = CART as f64 - sampled_out;
    eprintln!("cart: {kept} of {CART} profiles kept at 0.1");

    // Totals: exact for the unsampled groups; the cart's stored total is its kept profiles'
    // values divided by the rate, within 5 % of what was sent.
    let total = totals(&server, tenant, &["checkout", "misc", "cart"]).await;
    assert_eq!(total["checkout"], 40 * 3);
    assert_eq!(total["misc"], 15 * 2);
    assert_eq!(
        total["cart"] as f64,
        kept * 70.0,
        "every kept profile stored once, scaled"
    );
    let sent = (CART * 7) as f64;
    assert!(
        (total["cart"] as f64 - sent).abs() <= 0.05 * sent,
        "cart total {} against {sent} sent",
        total["cart"]
    );

    // A retried export is decided the same way: nothing more stored, the same share
    // sampled out again.
    let (retried, _) = cart_ids.split_at(1_000);
    let before = metric(
        &server,
        "stackhouse_usage_sampled_out_profiles_total",
        &[&group("cart")],
    )
    .await;
    for chunk in retried.chunks(500) {
        export(&server, tenant, export_of("cart", "h", 7, chunk, t)).await;
    }
    assert_eq!(totals(&server, tenant, &["cart"]).await["cart"], total["cart"]);
    let again = metric(
        &server,
        "stackhouse_usage_sampled_out_profiles_total",
        &[&group("cart")],
    )
    .await
        - before;
    let kept_of_retried = 1_000.0 - again;
    assert!(
        kept_of_retried > 0.0 && again > 0.0,
        "{again} of 1000 retried sampled out"
    );

    // Metrics per group: received (sampled-out ones included) and stored samples.
    let tenant_label = format!("tenant=\"{tenant}\"");
    let received = |g: &'static str| {
        let labels = [tenant_label.clone(), group(g)];
        let server = &server;
        async move {
            let refs: Vec<&str> = labels.iter().map(String::as_str).collect();
            metric(server, "stackhouse_usage_received_samples_total", &refs).await
        }
    };
    assert_eq!(received("checkout").await, 40.0);
    assert_eq!(received("other").await, 15.0);
    assert_eq!(received("cart").await, (CART + 1_000) as f64);
    let stored_cart = metric(
        &server,
        "stackhouse_usage_stored_samples_total",
        &[&tenant_label, &group("cart")],
    )
    .await;
    assert_eq!(stored_cart, kept, "the retried kept profiles were stored before");

    // The usage endpoint: stored samples per group, and bytes adding up to the segments'
    // objects on disk.
    let usage = json(&server, tenant, "/api/v1/usage").await;
    let groups = &usage["groups"];
    assert_eq!(groups["checkout"]["samples"], 40, "{usage}");
    assert_eq!(groups["other"]["samples"], 15, "{usage}");
    assert_eq!(groups["cart"]["samples"].as_f64(), Some(kept), "{usage}");
    assert_eq!(groups["cart"]["series"], 1, "{usage}");
    let bytes: u64 = ["checkout", "other", "cart"]
        .iter()
        .map(|g| groups[g]["bytes"].as_u64().unwrap())
        .sum();
    let on_disk = segment_bytes(&server.data_dir, tenant);
    assert_eq!(
        bytes, on_disk,
        "groups' bytes against the segments' objects: {usage}"
    );
}

/// Bytes of the segment objects (not symbols) of `tenant` under `dir`.
fn segment_bytes(dir: &Path, tenant: &str) -> u64 {
    let marker = format!("tenants/{tenant}/segments/");
    let mut total = 0;
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).unwrap() {
            let entry = entry.unwrap();
            let path = entry.path();
            if path.is_dir() {
                stack.push(path);
            } else if path.to_string_lossy().contains(&marker) {
                total += entry.metadata().unwrap().len();
            }
        }
    }
    total
}
