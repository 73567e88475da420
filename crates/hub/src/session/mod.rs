//! One connection's message handling. Transport-independent and
//! synchronous: a [`Session`] never awaits, so a reader only ever waits on
//! its own socket.
//!
//! This file decodes each message and dispatches it; what a method does is
//! in the file of its concern:
//! - `handshake.rs`: `initialize`, authentication, AHP's `reconnect`;
//! - `services.rs`: services and the catalog (`client/…`, `subscribe`);
//! - `hub_methods.rs`: `hub/reload`, and the add-ons' `hub/…` methods;
//! - `params.rs`: reading params member by member;
//! - the router (`router.rs`, `requests.rs`): notifications, requests,
//!   answers and cancels.

use std::sync::Arc;

use serde_json::json;
use serde_json::value::RawValue;
use switchboard_protocol::hub::{method, CATALOG_CHANNEL};
use switchboard_protocol::json;
use switchboard_protocol::jsonrpc::{self, json_str, ErrorObject, Layout, Message};
use switchboard_protocol::limits::names;
use switchboard_protocol::ErrorCode;

use crate::add_ons::PeerProcess;
use crate::conn::{Conn, Transport};
use crate::metrics::{Counters, NotifyDrop};
use crate::outbound::{Class, Pushed};
use crate::policy::Authenticated;
use crate::registry::LastRoute;
use crate::reply;
use crate::requests;
use crate::router;
use crate::state::HubState;
use crate::wire;

mod handshake;
mod hub_methods;
mod params;
mod services;

use params::object;
use services::RawChannelParams;

/// Whether the transport should keep reading.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[must_use]
pub enum Flow {
    Continue,
    Close,
}

/// What the token on a WebSocket upgrade (`Authorization: Bearer` or
/// `?token=`) said. A `?token=` that does not authenticate is refused at the
/// upgrade; a wrong header is refused at `initialize` (-32007).
#[derive(Debug, Clone)]
pub enum Bearer {
    Valid(Authenticated),
    Invalid,
}

pub struct Session {
    hub: Arc<HubState>,
    conn: Arc<Conn>,
    bearer: Option<Bearer>,
    /// Which process is at the other end, for launch credentials.
    peer: PeerProcess,
    /// The service this connection last notified (`Registry::notify_route`).
    last_notified: LastRoute,
}

impl Session {
    pub fn new(hub: Arc<HubState>, conn: Arc<Conn>, bearer: Option<Bearer>) -> Self {
        let peer = match conn.transport {
            Transport::Unix => PeerProcess::Unix(None),
            // An in-process client is no process of its own. Links and the
            // feed never speak through a session; were one to, it would be
            // no process the hub could check either, like a WebSocket.
            Transport::InProcess
            | Transport::WebSocket
            | Transport::Remote
            | Transport::Link
            | Transport::Feed => PeerProcess::WebSocket,
        };
        Session {
            hub,
            conn,
            bearer,
            peer,
            last_notified: LastRoute::default(),
        }
    }

    /// The peer's pid (`SO_PEERCRED`), on the Unix socket.
    pub fn with_peer_pid(mut self, pid: Option<u32>) -> Self {
        if let PeerProcess::Unix(_) = self.peer {
            self.peer = PeerProcess::Unix(pid);
        }
        self
    }

    pub fn conn(&self) -> &Arc<Conn> {
        &self.conn
    }

    pub fn hub(&self) -> &Arc<HubState> {
        &self.hub
    }

    /// Handles one complete line (without its `\n`).
    pub fn on_message(&mut self, bytes: &[u8]) -> Flow {
        self.on_text(Text::Bytes(bytes), false)
    }

    /// Handles one complete WebSocket message. Unlike a line it may hold
    /// raw line feeds (as whitespace), which outbound queues use to
    /// separate messages: a message that does is handled with them
    /// replaced by spaces, the same JSON. The decoder's walk says whether
    /// it does, so the usual frame costs no scan of its own.
    pub fn on_frame(&mut self, bytes: &[u8]) -> Flow {
        self.on_text(Text::Bytes(bytes), true)
    }

