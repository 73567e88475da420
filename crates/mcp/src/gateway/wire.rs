//! What MCP 2025-11-25 says that rmcp 3.11's model cannot carry, carried
//! around it on a session's stdio.
//!
//! rmcp 3.11 models the 2026-07-28 tasks extension (SEP-2663): its
//! `ClientCapabilities` and `ServerCapabilities` have no `tasks` member and
//! its `CallToolRequestParams` no `task`, so an older client's task
//! requests would be dropped on the way in. The gateway reads and writes
//! the session's lines itself and hands rmcp the rest through a pipe:
//!
//! - in: `initialize`'s `params.capabilities` as the client sent them are
//!   kept ([`WireState::capabilities`]: what `client.capabilities` carries to
//!   providers, unknown members included); `tools/call`'s `params.task` moves
//!   to `params._meta["switchboard/task"]`, which rmcp keeps;
//! - out: the answer to `initialize` gains `capabilities.tasks` (MCP
//!   2025-11-25's shape) when the negotiated version has tasks.
//!
//! The same pumps take plain `tools/call`s around rmcp (`fast.rs`).
//!
//! Lines are bounded like rmcp's own (16 MiB); a longer one is dropped.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use futures_util::{SinkExt, StreamExt};
use parking_lot::RwLock;
use serde_json::{json, Map, Value};
use tokio::io::{AsyncRead, AsyncWrite, DuplexStream};
use tokio::sync::mpsc;
use tokio_util::codec::{FramedRead, FramedWrite, LinesCodec, LinesCodecError};

/// The `_meta` key a `tools/call`'s `task` member travels under inside the
/// gateway.
pub(crate) const TASK_META: &str = "switchboard/task";

/// The longest line read or written.
pub(crate) const MAX_LINE: usize = 16 * 1024 * 1024;

/// The pipe between the pumps and rmcp.
const PIPE_BYTES: usize = 256 * 1024;

/// What the pumps learned of a session.
#[derive(Default)]
pub(crate) struct WireState {
    /// `initialize`'s capabilities, as sent.
    capabilities: RwLock<Option<Value>>,
    /// The id of the `initialize` request, until it is answered.
    initialize_id: RwLock<Option<Value>>,
    /// `initialize` was answered with a version before 2026-07-28: the
    /// session's plain calls may take the fast path (`fast.rs`).
    ready: AtomicBool,
}

impl WireState {
    /// What the client declared at `initialize`, as sent (`None` for a
    /// session without one: a 2026-07-28 client declares per request).
    pub(crate) fn capabilities(&self) -> Option<Value> {
        self.capabilities.read().clone()
    }

    /// Whether the session's plain `tools/call`s may take the fast path.
    pub(crate) fn ready(&self) -> bool {
        self.ready.load(Ordering::Acquire)
    }

    /// Whether a line from the client may need carrying (only those are
    /// parsed here; rmcp parses every line anyway).
    fn may_carry_in(line: &str) -> bool {
        line.contains("\"initialize\"") || line.contains("\"tools/call\"")
    }

    /// Whether a line from rmcp may need carrying: only until `initialize`
    /// is answered.
    fn may_carry_out(&self) -> bool {
        self.initialize_id.read().is_some()
    }

    /// One message from the client, before rmcp reads it.
    pub(crate) fn carry_in(&self, message: &mut Value) {
        match message.get("method").and_then(Value::as_str) {
            Some("initialize") => {
                *self.capabilities.write() = message["params"].get("capabilities").cloned();
                *self.initialize_id.write() = message.get("id").cloned();
            }
            Some("tools/call") => {
                let Some(params) = message.get_mut("params").and_then(Value::as_object_mut) else {
                    return;
                };
                if let Some(task) = params.remove("task") {
                    meta_of(params).insert(TASK_META.into(), task);
                }
            }
            _ => {}
        }
    }

