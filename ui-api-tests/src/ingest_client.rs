//! What Pyroscope SDKs, OTLP exporters and `stackhouse import` do over the wire: `/ingest`
//! (raw and multipart bodies), OTLP/HTTP with a layout header, and the import CLI.

use std::path::Path;
use std::process::Command;

use serde_json::Value;

use crate::server::binary;

pub struct Ingest {
    pub base: String,
    pub tenant: Option<String>,
    client: reqwest::Client,
}

/// A response as it came: status, content type, body.
#[derive(Debug)]
pub struct Answer {
    pub status: u16,
    pub content_type: String,
    pub body: Vec<u8>,
}

impl Answer {
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body)
            .unwrap_or_else(|e| panic!("answer is not JSON ({e}): {} {}", self.status, self.text()))
    }

    /// The `error` string of a JSON error body.
    pub fn error(&self) -> String {
        let v = self.json();
        v["error"]
            .as_str()
            .unwrap_or_else(|| panic!("no \"error\" string in {v}"))
            .to_string()
    }
}

/// One part of a multipart/form-data body.
pub struct Part<'a> {
    pub name: &'a str,
    pub filename: Option<&'a str>,
    pub data: &'a [u8],
}

const BOUNDARY: &str = "stackhouse-test-boundary-7d1f0a";

/// multipart/form-data, written by hand so the test does not share a library with the server.
pub fn multipart(parts: &[Part<'_>]) -> (String, Vec<u8>) {
    let mut body = Vec::new();
    for p in parts {
        body.extend_from_slice(format!("--{BOUNDARY}\r\n").as_bytes());
        let filename = p
            .filename
            .map(|f| format!("; filename=\"{f}\""))
            .unwrap_or_default();
        body.extend_from_slice(
            format!(
                "Content-Disposition: form-data; name=\"{}\"{filename}\r\nContent-Type: application/octet-stream\r\n\r\n",
                p.name
            )
            .as_bytes(),
        );
        body.extend_from_slice(p.data);
        body.extend_from_slice(b"\r\n");
    }
    body.extend_from_slice(format!("--{BOUNDARY}--\r\n").as_bytes());
    (format!("multipart/form-data; boundary={BOUNDARY}"), body)
}

impl Ingest {
    pub fn new(base: impl Into<String>) -> Ingest {
        Ingest {
            base: base.into(),
            tenant: None,
            client: crate::http_client(),
        }
    }

    pub fn with_tenant(mut self, tenant: &str) -> Ingest {
        self.tenant = Some(tenant.into());
        self
    }

    /// POST to `path` with the given headers; the tenant header when one is set.
    pub async fn post(
        &self,
        path: &str,
        query: &[(&str, String)],
        headers: &[(&str, &str)],
        body: Vec<u8>,
    ) -> Answer {
        let mut req = self.client.post(format!("{}{path}", self.base)).query(query);
        for (k, v) in headers {
            req = req.header(*k, *v);
        }
        if let Some(t) = &self.tenant {
            req = req.header("X-Scope-OrgID", t);
        }
        let resp = req
            .body(body)
            .send()
            .await
            .unwrap_or_else(|e| panic!("POST {path}: {e}"));
        let status = resp.status().as_u16();
        let content_type = resp
            .headers()
            .get("content-type")
            .map(|v| v.to_str().unwrap_or("").to_string())
            .unwrap_or_default();
        Answer {
            status,
            content_type,
            body: resp.bytes().await.unwrap().to_vec(),
        }
    }

    /// `POST /ingest` with a raw body.
    pub async fn ingest(&self, query: &[(&str, String)], body: Vec<u8>) -> Answer {
        self.post(
            "/ingest",
            query,
            &[("Content-Type", "application/octet-stream")],
            body,
        )
        .await
    }

    /// `POST /ingest` with a multipart/form-data body.
    pub async fn ingest_multipart(&self, query: &[(&str, String)], parts: &[Part<'_>]) -> Answer {
        let (content_type, body) = multipart(parts);
        self.post("/ingest", query, &[("Content-Type", &content_type)], body)
            .await
    }

    /// `POST /v1development/profiles`, optionally declaring the layout.
    pub async fn otlp(&self, content_type: &str, version: Option<&str>, body: Vec<u8>) -> Answer {
        let mut headers = vec![("Content-Type", content_type)];
        if let Some(v) = version {
            headers.push(("OTLP-Profiles-Development-Version", v));
        }
        self.post("/v1development/profiles", &[], &headers, body).await
    }
}

/// The summary `stackhouse import` prints.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ImportSummary {
    pub files: u64,
    pub profiles: u64,
    pub samples: u64,
    pub bytes: u64,
    pub rejected: u64,
}

#[derive(Debug)]
pub struct ImportRun {
    pub success: bool,
    pub stdout: String,
    pub stderr: String,
    pub summary: ImportSummary,
}

/// `imported F files: P profiles, S samples, B bytes; R rejected`.
pub fn parse_summary(stdout: &str) -> Option<ImportSummary> {
    let line = stdout
        .lines()
        .rev()
        .find(|l| l.trim_start().starts_with("imported "))?;
    let words: Vec<&str> = line
        .split(|c: char| c.is_whitespace() || c == ',' || c == ';' || c == ':')
        .filter(|w| !w.is_empty())
        .collect();
    let num_before = |unit: &str| -> Option<u64> {
        let i = words.iter().position(|w| *w == unit)?;
        words.get(i.checked_sub(1)?)?.parse().ok()
    };
    Some(ImportSummary {
        files: num_before("files").or_else(|| num_before("file"))?,
        profiles: num_before("profiles").or_else(|| num_before("profile"))?,
        samples: num_before("samples").or_else(|| num_before("sample"))?,
        bytes: num_before("bytes").or_else(|| num_before("byte"))?,
        rejected: num_before("rejected")?,
    })
}

/// Runs `stackhouse import --url URL [--service NAME] [--label k=v]... FILE...`.
pub fn import(url: &str, service: Option<&str>, labels: &[(&str, &str)], files: &[&Path]) -> ImportRun {
    let mut cmd = Command::new(binary());
    cmd.arg("import").arg("--url").arg(url);
    if let Some(s) = service {
        cmd.arg("--service").arg(s);
    }
    for (k, v) in labels {
        cmd.arg("--label").arg(format!("{k}={v}"));
    }
    cmd.args(files).env_remove("STACKHOUSE_URL");
    let out = cmd.output().expect("running stackhouse import");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let summary = parse_summary(&stdout).unwrap_or_else(|| {
        panic!("no summary line in the import output:\nstdout: {stdout}\nstderr: {stderr}")
    });
    ImportRun {
        success: out.status.success(),
        stdout,
        stderr,
        summary,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn summary_line() {
        assert_eq!(
            parse_summary("x\nimported 3 files: 7 profiles, 1200 samples, 4096 bytes; 1 rejected\n"),
            Some(ImportSummary {
                files: 3,
                profiles: 7,
                samples: 1200,
                bytes: 4096,
                rejected: 1
            })
        );
    }
}
