//! The wire as the server wrote it, for callers that pass MCP through
//! untouched: rmcp decodes every message into its own model, which drops
//! members it does not know (a tool's `execution`, the `tasks` capability,
//! a 2025-11-25 task's `ttl` and `pollInterval`). A stdio connection's
//! reader hands each line to its tap before rmcp decodes it, and its writer
//! tells the tap which of our requests want their result raw, so the raw
//! text is in place before rmcp wakes the caller.
//!
//! The tap also takes the answers to the tool calls this crate writes to a
//! stdio server itself (`call.rs`, `input.rs`): rmcp never sees those
//! lines, and the end of the server's output fails the calls still waiting.
//!
//! A line longer than [`MAX_LINE_BYTES`] is dropped here, unseen by rmcp
//! (which would drop it too); when it is the answer to a call of ours
//! (`oversized.rs`), that call ends at once with an error saying so, not at
//! its timeout.
//!
//! What the tap keeps is bounded: a raw result only for a request still
//! awaited (a caller that gives up removes its entry), an answer's sender
//! only for a call still waiting, and at most [`MAX_SERVER_REQUESTS`]
//! params of the server's own requests.

use std::collections::{HashMap, HashSet, VecDeque};
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use parking_lot::Mutex;
use rmcp::model::{ClientRequest, JsonRpcMessage, RequestId};
use rmcp::service::{RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::async_rw::AsyncRwTransport;
use rmcp::transport::Transport;
use rmcp::RoleClient;
use serde::Deserialize;
use serde_json::value::RawValue;
use switchboard_protocol::{ErrorCode, ErrorObject};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::sync::oneshot;

use crate::oversized::LongLine;

/// The server's requests whose params are kept until their handler takes
/// them; older ones are forgotten first.
const MAX_SERVER_REQUESTS: usize = 256;
/// A line longer than this is not kept (rmcp's own bound, which would
/// drop it too).
const MAX_LINE_BYTES: usize = 16 * 1024 * 1024;

/// What a call answered by a line too long to keep ends with.
const TOO_LONG: &str =
    "the MCP server's answer is longer than 16 MiB, the most one line may be; it was dropped";

/// How the id of a call written around rmcp begins: `sb-N`. rmcp numbers
/// its own requests, so an answer whose id is such a string is never
/// rmcp's, even after its call stopped waiting.
const DIRECT_ID_PREFIX: &str = "sb-";

/// The id of the `number`th call written around rmcp.
pub(crate) fn direct_id(number: u64) -> String {
    format!("{DIRECT_ID_PREFIX}{number}")
}

fn is_direct_id(id: &RequestId) -> bool {
    matches!(id, RequestId::String(text) if text.starts_with(DIRECT_ID_PREFIX))
}

#[derive(Default)]
pub(crate) struct WireTap {
    state: Mutex<TapState>,
}

#[derive(Default)]
struct TapState {
    /// Our requests whose raw result is wanted, from the moment they are
    /// written until they are answered or abandoned.
    awaiting: HashSet<RequestId>,
    results: HashMap<RequestId, Box<RawValue>>,
    /// The id of our `initialize`, until it is answered.
    initialize: Option<RequestId>,
    initialize_result: Option<Box<RawValue>>,
    server_requests: HashMap<RequestId, Box<RawValue>>,
    server_order: VecDeque<RequestId>,
    /// The progress reports the server wrote so far for each call that
    /// wants its progress, by the JSON text of the call's token.
    progress_seen: HashMap<String, u64>,
    /// The calls written around rmcp, until answered or given up.
    direct: HashMap<RequestId, oneshot::Sender<DirectAnswer>>,
    /// The server's output ended: no answer will come.
    ended: bool,
}

/// The server's answer to a call written around rmcp.
#[derive(Debug)]
pub(crate) enum DirectAnswer {
    Result(Box<RawValue>),
    Error(ErrorObject),
    /// Neither a result nor an error object that parses.
    Unreadable(String),
}

/// What rmcp is to read in place of a line the tap saw.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Seen {
    /// The line as it is.
    Pass,
    /// Another line (a stand-in for a result taken raw).
    Replace(Vec<u8>),
    /// Nothing: an answer to a call rmcp did not send.
    Drop,
}

