//! The floor relay on a temporary socket (the hub comes from
//! `switchboard_testkit`).

use std::path::PathBuf;
use std::sync::Arc;

use switchboard_bench::floor::Relay;
use tempfile::TempDir;
use tokio::net::UnixListener;

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
