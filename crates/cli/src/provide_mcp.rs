//! `switchboard provide-mcp`: publish a stdio MCP server's tools on the hub
//! (logic in `switchboard-mcp`).

use std::ffi::OsString;

use anyhow::Context;
use tokio::signal::unix::{signal, SignalKind};
use tokio_util::sync::CancellationToken;

use crate::connect::HubArgs;

#[derive(clap::Args, Debug)]
pub struct ProvideMcpArgs {
    /// The namespace the tools are published under (`[A-Za-z0-9_.-]`, at most 64 bytes).
    #[arg(long)]
    namespace: String,
    #[command(flatten)]
    hub: HubArgs,
    /// The MCP server to run, and its arguments (after `--`).
    #[arg(required = true, last = true, value_name = "COMMAND")]
    command: Vec<OsString>,
}

pub async fn provide_mcp(args: ProvideMcpArgs) -> anyhow::Result<()> {
    let mut terminate = signal(SignalKind::terminate()).context("cannot watch SIGTERM")?;
    let mut interrupt = signal(SignalKind::interrupt()).context("cannot watch SIGINT")?;
    let mut parts = args.command.into_iter();
    let command = parts.next().context("no MCP server command after --")?;
    let options = switchboard_mcp::ProvideOptions {
        hub_dir: args.hub.hub_dir(),
        endpoint: args.hub.endpoint()?.0,
        namespace: args.namespace,
        command,
        args: parts.collect(),
    };
    let shutdown = CancellationToken::new();
    let stop = shutdown.clone();
    tokio::spawn(async move {
        tokio::select! {
            _ = terminate.recv() => {}
            _ = interrupt.recv() => {}
        }
        stop.cancel();
    });
    switchboard_mcp::run_provider(options, shutdown).await?;
    Ok(())
}
