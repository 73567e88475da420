//! The hub's security boundaries, tested on the real binary: a web page
//! cannot reach it (Origin and Host checks, no CORS headers anywhere), its
//! files keep their modes, and secrets and payloads stay out of its log at
//! every log level. Grants and identity are covered in-process in
//! `crates/hub/tests/security.rs` and `authorization.rs`.

use std::net::TcpStream;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::Path;

use crate::support::*;
use serde_json::{json, Value};
use switchboard_testkit::http::{self, HttpResponse};
use tokio_tungstenite::tungstenite::{self, client::IntoClientRequest, Message, WebSocket};

/// A string that appears nowhere else, to grep the log for.
fn unique(what: &str) -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .subsec_nanos();
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    format!("{what}-{nanos:08x}{n:04x}-{}", std::process::id())
}

fn hex(text: &str) -> String {
    text.bytes().map(|b| format!("{b:02x}")).collect()
}

/// A hub on `root/hub` with `--config root/switchboard.toml` at `RUST_LOG`.
fn hub_with_config(root: &Path, config: &str, rust_log: &str) -> HubProcess {
    let dir = root.join("hub");
    let config_path = root.join("switchboard.toml");
    write_private(&config_path, config);
    HubProcess::builder()
        .dir(dir)
        .config(&config_path)
        .env("RUST_LOG", rust_log)
        .start()
}

