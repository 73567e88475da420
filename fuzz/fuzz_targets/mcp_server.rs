//! Arbitrary bytes as what a hosted MCP server writes on its stdout, read
//! by `switchboard-mcp-client` (how `provide-mcp` and the ACP front's
//! session servers reach their servers: rmcp behind the wire tap, calls
//! written around rmcp, progress routes, the server's own requests).
//!
//! The server is a task replaying the input in step with the client, on
//! two in-memory streams served as a stdio server is
//! ([`Upstream::streams`]): each line the client writes is answered with
//! the input's next line, and when the client closes the server's input
//! the rest follows. So the first line answers `initialize` (id 0), the
//! second follows `notifications/initialized`, the third answers
//! `tools/list` (id 1), the fourth and fifth follow the two calls the
//! target makes at once (`sb-1` and `sb-2`, each its own progress token),
//! and so on. The target starts the server, calls its first tool twice at
//! once (tags 7 and 8, each with a progress sink, 100 ms), lists its
//! resources, and stops it.
//!
//! Everything runs on one thread on tokio's paused clock: when every task
//! waits, the clock jumps to the next deadline, so an input that leaves
//! the step waits out the client's 100–500 ms bounds in no time, and a
//! run is the same each time (a process per input and real waits made
//! this target about five inputs a second).
//!
//! Checks: nothing panics; the start, the calls, the list and the stop
//! each end within their bounds; a failed start names the server; a
//! request or notification of the server attributed to a call is
//! attributed to the call its `_meta.progressToken` names (tag 7 for
//! `sb-1`, tag 8 for `sb-2`), never to the other call in flight or to a
//! tag no call has; one naming no call in flight is attributed to none.
#![no_main]

use std::sync::{Arc, LazyLock};
use std::time::Duration;

use libfuzzer_sys::fuzz_target;
use parking_lot::Mutex;
use serde_json::{json, Value};
use switchboard_fuzz::mcp;
use switchboard_mcp_client::{
    start, CallTag, Handler, HandlerFuture, ProgressSink, ProgressUpdate, ServerNotification,
    ServerRequest, StartOptions, Started, ToolCall, Upstream,
};
use switchboard_protocol::ErrorObject;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, DuplexStream};

/// How the client names the server in what it says.
const LABEL: &str = "the fuzzed server";
/// The two calls the target makes at once: their tags, and the ids (and
/// progress tokens) the client gives them, in the order they are first
/// polled.
const CALLS: [(CallTag, &str); 2] = [(7, "sb-1"), (8, "sb-2")];

static RUNTIME: LazyLock<tokio::runtime::Runtime> = LazyLock::new(mcp::paused_runtime);

/// The server: one line of `script` for each line read from `side`, then,
/// once `side`'s input ends or the script runs out, the rest of it; then
/// its output ends.
async fn replay(side: DuplexStream, script: Vec<u8>) {
    let (read, mut write) = tokio::io::split(side);
    let mut read = BufReader::new(read);
    let mut lines = script.split_inclusive(|&byte| byte == b'\n');
    let mut heard = Vec::new();
    loop {
        heard.clear();
        if !matches!(read.read_until(b'\n', &mut heard).await, Ok(1..)) {
            break;
        }
        let Some(line) = lines.next() else { break };
        if write.write_all(line).await.is_err() {
            return;
        }
    }
    for line in lines {
        if write.write_all(line).await.is_err() {
            return;
        }
    }
    let _ = write.shutdown().await;
}

/// What the server asked or told: the method, the progress token its
/// params named (if a string), and the call it was attributed to.
type Seen = (String, Option<String>, Option<CallTag>);

#[derive(Default)]
struct Recorder {
    seen: Mutex<Vec<Seen>>,
}

impl Recorder {
    fn saw(&self, method: &str, params: &Value, call: Option<CallTag>) {
        let token = params["_meta"]["progressToken"].as_str().map(str::to_owned);
        self.seen.lock().push((method.to_owned(), token, call));
    }
}

struct Client(Arc<Recorder>);

impl Handler for Client {
    fn capabilities(&self) -> Value {
        json!({"sampling": {}, "elicitation": {"form": {}, "url": {}}, "roots": {"listChanged": true}})
    }

