//! The MCP gateway the hub serves itself at `/mcp` (Streamable HTTP), seen
//! from a raw HTTP client: authentication, sessions of both styles, the
//! refusals and bounds, profiles bound to principals, the remote TLS
//! listener. The official clients over HTTP are in `mcp_clients.rs`.

use std::time::Duration;

use reqwest::header::HeaderMap;
use reqwest::StatusCode;
use serde_json::{json, Value};

use crate::mcp_clients::everything_server;
use crate::support::modules::{toml_string, ModuleHub};
use crate::support::tls::LocalhostCertificate;
use crate::support::{read_hub_json, HubProcess};

const SESSION: &str = "mcp-session-id";
const AGENT_TOKEN: &str = "agent-token-0123456789abcdef0123";
const FREE_TOKEN: &str = "free-token-0123456789abcdef01234";

/// A raw HTTP client of one `/mcp`.
struct Mcp {
    http: reqwest::Client,
    url: String,
}

/// One answer: its status, headers and the JSON-RPC messages in its body
/// (one JSON document, or the `data:` of each server-sent event).
struct Answer {
    status: StatusCode,
    headers: HeaderMap,
    messages: Vec<Value>,
}

impl Answer {
    fn session(&self) -> &str {
        self.headers
            .get(SESSION)
            .and_then(|value| value.to_str().ok())
            .expect("an Mcp-Session-Id")
    }

    /// The message with `id`.
    fn answer(&self, id: i64) -> &Value {
        self.messages
            .iter()
            .find(|message| message["id"] == id)
            .unwrap_or_else(|| panic!("no answer to {id}: {:?}", self.messages))
    }

    fn error_code(&self) -> i64 {
        self.messages[0]["error"]["code"]
            .as_i64()
            .unwrap_or_else(|| panic!("not an error: {:?}", self.messages))
    }
}

fn initialize() -> Value {
    json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "raw-http-test", "version": "1"}}})
}

fn request(id: i64, method: &str, params: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params})
}

impl Mcp {
    fn new(url: &str) -> Mcp {
        install_crypto();
        Mcp::with_client(url, reqwest::Client::new())
    }

    fn with_client(url: &str, http: reqwest::Client) -> Mcp {
        Mcp {
            http,
            url: url.to_owned(),
        }
    }

    fn of(hub: &HubProcess) -> (Mcp, String) {
        let info = read_hub_json(hub.dir()).expect("hub.json");
        let url = info["mcp_url"].as_str().expect("hub.json names mcp_url");
        (Mcp::new(url), info["token"].as_str().unwrap().to_owned())
    }

    async fn send(&self, request: reqwest::RequestBuilder) -> Answer {
        let response = tokio::time::timeout(Duration::from_secs(30), request.send())
            .await
            .expect("an answer within 30 s")
            .expect("an HTTP answer");
        let status = response.status();
        let headers = response.headers().clone();
        let text = response.text().await.expect("a body");
        let messages = if text.trim().is_empty() {
            Vec::new()
        } else if headers
            .get("content-type")
            .is_some_and(|t| t.as_bytes().starts_with(b"text/event-stream"))
        {
            text.lines()
                .filter_map(|line| line.strip_prefix("data: "))
                .map(|data| serde_json::from_str(data).expect("JSON in an event"))
                .collect()
        } else {
            match serde_json::from_str(&text) {
                Ok(Value::Array(items)) => items,
                Ok(value) => vec![value],
                Err(_) => vec![Value::String(text)],
            }
        };
        Answer {
            status,
            headers,
            messages,
        }
    }

    fn post(&self, token: Option<&str>, session: Option<&str>) -> reqwest::RequestBuilder {
        let mut post = self
            .http
            .post(&self.url)
            .header("accept", "application/json, text/event-stream")
            .header("content-type", "application/json");
        if let Some(token) = token {
            post = post.bearer_auth(token);
        }
        if let Some(session) = session {
            post = post.header(SESSION, session);
        }
        post
    }

    async fn call(&self, token: &str, session: Option<&str>, message: &Value) -> Answer {
        self.send(self.post(Some(token), session).body(message.to_string()))
            .await
    }

    /// `initialize` and `notifications/initialized`: the session id.
    async fn open(&self, token: &str) -> String {
        let opened = self.call(token, None, &initialize()).await;
        assert_eq!(opened.status, StatusCode::OK, "{:?}", opened.messages);
        let session = opened.session().to_owned();
        let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
        let accepted = self.call(token, Some(&session), &initialized).await;
        assert_eq!(accepted.status, StatusCode::ACCEPTED);
        session
    }

