//! Deletion requests over HTTP (issue 52): once a request is acknowledged, the flame graph,
//! the time series, Pyroscope's render, Connect's merge and the profile-id lookup answer the
//! input minus what it matches, computed here from the profiles sent; cancelling within
//! the period brings back exactly what it hid; past the period a cancel is a 409; only
//! admin tokens may make, list or cancel requests. Deleting a tenant empties its prefix in
//! the store and its rows in the catalog, and leaves another tenant's answers byte for
//! byte. The purge itself is `deletion_purge.rs`.

// One dependency list serves all of the package's tests, benches and binaries.
#![allow(unused_crate_dependencies)]

use std::collections::BTreeMap;
use std::process::Command;
use std::time::Duration;

use serde_json::json;
use ui_api_tests::reads::{Reads, SECOND, Sent, input, now, send, token};
use ui_api_tests::requests::PROFILE_TYPE;
use ui_api_tests::server::{Options, Server, binary};

#[tokio::test(flavor = "multi_thread")]
async fn a_deletion_hides_what_it_matches_from_every_read_until_cancelled() {
    let server = Server::start(Options {
        extra_args: vec!["--deletion-cancel-period".into(), "4s".into()],
        ..Options::default()
    })
    .await;
    let t0 = (now() / SECOND - 600) * SECOND;
    let sent = input(t0);
    send(&server, "team-a", &sent).await;
    // Another tenant with the same services: nothing of it is ever hidden.
    send(&server, "team-b", &sent).await;
    let reads = Reads::new(&server, "team-a", t0);
    let other = Reads::new(&server, "team-b", t0);
    let all: Vec<&Sent> = sent.iter().collect();
    reads.check(&all, "before any deletion").await;

    // Service a from its 4th to its 7th second.
    let (from, to) = (t0 + 3 * SECOND, t0 + 7 * SECOND);
    let (status, made) = reads.delete("{service.name=\"a\"}", from, to).await;
    assert_eq!(status, 201, "{made}");
    assert_eq!(made["state"], "pending");
    assert_eq!(made["matched_series"], 1);
    let hidden_a = |p: &&Sent| p.service == "a" && (from..to).contains(&p.time);
    assert_eq!(sent.iter().filter(hidden_a).count(), 4);
    let visible: Vec<&Sent> = sent.iter().filter(|p| !hidden_a(p)).collect();
    reads.check(&visible, "service a's 4 seconds deleted").await;
    other.check(&all, "the other tenant").await;
    for p in sent.iter().filter(|p| p.service == "a") {
        let want = (!hidden_a(&p)).then_some(p.value);
        assert_eq!(reads.profile(p).await, want, "profile lookup of {p:?}");
    }

    // A second request hides all of b; cancelled within its period, b is back exactly.
    let (status, b) = reads
        .delete("{service.name=\"b\"}", t0 - SECOND, t0 + 60 * SECOND)
        .await;
    assert_eq!(status, 201, "{b}");
    let without_b: Vec<&Sent> = visible.iter().copied().filter(|p| p.service != "b").collect();
    reads.check(&without_b, "b deleted too").await;
    let id_b = b["id"].as_str().unwrap();
    let (status, cancelled) = reads
        .admin(
            reqwest::Method::DELETE,
            &format!("/api/v1/admin/deletes/{id_b}"),
            None,
            None,
        )
        .await;
    assert_eq!(status, 200, "{cancelled}");
    assert_eq!(cancelled["state"], "cancelled");
    reads.check(&visible, "b's deletion cancelled").await;

    // Past its period a request cannot be cancelled, and stays in force.
    tokio::time::sleep(Duration::from_millis(4200)).await;
    let id_a = made["id"].as_str().unwrap();
    let (status, refused) = reads
        .admin(
            reqwest::Method::DELETE,
            &format!("/api/v1/admin/deletes/{id_a}"),
            None,
            None,
        )
        .await;
    assert_eq!(status, 409, "{refused}");
    assert!(
        refused["error"]
            .as_str()
            .unwrap()
            .contains("can no longer be cancelled"),
        "{refused}"
    );
    reads.check(&visible, "a's deletion past its period").await;
    let (status, listed) = reads
        .admin(reqwest::Method::GET, "/api/v1/admin/deletes", None, None)
        .await;
    assert_eq!(status, 200);
    let states: Vec<(&str, &str)> = listed["requests"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| (r["id"].as_str().unwrap(), r["state"].as_str().unwrap()))
        .collect();
    assert_eq!(states, [(id_a, "pending"), (id_b, "cancelled")]);
    let (status, _) = reads
        .admin(reqwest::Method::GET, "/api/v1/admin/deletes/0000", None, None)
        .await;
    assert_eq!(status, 404);

    // The deletion outlives a restart: it is in the catalog.
    let mut server = server;
    server.restart().await;
    let reads = Reads::new(&server, "team-a", t0);
    reads.check(&visible, "after a restart").await;
}

