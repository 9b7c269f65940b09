//! Times outside what a tenant keeps are refused at ingest, in OTLP's partial_success and
//! naming why, while the rest of the request is stored: profiles older than `--retention`
//! (which the next retention run would delete right after acknowledging them) and profiles
//! further ahead than `--ingest-max-future`.

// One dependency list serves all of the package's tests, benches and binaries.
#![allow(unused_crate_dependencies)]

use std::time::{SystemTime, UNIX_EPOCH};

use opentelemetry_proto::tonic::collector::profiles::v1development::profiles_service_client::ProfilesServiceClient;
use serde_json::Value;
use ui_api_tests::server::{Options, Server};
use ui_api_tests::workload::{self, SECOND, Workload};

fn now_nanos() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_nanos() as i64
}

/// The workload moved by `shift` nanoseconds: profile times and sample timestamps alike.
fn shifted(work: &mut Workload, index: usize, shift: i64) {
    let profile = &mut work.profiles[index];
    profile.time += shift;
    for sample in &mut profile.samples {
        sample.time = sample.time.map(|t| t + shift);
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn old_and_future_profiles_are_refused_the_rest_stored() {
    let server = Server::start(Options {
        extra_args: ["--retention", "1h", "--ingest-max-future", "5m"]
            .map(String::from)
            .to_vec(),
        ..Options::default()
    })
    .await;
    let now = now_nanos();
    // The workload spans 5 minutes from T0. Move it to end two minutes ago, then send every
    // third profile a day back and every third one (the next) an hour ahead.
    let mut work = Workload::new();
    let base = now - 8 * 60 * SECOND - workload::T0;
    let mut expected = (0usize, 0usize, 0usize);
    for i in 0..work.profiles.len() {
        let extra = match i % 3 {
            0 => 0,
            1 => -24 * 3600 * SECOND,
            _ => 3600 * SECOND,
        };
        shifted(&mut work, i, base + extra);
        match i % 3 {
            0 => expected.0 += 1,
            1 => expected.1 += 1,
            _ => expected.2 += 1,
        }
    }
    let obs = work.observations();
    let mut client = ProfilesServiceClient::connect(server.grpc()).await.unwrap();
    let (mut rejected, mut messages) = (0, String::new());
    for request in work.requests() {
        let response = client
            .export(request)
            .await
            .expect("the request is accepted")
            .into_inner();
        if let Some(partial) = response.partial_success {
            rejected += partial.rejected_profiles as usize;
            messages.push_str(&partial.error_message);
        }
    }
    assert_eq!(
        rejected,
        expected.1 + expected.2,
        "old and future profiles refused: {messages}"
    );
    assert!(messages.contains("retention"), "names the retention: {messages}");
    assert!(messages.contains("future"), "names the future: {messages}");

    // Exactly the profiles in the window are stored.
    let kept: i64 = obs
        .iter()
        .filter(|o| o.profile_type == workload::CPU && o.profile % 3 == 0)
        .map(|o| o.value)
        .sum();
    assert!(kept > 0);
    let body: Value = ui_api_tests::http_client()
        .get(format!(
            "{}/api/v1/flamegraph?profile_type={}&from={}&to={}",
            server.http(),
            workload::CPU,
            now - 30 * 3600 * SECOND,
            now + 2 * 3600 * SECOND
        ))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(body["total"].as_i64(), Some(kept), "{body}");
}
