//! The hub's shared state and the lifecycle of connections within it.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use parking_lot::Mutex;
use switchboard_protocol::error::GoneReason;
use switchboard_protocol::hub::ReloadResult;
use switchboard_protocol::Limits;
use tokio_util::sync::CancellationToken;

use crate::config::{Config, ConfigError};
use crate::conn::{Conn, Transport};
use crate::ids::{self, ConnId};
use crate::metrics::{self, Counters, Gauges};
use crate::outbound::Outbound;
use crate::pending::{ForwardIds, Timers};
use crate::registry::Registry;
use crate::router;

type FastMap<K, V> = HashMap<K, V, foldhash::fast::RandomState>;

pub struct HubState {
    /// Fixed at start; a reload that changes them logs that a restart applies them.
    pub limits: Limits,
    pub registry: Registry,
    pub timers: Timers,
    pub forward_ids: ForwardIds,
    /// Totals of closed connections, and events no connection owns (timeouts).
    pub counters: Counters,
    /// Every open connection; used by reload, shutdown and metrics.
    conns: Mutex<FastMap<ConnId, Arc<Conn>>>,
    accepted: AtomicU64,
    refused: AtomicU64,
    reloads: AtomicU64,
    direct_token: String,
    config_path: Option<PathBuf>,
    log_payloads: AtomicBool,
    stopping: CancellationToken,
}

/// Sizes of the request bookkeeping (see `pending.rs`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Bookkeeping {
    /// Forwarded requests not yet answered (owner side).
    pub pending: usize,
    /// Caller-side index entries.
    pub calls: usize,
    /// Armed deadlines.
    pub deadlines: usize,
}

/// Why a new connection was refused.
#[derive(Debug)]
pub struct Refused {
    pub max: u64,
}

impl HubState {
    pub fn new(config: &Config, config_path: Option<PathBuf>, direct_token: String) -> Self {
        let policy = Arc::new(config.policy(&direct_token));
        HubState {
            limits: config.limits.clone(),
            registry: Registry::new(policy),
            timers: Timers::default(),
            forward_ids: ForwardIds::default(),
            counters: Counters::default(),
            conns: Mutex::new(FastMap::default()),
            accepted: AtomicU64::new(0),
            refused: AtomicU64::new(0),
            reloads: AtomicU64::new(0),
            direct_token,
            config_path,
            log_payloads: AtomicBool::new(config.log_payloads),
            stopping: CancellationToken::new(),
        }
    }

    pub fn direct_token(&self) -> &str {
        &self.direct_token
    }

    pub fn log_payloads(&self) -> bool {
        self.log_payloads.load(Ordering::Relaxed)
    }

    /// Admits a new connection, or refuses it at `maxConnections`.
    pub fn admit(&self, transport: Transport) -> Result<Arc<Conn>, Refused> {
        let mut conns = self.conns.lock();
        if self.stopping.is_cancelled() || conns.len() as u64 >= self.limits.max_connections {
            self.refused.fetch_add(1, Ordering::Relaxed);
            return Err(Refused {
                max: self.limits.max_connections,
            });
        }
        let out = Outbound::new(
            self.limits.notify_shed_bytes,
            self.limits.slow_consumer_bytes,
        );
        let conn = Conn::new(ids::next_conn_id(), transport, out);
        conns.insert(conn.id, conn.clone());
        self.accepted.fetch_add(1, Ordering::Relaxed);
        Ok(conn)
    }

    /// Tears down what a connection held: its services (published as
    /// `removed`), the requests pending on them (-32052), its own pending
    /// requests (owners get `$/cancelRequest`). Runs once, in the
    /// connection's task, after its reader stopped.
    pub fn disconnect(&self, conn: &Arc<Conn>) {
        conn.out.drain_and_close();
        let routes = self.registry.remove_connection(conn);
        router::owner_gone(self, conn, GoneReason::Disconnected);
        router::caller_gone(self, conn);
        if conn.out.was_slow_consumer() {
            Counters::inc(&conn.counters.slow_consumer_disconnects);
            tracing::warn!(client = conn.label(), "disconnected a slow consumer");
        }
        tracing::debug!(
            client = conn.label(),
            services = routes.len(),
            "connection closed"
        );
    }

