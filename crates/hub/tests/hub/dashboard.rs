//! The dashboard on the HTTP port: one-time login codes and the session
//! cookie, the page's defences (Origin, Host, CSP), the live stream
//! (snapshot, catalog actions, ticks, and dropping a page that falls
//! behind), `hub/dashboardSnapshot`, and `[dashboard] enabled = false`.
//! (The page in a real browser is tested in `crates/cli/tests/cli/dashboard.rs`.)

use std::time::Duration;

use serde_json::{json, Value};
use switchboard_testkit::http::{self, HttpResponse};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::support::*;

/// `GET path` with `headers`, the whole response (head and body).
async fn get(hub: &TestHub, path: &str, headers: &[(&str, &str)]) -> HttpResponse {
    hub.http_response(path, headers).await
}

fn header<'a>(response: &'a HttpResponse, name: &str) -> Option<&'a str> {
    response.head.lines().skip(1).find_map(|line| {
        let (n, v) = line.split_once(':')?;
        n.trim().eq_ignore_ascii_case(name).then(|| v.trim())
    })
}

/// A fresh login code, asked for by a `direct` client.
async fn login_code(hub: &TestHub) -> Value {
    let mut operator = hub.client("operator").await;
    let result = expect_result(&operator.request("hub/dashboardLogin", json!({})).await);
    operator.close().await;
    result
}

/// Logs in through a fresh code: the cookie's `name=value`.
async fn log_in(hub: &TestHub) -> String {
    let login = login_code(hub).await;
    let response = get(hub, login["path"].as_str().unwrap(), &[]).await;
    assert_eq!(response.status, 303, "{}", response.head);
    let cookie = header(&response, "set-cookie").expect("a session cookie");
    cookie.split(';').next().unwrap().to_owned()
}

#[tokio::test]
async fn a_login_code_is_for_the_direct_principal_only() {
    let hub = TestHub::with_principals(&["explorer"], "").await;
    let login = login_code(&hub).await;
    let code = login["code"].as_str().unwrap();
    assert_eq!(code.len(), 32);
    assert_eq!(login["path"], format!("/ui/login?code={code}"));
    assert_eq!(login["expiresInSeconds"], 60);

    let mut explorer = hub.client_as("explorer").await;
    for method in ["hub/dashboardLogin", "hub/dashboardSnapshot"] {
        let response = explorer.request(method, json!({})).await;
        expect_error(&response, code::PERMISSION_DENIED);
    }
}

#[tokio::test]
async fn a_code_logs_in_once_and_the_session_cookie_is_strict() {
    let hub = TestHub::start().await;
    let login = login_code(&hub).await;
    let path = login["path"].as_str().unwrap();
    let response = get(&hub, path, &[]).await;
    assert_eq!(response.status, 303, "{}", response.head);
    assert_eq!(header(&response, "location"), Some("/ui/"));
    let cookie = header(&response, "set-cookie").unwrap();
    for attribute in ["HttpOnly", "SameSite=Strict", "Path=/ui", "Max-Age="] {
        assert!(cookie.contains(attribute), "{cookie}");
    }
    assert!(
        !cookie.contains(&hub.token),
        "the hub token is not the session"
    );
    let session = cookie.split(';').next().unwrap();

    // Used once: the same link again is refused, and so is a made-up one.
    let again = get(&hub, path, &[]).await;
    assert_eq!(again.status, 403);
    assert!(header(&again, "set-cookie").is_none());
    assert!(again.body.contains("does not work"), "{}", again.body);
    let made_up = get(&hub, "/ui/login?code=00112233445566778899aabbccddeeff", &[]).await;
    assert_eq!(made_up.status, 403);
    assert_eq!(get(&hub, "/ui/login", &[]).await.status, 403);

    // The session opens the page; without it, only the help page.
    let page = get(&hub, "/ui/", &[("Cookie", session)]).await;
    assert_eq!(page.status, 200);
    assert!(page.body.contains("/ui/static/app.js"));
    let csp = header(&page, "content-security-policy").expect("a CSP");
    assert!(
        csp.contains("script-src 'self'") && !csp.contains("unsafe-inline"),
        "{csp}"
    );
    assert_eq!(header(&page, "referrer-policy"), Some("no-referrer"));
    assert!(header(&page, "access-control-allow-origin").is_none());
    for path in ["/ui/", "/ui/stream", "/ui/static/app.js"] {
        let anonymous = get(&hub, path, &[("Cookie", "switchboard_session=guess")]).await;
        assert_eq!(anonymous.status, 401, "{path}");
        assert!(anonymous.body.contains("switchboard dashboard"), "{path}");
        assert!(!anonymous.body.contains("uPlot"), "{path}");
    }
    // The help page's style sheet needs no session; nothing else does.
    assert_eq!(get(&hub, "/ui/static/style.css", &[]).await.status, 200);
    assert_eq!(get(&hub, "/ui", &[]).await.status, 308);

    // Logging out ends the session.
    let out = get(&hub, "/ui/logout", &[("Cookie", session)]).await;
    assert_eq!(out.status, 303);
    assert!(header(&out, "set-cookie").unwrap().contains("Max-Age=0"));
    assert_eq!(get(&hub, "/ui/", &[("Cookie", session)]).await.status, 401);
}

