//! The profile types each tenant was found to have stored: a query for one of them does
//! not wait on the catalog before its own planning can start.

use std::collections::{HashMap, HashSet};
use std::sync::Mutex;

use stackhouse_storage::model::ProfileType;

/// Per tenant, the profile types queries found stored.
#[derive(Default)]
pub(crate) struct KnownTypes(Mutex<HashMap<String, HashSet<ProfileType>>>);

impl KnownTypes {
    pub(crate) fn contains(&self, tenant: &str, profile_type: &ProfileType) -> bool {
        let known = self.0.lock().unwrap_or_else(|e| e.into_inner());
        known
            .get(tenant)
            .is_some_and(|types| types.contains(profile_type))
    }

    pub(crate) fn insert(&self, tenant: &str, profile_type: &ProfileType) {
        let mut known = self.0.lock().unwrap_or_else(|e| e.into_inner());
        known
            .entry(tenant.to_string())
            .or_default()
            .insert(profile_type.clone());
    }
}