    /// The tool names a session (or, with `None`, a stateless request) lists.
    async fn tool_names(&self, token: &str, session: Option<&str>) -> Vec<String> {
        let params = match session {
            Some(_) => json!({}),
            None => modern_meta(),
        };
        let listed = self
            .call(token, session, &request(7, "tools/list", params))
            .await;
        assert_eq!(listed.status, StatusCode::OK, "{:?}", listed.messages);
        let mut names: Vec<String> = listed.answer(7)["result"]["tools"]
            .as_array()
            .unwrap_or_else(|| panic!("no tools: {:?}", listed.messages))
            .iter()
            .map(|tool| tool["name"].as_str().unwrap().to_owned())
            .collect();
        names.sort();
        names
    }
}

/// reqwest's TLS (even unused) needs a process-wide rustls provider.
fn install_crypto() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}

/// What every 2026-07-28 request carries in place of a session.
fn modern_meta() -> Value {
    json!({"_meta": {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
    }})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_http_gateway_refuses_what_it_must_and_keeps_serving() {
    const LIMIT: usize = 65_536;
    let config = format!(
        "[limits]\nmaxMessageBytes = {LIMIT}\n\n[principals.other]\ntoken = {}\n",
        toml_string(FREE_TOKEN)
    );
    let hub = ModuleHub::start(&config);
    let (mcp, token) = Mcp::of(&hub.hub);
    let ping = request(1, "ping", json!({}));

    // No token, a wrong one: 401, naming where to learn how to authenticate.
    for refused in [
        mcp.send(mcp.post(None, None).body(ping.to_string())).await,
        mcp.call("not-a-token-of-this-hub", None, &ping).await,
    ] {
        assert_eq!(refused.status, StatusCode::UNAUTHORIZED);
        let challenge = refused.headers["www-authenticate"].to_str().unwrap();
        let metadata_url = mcp
            .url
            .replace("/mcp", "/.well-known/oauth-protected-resource/mcp");
        assert_eq!(
            challenge,
            format!("Bearer resource_metadata=\"{metadata_url}\"")
        );
        let metadata = mcp.send(mcp.http.get(&metadata_url)).await;
        assert_eq!(metadata.messages[0]["resource"], mcp.url.as_str());
    }
    // A web page of a foreign origin: 403 before anything else.
    let foreign = mcp
        .send(
            mcp.post(Some(&token), None)
                .header("origin", "https://evil.example")
                .body(ping.to_string()),
        )
        .await;
    assert_eq!(foreign.status, StatusCode::FORBIDDEN);

    // Bodies that are not JSON-RPC.
    for (body, code) in [
        ("{not json", -32700),
        ("{\"jsonrpc\": \"2.0\"}", -32600),
        ("[]", -32600),
        (
            "{\"jsonrpc\": \"1.0\", \"id\": 1, \"method\": \"ping\"}",
            -32600,
        ),
    ] {
        let refused = mcp.send(mcp.post(Some(&token), None).body(body)).await;
        assert_eq!(refused.status, StatusCode::BAD_REQUEST, "{body}");
        assert_eq!(refused.error_code(), code, "{body}");
    }

    let session = mcp.open(&token).await;
    assert_eq!(
        mcp.tool_names(&token, Some(&session)).await,
        Vec::<String>::new()
    );
    // Another principal cannot use it; an unknown id is not found either.
    let stolen = mcp.call(FREE_TOKEN, Some(&session), &ping).await;
    assert_eq!(stolen.status, StatusCode::NOT_FOUND);
    let unknown = mcp.call(&token, Some("no-such-session"), &ping).await;
    assert_eq!(unknown.status, StatusCode::NOT_FOUND);
    assert!(
        unknown.messages[0]["error"]["message"]
            .as_str()
            .unwrap()
            .contains("initialize again"),
        "{:?}",
        unknown.messages
    );
    let again = mcp.call(&token, Some(&session), &initialize()).await;
    assert_eq!(again.status, StatusCode::BAD_REQUEST);
    // The GET stream needs a session and event streams.
    let get = |session: Option<&str>, accept: &str| {
        let mut get = mcp
            .http
            .get(&mcp.url)
            .bearer_auth(&token)
            .header("accept", accept);
        if let Some(session) = session {
            get = get.header(SESSION, session);
        }
        get
    };
    assert_eq!(
        mcp.send(get(None, "text/event-stream")).await.status,
        StatusCode::BAD_REQUEST
    );
    assert_eq!(
        mcp.send(get(Some(&session), "application/json"))
            .await
            .status,
        StatusCode::NOT_ACCEPTABLE
    );

    // The body bound, at its edge: a ping padded to exactly the limit is
    // answered, one byte more is 413, and the session carries on.
    let padded = |size: usize| {
        let mut body = ping.to_string();
        body.push_str(&" ".repeat(size - body.len()));
        body
    };
    let at_limit = mcp
        .send(mcp.post(Some(&token), Some(&session)).body(padded(LIMIT)))
        .await;
    assert_eq!(at_limit.status, StatusCode::OK);
    // `/mcp` keeps its connection for the next request; the port's other
    // paths close theirs.
    let kept = at_limit
        .headers
        .get("connection")
        .map(|v| v.to_str().unwrap().to_owned());
    assert_ne!(kept.as_deref(), Some("close"));
    assert_eq!(at_limit.answer(1)["result"], json!({}));
    let over = mcp
        .send(
            mcp.post(Some(&token), Some(&session))
                .body(padded(LIMIT + 1)),
        )
        .await;
    assert_eq!(over.status, StatusCode::PAYLOAD_TOO_LARGE);
    assert_eq!(
        mcp.call(&token, Some(&session), &ping).await.status,
        StatusCode::OK
    );

    // A duplicate request id in flight is refused, not confused.
    // (ping answers at once, so reuse after its answer is fine.)
    assert_eq!(
        mcp.call(&token, Some(&session), &ping).await.status,
        StatusCode::OK
    );

    // DELETE ends the session.
    let deleted = mcp
        .send(
            mcp.http
                .delete(&mcp.url)
                .bearer_auth(&token)
                .header(SESSION, &session),
        )
        .await;
    assert_eq!(deleted.status, StatusCode::NO_CONTENT);
    assert_eq!(
        mcp.call(&token, Some(&session), &ping).await.status,
        StatusCode::NOT_FOUND
    );

    // 2026-07-28: no session, each request on its own; a client that takes
    // JSON only gets JSON.
    let stateless = mcp
        .send(
            mcp.http
                .post(&mcp.url)
                .bearer_auth(&token)
                .header("accept", "application/json")
                .header("mcp-protocol-version", "2026-07-28")
                .body(request(3, "server/discover", modern_meta()).to_string()),
        )
        .await;
    assert_eq!(stateless.status, StatusCode::OK);
    assert!(stateless.headers.get(SESSION).is_none());
    assert_eq!(
        stateless.headers["content-type"].to_str().unwrap(),
        "application/json"
    );
    let versions = &stateless.answer(3)["result"]["supportedVersions"];
    assert!(
        versions.as_array().unwrap().contains(&json!("2026-07-28")),
        "{versions}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mcp_sessions_over_http_are_bounded() {
    const MAX_SESSIONS: usize = 256;
    let hub = HubProcess::start();
    let (mcp, token) = Mcp::of(&hub);
    let mut sessions = Vec::new();
    for _ in 0..MAX_SESSIONS {
        let opened = mcp.call(&token, None, &initialize()).await;
        assert_eq!(opened.status, StatusCode::OK, "{:?}", opened.messages);
        sessions.push(opened.session().to_owned());
    }
    let refused = mcp.call(&token, None, &initialize()).await;
    assert_eq!(refused.status, StatusCode::SERVICE_UNAVAILABLE);
    assert!(
        refused.messages[0]["error"]["message"]
            .as_str()
            .unwrap()
            .contains("DELETE"),
        "{:?}",
        refused.messages
    );
    // Stateless requests hold no session: still served.
    assert_eq!(mcp.tool_names(&token, None).await, Vec::<String>::new());
    let ended = mcp
        .send(
            mcp.http
                .delete(&mcp.url)
                .bearer_auth(&token)
                .header(SESSION, &sessions[0]),
        )
        .await;
    assert_eq!(ended.status, StatusCode::NO_CONTENT);
    let opened = mcp.call(&token, None, &initialize()).await;
    assert_eq!(opened.status, StatusCode::OK, "{:?}", opened.messages);
}

/// `[principals.agent] profile = "small"`: the agent's sessions over HTTP
/// see the profile's tools only, and `?profile=` cannot widen them; a
/// principal bound to none chooses with `?profile=`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_principal_bound_to_a_profile_cannot_leave_it() {
    let server = everything_server();
    let config = format!(
        r#"
[modules.everything]
mcp = ["node", {server}, "stdio"]

[profiles.small]
include = ["everything__echo", "everything__get-sum"]

[profiles.wide]
include = ["everything__*"]

[principals.agent]
token = "{AGENT_TOKEN}"
profile = "small"

[principals.free]
token = "{FREE_TOKEN}"

[[grants]]
from = "agent"
to = "everything"
allow = ["discover", "request"]

[[grants]]
from = "free"
to = "everything"
allow = ["discover", "request"]
"#,
        server = toml_string(&server.to_string_lossy())
    );
    let hub = ModuleHub::start(&config);
    let (mcp, _) = Mcp::of(&hub.hub);
    let small = vec![
        "everything__echo".to_owned(),
        "everything__get-sum".to_owned(),
    ];

    // The module's tools arrive once it is up.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while mcp.tool_names(FREE_TOKEN, None).await.len() < 10 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "everything never listed"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }

    let session = mcp.open(AGENT_TOKEN).await;
    assert_eq!(mcp.tool_names(AGENT_TOKEN, Some(&session)).await, small);
    assert_eq!(mcp.tool_names(AGENT_TOKEN, None).await, small);
    let hidden = mcp
        .call(
            AGENT_TOKEN,
            Some(&session),
            &request(
                9,
                "tools/call",
                json!({"name": "everything__get-env", "arguments": {}}),
            ),
        )
        .await;
    assert!(
        hidden.answer(9)["error"]["message"]
            .as_str()
            .unwrap()
            .contains("unknown tool"),
        "{:?}",
        hidden.messages
    );
    let widened = Mcp::new(&format!("{}?profile=wide", mcp.url));
    let refused = widened.call(AGENT_TOKEN, None, &initialize()).await;
    assert_eq!(refused.status, StatusCode::FORBIDDEN);
    assert!(
        refused.messages[0]["error"]["message"]
            .as_str()
            .unwrap()
            .contains("held to profile \"small\""),
        "{:?}",
        refused.messages
    );
    // Its own profile by name is no escape either, and no harm.
    let named = Mcp::new(&format!("{}?profile=small", mcp.url));
    assert_eq!(named.tool_names(AGENT_TOKEN, None).await, small);

    // A free principal chooses; without a choice it sees every tool.
    let chosen = Mcp::new(&format!("{}?profile=small", mcp.url));
    assert_eq!(chosen.tool_names(FREE_TOKEN, None).await, small);
    assert!(mcp.tool_names(FREE_TOKEN, None).await.len() > small.len());
    let unknown = Mcp::new(&format!("{}?profile=nope", mcp.url));
    let refused = unknown.call(FREE_TOKEN, None, &initialize()).await;
    assert_eq!(refused.status, StatusCode::BAD_REQUEST);
    let message = refused.messages[0]["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("small") && message.contains("wide"),
        "{message}"
    );
}

/// On the remote (TLS) listener `/mcp` serves named principals; the hub's
/// own token is refused there, as it is for the WebSocket.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_named_principal_uses_mcp_over_the_remote_tls_listener() {
    install_crypto();
    let root = tempfile::tempdir().unwrap();
    let certificate = LocalhostCertificate::write(root.path());
    let config = root.path().join("switchboard.toml");
    std::fs::write(
        &config,
        format!(
            "[principals.laptop]\ntoken = {}\n",
            toml_string(AGENT_TOKEN)
        ),
    )
    .unwrap();
    let hub = certificate
        .remote(
            HubProcess::builder()
                .dir(root.path().join("hub"))
                .config(&config),
        )
        .start();
    let info = read_hub_json(hub.dir()).expect("hub.json");
    let remote = info["remote"].as_str().expect("a remote listener");
    let port = remote.rsplit(':').next().unwrap().trim_end_matches('/');
    let http = reqwest::Client::builder()
        .tls_certs_only([reqwest::Certificate::from_pem(certificate.pem.as_bytes()).unwrap()])
        .build()
        .unwrap();
    let mcp = Mcp::with_client(&format!("https://localhost:{port}/mcp"), http);

    let session = mcp.open(AGENT_TOKEN).await;
    assert_eq!(
        mcp.tool_names(AGENT_TOKEN, Some(&session)).await,
        Vec::<String>::new()
    );
    let direct = info["token"].as_str().unwrap();
    let refused = mcp.call(direct, None, &initialize()).await;
    assert_eq!(refused.status, StatusCode::UNAUTHORIZED);
    let challenge = refused.headers["www-authenticate"].to_str().unwrap();
    assert!(
        challenge.contains(&format!("https://localhost:{port}/.well-known/")),
        "{challenge}"
    );
}
