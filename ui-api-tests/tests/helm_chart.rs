//! The Helm chart (`deploy/helm/stackhouse`) checked by real tools: `helm lint --strict`,
//! `helm template` of each `ci/*-values.yaml` validated by `kubernetes-validate --strict`,
//! values the schema or the templates must refuse, the secure defaults and the shape of
//! each mode, and every rendered workload's args and environment given to the real binary
//! (local Postgres and files in place of the cluster's), which must start and be ready.
//!
//! helm and kubernetes-validate come from `deploy/helm/install-tools.sh` (`.ci/run` runs
//! it) into `$CARGO_TARGET_DIR/helm-tools`.

// One dependency list serves all of the package's tests, benches and binaries.
#![allow(unused_crate_dependencies)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde::Deserialize;
use serde_yaml::Value;
use ui_api_tests::server::{binary, free_port};
use ui_api_tests::services::PostgresDb;
use ui_api_tests::workspace_dir;

fn chart() -> PathBuf {
    workspace_dir().join("deploy/helm/stackhouse")
}

fn helm() -> Command {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace_dir().join("target"));
    let bin = target.join("helm-tools/bin/helm");
    assert!(
        bin.exists(),
        "helm is missing at {}: run deploy/helm/install-tools.sh {}",
        bin.display(),
        target.join("helm-tools").display()
    );
    let mut cmd = Command::new(bin);
    // Nothing from the user's helm setup, nothing left behind.
    let home = std::env::temp_dir().join("stackhouse-helm-home");
    for var in ["HELM_CACHE_HOME", "HELM_CONFIG_HOME", "HELM_DATA_HOME"] {
        cmd.env(var, &home);
    }
    cmd
}

fn run(cmd: &mut Command, what: &str) -> (bool, String, String) {
    let out = cmd.output().unwrap_or_else(|e| panic!("{what}: {e}"));
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// `helm template` with a values file and `--set`s; the rendered text, or the error.
fn template(values: Option<&str>, sets: &[&str]) -> Result<String, String> {
    let mut cmd = helm();
    cmd.args(["template", "t"]).arg(chart());
    if let Some(v) = values {
        cmd.arg("-f").arg(chart().join("ci").join(v));
    }
    for s in sets {
        cmd.args(["--set", s]);
    }
    let (ok, out, err) = run(&mut cmd, "helm template");
    if ok { Ok(out) } else { Err(err) }
}

fn documents(rendered: &str) -> Vec<Value> {
    serde_yaml::Deserializer::from_str(rendered)
        .map(|d| Value::deserialize(d).expect("rendered YAML"))
        .filter(|v| !v.is_null())
        .collect()
}

fn kind<'a>(docs: &'a [Value], kind: &str) -> Vec<&'a Value> {
    docs.iter().filter(|d| d["kind"] == kind).collect()
}

fn name(v: &Value) -> &str {
    v["metadata"]["name"].as_str().unwrap()
}

const CI_VALUES: [&str; 2] = ["single-values.yaml", "microservices-values.yaml"];

#[test]
fn lint_template_and_validate_each_ci_values_file() {
    for values in CI_VALUES {
        let (ok, out, err) = run(
            helm()
                .args(["lint", "--strict"])
                .arg(chart())
                .arg("-f")
                .arg(chart().join("ci").join(values)),
            "helm lint",
        );
        assert!(ok, "helm lint --strict -f {values}: {out}{err}");
        let rendered =
            template(Some(values), &[]).unwrap_or_else(|e| panic!("helm template -f {values}: {e}"));
        kubernetes_validate(&rendered, values);
    }
}

