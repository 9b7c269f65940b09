//! Statements both catalogs run as they are: sqlx-sqlite reads `$N` placeholders too, so
//! where the dialects agree the SQL is written once. Statements that differ (bulk inserts
//! with `UNNEST` against `json_each`, locking, upserts) stay with their backend.

pub(crate) const INSERT_SEGMENT: &str =
    "INSERT INTO segments (id, tenant, min_time, max_time, level, created_at_nanos)
    VALUES ($1, $2, $3, $4, $5, $6)";

pub(crate) const SEGMENTS_IN_RANGE: &str =
    "SELECT s.id, s.tenant, s.min_time, s.max_time, s.level, s.created_at_nanos
    FROM segments s
    WHERE s.tenant = $1 AND s.min_time < $2 AND s.max_time >= $3";

pub(crate) const OBJECTS_IN_RANGE: &str =
    "SELECT o.segment_id, o.position, o.kind, o.key, o.size_bytes, o.rows
    FROM segment_objects o JOIN segments s ON s.id = o.segment_id
    WHERE s.tenant = $1 AND s.min_time < $2 AND s.max_time >= $3";

pub(crate) const SEGMENT_SERIES_IN_RANGE: &str =
    "SELECT ss.segment_id, ss.position, ss.series_id, ss.min_time, ss.max_time, ss.samples
    FROM segment_series ss JOIN segments s ON s.id = ss.segment_id
    WHERE s.tenant = $1 AND s.min_time < $2 AND s.max_time >= $3";

pub(crate) const TENANTS: &str = "SELECT tenant FROM segments UNION SELECT tenant FROM symbol_objects";

pub(crate) const RELEASE_LEASE: &str = "DELETE FROM leases WHERE name = $1 AND holder = $2";

pub(crate) const SERIES_IN_RANGE: &str =
    "SELECT s.series_id, s.sample_type, s.sample_unit, s.period_type, s.period_unit, s.labels, s.period
    FROM series s
    WHERE s.tenant = $1
      AND EXISTS (SELECT 1 FROM segment_series ss
                  WHERE ss.tenant = s.tenant AND ss.series_id = s.series_id
                    AND ss.min_time < $2 AND ss.max_time >= $3)
    ORDER BY s.series_id";

pub(crate) const PROFILE_TYPES_IN_RANGE: &str =
    "SELECT DISTINCT s.sample_type, s.sample_unit, s.period_type, s.period_unit
    FROM series s
    WHERE s.tenant = $1
      AND EXISTS (SELECT 1 FROM segment_series ss
                  WHERE ss.tenant = s.tenant AND ss.series_id = s.series_id
                    AND ss.min_time < $2 AND ss.max_time >= $3)";

pub(crate) const LABEL_NAMES_IN_RANGE: &str = "SELECT sl.name FROM series_labels sl
    WHERE sl.tenant = $1
      AND EXISTS (SELECT 1 FROM segment_series ss
                  WHERE ss.tenant = sl.tenant AND ss.series_id = sl.series_id
                    AND ss.min_time < $2 AND ss.max_time >= $3)
    UNION
    SELECT l.name FROM sample_labels l JOIN segments g ON g.id = l.segment_id
    WHERE g.tenant = $1 AND g.min_time < $2 AND g.max_time >= $3";

pub(crate) const LABEL_VALUES_IN_RANGE: &str = "SELECT sl.value FROM series_labels sl
    WHERE sl.tenant = $1 AND sl.name = $4
      AND EXISTS (SELECT 1 FROM segment_series ss
                  WHERE ss.tenant = sl.tenant AND ss.series_id = sl.series_id
                    AND ss.min_time < $2 AND ss.max_time >= $3)
    UNION
    SELECT l.value FROM sample_labels l JOIN segments g ON g.id = l.segment_id
    WHERE g.tenant = $1 AND l.name = $4 AND g.min_time < $2 AND g.max_time >= $3";

pub(crate) const STATS_COUNTS: &str = "SELECT (SELECT COUNT(*) FROM segments WHERE tenant = $1),
           (SELECT COUNT(*) FROM series WHERE tenant = $1)";

pub(crate) const PING: &str = "SELECT 1";

pub(crate) const DATA_RANGE: &str = "SELECT MIN(min_time), MAX(max_time) FROM segments WHERE tenant = $1";

pub(crate) const SETTINGS: &str =
    "SELECT name, value, modified_at_millis FROM settings WHERE tenant = $1 ORDER BY name";

pub(crate) const SETTING: &str =
    "SELECT name, value, modified_at_millis FROM settings WHERE tenant = $1 AND name = $2";

/// An older write (by `modified_at_millis`) never replaces a newer one, so settings written
/// from two browser tabs end with the latest.
pub(crate) const PUT_SETTING: &str =
    "INSERT INTO settings (tenant, name, value, modified_at_millis) VALUES ($1, $2, $3, $4)
    ON CONFLICT (tenant, name) DO UPDATE SET value = excluded.value,
        modified_at_millis = excluded.modified_at_millis
    WHERE settings.modified_at_millis <= excluded.modified_at_millis";

pub(crate) const DELETE_SETTING: &str = "DELETE FROM settings WHERE tenant = $1 AND name = $2";

pub(crate) const DEBUG_FILES: &str = "SELECT build_id, object_key, file_name, size_bytes, uploaded_at_millis
    FROM debuginfo WHERE tenant = $1 ORDER BY build_id";

pub(crate) const DEBUG_FILE: &str = "SELECT build_id, object_key, file_name, size_bytes, uploaded_at_millis
    FROM debuginfo WHERE tenant = $1 AND build_id = $2";

/// A new upload of a build id replaces the row (the object under the same key was
/// overwritten before).
pub(crate) const PUT_DEBUG_FILE: &str = "INSERT INTO debuginfo
    (tenant, build_id, object_key, file_name, size_bytes, uploaded_at_millis) VALUES ($1, $2, $3, $4, $5, $6)
    ON CONFLICT (tenant, build_id) DO UPDATE SET object_key = excluded.object_key,
        file_name = excluded.file_name, size_bytes = excluded.size_bytes,
        uploaded_at_millis = excluded.uploaded_at_millis";

pub(crate) const DELETE_DEBUG_FILE: &str = "DELETE FROM debuginfo WHERE tenant = $1 AND build_id = $2";

pub(crate) const CREATE_TOKEN: &str = "INSERT INTO tenant_tokens
    (id, tenant, name, token_sha256, created_at_millis) VALUES ($1, $2, $3, $4, $5)";

pub(crate) const TOKENS: &str = "SELECT id, tenant, name, created_at_millis, revoked_at_millis
    FROM tenant_tokens ORDER BY created_at_millis, id";

pub(crate) const TOKENS_OF_TENANT: &str = "SELECT id, tenant, name, created_at_millis, revoked_at_millis
    FROM tenant_tokens WHERE tenant = $1 ORDER BY created_at_millis, id";

pub(crate) const TOKEN_BY_HASH: &str = "SELECT id, tenant, name, created_at_millis, revoked_at_millis
    FROM tenant_tokens WHERE token_sha256 = $1";

/// Revoking twice keeps the first time; `RETURNING` tells whether the id exists.
pub(crate) const REVOKE_TOKEN: &str = "UPDATE tenant_tokens
    SET revoked_at_millis = COALESCE(revoked_at_millis, $2) WHERE id = $1 RETURNING id";
