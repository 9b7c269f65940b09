//! Native frames named through debug files, end to end: the C program of
//! `ui_api_tests::native_program` is "profiled" by sending locations at `nm` addresses plus
//! small offsets over OTLP gRPC (the `opentelemetry-proto` client), with its GNU build id on
//! the mapping as the OTel eBPF profiler sends it. Once its split debug file is uploaded
//! (`stackhouse debuginfo upload`), or served by Debian's `debuginfod -F`, the flamegraph
//! names each frame as binutils' `addr2line -f -i -e` does, inlined frames included.

// One dependency list serves all of the package's tests, benches and binaries.
#![allow(unused_crate_dependencies)]

use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use opentelemetry_proto::tonic::collector::profiles::v1development::ExportProfilesServiceRequest;
use opentelemetry_proto::tonic::collector::profiles::v1development::profiles_service_client::ProfilesServiceClient;
use opentelemetry_proto::tonic::common::v1::{AnyValue, InstrumentationScope, KeyValue, any_value};
use opentelemetry_proto::tonic::profiles::v1development::{
    KeyValueAndUnit, Location, Mapping, Profile, ProfilesDictionary, ResourceProfiles, Sample, ScopeProfiles,
    Stack, ValueType,
};
use opentelemetry_proto::tonic::resource::v1::Resource;
use ui_api_tests::native_program::{addr2line, build, build_id, probes, tool};
use ui_api_tests::pprof_reader;
use ui_api_tests::server::{Options, Server, binary, free_port};

const PROFILE_TYPE: &str = "samples:count:cpu:nanoseconds";
const SERVICE: &str = "native-app";
/// An address no part of the program covers: it keeps its `<file>+0x<addr>` name.
const OUTSIDE: u64 = 0x7fff_0000;

/// A pprof sample as compared: value, frames caller first, (file, line) per frame.
type PprofRow = (i64, Vec<String>, Vec<(String, i64)>);

fn now_nanos() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_nanos() as i64
}

fn string(s: &str) -> Option<AnyValue> {
    Some(AnyValue {
        value: Some(any_value::Value::StringValue(s.to_string())),
    })
}

/// One sample per stack: each probe address alone, each probe called from `main`'s first
/// probe, and the address outside the program. Values are 1, 2, 3, … in that order.
struct Sent {
    request: ExportProfilesServiceRequest,
    /// Leaf-first addresses and value of each sample.
    samples: Vec<(Vec<u64>, i64)>,
}

fn request(build_id: &str, addresses: &[u64]) -> Sent {
    let caller = addresses[0];
    let mut stacks: Vec<Vec<u64>> = addresses.iter().map(|&a| vec![a]).collect();
    stacks.extend(addresses.iter().map(|&a| vec![a, caller]));
    stacks.push(vec![OUTSIDE]);
    let strings = vec![
        String::new(),
        "prog".to_string(),
        "process.executable.build_id.gnu".to_string(),
        "samples".to_string(),
        "count".to_string(),
        "cpu".to_string(),
        "nanoseconds".to_string(),
    ];
    let mut locations = vec![Location::default()];
    let mut location_of = BTreeMap::new();
    for &address in addresses.iter().chain([&OUTSIDE]) {
        location_of.entry(address).or_insert_with(|| {
            locations.push(Location {
                mapping_index: 1,
                address,
                ..Default::default()
            });
            locations.len() as i32 - 1
        });
    }
    let mut stack_table = vec![Stack::default()];
    let mut samples = Vec::new();
    let mut sent = Vec::new();
    for (i, stack) in stacks.iter().enumerate() {
        stack_table.push(Stack {
            location_indices: stack.iter().map(|a| location_of[a]).collect(),
        });
        let value = i as i64 + 1;
        samples.push(Sample {
            stack_index: stack_table.len() as i32 - 1,
            values: vec![value],
            ..Default::default()
        });
        sent.push((stack.clone(), value));
    }
    let dictionary = ProfilesDictionary {
        mapping_table: vec![
            Mapping::default(),
            // As the eBPF profiler sends an executable: memory_start 0, so addresses are
            // the ELF virtual addresses.
            Mapping {
                memory_start: 0,
                memory_limit: 0,
                file_offset: 0,
                filename_strindex: 1,
                attribute_indices: vec![1],
            },
        ],
        location_table: locations,
        function_table: vec![Default::default()],
        link_table: vec![Default::default()],
        string_table: strings,
        attribute_table: vec![
            KeyValueAndUnit::default(),
            KeyValueAndUnit {
                key_strindex: 2,
                value: string(build_id),
                unit_strindex: 0,
            },
        ],
        stack_table,
    };
    let profile = Profile {
        sample_type: Some(ValueType {
            type_strindex: 3,
            unit_strindex: 4,
        }),
        period_type: Some(ValueType {
            type_strindex: 5,
            unit_strindex: 6,
        }),
        period: 10_000_000,
        time_unix_nano: (now_nanos() - 60_000_000_000) as u64,
        duration_nano: 10_000_000_000,
        samples,
        ..Default::default()
    };
    let request = ExportProfilesServiceRequest {
        resource_profiles: vec![ResourceProfiles {
            resource: Some(Resource {
                attributes: vec![KeyValue {
                    key: "service.name".into(),
                    value: string(SERVICE),
                    ..Default::default()
                }],
                ..Default::default()
            }),
            scope_profiles: vec![ScopeProfiles {
                scope: Some(InstrumentationScope::default()),
                profiles: vec![profile],
                ..Default::default()
            }],
            ..Default::default()
        }],
        dictionary: Some(dictionary),
    };
    Sent {
        request,
        samples: sent,
    }
}

