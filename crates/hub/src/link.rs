//! The hub's side of a federation (`docs/federation.md`): what the
//! `switchboard-federation` crate may do to a running hub, and nothing more.
//! The hub itself never talks to NATS.
//!
//! - A [`Link`] is another hub (one instance of it) as a connection of this
//!   one (`Transport::Link`). The services of that hub are ordinary catalog
//!   entries owned by the link, so routing to them is the local path: a
//!   notification is appended to the link's queue, a request gets an
//!   ordinary pending entry on it (deadline, in-flight bounds, cancel,
//!   exactly one answer). The federation drains the link's queue
//!   ([`Link::next_batch`]) and publishes it to that hub. What that hub
//!   sends back comes in through [`Link::deliver`], which acts as the
//!   remote callers (requests, notifications, cancels) and as the remote
//!   owner (answers to what this hub forwarded). Closing a link is a
//!   connection leaving: its services are removed (`disconnected`), what
//!   was pending on it fails with -32052, what it asked is cancelled.
//! - A [`CatalogFeed`] (`observe.rs`, shared with the dashboard) is the
//!   catalog as the federation sees it: a subscription with the `direct`
//!   principal's view, so its snapshot plus actions are exactly the local
//!   changes to publish.
//!
//! Invariant: nothing here awaits but [`Link::next_batch`],
//! [`Link::let_destinations_drain`] and [`CatalogFeed::next_batch`], which
//! only the federation's own tasks call; a slow NATS can fill a link's queue
//! (bounded like any other: notifications shed, then the link is aborted)
//! but never stalls the routing of local connections.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use parking_lot::Mutex;
use serde_json::value::RawValue;
use switchboard_protocol::error::GoneReason;
use switchboard_protocol::hub::method;
use switchboard_protocol::json;
use switchboard_protocol::jsonrpc::{self, ErrorObject, Layout, Message};
use switchboard_protocol::limits::MAX_METADATA_DEPTH;
use switchboard_protocol::{scan, Principal};

use crate::admission::ShuttingDown;
use crate::conn::{Conn, Identity, Transport};
use crate::metrics::Counters;
use crate::outbound::Batch;
use crate::policy::PrincipalRef;
use crate::registry::{callback_flag, CallbackFlagError, LastRoute, RemoteUpdate};
use crate::requests;
use crate::router;
use crate::state::HubState;
use crate::teardown;
use crate::transport;
use crate::wire;

pub use crate::observe::CatalogFeed;

/// `clientService/notification`, the method a hub forwards notifications as.
const NOTIFICATION: &str = "clientService/notification";
/// `clientService/handleRequest`, the method a hub forwards requests as.
const HANDLE_REQUEST: &str = "clientService/handleRequest";

/// Remote callers whose identity is kept per link; past this the cache
/// starts over (an identity is rebuilt from the message in microseconds).
const MAX_IDENTITIES: usize = 4096;

/// Why a line from another hub was dropped (the federation counts them).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dropped {
    /// Not JSON-RPC, or not the shape a hub sends.
    Malformed,
    /// Over `maxMessageBytes`.
    TooLarge,
    /// It names a sender that is not this link's hub's to name: a client
    /// id without that hub's prefix, or a principal of some other hub.
    Impersonation,
    /// A method hubs do not send each other.
    UnknownMethod,
    /// The link is closed.
    Closed,
}

impl Dropped {
    pub const ALL: [Dropped; 5] = [
        Dropped::Malformed,
        Dropped::TooLarge,
        Dropped::Impersonation,
        Dropped::UnknownMethod,
        Dropped::Closed,
    ];

    pub fn label(self) -> &'static str {
        match self {
            Dropped::Malformed => "malformed",
            Dropped::TooLarge => "too_large",
            Dropped::Impersonation => "impersonation",
            Dropped::UnknownMethod => "unknown_method",
            Dropped::Closed => "closed",
        }
    }
}

/// Why a service of another hub was not listed or changed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RemoteServiceError {
    #[error("service id {0:?} does not belong to hub {1:?}")]
    NotItsId(String, String),
    #[error("client id {0:?} does not belong to hub {1:?}")]
    NotItsClient(String, String),
    #[error("the principal is already of hub {0:?}")]
    RemotePrincipal(String),
    #[error("metadata is not a JSON object of at most {max} bytes nesting at most {MAX_METADATA_DEPTH} levels")]
    Metadata { max: u64 },
    #[error("metadata of service {id:?}: {error}")]
    Callback {
        id: String,
        error: CallbackFlagError,
    },
    #[error("service {0:?} cannot become a callback service or stop being one")]
    CallbackChanged(String),
    #[error("service id {0:?} is taken")]
    Taken(String),
    #[error("this link lists no service {0:?}")]
    Unknown(String),
    #[error("the link is closed")]
    Closed,
}

