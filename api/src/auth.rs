//! Tenant authentication (`serve --auth required`): every ingest and query request carries a
//! tenant token, as `Authorization: Bearer <token>` or as HTTP basic auth with the tenant as
//! user and the token as password (what Grafana's datasources send), on HTTP headers or gRPC
//! metadata alike. The token decides the tenant; an `X-Scope-OrgID` naming another tenant is
//! refused. Tokens live in the catalog as SHA-256 hashes (`stackhouse tenant token …`).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::extract::{Request, State};
use axum::http::{HeaderValue, Method, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use base64::Engine;
use sha2::{Digest, Sha256};
use stackhouse_storage::catalog::{TenantToken, TokenCatalog};
use stackhouse_storage::model::{TENANT_SEPARATOR, member_tenants};

pub use crate::config::AuthMode;
use crate::error::{ApiError, ErrorKind};
use crate::tenant;

/// Every token starts with this, so a leaked one is recognisable in logs and scanners.
pub const TOKEN_PREFIX: &str = "shk_";
/// Most cached token lookups; past it the cache starts over.
const CACHE_ENTRIES: usize = 10_000;

/// A new token's secret (shown once) and what is stored about it.
pub struct IssuedToken {
    pub secret: String,
    pub token: TenantToken,
    pub sha256_hex: String,
}

/// Makes a token for `tenant`: 32 random bytes from the operating system. An `admin` token
/// may also administer the tenant (deletion requests); `reads` are other tenants it may
/// read (`X-Scope-OrgID: a|b`).
pub fn issue(
    tenant: &str,
    name: &str,
    admin: bool,
    reads: &[String],
    now_millis: i64,
) -> anyhow::Result<IssuedToken> {
    let mut secret = [0u8; 32];
    let mut id = [0u8; 8];
    getrandom::fill(&mut secret).map_err(|e| anyhow::anyhow!("no randomness from the os: {e}"))?;
    getrandom::fill(&mut id).map_err(|e| anyhow::anyhow!("no randomness from the os: {e}"))?;
    let secret = format!(
        "{TOKEN_PREFIX}{}",
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(secret)
    );
    Ok(IssuedToken {
        sha256_hex: hash(&secret),
        token: TenantToken {
            id: hex::encode(id),
            tenant: tenant.to_string(),
            name: name.to_string(),
            created_at_millis: now_millis,
            revoked_at_millis: None,
            admin,
            reads: reads.join(&TENANT_SEPARATOR.to_string()),
        },
        secret,
    })
}

fn hash(secret: &str) -> String {
    hex::encode(Sha256::digest(secret.as_bytes()))
}

/// Credentials as sent: the token, and the tenant basic auth names as its user.
#[derive(Debug, PartialEq, Eq)]
struct Credentials {
    token: String,
    user: Option<String>,
}

fn credentials(authorization: &[u8]) -> Result<Credentials, ApiError> {
    let unauthenticated = |why: &str| ApiError::new(ErrorKind::Unauthenticated, why);
    let value = std::str::from_utf8(authorization)
        .map_err(|_| unauthenticated("authorization header is not valid utf-8"))?
        .trim();
    let (scheme, rest) = value.split_once(' ').unwrap_or((value, ""));
    let rest = rest.trim();
    if scheme.eq_ignore_ascii_case("bearer") && !rest.is_empty() {
        return Ok(Credentials {
            token: rest.to_string(),
            user: None,
        });
    }
    if scheme.eq_ignore_ascii_case("basic") {
        let decoded = base64::engine::general_purpose::STANDARD
            .decode(rest)
            .ok()
            .and_then(|d| String::from_utf8(d).ok())
            .ok_or_else(|| unauthenticated("basic credentials are not base64 of user:password"))?;
        let (user, password) = decoded
            .split_once(':')
            .ok_or_else(|| unauthenticated("basic credentials are not base64 of user:password"))?;
        return Ok(Credentials {
            token: password.to_string(),
            user: (!user.is_empty()).then(|| user.to_string()),
        });
    }
    Err(unauthenticated(
        "unsupported authorization scheme: expected Bearer <token> or Basic (tenant:token)",
    ))
}

/// Whether a request may administer its tenant (deletion requests): its token is an
/// admin token, or authentication is off. [`require`] puts it in the request's extensions.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Admin(pub bool);

/// Whether a request reads (and may name several tenants the token may read) or writes
/// or administers (and names the token's own tenant).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Access {
    Read,
    Write,
}

