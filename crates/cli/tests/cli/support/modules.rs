//! A `switchboard serve` process with `[modules.NAME]` in its config, and
//! what the module tests ask of it: `hub/modules`, the catalog, the
//! modules' logs, processes' liveness. Modules are `switchboard-test-module`
//! processes (crates/testkit) unless a test says otherwise.

#![allow(dead_code)] // each test uses a different part of this module

use std::path::{Path, PathBuf};

use serde_json::{json, Value};
use switchboard_client::protocol::hub::method;
use switchboard_client::protocol::modules::{ModuleStatus, ModulesResult};
use switchboard_client::{Client, ServiceInfo};
use switchboard_testkit::{eventually, workspace_binary, HubProcess, WAIT};

/// `switchboard-test-module`, a binary of `switchboard-testkit`.
pub fn test_module() -> PathBuf {
    workspace_binary("switchboard-test-module", "switchboard-testkit")
}

/// A `[modules.NAME]` section running the test module with `args` (its
/// service is labelled NAME unless `args` says otherwise).
pub fn module_section(name: &str, args: &[&str]) -> String {
    let mut all: Vec<String> = args.iter().map(|a| a.to_string()).collect();
    if !args.contains(&"--label") {
        all.extend(["--label".to_owned(), name.to_owned()]);
    }
    format!(
        "[modules.{name}]\ncommand = {}\nargs = {}\n\n",
        toml_string(&test_module().to_string_lossy()),
        json!(all)
    )
}

/// A TOML basic string (JSON's escaping is TOML's for these paths).
pub fn toml_string(text: &str) -> String {
    json!(text).to_string()
}

/// A hub process whose config file the test can rewrite and reload.
pub struct ModuleHub {
    pub hub: HubProcess,
    pub config: PathBuf,
    root: tempfile::TempDir,
}

impl ModuleHub {
    /// Writes `config` and starts `switchboard serve --config` on it.
    pub fn start(config: &str) -> ModuleHub {
        let root = tempfile::tempdir().expect("a temporary directory");
        let path = root.path().join("switchboard.toml");
        std::fs::write(&path, config).expect("write the config");
        let hub = HubProcess::builder()
            .dir(root.path().join("hub"))
            .config(&path)
            .start();
        ModuleHub {
            hub,
            config: path,
            root,
        }
    }

    /// `name` in the test's temporary directory.
    pub fn path(&self, name: &str) -> PathBuf {
        self.root.path().join(name)
    }

    pub fn dir(&self) -> &Path {
        self.hub.dir()
    }

    pub fn dir_arg(&self) -> &str {
        self.hub.dir_arg()
    }

    pub fn rewrite_config(&self, config: &str) {
        std::fs::write(&self.config, config).expect("rewrite the config");
    }

    /// `<dir>/modules/NAME.log`.
    pub fn log_path(&self, name: &str) -> PathBuf {
        self.dir().join("modules").join(format!("{name}.log"))
    }

    pub fn module_log(&self, name: &str) -> String {
        std::fs::read_to_string(self.log_path(name)).unwrap_or_default()
    }

    /// Waits until `text` is in module `name`'s log (the rotated file and
    /// the current one, read as one: a rotation may fall inside `text`).
    /// The hub copies a module's output on a thread of its own, so what the
    /// module wrote before a hub event (its registration) may still be in
    /// the pipe when the test sees the event.
    pub async fn wait_logged(&self, name: &str, text: &str) {
        let rotated = self.dir().join("modules").join(format!("{name}.log.1"));
        eventually(&format!("{text:?} in the log of {name}"), || {
            let mut log = std::fs::read_to_string(&rotated).unwrap_or_default();
            log.push_str(&self.module_log(name));
            log.contains(text)
        })
        .await;
    }

    /// A client of the `direct` principal.
    pub async fn client(&self) -> Client {
        self.hub.client("module-test").await
    }
}

/// `hub/modules`.
pub async fn modules(client: &Client) -> Vec<ModuleStatus> {
    let raw = client
        .call_hub(method::MODULES, &json!({}))
        .await
        .expect("hub/modules");
    let result: ModulesResult = serde_json::from_str(raw.get()).expect("a ModulesResult");
    result.modules
}

/// Polls `hub/modules` until module `name` satisfies `check`, for at most
/// [`WAIT`]; returns it.
pub async fn wait_module(
    client: &Client,
    name: &str,
    what: &str,
    check: impl Fn(&ModuleStatus) -> bool,
) -> ModuleStatus {
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let all = modules(client).await;
        if let Some(module) = all.iter().find(|m| m.name == name && check(m)) {
            return module.clone();
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "module {name} never {what} within {WAIT:?}: {all:#?}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}

/// Waits for the test module labelled `label` to be in the catalog (and,
/// with `except`, under another id than that one).
pub async fn module_service(client: &Client, label: &str, except: Option<&str>) -> ServiceInfo {
    let catalog = client.catalog().await.expect("subscribe");
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let found = catalog.services().into_iter().find(|s| {
            s.metadata["protocol"] == "test-module"
                && s.metadata["label"] == label
                && Some(s.service_id.as_str()) != except
        });
        if let Some(service) = found {
            return service;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "no test-module service {label:?} (other than {except:?}) within {WAIT:?}: {:#?}",
            catalog.services()
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
}

/// Sends `method` to a test module's service and returns its answer.
pub async fn ask(client: &Client, service: &ServiceInfo, method: &str, params: Value) -> Value {
    client
        .request(&service.service_id, method, &params)
        .await
        .unwrap_or_else(|error| panic!("{method} to the test module: {error}"))
}

/// The `pid` a test module answered (`whoami`, `forkChild`).
pub fn pid_in(answer: &Value) -> u32 {
    answer["pid"]
        .as_u64()
        .and_then(|pid| u32::try_from(pid).ok())
        .unwrap_or_else(|| panic!("no pid in {answer}"))
}

/// Whether process `pid` still exists (a zombie counts as gone).
pub fn alive(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().next())
            .is_some_and(|state| state != "Z" && state != "X"),
        Err(_) => false,
    }
}

/// Waits until process `pid` is gone.
pub async fn wait_gone(pid: u32, what: &str) {
    switchboard_testkit::eventually(&format!("{what} (pid {pid}) ending"), || !alive(pid)).await;
}

/// SIGKILL to `pid`.
pub fn kill9(pid: u32) {
    // SAFETY: kill(2) takes plain integers; no memory is involved.
    let rc = unsafe { libc::kill(pid as libc::pid_t, libc::SIGKILL) };
    assert_eq!(rc, 0, "kill -9 {pid}");
}

/// The resident memory of process `pid`, in KiB.
pub fn rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("/proc status");
    status
        .lines()
        .find_map(|line| line.strip_prefix("VmRSS:"))
        .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmRSS in /proc status")
}
