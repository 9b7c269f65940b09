//! `stackhouse debuginfo upload FILE...`: reads each ELF file's GNU build id and uploads it
//! to `PUT /api/v1/debuginfo/{build_id}` of a running Stackhouse, gzipped.

use std::path::{Path, PathBuf};

use anyhow::Context;
use stackhouse_query::native::DebugFile;

#[derive(clap::Args, Debug)]
pub struct UploadArgs {
    /// Base URL of the Stackhouse HTTP listener.
    #[arg(long, env = "STACKHOUSE_URL", default_value = "http://127.0.0.1:4040")]
    pub url: String,
    /// Tenant (`X-Scope-OrgID`).
    #[arg(long, env = "STACKHOUSE_TENANT")]
    pub tenant: Option<String>,
    /// Tenant token, for a server run with `--auth required`.
    #[arg(long, env = "STACKHOUSE_TOKEN", hide_env_values = true)]
    pub token: Option<String>,
    /// ELF files with DWARF or a symbol table: binaries, shared libraries, or debug files
    /// split off with `objcopy --only-keep-debug`.
    #[arg(required = true, value_name = "FILE")]
    pub files: Vec<PathBuf>,
}

/// Uploads every file, printing one line per file. Returns whether all were stored.
pub async fn run(args: UploadArgs) -> anyhow::Result<bool> {
    let client = reqwest::Client::builder()
        .timeout(std::time::Duration::from_secs(600))
        .build()
        .context("building the HTTP client")?;
    let mut all = true;
    for path in &args.files {
        match upload(&client, &args, path).await {
            Ok(build_id) => println!("uploaded {} (build id {build_id})", path.display()),
            Err(e) => {
                all = false;
                println!("rejected {}: {e:#}", path.display());
            }
        }
    }
    Ok(all)
}

async fn upload(client: &reqwest::Client, args: &UploadArgs, path: &Path) -> anyhow::Result<String> {
    let bytes = std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
    let build_id = DebugFile::parse(&bytes)?
        .build_id_hex()
        .context("the file has no GNU build id note (link with --build-id)")?;
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let url = format!("{}/api/v1/debuginfo/{build_id}", args.url.trim_end_matches('/'));
    let body = crate::wire::body::gzip(&bytes, flate2::Compression::fast());
    let mut request = client
        .put(&url)
        .query(&[("name", name)])
        .header(reqwest::header::CONTENT_TYPE, "application/octet-stream")
        .header(reqwest::header::CONTENT_ENCODING, "gzip")
        .body(body);
    if let Some(tenant) = &args.tenant {
        request = request.header("X-Scope-OrgID", tenant);
    }
    if let Some(token) = &args.token {
        request = request.bearer_auth(token);
    }
    let response = request.send().await.with_context(|| format!("PUT {url}"))?;
    let status = response.status();
    if !status.is_success() {
        let text = response.text().await.unwrap_or_default();
        let message = serde_json::from_str::<serde_json::Value>(&text)
            .ok()
            .and_then(|v| v["error"].as_str().map(str::to_string))
            .unwrap_or(text);
        anyhow::bail!("{status}: {message}");
    }
    Ok(build_id)
}
