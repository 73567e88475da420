//! One live connection to the hub: its reader and writer tasks, the calls
//! awaiting answers, and the requests being served.
//!
//! The reader task is the only one that interprets what the hub sends, in
//! wire order. Answers that change local state (a registration, a catalog
//! snapshot) are applied by the reader itself before it reads on, so a
//! request for a just-registered service, or an action right after a
//! snapshot, can never be seen before the state it depends on.

use std::borrow::Cow;
use std::collections::HashMap;
use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use futures_util::FutureExt;
use parking_lot::{Mutex, RwLock};
use serde::Serialize;
use serde_json::value::RawValue;
use switchboard_protocol::hub::{
    method, ActionParams, CancelParams, ClientInfo, InitializeParams, InitializeResult,
    RegisterServiceParams, RegisterServiceResult, RoutedParams, SubscribeParams, SubscribeResult,
    CATALOG_CHANNEL, PROTOCOL_VERSION,
};
use switchboard_protocol::jsonrpc::{self, ErrorObject, Message, Outcome};
use switchboard_protocol::ErrorCode;
use tokio::sync::{mpsc, oneshot, Notify};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::catalog::CatalogFeed;
use crate::deadlines::Deadlines;
use crate::error::{Error, RpcError};
use crate::service::{Handler, Notification, Request};
use crate::transport::{self, Endpoint, Reader, Writer};

/// `notify` waits (for the socket) only when this much is already queued.
const HIGH_WATER: usize = 4 * 1024 * 1024;
/// Notifications a service may have waiting for its handler before new ones
/// are dropped (the hub's at-most-once promise, kept locally too).
const NOTIFICATION_BACKLOG: usize = 4096;

/// A service this client registered, kept across reconnects.
pub(crate) struct LocalService {
    id: RwLock<String>,
    pub(crate) metadata: Mutex<Box<RawValue>>,
    handler: Arc<dyn Handler>,
    notifications: mpsc::Sender<Queued>,
    /// Notifications queued and not yet handled. Only the reader (which
    /// queues) raises it and only the worker (once it handled one) lowers
    /// it, so zero seen by anyone means nothing queued before that moment
    /// is still waiting.
    unhandled: Arc<AtomicU64>,
    dropped_notifications: AtomicU64,
}

/// What waits in a service's notification queue.
pub(crate) enum Queued {
    Notification(Notification),
    /// Answered once everything queued before it was handled.
    Marker(oneshot::Sender<()>),
}

impl LocalService {
    pub(crate) fn new(metadata: Box<RawValue>, handler: Arc<dyn Handler>) -> Arc<Self> {
        let (sender, mut receiver) = mpsc::channel::<Queued>(NOTIFICATION_BACKLOG);
        let worker_handler = handler.clone();
        let unhandled = Arc::new(AtomicU64::new(0));
        let worker_unhandled = unhandled.clone();
        // One worker per service delivers its notifications in order.
        tokio::spawn(async move {
            while let Some(queued) = receiver.recv().await {
                match queued {
                    Queued::Notification(notification) => {
                        // A handler that panics loses its own notification,
                        // not the worker: later ones are still delivered
                        // and the count still comes down (as a request's
                        // panic is answered, not left waiting).
                        let handling = AssertUnwindSafe(async {
                            worker_handler.notification(notification).await;
                        });
                        if handling.catch_unwind().await.is_err() {
                            tracing::error!(
                                "a service's notification handler panicked; that notification is lost"
                            );
                        }
                        worker_unhandled.fetch_sub(1, Ordering::AcqRel);
                    }
                    Queued::Marker(handled) => {
                        let _ = handled.send(());
                    }
                }
            }
        });
        Arc::new(LocalService {
            id: RwLock::new(String::new()),
            metadata: Mutex::new(metadata),
            handler,
            notifications: sender,
            unhandled,
            dropped_notifications: AtomicU64::new(0),
        })
    }

    pub(crate) fn id(&self) -> String {
        self.id.read().clone()
    }

    pub(crate) fn dropped_notifications(&self) -> u64 {
        self.dropped_notifications.load(Ordering::Relaxed)
    }

