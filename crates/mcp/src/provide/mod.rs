//! `switchboard provide-mcp`: a stdio MCP server, supervised, published on
//! the hub as a tool provider (so the fence and pins apply to its tools).
//!
//! The MCP client layer (`switchboard-mcp-client`) starts, watches and
//! restarts the child ([`Backoff::DEFAULT`]) and is the only writer of its
//! connection: tool calls read it, and fail with `tool_unavailable`
//! (nothing ran) while the child is down. This module publishes the
//! child's tools again after each restart and each change.

mod backend;

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use switchboard_client::{Client, ConnectOptions, Endpoint};
use switchboard_mcp_client::{
    Backoff, Event, Restart, StartOptions, Supervised, SupervisedStart, Upstream,
};
use switchboard_tools::{
    check_tool_spec, keep_connected, validate_namespace, Provider, ToolHandler, ToolSpec,
};
use tokio_util::sync::CancellationToken;

use backend::RelayHandler;

use crate::Error;

/// How long the child may take to answer `initialize` and `tools/list`.
pub const CHILD_START_TIMEOUT: Duration = Duration::from_secs(30);

/// What `provide-mcp` runs.
#[derive(Debug, Clone)]
pub struct ProvideOptions {
    /// The hub directory, where the ledger lives (this machine's, also for
    /// a hub reached by URL).
    pub hub_dir: PathBuf,
    /// Where the hub is (its directory, or a URL and a named principal's token).
    pub endpoint: Endpoint,
    pub namespace: String,
    pub command: OsString,
    pub args: Vec<OsString>,
}

/// Where the fence ledger of `namespace` lives under a hub directory.
pub fn ledger_path(hub_dir: &Path, namespace: &str) -> PathBuf {
    hub_dir
        .join("tool-ledgers")
        .join(format!("{namespace}.sqlite"))
}

/// Runs until `shutdown` is cancelled; fails if the first start of the
/// child or the registration fails.
pub async fn run_provider(
    options: ProvideOptions,
    shutdown: CancellationToken,
) -> Result<(), Error> {
    validate_namespace(&options.namespace)?;
    let child = {
        let options = options.clone();
        move || upstream(&options)
    };
    let start = StartOptions {
        client_name: "switchboard provide-mcp".into(),
        initialize_timeout: CHILD_START_TIMEOUT,
        list_timeout: CHILD_START_TIMEOUT,
    };
    let SupervisedStart {
        server,
        tools,
        mut events,
    } = Supervised::start(child, start, Arc::new(()), Restart::After(Backoff::DEFAULT))
        .await
        .map_err(Error::Start)?;
    let relay: Arc<dyn ToolHandler> =
        Arc::new(RelayHandler::new(&options.namespace, server.clone()));
    let (client, provider) = match register(&options, &tools, &relay).await {
        Ok(registered) => registered,
        Err(error) => {
            server.stop().await;
            return Err(error);
        }
    };
    tracing::info!(namespace = %options.namespace, tools = tools.len(), "serving the MCP server's tools");
    let connection = tokio::spawn(keep_connected(client.clone(), shutdown.clone(), |_| {}));

    loop {
        let event = tokio::select! {
            event = events.recv() => event,
            () = shutdown.cancelled() => break,
        };
        match event {
            Some(Event::Restarted(tools) | Event::ToolsChanged(tools)) => {
                publish(&provider, &tools, &relay).await
            }
            Some(Event::Ended) => {}
            None => break,
        }
    }

    server.stop().await;
    let _ = provider.unregister().await;
    client.close();
    connection.abort();
    Ok(())
}

/// Connects to the hub and registers the provider with the child's tools.
async fn register(
    options: &ProvideOptions,
    tools: &[Value],
    relay: &Arc<dyn ToolHandler>,
) -> Result<(Client, Provider), Error> {
    let client = Client::connect_with(ConnectOptions {
        endpoint: options.endpoint.clone(),
        client_name: format!("switchboard provide-mcp {}", options.namespace),
    })
    .await?;
    let provider = Provider::builder(&options.namespace)
        .ledger_path(ledger_path(&options.hub_dir, &options.namespace))
        .tools(tool_specs(tools, relay))
        .metadata(
            "command",
            Value::String(options.command.to_string_lossy().into_owned()),
        )
        .register(&client)
        .await?;
    Ok((client, provider))
}

/// The child, started again on each restart; its stderr is this process's.
fn upstream(options: &ProvideOptions) -> Upstream {
    let mut command = tokio::process::Command::new(&options.command);
    command.args(&options.args);
    Upstream::stdio(
        format!("the MCP server `{}`", command_line(options)),
        command,
    )
}

fn command_line(options: &ProvideOptions) -> String {
    std::iter::once(&options.command)
        .chain(&options.args)
        .map(|part| part.to_string_lossy().into_owned())
        .collect::<Vec<_>>()
        .join(" ")
}

/// The child's tools as the provider declares them (same names); a tool the
/// SDK would refuse (bad name, uncompilable schema) is skipped and logged.
fn tool_specs(
    tools: &[Value],
    relay: &Arc<dyn ToolHandler>,
) -> Vec<(ToolSpec, Arc<dyn ToolHandler>)> {
    tools
        .iter()
        .filter_map(|value| {
            let mut spec = ToolSpec::new(
                value["name"].as_str().unwrap_or_default(),
                value.get("inputSchema").cloned().unwrap_or(Value::Null),
            );
            spec.title = value["title"].as_str().map(str::to_owned);
            spec.description = value["description"].as_str().map(str::to_owned);
            spec.output_schema = value.get("outputSchema").cloned();
            spec.annotations = value.get("annotations").and_then(Value::as_object).cloned();
            match check_tool_spec(&spec) {
                Ok(()) => Some((spec, relay.clone())),
                Err(error) => {
                    tracing::warn!(%error, "skipping a tool of the MCP server");
                    None
                }
            }
        })
        .collect()
}

async fn publish(provider: &Provider, tools: &[Value], relay: &Arc<dyn ToolHandler>) {
    if let Err(error) = provider.set_tools(tool_specs(tools, relay)).await {
        tracing::warn!(%error, "cannot publish the MCP server's new tool list");
    }
}
