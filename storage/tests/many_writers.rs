//! Several writers over one catalog and one store, as several ingesters are: the catalog's
//! commit is the arbiter, so a profile both receive is stored once and the series limit
//! holds across them. Against real Postgres (`STACKHOUSE_TEST_POSTGRES_URL`, default
//! `postgres://postgres@127.0.0.1:5432/postgres`), where commits really run at once; an
//! unreachable server fails the tests.

// One dependency list serves all of the package's tests, benches and binaries.
#![allow(unused_crate_dependencies)]

mod common;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use arrow::array::AsArray;
use arrow::datatypes::Int64Type;
use common::*;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use sqlx::{AssertSqlSafe, Connection, Executor, PgConnection};
use stackhouse_storage::catalog::{Catalog, TableKind, open_catalog};
use stackhouse_storage::model::{Batch, ProfileRecord, TimeRange};
use stackhouse_storage::store::Store;
use stackhouse_storage::symbols::SymbolCache;
use stackhouse_storage::writer::{RefusedSeries, Writer, WriterConfig};

const DEFAULT_POSTGRES_URL: &str = "postgres://postgres@127.0.0.1:5432/postgres";

/// A fresh database, dropped when the test is done with it.
struct Database {
    admin_url: String,
    name: String,
    url: String,
}

impl Database {
    async fn create() -> Database {
        let admin_url = std::env::var("STACKHOUSE_TEST_POSTGRES_URL")
            .unwrap_or_else(|_| DEFAULT_POSTGRES_URL.to_string());
        let mut admin = PgConnection::connect(&admin_url).await.unwrap_or_else(|e| {
            panic!(
                "postgres is unreachable at {admin_url}: {e}\n\
                 these tests need a postgres server (trust auth is enough); start one or point \
                 STACKHOUSE_TEST_POSTGRES_URL at it"
            )
        });
        let name = format!("stackhouse_test_{}", uuid::Uuid::now_v7().simple());
        admin
            .execute(AssertSqlSafe(format!("CREATE DATABASE {name}")))
            .await
            .unwrap();
        let mut url = url::Url::parse(&admin_url).unwrap();
        url.set_path(&name);
        Database {
            admin_url,
            name,
            url: url.to_string(),
        }
    }

    async fn drop_now(self) {
        let mut admin = PgConnection::connect(&self.admin_url).await.unwrap();
        admin
            .execute(AssertSqlSafe(format!("DROP DATABASE {} WITH (FORCE)", self.name)))
            .await
            .unwrap();
    }
}

/// One ingester: its own catalog pool and symbol cache, the shared store.
async fn ingester(store: &Store, url: &str) -> (Writer, Arc<dyn Catalog>) {
    let catalog = open_catalog(url).await.unwrap();
    let symbols = Arc::new(SymbolCache::new(store.clone(), catalog.clone()));
    let config = WriterConfig {
        flush_interval: Duration::from_millis(30),
        ..WriterConfig::default()
    };
    (
        Writer::start(store.clone(), catalog.clone(), symbols, config),
        catalog,
    )
}

/// Profile `n` of series "a": samples all carrying its id, values that differ per profile.
fn profile_batch(n: u8) -> Batch {
    let mut b = sample_batch("acme");
    let a = series("a").id;
    b.samples.retain(|s| s.series_id == a);
    b.series.retain(|id, _| *id == a);
    for (i, s) in b.samples.iter_mut().enumerate() {
        s.profile_id = Some([n; 16]);
        s.value = i64::from(n) * 100 + i as i64 + 1;
    }
    b.profiles = vec![ProfileRecord {
        profile_id: [n; 16],
        series_id: a,
        start_nanos: 50,
        end_nanos: 300,
        sample_count: b.samples.len() as i64,
        resource: Default::default(),
        attributes: Default::default(),
    }];
    b
}

/// Rows and the sum of `value` over every samples object the catalog lists for `tenant`.
async fn stored(store: &Store, catalog: &dyn Catalog, tenant: &str) -> (usize, i64) {
    let (mut rows, mut sum) = (0, 0);
    for segment in catalog.segments(tenant, TimeRange::ALL).await.unwrap() {
        let bytes = read_object(store, &segment, TableKind::Samples).await;
        for batch in ParquetRecordBatchReaderBuilder::try_new(bytes)
            .unwrap()
            .build()
            .unwrap()
        {
            let batch = batch.unwrap();
            let values = batch.column_by_name("value").unwrap().as_primitive::<Int64Type>();
            rows += values.len();
            sum += values.values().iter().sum::<i64>();
        }
    }
    (rows, sum)
}

