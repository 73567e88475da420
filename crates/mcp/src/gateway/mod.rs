//! `switchboard mcp`: an MCP server in front of the hub's tool providers:
//! their tools, resources, resource templates and prompts, and what their
//! servers ask of the client.
//!
//! The hub side (the connection, the catalog followed, the lists fetched
//! and named, the callback service, reconnects) is
//! `switchboard_tools::consumer`, shared with the ACP front. This module is
//! the MCP side; it holds no tool state of its own: every answer is the
//! consumer's current table, every call goes through it.
//!
//! - [`Gateway`]: one consumer, any number of MCP sessions on it
//!   ([`Gateway::serve`]; `switchboard mcp` serves one, on stdio);
//! - `session.rs`: one MCP client: its consumer session and the sink that
//!   hands it what providers send back during its calls;
//! - `service.rs`: the rmcp `Service` answering the methods that carry the
//!   hub's surface, `handler.rs` the lifecycle and `subscriptions/listen`;
//!   `tools.rs`, `surface.rs`: the methods themselves;
//! - `wire.rs`: what MCP 2025-11-25 says that rmcp's model cannot carry
//!   (tasks), carried around it;
//! - `fast.rs`: a plain `tools/call` from the wire to the consumer and its
//!   answer back, around rmcp (the per-call cost of the gateway);
//! - `errors.rs`: failures as MCP answers; `progress.rs`: version-1
//!   providers' progress; `logging.rs`: rmcp's own line for each error
//!   answer, left out;
//! - this file: wiring, and `notifications/*/list_changed` on each change.
//!
//! Stdout carries only MCP messages; logs go to stderr.

mod errors;
mod fast;
mod handler;
pub mod logging;
mod progress;
pub mod search;
mod service;
mod session;
mod stdio;
mod surface;
mod tools;
mod wire;

use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use rmcp::service::{Peer, RunningService};
use rmcp::{RoleServer, ServiceExt};
use serde_json::{Map, Value};
use switchboard_client::Endpoint;
use switchboard_tools::consumer::{ConsumerOptions, HubTools, Profile, SurfaceRevisions};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::sync::watch;

pub use switchboard_tools::consumer::naming::SEPARATOR;
pub(crate) use wire::MAX_LINE;

use crate::Error;
use progress::ProgressRelay;
use service::SessionService;
use session::Session;
use wire::WireState;

/// How long `switchboard mcp` waits for the first lists before it starts
/// answering MCP (with whatever it has by then). With no hub running it
/// does not wait: it starts with nothing and announces it all when the hub
/// appears.
pub const STARTUP_WAIT: Duration = Duration::from_secs(5);

#[derive(Debug, Clone)]
pub struct GatewayOptions {
    /// Where the hub is (its directory, or a URL and a named principal's token).
    pub endpoint: Endpoint,
    /// Which tools and prompts the sessions see, and under which names
    /// (`None`: all, as exposed).
    pub profile: Option<Profile>,
}

/// The consumer behind every MCP session of one gateway process.
pub struct Gateway {
    tools: HubTools,
    progress: Arc<ProgressRelay>,
    /// The MCP definitions of the last table listed: converted once per table.
    listed: Mutex<Option<tools::Listed>>,
    profile: Option<Profile>,
}

/// One MCP session being served.
pub struct ServedSession {
    running: RunningService<RoleServer, SessionService>,
    announcer: tokio::task::JoinHandle<()>,
}

impl ServedSession {
    /// Waits until the MCP client goes away (or the session is cancelled).
    pub async fn waiting(self) -> Result<(), Error> {
        let outcome = self.running.waiting().await;
        self.announcer.abort();
        outcome
            .map(|_| ())
            .map_err(|error| Error::Stdio(error.to_string()))
    }

    /// Ends the session.
    pub async fn cancel(self) {
        self.announcer.abort();
        let _ = self.running.cancel().await;
    }
}

impl Gateway {
    /// Starts the consumer (with its callback service) and waits, at most
    /// [`STARTUP_WAIT`], for the first lists.
    pub async fn start(options: GatewayOptions) -> Arc<Gateway> {
        let progress = Arc::new(ProgressRelay::default());
        if let Some(profile) = &options.profile {
            tracing::info!(
                profile = profile.name(),
                "serving the tools and prompts of a profile"
            );
        }
        let consumer = ConsumerOptions {
            endpoint: options.endpoint.clone(),
            client_name: "switchboard mcp".into(),
        };
        let sink = progress.clone();
        let tools = HubTools::start_with_callbacks(consumer, move |client| {
            Box::pin(sink.register_sink(client))
        });
        // A complete first list saves MCP clients a `list_changed` right
        // after start; with no hub, `wait_ready` returns at once.
        if !tools.wait_ready(STARTUP_WAIT).await {
            tracing::info!(
                "serving MCP before every tool provider has listed; the rest will be announced"
            );
        }
        Arc::new(Gateway {
            tools,
            progress,
            listed: Mutex::new(None),
            profile: options.profile,
        })
    }

