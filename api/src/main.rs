//! The `stackhouse` binary.

use clap::{Parser, Subcommand};

use stackhouse_api::config::ServeArgs;

#[derive(Parser, Debug)]
#[command(name = "stackhouse", version, about = "Profile storage and query backend")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Run the server: OTLP receivers, the query API and the storage writer.
    Serve(ServeArgs),
}

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    match cli.command {
        Command::Serve(args) => {
            stackhouse_api::telemetry::init(args.log_format);
            let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
            runtime.block_on(stackhouse_api::server::run(args))
        }
    }
}
