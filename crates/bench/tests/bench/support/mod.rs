//! Shared setup: an in-process hub and floor relay on temporary sockets.

// Each test binary uses only part of this module.
#![allow(dead_code)]

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use switchboard_bench::floor::Relay;
use switchboard_hub::{Hub, HubOptions};
use switchboard_protocol::discovery::HubInfo;
use tempfile::TempDir;
use tokio::net::UnixListener;

/// Bound on every wait in these tests.
pub const WAIT: Duration = Duration::from_secs(10);

pub struct TestHub {
    pub hub: Hub,
    _dir: TempDir,
}

impl TestHub {
    pub async fn start() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let hub = Hub::start(HubOptions {
            dir: dir.path().join("hub"),
            ws: Some("127.0.0.1:0".parse().unwrap()),
            config: None,
        })
        .await
        .unwrap();
        TestHub { hub, _dir: dir }
    }

    pub fn info(&self) -> &HubInfo {
        self.hub.info()
    }
}

pub struct TestFloor {
    pub socket: PathBuf,
    task: tokio::task::JoinHandle<std::io::Result<()>>,
    _dir: TempDir,
}

impl TestFloor {
    pub fn start() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let socket = dir.path().join("floor.sock");
        let listener = UnixListener::bind(&socket).unwrap();
        let task = tokio::spawn(Arc::new(Relay::default()).serve(listener));
        TestFloor {
            socket,
            task,
            _dir: dir,
        }
    }
}

impl Drop for TestFloor {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// `future`, or a panic naming `what` once [`WAIT`] has passed.
pub async fn within<T>(what: &str, future: impl std::future::Future<Output = T>) -> T {
    tokio::time::timeout(WAIT, future)
        .await
        .unwrap_or_else(|_| panic!("{what} did not happen within {WAIT:?}"))
}
