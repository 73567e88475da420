//! The gateway (`switchboard mcp`) with the official MCP clients and the
//! reference server, as real processes: `@modelcontextprotocol/server-everything`
//! hosted on a hub either by `switchboard provide-mcp` or as an
//! `[modules.NAME] mcp = [...]` module (no grants in the config), and, on
//! `switchboard mcp`, the official Python client (pip package `mcp`,
//! `mcp/py/*.py`) or the official TypeScript SDK client
//! (`@modelcontextprotocol/sdk`, `mcp/js/everything.mjs`, and
//! `mcp/js/tasks.mjs` with tasks declared), or the MCP
//! Inspector's CLI (`@modelcontextprotocol/inspector`), or Claude Code
//! (`@anthropic-ai/claude-code`) or Codex (`@openai/codex`) with a scripted
//! model. Each script runs
//! every check against the hub directory it is given, prints `FAILED:
//! <check>: <why>` for each that fails, and exits 1 if any did; the test
//! asserts it exited 0.
//!
//! `.ci/run` installs what they need (`python3 -m pip install mcp`; `npm
//! install --prefix crates/cli/tests/cli/mcp/js ...`, pinned by that
//! folder's package-lock.json); a test fails, saying so, when they are
//! missing.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use switchboard_testkit::switchboard_binary;

use crate::support::anthropic::ScriptedClaude;
use crate::support::mcp::{provider_id, Process};
use crate::support::modules::{toml_string, wait_gone, ModuleHub};
use crate::support::openai_responses::ScriptedResponses;
use crate::support::{read_hub_json, HubProcess};

/// How long one client script may run (its checks wait at most 60 s each).
const SCRIPT_WAIT: Duration = Duration::from_secs(300);

fn mcp_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/cli/mcp")
}

/// server-everything's entry point; fails, naming the install step, when
/// the npm packages are not installed.
pub(crate) fn everything_server() -> PathBuf {
    let js = mcp_dir().join("js");
    for package in [
        "@modelcontextprotocol/server-everything",
        "@modelcontextprotocol/sdk",
    ] {
        assert!(
            js.join("node_modules").join(package).join("package.json").exists(),
            "{package} is not installed in {}: run .ci/run's install step \
             `npm install --prefix crates/cli/tests/cli/mcp/js --ignore-scripts --no-audit --no-fund`",
            js.display()
        );
    }
    js.join("node_modules/@modelcontextprotocol/server-everything/dist/index.js")
}

