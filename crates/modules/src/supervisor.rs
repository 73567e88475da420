//! The supervisor: one task that owns every module's state.
//!
//! **Invariant:** only this task starts, signals and forgets module runs,
//! inserts and revokes launch credentials, and publishes the views. Every
//! event reaches it as a message (a run ended, a timer fired, a reload, a
//! restart asked for, shutdown), so no two of them interleave; it never
//! waits on a process, a pipe or a peer (waiting for a run's exit is its
//! own task, copying its output its own thread, and each pause a timer
//! task that sends a message back). A credential is live exactly while its
//! run's process is: inserted before the credential is written to the run,
//! revoked when the run's exit is handled, before anything else happens to
//! that module.
//!
//! Restart policy: a run that ends is started again if its `restart`
//! policy says so, after a pause that starts at [`FIRST_DELAY`] and doubles
//! with each *fast* failure (a run shorter than [`STABLE_AFTER`], or a
//! start that failed) up to [`MAX_DELAY`]; a run that lasted
//! [`STABLE_AFTER`] resets it. [`CRASH_LOOP_FAILURES`] fast failures in a
//! row and the module is given up until `hub/restartModule` or a reload
//! that changes it.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::ExitStatus;
use std::sync::Arc;
use std::time::{Duration, Instant};

use switchboard_protocol::modules::{ModuleChanges, ModuleState, EXIT_NEEDS_LOGIN};
use tokio::sync::{mpsc, oneshot};

use super::launch::Credential;
use super::log::ModuleLog;
use super::process;
use super::{ModuleView, RunEnded, Shared, OUTPUT_DRAIN, STOP_GRACE};
use switchboard_hub::supervise::{ModuleSpec, Program, RestartPolicy};

/// The first pause before a restart.
pub const FIRST_DELAY: Duration = Duration::from_millis(250);
/// The longest pause before a restart.
pub const MAX_DELAY: Duration = Duration::from_secs(30);
/// A run that lasts this long was not a crash loop: the next pause is short again.
pub const STABLE_AFTER: Duration = Duration::from_secs(10);
/// Fast failures in a row after which a module is given up.
pub const CRASH_LOOP_FAILURES: u32 = 5;

/// From the rest of the hub.
pub enum Command {
    /// A reloaded config's modules.
    Apply(Vec<ModuleSpec>),
    Restart(String),
    /// Stop everything; answer when every run ended.
    Shutdown(oneshot::Sender<()>),
}

/// From the supervisor's own helper tasks.
enum Event {
    Exited {
        name: String,
        run: u64,
        status: std::io::Result<ExitStatus>,
    },
    /// A restart pause ended (`timer` says which one).
    StartDue { name: String, timer: u64 },
    /// The stop grace of run `run` ended: SIGKILL.
    KillDue { name: String, run: u64 },
}

/// What happens once a stopping run has ended.
enum AfterStop {
    /// Start it again (with this spec, if the config changed it).
    Start(Option<Box<ModuleSpec>>),
    /// It was removed from the config: forget it.
    Forget,
    /// The hub is stopping.
    Nothing,
}

enum Phase {
    Running,
    Backoff {
        due: Instant,
    },
    Stopping(AfterStop),
    Exited,
    GivenUp,
    /// It ended with `EXIT_NEEDS_LOGIN`: down until a restart is asked for.
    NeedsLogin,
}

struct Run {
    id: u64,
    pid: u32,
    started: Instant,
    digest: [u8; 32],
}

struct Module {
    spec: ModuleSpec,
    log: Arc<ModuleLog>,
    phase: Phase,
    run: Option<Run>,
    /// Starts so far; every one after the first is a restart.
    starts: u64,
    fast_failures: u32,
    last_exit: Option<String>,
    /// Identifies the restart pause in force; an older timer's message is stale.
    timer: u64,
}

pub struct Supervisor {
    shared: Arc<Shared>,
    /// Closes the connections of a run that ended (see `RunEnded`).
    run_ended: RunEnded,
    hub_dir: PathBuf,
    modules: BTreeMap<String, Module>,
    events: mpsc::UnboundedSender<Event>,
    next_run: u64,
    next_timer: u64,
    shutdown: Option<oneshot::Sender<()>>,
}

