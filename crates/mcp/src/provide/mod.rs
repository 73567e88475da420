//! `switchboard provide-mcp`: a stdio MCP server, supervised, published on
//! the hub as a tool provider (so the fence and pins apply to its tools).
//!
//! The supervisor task is the only one that starts, watches and restarts the
//! child and the only writer of the backend's connection: tool calls read
//! it, and fail with `tool_unavailable` (nothing ran) while it is empty.

mod backend;

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::time::{Duration, Instant};

use rmcp::model::Tool;
use rmcp::service::{Peer, RunningService};
use rmcp::transport::TokioChildProcess;
use rmcp::{RoleClient, ServiceExt};
use serde_json::Value;
use switchboard_client::{Client, ConnectOptions, Endpoint};
use switchboard_tools::{
    check_tool_spec, keep_connected, validate_namespace, Provider, ToolHandler, ToolSpec,
};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use backend::{Backend, ChildClient, RelayHandler};

use crate::Error;

/// How long the child may take to answer `initialize` and `tools/list`.
pub const CHILD_START_TIMEOUT: Duration = Duration::from_secs(30);
/// The first pause before restarting a child that died, doubled each time
/// it dies again soon after starting.
pub const RESTART_FIRST_DELAY: Duration = Duration::from_millis(200);
pub const RESTART_MAX_DELAY: Duration = Duration::from_secs(30);
/// A child that stayed up this long restarts after the first delay again.
pub const RESTART_RESET_AFTER: Duration = Duration::from_secs(30);

