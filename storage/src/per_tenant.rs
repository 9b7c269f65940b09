//! A default with per-tenant exceptions: the one shape every per-tenant setting takes
//! (retention, ingest limits, rates, query limits), whether it came from a flag, the
//! config file or a test.

use std::collections::HashMap;

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PerTenant<T> {
    pub default: T,
    /// Tenants whose value differs from the default.
    pub overrides: HashMap<String, T>,
}

impl<T: Clone> PerTenant<T> {
    pub fn new(default: T, overrides: &[(String, T)]) -> PerTenant<T> {
        PerTenant {
            default,
            overrides: overrides.iter().cloned().collect(),
        }
    }

    /// The same value for every tenant.
    pub fn uniform(default: T) -> PerTenant<T> {
        PerTenant {
            default,
            overrides: HashMap::new(),
        }
    }

    /// The value of `tenant`.
    pub fn of(&self, tenant: &str) -> T {
        self.overrides.get(tenant).unwrap_or(&self.default).clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_override_wins_over_the_default_for_its_tenant_only() {
        let limits = PerTenant::new(10, &[("big".to_string(), 100)]);
        assert_eq!(limits.of("big"), 100);
        assert_eq!(limits.of("small"), 10);
        assert_eq!(PerTenant::uniform(7).of("any"), 7);
    }
}