    /// [`Session::on_frame`] of a text message whose UTF-8 the frame reader
    /// already checked (a whole text frame, or one assembled from
    /// fragments): not checked again.
    pub fn on_text_frame(&mut self, text: &str) -> Flow {
        self.on_text(Text::Utf8(text), true)
    }

    fn on_text(&mut self, text: Text<'_>, may_hold_line_feeds: bool) -> Flow {
        // JSON whitespace only: a form feed around a message is -32700.
        let text = text.trim_space();
        let bytes = text.bytes();
        if bytes.is_empty() {
            return Flow::Continue;
        }
        let mut layout = Layout::default();
        let decoded = match text {
            Text::Bytes(bytes) => jsonrpc::decode_indexed(bytes, &mut layout),
            Text::Utf8(text) => jsonrpc::decode_text_indexed(text, &mut layout),
        };
        if may_hold_line_feeds && layout.line_feed {
            let flattened: Vec<u8> = bytes
                .iter()
                .map(|&b| if b == b'\n' { b' ' } else { b })
                .collect();
            return self.on_text(Text::Bytes(&flattened), false);
        }
        Counters::inc(&self.conn.counters.messages_received);
        Counters::add(&self.conn.counters.bytes_received, bytes.len());
        if self.hub.log_payloads() {
            log_payload(&self.conn, bytes);
        }
        match decoded {
            Err(error) => {
                Counters::inc(&self.conn.counters.protocol_errors);
                let object = ErrorObject::new(error.code, error.message)
                    .with_data(&json!({ "reason": error.reason }));
                self.reply_error(error.id, &object);
                Flow::Continue
            }
            Ok(Message::Request { id, method, params }) => {
                self.on_request(id, &method.name(), params, &layout)
            }
            Ok(Message::Notification { method, params }) => {
                self.on_notification(&method.name(), params, &layout);
                Flow::Continue
            }
            Ok(Message::Response { id, outcome }) => {
                if self.conn.identity().is_some() {
                    router::response(&self.hub, &self.conn, id, outcome, layout.depth);
                } else {
                    Counters::inc(&self.conn.counters.responses_dropped);
                }
                Flow::Continue
            }
        }
    }

    /// A message over `maxMessageBytes`: answer -32600 with id null, then close.
    pub fn too_large(&mut self, size: Option<usize>) -> Flow {
        let max = self.hub.limits.max_message_bytes;
        let size = size.map_or_else(|| format!("over {max} bytes"), |s| format!("{s} bytes"));
        let error = ErrorObject::new(
            ErrorCode::InvalidRequest,
            format!(
                "message is {size}; at most {max} bytes are allowed (maxMessageBytes); closing"
            ),
        )
        .with_data(&json!({ "reason": "tooLarge", "limit": names::MAX_MESSAGE_BYTES, "max": max }));
        Counters::inc(&self.conn.counters.protocol_errors);
        self.reply_error(None, &error);
        self.conn.out.drain_and_close();
        Flow::Close
    }

    fn reply_error(&self, id: Option<&RawValue>, error: &ErrorObject) {
        let _: Pushed = self.conn.out.push(Class::Essential, |buf| {
            wire::error(buf, id.map(RawValue::get), error)
        });
    }

    fn reply_result(&self, id: &RawValue, result: &str) {
        let _: Pushed = self
            .conn
            .out
            .push(Class::Essential, |buf| wire::result(buf, id.get(), result));
    }

    fn reply(&self, id: &RawValue, outcome: Result<String, ErrorObject>) {
        match outcome {
            Ok(result) => self.reply_result(id, &result),
            Err(error) => self.reply_error(Some(id), &error),
        }
    }

