//! Supervised modules: the processes a hub starts from `[modules.NAME]`,
//! proves (a launch credential per run), restarts and stops. Attached to
//! the hub as its [`Supervisor`] (`switchboard_hub::supervise`, the one
//! door between the two).
//!
//! - `supervisor.rs`: the task that owns every module's state;
//! - `process.rs`: starting a run (process group, death signal, pipes) and
//!   signalling it;
//! - `launch.rs`: the table of live credentials and the peer check;
//! - `log.rs`: each module's bounded, rotating log;
//! - `requests.rs`: `hub/modules`, `hub/restartModule` and the modules'
//!   samples for `/metrics`.
//!
//! [`Modules`] is what the hub holds: it answers `initialize` (is this a
//! live credential of this process?), `hub/modules` (the published views)
//! and `hub/restartModule`, reload and shutdown (messages to the
//! supervisor). Nothing here awaits but [`Supervisor::shutdown`].

pub mod launch;
pub mod log;
pub mod process;
mod requests;
mod supervisor;

use std::future::Future;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use serde_json::value::RawValue;
use switchboard_hub::policy::{Authenticated, PrincipalRef};
use switchboard_hub::supervise::{Caller, ModuleSpec, PeerProcess, SupervisedHub, Supervisor};
use switchboard_protocol::jsonrpc::ErrorObject;
use switchboard_protocol::modules::{ModuleChanges, ModuleState, ModuleStatus};
use tokio::sync::{mpsc, oneshot};
use tokio_util::task::TaskTracker;

use launch::LaunchTable;
use supervisor::Command;

pub use supervisor::log_path;

/// How long a module has to exit after SIGTERM before its group gets SIGKILL.
pub const STOP_GRACE: Duration = Duration::from_secs(5);

/// How long, after a run ended, its last output may take to reach the log
/// before its end is reported (its last line says why it failed).
pub const OUTPUT_DRAIN: Duration = Duration::from_millis(500);

/// Called with a run's credential digest when the run has ended (its
/// credential revoked): the hub closes the connections made with it.
pub type RunEnded = Box<dyn Fn(&[u8; 32]) + Send + Sync>;

/// What the supervisor publishes about one module after every change.
#[derive(Debug, Clone)]
pub struct ModuleView {
    pub name: String,
    pub state: ModuleState,
    pub pid: Option<u32>,
    pub restarts: u64,
    pub started_at: Option<Instant>,
    pub retry_at: Option<Instant>,
    pub last_exit: Option<String>,
    pub command: String,
    /// The remote MCP server it signs in to, and as which client
    /// (`oauth = true`).
    pub oauth: Option<switchboard_protocol::modules::OAuthLogin>,
    pub log: PathBuf,
}

/// What the supervisor task and the hub's calls share.
#[derive(Default)]
struct Shared {
    launches: LaunchTable,
    /// Replaced whole by the supervisor after each change, by name.
    views: Mutex<Arc<Vec<ModuleView>>>,
}

/// The hub's handle on its modules.
pub struct Modules {
    shared: Arc<Shared>,
    /// Where the supervisor task takes its commands.
    commands: mpsc::UnboundedSender<Command>,
    /// The hub, for the services modules registered.
    hub: SupervisedHub,
    /// The specs last given to the supervisor, for a reload's diff.
    configured: Mutex<Vec<ModuleSpec>>,
}

impl Modules {
    /// Starts the supervisor and, through it, every module of `specs`, for
    /// a hub that listens already (`AddOns::supervisor`). Returns at once:
    /// a module that cannot start is reported, never waited for.
    pub fn start(
        hub: SupervisedHub,
        specs: Vec<ModuleSpec>,
        tasks: &TaskTracker,
    ) -> Arc<dyn Supervisor> {
        let (commands, receiver) = mpsc::unbounded_channel();
        let shared = Arc::new(Shared::default());
        let closer = hub.clone();
        let run_ended: RunEnded = Box::new(move |digest| closer.close_authenticated_with(digest));
        let supervisor =
            supervisor::Supervisor::new(shared.clone(), run_ended, hub.dir().to_owned());
        tasks.spawn(supervisor.run(specs.clone(), receiver));
        Arc::new(Modules {
            shared,
            commands,
            hub,
            configured: Mutex::new(specs),
        })
    }

    /// Asks for `name` to be stopped and started again; `false` if there is
    /// no such module.
    pub fn restart(&self, name: &str) -> bool {
        let known = self.configured.lock().iter().any(|spec| spec.name == name);
        if known {
            let _ = self.commands.send(Command::Restart(name.to_owned()));
        }
        known
    }

    /// The live credentials.
    pub fn launches(&self) -> &LaunchTable {
        &self.shared.launches
    }

    /// What the supervisor last published.
    pub fn views(&self) -> Arc<Vec<ModuleView>> {
        self.shared.views.lock().clone()
    }
}

impl Supervisor for Modules {
    fn authenticate(&self, credential: &str, peer: PeerProcess) -> Result<Authenticated, String> {
        self.shared
            .launches
            .authenticate(credential, peer)
            .map_err(|refusal| refusal.to_string())
    }

    fn principal_for_digest(&self, digest: &[u8; 32]) -> Option<Arc<PrincipalRef>> {
        self.shared.launches.principal_for_digest(digest)
    }

    fn reload(&self, specs: Vec<ModuleSpec>) -> ModuleChanges {
        let changes = {
            let mut configured = self.configured.lock();
            let changes = supervisor::diff(&configured, &specs);
            *configured = specs.clone();
            changes
        };
        let _ = self.commands.send(Command::Apply(specs));
        changes
    }

    fn request(
        &self,
        method: &str,
        caller: &Caller<'_>,
        params: Option<&RawValue>,
    ) -> Option<Result<String, ErrorObject>> {
        requests::answer(self, method, caller, params)
    }

    fn render_metrics(&self, out: &mut String) {
        requests::render_metrics(self, out);
    }

    fn statuses(&self) -> Vec<ModuleStatus> {
        requests::statuses(self)
    }

    /// Stops every module (SIGTERM, SIGKILL after [`STOP_GRACE`]) and waits
    /// for them, a little longer than that at most.
    fn shutdown(&self) -> Pin<Box<dyn Future<Output = ()> + Send + '_>> {
        Box::pin(async move {
            let (done, stopped) = oneshot::channel();
            if self.commands.send(Command::Shutdown(done)).is_err() {
                return;
            }
            if tokio::time::timeout(STOP_GRACE + Duration::from_secs(2), stopped)
                .await
                .is_err()
            {
                tracing::warn!("some modules did not stop in time");
            }
        })
    }
}
