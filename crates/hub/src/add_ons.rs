//! What the hub asks of its add-ons while it runs: the [`Observer`] (the
//! dashboard), the [`Supervisor`] (the modules) and the [`Endpoint`] (the
//! MCP gateway's routes). Low in the hub, below
//! the state that holds them, so these traits name nothing of the hub's
//! state; what an add-on may do *to* the hub is its door, above the state
//! (`observe.rs`, `supervise.rs`), and that is also where it is attached.
//!
//! Invariant: every call here is made from a task that routes or reads a
//! socket, and none may wait: an add-on answers from its own memory. The
//! one exception is [`Supervisor::shutdown`], awaited once by
//! `Hub::shutdown` before routing stops, and bounded by the supervisor.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use serde_json::value::RawValue;
use switchboard_protocol::jsonrpc::ErrorObject;
use switchboard_protocol::modules::{ModuleChanges, ModuleStatus};
use switchboard_protocol::Principal;

use crate::config::modules::ModuleSpec;
use crate::conn::Identity;
use crate::policy::{Authenticated, PrincipalRef};

/// What the hub asks of its observer.
pub trait Observer: Send + Sync + 'static {
    /// The routes it serves on the HTTP port (behind the port's Origin and
    /// Host checks), or `None`.
    fn routes(&self) -> Option<axum::Router>;

    /// Answers `method` if it is one of the observer's own, for an
    /// initialized caller; `None` if it is not its method.
    fn request(
        &self,
        method: &str,
        caller: &Caller<'_>,
        params: Option<&RawValue>,
    ) -> Option<Result<String, ErrorObject>>;
}

/// What an endpoint add-on serves (`endpoint.rs` is its door): the hub
/// holds it and mounts its routes.
pub struct Endpoint {
    /// Mounted on the HTTP port behind its browser defences.
    pub routes: axum::Router,
    /// The paths among them the remote (TLS) listener serves too; each
    /// must authenticate named principals itself ([`EndpointDoor::authenticate`]).
    pub remote_paths: Vec<&'static str>,
    /// The path `hub.json` names as `mcp_url` on the HTTP port.
    pub mcp_path: Option<&'static str>,
    /// The paths whose answers keep their connection open for the next
    /// request (HTTP/1.1 keep-alive; every other answer of the port closes
    /// its socket). An idle kept connection is closed after the port's
    /// head timeout, and holds its connection slot meanwhile.
    pub keep_alive_paths: Vec<&'static str>,
}

/// What the hub asks of its supervisor, once the modules are started.
pub trait Supervisor: Send + Sync + 'static {
    /// A launch credential presented at `initialize` by `peer`: the
    /// module's principal, or why not (for the log; the peer only ever
    /// gets -32007).
    fn authenticate(&self, credential: &str, peer: PeerProcess) -> Result<Authenticated, String>;

    /// The principal of a live credential with this digest: a reload keeps
    /// the connections it authenticated.
    fn principal_for_digest(&self, digest: &[u8; 32]) -> Option<Arc<PrincipalRef>>;

    /// A reloaded config's modules: start new ones, stop removed ones,
    /// restart changed ones; says what it was asked to do.
    fn reload(&self, specs: Vec<ModuleSpec>) -> ModuleChanges;

    /// Answers `method` if it is one of the supervisor's own (`hub/…`),
    /// for an initialized caller; `None` if it is not its method.
    fn request(
        &self,
        method: &str,
        caller: &Caller<'_>,
        params: Option<&RawValue>,
    ) -> Option<Result<String, ErrorObject>>;

    /// Appends its samples to `/metrics`.
    fn render_metrics(&self, out: &mut String);

    /// Every module's state, as `hub/modules` answers it (the dashboard
    /// shows them).
    fn statuses(&self) -> Vec<ModuleStatus>;

    /// Stops every module, bounded; the hub awaits it before it stops
    /// routing.
    fn shutdown(&self) -> Pin<Box<dyn Future<Output = ()> + Send + '_>>;
}

/// Who sent a request that the hub hands to an add-on.
#[derive(Debug, Clone, Copy)]
pub struct Caller<'a> {
    pub client_id: &'a str,
    pub principal: &'a Principal,
}

impl<'a> Caller<'a> {
    pub(crate) fn of(identity: &'a Identity) -> Self {
        Caller {
            client_id: &identity.client_id,
            principal: &identity.principal.principal,
        }
    }

    /// The hub's own methods are the `direct` principal's alone: `what`
    /// completes "only the hub's own (direct) principal may …".
    pub fn require_direct(&self, what: &str) -> Result<(), ErrorObject> {
        if *self.principal == Principal::Direct {
            Ok(())
        } else {
            Err(crate::reply::permission_denied(format!(
                "only the hub's own (direct) principal may {what}"
            )))
        }
    }
}

/// Which process is at the other end of a connection, as far as the hub
/// knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PeerProcess {
    /// A Unix socket peer and its pid from `SO_PEERCRED` (`None`: the
    /// kernel did not say).
    Unix(Option<u32>),
    /// A WebSocket: the hub cannot tell which process it is.
    WebSocket,
}
