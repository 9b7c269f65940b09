//! Reads of a few small profiles, sent over OTLP by an independent client, checked
//! against what was sent on every read path alike: the flame graph (folded and JSON), the
//! time series, Pyroscope's render and Grafana's Connect merge. The deletion and the
//! cross-tenant tests share them.

use std::collections::BTreeMap;
use std::process::Command;
use std::time::{SystemTime, UNIX_EPOCH};

use opentelemetry_proto::tonic::collector::profiles::v1development::profiles_service_client::ProfilesServiceClient;
use serde_json::{Value, json};

use crate::client::Api;
use crate::requests::{PROFILE_TYPE, dictionary, profile, request};
use crate::server::{Server, binary};

pub const SECOND: u64 = 1_000_000_000;

/// One profile sent: service, time, stack (1 main;foo, 2 main;foo;bar), value, profile id.
#[derive(Clone, Copy, Debug)]
pub struct Sent {
    pub service: &'static str,
    pub time: u64,
    pub stack: i32,
    pub value: i64,
    pub id: u128,
}

impl Sent {
    pub fn folded(&self) -> &'static str {
        if self.stack == 1 {
            "main;foo"
        } else {
            "main;foo;bar"
        }
    }
}

/// Ten profiles a second apart for each of three services, values all different.
pub fn input(t0: u64) -> Vec<Sent> {
    let mut out = Vec::new();
    for (s, service) in ["a", "b", "c"].into_iter().enumerate() {
        for i in 0..10u64 {
            out.push(Sent {
                service,
                time: t0 + i * SECOND,
                stack: 1 + (i % 2) as i32,
                value: 100 * (s as i64 + 1) + i as i64,
                id: (s as u128 + 1) << 64 | u128::from(i),
            });
        }
    }
    out
}

pub async fn send(server: &Server, tenant: &str, sent: &[Sent]) {
    let mut client = ProfilesServiceClient::connect(server.grpc()).await.unwrap();
    for p in sent {
        let mut prof = profile(p.time, p.stack, p.value);
        prof.profile_id = p.id.to_be_bytes().to_vec();
        let mut r = tonic::Request::new(request(p.service, vec![prof], dictionary()));
        r.metadata_mut().insert("x-scope-orgid", tenant.parse().unwrap());
        let answer = client.export(r).await.expect("accepted").into_inner();
        assert!(answer.partial_success.is_none_or(|p| p.rejected_profiles == 0));
    }
}

/// What the reads must answer: folded stacks, and per-second sums, of what is visible.
pub fn expected(visible: &[&Sent]) -> (BTreeMap<String, i64>, BTreeMap<i64, i64>) {
    let mut folded = BTreeMap::new();
    let mut per_second = BTreeMap::new();
    for p in visible {
        *folded.entry(p.folded().to_string()).or_insert(0) += p.value;
        *per_second.entry(p.time as i64).or_insert(0) += p.value;
    }
    (folded, per_second)
}

pub struct Reads {
    pub api: Api,
    pub client: reqwest::Client,
    pub base: String,
    pub tenant: String,
    pub from: i64,
    pub to: i64,
}

impl Reads {
    pub fn new(server: &Server, tenant: &str, t0: u64) -> Reads {
        Reads {
            api: Api::new(server.http()).with_tenant(tenant),
            client: server.client(),
            base: server.http(),
            tenant: tenant.into(),
            from: (t0 - 60 * SECOND) as i64,
            to: (t0 + 60 * SECOND) as i64,
        }
    }