impl Supervisor {
    pub fn new(shared: Arc<Shared>, run_ended: RunEnded, hub_dir: PathBuf) -> Self {
        Supervisor {
            shared,
            run_ended,
            hub_dir,
            modules: BTreeMap::new(),
            // Replaced in `run` by the sender of the channel it reads.
            events: mpsc::unbounded_channel().0,
            next_run: 1,
            next_timer: 1,
            shutdown: None,
        }
    }

    pub async fn run(
        mut self,
        specs: Vec<ModuleSpec>,
        mut commands: mpsc::UnboundedReceiver<Command>,
    ) {
        let (events, mut incoming) = mpsc::unbounded_channel();
        self.events = events;
        for spec in specs {
            self.add(spec);
        }
        self.publish();
        loop {
            tokio::select! {
                command = commands.recv() => match command {
                    Some(command) => self.on_command(command),
                    None => {
                        // The hub is gone without a shutdown: nothing may
                        // outlive it.
                        self.kill_all();
                        return;
                    }
                },
                Some(event) = incoming.recv() => self.on_event(event),
            }
            self.publish();
            if self.shutdown.is_some() && self.modules.values().all(|m| m.run.is_none()) {
                if let Some(done) = self.shutdown.take() {
                    let _ = done.send(());
                }
                tracing::info!("every module stopped");
                return;
            }
        }
    }

    fn on_command(&mut self, command: Command) {
        match command {
            Command::Apply(specs) if self.shutdown.is_none() => self.apply(specs),
            Command::Restart(name) if self.shutdown.is_none() => self.restart(&name),
            Command::Apply(_) | Command::Restart(_) => {}
            Command::Shutdown(done) => {
                self.shutdown = Some(done);
                let names: Vec<String> = self.modules.keys().cloned().collect();
                for name in names {
                    self.stop(&name, AfterStop::Nothing);
                }
            }
        }
    }

    fn on_event(&mut self, event: Event) {
        match event {
            Event::Exited { name, run, status } => self.exited(&name, run, status),
            Event::StartDue { name, timer } => {
                let due = self.modules.get(&name).is_some_and(|module| {
                    module.timer == timer && matches!(module.phase, Phase::Backoff { .. })
                });
                if due && self.shutdown.is_none() {
                    self.start(&name);
                }
            }
            Event::KillDue { name, run } => {
                if let Some(module) = self.modules.get(&name) {
                    if let Some(current) = module.run.as_ref().filter(|r| r.id == run) {
                        module.log.note(&format!(
                            "did not exit within {STOP_GRACE:?} of SIGTERM; sending SIGKILL"
                        ));
                        tracing::warn!(module = %name, "a module ignored SIGTERM; killing it");
                        process::signal_group(current.pid, libc::SIGKILL);
                    }
                }
            }
        }
    }

    /// A new module: its log, then its first start.
    fn add(&mut self, spec: ModuleSpec) {
        let name = spec.name.clone();
        let log = ModuleLog::new(log_path(&self.hub_dir, &name), spec.log_max_bytes);
        self.modules.insert(
            name.clone(),
            Module {
                spec,
                log,
                phase: Phase::Exited,
                run: None,
                starts: 0,
                fast_failures: 0,
                last_exit: None,
                timer: 0,
            },
        );
        self.start(&name);
    }

