//! A remote MCP server behind OAuth 2.1, end to end with real parts: the
//! authorization server is `oidc-provider` (npm), the MCP server the
//! official Python SDK checking every token by introspection
//! (`mcp/oauth/`, its README says what each does), the user a scripted
//! browser (`mcp/oauth/browser.py`). `[modules.tracker] oauth = true`:
//!
//! - with no login the module is `needs-login`, its tools absent;
//! - `switchboard mcp login tracker` discovers, registers, prints the
//!   authorization URL, completes on its loopback redirect, saves the
//!   tokens 0600 and restarts the module: its tools work through the
//!   gateway;
//! - the access token expires mid-session and is refreshed;
//! - the grant revoked at the authorization server: the refresh is
//!   refused, the module is `needs-login`, its tools leave the catalog;
//! - a second login brings it back.
//!
//! No token is in the module's log, `switchboard modules` or `status`.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use serde_json::{json, Value};
use switchboard_client::protocol::modules::ModuleState;
use switchboard_testkit::switchboard_binary;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

use crate::support::http_mcp::html_server;
use crate::support::mcp::{gateway_on, text_of, Process};
use crate::support::modules::{modules, toml_string, wait_module, ModuleHub};
use crate::support::switchboard;

/// The access tokens' life: a refresh is due when less than half is left.
const ACCESS_TOKEN_TTL: u64 = 8;

fn oauth_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/cli/mcp/oauth")
}

/// Starts `command` and returns it with the JSON of its first stdout line
/// (the fixtures' "ready" line).
async fn start_ready(mut command: std::process::Command, what: &str) -> (Process, Value) {
    let mut child = command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap_or_else(|error| panic!("start {what}: {error}"));
    let stdout = child.stdout.take().expect("stdout");
    let line = tokio::task::spawn_blocking(move || {
        let mut line = String::new();
        std::io::BufRead::read_line(&mut std::io::BufReader::new(stdout), &mut line).map(|_| line)
    });
    let Ok(line) = tokio::time::timeout(Duration::from_secs(60), line).await else {
        // Killed first: its end of the pipe closes, so the blocking read
        // returns and the runtime can shut down; the test fails here
        // instead of hanging in the runtime's drop.
        let _ = child.kill();
        let _ = child.wait();
        panic!("{what} was not ready within 60 s");
    };
    let line = line
        .unwrap()
        .unwrap_or_else(|error| panic!("read {what}'s ready line: {error}"));
    let ready = serde_json::from_str(line.trim())
        .unwrap_or_else(|error| panic!("{what}'s ready line {line:?}: {error}"));
    (Process::from(child), ready)
}

/// The authorization server and the MCP server it protects.
struct OAuthWorld {
    issuer: String,
    url: String,
    _servers: (Process, Process),
}

impl OAuthWorld {
    async fn start() -> OAuthWorld {
        OAuthWorld::start_with(&[]).await
    }

    /// With more of the authorization server's settings (its README).
    async fn start_with(settings: &[(&str, &str)]) -> OAuthWorld {
        // The test's own HTTP client (the authorization server's test endpoints).
        let _ = rustls::crypto::ring::default_provider().install_default();
        let js = oauth_dir().join("../js/node_modules/oidc-provider");
        assert!(
            js.exists(),
            "oidc-provider is not installed: npm install --prefix crates/cli/tests/cli/mcp/js --ignore-scripts --no-audit --no-fund"
        );
        let mut authorization = std::process::Command::new("node");
        authorization
            .arg(oauth_dir().join("authorization_server.mjs"))
            .arg("0")
            .env("OAUTH_ACCESS_TOKEN_TTL", ACCESS_TOKEN_TTL.to_string())
            .env("OAUTH_QUIET", "1")
            .envs(settings.iter().copied());
        let (authorization, ready) = start_ready(authorization, "the authorization server").await;
        let issuer = ready["issuer"].as_str().expect("issuer").to_owned();
        let mut resource = std::process::Command::new("python3");
        resource
            .arg(oauth_dir().join("protected_server.py"))
            .args(["--issuer", &issuer, "--port", "0"]);
        let (resource, ready) = start_ready(resource, "the protected MCP server").await;
        let url = ready["url"].as_str().expect("url").to_owned();
        OAuthWorld {
            issuer,
            url,
            _servers: (authorization, resource),
        }
    }