    /// One message from rmcp, before the client reads it.
    pub(crate) fn carry_out(&self, message: &mut Value) {
        if message.get("result").is_none() || self.initialize_id.read().is_none() {
            return;
        }
        if message.get("id") != self.initialize_id.read().as_ref() {
            return;
        }
        *self.initialize_id.write() = None;
        let result = &mut message["result"];
        let older = result["protocolVersion"]
            .as_str()
            .is_some_and(|version| version < "2026-07-28");
        self.ready.store(older, Ordering::Release);
        let has_tasks = result["protocolVersion"]
            .as_str()
            .is_some_and(|version| version == "2025-11-25");
        if let (true, Some(capabilities)) = (has_tasks, result["capabilities"].as_object_mut()) {
            capabilities.insert(
                "tasks".into(),
                json!({"list": {}, "cancel": {}, "requests": {"tools": {"call": {}}}}),
            );
        }
    }
}

fn meta_of(params: &mut Map<String, Value>) -> &mut Map<String, Value> {
    let meta = params
        .entry("_meta")
        .or_insert_with(|| Value::Object(Map::new()));
    if !meta.is_object() {
        *meta = Value::Object(Map::new());
    }
    meta.as_object_mut().expect("made an object above")
}

/// What takes a session's plain `tools/call`s around rmcp (`fast.rs`).
pub(crate) trait CallsAround: Send + Sync + 'static {
    /// Starts the call on `line` if it is one to take; `false`: rmcp is to
    /// have the line.
    fn try_start(self: &Arc<Self>, line: &str) -> bool;
    /// A `notifications/cancelled` from the client (it goes on to rmcp too).
    fn cancelled(&self, line: &str);
    /// The client went away.
    fn end(&self);
}

/// Puts the pumps between `reader`/`writer` (the client) and rmcp: returns
/// the ends rmcp serves on. Plain `tools/call`s go to `fast` instead of
/// rmcp, and their answers come back through `answers`. The pumps end when
/// either side closes.
pub(crate) fn tap<R, W, C>(
    reader: R,
    writer: W,
    state: Arc<WireState>,
    fast: Arc<C>,
    answers: mpsc::Receiver<String>,
) -> (DuplexStream, DuplexStream)
where
    R: AsyncRead + Unpin + Send + 'static,
    W: AsyncWrite + Unpin + Send + 'static,
    C: CallsAround,
{
    let (to_rmcp, rmcp_reads) = tokio::io::duplex(PIPE_BYTES);
    let (rmcp_writes, from_rmcp) = tokio::io::duplex(PIPE_BYTES);
    tokio::spawn(pump_in(reader, to_rmcp, state.clone(), fast));
    tokio::spawn(pump_out(from_rmcp, answers, writer, state));
    (rmcp_reads, rmcp_writes)
}

/// `line` after `carry`, if it `may_carry` and is JSON; else as it came
/// (a line that is not JSON goes on untouched: rmcp answers it).
fn carried(line: String, may_carry: bool, carry: impl FnOnce(&mut Value)) -> String {
    if !may_carry {
        return line;
    }
    match serde_json::from_str::<Value>(&line) {
        Ok(mut message) => {
            carry(&mut message);
            message.to_string()
        }
        Err(_) => line,
    }
}

/// Lines of an MCP stream, each bounded by [`MAX_LINE`]; `None` at its end.
async fn next_line<R: AsyncRead + Unpin>(lines: &mut FramedRead<R, LinesCodec>) -> Option<String> {
    loop {
        match lines.next().await? {
            Ok(line) => return Some(line),
            Err(LinesCodecError::MaxLineLengthExceeded) => {
                tracing::error!(
                    max = MAX_LINE,
                    "an MCP message exceeded the longest line; dropped"
                );
            }
            Err(LinesCodecError::Io(error)) => {
                tracing::debug!(%error, "the MCP stream ended");
                return None;
            }
        }
    }
}

