//! The production catalog shared by ingest, query and compactor replicas. Bulk inserts
//! bind whole columns as arrays and `UNNEST` them, so a commit costs a fixed number of
//! round trips however many series, labels and profiles it carries.

use std::collections::BTreeSet;
use std::str::FromStr;

use sqlx::migrate::Migrator;
use sqlx::postgres::{PgConnectOptions, PgPool, PgPoolOptions};
use sqlx::{Postgres, Row, Transaction};

use super::backend::{Backend, Claim, Dialect, PerDialect, SegmentSwap, SqlCatalog, SymbolSwap};
use super::common::{
    distinct_sample_labels, encode_labels, outcome, over_limit, profile_key, profiles_heir, redact_password,
    same_identity, segments_gone, series_from_columns, stale_symbols, symbols_gone, to_i64,
};
use super::label_index::{UNCOVERED, index_segment, reindex_days};
use super::segments::{INSERT_SEGMENT, LIVE_SERIES, REMOVED_EXTENT, mark_days_stale, swap_extent};
use super::symbols::{end_collection, epoch_in};
use super::{CatalogError, CatalogResult, CommitOutcome, ObjectMeta, SegmentCommit, SegmentMeta};
use crate::model::{ProfileKey, ProfileRecord, ProfileType, Series};

static MIGRATOR: Migrator = sqlx::migrate!("../migrations/postgres");

const MAX_CONNECTIONS: u32 = 10;

impl SqlCatalog {
    /// Connects to `postgres://…` and runs the migrations (sqlx holds an advisory lock
    /// while migrating, so replicas starting together do not race).
    pub async fn connect_postgres(url: &str) -> CatalogResult<SqlCatalog> {
        // The catalog's statements are short lookups whose cost Postgres overestimates for
        // time ranges; its JIT then spends longer compiling than the statement runs.
        let options = PgConnectOptions::from_str(url)
            .map_err(|e| CatalogError::InvalidUrl {
                url: redact_password(url),
                reason: e.to_string(),
            })?
            .options([("jit", "off")]);
        let pool = PgPoolOptions::new()
            .max_connections(MAX_CONNECTIONS)
            .connect_with(options)
            .await?;
        Self::from_postgres_pool(pool).await
    }

    /// Wraps an existing pool (configured by the caller) and runs the migrations.
    pub async fn from_postgres_pool(pool: PgPool) -> CatalogResult<SqlCatalog> {
        MIGRATOR.run(&pool).await?;
        Ok(SqlCatalog {
            backend: Backend::Postgres(pool),
        })
    }
}