    /// Starts a run of `name` now. A start that fails counts as a fast
    /// failure, so a missing command ends given up, never in a tight loop.
    fn start(&mut self, name: &str) {
        let Some(module) = self.modules.get_mut(name) else {
            return;
        };
        module.starts += 1;
        let started = match process::start(&module.spec, &self.hub_dir) {
            Ok(started) => started,
            Err(error) => {
                let exit = format!("cannot start {}: {error}", module.spec.program_name());
                module.log.note(&exit);
                tracing::error!(module = %name, command = %module.spec.command_line(), %error, "a module cannot start");
                module.last_exit = Some(exit);
                module.run = None;
                self.after_failure(name, true);
                return;
            }
        };
        let run = self.next_run;
        self.next_run += 1;
        let pid = started.pid;
        module.log.note(&format!(
            "started pid {pid}: {}",
            module.spec.command_line()
        ));
        let (pumped, output_ended) = oneshot::channel::<()>();
        if let Err(error) = module.log.pump(name, started.output, pumped) {
            tracing::warn!(module = %name, %error, "cannot copy a module's output to its log");
        }
        // Live before the module can read it (see `process.rs`).
        let credential = Credential::mint();
        self.shared.launches.insert(name, pid, credential.digest);
        if let Err(error) = process::hand_over(started.credential, &credential.secret) {
            // The module will find no credential and cannot connect; its
            // exit is handled as any other.
            tracing::warn!(module = %name, %error, "cannot hand a module its launch credential");
        }
        module.run = Some(Run {
            id: run,
            pid,
            started: Instant::now(),
            digest: credential.digest,
        });
        module.phase = Phase::Running;
        tracing::info!(module = %name, pid, "started a module");
        let events = self.events.clone();
        let name = name.to_owned();
        let mut child = started.child;
        tokio::spawn(async move {
            let status = child.wait().await;
            // Its last words reach the log (and its status) first, unless
            // something it left behind holds the pipe open.
            let _ = tokio::time::timeout(OUTPUT_DRAIN, output_ended).await;
            let _ = events.send(Event::Exited { name, run, status });
        });
    }

    fn exited(&mut self, name: &str, run: u64, status: std::io::Result<ExitStatus>) {
        let Some(module) = self.modules.get_mut(name) else {
            return;
        };
        let Some(ended) = module.run.take_if(|r| r.id == run) else {
            return;
        };
        self.shared.launches.revoke(&ended.digest);
        // Whatever the run left in its group goes with it, and so do the
        // connections made with its credential.
        process::signal_group(ended.pid, libc::SIGKILL);
        (self.run_ended)(&ended.digest);
        let (exit, success) = describe_exit(&status);
        module.log.note(&format!("pid {} {exit}", ended.pid));
        let lasted = ended.started.elapsed();
        let phase = std::mem::replace(&mut module.phase, Phase::Exited);
        // A stop the hub asked for says so: "exited with status 0" alone
        // would read as the module's own doing.
        module.last_exit = Some(match &phase {
            Phase::Stopping(AfterStop::Start(None)) => format!("restarted on request ({exit})"),
            Phase::Stopping(AfterStop::Start(Some(_))) => {
                format!("restarted for a config change ({exit})")
            }
            Phase::Stopping(AfterStop::Nothing | AfterStop::Forget) => {
                format!("stopped by the hub ({exit})")
            }
            _ => match last_words(&module.spec, &module.log, success) {
                Some(reason) => format!("{exit}: {reason}"),
                None => exit.clone(),
            },
        });
        match phase {
            Phase::Stopping(AfterStop::Nothing) => {
                tracing::info!(module = %name, %exit, "stopped a module");
            }
            Phase::Stopping(AfterStop::Forget) => {
                tracing::info!(module = %name, %exit, "stopped a module removed from the config");
                self.modules.remove(name);
            }
            Phase::Stopping(AfterStop::Start(spec)) => {
                if let Some(spec) = spec {
                    module.log = ModuleLog::new(module.log.path().to_owned(), spec.log_max_bytes);
                    module.spec = *spec;
                }
                module.fast_failures = 0;
                self.start(name);
            }
            _ if needs_login(&status) => {
                module.phase = Phase::NeedsLogin;
                module.last_exit = Some(format!(
                    "needs login: run `switchboard mcp login {name}` ({exit})"
                ));
                module.log.note(&format!(
                    "needs login; `switchboard mcp login {name}` logs in and restarts it"
                ));
                tracing::warn!(module = %name, "a module needs its user to log in; not restarting it");
            }
            _ => {
                if lasted >= STABLE_AFTER {
                    module.fast_failures = 0;
                }
                let restart = match module.spec.restart {
                    RestartPolicy::Always => true,
                    RestartPolicy::OnFailure => !success,
                    RestartPolicy::Never => false,
                };
                if restart {
                    tracing::warn!(module = %name, %exit, "a module ended; restarting it");
                    self.after_failure(name, lasted < STABLE_AFTER);
                } else {
                    tracing::info!(module = %name, %exit, "a module ended; its restart policy keeps it down");
                }
            }
        }
    }