/// The members of a message the tap reads; the rest is skipped unparsed.
#[derive(Deserialize)]
struct Peek<'a> {
    #[serde(default)]
    id: Option<RequestId>,
    #[serde(default, borrow)]
    method: Option<&'a RawValue>,
    #[serde(default, borrow)]
    params: Option<&'a RawValue>,
    #[serde(default, borrow)]
    result: Option<&'a RawValue>,
    #[serde(default, borrow)]
    error: Option<&'a RawValue>,
}

impl WireTap {
    /// Called by the writer for every message it is about to write.
    pub(crate) fn outgoing(&self, message: &TxJsonRpcMessage<RoleClient>) {
        let JsonRpcMessage::Request(request) = message else {
            return;
        };
        let mut state = self.state.lock();
        match &request.request {
            // Every request this crate sends for a raw answer is a custom one.
            ClientRequest::CustomRequest(_) => {
                state.awaiting.insert(request.id.clone());
            }
            ClientRequest::InitializeRequest(_) => state.initialize = Some(request.id.clone()),
            _ => {}
        }
    }

    /// Called by the reader for every line the server wrote, before rmcp
    /// decodes it. For the result of a request awaited raw, the line rmcp
    /// is to read instead: the same answer with a tiny stand-in result. rmcp
    /// decodes every message whole into its model, through serde's buffer
    /// and an untagged enum tried variant by variant (the largest cost of a
    /// relayed call); its caller takes the result from the tap, so rmcp
    /// needs only the id to complete the request.
    pub(crate) fn incoming(&self, line: &[u8]) -> Seen {
        let Ok(peek) = serde_json::from_slice::<Peek<'_>>(line) else {
            return Seen::Pass;
        };
        let Some(id) = peek.id else {
            if peek.method.map(RawValue::get) == Some("\"notifications/progress\"") {
                self.progress(peek.params);
            }
            return Seen::Pass;
        };
        let mut state = self.state.lock();
        if peek.method.is_none() {
            if let Some(waiting) = state.direct.remove(&id) {
                drop(state);
                let _ = waiting.send(direct_answer(peek.result, peek.error));
                return Seen::Drop;
            }
            if is_direct_id(&id) {
                // Its call gave up (a timeout or a cancel) before it came;
                // rmcp would decode it whole only to find no such request.
                tracing::debug!(%id, "an answer to a call that no longer waits; dropped");
                return Seen::Drop;
            }
        }
        match (peek.method, peek.result) {
            (Some(_), _) => {
                let params = peek
                    .params
                    .map_or_else(|| raw("{}"), |params| params.to_owned());
                if state.server_order.len() >= MAX_SERVER_REQUESTS {
                    if let Some(oldest) = state.server_order.pop_front() {
                        state.server_requests.remove(&oldest);
                    }
                }
                state.server_order.push_back(id.clone());
                state.server_requests.insert(id, params);
            }
            (None, Some(result)) => {
                if state.initialize.as_ref() == Some(&id) {
                    state.initialize = None;
                    state.initialize_result = Some(result.to_owned());
                } else if state.awaiting.remove(&id) {
                    let stand_in = stand_in(&id);
                    state.results.insert(id, result.to_owned());
                    return stand_in.map_or(Seen::Pass, Seen::Replace);
                }
            }
            // An error answer: rmcp's error type keeps all of it.
            (None, None) => {
                state.awaiting.remove(&id);
            }
        }
        Seen::Pass
    }

    /// Called by the reader for a line too long to keep, in place of
    /// [`WireTap::incoming`]: an answer to a call of ours ends that call
    /// with [`TOO_LONG`] (a call written around rmcp here, one of rmcp's by
    /// the error answer rmcp is handed instead of the line); anything else
    /// is dropped.
    pub(crate) fn too_long(&self, line: &LongLine) -> Seen {
        let Some(id) = line.answered_id() else {
            tracing::warn!("the MCP server wrote a message longer than 16 MiB; dropped");
            return Seen::Drop;
        };
        tracing::warn!(id = %id, "the MCP server's answer is longer than 16 MiB; dropped");
        let mut state = self.state.lock();
        if let Some(waiting) = state.direct.remove(&id) {
            drop(state);
            let _ = waiting.send(DirectAnswer::Unreadable(TOO_LONG.into()));
            return Seen::Drop;
        }
        if is_direct_id(&id) {
            return Seen::Drop;
        }
        state.awaiting.remove(&id);
        error_answer(&id, TOO_LONG).map_or(Seen::Drop, Seen::Replace)
    }

    /// Where the answer to `id`, a call about to be written around rmcp,
    /// will come; `None` if the server's output already ended.
    pub(crate) fn expect_direct(&self, id: RequestId) -> Option<oneshot::Receiver<DirectAnswer>> {
        let mut state = self.state.lock();
        if state.ended {
            return None;
        }
        let (send, receive) = oneshot::channel();
        state.direct.insert(id, send);
        Some(receive)
    }

    /// The call `id` no longer waits (its caller gave up).
    pub(crate) fn forget_direct(&self, id: &RequestId) {
        self.state.lock().direct.remove(id);
    }

    /// The server's output ended (or the connection did): the calls still
    /// waiting get no answer.
    pub(crate) fn ended(&self) {
        let mut state = self.state.lock();
        state.ended = true;
        state.direct.clear();
    }

    /// Counts a progress report of a watched call.
    fn progress(&self, params: Option<&RawValue>) {
        #[derive(Deserialize)]
        struct Token<'a> {
            #[serde(rename = "progressToken", borrow)]
            token: &'a RawValue,
        }
        let Some(Ok(params)) = params.map(|raw| serde_json::from_str::<Token<'_>>(raw.get()))
        else {
            return;
        };
        if let Some(seen) = self.state.lock().progress_seen.get_mut(params.token.get()) {
            *seen += 1;
        }
    }

    /// Starts counting the progress reports of the call whose token is
    /// `token` (JSON text).
    pub(crate) fn watch_progress(&self, token: String) {
        self.state.lock().progress_seen.insert(token, 0);
    }

    /// Stops counting `token`'s reports; how many the server wrote.
    pub(crate) fn unwatch_progress(&self, token: &str) -> u64 {
        self.state
            .lock()
            .progress_seen
            .remove(token)
            .unwrap_or_default()
    }

    /// The raw result of our request `id`, once answered.
    pub(crate) fn take_result(&self, id: &RequestId) -> Option<Box<RawValue>> {
        let mut state = self.state.lock();
        state.awaiting.remove(id);
        state.results.remove(id)
    }

    /// Our request `id` is no longer awaited (its caller gave up).
    pub(crate) fn abandon(&self, id: &RequestId) {
        let mut state = self.state.lock();
        state.awaiting.remove(id);
        state.results.remove(id);
    }

    /// The params of the server's request `id`, as it sent them.
    pub(crate) fn take_server_request(&self, id: &RequestId) -> Option<Box<RawValue>> {
        let mut state = self.state.lock();
        let params = state.server_requests.remove(id)?;
        state.server_order.retain(|kept| kept != id);
        Some(params)
    }

    /// The server's answer to `initialize`, as it sent it.
    pub(crate) fn initialize_result(&self) -> Option<Box<RawValue>> {
        self.state.lock().initialize_result.clone()
    }
}

