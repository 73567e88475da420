//! What a supervisor of modules (the `switchboard-modules` crate) may do to
//! a running hub, and what the hub asks of it: the supervisor's one door,
//! as `link.rs` is the federation's.
//!
//! The hub knows that modules exist (`[modules.NAME]` is part of its
//! config, `hub/modules` and `hub/restartModule` of its protocol, a launch
//! credential of its `initialize`), and nothing of how they run: it asks
//! its [`Supervisor`] (`add_ons.rs`), made by a [`Start`] function once the
//! hub listens. The supervisor reaches the hub only through a
//! [`SupervisedHub`]: it closes the connections of a run that ended, and
//! counts the services modules registered.
//!
//! Invariant: nothing the hub asks here waits, but [`Supervisor::shutdown`]
//! (bounded by the supervisor, awaited once by `Hub::shutdown` before
//! routing stops). A supervisor answers from what it last published.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Weak};

use tokio_util::task::TaskTracker;

use crate::state::HubState;
use crate::teardown;

pub use crate::add_ons::{Caller, PeerProcess, Supervisor};
pub use crate::config::modules::{ModuleSpec, Program, RestartPolicy};
pub use crate::ids::mint_token;
pub use crate::policy::token_digest;
pub use crate::reply::{invalid_params, not_found};

/// Starts the modules of the config, once the hub is reachable
/// (listening, `hub.json` written), and makes the supervisor the hub asks
/// from then on. Returns at once: a module that cannot start is reported,
/// never waited for. Its tasks go on the hub's tracker; they end by
/// [`Supervisor::shutdown`].
pub type Start =
    Box<dyn FnOnce(SupervisedHub, Vec<ModuleSpec>, &TaskTracker) -> Arc<dyn Supervisor> + Send>;

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