/// Fails, naming the install step, when python's `mcp` package is missing.
fn python_mcp_installed() {
    let found = std::process::Command::new("python3")
        .args(["-c", "import mcp"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|status| status.success());
    assert!(
        found,
        "python3 cannot import the official MCP client (`mcp`): run .ci/run's install step \
         `python3 -m pip install mcp`"
    );
}

/// Runs `command` (stdin closed: `claude -p` waits for more prompt on an
/// open one, `codex exec` appends it; killed if the test ends first), at most
/// [`SCRIPT_WAIT`]; asserts it exited 0, showing its output otherwise, and
/// returns its stdout and stderr.
async fn succeeded(what: &str, mut command: tokio::process::Command) -> (String, String) {
    command.stdin(Stdio::null()).kill_on_drop(true);
    let output = tokio::time::timeout(SCRIPT_WAIT, command.output())
        .await
        .unwrap_or_else(|_| panic!("{what} did not finish within {SCRIPT_WAIT:?}"))
        .unwrap_or_else(|error| panic!("cannot run {what}: {error}"));
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert!(
        output.status.success(),
        "{what} failed ({}):\n{stdout}\n--- stderr ---\n{stderr}",
        output.status
    );
    (stdout, stderr)
}

/// A hub with server-everything on it under `namespace`.
enum Everything {
    /// `switchboard provide-mcp --namespace NS -- node ... stdio` (stopped
    /// first, when dropped).
    Provided { _provider: Process, hub: HubProcess },
    /// `[modules.NS] mcp = ["node", ..., "stdio"]` in the hub's config.
    Module(ModuleHub),
    /// server-everything in its Streamable HTTP mode on loopback, and
    /// `[modules.NS] mcp_url = "http://127.0.0.1:PORT/mcp"` (the hub is
    /// dropped, and the module stopped, before the server).
    Remote { hub: ModuleHub, _server: Process },
}

impl Everything {
    async fn provided(namespace: &str) -> Everything {
        let server = everything_server();
        let hub = HubProcess::start();
        let child = std::process::Command::new(switchboard_binary())
            .args(["provide-mcp", "--namespace", namespace, "--dir"])
            .arg(hub.dir())
            .arg("--")
            .arg("node")
            .arg(&server)
            .arg("stdio")
            .env(
                "RUST_LOG",
                std::env::var("RUST_LOG").unwrap_or_else(|_| "warn".into()),
            )
            .stdin(Stdio::null())
            .spawn()
            .expect("start switchboard provide-mcp");
        let everything = Everything::Provided {
            _provider: Process::from(child),
            hub,
        };
        everything.listed(namespace).await;
        everything
    }

    async fn module(namespace: &str) -> Everything {
        let server = everything_server();
        let config = format!(
            "[modules.{namespace}]\nmcp = [\"node\", {}, \"stdio\"]\n",
            toml_string(&server.to_string_lossy())
        );
        let everything = Everything::Module(ModuleHub::start(&config));
        everything.listed(namespace).await;
        everything
    }

    async fn remote(namespace: &str) -> Everything {
        let port = {
            let probe = std::net::TcpListener::bind("127.0.0.1:0").expect("a free port");
            probe.local_addr().unwrap().port()
        };
        let server = std::process::Command::new("node")
            .arg(everything_server())
            .arg("streamableHttp")
            .env("PORT", port.to_string())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start server-everything streamableHttp");
        let server = Process::from(server);
        let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
        while tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .is_err()
        {
            assert!(
                tokio::time::Instant::now() < deadline,
                "server-everything did not listen on port {port} within 30 s"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let config = format!("[modules.{namespace}]\nmcp_url = \"http://127.0.0.1:{port}/mcp\"\n");
        let everything = Everything::Remote {
            hub: ModuleHub::start(&config),
            _server: server,
        };
        everything.listed(namespace).await;
        everything
    }

    fn dir(&self) -> &Path {
        match self {
            Everything::Provided { hub, .. } => hub.dir(),
            Everything::Module(hub) | Everything::Remote { hub, .. } => hub.dir(),
        }
    }

    /// Returns once the provider of `namespace` is in the hub's catalog.
    async fn listed(&self, namespace: &str) {
        let client = match self {
            Everything::Provided { hub, .. } => hub.client("watcher").await,
            Everything::Module(hub) | Everything::Remote { hub, .. } => hub.client().await,
        };
        provider_id(&client, namespace).await;
        client.close();
    }

    /// Runs `program script SWITCHBOARD_BIN HUB_DIR NAMESPACE` and asserts
    /// it exits 0, showing its output otherwise.
    async fn run(&self, program: &str, script: &str, namespace: &str) {
        self.run_with(program, script, namespace, &[]).await;
    }

    /// As [`Everything::run`], the script speaking Streamable HTTP to the
    /// hub's own `/mcp` (`hub.json`'s `mcp_url`) with the hub's token
    /// (`py/transport.py`).
    async fn run_over_http(&self, script: &str, namespace: &str) {
        let info = read_hub_json(self.dir()).expect("the hub wrote hub.json");
        let url = info["mcp_url"].as_str().expect("hub.json names mcp_url");
        let token = info["token"].as_str().expect("hub.json has a token");
        let env = [
            ("SWITCHBOARD_MCP_URL", url),
            ("SWITCHBOARD_MCP_TOKEN", token),
        ];
        self.run_with("python3", script, namespace, &env).await;
    }

    async fn run_with(&self, program: &str, script: &str, namespace: &str, env: &[(&str, &str)]) {
        let script = mcp_dir().join(script);
        let mut command = tokio::process::Command::new(program);
        command
            .arg(&script)
            .arg(switchboard_binary())
            .arg(self.dir())
            .arg(namespace)
            .current_dir(script.parent().unwrap())
            .envs(env.iter().copied())
            .env(
                "RUST_LOG",
                std::env::var("RUST_LOG").unwrap_or_else(|_| "warn".into()),
            );
        let (stdout, _) = succeeded(&format!("{program} {}", script.display()), command).await;
        assert!(stdout.contains("all checks passed"), "{stdout}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_python_client_uses_everything_hosted_by_provide_mcp() {
    python_mcp_installed();
    let hub = Everything::provided("everything").await;
    hub.run("python3", "py/everything.py", "everything").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_python_client_uses_everything_as_a_module() {
    python_mcp_installed();
    let hub = Everything::module("modev").await;
    hub.run("python3", "py/everything.py", "modev").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_python_clients_each_answer_only_their_own_sampling() {
    python_mcp_installed();
    let hub = Everything::provided("everything").await;
    hub.run("python3", "py/two_clients.py", "everything").await;
}

/// The same checks over Streamable HTTP, against the gateway the hub
/// serves itself at `/mcp`, with server-everything as a module.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_python_client_uses_everything_through_the_hubs_http_gateway() {
    python_mcp_installed();
    let hub = Everything::module("modev").await;
    hub.run_over_http("py/everything.py", "modev").await;
}

/// Over HTTP both clients are sessions of the one gateway in the hub:
/// each sampling request still reaches only the session whose call it is.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_python_clients_over_http_each_answer_only_their_own_sampling() {
    python_mcp_installed();
    let hub = Everything::provided("everything").await;
    hub.run_over_http("py/two_clients.py", "everything").await;
}

/// A 2026-07-28 client (`server/discover`, no session) over HTTP: each of
/// its requests is served on its own.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_2026_07_28_python_client_is_served_statelessly_over_http() {
    python_mcp_installed();
    let hub = Everything::provided("everything").await;
    hub.run_over_http("py/stateless.py", "everything").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_typescript_client_uses_everything_hosted_by_provide_mcp() {
    let hub = Everything::provided("everything").await;
    hub.run("node", "js/everything.mjs", "everything").await;
}

/// server-everything as a remote server (its Streamable HTTP mode),
/// hosted through `mcp_url`: tools, resources, prompts, elicitation and
/// sampling reach the TypeScript client as from a stdio server.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_typescript_client_uses_everything_over_streamable_http_as_a_module() {
    let hub = Everything::remote("remev").await;
    hub.run("node", "js/everything.mjs", "remev").await;
}

/// A task through a remote server: the task-required tool (its
/// `execution`, which rmcp's own HTTP client would drop) listed only to the
/// client that declared tasks, and run as one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_typescript_client_runs_a_task_on_everything_over_streamable_http() {
    let hub = Everything::remote("remev").await;
    hub.run("node", "js/tasks.mjs", "remev").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_typescript_client_uses_everything_as_a_module() {
    let hub = Everything::module("modev").await;
    hub.run("node", "js/everything.mjs", "modev").await;
}

/// Codex, unmodified, as the MCP host of `switchboard mcp`: its model (a
/// scripted Responses API on loopback) calls a tool of server-everything
/// hosted on the hub, and the tool's answer comes back to the model.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn codex_calls_a_hub_tool_through_the_gateway() {
    let hub = Everything::provided("everything").await;
    let model = ScriptedResponses::start("sb", "everything__echo").await;
    let home = tempfile::tempdir().unwrap();
    // `required`: Codex waits for the gateway before its first request (and
    // fails if it cannot start) instead of asking the model without it.
    // Analytics and plugins off: nothing but the scripted model is reached.
    let config = format!(
        "model = \"scripted-model\"\nmodel_provider = \"scripted\"\n\n\
         [model_providers.scripted]\nname = \"scripted\"\nbase_url = {}\n\
         wire_api = \"responses\"\nenv_key = \"SCRIPTED_MODEL_KEY\"\n\n\
         [analytics]\nenabled = false\n\n[features]\nplugins = false\n\n\
         [mcp_servers.sb]\ncommand = {}\nargs = [\"mcp\", \"--dir\", {}]\n\
         required = true\nstartup_timeout_sec = 30\n",
        toml_string(&model.url()),
        toml_string(&switchboard_binary().to_string_lossy()),
        toml_string(&hub.dir().to_string_lossy()),
    );
    std::fs::write(home.path().join("config.toml"), config).unwrap();
    let codex = mcp_host(
        "@openai/codex-linux-x64",
        "vendor/x86_64-unknown-linux-musl/bin/codex",
    );
    let mut command = tokio::process::Command::new(codex);
    command
        .args(["exec", "--skip-git-repo-check", "Call the hub's echo tool."])
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", home.path())
        .env("CODEX_HOME", home.path())
        .env("SCRIPTED_MODEL_KEY", "scripted")
        .current_dir(home.path());
    let (stdout, stderr) = succeeded("codex", command).await;
    let echoed = format!("Echo: {}", ScriptedResponses::ARGUMENT);
    assert_eq!(
        model.tool_outputs(),
        vec![echoed.clone()],
        "the tool's answer did not reach the model:\n{stdout}\n--- stderr ---\n{stderr}"
    );
    assert_eq!(stdout.trim(), format!("done: {echoed}"), "{stderr}");
}

/// Tasks with a client that declares them: the task-required tool listed,
/// run as a task (created, polled, its result fetched), an unknown task id
/// refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_typescript_client_runs_a_task_required_tool_as_a_task() {
    let hub = Everything::provided("everything").await;
    hub.run("node", "js/tasks.mjs", "everything").await;
}

/// One run of the MCP Inspector's CLI (`mcp-inspector --cli`, npm package
/// `@modelcontextprotocol/inspector`) on `switchboard mcp` for the hub in
/// `dir`: its JSON answer. The Inspector starts the gateway itself, with
/// only the environment MCP's SDK passes a server (so `--dir`).
async fn inspector(dir: &Path, args: &[&str]) -> serde_json::Value {
    let mut target = vec![switchboard_binary().into_os_string()];
    target.extend(["mcp".into(), "--dir".into(), dir.as_os_str().to_owned()]);
    run_inspector(&target, args).await
}

/// The names in a `tools/list` answer.
fn tool_names(listed: &serde_json::Value) -> Vec<&str> {
    listed["tools"]
        .as_array()
        .expect("a tools array")
        .iter()
        .filter_map(|tool| tool["name"].as_str())
        .collect()
}

/// The Inspector CLI against the hub's own `/mcp` over Streamable HTTP.
async fn inspector_over_http(dir: &Path, args: &[&str]) -> serde_json::Value {
    let info = read_hub_json(dir).expect("the hub wrote hub.json");
    let authorization = format!("Authorization: Bearer {}", info["token"].as_str().unwrap());
    let target: Vec<std::ffi::OsString> = vec![
        info["mcp_url"]
            .as_str()
            .expect("hub.json names mcp_url")
            .into(),
        "--transport".into(),
        "http".into(),
        "--header".into(),
        authorization.into(),
    ];
    run_inspector(&target, args).await
}

async fn run_inspector(target: &[std::ffi::OsString], args: &[&str]) -> serde_json::Value {
    let bin = mcp_dir().join("js/node_modules/.bin/mcp-inspector");
    assert!(
        bin.exists(),
        "the MCP Inspector is not installed: run .ci/run's install step \
         `npm install --prefix crates/cli/tests/cli/mcp/js --ignore-scripts --no-audit --no-fund`"
    );
    let home = tempfile::tempdir().unwrap();
    let mut command = tokio::process::Command::new(bin);
    command
        .arg("--cli")
        .args(target)
        .args(args)
        // Its catalog of servers goes here, not to the user's home.
        .env("MCP_CATALOG_PATH", home.path().join("mcp.json"))
        .env("HOME", home.path());
    let (stdout, _) = succeeded("mcp-inspector", command).await;
    serde_json::from_str(&stdout).unwrap_or_else(|error| {
        panic!("mcp-inspector {args:?} printed no JSON ({error}): {stdout}")
    })
}

/// The Inspector CLI with the hub's `/mcp` as its server URL.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_mcp_inspector_cli_lists_calls_and_gets_over_the_hubs_http_gateway() {
    let hub = Everything::provided("everything").await;
    let dir = hub.dir();
    let tools = inspector_over_http(dir, &["--method", "tools/list"]).await;
    let names = tool_names(&tools);
    assert!(names.contains(&"everything__echo"), "{names:?}");
    let echo = [
        "--method",
        "tools/call",
        "--tool-name",
        "everything__echo",
        "--tool-arg",
        "message=over http",
    ];
    let answer = inspector_over_http(dir, &echo).await;
    assert_eq!(answer["content"][0]["text"], "Echo: over http", "{answer}");
    let prompt = [
        "--method",
        "prompts/get",
        "--prompt-name",
        "everything__args-prompt",
        "--prompt-args",
        "city=Porto",
    ];
    let got = inspector_over_http(dir, &prompt).await;
    let text = got["messages"][0]["content"]["text"]
        .as_str()
        .unwrap_or_default();
    assert!(text.contains("Porto"), "{got}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_mcp_inspector_cli_lists_calls_reads_and_gets_through_the_gateway() {
    let hub = Everything::provided("everything").await;
    let dir = hub.dir();

    let tools = inspector(dir, &["--method", "tools/list"]).await;
    let names = tool_names(&tools);
    assert!(names.contains(&"everything__echo"), "{names:?}");
    assert!(
        names.iter().all(|name| name.starts_with("everything__")),
        "{names:?}"
    );

    let echo = ["--method", "tools/call", "--tool-name", "everything__echo"];
    let answer = inspector(dir, &[&echo[..], &["--tool-arg", "message=hi"]].concat()).await;
    assert_eq!(answer["content"][0]["text"], "Echo: hi", "{answer}");
    // A client's own call key (`_meta`), as the Inspector sends tool
    // metadata: the call goes through the provider's fence.
    let keyed = [
        &echo[..],
        &[
            "--tool-arg",
            "message=fenced",
            "--tool-metadata",
            "switchboard/callKey=inspector-1",
        ],
    ]
    .concat();
    let first = inspector(dir, &keyed).await;
    assert_eq!(first["content"][0]["text"], "Echo: fenced", "{first}");
    assert_eq!(inspector(dir, &keyed).await, first);

    let resources = inspector(dir, &["--method", "resources/list"]).await;
    assert!(
        !resources["resources"].as_array().unwrap().is_empty(),
        "{resources}"
    );
    let templates = inspector(dir, &["--method", "resources/templates/list"]).await;
    assert!(
        templates["resourceTemplates"]
            .as_array()
            .unwrap()
            .iter()
            .any(|t| t["uriTemplate"] == "demo://resource/dynamic/text/{resourceId}"),
        "{templates}"
    );
    let read = [
        "--method",
        "resources/read",
        "--uri",
        "demo://resource/dynamic/text/7",
    ];
    let read = inspector(dir, &read).await;
    let text = read["contents"][0]["text"].as_str().unwrap_or_default();
    assert!(text.starts_with("Resource 7:"), "{read}");

    let prompts = inspector(dir, &["--method", "prompts/list"]).await;
    assert!(
        prompts["prompts"]
            .as_array()
            .unwrap()
            .iter()
            .any(|p| p["name"] == "everything__args-prompt"),
        "{prompts}"
    );
    let get = [
        "--method",
        "prompts/get",
        "--prompt-name",
        "everything__args-prompt",
        "--prompt-args",
        "city=Paris",
    ];
    let prompt = inspector(dir, &get).await;
    let text = prompt["messages"][0]["content"]["text"]
        .as_str()
        .unwrap_or_default();
    assert!(text.contains("Paris"), "{prompt}");

    let level = inspector(
        dir,
        &["--method", "logging/setLevel", "--log-level", "debug"],
    )
    .await;
    assert_eq!(level, serde_json::json!({}));
}

/// An MCP host's native binary, from its npm package pinned in
/// `mcp/hosts/` (`package` is the per-platform package, `path` the binary
/// in it); fails, naming the install step, when it is missing.
fn mcp_host(package: &str, path: &str) -> PathBuf {
    let bin = mcp_dir()
        .join("hosts/node_modules")
        .join(package)
        .join(path);
    assert!(
        bin.exists(),
        "{package} is not installed: run .ci/run's install step \
         `npm install --prefix crates/cli/tests/cli/mcp/hosts --ignore-scripts --no-audit --no-fund`"
    );
    bin
}

/// Claude Code, unmodified, as the MCP host of `switchboard mcp`: its model
/// (a scripted Messages API on loopback) calls a tool of server-everything
/// hosted on the hub, and the tool's answer comes back to the model.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claude_code_calls_a_hub_tool_through_the_gateway() {
    let hub = Everything::provided("everything").await;
    let config = serde_json::json!({"mcpServers": {"sb": {
        "command": switchboard_binary(),
        "args": ["mcp", "--dir", hub.dir()],
    }}});
    claude_code_calls_echo(config).await;
}

/// Claude Code with the hub's own `/mcp` as an HTTP MCP server (what
/// `claude mcp add --transport http sb URL --header "Authorization: Bearer
/// TOKEN"` writes), nothing spawned.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claude_code_calls_a_hub_tool_through_the_hubs_http_gateway() {
    let hub = Everything::provided("everything").await;
    let info = read_hub_json(hub.dir()).expect("the hub wrote hub.json");
    let config = serde_json::json!({"mcpServers": {"sb": {
        "type": "http",
        "url": info["mcp_url"],
        "headers": {"Authorization": format!("Bearer {}", info["token"].as_str().unwrap())},
    }}});
    claude_code_calls_echo(config).await;
}