async fn upsert_series(
    tx: &mut Transaction<'_, Postgres>,
    tenant: &str,
    series: &[&Series],
) -> CatalogResult<()> {
    let ids: Vec<i64> = series.iter().map(|s| s.id).collect();
    let periods: Vec<i64> = series.iter().map(|s| s.period).collect();
    let labels = series
        .iter()
        .map(|s| encode_labels(&s.labels))
        .collect::<CatalogResult<Vec<_>>>()?;
    let column = |f: fn(&ProfileType) -> &String| -> Vec<String> {
        series.iter().map(|s| f(&s.profile_type).clone()).collect()
    };
    // Inserting first (and skipping existing ids) makes a concurrent insert of the same
    // series wait for the other transaction instead of failing on the primary key; the
    // check below then sees whichever definition won.
    sqlx::query(
        "INSERT INTO series (tenant, series_id, profile_type, sample_type, sample_unit, period_type,
                             period_unit, labels, period)
         SELECT $1::TEXT, u.id, u.st || ':' || u.su || ':' || u.pt || ':' || u.pu,
                u.st, u.su, u.pt, u.pu, u.labels, u.period
         FROM UNNEST($2::BIGINT[], $3::TEXT[], $4::TEXT[], $5::TEXT[], $6::TEXT[], $7::TEXT[], $8::BIGINT[])
              AS u(id, st, su, pt, pu, labels, period)
         ON CONFLICT (tenant, series_id) DO NOTHING",
    )
    .bind(tenant)
    .bind(&ids)
    .bind(column(|p| &p.sample_type))
    .bind(column(|p| &p.sample_unit))
    .bind(column(|p| &p.period_type))
    .bind(column(|p| &p.period_unit))
    .bind(&labels)
    .bind(&periods)
    .execute(&mut **tx)
    .await?;

    let stored = sqlx::query(
        "SELECT series_id, sample_type, sample_unit, period_type, period_unit, labels
         FROM series WHERE tenant = $1 AND series_id = ANY($2)",
    )
    .bind(tenant)
    .bind(&ids)
    .fetch_all(&mut **tx)
    .await?;
    for row in &stored {
        let id: i64 = row.try_get(0)?;
        let profile_type = [row.try_get(1)?, row.try_get(2)?, row.try_get(3)?, row.try_get(4)?];
        let stored = series_from_columns(id, profile_type, row.try_get(5)?, 0)?;
        let incoming = series.iter().find(|s| s.id == id);
        if incoming.is_some_and(|s| !same_identity(&stored, s)) {
            return Err(CatalogError::SeriesCollision { id });
        }
    }

    sqlx::query(
        "UPDATE series s SET period = u.period
         FROM UNNEST($2::BIGINT[], $3::BIGINT[]) AS u(id, period)
         WHERE s.tenant = $1 AND s.series_id = u.id AND s.period <> u.period",
    )
    .bind(tenant)
    .bind(&ids)
    .bind(&periods)
    .execute(&mut **tx)
    .await?;

    let (mut label_ids, mut names, mut values) = (Vec::new(), Vec::new(), Vec::new());
    for s in series {
        for (name, value) in &s.labels {
            label_ids.push(s.id);
            names.push(name.as_str());
            values.push(value.as_str());
        }
    }
    sqlx::query(
        "INSERT INTO series_labels (tenant, series_id, name, value)
         SELECT $1::TEXT, u.id, u.name, u.value FROM UNNEST($2::BIGINT[], $3::TEXT[], $4::TEXT[]) AS u(id, name, value)
         ON CONFLICT (tenant, series_id, name) DO NOTHING",
    )
    .bind(tenant)
    .bind(&label_ids)
    .bind(&names)
    .bind(&values)
    .execute(&mut **tx)
    .await?;
    Ok(())
}

/// The segment row with its objects and series extents: what a flush and a compaction
/// both write.
async fn insert_segment_rows(tx: &mut Transaction<'_, Postgres>, seg: &SegmentMeta) -> CatalogResult<()> {
    sqlx::query(INSERT_SEGMENT)
        .bind(&seg.id)
        .bind(&seg.tenant)
        .bind(seg.min_time)
        .bind(seg.max_time)
        .bind(seg.level)
        .bind(seg.created_at_nanos)
        .execute(&mut **tx)
        .await?;

    let positions: Vec<i64> = (0..seg.objects.len() as i64).collect();
    let kinds: Vec<&str> = seg.objects.iter().map(|o| o.kind.as_str()).collect();
    let keys: Vec<&str> = seg.objects.iter().map(|o| o.key.as_str()).collect();
    let sizes = seg
        .objects
        .iter()
        .map(|o| to_i64(o.size_bytes, "object size"))
        .collect::<CatalogResult<Vec<_>>>()?;
    let rows = seg
        .objects
        .iter()
        .map(|o| to_i64(o.rows, "object row count"))
        .collect::<CatalogResult<Vec<_>>>()?;
    sqlx::query(
        "INSERT INTO segment_objects (segment_id, position, kind, key, size_bytes, rows)
         SELECT $1::TEXT, u.* FROM UNNEST($2::BIGINT[], $3::TEXT[], $4::TEXT[], $5::BIGINT[], $6::BIGINT[]) AS u",
    )
    .bind(&seg.id)
    .bind(&positions)
    .bind(&kinds)
    .bind(&keys)
    .bind(&sizes)
    .bind(&rows)
    .execute(&mut **tx)
    .await?;

    let positions: Vec<i64> = (0..seg.series.len() as i64).collect();
    let ids: Vec<i64> = seg.series.iter().map(|s| s.series_id).collect();
    let mins: Vec<i64> = seg.series.iter().map(|s| s.min_time).collect();
    let maxs: Vec<i64> = seg.series.iter().map(|s| s.max_time).collect();
    let samples = seg
        .series
        .iter()
        .map(|s| to_i64(s.samples, "sample count"))
        .collect::<CatalogResult<Vec<_>>>()?;
    sqlx::query(
        "INSERT INTO segment_series (segment_id, tenant, series_id, position, min_time, max_time, samples)
         SELECT $1::TEXT, $2::TEXT, u.* FROM UNNEST($3::BIGINT[], $4::BIGINT[], $5::BIGINT[], $6::BIGINT[], $7::BIGINT[]) AS u",
    )
    .bind(&seg.id)
    .bind(&seg.tenant)
    .bind(&ids)
    .bind(&positions)
    .bind(&mins)
    .bind(&maxs)
    .bind(&samples)
    .execute(&mut **tx)
    .await?;

    Ok(())
}