#[test]
fn bad_values_are_refused() {
    for sets in [
        &["ingest.replcias=3"][..],
        &["mode=cluster"],
        &["service.httpPort=0"],
        &["catalog.url=mysql://db/x"],
        &["image.pullPolicy=Sometimes"],
        // Microservices share one catalog and one bucket.
        &["mode=microservices"],
        &["mode=microservices", "catalog.url=postgres://db/x"],
        &["storage.credentials.accessKeyId=a"],
        &["auth.mode=maybe"],
        &["tls.enabled=true"],
    ] {
        assert!(template(None, sets).is_err(), "--set {sets:?} was accepted");
    }
}

#[test]
fn query_pods_serve_as_workers_behind_a_headless_service() {
    let micro = documents(&template(Some("microservices-values.yaml"), &[]).unwrap());
    let workers = kind(&micro, "Service")
        .into_iter()
        .find(|s| name(s) == "t-stackhouse-query-workers")
        .expect("the query workers' headless Service");
    assert_eq!(workers["spec"]["clusterIP"], "None");
    assert_eq!(
        workers["spec"]["selector"]["app.kubernetes.io/component"],
        "query"
    );
    assert_eq!(workers["spec"]["ports"][0]["port"], 7070);
    assert!(
        workers["spec"].get("publishNotReadyAddresses").is_none(),
        "only ready pods are workers"
    );
    let query = kind(&micro, "Deployment")
        .into_iter()
        .find(|d| name(d) == "t-stackhouse-query")
        .unwrap();
    let c = &query["spec"]["template"]["spec"]["containers"][0];
    let args: Vec<&str> = c["args"]
        .as_sequence()
        .unwrap()
        .iter()
        .filter_map(|a| a.as_str())
        .collect();
    for want in [
        "--query-worker-addr=0.0.0.0:7070",
        "--query-workers-dns=t-stackhouse-query-workers.default.svc:7070",
        "--query-distribute-bytes=256MiB",
    ] {
        assert!(args.contains(&want), "{want} not in {args:?}");
    }
    let secret = c["env"]
        .as_sequence()
        .unwrap()
        .iter()
        .find(|e| e["name"] == "STACKHOUSE_QUERY_CLUSTER_SECRET")
        .expect("the cluster secret in the environment");
    assert_eq!(
        secret["valueFrom"]["secretKeyRef"]["name"],
        "t-stackhouse-query-workers"
    );
    let ports = c["ports"].as_sequence().unwrap();
    assert!(
        ports
            .iter()
            .any(|p| p["name"] == "query-worker" && p["containerPort"] == 7070)
    );
    // Ingest pods are not workers.
    let ingest = kind(&micro, "Deployment")
        .into_iter()
        .find(|d| name(d) == "t-stackhouse-ingest")
        .unwrap();
    let ingest_args = format!(
        "{:?}",
        ingest["spec"]["template"]["spec"]["containers"][0]["args"]
    );
    assert!(!ingest_args.contains("query-worker"), "{ingest_args}");

    assert!(
        kind(&micro, "NetworkPolicy").is_empty(),
        "the NetworkPolicy is off by default"
    );
    let fenced = documents(
        &template(
            Some("microservices-values.yaml"),
            &["query.workers.networkPolicy.enabled=true"],
        )
        .unwrap(),
    );
    let policy = kind(&fenced, "NetworkPolicy");
    assert_eq!(policy.len(), 1);
    assert_eq!(
        policy[0]["spec"]["ingress"][0]["ports"][0]["port"],
        "query-worker"
    );
    assert_eq!(
        policy[0]["spec"]["ingress"][0]["from"][0]["podSelector"]["matchLabels"]["app.kubernetes.io/component"],
        "query"
    );

    let err = template(
        Some("microservices-values.yaml"),
        &["query.workers.secret.value="],
    )
    .unwrap_err();
    assert!(err.contains("query.workers needs a shared secret"), "{err}");
    // Without workers no secret is needed and nothing of theirs is rendered.
    let alone = documents(
        &template(
            Some("microservices-values.yaml"),
            &["query.workers.enabled=false", "query.workers.secret.value="],
        )
        .unwrap(),
    );
    assert!(!format!("{alone:?}").contains("query-worker"));
}