/// Rewrites the config, sends SIGHUP, and waits for the hub to log the
/// outcome (`config reloaded` or `reload failed`) one more time.
fn reload(hub: &HubProcess, root: &Path, config: &str, outcome: &str) {
    let before = hub.log().matches(outcome).count();
    write_private(&root.join("switchboard.toml"), config);
    hub.signal(libc::SIGHUP);
    let deadline = std::time::Instant::now() + WAIT;
    while hub.log().matches(outcome).count() == before {
        assert!(
            std::time::Instant::now() < deadline,
            "the hub never logged {outcome:?} again:\n{}",
            hub.log()
        );
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
}

// ---------------------------------------------------------------------------
// A blocking WebSocket client
// ---------------------------------------------------------------------------

/// Upgrades with extra headers; `Err(status)` when the hub refuses.
fn ws_connect(hub: &HubProcess, headers: &[(&str, &str)]) -> Result<WebSocket<TcpStream>, u16> {
    let url = hub.info["ws"].as_str().unwrap();
    let mut request = url.into_client_request().unwrap();
    for (name, value) in headers {
        request.headers_mut().insert(
            tungstenite::http::HeaderName::from_bytes(name.as_bytes()).unwrap(),
            tungstenite::http::HeaderValue::from_str(value).unwrap(),
        );
    }
    let stream = TcpStream::connect(hub.ws_address()).unwrap();
    stream.set_read_timeout(Some(WAIT)).unwrap();
    match tungstenite::client(request, stream) {
        Ok((socket, _)) => Ok(socket),
        Err(tungstenite::HandshakeError::Failure(tungstenite::Error::Http(response))) => {
            Err(response.status().as_u16())
        }
        Err(error) => panic!("WebSocket upgrade failed: {error}"),
    }
}

/// Sends a request and returns its response, skipping other messages.
fn ws_request(socket: &mut WebSocket<TcpStream>, id: u64, method: &str, params: Value) -> Value {
    let message = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
    socket.send(Message::text(message.to_string())).unwrap();
    loop {
        let frame = socket.read().expect("a frame within the read timeout");
        if let Message::Text(text) = frame {
            let value: Value = serde_json::from_str(&text).unwrap();
            if value["id"] == id && value.get("method").is_none() {
                return value;
            }
        }
    }
}

fn ws_notify(socket: &mut WebSocket<TcpStream>, method: &str, params: Value) {
    let message = json!({"jsonrpc": "2.0", "method": method, "params": params});
    socket.send(Message::text(message.to_string())).unwrap();
}

// ---------------------------------------------------------------------------
// Web pages
// ---------------------------------------------------------------------------

fn assert_no_cors(response: &HttpResponse, what: &str) {
    let cors: Vec<String> = response
        .header_names()
        .into_iter()
        .filter(|name| name.starts_with("access-control-"))
        .collect();
    assert!(
        cors.is_empty(),
        "{what}: CORS headers {cors:?} in\n{}",
        response.head
    );
}

fn upgrade_request(host: Option<&str>, extra: &str) -> String {
    let host = host.map(|h| format!("Host: {h}\r\n")).unwrap_or_default();
    format!(
        "GET / HTTP/1.1\r\n{host}Connection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n{extra}\r\n"
    )
}

#[test]
fn no_response_carries_cors_headers_whatever_is_asked() {
    let root = tempfile::tempdir().unwrap();
    let hub = HubProcess::builder().dir(root.path().join("hub")).start();
    let address = hub.ws_address();
    let host = format!("Host: {address}\r\n");
    let cases = [
        ("GET /metrics", format!("GET /metrics HTTP/1.1\r\n{host}Connection: close\r\n\r\n"), 200),
        ("GET /healthz", format!("GET /healthz HTTP/1.1\r\n{host}Connection: close\r\n\r\n"), 200),
        ("GET /nope", format!("GET /nope HTTP/1.1\r\n{host}Connection: close\r\n\r\n"), 404),
        ("POST /metrics", format!("POST /metrics HTTP/1.1\r\n{host}Content-Length: 0\r\nConnection: close\r\n\r\n"), 405),
        (
            "a CORS preflight",
            format!("OPTIONS /metrics HTTP/1.1\r\n{host}Origin: http://evil.example\r\nAccess-Control-Request-Method: GET\r\nConnection: close\r\n\r\n"),
            403,
        ),
        ("OPTIONS without Origin", format!("OPTIONS / HTTP/1.1\r\n{host}Connection: close\r\n\r\n"), 405),
        ("an upgrade", upgrade_request(Some(&address), ""), 101),
        ("an upgrade from a page", upgrade_request(Some(&address), "Origin: http://evil.example\r\n"), 403),
        ("an upgrade from an opaque origin", upgrade_request(Some(&address), "Origin: null\r\n"), 403),
    ];
    for (what, request, status) in cases {
        let response = http::exchange(&address, &request);
        assert_eq!(response.status, status, "{what}: {response:?}");
        assert_no_cors(&response, what);
    }
}

#[test]
fn a_host_that_is_not_loopback_is_refused_on_every_path_which_defeats_dns_rebinding() {
    let root = tempfile::tempdir().unwrap();
    let hub = HubProcess::builder().dir(root.path().join("hub")).start();
    let address = hub.ws_address();
    let port = address.rsplit_once(':').unwrap().1;
    // A page on attacker.example whose name was rebound to 127.0.0.1 is
    // same-origin with the hub as far as the browser knows: it sends its own
    // name as Host, and no Origin on a same-origin GET.
    let foreign = [
        format!("attacker.example:{port}"),
        "attacker.example".to_owned(),
        format!("localhost.attacker.example:{port}"),
        format!("127.0.0.1.nip.io:{port}"),
        format!("2130706433:{port}"),
        format!("[::ffff:7f00:1]:{port}"),
    ];
    for host in &foreign {
        for path in ["/metrics", "/healthz"] {
            let response = hub.http_get(path, &[("Host", host)]);
            assert_eq!(response.status, 403, "GET {path} with Host {host}");
            assert!(!response.body.contains("switchboard_"), "{response:?}");
            assert_no_cors(&response, host);
        }
        let response = http::exchange(&address, &upgrade_request(Some(host), ""));
        assert_eq!(response.status, 403, "upgrade with Host {host}");
        // A refusal ends its socket at once (the client asked for no close).
        assert!(
            response
                .head
                .to_ascii_lowercase()
                .contains("connection: close"),
            "{response:?}"
        );
    }
    let request = "GET /metrics HTTP/1.1\r\nConnection: close\r\n\r\n";
    assert_eq!(
        http::exchange(&address, request).status,
        403,
        "no Host at all"
    );
    let response = http::exchange(&address, &upgrade_request(None, ""));
    assert_eq!(response.status, 403, "an upgrade without Host");

    // Loopback names, with or without a port, are served.
    for host in [
        address.clone(),
        format!("localhost:{port}"),
        format!("[::1]:{port}"),
        "127.0.0.1".to_owned(),
    ] {
        assert_eq!(
            hub.http_get("/metrics", &[("Host", &host)]).status,
            200,
            "{host}"
        );
        let response = http::exchange(&address, &upgrade_request(Some(&host), ""));
        assert_eq!(response.status, 101, "upgrade with Host {host}");
    }
}

// ---------------------------------------------------------------------------
// Files
// ---------------------------------------------------------------------------

#[test]
fn the_directory_and_hub_json_stay_private_under_umask_000_and_across_reloads() {
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("hub");
    std::fs::create_dir(&dir).unwrap();
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o777)).unwrap();
    let config = root.path().join("switchboard.toml");
    write_private(
        &config,
        "[principals.explorer]\ntoken = \"token-one-0123456789\"\n",
    );
    let hub = HubProcess::builder()
        .dir(&dir)
        .config(&config)
        .configure(|command| {
            // SAFETY: umask(2) is async-signal-safe and touches no memory.
            unsafe {
                command.pre_exec(|| {
                    libc::umask(0);
                    Ok(())
                });
            }
        })
        .start();
    let check = |when: &str| {
        assert_eq!(mode(&dir), 0o700, "directory {when}");
        assert_eq!(mode(&dir.join("hub.json")), 0o600, "hub.json {when}");
        assert_eq!(mode(&dir.join("hub.lock")), 0o600, "hub.lock {when}");
    };
    check("after start");

    reload(
        &hub,
        root.path(),
        "[principals.explorer]\ntoken = \"token-two-0123456789\"\n",
        "config reloaded",
    );
    check("after SIGHUP");
    let reloaded = run(&["reload", "--dir", dir.to_str().unwrap()]);
    assert!(reloaded.status.success(), "{reloaded:?}");
    check("after switchboard reload");
    reload(&hub, root.path(), "[principals.broken]\n", "reload failed");
    check("after a failed reload");
    // The hub still serves, with the same hub.json.
    assert_eq!(read_hub_json(&dir).unwrap(), hub.info);
    let mut client = hub.line_client();
    assert_eq!(client.request("ping", json!(null))["result"], Value::Null);
}

