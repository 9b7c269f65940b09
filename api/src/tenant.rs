//! The tenant of a request: `X-Scope-OrgID`, `anonymous` when absent. It becomes part of
//! object paths, so only a conservative character set is accepted. A read may name several
//! tenants joined by `|`, as Loki, Mimir and Tempo take them.

use stackhouse_storage::model::{is_union, member_tenants};

pub const HEADER: &str = "x-scope-orgid";
pub const DEFAULT: &str = "anonymous";

/// The one tenant a write (or an administration) names.
pub fn parse(value: Option<&[u8]>) -> Result<String, String> {
    let Some(tenant) = decoded(value)? else {
        return Ok(DEFAULT.to_string());
    };
    if is_union(tenant) {
        return Err(format!(
            "X-Scope-OrgID {tenant:?} names several tenants: only reads may, a write or an \
             administration names one"
        ));
    }
    valid(tenant)
}

/// The tenants a read names: one, or several joined by `|` (`a|b|c`), each as [`parse`]
/// takes it, repeats dropped.
pub fn parse_read(value: Option<&[u8]>) -> Result<String, String> {
    let Some(tenants) = decoded(value)? else {
        return Ok(DEFAULT.to_string());
    };
    let mut named: Vec<String> = Vec::new();
    for tenant in member_tenants(tenants) {
        let tenant = valid(tenant).map_err(|e| {
            if is_union(tenants) {
                format!("{e} (in {tenants:?})")
            } else {
                e
            }
        })?;
        if !named.contains(&tenant) {
            named.push(tenant);
        }
    }
    if named.len() > MAX_READ_TENANTS {
        return Err(format!(
            "X-Scope-OrgID names {} tenants, more than {MAX_READ_TENANTS} allowed in one read",
            named.len()
        ));
    }
    Ok(named.join("|"))
}

/// Most tenants one read may name: each is planned on its own.
pub const MAX_READ_TENANTS: usize = 64;

/// The header's value as text; `None` when absent.
fn decoded(value: Option<&[u8]>) -> Result<Option<&str>, String> {
    value
        .map(|raw| std::str::from_utf8(raw).map_err(|_| "X-Scope-OrgID is not valid UTF-8".to_string()))
        .transpose()
}

fn valid(tenant: &str) -> Result<String, String> {
    let valid = !tenant.is_empty()
        && tenant.len() <= 150
        && tenant != "."
        && tenant != ".."
        && tenant
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b));
    if valid {
        Ok(tenant.to_string())
    } else {
        Err(format!(
            "invalid X-Scope-OrgID {tenant:?}: use 1 to 150 characters of [A-Za-z0-9_.-]"
        ))
    }
}

/// The tenant of an HTTP request that writes or administers.
pub fn from_headers(headers: &http::HeaderMap) -> Result<String, crate::error::ApiError> {
    parse(headers.get(HEADER).map(|v| v.as_bytes())).map_err(crate::error::ApiError::invalid)
}

/// The tenants of an HTTP request that reads.
pub fn read_from_headers(headers: &http::HeaderMap) -> Result<String, crate::error::ApiError> {
    parse_read(headers.get(HEADER).map(|v| v.as_bytes())).map_err(crate::error::ApiError::invalid)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tenants() {
        assert_eq!(parse(None).unwrap(), "anonymous");
        assert_eq!(parse(Some(b"team-a.prod_1")).unwrap(), "team-a.prod_1");
        for bad in [&b""[..], b"..", b"a/b", b"a b", b"\xff", b"a|b"] {
            assert!(parse(Some(bad)).is_err(), "{bad:?}");
        }
        assert!(parse(Some(b"a|b")).unwrap_err().contains("several tenants"));
        assert_eq!(parse_read(Some(b"a|b|a|c")).unwrap(), "a|b|c");
        assert_eq!(parse_read(Some(b"a")).unwrap(), "a");
        for bad in [&b"a||b"[..], b"a|", b"a|b/c", b"|"] {
            assert!(parse_read(Some(bad)).is_err(), "{bad:?}");
        }
    }
}