async fn insert_symbols(
    tx: &mut Transaction<'_, Postgres>,
    tenant: &str,
    objects: &[ObjectMeta],
    created_at_nanos: i64,
) -> CatalogResult<()> {
    let kinds: Vec<&str> = objects.iter().map(|o| o.kind.as_str()).collect();
    let keys: Vec<&str> = objects.iter().map(|o| o.key.as_str()).collect();
    let sizes = objects
        .iter()
        .map(|o| to_i64(o.size_bytes, "object size"))
        .collect::<CatalogResult<Vec<_>>>()?;
    let rows = objects
        .iter()
        .map(|o| to_i64(o.rows, "object row count"))
        .collect::<CatalogResult<Vec<_>>>()?;
    sqlx::query(
        "INSERT INTO symbol_objects (tenant, key, kind, size_bytes, rows, created_at_nanos)
         SELECT $1::TEXT, u.key, u.kind, u.size_bytes, u.rows, $2::BIGINT
         FROM UNNEST($3::TEXT[], $4::TEXT[], $5::BIGINT[], $6::BIGINT[]) AS u(key, kind, size_bytes, rows)",
    )
    .bind(tenant)
    .bind(created_at_nanos)
    .bind(&keys)
    .bind(&kinds)
    .bind(&sizes)
    .bind(&rows)
    .execute(&mut **tx)
    .await?;
    Ok(())
}

async fn insert_segment(tx: &mut Transaction<'_, Postgres>, commit: &SegmentCommit) -> CatalogResult<()> {
    let seg = &commit.segment;
    insert_segment_rows(tx, seg).await?;
    insert_symbols(tx, &seg.tenant, &commit.symbols, seg.created_at_nanos).await?;

    let (names, values): (Vec<&str>, Vec<&str>) = distinct_sample_labels(commit).into_iter().unzip();
    sqlx::query(
        "INSERT INTO sample_labels (segment_id, name, value)
         SELECT $1::TEXT, u.* FROM UNNEST($2::TEXT[], $3::TEXT[]) AS u",
    )
    .bind(&seg.id)
    .bind(&names)
    .bind(&values)
    .execute(&mut **tx)
    .await?;

    Ok(())
}