fn samples_objects(dir: &std::path::Path) -> usize {
    let mut count = 0;
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = entry.path();
        if path.is_dir() {
            count += samples_objects(&path);
        } else if path.file_name().is_some_and(|n| n == "samples.parquet") {
            count += 1;
        }
    }
    count
}

/// Two ingesters receive each export at the same moment (a sender that timed out on one
/// and retried on the other): every profile is stored exactly once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_profile_two_ingesters_receive_is_stored_once() {
    let db = Database::create().await;
    let (_dir, store) = local_store();
    let (first, catalog) = ingester(&store, &db.url).await;
    let (second, _) = ingester(&store, &db.url).await;
    let (first, second) = (Arc::new(first), Arc::new(second));

    const PROFILES: u8 = 24;
    let (mut expected_rows, mut expected_sum) = (0, 0);
    let mut tasks = Vec::new();
    for n in 1..=PROFILES {
        let batch = profile_batch(n);
        expected_rows += batch.samples.len();
        expected_sum += batch.samples.iter().map(|s| s.value).sum::<i64>();
        for writer in [&first, &second] {
            let writer = writer.clone();
            let batch = batch.clone();
            tasks.push(tokio::spawn(async move { writer.write(batch).await }));
        }
        // A few exports per flush, so both pre-checks and commits overlap.
        if n % 4 == 0 {
            tokio::time::sleep(Duration::from_millis(35)).await;
        }
    }
    for task in tasks {
        let receipt = task.await.unwrap().expect("every write is acknowledged");
        assert!(receipt.refused.is_empty());
    }
    first.shutdown().await;
    second.shutdown().await;

    assert_eq!(
        stored(&store, catalog.as_ref(), "acme").await,
        (expected_rows, expected_sum),
        "each profile's samples stored once"
    );
    for n in 1..=PROFILES {
        assert_eq!(
            catalog.profile("acme", [n; 16]).await.unwrap().len(),
            1,
            "profile {n}"
        );
    }
    // Samples objects no segment names are what commits the catalog refused wrote.
    let written = samples_objects(&_dir.path().join("objects"));
    let committed = catalog.segments("acme", TimeRange::ALL).await.unwrap().len();
    eprintln!("{written} samples objects written, {committed} committed");
    drop(catalog);
    db.drop_now().await;
}

/// Limit 2 with one series stored by another ingester this one never heard of: of a
/// request with two new series only the lower id is stored, and the request learns which
/// series and how many samples and profiles of it were refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_series_limit_holds_across_ingesters() {
    let db = Database::create().await;
    let (_dir, store) = local_store();
    let (other, _) = ingester(&store, &db.url).await;
    let (this, catalog) = ingester(&store, &db.url).await;
    let mut elsewhere = sample_batch("acme");
    let x = series("x");
    elsewhere.series = HashMap::from([(x.id, x.clone())]);
    for s in &mut elsewhere.samples {
        s.series_id = x.id;
    }
    elsewhere.profiles.clear();
    other.write_within(elsewhere, 2).await.unwrap();

    let batch = sample_batch("acme");
    let (a, z) = (series("a").id, series("b").id);
    let (admitted, refused) = (a.min(z), a.max(z));
    let refused_samples = batch.samples.iter().filter(|s| s.series_id == refused).count();
    let refused_values: i64 = batch
        .samples
        .iter()
        .filter(|s| s.series_id == refused)
        .map(|s| s.value)
        .sum();
    // The refused series' profiles: its samples carry no profile id, so one profile, unless
    // it is the series with the PROFILE record.
    let refused_profiles = if refused == a { 2 } else { 1 };
    let total_values: i64 = batch.samples.iter().map(|s| s.value).sum();
    let receipt = this.write_within(batch, 2).await.unwrap();
    assert_eq!(
        receipt.refused,
        RefusedSeries {
            series: vec![refused],
            samples: refused_samples,
            profiles: refused_profiles,
        }
    );
    let mut ids: Vec<i64> = catalog
        .series("acme", TimeRange::ALL)
        .await
        .unwrap()
        .iter()
        .map(|s| s.id)
        .collect();
    ids.sort();
    let mut expected_ids = vec![x.id, admitted];
    expected_ids.sort();
    assert_eq!(ids, expected_ids);
    // What is stored: the other ingester's four samples and this request's admitted ones.
    let elsewhere_values: i64 = sample_batch("acme").samples.iter().map(|s| s.value).sum();
    assert_eq!(
        stored(&store, catalog.as_ref(), "acme").await,
        (
            4 + 4 - refused_samples,
            elsewhere_values + total_values - refused_values
        )
    );
    other.shutdown().await;
    this.shutdown().await;
    drop(catalog);
    db.drop_now().await;
}
