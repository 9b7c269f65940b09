//! Every test data file (pprof, JFR, speedscope, OTLP) sent the way real senders do — the
//! Pyroscope-compatible `/ingest`, OTLP/HTTP, and `stackhouse import` — and read back: per
//! profile type the flamegraph total and every root-to-leaf path equal what an independent
//! reader computes from the file. Malformed input is refused with a message naming the
//! problem, and nothing of it is stored.

// One dependency list serves all of the package's tests, benches and binaries.
#![allow(unused_crate_dependencies)]

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::time::{SystemTime, UNIX_EPOCH};

use prost::Message;
use ui_api_tests::client::Api;
use ui_api_tests::format_checks::{assert_attribute_selectors, assert_span_filter, assert_stored, tree};
use ui_api_tests::formats::{Expected, Format, LINK_LABELS, expected, stem, testdata_files};
use ui_api_tests::ingest_client::{Ingest, Part, import};
use ui_api_tests::jfr_expected::from_totals;
use ui_api_tests::jfr_reader::{self, JfrTotals};
use ui_api_tests::server::{Options, Server};
use ui_api_tests::testdata;

struct Case {
    path: PathBuf,
    stem: String,
    format: Format,
    expected: Expected,
    /// What `jfr print --json` says of a recording.
    jfr: Option<JfrTotals>,
}

fn cases() -> Vec<Case> {
    testdata_files()
        .into_iter()
        .map(|path| {
            let format = Format::of(&path);
            let jfr = (format == Format::Jfr).then(|| jfr_reader::read(&path));
            Case {
                stem: stem(&path),
                format,
                expected: match &jfr {
                    Some(totals) => from_totals(totals),
                    None => expected(&path),
                },
                jfr,
                path,
            }
        })
        .collect()
}

/// A recording's threads and times: per type, `{thread.name="…"}` of its busiest thread
/// holds that thread's values, and for count types a cut at the median timestamp splits
/// the events as their timestamps do.
async fn assert_jfr_threads_and_times(api: &Api, base: &[String], totals: &JfrTotals, what: &str) {
    for (ty, threads) in &totals.by_thread {
        let (thread, value) = threads.iter().max_by_key(|(_, v)| **v).unwrap();
        let mut matchers = base.to_vec();
        matchers.push(format!("thread.name={thread:?}"));
        let times = &totals.timestamps[ty];
        let (first, last) = (times[0], times[times.len() - 1] + 1);
        let (total, _) = tree(api, ty, &selector(&matchers), first, last).await;
        assert_eq!(total, *value, "{what} {ty}: thread {thread:?}");
        if ty.split(':').nth(1) == Some("count") {
            let mid = times[times.len() / 2];
            let before = times.iter().filter(|t| **t < mid).count() as i64;
            let (total, _) = tree(api, ty, &selector(base), first, mid).await;
            assert_eq!(total, before, "{what} {ty}: events before {mid}");
            let (total, _) = tree(api, ty, &selector(base), mid, last).await;
            assert_eq!(
                total,
                times.len() as i64 - before,
                "{what} {ty}: events from {mid}"
            );
        }
    }
}

fn now_nanos() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_nanos() as i64
}

const MINUTE: i64 = 60_000_000_000;

/// The file's own span, else the window around the test in which the receive time (or the
/// `from` the test sent) falls.
fn range(case: &Case, started: i64) -> (i64, i64) {
    case.expected
        .span
        .unwrap_or((started - MINUTE, now_nanos() + MINUTE))
}

fn selector(matchers: &[String]) -> String {
    format!("{{{}}}", matchers.join(", "))
}

async fn listed_types(api: &Api, (from, to): (i64, i64)) -> BTreeSet<String> {
    let (status, body) = api
        .get_json(
            "/api/v1/profile-types",
            &[("from", from.to_string()), ("to", to.to_string())],
        )
        .await;
    assert_eq!(status, 200, "{body}");
    body["profile_types"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["id"].as_str().unwrap().to_string())
        .collect()
}

fn expected_types(e: &Expected) -> BTreeSet<String> {
    e.observations.iter().map(|o| o.profile_type.clone()).collect()
}