/// Inserts the profiles whose keys no commit stored yet and returns those keys. A key
/// another transaction inserted and has not committed yet waits for it: then stored if
/// that one rolled back, repeated if it committed.
async fn claim_profiles(
    tx: &mut Transaction<'_, Postgres>,
    seg: &SegmentMeta,
    p: &[&ProfileRecord],
) -> CatalogResult<BTreeSet<ProfileKey>> {
    let rows: Vec<(Vec<u8>, i64, i64)> = sqlx::query_as(
        "INSERT INTO profiles (tenant, profile_id, segment_id, series_id, start_nanos, end_nanos, sample_count,
                               resource, attributes)
         SELECT $1::TEXT, u.pid, $2::TEXT, u.sid, u.start_nanos, u.end_nanos, u.sample_count,
                u.resource, u.attributes
         FROM UNNEST($3::BYTEA[], $4::BIGINT[], $5::BIGINT[], $6::BIGINT[], $7::BIGINT[], $8::TEXT[], $9::TEXT[])
              WITH ORDINALITY AS u(pid, sid, start_nanos, end_nanos, sample_count, resource, attributes, n)
         ORDER BY u.n
         ON CONFLICT (tenant, profile_id, series_id, start_nanos) DO NOTHING
         RETURNING profile_id, series_id, start_nanos",
    )
    .bind(&seg.tenant)
    .bind(&seg.id)
    .bind(p.iter().map(|p| p.profile_id.to_vec()).collect::<Vec<_>>())
    .bind(p.iter().map(|p| p.series_id).collect::<Vec<_>>())
    .bind(p.iter().map(|p| p.start_nanos).collect::<Vec<_>>())
    .bind(p.iter().map(|p| p.end_nanos).collect::<Vec<_>>())
    .bind(p.iter().map(|p| p.sample_count).collect::<Vec<_>>())
    .bind(p.iter().map(|p| encode_labels(&p.resource)).collect::<CatalogResult<Vec<_>>>()?)
    .bind(p.iter().map(|p| encode_labels(&p.attributes)).collect::<CatalogResult<Vec<_>>>()?)
    .fetch_all(&mut **tx)
    .await?;
    rows.into_iter().map(profile_key).collect()
}

/// Advisory lock class of the per-tenant commit lock (the second key is the tenant's hash;
/// two-key locks never meet the one-key locks sqlx's migrations take).
const TENANT_COMMIT_LOCK: i32 = 0x5348_5331;

/// Advisory lock class of a tenant's symbol epoch: segment commits take it shared, a
/// change of the epoch exclusive, so a commit checks the epoch the change leaves.
const SYMBOL_EPOCH_LOCK: i32 = 0x5348_5332;

/// Advisory lock class of a tenant's recording rules: changes to them take it.
const RECORDING_RULES_LOCK: i32 = 0x5348_5333;

/// Whether `tenant`'s symbol epoch is still `epoch`, holding it there until the
/// transaction ends.
async fn symbol_epoch_is(
    tx: &mut Transaction<'_, Postgres>,
    tenant: &str,
    epoch: i64,
) -> CatalogResult<bool> {
    sqlx::query("SELECT pg_advisory_xact_lock_shared($1, hashtext($2))")
        .bind(SYMBOL_EPOCH_LOCK)
        .bind(tenant)
        .execute(&mut **tx)
        .await?;
    Ok(epoch_in(tx, tenant).await? == epoch)
}

