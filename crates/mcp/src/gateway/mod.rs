//! `switchboard mcp`: an MCP server on stdio in front of the hub's tool
//! providers.
//!
//! The hub side (the connection, the catalog followed, the tools listed and
//! named `<namespace>__<tool>`, reconnects) is `switchboard_tools::consumer`,
//! shared with the ACP front. This module is the MCP side:
//!
//! - [`server`]: the MCP `ServerHandler` (`tools/list`, `tools/call`);
//! - [`errors`]: call failures as MCP answers;
//! - [`progress`]: the progress sink and the relay to the MCP client;
//! - [`logging`]: rmcp's own line for each error answer, left out;
//! - this file: wiring, and `tools/list_changed` on every table change.
//!
//! Stdout carries only MCP messages; logs go to stderr.

mod errors;
pub mod logging;
mod progress;
mod server;

use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use rmcp::model::Tool;
use rmcp::service::Peer;
use rmcp::{RoleServer, ServiceExt};
use serde_json::Value;
use switchboard_client::Endpoint;
use switchboard_tools::consumer::{ConsumerOptions, HubTools, ToolTable};
use tokio::sync::watch;

pub use switchboard_tools::consumer::naming::SEPARATOR;

use crate::Error;
use progress::ProgressRelay;

/// How long `switchboard mcp` waits for the first tool lists before it
/// starts answering MCP (with whatever it has by then). With no hub running
/// it does not wait: it starts with no tools and announces them when the
/// hub appears.
pub const STARTUP_WAIT: Duration = Duration::from_secs(5);

#[derive(Debug, Clone)]
pub struct GatewayOptions {
    /// Where the hub is (its directory, or a URL and a named principal's token).
    pub endpoint: Endpoint,
}

/// What the MCP side works with.
pub(crate) struct Gateway {
    tools: HubTools,
    progress: Arc<ProgressRelay>,
    /// The MCP definitions of the last table listed: converted once per table.
    listed: Mutex<Option<Listed>>,
}

struct Listed {
    table: Arc<ToolTable>,
    definitions: Arc<[Tool]>,
}

impl Gateway {
    /// The tools as MCP definitions. A tool whose definition MCP cannot
    /// carry is left out, with a warning once per table.
    pub(crate) fn definitions(&self) -> Arc<[Tool]> {
        let table = self.tools.tools();
        let mut listed = self.listed.lock();
        if let Some(last) = listed.as_ref() {
            if Arc::ptr_eq(&last.table, &table) {
                return last.definitions.clone();
            }
        }
        let definitions: Arc<[Tool]> = table
            .tools()
            .filter_map(|tool| {
                match serde_json::from_value(Value::Object(tool.listed_definition())) {
                    Ok(definition) => Some(definition),
                    Err(error) => {
                        tracing::warn!(tool = %tool.name, %error, "skipping a tool whose definition MCP cannot carry");
                        None
                    }
                }
            })
            .collect();
        *listed = Some(Listed {
            table,
            definitions: definitions.clone(),
        });
        definitions
    }
}

/// Serves MCP on stdin/stdout until stdin closes.
pub async fn run_gateway(options: GatewayOptions) -> Result<(), Error> {
    let progress = Arc::new(ProgressRelay::default());
    let consumer = ConsumerOptions {
        endpoint: options.endpoint.clone(),
        client_name: "switchboard mcp".into(),
    };
    let sink = progress.clone();
    let tools = HubTools::start_with(consumer, move |client| Box::pin(sink.register_sink(client)));
    // A complete first list saves MCP clients a `list_changed` right after
    // start; with no hub, `wait_ready` returns at once.
    if !tools.wait_ready(STARTUP_WAIT).await {
        tracing::info!("serving MCP before every tool provider has listed its tools; the rest will be announced");
    }
    let mut changes = tools.changes();
    changes.borrow_and_update();
    let gateway = Arc::new(Gateway {
        tools: tools.clone(),
        progress: progress.clone(),
        listed: Mutex::new(None),
    });
    let running = server::GatewayServer(gateway)
        .serve(rmcp::transport::io::stdio())
        .await
        .map_err(|error| Error::Stdio(error.to_string()))?;
    progress.set_peer(running.peer().clone());
    // A change during the handshake is announced at once: `changes` saw it.
    let announcer = tokio::spawn(announce_changes(changes, running.peer().clone()));
    let outcome = running.waiting().await;
    announcer.abort();
    tools.close();
    outcome
        .map(|_| ())
        .map_err(|error| Error::Stdio(error.to_string()))
}

/// Sends `notifications/tools/list_changed` after each table change.
async fn announce_changes(mut changes: watch::Receiver<u64>, peer: Peer<RoleServer>) {
    while changes.changed().await.is_ok() {
        if let Err(error) = peer.notify_tool_list_changed().await {
            tracing::debug!(%error, "cannot send tools/list_changed");
        }
    }
}
