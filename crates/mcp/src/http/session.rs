//! One MCP session over Streamable HTTP: a gateway session (`Gateway::serve`)
//! on an in-memory byte stream, and the routing of what it says back to
//! the HTTP streams open at the time.
//!
//! What a client POSTs is written to the gateway as lines; one pump task
//! per session reads the gateway's lines and sends each where MCP says it
//! belongs:
//! - an answer to the POST stream that carried its request;
//! - a progress notification to the POST stream whose request named its
//!   progress token;
//! - any other request or notification of the server (sampling,
//!   elicitation, roots, log messages) to the newest open POST stream
//!   that takes messages (they relate to a call in flight), else to the
//!   GET stream; list changes and resource updates to the GET stream
//!   first;
//! - with no stream open, to a bounded backlog the next GET stream gets.
//!
//! Invariant: the pump is the session's own task; a stream that does not
//! take its message within [`STREAM_SEND_TIMEOUT`] is dropped (its client
//! stopped reading), so a stuck client holds up only itself.

use std::collections::{HashMap, VecDeque};
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use futures_util::StreamExt;
use parking_lot::Mutex;
use serde::Deserialize;
use serde_json::Value;
use tokio::io::{AsyncWriteExt, DuplexStream, ReadHalf, WriteHalf};
use tokio::sync::mpsc;
use tokio::time::Instant;
use tokio_util::codec::{FramedRead, LinesCodec};
use tokio_util::sync::CancellationToken;

use crate::gateway::Gateway;

/// How long a stream may take to accept one message before it is dropped.
pub const STREAM_SEND_TIMEOUT: Duration = Duration::from_secs(10);
/// Server messages kept for the next GET stream while none is open.
pub const BACKLOG: usize = 64;
/// Messages queued on one HTTP stream.
const STREAM_QUEUE: usize = 64;
/// The in-memory pipe between the HTTP side and the gateway session.
const PIPE_BYTES: usize = 1 << 20;

/// What goes down one HTTP stream.
pub struct Frame {
    pub line: Bytes,
    /// An answer to one of the stream's requests.
    pub answers: bool,
}

/// One open POST stream.
struct PostTx {
    serial: u64,
    tx: mpsc::Sender<Frame>,
    /// Whether server messages may go here (an SSE answer); a JSON answer
    /// takes its answers only.
    takes_messages: bool,
}

#[derive(Default)]
struct Routes {
    /// Request id (as JSON text) → the stream that waits for its answer.
    answers: HashMap<String, Arc<PostTx>>,
    /// Progress token (as JSON text) → the stream of the request that named it.
    progress: HashMap<String, Arc<PostTx>>,
    /// Open POST streams, oldest first.
    posts: Vec<Arc<PostTx>>,
    /// The GET stream.
    listener: Option<mpsc::Sender<Frame>>,
    backlog: VecDeque<Bytes>,
    closed: bool,
}

pub struct HttpSession {
    /// `Mcp-Session-Id` (`None`: a stateless request's own session).
    pub id: Option<String>,
    /// The principal that opened it: no one else may use it.
    pub principal: String,
    input: tokio::sync::Mutex<Option<WriteHalf<DuplexStream>>>,
    routes: Mutex<Routes>,
    serials: AtomicU64,
    last_used: Mutex<Instant>,
    closed: CancellationToken,
    /// Run once, when it closes (it leaves the session table).
    on_close: Mutex<Option<Box<dyn FnOnce() + Send>>>,
}

/// Why a POST's messages were not taken.
#[derive(Debug, thiserror::Error)]
pub enum Refused {
    #[error("request id {0} is already in flight on this session")]
    DuplicateId(String),
    #[error("the session is closed")]
    Closed,
}

impl HttpSession {
    /// Opens a session on `gateway`: its gateway session and its pump run
    /// until [`HttpSession::close`] or until the gateway ends it.
    pub fn open(
        gateway: Arc<Gateway>,
        id: Option<String>,
        principal: String,
        on_close: Box<dyn FnOnce() + Send>,
    ) -> Arc<HttpSession> {
        let (ours, theirs) = tokio::io::duplex(PIPE_BYTES);
        let (from_gateway, to_gateway) = tokio::io::split(ours);
        let session = Arc::new(HttpSession {
            id,
            principal,
            input: tokio::sync::Mutex::new(Some(to_gateway)),
            routes: Mutex::new(Routes::default()),
            serials: AtomicU64::new(0),
            last_used: Mutex::new(Instant::now()),
            closed: CancellationToken::new(),
            on_close: Mutex::new(Some(on_close)),
        });
        let (read, write) = tokio::io::split(theirs);
        let served = session.clone();
        tokio::spawn(async move {
            // `serve` returns once the client's first message is handled
            // (rmcp's handshake), so it runs beside the writes.
            let outcome = tokio::select! {
                served = gateway.serve(read, write) => served,
                () = served.closed.cancelled() => return,
            };
            match outcome {
                Ok(running) => {
                    tokio::select! {
                        _ = running.waiting() => {}
                        () = served.closed.cancelled() => {}
                    }
                }
                Err(error) => tracing::debug!(%error, "an MCP session over HTTP did not start"),
            }
            served.close().await;
        });
        tokio::spawn(pump(session.clone(), from_gateway));
        session
    }

