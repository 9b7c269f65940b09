//! The purge of deletion requests (issue 52), end to end through the real binary. Two
//! days of three services are compacted into hour blocks with their rollups, and raw
//! retention then leaves only rollups of the first ten. Three requests delete a whole
//! service, part of one across raw hours, and two rollup-only hours of another. Once their
//! cancel period is over the compactor purges them, killed with SIGKILL three times while
//! it does. Then every Parquet object in the store, read with DuckDB, holds exactly the
//! input minus what was deleted (samples, and both rollup tiers summed by the test from the
//! input), the catalog forgets the deleted profiles, stored bytes drop, and the answers are
//! the input minus the deleted part. New ingest, compaction and restarts bring nothing back.

// One dependency list serves all of the package's tests, benches and binaries.
#![allow(unused_crate_dependencies)]

use std::collections::{BTreeMap, BTreeSet};
use std::process::Command;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use opentelemetry_proto::tonic::collector::profiles::v1development::profiles_service_client::ProfilesServiceClient;
use rand::Rng;
use serde_json::{Value, json};
use ui_api_tests::client::Api;
use ui_api_tests::requests::{PROFILE_TYPE, dictionary, profile, request};
use ui_api_tests::server::{Options, Server};

const SEC: i64 = 1_000_000_000;
const MIN: i64 = 60 * SEC;
const HOUR: i64 = 60 * MIN;
const DAY: i64 = 24 * HOUR;
const HOURS: i64 = 48;
/// Hours whose samples raw retention removes, leaving their rollups.
const ROLLUP_ONLY_HOURS: i64 = 10;
const SERVICES: [&str; 3] = ["a", "b", "c"];
const TENANT: &str = "team-a";

/// One profile of one sample.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Sent {
    service: usize,
    time: i64,
    stack: i32,
    value: i64,
    id: u128,
}

/// Four profiles five seconds apart in the second minute of each hour, per service; every
/// value tells its service, hour and profile apart.
fn input(base: i64) -> Vec<Sent> {
    let mut out = Vec::new();
    for h in 0..HOURS {
        for service in 0..SERVICES.len() {
            for i in 0..4 {
                out.push(Sent {
                    service,
                    time: base + h * HOUR + MIN + i * 5 * SEC,
                    stack: 1 + (i % 2) as i32,
                    value: 1000 * (service as i64 + 1) + 10 * h + i,
                    id: (service as u128 + 1) << 64 | (h as u128) << 8 | i as u128,
                });
            }
        }
    }
    out
}

/// A deletion: its selector's service and range.
struct Deletion {
    service: usize,
    from: i64,
    to: i64,
}

impl Deletion {
    fn removes(&self, p: &Sent) -> bool {
        p.service == self.service && self.from <= p.time && p.time < self.to
    }
}

async fn send(server: &Server, profiles: &[Sent]) {
    let mut client = ProfilesServiceClient::connect(server.grpc()).await.unwrap();
    // One export per hour and service: each acknowledgement is a committed segment, so the
    // store ends with one hour block per hour.
    let mut groups: BTreeMap<(i64, usize), Vec<&Sent>> = BTreeMap::new();
    for p in profiles {
        groups.entry((p.time / HOUR, p.service)).or_default().push(p);
    }
    for ((_, service), group) in groups {
        let profiles = group
            .iter()
            .map(|p| {
                let mut prof = profile(p.time as u64, p.stack, p.value);
                prof.profile_id = p.id.to_be_bytes().to_vec();
                prof
            })
            .collect();
        let mut r = tonic::Request::new(request(SERVICES[service], profiles, dictionary()));
        r.metadata_mut().insert("x-scope-orgid", TENANT.parse().unwrap());
        let answer = client.export(r).await.expect("accepted").into_inner();
        assert!(answer.partial_success.is_none_or(|p| p.rejected_profiles == 0));
    }
}