/// A service as its owner hub describes it (its own, hub-less view).
#[derive(Debug, Clone, Copy)]
pub struct RemoteService<'a> {
    pub service_id: &'a str,
    pub client_id: &'a str,
    /// The owner's principal on its own hub (no `hub`).
    pub principal: &'a Principal,
    pub metadata: &'a RawValue,
}

/// Whether `id` is `prefix` and the 32 hex digits a hub mints
/// (`ids::mint`): exactly, so that hub `a` cannot pass off `svc-a-b-…`,
/// an id of hub `a-b`.
fn minted_with(id: &str, prefix: &str) -> bool {
    id.strip_prefix(prefix)
        .is_some_and(|random| random.len() == 32 && random.bytes().all(|b| b.is_ascii_hexdigit()))
}

/// Another hub of the federation, as a connection of this one.
pub struct Link {
    hub: Arc<HubState>,
    conn: Arc<Conn>,
    peer: Box<str>,
    /// `c-<peer>-` and `svc-<peer>-`: the ids that hub mints.
    client_prefix: Box<str>,
    service_prefix: Box<str>,
    /// The identities of that hub's callers, keyed by their sender fields.
    identities: Mutex<Identities>,
    closed: AtomicBool,
}

#[cfg(test)]
mod tests {
    use super::minted_with;

    #[test]
    fn ids_must_be_exactly_what_their_hub_mints() {
        let hex = "0123456789abcdef0123456789abcdef";
        assert!(minted_with(&format!("svc-a-{hex}"), "svc-a-"));
        assert!(!minted_with(&format!("svc-a-b-{hex}"), "svc-a-"));
        assert!(!minted_with(&format!("svc-a-{hex}0"), "svc-a-"));
        assert!(!minted_with(&format!("svc-b-{hex}"), "svc-a-"));
        assert!(!minted_with("svc-a-", "svc-a-"));
    }
}

/// One of the link hub's callers.
struct Caller {
    identity: Identity,
    last_notified: LastRoute,
}

#[derive(Default)]
struct Identities {
    /// Each with the service that caller last notified (`LastRoute`: its
    /// identity is fixed, so the notify decision can be kept for it).
    by_sender: std::collections::HashMap<Box<str>, Caller, foldhash::fast::RandomState>,
    /// Scratch for the lookup key.
    key: String,
}

impl Link {
    /// Opens a link to hub `peer` (a hub name, `config::is_hub_name`).
    pub fn open(hub: &Arc<HubState>, peer: &str) -> Result<Link, ShuttingDown> {
        let limits = &hub.limits;
        let conn = hub.admission.admit_internal(
            Transport::Link,
            limits.notify_shed_bytes,
            limits.slow_consumer_bytes,
        )?;
        tracing::debug!(peer, "federation link opened");
        Ok(Link {
            hub: hub.clone(),
            conn,
            peer: peer.into(),
            client_prefix: format!("c-{peer}-").into(),
            service_prefix: format!("svc-{peer}-").into(),
            identities: Mutex::new(Identities::default()),
            closed: AtomicBool::new(false),
        })
    }

    /// The hub at the other end.
    pub fn peer(&self) -> &str {
        &self.peer
    }

    /// Lists a service of the link's hub in this hub's catalog (an `added`
    /// action for every subscriber whose grants let it see it).
    pub fn add_service(&self, service: RemoteService<'_>) -> Result<(), RemoteServiceError> {
        let (json, principal, callback) = self.service_json(&service)?;
        if !self.hub.registry.register_remote(
            &self.conn,
            service.service_id,
            json,
            PrincipalRef::new(principal),
            callback,
        ) {
            return Err(RemoteServiceError::Taken(service.service_id.into()));
        }
        Ok(())
    }

    /// New metadata for a service this link listed (an `updated` action).
    pub fn update_service(&self, service: RemoteService<'_>) -> Result<(), RemoteServiceError> {
        let (json, _, callback) = self.service_json(&service)?;
        let id = service.service_id;
        match self
            .hub
            .registry
            .update_remote(&self.conn, id, json, service.metadata, callback)
        {
            RemoteUpdate::Updated => Ok(()),
            RemoteUpdate::Unknown => Err(RemoteServiceError::Unknown(id.into())),
            RemoteUpdate::CallbackChanged => Err(RemoteServiceError::CallbackChanged(id.into())),
        }
    }

    /// Removes a service this link listed (`removed` with `reason`) and fails
    /// what is pending on it; `false` if it lists no such service.
    pub fn remove_service(&self, service_id: &str, reason: GoneReason) -> bool {
        match self
            .hub
            .registry
            .unregister_remote(&self.conn, service_id, reason)
        {
            Some(route) => {
                requests::service_removed(&self.hub, &route, reason);
                true
            }
            None => false,
        }
    }

