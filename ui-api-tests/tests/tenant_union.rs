//! Reads across tenants (issue 52): `X-Scope-OrgID: a|b` answers over the union, each
//! read path equal to the sum of what each tenant was sent, with a `__tenant_id__` label
//! to select and group by. The tenants send the same services, so their series have the
//! same labels and ids: grouping by service and tenant at once shows that one tenant's
//! samples are never counted as another's. Writes naming several tenants are refused; with
//! auth on, a token reads only the tenants it was granted, writes and administers only its
//! own, and every admin endpoint refuses a token without the admin role.

// One dependency list serves all of the package's tests, benches and binaries.
#![allow(unused_crate_dependencies)]

use std::collections::BTreeMap;

use opentelemetry_proto::tonic::collector::profiles::v1development::profiles_service_client::ProfilesServiceClient;
use serde_json::{Value, json};
use ui_api_tests::reads::{Reads, SECOND, Sent, input, now, send, token};
use ui_api_tests::requests::{PROFILE_TYPE, dictionary, profile, request};
use ui_api_tests::server::{Options, Server};
use ui_api_tests::trees::json_folded;

/// What each tenant sends: the same services and times, values and profile ids its own.
fn sent_by(tenant: usize, t0: u64) -> Vec<Sent> {
    input(t0)
        .into_iter()
        .filter(|p| tenant != 2 || p.service == "a")
        .map(|p| Sent {
            value: p.value * (tenant as i64 * 10 + 1) + tenant as i64,
            id: p.id | ((tenant as u128 + 1) << 120),
            ..p
        })
        .collect()
}

const TENANTS: [&str; 3] = ["team-a", "team-b", "team-c"];

/// Per (service, tenant): the total sent.
fn totals_by_service_and_tenant(sent: &[Vec<Sent>], tenants: &[usize]) -> BTreeMap<String, i64> {
    let mut out = BTreeMap::new();
    for &t in tenants {
        for p in &sent[t] {
            *out.entry(format!("service.name={},__tenant_id__={}", p.service, TENANTS[t]))
                .or_insert(0) += p.value;
        }
    }
    out
}

