//! A real hub in the test's own runtime, over its real sockets.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use parking_lot::Mutex;

use switchboard_client::protocol::discovery::HubInfo;
use switchboard_client::Client;
use switchboard_dashboard::Dashboard;
use switchboard_hub::endpoint::{Endpoint, EndpointDoor};
use switchboard_hub::{AddOns, Hub, HubOptions};
use switchboard_modules::Modules;

use crate::clients;

/// A hub on a fresh temporary directory, `TEMP/hub`, with its add-ons (the
/// dashboard, the modules' supervisor) as `switchboard serve` has them, and
/// a WebSocket on a free loopback port unless told otherwise. Dropping it
/// drops the hub (its socket and `hub.json` go) and then the directory;
/// [`TestHub::stop`] shuts it down cleanly instead. A hub may also be
/// stopped and served again on the same directory ([`TestHub::shut_down`],
/// [`TestHub::serve`]), or not be started at all at first
/// ([`TestHubBuilder::not_started`]): clients that follow the directory see
/// it come and go.
pub struct TestHub {
    // Declared first: dropped before the directory it lives in.
    hub: Option<Hub>,
    dir: PathBuf,
    options: HubOptions,
    /// The endpoint door of the running hub, as an add-on holds it.
    door: Arc<Mutex<Option<EndpointDoor>>>,
    temp: tempfile::TempDir,
}

/// How to start a [`TestHub`].
#[must_use]
pub struct TestHubBuilder {
    config: Option<String>,
    ws: bool,
    remote: Option<switchboard_hub::server::RemoteOptions>,
}

impl TestHub {
    /// A hub with the default config and a WebSocket.
    pub async fn start() -> TestHub {
        TestHub::builder().start().await
    }

    /// A directory where a hub with the default config will run once
    /// [`TestHub::serve`] starts it.
    pub fn not_started() -> TestHub {
        TestHub::builder().not_started()
    }

    pub fn builder() -> TestHubBuilder {
        TestHubBuilder {
            config: None,
            ws: true,
            remote: None,
        }
    }

    /// The running hub (panics while it is not running).
    pub fn hub(&self) -> &Hub {
        self.hub
            .as_ref()
            .expect("the test hub is not running (serve it first)")
    }

    /// Starts the hub (again) on the same directory with the same options.
    pub async fn serve(&mut self) {
        assert!(self.hub.is_none(), "the test hub runs already");
        // Fresh add-ons for each start, as a new `switchboard serve` has.
        let door = self.door.clone();
        let add_ons = AddOns {
            observer: Some(Box::new(Dashboard::attach)),
            supervisor: Some(Box::new(Modules::start)),
            // The MCP gateway's `/mcp` is tested on the real binary
            // (crates/cli tests), where `serve` attaches it. Here the
            // endpoint serves no route; its door is kept for
            // [`TestHub::door`].
            endpoint: Some(Box::new(move |attached, _| {
                *door.lock() = Some(attached);
                Endpoint {
                    routes: axum::Router::new(),
                    remote_paths: Vec::new(),
                    mcp_path: None,
                    keep_alive_paths: Vec::new(),
                }
            })),
        };
        let hub = Hub::start_with(self.options.clone(), add_ons)
            .await
            .unwrap_or_else(|error| panic!("the hub does not start: {error}"));
        self.hub = Some(hub);
    }

    /// Clean shutdown, keeping the directory for a later [`TestHub::serve`].
    pub async fn shut_down(&mut self) {
        if let Some(hub) = self.hub.take() {
            hub.shutdown().await;
        }
    }

    /// What `hub.json` says: socket, WebSocket URL, the `direct` token.
    pub fn info(&self) -> &HubInfo {
        self.hub().info()
    }

    /// The running hub's endpoint door, as an add-on holds it (its
    /// in-process connections, its authentication).
    pub fn door(&self) -> EndpointDoor {
        self.door
            .lock()
            .clone()
            .expect("the test hub is not running (serve it first)")
    }

    /// The hub directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// `name` in the test's temporary directory, beside the hub directory
    /// (ledgers, marker files, a second config).
    pub fn path(&self, name: &str) -> PathBuf {
        self.temp.path().join(name)
    }

    /// The config file the hub reads on start and on reload
    /// (`TEMP/switchboard.toml`; it exists if the builder was given text).
    pub fn config_path(&self) -> PathBuf {
        self.path(CONFIG_FILE)
    }

    /// A client of the `direct` principal on the Unix socket.
    pub async fn client(&self, name: &str) -> Client {
        clients::connect_unix(self.info(), name).await
    }

    /// A client of the `direct` principal connected in-process, through
    /// the endpoint door, as the MCP gateway behind `/mcp` is.
    pub async fn in_process_client(&self, name: &str) -> Client {
        let door = self.door();
        clients::connect_in_process(
            switchboard_client::Connector::new(move || Ok(door.connect()?)),
            self.info(),
            name,
        )
        .await
    }

    /// A client of the `direct` principal on the WebSocket.
    pub async fn ws_client(&self, name: &str) -> Client {
        clients::connect_ws(self.info(), name).await
    }

    /// Prometheus text, as `GET /metrics` serves it.
    pub fn metrics(&self) -> String {
        self.hub().state().metrics_text()
    }

    /// The value of one sample, e.g. `switchboard_connections`.
    pub fn metric(&self, sample: &str) -> u64 {
        crate::metric_value(&self.metrics(), sample)
    }

    /// Clean shutdown (connections flush, bounded by the hub), then the
    /// directory goes.
    pub async fn stop(self) {
        let TestHub { hub, temp, .. } = self;
        if let Some(hub) = hub {
            hub.shutdown().await;
        }
        drop(temp);
    }
}

const CONFIG_FILE: &str = "switchboard.toml";

impl TestHubBuilder {
    /// The config file's text (TOML); it is written before the hub starts
    /// and the hub reads it on reload.
    pub fn config(mut self, text: &str) -> Self {
        self.config = Some(text.to_owned());
        self
    }

    /// A remote (TLS) listener on a free loopback port, with this PEM
    /// certificate chain and key.
    pub fn remote(mut self, cert: PathBuf, key: PathBuf) -> Self {
        self.remote = Some(switchboard_hub::server::RemoteOptions {
            address: "127.0.0.1:0".parse().expect("a socket address"),
            cert,
            key,
        });
        self
    }

    /// No WebSocket (and so no HTTP) listener.
    pub fn no_ws(mut self) -> Self {
        self.ws = false;
        self
    }

    pub async fn start(self) -> TestHub {
        let mut hub = self.not_started();
        hub.serve().await;
        hub
    }

    /// The directory (and config file) only; [`TestHub::serve`] starts it.
    pub fn not_started(self) -> TestHub {
        let temp = tempfile::tempdir().expect("a temporary directory");
        let dir = temp.path().join("hub");
        let config = self.config.map(|text| {
            let path = temp.path().join(CONFIG_FILE);
            std::fs::write(&path, text).expect("write the config file");
            path
        });
        let options = HubOptions {
            dir: dir.clone(),
            ws: self
                .ws
                .then(|| "127.0.0.1:0".parse().expect("a socket address")),
            config,
            federated: None,
            remote: self.remote,
        };
        TestHub {
            hub: None,
            dir,
            options,
            door: Arc::default(),
            temp,
        }
    }
}
