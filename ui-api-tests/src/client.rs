//! What a dashboard and a collector do over the wire.

use std::collections::BTreeMap;

use serde_json::Value;

pub struct Api {
    pub base: String,
    pub tenant: Option<String>,
    client: reqwest::Client,
}

impl Api {
    pub fn new(base: impl Into<String>) -> Api {
        Api {
            base: base.into(),
            tenant: None,
            client: crate::http_client(),
        }
    }

    pub fn with_tenant(mut self, tenant: &str) -> Api {
        self.tenant = Some(tenant.into());
        self
    }

    fn get(&self, path: &str, query: &[(&str, String)]) -> reqwest::RequestBuilder {
        let mut req = self.client.get(format!("{}{path}", self.base)).query(query);
        if let Some(t) = &self.tenant {
            req = req.header("X-Scope-OrgID", t);
        }
        req
    }

    pub async fn get_json(&self, path: &str, query: &[(&str, String)]) -> (u16, Value) {
        let resp = self.get(path, query).send().await.expect("http request");
        let status = resp.status().as_u16();
        let body = resp.text().await.unwrap();
        let value = serde_json::from_str(&body).unwrap_or_else(|_| panic!("{path}: not JSON: {body}"));
        (status, value)
    }

    /// Folded flamegraph as a map; panics on a non-200 answer.
    pub async fn folded(
        &self,
        profile_type: &str,
        selector: &str,
        from: i64,
        to: i64,
    ) -> BTreeMap<String, i64> {
        let query = [
            ("profile_type", profile_type.to_string()),
            ("selector", selector.to_string()),
            ("from", from.to_string()),
            ("to", to.to_string()),
            ("format", "folded".to_string()),
        ];
        let resp = self
            .get("/api/v1/flamegraph", &query)
            .send()
            .await
            .expect("http request");
        let status = resp.status();
        let body = resp.text().await.unwrap();
        assert_eq!(status, 200, "folded flamegraph failed: {body}");
        body.lines()
            .filter(|l| !l.is_empty())
            .map(|l| {
                let (path, value) = l
                    .rsplit_once(' ')
                    .unwrap_or_else(|| panic!("bad folded line {l:?}"));
                (path.to_string(), value.parse::<i64>().unwrap())
            })
            .fold(BTreeMap::new(), |mut m, (k, v)| {
                assert!(m.insert(k.clone(), v).is_none(), "path {k:?} listed twice");
                m
            })
    }

    /// JSON flamegraph; panics on a non-200 answer.
    pub async fn flamegraph(
        &self,
        profile_type: &str,
        selector: &str,
        from: i64,
        to: i64,
        max_nodes: Option<usize>,
    ) -> Value {
        let mut query = vec![
            ("profile_type", profile_type.to_string()),
            ("selector", selector.to_string()),
            ("from", from.to_string()),
            ("to", to.to_string()),
        ];
        if let Some(n) = max_nodes {
            query.push(("max_nodes", n.to_string()));
        }
        let (status, body) = self.get_json("/api/v1/flamegraph", &query).await;
        assert_eq!(status, 200, "flamegraph failed: {body}");
        body
    }

    pub async fn stats(&self) -> Value {
        let (status, body) = self.get_json("/api/v1/stats", &[]).await;
        assert_eq!(status, 200, "stats failed: {body}");
        body
    }

    /// POST an OTLP/HTTP body; returns (status, content type, body).
    pub async fn post_otlp(&self, content_type: &str, gzip: bool, body: Vec<u8>) -> (u16, String, Vec<u8>) {
        let mut req = self
            .client
            .post(format!("{}/v1development/profiles", self.base))
            .header("Content-Type", content_type);
        if gzip {
            req = req.header("Content-Encoding", "gzip");
        }
        if let Some(t) = &self.tenant {
            req = req.header("X-Scope-OrgID", t);
        }
        let resp = req.body(body).send().await.expect("http request");
        let status = resp.status().as_u16();
        let ct = resp
            .headers()
            .get("content-type")
            .map(|v| v.to_str().unwrap().to_string())
            .unwrap_or_default();
        (status, ct, resp.bytes().await.unwrap().to_vec())
    }
}

pub fn gzip(data: &[u8]) -> Vec<u8> {
    use std::io::Write;
    let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
    enc.write_all(data).unwrap();
    enc.finish().unwrap()
}
