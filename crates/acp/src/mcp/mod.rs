//! A session's own MCP servers: the `mcpServers` of `session/new` and
//! `session/load`, started for that session only.
//!
//! Each server gets one connection of the MCP client layer
//! (`switchboard-mcp-client`, never restarted): a stdio server runs under a
//! job guard (`crate::guard`), so it dies with its session and with the
//! front like any job; an `http` server is reached over Streamable HTTP.
//! Its `tools/list` entries are read with the
//! shared consumer layer ([`ListedTool::from_answer`]) and wrapped as
//! [`ExposedTool`]s under the namespace `mcp_<name>` with this module's
//! [`ServerBackend`] as their [`ToolBackend`], so they are named, offered
//! to the model and called exactly as hub tools are. A session's table is
//! the hub's with the session's groups added after it
//! ([`SessionServers::table`], [`TableBuilder::include`]): a session tool
//! can never take a hub tool's name.
//!
//! Every wait is bounded: the start and `initialize` by the start timeout,
//! `tools/list` by [`LIST_TIMEOUT`], a call by the tool timeout.

pub mod config;
mod server;

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use switchboard_tools::consumer::{TableBuilder, ToolTable};

pub use config::{parse_servers, ServerSpec, Transport};
pub use server::ServerBackend;

use crate::guard::Launcher;
use server::RunningServer;

/// What a session's servers are started with.
#[derive(Clone)]
pub struct ServerContext {
    pub launcher: Launcher,
    /// How long a server may take to start and answer `initialize` and
    /// `tools/list`.
    pub start_timeout: Duration,
    /// The longest one tool call may take.
    pub call_timeout: Duration,
}

/// The MCP servers of one session, and the ones that failed to start.
pub struct SessionServers {
    servers: Vec<Arc<RunningServer>>,
    /// One line per server that did not start, for the user.
    pub failures: Vec<String>,
}

impl SessionServers {
    /// Starts every server of session `session_id` at once (each bounded by
    /// the start timeout). A server that fails is reported in `failures`
    /// and leaves the others running.
    pub async fn start(
        context: &ServerContext,
        session_id: &str,
        cwd: &Path,
        specs: Vec<ServerSpec>,
    ) -> SessionServers {
        let started = futures_util::future::join_all(
            specs
                .into_iter()
                .map(|spec| server::start(context, session_id, cwd, spec)),
        )
        .await;
        let mut servers = Vec::new();
        let mut failures = Vec::new();
        for result in started {
            match result {
                Ok(server) => servers.push(server),
                Err(failure) => {
                    tracing::warn!(session = session_id, "{failure}");
                    failures.push(failure);
                }
            }
        }
        SessionServers { servers, failures }
    }

    pub fn is_empty(&self) -> bool {
        self.servers.is_empty()
    }

    /// The table one model call of the session is offered: the hub's
    /// tools, then each server's, under the consumer layer's rules (the
    /// first claim of a name keeps it).
    pub fn table(&self, hub: Arc<ToolTable>) -> Arc<ToolTable> {
        if self.servers.is_empty() {
            return hub;
        }
        let mut builder = TableBuilder::new();
        builder.include(&hub);
        for server in &self.servers {
            builder.add_group(server.backend_id(), server.namespace(), server.tools());
        }
        let (table, conflicts) = builder.finish();
        for conflict in conflicts {
            tracing::debug!(%conflict, "a session MCP tool is not offered");
        }
        Arc::new(table)
    }

    /// Stops every server (bounded); idempotent.
    pub async fn stop(&self) {
        futures_util::future::join_all(self.servers.iter().map(|server| server.stop())).await;
    }
}