/// The result rmcp reads in place of one taken raw: the shape of the third
/// variant of its untagged `ServerResult` (an empty completion), so that
/// two variants fail before one matches, not eighteen (each failure builds
/// a formatted serde error).
const STAND_IN_RESULT: &str = r#"{"completion":{"values":[]}}"#;

/// An answer's `result` or `error` member, read.
fn direct_answer(result: Option<&RawValue>, error: Option<&RawValue>) -> DirectAnswer {
    match (result, error) {
        (Some(result), _) => DirectAnswer::Result(result.to_owned()),
        (None, Some(error)) => match serde_json::from_str::<ErrorObject>(error.get()) {
            Ok(error) => DirectAnswer::Error(error),
            Err(_) => DirectAnswer::Unreadable(
                "the MCP server answered with an error that is no JSON-RPC error object".into(),
            ),
        },
        (None, None) => DirectAnswer::Unreadable(
            "the MCP server answered with neither a result nor an error".into(),
        ),
    }
}

/// The answer to `id` with the stand-in result, as a line.
fn stand_in(id: &RequestId) -> Option<Vec<u8>> {
    answer_line(id, "result", STAND_IN_RESULT)
}

/// An error answer to `id` (an internal error saying `message`), as a line.
fn error_answer(id: &RequestId, message: &str) -> Option<Vec<u8>> {
    let error = serde_json::to_string(&ErrorObject::new(ErrorCode::InternalError, message)).ok()?;
    answer_line(id, "error", &error)
}