/// What `provide-mcp` runs.
#[derive(Debug, Clone)]
pub struct ProvideOptions {
    /// The hub directory: where the hub is, and where the ledger lives.
    pub hub_dir: PathBuf,
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

/// A started child: its connection and what ends when it exits.
struct Child {
    peer: Peer<RoleClient>,
    stop: rmcp::service::RunningServiceCancellationToken,
    exited: tokio::task::JoinHandle<()>,
    tools: Vec<Tool>,
}

/// Runs until `shutdown` is cancelled; fails if the first start of the
/// child or the registration fails.
pub async fn run_provider(
    options: ProvideOptions,
    shutdown: CancellationToken,
) -> Result<(), Error> {
    validate_namespace(&options.namespace)?;
    let backend = Backend::new(options.namespace.clone());
    let (list_changed_tx, mut list_changed) = mpsc::unbounded_channel();
    let first = start_child(&options, &backend, &list_changed_tx).await?;
    let client = Client::connect_with(ConnectOptions {
        endpoint: Endpoint::Dir(Some(options.hub_dir.clone())),
        client_name: format!("switchboard provide-mcp {}", options.namespace),
    })
    .await?;
    let relay: Arc<dyn ToolHandler> = Arc::new(RelayHandler(backend.clone()));
    let provider = Provider::builder(&options.namespace)
        .ledger_path(ledger_path(&options.hub_dir, &options.namespace))
        .tools(tool_specs(&first.tools, &relay))
        .metadata(
            "command",
            Value::String(options.command.to_string_lossy().into_owned()),
        )
        .register(&client)
        .await?;
    backend.set_peer(Some(first.peer.clone()));
    tracing::info!(namespace = %options.namespace, tools = first.tools.len(), "serving the MCP server's tools");
    let connection = tokio::spawn(keep_connected(client.clone(), shutdown.clone(), |_| {}));

    let mut child = Some(first);
    let mut delay = RESTART_FIRST_DELAY;
    let mut started_at = Instant::now();
    while !shutdown.is_cancelled() {
        let Some(running) = child.as_mut() else {
            // Down: wait, then try again.
            tokio::select! {
                () = tokio::time::sleep(delay) => {}
                () = shutdown.cancelled() => break,
            }
            match start_child(&options, &backend, &list_changed_tx).await {
                Ok(started) => {
                    backend.set_peer(Some(started.peer.clone()));
                    publish(&provider, &started.tools, &relay).await;
                    tracing::info!(namespace = %options.namespace, "the MCP server is back");
                    child = Some(started);
                    started_at = Instant::now();
                }
                Err(error) => {
                    delay = (delay * 2).min(RESTART_MAX_DELAY);
                    tracing::warn!(%error, ?delay, "cannot restart the MCP server; trying again");
                }
            }
            continue;
        };
        enum Event {
            Exited,
            ListChanged,
            Shutdown,
        }
        let event = tokio::select! {
            _ = &mut running.exited => Event::Exited,
            Some(()) = list_changed.recv() => Event::ListChanged,
            () = shutdown.cancelled() => Event::Shutdown,
        };
        match event {
            Event::Exited => {
                backend.set_peer(None);
                child = None;
                delay = if started_at.elapsed() >= RESTART_RESET_AFTER {
                    RESTART_FIRST_DELAY
                } else {
                    (delay * 2).min(RESTART_MAX_DELAY)
                };
                tracing::warn!(namespace = %options.namespace, ?delay, "the MCP server exited; restarting it");
            }
            Event::ListChanged => {
                // Coalesce a burst of notifications into one re-list.
                while list_changed.try_recv().is_ok() {}
                match tokio::time::timeout(CHILD_START_TIMEOUT, running.peer.list_all_tools()).await
                {
                    Ok(Ok(tools)) => {
                        running.tools = tools;
                        publish(&provider, &running.tools, &relay).await;
                    }
                    Ok(Err(error)) => {
                        tracing::warn!(%error, "cannot re-list the MCP server's tools")
                    }
                    Err(_) => tracing::warn!("the MCP server did not list its tools in time"),
                }
            }
            Event::Shutdown => {}
        }
    }

    backend.set_peer(None);
    if let Some(running) = child.take() {
        running.stop.cancel();
        let _ = tokio::time::timeout(Duration::from_secs(5), running.exited).await;
    }
    let _ = provider.unregister().await;
    client.close();
    connection.abort();
    Ok(())
}

/// Starts the child, runs the MCP handshake and lists its tools.
async fn start_child(
    options: &ProvideOptions,
    backend: &Arc<Backend>,
    list_changed: &mpsc::UnboundedSender<()>,
) -> Result<Child, Error> {
    let command_text = command_line(options);
    let mut command = tokio::process::Command::new(&options.command);
    command.args(&options.args);
    let (transport, _) = TokioChildProcess::builder(command)
        .stderr(Stdio::inherit())
        .spawn()
        .map_err(|error| Error::Spawn {
            command: command_text.clone(),
            error,
        })?;
    let handler = ChildClient {
        backend: backend.clone(),
        list_changed: list_changed.clone(),
    };
    let running: RunningService<RoleClient, ChildClient> =
        match tokio::time::timeout(CHILD_START_TIMEOUT, handler.serve(transport)).await {
            Ok(Ok(running)) => running,
            Ok(Err(error)) => {
                return Err(Error::ChildStart {
                    command: command_text,
                    reason: error.to_string(),
                })
            }
            Err(_) => {
                return Err(Error::ChildStart {
                    command: command_text,
                    reason: format!("no answer to initialize within {CHILD_START_TIMEOUT:?}"),
                })
            }
        };
    let tools =
        match tokio::time::timeout(CHILD_START_TIMEOUT, running.peer().list_all_tools()).await {
            Ok(Ok(tools)) => tools,
            Ok(Err(error)) => {
                return Err(Error::ChildStart {
                    command: command_text,
                    reason: format!("tools/list failed: {error}"),
                })
            }
            Err(_) => {
                return Err(Error::ChildStart {
                    command: command_text,
                    reason: format!("no answer to tools/list within {CHILD_START_TIMEOUT:?}"),
                })
            }
        };
    let peer = running.peer().clone();
    let stop = running.cancellation_token();
    let exited = tokio::spawn(async move {
        let _ = running.waiting().await;
    });
    Ok(Child {
        peer,
        stop,
        exited,
        tools,
    })
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
    tools: &[Tool],
    relay: &Arc<dyn ToolHandler>,
) -> Vec<(ToolSpec, Arc<dyn ToolHandler>)> {
    tools
        .iter()
        .filter_map(|tool| {
            let value = serde_json::to_value(tool).ok()?;
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

async fn publish(provider: &Provider, tools: &[Tool], relay: &Arc<dyn ToolHandler>) {
    if let Err(error) = provider.set_tools(tool_specs(tools, relay)).await {
        tracing::warn!(%error, "cannot publish the MCP server's new tool list");
    }
}
