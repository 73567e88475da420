//! What a supervisor of modules (the `switchboard-modules` crate) may do to
//! a running hub, and what the hub asks of it: the supervisor's one door,
//! as `link.rs` is the federation's.
//!
//! The hub knows that modules exist (`[modules.NAME]` is part of its
//! config, `hub/modules` and `hub/restartModule` of its protocol, a launch
//! credential of its `initialize`), and nothing of how they run: it asks
//! its [`Supervisor`]. The supervisor reaches the hub only through a
//! [`SupervisedHub`]: it closes the connections of a run that ended, and
//! counts the services modules registered.
//!
//! Invariant: nothing the hub asks here waits, but [`Supervisor::shutdown`]
//! (bounded by the supervisor, awaited once by `Hub::shutdown` before
//! routing stops). A supervisor answers from what it last published.

use std::collections::HashMap;
use std::future::Future;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::{Arc, Weak};

use serde_json::value::RawValue;
use switchboard_protocol::jsonrpc::ErrorObject;
use switchboard_protocol::modules::ModuleChanges;
use tokio_util::task::TaskTracker;

use crate::policy::{Authenticated, PrincipalRef};
use crate::state::HubState;
use crate::teardown;

pub use crate::config::modules::{ModuleSpec, Program, RestartPolicy};
pub use crate::ids::mint_token;
pub use crate::observe::Caller;
pub use crate::policy::token_digest;
pub use crate::reply::{invalid_params, not_found};

/// What the hub asks of its supervisor.
pub trait Supervisor: Send + Sync + 'static {
    /// Starts the modules of the config, once the hub is reachable
    /// (listening, `hub.json` written). Returns at once: a module that
    /// cannot start is reported, never waited for. Its tasks go on
    /// `tasks`; they end by [`Supervisor::shutdown`].
    fn start(&self, hub: SupervisedHub, specs: Vec<ModuleSpec>, tasks: &TaskTracker);

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

    /// Stops every module, bounded; the hub awaits it before it stops
    /// routing.
    fn shutdown(&self) -> Pin<Box<dyn Future<Output = ()> + Send + '_>>;
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

/// A supervisor's handle on the hub. Weak: the hub holds its supervisor,
/// and the supervisor must not keep the hub alive.
#[derive(Clone)]
pub struct SupervisedHub {
    hub: Weak<HubState>,
    dir: PathBuf,
}

impl SupervisedHub {
    pub(crate) fn new(hub: &Arc<HubState>, dir: PathBuf) -> Self {
        SupervisedHub {
            hub: Arc::downgrade(hub),
            dir,
        }
    }

    /// The hub directory (absolute), where module logs live.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Closes every connection that authenticated with the credential of
    /// this digest: its run has ended and the credential is revoked.
    pub fn close_authenticated_with(&self, digest: &[u8; 32]) {
        if let Some(hub) = self.hub.upgrade() {
            teardown::close_authenticated_with(&hub, digest);
        }
    }

    /// Services registered by modules' connections, by module name.
    pub fn services_by_module(&self) -> HashMap<String, u64> {
        self.hub
            .upgrade()
            .map(|hub| hub.registry.reserved_service_counts())
            .unwrap_or_default()
    }
}