/// An answer to `id` whose `member` (`result` or `error`) is the JSON
/// text `value`, as a line.
fn answer_line(id: &RequestId, member: &str, value: &str) -> Option<Vec<u8>> {
    let id = serde_json::to_string(id).ok()?;
    Some(format!("{{\"jsonrpc\":\"2.0\",\"id\":{id},\"{member}\":{value}}}\n").into_bytes())
}

fn raw(text: &str) -> Box<RawValue> {
    RawValue::from_string(text.to_owned()).unwrap_or_else(|_| Box::<RawValue>::default())
}

/// Removes an abandoned request's entry when the caller's future is dropped
/// before its answer was taken.
pub(crate) struct Awaited {
    pub(crate) tap: Option<Arc<WireTap>>,
    pub(crate) id: RequestId,
}

impl Awaited {
    /// The raw result, if the tap has it; the entry is gone afterwards.
    pub(crate) fn take(mut self) -> Option<Box<RawValue>> {
        self.tap.take()?.take_result(&self.id)
    }
}

impl Drop for Awaited {
    fn drop(&mut self) {
        if let Some(tap) = self.tap.take() {
            tap.abandon(&self.id);
        }
    }
}

/// Counts a call's progress reports on the wire until dropped or taken.
pub(crate) struct Watched {
    tap: Option<Arc<WireTap>>,
    token: String,
}

impl Watched {
    pub(crate) fn start(tap: Arc<WireTap>, token: String) -> Watched {
        tap.watch_progress(token.clone());
        Watched {
            tap: Some(tap),
            token,
        }
    }

    /// How many reports the server wrote so far; the count stops.
    pub(crate) fn take(mut self) -> u64 {
        self.tap
            .take()
            .map_or(0, |tap| tap.unwatch_progress(&self.token))
    }
}

impl Drop for Watched {
    fn drop(&mut self) {
        if let Some(tap) = self.tap.take() {
            tap.unwatch_progress(&self.token);
        }
    }
}

/// rmcp's line framing over a reader and a writer, with the tap on both
/// ways: what a stdio child's transport (`child.rs`) and a Streamable HTTP
/// one (`streamable.rs`) both carry messages on.
pub(crate) struct TappedWire<R: AsyncRead + Unpin, W: AsyncWrite> {
    wire: AsyncRwTransport<RoleClient, TapRead<R>, W>,
    tap: Arc<WireTap>,
}

impl<R, W> TappedWire<R, W>
where
    R: AsyncRead + Send + Unpin + 'static,
    W: AsyncWrite + Send + Unpin + 'static,
{
    pub(crate) fn new(reader: R, writer: W, tap: Arc<WireTap>) -> Self {
        TappedWire {
            wire: AsyncRwTransport::new(TapRead::new(reader, tap.clone()), writer),
            tap,
        }
    }
}

impl<R, W> Transport<RoleClient> for TappedWire<R, W>
where
    R: AsyncRead + Send + Unpin + 'static,
    W: AsyncWrite + Send + Unpin + 'static,
{
    type Error = io::Error;

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleClient>,
    ) -> impl Future<Output = io::Result<()>> + Send + 'static {
        // Before the write: an answer cannot come before the tap knows.
        self.tap.outgoing(&item);
        self.wire.send(item)
    }

    fn receive(&mut self) -> impl Future<Output = Option<RxJsonRpcMessage<RoleClient>>> + Send {
        self.wire.receive()
    }

    fn close(&mut self) -> impl Future<Output = io::Result<()>> + Send {
        self.wire.close()
    }
}

