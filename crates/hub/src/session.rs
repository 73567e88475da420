//! One connection's message handling: lifecycle, services, catalog, and the
//! hand-off to the router. Transport-independent and synchronous: a
//! [`Session`] never awaits, so a reader only ever waits on its own socket.

use std::borrow::Cow;
use std::sync::Arc;

use serde::Deserialize;
use serde_json::json;
use serde_json::value::RawValue;
use switchboard_protocol::error::UnsupportedVersionData;
use switchboard_protocol::hub::{
    method, select_version, RegisterServiceResult, ServerInfo, CATALOG_CHANNEL, INITIALIZE_META,
    PROTOCOL_VERSION, RECONNECT_SNAPSHOT, ROOT_CHANNEL, SERVER_NAME, SUPPORTED_VERSIONS,
};
use switchboard_protocol::json;
use switchboard_protocol::jsonrpc::{self, json_str, ErrorObject, Layout, Message};
use switchboard_protocol::limits::{names, MAX_METADATA_DEPTH};
use switchboard_protocol::modules::{is_launch_credential, ModulesResult};
use switchboard_protocol::{ErrorCode, Principal};

use crate::channels::{self, Channel, Listed};
use crate::conn::{Conn, Identity, Transport};
use crate::dashboard;
use crate::ids;
use crate::metrics::{Counters, NotifyDrop};
use crate::modules::launch::Peer;
use crate::outbound::{Class, Pushed};
use crate::policy::Authenticated;
use crate::registry::LastRoute;
use crate::reload;
use crate::reply;
use crate::requests;
use crate::router;
use crate::state::HubState;
use crate::wire;

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
    peer: Peer,
    /// The service this connection last notified (`Registry::notify_route`).
    last_notified: LastRoute,
}

/// Members of `initialize` params, raw so a bad one can be named.
#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct RawInitialize<'a> {
    #[serde(borrow, default)]
    channel: Option<&'a RawValue>,
    #[serde(borrow, default)]
    protocol_versions: Option<&'a RawValue>,
    #[serde(borrow, default)]
    auth_token: Option<&'a RawValue>,
    #[serde(borrow, default)]
    client_info: Option<&'a RawValue>,
    #[serde(borrow, default)]
    initial_subscriptions: Option<&'a RawValue>,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct RawServiceParams<'a> {
    #[serde(borrow, default)]
    service_id: Option<&'a RawValue>,
    #[serde(borrow, default)]
    metadata: Option<&'a RawValue>,
}

#[derive(Deserialize, Default)]
struct RawNameParams<'a> {
    #[serde(borrow, default)]
    name: Option<&'a RawValue>,
}

#[derive(Deserialize, Default)]
struct RawChannelParams<'a> {
    #[serde(borrow, default)]
    channel: Option<&'a RawValue>,
}

/// `reconnect` params as AHP sends them: `{channel, clientId,
/// lastSeenServerSeq, subscriptions}`; only `subscriptions` matters here
/// (there is no replay: every listed channel gets a fresh snapshot).
#[derive(Deserialize, Default)]
struct RawReconnect<'a> {
    #[serde(borrow, default)]
    subscriptions: Option<&'a RawValue>,
}

/// Decodes params that must be an object (absent counts as `{}`).
fn object<'a, T: Deserialize<'a> + Default>(
    params: Option<&'a RawValue>,
) -> Result<T, ErrorObject> {
    match params {
        None => Ok(T::default()),
        Some(raw) if raw.get().starts_with('{') => serde_json::from_str(raw.get())
            .map_err(|error| reply::invalid_params("params", format!("invalid params: {error}"))),
        Some(_) => Err(reply::invalid_params(
            "params",
            "params must be a JSON object",
        )),
    }
}

/// A member that must be a string with Unicode text; the error names it.
fn string_member<'a>(raw: Option<&'a RawValue>, field: &str) -> Result<Cow<'a, str>, ErrorObject> {
    let raw =
        raw.ok_or_else(|| reply::invalid_params(field, format!("{field} must be a string")))?;
    json_str(raw).map_err(|error| reply::invalid_params(field, format!("{field} {error}")))
}

fn string_list<'a>(raw: &'a RawValue, field: &str) -> Result<Vec<Cow<'a, str>>, ErrorObject> {
    let items: Vec<&'a RawValue> = serde_json::from_str(raw.get())
        .map_err(|_| reply::invalid_params(field, format!("{field} must be a list of strings")))?;
    items
        .into_iter()
        .map(|item| {
            json_str(item).map_err(|error| {
                let what = format!("{field} must be a list of strings: an item {error}");
                reply::invalid_params(field, what)
            })
        })
        .collect()
}

