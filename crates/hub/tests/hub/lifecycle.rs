//! Spec sections 1 and 2: the hub directory, `hub.json`, `initialize`,
//! `ping`, and what is served before a connection is initialized.

use std::os::unix::fs::{FileTypeExt, PermissionsExt};

use crate::support::*;
use serde_json::{json, Value};

fn is_hex_id(value: &Value, prefix: &str) -> bool {
    value.as_str().is_some_and(|id| {
        id.strip_prefix(prefix)
            .is_some_and(|hex| hex.len() == 32 && hex.bytes().all(|b| b.is_ascii_hexdigit()))
    })
}

#[tokio::test]
async fn hub_json_names_this_hub_and_is_private() {
    let hub = TestHub::start().await;
    let text = std::fs::read_to_string(hub.dir.join("hub.json")).unwrap();
    let info: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(info["version"], 1);
    assert_eq!(info["pid"], std::process::id());
    assert_eq!(info["socket"], hub.dir.join("hub.sock").to_str().unwrap());
    assert!(std::fs::metadata(hub.dir.join("hub.sock"))
        .unwrap()
        .file_type()
        .is_socket());
    let ws = info["ws"].as_str().unwrap();
    let port: u16 = ws
        .strip_prefix("ws://127.0.0.1:")
        .and_then(|rest| rest.strip_suffix('/'))
        .and_then(|port| port.parse().ok())
        .unwrap_or_else(|| panic!("ws is {ws:?}"));
    assert_ne!(port, 0, "hub.json must name the real port");
    let token = info["token"].as_str().unwrap();
    assert_eq!(token.len(), 64);
    assert!(token.bytes().all(|b| b.is_ascii_hexdigit()));
    assert_eq!(token, hub.token);

    let mode = |path| std::fs::metadata(path).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(hub.dir.join("hub.json")), 0o600);
    assert_eq!(mode(hub.dir.clone()), 0o700);
}