    /// How many services this link lists.
    pub fn service_count(&self) -> usize {
        self.hub.registry.owned_count(&self.conn)
    }

    /// The `Service` object with `hub`, the owner's principal on its hub,
    /// and whether it is a callback service (its metadata's `callback`, read
    /// as for a local service: the owner's hub decides who may use it, this
    /// hub who may see it and send to it, each by its own grants).
    fn service_json(
        &self,
        service: &RemoteService<'_>,
    ) -> Result<(Box<str>, Principal, bool), RemoteServiceError> {
        if self.closed.load(Ordering::Acquire) {
            return Err(RemoteServiceError::Closed);
        }
        let peer = || self.peer.to_string();
        if !minted_with(service.service_id, &self.service_prefix) {
            return Err(RemoteServiceError::NotItsId(
                service.service_id.into(),
                peer(),
            ));
        }
        if !minted_with(service.client_id, &self.client_prefix) {
            return Err(RemoteServiceError::NotItsClient(
                service.client_id.into(),
                peer(),
            ));
        }
        if let Some(hub) = service.principal.hub() {
            return Err(RemoteServiceError::RemotePrincipal(hub.into()));
        }
        let max = self.hub.limits.max_metadata_bytes;
        let metadata = service.metadata.get();
        let metadata_ok = metadata.starts_with('{')
            && metadata.len() as u64 <= max
            && json::depth(metadata).is_ok_and(|depth| depth <= MAX_METADATA_DEPTH);
        if !metadata_ok {
            return Err(RemoteServiceError::Metadata { max });
        }
        let callback =
            callback_flag(service.metadata).map_err(|error| RemoteServiceError::Callback {
                id: service.service_id.into(),
                error,
            })?;
        let principal = service.principal.clone().on_hub(&*self.peer);
        let principal_json =
            serde_json::to_string(&principal).expect("a principal always serializes");
        let mut buf = Vec::with_capacity(160 + metadata.len());
        buf.extend_from_slice(b"{\"serviceId\":");
        wire::json_string(&mut buf, service.service_id);
        buf.extend_from_slice(b",\"clientId\":");
        wire::json_string(&mut buf, service.client_id);
        buf.extend_from_slice(b",\"principal\":");
        buf.extend_from_slice(principal_json.as_bytes());
        buf.extend_from_slice(b",\"metadata\":");
        buf.extend_from_slice(metadata.as_bytes());
        buf.extend_from_slice(b",\"hub\":");
        wire::json_string(&mut buf, &self.peer);
        buf.push(b'}');
        let json = String::from_utf8(buf).expect("JSON assembled from JSON text is UTF-8");
        Ok((json.into_boxed_str(), principal, callback))
    }

    /// Handles one line the link's hub sent: a request or notification from
    /// one of its clients to a service here, a cancel, or the answer to a
    /// request this hub forwarded to it. Routed like a local connection's
    /// message; nothing here awaits.
    pub fn deliver(&self, line: &[u8]) -> Result<(), Dropped> {
        let line = json::trim_space(line);
        if line.is_empty() {
            return Ok(());
        }
        if self.closed.load(Ordering::Acquire) {
            return Err(Dropped::Closed);
        }
        if line.len() as u64 > self.hub.limits.max_message_bytes {
            return Err(Dropped::TooLarge);
        }
        Counters::inc(&self.conn.counters.messages_received);
        let mut layout = Layout::default();
        let message = jsonrpc::decode_indexed(line, &mut layout).map_err(|_| {
            Counters::inc(&self.conn.counters.protocol_errors);
            Dropped::Malformed
        })?;
        match message {
            Message::Request { id, method, params } => {
                if method.name() != HANDLE_REQUEST {
                    return Err(Dropped::UnknownMethod);
                }
                // The caller hub's forwarded id: unique on that hub, so it
                // works as the caller's id on this link.
                if id.get().parse::<u64>().is_err() {
                    return Err(Dropped::Malformed);
                }
                let mut identities = self.identities.lock();
                let caller = self.caller(&mut identities, params, &layout)?;
                router::request(&self.hub, &self.conn, &caller.identity, id, params, &layout);
            }
            Message::Notification { method, params } => match &*method.name() {
                NOTIFICATION => {
                    let mut identities = self.identities.lock();
                    let caller = self.caller(&mut identities, params, &layout)?;
                    router::notify(
                        &self.hub,
                        &self.conn,
                        &caller.identity,
                        params,
                        &layout,
                        &mut caller.last_notified,
                    );
                }
                method::CANCEL_REQUEST => requests::cancel(&self.hub, &self.conn, params),
                _ => return Err(Dropped::UnknownMethod),
            },
            Message::Response { id, outcome } => {
                router::response(&self.hub, &self.conn, id, outcome, layout.depth);
            }
        }
        Ok(())
    }