    /// Queues `notification` for the worker, or counts it dropped when the
    /// queue is full (the reader never waits for a handler).
    fn queue(&self, notification: Notification) {
        // Counted before it is queued: the worker may handle it at once.
        self.unhandled.fetch_add(1, Ordering::AcqRel);
        if self
            .notifications
            .try_send(Queued::Notification(notification))
            .is_err()
        {
            self.unhandled.fetch_sub(1, Ordering::AcqRel);
            self.dropped_notifications.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Resolves once every notification queued before this call has been
    /// handled (at once if none is waiting, or the worker is gone).
    pub(crate) async fn notifications_handled(&self) {
        // Every call's answer waits here (the tools consumer settles its
        // callbacks): with nothing queued, no round trip to the worker.
        if self.unhandled.load(Ordering::Acquire) == 0 {
            return;
        }
        let (handled, done) = oneshot::channel();
        if self
            .notifications
            .send(Queued::Marker(handled))
            .await
            .is_ok()
        {
            let _ = done.await;
        }
    }
}

/// What waits for the answer to one of our requests.
enum Waiter {
    /// A call: its answer, or [`Error::LocalTimeout`] from the deadline
    /// watcher (`watch_deadlines`).
    Call {
        sender: oneshot::Sender<Result<Box<RawValue>, Error>>,
        deadline: Instant,
        wait: Duration,
        /// Tell the hub with `$/cancelRequest` when it times out here.
        cancel_on_timeout: bool,
    },
    /// The reader binds the new id to the service before reading on.
    Register(Arc<LocalService>, oneshot::Sender<Result<String, RpcError>>),
    /// The reader installs the snapshot before reading on.
    Subscribe(oneshot::Sender<Result<(), RpcError>>),
}

/// Bytes waiting for the socket, with backpressure for senders that can wait.
#[derive(Default)]
struct Outbox {
    state: Mutex<(Vec<u8>, bool)>,
    writer_wake: Notify,
    space: Notify,
}

impl Outbox {
    /// Appends without waiting (the reader's answers must never block it).
    fn push_now(&self, write: impl FnOnce(&mut Vec<u8>)) -> Result<(), Error> {
        let mut state = self.state.lock();
        if state.1 {
            return Err(Error::Closed);
        }
        let was_empty = state.0.is_empty();
        write(&mut state.0);
        drop(state);
        if was_empty {
            self.writer_wake.notify_one();
        }
        Ok(())
    }

    /// Appends once fewer than `HIGH_WATER` bytes wait: waits for the socket only.
    async fn push(&self, write: impl FnOnce(&mut Vec<u8>)) -> Result<(), Error> {
        loop {
            let space = self.space.notified();
            tokio::pin!(space);
            space.as_mut().enable();
            {
                let state = self.state.lock();
                if state.1 {
                    return Err(Error::Closed);
                }
                if state.0.len() < HIGH_WATER {
                    drop(state);
                    return self.push_now(write);
                }
            }
            space.await;
        }
    }

    fn close(&self) {
        self.state.lock().1 = true;
        self.writer_wake.notify_one();
        self.space.notify_waiters();
    }
}

pub(crate) struct Connection {
    outbox: Outbox,
    pending: Mutex<HashMap<i64, Waiter>>,
    /// When each `Waiter::Call` gives up.
    deadlines: Deadlines,
    next_id: AtomicI64,
    /// Our services on this connection, by the id the hub gave them.
    served: RwLock<HashMap<String, Arc<LocalService>>>,
    /// Requests being served, by the hub's id, to cancel on `$/cancelRequest`.
    incoming: Mutex<HashMap<u64, CancellationToken>>,
    feed: Arc<CatalogFeed>,
    /// Cleared when this connection is replaced, so a dying connection never
    /// touches the catalog its successor maintains.
    feeds_catalog: AtomicBool,
    closed: CancellationToken,
    init: OnceLock<InitializeResult>,
}

impl Connection {
    /// Connects, starts the reader and writer, and initializes.
    pub(crate) async fn open(
        endpoint: &Endpoint,
        client_name: &str,
        feed: Arc<CatalogFeed>,
    ) -> Result<Arc<Self>, Error> {
        let (reader, writer, token) = transport::open(endpoint).await?;
        let conn = Arc::new(Connection {
            outbox: Outbox::default(),
            pending: Mutex::new(HashMap::new()),
            deadlines: Deadlines::default(),
            next_id: AtomicI64::new(1),
            served: RwLock::new(HashMap::new()),
            incoming: Mutex::new(HashMap::new()),
            feed,
            feeds_catalog: AtomicBool::new(true),
            closed: CancellationToken::new(),
            init: OnceLock::new(),
        });
        tokio::spawn(run_reader(conn.clone(), reader));
        tokio::spawn(run_writer(conn.clone(), writer));
        tokio::spawn(watch_deadlines(conn.clone()));
        let params = InitializeParams {
            protocol_versions: Some(vec![Cow::Borrowed(PROTOCOL_VERSION)]),
            auth_token: token.as_deref().map(Cow::Borrowed),
            client_info: Some(ClientInfo {
                name: Cow::Borrowed(client_name),
                version: Some(Cow::Borrowed(env!("CARGO_PKG_VERSION"))),
            }),
            ..InitializeParams::default()
        };
        let raw = conn
            .call(method::INITIALIZE, &params, Duration::from_secs(30))
            .await?;
        let result: InitializeResult = serde_json::from_str(raw.get()).map_err(Error::Decode)?;
        let _ = conn.init.set(result);
        Ok(conn)
    }

    pub(crate) fn init(&self) -> &InitializeResult {
        self.init
            .get()
            .expect("a Connection is only handed out after initialize")
    }

    pub(crate) fn is_closed(&self) -> bool {
        self.closed.is_cancelled()
    }

    pub(crate) async fn closed(&self) {
        self.closed.cancelled().await
    }

    pub(crate) fn close(&self) {
        self.feeds_catalog.store(false, Ordering::Release);
        self.outbox.close();
        self.closed.cancel();
    }

    pub(crate) fn stop_feeding_catalog(&self) {
        self.feeds_catalog.store(false, Ordering::Release);
    }

    fn next_id(&self) -> i64 {
        self.next_id.fetch_add(1, Ordering::Relaxed)
    }

    async fn send_request(
        &self,
        id: i64,
        method: &str,
        params: &impl Serialize,
    ) -> Result<(), Error> {
        let id = jsonrpc::Id::Number(id);
        let request = jsonrpc::Request::new(&id, method, params);
        self.push_message(&request, "request").await
    }

    /// Queues `message` as one line, unless it is longer than the hub's
    /// `maxMessageBytes`: the hub would close the connection (and every
    /// service on it) for it, so it is refused here with the error the hub
    /// gives a message over a limit, and nothing is sent. `what` names it.
    async fn push_message(&self, message: &impl Serialize, what: &str) -> Result<(), Error> {
        // Before `initialize` is answered the limit is not known yet.
        let max = self.init.get().map(|init| init.limits.max_message_bytes);
        let mut encoded = Ok(());
        self.outbox
            .push(|buf| {
                let start = buf.len();
                encoded = serde_json::to_writer(&mut *buf, message).map_err(Error::Encode);
                if encoded.is_err() {
                    // Half a message is not sent either.
                    buf.truncate(start);
                    return;
                }
                let length = (buf.len() - start) as u64;
                if let Some(max) = max.filter(|&max| length > max) {
                    buf.truncate(start);
                    let error = too_long(what, length, max);
                    encoded = Err(Error::Rpc(RpcError {
                        code: error.code,
                        message: error.message,
                        data: error.data,
                    }));
                    return;
                }
                buf.push(b'\n');
            })
            .await?;
        encoded
    }

    /// A request to the hub itself (or, through `clientService/request`, to a
    /// service). Dropping the future before the answer removes the waiter and,
    /// with `cancel_on_drop`, tells the hub with `$/cancelRequest`.
    pub(crate) async fn call(
        self: &Arc<Self>,
        method: &str,
        params: &impl Serialize,
        wait: Duration,
    ) -> Result<Box<RawValue>, Error> {
        self.call_inner(method, params, wait, false).await
    }

    pub(crate) async fn call_inner(
        self: &Arc<Self>,
        method: &str,
        params: &impl Serialize,
        wait: Duration,
        cancel_on_drop: bool,
    ) -> Result<Box<RawValue>, Error> {
        let id = self.next_id();
        let (sender, receiver) = oneshot::channel();
        let deadline = Instant::now() + wait;
        let waiter = Waiter::Call {
            sender,
            deadline,
            wait,
            cancel_on_timeout: cancel_on_drop,
        };
        self.pending.lock().insert(id, waiter);
        self.deadlines.add(id, deadline);
        let guard = CallGuard {
            conn: self,
            id,
            cancel_on_drop,
        };
        self.send_request(id, method, params).await?;
        let answer = receiver.await;
        std::mem::forget(guard);
        // A dropped sender: the connection closed.
        answer.unwrap_or(Err(Error::Closed))
    }

    /// Call `id` waited its whole `wait` (the deadline watcher only).
    fn time_out(&self, id: i64) {
        let Some(waiter) = self.pending.lock().remove(&id) else {
            return; // answered meanwhile
        };
        if let Waiter::Call {
            sender,
            wait,
            cancel_on_timeout,
            ..
        } = waiter
        {
            if cancel_on_timeout {
                self.send_cancel(id);
            }
            let _ = sender.send(Err(Error::LocalTimeout(wait)));
        }
    }

    fn send_cancel(&self, id: i64) {
        let _ = self.outbox.push_now(|buf| {
            let id = RawValue::from_string(id.to_string()).expect("an integer is JSON");
            let params = CancelParams { id: &id };
            let message = jsonrpc::Notification::new(method::CANCEL_REQUEST, params);
            let _ = serde_json::to_writer(&mut *buf, &message);
            buf.push(b'\n');
        });
    }

    pub(crate) async fn notify_raw(
        &self,
        method: &str,
        params: &impl Serialize,
    ) -> Result<(), Error> {
        let message = jsonrpc::Notification::new(method, params);
        self.push_message(&message, "notification").await
    }

    /// Registers `local` on this connection; the reader binds the new id.
    pub(crate) async fn register(
        self: &Arc<Self>,
        local: &Arc<LocalService>,
    ) -> Result<String, Error> {
        let id = self.next_id();
        let (sender, receiver) = oneshot::channel();
        self.pending
            .lock()
            .insert(id, Waiter::Register(local.clone(), sender));
        let metadata = local.metadata.lock().clone();
        let params = RegisterServiceParams {
            metadata: &metadata,
        };
        self.send_request(id, method::REGISTER_SERVICE, &params)
            .await?;
        match tokio::time::timeout(Duration::from_secs(30), receiver).await {
            Ok(Ok(result)) => result.map_err(Error::Rpc),
            Ok(Err(_)) => Err(Error::Closed),
            Err(_) => Err(Error::LocalTimeout(Duration::from_secs(30))),
        }
    }

    pub(crate) fn forget_service(&self, service_id: &str) {
        self.served.write().remove(service_id);
    }

    /// Subscribes to the catalog; the reader installs the snapshot.
    pub(crate) async fn subscribe(self: &Arc<Self>) -> Result<(), Error> {
        let id = self.next_id();
        let (sender, receiver) = oneshot::channel();
        self.pending.lock().insert(id, Waiter::Subscribe(sender));
        let params = SubscribeParams {
            channel: Cow::Borrowed(CATALOG_CHANNEL),
        };
        self.send_request(id, method::SUBSCRIBE, &params).await?;
        match tokio::time::timeout(Duration::from_secs(30), receiver).await {
            Ok(Ok(result)) => result.map_err(Error::Rpc),
            Ok(Err(_)) => Err(Error::Closed),
            Err(_) => Err(Error::LocalTimeout(Duration::from_secs(30))),
        }
    }

    /// Handles one message from the hub (reader task only).
    fn on_message(self: &Arc<Self>, bytes: &[u8]) {
        match jsonrpc::decode(bytes) {
            Ok(Message::Response { id, outcome }) => self.on_response(id, outcome),
            Ok(Message::Request { id, method, params }) => {
                if method.name() == method::HANDLE_REQUEST {
                    self.serve_request(id, params);
                } else {
                    let error = ErrorObject::new(
                        ErrorCode::MethodNotFound,
                        format!("this client serves no method {:?}", method.name()),
                    );
                    self.answer(id.get(), Err(error));
                }
            }
            Ok(Message::Notification { method, params }) => {
                let raw = params.map_or("null", RawValue::get);
                match method.name().as_ref() {
                    method::NOTIFICATION => self.deliver_notification(raw),
                    method::ACTION if self.feeds_catalog.load(Ordering::Acquire) => {
                        match serde_json::from_str::<ActionParams>(raw) {
                            Ok(action) => self.feed.apply(action),
                            Err(error) => tracing::warn!(%error, "unreadable catalog action"),
                        }
                    }
                    method::CANCEL_REQUEST => {
                        #[derive(serde::Deserialize)]
                        struct Cancel {
                            id: u64,
                        }
                        if let Ok(cancel) = serde_json::from_str::<Cancel>(raw) {
                            if let Some(token) = self.incoming.lock().remove(&cancel.id) {
                                token.cancel();
                            }
                        }
                    }
                    _ => {}
                }
            }
            Err(error) => tracing::warn!(%error, "unreadable message from the hub"),
        }
    }

    fn on_response(&self, id: &RawValue, outcome: Outcome<'_>) {
        let Ok(id) = id.get().parse::<i64>() else {
            return;
        };
        let Some(waiter) = self.pending.lock().remove(&id) else {
            return;
        };
        if let Waiter::Call { deadline, .. } = &waiter {
            self.deadlines.remove(id, *deadline);
        }
        let result: Result<Box<RawValue>, RpcError> = match outcome {
            Outcome::Result(raw) => Ok(raw.to_owned()),
            Outcome::Error(raw) => Err(serde_json::from_str::<ErrorObject>(raw.get())
                .map(RpcError::from_object)
                .unwrap_or_else(|_| RpcError {
                    code: ErrorCode::InternalError.code(),
                    message: "malformed error object".into(),
                    data: None,
                })),
        };
        match waiter {
            Waiter::Call { sender, .. } => {
                let _ = sender.send(result.map_err(Error::Rpc));
            }
            Waiter::Register(local, sender) => {
                let bound = result.and_then(|raw| {
                    serde_json::from_str::<RegisterServiceResult>(raw.get()).map_err(|e| RpcError {
                        code: ErrorCode::InternalError.code(),
                        message: format!("malformed registerService result: {e}"),
                        data: None,
                    })
                });
                let bound = bound.map(|registered| {
                    *local.id.write() = registered.service_id.clone();
                    self.served
                        .write()
                        .insert(registered.service_id.clone(), local);
                    registered.service_id
                });
                let _ = sender.send(bound);
            }
            Waiter::Subscribe(sender) => {
                let installed = result.and_then(|raw| {
                    let result: SubscribeResult =
                        serde_json::from_str(raw.get()).map_err(|e| RpcError {
                            code: ErrorCode::InternalError.code(),
                            message: format!("malformed subscribe result: {e}"),
                            data: None,
                        })?;
                    if self.feeds_catalog.load(Ordering::Acquire) {
                        self.feed.install(result.snapshot);
                    }
                    Ok(())
                });
                let _ = sender.send(installed);
            }
        }
    }

    fn deliver_notification(&self, raw: &str) {
        let Ok(routed) = serde_json::from_str::<RoutedParams>(raw) else {
            return tracing::warn!("unreadable clientService/notification");
        };
        let Some(local) = self.served.read().get(&routed.service_id).cloned() else {
            return;
        };
        let notification = Notification {
            service_id: routed.service_id,
            sender_client_id: routed.sender_client_id,
            sender_principal: routed.sender_principal,
            method: routed.method,
            params: routed.params,
        };
        local.queue(notification);
    }

    fn serve_request(self: &Arc<Self>, id: &RawValue, params: Option<&RawValue>) {
        let raw_id = id.get().to_owned();
        let routed = params.and_then(|p| serde_json::from_str::<RoutedParams>(p.get()).ok());
        let (Some(routed), Ok(forwarded_id)) = (routed, raw_id.parse::<u64>()) else {
            let error = ErrorObject::new(
                ErrorCode::InvalidParams,
                "malformed clientService/handleRequest",
            );
            return self.answer(&raw_id, Err(error));
        };
        let Some(local) = self.served.read().get(&routed.service_id).cloned() else {
            let error = ErrorObject::new(
                ErrorCode::NotFound,
                format!("this client no longer serves {:?}", routed.service_id),
            );
            return self.answer(&raw_id, Err(error));
        };
        let cancelled = CancellationToken::new();
        self.incoming.lock().insert(forwarded_id, cancelled.clone());
        let request = Request {
            service_id: routed.service_id,
            sender_client_id: routed.sender_client_id,
            sender_principal: routed.sender_principal,
            method: routed.method,
            params: routed.params,
            cancelled: cancelled.clone(),
        };
        let finishes = local.handler.finishes_when_cancelled(&request.method);
        let conn = self.clone();
        tokio::spawn(async move {
            let handled = AssertUnwindSafe(local.handler.request(request)).catch_unwind();
            let outcome = if finishes {
                let outcome = handled.await;
                (!cancelled.is_cancelled()).then_some(outcome)
            } else {
                // The handler is polled first, so one that watches
                // `cancelled` gets to finish its own cleanup; one that does
                // not is dropped.
                tokio::select! {
                    biased;
                    outcome = handled => Some(outcome),
                    () = cancelled.cancelled() => None,
                }
            };
            conn.incoming.lock().remove(&forwarded_id);
            match outcome {
                // Cancelled: the hub already answered the caller.
                None => {}
                Some(Ok(reply)) => conn.answer(&raw_id, reply),
                Some(Err(_)) => conn.answer(
                    &raw_id,
                    Err(ErrorObject::new(
                        ErrorCode::InternalError,
                        "the service's handler panicked",
                    )),
                ),
            }
        });
    }

    /// Answers the hub's request `raw_id`. An answer longer than the hub's
    /// `maxMessageBytes` is not sent (the hub would close this connection,
    /// and every service on it with it): the caller gets a `LimitExceeded`
    /// error saying how long it was instead.
    fn answer(&self, raw_id: &str, reply: Result<Box<RawValue>, ErrorObject>) {
        // A hub that asks before answering `initialize` gets no check.
        let max = self.init.get().map(|init| init.limits.max_message_bytes);
        let _ = self.outbox.push_now(|buf| {
            let start = buf.len();
            write_answer(buf, raw_id, &reply);
            // The frame's length, without its newline.
            let length = (buf.len() - start - 1) as u64;
            if let Some(max) = max.filter(|&max| length > max) {
                buf.truncate(start);
                write_answer(buf, raw_id, &Err(too_long("service's answer", length, max)));
            }
        });
    }

    /// Fails everything still waiting on this connection.
    fn shut_down(&self) {
        self.outbox.close();
        self.closed.cancel();
        let waiters: Vec<Waiter> = self.pending.lock().drain().map(|(_, w)| w).collect();
        drop(waiters); // dropped senders answer `Error::Closed`
        self.deadlines.clear();
        for (_, token) in self.incoming.lock().drain() {
            token.cancel();
        }
    }
}

/// The error for a message of `length` bytes that the hub's `max`
/// (`maxMessageBytes`) does not take: `LimitExceeded`, with the `data` the
/// hub gives a message over that bound.
fn too_long(what: &str, length: u64, max: u64) -> ErrorObject {
    ErrorObject::new(
        ErrorCode::LimitExceeded,
        format!(
            "the {what} is {length} bytes; the hub takes at most {max} bytes in one message (maxMessageBytes); not sent"
        ),
    )
    .with_data(&serde_json::json!({
        "reason": "tooLarge",
        "limit": switchboard_protocol::limits::names::MAX_MESSAGE_BYTES,
        "max": max,
    }))
}

/// The answer to `raw_id` as one line, appended to `buf`.
fn write_answer(buf: &mut Vec<u8>, raw_id: &str, reply: &Result<Box<RawValue>, ErrorObject>) {
    buf.extend_from_slice(b"{\"jsonrpc\":\"2.0\",\"id\":");
    buf.extend_from_slice(raw_id.as_bytes());
    match reply {
        Ok(result) => {
            buf.extend_from_slice(b",\"result\":");
            buf.extend_from_slice(result.get().as_bytes());
        }
        Err(error) => {
            buf.extend_from_slice(b",\"error\":");
            let _ = serde_json::to_writer(&mut *buf, error);
        }
    }
    buf.extend_from_slice(b"}\n");
}

/// Removes a call's waiter if its future is dropped before the answer.
struct CallGuard<'a> {
    conn: &'a Arc<Connection>,
    id: i64,
    cancel_on_drop: bool,
}

impl Drop for CallGuard<'_> {
    fn drop(&mut self) {
        let Some(waiter) = self.conn.pending.lock().remove(&self.id) else {
            return;
        };
        if let Waiter::Call { deadline, .. } = waiter {
            self.conn.deadlines.remove(self.id, deadline);
        }
        if self.cancel_on_drop {
            self.conn.send_cancel(self.id);
        }
    }
}