/// The client's lines to rmcp: a plain `tools/call` is started as a fast
/// call instead; a line that may need carrying goes through
/// [`WireState::carry_in`].
async fn pump_in<R, W, C>(reader: R, writer: W, state: Arc<WireState>, fast: Arc<C>)
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
    C: CallsAround,
{
    let mut lines = FramedRead::new(reader, LinesCodec::new_with_max_length(MAX_LINE));
    let mut out = FramedWrite::new(writer, LinesCodec::new_with_max_length(MAX_LINE));
    while let Some(line) = next_line(&mut lines).await {
        if line.contains("\"tools/call\"") {
            if state.ready() && fast.try_start(&line) {
                continue;
            }
        } else if line.contains("\"notifications/cancelled\"") {
            fast.cancelled(&line);
        }
        let may_carry = WireState::may_carry_in(&line);
        let line = carried(line, may_carry, |message| state.carry_in(message));
        if out.send(line).await.is_err() {
            break;
        }
    }
    fast.end();
}

/// rmcp's lines and the fast calls' answers to the client; until
/// `initialize` is answered, rmcp's lines go through
/// [`WireState::carry_out`].
async fn pump_out<R, W>(
    reader: R,
    mut answers: mpsc::Receiver<String>,
    writer: W,
    state: Arc<WireState>,
) where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    let mut lines = FramedRead::new(reader, LinesCodec::new_with_max_length(MAX_LINE));
    let mut out = FramedWrite::new(writer, LinesCodec::new_with_max_length(MAX_LINE));
    loop {
        let line = tokio::select! {
            line = next_line(&mut lines) => match line {
                Some(line) => line,
                None => break,
            },
            Some(answer) = answers.recv() => answer,
        };
        let line = carried(line, state.may_carry_out(), |message| {
            state.carry_out(message)
        });
        if out.send(line).await.is_err() {
            break;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn initialize_capabilities_are_kept_as_sent_and_the_answer_gains_tasks() {
        let state = WireState::default();
        let mut initialize = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25",
            "capabilities": {"tasks": {"requests": {"tools": {"call": {}}}}, "sampling": {}},
            "clientInfo": {"name": "c", "version": "1"}}});
        let before = initialize.clone();
        state.carry_in(&mut initialize);
        assert_eq!(initialize, before);
        assert_eq!(
            state.capabilities().unwrap()["tasks"]["requests"]["tools"]["call"],
            json!({})
        );
        let mut answer = json!({"jsonrpc": "2.0", "id": 0, "result": {
            "protocolVersion": "2025-11-25", "capabilities": {"tools": {}}, "serverInfo": {}}});
        state.carry_out(&mut answer);
        assert_eq!(answer["result"]["capabilities"]["tasks"]["list"], json!({}));
        // Only that answer.
        let mut other = json!({"jsonrpc": "2.0", "id": 0, "result": {"capabilities": {}}});
        state.carry_out(&mut other);
        assert_eq!(other["result"]["capabilities"], json!({}));
    }

    #[test]
    fn an_older_version_gets_no_tasks() {
        let state = WireState::default();
        let mut initialize =
            json!({"id": "a", "method": "initialize", "params": {"capabilities": {}}});
        state.carry_in(&mut initialize);
        let mut answer =
            json!({"id": "a", "result": {"protocolVersion": "2025-06-18", "capabilities": {}}});
        state.carry_out(&mut answer);
        assert_eq!(answer["result"]["capabilities"], json!({}));
    }

    #[test]
    fn a_calls_task_travels_in_meta() {
        let state = WireState::default();
        let mut call = json!({"id": 3, "method": "tools/call", "params": {
            "name": "ns__t", "arguments": {}, "task": {"ttl": 60000}, "_meta": {"progressToken": 1}}});
        state.carry_in(&mut call);
        assert_eq!(call["params"].get("task"), None);
        assert_eq!(call["params"]["_meta"][TASK_META], json!({"ttl": 60000}));
        assert_eq!(call["params"]["_meta"]["progressToken"], 1);
        let mut plain = json!({"id": 4, "method": "tools/call", "params": {"name": "x"}});
        state.carry_in(&mut plain);
        assert_eq!(plain["params"].get("_meta"), None);
    }
}
