//! Arbitrary bytes as an MCP client's side of a gateway session
//! (`switchboard mcp`'s stdio, in process: `Gateway::serve`, with its wire
//! pump, the fast path for plain calls and rmcp behind it), against a real
//! hub with a version-2 tool provider: tools that echo, report progress,
//! ask the caller to sample and take their time; and resources, prompts
//! and completion. Beside each fuzzed session, a second session on the
//! same gateway makes a well-formed call and answers its own sampling
//! request.
//!
//! The gateway and the provider reach the hub through its in-process
//! connections (the endpoint door), and everything runs on one thread on
//! tokio's paused clock: the quiet that ends an input, and every bound, is
//! waited out the moment every task waits (a Unix socket and real waits
//! made this target about a hundred inputs a second).
//!
//! Checks: nothing panics; every line the gateway writes is JSON-RPC 2.0;
//! an answer names only an id the client sent (or `null`); the session
//! ends, and its output closes, within 10 s of its input closing; the
//! other session gets its own answers, and nothing of it (its text) ever
//! reaches the fuzzed one.
#![no_main]

use std::collections::HashSet;
use std::hash::{BuildHasher, RandomState};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, LazyLock};
use std::time::Duration;

use libfuzzer_sys::fuzz_target;
use serde_json::{json, Value};
use switchboard_fuzz::mcp::{self, FuzzHub};
use switchboard_mcp::{Gateway, GatewayOptions};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};

/// How long the fuzzed session's output may stay quiet before its input is
/// closed: on the paused clock, as soon as nothing is left to run but the
/// provider's own waits (`fz__slow`'s 50 ms among them).
const QUIET: Duration = Duration::from_millis(10);
/// The longest the fuzzed session's input stays open.
const OPEN_AT_MOST: Duration = Duration::from_secs(2);
/// The bound on a session's end once its input closed.
const END_BOUND: Duration = Duration::from_secs(10);

struct Fixture {
    runtime: tokio::runtime::Runtime,
    gateway: Arc<Gateway>,
    // Kept alive for the whole run.
    _hub: FuzzHub,
    _dir: tempfile::TempDir,
}

static FIXTURE: LazyLock<Fixture> = LazyLock::new(|| {
    // With RUST_LOG set (replaying a crash), the hub's, the provider's and
    // the gateway's logs go to stderr.
    if std::env::var_os("RUST_LOG").is_some() {
        tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
            .with_writer(std::io::stderr)
            .init();
    }
    let runtime = mcp::paused_runtime();
    let dir = tempfile::tempdir().expect("a temp dir");
    let (hub, gateway) = runtime.block_on(start(dir.path()));
    Fixture {
        runtime,
        gateway,
        _hub: hub,
        _dir: dir,
    }
});

