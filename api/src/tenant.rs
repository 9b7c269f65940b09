//! The tenant of a request: `X-Scope-OrgID`, `anonymous` when absent. It becomes part of
//! object paths, so only a conservative character set is accepted.

pub const HEADER: &str = "x-scope-orgid";
pub const DEFAULT: &str = "anonymous";

pub fn parse(value: Option<&[u8]>) -> Result<String, String> {
    let Some(raw) = value else {
        return Ok(DEFAULT.to_string());
    };
    let tenant = std::str::from_utf8(raw).map_err(|_| "X-Scope-OrgID is not valid UTF-8".to_string())?;
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

/// The tenant of an HTTP request.
pub fn from_headers(headers: &http::HeaderMap) -> Result<String, crate::error::ApiError> {
    parse(headers.get(HEADER).map(|v| v.as_bytes())).map_err(crate::error::ApiError::invalid)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tenants() {
        assert_eq!(parse(None).unwrap(), "anonymous");
        assert_eq!(parse(Some(b"team-a.prod_1")).unwrap(), "team-a.prod_1");
        for bad in [&b""[..], b"..", b"a/b", b"a b", b"\xff"] {
            assert!(parse(Some(bad)).is_err(), "{bad:?}");
        }
    }
}
