//! `switchboard-floor --socket PATH`: the benchmark's floor relay (see
//! `switchboard_bench::floor`). Runs until SIGTERM or SIGINT.

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Context;
use clap::Parser;
use switchboard_bench::floor::Relay;
use tokio::net::UnixListener;
use tokio::signal::unix::{signal, SignalKind};

#[derive(Parser)]
#[command(
    name = "switchboard-floor",
    about = "A minimal newline-delimited relay between Unix socket connections (the benchmark floor)"
)]
struct Args {
    /// Unix socket to listen on (replaced if it exists).
    #[arg(long)]
    socket: PathBuf,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let _ = std::fs::remove_file(&args.socket);
    let listener = UnixListener::bind(&args.socket)
        .with_context(|| format!("cannot listen on {}", args.socket.display()))?;
    let mut terminate = signal(SignalKind::terminate())?;
    let mut interrupt = signal(SignalKind::interrupt())?;
    let relay = Arc::new(Relay::default());
    let outcome = tokio::select! {
        served = relay.serve(listener) => served.context("accept failed"),
        _ = terminate.recv() => Ok(()),
        _ = interrupt.recv() => Ok(()),
    };
    let _ = std::fs::remove_file(&args.socket);
    outcome
}