#[test]
fn modes_and_secure_defaults() {
    let single = documents(&template(Some("single-values.yaml"), &[]).unwrap());
    let deployments = kind(&single, "Deployment");
    assert_eq!(deployments.len(), 1);
    let args = &deployments[0]["spec"]["template"]["spec"]["containers"][0]["args"];
    assert!(
        args.as_sequence().unwrap().iter().any(|a| a == "--role=all"),
        "{args:?}"
    );
    assert_eq!(deployments[0]["spec"]["strategy"]["type"], "Recreate");
    assert_eq!(kind(&single, "PersistentVolumeClaim").len(), 1);

    let micro = documents(&template(Some("microservices-values.yaml"), &[]).unwrap());
    let deployments: BTreeMap<&str, &Value> = kind(&micro, "Deployment")
        .into_iter()
        .map(|d| (name(d), d))
        .collect();
    assert_eq!(
        deployments.keys().copied().collect::<Vec<_>>(),
        [
            "t-stackhouse-compactor",
            "t-stackhouse-ingest",
            "t-stackhouse-query"
        ]
    );
    assert_eq!(
        deployments["t-stackhouse-compactor"]["spec"]["strategy"]["type"],
        "Recreate"
    );
    assert_eq!(deployments["t-stackhouse-ingest"]["spec"]["replicas"], 3);
    assert!(
        deployments["t-stackhouse-query"]["spec"]
            .get("replicas")
            .is_none(),
        "the HPA owns the query replicas"
    );
    assert_eq!(kind(&micro, "HorizontalPodAutoscaler").len(), 1);
    assert_eq!(kind(&micro, "PodDisruptionBudget").len(), 2);
    assert_eq!(kind(&micro, "ServiceMonitor").len(), 3);
    let ingest_service = kind(&micro, "Service")
        .into_iter()
        .find(|s| name(s) == "t-stackhouse-ingest")
        .unwrap();
    let grpc = ingest_service["spec"]["ports"]
        .as_sequence()
        .unwrap()
        .iter()
        .find(|p| p["name"] == "otlp-grpc")
        .expect("an otlp-grpc port");
    assert_eq!(grpc["appProtocol"], "grpc");

    // The CI values of microservices turn on auth and TLS; single keeps the defaults.
    for (docs, auth, scheme) in [
        (&single, "--auth=off", "HTTP"),
        (&micro, "--auth=required", "HTTPS"),
    ] {
        for d in kind(docs, "Deployment") {
            let pod = &d["spec"]["template"]["spec"];
            let c = &pod["containers"][0];
            let args: Vec<&str> = c["args"]
                .as_sequence()
                .unwrap()
                .iter()
                .filter_map(|a| a.as_str())
                .collect();
            assert!(args.contains(&auth), "{} {args:?}", name(d));
            assert_eq!(c["readinessProbe"]["httpGet"]["scheme"], scheme);
            assert_eq!(c["livenessProbe"]["httpGet"]["scheme"], scheme);
            let tls = args.contains(&"--tls-cert-file=/etc/stackhouse-tls/tls.crt");
            assert_eq!(tls, scheme == "HTTPS", "{args:?}");
            if tls {
                assert!(args.contains(&"--tls-key-file=/etc/stackhouse-tls/tls.key"));
                let volume = pod["volumes"]
                    .as_sequence()
                    .unwrap()
                    .iter()
                    .find(|v| v["name"] == "tls");
                assert_eq!(volume.unwrap()["secret"]["secretName"], "stackhouse-tls");
            }
        }
    }
    for monitor in kind(&micro, "ServiceMonitor") {
        assert_eq!(monitor["spec"]["endpoints"][0]["scheme"], "https");
    }

    for (mode, docs) in [("single", &single), ("microservices", &micro)] {
        for d in kind(docs, "Deployment") {
            let pod = &d["spec"]["template"]["spec"];
            assert_eq!(pod["automountServiceAccountToken"], false, "{mode} {}", name(d));
            assert_eq!(pod["securityContext"]["runAsNonRoot"], true);
            assert_eq!(pod["securityContext"]["runAsUser"], 10001);
            assert_eq!(pod["securityContext"]["seccompProfile"]["type"], "RuntimeDefault");
            let c = &pod["containers"][0];
            assert_eq!(c["securityContext"]["readOnlyRootFilesystem"], true);
            assert_eq!(c["securityContext"]["allowPrivilegeEscalation"], false);
            assert_eq!(c["securityContext"]["capabilities"]["drop"][0], "ALL");
            assert_eq!(c["readinessProbe"]["httpGet"]["path"], "/readyz");
            assert_eq!(c["livenessProbe"]["httpGet"]["path"], "/healthz");
            let mounts: Vec<&str> = c["volumeMounts"]
                .as_sequence()
                .unwrap()
                .iter()
                .map(|m| m["mountPath"].as_str().unwrap())
                .collect();
            assert!(
                mounts.contains(&"/tmp"),
                "a writable /tmp beside the read-only root"
            );
        }
    }
}

