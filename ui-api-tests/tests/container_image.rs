//! The container image (`deploy/image/Dockerfile`), built and run with podman: no registry
//! here, so the base is made from this machine's libraries (`make-base.sh`) and the binary
//! is the one the tests run (nothing is compiled inside the container). The container runs
//! as the chart runs it (UID 10001, read-only root, writable /tmp and /data), becomes
//! ready, takes the eBPF capture over OTLP gRPC and answers a query whose total is summed
//! from the capture.

// One dependency list serves all of the package's tests, benches and binaries.
#![allow(unused_crate_dependencies)]

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use opentelemetry_proto::tonic::collector::profiles::v1development::ExportProfilesServiceRequest;
use opentelemetry_proto::tonic::collector::profiles::v1development::profiles_service_client::ProfilesServiceClient;
use prost::Message;
use serde_json::Value;
use ui_api_tests::server::{binary, free_port};
use ui_api_tests::{capture, testdata, workspace_dir};

const IMAGE: &str = "localhost/stackhouse:test";

/// podman with the project's settings (`deploy/image/containers.conf`).
fn podman_command() -> Command {
    let mut cmd = Command::new("podman");
    cmd.env(
        "CONTAINERS_CONF",
        workspace_dir().join("deploy/image/containers.conf"),
    );
    cmd
}

fn podman(args: &[&str]) -> String {
    let out = podman_command()
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("podman is missing ({e}): install Debian's podman, buildah and runc"));
    assert!(
        out.status.success(),
        "podman {args:?}: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// Removes the container however the test ends.
struct Container(String);

impl Drop for Container {
    fn drop(&mut self) {
        let _ = podman_command()
            .args(["rm", "-f", &self.0])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn the_image_runs_as_the_chart_runs_it_and_answers() {
    let image_dir = workspace_dir().join("deploy/image");
    let status = Command::new("bash")
        .arg(image_dir.join("make-base.sh"))
        .arg(binary())
        .env("CONTAINERS_CONF", image_dir.join("containers.conf"))
        .status()
        .expect("running make-base.sh");
    assert!(status.success(), "make-base.sh failed");
    let context = tempfile::tempdir().unwrap();
    std::fs::copy(binary(), context.path().join("stackhouse")).unwrap();
    podman(&[
        "build",
        "--quiet",
        "--build-arg",
        "BASE=localhost/stackhouse-base:local",
        "-t",
        IMAGE,
        "-f",
        image_dir.join("Dockerfile").to_str().unwrap(),
        context.path().to_str().unwrap(),
    ]);
    let user = podman(&["image", "inspect", "--format", "{{.Config.User}}", IMAGE]);
    assert_eq!(user, "10001:10001", "the image's user is the chart's");

    let (http, grpc) = (free_port(), free_port());
    let id = podman(&[
        "run",
        "-d",
        "--network=host",
        "--read-only",
        "--mount=type=tmpfs,destination=/tmp,tmpfs-mode=1777",
        "--mount=type=tmpfs,destination=/data,tmpfs-mode=1777",
        "--cap-drop=ALL",
        "--security-opt=no-new-privileges",
        IMAGE,
        "serve",
        "--data-dir=/data",
        &format!("--http-addr=127.0.0.1:{http}"),
        &format!("--grpc-addr=127.0.0.1:{grpc}"),
        "--flush-interval=200ms",
        "--retention=0",
    ]);
    let container = Container(id);
    let base = format!("http://127.0.0.1:{http}");
    let client = ui_api_tests::http_client();
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if let Ok(r) = client.get(format!("{base}/readyz")).send().await
            && r.status() == 200
        {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the container never became ready: {}",
            podman(&["logs", &container.0])
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    let version = podman(&["exec", &container.0, "/usr/local/bin/stackhouse", "--version"]);
    assert!(version.starts_with("stackhouse "), "{version}");

    let bytes = std::fs::read(testdata("otlp/ebpf-cpu-offcpu.v1_10.pb")).unwrap();
    let request = ExportProfilesServiceRequest::decode(&bytes[..]).unwrap();
    let obs = capture::from_protobuf(&request);
    ProfilesServiceClient::connect(format!("http://127.0.0.1:{grpc}"))
        .await
        .unwrap()
        .export(request)
        .await
        .expect("the container takes the export");
    let cpu = "samples:count:cpu:nanoseconds";
    let total: i64 = obs
        .iter()
        .filter(|o| o.profile_type == cpu)
        .map(|o| o.value)
        .sum();
    let from = obs.iter().map(|o| o.time).min().unwrap();
    let to = obs.iter().map(|o| o.time).max().unwrap() + 1;
    let body: Value = client
        .get(format!(
            "{base}/api/v1/flamegraph?profile_type={cpu}&from={from}&to={to}"
        ))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(body["total"].as_i64(), Some(total), "{body}");
}
