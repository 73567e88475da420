//! `switchboard`: the hub daemon and the commands that drive it.

use std::net::SocketAddr;
use std::path::PathBuf;
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
    Serve {
        /// Hub directory (default: $SWITCHBOARD_DIR, else $XDG_RUNTIME_DIR/switchboard,
        /// else /tmp/switchboard-<uid>).
        #[arg(long)]
        dir: Option<PathBuf>,
        /// Address of the WebSocket and metrics listener (port 0 picks a free one).
        #[arg(long, default_value = "127.0.0.1:0")]
        ws: SocketAddr,
        /// Serve the Unix socket only: no WebSocket, no /metrics.
        #[arg(long, conflicts_with = "ws")]
        no_ws: bool,
        /// TOML config file: principals, grants, origins, limits.
        #[arg(long)]
        config: Option<PathBuf>,
    },
    /// Make the running hub re-read its config file.
    Reload {
        /// Hub directory (as for `serve`).
        #[arg(long)]
        dir: Option<PathBuf>,
    },
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
            Command::Serve {
                dir,
                ws,
                no_ws,
                config,
            } => serve::serve(dir, (!no_ws).then_some(ws), config).await,
            Command::Reload { dir } => serve::reload(dir).await,
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

/// Logs go to stderr; `RUST_LOG` filters them (default: info).
fn init_logging() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .init();
}