    /// A run ended (or did not start) and should run again: pause, or give
    /// up after too many fast failures in a row.
    fn after_failure(&mut self, name: &str, fast: bool) {
        let Some(module) = self.modules.get_mut(name) else {
            return;
        };
        if module.spec.restart == RestartPolicy::Never && module.run.is_none() && fast {
            // A start that failed under "never": reported, not retried.
            module.phase = Phase::Exited;
            return;
        }
        if fast {
            module.fast_failures += 1;
        }
        if module.fast_failures >= CRASH_LOOP_FAILURES {
            module.phase = Phase::GivenUp;
            module.log.note(&format!(
                "given up after {} fast failures in a row; `switchboard modules restart {name}` tries again",
                module.fast_failures
            ));
            tracing::error!(module = %name, failures = module.fast_failures, "a module keeps failing; given up");
            return;
        }
        let delay = backoff(module.fast_failures);
        self.next_timer += 1;
        module.timer = self.next_timer;
        module.phase = Phase::Backoff {
            due: Instant::now() + delay,
        };
        let (events, name, timer) = (self.events.clone(), name.to_owned(), module.timer);
        tokio::spawn(async move {
            tokio::time::sleep(delay).await;
            let _ = events.send(Event::StartDue { name, timer });
        });
    }

    /// SIGTERM to the run's group, SIGKILL after [`STOP_GRACE`]; `then`
    /// happens once it ended. A module without a run gets `then` at once.
    fn stop(&mut self, name: &str, then: AfterStop) {
        let Some(module) = self.modules.get_mut(name) else {
            return;
        };
        let Some(run) = module.run.as_ref() else {
            module.phase = Phase::Exited;
            match then {
                AfterStop::Forget => {
                    self.modules.remove(name);
                }
                AfterStop::Start(spec) => {
                    if let Some(spec) = spec {
                        module.log =
                            ModuleLog::new(module.log.path().to_owned(), spec.log_max_bytes);
                        module.spec = *spec;
                    }
                    module.fast_failures = 0;
                    self.start(name);
                }
                AfterStop::Nothing => {}
            }
            return;
        };
        if matches!(module.phase, Phase::Stopping(_)) {
            // Already signalled: only what follows changes (a shutdown wins).
            if let Phase::Stopping(after) = &mut module.phase {
                if !matches!(after, AfterStop::Nothing) {
                    *after = then;
                }
            }
            return;
        }
        module
            .log
            .note(&format!("stopping pid {} (SIGTERM)", run.pid));
        process::signal_group(run.pid, libc::SIGTERM);
        module.phase = Phase::Stopping(then);
        let (events, name, run) = (self.events.clone(), name.to_owned(), run.id);
        tokio::spawn(async move {
            tokio::time::sleep(STOP_GRACE).await;
            let _ = events.send(Event::KillDue { name, run });
        });
    }

    fn restart(&mut self, name: &str) {
        if let Some(module) = self.modules.get_mut(name) {
            module.log.note("restart asked for");
            tracing::info!(module = %name, "restarting a module on request");
            self.stop(name, AfterStop::Start(None));
        }
    }

    /// A reload: the diff applied (see [`diff`]).
    fn apply(&mut self, specs: Vec<ModuleSpec>) {
        let mut wanted: BTreeMap<String, ModuleSpec> =
            specs.into_iter().map(|s| (s.name.clone(), s)).collect();
        let names: Vec<String> = self.modules.keys().cloned().collect();
        for name in names {
            match wanted.remove(&name) {
                None => self.stop(&name, AfterStop::Forget),
                Some(spec) if self.modules[&name].spec != spec => {
                    tracing::info!(module = %name, "a module's config changed; restarting it");
                    self.stop(&name, AfterStop::Start(Some(Box::new(spec))));
                }
                Some(_) => {}
            }
        }
        for spec in wanted.into_values() {
            tracing::info!(module = %spec.name, "a module was added to the config");
            self.add(spec);
        }
    }

    /// No hub left to stop them properly: SIGKILL every group.
    fn kill_all(&mut self) {
        for module in self.modules.values() {
            if let Some(run) = &module.run {
                process::signal_group(run.pid, libc::SIGKILL);
                self.shared.launches.revoke(&run.digest);
            }
        }
    }