/// A reader that shows each complete line to the tap as it passes, and
/// hands rmcp the tap's stand-in for a line the tap takes raw.
///
/// Lines are handed on whole: rmcp decodes nothing before a newline
/// anyway. A line longer than [`MAX_LINE_BYTES`] is not kept: only its two
/// ends, for [`WireTap::too_long`].
pub(crate) struct TapRead<R> {
    inner: R,
    tap: Arc<WireTap>,
    /// The line being read, until its newline.
    line: Vec<u8>,
    /// The ends of a line longer than [`MAX_LINE_BYTES`], being dropped.
    long: Option<LongLine>,
    /// What rmcp is to read next, from `ready_at`.
    ready: Vec<u8>,
    ready_at: usize,
    /// What one read of `inner` takes.
    scratch: Box<[u8]>,
}

/// The most one read of the server's output takes.
const READ_BYTES: usize = 64 * 1024;

impl<R> TapRead<R> {
    pub(crate) fn new(inner: R, tap: Arc<WireTap>) -> Self {
        TapRead {
            inner,
            tap,
            line: Vec::new(),
            long: None,
            ready: Vec::new(),
            ready_at: 0,
            scratch: vec![0; READ_BYTES].into_boxed_slice(),
        }
    }

    /// Takes in what the server wrote: complete lines (or their stand-ins)
    /// become ready for rmcp.
    fn saw(&mut self, mut bytes: &[u8]) {
        while !bytes.is_empty() {
            let newline = memchr::memchr(b'\n', bytes);
            let take = newline.map_or(bytes.len(), |at| at + 1);
            let (part, rest) = bytes.split_at(take);
            bytes = rest;
            if let Some(long) = &mut self.long {
                long.more(part);
            } else if self.line.len() + part.len() > MAX_LINE_BYTES {
                let mut long = LongLine::new(&self.line);
                long.more(part);
                self.long = Some(long);
                // Not kept: the memory goes too.
                self.line = Vec::new();
            } else {
                self.line.extend_from_slice(part);
            }
            if newline.is_some() {
                let seen = match self.long.take() {
                    Some(long) => self.tap.too_long(&long),
                    None => self.tap.incoming(&self.line),
                };
                match seen {
                    Seen::Pass => self.ready.extend_from_slice(&self.line),
                    Seen::Replace(stand_in) => self.ready.extend_from_slice(&stand_in),
                    Seen::Drop => {}
                }
                self.line.clear();
            }
        }
    }

    /// Copies what is ready into `buf`; whether anything was.
    fn hand_on(&mut self, buf: &mut ReadBuf<'_>) -> bool {
        let pending = &self.ready[self.ready_at..];
        if pending.is_empty() {
            return false;
        }
        let n = pending.len().min(buf.remaining());
        buf.put_slice(&pending[..n]);
        self.ready_at += n;
        if self.ready_at == self.ready.len() {
            self.ready.clear();
            self.ready_at = 0;
        }
        true
    }
}

