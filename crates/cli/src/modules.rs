//! `switchboard modules`: the hub's supervised modules; `restart NAME`;
//! `logs NAME [-f]`.

use std::fs::File;
use std::io::Read;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use serde_json::json;
use switchboard_client::protocol::hub::method;
use switchboard_client::protocol::modules::{ModuleState, ModuleStatus, ModulesResult};
use switchboard_client::Client;
use tokio::signal::unix::{signal, SignalKind};

use crate::connect::{self, HubArgs};
use crate::describe::{self, duration};
use crate::output::{emit, Emitted};

/// How long `restart` waits to see the new run (the old one has
/// `STOP_GRACE`, 5 s, to exit after SIGTERM).
const RESTART_WAIT: Duration = Duration::from_secs(15);
/// How often `restart` and `logs -f` look again.
const POLL: Duration = Duration::from_millis(200);

#[derive(clap::Args, Debug)]
#[command(after_help = "\
Without a subcommand, lists the modules of the hub's config ([modules.NAME]):
NAME, STATE (running, backoff, stopping, exited, given-up, needs-login), PID, RESTARTS,
UPTIME, SERVICES (registered now by the module's connections) and LAST EXIT.

A module's stdout and stderr are in <dir>/modules/NAME.log (and NAME.log.1,
the part before the last rotation); `logs` prints both, oldest first.")]
pub struct ModulesArgs {
    #[command(flatten)]
    hub: HubArgs,
    /// Print the modules as JSON (what hub/modules answers).
    #[arg(long)]
    json: bool,
    #[command(subcommand)]
    action: Option<Action>,
}

#[derive(clap::Subcommand, Debug)]
enum Action {
    /// Stop a module (SIGTERM, SIGKILL after 5 s) and start it again; also
    /// starts a module that was given up or exited.
    Restart {
        name: String,
        #[command(flatten)]
        hub: HubArgs,
    },
    /// Print a module's log (its stdout and stderr); -f keeps following it.
    Logs {
        name: String,
        /// Keep printing what the module writes, across rotations, until
        /// interrupted.
        #[arg(short, long)]
        follow: bool,
        #[command(flatten)]
        hub: HubArgs,
    },
}

pub async fn modules(args: ModulesArgs) -> anyhow::Result<()> {
    // `--dir` may come before the subcommand or after it.
    let hub = match &args.action {
        None => args.hub.clone(),
        Some(Action::Restart { hub, .. } | Action::Logs { hub, .. }) => hub.clone().or(&args.hub),
    };
    // The modules are the hub's own user's: `hub/modules` answers only its
    // `direct` principal, and the logs are files in the hub directory.
    hub.local_only("switchboard modules")?;
    match args.action {
        None => list(&hub, args.json).await,
        Some(Action::Restart { name, .. }) => restart(&hub, &name).await,
        Some(Action::Logs { name, follow, .. }) => logs(&hub, &name, follow).await,
    }
}

/// `hub/modules` on a connection of the `direct` principal.
pub async fn fetch(client: &Client) -> anyhow::Result<Vec<ModuleStatus>> {
    let raw = client
        .call_hub(method::MODULES, &json!({}))
        .await
        .context("hub/modules")?;
    let result: ModulesResult =
        serde_json::from_str(raw.get()).context("the hub's answer to hub/modules")?;
    Ok(result.modules)
}

async fn list(hub: &HubArgs, as_json: bool) -> anyhow::Result<()> {
    let client = connect::connect(hub, "modules").await?;
    let modules = fetch(&client).await;
    client.close();
    let modules = modules?;
    if as_json {
        emit(&format!("{}\n", serde_json::to_string_pretty(&modules)?))?;
    } else if modules.is_empty() {
        emit("no modules: the hub's config has no [modules.NAME]\n")?;
    } else {
        emit(&table(&modules))?;
    }
    Ok(())
}

const HEADER: [&str; 7] = [
    "NAME",
    "STATE",
    "PID",
    "RESTARTS",
    "UPTIME",
    "SERVICES",
    "LAST EXIT",
];

pub fn table(modules: &[ModuleStatus]) -> String {
    let rows: Vec<Vec<String>> = modules
        .iter()
        .map(|m| {
            let state = match (m.state, m.retry_in_ms) {
                (ModuleState::Backoff, Some(ms)) => {
                    format!("backoff ({})", duration(Duration::from_millis(ms)))
                }
                (state, _) => state.name().to_owned(),
            };
            vec![
                m.name.clone(),
                state,
                m.pid.map_or_else(|| "-".into(), |p| p.to_string()),
                m.restarts.to_string(),
                m.uptime_ms
                    .map_or_else(|| "-".into(), |ms| duration(Duration::from_millis(ms))),
                m.services.to_string(),
                m.last_exit.clone().unwrap_or_else(|| "-".into()),
            ]
        })
        .collect();
    describe::table(&HEADER, &rows)
}

async fn restart(hub: &HubArgs, name: &str) -> anyhow::Result<()> {
    let client = connect::connect(hub, "modules restart").await?;
    let outcome = restart_and_watch(&client, name).await;
    client.close();
    emit(&format!("{}\n", outcome?))?;
    Ok(())
}