/// What the folded flamegraph must be: each leaf-first stack named caller first, every
/// address expanded into what `name(address)` gives.
fn expected_folded(sent: &Sent, name: impl Fn(u64) -> Vec<String>) -> BTreeMap<String, i64> {
    let mut out = BTreeMap::new();
    for (stack, value) in &sent.samples {
        let path: Vec<String> = stack.iter().rev().flat_map(|&a| name(a)).collect();
        *out.entry(path.join(";")).or_insert(0) += value;
    }
    out
}

fn address_name(address: u64) -> Vec<String> {
    vec![format!("prog+0x{address:x}")]
}

/// binutils' names for an address of the program, caller first; an address it does not
/// know keeps its address name.
fn binutils_name(debug: &Path, address: u64) -> Vec<String> {
    if address == OUTSIDE {
        return address_name(address);
    }
    addr2line(debug, address).into_iter().map(|(f, _)| f).collect()
}

async fn folded(server: &Server, tenant: &str) -> BTreeMap<String, i64> {
    ui_api_tests::client::Api::new(server.http())
        .with_tenant(tenant)
        .folded(
            PROFILE_TYPE,
            &format!("{{service.name=\"{SERVICE}\"}}"),
            now_nanos() - 3_600_000_000_000,
            now_nanos() + 60_000_000_000,
        )
        .await
}

fn upload_cli(server: &Server, tenant: &str, files: &[&Path]) -> std::process::Output {
    Command::new(binary())
        .args(["debuginfo", "upload", "--url", &server.http(), "--tenant", tenant])
        .args(files)
        .output()
        .expect("running stackhouse debuginfo upload")
}