#[tokio::test(flavor = "multi_thread")]
async fn bad_deletions_are_refused_and_name_the_problem() {
    let server = Server::start(Options::default()).await;
    let t0 = (now() / SECOND - 600) * SECOND;
    send(&server, "team-a", &input(t0)).await;
    let reads = Reads::new(&server, "team-a", t0);
    let cases = [
        (
            json!({"selector": "{thread.name=\"t1\"}", "from": "now-1h", "to": "now"}),
            "is not a label of any series",
        ),
        (
            json!({"selector": "{service.name=}", "from": "now-1h", "to": "now"}),
            "selector",
        ),
        (
            json!({"selector": "{}", "from": "yesterday", "to": "now"}),
            "from: invalid time",
        ),
        (
            json!({"selector": "{}", "from": "now", "to": "now-1h"}),
            "must be before to",
        ),
        (json!({"selector": "{}", "from": "now-1h"}), "missing field `to`"),
        (
            json!({"selector": "{}", "from": "now-1h", "to": "now", "extra": 1}),
            "unknown field",
        ),
    ];
    for (body, says) in cases {
        let (status, answer) = reads
            .admin(
                reqwest::Method::POST,
                "/api/v1/admin/deletes",
                Some(body.clone()),
                None,
            )
            .await;
        assert_eq!(status, 400, "{body}: {answer}");
        let message = answer["error"].as_str().unwrap();
        assert!(message.contains(says), "{body}: {message}");
    }
    let (_, listed) = reads
        .admin(reqwest::Method::GET, "/api/v1/admin/deletes", None, None)
        .await;
    assert_eq!(listed["requests"], json!([]), "nothing refused was stored");
    let all: Vec<Sent> = input(t0);
    reads
        .check(&all.iter().collect::<Vec<_>>(), "after refused deletions")
        .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn only_admin_tokens_administer_deletions() {
    let server = Server::start(Options {
        extra_args: vec!["--auth".into(), "required".into()],
        ..Options::default()
    })
    .await;
    let plain = token(&server, &["--tenant", "team-a"]);
    let admin = token(&server, &["--tenant", "team-a", "--admin"]);
    let reads = Reads::new(&server, "team-a", now());
    let body = json!({"selector": "{}", "from": "now-1h", "to": "now"});
    let calls = [
        (reqwest::Method::GET, "/api/v1/admin/deletes", None),
        (reqwest::Method::POST, "/api/v1/admin/deletes", Some(body.clone())),
        (reqwest::Method::GET, "/api/v1/admin/deletes/x", None),
        (reqwest::Method::DELETE, "/api/v1/admin/deletes/x", None),
    ];
    for (method, path, body) in calls {
        let (status, answer) = reads.admin(method.clone(), path, body, Some(&plain)).await;
        assert_eq!(status, 403, "{method} {path}: {answer}");
        assert!(
            answer["error"].as_str().unwrap().contains("need an admin token"),
            "{answer}"
        );
    }
    let (status, made) = reads
        .admin(
            reqwest::Method::POST,
            "/api/v1/admin/deletes",
            Some(body),
            Some(&admin),
        )
        .await;
    assert_eq!(status, 201, "{made}");
    let (status, listed) = reads
        .admin(reqwest::Method::GET, "/api/v1/admin/deletes", None, Some(&admin))
        .await;
    assert_eq!(status, 200);
    assert_eq!(listed["requests"][0]["id"], made["id"]);
    // The command line reaches the same endpoints, with the same refusals.
    let cli = |token: &str, args: &[&str]| {
        Command::new(binary())
            .arg("delete")
            .args(["--url", &server.http(), "--tenant", "team-a", "--token", token])
            .args(args)
            .output()
            .expect("running stackhouse delete")
    };
    let made_by_cli = cli(
        &admin,
        &["create", "--selector", "{}", "--from", "now-2h", "--to", "now-1h"],
    );
    assert!(
        made_by_cli.status.success(),
        "{}",
        String::from_utf8_lossy(&made_by_cli.stderr)
    );
    let listing = cli(&admin, &["list"]);
    let listing = String::from_utf8(listing.stdout).unwrap();
    assert_eq!(
        listing.lines().filter(|l| l.contains("pending")).count(),
        2,
        "{listing}"
    );
    assert!(listing.contains(made["id"].as_str().unwrap()), "{listing}");
    let refused = cli(&plain, &["list"]);
    assert!(!refused.status.success());
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(
        stderr.contains("403") && stderr.contains("need an admin token"),
        "{stderr}"
    );
    // Without credentials: 401, as every read.
    let (status, _) = reads
        .admin(reqwest::Method::GET, "/api/v1/admin/deletes", None, None)
        .await;
    assert_eq!(status, 401);
}

/// The raw bytes of reads of `tenant`: another tenant's deletion must not change one.
async fn answer_bytes(server: &Server, tenant: &str, from: i64, to: i64) -> Vec<(String, Vec<u8>)> {
    let client = server.client();
    let mut out = Vec::new();
    for (path, params) in [
        (
            "/api/v1/flamegraph",
            vec![("profile_type", PROFILE_TYPE.to_string())],
        ),
        (
            "/api/v1/timeseries",
            vec![
                ("profile_type", PROFILE_TYPE.to_string()),
                ("step", "1s".to_string()),
                ("group_by", "service.name".to_string()),
            ],
        ),
        ("/api/v1/top", vec![("profile_type", PROFILE_TYPE.to_string())]),
        ("/api/v1/labels/service.name/values", vec![]),
        ("/api/v1/profile-types", vec![]),
    ] {
        let mut query = params;
        query.extend([("from", from.to_string()), ("to", to.to_string())]);
        let resp = client
            .get(format!("{}{path}", server.http()))
            .header("X-Scope-OrgID", tenant)
            .query(&query)
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), 200, "{path}");
        out.push((path.to_string(), resp.bytes().await.unwrap().to_vec()));
    }
    out
}