impl<R: AsyncRead + Unpin> AsyncRead for TapRead<R> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        loop {
            if this.hand_on(buf) {
                return Poll::Ready(Ok(()));
            }
            let mut read = ReadBuf::new(&mut this.scratch);
            match Pin::new(&mut this.inner).poll_read(cx, &mut read) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(Err(error)) => {
                    this.tap.ended();
                    return Poll::Ready(Err(error));
                }
                Poll::Ready(Ok(())) => {}
            }
            let n = read.filled().len();
            if n == 0 {
                this.tap.ended();
                // The end: a last line without its newline goes on as it is.
                this.ready.append(&mut this.line);
                this.long = None;
                this.hand_on(buf);
                return Poll::Ready(Ok(()));
            }
            let scratch = std::mem::take(&mut this.scratch);
            this.saw(&scratch[..n]);
            this.scratch = scratch;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_result_is_kept_only_while_awaited() {
        let tap = WireTap::default();
        let id = RequestId::Number(3);
        tap.state.lock().awaiting.insert(id.clone());
        tap.incoming(br#"{"jsonrpc":"2.0","id":3,"result":{"tools":[],"extra":{"x":1}}}"#);
        assert_eq!(
            tap.take_result(&id).unwrap().get(),
            r#"{"tools":[],"extra":{"x":1}}"#
        );
        // Not awaited (never, or abandoned): not kept.
        tap.incoming(br#"{"jsonrpc":"2.0","id":4,"result":{}}"#);
        assert!(tap.take_result(&RequestId::Number(4)).is_none());
    }

    #[tokio::test]
    async fn rmcp_reads_a_stand_in_for_a_result_taken_raw() {
        use tokio::io::AsyncReadExt;
        let tap = Arc::new(WireTap::default());
        tap.state
            .lock()
            .awaiting
            .insert(RequestId::String("c-1".into()));
        let wire = concat!(
            r#"{"jsonrpc":"2.0","method":"notifications/message","params":{}}"#,
            "\n",
            r#"{"jsonrpc":"2.0","id":"c-1","result":{"content":[{"type":"text","text":"big"}]}}"#,
            "\n",
            r#"{"jsonrpc":"2.0","id":9,"result":{"tools":[]}}"#,
            "\n",
            r#"{"jsonrpc":"2.0","id":10"#,
        );
        let mut read = TapRead::new(wire.as_bytes(), tap.clone());
        let mut seen = String::new();
        read.read_to_string(&mut seen).await.unwrap();
        let expected = concat!(
            r#"{"jsonrpc":"2.0","method":"notifications/message","params":{}}"#,
            "\n",
            r#"{"jsonrpc":"2.0","id":"c-1","result":{"completion":{"values":[]}}}"#,
            "\n",
            r#"{"jsonrpc":"2.0","id":9,"result":{"tools":[]}}"#,
            "\n",
            r#"{"jsonrpc":"2.0","id":10"#,
        );
        assert_eq!(seen, expected);
        assert_eq!(
            tap.take_result(&RequestId::String("c-1".into()))
                .unwrap()
                .get(),
            r#"{"content":[{"type":"text","text":"big"}]}"#
        );
    }

    #[test]
    fn the_stand_in_is_a_result_rmcp_reads_early() {
        let read: rmcp::model::ServerResult = serde_json::from_str(STAND_IN_RESULT).unwrap();
        assert!(
            matches!(read, rmcp::model::ServerResult::CompleteResult(_)),
            "{read:?}"
        );
    }

    /// What rmcp reads of `wire` through a tap.
    async fn read_through(tap: &Arc<WireTap>, wire: &str) -> String {
        use tokio::io::AsyncReadExt;
        let mut read = TapRead::new(wire.as_bytes(), tap.clone());
        let mut seen = Vec::new();
        read.read_to_end(&mut seen).await.unwrap();
        String::from_utf8(seen).unwrap()
    }

    fn too_long_answer(id: u64) -> String {
        format!(
            r#"{{"jsonrpc":"2.0","id":{id},"result":{{"x":"{}"}}}}"#,
            "a".repeat(MAX_LINE_BYTES)
        )
    }

    #[tokio::test]
    async fn an_answer_over_the_bound_reaches_rmcp_as_an_error_saying_so() {
        let tap = Arc::new(WireTap::default());
        tap.state.lock().awaiting.insert(RequestId::Number(1));
        let next = r#"{"jsonrpc":"2.0","id":2,"result":{}}"#;
        let seen = read_through(&tap, &format!("{}\n{next}\n", too_long_answer(1))).await;
        let mut lines = seen.lines();
        let error: serde_json::Value = serde_json::from_str(lines.next().unwrap()).unwrap();
        assert_eq!(error["id"], 1);
        assert_eq!(error["error"]["code"], -32603);
        assert_eq!(error["error"]["message"], TOO_LONG);
        assert_eq!(lines.next(), Some(next));
        assert_eq!(lines.next(), None);
        assert!(tap.take_result(&RequestId::Number(1)).is_none());
        assert!(tap.state.lock().awaiting.is_empty());
    }

    #[tokio::test]
    async fn a_direct_calls_answer_over_the_bound_ends_that_call_and_no_other() {
        let tap = Arc::new(WireTap::default());
        let long = tap.expect_direct(RequestId::Number(4)).unwrap();
        let mut other = tap.expect_direct(RequestId::Number(5)).unwrap();
        // A request of the server's too long, with an id like ours: dropped.
        let request = format!(
            r#"{{"jsonrpc":"2.0","id":5,"method":"sampling/createMessage","params":{{"x":"{}"}}}}"#,
            "a".repeat(MAX_LINE_BYTES)
        );
        let seen = read_through(&tap, &format!("{request}\n{}\n", too_long_answer(4))).await;
        assert_eq!(seen, "");
        match long.await.unwrap() {
            DirectAnswer::Unreadable(reason) => assert_eq!(reason, TOO_LONG),
            answer => panic!("{answer:?}"),
        }
        // The end of the wire: the other call's sender is gone, unanswered.
        assert!(other.try_recv().is_err());
    }

    #[test]
    fn an_answer_to_a_direct_call_that_gave_up_is_not_passed_to_rmcp() {
        let tap = WireTap::default();
        let id = RequestId::String(direct_id(7).into());
        drop(tap.expect_direct(id.clone()).unwrap());
        tap.forget_direct(&id);
        let late = br#"{"jsonrpc":"2.0","id":"sb-7","result":{"content":[]}}"#;
        assert_eq!(tap.incoming(late), Seen::Drop);
        let late_error = br#"{"jsonrpc":"2.0","id":"sb-7","error":{"code":-1,"message":"x"}}"#;
        assert_eq!(tap.incoming(late_error), Seen::Drop);
        // rmcp's own ids, and a server's request whatever its id, are rmcp's.
        assert_eq!(
            tap.incoming(br#"{"jsonrpc":"2.0","id":3,"result":{}}"#),
            Seen::Pass
        );
        assert_eq!(
            tap.incoming(br#"{"jsonrpc":"2.0","id":"sb-7","method":"roots/list"}"#),
            Seen::Pass
        );
    }

    #[tokio::test]
    async fn a_too_long_answer_to_a_direct_call_that_gave_up_is_dropped() {
        let tap = Arc::new(WireTap::default());
        let answer = format!(
            r#"{{"jsonrpc":"2.0","id":"sb-2","result":{{"x":"{}"}}}}"#,
            "a".repeat(MAX_LINE_BYTES)
        );
        let next = r#"{"jsonrpc":"2.0","id":2,"result":{}}"#;
        let seen = read_through(&tap, &format!("{answer}\n{next}\n")).await;
        assert_eq!(seen.lines().collect::<Vec<_>>(), [next]);
    }

    #[test]
    fn server_requests_are_bounded() {
        let tap = WireTap::default();
        for id in 0..(MAX_SERVER_REQUESTS + 10) {
            let line = format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"roots/list"}}"#);
            tap.incoming(line.as_bytes());
        }
        assert!(tap.take_server_request(&RequestId::Number(0)).is_none());
        let last = RequestId::Number((MAX_SERVER_REQUESTS + 9) as i64);
        assert_eq!(tap.take_server_request(&last).unwrap().get(), "{}");
    }

    #[test]
    fn lines_split_across_reads_are_seen_whole() {
        let tap = Arc::new(WireTap::default());
        tap.state.lock().awaiting.insert(RequestId::Number(1));
        let mut read = TapRead::new(tokio::io::empty(), tap.clone());
        read.saw(br#"{"jsonrpc":"2.0","id":1,"res"#);
        read.saw(b"ult\":{\"a\":1}}\n{\"jsonrpc\"");
        assert_eq!(
            tap.take_result(&RequestId::Number(1)).unwrap().get(),
            r#"{"a":1}"#
        );
    }
}