    /// Every read's answer of the visible input, checked against `visible`.
    pub async fn check(&self, visible: &[&Sent], what: &str) {
        let (folded, per_second) = expected(visible);
        let total: i64 = folded.values().sum();
        assert_eq!(
            self.api.folded(PROFILE_TYPE, "{}", self.from, self.to).await,
            folded,
            "{what}: folded flame graph"
        );
        let json = self
            .api
            .flamegraph(PROFILE_TYPE, "{}", self.from, self.to, None)
            .await;
        assert_eq!(
            json["total"].as_i64(),
            Some(total),
            "{what}: JSON flame graph total: {json}"
        );
        let (status, series) = self
            .api
            .get_json(
                "/api/v1/timeseries",
                &[
                    ("profile_type", PROFILE_TYPE.into()),
                    ("from", self.from.to_string()),
                    ("to", self.to.to_string()),
                    ("step", "1s".into()),
                ],
            )
            .await;
        assert_eq!(status, 200, "{what}: {series}");
        let points: BTreeMap<i64, i64> = series["series"]
            .as_array()
            .unwrap()
            .iter()
            .flat_map(|s| s["points"].as_array().unwrap().clone())
            .map(|p| (p[0].as_i64().unwrap(), p[1].as_f64().unwrap() as i64))
            .filter(|(_, v)| *v != 0)
            .collect();
        assert_eq!(points, per_second, "{what}: time series per second");
        // Pyroscope's render, as Grafana and the Pyroscope UI ask for it.
        let render = self
            .client
            .get(format!("{}/pyroscope/render", self.base))
            .header("X-Scope-OrgID", &self.tenant)
            .query(&[
                ("query", "process_cpu:samples:count:cpu:nanoseconds{}".to_string()),
                ("from", (self.from / 1_000_000).to_string()),
                ("until", (self.to / 1_000_000).to_string()),
            ])
            .send()
            .await
            .unwrap();
        assert_eq!(render.status(), 200, "{what}: render");
        let render: Value = render.json().await.unwrap();
        assert_eq!(
            render["flamebearer"]["numTicks"].as_i64(),
            Some(total),
            "{what}: Pyroscope render total"
        );
        // Grafana's datasource: Connect SelectMergeStacktraces.
        let merged = self
            .client
            .post(format!(
                "{}/querier.v1.QuerierService/SelectMergeStacktraces",
                self.base
            ))
            .header("X-Scope-OrgID", &self.tenant)
            .json(&json!({
                "profileTypeID": PROFILE_TYPE,
                "labelSelector": "{}",
                "start": (self.from / 1_000_000).to_string(),
                "end": (self.to / 1_000_000).to_string(),
            }))
            .send()
            .await
            .unwrap();
        assert_eq!(merged.status(), 200, "{what}: SelectMergeStacktraces");
        let merged: Value = merged.json().await.unwrap();
        assert_eq!(
            crate::connect_client::int(&merged["flamegraph"]["total"]),
            total,
            "{what}: Connect merge total: {merged}"
        );
    }

    /// The profile-id lookup of one profile: its total, or 404.
    pub async fn profile(&self, p: &Sent) -> Option<i64> {
        let id = format!("{:032x}", p.id);
        let (status, body) = self.api.get_json(&format!("/api/v1/profiles/{id}"), &[]).await;
        match status {
            404 => None,
            200 => Some(body["flamegraph"]["total"].as_i64().unwrap()),
            _ => panic!("profile {id}: {status} {body}"),
        }
    }

    pub async fn admin(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<Value>,
        token: Option<&str>,
    ) -> (u16, Value) {
        let mut req = self
            .client
            .request(method, format!("{}{path}", self.base))
            .header("X-Scope-OrgID", &self.tenant);
        if let Some(token) = token {
            req = req.bearer_auth(token);
        }
        if let Some(body) = body {
            req = req.json(&body);
        }
        let resp = req.send().await.unwrap();
        let status = resp.status().as_u16();
        let text = resp.text().await.unwrap();
        (status, serde_json::from_str(&text).unwrap_or(Value::String(text)))
    }

    pub async fn delete(&self, selector: &str, from: u64, to: u64) -> (u16, Value) {
        let body = json!({"selector": selector, "from": from.to_string(), "to": to.to_string()});
        self.admin(reqwest::Method::POST, "/api/v1/admin/deletes", Some(body), None)
            .await
    }
}

pub fn now() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_nanos() as u64
}

/// Runs `stackhouse tenant token ARGS` on the server's catalog; the token it printed.
pub fn token(server: &Server, args: &[&str]) -> String {
    let out = Command::new(binary())
        .args(["tenant", "token", "create"])
        .args(args)
        .arg("--data-dir")
        .arg(server.data_path())
        .output()
        .expect("running stackhouse tenant token create");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let stdout = String::from_utf8(out.stdout).unwrap();
    stdout
        .lines()
        .find_map(|l| l.strip_prefix("token: "))
        .expect("a token printed")
        .to_string()
}