    /// What clients sent the authorization server (never a secret).
    async fn log(&self) -> Value {
        let url = format!("{}/test/log", self.issuer);
        let body = reqwest::get(&url).await.unwrap().bytes().await.unwrap();
        serde_json::from_slice(&body).expect("the log is JSON")
    }

    /// Revokes `tokens` at the authorization server: `all` (the user
    /// revokes Switchboard's access: every grant and token) or `access`
    /// (only the access tokens: an expiry without the wait).
    async fn revoke(&self, tokens: &str) {
        let url = format!("{}/test/revoke?tokens={tokens}", self.issuer);
        let answer = reqwest::Client::new().post(&url).send().await.unwrap();
        assert!(answer.status().is_success(), "{answer:?}");
    }

    /// Token requests of `grant_type` that ended in `outcome`.
    async fn token_requests(&self, grant_type: &str, outcome: &str) -> usize {
        self.log().await["token_requests"]
            .as_array()
            .map_or(0, |requests| {
                requests
                    .iter()
                    .filter(|r| r["grant_type"] == grant_type && r["outcome"] == outcome)
                    .count()
            })
    }
}

/// `switchboard mcp login NAME`, as `needs-login` tells the user to run it
/// (the running hub says where the module's server is), its browser played
/// by `browser.py`: the login's stdout, once it has exited 0.
async fn login(hub: &ModuleHub, name: &str) -> String {
    let mut child: Child = Command::new(switchboard_binary())
        .args(["mcp", "login", name, "--no-browser", "--wait", "60s"])
        .args(["--dir", hub.dir_arg()])
        .env_remove("SWITCHBOARD_CONFIG")
        .env("RUST_LOG", "warn")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("spawn switchboard mcp login");
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut printed = Vec::new();
    let authorization = loop {
        let line = tokio::time::timeout(Duration::from_secs(60), lines.next_line())
            .await
            .expect("login printed no URL within 60 s")
            .unwrap()
            .unwrap_or_else(|| panic!("login ended before a URL: {printed:?}"));
        printed.push(line.clone());
        if line.starts_with("http") {
            break line;
        }
    };
    let browser = Command::new("python3")
        .arg(oauth_dir().join("browser.py"))
        .arg(&authorization)
        .output()
        .await
        .expect("run browser.py");
    assert!(
        browser.status.success(),
        "the browser: {}\n{}",
        String::from_utf8_lossy(&browser.stdout),
        String::from_utf8_lossy(&browser.stderr)
    );
    while let Some(line) = tokio::time::timeout(Duration::from_secs(60), lines.next_line())
        .await
        .expect("login did not finish within 60 s")
        .unwrap()
    {
        printed.push(line);
    }
    let finished = child.wait_with_output().await.unwrap();
    let printed = printed.join("\n");
    assert!(
        finished.status.success(),
        "login failed: {printed}\n{}",
        String::from_utf8_lossy(&finished.stderr)
    );
    printed
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_module_behind_oauth_logs_in_refreshes_and_needs_login_once_revoked() {
    let world = OAuthWorld::start().await;
    let hub = ModuleHub::start(&format!(
        "[modules.tracker]\nmcp_url = {}\noauth = true\n",
        toml_string(&world.url)
    ));
    let client = hub.client().await;

    // No login yet: the module says what to do, and is not restarted.
    let waiting = wait_module(&client, "tracker", "needs-login", |module| {
        module.state == ModuleState::NeedsLogin
    })
    .await;
    assert!(
        waiting
            .last_exit
            .as_deref()
            .is_some_and(|exit| exit.contains("switchboard mcp login tracker")),
        "{waiting:?}"
    );
    assert_eq!(
        waiting.oauth.as_ref().map(|login| login.url.as_str()),
        Some(world.url.as_str())
    );

    // The login: discovery, registration, PKCE, the redirect; the module
    // restarted with it.
    let printed = login(&hub, "tracker").await;
    assert!(
        printed.contains("Open this link to sign in to tracker:"),
        "{printed}"
    );
    assert!(printed.contains("Logged in to tracker."), "{printed}");
    assert!(printed.contains("tracker: running"), "{printed}");
    let log = world.log().await;
    let registration = &log["registrations"][0];
    assert_eq!(registration["token_endpoint_auth_method"], "none", "{log}");
    let authorization = &log["authorizations"][0];
    assert_eq!(authorization["code_challenge_method"], "S256", "{log}");
    assert_eq!(authorization["resource"], world.url.as_str(), "{log}");

    let credentials = hub.dir().join("oauth/tracker.json");
    let mode = std::fs::metadata(&credentials)
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600, "the tokens are private");
    let stored: Value = serde_json::from_slice(&std::fs::read(&credentials).unwrap()).unwrap();
    let first_token = stored["token_response"]["access_token"]
        .as_str()
        .expect("an access token is stored")
        .to_owned();

    let gateway = gateway_on(hub.dir()).await;
    gateway.wait_for_tool("tracker__whoami").await;
    let whoami = gateway
        .call("tracker__whoami", json!({}))
        .await
        .expect("whoami through the gateway");
    let who: Value = serde_json::from_str(&text_of(&whoami)).expect("whoami's JSON");
    assert_eq!(who["authenticated"], true, "{who}");

    // Past half the token's life, the next request refreshes it first.
    tokio::time::sleep(Duration::from_secs(ACCESS_TOKEN_TTL / 2 + 1)).await;
    let echo = gateway
        .call("tracker__echo", json!({"text": "after expiry"}))
        .await
        .expect("echo after the token's refresh");
    assert_eq!(text_of(&echo), "after expiry");
    assert!(
        world.token_requests("refresh_token", "ok").await >= 1,
        "{}",
        world.log().await
    );
    let stored: Value = serde_json::from_slice(&std::fs::read(&credentials).unwrap()).unwrap();
    assert_ne!(
        stored["token_response"]["access_token"].as_str(),
        Some(first_token.as_str()),
        "the refreshed token is saved"
    );

    // The server refuses the access token (401): the same request goes
    // again, at once, with a fresh one; the caller sees nothing of it.
    world.revoke("access").await;
    let refreshed = world.token_requests("refresh_token", "ok").await;
    let echo = gateway
        .call("tracker__echo", json!({"text": "after a 401"}))
        .await
        .expect("echo after a refused token");
    assert_eq!(text_of(&echo), "after a 401");
    assert!(world.token_requests("refresh_token", "ok").await > refreshed);

    // The user revokes the grant: the refresh is refused, and the module
    // needs a login; its tools leave.
    world.revoke("all").await;
    let _ = gateway
        .call("tracker__echo", json!({"text": "revoked"}))
        .await;
    let refused = wait_module(
        &client,
        "tracker",
        "needs-login after the revocation",
        |module| module.state == ModuleState::NeedsLogin && module.restarts >= 1,
    )
    .await;
    assert!(
        refused
            .last_exit
            .as_deref()
            .is_some_and(|exit| exit.contains("needs login")),
        "{refused:?}"
    );
    gateway
        .wait_for_tools("tracker's tools to leave", |names| {
            names.iter().all(|name| !name.starts_with("tracker__"))
        })
        .await;
    assert!(world.token_requests("refresh_token", "invalid_grant").await >= 1);
    let listing = switchboard(&["modules", "--dir", hub.dir_arg()]).await;
    assert!(listing.ok().contains("needs-login"), "{listing:?}");
    let status = switchboard(&["status", "--dir", hub.dir_arg()]).await;
    assert!(status.ok().contains("needs-login"), "{status:?}");

    // Logged in again, it is back.
    login(&hub, "tracker").await;
    gateway.wait_for_tool("tracker__echo").await;
    let echo = gateway
        .call("tracker__echo", json!({"text": "back"}))
        .await
        .expect("echo after the second login");
    assert_eq!(text_of(&echo), "back");
    gateway.close().await;

    // No token anywhere a person or another program reads.
    let stored: Value = serde_json::from_slice(&std::fs::read(&credentials).unwrap()).unwrap();
    let secrets: Vec<String> = ["access_token", "refresh_token"]
        .iter()
        .filter_map(|key| stored["token_response"][key].as_str().map(str::to_owned))
        .chain([first_token])
        .collect();
    let listing = switchboard(&["modules", "--dir", hub.dir_arg()]).await;
    let status = modules(&client).await;
    for place in [
        hub.module_log("tracker"),
        listing.ok().to_owned(),
        format!("{status:?}"),
    ] {
        for secret in &secrets {
            assert!(!place.contains(secret.as_str()), "a token leaked: {place}");
        }
    }
    client.close();
}

