//! The dashboard's own state: login codes and sessions, the history, the
//! latest tick, the pages streaming, and its view of the hub.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use parking_lot::Mutex;
use switchboard_hub::config::DashboardConfig;
use switchboard_hub::observe::HubView;
use tokio::sync::{watch, Semaphore};
use tokio::time::Instant;

use crate::auth;
use crate::history::History;

/// Pages streaming at once; one more gets 503. (Each also holds a
/// connection slot while it is open, like any socket on the port.)
pub const MAX_STREAMS: usize = 8;

pub struct DashboardState {
    /// The hub, read only through its observer door.
    pub(crate) hub: HubView,
    pub(crate) config: DashboardConfig,
    pub(crate) logins: auth::Logins,
    pub(crate) history: Mutex<History>,
    /// The newest tick's JSON (`null` before the first).
    pub(crate) ticks: watch::Sender<Arc<str>>,
    pub(crate) streams: Arc<Semaphore>,
    started: Instant,
    pub(crate) started_at: SystemTime,
}

impl DashboardState {
    pub fn new(hub: HubView, config: DashboardConfig) -> Self {
        DashboardState {
            hub,
            logins: auth::Logins::new(config.login_code),
            config,
            history: Mutex::new(History::default()),
            ticks: watch::Sender::new(Arc::from("null")),
            streams: Arc::new(Semaphore::new(MAX_STREAMS)),
            started: Instant::now(),
            started_at: SystemTime::now(),
        }
    }

    /// Whether `/ui/` is served (`[dashboard] enabled`).
    pub fn enabled(&self) -> bool {
        self.config.enabled
    }

    pub fn uptime(&self) -> Duration {
        self.started.elapsed()
    }

    pub(crate) fn publish_tick(&self, tick: String) {
        self.ticks.send_replace(Arc::from(tick));
    }
}
