//! A client of debuginfod servers (`GET /buildid/{id}/debuginfo`, then `/executable`),
//! asked in the order configured, with a negative cache: a build id no server has is not
//! asked for again until the cache entry expires.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use url::Url;

/// Entries of the negative cache before the expired ones are swept.
const NEGATIVE_SWEEP_AT: usize = 1 << 16;

pub(crate) struct Debuginfod {
    urls: Vec<Url>,
    client: reqwest::Client,
    max_bytes: usize,
    negative_ttl: Duration,
    /// Build id → when it was found missing everywhere.
    missing: Mutex<HashMap<String, Instant>>,
}

impl Debuginfod {
    pub(super) fn new(
        urls: Vec<Url>,
        max_bytes: usize,
        negative_ttl: Duration,
        timeout: Duration,
    ) -> Debuginfod {
        let client = reqwest::Client::builder()
            .timeout(timeout)
            .user_agent(concat!("stackhouse/", env!("CARGO_PKG_VERSION")))
            .build()
            .unwrap_or_default();
        Debuginfod {
            urls,
            client,
            max_bytes,
            negative_ttl,
            missing: Mutex::default(),
        }
    }

    /// Whether `build_id` was found missing less than the negative TTL ago.
    pub(super) fn known_missing(&self, build_id: &str) -> bool {
        let missing = self.missing.lock().unwrap_or_else(|e| e.into_inner());
        missing
            .get(build_id)
            .is_some_and(|at| at.elapsed() < self.negative_ttl)
    }

    /// Remembers that no server has a usable file for `build_id`.
    pub(super) fn remember_missing(&self, build_id: &str) {
        let mut missing = self.missing.lock().unwrap_or_else(|e| e.into_inner());
        if missing.len() >= NEGATIVE_SWEEP_AT {
            let ttl = self.negative_ttl;
            missing.retain(|_, at| at.elapsed() < ttl);
        }
        missing.insert(build_id.to_string(), Instant::now());
    }

    /// Where `build_id` may be found, best first: each server's debug info, then its
    /// executable (whose symbol table may still name functions). The caller fetches them
    /// in turn until one will do, then calls [`Debuginfod::remember_missing`] if none did.
    pub(super) fn candidates(&self, build_id: &str) -> Vec<String> {
        self.urls
            .iter()
            .flat_map(|base| {
                let base = base.as_str().trim_end_matches('/');
                ["debuginfo", "executable"].map(|kind| format!("{base}/buildid/{build_id}/{kind}"))
            })
            .collect()
    }

    /// The file at `url`; `None` when the server does not have it or failed (logged).
    pub(super) async fn fetch(&self, url: &str) -> Option<Vec<u8>> {
        match self.get(url).await {
            Ok(found) => found,
            Err(e) => {
                tracing::warn!(%url, error = %e, "debuginfod request failed");
                None
            }
        }
    }

    /// The body of a 200 answer; `None` for 404 and the like.
    async fn get(&self, url: &str) -> Result<Option<Vec<u8>>, String> {
        let mut response = self.client.get(url).send().await.map_err(|e| e.to_string())?;
        if !response.status().is_success() {
            return match response.status().as_u16() {
                404 | 406 | 410 => Ok(None),
                status => Err(format!("status {status}")),
            };
        }
        if response
            .content_length()
            .is_some_and(|n| n > self.max_bytes as u64)
        {
            return Err(format!("file larger than {} bytes", self.max_bytes));
        }
        let mut body = Vec::new();
        while let Some(chunk) = response.chunk().await.map_err(|e| e.to_string())? {
            if body.len() + chunk.len() > self.max_bytes {
                return Err(format!("file larger than {} bytes", self.max_bytes));
            }
            body.extend_from_slice(&chunk);
        }
        Ok(Some(body))
    }
}
