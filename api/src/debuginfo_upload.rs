//! `stackhouse debuginfo upload FILE...`: reads each ELF file's GNU build id and uploads it
//! to `PUT /api/v1/debuginfo/{build_id}` of a running Stackhouse, gzipped.

use std::path::{Path, PathBuf};

use anyhow::Context;
use stackhouse_query::native::DebugFile;

use crate::remote::{Remote, answer};

#[derive(clap::Args, Debug)]
pub struct UploadArgs {
    #[command(flatten)]
    pub remote: Remote,
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
    let path = format!("/api/v1/debuginfo/{build_id}");
    let body = crate::wire::body::gzip(&bytes, flate2::Compression::fast());
    let request = args
        .remote
        .request(client, reqwest::Method::PUT, &path)
        .query(&[("name", name)])
        .header(reqwest::header::CONTENT_TYPE, "application/octet-stream")
        .header(reqwest::header::CONTENT_ENCODING, "gzip")
        .body(body);
    let response = request
        .send()
        .await
        .with_context(|| format!("PUT {}", args.remote.url(&path)))?;
    answer(response).await?;
    Ok(build_id)
}