/// What the store must hold of `kept`: sample rows (time, value) where raw samples remain,
/// rollup cells (bucket, sum) per service and stack for each tier, and their totals (bucket,
/// sum) per service.
#[derive(Debug, PartialEq, Eq)]
struct Rows {
    samples: Vec<(i64, i64)>,
    rollup_1m: Vec<(i64, i64)>,
    rollup_1h: Vec<(i64, i64)>,
    rollup_1d: Vec<(i64, i64)>,
    totals_1m: Vec<(i64, i64)>,
    totals_1h: Vec<(i64, i64)>,
    totals_1d: Vec<(i64, i64)>,
}

impl Rows {
    /// The UTC days that day segments hold: which closed days compaction has summed depends
    /// on the clock (a day whose blocks straddle the raw retention cutoff waits), so the
    /// expected day cells are those of the days stored, each summed from the input.
    fn days(&self) -> BTreeSet<i64> {
        self.rollup_1d.iter().map(|(t, _)| *t).collect()
    }
}

/// What the store must hold of `kept`, with the day segments' cells for the UTC days in
/// `days`: their day rollup and totals, and their hour totals beside the blocks' own.
fn expected_rows(kept: &[&Sent], raw_from: i64, days: &BTreeSet<i64>) -> Rows {
    // `by_stack` false sums a service's stacks together, as the totals do; `summed` keeps
    // only the samples of the days in `days`.
    let cells = |step: i64, by_stack: bool, summed: bool| {
        let mut sums: BTreeMap<(usize, i64, i32), i64> = BTreeMap::new();
        for p in kept {
            if summed && !days.contains(&(p.time.div_euclid(DAY) * DAY)) {
                continue;
            }
            let stack = if by_stack { p.stack } else { 0 };
            *sums
                .entry((p.service, p.time.div_euclid(step) * step, stack))
                .or_insert(0) += p.value;
        }
        let mut cells: Vec<(i64, i64)> = sums.into_iter().map(|((_, t, _), v)| (t, v)).collect();
        cells.sort_unstable();
        cells
    };
    let mut samples: Vec<(i64, i64)> = kept
        .iter()
        .filter(|p| p.time >= raw_from)
        .map(|p| (p.time, p.value))
        .collect();
    samples.sort_unstable();
    let mut totals_1h = cells(HOUR, false, false);
    totals_1h.extend(cells(HOUR, false, true));
    totals_1h.sort_unstable();
    Rows {
        samples,
        rollup_1m: cells(MIN, true, false),
        rollup_1h: cells(HOUR, true, false),
        rollup_1d: cells(DAY, true, true),
        totals_1m: cells(MIN, false, false),
        totals_1h,
        totals_1d: cells(DAY, false, true),
    }
}

/// Every segment object under the store, read with DuckDB.
fn stored_rows(server: &Server) -> (Rows, Value) {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/python/parquet_rows.py");
    let out = Command::new("python3")
        .arg(script)
        .arg(server.data_path().join("objects"))
        .output()
        .expect("python3 runs the DuckDB reader");
    assert!(
        out.status.success(),
        "the DuckDB reader failed (install it with: python3 -m pip install duckdb): {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let json: Value = serde_json::from_slice(&out.stdout).unwrap();
    let rows = |kind: &str| {
        let mut rows: Vec<(i64, i64)> = json[kind]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| (r[1].as_i64().unwrap(), r[2].as_i64().unwrap()))
            .collect();
        rows.sort_unstable();
        rows
    };
    let stored = Rows {
        samples: rows("samples"),
        rollup_1m: rows("rollup_1m"),
        rollup_1h: rows("rollup_1h"),
        rollup_1d: rows("rollup_1d"),
        totals_1m: rows("totals_1m"),
        totals_1h: rows("totals_1h"),
        totals_1d: rows("totals_1d"),
    };
    (stored, json["files"].clone())
}

