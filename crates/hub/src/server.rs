//! Starting and stopping a hub: directory, listeners, background tasks.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use switchboard_protocol::hub::ReloadResult;
use tokio::net::TcpListener;
use tokio_util::task::TaskTracker;

use crate::config::{Config, ConfigError};
use crate::dir::{DirError, HubDir, HubInfo};
use crate::endpoint::{self, EndpointDoor};
pub use crate::federated::{Federated, FederationMetrics};
use crate::ids;
use crate::observe::{self, HubView};
use crate::reload;
use crate::requests;
use crate::state::{HubState, Listening};
use crate::supervise::{self, SupervisedHub};
use crate::teardown;
use crate::transport::tls::{self, TlsError};
use crate::transport::{http, unix};
use switchboard_protocol::discovery::FederationInfo;

pub use crate::transport::tls::RemoteOptions;

/// How long shutdown waits for connections to flush and close.
pub const SHUTDOWN_GRACE: Duration = Duration::from_secs(5);

#[derive(Debug, Clone)]
pub struct HubOptions {
    /// The hub directory (`switchboard_discovery::hub_dir`).
    pub dir: PathBuf,
    /// Where the WebSocket (and metrics) listener binds; `None` disables it.
    pub ws: Option<SocketAddr>,
    /// The TOML config file, if any.
    pub config: Option<PathBuf>,
    /// Set when the hub is part of a federation (the `switchboard-federation`
    /// crate makes it); `None`: a hub of its own.
    pub federated: Option<Federated>,
    /// The remote listener (WebSocket over TLS, named principals only);
    /// `None`: off.
    pub remote: Option<RemoteOptions>,
}

/// The add-ons a hub holds, each attached through its own door. The
/// federation is not among them: it drives a running hub from outside,
/// through `link.rs`.
#[derive(Default)]
pub struct AddOns {
    /// What observes the hub (the `switchboard-dashboard` crate):
    /// `observe.rs` is all it reaches.
    pub observer: Option<observe::Attach>,
    /// What runs `[modules.NAME]` (the `switchboard-modules` crate):
    /// `supervise.rs` is all it reaches. Without one, the config's modules
    /// are not started.
    pub supervisor: Option<supervise::Start>,
    /// What serves an endpoint of its own on the HTTP ports (the MCP
    /// gateway's `/mcp`, the `switchboard-mcp` crate): `endpoint.rs` is
    /// all it reaches.
    pub endpoint: Option<endpoint::Attach>,
}

#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error(transparent)]
    Dir(#[from] DirError),
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error(transparent)]
    Tls(#[from] TlsError),
    #[error("cannot listen on {what} {address}: {error}")]
    Listen {
        what: &'static str,
        address: String,
        error: std::io::Error,
    },
}

/// A running hub. Dropping it without [`Hub::shutdown`] still removes
/// `hub.json` and the socket, but does not let connections flush.
pub struct Hub {
    state: Arc<HubState>,
    dir: HubDir,
    info: HubInfo,
    tasks: TaskTracker,
}

impl Hub {
    /// A hub without add-ons: no dashboard, no modules.
    pub async fn start(options: HubOptions) -> Result<Hub, StartError> {
        Hub::start_with(options, AddOns::default()).await
    }