/// An authorization server that registers no client dynamically (as many
/// do) and knows one client beforehand, a confidential one with a fixed
/// redirect URI: without `oauth_client_id` the login says what to
/// configure; with it (and its secret file, port and scopes) the login
/// uses that client, and the module refreshes with its secret. The secret is in no
/// log, listing, or command line.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_registered_beforehand_signs_in_where_registration_is_closed() {
    const CLIENT_ID: &str = "switchboard-desktop";
    const SECRET: &str = "app-secret-5b1f0c9e";
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let redirect_uri = format!("http://127.0.0.1:{port}/callback");
    let world = OAuthWorld::start_with(&[
        ("OAUTH_REGISTRATION", "off"),
        ("OAUTH_APP_CLIENT_ID", CLIENT_ID),
        ("OAUTH_APP_CLIENT_SECRET", SECRET),
        ("OAUTH_APP_REDIRECT_URI", &redirect_uri),
    ])
    .await;
    let url = toml_string(&world.url);
    let hub = ModuleHub::start(&format!(
        "[modules.open]\nmcp_url = {url}\noauth = true\n\n\
         [modules.wiki]\nmcp_url = {url}\noauth = true\n\
         oauth_client_id = \"{CLIENT_ID}\"\noauth_client_secret_file = \"wiki-secret\"\n\
         oauth_redirect_port = {port}\noauth_scopes = [\"mcp\", \"openid\"]\n"
    ));
    // Beside the config, as its relative name says; written after the
    // start: nothing reads it before a login.
    std::fs::write(hub.path("wiki-secret"), format!("{SECRET}\n")).unwrap();
    let client = hub.client().await;
    for name in ["open", "wiki"] {
        wait_module(&client, name, "needs-login", |module| {
            module.state == ModuleState::NeedsLogin
        })
        .await;
    }

    // No client id, and the server registers none: what to do, at once.
    let refused = switchboard(&[
        "mcp",
        "login",
        "open",
        "--no-browser",
        "--wait",
        "5s",
        "--dir",
        hub.dir_arg(),
    ])
    .await;
    assert_eq!(refused.code(), 1, "{refused:?}");
    assert!(
        refused
            .stderr
            .contains("does not register clients dynamically")
            && refused
                .stderr
                .contains("[modules.open] its oauth_client_id"),
        "{refused:?}"
    );
    assert!(!hub.dir().join("oauth/open.json").exists());

    let printed = login(&hub, "wiki").await;
    assert!(printed.contains("Logged in to wiki."), "{printed}");
    assert!(printed.contains("wiki: running"), "{printed}");
    let log = world.log().await;
    assert_eq!(log["registrations"], json!([]), "{log}");
    let authorization = &log["authorizations"][0];
    assert_eq!(authorization["client_id"], CLIENT_ID, "{log}");
    assert_eq!(
        authorization["redirect_uri"],
        redirect_uri.as_str(),
        "{log}"
    );
    // The scopes the module names (the server's metadata names `mcp` only).
    let asked: Vec<&str> = authorization["scope"]
        .as_str()
        .unwrap_or_default()
        .split(' ')
        .collect();
    assert!(asked.contains(&"openid") && asked.contains(&"mcp"), "{log}");
    // The code was exchanged by the client with its secret (basic auth):
    // oidc-provider refuses a confidential client without it.
    let exchanged = &log["token_requests"][0];
    assert_eq!(exchanged["grant_type"], "authorization_code", "{log}");
    assert_eq!(exchanged["client_id"], CLIENT_ID, "{log}");
    assert_eq!(exchanged["outcome"], "ok", "{log}");

    let gateway = gateway_on(hub.dir()).await;
    gateway.wait_for_tool("wiki__echo").await;
    let echo = gateway
        .call("wiki__echo", json!({"text": "as the app"}))
        .await
        .expect("echo through the gateway");
    assert_eq!(text_of(&echo), "as the app");

    // The access token refused: the module refreshes, as the confidential
    // client it logged in as.
    world.revoke("access").await;
    let echo = gateway
        .call("wiki__echo", json!({"text": "refreshed"}))
        .await
        .expect("echo after a refresh");
    assert_eq!(text_of(&echo), "refreshed");
    let log = world.log().await;
    let refreshes: Vec<&Value> = log["token_requests"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|request| request["grant_type"] == "refresh_token")
        .collect();
    assert!(
        !refreshes.is_empty()
            && refreshes
                .iter()
                .all(|r| r["client_id"] == CLIENT_ID && r["outcome"] == "ok"),
        "{log}"
    );
    gateway.close().await;

    let listing = switchboard(&["modules", "--dir", hub.dir_arg()]).await;
    let status = modules(&client).await;
    let wiki = status.iter().find(|m| m.name == "wiki").unwrap();
    let login_of = wiki.oauth.as_ref().expect("the login's client");
    assert_eq!(login_of.client_id.as_deref(), Some(CLIENT_ID));
    assert_eq!(login_of.redirect_port, Some(port));
    for place in [
        hub.module_log("wiki"),
        listing.ok().to_owned(),
        format!("{status:?}"),
        std::fs::read_to_string(hub.dir().join("oauth/wiki.json")).unwrap(),
    ] {
        assert!(!place.contains(SECRET), "the client secret leaked: {place}");
    }
    client.close();
}

