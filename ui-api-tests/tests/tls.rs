//! `--tls-cert-file` / `--tls-key-file` against the real binary, with a CA and certificate
//! made here by the `openssl` CLI and real clients: curl (HTTP/1.1 and HTTP/2 by ALPN) and
//! Python's grpcio (`ui-api-tests/python/otlp_grpc_export.py`), each trusting only that CA.
//! Expected totals are summed from the shared eBPF capture.

// One dependency list serves all of the package's tests, benches and binaries.
#![allow(unused_crate_dependencies)]

use std::path::{Path, PathBuf};
use std::process::Command;

use opentelemetry_proto::tonic::collector::profiles::v1development::ExportProfilesServiceRequest;
use prost::Message;
use serde_json::Value;
use ui_api_tests::capture;
use ui_api_tests::server::{Options, Server, binary};
use ui_api_tests::{testdata, workspace_dir};

const CPU: &str = "samples:count:cpu:nanoseconds";

fn run(cmd: &mut Command, what: &str) -> std::process::Output {
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("{what}: cannot run ({e})"));
    assert!(
        out.status.success(),
        "{what} failed: {}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// A CA, and a certificate for localhost and 127.0.0.1 signed by it: `(ca, cert, key)`.
fn certificates(dir: &Path) -> (PathBuf, PathBuf, PathBuf) {
    let path = |name: &str| dir.join(name);
    let ec = [
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:prime256v1",
        "-nodes",
    ];
    run(
        Command::new("openssl")
            .args(["req", "-x509"])
            .args(ec)
            .args(["-days", "2", "-subj", "/CN=stackhouse test ca", "-keyout"])
            .arg(path("ca.key"))
            .arg("-out")
            .arg(path("ca.pem")),
        "openssl: the CA",
    );
    run(
        Command::new("openssl")
            .arg("req")
            .args(ec)
            .args(["-subj", "/CN=localhost", "-keyout"])
            .arg(path("server.key"))
            .arg("-out")
            .arg(path("server.csr")),
        "openssl: the request",
    );
    std::fs::write(
        path("ext.cnf"),
        "subjectAltName=DNS:localhost,IP:127.0.0.1\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n",
    )
    .unwrap();
    run(
        Command::new("openssl")
            .args(["x509", "-req", "-days", "2", "-in"])
            .arg(path("server.csr"))
            .arg("-CA")
            .arg(path("ca.pem"))
            .arg("-CAkey")
            .arg(path("ca.key"))
            .args(["-CAcreateserial", "-extfile"])
            .arg(path("ext.cnf"))
            .arg("-out")
            .arg(path("server.pem")),
        "openssl: signing",
    );
    (path("ca.pem"), path("server.pem"), path("server.key"))
}

/// curl's exit code and its `-w` output.
fn curl(args: &[&str]) -> (i32, String) {
    let out = Command::new("curl")
        .args(["-sS", "-o", "/dev/null", "-w", "%{http_code} %{http_version}"])
        .args(args)
        .output()
        .expect("curl is needed for the TLS tests");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

async fn flamegraph_total(server: &Server, tenant: &str, range: (i64, i64)) -> i64 {
    let url = format!(
        "{}/api/v1/flamegraph?profile_type={CPU}&from={}&to={}",
        server.http(),
        range.0,
        range.1
    );
    let body: Value = server
        .client()
        .get(url)
        .header("x-scope-orgid", tenant)
        .send()
        .await
        .expect("query over https")
        .json()
        .await
        .unwrap();
    body["total"]
        .as_i64()
        .unwrap_or_else(|| panic!("a total: {body}"))
}

#[tokio::test(flavor = "multi_thread")]
async fn https_and_grpc_over_tls_with_real_clients() {
    let dir = tempfile::tempdir().unwrap();
    let (ca, cert, key) = certificates(dir.path());
    let server = Server::start(Options {
        extra_args: vec![
            "--tls-cert-file".into(),
            cert.display().to_string(),
            "--tls-key-file".into(),
            key.display().to_string(),
        ],
        tls_ca: Some(ca.clone()),
        ..Options::default()
    })
    .await;
    let capture_path = testdata("otlp/ebpf-cpu-offcpu.v1_10.pb");
    let bytes = std::fs::read(&capture_path).unwrap();
    let obs = capture::from_protobuf(&ExportProfilesServiceRequest::decode(&bytes[..]).unwrap());
    let cpu: i64 = obs
        .iter()
        .filter(|o| o.profile_type == CPU)
        .map(|o| o.value)
        .sum();
    let range = (
        obs.iter().map(|o| o.time).min().unwrap(),
        obs.iter().map(|o| o.time).max().unwrap() + 1,
    );
    let ca_arg = ca.display().to_string();
    let readyz = format!("{}/readyz", server.http());

    // curl trusting the CA: HTTP/2 by ALPN, and HTTP/1.1 when asked.
    assert_eq!(curl(&["--cacert", &ca_arg, &readyz]), (0, "200 2".into()));
    assert_eq!(
        curl(&["--cacert", &ca_arg, "--http1.1", &readyz]),
        (0, "200 1.1".into())
    );
    // Not trusting it: the certificate is refused (curl's exit code 60).
    assert_eq!(curl(&[&readyz]).0, 60, "an untrusted certificate is refused");
    // Plain HTTP on the TLS port gets no answer, and the server carries on.
    let plain = format!("http://127.0.0.1:{}/readyz", server.http_port);
    assert_ne!(
        curl(&["--max-time", "5", &plain]).1,
        "200 1.1",
        "plain HTTP is not served"
    );

    // OTLP/HTTP over TLS with curl, as tenant "curl".
    let capture_arg = format!("@{}", capture_path.display());
    let otlp = format!("{}/v1development/profiles", server.http());
    let (code, out) = curl(&[
        "--cacert",
        &ca_arg,
        "-H",
        "content-type: application/x-protobuf",
        "-H",
        "x-scope-orgid: curl",
        "--data-binary",
        &capture_arg,
        &otlp,
    ]);
    assert_eq!((code, out.as_str()), (0, "200 2"), "OTLP/HTTP over TLS");

    // OTLP gRPC over TLS with grpcio, as tenant "grpcio".
    let script = workspace_dir().join("ui-api-tests/python/otlp_grpc_export.py");
    let out = Command::new("python3")
        .arg(&script)
        .arg(format!("localhost:{}", server.grpc_port))
        .arg(&ca)
        .arg(&capture_path)
        .arg("x-scope-orgid=grpcio")
        .output()
        .expect("python3 is needed for the grpcio client");
    assert!(
        out.status.success(),
        "the grpcio client failed (python3 -m pip install grpcio): {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let outcome: Value = serde_json::from_slice(&out.stdout).expect("the client prints JSON");
    assert_eq!(outcome["ok"], true, "grpcio export over TLS: {outcome}");

    for tenant in ["curl", "grpcio"] {
        assert_eq!(
            flamegraph_total(&server, tenant, range).await,
            cpu,
            "{tenant}'s CPU total"
        );
    }
    assert_eq!(
        curl(&["--cacert", &ca_arg, &readyz]),
        (0, "200 2".into()),
        "still serving"
    );
}

#[test]
fn bad_tls_flags_stop_the_server_naming_the_problem() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("missing.pem");
    let not_a_cert = dir.path().join("empty.pem");
    std::fs::write(&not_a_cert, "not a certificate\n").unwrap();
    let cases: [(&[&Path], &str); 3] = [
        (&[missing.as_path()], "give both or neither"),
        (&[missing.as_path(), missing.as_path()], "missing.pem"),
        (&[not_a_cert.as_path(), not_a_cert.as_path()], "empty.pem"),
    ];
    for (files, expected) in cases {
        let mut cmd = Command::new(binary());
        cmd.args([
            "serve",
            "--http-addr",
            "127.0.0.1:0",
            "--grpc-addr",
            "127.0.0.1:0",
            "--data-dir",
        ])
        .arg(dir.path().join("data"))
        .arg("--tls-cert-file")
        .arg(files[0]);
        if let Some(key) = files.get(1) {
            cmd.arg("--tls-key-file").arg(key);
        }
        let out = cmd.output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{files:?}: the server must not start");
        assert!(stderr.contains(expected), "{files:?}: {stderr}");
    }
}