/// Environment variables the binary reads that are not its own flags': object_store's.
const AWS_VARS: [&str; 5] = [
    "AWS_REGION",
    "AWS_ENDPOINT_URL",
    "AWS_ALLOW_HTTP",
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
];

/// Starts the binary with a rendered container's args and env, substituting the cluster's
/// addresses, paths, Postgres and bucket with local ones, and waits for `/readyz`.
fn start_as_rendered(
    container: &Value,
    config_maps: &BTreeMap<String, String>,
    catalog: &str,
    known_env: &[String],
) {
    let dir = tempfile::tempdir().unwrap();
    let http_port = free_port();
    let (cert, key) = (dir.path().join("tls.crt"), dir.path().join("tls.key"));
    let mut tls = false;
    let mut args = Vec::new();
    for arg in container["args"].as_sequence().unwrap() {
        let arg = arg.as_str().unwrap();
        let (flag, _) = arg.split_once('=').unwrap_or((arg, ""));
        args.push(match flag {
            "--http-addr" => format!("--http-addr=127.0.0.1:{http_port}"),
            "--grpc-addr" => format!("--grpc-addr=127.0.0.1:{}", free_port()),
            "--query-worker-addr" => format!("--query-worker-addr=127.0.0.1:{}", free_port()),
            "--data-dir" => format!("--data-dir={}", dir.path().display()),
            "--tls-cert-file" => {
                self_signed(&cert, &key);
                tls = true;
                format!("--tls-cert-file={}", cert.display())
            }
            "--tls-key-file" => format!("--tls-key-file={}", key.display()),
            "--config" => {
                let file = dir.path().join("stackhouse.yaml");
                std::fs::write(&file, config_maps.values().next().expect("the chart's ConfigMap")).unwrap();
                format!("--config={}", file.display())
            }
            _ => arg.to_string(),
        });
    }
    let mut env = Vec::new();
    for var in container["env"].as_sequence().into_iter().flatten() {
        let name = var["name"].as_str().unwrap().to_string();
        assert!(
            known_env.contains(&name) || AWS_VARS.contains(&name.as_str()),
            "the chart sets {name}, which the binary does not read"
        );
        let value = match name.as_str() {
            "STACKHOUSE_CATALOG" => catalog.to_string(),
            "STACKHOUSE_STORAGE" => format!("file://{}", dir.path().join("objects").display()),
            _ => var["value"].as_str().unwrap_or("from-a-secret").to_string(),
        };
        env.push((name, value));
    }
    let mut child = Command::new(binary())
        .args(&args)
        .envs(env)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let url = format!(
        "{}://127.0.0.1:{http_port}/readyz",
        if tls { "https" } else { "http" }
    );
    let deadline = Instant::now() + Duration::from_secs(30);
    let ready = loop {
        if let Some(status) = child.try_wait().unwrap() {
            let mut err = String::new();
            std::io::Read::read_to_string(child.stderr.as_mut().unwrap(), &mut err).unwrap();
            panic!("stackhouse {args:?} exited with {status}: {err}");
        }
        let ok = std::process::Command::new("curl")
            .args(["-sfk", "-o", "/dev/null", &url])
            .status()
            .is_ok_and(|s| s.success());
        if ok {
            break true;
        }
        if Instant::now() > deadline {
            break false;
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    let _ = child.kill();
    let _ = child.wait();
    assert!(ready, "stackhouse {args:?} never became ready");
}

/// A self-signed certificate for localhost, as the chart's TLS Secret would hold.
fn self_signed(cert: &Path, key: &Path) {
    let (ok, out, err) = run(
        Command::new("openssl")
            .args([
                "req",
                "-x509",
                "-newkey",
                "rsa:2048",
                "-nodes",
                "-days",
                "1",
                "-subj",
                "/CN=localhost",
            ])
            .arg("-keyout")
            .arg(key)
            .arg("-out")
            .arg(cert),
        "openssl req",
    );
    assert!(ok, "openssl: {out}{err}");
}

#[test]
fn every_rendered_workload_starts_the_real_binary() {
    let example = run(
        Command::new(binary()).args(["config", "example"]),
        "stackhouse config example",
    )
    .1;
    let known_env: Vec<String> = example
        .lines()
        .filter_map(|l| l.strip_prefix("# Environment: "))
        .map(str::to_string)
        .collect();
    assert!(known_env.contains(&"STACKHOUSE_CATALOG".to_string()), "{example}");
    for values in CI_VALUES {
        let docs = documents(&template(Some(values), &[]).unwrap());
        let config_maps: BTreeMap<String, String> = kind(&docs, "ConfigMap")
            .into_iter()
            .map(|c| {
                (
                    name(c).to_string(),
                    c["data"]["stackhouse.yaml"].as_str().unwrap().to_string(),
                )
            })
            .collect();
        let db = PostgresDb::create();
        for d in kind(&docs, "Deployment") {
            start_as_rendered(
                &d["spec"]["template"]["spec"]["containers"][0],
                &config_maps,
                &db.url,
                &known_env,
            );
        }
    }
}

/// `kubernetes-validate --strict` over rendered manifests; panics with its report.
fn kubernetes_validate(rendered: &str, what: &str) {
    let mut validate = Command::new("kubernetes-validate")
        .args(["--strict", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("kubernetes-validate is missing: run deploy/helm/install-tools.sh");
    std::io::Write::write_all(&mut validate.stdin.take().unwrap(), rendered.as_bytes()).unwrap();
    let out = validate.wait_with_output().unwrap();
    let report = String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "kubernetes-validate --strict, {what}: {report}"
    );
    assert!(!report.contains("ERROR"), "{what}: {report}");
}

/// The ConfigMaps Grafana's sidecar would pick up by `label: value`.
fn dashboard_maps<'a>(docs: &'a [Value], label: &str, value: &str) -> Vec<&'a Value> {
    kind(docs, "ConfigMap")
        .into_iter()
        .filter(|c| c["metadata"]["labels"][label].as_str() == Some(value))
        .collect()
}

/// The monitoring mixin (dashboards and alert rules from the chart's own files): nothing
/// of it by default, as with the ServiceMonitor; with `dashboards.enabled` one sidecar-
/// labelled ConfigMap per dashboard file holding that file; with `prometheusRule.enabled`
/// one PrometheusRule holding the rule file's groups, which promtool accepts; both
/// validated; label, folder, thresholds and per-alert switches from values.
#[test]
fn dashboards_and_prometheus_rule_render_exactly_when_enabled() {
    let files: BTreeMap<String, serde_json::Value> = std::fs::read_dir(chart().join("dashboards"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .map(|p| {
            let name = p.file_name().unwrap().to_string_lossy().into_owned();
            (
                name,
                serde_json::from_str(&std::fs::read_to_string(&p).unwrap()).unwrap(),
            )
        })
        .collect();
    assert_eq!(files.len(), 5, "{:?}", files.keys());
    let rule_file: Value =
        serde_yaml::from_str(&std::fs::read_to_string(chart().join("rules/stackhouse-alerts.yaml")).unwrap())
            .unwrap();
    let alert_names = |groups: &Value| -> Vec<String> {
        groups
            .as_sequence()
            .unwrap()
            .iter()
            .flat_map(|g| g["rules"].as_sequence().unwrap().iter())
            .map(|r| r["alert"].as_str().unwrap().to_string())
            .collect()
    };
    let all_alerts = alert_names(&rule_file["groups"]);

    for values in CI_VALUES {
        // Off by default.
        let docs = documents(&template(Some(values), &[]).unwrap());
        assert!(
            kind(&docs, "PrometheusRule").is_empty(),
            "{values}: a PrometheusRule by default"
        );
        assert!(
            dashboard_maps(&docs, "grafana_dashboard", "1").is_empty(),
            "{values}: dashboards by default"
        );

        // On.
        let rendered = template(
            Some(values),
            &["dashboards.enabled=true", "prometheusRule.enabled=true"],
        )
        .unwrap_or_else(|e| panic!("{values}: {e}"));
        kubernetes_validate(&rendered, values);
        let (ok, out, err) = run(
            helm()
                .args(["lint", "--strict"])
                .arg(chart())
                .arg("-f")
                .arg(chart().join("ci").join(values))
                .args(["--set", "dashboards.enabled=true,prometheusRule.enabled=true"]),
            "helm lint",
        );
        assert!(ok, "helm lint --strict -f {values} with the mixin on: {out}{err}");
        let docs = documents(&rendered);
        let maps = dashboard_maps(&docs, "grafana_dashboard", "1");
        assert_eq!(maps.len(), files.len(), "{values}: one ConfigMap per dashboard");
        for map in &maps {
            assert!(map["metadata"]["annotations"].is_null(), "no folder by default");
            let data = map["data"].as_mapping().unwrap();
            assert_eq!(data.len(), 1);
            let (key, json) = data.iter().next().unwrap();
            let key = key.as_str().unwrap();
            let parsed: serde_json::Value = serde_json::from_str(json.as_str().unwrap()).unwrap();
            assert_eq!(Some(&parsed), files.get(key), "{key} is the chart's file");
        }
        let rules = kind(&docs, "PrometheusRule");
        assert_eq!(rules.len(), 1, "{values}");
        let rule = rules[0];
        assert_eq!(rule["apiVersion"], "monitoring.coreos.com/v1");
        let groups = &rule["spec"]["groups"];
        assert_eq!(
            alert_names(groups),
            all_alerts,
            "{values}: every alert of the rule file"
        );
        for (g, file_g) in groups
            .as_sequence()
            .unwrap()
            .iter()
            .zip(rule_file["groups"].as_sequence().unwrap())
        {
            for (r, file_r) in g["rules"].as_sequence().unwrap().iter().zip(file_r_rules(file_g)) {
                assert_eq!(
                    r["expr"].as_str().unwrap().trim(),
                    file_r["expr"].as_str().unwrap().trim()
                );
                assert_eq!(r["annotations"], file_r["annotations"]);
                assert_eq!(r["labels"], file_r["labels"]);
                assert_eq!(r["for"], file_r["for"]);
            }
        }
        promtool_check(groups, values);
    }

    // Sidecar label and folder from values; thresholds, `for`, severity and switches per alert.
    let docs = documents(
        &template(
            None,
            &[
                "dashboards.enabled=true",
                "dashboards.label=observability/dashboard",
                "dashboards.labelValue=stackhouse",
                "dashboards.folder=Profiling",
                "prometheusRule.enabled=true",
                "prometheusRule.labels.release=kube-prometheus-stack",
                "prometheusRule.additionalAlertLabels.team=profiling",
                "prometheusRule.runbookBaseUrl=https://wiki.example.com/stackhouse/ops",
                "prometheusRule.alerts.StackhouseIngestErrors.threshold=0.25",
                "prometheusRule.alerts.StackhouseIngestErrors.for=20m",
                "prometheusRule.alerts.StackhouseIngestErrors.severity=page",
                "prometheusRule.alerts.StackhouseQueryTimeouts.enabled=false",
            ],
        )
        .unwrap(),
    );
    assert!(dashboard_maps(&docs, "grafana_dashboard", "1").is_empty());
    let maps = dashboard_maps(&docs, "observability/dashboard", "stackhouse");
    assert_eq!(maps.len(), files.len());
    for map in maps {
        assert_eq!(map["metadata"]["annotations"]["grafana_folder"], "Profiling");
    }
    let rule = kind(&docs, "PrometheusRule")[0];
    assert_eq!(rule["metadata"]["labels"]["release"], "kube-prometheus-stack");
    let names = alert_names(&rule["spec"]["groups"]);
    assert!(!names.contains(&"StackhouseQueryTimeouts".to_string()));
    assert_eq!(names.len(), all_alerts.len() - 1);
    let rules: Vec<&Value> = rule["spec"]["groups"]
        .as_sequence()
        .unwrap()
        .iter()
        .flat_map(|g| g["rules"].as_sequence().unwrap().iter())
        .collect();
    for r in &rules {
        assert_eq!(r["labels"]["team"], "profiling");
        let url = r["annotations"]["runbook_url"].as_str().unwrap();
        assert!(
            url.starts_with("https://wiki.example.com/stackhouse/ops#stackhouse"),
            "{url}"
        );
    }
    let errors = rules
        .iter()
        .find(|r| r["alert"] == "StackhouseIngestErrors")
        .unwrap();
    assert!(
        errors["expr"].as_str().unwrap().trim_end().ends_with("> 0.25"),
        "{:?}",
        errors["expr"]
    );
    assert_eq!(errors["for"], "20m");
    assert_eq!(errors["labels"]["severity"], "page");
    promtool_check(&rule["spec"]["groups"], "overrides");

    // Mistakes are refused: an alert that does not exist, a threshold where the
    // expression has none, a bad duration.
    for sets in [
        &[
            "prometheusRule.enabled=true",
            "prometheusRule.alerts.StackhouseNoSuchAlert.enabled=false",
        ][..],
        &[
            "prometheusRule.enabled=true",
            "prometheusRule.alerts.StackhouseCompactionBacklog.threshold=3",
        ],
        &[
            "prometheusRule.enabled=true",
            "prometheusRule.alerts.StackhouseIngestErrors.for=soon",
        ],
        &["dashboards.enabled=true", "dashboards.label="],
    ] {
        assert!(template(None, sets).is_err(), "--set {sets:?} was accepted");
    }
}

fn file_r_rules(group: &Value) -> impl Iterator<Item = &Value> {
    group["rules"].as_sequence().unwrap().iter()
}

/// `promtool check rules` over rendered rule groups.
fn promtool_check(groups: &Value, what: &str) {
    let found = Command::new("promtool")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    assert!(
        found,
        "promtool is not installed: Debian's prometheus package (apt-get install prometheus)"
    );
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("rules.yaml");
    let mut file = serde_yaml::Mapping::new();
    file.insert("groups".into(), groups.clone());
    std::fs::write(&path, serde_yaml::to_string(&file).unwrap()).unwrap();
    let out = Command::new("promtool")
        .args(["check", "rules"])
        .arg(&path)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "promtool check rules, {what}: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}
