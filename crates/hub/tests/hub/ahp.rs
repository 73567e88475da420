//! Section 11 and 12 of hub-protocol.md with the official AHP 1.0 client
//! crates (`ahp`, `ahp-ws`, `ahp-types`), unmodified, against a real hub
//! over real sockets: the token in the URL, version matching, the root
//! channel, services served through the SDK's server-request handler and
//! called through its generic `request`, the catalog, `reconnect`, what the
//! hub does not implement, and the remote TLS listener.

use std::sync::Arc;

use ahp::{Client, ClientConfig, ClientError, SubscriptionEvent};
use ahp_types::actions::StateAction;
use ahp_types::commands::{ReconnectResult, ResourceReadParams};
use ahp_types::messages::JsonRpcError;
use ahp_types::state::{RootState, SnapshotState};
use ahp_types::SUPPORTED_PROTOCOL_VERSIONS;
use ahp_ws::{WebSocketTransport, WebSocketTransportError};
use serde_json::{json, Value};
use tokio_tungstenite_029 as tungstenite_029;
use tungstenite_029::tungstenite::client::IntoClientRequest;
use tungstenite_029::tungstenite::Error as WsError;

use crate::support::*;

const ROOT: &str = "ahp-root://";

/// The versions the SDK offers by default (`["1.0.0", "0.9.0"]`).
fn versions() -> Vec<String> {
    SUPPORTED_PROTOCOL_VERSIONS
        .iter()
        .map(|v| v.to_string())
        .collect()
}

/// `ws://127.0.0.1:PORT/?token=…`, as an AHP client is handed it.
fn url_with_token(hub: &TestHub, token: &str) -> String {
    format!("{}?token={token}", hub.ws)
}

/// An SDK client on `url` (the SDK's own `connect`: no headers).
async fn ahp_client(url: &str) -> Client {
    let transport = within_wait("AHP connect", WebSocketTransport::connect(url))
        .await
        .unwrap_or_else(|error| panic!("the upgrade was refused: {error}"));
    Client::connect(transport, ClientConfig::default())
        .await
        .expect("the SDK client starts")
}

/// An SDK client on `url`, initialized (no initial subscriptions).
async fn initialized(url: &str, label: &str) -> Client {
    let client = ahp_client(url).await;
    client
        .initialize(label.into(), versions(), vec![])
        .await
        .unwrap_or_else(|error| panic!("{label}: initialize failed: {error}"));
    client
}

/// An SDK client on a stream built by hand (headers, a test certificate).
async fn over_stream(stream: Stream029) -> Client {
    Client::connect(
        WebSocketTransport::from_stream(stream),
        ClientConfig::default(),
    )
    .await
    .expect("the SDK client starts")
}

type Stream029 =
    tungstenite_029::WebSocketStream<tungstenite_029::MaybeTlsStream<tokio::net::TcpStream>>;

/// The HTTP status the hub refused an SDK connect with.
async fn refused_status(url: &str) -> u16 {
    match within_wait("AHP connect", WebSocketTransport::connect(url)).await {
        Err(WebSocketTransportError::WebSocket(WsError::Http(response))) => {
            response.status().as_u16()
        }
        Err(error) => panic!("expected an HTTP refusal, got {error}"),
        Ok(_) => panic!("expected an HTTP refusal, the upgrade succeeded"),
    }
}

async fn within_wait<T>(what: &str, future: impl std::future::Future<Output = T>) -> T {
    tokio::time::timeout(WAIT, future)
        .await
        .unwrap_or_else(|_| panic!("{what} did not finish within {WAIT:?}"))
}

fn rpc_error(result: Result<Value, ClientError>) -> JsonRpcError {
    match result {
        Err(ClientError::Rpc(error)) => error,
        other => panic!("expected a JSON-RPC error, got {other:?}"),
    }
}