/// Rows of `tenant` in every catalog table that names tenants, read by Python's sqlite3;
/// but `symbol_epochs`, whose one row per tenant outlives it on purpose: a number and no
/// data, it refuses commits from writers that listed the deleted tenant's symbols.
fn catalog_rows_of(server: &Server, tenant: &str) -> BTreeMap<String, i64> {
    let script = r#"
import json, sqlite3, sys
db = sqlite3.connect(sys.argv[1])
out = {}
for (table,) in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'"):
    columns = [c[1] for c in db.execute(f"PRAGMA table_info({table})")]
    if "tenant" in columns and table != "symbol_epochs":
        out[table] = db.execute(f"SELECT COUNT(*) FROM {table} WHERE tenant = ?", (sys.argv[2],)).fetchone()[0]
out["leases"] = db.execute("SELECT COUNT(*) FROM leases WHERE name LIKE ?", ("%/" + sys.argv[2],)).fetchone()[0]
out["segment_objects"] = db.execute("SELECT COUNT(*) FROM segment_objects WHERE key LIKE ?", ("tenants/" + sys.argv[2] + "/%",)).fetchone()[0]
print(json.dumps(out))
"#;
    let out = Command::new("python3")
        .args(["-c", script])
        .arg(server.data_path().join("catalog.db"))
        .arg(tenant)
        .output()
        .expect("python3 reads the catalog");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap()
}

fn files_under(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut files = Vec::new();
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            files.extend(files_under(&path));
        } else {
            files.push(path);
        }
    }
    files
}

