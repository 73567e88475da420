//! Shared setup for the operator-command tests: `switchboard serve` as a
//! child process on a temporary directory, the commands run as processes
//! against it, and SDK clients in the test playing services. Every wait is
//! bounded by [`WAIT`].

#![allow(dead_code)] // each test uses a different part of this module

use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};
use std::time::Duration;

use serde_json::Value;
use switchboard_client::{Client, ConnectOptions, Endpoint};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, Lines};
use tokio::process::{Child, ChildStdout, Command};

pub const WAIT: Duration = Duration::from_secs(10);

pub fn binary() -> &'static str {
    env!("CARGO_BIN_EXE_switchboard")
}

/// A `switchboard serve` child process on a fresh directory.
pub struct Hub {
    child: Child,
    /// The hub directory, as passed to `--dir`.
    pub dir: PathBuf,
    pub info: Value,
    _temp: tempfile::TempDir,
}

impl Hub {
    pub async fn start() -> Hub {
        Hub::start_with(&["--ws", "127.0.0.1:0"]).await
    }

    /// `switchboard serve --dir DIR LISTEN…` (`LISTEN`: `--ws ADDR` or `--no-ws`).
    pub async fn start_with(listen: &[&str]) -> Hub {
        let temp = tempfile::tempdir().expect("temp dir");
        let dir = temp.path().join("hub");
        let child = Command::new(binary())
            .arg("serve")
            .args(listen)
            .arg("--dir")
            .arg(&dir)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .expect("spawn switchboard serve");
        let pid = child.id().expect("pid");
        let info = tokio::time::timeout(WAIT, async {
            loop {
                let info = std::fs::read_to_string(dir.join("hub.json"))
                    .ok()
                    .and_then(|text| serde_json::from_str::<Value>(&text).ok());
                if let Some(info) = info.filter(|info| info["pid"] == pid) {
                    return info;
                }
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        })
        .await
        .expect("hub.json names the hub within WAIT");
        Hub {
            child,
            dir,
            info,
            _temp: temp,
        }
    }

    /// `--dir DIR` for a command.
    pub fn dir_arg(&self) -> &str {
        self.dir.to_str().expect("utf-8 temp path")
    }

    pub fn pid(&self) -> u32 {
        self.info["pid"].as_u64().expect("pid") as u32
    }

    /// An SDK client on this hub (the `direct` principal).
    pub async fn client(&self, name: &str) -> Client {
        Client::connect_with(ConnectOptions {
            endpoint: Endpoint::Dir(Some(self.dir.clone())),
            client_name: name.into(),
        })
        .await
        .expect("connect to the hub")
    }

    /// Kills the hub with SIGKILL: it cannot clean up, so hub.json stays.
    pub async fn kill(&mut self) {
        self.child.kill().await.expect("kill the hub");
    }
}

/// A finished command.
#[derive(Debug)]
pub struct Run {
    pub status: ExitStatus,
    pub stdout: String,
    pub stderr: String,
}

impl Run {
    pub fn code(&self) -> i32 {
        self.status.code().expect("exited, not killed")
    }

    /// Asserts success and returns stdout.
    pub fn ok(&self) -> &str {
        assert_eq!(self.code(), 0, "failed: {self:#?}");
        &self.stdout
    }
}

/// Runs `switchboard ARGS` to completion.
pub async fn switchboard(args: &[&str]) -> Run {
    switchboard_with_stdin(args, "").await
}

/// Runs `switchboard ARGS` with `stdin` as its standard input.
pub async fn switchboard_with_stdin(args: &[&str], stdin: &str) -> Run {
    let mut child = Command::new(binary())
        .args(args)
        .env("RUST_LOG", "warn")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("spawn switchboard");
    let mut input = child.stdin.take().expect("stdin");
    input
        .write_all(stdin.as_bytes())
        .await
        .expect("write stdin");
    drop(input);
    let output = tokio::time::timeout(WAIT, child.wait_with_output())
        .await
        .unwrap_or_else(|_| panic!("switchboard {args:?} did not finish within {WAIT:?}"))
        .expect("collect output");
    Run {
        status: output.status,
        stdout: String::from_utf8(output.stdout).expect("utf-8 stdout"),
        stderr: String::from_utf8(output.stderr).expect("utf-8 stderr"),
    }
}

/// A long-running command whose stdout is read line by line.
pub struct Live {
    child: Child,
    lines: Lines<BufReader<ChildStdout>>,
}

impl Live {
    pub fn start(args: &[&str]) -> Live {
        let mut child = Command::new(binary())
            .args(args)
            .env("RUST_LOG", "warn")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .expect("spawn switchboard");
        let stdout = child.stdout.take().expect("stdout");
        Live {
            child,
            lines: BufReader::new(stdout).lines(),
        }
    }

    /// The next line of stdout.
    pub async fn line(&mut self) -> String {
        tokio::time::timeout(WAIT, self.lines.next_line())
            .await
            .unwrap_or_else(|_| panic!("no line within {WAIT:?}"))
            .expect("read stdout")
            .expect("stdout ended")
    }

    /// Stops the command with SIGTERM and returns how it exited.
    pub async fn terminate(mut self) -> ExitStatus {
        let pid = self.child.id().expect("still running") as libc::pid_t;
        // SAFETY: kill(2) on our own child's pid; no memory is involved.
        assert_eq!(unsafe { libc::kill(pid, libc::SIGTERM) }, 0);
        tokio::time::timeout(WAIT, self.child.wait())
            .await
            .expect("exits within WAIT after SIGTERM")
            .expect("wait")
    }

    /// Waits for the command to exit on its own.
    pub async fn exit(mut self) -> ExitStatus {
        tokio::time::timeout(WAIT, self.child.wait())
            .await
            .expect("exits within WAIT")
            .expect("wait")
    }
}

/// A directory where no hub runs.
pub fn empty_dir() -> (tempfile::TempDir, String) {
    let temp = tempfile::tempdir().expect("temp dir");
    let dir = temp.path().join("hub");
    let text = dir.to_str().expect("utf-8").to_owned();
    (temp, text)
}

pub fn path_str(path: &Path) -> &str {
    path.to_str().expect("utf-8 path")
}