fn range(t0: u64) -> [(&'static str, String); 3] {
    [
        ("profile_type", PROFILE_TYPE.to_string()),
        ("from", (t0 - 60 * SECOND).to_string()),
        ("to", (t0 + 60 * SECOND).to_string()),
    ]
}

#[tokio::test(flavor = "multi_thread")]
async fn a_read_over_several_tenants_answers_their_sum_with_a_tenant_label() {
    let server = Server::start(Options::default()).await;
    let t0 = (now() / SECOND - 600) * SECOND;
    let sent: Vec<Vec<Sent>> = (0..3).map(|t| sent_by(t, t0)).collect();
    for (t, tenant) in TENANTS.iter().enumerate() {
        send(&server, tenant, &sent[t]).await;
    }

    // Every read path of the union equals the union of what the two tenants were sent.
    let ab: Vec<&Sent> = sent[0].iter().chain(&sent[1]).collect();
    Reads::new(&server, "team-a|team-b", t0)
        .check(&ab, "team-a|team-b")
        .await;
    let abc: Vec<&Sent> = sent.iter().flatten().collect();
    Reads::new(&server, "team-c|team-a|team-b", t0)
        .check(&abc, "all three")
        .await;
    // A `__tenant_id__` matcher picks tenants out of the union.
    let reads = Reads::new(&server, "team-a|team-b|team-c", t0);
    let only_b: Vec<&Sent> = sent[1].iter().collect();
    let (folded_b, _) = ui_api_tests::reads::expected(&only_b);
    assert_eq!(
        reads
            .api
            .folded(PROFILE_TYPE, r#"{__tenant_id__="team-b"}"#, reads.from, reads.to)
            .await,
        folded_b,
        "__tenant_id__ selects one tenant"
    );
    let a_of_ac: Vec<&Sent> = sent[0]
        .iter()
        .chain(&sent[2])
        .filter(|p| p.service == "a")
        .collect();
    assert_eq!(
        reads
            .api
            .folded(
                PROFILE_TYPE,
                r#"{__tenant_id__!="team-b", service.name="a"}"#,
                reads.from,
                reads.to
            )
            .await,
        ui_api_tests::reads::expected(&a_of_ac).0,
        "__tenant_id__ and a series label together"
    );

    // Grouped by service and tenant: six groups over the same six series ids.
    let expected = totals_by_service_and_tenant(&sent, &[0, 1, 2]);
    let mut query = range(t0).to_vec();
    query.push(("group_by", "service.name,__tenant_id__".into()));
    let (status, flame) = reads.api.get_json("/api/v1/flamegraph", &query).await;
    assert_eq!(status, 200, "{flame}");
    let groups: BTreeMap<String, i64> = flame["root"]["children"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| {
            (
                g["name"].as_str().unwrap().to_string(),
                g["total"].as_i64().unwrap(),
            )
        })
        .collect();
    assert_eq!(groups, expected, "flame graph grouped by service and tenant");
    let group_b_a = flame["root"]["children"]
        .as_array()
        .unwrap()
        .iter()
        .find(|g| g["name"] == "service.name=a,__tenant_id__=team-b")
        .unwrap();
    let b_a: Vec<&Sent> = sent[1].iter().filter(|p| p.service == "a").collect();
    assert_eq!(
        json_folded(group_b_a),
        ui_api_tests::reads::expected(&b_a).0,
        "the paths of one group"
    );
    query.push(("step", "1s".into()));
    let (status, series) = reads.api.get_json("/api/v1/timeseries", &query).await;
    assert_eq!(status, 200, "{series}");
    let totals: BTreeMap<String, i64> = series["series"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            let group = format!(
                "service.name={},__tenant_id__={}",
                s["group"]["service.name"].as_str().unwrap(),
                s["group"]["__tenant_id__"].as_str().unwrap()
            );
            (group, s["total"].as_i64().unwrap())
        })
        .collect();
    assert_eq!(totals, expected, "time series grouped by service and tenant");
    // Top functions of the union: `foo` is in every stack, `bar` in stack 2 only.
    let (status, top) = reads.api.get_json("/api/v1/top", &range(t0)).await;
    assert_eq!(status, 200, "{top}");
    let total_of = |f: &dyn Fn(&Sent) -> bool| abc.iter().filter(|p| f(p)).map(|p| p.value).sum::<i64>();
    let row = |name: &str| {
        top["functions"]
            .as_array()
            .unwrap_or_else(|| panic!("{top}"))
            .iter()
            .find(|f| f["name"] == name)
            .unwrap_or_else(|| panic!("{name} in {top}"))
            .clone()
    };
    assert_eq!(row("foo")["total"].as_i64(), Some(total_of(&|_| true)), "{top}");
    assert_eq!(
        row("bar")["self"].as_i64(),
        Some(total_of(&|p| p.stack == 2)),
        "{top}"
    );

    // A diff of two tenants: each side holds what its tenant was sent.
    let (from, to) = (range(t0)[1].1.clone(), range(t0)[2].1.clone());
    let (status, diff) = reads
        .api
        .get_json(
            "/api/v1/diff",
            &[
                ("profile_type", PROFILE_TYPE.into()),
                ("baseline_selector", r#"{__tenant_id__="team-a"}"#.into()),
                ("baseline_from", from.clone()),
                ("baseline_to", to.clone()),
                ("comparison_selector", r#"{__tenant_id__="team-b"}"#.into()),
                ("comparison_from", from),
                ("comparison_to", to),
            ],
        )
        .await;
    assert_eq!(status, 200, "{diff}");
    let sum = |t: usize| sent[t].iter().map(|p| p.value).sum::<i64>();
    assert_eq!(diff["baseline_total"].as_i64(), Some(sum(0)), "{diff}");
    assert_eq!(diff["comparison_total"].as_i64(), Some(sum(1)), "{diff}");

    // Listings: the union's labels and values, the tenant label among them.
    let (status, names) = reads.api.get_json("/api/v1/labels", &range(t0)[1..]).await;
    assert_eq!(status, 200, "{names}");
    assert!(
        names["names"]
            .as_array()
            .unwrap()
            .contains(&json!("__tenant_id__")),
        "{names}"
    );
    let (_, tenants) = reads
        .api
        .get_json("/api/v1/labels/__tenant_id__/values", &range(t0)[1..])
        .await;
    assert_eq!(tenants["values"], json!(TENANTS), "{tenants}");
    let union_bc = Reads::new(&server, "team-b|team-c", t0);
    let (_, services) = union_bc
        .api
        .get_json("/api/v1/labels/service.name/values", &range(t0)[1..])
        .await;
    assert_eq!(services["values"], json!(["a", "b", "c"]), "{services}");
    // Grafana's label values over Connect.
    let values = server
        .client()
        .post(format!("{}/querier.v1.QuerierService/LabelValues", server.http()))
        .header("X-Scope-OrgID", "team-b|team-c")
        .json(&json!({
            "name": "__tenant_id__",
            "start": ((t0 - 60 * SECOND) / 1_000_000).to_string(),
            "end": ((t0 + 60 * SECOND) / 1_000_000).to_string(),
        }))
        .send()
        .await
        .unwrap();
    let values: Value = values.json().await.unwrap();
    assert_eq!(values["names"], json!(["team-b", "team-c"]), "{values}");

    // A profile id is found in whichever tenant of the union holds it.
    let of_c = sent[2][3];
    assert_eq!(union_bc.profile(&of_c).await, Some(of_c.value));
    assert_eq!(reads.profile(&sent[1][0]).await, Some(sent[1][0].value));
    let only_a = Reads::new(&server, "team-a", t0);
    assert_eq!(only_a.profile(&of_c).await, None, "not a tenant's own");

    // A write names one tenant: OTLP over gRPC and HTTP alike.
    let mut client = ProfilesServiceClient::connect(server.grpc()).await.unwrap();
    let mut r = tonic::Request::new(request("a", vec![profile(t0, 1, 5)], dictionary()));
    r.metadata_mut()
        .insert("x-scope-orgid", "team-a|team-b".parse().unwrap());
    let refused = client.export(r).await.expect_err("a write to two tenants");
    assert_eq!(refused.code(), tonic::Code::InvalidArgument, "{refused:?}");
    assert!(refused.message().contains("several tenants"), "{refused:?}");
    let ingest = server
        .client()
        .post(format!("{}/ingest?name=app.cpu&from=1&until=2", server.http()))
        .header("X-Scope-OrgID", "team-a|team-b")
        .body("main;foo 1")
        .send()
        .await
        .unwrap();
    assert_eq!(ingest.status(), 400);
    assert!(ingest.text().await.unwrap().contains("several tenants"));
    // Nothing of the refused writes arrived.
    Reads::new(&server, "team-a|team-b", t0)
        .check(&ab, "after refused writes")
        .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_token_reads_only_the_tenants_it_was_granted() {
    let server = Server::start(Options {
        extra_args: vec!["--auth".into(), "required".into()],
        ..Options::default()
    })
    .await;
    let t0 = (now() / SECOND - 600) * SECOND;
    let sent: Vec<Vec<Sent>> = (0..3).map(|t| sent_by(t, t0)).collect();
    let writers: Vec<String> = TENANTS.iter().map(|t| token(&server, &["--tenant", t])).collect();
    let mut client = ProfilesServiceClient::connect(server.grpc()).await.unwrap();
    for (t, p) in sent
        .iter()
        .enumerate()
        .flat_map(|(t, s)| s.iter().map(move |p| (t, p)))
    {
        let mut prof = profile(p.time, p.stack, p.value);
        prof.profile_id = p.id.to_be_bytes().to_vec();
        let mut r = tonic::Request::new(request(p.service, vec![prof], dictionary()));
        r.metadata_mut()
            .insert("authorization", format!("Bearer {}", writers[t]).parse().unwrap());
        client.export(r).await.expect("accepted");
    }
    let reader = token(&server, &["--tenant", "team-a", "--read", "team-b"]);
    let get = |tenant: &str, path: &str, token: &str| {
        server
            .client()
            .get(format!("{}{path}", server.http()))
            .header("X-Scope-OrgID", tenant)
            .bearer_auth(token)
            .query(&range(t0))
            .send()
    };
    // Granted: the union's total is the sum of both tenants'.
    let resp = get("team-a|team-b", "/api/v1/flamegraph", &reader).await.unwrap();
    assert_eq!(resp.status(), 200);
    let flame: Value = resp.json().await.unwrap();
    let total: i64 = sent[0].iter().chain(&sent[1]).map(|p| p.value).sum();
    assert_eq!(flame["total"].as_i64(), Some(total), "{flame}");
    let resp = get("team-b", "/api/v1/flamegraph", &reader).await.unwrap();
    assert_eq!(resp.status(), 200, "a granted tenant alone");
    // Not granted: 403 naming the tenant refused.
    for named in ["team-a|team-c", "team-c"] {
        let resp = get(named, "/api/v1/flamegraph", &reader).await.unwrap();
        assert_eq!(resp.status(), 403, "{named}");
        let body: Value = resp.json().await.unwrap();
        assert_eq!(
            body["error"], "the token is not valid for tenant \"team-c\"",
            "{named}"
        );
    }
    // Connect (Grafana's datasource) alike.
    let connect = |tenant: &str| {
        server
            .client()
            .post(format!(
                "{}/querier.v1.QuerierService/SelectMergeStacktraces",
                server.http()
            ))
            .header("X-Scope-OrgID", tenant)
            .bearer_auth(&reader)
            .json(&json!({
                "profileTypeID": PROFILE_TYPE,
                "labelSelector": "{}",
                "start": ((t0 - 60 * SECOND) / 1_000_000).to_string(),
                "end": ((t0 + 60 * SECOND) / 1_000_000).to_string(),
            }))
            .send()
    };
    let merged: Value = connect("team-a|team-b").await.unwrap().json().await.unwrap();
    assert_eq!(
        ui_api_tests::connect_client::int(&merged["flamegraph"]["total"]),
        total,
        "{merged}"
    );
    let refused = connect("team-b|team-c").await.unwrap();
    assert_eq!(refused.status(), 403);
    assert!(refused.text().await.unwrap().contains("team-c"));
    // A read grant is not a write grant: sending to team-b with team-a's token is refused.
    let mut r = tonic::Request::new(request("a", vec![profile(t0, 1, 5)], dictionary()));
    r.metadata_mut()
        .insert("authorization", format!("Bearer {reader}").parse().unwrap());
    r.metadata_mut()
        .insert("x-scope-orgid", "team-b".parse().unwrap());
    let refused = client.export(r).await.expect_err("a write to a read-only tenant");
    assert_eq!(refused.code(), tonic::Code::PermissionDenied, "{refused:?}");
    let refused = server
        .client()
        .post(format!("{}/ingest?name=app.cpu&from=1&until=2", server.http()))
        .header("X-Scope-OrgID", "team-b")
        .bearer_auth(&reader)
        .body("main;foo 1")
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status(), 403);

    // Every admin endpoint refuses a token without the admin role, and an admin token
    // administers only its own tenant, not one it may read.
    let admin = token(&server, &["--tenant", "team-a", "--admin", "--read", "team-b"]);
    let body = json!({"selector": "{}", "from": "now-1h", "to": "now"});
    let calls = [
        (reqwest::Method::GET, "/api/v1/admin/deletes", None),
        (reqwest::Method::POST, "/api/v1/admin/deletes", Some(body)),
        (reqwest::Method::GET, "/api/v1/admin/deletes/x", None),
        (reqwest::Method::DELETE, "/api/v1/admin/deletes/x", None),
        (reqwest::Method::GET, "/api/v1/admin/tenants/team-a", None),
        (reqwest::Method::DELETE, "/api/v1/admin/tenants/team-a", None),
    ];
    for (tenant, token) in [("team-a", &reader), ("team-b", &admin)] {
        for (method, path, body) in &calls {
            let path = path.replace("team-a", tenant);
            let mut req = server
                .client()
                .request(method.clone(), format!("{}{path}", server.http()))
                .header("X-Scope-OrgID", tenant)
                .bearer_auth(token);
            if let Some(body) = body {
                req = req.json(body);
            }
            let resp = req.send().await.unwrap();
            assert_eq!(resp.status(), 403, "{method} {path} as {tenant}");
        }
    }
    // Nothing was deleted: the union still answers in full.
    let resp = get("team-a|team-b", "/api/v1/flamegraph", &admin).await.unwrap();
    let flame: Value = resp.json().await.unwrap();
    assert_eq!(flame["total"].as_i64(), Some(total), "{flame}");
}