    /// Forgets a connection whose task has ended, keeping its counts.
    pub fn release(&self, conn: &Conn) {
        let mut conns = self.conns.lock();
        conns.remove(&conn.id);
        self.counters.absorb(&conn.counters);
    }

    /// Re-reads the config file: new principals, grants and origins apply at
    /// once; subscribers see visibility changes as catalog actions; connections
    /// whose token no longer maps to their principal are closed.
    pub fn reload(&self) -> Result<ReloadResult, ConfigError> {
        let config = match &self.config_path {
            Some(path) => Config::load(path)?,
            None => Config::default(),
        };
        if config.limits != self.limits {
            tracing::warn!("the config's [limits] changed; they apply when the hub restarts");
        }
        let policy = Arc::new(config.policy(&self.direct_token));
        self.registry.replace_policy(policy.clone());
        self.log_payloads
            .store(config.log_payloads, Ordering::Relaxed);

        let conns: Vec<Arc<Conn>> = self.conns.lock().values().cloned().collect();
        let mut closed = 0;
        for conn in conns {
            let Some(identity) = conn.identity() else {
                continue;
            };
            let still_valid = match &identity.token_digest {
                Some(digest) => policy
                    .principal_for_digest(digest)
                    .is_some_and(|p| p.principal == identity.principal.principal),
                None => policy.allows_unverified(),
            };
            if !still_valid {
                tracing::info!(
                    client = conn.label(),
                    "closing a connection whose principal was removed"
                );
                conn.out.drain_and_close();
                closed += 1;
            }
        }
        self.reloads.fetch_add(1, Ordering::Relaxed);
        tracing::info!(
            principals = policy.principal_count(),
            grants = policy.grant_count(),
            closed,
            "config reloaded"
        );
        Ok(ReloadResult {
            principals: policy.principal_count(),
            grants: policy.grant_count(),
            closed,
        })
    }

    /// Prometheus text of every counter and gauge.
    pub fn metrics_text(&self) -> String {
        let conns = self.conns.lock();
        let mut gauges = Gauges {
            connections: conns.len() as u64,
            connections_accepted: self.accepted.load(Ordering::Relaxed),
            connections_refused: self.refused.load(Ordering::Relaxed),
            services: self.registry.service_count() as u64,
            subscribers: self.registry.subscriber_count() as u64,
            requests_in_flight: 0,
            queued_bytes: 0,
            server_seq: self.registry.server_seq(),
            reloads: self.reloads.load(Ordering::Relaxed),
        };
        for conn in conns.values() {
            gauges.requests_in_flight += conn.pending.lock().len() as u64;
            gauges.queued_bytes += conn.out.queued_bytes() as u64;
        }
        let counters = std::iter::once(&self.counters).chain(conns.values().map(|c| &c.counters));
        metrics::render(counters, &gauges)
    }

    pub fn connection_count(&self) -> usize {
        self.conns.lock().len()
    }

    /// Requests forwarded and not yet answered, across the hub.
    pub fn pending_count(&self) -> usize {
        self.bookkeeping().pending
    }

    /// Sizes of the request bookkeeping across the hub; all zero when no
    /// request is in flight (tests assert that every ending releases it).
    pub fn bookkeeping(&self) -> Bookkeeping {
        let conns = self.conns.lock();
        let mut sizes = Bookkeeping {
            deadlines: self.timers.len(),
            ..Bookkeeping::default()
        };
        for conn in conns.values() {
            sizes.pending += conn.pending.lock().len();
            sizes.calls += conn.calls.lock().len();
        }
        sizes
    }

    pub fn is_stopping(&self) -> bool {
        self.stopping.is_cancelled()
    }

    /// Resolves once shutdown has begun.
    pub async fn stopping(&self) {
        self.stopping.cancelled().await
    }

    /// Shutdown, step one: refuse new connections, fail every pending request
    /// with -32052, and ask every connection to flush and close.
    pub fn begin_shutdown(&self) {
        self.stopping.cancel();
        let conns: Vec<Arc<Conn>> = self.conns.lock().values().cloned().collect();
        for conn in &conns {
            router::owner_gone(self, conn, GoneReason::Disconnected);
        }
        for conn in &conns {
            conn.out.drain_and_close();
        }
    }
}