/// Waits until the SDK's transport is closed by the hub (its event stream
/// ends).
async fn wait_closed(events: &mut ahp::ClientEventStream) {
    loop {
        match within_wait("the hub closing the connection", events.recv()).await {
            None => return,
            Some(_) => continue,
        }
    }
}

#[tokio::test]
async fn an_unmodified_client_connects_with_a_url_token_and_reads_the_root_snapshot() {
    let hub = TestHub::start().await;
    let client = ahp_client(&url_with_token(&hub, &hub.token)).await;
    let init = client
        .initialize("ahp-test".into(), versions(), vec![ROOT.into()])
        .await
        .expect("initialize without authToken, authenticated by ?token=");
    assert_eq!(init.protocol_version, "1.0.0");
    assert_eq!(init.snapshots.len(), 1);
    let snapshot = &init.snapshots[0];
    assert_eq!(snapshot.resource, ROOT);
    assert_eq!(snapshot.from_seq, init.server_seq);
    match &snapshot.state {
        SnapshotState::Root(root) => assert!(root.agents.is_empty()),
        other => panic!("ahp-types did not read a root state: {other:?}"),
    }
    let meta = init.meta.expect("_meta in the initialize result");
    assert_eq!(
        Value::Object(meta)["clientServices"],
        json!({"version": 1, "channel": "ahp-client-services://"})
    );
    client.ping().await.expect("ping");

    // The typed subscribe reads the root channel too; the state is a valid
    // AHP root state by itself.
    let (subscribed, _events) = client.subscribe(ROOT.into()).await.expect("subscribe");
    let state = subscribed.snapshot.expect("a snapshot").state;
    assert!(matches!(state, SnapshotState::Root(_)), "{state:?}");
    let root: RootState = serde_json::from_value(json!({"agents": []})).unwrap();
    assert_eq!(serde_json::to_value(root).unwrap(), json!({"agents": []}));

    // The identity is the hub's, whatever the client calls itself.
    let raw: Value = client
        .request("ping", json!({"channel": ROOT}))
        .await
        .unwrap();
    assert_eq!(raw, Value::Null);
    client.shutdown().await;
    assert_hub_routes(&hub).await;
}

#[tokio::test]
async fn initialize_accepts_every_ahp_param_as_sent_and_ignores_unknown_members() {
    let hub = TestHub::start().await;
    // Every member AHP 1.0 defines, typed by ahp-types, plus members it
    // does not (a later AHP, a vendor): all accepted, none changes identity.
    let typed: ahp_types::commands::InitializeParams = serde_json::from_value(json!({
        "channel": ROOT,
        "_meta": {"vendor.example/trace": "abc", "nested": {"x": [1, 2]}},
        "protocolVersions": ["1.0.0", "0.9.0"],
        "clientId": "editor-window-7",
        "clientInfo": {"name": "editor", "version": "3.1.4", "title": "The Editor"},
        "initialSubscriptions": [ROOT, CATALOG],
        "locale": "ja-JP",
        "capabilities": {"mcpApps": {"version": 1}}
    }))
    .expect("ahp-types reads these as its InitializeParams");
    let mut params = serde_json::to_value(&typed).unwrap();
    params
        .as_object_mut()
        .unwrap()
        .extend([("futureMember".to_owned(), json!({"anything": true}))]);
    let client = ahp_client(&url_with_token(&hub, &hub.token)).await;
    let result: Value = client.request("initialize", params).await.unwrap();
    assert_eq!(result["protocolVersion"], "1.0.0");
    assert_ne!(
        result["clientId"], "editor-window-7",
        "clientId is a label only"
    );
    assert_eq!(result["principal"], json!({"kind": "direct"}));
    let resources: Vec<&Value> = result["snapshots"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| &s["resource"])
        .collect();
    assert_eq!(resources, [&json!(ROOT), &json!(CATALOG)]);
    // AHP's typed result reads the hub's answer (its own members, `_meta`).
    let mut ahp_view = result.clone();
    ahp_view["snapshots"] = json!([result["snapshots"][0]]);
    let typed_result: ahp_types::commands::InitializeResult =
        serde_json::from_value(ahp_view).expect("ahp-types reads the result");
    assert_eq!(typed_result.protocol_version, "1.0.0");
    assert_eq!(
        typed_result.meta.map(Value::Object).unwrap()["clientServices"]["channel"],
        CATALOG
    );
    client.ping().await.unwrap();

    // `reconnect` on a connection already initialized: snapshots, same
    // identity (nothing is re-established).
    let reconnected: Value = client
        .request(
            "reconnect",
            json!({"channel": ROOT, "clientId": "editor-window-7",
                   "lastSeenServerSeq": 0, "subscriptions": [ROOT]}),
        )
        .await
        .unwrap();
    assert_eq!(reconnected["type"], "snapshot");
    assert_eq!(reconnected["snapshots"][0]["resource"], ROOT);
    assert_eq!(reconnected["snapshots"][0]["state"], json!({"agents": []}));
    assert_eq!(reconnected["clientId"], result["clientId"]);
    client.shutdown().await;
    assert_hub_routes(&hub).await;
}