/// Fails each call whose deadline passed (`deadlines.rs`): one timer for
/// the connection, moved earlier only when an earlier deadline arrives.
/// Ends with the connection.
async fn watch_deadlines(conn: Arc<Connection>) {
    let timer = tokio::time::sleep_until(Instant::now());
    tokio::pin!(timer);
    let mut armed = None;
    loop {
        tokio::select! {
            () = &mut timer, if armed.is_some() => {
                for id in conn.deadlines.expire(Instant::now()) {
                    conn.time_out(id);
                }
            }
            () = conn.deadlines.earlier_added() => {}
            () = conn.closed.cancelled() => return,
        }
        armed = conn.deadlines.armed();
        if let Some(at) = armed {
            // Later than where it was (the common case) costs no wake-up.
            timer.as_mut().reset(at);
        }
    }
}

async fn run_reader(conn: Arc<Connection>, mut reader: Reader) {
    loop {
        let read = tokio::select! {
            read = reader.read_batch(|message| conn.on_message(message)) => read,
            () = conn.closed.cancelled() => break,
        };
        match read {
            Ok(true) => {}
            Ok(false) => break,
            Err(error) => {
                tracing::debug!(%error, "reading from the hub failed");
                break;
            }
        }
    }
    conn.shut_down();
}

async fn run_writer(conn: Arc<Connection>, mut writer: Writer) {
    let mut batch = Vec::new();
    loop {
        let wake = conn.outbox.writer_wake.notified();
        {
            let mut state = conn.outbox.state.lock();
            if state.0.is_empty() {
                if state.1 {
                    break;
                }
            } else {
                std::mem::swap(&mut state.0, &mut batch);
            }
        }
        if batch.is_empty() {
            wake.await;
            continue;
        }
        let written = writer.write_batch(&batch).await;
        batch.clear();
        conn.outbox.space.notify_waiters();
        if written.is_err() {
            conn.shut_down();
            break;
        }
    }
    writer.close().await;
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::service::{BoxFuture, Reply};
    use switchboard_protocol::principal::Principal;

    /// Panics on `panic`; records every other method it is given.
    struct Handled(Mutex<Vec<String>>);

    impl Handler for Handled {
        fn request(&self, _request: Request) -> BoxFuture<Reply> {
            Box::pin(async { Err(ErrorObject::new(ErrorCode::MethodNotFound, "none")) })
        }

        fn notification(&self, notification: Notification) -> BoxFuture<()> {
            assert_ne!(notification.method, "panic", "the handler panics");
            self.0.lock().push(notification.method);
            Box::pin(async {})
        }
    }

    fn notification(method: &str) -> Notification {
        Notification {
            service_id: "s".into(),
            sender_client_id: "c".into(),
            sender_principal: Principal::Direct,
            method: method.into(),
            params: None,
        }
    }

    /// The count `notifications_handled` trusts comes back to zero after a
    /// handler panicked: a stuck count would make every later settle a
    /// round trip to the worker, and a dead worker would never lower it.
    #[tokio::test]
    async fn the_unhandled_count_comes_down_after_a_handler_panics() {
        let handled = Arc::new(Handled(Mutex::new(Vec::new())));
        let metadata = RawValue::from_string("{}".into()).unwrap();
        let local = LocalService::new(metadata, handled.clone());
        local.queue(notification("panic"));
        local.queue(notification("after"));
        tokio::time::timeout(Duration::from_secs(20), local.notifications_handled())
            .await
            .expect("the worker answers the marker");
        assert_eq!(local.unhandled.load(Ordering::Acquire), 0);
        assert_eq!(local.dropped_notifications(), 0);
        assert_eq!(*handled.0.lock(), ["after"]);
    }
}