#[tokio::test]
async fn an_expired_code_is_refused() {
    let hub = TestHub::with_config("[dashboard]\nlogin_code_seconds = 1\n").await;
    let login = login_code(&hub).await;
    assert_eq!(login["expiresInSeconds"], 1);
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let response = get(&hub, login["path"].as_str().unwrap(), &[]).await;
    assert_eq!(response.status, 403);
    assert!(header(&response, "set-cookie").is_none());
}

#[tokio::test]
async fn a_foreign_origin_or_host_gets_nothing_even_with_the_cookie() {
    let hub = TestHub::start().await;
    let session = log_in(&hub).await;
    let address = http::address_of(&hub.ws);
    let port = address.rsplit(':').next().unwrap();
    let rebound = format!("evil.example:{port}");
    for headers in [
        vec![
            ("Cookie", session.as_str()),
            ("Origin", "http://evil.example"),
        ],
        vec![("Cookie", session.as_str()), ("Origin", "null")],
        vec![("Cookie", session.as_str()), ("Host", rebound.as_str())],
    ] {
        for path in ["/ui/", "/ui/stream", "/ui/login?code=x"] {
            let response = get(&hub, path, &headers).await;
            assert_eq!(response.status, 403, "{path} {headers:?}");
            assert!(!response.body.contains("app.js"), "{path}");
            assert!(header(&response, "access-control-allow-origin").is_none());
        }
    }
}

#[tokio::test]
async fn a_dashboard_turned_off_serves_nothing_and_mints_no_code() {
    let hub = TestHub::with_config("[dashboard]\nenabled = false\n").await;
    for path in ["/ui/", "/ui/login?code=x", "/ui/static/style.css"] {
        assert_eq!(get(&hub, path, &[]).await.status, 404, "{path}");
    }
    let mut operator = hub.client("operator").await;
    let error = expect_error(
        &operator.request("hub/dashboardLogin", json!({})).await,
        code::INVALID_REQUEST,
    );
    assert_eq!(error["data"]["reason"], "dashboardDisabled");
    // `top`'s snapshot still works: it needs no page.
    expect_result(&operator.request("hub/dashboardSnapshot", json!({})).await);
}

/// One page's event stream, read off a raw socket.
struct Stream {
    socket: TcpStream,
    buffer: String,
}

#[derive(Debug)]
struct Event {
    name: String,
    data: String,
}

impl Stream {
    async fn open(hub: &TestHub, session: &str) -> Stream {
        let address = http::address_of(&hub.ws);
        let mut socket = TcpStream::connect(&address).await.unwrap();
        let request = format!(
            "GET /ui/stream HTTP/1.1\r\nHost: {address}\r\nCookie: {session}\r\nAccept: text/event-stream\r\n\r\n"
        );
        socket.write_all(request.as_bytes()).await.unwrap();
        let mut stream = Stream {
            socket,
            buffer: String::new(),
        };
        let head = stream.until("\r\n\r\n").await;
        assert!(head.starts_with("HTTP/1.1 200"), "{head}");
        assert!(head.contains("text/event-stream"), "{head}");
        stream
    }