async fn start(root: &Path) -> (FuzzHub, Arc<Gateway>) {
    let fuzz_hub = mcp::start_in_process(root, "").await;
    let gateway = Gateway::start(GatewayOptions {
        endpoint: fuzz_hub.endpoint.clone(),
        profile: None,
    })
    .await;
    for _ in 0..500 {
        if gateway.tools().tools().get("fz__sample").is_some() {
            return (fuzz_hub, gateway);
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let table = gateway.tools().tools();
    let listed: Vec<String> = table.tools().map(|tool| tool.name.clone()).collect();
    panic!("the gateway never listed the provider's tools (it lists {listed:?})");
}

/// An id as a set key: numbers by value (`1` and `1.0` are one id to a
/// JSON-RPC peer that reads numbers, and so are `-0` and `0`), strings by
/// their text.
fn id_key(id: &Value) -> String {
    match id {
        // `+ 0.0` makes -0.0 0.0 (and leaves every other value as it is).
        Value::Number(number) => format!("n{:?}", number.as_f64().map(|n| n + 0.0)),
        Value::String(text) => format!("s{text}"),
        other => format!("o{other}"),
    }
}

/// The ids of the requests among `input`'s lines.
fn request_ids(input: &[u8]) -> HashSet<String> {
    let mut ids = HashSet::new();
    for line in input.split(|b| *b == b'\n') {
        // A line may begin with a UTF-8 byte order mark, which the
        // gateway's reader (rmcp's) ignores, as RFC 8259 section 8.1 lets a
        // parser do; serde_json does not.
        let line = line.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(line);
        let Ok(value) = serde_json::from_slice::<Value>(line) else {
            continue;
        };
        let messages = match value {
            Value::Array(batch) => batch,
            single => vec![single],
        };
        for message in messages {
            if let (Some(id), true) = (message.get("id"), message.get("method").is_some()) {
                ids.insert(id_key(id));
            }
        }
    }
    ids
}

/// Serves one session on `gateway` from a client whose end is returned.
fn open_session(gateway: &Arc<Gateway>) -> (tokio::io::DuplexStream, tokio::task::JoinHandle<()>) {
    let (client_end, gateway_end) = tokio::io::duplex(1 << 20);
    let (read, write) = tokio::io::split(gateway_end);
    let gateway = gateway.clone();
    let served = tokio::spawn(async move {
        // A client that never completes the handshake is refused here.
        if let Ok(session) = gateway.serve(read, write).await {
            let _ = session.waiting().await;
        }
    });
    (client_end, served)
}

/// The fuzzed session: `input`, then quiet, then the input closes.
async fn fuzzed(gateway: &Arc<Gateway>, input: &[u8]) -> Vec<u8> {
    let (client, served) = open_session(gateway);
    let (mut from_gateway, mut to_gateway) = tokio::io::split(client);
    let mut output = Vec::new();
    // The duplex holds far more than any input: the write cannot wait. It
    // fails only if the gateway already hung up (a refused handshake).
    let _ = to_gateway.write_all(input).await;
    let _ = tokio::time::timeout(OPEN_AT_MOST, async {
        loop {
            match tokio::time::timeout(QUIET, from_gateway.read_buf(&mut output)).await {
                Ok(Ok(0)) | Ok(Err(_)) | Err(_) => return,
                Ok(Ok(_)) => {}
            }
        }
    })
    .await;
    let _ = to_gateway.shutdown().await;
    tokio::time::timeout(END_BOUND, from_gateway.read_to_end(&mut output))
        .await
        .expect("the gateway closes its output within 10 s of the input closing")
        .expect("the output reads");
    tokio::time::timeout(END_BOUND, served)
        .await
        .expect("the session ends within 10 s of its input closing")
        .expect("the session's task does not panic");
    output
}

/// The well-formed session beside it: a call and its own sampling request,
/// both naming `marker`.
async fn neighbour(gateway: &Arc<Gateway>, marker: &str) {
    let (client, served) = open_session(gateway);
    let (from_gateway, mut to_gateway) = tokio::io::split(client);
    let mut lines = BufReader::new(from_gateway).lines();
    let script = [
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18",
            "capabilities": {"sampling": {}},
            "clientInfo": {"name": "neighbour", "version": "1"}}}),
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
               "params": {"name": "fz__echo", "arguments": {"text": marker}}}),
        json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call",
               "params": {"name": "fz__sample", "arguments": {"text": marker}}}),
    ];
    for message in script {
        to_gateway
            .write_all(format!("{message}\n").as_bytes())
            .await
            .expect("the neighbour writes");
    }
    let (mut echoed, mut sampled) = (false, false);
    let ended = tokio::time::timeout(END_BOUND, async {
        while !(echoed && sampled) {
            let line = lines
                .next_line()
                .await
                .expect("the neighbour reads")
                .expect("the neighbour's session stays open");
            let message: Value = serde_json::from_str(&line).expect("the neighbour gets JSON");
            if message["method"] == "sampling/createMessage" {
                let asked = &message["params"]["messages"][0]["content"]["text"];
                assert_eq!(
                    asked, marker,
                    "the neighbour was asked another session's sampling"
                );
                let answer = json!({"jsonrpc": "2.0", "id": message["id"], "result": {
                    "role": "assistant", "model": "m",
                    "content": {"type": "text", "text": format!("sampled {marker}")}}});
                to_gateway
                    .write_all(format!("{answer}\n").as_bytes())
                    .await
                    .expect("the neighbour answers");
                continue;
            }
            let text = message["result"]["content"][0]["text"]
                .as_str()
                .unwrap_or_default();
            match &message["id"] {
                id if *id == json!(2) => {
                    assert_eq!(text, marker, "the neighbour's echo: {message}");
                    echoed = true;
                }
                id if *id == json!(3) => {
                    assert!(
                        text.contains(&format!("sampled {marker}")),
                        "the neighbour's sampling: {message}"
                    );
                    sampled = true;
                }
                _ => {}
            }
        }
    })
    .await;
    ended.expect("the neighbour's calls are answered within 10 s");
    to_gateway.shutdown().await.expect("the neighbour closes");
    tokio::time::timeout(END_BOUND, served)
        .await
        .expect("the neighbour's session ends")
        .expect("the neighbour's session does not panic");
}

static ROUND: AtomicU64 = AtomicU64::new(0);

/// Text only the neighbour session sends: random per process, so no input
/// can hold it.
static SALT: LazyLock<u64> = LazyLock::new(|| RandomState::new().hash_one("neighbour"));

fuzz_target!(|data: &[u8]| {
    let fixture = &*FIXTURE;
    let marker = format!(
        "neighbour-{:016x}-{}",
        *SALT,
        ROUND.fetch_add(1, Ordering::Relaxed)
    );
    let mut input = data.to_vec();
    input.push(b'\n');
    let asked = request_ids(&input);
    let output = fixture.runtime.block_on(async {
        let beside = neighbour(&fixture.gateway, &marker);
        let (output, ()) = tokio::join!(fuzzed(&fixture.gateway, &input), beside);
        output
    });
    assert!(
        memchr::memmem::find(&output, marker.as_bytes()).is_none(),
        "the other session's text reached the fuzzed one"
    );
    for line in output
        .split(|b| *b == b'\n')
        .filter(|line| !line.is_empty())
    {
        let message: Value = serde_json::from_slice(line).unwrap_or_else(|error| {
            panic!(
                "the gateway wrote a line that is not JSON ({error}): {}",
                String::from_utf8_lossy(line)
            )
        });
        assert_eq!(message["jsonrpc"], "2.0", "not JSON-RPC 2.0: {message}");
        let is_answer = message.get("method").is_none();
        if is_answer {
            let id = &message["id"];
            assert!(
                id.is_null() || asked.contains(&id_key(id)),
                "an answer to an id the client never sent: {message}"
            );
        }
    }
});
