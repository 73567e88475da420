//! Remote MCP servers as providers: `[modules.NAME] mcp_url = …` (and
//! `provide-mcp --mcp-url`), reached over Streamable HTTP with their
//! headers and bearer token, published on the hub like a stdio server; and
//! what is refused or survived on the way (a plain-http URL off this
//! machine, a server that answers HTML).
//!
//! server-everything in its Streamable HTTP mode, through the gateway with
//! the TypeScript SDK, is in `mcp_clients.rs`.

use std::os::unix::fs::PermissionsExt;

use serde_json::json;
use switchboard_client::protocol::modules::ModuleState;

use crate::support::http_mcp::{html_server, HttpMcpServer};
use crate::support::mcp::{gateway_on, provider_id, test_server_bin, text_of};
use crate::support::modules::{modules, toml_string, wait_module, ModuleHub};
use crate::support::{switchboard, Run};

const HEADER_SECRET: &str = "header-value-not-for-logs";
const TOKEN: &str = "bearer-token-not-for-logs";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_remote_module_is_reached_with_its_headers_and_its_bearer_token() {
    let server = HttpMcpServer::start().await;
    let root = tempfile::tempdir().unwrap();
    let token_file = root.path().join("web-token");
    std::fs::write(&token_file, format!("{TOKEN}\n")).unwrap();
    std::fs::set_permissions(&token_file, std::fs::Permissions::from_mode(0o600)).unwrap();
    let hub = ModuleHub::start(&format!(
        "[modules.web]\nmcp_url = {}\nheaders = {{ \"X-Team\" = \"{HEADER_SECRET}\" }}\nbearer_token_file = {}\n",
        toml_string(&server.url),
        toml_string(&token_file.to_string_lossy()),
    ));
    let client = hub.client().await;
    provider_id(&client, "web").await;

    let gateway = gateway_on(hub.dir()).await;
    gateway.wait_for_tool("web__shout").await;
    let result = gateway
        .call("web__shout", json!({"text": "quiet"}))
        .await
        .expect("web__shout through the gateway");
    assert_eq!(text_of(&result), "QUIET");
    gateway.close().await;

    let bearer = server.seen("authorization");
    assert!(!bearer.is_empty());
    assert!(
        bearer
            .iter()
            .all(|value| value.as_deref() == Some(&format!("Bearer {TOKEN}"))),
        "every request carries the bearer token: {bearer:?}"
    );
    let team = server.seen("x-team");
    assert!(
        team.iter()
            .all(|value| value.as_deref() == Some(HEADER_SECRET)),
        "every request carries the configured header: {team:?}"
    );

    // The secrets are in no command line (others may read it), no
    // `switchboard modules` line and no log.
    let status = modules(&client)
        .await
        .into_iter()
        .find(|module| module.name == "web")
        .expect("the module is listed");
    assert!(
        status.command.contains("--mcp-url") && status.command.contains(&server.url),
        "{status:?}"
    );
    let pid = status.pid.expect("it runs");
    let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap();
    let listing = switchboard(&["modules", "--dir", hub.dir_arg()]).await;
    for place in [
        String::from_utf8_lossy(&cmdline).into_owned(),
        status.command.clone(),
        listing.ok().to_owned(),
        hub.module_log("web"),
    ] {
        assert!(
            !place.contains(HEADER_SECRET) && !place.contains(TOKEN),
            "a secret leaked: {place}"
        );
    }
    client.close();
}

/// A remote URL in the clear is refused before anything is sent, naming
/// the rule; so are a header that HTTP cannot carry and a token file that
/// cannot be read. Nothing says the secret.
/// `switchboard provide-mcp --namespace far --dir DIR ARGS…`, run to its
/// end (every case here fails before it reaches a hub).
async fn provide_mcp(args: &[&str]) -> Run {
    let dir = tempfile::tempdir().unwrap();
    let mut all = vec!["provide-mcp", "--namespace", "far", "--dir"];
    all.push(dir.path().to_str().unwrap());
    all.extend(args);
    switchboard(&all).await
}

#[tokio::test]
async fn provide_mcp_refuses_plain_http_off_this_machine_and_bad_headers() {
    let plain = provide_mcp(&[
        "--mcp-url",
        "http://mcp.example.com/mcp?key=secret-in-query",
    ])
    .await;
    assert_eq!(plain.code(), 1, "{plain:?}");
    assert!(plain.stderr.contains("use https://"), "{plain:?}");
    assert!(!plain.stderr.contains("secret-in-query"), "{plain:?}");

    let remote = "https://mcp.example.com/mcp";
    let header = provide_mcp(&["--mcp-url", remote, "--header", "Bad Name: secret-value"]).await;
    assert_eq!(header.code(), 1, "{header:?}");
    assert!(
        header
            .stderr
            .contains("\"Bad Name\" is not an HTTP header name"),
        "{header:?}"
    );
    assert!(!header.stderr.contains("secret-value"), "{header:?}");

    let token = provide_mcp(&[
        "--mcp-url",
        remote,
        "--bearer-token-file",
        "/nonexistent/token",
    ])
    .await;
    assert_eq!(token.code(), 1, "{token:?}");
    assert!(
        token
            .stderr
            .contains("cannot read the bearer token file /nonexistent/token"),
        "{token:?}"
    );

    // A URL and a command: clap's usage error.
    let both = provide_mcp(&["--mcp-url", remote, "--", "server"]).await;
    assert_eq!(both.code(), 2, "{both:?}");
}

/// A remote server that answers HTML fails its module with the reason in
/// the module's log, and restarts with backoff; the hub and a module beside
/// it carry on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_remote_server_that_answers_html_fails_its_module_alone() {
    let (url, html) = html_server().await;
    let hub = ModuleHub::start(&format!(
        "[modules.page]\nmcp_url = {}\n\n[modules.good]\nmcp = [{}]\n",
        toml_string(&url),
        toml_string(&test_server_bin().to_string_lossy()),
    ));
    let client = hub.client().await;
    provider_id(&client, "good").await;
    let failed = wait_module(&client, "page", "failed", |module| {
        module.restarts >= 1 || module.state == ModuleState::Backoff
    })
    .await;
    assert_ne!(failed.state, ModuleState::Running, "{failed:?}");
    hub.wait_logged("page", "did not start").await;
    let log = hub.module_log("page");
    assert!(
        log.contains(&format!("the MCP server at {url} did not start"))
            && log.contains("answered text/html, not JSON or an event stream"),
        "{log}"
    );
    // `switchboard modules` says why, in the module's own words.
    let failed = wait_module(&client, "page", "a reason", |module| {
        module
            .last_exit
            .as_deref()
            .is_some_and(|exit| exit.contains("answered text/html"))
    })
    .await;
    assert!(
        failed
            .last_exit
            .as_deref()
            .is_some_and(|exit| exit.starts_with("exited with status 1: ")),
        "{failed:?}"
    );
    let listing = switchboard(&["modules", "--dir", hub.dir_arg()]).await;
    assert!(listing.ok().contains("answered text/html"), "{listing:?}");

    let gateway = gateway_on(hub.dir()).await;
    let names = gateway
        .wait_for_tools("the good module's tools", |names| {
            names.iter().any(|name| name.starts_with("good__"))
        })
        .await;
    assert!(
        names.iter().all(|name| !name.starts_with("page__")),
        "{names:?}"
    );
    gateway.close().await;
    html.abort();
    client.close();
}
