//! `serve --auth required` against the real binary: tokens made with the real CLI, data of
//! two tenants sent with their own tokens (gRPC metadata as an OTel Collector's `headers`
//! sends it, OTLP/HTTP with basic auth), then every query, Connect and Pyroscope endpoint
//! tried with no credentials, a wrong token, the other tenant's header, and the right
//! token. Expected totals are computed from each tenant's input.

// One dependency list serves all of the package's tests, benches and binaries.
#![allow(unused_crate_dependencies)]

use std::process::Command;

use base64::Engine;
use opentelemetry_proto::tonic::collector::profiles::v1development::ExportProfilesServiceRequest;
use opentelemetry_proto::tonic::collector::profiles::v1development::profiles_service_client::ProfilesServiceClient;
use prost::Message;
use reqwest::Method;
use serde_json::{Value, json};
use ui_api_tests::server::{Options, Server, binary};
use ui_api_tests::testdata;
use ui_api_tests::workload::{self, FROM, TO, Workload};

/// Runs `stackhouse tenant token ARGS` on the server's catalog; its stdout.
fn token_cli(server: &Server, args: &[&str]) -> (bool, String) {
    let out = Command::new(binary())
        .args(["tenant", "token"])
        .args(args)
        .arg("--data-dir")
        .arg(server.data_path())
        .output()
        .expect("running stackhouse tenant token");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

/// A new token of `tenant`: `(secret, id)`.
fn create_token(server: &Server, tenant: &str) -> (String, String) {
    let (ok, out) = token_cli(server, &["create", "--tenant", tenant, "--name", "test"]);
    assert!(ok, "token create failed: {out}");
    let field = |name: &str| {
        out.lines()
            .find_map(|l| l.strip_prefix(name))
            .unwrap_or_else(|| panic!("{name} in {out}"))
            .trim()
            .to_string()
    };
    (field("token:"), field("id:"))
}

fn bearer(token: &str) -> String {
    format!("Bearer {token}")
}

fn basic(user: &str, password: &str) -> String {
    let encoded = base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"));
    format!("Basic {encoded}")
}

/// One endpoint of the HTTP port, as a client would call it.
struct Call {
    method: Method,
    path: String,
    content_type: &'static str,
    body: Vec<u8>,
}

impl Call {
    fn get(path: String) -> Call {
        Call {
            method: Method::GET,
            path,
            content_type: "",
            body: Vec::new(),
        }
    }

    fn post(path: &str, content_type: &'static str, body: Vec<u8>) -> Call {
        Call {
            method: Method::POST,
            path: path.to_string(),
            content_type,
            body,
        }
    }

    async fn send(&self, server: &Server, headers: &[(&str, &str)]) -> (u16, Vec<u8>) {
        let client = ui_api_tests::http_client();
        let mut request = client.request(self.method.clone(), format!("{}{}", server.http(), self.path));
        if !self.content_type.is_empty() {
            request = request.header("content-type", self.content_type);
        }
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        let response = request
            .body(self.body.clone())
            .send()
            .await
            .expect("request sent");
        let status = response.status().as_u16();
        (status, response.bytes().await.unwrap().to_vec())
    }
}

fn range() -> String {
    format!("from={FROM}&to={TO}")
}

/// Every query endpoint, with the CPU type of both datasets where one is needed.
fn query_calls(profile_id: &str) -> Vec<Call> {
    let cpu = "profile_type=samples:count:cpu:nanoseconds";
    let r = range();
    let connect = |method: &str, body: Value| {
        Call::post(
            &format!("/querier.v1.QuerierService/{method}"),
            "application/json",
            body.to_string().into_bytes(),
        )
    };
    let ms = |nanos: i64| nanos / 1_000_000;
    vec![
        Call::get(format!("/api/v1/profile-types?{r}")),
        Call::get(format!("/api/v1/labels?{r}")),
        Call::get(format!("/api/v1/labels/service.name/values?{r}")),
        Call::get(format!("/api/v1/flamegraph?{cpu}&{r}")),
        Call::get(format!("/api/v1/timeseries?{cpu}&{r}")),
        Call::get(format!("/api/v1/top?{cpu}&{r}")),
        Call::get(format!("/api/v1/events?{cpu}&{r}")),
        Call::get(format!(
            "/api/v1/diff?{cpu}&baseline_from={FROM}&baseline_to={TO}&comparison_from={FROM}&comparison_to={TO}"
        )),
        Call::get(format!(
            "/api/v1/traces/{}/flamegraph?{cpu}&{r}",
            workload::TRACES[0]
        )),
        Call::get(format!("/api/v1/profiles/{profile_id}")),
        Call::get("/api/v1/stats".to_string()),
        Call::get(format!(
            "/pyroscope/render?query=process_cpu:samples:count:cpu:nanoseconds{{}}&from={}&until={}",
            ms(FROM),
            ms(TO)
        )),
        connect(
            "LabelValues",
            json!({"name": "service_name", "start": ms(FROM), "end": ms(TO)}),
        ),
        connect(
            "SelectMergeStacktraces",
            json!({"profileTypeID": "process_cpu:samples:count:cpu:nanoseconds", "labelSelector": "{}",
                   "start": ms(FROM), "end": ms(TO)}),
        ),
    ]
}

fn ingest_calls() -> Vec<Call> {
    vec![
        Call::post("/v1development/profiles", "application/x-protobuf", Vec::new()),
        Call::post(
            "/ingest?name=app&from=1&until=2",
            "text/plain",
            b"main;work 1\n".to_vec(),
        ),
    ]
}

async fn export_grpc(
    server: &Server,
    request: ExportProfilesServiceRequest,
    metadata: &[(&'static str, &str)],
) -> Result<(), tonic::Status> {
    let mut client = ProfilesServiceClient::connect(server.grpc()).await.unwrap();
    let mut request = tonic::Request::new(request);
    for (name, value) in metadata {
        request.metadata_mut().insert(*name, value.parse().unwrap());
    }
    let response = client.export(request).await?.into_inner();
    assert!(
        response.partial_success.is_none_or(|p| p.rejected_profiles == 0),
        "nothing rejected"
    );
    Ok(())
}

fn first_resource() -> Vec<(String, String)> {
    workload::resources().remove(0)
}

fn json_of(body: &[u8]) -> Value {
    serde_json::from_slice(body).unwrap_or_else(|e| panic!("json ({e}): {}", String::from_utf8_lossy(body)))
}

#[tokio::test(flavor = "multi_thread")]
async fn tokens_decide_the_tenant_on_every_endpoint() {
    let server = Server::start(Options {
        extra_args: ["--auth", "required", "--auth-cache-ttl", "0s"]
            .map(String::from)
            .to_vec(),
        ..Options::default()
    })
    .await;
    let (token_a, _) = create_token(&server, "team-a");
    let (token_b, id_b) = create_token(&server, "team-b");

    // Tenant a: the generated workload over gRPC with a bearer token in the metadata, as a
    // collector's `headers: {authorization: "Bearer …"}` sends it.
    let work = Workload::new();
    for request in work.requests() {
        export_grpc(&server, request, &[("authorization", &bearer(&token_a))])
            .await
            .expect("tenant a's export");
    }
    let obs_a = work.observations();
    let cpu_a: i64 = obs_a
        .iter()
        .filter(|o| o.profile_type == workload::CPU)
        .map(|o| o.value)
        .sum();
    // Tenant b: the first request only, over OTLP/HTTP with basic auth (tenant:token).
    let first = work.requests().remove(0);
    // Requests go one per resource in the workload's order: the first is checkout on host-a.
    let cpu_b: i64 = obs_a
        .iter()
        .filter(|o| {
            o.profile_type == workload::CPU
                && first_resource().iter().all(|(k, v)| o.labels.get(k) == Some(v))
        })
        .map(|o| o.value)
        .sum();
    assert_ne!(cpu_a, cpu_b, "the tenants hold different data");
    let upload = Call::post(
        "/v1development/profiles",
        "application/x-protobuf",
        first.encode_to_vec(),
    );
    let (status, body) = upload
        .send(&server, &[("authorization", &basic("team-b", &token_b))])
        .await;
    assert_eq!(
        status,
        200,
        "tenant b's upload: {}",
        String::from_utf8_lossy(&body)
    );

    let profile_of_a = obs_a
        .iter()
        .find(|o| o.profile_type == workload::CPU && o.labels["host.name"] == "host-b")
        .and_then(|o| o.profile_id.clone())
        .expect("a profile only tenant a holds");
    let calls = query_calls(&profile_of_a);

    // No credentials, a made-up token, and a malformed header: 401 everywhere.
    for call in calls.iter().chain(&ingest_calls()) {
        for headers in [
            vec![],
            vec![("authorization", bearer("shk_not-a-token"))],
            vec![("authorization", "Digest abc".to_string())],
        ] {
            let headers: Vec<(&str, &str)> = headers.iter().map(|(k, v)| (*k, v.as_str())).collect();
            let (status, body) = call.send(&server, &headers).await;
            assert_eq!(
                status,
                401,
                "{} with {headers:?}: {}",
                call.path,
                String::from_utf8_lossy(&body)
            );
        }
    }
    // Tenant a's token naming tenant b: 403 everywhere, header or basic user alike.
    for call in calls.iter().chain(&ingest_calls()) {
        let header = [
            ("authorization", bearer(&token_a)),
            ("x-scope-orgid", "team-b".to_string()),
        ];
        let user = [("authorization", basic("team-b", &token_a))];
        for headers in [&header[..], &user[..]] {
            let headers: Vec<(&str, &str)> = headers.iter().map(|(k, v)| (*k, v.as_str())).collect();
            let (status, body) = call.send(&server, &headers).await;
            assert_eq!(
                status,
                403,
                "{} with {headers:?}: {}",
                call.path,
                String::from_utf8_lossy(&body)
            );
        }
    }
    // The same over gRPC.
    let status = export_grpc(&server, work.requests().remove(0), &[])
        .await
        .unwrap_err();
    assert_eq!(status.code(), tonic::Code::Unauthenticated, "{status:?}");
    let auth_a = bearer(&token_a);
    let status = export_grpc(
        &server,
        work.requests().remove(0),
        &[("authorization", &auth_a), ("x-scope-orgid", "team-b")],
    )
    .await
    .unwrap_err();
    assert_eq!(status.code(), tonic::Code::PermissionDenied, "{status:?}");

    // Each token reads its own tenant's data, and only that, on every endpoint.
    for (tenant, token, expected) in [("team-a", &token_a, cpu_a), ("team-b", &token_b, cpu_b)] {
        for headers in [
            vec![("authorization", bearer(token))],
            vec![("authorization", basic(tenant, token))],
            vec![
                ("authorization", bearer(token)),
                ("x-scope-orgid", tenant.to_string()),
            ],
        ] {
            let headers: Vec<(&str, &str)> = headers.iter().map(|(k, v)| (*k, v.as_str())).collect();
            for call in &calls {
                let (status, body) = call.send(&server, &headers).await;
                let is_profile = call.path.starts_with("/api/v1/profiles/");
                let want = if is_profile && tenant == "team-b" {
                    404
                } else {
                    200
                };
                assert_eq!(
                    status,
                    want,
                    "{tenant}: {}: {}",
                    call.path,
                    String::from_utf8_lossy(&body)
                );
            }
            let (_, body) = calls[3].send(&server, &headers).await;
            assert_eq!(json_of(&body)["total"], expected, "{tenant}'s flamegraph total");
            let (_, body) = calls[13].send(&server, &headers).await;
            let levels = &json_of(&body)["flamegraph"]["total"];
            assert_eq!(
                levels
                    .as_str()
                    .map(|s| s.parse::<i64>().unwrap())
                    .or(levels.as_i64()),
                Some(expected),
                "{tenant}'s Connect total"
            );
        }
    }

    // Open without credentials: health, readiness, metrics and the web UI's page.
    for path in ["/healthz", "/readyz", "/metrics", "/", "/ui/app.js"] {
        let (status, _) = Call::get(path.to_string()).send(&server, &[]).await;
        assert_eq!(status, 200, "{path} stays open");
    }

    // Revoked: refused at once (the cache is off here), other tokens unaffected.
    let (ok, out) = token_cli(&server, &["revoke", &id_b]);
    assert!(ok, "revoke: {out}");
    let (status, _) = calls[0]
        .send(&server, &[("authorization", &bearer(&token_b))])
        .await;
    assert_eq!(status, 401, "revoked token");
    let (status, _) = calls[0]
        .send(&server, &[("authorization", &bearer(&token_a))])
        .await;
    assert_eq!(status, 200, "another token still works");
    let (ok, _) = token_cli(&server, &["revoke", "0000000000000000"]);
    assert!(!ok, "revoking an unknown id fails");
    let (ok, listing) = token_cli(&server, &["list", "--tenant", "team-b"]);
    assert!(ok);
    let row = listing
        .lines()
        .find(|l| l.starts_with(&id_b))
        .expect("b's token listed");
    assert!(!row.contains(" - "), "listed as revoked: {row}");
    assert!(!listing.contains(&token_b), "secrets are never listed");
}

/// Without `--auth` nothing changes: the header picks the tenant, as before.
#[tokio::test(flavor = "multi_thread")]
async fn auth_off_keeps_the_tenant_header() {
    let server = Server::start(Options::default()).await;
    let bytes = std::fs::read(testdata("otlp/ebpf-cpu-offcpu.v1_10.pb")).unwrap();
    let request = ExportProfilesServiceRequest::decode(&bytes[..]).unwrap();
    export_grpc(&server, request, &[("x-scope-orgid", "solo")])
        .await
        .unwrap();
    let (status, body) = Call::get("/api/v1/stats".into())
        .send(&server, &[("x-scope-orgid", "solo")])
        .await;
    assert_eq!(status, 200, "{}", String::from_utf8_lossy(&body));
    assert!(
        json_of(&body)["segments"].as_u64().unwrap() > 0,
        "solo's data: {}",
        String::from_utf8_lossy(&body)
    );
}