#[tokio::test]
async fn a_service_is_served_through_the_sdk_handler_and_called_through_generic_request() {
    let hub = TestHub::start().await;
    let url = url_with_token(&hub, &hub.token);
    let owner = initialized(&url, "owner").await;
    // What the handler saw, for the assertions below.
    let (seen_tx, mut seen_rx) = tokio::sync::mpsc::unbounded_channel::<(String, Value)>();
    owner.set_server_request_handler(move |method, params: Value| {
        let seen_tx = seen_tx.clone();
        async move {
            let _ = seen_tx.send((method.clone(), params.clone()));
            match params["method"].as_str() {
                Some("echo") => Ok(json!({"echoed": params["params"], "by": "owner"})),
                _ => Err(JsonRpcError {
                    code: 4711,
                    message: "no such operation".into(),
                    data: Some(json!({"detail": [1, 2, 3]})),
                }),
            }
        }
    });

    let caller = initialized(&url, "caller").await;
    // The catalog through the generic request: the typed subscribe only
    // reads AHP's own state types.
    let subscribed: Value = caller
        .request("subscribe", json!({"channel": CATALOG}))
        .await
        .unwrap();
    assert_eq!(subscribed["snapshot"]["state"]["services"], json!([]));
    let mut catalog = caller.attach_subscription(CATALOG).await;

    let registered: Value = owner
        .request(
            "client/registerService",
            json!({"metadata": {"name": "echo"}}),
        )
        .await
        .unwrap();
    let service_id = registered["serviceId"].as_str().unwrap().to_owned();

    let added = next_catalog_action(&mut catalog).await;
    assert_eq!(added["type"], "clientServices/added");
    assert_eq!(added["service"]["serviceId"], service_id.as_str());
    assert_eq!(added["service"]["metadata"], json!({"name": "echo"}));

    let result: Value = caller
        .request(
            "clientService/request",
            json!({"serviceId": service_id, "method": "echo", "params": {"n": 1}}),
        )
        .await
        .unwrap();
    assert_eq!(result, json!({"echoed": {"n": 1}, "by": "owner"}));
    let (method, params) = seen_rx.recv().await.unwrap();
    assert_eq!(method, "clientService/handleRequest");
    assert_eq!(params["serviceId"], service_id.as_str());
    assert_eq!(params["senderPrincipal"], json!({"kind": "direct"}));

    let error = rpc_error(
        caller
            .request(
                "clientService/request",
                json!({"serviceId": service_id, "method": "other"}),
            )
            .await,
    );
    assert_eq!(error.code, 4711);
    assert_eq!(error.message, "no such operation");
    assert_eq!(error.data, Some(json!({"detail": [1, 2, 3]})));

    owner.shutdown().await;
    let removed = next_catalog_action(&mut catalog).await;
    assert_eq!(removed["type"], "clientServices/removed");
    assert_eq!(removed["serviceId"], service_id.as_str());
    assert_eq!(removed["reason"], "disconnected");
    caller.shutdown().await;
}

