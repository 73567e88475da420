//! The MCP gateway over Streamable HTTP (`/mcp`): bytes as a client (or a
//! web page) writes them, over a real TCP connection to the hub's loopback
//! HTTP port, with the `/mcp` endpoint attached as `switchboard serve`
//! attaches it and a version-2 tool provider on the hub. In the input,
//! `$D$` stands for the hub's own token and `$N$` for a named principal's.
//!
//! Checks, with the rules written out here: no CORS header; no token in an
//! answer; the port's Host/Origin guard (`switchboard_fuzz::http`); `/mcp`
//! answers 2xx only to a request whose `Authorization` is `Bearer` and one
//! of the two tokens; and the gateway keeps serving: every 32 inputs a
//! well-formed session (initialize, a call, delete) must work. A session
//! an input opened is deleted after it, so the 256-session bound is not
//! what the fuzzer meets.
#![no_main]

use std::net::SocketAddr;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::LazyLock;
use std::time::Duration;

use libfuzzer_sys::fuzz_target;
use switchboard_fuzz::http::{self, Answer, Head};
use switchboard_fuzz::mcp::{self, FuzzHub};
use switchboard_hub::fuzzing::http::Listener;
use switchboard_hub::AddOns;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

const NAMED: &str = "explorer-token-0123456789abcdef";
const ALLOWED_ORIGIN: &str = "http://allowed.example";
/// How long an exchange may take: `/mcp` answers a POST at once (a new
/// session's gateway connects to the hub first), and a GET's event stream
/// is cut here.
const EXCHANGE: Duration = Duration::from_secs(2);
/// How long an answer may pause before it is taken as complete.
const QUIET: Duration = Duration::from_millis(25);
/// Every this many inputs, a well-formed session must work.
const CHECK_EVERY: u64 = 32;

struct Fixture {
    runtime: tokio::runtime::Runtime,
    address: SocketAddr,
    direct: String,
    _hub: FuzzHub,
    _dir: tempfile::TempDir,
}

static FIXTURE: LazyLock<Fixture> = LazyLock::new(|| {
    let runtime = mcp::runtime();
    let dir = tempfile::tempdir().expect("a temp dir");
    let hub = runtime.block_on(start(dir.path()));
    let info = hub.hub.info();
    let address = info
        .ws
        .as_deref()
        .and_then(|url| url.strip_prefix("ws://"))
        .and_then(|rest| rest.trim_end_matches('/').parse().ok())
        .unwrap_or_else(|| panic!("the hub's HTTP port: {:?}", info.ws));
    let direct = info.token.clone();
    Fixture {
        runtime,
        address,
        direct,
        _hub: hub,
        _dir: dir,
    }
});

async fn start(root: &Path) -> FuzzHub {
    let config = format!(
        "[hub]\nallowed_origins = [\"{ALLOWED_ORIGIN}\"]\n\
         [principals.explorer]\ntoken = \"{NAMED}\"\n\
         [[grants]]\nfrom = \"explorer\"\nto = \"*\"\nallow = [\"discover\", \"request\", \"notify\"]\n"
    );
    let add_ons = AddOns {
        endpoint: Some(Box::new(switchboard_mcp::http::attach)),
        ..AddOns::default()
    };
    mcp::start(root, &config, true, add_ons).await
}

/// Writes `request` and reads what comes back: until the server closes,
/// or, once something came, until it is quiet for [`QUIET`]; within
/// [`EXCHANGE`] in all. The write side is not half-closed: hyper takes a
/// client's end of input for its going away and drops the request.
async fn exchange(address: SocketAddr, request: &[u8]) -> Vec<u8> {
    let mut answer = Vec::new();
    let Ok(mut stream) = TcpStream::connect(address).await else {
        panic!("the HTTP port refuses connections");
    };
    let _ = tokio::time::timeout(EXCHANGE, async {
        if stream.write_all(request).await.is_err() {
            return;
        }
        loop {
            let started = !answer.is_empty();
            let read = stream.read_buf(&mut answer);
            let read = if started {
                match tokio::time::timeout(QUIET, read).await {
                    Ok(read) => read,
                    Err(_) => return,
                }
            } else {
                read.await
            };
            if !matches!(read, Ok(n) if n > 0) {
                return;
            }
        }
    })
    .await;
    answer
}