/// The new series of the commit over `max_series`. Takes the tenant's commit lock until the
/// transaction ends, so two commits of one tenant cannot both count the same free places.
async fn series_over_limit(
    tx: &mut Transaction<'_, Postgres>,
    tenant: &str,
    series: &[&Series],
    max_series: usize,
) -> CatalogResult<Vec<i64>> {
    if max_series == 0 {
        return Ok(Vec::new());
    }
    sqlx::query("SELECT pg_advisory_xact_lock($1, hashtext($2))")
        .bind(TENANT_COMMIT_LOCK)
        .bind(tenant)
        .execute(&mut **tx)
        .await?;
    let ids: Vec<i64> = series.iter().map(|s| s.id).collect();
    let live: Vec<i64> = sqlx::query_scalar(
        "SELECT DISTINCT ss.series_id FROM segment_series ss
         JOIN segment_objects o ON o.segment_id = ss.segment_id
         WHERE ss.tenant = $1 AND ss.series_id = ANY($2) AND o.kind = 'samples'",
    )
    .bind(tenant)
    .bind(&ids)
    .fetch_all(&mut **tx)
    .await?;
    let live: BTreeSet<i64> = live.into_iter().collect();
    // Series the tenant has already take no new place: nothing to count.
    if series.iter().all(|s| live.contains(&s.id)) {
        return Ok(Vec::new());
    }
    let live_count: i64 = sqlx::query_scalar(LIVE_SERIES)
        .bind(tenant)
        .fetch_one(&mut **tx)
        .await?;
    Ok(over_limit(series, &live, live_count, max_series))
}

impl Dialect for PgPool {
    type Db = Postgres;

