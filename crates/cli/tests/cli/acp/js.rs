//! Real JavaScript ACP clients driving `switchboard acp` as their users
//! drive agents: the official TypeScript SDK (`@agentclientprotocol/sdk`,
//! `js/sdk_resume_config.mjs`) and acpx (its command line, pointed at the
//! agent with `--agent`). Their packages are pinned in `js/package.json`
//! and its lock; `.ci/run` installs them (`npm install`), and a test
//! installs them itself when they are missing. Skipped, saying so, only when node or npm is
//! absent.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Mutex;
use std::time::Duration;

use serde_json::json;

use crate::acp::support::*;

/// How long one node process may run (acpx starts an agent per command).
const NODE_WAIT: Duration = Duration::from_secs(90);

fn js_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/cli/acp/js")
}

/// The directory with the installed packages, or `None` (with a message)
/// when node or npm is not installed.
fn node_packages() -> Option<PathBuf> {
    static INSTALL: Mutex<()> = Mutex::new(());
    for tool in ["node", "npm"] {
        let found = std::process::Command::new(tool)
            .arg("--version")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|status| status.success());
        if !found {
            eprintln!(
                "SKIPPED: {tool} is not installed, so the ACP TypeScript SDK and acpx tests \
                 cannot run (install Node.js and npm to run them)"
            );
            return None;
        }
    }
    let dir = js_dir();
    let _installing = INSTALL
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    let installed = ["@agentclientprotocol/sdk", "acpx"].iter().all(|package| {
        dir.join("node_modules")
            .join(package)
            .join("package.json")
            .exists()
    });
    if !installed {
        let output = std::process::Command::new("npm")
            .args(["install", "--ignore-scripts", "--no-audit", "--no-fund"])
            .current_dir(&dir)
            .output()
            .expect("run npm ci");
        assert!(
            output.status.success(),
            "npm install in {} failed: {}",
            dir.display(),
            String::from_utf8_lossy(&output.stderr)
        );
    }
    Some(dir)
}

/// Runs `node args…` in `cwd` with `env`; returns (success, stdout, stderr).
async fn node(cwd: &Path, args: &[&str], env: &[(&str, &str)]) -> (bool, String, String) {
    let mut command = tokio::process::Command::new("node");
    command
        .args(args)
        .current_dir(cwd)
        .stdin(Stdio::null())
        .kill_on_drop(true);
    for (name, value) in env {
        command.env(name, value);
    }
    let output = tokio::time::timeout(NODE_WAIT, command.output())
        .await
        .unwrap_or_else(|_| panic!("node {args:?} did not finish within {NODE_WAIT:?}"))
        .expect("run node");
    (
        output.status.success(),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

/// acpx as a user runs it: in the project directory, with its own home
/// (`~/.acpx`), the agent given with `--agent`, and a queue owner that
/// lingers one second.
struct Acpx {
    cli: PathBuf,
    agent: String,
    workdir: PathBuf,
    home: PathBuf,
}

impl Acpx {
    /// Runs `acpx --agent AGENT --ttl 1 args…`; returns its stdout.
    async fn run(&self, args: &[&str]) -> String {
        let mut all = vec![
            self.cli.to_str().unwrap(),
            "--agent",
            &self.agent,
            "--ttl",
            "1",
        ];
        all.extend(args);
        let home = self.home.to_str().unwrap();
        let (ok, stdout, stderr) = node(&self.workdir, &all, &[("HOME", home)]).await;
        assert!(ok, "acpx {args:?} failed:\n{stdout}\n{stderr}");
        stdout
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_typescript_sdk_resumes_a_session_and_switches_its_model() {
    let Some(js) = node_packages() else { return };
    let h = Harness::start().await;
    let second = ModelServer::start().await;
    let config = h.models_config(&[("second", &second.url(), None)]);
    second.script("ts first", vec![say("second first")]);
    second.script("ts second", vec![say("second again")]);
    let binary = switchboard_testkit::switchboard_binary();
    let (ok, stdout, stderr) = node(
        &js,
        &["sdk_resume_config.mjs"],
        &[
            ("SWITCHBOARD_BIN", binary.to_str().unwrap()),
            ("HUB_DIR", h.hub_dir().to_str().unwrap()),
            ("MODEL_URL", &h.model.url()),
            ("CONFIG", config.to_str().unwrap()),
            ("WORKDIR", h.workdir.to_str().unwrap()),
        ],
    )
    .await;
    assert!(ok, "the SDK script failed:\n{stdout}\n{stderr}");
    assert_eq!(stdout.trim(), "ok");
    // Both prompts went to the model the session switched to, the second
    // one after a resume in another process.
    assert_eq!(second.requests_for("ts first")[0]["model"], "second-model");
    assert_eq!(second.requests_for("ts second")[0]["model"], "second-model");
    assert_eq!(h.model.request_count(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acpx_set_mode_read_only_holds_for_a_prompt_with_approve_all() {
    let Some(js) = node_packages() else { return };
    let h = Harness::start().await;
    let second = ModelServer::start().await;
    let config = h.models_config(&[("second", &second.url(), None)]);
    let home = h.path("acpx-home");
    std::fs::create_dir_all(&home).unwrap();
    let agent = format!(
        "{} acp --dir {} --model-url {} --model test-model --config {}",
        switchboard_testkit::switchboard_binary().display(),
        h.hub_dir().display(),
        h.model.url(),
        config.display()
    );
    let acpx = Acpx {
        cli: js.join("node_modules/acpx/dist/cli.js"),
        agent,
        workdir: h.workdir.clone(),
        home,
    };
    let session = acpx.run(&["sessions", "new"]).await;
    let session = session.trim();
    assert!(session.starts_with("sess_"), "{session}");
    acpx.run(&["set", "model", "second"]).await;
    let set = acpx.run(&["set-mode", "read-only"]).await;
    assert!(set.contains("read-only"), "{set}");

    second.script(
        "acpx writes",
        vec![
            use_tool(
                "w",
                "write_file",
                json!({"path": "acpx.txt", "content": "x"}),
            ),
            say("could not write"),
        ],
    );
    let answer = acpx.run(&["--approve-all", "acpx writes"]).await;
    assert!(answer.contains("could not write"), "{answer}");
    assert!(
        !h.workdir.join("acpx.txt").exists(),
        "read-only mode wrote a file"
    );
    // The turn went to the model set with `acpx set model`, and the model
    // was told why the write did not run.
    let requests = second.wait_requests("acpx writes", 2).await;
    assert_eq!(requests[0]["model"], "second-model");
    let told = requests[1]["messages"].as_array().unwrap().last().unwrap();
    assert!(
        told["content"].as_str().unwrap().contains("read-only mode"),
        "{told}"
    );
    assert_eq!(h.model.request_count(), 0);
}
