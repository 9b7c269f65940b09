//! How the command line's client subcommands (`import`, `debuginfo upload`, `delete`) reach
//! a running Stackhouse: its URL, the tenant and the token, sent alike by each.

use anyhow::Context;

#[derive(clap::Args, Debug, Clone)]
pub struct Remote {
    /// Base URL of the Stackhouse HTTP listener.
    #[arg(long, env = "STACKHOUSE_URL", default_value = "http://127.0.0.1:4040")]
    pub url: String,
    /// Tenant (`X-Scope-OrgID`).
    #[arg(long, env = "STACKHOUSE_TENANT")]
    pub tenant: Option<String>,
    /// Tenant token, for a server run with `--auth required`.
    #[arg(long, env = "STACKHOUSE_TOKEN", hide_env_values = true)]
    pub token: Option<String>,
}

impl Remote {
    /// `url` joined with `path` (which starts with `/`).
    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.url.trim_end_matches('/'))
    }

    /// A request to `path` carrying the tenant and the token.
    pub fn request(
        &self,
        client: &reqwest::Client,
        method: reqwest::Method,
        path: &str,
    ) -> reqwest::RequestBuilder {
        self.with_credentials(client.request(method, self.url(path)))
    }

    /// `request` with the tenant and the token added.
    pub fn with_credentials(&self, mut request: reqwest::RequestBuilder) -> reqwest::RequestBuilder {
        if let Some(tenant) = &self.tenant {
            request = request.header("X-Scope-OrgID", tenant);
        }
        if let Some(token) = &self.token {
            request = request.bearer_auth(token);
        }
        request
    }
}

/// The body of a successful answer; else an error with its status and the server's message.
pub async fn answer(response: reqwest::Response) -> anyhow::Result<bytes::Bytes> {
    let status = response.status();
    let body = response.bytes().await.context("reading the answer")?;
    if status.is_success() {
        return Ok(body);
    }
    let text = String::from_utf8_lossy(&body).into_owned();
    let message = serde_json::from_str::<serde_json::Value>(&text)
        .ok()
        .and_then(|v| v["error"].as_str().map(str::to_string))
        .unwrap_or(text);
    anyhow::bail!("{status}: {message}")
}