#[tokio::test(flavor = "multi_thread")]
async fn deleting_a_tenant_empties_its_prefix_and_catalog_and_leaves_the_others_byte_identical() {
    // No compaction: answers carry their scan's statistics, and a merge of the other
    // tenant's segments between the two reads would change those bytes.
    let server = Server::start(Options {
        extra_args: [
            "--deletion-grace",
            "1s",
            "--cleanup-interval",
            "1s",
            "--compaction-interval",
            "1h",
        ]
        .map(String::from)
        .to_vec(),
        ..Options::default()
    })
    .await;
    let t0 = (now() / SECOND - 600) * SECOND;
    let sent = input(t0);
    for tenant in ["team-a", "team-b"] {
        send(&server, tenant, &sent).await;
    }
    // Everything a tenant can own besides its data: a token, a setting, a debug file and a
    // deletion request.
    token(&server, &["--tenant", "team-a"]);
    let reads = Reads::new(&server, "team-a", t0);
    let client = server.client();
    let setting = client
        .post(format!("{}/settings.v1.SettingsService/Set", server.http()))
        .header("X-Scope-OrgID", "team-a")
        .json(&json!({"setting": {"name": "pluginSettings", "value": "{}"}}))
        .send()
        .await
        .unwrap();
    assert_eq!(setting.status(), 200, "{}", setting.text().await.unwrap());
    let dir = tempfile::tempdir().unwrap();
    let (program, debug) = ui_api_tests::native_program::build(dir.path());
    let build_id = ui_api_tests::native_program::build_id(&program);
    let upload = client
        .put(format!("{}/api/v1/debuginfo/{build_id}", server.http()))
        .header("X-Scope-OrgID", "team-a")
        .body(std::fs::read(&debug).unwrap())
        .send()
        .await
        .unwrap();
    assert_eq!(upload.status(), 201);
    let (status, _) = reads.delete("{service.name=\"c\"}", t0, t0 + SECOND).await;
    assert_eq!(status, 201);

    let (from, to) = (reads.from, reads.to);
    let before = answer_bytes(&server, "team-b", from, to).await;
    let path = "/api/v1/admin/tenants/team-a";
    let (status, summary) = reads.admin(reqwest::Method::GET, path, None, None).await;
    assert_eq!(status, 200, "{summary}");
    assert_eq!(
        (summary["tokens"].as_i64(), summary["debug_files"].as_i64()),
        (Some(1), Some(1)),
        "{summary}"
    );
    assert_eq!(summary["series"], 3, "{summary}");
    // Named in the path but asked as another tenant: refused.
    let other = Reads::new(&server, "team-b", t0);
    let (status, refused) = other.admin(reqwest::Method::DELETE, path, None, None).await;
    assert_eq!(status, 403, "{refused}");
    assert!(
        refused["error"]
            .as_str()
            .unwrap()
            .contains("cannot administer tenant \"team-a\""),
        "{refused}"
    );
    let (status, bad) = reads
        .admin(reqwest::Method::DELETE, "/api/v1/admin/tenants/a%2Fb", None, None)
        .await;
    assert_eq!(status, 400, "{bad}");

    // From the command line, which wants the tenant named twice.
    let cli = |confirm: &str| {
        Command::new(binary())
            .args(["delete", "--url", &server.http(), "--tenant", "team-a"])
            .args(["tenant", "--confirm", confirm])
            .output()
            .expect("running stackhouse delete tenant")
    };
    let refused = cli("team-b");
    assert!(!refused.status.success());
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(stderr.contains("nothing deleted"), "{stderr}");
    let deleted = cli("team-a");
    let stdout = String::from_utf8_lossy(&deleted.stdout);
    assert!(
        deleted.status.success(),
        "{stdout} {}",
        String::from_utf8_lossy(&deleted.stderr)
    );
    // Samples and symbol objects of three services, and the debug file.
    let objects: i64 = stdout
        .split("rows; ")
        .nth(1)
        .and_then(|rest| rest.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("an object count in {stdout:?}"));
    assert!(objects >= 3, "{stdout}");
    // The tenant holds nothing any more: no profile type to ask for.
    let (status, types) = reads.api.get_json("/api/v1/profile-types", &[]).await;
    assert_eq!((status, &types["profile_types"]), (200, &json!([])), "{types}");
    let (status, refused) = reads
        .api
        .get_json(
            "/api/v1/flamegraph",
            &[
                ("profile_type", PROFILE_TYPE.into()),
                ("from", from.to_string()),
                ("to", to.to_string()),
            ],
        )
        .await;
    assert_eq!(status, 400, "{refused}");
    assert!(
        refused["error"].as_str().unwrap().contains("stored types: none"),
        "{refused}"
    );
    // Objects go after the grace, and their queue rows once they are gone.
    let prefix = server.data_path().join("objects/tenants/team-a");
    let started = std::time::Instant::now();
    let rows = loop {
        let (files, rows) = (files_under(&prefix), catalog_rows_of(&server, "team-a"));
        if files.is_empty() && rows.values().all(|&n| n == 0) {
            break rows;
        }
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "the deleted tenant's objects {files:?} and catalog rows {rows:?} remain"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert!(
        rows.len() >= 15,
        "every table naming tenants is checked: {rows:?}"
    );
    let kept = catalog_rows_of(&server, "team-b");
    assert!(kept["segments"] > 0 && kept["series"] == 3, "{kept:?}");
    assert!(!files_under(&server.data_path().join("objects/tenants/team-b")).is_empty());
    assert_eq!(
        answer_bytes(&server, "team-b", from, to).await,
        before,
        "the other tenant's answers, byte for byte"
    );
    let (status, summary) = reads.admin(reqwest::Method::GET, path, None, None).await;
    assert_eq!(status, 200);
    assert_eq!(
        (summary["segments"].as_i64(), summary["tokens"].as_i64()),
        (Some(0), Some(0))
    );
}
