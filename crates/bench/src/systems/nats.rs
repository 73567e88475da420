//! nats-server as a process, reached over loopback TCP through `async-nats`.

use std::ffi::OsStr;
use std::path::Path;
use std::time::Duration;

use anyhow::Context;
use tempfile::TempDir;

use crate::process::{self, ServerProcess};
use crate::systems::bounded;

/// Messages a subscription may buffer in the client before it drops: far
/// more than a benchmark run leaves pending, so the client never drops.
pub const SUBSCRIPTION_CAPACITY: usize = 1 << 20;

/// A running nats-server, stopped on drop.
pub struct NatsProcess {
    pub process: ServerProcess,
    pub url: String,
    pub port: u16,
    _dir: TempDir,
}

impl NatsProcess {
    pub async fn start(bin: &Path, cpu: Option<usize>) -> anyhow::Result<Self> {
        let dir = tempfile::Builder::new().prefix("sb-bench-nats").tempdir()?;
        let port = free_port()?;
        let port_text = port.to_string();
        // JetStream for workload 7 (the hubs' shared catalog is a KV
        // bucket); core publish and request/reply do not touch it.
        let store = dir.path().join("jetstream");
        let args: [&OsStr; 7] = [
            "-a".as_ref(),
            "127.0.0.1".as_ref(),
            "-p".as_ref(),
            port_text.as_ref(),
            "-js".as_ref(),
            "-sd".as_ref(),
            store.as_os_str(),
        ];
        let mut process =
            ServerProcess::spawn("nats-server", bin, &args, cpu, &dir.path().join("nats.log"))?;
        process::wait_until(&mut process, Duration::from_secs(10), "listening", || {
            std::net::TcpStream::connect(("127.0.0.1", port)).is_ok()
        })
        .await?;
        Ok(NatsProcess {
            process,
            url: format!("nats://127.0.0.1:{port}"),
            port,
            _dir: dir,
        })
    }

    pub fn pid(&self) -> u32 {
        self.process.pid()
    }

    pub async fn connect(&self) -> anyhow::Result<async_nats::Client> {
        bounded("connecting to nats-server", async {
            async_nats::ConnectOptions::new()
                .subscription_capacity(SUBSCRIPTION_CAPACITY)
                .connect(self.url.as_str())
                .await
                .with_context(|| format!("cannot connect to {}", self.url))
        })
        .await
    }
}

/// A port free right now on loopback (the server binds it a moment later).
fn free_port() -> std::io::Result<u16> {
    let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
    Ok(listener.local_addr()?.port())
}

/// `nats-server --version`, for the machine description.
pub fn server_version(bin: &Path) -> Option<String> {
    let out = std::process::Command::new(bin)
        .arg("--version")
        .output()
        .ok()?;
    Some(String::from_utf8_lossy(&out.stdout).trim().to_owned())
}