/// The next catalog action the SDK passed on (as AHP's catch-all action).
async fn next_catalog_action(catalog: &mut ahp::SessionSubscription) -> Value {
    match within_wait("a catalog action", catalog.recv()).await {
        Some(SubscriptionEvent::Action(envelope)) => {
            assert_eq!(envelope.channel, CATALOG);
            match envelope.action {
                StateAction::Unknown(action) => action,
                other => panic!("a catalog action read as an AHP action: {other:?}"),
            }
        }
        other => panic!("expected a catalog action, got {other:?}"),
    }
}

#[tokio::test]
async fn an_unsupported_version_is_refused_and_the_connection_closed() {
    let hub = TestHub::start().await;
    let client = ahp_client(&url_with_token(&hub, &hub.token)).await;
    let mut events = client.events();
    let error = match client
        .initialize("old".into(), vec!["0.5.2".into()], vec![])
        .await
    {
        Err(ClientError::Rpc(error)) => error,
        other => panic!("expected -32005, got {other:?}"),
    };
    assert_eq!(error.code, -32005);
    assert_eq!(error.data, Some(json!({"supportedVersions": ["1.0.0"]})));
    wait_closed(&mut events).await;
    assert_hub_routes(&hub).await;
}

#[tokio::test]
async fn reconnect_is_the_first_message_of_a_new_connection_after_a_dropped_one() {
    let hub = TestHub::start().await;
    let url = url_with_token(&hub, &hub.token);
    let first = ahp_client(&url).await;
    let init = first
        .initialize("resuming".into(), versions(), vec![ROOT.into()])
        .await
        .unwrap();
    let old: Value = first
        .request("client/registerService", json!({"metadata": {}}))
        .await
        .unwrap();
    first.shutdown().await; // the connection drops

    // The SDK's own reconnect, for the root channel.
    let second = ahp_client(&url).await;
    let result = second
        .reconnect("resuming".into(), init.server_seq, vec![ROOT.into()])
        .await
        .expect("reconnect as the first message");
    let ReconnectResult::Snapshot(result) = result else {
        panic!("expected a snapshot result, got {result:?}");
    };
    assert_eq!(result.snapshots.len(), 1);
    assert_eq!(result.snapshots[0].resource, ROOT);
    assert!(matches!(result.snapshots[0].state, SnapshotState::Root(_)));
    // The connection is initialized: services can be registered.
    let registered: Value = second
        .request("client/registerService", json!({"metadata": {}}))
        .await
        .unwrap();
    assert_ne!(registered["serviceId"], old["serviceId"]);

    // The generic request, for the catalog channel (and an unknown one,
    // which is left out): the old connection's service is gone.
    let third = ahp_client(&url).await;
    let result: Value = third
        .request(
            "reconnect",
            json!({"channel": ROOT, "clientId": "resuming", "lastSeenServerSeq": 0,
                   "subscriptions": [CATALOG, "ahp-session:/nope"]}),
        )
        .await
        .unwrap();
    assert_eq!(result["type"], "snapshot");
    let snapshots = result["snapshots"].as_array().unwrap();
    assert_eq!(snapshots.len(), 1);
    assert_eq!(snapshots[0]["resource"], CATALOG);
    let listed: Vec<&Value> = snapshots[0]["state"]["services"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| &s["serviceId"])
        .collect();
    assert_eq!(listed, [&registered["serviceId"]]);
    assert!(result["clientId"]
        .as_str()
        .is_some_and(|id| id != "resuming"));
    assert_eq!(result["principal"], json!({"kind": "direct"}));
    for client in [second, third] {
        client.shutdown().await;
    }
}

