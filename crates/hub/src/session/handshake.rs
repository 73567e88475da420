//! A connection's beginning: `initialize` (versions, the token and who it
//! names, the initial subscriptions) and AHP's `reconnect`, which may take
//! its place as a WebSocket's first message. Only the connection's own
//! reader runs this, so its identity is set once.

use serde::Deserialize;
use serde_json::value::RawValue;
use switchboard_protocol::error::UnsupportedVersionData;
use switchboard_protocol::hub::{
    select_version, ServerInfo, INITIALIZE_META, PROTOCOL_VERSION, RECONNECT_SNAPSHOT,
    ROOT_CHANNEL, SERVER_NAME, SUPPORTED_VERSIONS,
};
use switchboard_protocol::jsonrpc::ErrorObject;
use switchboard_protocol::modules::is_launch_credential;
use switchboard_protocol::{ErrorCode, Principal};

use super::params::{object, string_list, string_member};
use super::{Bearer, Flow, Session};
use crate::channels::{self, Channel, Listed};
use crate::conn::{Identity, Transport};
use crate::ids;
use crate::policy::Authenticated;
use crate::reply;
use crate::state::HubState;
use crate::wire;

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

/// `reconnect` params as AHP sends them: `{channel, clientId,
/// lastSeenServerSeq, subscriptions}`; only `subscriptions` matters here
/// (there is no replay: every listed channel gets a fresh snapshot).
#[derive(Deserialize, Default)]
struct RawReconnect<'a> {
    #[serde(borrow, default)]
    subscriptions: Option<&'a RawValue>,
}

impl Session {
    pub(super) fn initialize(&mut self, id: &RawValue, params: Option<&RawValue>) -> Flow {
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
            // the Unix socket (the supervisor checks, `supervise.rs`).
            // Never the bearer's.
            let Some(supervisor) = self.hub.supervisor.get() else {
                tracing::warn!("refused a launch credential: this hub runs no supervisor");
                return None;
            };
            return match supervisor.authenticate(credential, self.peer) {
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
    pub(super) fn reconnect(&mut self, id: &RawValue, params: Option<&RawValue>) {
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