// ---------------------------------------------------------------------------
// Logs and metrics
// ---------------------------------------------------------------------------

#[test]
fn tokens_never_reach_the_log_or_metrics_at_trace_level_through_auth_failures_and_reloads() {
    let root = tempfile::tempdir().unwrap();
    std::fs::create_dir(root.path().join("tokens")).unwrap();
    let explorer = unique("tok-explorer");
    let git = unique("tok-git");
    let git_rotated = unique("tok-git-rotated");
    let wrong_unix = unique("tok-wrong-unix");
    let wrong_bearer = unique("tok-wrong-bearer");
    let in_broken_line = unique("tok-broken");
    let in_wrong_type = unique("tok-typo");
    let git_file = root.path().join("tokens/git");
    write_private(&git_file, &format!("{git}\n"));
    let config = |log_payloads: bool| {
        format!(
            "[hub]\nlog_payloads = {log_payloads}\n\n[principals.explorer]\ntoken = \"{explorer}\"\n\n[principals.git]\ntoken_file = \"tokens/git\"\n\n[[grants]]\nfrom = \"explorer\"\nto = \"git\"\nallow = [\"discover\", \"request\", \"notify\"]\n"
        )
    };
    let hub = hub_with_config(root.path(), &config(false), "trace");
    let dir = hub.dir().to_owned();

    // Named principals on both transports, a bearer token on the upgrade,
    // routed traffic between them.
    let mut git_client = LineClient::connect(&hub.socket());
    git_client.initialize(&git);
    let service = git_client.request("client/registerService", json!({"metadata": {}}))["result"]
        ["serviceId"]
        .clone();
    let mut explorer_ws = ws_connect(&hub, &[]).unwrap();
    let init = ws_request(
        &mut explorer_ws,
        1,
        "initialize",
        json!({"authToken": explorer}),
    );
    assert_eq!(
        init["result"]["principal"]["module_id"], "explorer",
        "{init}"
    );
    ws_notify(
        &mut explorer_ws,
        "clientService/notify",
        json!({"serviceId": service, "method": "n"}),
    );
    let bearer = format!("Bearer {git}");
    let mut git_ws = ws_connect(&hub, &[("Authorization", &bearer)]).unwrap();
    let init = ws_request(&mut git_ws, 1, "initialize", json!({}));
    assert_eq!(init["result"]["principal"]["module_id"], "git", "{init}");
    let mut direct = hub.line_client();
    direct.send_request(
        "clientService/request",
        json!({"serviceId": service, "method": "m", "timeoutMs": 50}),
    );

    // Authentication failures on both transports.
    let mut wrong = LineClient::connect(&hub.socket());
    let refused = wrong.request("initialize", json!({"authToken": wrong_unix}));
    assert_eq!(refused["error"]["code"], -32007);
    let wrong_header = format!("Bearer {wrong_bearer}");
    let mut wrong_ws = ws_connect(&hub, &[("Authorization", &wrong_header)]).unwrap();
    let refused = ws_request(&mut wrong_ws, 1, "initialize", json!({}));
    assert_eq!(refused["error"]["code"], -32007);

    // Reloads: a rotated token file, the reload command, two broken configs
    // whose errors sit on a line holding a token, then payload logging on.
    write_private(&git_file, &format!("{git_rotated}\n"));
    reload(&hub, root.path(), &config(false), "config reloaded");
    let reloaded = run(&["reload", "--dir", dir.to_str().unwrap()]);
    assert!(reloaded.status.success(), "{reloaded:?}");
    let broken = format!(
        "{}\n[principals.broken]\ntoken = \"{in_broken_line}\" oops\n",
        config(false)
    );
    reload(&hub, root.path(), &broken, "reload failed");
    let failed = run(&["reload", "--dir", dir.to_str().unwrap()]);
    assert!(!failed.status.success());
    let failed_text = failed.stderr;
    let typo = format!("[principals]\nexplorer = \"{in_wrong_type}\"\n");
    reload(&hub, root.path(), &typo, "reload failed");
    reload(&hub, root.path(), &config(true), "config reloaded");
    let mut explorer_again = LineClient::connect(&hub.socket());
    explorer_again.initialize(&explorer);
    let mut git_again =
        ws_connect(&hub, &[("Authorization", &format!("Bearer {git_rotated}"))]).unwrap();
    ws_request(
        &mut git_again,
        1,
        "initialize",
        json!({"authToken": git_rotated}),
    );
    let marker = unique("payload-logging-is-on");
    explorer_again.send(&json!({"jsonrpc": "2.0", "method": "clientService/notify", "params": {"serviceId": "x", "method": marker}}));
    hub.wait_for_log(&marker);

    let log = hub.log();
    for needle in [
        "refused a connection with a missing or wrong token",
        "reload failed",
        "config reloaded",
    ] {
        assert!(
            log.contains(needle),
            "the log lacks {needle:?}; the test did not run:\n{log}"
        );
    }
    let metrics = hub.metrics();
    let tokens = [
        hub.token(),
        explorer,
        git,
        git_rotated,
        wrong_unix,
        wrong_bearer,
        in_broken_line.clone(),
        in_wrong_type,
    ];
    for token in &tokens {
        assert!(
            !log.contains(token.as_str()),
            "token {token} in the log:\n{log}"
        );
        assert!(
            !log.contains(&hex(token)),
            "token {token} hex-encoded in the log"
        );
        assert!(
            !metrics.contains(token.as_str()),
            "token {token} in /metrics"
        );
    }
    assert!(
        !failed_text.contains(&in_broken_line),
        "switchboard reload printed a token: {failed_text}"
    );
    assert!(
        failed_text.contains("line"),
        "the error still says where: {failed_text}"
    );
}