    /// Reads until `end` appears; returns the text before it.
    async fn until(&mut self, end: &str) -> String {
        let read = async {
            loop {
                if let Some(at) = self.buffer.find(end) {
                    let text = self.buffer[..at].to_owned();
                    self.buffer.drain(..at + end.len());
                    return text;
                }
                let mut chunk = [0u8; 65536];
                let n = self.socket.read(&mut chunk).await.expect("read the stream");
                assert!(n > 0, "the stream ended; buffered: {:?}", self.buffer);
                self.buffer.push_str(&String::from_utf8_lossy(&chunk[..n]));
            }
        };
        tokio::time::timeout(WAIT, read)
            .await
            .unwrap_or_else(|_| panic!("the stream did not send {end:?} within {WAIT:?}"))
    }

    /// The next event (chunked transfer framing is skipped: SSE lines are
    /// recognised by their field names).
    async fn next(&mut self) -> Event {
        let block = self.until("\n\n").await;
        let mut event = Event {
            name: String::new(),
            data: String::new(),
        };
        for line in block.lines() {
            if let Some(name) = line.strip_prefix("event: ") {
                event.name = name.to_owned();
            } else if let Some(data) = line.strip_prefix("data: ") {
                if !event.data.is_empty() {
                    event.data.push('\n');
                }
                event.data.push_str(data);
            }
        }
        if event.name.is_empty() {
            return Box::pin(self.next()).await; // a chunk-size line or a comment
        }
        event
    }

    async fn next_named(&mut self, name: &str) -> Event {
        loop {
            let event = self.next().await;
            if event.name == name {
                return event;
            }
        }
    }
}

#[tokio::test]
async fn the_stream_sends_a_snapshot_then_catalog_actions_and_ticks() {
    let hub = TestHub::start().await;
    let mut owner = hub.client("owner").await;
    let first = owner
        .register(json!({"label": "first", "protocol": "x/1"}))
        .await;
    let session = log_in(&hub).await;
    let mut stream = Stream::open(&hub, &session).await;

    let snapshot = stream.next().await;
    assert_eq!(snapshot.name, "snapshot");
    let snapshot: Value = serde_json::from_str(&snapshot.data).unwrap();
    assert_eq!(snapshot["services"][0]["serviceId"], first);
    assert_eq!(snapshot["services"][0]["metadata"]["label"], "first");
    assert_eq!(snapshot["hub"]["pid"], std::process::id());
    assert_eq!(snapshot["config"]["limits"]["maxConnections"], 4096);
    assert!(
        !snapshot.to_string().contains(&hub.token),
        "no token in the page's data"
    );

    // A registration reaches the page as the catalog action itself.
    let second = owner
        .register(json!({"label": "<img src=x onerror=alert(1)>"}))
        .await;
    let actions = stream.next_named("actions").await;
    let action: Value = serde_json::from_str(actions.data.lines().next().unwrap()).unwrap();
    assert_eq!(action["method"], "action");
    assert_eq!(action["params"]["action"]["type"], "clientServices/added");
    assert_eq!(action["params"]["action"]["service"]["serviceId"], second);

    // Ticks carry the connection table, the owner's row among them.
    let tick = stream.next_named("tick").await;
    let tick: Value = serde_json::from_str(&tick.data).unwrap();
    let rows = tick["connections"].as_array().unwrap();
    let row = rows
        .iter()
        .find(|r| r["services"] == 2)
        .unwrap_or_else(|| panic!("the owner's row: {tick}"));
    assert_eq!(row["transport"], "unix");
    assert_eq!(row["principal"], json!({"kind": "direct"}));
    assert!(row["messagesIn"].as_u64().unwrap() >= 3);

    owner.close().await;
    let removed = stream.next_named("actions").await;
    assert!(
        removed.data.contains("clientServices/removed"),
        "{}",
        removed.data
    );
}