    fn create_message(
        &self,
        request: ServerRequest,
    ) -> HandlerFuture<'_, Result<Value, ErrorObject>> {
        self.0.saw(&request.method, &request.params, request.call);
        Box::pin(async {
            Ok(json!({"role": "assistant", "model": "m",
                      "content": {"type": "text", "text": "sampled"}}))
        })
    }

    fn elicit(&self, request: ServerRequest) -> HandlerFuture<'_, Result<Value, ErrorObject>> {
        self.0.saw(&request.method, &request.params, request.call);
        Box::pin(async { Ok(json!({"action": "decline"})) })
    }

    fn list_roots(&self, request: ServerRequest) -> HandlerFuture<'_, Result<Value, ErrorObject>> {
        self.0.saw(&request.method, &request.params, request.call);
        Box::pin(async { Ok(json!({"roots": [{"uri": "file:///fuzz"}]})) })
    }

    fn on_logging_message(&self, notification: ServerNotification) {
        self.0.saw(
            &notification.method,
            &notification.params,
            notification.call,
        );
    }

    fn on_resource_updated(&self, notification: ServerNotification) {
        self.0.saw(
            &notification.method,
            &notification.params,
            notification.call,
        );
    }
}

/// The call's progress sink: reports routed to it are taken and dropped
/// (the route, not the sink, is what is fuzzed).
struct Sink;

impl ProgressSink for Sink {
    fn report(&self, _update: ProgressUpdate) -> HandlerFuture<'_, ()> {
        Box::pin(async {})
    }
}

async fn session(script: Vec<u8>, recorder: Arc<Recorder>) {
    let (client_side, server_side) = tokio::io::duplex(64 * 1024);
    tokio::spawn(replay(server_side, script));
    let (output, input) = tokio::io::split(client_side);
    let options = StartOptions {
        client_name: "fuzz".into(),
        initialize_timeout: Duration::from_millis(500),
        list_timeout: Duration::from_millis(200),
    };
    let upstream = Upstream::streams(LABEL, output, input);
    let started = tokio::time::timeout(
        Duration::from_secs(10),
        start(upstream, &options, Arc::new(Client(recorder.clone()))),
    )
    .await
    .expect("a start ends within 10 s");
    let Started { connection, tools } = match started {
        Ok(started) => started,
        Err(error) => {
            // Every start error names the server by its label.
            assert!(
                error.to_string().contains(LABEL),
                "a failed start does not say which server: {error}"
            );
            return;
        }
    };
    let name = tools
        .first()
        .and_then(|tool| tool["name"].as_str())
        .unwrap_or("t")
        .to_owned();
    let call = |tag: CallTag| {
        let mut call = ToolCall::new(name.clone(), json!({"x": 1}));
        call.timeout = Some(Duration::from_millis(100));
        call.tag = Some(tag);
        call.progress = Some(Arc::new(Sink));
        connection.call_tool(call)
    };
    // Polled in this order, so the first gets `sb-1` and the second `sb-2`.
    let both = async { tokio::join!(call(CALLS[0].0), call(CALLS[1].0)) };
    let _ = tokio::time::timeout(Duration::from_secs(5), both)
        .await
        .expect("the calls end within 5 s of their 100 ms timeout");
    let _ = tokio::time::timeout(
        Duration::from_secs(5),
        connection.list_all("resources/list", "resources", Duration::from_millis(100)),
    )
    .await
    .expect("a list ends within 5 s of its 100 ms bound");
    tokio::time::timeout(Duration::from_secs(20), connection.stop())
        .await
        .expect("a stop ends within its bound");
}

fuzz_target!(|data: &[u8]| {
    let recorder = Arc::new(Recorder::default());
    RUNTIME.block_on(session(data.to_vec(), recorder.clone()));
    for (method, token, call) in recorder.seen.lock().iter() {
        let Some(tag) = call else { continue };
        let named = CALLS.iter().find(|(t, _)| t == tag).map(|(_, id)| *id);
        assert!(
            named.is_some(),
            "{method} attributed to {tag}, a call that was never made"
        );
        assert_eq!(
            token.as_deref(),
            named,
            "{method} naming {token:?} attributed to call {tag} ({named:?})"
        );
    }
});