    fn publish(&self) {
        let views = self
            .modules
            .values()
            .map(|module| {
                let (state, retry_at) = match &module.phase {
                    Phase::Running => (ModuleState::Running, None),
                    Phase::Backoff { due } => (ModuleState::Backoff, Some(*due)),
                    Phase::Stopping(_) => (ModuleState::Stopping, None),
                    Phase::Exited => (ModuleState::Exited, None),
                    Phase::GivenUp => (ModuleState::GivenUp, None),
                    Phase::NeedsLogin => (ModuleState::NeedsLogin, None),
                };
                ModuleView {
                    name: module.spec.name.clone(),
                    state,
                    pid: module.run.as_ref().map(|r| r.pid),
                    restarts: module.starts.saturating_sub(1),
                    started_at: module.run.as_ref().map(|r| r.started),
                    retry_at,
                    last_exit: module.last_exit.clone(),
                    command: module.spec.command_line(),
                    oauth: module.spec.oauth.clone(),
                    log: module.log.path().to_owned(),
                }
            })
            .collect();
        *self.shared.views.lock() = Arc::new(views);
    }
}

/// `<hub dir>/modules/NAME.log`.
pub fn log_path(hub_dir: &std::path::Path, name: &str) -> PathBuf {
    hub_dir.join("modules").join(format!("{name}.log"))
}

/// The pause before a restart after `fast_failures` fast failures in a row.
fn backoff(fast_failures: u32) -> Duration {
    let doublings = fast_failures.saturating_sub(1).min(16);
    (FIRST_DELAY * 2u32.pow(doublings)).min(MAX_DELAY)
}

/// Why a `switchboard` module (`mcp`, `mcp_url`) failed, in its own words:
/// the binary's last line on a failure is `switchboard: <the cause>`, with
/// no secret in it. Another program's last line is its own business (and
/// may hold anything): it stays in the log only.
fn last_words(spec: &ModuleSpec, log: &ModuleLog, success: bool) -> Option<String> {
    if success || spec.program != Program::Switchboard {
        return None;
    }
    log.last_line()?
        .strip_prefix("switchboard: ")
        .map(str::to_owned)
}

/// Whether the run said it cannot go on until its user logs in.
fn needs_login(status: &std::io::Result<ExitStatus>) -> bool {
    matches!(status, Ok(status) if status.code() == Some(EXIT_NEEDS_LOGIN))
}

/// `exit status 3`, `killed by signal 9 (SIGKILL)`, and whether it was a
/// clean exit.
fn describe_exit(status: &std::io::Result<ExitStatus>) -> (String, bool) {
    use std::os::unix::process::ExitStatusExt;
    match status {
        Ok(status) => match (status.code(), status.signal()) {
            (Some(code), _) => (format!("exited with status {code}"), code == 0),
            (None, Some(signal)) => (
                format!("was killed by signal {signal}{}", signal_name(signal)),
                false,
            ),
            (None, None) => (format!("ended ({status})"), false),
        },
        Err(error) => (format!("could not be waited for: {error}"), false),
    }
}

fn signal_name(signal: i32) -> &'static str {
    match signal {
        libc::SIGKILL => " (SIGKILL)",
        libc::SIGTERM => " (SIGTERM)",
        libc::SIGSEGV => " (SIGSEGV)",
        libc::SIGABRT => " (SIGABRT)",
        libc::SIGINT => " (SIGINT)",
        libc::SIGHUP => " (SIGHUP)",
        libc::SIGPIPE => " (SIGPIPE)",
        _ => "",
    }
}

/// What a reload from `old` to `new` does, by name.
pub fn diff(old: &[ModuleSpec], new: &[ModuleSpec]) -> ModuleChanges {
    let mut changes = ModuleChanges::default();
    for spec in new {
        match old.iter().find(|o| o.name == spec.name) {
            None => changes.added.push(spec.name.clone()),
            Some(before) if before != spec => changes.restarted.push(spec.name.clone()),
            Some(_) => {}
        }
    }
    for before in old {
        if !new.iter().any(|s| s.name == before.name) {
            changes.removed.push(before.name.clone());
        }
    }
    changes
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_pause_doubles_and_is_bounded() {
        assert_eq!(backoff(0), FIRST_DELAY);
        assert_eq!(backoff(1), FIRST_DELAY);
        assert_eq!(backoff(2), FIRST_DELAY * 2);
        assert_eq!(backoff(4), FIRST_DELAY * 8);
        assert_eq!(backoff(40), MAX_DELAY);
    }
}
