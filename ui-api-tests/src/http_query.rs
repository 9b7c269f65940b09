//! Raw GETs against the query API: status, headers and body as they came, so tests can
//! check errors, content types and binary formats.

use serde_json::Value;

pub struct Http {
    pub base: String,
    client: reqwest::Client,
}

#[derive(Debug)]
pub struct Response {
    pub url: String,
    pub status: u16,
    pub content_type: String,
    pub content_encoding: Option<String>,
    pub body: Vec<u8>,
}

impl Response {
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body)
            .unwrap_or_else(|e| panic!("{}: not JSON ({e}): {}", self.url, self.text()))
    }

    /// The `error` message of an error body.
    pub fn error(&self) -> String {
        let v = self.json();
        v["error"]
            .as_str()
            .unwrap_or_else(|| panic!("{}: no \"error\" string in {v}", self.url))
            .to_string()
    }

    /// Panics unless the answer is 200.
    pub fn ok(self) -> Response {
        assert_eq!(self.status, 200, "GET {} answered: {}", self.url, self.text());
        self
    }
}

/// Query parameters; `Vec` because ids may be repeated.
pub type Params = Vec<(String, String)>;

/// `profile_type`, `from` and `to`.
pub fn params(profile_type: &str, from: i64, to: i64) -> Params {
    vec![
        ("profile_type".into(), profile_type.into()),
        ("from".into(), from.to_string()),
        ("to".into(), to.to_string()),
    ]
}

/// `base` plus extra pairs.
pub fn with(mut base: Params, extra: &[(&str, &str)]) -> Params {
    base.extend(extra.iter().map(|(k, v)| (k.to_string(), v.to_string())));
    base
}

impl Http {
    pub fn new(base: impl Into<String>) -> Http {
        Http {
            base: base.into(),
            client: crate::http_client(),
        }
    }

    pub async fn get(&self, path: &str, query: &Params) -> Response {
        let resp = self
            .client
            .get(format!("{}{path}", self.base))
            .query(query)
            .send()
            .await
            .unwrap_or_else(|e| panic!("GET {path}: {e}"));
        let header = |name: &str| {
            resp.headers()
                .get(name)
                .map(|v| v.to_str().unwrap_or("").to_string())
        };
        let content_type = header("content-type").unwrap_or_default();
        let content_encoding = header("content-encoding");
        let url = resp.url().to_string();
        let status = resp.status().as_u16();
        let body = resp.bytes().await.expect("response body").to_vec();
        Response {
            url,
            status,
            content_type,
            content_encoding,
            body,
        }
    }

    pub async fn json(&self, path: &str, query: &Params) -> Value {
        self.get(path, query).await.ok().json()
    }

    pub async fn text(&self, path: &str, query: &Params) -> String {
        self.get(path, query).await.ok().text()
    }
}
