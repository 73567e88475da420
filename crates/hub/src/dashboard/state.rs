//! The dashboard's part of the hub's state (`HubState::dashboard`): login
//! codes and sessions, the history, the latest tick, the pages streaming.
//! It imports nothing that reads the hub, so `state.rs` can hold it while
//! the dashboard's tasks and routes read `HubState`.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use parking_lot::Mutex;
use tokio::sync::{watch, Semaphore};
use tokio::time::Instant;

use super::auth;
use super::history::History;
use crate::config::DashboardConfig;

/// Pages streaming at once; one more gets 503. (Each also holds a
/// connection slot while it is open, like any socket on the port.)
pub const MAX_STREAMS: usize = 8;

pub struct Dashboard {
    pub(super) config: DashboardConfig,
    pub(super) logins: auth::Logins,
    pub(super) history: Mutex<History>,
    /// The newest tick's JSON (`null` before the first).
    pub(super) ticks: watch::Sender<Arc<str>>,
    pub(super) streams: Arc<Semaphore>,
    next_watcher: AtomicU64,
    started: Instant,
    pub(super) started_at: SystemTime,
}

impl Dashboard {
    pub fn new(config: &DashboardConfig) -> Self {
        Dashboard {
            config: config.clone(),
            logins: auth::Logins::new(config.login_code),
            history: Mutex::new(History::default()),
            ticks: watch::Sender::new(Arc::from("null")),
            streams: Arc::new(Semaphore::new(MAX_STREAMS)),
            next_watcher: AtomicU64::new(1),
            started: Instant::now(),
            started_at: SystemTime::now(),
        }
    }

    /// The `[dashboard]` section it was started with.
    pub fn config(&self) -> &DashboardConfig {
        &self.config
    }

    /// Whether `/ui/` is served (`[dashboard] enabled`).
    pub fn enabled(&self) -> bool {
        self.config.enabled
    }

    pub fn uptime(&self) -> Duration {
        self.started.elapsed()
    }

    pub(super) fn publish_tick(&self, tick: String) {
        self.ticks.send_replace(Arc::from(tick));
    }

    pub(super) fn next_watcher_id(&self) -> u64 {
        self.next_watcher.fetch_add(1, Ordering::Relaxed)
    }
}