#[tokio::test]
async fn reconnect_without_a_token_at_the_upgrade_is_auth_required_and_the_connection_stays() {
    let hub = TestHub::start().await;
    let client = ahp_client(&hub.ws).await;
    let error = match client.reconnect("x".into(), 3, vec![ROOT.into()]).await {
        Err(ClientError::Rpc(error)) => error,
        other => panic!("expected -32007, got {other:?}"),
    };
    assert_eq!(error.code, -32007);
    assert_eq!(error.data, Some(json!({"resources": []})));
    // AHP clients fall back to initialize on the same connection; without
    // a token that is -32007 too (with data.resources), and then closed.
    client
        .ping()
        .await
        .expect("still open after reconnect's -32007");
    let mut events = client.events();
    let error = rpc_error(
        client
            .request(
                "initialize",
                json!({"channel": ROOT, "protocolVersions": ["1.0.0"], "clientId": "x"}),
            )
            .await,
    );
    assert_eq!(error.code, -32007);
    assert_eq!(error.data, Some(json!({"resources": []})));
    wait_closed(&mut events).await;
}

#[tokio::test]
async fn ahp_commands_the_hub_does_not_host_get_method_not_found_naming_them() {
    let hub = TestHub::start().await;
    let client = initialized(&url_with_token(&hub, &hub.token), "commands").await;
    for method in [
        "createSession",
        "disposeSession",
        "listSessions",
        "createChat",
        "disposeChat",
        "moveChat",
        "fetchTurns",
        "authenticate",
        "createTerminal",
        "disposeTerminal",
        "resolveSessionConfig",
        "sessionConfigCompletions",
        "completions",
        "resourceRead",
        "resourceWrite",
        "resourceList",
        "resourceCopy",
        "resourceDelete",
        "resourceMove",
        "resourceResolve",
        "resourceMkdir",
        "resourceRequest",
        "createResourceWatch",
        "invokeChangesetOperation",
        "listAutomationTriggerDefinitions",
        "runAutomation",
        "fetchAutomationRuns",
    ] {
        let error = rpc_error(
            client
                .request(
                    method,
                    json!({"channel": ROOT, "session": "ahp-session:/1"}),
                )
                .await,
        );
        assert_eq!(error.code, -32601, "{method}");
        assert!(
            error.message.contains(method),
            "{method}: {}",
            error.message
        );
        assert_eq!(error.data, Some(json!({"method": method})));
    }
    // A typed SDK call is the same request.
    let typed = client
        .resource_read(
            serde_json::from_value::<ResourceReadParams>(
                json!({"channel": ROOT, "uri": "file:///x"}),
            )
            .unwrap(),
        )
        .await;
    assert!(
        matches!(typed, Err(ClientError::Rpc(ref e)) if e.code == -32601),
        "{typed:?}"
    );
    // AHP's write-ahead action notification is dropped and counted; the
    // connection goes on.
    client
        .notify(
            "dispatchAction",
            json!({"channel": ROOT, "clientSeq": 1, "action": {"type": "root/agentsChanged", "agents": []}}),
        )
        .await
        .unwrap();
    client.ping().await.expect("still served");
    // Unknown channels stay -32008.
    let error = rpc_error(
        client
            .request("subscribe", json!({"channel": "ahp-session:/1"}))
            .await,
    );
    assert_eq!(error.code, -32008);
    let fresh = ahp_client(&url_with_token(&hub, &hub.token)).await;
    let error = match fresh
        .initialize("x".into(), versions(), vec!["ahp-session:/1".into()])
        .await
    {
        Err(ClientError::Rpc(error)) => error,
        other => panic!("expected -32008, got {other:?}"),
    };
    assert_eq!(error.code, -32008);
}

