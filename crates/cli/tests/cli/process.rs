//! The hub as a process (spec sections 1 and 7): single instance per
//! directory, recovery from a killed hub, clean shutdown on SIGTERM and
//! SIGINT, config reload on SIGHUP and through `switchboard reload`.

use std::path::Path;

use crate::support::*;
use serde_json::{json, Value};

const CONFIG: &str = r#"
[principals.explorer]
token = "explorer-secret-0123"

[principals.git]
token = "git-secret-0123456"
"#;

const GRANT: &str = r#"
[[grants]]
from = "explorer"
to = "git"
allow = ["discover"]
"#;

fn write_config(path: &Path, text: &str) {
    std::fs::write(path, text).unwrap();
}

#[test]
fn a_second_serve_on_the_same_directory_fails_with_a_clear_error() {
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("hub");
    let first = HubProcess::builder().dir(&dir).start();

    let dir_arg = dir.to_str().unwrap();
    let second = run(&["serve", "--dir", dir_arg, "--ws", "127.0.0.1:0"]);
    assert!(!second.status.success(), "the second hub started");
    let stderr = &second.stderr;
    assert!(
        stderr.contains("another hub is already running")
            && stderr.contains(&format!("pid {}", first.pid())),
        "stderr: {stderr}"
    );

    // The first hub is untouched.
    assert_eq!(read_hub_json(&dir).unwrap(), first.info);
    let mut client = first.line_client();
    assert_eq!(client.request("ping", json!(null))["result"], Value::Null);
}

#[test]
fn a_stale_socket_and_hub_json_of_a_killed_hub_are_replaced() {
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("hub");
    let mut killed = HubProcess::builder().dir(&dir).start();
    killed.signal(libc::SIGKILL);
    killed.wait_exit();
    assert!(dir.join("hub.json").exists() && dir.join("hub.sock").exists());
    assert!(std::os::unix::net::UnixStream::connect(dir.join("hub.sock")).is_err());

    let hub = HubProcess::builder().dir(&dir).start();
    assert_eq!(hub.info["pid"], hub.pid());
    assert_ne!(hub.token(), killed.token());
    let mut client = hub.line_client();
    assert_eq!(client.request("ping", json!(null))["result"], Value::Null);
    let mut stale = LineClient::connect(&hub.socket());
    let response = stale.request("initialize", json!({"authToken": killed.token()}));
    assert_eq!(response["error"]["code"], -32007);
}

#[test]
fn sigterm_answers_pending_requests_removes_hub_json_and_exits_zero() {
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("hub");
    let mut hub = HubProcess::builder().dir(&dir).start();
    let mut owner = hub.line_client();
    let service = owner.request("client/registerService", json!({"metadata": {}}))["result"]
        ["serviceId"]
        .clone();
    let mut caller = hub.line_client();
    let pending = caller.send_request(
        "clientService/request",
        json!({"serviceId": service, "method": "slow"}),
    );
    let handle = owner.recv();
    assert_eq!(handle["method"], "clientService/handleRequest");

    hub.signal(libc::SIGTERM);
    let answer = caller.recv();
    assert_eq!(answer["id"], pending);
    assert_eq!(answer["error"]["code"], -32052);
    assert_eq!(answer["error"]["data"]["reason"], "disconnected");
    assert_eq!(caller.try_recv(), None, "the hub closes the connection");

    let status = hub.wait_exit();
    assert_eq!(status.code(), Some(0), "log:\n{}", hub.log());
    assert!(!dir.join("hub.json").exists());
    assert!(!dir.join("hub.sock").exists());
}

#[test]
fn sigint_shuts_down_cleanly_too() {
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("hub");
    let mut hub = HubProcess::builder().dir(&dir).no_ws().start();
    assert_eq!(hub.info["ws"], Value::Null);
    hub.signal(libc::SIGINT);
    assert_eq!(hub.wait_exit().code(), Some(0));
    assert!(!dir.join("hub.json").exists());
}

