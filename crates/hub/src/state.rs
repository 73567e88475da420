//! The hub's shared state: one `HubState` behind an `Arc`, reached by every
//! connection task, the accept loops and the timer task.
//!
//! What acts on it lives beside it, one concern per file: `admission.rs`
//! (which connections it holds), `teardown.rs` (a connection leaving, and
//! shutdown), `reload.rs` (the config), `scrape.rs` (metrics and the sizes
//! tests read).

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

use switchboard_protocol::Limits;
use tokio_util::sync::CancellationToken;

use crate::add_ons::{Observer, Supervisor};
use crate::admission::Admission;
use crate::config::{Config, DashboardConfig};
use crate::conn::Timers;
use crate::federated::Federated;
use crate::metrics::Counters;
use crate::pending::ForwardIds;
use crate::registry::Registry;

/// The URLs of the hub's TCP listeners.
#[derive(Debug, Clone, Default)]
pub struct Listening {
    /// `ws://127.0.0.1:PORT/` (`None`: `--no-ws`).
    pub ws: Option<String>,
    /// `wss://HOST:PORT/` of the remote listener (`None`: off).
    pub remote: Option<String>,
}

pub struct HubState {
    /// Fixed at start; a reload that changes them logs that a restart applies them.
    pub limits: Limits,
    pub registry: Registry,
    pub timers: Timers,
    pub forward_ids: ForwardIds,
    /// Totals of closed connections, and events no connection owns (timeouts).
    pub counters: Counters,
    /// The open connections and the slots they hold.
    pub admission: Admission,
    /// The `[dashboard]` section the hub started with (a reload that
    /// changes it logs that a restart applies it).
    pub dashboard_config: DashboardConfig,
    /// The config file `reload` re-reads (`None`: defaults only).
    pub config_path: Option<PathBuf>,
    /// The add-on that observes the hub (the dashboard), if any: set once
    /// while the hub starts, before it listens (`observe.rs`).
    pub observer: OnceLock<Arc<dyn Observer>>,
    /// The add-on that supervises modules, if any: set once when the
    /// modules start, after the hub listens (`supervise.rs`).
    pub supervisor: OnceLock<Arc<dyn Supervisor>>,
    /// The add-on that serves its own endpoint on the HTTP ports (the MCP
    /// gateway), if any: set once while the hub starts (`endpoint.rs`).
    pub endpoint: OnceLock<crate::add_ons::Endpoint>,
    /// Where the hub listens, as `hub.json` says: set once it does.
    pub listening: OnceLock<Listening>,
    direct_token: String,
    /// Replaced by each reload.
    log_payloads: AtomicBool,
    reloads: AtomicU64,
    /// Cancelled once shutdown begins; accept loops and the timer task stop.
    stopping: CancellationToken,
    /// What minted client ids start with: `c-`, or `c-<hub name>-` on a hub
    /// of a federation.
    pub client_id_prefix: Box<str>,
    /// The federation this hub is part of, if any.
    pub federated: Option<Federated>,
}

impl HubState {
    pub fn new(
        config: &Config,
        config_path: Option<PathBuf>,
        direct_token: String,
        federated: Option<Federated>,
    ) -> Self {
        let policy = Arc::new(config.policy(&direct_token));
        // On a hub of a federation, ids name the hub: the other hubs check
        // that a hub speaks only for its own clients and services.
        let namespace = federated
            .as_ref()
            .map_or_else(String::new, |f| format!("{}-", f.name));
        HubState {
            limits: config.limits.clone(),
            registry: Registry::new(policy, &format!("svc-{namespace}")),
            timers: Timers::default(),
            forward_ids: ForwardIds::default(),
            counters: Counters::default(),
            admission: Admission::new(config.limits.max_connections),
            dashboard_config: config.dashboard.clone(),
            config_path,
            observer: OnceLock::new(),
            supervisor: OnceLock::new(),
            endpoint: OnceLock::new(),
            listening: OnceLock::new(),
            direct_token,
            log_payloads: AtomicBool::new(config.log_payloads),
            reloads: AtomicU64::new(0),
            stopping: CancellationToken::new(),
            client_id_prefix: format!("c-{namespace}").into(),
            federated,
        }
    }

    pub fn direct_token(&self) -> &str {
        &self.direct_token
    }

    pub fn log_payloads(&self) -> bool {
        self.log_payloads.load(Ordering::Relaxed)
    }

    pub fn set_log_payloads(&self, on: bool) {
        self.log_payloads.store(on, Ordering::Relaxed);
    }

    /// Successful reloads so far.
    pub fn reloads(&self) -> u64 {
        self.reloads.load(Ordering::Relaxed)
    }

    pub fn count_reload(&self) {
        self.reloads.fetch_add(1, Ordering::Relaxed);
    }

    pub fn is_stopping(&self) -> bool {
        self.stopping.is_cancelled()
    }

    /// Resolves once shutdown has begun.
    pub async fn stopping(&self) {
        self.stopping.cancelled().await
    }

    /// Marks shutdown as begun (see `teardown::begin_shutdown`).
    pub fn stop(&self) {
        self.stopping.cancel();
    }
}