    /// `layout`: what `decode_indexed` found (the members of `params`, the
    /// message's depth).
    fn on_request(
        &mut self,
        id: &RawValue,
        name: &str,
        params: Option<&RawValue>,
        layout: &Layout<'_>,
    ) -> Flow {
        match name {
            method::PING => {
                self.reply_result(id, "null");
                return Flow::Continue;
            }
            method::INITIALIZE => return self.initialize(id, params),
            method::RECONNECT => {
                self.reconnect(id, params);
                return Flow::Continue;
            }
            _ => {}
        }
        let conn = self.conn.clone();
        let Some(identity) = conn.identity() else {
            let error = ErrorObject::new(
                ErrorCode::InvalidRequest,
                format!("{name}: the connection is not initialized; send initialize first"),
            )
            .with_data(&json!({ "reason": "notInitialized" }));
            self.reply_error(Some(id), &error);
            return Flow::Continue;
        };
        match name {
            method::REGISTER_SERVICE => self.reply(id, self.register(identity, params)),
            method::UNREGISTER_SERVICE => self.reply(id, self.unregister(params)),
            method::UPDATE_SERVICE => self.reply(id, self.update(identity, params)),
            method::SUBSCRIBE => self.subscribe(id, params),
            method::REQUEST => router::request(&self.hub, &self.conn, identity, id, params, layout),
            method::RELOAD => self.reply(id, self.reload(identity)),
            method::NOTIFY | method::CANCEL_REQUEST | method::UNSUBSCRIBE => {
                let error = reply::invalid_request(
                    "notificationWithId",
                    format!("{name} is a notification: send it without an id"),
                );
                self.reply_error(Some(id), &error);
            }
            _ => {
                if let Some(answer) = self.add_on_request(identity, name, params) {
                    self.reply(id, answer);
                    return Flow::Continue;
                }
                // Among them AHP's agent, session, resource and terminal
                // commands: this hub routes client services and hosts none.
                let error = ErrorObject::new(
                    ErrorCode::MethodNotFound,
                    format!("unknown method {name:?}"),
                )
                .with_data(&json!({ "method": name }));
                self.reply_error(Some(id), &error);
            }
        }
        Flow::Continue
    }

    fn on_notification(&mut self, name: &str, params: Option<&RawValue>, layout: &Layout<'_>) {
        let counters = &self.conn.counters;
        let Some(identity) = self.conn.identity() else {
            return counters.notification_dropped(NotifyDrop::NotInitialized);
        };
        match name {
            method::NOTIFY => router::notify(
                &self.hub,
                &self.conn,
                identity,
                params,
                layout,
                &mut self.last_notified,
            ),
            method::CANCEL_REQUEST => requests::cancel(&self.hub, &self.conn, params),
            method::UNSUBSCRIBE => {
                let channel = object::<RawChannelParams<'_>>(params)
                    .ok()
                    .and_then(|p| json_str(p.channel?).ok());
                // `ahp-root://` has no actions: nothing to stop.
                if channel.as_deref() == Some(CATALOG_CHANNEL) {
                    self.hub.registry.unsubscribe(&self.conn);
                }
            }
            _ => counters.notification_dropped(NotifyDrop::UnknownMethod),
        }
    }
}

/// A message as read: bytes, or text whose UTF-8 was already checked.
#[derive(Clone, Copy)]
enum Text<'a> {
    Bytes(&'a [u8]),
    Utf8(&'a str),
}

impl<'a> Text<'a> {
    fn bytes(self) -> &'a [u8] {
        match self {
            Text::Bytes(bytes) => bytes,
            Text::Utf8(text) => text.as_bytes(),
        }
    }

    /// Without the JSON whitespace around it ([`json::trim_space`]).
    fn trim_space(self) -> Self {
        match self {
            Text::Bytes(bytes) => Text::Bytes(json::trim_space(bytes)),
            Text::Utf8(text) => {
                Text::Utf8(text.trim_matches(|c: char| u8::try_from(c).is_ok_and(json::is_space)))
            }
        }
    }
}

/// Logs one inbound message (`log_payloads = true`), except the ones that
/// may carry a token (`initialize`, or anything naming `authToken`): tokens
/// are never logged.
fn log_payload(conn: &Conn, bytes: &[u8]) {
    let carries_token = memchr::memmem::find(bytes, b"authToken").is_some()
        || matches!(
            jsonrpc::decode(bytes),
            Ok(Message::Request { method: name, .. }) if name.name() == method::INITIALIZE
        );
    if carries_token {
        tracing::debug!(
            target: "switchboard::payload",
            client = conn.label(),
            "message withheld: it may carry a token"
        );
    } else {
        tracing::debug!(
            target: "switchboard::payload",
            client = conn.label(),
            message = %String::from_utf8_lossy(bytes),
        );
    }
}