impl Access {
    /// Ingest, debug file uploads and deletions, settings changes, and administration
    /// write; everything else reads.
    fn of(method: &Method, path: &str) -> Access {
        let ingest = crate::http::INGEST_PATHS.contains(&path);
        let api_write = path.starts_with("/api/v1/") && method != Method::GET && method != Method::HEAD;
        let settings_read = matches!(
            path,
            "/settings.v1.SettingsService/Get"
                | "/settings.v1.RecordingRulesService/GetRecordingRule"
                | "/settings.v1.RecordingRulesService/ListRecordingRules"
        );
        let settings_write = path.starts_with("/settings.v1.") && !settings_read;
        if ingest || api_write || settings_write {
            Access::Write
        } else {
            Access::Read
        }
    }
}

/// Decides the tenant of each request.
pub struct Auth {
    mode: AuthMode,
    catalog: Arc<dyn TokenCatalog>,
    /// How long a token found valid is trusted without asking the catalog: a revocation
    /// takes effect within this time.
    cache_ttl: Duration,
    cache: Mutex<HashMap<String, (Instant, TenantToken)>>,
}

impl Auth {
    pub fn new(mode: AuthMode, catalog: Arc<dyn TokenCatalog>, cache_ttl: Duration) -> Auth {
        Auth {
            mode,
            catalog,
            cache_ttl,
            cache: Mutex::new(HashMap::new()),
        }
    }

    /// No authentication: the tenant header decides, as in tests and on a laptop.
    pub fn off(catalog: Arc<dyn TokenCatalog>) -> Auth {
        Auth::new(AuthMode::Off, catalog, Duration::ZERO)
    }

    /// The tenant of a write with these `Authorization` and `X-Scope-OrgID` values.
    pub async fn tenant(&self, authorization: Option<&[u8]>, org: Option<&[u8]>) -> Result<String, ApiError> {
        self.caller(authorization, org, Access::Write)
            .await
            .map(|(tenant, _)| tenant)
    }

    /// The tenants of a request (several, joined by `|`, only for a read), and whether it
    /// may administer them. A write names the token's own tenant; a read may also name the
    /// tenants the token was granted.
    async fn caller(
        &self,
        authorization: Option<&[u8]>,
        org: Option<&[u8]>,
        access: Access,
    ) -> Result<(String, Admin), ApiError> {
        let named = |org: Option<&[u8]>| {
            match access {
                Access::Read => tenant::parse_read(org),
                Access::Write => tenant::parse(org),
            }
            .map_err(ApiError::invalid)
        };
        if self.mode == AuthMode::Off {
            return named(org).map(|t| (t, Admin(true)));
        }
        let Some(authorization) = authorization else {
            return Err(ApiError::new(
                ErrorKind::Unauthenticated,
                "missing credentials: send Authorization: Bearer <token>, or basic auth with the tenant \
                 as user and the token as password",
            ));
        };
        let credentials = credentials(authorization)?;
        let token = self.lookup(&credentials.token).await?;
        if let Some(user) = credentials.user
            && user != token.tenant
        {
            return Err(not_for(&user));
        }
        let Some(org) = org else {
            return Ok((token.tenant, Admin(token.admin)));
        };
        let org = named(Some(org))?;
        for member in member_tenants(&org) {
            let allowed = match access {
                Access::Read => token.may_read(member),
                Access::Write => member == token.tenant,
            };
            if !allowed {
                return Err(not_for(member));
            }
        }
        let admin = Admin(token.admin && org == token.tenant);
        Ok((org, admin))
    }

    async fn lookup(&self, secret: &str) -> Result<TenantToken, ApiError> {
        let sha = hash(secret);
        if let Some((at, token)) = self.cache.lock().expect("auth cache lock").get(&sha)
            && at.elapsed() < self.cache_ttl
        {
            return Ok(token.clone());
        }
        let found = self.catalog.token_by_hash(&sha).await.map_err(ApiError::from)?;
        let token = found
            .filter(|t| t.revoked_at_millis.is_none())
            .ok_or_else(|| ApiError::new(ErrorKind::Unauthenticated, "invalid or revoked token"))?;
        if !self.cache_ttl.is_zero() {
            let mut cache = self.cache.lock().expect("auth cache lock");
            if cache.len() >= CACHE_ENTRIES {
                cache.clear();
            }
            cache.insert(sha, (Instant::now(), token.clone()));
        }
        Ok(token)
    }
}

fn not_for(tenant: &str) -> ApiError {
    ApiError::new(
        ErrorKind::PermissionDenied,
        format!("the token is not valid for tenant {tenant:?}"),
    )
}

