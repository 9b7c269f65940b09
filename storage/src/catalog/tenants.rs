//! Tenant deletion: every catalog row of one tenant forgotten in one transaction, and every
//! object those rows listed queued for deletion after the grace, so queries that listed
//! them before finish first.

use async_trait::async_trait;

use super::CatalogResult;
use super::backend::{Dialect, SqlCatalog, on_either};
use super::symbols::FORGET_ALL;
use crate::compaction::tenant_lease;

/// What deleting a tenant forgot.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TenantDeleted {
    /// Catalog rows of the tenant (segments, series, profiles, tokens, settings, ...).
    pub rows: u64,
    /// Objects queued for deletion (segments, symbols, debug files).
    pub objects: u64,
}

#[async_trait]
pub trait TenantCatalog: Send + Sync {
    /// Forgets everything `tenant` has in the catalog: segments and their objects, series,
    /// profiles, labels, symbols, settings, recording rules, tokens, debug files, deletion
    /// requests and its compaction lease; queues every object they listed for deletion after
    /// `delete_after_nanos`. One transaction: a failure forgets nothing.
    async fn delete_tenant(&self, tenant: &str, delete_after_nanos: i64) -> CatalogResult<TenantDeleted>;
}

/// `$1` the tenant, `$2` when the objects may go. Objects first, while rows still list them.
const QUEUE_OBJECTS: [&str; 3] = [
    "INSERT INTO pending_deletions (key, tenant, delete_after_nanos)
     SELECT o.key, $1, $2 FROM segment_objects o JOIN segments s ON s.id = o.segment_id
     WHERE s.tenant = $1
     ON CONFLICT (key) DO NOTHING",
    "INSERT INTO pending_deletions (key, tenant, delete_after_nanos)
     SELECT key, $1, $2 FROM symbol_objects WHERE tenant = $1
     ON CONFLICT (key) DO NOTHING",
    "INSERT INTO pending_deletions (key, tenant, delete_after_nanos)
     SELECT object_key, $1, $2 FROM debuginfo WHERE tenant = $1
     ON CONFLICT (key) DO NOTHING",
];

/// `$1` the tenant; children before the rows they refer to. Deleting segments cascades to
/// their objects and sample labels.
const FORGET: [&str; 15] = [
    "DELETE FROM profiles WHERE tenant = $1",
    "DELETE FROM segment_series WHERE tenant = $1",
    "DELETE FROM segments WHERE tenant = $1",
    "DELETE FROM series_labels WHERE tenant = $1",
    "DELETE FROM series WHERE tenant = $1",
    "DELETE FROM symbol_objects WHERE tenant = $1",
    "DELETE FROM label_value_days WHERE tenant = $1",
    "DELETE FROM label_name_days WHERE tenant = $1",
    "DELETE FROM label_values WHERE tenant = $1",
    "DELETE FROM settings WHERE tenant = $1",
    "DELETE FROM tenant_tokens WHERE tenant = $1",
    "DELETE FROM debuginfo WHERE tenant = $1",
    "DELETE FROM delete_requests WHERE tenant = $1",
    "DELETE FROM recording_rules WHERE tenant = $1",
    "DELETE FROM recording_rule_progress WHERE tenant = $1",
];

/// `$1` the name of the tenant's compaction lease.
const FORGET_LEASE: &str = "DELETE FROM leases WHERE name = $1";

#[async_trait]
impl TenantCatalog for SqlCatalog {
    async fn delete_tenant(&self, tenant: &str, delete_after_nanos: i64) -> CatalogResult<TenantDeleted> {
        let lease = tenant_lease(tenant);
        let mut deleted = TenantDeleted::default();
        on_either!(self, |pool| {
            // The epoch's lock: a commit racing this one sees the epoch it leaves.
            let mut tx = pool.begin_symbol_epoch_change(tenant).await?;
            for statement in QUEUE_OBJECTS {
                deleted.objects += sqlx::query(statement)
                    .bind(tenant)
                    .bind(delete_after_nanos)
                    .execute(&mut *tx)
                    .await?
                    .rows_affected();
            }
            for statement in FORGET {
                deleted.rows += sqlx::query(statement)
                    .bind(tenant)
                    .execute(&mut *tx)
                    .await?
                    .rows_affected();
            }
            sqlx::query(FORGET_LEASE)
                .bind(lease.as_str())
                .execute(&mut *tx)
                .await?;
            // Writers that listed the tenant's symbols before must not take them as stored.
            sqlx::query(FORGET_ALL).bind(tenant).execute(&mut *tx).await?;
            tx.commit().await?;
        });
        Ok(deleted)
    }
}
