//! What the federation's tasks share: the options, the fabric (client,
//! name, instance, the peer table, the connection and join state), a peer,
//! and what joining yields. Every other module of the crate imports this
//! one; it imports none of them.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use async_nats::jetstream::kv;
use parking_lot::RwLock;
use switchboard_hub::link::Link;
use switchboard_hub::HubState;
use tokio::sync::watch as channel;

use crate::metrics::Metrics;

/// `federation.serviceTtlMs` when nothing sets it.
pub const DEFAULT_SERVICE_TTL: Duration = Duration::from_millis(15_000);

/// How to join a fabric (`--nats`, `--hub-name`, `[federation]`).
#[derive(Debug, Clone)]
pub struct FederationOptions {
    /// The NATS server (`nats://HOST:PORT`, `tls://…`; user and password
    /// may be in the URL, and are never logged).
    pub nats: String,
    /// This hub's name: 1-64 characters `[a-z0-9-]`, unique among the hubs.
    pub name: String,
    /// A NATS credentials file (JWT and NKey seed).
    pub credentials: Option<PathBuf>,
    /// PEM CA certificates to trust for the server's TLS.
    pub tls_ca: Option<PathBuf>,
    /// How soon other hubs forget this hub's services after it vanishes.
    pub service_ttl: Duration,
}

/// This hub holds its name: the bucket, and the claim's revision then.
#[derive(Clone)]
pub struct Joined {
    pub store: kv::Store,
    pub claim_revision: u64,
    /// The bucket's `max_age`: `serviceTtlMs` as the fabric has it.
    pub ttl: Duration,
}

/// Another hub (one instance of it), as the relay sees it.
pub struct Peer {
    pub name: String,
    pub instance: String,
    pub link: Link,
    /// The flow-control window towards this hub (`relay.rs`).
    pub window: Window,
}

/// Flow control between two hubs: the link writer publishes a message only
/// while fewer than [`Window::SIZE`] bytes of lines are beyond what the
/// other hub says it has taken, so when that hub falls behind, this hub's link queue fills and
/// its own flow control and shedding act at the source, instead of NATS
/// dropping the excess on the way (core NATS has no backpressure).
#[derive(Default)]
pub struct Window {
    /// Bytes of lines published to the peer (only its writer adds).
    pub sent: std::sync::atomic::AtomicU64,
    /// The most of them the peer has said it took (its credits).
    pub taken: std::sync::atomic::AtomicU64,
    /// Woken by each credit.
    pub credit: tokio::sync::Notify,
    /// Of the peer's lines to this hub: the `Switchboard-Sent` of the last
    /// credit this hub sent back (only the reader touches it).
    pub credited: std::sync::atomic::AtomicU64,
}

impl Window {
    /// The most bytes in flight towards one hub.
    pub const SIZE: u64 = 4 << 20;
    /// A credit goes back after this many bytes taken.
    pub const CREDIT_STEP: u64 = 256 << 10;
    /// The longest a writer waits for a credit before it publishes anyway.
    /// Credits carry the sender's own count, so any line taken after a loss
    /// credits the lost ones too; only a loss of the last `SIZE` bytes
    /// before a pause leaves nothing to credit, and costs one such wait.
    pub const WAIT: std::time::Duration = std::time::Duration::from_secs(5);

    /// Bytes published and not yet taken.
    pub fn in_flight(&self) -> u64 {
        use std::sync::atomic::Ordering::Relaxed;
        self.sent
            .load(Relaxed)
            .saturating_sub(self.taken.load(Relaxed))
    }
}

/// What every task of the federation shares.
pub struct Fabric {
    pub hub: Arc<HubState>,
    pub name: String,
    pub instance: String,
    pub client: async_nats::Client,
    pub metrics: Arc<Metrics>,
    pub options: FederationOptions,
    /// The other hubs, by name; only `watch` writes it.
    pub peers: RwLock<HashMap<String, Arc<Peer>>>,
    /// Whether the NATS connection is up (the event callback writes it).
    pub connected: channel::Receiver<bool>,
    /// Set once this hub holds its name (`join::claim`), cleared on leave.
    pub joined: channel::Sender<Option<Joined>>,
    /// Cancelled when the hub leaves the fabric.
    pub stop: tokio_util::sync::CancellationToken,
    /// Where NATS says "no responders" for the lines this hub publishes:
    /// `<inbox>.<peer>` (`relay.rs`).
    pub no_responders: String,
}

/// A federation prepared (`join::prepare`) and not yet started.
pub struct PreparedFabric {
    pub name: String,
    pub instance: String,
    pub client: async_nats::Client,
    pub metrics: Arc<Metrics>,
    pub options: FederationOptions,
    pub connected: channel::Receiver<bool>,
    pub joined: Option<Joined>,
}

impl Fabric {
    /// Subscribes to `subject`, trying again every half second while NATS
    /// refuses; `None` once the hub leaves the fabric. `what` names the
    /// subscription in the log.
    pub async fn subscribe(&self, subject: String, what: &str) -> Option<async_nats::Subscriber> {
        loop {
            match self.client.subscribe(subject.clone()).await {
                Ok(subscriber) => return Some(subscriber),
                Err(error) => {
                    tracing::warn!(%error, "cannot subscribe to {what} yet");
                    tokio::select! {
                        () = self.stop.cancelled() => return None,
                        () = tokio::time::sleep(Duration::from_millis(500)) => {}
                    }
                }
            }
        }
    }
}