#[tokio::test]
async fn an_uploaded_debug_file_names_native_frames_as_addr2line_does() {
    let dir = tempfile::tempdir().unwrap();
    let (program, debug) = build(dir.path());
    let id = build_id(&program);
    let server = Server::start(Options {
        extra_args: vec!["--debuginfo-max-file-bytes".into(), "1MiB".into()],
        ..Default::default()
    })
    .await;
    let tenant = "native";
    let sent = request(&id, &probes(&program));
    send_as(&server, tenant, &sent).await;

    // Before any upload: address names, which the query caches.
    assert_eq!(
        folded(&server, tenant).await,
        expected_folded(&sent, address_name)
    );

    let out = upload_cli(&server, tenant, &[&debug]);
    assert!(
        out.status.success(),
        "upload failed: {}",
        String::from_utf8_lossy(&out.stdout)
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains(&id));
    let expected = expected_folded(&sent, |a| binutils_name(&debug, a));
    assert_ne!(expected, expected_folded(&sent, address_name));
    assert!(
        expected.keys().any(|path| path.contains("sum_squares;square")),
        "some probe lands in the inlined function: {expected:?}"
    );
    assert_eq!(folded(&server, tenant).await, expected, "names after the upload");

    // Another tenant's flamegraph of the same frames is not named by this upload.
    send_as(&server, "other", &sent).await;
    assert_eq!(
        folded(&server, "other").await,
        expected_folded(&sent, address_name)
    );

    // pprof export: function, file and line per frame, inlined ones included, as
    // addr2line prints them; one pprof sample per stack sent (values tell them apart).
    let source = |a: u64| -> Vec<(String, i64)> {
        if a == OUTSIDE {
            return vec![(String::new(), 0)];
        }
        addr2line(&debug, a)
            .into_iter()
            .map(|(_, line)| ("prog.c".to_string(), i64::from(line)))
            .collect()
    };
    let mut want: Vec<PprofRow> = sent
        .samples
        .iter()
        .map(|(stack, value)| {
            let caller_first = stack.iter().rev();
            (
                *value,
                caller_first
                    .clone()
                    .flat_map(|&a| binutils_name(&debug, a))
                    .collect(),
                caller_first.flat_map(|&a| source(a)).collect(),
            )
        })
        .collect();
    let mut got: Vec<PprofRow> = pprof_export(&server, tenant)
        .await
        .samples
        .into_iter()
        .map(|s| {
            let sources = s
                .sources
                .iter()
                .map(|(file, line)| (file.rsplit('/').next().unwrap().to_string(), *line))
                .collect();
            (s.values[0], s.frames, sources)
        })
        .collect();
    want.sort();
    got.sort();
    assert_eq!(got, want, "pprof export");

    // The API: listed, fetched, refused when wrong, deleted.
    let http = server.client();
    let base = format!("{}/api/v1/debuginfo", server.http());
    let list: serde_json::Value = http
        .get(&base)
        .header("X-Scope-OrgID", tenant)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let size = std::fs::metadata(&debug).unwrap().len() as i64;
    assert_eq!(list["files"].as_array().unwrap().len(), 1, "{list}");
    assert_eq!(list["files"][0]["build_id"], id.as_str());
    assert_eq!(list["files"][0]["file_name"], "prog.debug");
    assert_eq!(list["files"][0]["size_bytes"], size);
    let one = http
        .get(format!("{base}/{}", id.to_uppercase()))
        .header("X-Scope-OrgID", tenant)
        .send()
        .await
        .unwrap();
    assert_eq!(one.status(), 200);
    let other = http
        .get(&base)
        .header("X-Scope-OrgID", "other")
        .send()
        .await
        .unwrap();
    assert_eq!(
        other.json::<serde_json::Value>().await.unwrap()["files"],
        serde_json::json!([])
    );

    let put = |path: String, body: Vec<u8>| {
        let http = http.clone();
        async move {
            let response = http
                .put(path)
                .header("X-Scope-OrgID", tenant)
                .body(body)
                .send()
                .await
                .unwrap();
            let status = response.status().as_u16();
            let body: serde_json::Value = response.json().await.unwrap_or_default();
            (status, body["error"].as_str().unwrap_or_default().to_string())
        }
    };
    let debug_bytes = std::fs::read(&debug).unwrap();
    let wrong = "ab".repeat(20);
    let (status, error) = put(format!("{base}/{wrong}"), debug_bytes.clone()).await;
    assert_eq!(status, 400);
    assert!(error.contains(&id) && error.contains(&wrong), "{error}");
    let (status, error) = put(format!("{base}/{id}"), b"#!/bin/sh\nexit 0\n".to_vec()).await;
    assert_eq!(status, 400);
    assert!(error.contains("not an ELF file"), "{error}");
    let (status, error) = put(format!("{base}/not-hex"), debug_bytes.clone()).await;
    assert_eq!(status, 400);
    assert!(error.contains("invalid build id"), "{error}");
    let (status, error) = put(format!("{base}/{id}"), vec![0x7f; 2 << 20]).await;
    assert_eq!(status, 413);
    assert!(error.contains("limit"), "{error}");
    let source = dir.path().join("prog.c");
    let out = upload_cli(&server, tenant, &[&source]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stdout).contains("rejected"));
    // Refused uploads changed nothing.
    assert_eq!(folded(&server, tenant).await, expected);

    let delete = |tenant: &'static str| {
        let http = http.clone();
        let url = format!("{base}/{id}");
        async move {
            http.delete(url)
                .header("X-Scope-OrgID", tenant)
                .send()
                .await
                .unwrap()
                .status()
                .as_u16()
        }
    };
    assert_eq!(delete("other").await, 404);
    assert_eq!(delete(tenant).await, 204);
    assert_eq!(delete(tenant).await, 404);
    assert_eq!(
        folded(&server, tenant).await,
        expected_folded(&sent, address_name),
        "a deleted file names nothing"
    );
}

