//! `switchboard`: the hub daemon and the commands that drive it.
//!
//! Each subcommand lives in its own module with its own `clap::Args`; this
//! file only lists them and runs the chosen one.

use std::process::ExitCode;

use clap::{Parser, Subcommand};

mod serve;

#[derive(Parser)]
#[command(
    name = "switchboard",
    version,
    about = "A per-user hub for AI-agent tooling"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run the hub in the foreground until SIGTERM or SIGINT (SIGHUP reloads the config).
    Serve(serve::ServeArgs),
    /// Make the running hub re-read its config file.
    Reload(serve::DirArgs),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    init_logging();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("switchboard: cannot start the async runtime: {error}");
            return ExitCode::FAILURE;
        }
    };
    let outcome = runtime.block_on(async {
        match cli.command {
            Command::Serve(args) => serve::serve(args).await,
            Command::Reload(args) => serve::reload(args).await,
        }
    });
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("switchboard: {error:#}");
            ExitCode::FAILURE
        }
    }
}

/// Logs go to stderr (stdout is for command output, and for `mcp`/`acp` it
/// carries the protocol); `RUST_LOG` filters them (default: info).
fn init_logging() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .init();
}
