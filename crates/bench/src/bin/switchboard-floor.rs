//! `switchboard-floor --socket PATH`: the benchmark's floor relay (see
//! `switchboard_bench::floor`). Runs until SIGTERM or SIGINT.
//!
//! `switchboard-floor -- PROGRAM ARGS…`: runs PROGRAM and copies bytes
//! between this process's stdio and PROGRAM's (see
//! `switchboard_bench::stdio_relay`), until either side closes.

use std::ffi::OsString;
use std::path::PathBuf;
use std::sync::Arc;

use anyhow::{bail, Context};
use clap::Parser;
use switchboard_bench::floor::Relay;
use tokio::net::UnixListener;
use tokio::signal::unix::{signal, SignalKind};

#[derive(Parser)]
#[command(
    name = "switchboard-floor",
    about = "A minimal newline-delimited relay between Unix socket connections (the benchmark floor), or a byte relay over a child's stdio"
)]
struct Args {
    /// Unix socket to listen on (replaced if it exists).
    #[arg(long, conflicts_with = "command")]
    socket: Option<PathBuf>,
    /// A program (and its arguments) to relay stdio to.
    #[arg(last = true)]
    command: Vec<OsString>,
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    if let Some((program, rest)) = args.command.split_first() {
        // One thread, as the gateway's relay processes run.
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        let code = runtime.block_on(switchboard_bench::stdio_relay::relay(program, rest))?;
        std::process::exit(code);
    }
    let Some(socket) = args.socket else {
        bail!("give --socket PATH, or -- PROGRAM ARGS…");
    };
    tokio::runtime::Runtime::new()?.block_on(serve(socket))
}

async fn serve(socket: PathBuf) -> anyhow::Result<()> {
    let _ = std::fs::remove_file(&socket);
    let listener = UnixListener::bind(&socket)
        .with_context(|| format!("cannot listen on {}", socket.display()))?;
    let mut terminate = signal(SignalKind::terminate())?;
    let mut interrupt = signal(SignalKind::interrupt())?;
    let relay = Arc::new(Relay::default());
    let outcome = tokio::select! {
        served = relay.serve(listener) => served.context("accept failed"),
        _ = terminate.recv() => Ok(()),
        _ = interrupt.recv() => Ok(()),
    };
    let _ = std::fs::remove_file(&socket);
    outcome
}
