//! A damaged object in storage: the tenant that owns it gets a JSON 5xx naming the object,
//! the same answer every time; other tenants and the health endpoints are unaffected.

// One dependency list serves all of the package's tests, benches and binaries.
#![allow(unused_crate_dependencies)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use opentelemetry_proto::tonic::collector::profiles::v1development::ExportProfilesServiceRequest;
use prost::Message;
use serde_json::Value;
use ui_api_tests::capture::{self, Observation};
use ui_api_tests::client::Api;
use ui_api_tests::server::{Options, Server};
use ui_api_tests::testdata;

const DAMAGED: &str = "alpha";
const HEALTHY: &str = "beta";

fn capture_bytes() -> Vec<u8> {
    std::fs::read(testdata("otlp/ebpf-cpu-offcpu.v1_10.pb")).unwrap()
}

/// Every `.parquet` file under `dir`.
fn parquet_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return out;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            out.extend(parquet_files(&path));
        } else if path.extension().is_some_and(|e| e == "parquet") {
            out.push(path);
        }
    }
    out.sort();
    out
}

/// A query over one profile type and the whole capture.
struct Query {
    profile_type: String,
    from: i64,
    to: i64,
    expected: BTreeMap<String, i64>,
}

impl Query {
    fn new(observations: &[Observation]) -> Query {
        let profile_type = observations[0].profile_type.clone();
        let of_type: Vec<&Observation> = observations
            .iter()
            .filter(|o| o.profile_type == profile_type)
            .collect();
        let (from, to) = ui_api_tests::checks::span(&of_type);
        Query {
            expected: capture::folded(of_type.iter().copied()),
            profile_type,
            from,
            to,
        }
    }

    fn params(&self) -> Vec<(&'static str, String)> {
        vec![
            ("profile_type", self.profile_type.clone()),
            ("from", self.from.to_string()),
            ("to", self.to.to_string()),
        ]
    }
}

/// Stores the capture for both tenants, stops the server, lets `damage` pick and break
/// files of the damaged tenant, starts the server again on the same data, then checks
/// every answer. `expect_in_message` is a part of the object key the error must name.
async fn damaged(pick: fn(&Path) -> Vec<PathBuf>, expect_in_message: &str) {
    let mut server = Server::start(Options {
        // Compaction would rewrite the damaged object's segment on its own schedule; the
        // test is about reading it.
        extra_args: vec!["--compaction-interval".into(), "1h".into()],
        ..Options::default()
    })
    .await;
    let observations =
        capture::from_protobuf(&ExportProfilesServiceRequest::decode(&capture_bytes()[..]).unwrap());
    let query = Query::new(&observations);
    for tenant in [DAMAGED, HEALTHY] {
        let api = Api::new(server.http()).with_tenant(tenant);
        let (status, _, body) = api
            .post_otlp("application/x-protobuf", false, capture_bytes())
            .await;
        assert_eq!(status, 200, "{tenant}: {}", String::from_utf8_lossy(&body));
        assert_eq!(
            api.folded(&query.profile_type, "{}", query.from, query.to).await,
            query.expected,
            "{tenant} before the damage"
        );
    }
    assert!(server.terminate(), "stackhouse did not stop cleanly");

    let tenant_dir = server.data_path().join("objects/tenants").join(DAMAGED);
    let victims = pick(&tenant_dir);
    assert!(
        !victims.is_empty(),
        "no object to damage under {}",
        tenant_dir.display()
    );
    for path in &victims {
        let bytes = std::fs::read(path).unwrap();
        // Same length, so sizes in the catalog still match: only the content is wrong.
        let garbage: Vec<u8> = bytes.iter().enumerate().map(|(i, b)| b ^ (i as u8 | 1)).collect();
        std::fs::write(path, garbage).unwrap();
    }
    server.restart().await;

    let damaged = Api::new(server.http()).with_tenant(DAMAGED);
    let first = damaged.get_json("/api/v1/flamegraph", &query.params()).await;
    let second = damaged.get_json("/api/v1/flamegraph", &query.params()).await;
    assert!((500..600).contains(&first.0), "damaged tenant answered {first:?}");
    let message = first.1["error"]
        .as_str()
        .unwrap_or_else(|| panic!("no error message in {}", first.1));
    assert!(
        message.contains(expect_in_message) && message.contains(DAMAGED),
        "the error does not name the damaged object: {message}"
    );
    assert_eq!(first, second, "a second try answers differently");

    let healthy = Api::new(server.http()).with_tenant(HEALTHY);
    assert_eq!(
        healthy
            .folded(&query.profile_type, "{}", query.from, query.to)
            .await,
        query.expected,
        "the healthy tenant after the damage"
    );
    let client = ui_api_tests::http_client();
    for path in ["/healthz", "/readyz"] {
        let status = client
            .get(format!("{}{path}", server.http()))
            .send()
            .await
            .unwrap()
            .status();
        assert_eq!(status, 200, "{path}");
    }
    // Catalog answers do not read objects: they keep working for the damaged tenant.
    let (status, types): (u16, Value) = damaged
        .get_json(
            "/api/v1/profile-types",
            &[("from", query.from.to_string()), ("to", query.to.to_string())],
        )
        .await;
    assert_eq!(status, 200, "{types}");
}

#[tokio::test(flavor = "multi_thread")]
async fn damaged_samples_object() {
    damaged(
        |dir| {
            parquet_files(&dir.join("segments"))
                .into_iter()
                .filter(|p| p.ends_with("samples.parquet"))
                .collect()
        },
        "samples.parquet",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn damaged_symbols_object() {
    damaged(
        |dir| {
            parquet_files(&dir.join("symbols"))
                .into_iter()
                .filter(|p| p.ends_with("stacks.parquet"))
                .collect()
        },
        "stacks.parquet",
    )
    .await;
}
