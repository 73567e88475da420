//! Shared setup for the ACP front tests: a real tool provider on an
//! in-process hub (`switchboard_testkit::TestHub`), a scripted model
//! server on loopback, and `switchboard acp` child processes driven by the
//! official ACP client. Every wait is bounded by [`WAIT`]; nothing
//! synchronises by sleeping.

#![allow(dead_code)] // each test module uses a different part of this one

pub mod client_side;
pub mod editor;
pub mod model_server;
pub mod provider;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

use switchboard_client::Client;
use switchboard_testkit::TestHub;
pub use switchboard_testkit::WAIT;

pub use client_side::EditorCaps;
pub use editor::{settle, text_of, thoughts_of, tool_calls, Editor};
pub use model_server::{call, hold, say, text, use_tool, Act, ModelServer};
pub use provider::Provider;

pub struct Harness {
    pub model: ModelServer,
    pub provider: Provider,
    hub: TestHub,
    /// The sessions' working directory.
    pub workdir: PathBuf,
}

impl Harness {
    pub async fn start() -> Harness {
        let hub = TestHub::start().await;
        let provider = Provider::register(hub.client("test-provider").await).await;
        let workdir = hub.path("work");
        std::fs::create_dir_all(&workdir).expect("workdir");
        Harness {
            model: ModelServer::start().await,
            provider,
            hub,
            workdir,
        }
    }

    /// Another client of the hub.
    pub async fn hub_client(&self, name: &str) -> Client {
        self.hub.client(name).await
    }

    pub fn hub_dir(&self) -> &Path {
        self.hub.dir()
    }

    /// Shuts the hub down cleanly (the test provider goes with it).
    pub async fn stop_hub(&mut self) {
        self.hub.shut_down().await;
    }

    /// Starts a new hub in the same directory.
    pub async fn start_hub(&mut self) {
        self.hub.serve().await;
    }

    pub fn path(&self, name: &str) -> PathBuf {
        self.hub.path(name)
    }

    /// Writes a config file whose `[acp.models.NAME]` entries are `models`
    /// (`(name, url, api_key_env)`, model `<name>-model`) and returns its
    /// path, for `--config`.
    pub fn models_config(&self, models: &[(&str, &str, Option<&str>)]) -> PathBuf {
        let mut text = String::from("# the hub's sections would be here too\n");
        for (name, url, key) in models {
            text.push_str(&format!(
                "[acp.models.{name}]\nurl = \"{url}\"\nmodel = \"{name}-model\"\n"
            ));
            if let Some(var) = key {
                text.push_str(&format!("api_key_env = \"{var}\"\n"));
            }
        }
        let path = self.path("switchboard.toml");
        std::fs::write(&path, text).expect("write the config file");
        path
    }

    /// A `switchboard acp` on this hub and model server, initialized.
    pub async fn editor(&self) -> Editor {
        self.editor_with(&[]).await
    }

    pub async fn editor_with(&self, extra: &[&str]) -> Editor {
        self.editor_with_caps(EditorCaps::default(), extra).await
    }

    /// A `switchboard acp` whose editor advertises `caps`.
    pub async fn editor_with_caps(&self, caps: EditorCaps, extra: &[&str]) -> Editor {
        static SPAWNED: AtomicUsize = AtomicUsize::new(0);
        let n = SPAWNED.fetch_add(1, Ordering::Relaxed);
        let log = self.path(&format!("acp-{n}.log"));
        Editor::spawn(self.hub.dir(), &self.model.url(), extra, log, caps).await
    }
}

/// A named pipe the test reads a job's pid from: the read blocks until the
/// job has written it, so no polling is needed.
pub struct PidPipe {
    pub path: PathBuf,
}

impl PidPipe {
    pub fn create(path: PathBuf) -> PidPipe {
        let c_path = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: a valid NUL-terminated path; mkfifo has no other preconditions.
        let made = unsafe { libc::mkfifo(c_path.as_ptr(), 0o600) };
        assert_eq!(made, 0, "mkfifo {}", path.display());
        PidPipe { path }
    }