    pub fn is_closed(&self) -> bool {
        self.closed.is_cancelled()
    }

    /// Ends the session: the gateway session sees its input end, every
    /// stream ends.
    pub async fn close(&self) {
        self.closed.cancel();
        {
            let mut routes = self.routes.lock();
            routes.closed = true;
            routes.answers.clear();
            routes.progress.clear();
            routes.posts.clear();
            routes.listener = None;
            routes.backlog.clear();
        }
        let on_close = self.on_close.lock().take();
        if let Some(on_close) = on_close {
            on_close();
        }
        self.input.lock().await.take();
    }

    /// How long since a client last used the session, if no stream of it
    /// is open (an open stream is use).
    pub fn idle_for(&self) -> Option<Duration> {
        let routes = self.routes.lock();
        if !routes.posts.is_empty() || routes.listener.as_ref().is_some_and(|l| !l.is_closed()) {
            return None;
        }
        Some(self.last_used.lock().elapsed())
    }

    /// Opens a POST stream for `requests` (id, progress token) and writes
    /// `lines` to the gateway. The stream ends after the last answer.
    pub async fn post(
        self: &Arc<Self>,
        requests: &[(String, Option<String>)],
        lines: Vec<Vec<u8>>,
        takes_messages: bool,
    ) -> Result<PostStream, Refused> {
        *self.last_used.lock() = Instant::now();
        let (tx, rx) = mpsc::channel(STREAM_QUEUE);
        let post = Arc::new(PostTx {
            serial: self.serials.fetch_add(1, Ordering::Relaxed),
            tx,
            takes_messages,
        });
        {
            let mut routes = self.routes.lock();
            if routes.closed {
                return Err(Refused::Closed);
            }
            if let Some((id, _)) = requests
                .iter()
                .find(|(id, _)| routes.answers.contains_key(id))
            {
                return Err(Refused::DuplicateId(id.clone()));
            }
            for (id, token) in requests {
                routes.answers.insert(id.clone(), post.clone());
                if let Some(token) = token {
                    routes.progress.insert(token.clone(), post.clone());
                }
            }
            routes.posts.push(post.clone());
        }
        let stream = PostStream {
            rx,
            remaining: requests.len(),
            session: self.clone(),
            serial: post.serial,
        };
        self.write(lines).await?;
        Ok(stream)
    }

    /// Writes messages that need no answer (notifications, the client's
    /// answers to the server's requests).
    pub async fn write(&self, lines: Vec<Vec<u8>>) -> Result<(), Refused> {
        *self.last_used.lock() = Instant::now();
        let mut input = self.input.lock().await;
        let Some(input) = input.as_mut() else {
            return Err(Refused::Closed);
        };
        for mut line in lines {
            line.push(b'\n');
            input.write_all(&line).await.map_err(|_| Refused::Closed)?;
        }
        input.flush().await.map_err(|_| Refused::Closed)
    }

    /// Opens the GET stream (replacing the one before), first with what
    /// waited for it.
    pub fn listen(&self) -> mpsc::Receiver<Frame> {
        *self.last_used.lock() = Instant::now();
        let (tx, rx) = mpsc::channel(STREAM_QUEUE.max(BACKLOG));
        let mut routes = self.routes.lock();
        for line in routes.backlog.drain(..) {
            // Room for the whole backlog: the channel is at least as large.
            let _ = tx.try_send(Frame {
                line,
                answers: false,
            });
        }
        if !routes.closed {
            routes.listener = Some(tx);
        }
        rx
    }

    fn unregister(&self, serial: u64) {
        let mut routes = self.routes.lock();
        routes.posts.retain(|post| post.serial != serial);
        routes.answers.retain(|_, post| post.serial != serial);
        routes.progress.retain(|_, post| post.serial != serial);
    }
}

