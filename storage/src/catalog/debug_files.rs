//! Debug files: ELF files with debug information a tenant uploaded, by build id.

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

use super::CatalogResult;
use super::backend::{SqlCatalog, on_either};

/// A debug information file (ELF) a tenant uploaded, kept at `object_key`.
#[derive(Clone, Debug, PartialEq, Eq, sqlx::FromRow, Serialize, Deserialize)]
pub struct DebugFile {
    /// GNU build id, lowercase hex.
    pub build_id: String,
    pub object_key: String,
    /// The name it was uploaded with, for listing; may be empty.
    pub file_name: String,
    pub size_bytes: i64,
    pub uploaded_at_millis: i64,
}

#[async_trait]
pub trait DebugFileCatalog: Send + Sync {
    /// Every debug file of `tenant`, sorted by build id.
    async fn debug_files(&self, tenant: &str) -> CatalogResult<Vec<DebugFile>>;

    /// The debug file of `build_id` (lowercase hex), if `tenant` uploaded one.
    async fn debug_file(&self, tenant: &str, build_id: &str) -> CatalogResult<Option<DebugFile>>;

    /// Records a stored debug file, replacing the row of an earlier upload of its build id.
    async fn put_debug_file(&self, tenant: &str, file: &DebugFile) -> CatalogResult<()>;

    /// Forgets a debug file; false when there was none (the caller deletes the object).
    async fn delete_debug_file(&self, tenant: &str, build_id: &str) -> CatalogResult<bool>;
}

const DEBUG_FILES: &str = "SELECT build_id, object_key, file_name, size_bytes, uploaded_at_millis
    FROM debuginfo WHERE tenant = $1 ORDER BY build_id";

const DEBUG_FILE: &str = "SELECT build_id, object_key, file_name, size_bytes, uploaded_at_millis
    FROM debuginfo WHERE tenant = $1 AND build_id = $2";

/// A new upload of a build id replaces the row (the object under the same key was
/// overwritten before).
const PUT_DEBUG_FILE: &str = "INSERT INTO debuginfo
    (tenant, build_id, object_key, file_name, size_bytes, uploaded_at_millis) VALUES ($1, $2, $3, $4, $5, $6)
    ON CONFLICT (tenant, build_id) DO UPDATE SET object_key = excluded.object_key,
        file_name = excluded.file_name, size_bytes = excluded.size_bytes,
        uploaded_at_millis = excluded.uploaded_at_millis";

const DELETE_DEBUG_FILE: &str = "DELETE FROM debuginfo WHERE tenant = $1 AND build_id = $2";

#[async_trait]
impl DebugFileCatalog for SqlCatalog {
    async fn debug_files(&self, tenant: &str) -> CatalogResult<Vec<DebugFile>> {
        Ok(on_either!(self, |pool| sqlx::query_as(DEBUG_FILES)
            .bind(tenant)
            .fetch_all(pool)
            .await?))
    }

    async fn debug_file(&self, tenant: &str, build_id: &str) -> CatalogResult<Option<DebugFile>> {
        Ok(on_either!(self, |pool| sqlx::query_as(DEBUG_FILE)
            .bind(tenant)
            .bind(build_id)
            .fetch_optional(pool)
            .await?))
    }

    async fn put_debug_file(&self, tenant: &str, file: &DebugFile) -> CatalogResult<()> {
        on_either!(self, |pool| {
            sqlx::query(PUT_DEBUG_FILE)
                .bind(tenant)
                .bind(file.build_id.as_str())
                .bind(file.object_key.as_str())
                .bind(file.file_name.as_str())
                .bind(file.size_bytes)
                .bind(file.uploaded_at_millis)
                .execute(pool)
                .await?;
        });
        Ok(())
    }

    // Looked up first: the affected-row count has no backend-independent accessor. A
    // delete racing another tells both callers the file was there, which is harmless.
    async fn delete_debug_file(&self, tenant: &str, build_id: &str) -> CatalogResult<bool> {
        let existed = self.debug_file(tenant, build_id).await?.is_some();
        on_either!(self, |pool| {
            sqlx::query(DELETE_DEBUG_FILE)
                .bind(tenant)
                .bind(build_id)
                .execute(pool)
                .await?;
        });
        Ok(existed)
    }
}