fn metadata_member(raw: Option<&RawValue>, max: u64) -> Result<&RawValue, ErrorObject> {
    let metadata = raw
        .filter(|m| m.get().starts_with('{'))
        .ok_or_else(|| reply::invalid_params("metadata", "metadata must be a JSON object"))?;
    let size = metadata.get().len() as u64;
    if size > max {
        return Err(reply::limit(
            names::MAX_METADATA_BYTES,
            max,
            format!("metadata is {size} bytes; at most {max} are allowed"),
        ));
    }
    // Metadata is forwarded up to seven levels down (in `initialize`'s
    // snapshot): deeper than this, a receiver's serde_json could not read it.
    // (A second walk of at most maxMetadataBytes, on a cold path.)
    match json::depth(metadata.get()) {
        Ok(depth) if depth <= MAX_METADATA_DEPTH => Ok(metadata),
        Ok(depth) => Err(reply::invalid_params(
            "metadata",
            format!(
                "metadata nests {depth} levels deep; at most {MAX_METADATA_DEPTH} are allowed, \
                 so that every message carrying it stays readable (serde_json reads 127)"
            ),
        )),
        Err(error) => Err(reply::invalid_params(
            "metadata",
            format!("metadata is not JSON: {error}"),
        )),
    }
}

impl Session {
    pub fn new(hub: Arc<HubState>, conn: Arc<Conn>, bearer: Option<Bearer>) -> Self {
        let peer = match conn.transport {
            Transport::Unix => Peer::Unix(None),
            // Links and the feed never speak through a session; were one
            // to, it would be no process the hub could check, like a WebSocket.
            Transport::WebSocket | Transport::Remote | Transport::Link | Transport::Feed => {
                Peer::WebSocket
            }
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
        if let Peer::Unix(_) = self.peer {
            self.peer = Peer::Unix(pid);
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
            method::MODULES => self.reply(id, self.modules(identity)),
            method::RESTART_MODULE => self.reply(id, self.restart_module(identity, params)),
            method::DASHBOARD_LOGIN => self.reply(id, dashboard::login_code(&self.hub, identity)),
            method::DASHBOARD_SNAPSHOT => {
                self.reply(id, dashboard::snapshot_for(&self.hub, identity))
            }
            method::NOTIFY | method::CANCEL_REQUEST | method::UNSUBSCRIBE => {
                let error = reply::invalid_request(
                    "notificationWithId",
                    format!("{name} is a notification: send it without an id"),
                );
                self.reply_error(Some(id), &error);
            }
            // Among them AHP's agent, session, resource and terminal
            // commands: this hub routes client services and hosts none.
            _ => {
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

    fn initialize(&mut self, id: &RawValue, params: Option<&RawValue>) -> Flow {
        if self.conn.identity().is_some() {
            let error = reply::invalid_request(
                "alreadyInitialized",
                "this connection is already initialized",
            );
            self.reply_error(Some(id), &error);
            return Flow::Continue;
        }
        match self.check_initialize(params) {
            Ok(checked) => {
                self.complete_initialize(id, checked);
                Flow::Continue
            }
            Err(error) => {
                self.reply_error(Some(id), &error);
                // Both end the connection, after the error is flushed.
                if error.code == ErrorCode::AuthRequired.code() {
                    tracing::info!("refused a connection with a missing or wrong token");
                } else if error.code == ErrorCode::UnsupportedProtocolVersion.code() {
                    tracing::info!(
                        "refused a connection that offered no protocol version this hub speaks"
                    );
                } else {
                    return Flow::Continue;
                }
                self.conn.out.drain_and_close();
                Flow::Close
            }
        }
    }

    fn check_initialize(&self, params: Option<&RawValue>) -> Result<CheckedInit, ErrorObject> {
        let params: RawInitialize<'_> = object(params)?;
        if let Some(channel) = params.channel {
            if string_member(Some(channel), "channel")? != ROOT_CHANNEL {
                return Err(reply::invalid_params(
                    "channel",
                    format!("initialize channel must be {ROOT_CHANNEL:?}"),
                ));
            }
        }
        let version = match params.protocol_versions {
            None => PROTOCOL_VERSION.to_owned(),
            Some(versions) => {
                let versions = string_list(versions, "protocolVersions")?;
                select_version(&versions)
                    .map(str::to_owned)
                    .ok_or_else(unsupported_version)?
            }
        };
        let token = match params.auth_token {
            None => None,
            Some(raw) => Some(string_member(Some(raw), "authToken")?),
        };
        if let Some(info) = params.client_info {
            #[derive(Deserialize)]
            struct ClientInfo<'a> {
                #[serde(borrow)]
                #[allow(dead_code)]
                name: &'a RawValue,
            }
            let ok = info.get().starts_with('{')
                && serde_json::from_str::<ClientInfo<'_>>(info.get())
                    .is_ok_and(|i| i.name.get().starts_with('"'));
            if !ok {
                return Err(reply::invalid_params(
                    "clientInfo",
                    "clientInfo must be {name, version?}",
                ));
            }
        }
        let mut channels = Listed::default();
        if let Some(raw) = params.initial_subscriptions {
            for uri in string_list(raw, "initialSubscriptions")? {
                let channel = Channel::parse(&uri)
                    .ok_or_else(|| reply::not_found(format!("unknown channel {uri:?}")))?;
                channels.push(channel);
            }
        }
        let authenticated = self.authenticate(token.as_deref()).ok_or_else(|| {
            reply::auth_required(if self.remote() {
                "a valid token of a named principal is required on the remote listener \
                 (authToken, Authorization: Bearer or ?token=)"
            } else {
                "a valid token is required (authToken, Authorization: Bearer or ?token=)"
            })
        })?;
        Ok(CheckedInit {
            authenticated,
            version,
            channels,
        })
    }

    /// Whether this connection came through the remote (TLS) listener, where
    /// only named principals may authenticate.
    fn remote(&self) -> bool {
        self.conn.transport == Transport::Remote
    }

    /// Maps the presented credentials to a principal. A WebSocket may carry a
    /// bearer token; when both it and `authToken` are present they must name
    /// the same principal.
    fn authenticate(&self, token: Option<&str>) -> Option<Authenticated> {
        if let Some(credential) = token.filter(|t| is_launch_credential(t)) {
            // A module's launch credential: only for its own process, on
            // the Unix socket (`modules/launch.rs`). Never the bearer's.
            return match self
                .hub
                .modules
                .launches()
                .authenticate(credential, self.peer)
            {
                Ok(authenticated) => Some(authenticated),
                Err(refusal) => {
                    tracing::warn!(%refusal, "refused a launch credential");
                    None
                }
            };
        }
        let policy = self.hub.registry.policy();
        let authenticated = match (&self.bearer, token) {
            (Some(Bearer::Invalid), _) => None,
            (Some(Bearer::Valid(bearer)), None) => Some(bearer.clone()),
            (Some(Bearer::Valid(bearer)), Some(token)) => policy
                .authenticate(Some(token))
                .filter(|auth| auth.principal.principal == bearer.principal.principal),
            (None, token) => policy.authenticate(token),
        };
        // The user's own (direct) token never authenticates over the
        // network, and neither does the lack of one.
        authenticated.filter(|auth| {
            !self.remote() || matches!(auth.principal.principal, Principal::Reserved { .. })
        })
    }

    fn complete_initialize(&self, id: &RawValue, checked: CheckedInit) {
        let Some(identity) = self.establish(checked.authenticated) else {
            return; // unreachable: checked above, and only this task sets it
        };
        channels::subscribe(
            &self.hub.registry,
            &self.conn,
            &checked.channels,
            |snapshots, seq| {
                let result =
                    initialize_result(&self.hub, identity, &checked.version, snapshots, seq);
                self.reply_result(id, &result);
            },
        );
    }

    /// Gives the connection its identity: a fresh `clientId`, the
    /// authenticated principal. `None` if it had one already.
    fn establish(&self, authenticated: Authenticated) -> Option<&Identity> {
        let identity = Identity::new(
            ids::mint(&self.hub.client_id_prefix),
            authenticated.principal,
            authenticated.token_digest,
        );
        let identity = self.conn.set_identity(identity).ok()?;
        tracing::debug!(client = %identity.client_id, principal = identity.principal.principal.label(), "initialized");
        Some(identity)
    }

    /// AHP's `reconnect`: a fresh snapshot of each listed channel the hub
    /// serves (unknown ones are left out), and a subscription to it. As a
    /// connection's first message it also initializes the connection, with
    /// the identity of its upgrade's token; a connection without one gets
    /// -32007 and stays open (AHP clients fall back to `initialize`). A
    /// reconnected connection is a new one: services of the old one are
    /// gone, and the `clientId` is new (both are in the result).
    fn reconnect(&mut self, id: &RawValue, params: Option<&RawValue>) {
        let listed = object::<RawReconnect<'_>>(params).and_then(|params| {
            let mut listed = Listed::default();
            if let Some(raw) = params.subscriptions {
                for uri in string_list(raw, "subscriptions")? {
                    if let Some(channel) = Channel::parse(&uri) {
                        listed.push(channel);
                    }
                }
            }
            Ok(listed)
        });
        let listed = match listed {
            Ok(listed) => listed,
            Err(error) => return self.reply_error(Some(id), &error),
        };
        let identity = match (self.conn.identity(), &self.bearer) {
            (Some(identity), _) => identity,
            (None, Some(Bearer::Valid(authenticated))) => {
                match self.establish(authenticated.clone()) {
                    Some(identity) => identity,
                    None => return,
                }
            }
            (None, _) => {
                let error = reply::auth_required(
                    "reconnect as a connection's first message needs a token at the WebSocket \
                     upgrade (Authorization: Bearer or ?token=); send initialize instead",
                );
                return self.reply_error(Some(id), &error);
            }
        };
        channels::subscribe(&self.hub.registry, &self.conn, &listed, |snapshots, seq| {
            let result = reconnect_result(identity, snapshots, seq);
            self.reply_result(id, &result);
        });
    }

    fn register(
        &self,
        identity: &Identity,
        params: Option<&RawValue>,
    ) -> Result<String, ErrorObject> {
        let params: RawServiceParams<'_> = object(params)?;
        let metadata = metadata_member(params.metadata, self.hub.limits.max_metadata_bytes)?;
        let service_id = self.hub.registry.register(
            &self.conn,
            identity,
            metadata,
            self.hub.limits.max_services_per_client,
        )?;
        tracing::debug!(client = %identity.client_id, service = %service_id, "registered a service");
        Ok(serde_json::to_string(&RegisterServiceResult {
            service_id: service_id.into(),
        })
        .expect("serializes"))
    }

    fn unregister(&self, params: Option<&RawValue>) -> Result<String, ErrorObject> {
        let params: RawServiceParams<'_> = object(params)?;
        let service_id = string_member(params.service_id, "serviceId")?;
        let route = self.hub.registry.unregister(&self.conn, &service_id)?;
        requests::service_unregistered(&self.hub, &route);
        Ok("{}".into())
    }

    fn update(
        &self,
        identity: &Identity,
        params: Option<&RawValue>,
    ) -> Result<String, ErrorObject> {
        let params: RawServiceParams<'_> = object(params)?;
        let service_id = string_member(params.service_id, "serviceId")?;
        let metadata = metadata_member(params.metadata, self.hub.limits.max_metadata_bytes)?;
        self.hub
            .registry
            .update(&self.conn, identity, &service_id, metadata)?;
        Ok("{}".into())
    }

    fn subscribe(&self, id: &RawValue, params: Option<&RawValue>) {
        let channel = object::<RawChannelParams<'_>>(params)
            .and_then(|p| string_member(p.channel, "channel"));
        match channel {
            Ok(channel) if channel == ROOT_CHANNEL => {
                let mut result = String::from("{\"snapshot\":");
                channels::push_root_snapshot(&mut result, self.hub.registry.server_seq());
                result.push('}');
                self.reply_result(id, &result);
            }
            Ok(channel) if channel == CATALOG_CHANNEL => {
                self.hub.registry.subscribe(&self.conn, |snapshot, _| {
                    let mut result = String::with_capacity(snapshot.len() + 16);
                    result.push_str("{\"snapshot\":");
                    result.push_str(snapshot);
                    result.push('}');
                    self.reply_result(id, &result);
                });
            }
            Ok(channel) => self.reply_error(
                Some(id),
                &reply::not_found(format!("unknown channel {channel:?}")),
            ),
            Err(error) => self.reply_error(Some(id), &error),
        }
    }

    fn reload(&self, identity: &Identity) -> Result<String, ErrorObject> {
        require_direct(identity, "reload its config")?;
        let result = reload::reload(&self.hub).map_err(|error| {
            ErrorObject::new(
                ErrorCode::InternalError,
                format!("reload failed; the old config stays in force: {error}"),
            )
            .with_data(&json!({ "reason": "config" }))
        })?;
        Ok(serde_json::to_string(&result).expect("serializes"))
    }

    /// `hub/modules`: every module's state and the services its
    /// connections registered.
    fn modules(&self, identity: &Identity) -> Result<String, ErrorObject> {
        require_direct(identity, "list its modules")?;
        let services = self.hub.registry.reserved_service_counts();
        let modules = self
            .hub
            .modules
            .status(|name| services.get(name).copied().unwrap_or(0));
        Ok(serde_json::to_string(&ModulesResult { modules }).expect("serializes"))
    }

    /// `hub/restartModule {name}`: answered once the restart is under way
    /// (`hub/modules` shows it through).
    fn restart_module(
        &self,
        identity: &Identity,
        params: Option<&RawValue>,
    ) -> Result<String, ErrorObject> {
        require_direct(identity, "restart its modules")?;
        let params: RawNameParams<'_> = object(params)?;
        let name = string_member(params.name, "name")?;
        if !self.hub.modules.restart(&name) {
            return Err(reply::not_found(format!(
                "no module {name:?} in the hub's config"
            )));
        }
        Ok("{}".into())
    }
}

/// The hub's own methods are the `direct` principal's alone.
fn require_direct(identity: &Identity, what: &str) -> Result<(), ErrorObject> {
    if identity.principal.principal == Principal::Direct {
        Ok(())
    } else {
        Err(reply::permission_denied(format!(
            "only the hub's own (direct) principal may {what}"
        )))
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

struct CheckedInit {
    authenticated: Authenticated,
    /// The offered entry the connection speaks (`PROTOCOL_VERSION` if none
    /// was offered).
    version: String,
    channels: Listed,
}

fn unsupported_version() -> ErrorObject {
    ErrorObject::new(
        ErrorCode::UnsupportedProtocolVersion,
        format!(
            "none of the offered protocol versions is supported; this hub speaks ^{}; closing",
            SUPPORTED_VERSIONS.join(", ^")
        ),
    )
    .with_data(&UnsupportedVersionData {
        supported_versions: SUPPORTED_VERSIONS.iter().map(|v| v.to_string()).collect(),
    })
}

/// `snapshots`: the array's items, comma-separated.
fn initialize_result(
    hub: &HubState,
    identity: &Identity,
    version: &str,
    snapshots: &str,
    seq: u64,
) -> String {
    let mut out = Vec::with_capacity(1024 + snapshots.len());
    out.extend_from_slice(b"{\"protocolVersion\":");
    wire::json_string(&mut out, version);
    out.extend_from_slice(b",\"clientId\":");
    wire::json_string(&mut out, &identity.client_id);
    out.extend_from_slice(b",\"principal\":");
    out.extend_from_slice(identity.principal.json.as_bytes());
    out.extend_from_slice(b",\"serverSeq\":");
    out.extend_from_slice(itoa::Buffer::new().format(seq).as_bytes());
    out.extend_from_slice(b",\"snapshots\":[");
    out.extend_from_slice(snapshots.as_bytes());
    out.extend_from_slice(b"],\"serverInfo\":");
    let info = ServerInfo {
        name: SERVER_NAME.into(),
        version: env!("CARGO_PKG_VERSION").into(),
    };
    let _ = serde_json::to_writer(&mut out, &info);
    out.extend_from_slice(b",\"limits\":");
    let _ = serde_json::to_writer(&mut out, &hub.limits);
    out.extend_from_slice(b",\"_meta\":");
    out.extend_from_slice(INITIALIZE_META.as_bytes());
    out.push(b'}');
    String::from_utf8(out).expect("JSON text is UTF-8")
}

/// AHP's `ReconnectSnapshotResult` (`{type: "snapshot", snapshots}`), with
/// the connection's new `clientId`, its principal and `serverSeq` beside it
/// (AHP clients ignore members they do not know).
fn reconnect_result(identity: &Identity, snapshots: &str, seq: u64) -> String {
    let mut out = Vec::with_capacity(256 + snapshots.len());
    out.extend_from_slice(b"{\"type\":");
    wire::json_string(&mut out, RECONNECT_SNAPSHOT);
    out.extend_from_slice(b",\"snapshots\":[");
    out.extend_from_slice(snapshots.as_bytes());
    out.extend_from_slice(b"],\"clientId\":");
    wire::json_string(&mut out, &identity.client_id);
    out.extend_from_slice(b",\"principal\":");
    out.extend_from_slice(identity.principal.json.as_bytes());
    out.extend_from_slice(b",\"serverSeq\":");
    out.extend_from_slice(itoa::Buffer::new().format(seq).as_bytes());
    out.push(b'}');
    String::from_utf8(out).expect("JSON text is UTF-8")
}
