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
