//! `stackhouse delete create|list|cancel|tenant`: a tenant's deletion requests on a running
//! Stackhouse (`/api/v1/admin/deletes`), and the tenant's own deletion
//! (`/api/v1/admin/tenants/{tenant}`), with an admin token when it runs `--auth required`.

use anyhow::Context;
use clap::{Args, Subcommand};
use serde_json::{Value, json};

use crate::remote::{Remote, answer};

#[derive(Args, Debug)]
pub struct DeleteArgs {
    #[command(flatten)]
    pub remote: Remote,

    #[command(subcommand)]
    pub command: DeleteCommand,
}

#[derive(Subcommand, Debug)]
pub enum DeleteCommand {
    /// Delete what a selector matches in a range: hidden from every read at once, purged
    /// from storage after the server's `--deletion-cancel-period`.
    Create {
        /// Series selector, e.g. `{service.name="checkout"}`.
        #[arg(long)]
        selector: String,
        /// Start (inclusive): unix nanoseconds, RFC 3339, `now` or `now-<duration>`.
        #[arg(long)]
        from: String,
        /// End (exclusive), in the same forms.
        #[arg(long)]
        to: String,
    },
    /// List the tenant's deletion requests and their states.
    List,
    /// Cancel a request during its cancel period.
    Cancel { id: String },
    /// Delete the whole tenant `--tenant` names: every catalog row at once (data, series,
    /// tokens, settings, debug files), every object after the server's `--deletion-grace`.
    Tenant {
        /// The tenant's name once more: a wrong `--tenant` then deletes nothing.
        #[arg(long)]
        confirm: String,
    },
}

/// Runs one command, printing what the server answered.
pub async fn run(args: DeleteArgs) -> anyhow::Result<()> {
    let client = reqwest::Client::new();
    let remote = &args.remote;
    if let DeleteCommand::Tenant { confirm } = &args.command {
        return delete_tenant(&client, remote, confirm).await;
    }
    let (method, path, body) = match &args.command {
        DeleteCommand::Create { selector, from, to } => (
            reqwest::Method::POST,
            "/api/v1/admin/deletes".to_string(),
            Some(json!({"selector": selector, "from": from, "to": to})),
        ),
        DeleteCommand::List => (reqwest::Method::GET, "/api/v1/admin/deletes".to_string(), None),
        DeleteCommand::Cancel { id } => (
            reqwest::Method::DELETE,
            format!("/api/v1/admin/deletes/{id}"),
            None,
        ),
        DeleteCommand::Tenant { .. } => unreachable!("answered above"),
    };
    let mut request = remote.request(&client, method.clone(), &path);
    if let Some(body) = body {
        request = request.json(&body);
    }
    let response = request
        .send()
        .await
        .with_context(|| format!("{method} {}", remote.url(&path)))?;
    let body: Value = serde_json::from_slice(&answer(response).await?).context("the answer is not JSON")?;
    let requests = match body.get("requests") {
        Some(Value::Array(all)) => all.clone(),
        _ => vec![body],
    };
    println!(
        "{:<16}  {:<10}  {:<24}  {:<24}  {:>7}  {:>10}  SELECTOR",
        "ID", "STATE", "FROM", "TO", "SERIES", "SAMPLES"
    );
    for r in &requests {
        let time = |field: &str| {
            r[field]
                .as_i64()
                .and_then(|n| {
                    chrono::DateTime::from_timestamp(
                        n.div_euclid(1_000_000_000),
                        n.rem_euclid(1_000_000_000) as u32,
                    )
                })
                .map(|t| t.format("%Y-%m-%dT%H:%M:%S%.3fZ").to_string())
                .unwrap_or_default()
        };
        println!(
            "{:<16}  {:<10}  {:<24}  {:<24}  {:>7}  {:>10}  {}",
            r["id"].as_str().unwrap_or(""),
            r["state"].as_str().unwrap_or(""),
            time("from_nanos"),
            time("to_nanos"),
            r["matched_series"],
            r["matched_samples"],
            r["selector"].as_str().unwrap_or("")
        );
    }
    Ok(())
}

async fn delete_tenant(client: &reqwest::Client, remote: &Remote, confirm: &str) -> anyhow::Result<()> {
    let Some(tenant) = remote.tenant.as_deref() else {
        anyhow::bail!("name the tenant to delete with --tenant (and again with --confirm)");
    };
    if tenant != confirm {
        anyhow::bail!("--confirm {confirm:?} is not --tenant {tenant:?}: nothing deleted");
    }
    let path = format!("/api/v1/admin/tenants/{tenant}");
    let response = remote
        .request(client, reqwest::Method::DELETE, &path)
        .send()
        .await
        .with_context(|| format!("DELETE {}", remote.url(&path)))?;
    let body: Value = serde_json::from_slice(&answer(response).await?).context("the answer is not JSON")?;
    println!(
        "tenant {tenant} deleted: {} catalog rows; {} objects go after {}",
        body["catalog_rows"],
        body["objects"],
        body["objects_deleted_after_millis"]
            .as_i64()
            .and_then(chrono::DateTime::from_timestamp_millis)
            .map(|t| t.format("%Y-%m-%dT%H:%M:%S%.3fZ").to_string())
            .unwrap_or_default()
    );
    Ok(())
}
