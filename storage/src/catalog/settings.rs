//! Settings: named values a tenant keeps, as Grafana's settings API stores plugin settings.

use async_trait::async_trait;

use super::CatalogResult;
use super::backend::{SqlCatalog, on_either};

/// A named value a tenant keeps, as Grafana's settings API stores its plugin settings.
#[derive(Clone, Debug, PartialEq, Eq, sqlx::FromRow)]
pub struct Setting {
    pub name: String,
    pub value: String,
    pub modified_at_millis: i64,
}

#[async_trait]
pub trait SettingCatalog: Send + Sync {
    /// Every setting of `tenant`, sorted by name.
    async fn settings(&self, tenant: &str) -> CatalogResult<Vec<Setting>>;

    /// Stores a setting unless one modified later is stored already; returns the stored one.
    async fn put_setting(&self, tenant: &str, setting: &Setting) -> CatalogResult<Setting>;

    /// Removes a setting; removing a missing one is not an error.
    async fn delete_setting(&self, tenant: &str, name: &str) -> CatalogResult<()>;
}

const SETTINGS: &str = "SELECT name, value, modified_at_millis FROM settings WHERE tenant = $1 ORDER BY name";

const SETTING: &str = "SELECT name, value, modified_at_millis FROM settings WHERE tenant = $1 AND name = $2";

/// An older write (by `modified_at_millis`) never replaces a newer one, so settings written
/// from two browser tabs end with the latest.
const PUT_SETTING: &str =
    "INSERT INTO settings (tenant, name, value, modified_at_millis) VALUES ($1, $2, $3, $4)
    ON CONFLICT (tenant, name) DO UPDATE SET value = excluded.value,
        modified_at_millis = excluded.modified_at_millis
    WHERE settings.modified_at_millis <= excluded.modified_at_millis";

const DELETE_SETTING: &str = "DELETE FROM settings WHERE tenant = $1 AND name = $2";

#[async_trait]
impl SettingCatalog for SqlCatalog {
    async fn settings(&self, tenant: &str) -> CatalogResult<Vec<Setting>> {
        Ok(on_either!(self, |pool| sqlx::query_as(SETTINGS)
            .bind(tenant)
            .fetch_all(pool)
            .await?))
    }

    // One upsert statement, then a read: the read may see a newer write that raced in,
    // which is the value a client should see anyway.
    async fn put_setting(&self, tenant: &str, setting: &Setting) -> CatalogResult<Setting> {
        Ok(on_either!(self, |pool| {
            sqlx::query(PUT_SETTING)
                .bind(tenant)
                .bind(setting.name.as_str())
                .bind(setting.value.as_str())
                .bind(setting.modified_at_millis)
                .execute(pool)
                .await?;
            sqlx::query_as(SETTING)
                .bind(tenant)
                .bind(setting.name.as_str())
                .fetch_one(pool)
                .await?
        }))
    }

    async fn delete_setting(&self, tenant: &str, name: &str) -> CatalogResult<()> {
        on_either!(self, |pool| {
            sqlx::query(DELETE_SETTING)
                .bind(tenant)
                .bind(name)
                .execute(pool)
                .await?;
        });
        Ok(())
    }
}