#[tokio::test]
async fn ping_answers_null_before_and_after_initialize() {
    let hub = TestHub::start().await;
    let mut client = hub.connect("client").await;
    assert_eq!(
        expect_result(&client.request("ping", json!(null)).await),
        Value::Null
    );
    client.initialize_ok(Some(&hub.token)).await;
    client
        .send_line(r#"{"jsonrpc":"2.0","id":"p-1","method":"ping"}"#)
        .await;
    let response = client.response(&json!("p-1")).await;
    assert_eq!(expect_result(&response), Value::Null);
}

#[tokio::test]
async fn initialize_reports_identity_server_and_default_limits() {
    let hub = TestHub::start().await;
    let mut client = hub.connect("client").await;
    let result = client.initialize_ok(Some(&hub.token)).await;
    assert_eq!(result["protocolVersion"], "1.0.0");
    assert!(
        is_hex_id(&result["clientId"], "c-"),
        "clientId {}",
        result["clientId"]
    );
    assert_eq!(result["principal"], json!({"kind": "direct"}));
    assert_eq!(result["serverSeq"], 0);
    assert_eq!(result["snapshots"], json!([]));
    assert_eq!(result["serverInfo"]["name"], "switchboard");
    assert!(result["serverInfo"]["version"].is_string());
    assert_eq!(
        result["limits"],
        json!({
            "maxMessageBytes": 16 * 1024 * 1024,
            "maxMetadataBytes": 64 * 1024,
            "maxMethodBytes": 256,
            "maxServicesPerClient": 256,
            "maxInFlightPerClient": 1024,
            "maxInFlightPerService": 4096,
            "defaultRequestTimeoutMs": 60000,
            "maxRequestTimeoutMs": 600000,
            "maxErrorDataBytes": 64 * 1024,
            "notifyShedBytes": 8 * 1024 * 1024,
            "slowConsumerBytes": 64 * 1024 * 1024,
            "maxConnections": 4096,
        })
    );
}

#[tokio::test]
async fn initialize_reports_the_configured_limits() {
    let hub = TestHub::with_config("[limits]\nmaxMethodBytes = 9\nmaxConnections = 77\n").await;
    let client = hub.client("client").await;
    assert_eq!(client.init["limits"]["maxMethodBytes"], 9);
    assert_eq!(client.init["limits"]["maxConnections"], 77);
    assert_eq!(client.init["limits"]["maxMetadataBytes"], 64 * 1024);
}

#[tokio::test]
async fn client_ids_are_minted_per_connection_and_a_sent_client_id_is_ignored() {
    let hub = TestHub::start().await;
    let mut forger = hub.connect("forger").await;
    let response = forger
        .initialize_with(json!({
            "authToken": hub.token,
            "clientId": "c-00000000000000000000000000000000",
            "clientInfo": {"name": "forger", "version": "1"},
        }))
        .await;
    let minted = expect_result(&response)["clientId"].clone();
    assert_ne!(minted, "c-00000000000000000000000000000000");
    assert!(is_hex_id(&minted, "c-"));

    let mut ids = vec![minted];
    for label in ["a", "b", "c"] {
        ids.push(json!(hub.client(label).await.client_id));
    }
    let mut unique = ids.clone();
    unique.sort_by_key(|id| id.to_string());
    unique.dedup();
    assert_eq!(unique.len(), ids.len(), "clientIds repeat: {ids:?}");

    // The minted id, not the forged one, is what the owner of a service sees.
    let mut owner = hub.client("owner").await;
    let service = owner.register(json!({})).await;
    forger.notify_service(&service, "hello", json!(1)).await;
    let note = owner
        .receive(is_method("clientService/notification"), WAIT)
        .await;
    assert_eq!(note["params"]["senderClientId"], ids[0]);
}

#[tokio::test]
async fn requests_before_initialize_get_not_initialized_and_initialize_still_works() {
    let hub = TestHub::start().await;
    let mut early = hub.connect("early").await;
    for (method, params) in [
        ("client/registerService", json!({"metadata": {}})),
        ("subscribe", json!({"channel": CATALOG})),
        (
            "clientService/request",
            json!({"serviceId": "svc-x", "method": "m"}),
        ),
        ("no/suchMethod", json!({})),
    ] {
        let response = early.request(method, params).await;
        let error = expect_error(&response, code::INVALID_REQUEST);
        assert_eq!(
            error["data"]["reason"], "notInitialized",
            "{method}: {response}"
        );
    }
    early.initialize_ok(Some(&hub.token)).await;
    early.register(json!({"name": "late but fine"})).await;
}

#[tokio::test]
async fn notifications_before_initialize_are_dropped_silently() {
    let hub = TestHub::start().await;
    let mut owner = hub.client("owner").await;
    let service = owner.register(json!({})).await;
    let mut early = hub.connect("early").await;
    early
        .notify_service(&service, "early/hello", json!({"n": 1}))
        .await;
    // A response to an unknown request id is dropped too.
    early
        .send(&json!({"jsonrpc": "2.0", "id": 1, "result": {}}))
        .await;
    assert_eq!(
        expect_result(&early.request("ping", json!(null)).await),
        Value::Null
    );
    expect_all_silent([&mut early, &mut owner]).await;
    assert_eq!(
        hub.metric("switchboard_notifications_dropped_total{reason=\"not_initialized\"}"),
        1
    );
}

#[tokio::test]
async fn initial_subscriptions_return_the_snapshot_at_server_seq() {
    let hub = TestHub::start().await;
    let mut owner = hub.client("owner").await;
    let service = owner.register(json!({"name": "early bird"})).await;

    let mut late = hub.connect("late").await;
    let result = late
        .initialize_with(json!({
            "channel": "ahp-root://",
            "authToken": hub.token,
            "initialSubscriptions": [CATALOG],
        }))
        .await;
    let result = expect_result(&result);
    let snapshots = result["snapshots"].as_array().unwrap();
    assert_eq!(snapshots.len(), 1);
    assert_eq!(snapshots[0]["fromSeq"], result["serverSeq"]);
    let listed = snapshot_services(&snapshots[0]);
    assert_eq!(listed[&service]["metadata"], json!({"name": "early bird"}));

    // It is subscribed: the next change arrives as an action.
    owner.register(json!({"name": "second"})).await;
    let added = late.action("clientServices/added").await;
    assert!(added["params"]["serverSeq"].as_u64() > result["serverSeq"].as_u64());
}

#[tokio::test]
async fn an_unknown_initial_subscription_is_not_found_and_the_client_may_retry() {
    let hub = TestHub::start().await;
    let mut client = hub.connect("client").await;
    let response = client
        .initialize_with(json!({
            "authToken": hub.token,
            "initialSubscriptions": ["ahp-no-such-channel://"],
        }))
        .await;
    expect_error(&response, code::NOT_FOUND);
    // Still not initialized, so initialize may be sent again.
    let error = expect_error(
        &client
            .request("client/registerService", json!({"metadata": {}}))
            .await,
        code::INVALID_REQUEST,
    );
    assert_eq!(error["data"]["reason"], "notInitialized");
    client.initialize_ok(Some(&hub.token)).await;
}

#[tokio::test]
async fn an_initialize_channel_other_than_the_root_is_invalid_params() {
    let hub = TestHub::start().await;
    let mut client = hub.connect("client").await;
    let response = client
        .initialize_with(json!({"channel": "ahp-client-services://", "authToken": hub.token}))
        .await;
    let error = expect_error(&response, code::INVALID_PARAMS);
    assert_eq!(error["data"]["field"], "channel");
    client.initialize_ok(Some(&hub.token)).await;
}

#[tokio::test]
async fn an_existing_hub_directory_with_loose_permissions_is_tightened_to_0700() {
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("hub");
    std::fs::create_dir(&dir).unwrap();
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    let hub = switchboard_hub::Hub::start(switchboard_hub::HubOptions {
        dir: dir.clone(),
        ws: None,
        config: None,
        federated: None,
        remote: None,
    })
    .await
    .unwrap();
    let mode = std::fs::metadata(&dir).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o700);
    assert_eq!(hub.info().ws, None);
    hub.shutdown().await;
    assert!(!dir.join("hub.json").exists() && !dir.join("hub.sock").exists());
}