    fn sql(&self, statement: &PerDialect) -> &'static str {
        statement.postgres
    }

    async fn begin_snapshot(&self) -> CatalogResult<Transaction<'static, Postgres>> {
        Ok(self
            .begin_with("BEGIN ISOLATION LEVEL REPEATABLE READ, READ ONLY")
            .await?)
    }

    async fn commit_segment(&self, claim: Claim<'_>) -> CatalogResult<CommitOutcome> {
        let Claim {
            commit,
            series,
            profiles,
            max_series,
        } = claim;
        let tenant = &commit.segment.tenant;
        let mut tx = self.begin().await?;
        // The lock first: every later wait of this transaction then happens while holding
        // it, in the same order as every other commit of the tenant.
        let refused_series = series_over_limit(&mut tx, tenant, series, max_series).await?;
        if !symbol_epoch_is(&mut tx, tenant, commit.symbol_epoch).await? {
            tx.rollback().await?;
            return Ok(stale_symbols());
        }
        upsert_series(&mut tx, tenant, series).await?;
        insert_segment(&mut tx, commit).await?;
        mark_days_stale!(tx, tenant, (commit.segment.min_time, commit.segment.max_time))?;
        index_segment(&mut tx, &commit.segment.id, commit.segment.level).await?;
        let claimed = claim_profiles(&mut tx, &commit.segment, profiles).await?;
        let outcome = outcome(profiles, &claimed, refused_series);
        if outcome == CommitOutcome::Committed {
            tx.commit().await?;
        } else {
            tx.rollback().await?;
        }
        Ok(outcome)
    }

    async fn replace_segments(&self, swap: SegmentSwap<'_>) -> CatalogResult<()> {
        let SegmentSwap {
            replacement,
            removed,
            kept_keys,
        } = swap;
        let tenant = &replacement.tenant;
        let mut tx = self.begin().await?;
        // Under READ COMMITTED a racing replacement blocks here on the row locks, and once
        // the first commits it skips the rows that transaction deleted: fewer rows, conflict.
        // Sorted ids lock in one order, so two replacements cannot deadlock.
        let locked: Vec<String> = sqlx::query_scalar(
            "SELECT id FROM segments WHERE tenant = $1 AND id = ANY($2)
             ORDER BY id COLLATE \"C\" FOR UPDATE",
        )
        .bind(tenant)
        .bind(removed)
        .fetch_all(&mut *tx)
        .await?;
        if locked.len() != removed.len() {
            return Err(segments_gone(removed, locked.len()));
        }
        // An object a new segment lists again must not be deleted under it.
        sqlx::query(
            "INSERT INTO pending_deletions (key, tenant, delete_after_nanos)
             SELECT o.key, $2, $3 FROM segment_objects o
             WHERE o.segment_id = ANY($1) AND NOT (o.key = ANY($4))
             ON CONFLICT (key) DO NOTHING",
        )
        .bind(removed)
        .bind(tenant)
        .bind(replacement.delete_after_nanos)
        .bind(kept_keys)
        .execute(&mut *tx)
        .await?;
        let removed_extent: (Option<i64>, Option<i64>) = sqlx::query_as(REMOVED_EXTENT.postgres)
            .bind(tenant)
            .bind(removed)
            .fetch_one(&mut *tx)
            .await?;
        if let Some(extent) = swap_extent(removed_extent, &replacement.added) {
            mark_days_stale!(tx, tenant, extent)?;
        }
        // Added rows first: deleting the removed segments cascades to their profiles and
        // sample labels, which must have moved by then. Profiles move by UPDATE, never by
        // copying: a copy would meet its original under the unique profile key.
        for added in &replacement.added {
            insert_segment_rows(&mut tx, added).await?;
            sqlx::query(
                "INSERT INTO sample_labels (segment_id, name, value)
                 SELECT DISTINCT $1::TEXT, name, value FROM sample_labels WHERE segment_id = ANY($2)
                 ON CONFLICT DO NOTHING",
            )
            .bind(&added.id)
            .bind(removed)
            .execute(&mut *tx)
            .await?;
        }
        if let Some(heir) = profiles_heir(replacement) {
            sqlx::query(
                "UPDATE profiles SET segment_id = $1
                 WHERE segment_id = ANY($2) AND ($3::BIGINT IS NULL OR end_nanos >= $3)",
            )
            .bind(&heir.id)
            .bind(removed)
            .bind(replacement.drop_profiles_before)
            .execute(&mut *tx)
            .await?;
        }
        let added_ids: Vec<&str> = replacement.added.iter().map(|s| s.id.as_str()).collect();
        let uncovered: (Option<i64>, Option<i64>) = sqlx::query_as(UNCOVERED.postgres)
            .bind(removed)
            .bind(&added_ids)
            .fetch_one(&mut *tx)
            .await?;
        let deleted = sqlx::query("DELETE FROM segments WHERE tenant = $1 AND id = ANY($2)")
            .bind(tenant)
            .bind(removed)
            .execute(&mut *tx)
            .await?
            .rows_affected();
        if deleted != removed.len() as u64 {
            return Err(segments_gone(removed, deleted as usize));
        }
        if let (Some(first), Some(last)) = uncovered {
            reindex_days(&mut tx, tenant, (first, last)).await?;
        }
        for added in &replacement.added {
            index_segment(&mut tx, &added.id, added.level).await?;
        }
        tx.commit().await?;
        Ok(())
    }

    async fn insert_segment_rows(
        &self,
        tx: &mut Transaction<'_, Postgres>,
        segment: &SegmentMeta,
    ) -> CatalogResult<()> {
        insert_segment_rows(tx, segment).await
    }

    async fn replace_symbols(&self, swap: SymbolSwap<'_>) -> CatalogResult<()> {
        let SymbolSwap {
            tenant,
            removed,
            added,
            kept_keys,
            delete_after_nanos,
            collection,
        } = swap;
        let mut tx = match collection {
            Some(_) => self.begin_symbol_epoch_change(tenant).await?,
            None => self.begin().await?,
        };
        // Same locking as replace_segments: a racing replacement finds fewer rows.
        let locked = sqlx::query(
            "SELECT key, created_at_nanos FROM symbol_objects WHERE tenant = $1 AND key = ANY($2)
             ORDER BY key COLLATE \"C\" FOR UPDATE",
        )
        .bind(tenant)
        .bind(removed)
        .fetch_all(&mut *tx)
        .await?;
        if locked.len() != removed.len() {
            return Err(symbols_gone(tenant, removed, locked.len()));
        }
        let oldest = locked
            .iter()
            .map(|row| row.try_get::<i64, _>(1))
            .collect::<Result<Vec<_>, _>>()?
            .into_iter()
            .min();
        sqlx::query(
            "INSERT INTO pending_deletions (key, tenant, delete_after_nanos)
             SELECT key, tenant, $3 FROM symbol_objects
             WHERE tenant = $1 AND key = ANY($2) AND NOT (key = ANY($4))
             ON CONFLICT (key) DO NOTHING",
        )
        .bind(tenant)
        .bind(removed)
        .bind(delete_after_nanos)
        .bind(kept_keys)
        .execute(&mut *tx)
        .await?;
        let deleted = sqlx::query("DELETE FROM symbol_objects WHERE tenant = $1 AND key = ANY($2)")
            .bind(tenant)
            .bind(removed)
            .execute(&mut *tx)
            .await?
            .rows_affected();
        if deleted != removed.len() as u64 {
            return Err(symbols_gone(tenant, removed, deleted as usize));
        }
        // Merged objects take the place of what they replace in the tenant's order.
        if let Some(oldest) = oldest {
            insert_symbols(&mut tx, tenant, added, oldest).await?;
        }
        if let Some(epoch) = collection {
            end_collection(&mut tx, tenant, epoch).await?;
        }
        tx.commit().await?;
        Ok(())
    }

    async fn begin_symbol_epoch_change(&self, tenant: &str) -> CatalogResult<Transaction<'static, Postgres>> {
        let mut tx = self.begin().await?;
        sqlx::query("SELECT pg_advisory_xact_lock($1, hashtext($2))")
            .bind(SYMBOL_EPOCH_LOCK)
            .bind(tenant)
            .execute(&mut *tx)
            .await?;
        Ok(tx)
    }

    async fn begin_rules_change(&self, tenant: &str) -> CatalogResult<Transaction<'static, Postgres>> {
        let mut tx = self.begin().await?;
        sqlx::query("SELECT pg_advisory_xact_lock($1, hashtext($2))")
            .bind(RECORDING_RULES_LOCK)
            .bind(tenant)
            .execute(&mut *tx)
            .await?;
        Ok(tx)
    }

    async fn forget_deletions(&self, keys: &[String]) -> CatalogResult<()> {
        sqlx::query("DELETE FROM pending_deletions WHERE key = ANY($1)")
            .bind(keys)
            .execute(self)
            .await?;
        Ok(())
    }

    async fn unreferenced(&self, keys: &[String]) -> CatalogResult<Vec<String>> {
        let found = sqlx::query_scalar(
            "SELECT DISTINCT u.k FROM UNNEST($1::TEXT[]) AS u(k)
             WHERE NOT EXISTS (SELECT 1 FROM segment_objects o WHERE o.key = u.k)
               AND NOT EXISTS (SELECT 1 FROM symbol_objects s WHERE s.key = u.k)
               AND NOT EXISTS (SELECT 1 FROM pending_deletions d WHERE d.key = u.k)",
        )
        .bind(keys)
        .fetch_all(self)
        .await?;
        Ok(found)
    }

    async fn stored_profiles(
        &self,
        tenant: &str,
        keys: &[ProfileKey],
    ) -> CatalogResult<Vec<(Vec<u8>, i64, i64)>> {
        let ids: Vec<&[u8]> = keys.iter().map(|(id, _, _)| &id[..]).collect();
        let series: Vec<i64> = keys.iter().map(|k| k.1).collect();
        let starts: Vec<i64> = keys.iter().map(|k| k.2).collect();
        let rows = sqlx::query_as::<_, (Vec<u8>, i64, i64)>(
            "SELECT DISTINCT p.profile_id, p.series_id, p.start_nanos
             FROM UNNEST($2::BYTEA[], $3::BIGINT[], $4::BIGINT[]) AS k(id, series, start)
             JOIN profiles p ON p.tenant = $1 AND p.profile_id = k.id
              AND p.series_id = k.series AND p.start_nanos = k.start",
        )
        .bind(tenant)
        .bind(ids)
        .bind(series)
        .bind(starts)
        .fetch_all(self)
        .await?;
        Ok(rows)
    }
}