/// [`stored_rows`] once they equal what the store must hold of `kept` (returned second),
/// or after a minute. Replaced objects go after the deletion grace, orphans of killed passes
/// after theirs: until then the store may hold more than the catalog lists.
async fn settled_rows(server: &Server, kept: &[&Sent], raw_from: i64) -> (Rows, Rows, Value) {
    let started = Instant::now();
    loop {
        let (stored, files) = stored_rows(server);
        let want = expected_rows(kept, raw_from, &stored.days());
        if stored == want || started.elapsed() > Duration::from_secs(60) {
            return (stored, want, files);
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// Profiles the catalog still lists, read from its SQLite file by Python's own sqlite3.
fn catalog_profiles(server: &Server) -> i64 {
    let out = Command::new("python3")
        .arg("-c")
        .arg("import sqlite3, sys; print(sqlite3.connect(sys.argv[1]).execute('SELECT COUNT(*) FROM profiles').fetchone()[0])")
        .arg(server.data_path().join("catalog.db"))
        .output()
        .expect("python3 reads the catalog");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap().trim().parse().unwrap()
}

/// The flame graph total and the per-hour time series of `[from, to)`.
async fn answers(api: &Api, from: i64, to: i64) -> (i64, BTreeMap<i64, i64>) {
    let json = api.flamegraph(PROFILE_TYPE, "{}", from, to, None).await;
    let total = json["total"].as_i64().unwrap();
    let (status, series) = api
        .get_json(
            "/api/v1/timeseries",
            &[
                ("profile_type", PROFILE_TYPE.into()),
                ("from", from.to_string()),
                ("to", to.to_string()),
                ("step", "1h".into()),
            ],
        )
        .await;
    assert_eq!(status, 200, "{series}");
    let mut points = BTreeMap::new();
    for s in series["series"].as_array().unwrap() {
        for p in s["points"].as_array().unwrap() {
            let v = p[1].as_f64().unwrap() as i64;
            if v != 0 {
                *points.entry(p[0].as_i64().unwrap()).or_insert(0) += v;
            }
        }
    }
    (total, points)
}

fn expected_answers(kept: &[&Sent]) -> (i64, BTreeMap<i64, i64>) {
    let mut per_hour = BTreeMap::new();
    for p in kept {
        *per_hour.entry(p.time.div_euclid(HOUR) * HOUR).or_insert(0) += p.value;
    }
    (kept.iter().map(|p| p.value).sum(), per_hour)
}

async fn states(server: &Server) -> Vec<String> {
    let resp = server
        .client()
        .get(format!("{}/api/v1/admin/deletes", server.http()))
        .header("X-Scope-OrgID", TENANT)
        .send()
        .await;
    let Ok(resp) = resp else {
        return Vec::new();
    };
    let body: Value = resp.json().await.unwrap_or(Value::Null);
    body["requests"]
        .as_array()
        .map(|r| {
            r.iter()
                .map(|r| r["state"].as_str().unwrap().to_string())
                .collect()
        })
        .unwrap_or_default()
}

async fn wait_for(what: &str, timeout: Duration, mut done: impl AsyncFnMut() -> bool) {
    let start = Instant::now();
    while !done().await {
        assert!(start.elapsed() < timeout, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

fn now() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_nanos() as i64
}

fn flags(retention: &str) -> Vec<String> {
    [
        "--deletion-cancel-period",
        "3s",
        "--compaction-interval",
        "1s",
        "--compaction-l0-age",
        "1s",
        "--compaction-settle",
        "1s",
        "--retention-interval",
        "1s",
        "--deletion-grace",
        "1s",
        "--cleanup-interval",
        "1s",
        "--orphan-interval",
        "1s",
        "--orphan-grace",
        "5s",
        "--retention",
        retention,
    ]
    .into_iter()
    .map(String::from)
    .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_purge_leaves_no_deleted_sample_in_any_object_and_survives_sigkill() {
    let base = now().div_euclid(HOUR) * HOUR - HOURS * HOUR;
    let mut server = Server::start(Options {
        extra_args: flags("0"),
        ..Options::default()
    })
    .await;
    let api = Api::new(server.http()).with_tenant(TENANT);
    let sent = input(base);
    send(&server, &sent).await;
    // Yesterday lies wholly in the 48 hours sent, so at least one closed day is summed.
    wait_for(
        "an hour block with rollups per hour and a day segment",
        Duration::from_secs(120),
        async || {
            let stats = api.stats().await;
            let days = stats["tables"]["rollup_1d"]["objects"].as_i64().unwrap_or(0);
            days >= 1 && stats["segments"] == HOURS + days && stats["tables"]["rollup_1h"]["objects"] == HOURS
        },
    )
    .await;
    let all: Vec<&Sent> = sent.iter().collect();
    let (stored, want, files) = settled_rows(&server, &all, base).await;
    assert!(!stored.days().is_empty(), "no day segment stored ({files})");
    assert_eq!(
        stored.rollup_1d, want.rollup_1d,
        "day rollups before retention ({files})"
    );
    assert_eq!(
        stored.totals_1d, want.totals_1d,
        "day totals before retention ({files})"
    );

    // Raw retention from the middle of hour 9: hours 0-9 keep only their rollups.
    let raw_from = base + (ROLLUP_ONLY_HOURS - 1) * HOUR + 30 * MIN;
    let retention = (now() - raw_from) / SEC;
    server.set_extra_args(flags(&format!("{retention}s")));
    server.restart().await;
    let api = Api::new(server.http()).with_tenant(TENANT);
    wait_for("raw retention", Duration::from_secs(60), async || {
        api.stats().await["tables"]["samples"]["objects"] == HOURS - ROLLUP_ONLY_HOURS
    })
    .await;
    let (from, to) = (base, now());
    assert_eq!(
        answers(&api, from, to).await,
        expected_answers(&all),
        "before deleting"
    );

    let admin = |body: Value| {
        let client = server.client();
        let url = format!("{}/api/v1/admin/deletes", server.http());
        async move {
            let resp = client
                .post(url)
                .header("X-Scope-OrgID", TENANT)
                .json(&body)
                .send()
                .await
                .unwrap();
            let status = resp.status().as_u16();
            (status, resp.json::<Value>().await.unwrap())
        }
    };
    // An edge inside an hour that has only rollups cannot be honoured exactly.
    let (status, refused) = admin(json!({"selector": "{service.name=\"c\"}",
        "from": (base + 3 * HOUR + MIN + 10 * SEC).to_string(), "to": (base + 5 * HOUR).to_string()}))
    .await;
    assert_eq!(status, 400, "{refused}");
    assert!(
        refused["error"]
            .as_str()
            .unwrap()
            .contains("raw retention kept only rollups"),
        "{refused}"
    );
    let deletions = [
        // All of a.
        Deletion {
            service: 0,
            from: base - HOUR,
            to: now(),
        },
        // b from the third profile of hour 25 to the end of hour 34: raw samples.
        Deletion {
            service: 1,
            from: base + 25 * HOUR + MIN + 10 * SEC,
            to: base + 35 * HOUR,
        },
        // c in hours 2 and 3: rollups only.
        Deletion {
            service: 2,
            from: base + 2 * HOUR,
            to: base + 4 * HOUR,
        },
    ];
    for d in &deletions {
        let selector = format!("{{service.name=\"{}\"}}", SERVICES[d.service]);
        let (status, made) = admin(json!({"selector": selector,
            "from": d.from.to_string(), "to": d.to.to_string()}))
        .await;
        assert_eq!(status, 201, "{made}");
    }
    let kept: Vec<&Sent> = sent
        .iter()
        .filter(|p| !deletions.iter().any(|d| d.removes(p)))
        .collect();
    // All 192 of a; b: 2 of hour 25 and 4 in each of hours 26-34; c: 4 in each of hours 2-3.
    assert_eq!(
        sent.len() - kept.len(),
        4 * HOURS as usize + 2 + 36 + 8,
        "what the deletions match"
    );
    assert_eq!(answers(&api, from, to).await, expected_answers(&kept), "hidden");
    let bytes_before = api.stats().await["tables"]["samples"]["bytes"].as_i64().unwrap();

    // The purge begins once the cancel period is over; it is killed three times midway.
    let mut kills = 0;
    let started = Instant::now();
    while kills < 3 {
        assert!(started.elapsed() < Duration::from_secs(120), "no purge to kill");
        let states = states(&server).await;
        if states.iter().all(|s| s == "purged") && !states.is_empty() {
            panic!("the purge finished before it was killed three times ({kills} kills)");
        }
        if states.iter().any(|s| s == "purging") {
            let pause = rand::rng().random_range(0..60);
            tokio::time::sleep(Duration::from_millis(pause)).await;
            server.restart().await;
            kills += 1;
            continue;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    wait_for("every request purged", Duration::from_secs(120), async || {
        states(&server).await == ["purged"; 3]
    })
    .await;

    let (stored, want, files) = settled_rows(&server, &kept, raw_from).await;
    for p in sent.iter().filter(|p| deletions.iter().any(|d| d.removes(p))) {
        assert!(
            !stored.samples.contains(&(p.time, p.value)),
            "a deleted sample is still stored: {p:?}"
        );
    }
    assert_eq!(stored.samples, want.samples, "samples objects ({files})");
    assert_eq!(stored.rollup_1m, want.rollup_1m, "minute rollups ({files})");
    assert_eq!(stored.rollup_1h, want.rollup_1h, "hour rollups ({files})");
    assert_eq!(stored.totals_1m, want.totals_1m, "minute totals ({files})");
    assert_eq!(stored.totals_1h, want.totals_1h, "hour totals ({files})");
    assert_eq!(stored.rollup_1d, want.rollup_1d, "day rollups ({files})");
    assert_eq!(stored.totals_1d, want.totals_1d, "day totals ({files})");
    let stats = api.stats().await;
    assert_eq!(
        stats["tables"]["samples"]["rows"].as_i64().unwrap(),
        want.samples.len() as i64
    );
    let bytes_after = stats["tables"]["samples"]["bytes"].as_i64().unwrap();
    assert!(
        bytes_after < bytes_before,
        "stored sample bytes {bytes_before} -> {bytes_after}"
    );
    // Profiles with raw samples left; those of the rollup-only hours went with their samples.
    assert_eq!(catalog_profiles(&server), want.samples.len() as i64);
    // Service a, deleted whole, has no series row left; b and c keep theirs.
    assert_eq!(stats["series"], 2, "{stats}");
    let (status, values) = api
        .get_json(
            "/api/v1/labels/service.name/values",
            &[("from", from.to_string()), ("to", to.to_string())],
        )
        .await;
    assert_eq!((status, &values["values"]), (200, &json!(["b", "c"])), "{values}");
    assert_eq!(
        server
            .metric("stackhouse_deletion_requests", &["state=\"purged\""])
            .await,
        3.0
    );
    assert_eq!(answers(&api, from, to).await, expected_answers(&kept), "purged");
    println!(
        "purged: {} of {} samples deleted, sample bytes {bytes_before} -> {bytes_after}, {kills} kills",
        sent.len() - kept.len(),
        sent.len()
    );

    // New data in a purged hour and for a new series, then compaction and a restart: the
    // new samples join what was kept, and nothing deleted returns.
    let new: Vec<Sent> = (0..4)
        .map(|i| Sent {
            service: 2,
            time: base + 30 * HOUR + 2 * MIN + i * SEC,
            stack: 1,
            value: 5000 + i,
            id: 9 << 64 | i as u128,
        })
        .collect();
    send(&server, &new).await;
    wait_for("hour 30 compacted again", Duration::from_secs(60), async || {
        let stats = api.stats().await;
        stats["segments"] == HOURS + stats["tables"]["rollup_1d"]["objects"].as_i64().unwrap_or(0)
    })
    .await;
    server.restart().await;
    let api = Api::new(server.http()).with_tenant(TENANT);
    let kept: Vec<&Sent> = kept.into_iter().chain(&new).collect();
    let (stored, want, files) = settled_rows(&server, &kept, raw_from).await;
    assert_eq!(stored.samples, want.samples, "samples after new ingest ({files})");
    assert_eq!(
        stored.rollup_1m, want.rollup_1m,
        "minute rollups after new ingest"
    );
    assert_eq!(stored.rollup_1h, want.rollup_1h, "hour rollups after new ingest");
    assert_eq!(stored.totals_1h, want.totals_1h, "hour totals after new ingest");
    assert_eq!(stored.rollup_1d, want.rollup_1d, "day rollups after new ingest");
    assert_eq!(
        answers(&api, from, to).await,
        expected_answers(&kept),
        "after new ingest"
    );
}