/// A login to a server that is not behind OAuth (it answers every request
/// with a web page) ends with what failed, and saves nothing; so do a
/// module that is not an OAuth one and a config that has no such module.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_login_that_cannot_work_says_why_and_saves_nothing() {
    let (page, html) = html_server().await;
    let root = tempfile::tempdir().unwrap();
    let config = root.path().join("switchboard.toml");
    std::fs::write(
        &config,
        format!(
            "[modules.page]\nmcp_url = {}\noauth = true\n\n[modules.plain]\nmcp_url = {}\n",
            toml_string(&page),
            toml_string(&page)
        ),
    )
    .unwrap();
    let dir = root.path().join("hub");
    let login = |name: &'static str| {
        let (dir, config) = (dir.clone(), config.clone());
        async move {
            switchboard(&[
                "mcp",
                "login",
                name,
                "--no-browser",
                "--wait",
                "5s",
                "--dir",
                dir.to_str().unwrap(),
                "--config",
                config.to_str().unwrap(),
            ])
            .await
        }
    };

    let garbage = login("page").await;
    assert_eq!(garbage.code(), 1, "{garbage:?}");
    assert!(
        garbage.stderr.contains("publishes no OAuth metadata"),
        "{garbage:?}"
    );
    assert!(!dir.join("oauth/page.json").exists());

    let plain = login("plain").await;
    assert_eq!(plain.code(), 1, "{plain:?}");
    assert!(
        plain.stderr.contains("give it mcp_url and oauth = true"),
        "{plain:?}"
    );

    // Without the config and with no hub running, nothing says where the
    // server is.
    let no_hub = switchboard(&[
        "mcp",
        "login",
        "page",
        "--no-browser",
        "--dir",
        dir.to_str().unwrap(),
    ])
    .await;
    assert_eq!(no_hub.code(), 1, "{no_hub:?}");
    assert!(
        no_hub
            .stderr
            .contains("no hub runs here to ask about [modules.page]"),
        "{no_hub:?}"
    );

    let unknown = login("nothing").await;
    assert_eq!(unknown.code(), 1, "{unknown:?}");
    assert!(
        unknown
            .stderr
            .contains("no [modules.nothing] in the config (its modules: page, plain)"),
        "{unknown:?}"
    );
    html.abort();
}
