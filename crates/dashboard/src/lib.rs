//! The dashboard: what runs in the hub, live, for people. A page under
//! `/ui/` on the hub's HTTP port and `switchboard top` in a terminal read
//! one data model, built here: a *snapshot* (the hub, the config in force,
//! every service, the last tick, 15 minutes of history) followed by
//! *deltas* (catalog actions as they happen, a tick every second).
//!
//! It is the hub's [`Observer`]: it reads the hub only through
//! `switchboard_hub::observe` (a [`HubView`]), and the hub asks of it only
//! its routes and its two methods (`hub/dashboardLogin`,
//! `hub/dashboardSnapshot`).
//!
//! - `state.rs`: its own state (logins, history, the latest tick);
//! - `auth.rs`: one-time login codes and browser sessions;
//! - `history.rs`: totals, rates, percentiles, the 15-minute history;
//! - `sampler.rs`: the 1 s task: the connection table, rates, latency
//!   percentiles and the 15-minute history;
//! - `stream.rs`: the page's Server-Sent Events stream (snapshot, then
//!   deltas), bounded like any consumer;
//! - `pages.rs`: the routes under `/ui/`, the embedded assets, the headers.
//!
//! **Invariant:** the dashboard only reads the hub, and nothing routing
//! does ever waits on it. A page's catalog actions come through a bounded
//! catalog feed (`observe.rs`), fed under the catalog lock like any
//! subscriber: a page that falls behind is dropped and resyncs with a new
//! snapshot. Ticks go through a `watch` channel (latest value only), so a
//! slow page never makes the hub hold more.

mod auth;
mod history;
mod pages;
mod sampler;
mod state;
mod stream;

use std::sync::Arc;

use axum::Router;
use serde_json::json;
use serde_json::value::RawValue;
use switchboard_hub::observe::{invalid_request, Caller, HubView, Observer};
use switchboard_protocol::hub::{method, DashboardLoginResult, PROTOCOL_VERSION};
use switchboard_protocol::jsonrpc::ErrorObject;
use tokio_util::task::TaskTracker;

use state::DashboardState;

pub use pages::COOKIE;
pub use state::MAX_STREAMS;
pub use stream::QUEUE_BYTES;

/// The dashboard of one hub.
pub struct Dashboard {
    state: Arc<DashboardState>,
}

impl Dashboard {
    /// Attaches a dashboard to a starting hub (`AddOns::observer`), with the
    /// `[dashboard]` section of the hub's config; its sampler runs as long
    /// as the hub.
    pub fn attach(view: HubView, tasks: &TaskTracker) -> Arc<dyn Observer> {
        let config = view.config().map(|c| c.dashboard).unwrap_or_default();
        let state = Arc::new(DashboardState::new(view, config));
        tasks.spawn(sampler::run(state.clone()));
        Arc::new(Dashboard { state })
    }
}

impl Observer for Dashboard {
    /// The routes under `/ui/` (none when the dashboard is off: 404 there).
    fn routes(&self) -> Option<Router> {
        let state = &self.state;
        state.enabled().then(|| pages::routes(state.clone()))
    }

    fn request(
        &self,
        name: &str,
        caller: &Caller<'_>,
        _params: Option<&RawValue>,
    ) -> Option<Result<String, ErrorObject>> {
        let state = &self.state;
        match name {
            method::DASHBOARD_LOGIN => Some(login_code(state, caller)),
            method::DASHBOARD_SNAPSHOT => Some(snapshot_for(state, caller)),
            _ => None,
        }
    }
}

/// The snapshot both views start from:
/// `{hub, config, serverSeq, services: [Service…], tick, history}`.
/// `services` is the catalog as a JSON array at `server_seq`.
fn snapshot(state: &DashboardState, services: &str, server_seq: u64) -> String {
    let tick = state.ticks.borrow().clone();
    let history = state.history.lock().to_json();
    let services: &RawValue = serde_json::from_str(services).expect("the catalog is JSON");
    let tick: &RawValue = serde_json::from_str(&tick).expect("a tick is JSON");
    let config = state.hub.config();
    let listening = state.hub.listening();
    let snapshot = json!({
        "hub": {
            "name": "switchboard",
            "version": env!("CARGO_PKG_VERSION"),
            "protocolVersion": PROTOCOL_VERSION,
            "pid": std::process::id(),
            "startedAt": sampler::unix_ms(state.started_at),
            "uptimeSeconds": state.uptime().as_secs(),
            "rssBytes": sampler::rss_bytes(),
            "websocket": listening.ws,
            "remote": listening.remote,
        },
        "config": config.map(|config| json!({
            "limits": config.limits,
            "policy": config.policy,
            "logPayloads": config.log_payloads,
            "configFile": config.config_file,
            "reloads": config.reloads,
            "dashboard": {
                "enabled": state.enabled(),
                "loginCodeSeconds": state.config.login_code.as_secs(),
            },
        })),
        "serverSeq": server_seq,
        "services": services,
        "tick": tick,
        "history": history,
    });
    snapshot.to_string()
}

/// `hub/dashboardLogin`: a one-time login code for the page.
fn login_code(state: &DashboardState, caller: &Caller<'_>) -> Result<String, ErrorObject> {
    caller.require_direct("ask for a dashboard login code")?;
    if !state.enabled() {
        return Err(invalid_request(
            "dashboardDisabled",
            "the dashboard is turned off in the config ([dashboard] enabled = false)",
        ));
    }
    let code = state.logins.new_code();
    let result = DashboardLoginResult {
        path: format!("/ui/login?code={code}"),
        code,
        expires_in_seconds: state.logins.code_lifetime().as_secs(),
    };
    Ok(serde_json::to_string(&result).expect("serializes"))
}

/// `hub/dashboardSnapshot`: the page's snapshot, for `switchboard top`.
fn snapshot_for(state: &DashboardState, caller: &Caller<'_>) -> Result<String, ErrorObject> {
    caller.require_direct("read the dashboard snapshot")?;
    let (services, seq) = state.hub.services();
    Ok(snapshot(state, &services, seq))
}
