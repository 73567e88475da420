//! What an add-on that serves an endpoint of its own on the hub's HTTP
//! ports (the MCP gateway's `/mcp`, `crates/mcp` `http/`) may do: its one
//! door, as `link.rs` is the federation's.
//!
//! Through an [`EndpointDoor`] it may authenticate a bearer token exactly
//! as the hub authenticates one at `initialize` (the hub's own token on
//! loopback only, a named principal's anywhere), learn the profile a
//! principal is bound to, and connect to the hub in-process (an in-memory
//! pipe the hub serves as it serves its Unix socket), becoming its client:
//! everything it does for a caller it does as a client of the hub with the
//! caller's token, under the caller's grants. Nothing else of the hub is
//! reachable from here.
//!
//! The hub asks of it only its [`Endpoint`]: routes, mounted behind the
//! port's Origin and Host checks, and which of them the remote (TLS)
//! listener serves too.
//!
//! Invariant: nothing here waits. The endpoint's own handlers may wait on
//! their callers, never on the hub's routing tasks.

use std::path::PathBuf;
use std::sync::{Arc, Weak};

use axum::http::Extensions;
use switchboard_protocol::Principal;
use tokio::io::DuplexStream;
use tokio_util::task::TaskTracker;

pub use crate::add_ons::Endpoint;
pub use crate::ids::mint_token;
use crate::state::HubState;
pub use crate::transport::in_process::ConnectError;
use crate::transport::socket::Socket;

/// Makes the endpoint, once, while the hub starts and before it listens.
pub type Attach = Box<dyn FnOnce(EndpointDoor, &TaskTracker) -> Endpoint + Send>;

/// An endpoint's handle on the hub. Weak: the hub holds its endpoint's
/// routes, and they must not keep it alive.
#[derive(Clone)]
pub struct EndpointDoor {
    hub: Weak<HubState>,
    /// Where in-process connections are served (shutdown waits on them).
    tasks: TaskTracker,
}

/// Who a bearer token is, as the hub would authenticate it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Bearer {
    /// `direct`, or the name of a `[principals.NAME]`.
    pub principal: String,
    /// The `[profiles.NAME]` the principal is bound to, if any.
    pub profile: Option<String>,
}

impl EndpointDoor {
    pub(crate) fn new(hub: &Arc<HubState>, tasks: &TaskTracker) -> Self {
        EndpointDoor {
            hub: Arc::downgrade(hub),
            tasks: tasks.clone(),
        }
    }

    /// Who `token` is, on the socket a request came on (its
    /// `extensions`): the hub's own token only on a loopback listener that
    /// is not the remote one, a named principal's anywhere; `None`
    /// otherwise (and for a module's launch credential, which is its
    /// process's alone, on the Unix socket).
    pub fn authenticate(&self, token: &str, extensions: &Extensions) -> Option<Bearer> {
        let hub = self.hub.upgrade()?;
        let socket = extensions.get::<Socket>()?;
        let policy = hub.registry.policy();
        let authenticated = policy.authenticate(Some(token))?;
        let principal = match &authenticated.principal.principal {
            Principal::Direct if socket.loopback && !socket.remote => "direct".to_owned(),
            Principal::Reserved { module_id } => module_id.clone(),
            _ => return None,
        };
        let profile = policy.profile_of(&principal).map(str::to_owned);
        Some(Bearer { principal, profile })
    }

    /// Whether a request came on the remote (TLS) listener.
    pub fn is_remote(extensions: &Extensions) -> bool {
        extensions
            .get::<Socket>()
            .is_some_and(|socket| socket.remote)
    }

    /// A new client connection to the hub in this process: the client's
    /// end of an in-memory pipe, one JSON-RPC message per line, as on the
    /// Unix socket (`transport/in_process.rs`). It counts against
    /// `maxConnections` and authenticates at `initialize` like any other.
    pub fn connect(&self) -> Result<DuplexStream, ConnectError> {
        let hub = self.hub.upgrade().ok_or(ConnectError::ShuttingDown)?;
        crate::transport::in_process::connect(&hub, &self.tasks)
    }

    /// The config file in force (`None`: the hub runs on defaults).
    pub fn config_file(&self) -> Option<PathBuf> {
        self.hub.upgrade()?.config_path.clone()
    }

    /// Successful reloads so far: what was read from the config file
    /// before the last one may be stale.
    pub fn reloads(&self) -> u64 {
        self.hub.upgrade().map_or(0, |hub| hub.reloads())
    }

    /// The largest message the hub takes (`maxMessageBytes`): the bound of
    /// a request body.
    pub fn max_message_bytes(&self) -> usize {
        self.hub.upgrade().map_or(0, |hub| {
            usize::try_from(hub.limits.max_message_bytes).unwrap_or(usize::MAX)
        })
    }

    /// Resolves once the hub begins to shut down (or is gone).
    pub async fn stopping(&self) {
        if let Some(hub) = self.hub.upgrade() {
            hub.stopping().await;
        }
    }
}
