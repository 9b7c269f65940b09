//! Label listings over a fleet's month (`--only labels`): a catalog holding S services, each
//! with one pod at a time replaced every few days (so series accumulate), committed hour by
//! hour as compaction commits its hour blocks, in SQLite and in Postgres. Label names and
//! the values of `service.name` over the whole month, a past day and a half and a past hour,
//! each against the statements the label index replaced (a probe of every series' extents),
//! run on the same database; both must list the same values.
//!
//! Only the catalog is written: listings never read Parquet.

use std::time::{Duration, Instant};

use anyhow::{Context, bail, ensure};
use sqlx::{AssertSqlSafe, Connection, Executor, PgConnection};
use stackhouse_storage::catalog::{
    Catalog, ObjectMeta, SegmentCommit, SegmentMeta, SegmentSeries, TableKind, open_catalog,
};
use stackhouse_storage::model::{Labels, Series, TimeRange};

use super::env::{TENANT, cpu_type};
use super::report::{Report, Row, ms};
use super::rollups::timed;
use super::{CatalogKind, HOUR_NANOS, Plan, Scale};

const DAY_NANOS: i64 = 24 * HOUR_NANOS;

/// The statements the label index replaced: every series with the name, each probed for an
/// extent in the range. The baseline of every row.
const PROBE_NAMES: &str = "SELECT sl.name FROM series_labels sl
    WHERE sl.tenant = $1
      AND EXISTS (SELECT 1 FROM segment_series ss
                  WHERE ss.tenant = sl.tenant AND ss.series_id = sl.series_id
                    AND ss.min_time < $2 AND ss.max_time >= $3)
    UNION
    SELECT l.name FROM sample_labels l JOIN segments g ON g.id = l.segment_id
    WHERE g.tenant = $1 AND g.min_time < $2 AND g.max_time >= $3";

const PROBE_VALUES: &str = "SELECT sl.value FROM series_labels sl
    WHERE sl.tenant = $1 AND sl.name = $4
      AND EXISTS (SELECT 1 FROM segment_series ss
                  WHERE ss.tenant = sl.tenant AND ss.series_id = sl.series_id
                    AND ss.min_time < $2 AND ss.max_time >= $3)
    UNION
    SELECT l.value FROM sample_labels l JOIN segments g ON g.id = l.segment_id
    WHERE g.tenant = $1 AND l.name = $4 AND g.min_time < $2 AND g.max_time >= $3";

/// How many services, how many pods each over the month, and how many days.
struct Shape {
    services: usize,
    pods_per_service: usize,
    days: i64,
}

impl Shape {
    fn of(scale: Scale) -> Shape {
        match scale {
            Scale::Tiny => Shape {
                services: 100,
                pods_per_service: 3,
                days: 3,
            },
            Scale::Small => Shape {
                services: 2_000,
                pods_per_service: 10,
                days: 30,
            },
            Scale::Full => Shape {
                services: 10_000,
                pods_per_service: 10,
                days: 30,
            },
        }
    }

    fn hours(&self) -> i64 {
        self.days * 24
    }