#[tokio::test]
async fn a_page_that_falls_behind_is_dropped_and_routing_goes_on() {
    let hub = TestHub::start().await;
    let session = log_in(&hub).await;
    let mut stream = Stream::open(&hub, &session).await;
    assert_eq!(stream.next().await.name, "snapshot");

    // The page stops reading; a flood of changes (about 24 MB of actions,
    // more than the page's 4 MiB queue and the sockets' buffers) follows.
    let mut owner = hub.client("owner").await;
    let padding = "x".repeat(60 * 1024);
    for i in 0..400 {
        let id = owner
            .register(json!({"label": i, "padding": padding}))
            .await;
        expect_result(
            &owner
                .request("client/unregisterService", json!({"serviceId": id}))
                .await,
        );
    }
    // Routing is unaffected meanwhile.
    let mut caller = hub.client("caller").await;
    let service = owner.register(json!({"label": "echo"})).await;
    caller.notify_service(&service, "ping", json!({})).await;
    owner
        .receive(is_method("clientService/notification"), WAIT)
        .await;

    // Reading on: what the socket held, then `resync`, then the end.
    let event = stream.next_named("resync").await;
    assert_eq!(event.data, "behind");
    let mut rest = Vec::new();
    tokio::time::timeout(WAIT, stream.socket.read_to_end(&mut rest))
        .await
        .expect("the stream ends after resync")
        .unwrap();
    // A new page starts from a snapshot again.
    let mut again = Stream::open(&hub, &session).await;
    let snapshot: Value = serde_json::from_str(&again.next().await.data).unwrap();
    assert_eq!(snapshot["services"].as_array().unwrap().len(), 1);
}

#[tokio::test]
async fn the_snapshot_shows_latency_traffic_and_connections() {
    let hub = TestHub::start().await;
    let mut owner = hub.client("owner").await;
    let service = owner.register(json!({"label": "echo"})).await;
    let mut caller = hub.ws_connect("caller").await;
    caller.initialize_ok(Some(&hub.token)).await;
    let mut operator = hub.client("operator").await;

    // Requests answered and notifications sent, until a tick shows them.
    let deadline = tokio::time::Instant::now() + WAIT;
    let tick = loop {
        assert!(
            tokio::time::Instant::now() < deadline,
            "no tick showed the traffic"
        );
        caller
            .send_request_with_id(
                json!(1),
                "clientService/request",
                json!({"serviceId": service, "method": "echo"}),
            )
            .await;
        let request = owner.handle_request().await;
        owner
            .respond(&request.value["id"], json!({"ok": true}))
            .await;
        caller.response(&json!(1)).await;
        caller.notify_service(&service, "tick", json!({})).await;
        let snapshot = expect_result(&operator.request("hub/dashboardSnapshot", json!({})).await);
        let tick = snapshot["tick"].clone();
        if tick["rates"]["p99Ms"].is_number() && tick["rates"]["notifications"].as_f64() > Some(0.0)
        {
            break snapshot;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let rows = tick["tick"]["connections"].as_array().unwrap();
    assert!(
        rows.iter().any(|r| r["transport"] == "websocket"),
        "{rows:?}"
    );
    let history = &tick["history"];
    assert!(!history["t"].as_array().unwrap().is_empty());
    for column in [
        "notifications",
        "requests",
        "bytesIn",
        "bytesOut",
        "p50",
        "p99",
    ] {
        assert_eq!(
            history[column].as_array().unwrap().len(),
            history["t"].as_array().unwrap().len(),
            "{column}"
        );
    }
    assert!(history["drops"]["shed"].is_array());
    assert_eq!(tick["services"][0]["serviceId"], service);
}

#[tokio::test]
async fn the_snapshot_names_the_listeners_and_each_tick_the_modules() {
    let hub = TestHub::with_config(
        "[modules.sleeper]\ncommand = \"sleep\"\nargs = [\"60\"]\nrestart = \"never\"\n",
    )
    .await;
    let mut operator = hub.client("operator").await;
    let deadline = tokio::time::Instant::now() + WAIT;
    let snapshot = loop {
        let snapshot = expect_result(&operator.request("hub/dashboardSnapshot", json!({})).await);
        let modules = snapshot["tick"]["modules"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        if modules
            .iter()
            .any(|m| m["name"] == "sleeper" && m["state"] == "running")
        {
            break snapshot;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "no tick showed the module running: {snapshot}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let websocket = snapshot["hub"]["websocket"].as_str().unwrap();
    assert!(websocket.starts_with("ws://127.0.0.1:"), "{websocket}");
    // No --remote: the remote listener is off (null), and the page says so.
    assert!(snapshot["hub"]["remote"].is_null(), "{}", snapshot["hub"]);
    let module = &snapshot["tick"]["modules"][0];
    assert!(module["pid"].is_u64(), "{module}");
    assert_eq!(module["services"], 0);
}