/// Asks for the restart, then waits (bounded) until the module runs under
/// a new pid or settles otherwise, and says which.
pub(crate) async fn restart_and_watch(client: &Client, name: &str) -> anyhow::Result<String> {
    let before = find(&fetch(client).await?, name)?;
    client
        .call_hub(method::RESTART_MODULE, &json!({ "name": name }))
        .await
        .with_context(|| format!("hub/restartModule {name}"))?;
    let deadline = Instant::now() + RESTART_WAIT;
    loop {
        let now = find(&fetch(client).await?, name)?;
        let new_run = now.restarts > before.restarts || now.pid.is_some() && now.pid != before.pid;
        match now.state {
            ModuleState::Running if new_run => {
                return Ok(format!(
                    "{name}: running, pid {} (restarts: {})",
                    now.pid.unwrap_or_default(),
                    now.restarts
                ))
            }
            ModuleState::Backoff
            | ModuleState::Exited
            | ModuleState::GivenUp
            | ModuleState::NeedsLogin
                if new_run =>
            {
                return Ok(format!(
                    "{name}: restarted, now {} ({})",
                    now.state.name(),
                    now.last_exit.as_deref().unwrap_or("no exit yet")
                ))
            }
            _ => {}
        }
        if Instant::now() >= deadline {
            bail!(
                "{name} is still {} after {RESTART_WAIT:?}; `switchboard modules` shows it",
                now.state.name()
            );
        }
        tokio::time::sleep(POLL).await;
    }
}

pub(crate) fn find(modules: &[ModuleStatus], name: &str) -> anyhow::Result<ModuleStatus> {
    match modules.iter().find(|m| m.name == name) {
        Some(module) => Ok(module.clone()),
        None => {
            let names: Vec<&str> = modules.iter().map(|m| m.name.as_str()).collect();
            bail!(
                "no module {name:?} in the hub's config (modules: {})",
                if names.is_empty() {
                    "none".to_owned()
                } else {
                    names.join(", ")
                }
            )
        }
    }
}

/// `<dir>/modules/NAME.log`. The name is checked so that it names a file
/// in that directory and nothing else.
fn log_path(hub_dir: &Path, name: &str) -> anyhow::Result<PathBuf> {
    let valid = !name.is_empty()
        && !name.starts_with('.')
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-'));
    if !valid {
        bail!("{name:?} is not a module name (A-Z a-z 0-9 _ . -)");
    }
    Ok(hub_dir.join("modules").join(format!("{name}.log")))
}

async fn logs(hub: &HubArgs, name: &str, follow: bool) -> anyhow::Result<()> {
    let hub_dir = hub.hub_dir();
    let path = log_path(&hub_dir, name)?;
    let rotated = path.with_extension("log.1");
    if !path.exists() && !rotated.exists() {
        bail!(
            "no log for module {name:?} in {} (is it in the hub's config, and has the hub started it?)",
            path.parent().unwrap_or(&hub_dir).display()
        );
    }
    if let Ok(mut old) = File::open(&rotated) {
        if matches!(copy_rest(&mut old)?, Emitted::ReaderGone) {
            return Ok(());
        }
    }
    let mut current = File::open(&path).ok();
    if let Some(file) = current.as_mut() {
        if matches!(copy_rest(file)?, Emitted::ReaderGone) {
            return Ok(());
        }
    }
    if !follow {
        return Ok(());
    }
    let mut terminate = signal(SignalKind::terminate()).context("cannot watch SIGTERM")?;
    let mut interrupt = signal(SignalKind::interrupt()).context("cannot watch SIGINT")?;
    loop {
        tokio::select! {
            _ = terminate.recv() => return Ok(()),
            _ = interrupt.recv() => return Ok(()),
            () = tokio::time::sleep(POLL) => {}
        }
        // Rotated (the path names another file now): finish the old one,
        // then start the new one from its beginning.
        let now_at_path = std::fs::metadata(&path).ok().map(|m| (m.dev(), m.ino()));
        let following = current
            .as_ref()
            .and_then(|f| f.metadata().ok())
            .map(|m| (m.dev(), m.ino()));
        if let Some(file) = current.as_mut() {
            if matches!(copy_rest(file)?, Emitted::ReaderGone) {
                return Ok(());
            }
        }
        if now_at_path.is_some() && now_at_path != following {
            current = File::open(&path).ok();
            if let Some(file) = current.as_mut() {
                if matches!(copy_rest(file)?, Emitted::ReaderGone) {
                    return Ok(());
                }
            }
        }
    }
}

/// Prints what `file` holds past its position, in bounded pieces.
fn copy_rest(file: &mut File) -> anyhow::Result<Emitted> {
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = file
            .read(&mut buf)
            .context("cannot read the module's log")?;
        if n == 0 {
            return Ok(Emitted::Written);
        }
        if matches!(
            emit(&String::from_utf8_lossy(&buf[..n]))?,
            Emitted::ReaderGone
        ) {
            return Ok(Emitted::ReaderGone);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn log_names_stay_in_the_modules_directory() {
        let dir = Path::new("/run/sb");
        assert_eq!(
            log_path(dir, "git").unwrap(),
            Path::new("/run/sb/modules/git.log")
        );
        assert!(log_path(dir, "../hub").is_err());
        assert!(log_path(dir, "a/b").is_err());
        assert!(log_path(dir, "").is_err());
    }
}
