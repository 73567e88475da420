//! The hub's side of supervised modules that needs no module process:
//! `hub/modules` and `hub/restartModule` (direct principal only, their
//! errors), and launch credentials the hub never issued. (Modules as real
//! processes are tested in `crates/cli/tests/cli/modules.rs`.)

use crate::support::*;
use serde_json::json;

#[tokio::test]
async fn module_methods_are_for_the_direct_principal_and_name_what_is_wrong() {
    let hub = TestHub::with_principals(&["explorer"], "").await;
    let mut operator = hub.client("operator").await;
    assert_eq!(
        operator.call("hub/modules", json!({})).await,
        json!({"modules": []})
    );
    let response = operator
        .request("hub/restartModule", json!({"name": "ghost"}))
        .await;
    let error = expect_error(&response, code::NOT_FOUND);
    assert!(
        error["message"].as_str().unwrap().contains("\"ghost\""),
        "{error}"
    );
    let response = operator
        .request("hub/restartModule", json!({"name": 7}))
        .await;
    let error = expect_error(&response, code::INVALID_PARAMS);
    assert_eq!(error["data"]["field"], "name");

    let mut explorer = hub.client_as("explorer").await;
    for method in ["hub/modules", "hub/restartModule"] {
        let response = explorer.request(method, json!({"name": "x"})).await;
        expect_error(&response, code::PERMISSION_DENIED);
    }
}

#[tokio::test]
async fn a_launch_credential_the_hub_never_issued_is_refused() {
    let hub = TestHub::start().await;
    let forged = format!("sb-launch-{}", "0".repeat(64));
    let mut unix = hub.connect("forger").await;
    let response = unix.initialize(Some(&forged)).await;
    expect_error(&response, code::AUTH_REQUIRED);
    unix.wait_closed().await;
    let mut ws = hub.ws_connect("forger-ws").await;
    let response = ws.initialize(Some(&forged)).await;
    expect_error(&response, code::AUTH_REQUIRED);
    ws.wait_closed().await;
    hub.assert_bookkeeping_released().await;
}
