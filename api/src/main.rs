//! The `stackhouse` binary.

// One dependency list serves all of the package's tests, benches and binaries.
#![allow(unused_crate_dependencies)]

use std::ffi::OsString;
use std::path::PathBuf;

use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};

use stackhouse_api::config::{self, ServeArgs};
use stackhouse_api::debuginfo_upload::UploadArgs;
use stackhouse_api::import::ImportArgs;
use stackhouse_api::tokens::TokenArgs;

#[derive(Parser, Debug)]
#[command(name = "stackhouse", version, about = "Profile storage and query backend")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Run the server: OTLP receivers, the query API, the storage writer and the compactor
    /// (see `--role`).
    // Boxed: the serve flags are large, and clap parses this enum once.
    Serve(Box<ServeArgs>),
    /// Send profile files (OTLP, pprof, JFR, speedscope, folded; gzipped or not) to a
    /// running Stackhouse. Exits non-zero if any file was rejected.
    Import(ImportArgs),
    /// Configuration files.
    Config {
        #[command(subcommand)]
        command: ConfigCommand,
    },
    /// Debug files that name native frames in flamegraphs.
    Debuginfo {
        #[command(subcommand)]
        command: DebuginfoCommand,
    },
    /// A tenant's deletion requests on a running Stackhouse (admin tokens only).
    Delete(stackhouse_api::delete_cli::DeleteArgs),
    /// Tenants' access tokens, for `serve --auth required`.
    Tenant {
        #[command(subcommand)]
        command: TenantCommand,
    },
}

#[derive(Subcommand, Debug)]
enum TenantCommand {
    /// Create, list and revoke tokens.
    Token(TokenArgs),
}

#[derive(Subcommand, Debug)]
enum DebuginfoCommand {
    /// Upload ELF files (binaries, libraries, split debug files) by their GNU build ids.
    /// Exits non-zero if any file was rejected.
    Upload(UploadArgs),
}

#[derive(Subcommand, Debug)]
enum ConfigCommand {
    /// Print a config file for `serve --config`, every flag at its default.
    Example,
}

/// The command line, with the settings of a `serve --config` file added under it.
fn parse_cli() -> anyhow::Result<Cli> {
    let mut argv: Vec<OsString> = std::env::args_os().collect();
    let matches = Cli::command().get_matches_from(argv.clone());
    if let Some(("serve", serve)) = matches.subcommand()
        && let Some(path) = serve.get_one::<PathBuf>("config")
    {
        let extra = config::file::flags(&config::serve_command(), serve, path)?;
        argv.extend(extra.into_iter().map(OsString::from));
        return Ok(Cli::parse_from(argv));
    }
    Ok(Cli::from_arg_matches(&matches)?)
}

fn main() -> anyhow::Result<()> {
    let cli = parse_cli()?;
    match cli.command {
        Command::Config {
            command: ConfigCommand::Example,
        } => {
            print!("{}", config::example::example(&config::serve_command()));
            Ok(())
        }
        Command::Serve(args) => {
            stackhouse_api::telemetry::init(args.log_format);
            let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
            runtime.block_on(stackhouse_api::server::run(*args))
        }
        Command::Tenant {
            command: TenantCommand::Token(args),
        } => {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()?;
            if !runtime.block_on(stackhouse_api::tokens::run(args))? {
                std::process::exit(1);
            }
            Ok(())
        }
        Command::Debuginfo {
            command: DebuginfoCommand::Upload(args),
        } => {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()?;
            if !runtime.block_on(stackhouse_api::debuginfo_upload::run(args))? {
                std::process::exit(1);
            }
            Ok(())
        }
        Command::Delete(args) => {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()?;
            runtime.block_on(stackhouse_api::delete_cli::run(args))
        }
        Command::Import(args) => {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()?;
            if !runtime.block_on(stackhouse_api::import::run(args))? {
                std::process::exit(1);
            }
            Ok(())
        }
    }
}