    /// A job command that reports its pid here, then sleeps.
    pub fn job_command(&self) -> String {
        format!("echo $$ > '{}'; exec sleep 600", self.path.display())
    }

    /// The pid the job wrote (bounded wait).
    pub async fn read_pid(&self) -> i32 {
        let path = self.path.clone();
        let read = tokio::task::spawn_blocking(move || std::fs::read_to_string(path));
        let text = tokio::time::timeout(WAIT, read)
            .await
            .expect("the job never wrote its pid")
            .expect("reader task")
            .expect("read the pid pipe");
        text.trim().parse().expect("a pid")
    }
}

/// Whether process `pid` has exited (gone, or a zombie nobody reaped yet).
pub fn process_gone(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        // The state follows the parenthesised command name.
        Ok(stat) => stat
            .rsplit_once(')')
            .map(|(_, rest)| rest.trim_start().starts_with('Z'))
            .unwrap_or(false),
    }
}

/// The workspace's small stdio MCP server (`crates/mcp/src/bin`).
pub fn mcp_test_server() -> PathBuf {
    switchboard_testkit::workspace_binary("mcp-test-server", "switchboard-testkit")
}

/// A stdio `mcpServers` entry running the test MCP server as `name`.
pub fn test_server_entry(name: &str, env: &[(&str, &str)]) -> serde_json::Value {
    serde_json::json!({
        "name": name,
        "command": mcp_test_server(),
        "args": [],
        "env": env.iter().map(|(k, v)| serde_json::json!({"name": k, "value": v})).collect::<Vec<_>>(),
    })
}

/// Runs one prompt whose model calls `tool` with `arguments`, then ends the
/// turn; answers the permission request with `permission` (and then checks
/// that one came), or checks that none came. Returns the call as the
/// session's updates show it.
pub async fn run_one_tool(
    h: &Harness,
    editor: &Editor,
    session: &str,
    prompt: &str,
    tool: &str,
    arguments: serde_json::Value,
    permission: Option<&str>,
) -> editor::ToolCallView {
    h.model
        .script(prompt, vec![use_tool("t", tool, arguments), say("ok")]);
    let answer = editor.prompt(session, prompt);
    if let Some(option) = permission {
        let request = editor.next_permission().await;
        assert_eq!(request.session(), session);
        request.answer(option);
    }
    let stop = settle(answer)
        .await
        .expect("the prompt's answer")
        .stop_reason;
    assert_eq!(stop, agent_client_protocol::v1::schema::StopReason::EndTurn);
    assert!(
        editor.pending_permission().await.is_none(),
        "{prompt}: asked unexpectedly"
    );
    editor::tool_calls(&editor.updates(session))
        .pop()
        .expect("the tool call")
}

/// Sends a prompt and answers every permission request it raises with
/// "always allow" (as a client run with an approve-all policy does);
/// returns the answer and how many requests came.
pub async fn prompt_approving_all(
    editor: &Editor,
    session: &str,
    text: &str,
) -> (
    Result<agent_client_protocol::v1::schema::PromptResponse, agent_client_protocol::Error>,
    usize,
) {
    let mut answer = editor.prompt(session, text);
    let mut asked = 0;
    let settled = tokio::time::timeout(WAIT, async {
        loop {
            tokio::select! {
                settled = &mut answer => return settled.expect("prompt task"),
                permission = editor.next_permission_unbounded() => {
                    asked += 1;
                    permission.answer("allow_always");
                }
            }
        }
    })
    .await
    .expect("the prompt was not answered in time");
    (settled, asked)
}

/// The current value of config option `id` in `options`.
pub fn option_value(
    options: &[agent_client_protocol::v1::schema::SessionConfigOption],
    id: &str,
) -> String {
    use agent_client_protocol::v1::schema::SessionConfigKind;
    let option = options
        .iter()
        .find(|option| &*option.id.0 == id)
        .unwrap_or_else(|| panic!("no config option {id:?} in {options:#?}"));
    match &option.kind {
        SessionConfigKind::Select(select) => select.current_value.0.to_string(),
        other => panic!("config option {id:?} is not a select: {other:?}"),
    }
}
