//! The `stackhouse` binary.

use clap::{Parser, Subcommand};

use stackhouse_api::config::ServeArgs;
use stackhouse_api::import::ImportArgs;

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
}

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    match cli.command {
        Command::Serve(args) => {
            stackhouse_api::telemetry::init(args.log_format);
            let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
            runtime.block_on(stackhouse_api::server::run(*args))
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
