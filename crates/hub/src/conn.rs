//! One client connection, as every other part of the hub sees it.
//!
//! A `Conn` is shared (`Arc`) by its own reader and writer, by the services
//! it owns, by pending requests that involve it and by the catalog's
//! subscriber list. Its fields say who may change them.
//!
//! Nothing a `Conn` holds keeps another connection alive once that one has
//! closed: its flow-control backlog holds weak references, and every table
//! entry naming a peer is removed when either side leaves (`teardown.rs`).

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock, Weak};

use parking_lot::Mutex;

use crate::ids::ConnId;
use crate::metrics::Counters;
use crate::outbound::{Framing, Outbound};
use crate::pending;
use crate::policy::PrincipalRef;
use crate::wire;

/// Which listener a connection came through, or which part of the hub
/// made it (for logs, metrics and the dashboard).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transport {
    Unix,
    WebSocket,
    /// A client in the hub's own process (an add-on's, such as the MCP
    /// gateway behind `/mcp`), over an in-memory pipe (`in_process.rs`).
    InProcess,
    /// A WebSocket over TLS on the remote listener (`--remote`): only named
    /// principals authenticate there.
    Remote,
    /// Another hub of a federation (`link.rs`): its queue is drained by the
    /// federation, not by a socket writer.
    Link,
    /// A view of the whole catalog (`observe.rs`, `CatalogFeed`): the
    /// federation's, a dashboard page's.
    Feed,
}

impl Transport {
    /// How its queue holds messages: as its writer puts them on the wire.
    pub fn framing(self) -> Framing {
        match self {
            Transport::WebSocket | Transport::Remote => Framing::WebSocketText,
            Transport::Unix | Transport::InProcess | Transport::Link | Transport::Feed => {
                Framing::Lines
            }
        }
    }

    /// Whether a client connected through a listener (not a part of the hub).
    pub fn is_client(self) -> bool {
        matches!(
            self,
            Transport::Unix | Transport::InProcess | Transport::WebSocket | Transport::Remote
        )
    }

    /// Its name in the dashboard and `switchboard top`.
    pub fn label(self) -> &'static str {
        match self {
            Transport::Unix => "unix",
            Transport::InProcess => "in-process",
            Transport::WebSocket => "websocket",
            Transport::Remote => "remote",
            Transport::Link => "hub link",
            Transport::Feed => "catalog feed",
        }
    }
}

/// Who is behind an initialized connection. Set once, by `initialize`.
#[derive(Debug)]
pub struct Identity {
    pub client_id: Box<str>,
    pub principal: Arc<PrincipalRef>,
    /// The SHA-256 of the token it authenticated with (`None`: unverified);
    /// a reload closes the connection when this no longer maps to `principal`.
    pub token_digest: Option<[u8; 32]>,
    /// `"senderClientId":…,"senderPrincipal":…`, encoded once and spliced
    /// into every message this connection sends through the hub.
    pub sender_fields: Box<str>,
}

impl Identity {
    pub fn new(
        client_id: String,
        principal: Arc<PrincipalRef>,
        token_digest: Option<[u8; 32]>,
    ) -> Self {
        let sender_fields = wire::sender_fields(&client_id, &principal.json);
        Identity {
            client_id: client_id.into_boxed_str(),
            principal,
            token_digest,
            sender_fields,
        }
    }
}

/// The request tables a connection holds (see `pending.rs`).
pub type CallerIndex = pending::CallerIndex<Conn>;
pub type OwnerPending = pending::OwnerPending<Conn>;
pub type Entry = pending::Entry<Conn>;
pub type Call = pending::Call<Conn>;
pub type Timers = pending::Timers<Conn>;

pub struct Conn {
    pub id: ConnId,
    pub transport: Transport,
    /// When it was admitted (the dashboard's "connected since").
    pub connected_at: std::time::SystemTime,
    /// Bytes for the peer. Any task pushes; only this connection's writer drains.
    pub out: Outbound,
    /// Written once by this connection's reader at `initialize`.
    identity: OnceLock<Identity>,
    /// Requests this connection made that await an answer (caller side).
    /// Lock order: never held while taking another connection's `pending`.
    pub calls: Mutex<CallerIndex>,
    /// Requests routed to this connection's services (owner side). The single
    /// source of truth for "answered": whoever removes an entry answers it.
    pub pending: Mutex<OwnerPending>,
    /// Incremented only by this connection's reader (no cross-core contention).
    pub counters: Counters,
    /// Connections whose queues this connection's messages pushed past their
    /// soft watermark: its reader lets them drain before reading on. Touched
    /// only by this connection's reader. Weak: a reader that stops right
    /// after congesting a peer leaves its backlog untaken, and two such
    /// peers must not keep each other alive.
    backlog: Mutex<Vec<Weak<Conn>>>,
    /// Set when `backlog` gained an entry, cleared when it is taken: lets
    /// `take_backlog` skip the lock when there is nothing (the WebSocket
    /// reader asks after every frame).
    backlog_noted: AtomicBool,
    /// The hub's count of `Conn`s not yet freed, decremented on drop (see
    /// `HubState::connections_in_memory`).
    allocated: Arc<AtomicUsize>,
}

impl Conn {
    pub fn new(
        id: ConnId,
        transport: Transport,
        out: Outbound,
        allocated: Arc<AtomicUsize>,
    ) -> Arc<Self> {
        allocated.fetch_add(1, Ordering::Relaxed);
        Arc::new(Conn {
            id,
            transport,
            connected_at: std::time::SystemTime::now(),
            out,
            identity: OnceLock::new(),
            calls: Mutex::new(CallerIndex::default()),
            pending: Mutex::new(OwnerPending::default()),
            counters: Counters::default(),
            backlog: Mutex::new(Vec::new()),
            backlog_noted: AtomicBool::new(false),
            allocated,
        })
    }

    /// Notes that a push to `destination` answered `Congested`.
    pub fn wait_for(&self, destination: &Arc<Conn>) {
        let mut backlog = self.backlog.lock();
        if !backlog
            .iter()
            .any(|c| std::ptr::eq(c.as_ptr(), Arc::as_ptr(destination)))
        {
            backlog.push(Arc::downgrade(destination));
            self.backlog_noted.store(true, Ordering::Release);
        }
    }

    /// Whether `wait_for` noted a destination since the backlog was last
    /// taken (one atomic load; a reader checks it after every message).
    pub fn backlog_noted(&self) -> bool {
        self.backlog_noted.load(Ordering::Acquire)
    }

    /// Takes the destinations to let drain (see `wait_for`) that are still
    /// there.
    pub fn take_backlog(&self) -> Vec<Arc<Conn>> {
        // An entry pushed after this load is taken by the next call.
        if !self.backlog_noted() {
            return Vec::new();
        }
        let backlog = {
            let mut backlog = self.backlog.lock();
            self.backlog_noted.store(false, Ordering::Relaxed);
            std::mem::take(&mut *backlog)
        };
        backlog.iter().filter_map(Weak::upgrade).collect()
    }

    pub fn identity(&self) -> Option<&Identity> {
        self.identity.get()
    }

    /// Binds the identity; returns it back if the connection already has one.
    pub fn set_identity(&self, identity: Identity) -> Result<&Identity, Identity> {
        self.identity.set(identity)?;
        Ok(self.identity.get().expect("just set"))
    }

    /// The client id for logs ("-" before initialize).
    pub fn label(&self) -> &str {
        self.identity().map_or("-", |i| &i.client_id)
    }
}

impl Drop for Conn {
    fn drop(&mut self) {
        self.allocated.fetch_sub(1, Ordering::Relaxed);
    }
}