/// Runs Claude Code with `config` as its only MCP servers (`sb`: the
/// gateway) and checks that its model's echo call came back through it.
async fn claude_code_calls_echo(config: serde_json::Value) {
    let tool = "mcp__sb__everything__echo";
    let model = ScriptedClaude::start(tool).await;
    let home = tempfile::tempdir().unwrap();
    let claude = mcp_host("@anthropic-ai/claude-code-linux-x64", "claude");
    let mut command = tokio::process::Command::new(claude);
    command
        .args(["-p", "Echo a greeting through the hub's echo tool."])
        .arg("--mcp-config")
        .arg(config.to_string())
        .args(["--strict-mcp-config", "--allowedTools", tool])
        .args(["--output-format", "json"])
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", home.path())
        .env("ANTHROPIC_BASE_URL", model.url())
        .env("ANTHROPIC_API_KEY", "scripted-model-key")
        // Nothing but the scripted model: no update checks, no telemetry.
        .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
        .env("DISABLE_AUTOUPDATER", "1")
        .env("DISABLE_TELEMETRY", "1")
        .current_dir(home.path());
    let (stdout, _) = succeeded("claude", command).await;
    let echoed = format!("Echo: {}", ScriptedClaude::ARGUMENT);
    assert_eq!(
        model.tool_results(),
        vec![echoed.clone()],
        "the tool's answer did not reach the model; requests: {}",
        model.requests().len()
    );
    let answer: serde_json::Value = serde_json::from_str(&stdout)
        .unwrap_or_else(|error| panic!("claude printed no JSON ({error}): {stdout}"));
    assert_eq!(answer["result"], format!("done: {echoed}"), "{answer}");
}

/// server-everything does not exit when its stdin closes: a `provide-mcp`
/// killed without warning must still take it along (the parent-death
/// signal its MCP client sets), or every such kill leaks a Node process.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_provide_mcp_takes_its_server_with_it() {
    let everything = Everything::provided("everything").await;
    let Everything::Provided { _provider, .. } = &everything else {
        unreachable!("provided() hosts it with provide-mcp");
    };
    let provider = u32::try_from(_provider.pid()).expect("a pid");
    let servers = switchboard_testkit::procfs::children(provider);
    assert_eq!(
        servers.len(),
        1,
        "one server under provide-mcp: {servers:?}"
    );
    crate::support::modules::kill9(provider);
    wait_gone(
        servers[0],
        "server-everything after its provide-mcp was killed",
    )
    .await;
}
