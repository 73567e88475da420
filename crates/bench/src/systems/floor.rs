//! The floor relay (`switchboard-floor`) as a process, and its client side.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{bail, Context};
use tempfile::TempDir;
use tokio::io::AsyncWriteExt;
use tokio::net::unix::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::UnixStream;

use crate::lines::LineBuf;
use crate::process::{self, ServerProcess};
use crate::systems::bounded;

/// A running floor relay, stopped on drop.
pub struct FloorProcess {
    pub process: ServerProcess,
    pub socket: PathBuf,
    _dir: TempDir,
}

impl FloorProcess {
    pub async fn start(bin: &Path, cpu: Option<usize>) -> anyhow::Result<Self> {
        let dir = tempfile::Builder::new()
            .prefix("sb-bench-floor")
            .tempdir()?;
        let socket = dir.path().join("floor.sock");
        let args: [&OsStr; 2] = ["--socket".as_ref(), socket.as_os_str()];
        let mut process = ServerProcess::spawn(
            "switchboard-floor",
            bin,
            &args,
            cpu,
            &dir.path().join("floor.log"),
        )?;
        let probe = socket.clone();
        process::wait_until(&mut process, Duration::from_secs(10), "listening", || {
            std::os::unix::net::UnixStream::connect(&probe).is_ok()
        })
        .await?;
        Ok(FloorProcess {
            process,
            socket,
            _dir: dir,
        })
    }

    pub fn pid(&self) -> u32 {
        self.process.pid()
    }

    /// Connects under `name` and waits for the relay's `ok`.
    pub async fn connect(
        &self,
        name: &str,
    ) -> anyhow::Result<(OwnedReadHalf, OwnedWriteHalf, LineBuf)> {
        connect(&self.socket, name).await
    }
}

pub async fn connect(
    socket: &Path,
    name: &str,
) -> anyhow::Result<(OwnedReadHalf, OwnedWriteHalf, LineBuf)> {
    bounded("connecting to the floor", async {
        let stream = UnixStream::connect(socket)
            .await
            .with_context(|| format!("cannot connect to {}", socket.display()))?;
        let (mut read, mut write) = stream.into_split();
        write.write_all(format!("{name}\n").as_bytes()).await?;
        let mut buf = LineBuf::new(256 * 1024);
        loop {
            if let Some(line) = buf.take_line() {
                if line != b"ok" {
                    bail!(
                        "the floor refused {name}: {}",
                        String::from_utf8_lossy(&line)
                    );
                }
                return Ok((read, write, buf));
            }
            if buf.fill(&mut read).await? == 0 {
                bail!("the floor closed the connection");
            }
        }
    })
    .await
}