/// Every type with a non-zero value is listed, and nothing outside the file's types.
fn assert_types(listed: &BTreeSet<String>, e: &Expected, what: &str) {
    let all = expected_types(e);
    let valued: BTreeSet<String> = e
        .observations
        .iter()
        .filter(|o| o.value != 0)
        .map(|o| o.profile_type.clone())
        .collect();
    assert!(
        valued.is_subset(listed) && listed.is_subset(&all),
        "{what}: profile types listed {listed:?}, expected all of {valued:?} and only from {all:?}"
    );
}

/// Sends one file to the HTTP server in the way its senders do; returns the answer's
/// `(profiles, samples)` when the endpoint reports them.
async fn send_http(ingest: &Ingest, case: &Case, i: usize, started_secs: i64) -> Option<(u64, u64)> {
    let bytes = std::fs::read(&case.path).unwrap();
    let mut query = vec![("name", format!("{}{{env=http}}", case.stem))];
    if case.expected.span.is_none() {
        query.push(("from", started_secs.to_string()));
        query.push(("until", (started_secs + 10).to_string()));
    }
    let answer = match case.format {
        Format::OtlpProtobuf => ingest.otlp("application/x-protobuf", None, bytes).await,
        Format::OtlpJson => ingest.otlp("application/json", None, bytes).await,
        format => {
            query.push(("format", format.ingest_name().to_string()));
            // Half the pprof and JFR files as multipart uploads, as the SDKs send them.
            match (format, i % 2) {
                (Format::Pprof, 1) => {
                    let part = Part {
                        name: "profile",
                        filename: Some("profile.pprof"),
                        data: &bytes,
                    };
                    ingest.ingest_multipart(&query, &[part]).await
                }
                (Format::Jfr, 1) => {
                    let part = Part {
                        name: "jfr",
                        filename: Some("recording.jfr"),
                        data: &bytes,
                    };
                    ingest.ingest_multipart(&query, &[part]).await
                }
                _ => ingest.ingest(&query, bytes).await,
            }
        }
    };
    assert_eq!(
        answer.status,
        200,
        "{}: ingest refused: {}",
        case.path.display(),
        answer.text()
    );
    match case.format {
        Format::OtlpProtobuf | Format::OtlpJson => None,
        _ => {
            let body = answer.json();
            Some((
                body["profiles"].as_u64().expect("profiles count"),
                body["samples"].as_u64().expect("samples count"),
            ))
        }
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn every_file_over_http_matches_independent_readers() {
    let started = now_nanos();
    let started_secs = started / 1_000_000_000;
    let server = Server::start(Options::default()).await;
    let cases = cases();
    for (i, case) in cases.iter().enumerate() {
        // One tenant per file, so each tenant's type list is exactly the file's.
        let ingest = Ingest::new(server.http()).with_tenant(&case.stem);
        if let Some(counts) = send_http(&ingest, case, i, started_secs).await {
            assert_eq!(
                counts,
                (case.expected.profiles as u64, case.expected.samples as u64),
                "{}: (profiles, samples) reported by /ingest",
                case.path.display()
            );
        }
    }
    for case in &cases {
        let what = format!("http {}", case.path.display());
        let paths = ui_api_tests::formats::paths_by_type(&case.expected.observations);
        eprintln!(
            "{what}: {} profiles, {} samples, paths per type {:?}",
            case.expected.profiles,
            case.expected.samples,
            paths
                .iter()
                .map(|(t, p)| (t.as_str(), p.len()))
                .collect::<Vec<_>>()
        );
        let api = Api::new(server.http()).with_tenant(&case.stem);
        let range = range(case, started);
        assert_types(&listed_types(&api, range).await, &case.expected, &what);
        let base = match case.format {
            Format::OtlpProtobuf | Format::OtlpJson => vec![],
            _ => vec![
                format!("service.name={:?}", case.stem),
                r#"env="http""#.to_string(),
            ],
        };
        assert_stored(&api, &selector(&base), range, &case.expected, &what).await;
        assert_attribute_selectors(&api, &base, range, &case.expected, &LINK_LABELS, &what).await;
        assert_span_filter(&api, &selector(&base), range, &case.expected, &what).await;
        if let Some(totals) = &case.jfr {
            assert_jfr_threads_and_times(&api, &base, totals, &what).await;
        }
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn every_file_through_import_matches_independent_readers() {
    let started = now_nanos();
    let server = Server::start(Options::default()).await;
    let cases = cases();
    // OTLP files keep their own resources (and service names), so each goes to a server of
    // its own; the others share one, told apart by --service.
    let mut otlp_servers = Vec::new();
    for case in &cases {
        let otlp = matches!(case.format, Format::OtlpProtobuf | Format::OtlpJson);
        let target = if otlp {
            otlp_servers.push(Server::start(Options::default()).await);
            otlp_servers.last().unwrap().http()
        } else {
            server.http()
        };
        let service = (!otlp).then_some(case.stem.as_str());
        let run = import(&target, service, &[("env", "import")], &[&case.path]);
        assert!(
            run.success,
            "{}: import failed:\n{}\n{}",
            case.path.display(),
            run.stdout,
            run.stderr
        );
        let s = run.summary;
        assert_eq!(
            (s.files, s.profiles, s.samples, s.rejected),
            (1, case.expected.profiles as u64, case.expected.samples as u64, 0),
            "{}: import summary (files, profiles, samples, rejected): {}",
            case.path.display(),
            run.stdout
        );
        assert_eq!(
            s.bytes,
            std::fs::metadata(&case.path).unwrap().len(),
            "{}: bytes in the summary are the file's size",
            case.path.display()
        );
    }
    let mut otlp_servers = otlp_servers.iter();
    for case in &cases {
        let what = format!("import {}", case.path.display());
        let range = range(case, started);
        match case.format {
            Format::OtlpProtobuf | Format::OtlpJson => {
                let api = Api::new(otlp_servers.next().unwrap().http());
                assert_types(&listed_types(&api, range).await, &case.expected, &what);
                assert_stored(&api, "{}", range, &case.expected, &what).await;
                assert_attribute_selectors(&api, &[], range, &case.expected, &LINK_LABELS, &what).await;
            }
            _ => {
                let api = Api::new(server.http());
                let base = vec![
                    format!("service.name={:?}", case.stem),
                    r#"env="import""#.to_string(),
                ];
                assert_stored(&api, &selector(&base), range, &case.expected, &what).await;
                assert_attribute_selectors(&api, &base, range, &case.expected, &LINK_LABELS, &what).await;
                assert_span_filter(&api, &selector(&base), range, &case.expected, &what).await;
                if let Some(totals) = &case.jfr {
                    assert_jfr_threads_and_times(&api, &base, totals, &what).await;
                }
            }
        }
    }
}

#[test]
fn import_of_several_files_sums_them_and_counts_rejects() {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let server = runtime.block_on(Server::start(Options::default()));
    let good = [
        testdata("pprof/cpu.pb.gz"),
        testdata("speedscope/two-sampled.speedscope.json"),
    ];
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("garbage.pprof");
    std::fs::write(&bad, [0xffu8; 64]).unwrap();
    let expected: Vec<Expected> = good.iter().map(|p| expected(p)).collect();
    let files: Vec<&std::path::Path> = good.iter().map(PathBuf::as_path).chain([bad.as_path()]).collect();
    let run = import(&server.http(), Some("several"), &[], &files);
    assert!(!run.success, "a rejected file makes import fail: {}", run.stdout);
    let s = run.summary;
    assert_eq!(s.files, 2, "imported files: {}", run.stdout);
    assert_eq!(s.rejected, 1, "{}", run.stdout);
    assert_eq!(
        s.profiles,
        expected.iter().map(|e| e.profiles as u64).sum::<u64>()
    );
    assert_eq!(s.samples, expected.iter().map(|e| e.samples as u64).sum::<u64>());
    assert!(
        run.stderr.contains("garbage.pprof") || run.stdout.contains("garbage.pprof"),
        "the rejected file is named:\n{}\n{}",
        run.stdout,
        run.stderr
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn invalid_utf8_is_stored_with_replacement_characters() {
    let path = testdata("pprof/invalid_utf8.pb.gz");
    let e = expected(&path);
    let names: Vec<&String> = e.observations.iter().flat_map(|o| &o.frames).collect();
    assert!(
        names.iter().any(|n| n.contains('\u{FFFD}')),
        "the independent reader replaces the invalid bytes: {names:?}"
    );
    let server = Server::start(Options::default()).await;
    let ingest = Ingest::new(server.http());
    let query = [
        ("name", "utf8{env=x}".to_string()),
        ("format", "pprof".to_string()),
    ];
    let answer = ingest.ingest(&query, std::fs::read(&path).unwrap()).await;
    assert_eq!(answer.status, 200, "{}", answer.text());
    let api = Api::new(server.http());
    assert_stored(
        &api,
        r#"{service.name="utf8"}"#,
        e.span.unwrap(),
        &e,
        "invalid_utf8",
    )
    .await;
}

// ---- malformed input ---------------------------------------------------------------------

/// Broken profiles are built from a good one, field by field.
mod pprof {
    pub(crate) use ui_api_tests::pprof_messages::*;

    /// `main` → `work` with value 5, then the given breakage.
    pub(crate) fn profile(time_nanos: i64) -> Profile {
        Profile {
            sample_type: vec![ValueType { r#type: 1, unit: 2 }],
            sample: vec![Sample {
                location_id: vec![2, 1],
                value: vec![5],
            }],
            location: vec![
                Location {
                    id: 1,
                    line: vec![Line { function_id: 1 }],
                },
                Location {
                    id: 2,
                    line: vec![Line { function_id: 2 }],
                },
            ],
            function: vec![
                Function {
                    id: 1,
                    name: 3,
                    ..Default::default()
                },
                Function {
                    id: 2,
                    name: 4,
                    ..Default::default()
                },
            ],
            string_table: ["", "samples", "count", "main", "work"]
                .map(String::from)
                .to_vec(),
            time_nanos,
            ..Default::default()
        }
    }
}

fn gunzip(data: &[u8]) -> Vec<u8> {
    use std::io::Read;
    let mut out = Vec::new();
    flate2::read::GzDecoder::new(data).read_to_end(&mut out).unwrap();
    out
}

/// Posts a malformed body under its own tenant; asserts a 400 whose message holds every
/// `needles` (case-insensitively) and that the tenant has no profile type afterwards.
async fn refused(server: &Server, tenant: &str, query: &[(&str, String)], body: Vec<u8>, needles: &[&str]) {
    let ingest = Ingest::new(server.http()).with_tenant(tenant);
    let answer = ingest.ingest(query, body).await;
    assert_refused(server, tenant, answer, needles).await;
}

async fn assert_refused(
    server: &Server,
    tenant: &str,
    answer: ui_api_tests::ingest_client::Answer,
    needles: &[&str],
) {
    assert_eq!(answer.status, 400, "{tenant}: {}", answer.text());
    let message = answer.error().to_lowercase();
    for n in needles {
        assert!(
            message.contains(&n.to_lowercase()),
            "{tenant}: error {message:?} does not name {n:?}"
        );
    }
    let now = now_nanos();
    for range in [
        (now - 10 * MINUTE, now + MINUTE),
        (PPROF_TIME - MINUTE, PPROF_TIME + MINUTE),
    ] {
        let api = Api::new(server.http()).with_tenant(tenant);
        assert!(
            listed_types(&api, range).await.is_empty(),
            "{tenant}: nothing is stored for a refused request"
        );
    }
}

/// The time the hand-built pprof profiles carry.
const PPROF_TIME: i64 = 1_700_000_000_000_000_000;

#[tokio::test(flavor = "multi_thread")]
async fn malformed_input_is_refused_with_its_reason_and_nothing_stored() {
    let server = Server::start(Options::default()).await;
    let q = |format: &str| {
        vec![
            ("name", "broken{env=x}".to_string()),
            ("format", format.to_string()),
        ]
    };

    // The well-formed hand-built profile is accepted: the breakages below are the only cause.
    let ok = Ingest::new(server.http()).with_tenant("control");
    let answer = ok
        .ingest(&q("pprof"), pprof::profile(PPROF_TIME).encode_to_vec())
        .await;
    assert_eq!(answer.status, 200, "{}", answer.text());
    let api = Api::new(server.http()).with_tenant("control");
    let (_, paths) = tree(
        &api,
        "samples:count::",
        "{}",
        PPROF_TIME - MINUTE,
        PPROF_TIME + MINUTE,
    )
    .await;
    assert_eq!(paths, [(vec!["main".to_string(), "work".to_string()], 5)].into());

    let cpu = gunzip(&std::fs::read(testdata("pprof/cpu.pb.gz")).unwrap());
    refused(
        &server,
        "pprof-truncated",
        &q("pprof"),
        cpu[..cpu.len() / 2].to_vec(),
        &["pprof"],
    )
    .await;
    refused(&server, "pprof-garbage", &q("pprof"), vec![0xff; 64], &["pprof"]).await;

    let mut bad = pprof::profile(PPROF_TIME);
    bad.sample[0].location_id = vec![2, 99];
    refused(
        &server,
        "pprof-location",
        &q("pprof"),
        bad.encode_to_vec(),
        &["pprof", "location", "99"],
    )
    .await;
    let mut bad = pprof::profile(PPROF_TIME);
    bad.location[0].line[0].function_id = 77;
    refused(
        &server,
        "pprof-function",
        &q("pprof"),
        bad.encode_to_vec(),
        &["pprof", "function", "77"],
    )
    .await;
    let mut bad = pprof::profile(PPROF_TIME);
    bad.function[1].name = 1234;
    refused(
        &server,
        "pprof-string",
        &q("pprof"),
        bad.encode_to_vec(),
        &["pprof", "string", "1234"],
    )
    .await;

    let jfr = gunzip(&std::fs::read(testdata("jfr/kafka-cpu.jfr.gz")).unwrap());
    refused(
        &server,
        "jfr-truncated",
        &q("jfr"),
        jfr[..jfr.len() / 3].to_vec(),
        &["jfr"],
    )
    .await;
    let mut bad_magic = jfr.clone();
    bad_magic[..4].copy_from_slice(b"RFLJ");
    refused(&server, "jfr-magic", &q("jfr"), bad_magic, &["jfr", "magic"]).await;

    refused(
        &server,
        "folded-line",
        &q("folded"),
        b"main;work 10\nmain;idle ten\nmain 3\n".to_vec(),
        &["folded", "line 2"],
    )
    .await;

    let speedscope = serde_json::json!({
        "$schema": "https://www.speedscope.app/file-format-schema.json",
        "shared": {"frames": [{"name": "a"}, {"name": "b"}]},
        "profiles": [{
            "type": "sampled", "name": "p", "unit": "none", "startValue": 0, "endValue": 2,
            "samples": [[0, 1], [0, 7]], "weights": [1, 1]
        }]
    });
    refused(
        &server,
        "speedscope-frame",
        &q("speedscope"),
        speedscope.to_string().into_bytes(),
        &["speedscope", "frame", "7"],
    )
    .await;

    refused(
        &server,
        "unknown-format",
        &q("wav"),
        b"a;b 1\n".to_vec(),
        &["format", "wav"],
    )
    .await;
    let bad_name = vec![
        ("name", "app{env=x".to_string()),
        ("format", "folded".to_string()),
    ];
    refused(&server, "bad-name", &bad_name, b"a;b 1\n".to_vec(), &["name"]).await;
    let no_name = vec![("format", "folded".to_string())];
    refused(&server, "no-name", &no_name, b"a;b 1\n".to_vec(), &["name"]).await;
}

// ---- Pyroscope Push ------------------------------------------------------------------------

mod push {
    #[derive(Clone, PartialEq, prost::Message)]
    pub(crate) struct PushRequest {
        #[prost(message, repeated, tag = "1")]
        pub series: Vec<RawProfileSeries>,
    }
    #[derive(Clone, PartialEq, prost::Message)]
    pub(crate) struct RawProfileSeries {
        #[prost(message, repeated, tag = "1")]
        pub labels: Vec<LabelPair>,
        #[prost(message, repeated, tag = "2")]
        pub samples: Vec<RawSample>,
    }
    #[derive(Clone, PartialEq, prost::Message)]
    pub(crate) struct RawSample {
        #[prost(bytes = "vec", tag = "1")]
        pub raw_profile: Vec<u8>,
        #[prost(string, tag = "2")]
        pub id: String,
    }
    #[derive(Clone, PartialEq, prost::Message)]
    pub(crate) struct LabelPair {
        #[prost(string, tag = "1")]
        pub name: String,
        #[prost(string, tag = "2")]
        pub value: String,
    }

    pub(crate) fn series(service: &str, profile: Vec<u8>) -> RawProfileSeries {
        let label = |n: &str, v: &str| LabelPair {
            name: n.into(),
            value: v.into(),
        };
        RawProfileSeries {
            labels: vec![
                label("__name__", "process_cpu"),
                label("service_name", service),
                label("region", "eu"),
            ],
            samples: vec![RawSample {
                raw_profile: profile,
                id: String::new(),
            }],
        }
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn push_keeps_the_good_series_and_names_the_bad_one() {
    let server = Server::start(Options::default()).await;
    let good_bytes = std::fs::read(testdata("pprof/cpu.pb.gz")).unwrap();
    let expected = expected(&testdata("pprof/cpu.pb.gz"));
    let request = push::PushRequest {
        series: vec![
            push::series("push-good", good_bytes),
            push::series("push-bad", vec![0xff; 40]),
        ],
    };
    let ingest = Ingest::new(server.http());
    let body = ui_api_tests::client::gzip(&request.encode_to_vec());
    let answer = ingest
        .post(
            "/push.v1.PusherService/Push",
            &[],
            &[
                ("Content-Type", "application/proto"),
                ("Content-Encoding", "gzip"),
                ("Connect-Protocol-Version", "1"),
            ],
            body,
        )
        .await;
    assert_eq!(answer.status, 400, "{}", answer.text());
    let error = answer.json();
    assert_eq!(error["code"], "invalid_argument", "{error}");
    let message = error["message"].as_str().unwrap();
    assert!(
        message.contains("push-bad") || message.contains("series 1") || message.contains("series[1]"),
        "the message names the bad series: {message}"
    );
    assert!(
        !message.contains("push-good"),
        "only the bad series is named: {message}"
    );

    let api = Api::new(server.http());
    let range = expected.span.unwrap();
    assert_stored(
        &api,
        r#"{service.name="push-good", region="eu"}"#,
        range,
        &expected,
        "push-good",
    )
    .await;
    for ty in expected_types(&expected) {
        let (total, paths) = tree(&api, &ty, r#"{service.name="push-bad"}"#, range.0, range.1).await;
        assert_eq!(
            (total, paths.len()),
            (0, 0),
            "nothing of the bad series is stored"
        );
    }

    // The same good series as Connect JSON (bytes base64, as protojson writes them).
    let json = serde_json::json!({
        "series": [{
            "labels": [
                {"name": "__name__", "value": "process_cpu"},
                {"name": "service_name", "value": "push-json"},
            ],
            "samples": [{"rawProfile": base64(&std::fs::read(testdata("pprof/cpu.pb.gz")).unwrap())}],
        }]
    });
    let answer = ingest
        .post(
            "/push.v1.PusherService/Push",
            &[],
            &[("Content-Type", "application/json")],
            json.to_string().into_bytes(),
        )
        .await;
    assert_eq!(answer.status, 200, "{}", answer.text());
    assert_stored(
        &api,
        r#"{service.name="push-json"}"#,
        range,
        &expected,
        "push-json",
    )
    .await;
}

fn base64(data: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::new();
    for chunk in data.chunks(3) {
        let b = [chunk[0], *chunk.get(1).unwrap_or(&0), *chunk.get(2).unwrap_or(&0)];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(ALPHABET[(n >> (18 - 6 * i)) as usize & 63] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}