    /// The consumer (its tables, its stats).
    pub fn tools(&self) -> &HubTools {
        &self.tools
    }

    /// The definition of a tool or prompt exposed as `name`, as a session
    /// sees it: under the name its profile gives it, or `None` if the
    /// profile leaves it out.
    pub(crate) fn shown_definition(
        &self,
        name: &str,
        definition: impl FnOnce() -> Map<String, Value>,
    ) -> Option<Value> {
        let shown = match &self.profile {
            Some(profile) => profile.shown(name)?,
            None => name,
        };
        let mut definition = definition();
        if shown != name {
            definition.insert("name".into(), Value::String(shown.to_owned()));
        }
        Some(Value::Object(definition))
    }

    /// Whether sessions list `search_tools` and `call_tool` instead of
    /// every tool (`search.rs`).
    pub(crate) fn tool_search(&self) -> bool {
        self.profile.as_ref().is_some_and(Profile::tool_search)
    }

    /// The exposed name of what a session named `shown`, if its profile
    /// shows something under that name.
    pub(crate) fn exposed<'a>(&'a self, shown: &'a str) -> Option<&'a str> {
        match &self.profile {
            Some(profile) => profile.hub_name(shown),
            None => Some(shown),
        }
    }

    /// Serves one MCP session on `reader`/`writer` (newline-delimited
    /// JSON-RPC, as stdio) until the client goes away. The session shares
    /// the consumer with every other session of this gateway; what
    /// providers send back during its calls reaches it alone.
    pub async fn serve<R, W>(self: &Arc<Self>, reader: R, writer: W) -> Result<ServedSession, Error>
    where
        R: AsyncRead + Unpin + Send + 'static,
        W: AsyncWrite + Unpin + Send + 'static,
    {
        let mut changes = self.tools.changes();
        changes.borrow_and_update();
        let mut surface = self.tools.surface_changes();
        surface.borrow_and_update();
        let wire = Arc::new(WireState::default());
        let session = Session::open(self.clone(), wire.clone());
        let (answers, answered) = tokio::sync::mpsc::channel(fast::ANSWER_QUEUE);
        let fast = fast::FastCalls::new(session.clone(), answers);
        let (read, write) = wire::tap(reader, writer, wire, fast, answered);
        let running = SessionService::new(session.clone())
            .serve((read, write))
            .await
            .map_err(|error| Error::Stdio(error.to_string()))?;
        let peer = running.peer().clone();
        session.link.set_peer(&peer);
        // A session that began with `initialize` hears of changes at once;
        // a 2026-07-28 one through `subscriptions/listen` (`handler.rs`).
        // A change during the handshake is announced at once: `changes` saw it.
        let legacy = peer.peer_info().is_some();
        let announcer = tokio::spawn(async move {
            if legacy {
                announce_changes(changes, surface, peer).await;
            }
        });
        Ok(ServedSession { running, announcer })
    }

    pub fn close(&self) {
        self.tools.close();
    }
}

/// Serves MCP on stdin/stdout until stdin closes.
pub async fn run_gateway(options: GatewayOptions) -> Result<(), Error> {
    let gateway = Gateway::start(options).await;
    let served = gateway.serve(stdio::stdin(), stdio::stdout()).await?;
    let outcome = served.waiting().await;
    gateway.close();
    outcome
}

/// Sends `notifications/{tools,resources,prompts}/list_changed` after each
/// change of that list.
async fn announce_changes(
    mut tools: watch::Receiver<u64>,
    mut surface: watch::Receiver<SurfaceRevisions>,
    peer: Peer<RoleServer>,
) {
    let mut last = *surface.borrow();
    loop {
        let sent = tokio::select! {
            changed = tools.changed() => {
                if changed.is_err() { return }
                peer.notify_tool_list_changed().await
            }
            changed = surface.changed() => {
                if changed.is_err() { return }
                let now = *surface.borrow_and_update();
                let mut sent = Ok(());
                if now.resources != last.resources {
                    sent = peer.notify_resource_list_changed().await;
                }
                if now.prompts != last.prompts {
                    sent = sent.and(peer.notify_prompt_list_changed().await);
                }
                last = now;
                sent
            }
        };
        if let Err(error) = sent {
            tracing::debug!(%error, "cannot send a list_changed notification");
        }
    }
}
