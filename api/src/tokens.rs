//! `stackhouse tenant token create|list|revoke`: tenant tokens for `serve --auth required`,
//! written straight to the catalog the server uses.

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Context;
use clap::{Args, Subcommand};
use stackhouse_storage::catalog::{TokenCatalog, open_catalog, redact_password};
use stackhouse_storage::clock::{self, Clock};

use crate::auth;

#[derive(Args, Debug)]
pub struct TokenArgs {
    /// Folder of the embedded defaults; the catalog is `<data-dir>/catalog.db` unless
    /// `--catalog` names another.
    #[arg(long, env = "STACKHOUSE_DATA_DIR", default_value = "./data", global = true)]
    pub data_dir: PathBuf,

    /// Catalog URL, as `serve --catalog`.
    #[arg(long, env = "STACKHOUSE_CATALOG", global = true)]
    pub catalog: Option<String>,

    #[command(subcommand)]
    pub command: TokenCommand,
}

#[derive(Subcommand, Debug)]
pub enum TokenCommand {
    /// Make a token for a tenant and print it; it is shown only this once.
    Create {
        /// The tenant the token acts as.
        #[arg(long)]
        tenant: String,
        /// What the token is for, as `list` shows it.
        #[arg(long, default_value = "")]
        name: String,
        /// The token may also administer its tenant: request and cancel deletions.
        #[arg(long)]
        admin: bool,
        /// Another tenant the token may read (`X-Scope-OrgID: own|other`); repeatable.
        /// It never writes to or administers it.
        #[arg(long = "read", value_name = "TENANT")]
        reads: Vec<String>,
    },
    /// List tokens (never their secrets), revoked ones included.
    List {
        /// Only this tenant's.
        #[arg(long)]
        tenant: Option<String>,
    },
    /// Revoke a token by the id `create` and `list` print.
    Revoke { id: String },
}

/// Runs one command; false when it failed in a way to report by exit status (an unknown id).
pub async fn run(args: TokenArgs) -> anyhow::Result<bool> {
    let url = crate::config::catalog_url(args.catalog.as_deref(), &args.data_dir)?;
    if args.catalog.is_none() {
        std::fs::create_dir_all(&args.data_dir)
            .with_context(|| format!("creating data dir {}", args.data_dir.display()))?;
    }
    let catalog: Arc<dyn TokenCatalog> = open_catalog(&url)
        .await
        .with_context(|| format!("opening catalog {}", redact_password(&url)))?;
    let clock = clock::system();
    match args.command {
        TokenCommand::Create {
            tenant,
            name,
            admin,
            reads,
        } => create(catalog.as_ref(), &*clock, &tenant, &name, admin, &reads).await,
        TokenCommand::List { tenant } => list(catalog.as_ref(), tenant.as_deref()).await,
        TokenCommand::Revoke { id } => {
            if catalog
                .revoke_token(&id, clock.now_millis())
                .await
                .context("revoking the token")?
            {
                println!("revoked {id}");
                Ok(true)
            } else {
                eprintln!("no token has id {id}");
                Ok(false)
            }
        }
    }
}

async fn create(
    catalog: &dyn TokenCatalog,
    clock: &dyn Clock,
    tenant: &str,
    name: &str,
    admin: bool,
    reads: &[String],
) -> anyhow::Result<bool> {
    for t in std::iter::once(tenant).chain(reads.iter().map(String::as_str)) {
        crate::tenant::parse(Some(t.as_bytes())).map_err(|e| anyhow::anyhow!(e))?;
    }
    let issued = auth::issue(tenant, name, admin, reads, clock.now_millis())?;
    catalog
        .create_token(&issued.token, &issued.sha256_hex)
        .await
        .context("storing the token")?;
    println!("token: {}", issued.secret);
    println!("id: {}", issued.token.id);
    println!("tenant: {tenant}");
    if admin {
        println!("admin: yes");
    }
    if !reads.is_empty() {
        println!("also reads: {}", reads.join(", "));
    }
    eprintln!("keep the token now: only its hash is stored, so it cannot be shown again");
    Ok(true)
}

async fn list(catalog: &dyn TokenCatalog, tenant: Option<&str>) -> anyhow::Result<bool> {
    let tokens = catalog.tokens(tenant).await.context("listing tokens")?;
    let time = |millis: i64| {
        chrono::DateTime::from_timestamp_millis(millis)
            .map(|t| t.format("%Y-%m-%dT%H:%M:%SZ").to_string())
            .unwrap_or_else(|| millis.to_string())
    };
    println!(
        "{:<16}  {:<24}  {:<20}  {:<20}  {:<5}  {:<24}  NAME",
        "ID", "TENANT", "CREATED", "REVOKED", "ADMIN", "ALSO READS"
    );
    for token in tokens {
        let revoked = token.revoked_at_millis.map(time).unwrap_or_else(|| "-".into());
        println!(
            "{:<16}  {:<24}  {:<20}  {:<20}  {:<5}  {:<24}  {}",
            token.id,
            token.tenant,
            time(token.created_at_millis),
            revoked,
            if token.admin { "yes" } else { "no" },
            if token.reads.is_empty() {
                "none"
            } else {
                &token.reads
            },
            token.name
        );
    }
    Ok(true)
}
