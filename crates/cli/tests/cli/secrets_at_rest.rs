//! Where secrets the hub hands out never end up (SECURITY.md, "The
//! dashboard" and "Supervised modules and their launch credentials"): a
//! dashboard login code and the session it is traded for are in no log
//! line at `RUST_LOG=trace` and not in `/metrics`; a module's launch
//! credential is not in its environment, its command line, the hub's
//! directory or any log, only in the running process that read its pipe.

use std::path::Path;

use serde_json::json;

use crate::support::modules::{ask, module_section, module_service, pid_in, ModuleHub};
use crate::support::*;

fn hex(text: &str) -> String {
    text.bytes().map(|b| format!("{b:02x}")).collect()
}

/// Every file under `dir` (recursively) holding `needle`.
fn files_holding(dir: &Path, needle: &str) -> Vec<String> {
    let mut found = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return found;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            found.extend(files_holding(&path, needle));
        } else if std::fs::read(&path)
            .is_ok_and(|bytes| String::from_utf8_lossy(&bytes).contains(needle))
        {
            found.push(path.display().to_string());
        }
    }
    found
}

#[test]
fn a_dashboard_code_and_its_session_are_never_logged_or_shown_in_metrics() {
    let hub = HubProcess::builder().env("RUST_LOG", "trace").start();
    let mut operator = hub.line_client();
    let answer = operator.request("hub/dashboardLogin", json!({}));
    let code = answer["result"]["code"].as_str().unwrap().to_owned();
    let path = answer["result"]["path"].as_str().unwrap().to_owned();
    let login = hub.http_get(&path, &[]);
    assert_eq!(login.status, 303, "{}", login.head);
    let cookie = login
        .head
        .lines()
        .find_map(|line| {
            line.strip_prefix("set-cookie: ")
                .or_else(|| line.strip_prefix("Set-Cookie: "))
        })
        .expect("a session cookie")
        .split(';')
        .next()
        .unwrap()
        .to_owned();
    let session = cookie.trim_start_matches("switchboard_session=").to_owned();
    assert_eq!(hub.http_get("/ui/", &[("Cookie", &cookie)]).status, 200);
    // The code again (refused), a wrong session, a logout.
    assert_eq!(hub.http_get(&path, &[]).status, 403);
    assert_eq!(
        hub.http_get("/ui/", &[("Cookie", "switchboard_session=0011")])
            .status,
        401
    );
    let metrics = hub.metrics();
    let _ = hub.http_get("/ui/logout", &[("Cookie", &cookie)]);
    hub.wait_for_log("dashboard login");
    let log = hub.log();
    for secret in [&code, &session] {
        assert!(!log.contains(secret.as_str()), "a secret in the log");
        assert!(
            !log.contains(&hex(secret)),
            "a secret in the log, hex-encoded"
        );
        assert!(!metrics.contains(secret.as_str()), "a secret in /metrics");
    }
    assert!(
        files_holding(hub.dir(), &code).is_empty() && files_holding(hub.dir(), &session).is_empty(),
        "a secret in the hub directory"
    );
}

#[tokio::test]
async fn a_launch_credential_is_in_no_environment_command_line_file_or_log() {
    let hub = ModuleHub::start(&module_section("alpha", &[]));
    let client = hub.client().await;
    let service = module_service(&client, "alpha", None).await;
    let credential = ask(&client, &service, "leakCredential", json!({})).await["credential"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(credential.starts_with("sb-launch-"), "{credential}");
    let pid = pid_in(&ask(&client, &service, "whoami", json!({})).await);
    let environ = std::fs::read(format!("/proc/{pid}/environ")).unwrap();
    let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap();
    let secret = &credential["sb-launch-".len()..];
    for (what, bytes) in [("environment", environ), ("command line", cmdline)] {
        let text = String::from_utf8_lossy(&bytes);
        assert!(
            !text.contains(secret),
            "the credential is in the module's {what}"
        );
    }
    // Not in the hub's directory (hub.json, module logs), nor its log.
    assert!(
        files_holding(hub.dir(), secret).is_empty(),
        "the credential is in a file: {:?}",
        files_holding(hub.dir(), secret)
    );
    assert!(
        !hub.hub.log().contains(secret),
        "the credential is in the hub's log"
    );
    client.close();
}
