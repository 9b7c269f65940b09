//! The query string of a request, read once; every handler reads its parameters from it.

#[cfg(test)]
use std::collections::BTreeSet;

use axum::extract::FromRequestParts;
use axum::http::request::Parts;

use crate::error::ApiError;

/// The query string as name/value pairs in order; a name may repeat.
#[derive(Debug, Default)]
pub struct QueryMap {
    pairs: Vec<(String, String)>,
    /// Names looked up, so tests can compare them with the documented parameters.
    #[cfg(test)]
    read: std::sync::Mutex<BTreeSet<String>>,
}

impl QueryMap {
    pub fn parse(raw: Option<&str>) -> QueryMap {
        QueryMap {
            pairs: url::form_urlencoded::parse(raw.unwrap_or("").as_bytes())
                .map(|(k, v)| (k.into_owned(), v.into_owned()))
                .collect(),
            #[cfg(test)]
            read: Default::default(),
        }
    }

    fn values<'a>(&'a self, name: &str) -> impl Iterator<Item = &'a str> {
        #[cfg(test)]
        self.read.lock().unwrap().insert(name.to_string());
        self.pairs
            .iter()
            .filter(move |(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }

    /// A parameter given at most once; an empty value counts as absent.
    pub fn one(&self, name: &str) -> Result<Option<String>, ApiError> {
        let mut values = self.values(name).filter(|v| !v.trim().is_empty());
        let first = values.next();
        if values.next().is_some() {
            return Err(ApiError::invalid(format!(
                "parameter {name} given more than once"
            )));
        }
        Ok(first.map(str::to_string))
    }

    /// A list parameter: every occurrence, each split at commas, empty items dropped.
    /// Every non-empty value of a repeatable parameter, each as sent: for values that may
    /// hold commas themselves, such as regular expressions.
    pub fn repeated(&self, name: &str) -> Vec<String> {
        self.values(name)
            .filter(|v| !v.trim().is_empty())
            .map(str::to_string)
            .collect()
    }

    pub fn list(&self, name: &str) -> Vec<String> {
        self.values(name)
            .flat_map(|v| v.split(','))
            .map(str::trim)
            .filter(|v| !v.is_empty())
            .map(str::to_string)
            .collect()
    }

    #[cfg(test)]
    pub fn names_read(&self) -> BTreeSet<String> {
        self.read.lock().unwrap().clone()
    }
}

impl<S: Send + Sync> FromRequestParts<S> for QueryMap {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, Self::Rejection> {
        Ok(QueryMap::parse(parts.uri.query()))
    }
}