/// A POST to `/mcp` with `token`, in `session` if any.
fn post(token: &str, session: Option<&str>, body: &str) -> Vec<u8> {
    let session = session
        .map(|id| format!("Mcp-Session-Id: {id}\r\n"))
        .unwrap_or_default();
    format!(
        "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {token}\r\n\
         Connection: close\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\n\
         MCP-Protocol-Version: 2025-06-18\r\n{session}Content-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

fn delete(token: &str, session: &str) -> Vec<u8> {
    format!(
        "DELETE /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {token}\r\n\
         Connection: close\r\nMcp-Session-Id: {session}\r\nContent-Length: 0\r\n\r\n"
    )
    .into_bytes()
}

/// Whether `head`'s `Authorization` presents one of `tokens` as a bearer.
fn presents(head: &Head, tokens: &[&str]) -> bool {
    let Some(value) = head.header("authorization") else {
        return false;
    };
    let value = value.trim();
    let Some((scheme, token)) = value.split_once(' ') else {
        return false;
    };
    scheme.eq_ignore_ascii_case("bearer") && tokens.contains(&token.trim())
}

/// A well-formed session works: initialize, a call, delete.
async fn a_session_works(address: SocketAddr) {
    let initialize = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"check","version":"1"}}}"#;
    let bytes = exchange(address, &post(NAMED, None, initialize)).await;
    let answer = Answer::parse(&bytes);
    assert_eq!(
        answer.status,
        Some(200),
        "initialize: {}",
        String::from_utf8_lossy(&bytes)
    );
    let session = answer
        .header("mcp-session-id")
        .expect("a session id")
        .to_owned();
    let call = r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"fz__echo","arguments":{"text":"still serving"}}}"#;
    let bytes = exchange(address, &post(NAMED, Some(&session), call)).await;
    assert!(
        memchr::memmem::find(&bytes, b"still serving").is_some(),
        "a call in a fresh session: {}",
        String::from_utf8_lossy(&bytes)
    );
    exchange(address, &delete(NAMED, &session)).await;
}

/// Every `Mcp-Session-Id` header value in `answers` (one or more HTTP
/// answers, as read).
fn session_ids(answers: &[u8]) -> Vec<String> {
    answers
        .split(|b| *b == b'\n')
        .filter_map(|line| {
            let line = std::str::from_utf8(line).ok()?;
            let (name, value) = line.split_once(':')?;
            name.eq_ignore_ascii_case("mcp-session-id")
                .then(|| value.trim().to_owned())
        })
        .filter(|id| !id.is_empty() && id.len() <= 256)
        .collect()
}

static INPUTS: AtomicU64 = AtomicU64::new(0);

fuzz_target!(|data: &[u8]| {
    let fixture = &*FIXTURE;
    let direct = fixture.direct.as_str();
    let request = http::substitute(data, &[("$D$", direct), ("$N$", NAMED)]);
    let bytes = fixture
        .runtime
        .block_on(exchange(fixture.address, &request));
    let answer = Answer::parse(&bytes);
    answer.assert_no_cors();
    answer.assert_hides(&[direct, NAMED]);
    if let (Some(status), Some(head)) = (answer.status, Head::parse(&request)) {
        http::assert_guarded(&head, status, Listener::Loopback, &[ALLOWED_ORIGIN]);
        if head.path() == "/mcp" && (200..300).contains(&status) {
            assert!(
                presents(&head, &[direct, NAMED]),
                "/mcp answered {status} to a request without a valid bearer token"
            );
        }
    }
    // The sessions an input opened (pipelined requests may open several)
    // are closed again, with either token.
    let sessions = session_ids(&bytes);
    if !sessions.is_empty() {
        fixture.runtime.block_on(async {
            for session in &sessions {
                for token in [NAMED, direct] {
                    exchange(fixture.address, &delete(token, session)).await;
                }
            }
        });
    }
    if INPUTS
        .fetch_add(1, Ordering::Relaxed)
        .is_multiple_of(CHECK_EVERY)
    {
        fixture.runtime.block_on(a_session_works(fixture.address));
    }
});