    /// The remote caller named by a forwarded message's `senderClientId`
    /// and `senderPrincipal`: that hub's client, with `"hub": <that hub>`
    /// added to its principal, and the service it last notified.
    fn caller<'i, 'm>(
        &self,
        identities: &'i mut Identities,
        params: Option<&'m RawValue>,
        layout: &Layout<'m>,
    ) -> Result<&'i mut Caller, Dropped> {
        let params = params
            .filter(|p| p.get().starts_with('{'))
            .ok_or(Dropped::Malformed)?;
        let (mut client_id, mut principal) = (None, None);
        let mut take = |member: json::Member<'m>| {
            if member.key.is("senderClientId") {
                client_id = Some(member.value);
            } else if member.key.is("senderPrincipal") {
                principal = Some(member.value);
            }
        };
        match layout.params.members_of(params.get()) {
            Some(members) => members.for_each(&mut take),
            None => scan::members(params).for_each(&mut take),
        }
        let (Some(client_id), Some(principal)) = (client_id, principal) else {
            return Err(Dropped::Malformed);
        };
        let Identities { by_sender, key } = identities;
        key.clear();
        key.push_str(client_id);
        key.push('\n');
        key.push_str(principal);
        if !by_sender.contains_key(key.as_str()) {
            let identity = self.new_identity(client_id, principal)?;
            if by_sender.len() >= MAX_IDENTITIES {
                by_sender.clear();
            }
            let caller = Caller {
                identity,
                last_notified: LastRoute::default(),
            };
            by_sender.insert(key.as_str().into(), caller);
        }
        by_sender.get_mut(key.as_str()).ok_or(Dropped::Malformed)
    }

    fn new_identity(&self, client_id: &str, principal: &str) -> Result<Identity, Dropped> {
        let client_id: String = serde_json::from_str(client_id).map_err(|_| Dropped::Malformed)?;
        let principal: Principal =
            serde_json::from_str(principal).map_err(|_| Dropped::Malformed)?;
        if !minted_with(&client_id, &self.client_prefix) || principal.hub().is_some() {
            return Err(Dropped::Impersonation);
        }
        let principal = PrincipalRef::new(principal.on_hub(&*self.peer));
        Ok(Identity::new(client_id, principal, None))
    }

    /// Pauses (at most 20 ms) while the local queues this link's messages
    /// congested drain, as a reader does between reads (`transport.rs`).
    pub async fn let_destinations_drain(&self) {
        transport::let_destinations_drain(&self.conn).await
    }

    /// Waits for bytes for the link's hub (whole lines) and swaps them into
    /// `buf`, which must be empty; `false` once the link is closed or aborted.
    pub async fn next_batch(&self, buf: &mut Vec<u8>) -> bool {
        matches!(self.conn.out.next_batch(buf).await, Batch::Write)
    }

    /// The batch taken by [`Link::next_batch`], `len` bytes, is on its way
    /// in the buffer the caller took from it (handed to NATS without a
    /// copy).
    pub fn written_len(&self, len: usize) {
        self.conn.out.written_len(len);
    }

    /// Bytes waiting for the link's hub.
    pub fn queued_bytes(&self) -> usize {
        self.conn.out.queued_bytes()
    }

    /// Requests forwarded to the link's hub and not yet answered.
    pub fn pending(&self) -> usize {
        self.conn.pending.lock().len()
    }

    /// The link's hub cannot be reached (NATS said no one listens, or this
    /// hub lost NATS): every request pending on it fails with -32052
    /// `disconnected`; the link stays. Returns how many failed.
    pub fn fail_pending(&self) -> usize {
        requests::fail_all_pending(&self.hub, &self.conn, GoneReason::Disconnected)
    }

    /// Request `forwarded_id` could not be sent (`error`, usually -32050);
    /// `false` if it was settled already.
    pub fn fail_request(&self, forwarded_id: u64, error: &ErrorObject) -> bool {
        requests::fail_one(&self.hub, &self.conn, forwarded_id, error)
    }

    /// Whether the overload policy aborted the link (its queue passed
    /// `slowConsumerBytes`); the federation then closes it and opens another.
    pub fn is_aborted(&self) -> bool {
        self.conn.out.is_aborted()
    }

    /// The link's hub left (or is no longer the instance it was): its
    /// services are removed (`disconnected`), what is pending on it fails
    /// with -32052, what it asked is cancelled at the owners. Idempotent.
    pub fn close(&self) {
        if self.closed.swap(true, Ordering::AcqRel) {
            return;
        }
        teardown::disconnect(&self.hub, &self.conn);
        teardown::release(&self.hub, &self.conn);
        tracing::debug!(peer = &*self.peer, "federation link closed");
    }
}

impl Drop for Link {
    fn drop(&mut self) {
        self.close();
    }
}