#[tokio::test]
async fn a_url_token_that_is_wrong_empty_repeated_or_badly_encoded_is_refused_with_401() {
    let hub = TestHub::with_principals(&["explorer"], "").await;
    let mut wrong = hub.token.clone().into_bytes();
    wrong[5] = if wrong[5] == b'a' { b'b' } else { b'a' };
    let wrong = String::from_utf8(wrong).unwrap();
    let base = &hub.ws;
    let token = &hub.token;
    for target in [
        format!("{base}?token={wrong}"),
        format!("{base}?token="),
        format!("{base}?token"),
        format!("{base}?token={token}&token={token}"),
        format!("{base}?token={}%", &token[..63]),
        format!("{base}?token=%zz{token}"),
        format!("{base}?token=%ff{token}"),
    ] {
        let shown = target.replace(token.as_str(), "TOKEN");
        assert_eq!(refused_status(&target).await, 401, "{shown}");
    }
    // Percent-encoded, the token is the same token.
    let encoded: String = token
        .chars()
        .map(|c| format!("%{:02X}", c as u32))
        .collect();
    let client = initialized(&format!("{base}?other=1&token={encoded}"), "x").await;
    client
        .ping()
        .await
        .expect("a percent-encoded token authenticates");

    // Header and URL must name the same principal.
    let header = |value: &str| ("Authorization".to_owned(), format!("Bearer {value}"));
    let explorer = token_of("explorer");
    for (url_token, header_token, expected) in [
        (token.as_str(), token.as_str(), None),
        (token.as_str(), explorer.as_str(), Some(401)),
        (token.as_str(), "not-a-token", Some(401)),
        (explorer.as_str(), explorer.as_str(), None),
    ] {
        let mut request = format!("{base}?token={url_token}")
            .into_client_request()
            .unwrap();
        let (name, value) = header(header_token);
        request.headers_mut().insert(
            tungstenite_029::tungstenite::http::HeaderName::from_bytes(name.as_bytes()).unwrap(),
            value.parse().unwrap(),
        );
        let outcome = within_wait("upgrade", tungstenite_029::connect_async(request)).await;
        match (outcome, expected) {
            (Ok((stream, _)), None) => {
                let client = over_stream(stream).await;
                client
                    .initialize("x".into(), versions(), vec![])
                    .await
                    .unwrap();
            }
            (Err(WsError::Http(response)), Some(status)) => {
                assert_eq!(response.status().as_u16(), status)
            }
            (Ok(_), Some(status)) => panic!("expected {status}, the upgrade succeeded"),
            (Err(error), _) => panic!("unexpected upgrade failure: {error}"),
        }
    }
    assert_hub_routes(&hub).await;
}

// ---------------------------------------------------------------------------
// The remote listener (section 12)
// ---------------------------------------------------------------------------

/// A self-signed certificate for `localhost` and its key, as PEM files in
/// `dir`.
fn self_signed(dir: &std::path::Path) -> (std::path::PathBuf, std::path::PathBuf, Vec<u8>) {
    let certified = rcgen::generate_simple_self_signed(vec!["localhost".to_owned()]).unwrap();
    let cert = dir.join("remote-cert.pem");
    let key = dir.join("remote-key.pem");
    std::fs::write(&cert, certified.cert.pem()).unwrap();
    std::fs::write(&key, certified.signing_key.serialize_pem()).unwrap();
    (cert, key, certified.cert.der().to_vec())
}

/// A TLS connector that trusts exactly `cert` (DER).
fn trusting(cert: Vec<u8>) -> tungstenite_029::Connector {
    let mut roots = rustls::RootCertStore::empty();
    roots.add(cert.into()).unwrap();
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    tungstenite_029::Connector::Rustls(Arc::new(config))
}