/// HTTP middleware: authenticates the request and sets `X-Scope-OrgID` to its tenant, so
/// the handlers behind it read the tenant as they always have. Errors come in the format of
/// the route: Connect's for `/<package>.<Service>/<Method>`, OTLP's Status for OTLP/HTTP,
/// the JSON API's for the rest.
pub async fn require(State(auth): State<Arc<Auth>>, mut request: Request, next: Next) -> Response {
    if auth.mode == AuthMode::Off {
        request.extensions_mut().insert(Admin(true));
        return next.run(request).await;
    }
    let headers = request.headers();
    let access = Access::of(request.method(), request.uri().path());
    let outcome = auth
        .caller(
            headers.get(header::AUTHORIZATION).map(|v| v.as_bytes()),
            headers.get(tenant::HEADER).map(|v| v.as_bytes()),
            access,
        )
        .await;
    match outcome {
        Ok((tenant, admin)) => {
            let value = HeaderValue::from_str(&tenant).expect("tenant names are header-safe");
            request.headers_mut().insert(tenant::HEADER, value);
            request.extensions_mut().insert(admin);
            next.run(request).await
        }
        Err(error) => {
            let path = request.uri().path();
            let mut response = if path.split('/').nth(1).is_some_and(|first| first.contains('.')) {
                error.into_connect()
            } else if path.starts_with("/v1development/") || path.starts_with("/v1experimental/") {
                let protobuf =
                    crate::wire::body::content_type_essence(request.headers()) != "application/json";
                error.into_rpc_status(protobuf)
            } else {
                error.into_response()
            };
            response.headers_mut().insert(
                header::WWW_AUTHENTICATE,
                HeaderValue::from_static("Bearer realm=\"stackhouse\""),
            );
            response
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bearer_and_basic_credentials() {
        assert_eq!(
            credentials(b"Bearer shk_abc").unwrap(),
            Credentials {
                token: "shk_abc".into(),
                user: None
            }
        );
        let basic = format!(
            "basic {}",
            base64::engine::general_purpose::STANDARD.encode("team-a:shk_x:y")
        );
        assert_eq!(
            credentials(basic.as_bytes()).unwrap(),
            Credentials {
                token: "shk_x:y".into(),
                user: Some("team-a".into())
            }
        );
        for bad in [
            &b"Bearer"[..],
            b"Bearer   ",
            b"Token abc",
            b"Basic !!",
            b"Basic Zm9v",
            b"\xff",
        ] {
            let error = credentials(bad).unwrap_err();
            assert_eq!(error.kind, ErrorKind::Unauthenticated, "{bad:?}");
        }
    }

    #[test]
    fn writes_and_administration_are_told_from_reads_by_route() {
        let writes = [
            (Method::POST, "/v1development/profiles"),
            (Method::POST, "/v1experimental/profiles"),
            (Method::POST, "/ingest"),
            (Method::POST, "/push.v1.PusherService/Push"),
            (Method::POST, "/settings.v1.SettingsService/Set"),
            (Method::POST, "/settings.v1.SettingsService/Delete"),
            (Method::PUT, "/api/v1/debuginfo/abcd"),
            (Method::DELETE, "/api/v1/debuginfo/abcd"),
            (Method::POST, "/api/v1/admin/deletes"),
            (Method::DELETE, "/api/v1/admin/deletes/x"),
            (Method::DELETE, "/api/v1/admin/tenants/a"),
            (Method::POST, "/api/v1/recording-rules"),
            (Method::PUT, "/api/v1/recording-rules/abc"),
            (
                Method::POST,
                "/settings.v1.RecordingRulesService/UpsertRecordingRule",
            ),
            (
                Method::POST,
                "/settings.v1.RecordingRulesService/DeleteRecordingRule",
            ),
        ];
        for (method, path) in writes {
            assert_eq!(Access::of(&method, path), Access::Write, "{method} {path}");
        }
        let reads = [
            (Method::GET, "/api/v1/flamegraph"),
            (Method::GET, "/api/v1/admin/deletes"),
            (Method::POST, "/querier.v1.QuerierService/SelectMergeStacktraces"),
            (Method::POST, "/settings.v1.SettingsService/Get"),
            (
                Method::POST,
                "/settings.v1.RecordingRulesService/ListRecordingRules",
            ),
            (
                Method::POST,
                "/settings.v1.RecordingRulesService/GetRecordingRule",
            ),
            (Method::GET, "/api/v1/recording-rules"),
            (Method::GET, "/pyroscope/render"),
        ];
        for (method, path) in reads {
            assert_eq!(Access::of(&method, path), Access::Read, "{method} {path}");
        }
    }

    #[test]
    fn issued_tokens_differ_and_hash_to_what_is_stored() {
        let a = issue("t", "ci", false, &[], 1).unwrap();
        let b = issue("t", "ci", false, &[], 1).unwrap();
        assert_ne!(a.secret, b.secret);
        assert_ne!(a.token.id, b.token.id);
        assert!(a.secret.starts_with(TOKEN_PREFIX));
        assert_eq!(a.secret.len(), TOKEN_PREFIX.len() + 43);
        assert_eq!(hash(&a.secret), a.sha256_hex);
        assert_eq!(a.token.tenant, "t");
    }
}