/// The token an AHP client puts in the upgrade URL (`/?token=`), valid or
/// refused, never reaches the log (hub, hyper, axum, tungstenite targets
/// all at trace) or `/metrics`, in any form.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tokens_in_the_upgrade_url_never_reach_the_log_or_metrics_at_trace_level() {
    use ahp::{Client, ClientConfig};
    use ahp_ws::WebSocketTransport;

    let root = tempfile::tempdir().unwrap();
    let explorer = unique("urltok-explorer");
    let wrong = unique("urltok-wrong");
    let config = format!("[principals.explorer]\ntoken = \"{explorer}\"\n");
    let hub = hub_with_config(root.path(), &config, "trace");
    let base = format!("ws://{}/", hub.ws_address());
    let direct = hub.token();
    let percent = |token: &str| -> String { token.bytes().map(|b| format!("%{b:02X}")).collect() };

    // Accepted: the direct and a named token, plain and percent-encoded;
    // each connection initializes, registers, calls and pings.
    let mut clients = Vec::new();
    for target in [
        format!("{base}?token={direct}"),
        format!("{base}?token={explorer}"),
        format!("{base}?a=b&token={}", percent(&explorer)),
    ] {
        let transport = WebSocketTransport::connect(&target).await.expect("upgrade");
        let client = Client::connect(transport, ClientConfig::default())
            .await
            .unwrap();
        client
            .initialize(
                "log-test".into(),
                vec!["1.0.0".into()],
                vec!["ahp-root://".into()],
            )
            .await
            .expect("initialize");
        let service: Value = client
            .request("client/registerService", json!({"metadata": {}}))
            .await
            .unwrap();
        let _ = client
            .request::<_, Value>(
                "clientService/request",
                json!({"serviceId": service["serviceId"], "method": "m", "timeoutMs": 50}),
            )
            .await;
        client.ping().await.unwrap();
        clients.push(client);
    }
    // Refused at the upgrade: wrong, repeated, badly encoded.
    for target in [
        format!("{base}?token={wrong}"),
        format!("{base}?token={explorer}&token={explorer}"),
        format!("{base}?token={wrong}%zz"),
        format!("{base}?token={direct}&token={wrong}"),
    ] {
        assert!(WebSocketTransport::connect(&target).await.is_err());
    }
    // A header and a URL token that disagree.
    let mut request =
        tokio_tungstenite::tungstenite::client::IntoClientRequest::into_client_request(format!(
            "{base}?token={explorer}"
        ))
        .unwrap();
    request
        .headers_mut()
        .insert("Authorization", format!("Bearer {direct}").parse().unwrap());
    assert!(tokio_tungstenite::connect_async(request).await.is_err());
    for client in clients {
        client.shutdown().await;
    }
    hub.wait_for_log("refused a WebSocket upgrade");

    let log = hub.log();
    assert!(log.contains("initialized"), "the test did not run:\n{log}");
    let metrics = hub.metrics();
    for token in [&direct, &explorer, &wrong] {
        for form in [token.clone(), hex(token), percent(token)] {
            assert!(!log.contains(&form), "token {token} in the log:\n{log}");
            assert!(!metrics.contains(&form), "token {token} in /metrics");
        }
    }
    // A request target (`/?token=…`); mio's trace lines say `token=Token(n)`.
    assert!(
        !log.contains("?token=") && !log.contains("&token="),
        "a request target in the log:\n{log}"
    );
}