    /// The series of service `s` in hour `h`: its pod of that part of the month.
    fn series(&self, s: usize, h: i64) -> Series {
        let pod = (h * self.pods_per_service as i64 / self.hours()) as usize;
        let labels: Labels = [
            ("service.name", format!("svc-{s:05}")),
            ("k8s.pod.name", format!("svc-{s:05}-{pod}")),
            ("k8s.namespace.name", format!("ns-{}", s % 50)),
            ("host.name", format!("host-{}", (s * 7 + pod) % 500)),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect();
        Series::new(cpu_type(), labels, 10_000_000)
    }
}

/// Catalog rows of the month, one hour block at a time (level 2, as compaction leaves it).
async fn build(catalog: &dyn Catalog, shape: &Shape, start: i64) -> anyhow::Result<()> {
    for h in 0..shape.hours() {
        let hour = start + h * HOUR_NANOS;
        let series: Vec<Series> = (0..shape.services).map(|s| shape.series(s, h)).collect();
        let extents = series
            .iter()
            .enumerate()
            .map(|(s, one)| SegmentSeries {
                series_id: one.id,
                // Each pod's first and last sample of the hour, a little inside it.
                min_time: hour + (s as i64 % 60) * 1_000_000_000,
                max_time: hour + HOUR_NANOS - 1 - (s as i64 % 47) * 1_000_000_000,
                samples: 72_000,
            })
            .collect();
        let id = format!("hour-{h:04}");
        let commit = SegmentCommit {
            segment: SegmentMeta {
                id: id.clone(),
                tenant: TENANT.into(),
                min_time: hour,
                max_time: hour + HOUR_NANOS - 1,
                level: 2,
                created_at_nanos: hour + 2 * HOUR_NANOS,
                objects: vec![ObjectMeta {
                    kind: TableKind::Samples,
                    key: format!("{TENANT}/{id}/samples.parquet"),
                    size_bytes: 1,
                    rows: 1,
                }],
                series: extents,
            },
            symbols: Vec::new(),
            series,
            sample_labels: vec![("thread.name".into(), "main".into())],
            profiles: Vec::new(),
            symbol_epoch: 0,
        };
        catalog
            .commit_segment(&commit)
            .await
            .with_context(|| format!("committing hour {h}"))?;
    }
    Ok(())
}

/// One catalog database and a plain connection to it for the probe statements.
enum Database {
    Sqlite(sqlx::SqlitePool),
    Postgres(sqlx::PgPool),
}

impl Database {
    async fn probe(
        &self,
        sql: &'static str,
        range: TimeRange,
        name: Option<&str>,
    ) -> anyhow::Result<Vec<String>> {
        macro_rules! run {
            ($pool:expr) => {{
                let mut query = sqlx::query_scalar::<_, String>(sql)
                    .bind(TENANT)
                    .bind(range.end)
                    .bind(range.start);
                if let Some(name) = name {
                    query = query.bind(name);
                }
                query.fetch_all($pool).await?
            }};
        }
        let mut out = match self {
            Database::Sqlite(pool) => run!(pool),
            Database::Postgres(pool) => run!(pool),
        };
        out.sort();
        out.dedup();
        Ok(out)
    }
}

pub(crate) async fn measurements(plan: &Plan, scale: Scale, report: &mut Report) -> anyhow::Result<()> {
    let shape = Shape::of(scale);
    // Whole days, long past: the month's data is closed.
    let start = 1_700_006_400 * 1_000_000_000 / DAY_NANOS * DAY_NANOS;
    let dir = tempfile::tempdir()?;
    let sqlite_url = format!("sqlite://{}?mode=rwc", dir.path().join("catalog.db").display());
    let admin_url = std::env::var("STACKHOUSE_TEST_POSTGRES_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/postgres".to_string());
    let mut admin = PgConnection::connect(&admin_url).await.with_context(|| {
        format!(
            "the labels phase measures the Postgres catalog and postgres is unreachable at {admin_url}; \
             start one or point STACKHOUSE_TEST_POSTGRES_URL at it"
        )
    })?;
    let db = format!("stackhouse_bench_labels_{}", std::process::id());
    admin
        .execute(AssertSqlSafe(format!("DROP DATABASE IF EXISTS {db}")))
        .await?;
    admin
        .execute(AssertSqlSafe(format!("CREATE DATABASE {db}")))
        .await?;
    let mut pg_url = url::Url::parse(&admin_url)?;
    pg_url.set_path(&db);
    let outcome = async {
        for kind in &plan.labels_catalogs {
            let (backend, url) = match kind {
                CatalogKind::Sqlite => ("SQLite", sqlite_url.clone()),
                CatalogKind::Postgres => ("Postgres", pg_url.to_string()),
            };
            let catalog = open_catalog(&url)
                .await
                .with_context(|| format!("opening {backend}"))?;
            let t = Instant::now();
            build(catalog.as_ref(), &shape, start).await?;
            let built = t.elapsed();
            let database = match kind {
                CatalogKind::Sqlite => Database::Sqlite(sqlx::SqlitePool::connect(&url).await?),
                CatalogKind::Postgres => Database::Postgres(sqlx::PgPool::connect(&url).await?),
            };
            if let Database::Postgres(pool) = &database {
                // As autovacuum would have by the time a month is stored.
                pool.execute("VACUUM ANALYZE").await?;
            }
            report.notes.push(format!(
                "labels, {backend}: {} services × {} pods each over {} days ({} series, {} hour blocks, {} \
                 series extents) committed in {:.1} s.",
                shape.services,
                shape.pods_per_service,
                shape.days,
                shape.services * shape.pods_per_service,
                shape.hours(),
                shape.services as i64 * shape.hours(),
                built.as_secs_f64()
            ));
            rows(plan, &shape, start, backend, catalog.as_ref(), &database, report).await?;
        }
        anyhow::Ok(())
    }
    .await;
    admin
        .execute(AssertSqlSafe(format!(
            "DROP DATABASE IF EXISTS {db} WITH (FORCE)"
        )))
        .await?;
    outcome
}

async fn rows(
    plan: &Plan,
    shape: &Shape,
    start: i64,
    backend: &str,
    catalog: &dyn Catalog,
    database: &Database,
    report: &mut Report,
) -> anyhow::Result<()> {
    let month = TimeRange {
        start,
        end: start + shape.days * DAY_NANOS,
    };
    let middle = start + shape.days / 2 * DAY_NANOS;
    let ranges = [
        ("the whole month", month),
        (
            "a past day and a half",
            TimeRange {
                start: middle - DAY_NANOS + 3 * HOUR_NANOS,
                end: middle + 15 * HOUR_NANOS,
            },
        ),
        (
            "a past hour",
            TimeRange {
                start: middle + 10 * HOUR_NANOS,
                end: middle + 11 * HOUR_NANOS,
            },
        ),
    ];
    let series = shape.services * shape.pods_per_service;
    for (what, range) in ranges {
        let values = catalog.label_values(TENANT, "service.name", range).await?;
        let probed = database.probe(PROBE_VALUES, range, Some("service.name")).await?;
        ensure!(
            values == probed,
            "{backend}: the label index lists {} values of service.name over {what}, the probe {}",
            values.len(),
            probed.len()
        );
        if values.len() != shape.services {
            bail!(
                "{backend}: {} services over {what}, {} stored",
                values.len(),
                shape.services
            );
        }
        let (ours, base) = timed(
            plan,
            async || Ok(catalog.label_values(TENANT, "service.name", range).await?.len()),
            async || {
                Ok(database
                    .probe(PROBE_VALUES, range, Some("service.name"))
                    .await?
                    .len())
            },
        )
        .await?;
        report.rows.push(row(
            format!(
                "labels, {backend}: values of service.name over {what} ({} services, {series} series)",
                values.len()
            ),
            ours,
            base,
            100.0,
        ));
    }
    let names = catalog.label_names(TENANT, month).await?;
    let probed = database.probe(PROBE_NAMES, month, None).await?;
    ensure!(
        names == probed,
        "{backend}: label names {names:?}, the probe {probed:?}"
    );
    let (ours, base) = timed(
        plan,
        async || Ok(catalog.label_names(TENANT, month).await?.len()),
        async || Ok(database.probe(PROBE_NAMES, month, None).await?.len()),
    )
    .await?;
    report.rows.push(row(
        format!("labels, {backend}: label names over the whole month ({series} series)"),
        ours,
        base,
        50.0,
    ));
    // What every query over the month lists before it reads Parquet: the next fixed cost
    // at this cardinality, measured once each.
    let t = Instant::now();
    let listed = catalog.series(TENANT, month).await?;
    let series_t = t.elapsed();
    let t = Instant::now();
    let extents: usize = catalog
        .segments(TENANT, month)
        .await?
        .iter()
        .map(|s| s.series.len())
        .sum();
    let segments_t = t.elapsed();
    // A query that selects one service lists only its pods' extents.
    let one: Vec<i64> = listed
        .iter()
        .filter(|s| s.labels.get("service.name").map(String::as_str) == Some("svc-00000"))
        .map(|s| s.id)
        .collect();
    let t = Instant::now();
    let held: usize = catalog
        .segments_holding(TENANT, month, &one)
        .await?
        .iter()
        .map(|s| s.series.len())
        .sum();
    ensure!(
        held == shape.hours() as usize,
        "{backend}: one service holds {held} extents over the month"
    );
    report.notes.push(format!(
        "labels, {backend}: a query's catalog listings over the month: series {:.0} ms ({} series), \
         segments {:.0} ms ({extents} series extents), the segments of one service's {} series {:.1} ms \
         ({held} extents).",
        ms(series_t),
        listed.len(),
        ms(segments_t),
        one.len(),
        ms(t.elapsed())
    ));
    Ok(())
}

fn row(measurement: String, ours: Duration, base: Duration, target_ms: f64) -> Row {
    Row {
        measurement,
        ours: ms(ours),
        baseline: ms(base),
        unit: "ms",
        baseline_name: "probing every series".into(),
        target: format!("≤ {target_ms} ms"),
        pass: ms(ours) <= target_ms,
    }
}
