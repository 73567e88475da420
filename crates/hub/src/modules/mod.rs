//! Supervised modules: processes the hub starts from `[modules.NAME]`,
//! proves (a launch credential per run), restarts and stops.
//!
//! - `spec.rs`: the config section, checked;
//! - `supervisor.rs`: the task that owns every module's state;
//! - `process.rs`: starting a run (process group, death signal, pipes) and
//!   signalling it;
//! - `launch.rs`: the table of live credentials and the peer check;
//! - `log.rs`: each module's bounded, rotating log.
//!
//! [`Modules`] is the part the rest of the hub holds (in `HubState`): it
//! answers `initialize` (is this a live credential of this process?),
//! `hub/modules` (the published views) and `hub/restartModule`, reload and
//! shutdown (messages to the supervisor). Nothing here awaits but
//! [`Modules::shutdown`].

pub mod launch;
pub mod log;
pub mod process;
pub mod spec;
mod supervisor;

use std::collections::HashMap;
use std::fmt::Write as _;
use std::path::PathBuf;
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use switchboard_protocol::modules::{ModuleChanges, ModuleState, ModuleStatus};
use tokio::sync::{mpsc, oneshot};
use tokio_util::task::TaskTracker;

use launch::LaunchTable;
use spec::ModuleSpec;
use supervisor::Command;

/// How long a module has to exit after SIGTERM before its group gets SIGKILL.
pub const STOP_GRACE: Duration = Duration::from_secs(5);

/// Called with a run's credential digest when the run has ended (its
/// credential revoked): the hub closes the connections made with it. A
/// callback, so this module needs nothing of the hub's state.
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
    pub log: PathBuf,
}

/// What the supervisor and the rest of the hub share.
#[derive(Default)]
struct Shared {
    launches: LaunchTable,
    /// Replaced whole by the supervisor after each change, by name.
    views: Mutex<Arc<Vec<ModuleView>>>,
}

/// The hub's handle on its modules.
#[derive(Default)]
pub struct Modules {
    shared: Arc<Shared>,
    /// Set once the supervisor runs (`Hub::start`, after the listeners).
    commands: OnceLock<mpsc::UnboundedSender<Command>>,
    /// The specs last given to the supervisor, for a reload's diff.
    configured: Mutex<Vec<ModuleSpec>>,
}

impl Modules {
    /// Starts the supervisor and, through it, every module. Returns at once:
    /// a module that cannot start is reported, never waited for.
    pub fn start(
        &self,
        specs: Vec<ModuleSpec>,
        hub_dir: PathBuf,
        tasks: &TaskTracker,
        run_ended: RunEnded,
    ) {
        let (sender, receiver) = mpsc::unbounded_channel();
        if self.commands.set(sender).is_err() {
            return; // started already
        }
        *self.configured.lock() = specs.clone();
        let supervisor = supervisor::Supervisor::new(self.shared.clone(), run_ended, hub_dir);
        tasks.spawn(supervisor.run(specs, receiver));
    }

    /// Applies a reloaded config: starts new modules, stops removed ones,
    /// restarts changed ones, leaves the others alone.
    pub fn reload(&self, specs: Vec<ModuleSpec>) -> ModuleChanges {
        let Some(commands) = self.commands.get() else {
            return ModuleChanges::default();
        };
        let changes = {
            let mut configured = self.configured.lock();
            let changes = supervisor::diff(&configured, &specs);
            *configured = specs.clone();
            changes
        };
        let _ = commands.send(Command::Apply(specs));
        changes
    }

    /// Asks for `name` to be stopped and started again; `false` if there is
    /// no such module.
    pub fn restart(&self, name: &str) -> bool {
        let known = self.configured.lock().iter().any(|spec| spec.name == name);
        if let (true, Some(commands)) = (known, self.commands.get()) {
            let _ = commands.send(Command::Restart(name.to_owned()));
        }
        known
    }

    /// Stops every module (SIGTERM, SIGKILL after [`STOP_GRACE`]) and waits
    /// for them, a little longer than that at most.
    pub async fn shutdown(&self) {
        let Some(commands) = self.commands.get() else {
            return;
        };
        let (done, stopped) = oneshot::channel();
        if commands.send(Command::Shutdown(done)).is_err() {
            return;
        }
        if tokio::time::timeout(STOP_GRACE + Duration::from_secs(2), stopped)
            .await
            .is_err()
        {
            tracing::warn!("some modules did not stop in time");
        }
    }

    /// The live credentials (`initialize` and reloads ask it).
    pub fn launches(&self) -> &LaunchTable {
        &self.shared.launches
    }

    /// What the supervisor last published.
    pub fn views(&self) -> Arc<Vec<ModuleView>> {
        self.shared.views.lock().clone()
    }

    /// The modules' samples for `/metrics`: state (one sample per state, 1
    /// for the current one), restarts, and services registered.
    pub fn render_metrics(&self, services: &HashMap<String, u64>, out: &mut String) {
        let views = self.views();
        if views.is_empty() {
            return;
        }
        const STATES: [ModuleState; 5] = [
            ModuleState::Running,
            ModuleState::Backoff,
            ModuleState::Stopping,
            ModuleState::Exited,
            ModuleState::GivenUp,
        ];
        let _ = writeln!(out, "# HELP switchboard_module_state The state each supervised module is in (1) and is not in (0).");
        let _ = writeln!(out, "# TYPE switchboard_module_state gauge");
        for view in views.iter() {
            for state in STATES {
                let value = u8::from(view.state == state);
                let _ = writeln!(
                    out,
                    "switchboard_module_state{{module=\"{}\",state=\"{}\"}} {value}",
                    view.name,
                    state.name()
                );
            }
        }
        let _ = writeln!(
            out,
            "# HELP switchboard_module_restarts_total Starts of each module after its first."
        );
        let _ = writeln!(out, "# TYPE switchboard_module_restarts_total counter");
        for view in views.iter() {
            let _ = writeln!(
                out,
                "switchboard_module_restarts_total{{module=\"{}\"}} {}",
                view.name, view.restarts
            );
        }
        let _ = writeln!(
            out,
            "# HELP switchboard_module_services Services registered by each module's connections."
        );
        let _ = writeln!(out, "# TYPE switchboard_module_services gauge");
        for view in views.iter() {
            let count = services.get(&view.name).copied().unwrap_or(0);
            let _ = writeln!(
                out,
                "switchboard_module_services{{module=\"{}\"}} {count}",
                view.name
            );
        }
    }

    /// `hub/modules`: the views, with uptimes now and the services each
    /// module's connections registered.
    pub fn status(&self, services_of: impl Fn(&str) -> u64) -> Vec<ModuleStatus> {
        let now = Instant::now();
        self.views()
            .iter()
            .map(|view| ModuleStatus {
                name: view.name.clone(),
                state: view.state,
                pid: view.pid,
                restarts: view.restarts,
                uptime_ms: view
                    .started_at
                    .map(|at| now.saturating_duration_since(at).as_millis() as u64),
                last_exit: view.last_exit.clone(),
                retry_in_ms: view
                    .retry_at
                    .map(|at| at.saturating_duration_since(now).as_millis() as u64),
                services: services_of(&view.name),
                command: view.command.clone(),
                log: view.log.display().to_string(),
            })
            .collect()
    }
}