async fn send_as(server: &Server, tenant: &str, sent: &Sent) {
    let mut client = ProfilesServiceClient::connect(server.grpc()).await.unwrap();
    let mut request = tonic::Request::new(sent.request.clone());
    request
        .metadata_mut()
        .insert("x-scope-orgid", tenant.parse().unwrap());
    let response = client.export(request).await.unwrap().into_inner();
    assert!(
        response
            .partial_success
            .as_ref()
            .is_none_or(|p| p.rejected_profiles == 0),
        "{response:?}"
    );
}

async fn pprof_export(server: &Server, tenant: &str) -> pprof_reader::Pprof {
    let response = server
        .client()
        .get(format!("{}/api/v1/flamegraph", server.http()))
        .header("X-Scope-OrgID", tenant)
        .query(&[
            ("profile_type", PROFILE_TYPE.to_string()),
            ("selector", format!("{{service.name=\"{SERVICE}\"}}")),
            ("from", "now-1h".to_string()),
            ("format", "pprof".to_string()),
        ])
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    pprof_reader::decode(&response.bytes().await.unwrap())
}

/// Debian's debuginfod serving the folder the program was built in; killed on drop.
struct Debuginfod(Child);

impl Drop for Debuginfod {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[tokio::test]
async fn a_debuginfod_server_names_native_frames_without_an_upload() {
    let dir = tempfile::tempdir().unwrap();
    let (program, debug) = build(dir.path());
    let id = build_id(&program);
    let port = free_port();
    let _debuginfod = Debuginfod(
        Command::new(tool("debuginfod"))
            .arg("-F")
            .arg(dir.path())
            .args(["-p", &port.to_string(), "-d"])
            .arg(dir.path().join("debuginfod.sqlite"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("starting debuginfod"),
    );
    let url = format!("http://127.0.0.1:{port}");
    wait_until_served(&format!("{url}/buildid/{id}/debuginfo")).await;

    let server = Server::start(Options {
        extra_args: vec!["--debuginfod-url".into(), url.clone()],
        ..Default::default()
    })
    .await;
    let tenant = "native";
    let sent = request(&id, &probes(&program));
    send_as(&server, tenant, &sent).await;
    let expected = expected_folded(&sent, |a| binutils_name(&debug, a));
    assert_eq!(folded(&server, tenant).await, expected);

    // A build id no server has keeps address names, and is not asked for again soon.
    let unknown = "cd".repeat(20);
    let other = request(&unknown, &probes(&program));
    send_as(&server, "other", &other).await;
    let asked = debuginfo_requests(&url).await;
    assert_eq!(
        folded(&server, "other").await,
        expected_folded(&other, address_name)
    );
    assert_eq!(debuginfo_requests(&url).await, asked + 1, "asked once");
    assert_eq!(
        folded(&server, "other").await,
        expected_folded(&other, address_name)
    );
    assert_eq!(debuginfo_requests(&url).await, asked + 1, "not asked again");
}

/// debuginfod's own count of `/buildid/…/debuginfo` requests.
async fn debuginfo_requests(url: &str) -> u64 {
    let metrics = reqwest::get(format!("{url}/metrics"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    metrics
        .lines()
        .find_map(|l| l.strip_prefix("http_requests_total{type=\"debuginfo\"} "))
        .map_or(0, |n| n.trim().parse().unwrap())
}

/// debuginfod scans its folders in the background: waits until it serves `url`.
async fn wait_until_served(url: &str) {
    let client = reqwest::Client::new();
    for _ in 0..120 {
        if let Ok(r) = client.get(url).send().await
            && r.status() == 200
        {
            return;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    panic!("debuginfod did not serve {url} within a minute");
}
