//! One live connection to an MCP server: the handle its callers share.
//! Calls and other requests are in `call.rs` and `request.rs`.

use std::sync::atomic::AtomicU64;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use rmcp::service::{Peer, RunningService, RunningServiceCancellationToken};
use rmcp::RoleClient;
use tokio::sync::{watch, Notify};
use tokio::task::JoinHandle;

use serde_json::{json, Value};

use crate::bridge::Bridge;
use crate::input::ChildInput;
use crate::progress::ProgressRoutes;
use crate::tap::WireTap;
use crate::upstream::StopHook;

/// How long stopping a server may take before it is left to rmcp (which
/// kills a child it still holds).
pub const STOP_WAIT: Duration = Duration::from_secs(5);

/// A connection to a started server; cloning shares it.
#[derive(Clone)]
pub struct Connection {
    pub(crate) inner: Arc<Inner>,
}

pub(crate) struct Inner {
    pub(crate) label: String,
    pub(crate) peer: Peer<RoleClient>,
    pub(crate) routes: Arc<ProgressRoutes>,
    /// The wire as the server wrote it.
    pub(crate) tap: Arc<WireTap>,
    /// A stdio server's input, where tool calls are written around rmcp
    /// (`call.rs`); `None` over HTTP.
    pub(crate) input: Option<ChildInput>,
    /// The number in the id of the next call written around rmcp.
    pub(crate) next_call: AtomicU64,
    tools_changed: Arc<Notify>,
    /// `true` once the connection ended: the server exited, or was stopped.
    closed: watch::Receiver<bool>,
    /// The child's pid (for a stdio server).
    pid: Option<u32>,
    stop_hook: Option<StopHook>,
    /// Taken by the first stop.
    cancel: Mutex<Option<RunningServiceCancellationToken>>,
    /// The task that waits for the end; taken by the first stop.
    ended: Mutex<Option<JoinHandle<()>>>,
}

impl Connection {
    /// Wraps a running service; a task of its own waits for its end.
    pub(crate) fn open(
        label: String,
        running: RunningService<RoleClient, Bridge>,
        pid: Option<u32>,
        stop_hook: Option<StopHook>,
        input: Option<ChildInput>,
    ) -> Self {
        let peer = running.peer().clone();
        let routes = running.service().routes.clone();
        let tap = running.service().tap.clone();
        let tools_changed = running.service().tools_changed.clone();
        let cancel = running.cancellation_token();
        let (closed_tx, closed) = watch::channel(false);
        let server = label.clone();
        let (ended_tap, ended_input) = (tap.clone(), input.clone());
        let ended = tokio::spawn(async move {
            let reason = running.waiting().await;
            // Calls written around rmcp fail now, not at their timeout.
            ended_tap.ended();
            if let Some(input) = ended_input {
                input.close();
            }
            closed_tx.send_replace(true);
            tracing::info!(%server, ?reason, "MCP server connection ended");
        });
        Connection {
            inner: Arc::new(Inner {
                label,
                peer,
                routes,
                tap,
                input,
                next_call: AtomicU64::new(1),
                tools_changed,
                closed,
                pid,
                stop_hook,
                cancel: Mutex::new(Some(cancel)),
                ended: Mutex::new(Some(ended)),
            }),
        }
    }

    /// How messages name the server.
    pub fn label(&self) -> &str {
        &self.inner.label
    }

    /// The server's answer to `initialize` (`{protocolVersion,
    /// capabilities, serverInfo, instructions?}`), as it sent it.
    pub fn initialize_result(&self) -> Value {
        let raw = self
            .inner
            .tap
            .initialize_result()
            .and_then(|raw| serde_json::from_str(raw.get()).ok());
        raw.or_else(|| {
            self.inner
                .peer
                .peer_info()
                .and_then(|info| serde_json::to_value(&*info).ok())
        })
        .unwrap_or_else(|| json!({}))
    }

    /// The `ServerCapabilities` the server declared, as it sent them.
    pub fn server_capabilities(&self) -> Value {
        match self.initialize_result().get_mut("capabilities") {
            Some(capabilities) if capabilities.is_object() => capabilities.take(),
            _ => json!({}),
        }
    }

    /// The child's pid, for a stdio server.
    pub fn pid(&self) -> Option<u32> {
        self.inner.pid
    }

    pub fn is_closed(&self) -> bool {
        *self.inner.closed.borrow()
    }

    /// Resolves once the connection has ended.
    pub async fn closed(&self) {
        let mut closed = self.inner.closed.clone();
        let _ = closed.wait_for(|closed| *closed).await;
    }

    /// Resolves at the server's next `tools/list_changed`, or at once if
    /// one came since the last call (a burst counts once).
    pub async fn tools_changed(&self) {
        self.inner.tools_changed.notified().await;
    }

    /// Stops the server: its stop hook (if any), then the connection is
    /// closed. Bounded by [`STOP_WAIT`]; a second call does nothing.
    pub async fn stop(&self) {
        let cancel = self.inner.cancel.lock().take();
        if let Some(cancel) = cancel {
            if let (Some(stop), Some(pid)) = (&self.inner.stop_hook, self.inner.pid) {
                stop(pid);
            }
            cancel.cancel();
        }
        let ended = self.inner.ended.lock().take();
        if let Some(ended) = ended {
            if tokio::time::timeout(STOP_WAIT, ended).await.is_err() {
                tracing::warn!(server = %self.inner.label, "the MCP server's connection did not close in {STOP_WAIT:?}");
            }
        }
    }
}
