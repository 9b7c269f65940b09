//! Per-tenant exceptions to a flag: `--tenant-<flag> tenant=value`, repeatable (the config
//! file's `tenants:` section becomes these flags, see [`super::file`]). Each setting
//! resolves to one [`PerTenant`].

pub use stackhouse_storage::per_tenant::PerTenant;

/// A per-tenant flag value, `tenant=value`: the tenant and the value, unparsed.
pub fn tenant_override(s: &str) -> Result<(&str, &str), String> {
    let (tenant, value) = s
        .split_once('=')
        .ok_or_else(|| format!("expected tenant=value, got {s:?}"))?;
    if tenant.is_empty() {
        return Err(format!("empty tenant in {s:?}"));
    }
    Ok((tenant, value))
}

/// A `tenant=N` flag value, the number parsed.
pub fn tenant_value<T: std::str::FromStr>(s: &str) -> Result<(String, T), String> {
    let (tenant, value) = tenant_override(s)?;
    let value = value.parse().map_err(|_| format!("bad number in {s:?}"))?;
    Ok((tenant.to_string(), value))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tenant_values_and_overrides() {
        assert_eq!(tenant_value::<u64>("a=5"), Ok(("a".to_string(), 5)));
        assert!(tenant_value::<u64>("a=x").is_err());
        assert!(tenant_value::<u64>("=5").is_err());
        assert!(tenant_value::<u64>("5").is_err());
        let limits = PerTenant::new(10, &[("big".to_string(), 100)]);
        assert_eq!(limits.of("big"), 100);
        assert_eq!(limits.of("other"), 10);
    }
}
