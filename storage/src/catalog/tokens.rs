//! Access tokens: only the SHA-256 of each secret is stored.

use async_trait::async_trait;

use super::CatalogResult;
use super::backend::{SqlCatalog, on_either};
use crate::model::member_tenants;

/// An access token of one tenant, as listed: never the secret.
#[derive(Clone, Debug, PartialEq, Eq, sqlx::FromRow)]
pub struct TenantToken {
    pub id: String,
    pub tenant: String,
    pub name: String,
    pub created_at_millis: i64,
    pub revoked_at_millis: Option<i64>,
    /// May also administer the tenant (deletion requests).
    pub admin: bool,
    /// Other tenants it may read, joined by `|`; empty for none.
    pub reads: String,
}

impl TenantToken {
    /// Whether the token may read `tenant`'s data.
    pub fn may_read(&self, tenant: &str) -> bool {
        // An empty list splits into one empty name, which no tenant has.
        tenant == self.tenant || member_tenants(&self.reads).any(|t| t == tenant)
    }
}

#[async_trait]
pub trait TokenCatalog: Send + Sync {
    /// Stores a new access token of `token.tenant`; only the SHA-256 of its secret (hex).
    async fn create_token(&self, token: &TenantToken, sha256_hex: &str) -> CatalogResult<()>;

    /// The tokens of `tenant` (every tenant's when `None`), oldest first, revoked included.
    async fn tokens(&self, tenant: Option<&str>) -> CatalogResult<Vec<TenantToken>>;

    /// Marks a token revoked (a second revocation keeps the first time); false when no
    /// token has this id.
    async fn revoke_token(&self, id: &str, at_millis: i64) -> CatalogResult<bool>;

    /// The token whose secret hashes to `sha256_hex`, revoked or not.
    async fn token_by_hash(&self, sha256_hex: &str) -> CatalogResult<Option<TenantToken>>;
}

const CREATE_TOKEN: &str = "INSERT INTO tenant_tokens
    (id, tenant, name, token_sha256, created_at_millis, admin, reads) VALUES ($1, $2, $3, $4, $5, $6, $7)";

const TOKENS: &str = "SELECT id, tenant, name, created_at_millis, revoked_at_millis, admin, reads
    FROM tenant_tokens ORDER BY created_at_millis, id";

const TOKENS_OF_TENANT: &str = "SELECT id, tenant, name, created_at_millis, revoked_at_millis, admin, reads
    FROM tenant_tokens WHERE tenant = $1 ORDER BY created_at_millis, id";

const TOKEN_BY_HASH: &str = "SELECT id, tenant, name, created_at_millis, revoked_at_millis, admin, reads
    FROM tenant_tokens WHERE token_sha256 = $1";

/// Revoking twice keeps the first time; `RETURNING` tells whether the id exists.
const REVOKE_TOKEN: &str = "UPDATE tenant_tokens
    SET revoked_at_millis = COALESCE(revoked_at_millis, $2) WHERE id = $1 RETURNING id";

#[async_trait]
impl TokenCatalog for SqlCatalog {
    async fn create_token(&self, token: &TenantToken, sha256_hex: &str) -> CatalogResult<()> {
        on_either!(self, |pool| {
            sqlx::query(CREATE_TOKEN)
                .bind(token.id.as_str())
                .bind(token.tenant.as_str())
                .bind(token.name.as_str())
                .bind(sha256_hex)
                .bind(token.created_at_millis)
                .bind(token.admin)
                .bind(token.reads.as_str())
                .execute(pool)
                .await?;
        });
        Ok(())
    }

    async fn tokens(&self, tenant: Option<&str>) -> CatalogResult<Vec<TenantToken>> {
        Ok(on_either!(self, |pool| {
            let query = match tenant {
                Some(tenant) => sqlx::query_as(TOKENS_OF_TENANT).bind(tenant),
                None => sqlx::query_as(TOKENS),
            };
            query.fetch_all(pool).await?
        }))
    }

    async fn revoke_token(&self, id: &str, at_millis: i64) -> CatalogResult<bool> {
        let row: Option<(String,)> = on_either!(self, |pool| sqlx::query_as(REVOKE_TOKEN)
            .bind(id)
            .bind(at_millis)
            .fetch_optional(pool)
            .await?);
        Ok(row.is_some())
    }

    async fn token_by_hash(&self, sha256_hex: &str) -> CatalogResult<Option<TenantToken>> {
        Ok(on_either!(self, |pool| sqlx::query_as(TOKEN_BY_HASH)
            .bind(sha256_hex)
            .fetch_optional(pool)
            .await?))
    }
}