    /// Takes the directory, reads the config, attaches the observer, binds
    /// the listeners, starts serving, writes `hub.json` (so its presence
    /// means "ready") and finally starts the modules.
    pub async fn start_with(options: HubOptions, add_ons: AddOns) -> Result<Hub, StartError> {
        let mut dir = HubDir::acquire(options.dir)?;
        let config = match &options.config {
            Some(path) => Config::load(path)?,
            None => Config::default(),
        };
        let token = ids::mint_token();
        let state = Arc::new(HubState::new(
            &config,
            options.config.clone(),
            token.clone(),
            options.federated.clone(),
        ));
        let tasks = TaskTracker::new();
        // Before the listeners: the observer's routes are part of the port.
        if let Some(attach) = add_ons.observer {
            let _ = state.observer.set(attach(HubView::new(&state), &tasks));
        }
        if let Some(attach) = add_ons.endpoint {
            let door = EndpointDoor::new(&state, &tasks);
            let _ = state.endpoint.set(attach(door, &tasks));
        }

        let socket = dir.socket_path();
        let unix_listener = unix::bind(&socket).map_err(|source| StartError::Listen {
            what: "Unix socket",
            address: socket.display().to_string(),
            error: source,
        })?;
        let ws_listener = match options.ws {
            Some(address) => Some(bind(address, "WebSocket address").await?),
            None => None,
        };
        let remote = match &options.remote {
            Some(remote) => {
                let acceptor = tls::acceptor(&remote.cert, &remote.key)?;
                let listener = bind(remote.address, "remote address").await?;
                let url = format!("wss://{}/", local_address(&listener, "remote address")?);
                Some((listener, acceptor, url))
            }
            None => None,
        };
        let ws_url = match &ws_listener {
            Some(listener) => Some(format!(
                "ws://{}/",
                local_address(listener, "WebSocket address")?
            )),
            None => None,
        };

        tasks.spawn(unix::accept_loop(
            state.clone(),
            unix_listener,
            tasks.clone(),
        ));
        if let Some(listener) = ws_listener {
            tasks.spawn(http::accept_loop(
                state.clone(),
                listener,
                None,
                tasks.clone(),
            ));
        }
        let remote_url = remote.map(|(listener, acceptor, url)| {
            tasks.spawn(http::accept_loop(
                state.clone(),
                listener,
                Some(acceptor),
                tasks.clone(),
            ));
            url
        });
        tasks.spawn(requests::run_timers(state.clone()));

        // The endpoint's MCP path on the same port, as plain HTTP.
        let mcp_url = match (&ws_url, state.endpoint.get().and_then(|e| e.mcp_path)) {
            (Some(ws), Some(path)) => ws
                .strip_prefix("ws://")
                .map(|address| format!("http://{}{path}", address.trim_end_matches('/'))),
            _ => None,
        };
        let info = HubInfo {
            version: 1,
            pid: std::process::id(),
            socket,
            ws: ws_url,
            mcp_url,
            remote: remote_url,
            token,
            federation: options.federated.as_ref().map(|f| FederationInfo {
                name: f.name.clone(),
            }),
        };
        let _ = state.listening.set(Listening {
            ws: info.ws.clone(),
            remote: info.remote.clone(),
        });
        dir.write_info(&info)?;
        tracing::info!(
            dir = %dir.path().display(),
            ws = info.ws.as_deref().unwrap_or("off"),
            remote = info.remote.as_deref().unwrap_or("off"),
            "hub ready"
        );
        // Modules start once the hub is reachable, and never hold up its start.
        if let Some(start) = add_ons.supervisor {
            let hub_dir = std::path::absolute(dir.path()).unwrap_or_else(|_| dir.path().to_owned());
            let supervisor = start(SupervisedHub::new(&state, hub_dir), config.modules, &tasks);
            let _ = state.supervisor.set(supervisor);
        } else if !config.modules.is_empty() {
            tracing::warn!(
                "the config names modules, but this hub runs no supervisor; they are not started"
            );
        }
        Ok(Hub {
            state,
            dir,
            info,
            tasks,
        })
    }

    /// What `hub.json` says about this hub.
    pub fn info(&self) -> &HubInfo {
        &self.info
    }

    pub fn state(&self) -> &Arc<HubState> {
        &self.state
    }

    /// Re-reads the config file (SIGHUP, `switchboard reload`).
    pub fn reload(&self) -> Result<ReloadResult, ConfigError> {
        reload::reload(&self.state)
    }

    /// Clean shutdown: stop the modules (SIGTERM, then SIGKILL; bounded),
    /// stop accepting, fail pending requests with -32052, let connections
    /// flush (bounded), remove `hub.json` and the socket.
    pub async fn shutdown(mut self) {
        tracing::info!("shutting down");
        if let Some(supervisor) = self.state.supervisor.get() {
            supervisor.shutdown().await;
        }
        teardown::begin_shutdown(&self.state);
        self.tasks.close();
        if tokio::time::timeout(SHUTDOWN_GRACE, self.tasks.wait())
            .await
            .is_err()
        {
            tracing::warn!("some connections did not close within the grace period");
        }
        self.dir.clean_up();
    }
}

async fn bind(address: SocketAddr, what: &'static str) -> Result<TcpListener, StartError> {
    TcpListener::bind(address)
        .await
        .map_err(|error| StartError::Listen {
            what,
            address: address.to_string(),
            error,
        })
}

fn local_address(listener: &TcpListener, what: &'static str) -> Result<SocketAddr, StartError> {
    listener.local_addr().map_err(|error| StartError::Listen {
        what,
        address: "(bound)".into(),
        error,
    })
}
