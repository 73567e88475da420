//! Hubs on several machines as one fabric over NATS
//! (`docs/reference/federation.md`; the design is `docs/federation.md`).
//!
//! A hub started with `--nats URL --hub-name NAME` runs a [`Federation`]
//! beside it. The hub knows nothing of NATS: it gets a [`Federated`] (its
//! name, this crate's `/metrics` figures) in its options, and this crate
//! drives it through `switchboard_hub::link`.
//!
//! - [`fabric`]: the names the hubs agree on (bucket, keys, subjects,
//!   headers, values);
//! - `join`: connecting, the bucket, the claim on the name;
//! - `nats_log`: the NATS connection in the log (each change once,
//!   repeats at most once a minute);
//! - `export`: this hub's services into the bucket, with heartbeats;
//! - `watch`: the bucket into this hub's catalog (other hubs as links);
//! - `relay`: lines between hubs (a writer per link, one reader);
//! - [`metrics`]: the figures.
//!
//! Invariant: the hub's routing never waits on anything here. Each task
//! owns its state: `watch` the view of the other hubs (and is the only one
//! to open or close links), `export` what this hub published, each link's
//! writer its link's queue, the reader the inbound subscription.

mod export;
pub mod fabric;
#[cfg(feature = "fuzzing")]
#[doc(hidden)]
pub mod fuzzing;
mod join;
pub mod metrics;
mod nats_log;
mod relay;
mod shared;
mod split;
mod watch;

use std::sync::Arc;
use std::time::Duration;

use parking_lot::RwLock;
use switchboard_hub::{Federated, FederationMetrics, HubState};
use tokio::sync::watch as channel;
use tokio_util::task::TaskTracker;

pub use join::JoinError;
use metrics::Metrics;
use shared::{Fabric, PreparedFabric};
pub use shared::{FederationOptions, DEFAULT_SERVICE_TTL};

/// A directive for the binary's log filter (`tracing-subscriber`'s
/// `EnvFilter`): async-nats logs each of its connection events at info,
/// `event: client error: nats: IO error` once per attempt while NATS is
/// away. This crate logs those events itself, each change of state once and
/// repeats at most once a minute, so the client's own lines are kept to its
/// warnings and errors.
pub const NATS_CLIENT_LOG_DIRECTIVE: &str = "async_nats=warn";

/// The federation of a hub, from start to [`Federation::leave`].
pub struct Federation {
    fabric: Arc<Fabric>,
    tasks: TaskTracker,
}

/// A federation joined (or waiting for NATS) but not yet attached to a hub.
pub struct Prepared {
    fabric: Arc<PreparedFabric>,
}

/// The `/metrics` part of this crate, as the hub sees it.
#[derive(Debug)]
struct MetricsHook {
    name: String,
    metrics: Arc<Metrics>,
}

impl FederationMetrics for MetricsHook {
    fn render_metrics(&self, out: &mut String) {
        self.metrics.render(&self.name, out);
    }
}

impl Prepared {
    /// Checks the options, connects to NATS and claims the name. A bad URL,
    /// an unreadable credentials or CA file, refused credentials, or a name
    /// held by another live hub is an error; NATS not answering is not (the
    /// hub serves locally and joins when NATS comes up).
    pub async fn connect(options: FederationOptions) -> Result<Prepared, JoinError> {
        join::prepare(options).await.map(|fabric| Prepared {
            fabric: Arc::new(fabric),
        })
    }

    /// What the hub's options carry (its name, the metrics).
    pub fn federated(&self) -> Federated {
        Federated {
            name: self.fabric.name.clone(),
            metrics: Arc::new(MetricsHook {
                name: self.fabric.name.clone(),
                metrics: self.fabric.metrics.clone(),
            }),
        }
    }

    /// The hub did not start after all: gives the name back at once.
    pub async fn abandon(self) {
        if let Some(joined) = &self.fabric.joined {
            let _ = joined
                .store
                .delete(fabric::claim_key(&self.fabric.name))
                .await;
        }
    }

    /// Starts the federation's tasks on the running hub.
    pub fn start(self, hub: Arc<HubState>) -> Federation {
        let prepared = Arc::try_unwrap(self.fabric).unwrap_or_else(|_| {
            unreachable!("a Prepared fabric is shared with nothing before start")
        });
        let no_responders = prepared.client.new_inbox();
        let fabric = Arc::new(Fabric {
            hub,
            name: prepared.name,
            instance: prepared.instance,
            client: prepared.client,
            metrics: prepared.metrics,
            options: prepared.options,
            peers: RwLock::default(),
            connected: prepared.connected,
            joined: channel::Sender::new(prepared.joined),
            stop: tokio_util::sync::CancellationToken::new(),
            no_responders,
        });
        let tasks = TaskTracker::new();
        tasks.spawn(join::keep_joined(fabric.clone()));
        tasks.spawn(export::run(fabric.clone()));
        tasks.spawn(watch::run(fabric.clone(), tasks.clone()));
        tasks.spawn(relay::read(fabric.clone()));
        tasks.spawn(relay::watch_no_responders(fabric.clone()));
        Federation { fabric, tasks }
    }
}

impl Federation {
    /// This hub's name in the fabric.
    pub fn name(&self) -> &str {
        &self.fabric.name
    }

    /// Leaves the fabric: this hub's services and claim are removed from
    /// the bucket at once (the other hubs see `removed`, `disconnected`),
    /// links are closed (what is pending on them fails with -32052), the
    /// NATS connection is drained. Bounded: at most [`LEAVE_GRACE`].
    pub async fn leave(self) {
        let fabric = self.fabric;
        fabric.stop.cancel();
        self.tasks.close();
        if tokio::time::timeout(LEAVE_GRACE, async {
            self.tasks.wait().await;
            join::leave(&fabric).await;
        })
        .await
        .is_err()
        {
            tracing::warn!("leaving the fabric took longer than {LEAVE_GRACE:?}");
        }
        for peer in fabric.peers.write().drain() {
            peer.1.link.close();
        }
    }
}

/// The bound on [`Federation::leave`].
pub const LEAVE_GRACE: Duration = Duration::from_secs(3);