#[tokio::test]
async fn over_the_remote_listener_a_named_principal_connects_and_the_direct_token_is_refused() {
    let temp = tempfile::tempdir().unwrap();
    let (cert, key, der) = self_signed(temp.path());
    let explorer = token_of("explorer");
    let hub = switchboard_testkit::TestHub::builder()
        .config(&format!("[principals.explorer]\ntoken = \"{explorer}\"\n"))
        .remote(cert, key)
        .start()
        .await;
    let remote = hub
        .info()
        .remote
        .clone()
        .expect("hub.json names the remote listener");
    assert!(remote.starts_with("wss://127.0.0.1:"), "{remote}");
    let port = remote.trim_end_matches('/').rsplit(':').next().unwrap();
    let base = format!("wss://localhost:{port}/");
    let connect = |target: String| {
        let connector = trusting(der.clone());
        async move {
            within_wait(
                "wss upgrade",
                tungstenite_029::connect_async_tls_with_config(
                    target,
                    None,
                    false,
                    Some(connector),
                ),
            )
            .await
        }
    };

    // A named principal, token in the URL, through the SDK.
    let (stream, _) = connect(format!("{base}?token={explorer}"))
        .await
        .expect("wss upgrade");
    let client = over_stream(stream).await;
    client
        .initialize("remote".into(), versions(), vec![ROOT.into()])
        .await
        .expect("a named principal initializes over TLS");
    let registered: Value = client
        .request(
            "client/registerService",
            json!({"metadata": {"from": "afar"}}),
        )
        .await
        .unwrap();
    // A local client of the same principal sees it in the catalog.
    let local = initialized(
        &format!("{}?token={explorer}", hub.info().ws.as_deref().unwrap()),
        "local",
    )
    .await;
    let catalog: Value = local
        .request("subscribe", json!({"channel": CATALOG}))
        .await
        .unwrap();
    assert_eq!(
        catalog["snapshot"]["state"]["services"][0]["serviceId"],
        registered["serviceId"]
    );
    assert_eq!(
        catalog["snapshot"]["state"]["services"][0]["principal"],
        json!({"kind": "reserved", "module_id": "explorer"})
    );

    // The user's direct token never authenticates over the network.
    let direct = hub.info().token.clone();
    match connect(format!("{base}?token={direct}")).await {
        Err(WsError::Http(response)) => assert_eq!(response.status().as_u16(), 401),
        other => panic!(
            "expected 401 for the direct token, got {:?}",
            other.map(|_| ())
        ),
    }
    let mut request = base.as_str().into_client_request().unwrap();
    request
        .headers_mut()
        .insert("Authorization", format!("Bearer {direct}").parse().unwrap());
    match within_wait(
        "wss upgrade",
        tungstenite_029::connect_async_tls_with_config(
            request,
            None,
            false,
            Some(trusting(der.clone())),
        ),
    )
    .await
    {
        Err(WsError::Http(response)) => assert_eq!(response.status().as_u16(), 401),
        other => panic!(
            "expected 401 for the direct bearer, got {:?}",
            other.map(|_| ())
        ),
    }
    // Without a token at the upgrade, initialize with the direct token (or
    // none) is -32007.
    for auth in [json!({"authToken": direct}), json!({})] {
        let (stream, _) = connect(base.clone())
            .await
            .expect("wss upgrade without a token");
        let client = over_stream(stream).await;
        let mut params = json!({"channel": ROOT, "protocolVersions": ["1.0.0"], "clientId": "x"});
        params
            .as_object_mut()
            .unwrap()
            .extend(auth.as_object().unwrap().clone());
        let error = rpc_error(client.request("initialize", params).await);
        assert_eq!(error.code, -32007);
        assert_eq!(error.data, Some(json!({"resources": []})));
    }
    // A client that does not trust the certificate does not get in.
    let untrusted = within_wait(
        "wss upgrade",
        tungstenite_029::connect_async_tls_with_config(
            format!("{base}?token={explorer}"),
            None,
            false,
            Some(trusting(self_signed(temp.path()).2)),
        ),
    )
    .await;
    assert!(untrusted.is_err());
    client.shutdown().await;
    local.shutdown().await;
}