/// The part of a gateway message that says where it goes.
#[derive(Deserialize)]
struct Peek {
    #[serde(default)]
    id: Option<Value>,
    #[serde(default)]
    method: Option<String>,
    #[serde(default)]
    params: Option<PeekParams>,
}

#[derive(Deserialize)]
struct PeekParams {
    #[serde(rename = "progressToken", default)]
    progress_token: Option<Value>,
}

/// Where one message of the gateway goes.
enum Route {
    Post(mpsc::Sender<Frame>, bool),
    Listener(mpsc::Sender<Frame>),
    Backlog,
}

fn route(routes: &mut Routes, peek: &Peek) -> Route {
    let newest_post = |routes: &Routes| {
        routes
            .posts
            .iter()
            .rev()
            .find(|post| post.takes_messages)
            .map(|post| Route::Post(post.tx.clone(), false))
    };
    let listener = |routes: &Routes| routes.listener.clone().map(Route::Listener);
    match (&peek.method, &peek.id) {
        (None, Some(id)) => match routes.answers.remove(&id.to_string()) {
            Some(post) => Route::Post(post.tx.clone(), true),
            None => Route::Backlog, // its stream is gone: dropped below
        },
        (Some(method), _) if method == "notifications/progress" => {
            let token = peek
                .params
                .as_ref()
                .and_then(|p| p.progress_token.as_ref())
                .map(Value::to_string);
            token
                .and_then(|token| routes.progress.get(&token))
                .filter(|post| post.takes_messages)
                .map(|post| Route::Post(post.tx.clone(), false))
                .or_else(|| newest_post(routes))
                .or_else(|| listener(routes))
                .unwrap_or(Route::Backlog)
        }
        (Some(method), None)
            if method.ends_with("/list_changed") || method == "notifications/resources/updated" =>
        {
            listener(routes)
                .or_else(|| newest_post(routes))
                .unwrap_or(Route::Backlog)
        }
        _ => newest_post(routes)
            .or_else(|| listener(routes))
            .unwrap_or(Route::Backlog),
    }
}

/// Reads the gateway session's lines until it ends, sending each where it
/// belongs.
async fn pump(session: Arc<HttpSession>, from_gateway: ReadHalf<DuplexStream>) {
    let mut lines = FramedRead::new(
        from_gateway,
        LinesCodec::new_with_max_length(crate::gateway::MAX_LINE),
    );
    while let Some(line) = lines.next().await {
        let Ok(line) = line else { break };
        let Ok(peek) = serde_json::from_str::<Peek>(&line) else {
            continue; // the gateway writes JSON-RPC only
        };
        let is_answer = peek.method.is_none();
        let line = Bytes::from(line);
        let target = {
            let mut routes = session.routes.lock();
            let target = route(&mut routes, &peek);
            if matches!(target, Route::Backlog) && !is_answer {
                if routes.backlog.len() == BACKLOG {
                    routes.backlog.pop_front();
                }
                routes.backlog.push_back(line.clone());
            }
            target
        };
        let (tx, answers) = match target {
            Route::Post(tx, answers) => (tx, answers),
            Route::Listener(tx) => (tx, false),
            Route::Backlog => {
                if is_answer {
                    tracing::debug!("an answer's HTTP stream was gone; dropped");
                }
                continue;
            }
        };
        let frame = Frame { line, answers };
        if tx.send_timeout(frame, STREAM_SEND_TIMEOUT).await.is_err() {
            tracing::debug!("an HTTP stream of an MCP session stopped reading; dropped");
        }
    }
    session.close().await;
}

/// A POST's answer stream: its answers, and the server's messages sent
/// meanwhile (when it takes messages); ends after the last answer.
pub struct PostStream {
    rx: mpsc::Receiver<Frame>,
    remaining: usize,
    session: Arc<HttpSession>,
    serial: u64,
}

impl futures_util::Stream for PostStream {
    type Item = Frame;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Frame>> {
        if self.remaining == 0 {
            return Poll::Ready(None);
        }
        match self.rx.poll_recv(cx) {
            Poll::Ready(Some(frame)) => {
                if frame.answers {
                    self.remaining -= 1;
                }
                Poll::Ready(Some(frame))
            }
            other => other,
        }
    }
}

impl Drop for PostStream {
    fn drop(&mut self) {
        self.session.unregister(self.serial);
        // A stateless request's session lives as long as its one POST.
        if self.session.id.is_none() {
            let session = self.session.clone();
            tokio::spawn(async move { session.close().await });
        }
    }
}