#[test]
fn payloads_stay_out_of_the_log_at_trace_level_until_log_payloads_is_on() {
    let root = tempfile::tempdir().unwrap();
    let hub = hub_with_config(root.path(), "", "trace");
    let marker = |what: &str| unique(&format!("payload-{what}"));
    let (registered, updated, notified, asked, answered, failed, ws_asked) = (
        marker("metadata"),
        marker("updated-metadata"),
        marker("notify"),
        marker("request"),
        marker("result"),
        marker("error-data"),
        marker("ws-request"),
    );

    let mut owner = hub.line_client();
    let service = owner.request(
        "client/registerService",
        json!({"metadata": {"m": registered}}),
    )["result"]["serviceId"]
        .clone();
    owner.request(
        "client/updateService",
        json!({"serviceId": service, "metadata": {"m": updated}}),
    );
    let mut caller = hub.line_client();
    caller.send(&json!({"jsonrpc": "2.0", "method": "clientService/notify",
        "params": {"serviceId": service, "method": "n", "params": {"m": notified}}}));
    let first = caller.send_request(
        "clientService/request",
        json!({"serviceId": service, "method": "m", "params": {"m": asked}}),
    );
    let mut ws = ws_connect(&hub, &[]).unwrap();
    ws_request(&mut ws, 1, "initialize", json!({"authToken": hub.token()}));
    ws.send(Message::text(
        json!({"jsonrpc": "2.0", "id": 2, "method": "clientService/request",
            "params": {"serviceId": service, "method": "m", "params": {"m": ws_asked}}})
        .to_string(),
    ))
    .unwrap();
    let mut handled = Vec::new();
    while handled.len() < 2 {
        let message = owner.recv();
        if message["method"] == "clientService/handleRequest" {
            handled.push(message);
        }
    }
    for handle in &handled {
        let answer = if handle["params"]["params"]["m"] == asked.as_str() {
            json!({"jsonrpc": "2.0", "id": handle["id"], "result": {"m": answered}})
        } else {
            json!({"jsonrpc": "2.0", "id": handle["id"], "error": {"code": 7, "message": "no", "data": {"m": failed}}})
        };
        owner.send(&answer);
    }
    let answer = loop {
        let message = caller.recv();
        if message["id"] == first {
            break message;
        }
    };
    assert_eq!(answer["result"]["m"], answered.as_str());
    let ws_answer = loop {
        if let Message::Text(text) = ws.read().unwrap() {
            let value: Value = serde_json::from_str(&text).unwrap();
            if value["id"] == 2 {
                break value;
            }
        }
    };
    assert_eq!(ws_answer["error"]["data"]["m"], failed.as_str());
    // Everything above was handled before this answer.
    assert_eq!(owner.request("ping", json!(null))["result"], Value::Null);

    let log = hub.log();
    assert!(
        log.contains("registered a service"),
        "debug logging is on:\n{log}"
    );
    for payload in [
        &registered,
        &updated,
        &notified,
        &asked,
        &answered,
        &failed,
        &ws_asked,
    ] {
        assert!(
            !log.contains(payload.as_str()),
            "payload {payload} logged:\n{log}"
        );
        assert!(
            !log.contains(&hex(payload)),
            "payload {payload} logged hex-encoded"
        );
    }

    reload(
        &hub,
        root.path(),
        "[hub]\nlog_payloads = true\n",
        "config reloaded",
    );
    let (on_notify, on_request, on_result) = (
        marker("on-notify"),
        marker("on-request"),
        marker("on-result"),
    );
    caller.send(&json!({"jsonrpc": "2.0", "method": "clientService/notify",
        "params": {"serviceId": service, "method": "n", "params": {"m": on_notify}}}));
    caller.send_request(
        "clientService/request",
        json!({"serviceId": service, "method": "m", "params": {"m": on_request}}),
    );
    let handle = loop {
        let message = owner.recv();
        if message["method"] == "clientService/handleRequest" {
            break message;
        }
    };
    owner.send(&json!({"jsonrpc": "2.0", "id": handle["id"], "result": {"m": on_result}}));
    for payload in [&on_notify, &on_request, &on_result] {
        hub.wait_for_log(payload);
    }
}