#[test]
fn sighup_reloads_the_config() {
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("hub");
    let config = root.path().join("switchboard.toml");
    write_config(&config, CONFIG);
    let hub = HubProcess::builder().dir(&dir).config(&config).start();

    let mut git = LineClient::connect(&hub.socket());
    git.initialize("git-secret-0123456");
    let service = git.request("client/registerService", json!({"metadata": {}}))["result"]
        ["serviceId"]
        .clone();
    let mut explorer = LineClient::connect(&hub.socket());
    explorer.initialize("explorer-secret-0123");
    let snapshot = explorer.request("subscribe", json!({"channel": "ahp-client-services://"}));
    assert_eq!(
        snapshot["result"]["snapshot"]["state"]["services"],
        json!([])
    );

    write_config(&config, &format!("{CONFIG}{GRANT}"));
    hub.signal(libc::SIGHUP);
    let action = explorer.recv();
    assert_eq!(action["method"], "action");
    assert_eq!(action["params"]["action"]["type"], "clientServices/added");
    assert_eq!(action["params"]["action"]["service"]["serviceId"], service);

    // A broken config is refused; the hub keeps the old one and keeps running.
    write_config(&config, "[principals.broken]\n");
    hub.signal(libc::SIGHUP);
    hub.wait_for_log("reload failed");
    assert!(hub.log().contains("principal \"broken\""), "{}", hub.log());
    let mut probe = hub.line_client();
    assert_eq!(probe.request("ping", json!(null))["result"], Value::Null);
    let listed = explorer.request("subscribe", json!({"channel": "ahp-client-services://"}));
    assert_eq!(
        listed["result"]["snapshot"]["state"]["services"][0]["serviceId"],
        service
    );
}

#[test]
fn switchboard_reload_reports_success_and_a_broken_config_as_an_error() {
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("hub");
    let dir_arg = dir.to_str().unwrap();
    let config = root.path().join("switchboard.toml");
    write_config(&config, CONFIG);
    let hub = HubProcess::builder().dir(&dir).config(&config).start();

    write_config(&config, &format!("{CONFIG}{GRANT}"));
    let reload = run(&["reload", "--dir", dir_arg]);
    assert!(reload.status.success(), "stderr: {}", reload.stderr);
    assert_eq!(
        reload.stdout.trim(),
        "reloaded: 2 principals, 1 grants, 0 connections closed"
    );

    write_config(
        &config,
        "[[grants]]\nfrom = \"ghost\"\nto = \"*\"\nallow = [\"notify\"]\n",
    );
    let reload = run(&["reload", "--dir", dir_arg]);
    assert!(!reload.status.success(), "a broken config reloaded");
    let stderr = &reload.stderr;
    assert!(
        stderr.contains("reload failed") && stderr.contains("ghost"),
        "stderr: {stderr}"
    );

    // The hub still runs with the last good config.
    let mut explorer = LineClient::connect(&hub.socket());
    explorer.initialize("explorer-secret-0123");

    let nowhere = root.path().join("nowhere");
    let reload = run(&["reload", "--dir", nowhere.to_str().unwrap()]);
    assert!(!reload.status.success());
    assert!(
        reload.stderr.contains("no hub is running"),
        "{}",
        reload.stderr
    );
}

#[test]
fn without_dir_the_hub_uses_switchboard_dir_and_creates_it_private() {
    use std::os::unix::fs::PermissionsExt;
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("from-env");
    let hub = HubProcess::builder().dir(&dir).dir_from_env().start();
    assert_eq!(hub.socket(), dir.join("hub.sock"));
    let mode = std::fs::metadata(&dir).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o700);
    let mode = std::fs::metadata(dir.join("hub.json"))
        .unwrap()
        .permissions()
        .mode()
        & 0o777;
    assert_eq!(mode, 0o600);
}

#[test]
fn payloads_are_logged_only_when_the_operator_turns_it_on() {
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("hub");
    let config = root.path().join("switchboard.toml");
    write_config(&config, "");
    let hub = HubProcess::builder()
        .dir(&dir)
        .no_ws()
        .config(&config)
        .env("RUST_LOG", "debug")
        .start();
    let mut owner = hub.line_client();
    let metadata = json!({"secret": "metadata-marker-1"});
    let service = owner.request("client/registerService", json!({"metadata": metadata}))["result"]
        ["serviceId"]
        .clone();
    let mut sender = hub.line_client();
    let send_marker = |sender: &mut LineClient, marker: &str| {
        sender.send(&json!({"jsonrpc": "2.0", "method": "clientService/notify",
            "params": {"serviceId": service, "method": "m", "params": {"secret": marker}}}));
        assert_eq!(sender.request("ping", json!(null))["result"], Value::Null);
    };
    send_marker(&mut sender, "payload-marker-1");
    assert_eq!(
        owner.recv()["params"]["params"]["secret"],
        "payload-marker-1"
    );
    hub.wait_for_log("registered a service");
    let log = hub.log();
    assert!(!log.contains("marker-1"), "a payload was logged:\n{log}");

    write_config(&config, "[hub]\nlog_payloads = true\n");
    hub.signal(libc::SIGHUP);
    hub.wait_for_log("config reloaded");
    send_marker(&mut sender, "payload-marker-2");
    hub.wait_for_log("payload-marker-2");
}
