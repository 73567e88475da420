//! Instructions per routed notification, counted by callgrind: a figure that
//! does not drift with machine noise.
//!
//! Method: the server runs under `valgrind --tool=callgrind` twice with the
//! same script (start, connect a receiver and a sender, register, send N
//! notifications in 64 KiB writes, wait until all N arrived, disconnect,
//! SIGTERM) except that N differs: once N, once 0. The N notifications go
//! in steps of 1,000, each awaited, so nothing is shed. Everything but the
//! notifications (start-up, connections, shutdown) is the same in both, so
//! (instructions(N) − instructions(0)) / N is the cost of one notification,
//! read, parse, route, queue and write included.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{bail, Context};
use tokio::io::AsyncWriteExt;
use tokio::net::unix::{OwnedReadHalf, OwnedWriteHalf};

use crate::lines::LineBuf;
use crate::messages;
use crate::process::{self, ServerProcess};
use crate::systems::floor;
use crate::systems::hub::{HubConn, HubLaunch, HubProcess, Transport, WsStream};
use futures_util::{SinkExt, StreamExt};
use tokio_tungstenite::tungstenite::Message;

/// Valgrind is slow: generous bounds.
const STARTUP: Duration = Duration::from_secs(120);
const PAYLOAD: usize = 200;

#[derive(Debug, Clone, Copy)]
pub struct CallgrindOutcome {
    pub notifications: u64,
    pub with: u64,
    pub without: u64,
}

impl CallgrindOutcome {
    pub fn per_notification(&self) -> f64 {
        (self.with as f64 - self.without as f64) / self.notifications as f64
    }
}

/// Which server to count.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Counted {
    Hub,
    /// The hub, both clients on its WebSocket (one message per frame).
    HubWs,
    Floor,
}

pub fn valgrind_available() -> bool {
    std::process::Command::new("valgrind")
        .arg("--version")
        .output()
        .is_ok_and(|out| out.status.success())
}

/// Runs the two measurements; keeps the callgrind files in `out_dir`
/// (`<server>-<N>.out`, for `callgrind_annotate`).
pub async fn measure(
    counted: Counted,
    bin: &Path,
    notifications: u64,
    out_dir: &Path,
    run: usize,
) -> anyhow::Result<CallgrindOutcome> {
    std::fs::create_dir_all(out_dir)?;
    let with = count(counted, bin, notifications, out_dir, run).await?;
    let without = count(counted, bin, 0, out_dir, run).await?;
    Ok(CallgrindOutcome {
        notifications,
        with,
        without,
    })
}

fn valgrind_args(out_file: &Path) -> Vec<OsString> {
    let mut file = OsString::from("--callgrind-out-file=");
    file.push(out_file);
    vec![
        "valgrind".into(),
        "--tool=callgrind".into(),
        file,
        // Threads are serialized under valgrind; this keeps the scheduler's
        // choices (and so the counts) stable from run to run.
        "--fair-sched=yes".into(),
    ]
}

async fn count(
    counted: Counted,
    bin: &Path,
    notifications: u64,
    out_dir: &Path,
    run: usize,
) -> anyhow::Result<u64> {
    let name = match counted {
        Counted::Hub => "hub",
        Counted::HubWs => "hub-ws",
        Counted::Floor => "floor",
    };
    let out_file = out_dir.join(format!("{name}-{notifications}-run{run}.out"));
    let _ = std::fs::remove_file(&out_file);
    match counted {
        Counted::Hub => {
            let mut hub = HubProcess::start(HubLaunch {
                bin,
                cpu: None,
                ws: false,
                wrapper: valgrind_args(&out_file),
                startup: STARTUP,
                args: Vec::new(),
                config: "",
            })
            .await?;
            let mut receiver = HubConn::connect(&hub.info, Transport::Unix, "receiver").await?;
            let service = receiver.register("counted").await?;
            let sender = HubConn::connect(&hub.info, Transport::Unix, "sender").await?;
            let line = messages::hub_notify(&service, &messages::payload(PAYLOAD));
            let (r_read, r_write, r_buf) = receiver.into_unix()?;
            let (_s_read, s_write, _) = sender.into_unix()?;
            deliver(s_write, r_read, r_buf, &line, notifications).await?;
            drop(r_write);
            stop(&mut hub.process)?;
        }
        Counted::HubWs => {
            let mut hub = HubProcess::start(HubLaunch {
                bin,
                cpu: None,
                ws: true,
                wrapper: valgrind_args(&out_file),
                startup: STARTUP,
                args: Vec::new(),
                config: "",
            })
            .await?;
            let mut receiver = HubConn::connect(&hub.info, Transport::Ws, "receiver").await?;
            let service = receiver.register("counted").await?;
            let sender = HubConn::connect(&hub.info, Transport::Ws, "sender").await?;
            let line = messages::hub_notify(&service, &messages::payload(PAYLOAD));
            deliver_ws(sender.into_ws()?, receiver.into_ws()?, &line, notifications).await?;
            stop(&mut hub.process)?;
        }
        Counted::Floor => {
            let out_file_arg = valgrind_args(&out_file);
            let dir = tempfile::Builder::new()
                .prefix("sb-bench-floor-cg")
                .tempdir()?;
            let socket = dir.path().join("floor.sock");
            let mut args: Vec<OsString> = out_file_arg[1..].to_vec();
            args.extend([
                bin.as_os_str().to_owned(),
                "--socket".into(),
                socket.clone().into(),
            ]);
            let arg_refs: Vec<&std::ffi::OsStr> = args.iter().map(OsString::as_os_str).collect();
            let mut floor_process = ServerProcess::spawn(
                "switchboard-floor (callgrind)",
                Path::new("valgrind"),
                &arg_refs,
                None,
                &dir.path().join("floor.log"),
            )?;
            let probe: PathBuf = socket.clone();
            process::wait_until(&mut floor_process, STARTUP, "listening", || {
                std::os::unix::net::UnixStream::connect(&probe).is_ok()
            })
            .await?;
            let (r_read, r_write, r_buf) = floor::connect(&socket, "r").await?;
            let (_s_read, s_write, _) = floor::connect(&socket, "s").await?;
            let line = format!(
                "r {}",
                messages::hub_notify("r", &messages::payload(PAYLOAD))
            );
            deliver(s_write, r_read, r_buf, &line, notifications).await?;
            drop(r_write);
            stop(&mut floor_process)?;
        }
    }
    read_total(&out_file)
}

/// Messages per step: the sender waits for each step to arrive before it
/// sends the next, so the server's queue stays far below `notifyShedBytes`
/// (a server under valgrind reads much faster than it gets to write).
const STEP: u64 = 1_000;
/// Longest wait for one step to arrive under valgrind.
const STEP_LIMIT: Duration = Duration::from_secs(60);

/// Sends `count` copies of `line` in steps of [`STEP`], each step in 64 KiB
/// writes, and waits after each step until the receiver has read it.
async fn deliver(
    mut write: OwnedWriteHalf,
    mut read: OwnedReadHalf,
    mut buf: LineBuf,
    line: &str,
    count: u64,
) -> anyhow::Result<()> {
    let per_write = (64 * 1024 / (line.len() + 1)).max(1) as u64;
    let mut batch = Vec::new();
    let mut sent = 0u64;
    let mut got = buf.count_lines() as u64;
    while sent < count {
        let step_end = (sent + STEP).min(count);
        while sent < step_end {
            let n = (step_end - sent).min(per_write);
            batch.clear();
            for _ in 0..n {
                batch.extend_from_slice(line.as_bytes());
                batch.push(b'\n');
            }
            write.write_all(&batch).await?;
            sent += n;
        }
        while got < sent {
            let read_now = tokio::time::timeout(STEP_LIMIT, buf.fill(&mut read))
                .await
                .with_context(|| {
                    format!("only {got} of {sent} notifications arrived within {STEP_LIMIT:?}")
                })??;
            if read_now == 0 {
                bail!("the receiver was disconnected after {got} of {count}");
            }
            got += buf.count_lines() as u64;
        }
    }
    // Let the server see both sides idle before the connections close.
    tokio::time::sleep(Duration::from_millis(200)).await;
    drop(write);
    Ok(())
}

/// [`deliver`] over WebSockets: each step's frames are fed and flushed
/// together (as the notify workload's sender does), then the receiver reads
/// as many frames.
async fn deliver_ws(
    mut sender: WsStream,
    mut receiver: WsStream,
    line: &str,
    count: u64,
) -> anyhow::Result<()> {
    let frame = Message::text(line);
    let mut sent = 0u64;
    while sent < count {
        let step_start = sent;
        let step_end = (sent + STEP).min(count);
        while sent < step_end {
            sender.feed(frame.clone()).await?;
            sent += 1;
        }
        sender.flush().await?;
        let mut got = 0;
        while got < step_end - step_start {
            match tokio::time::timeout(STEP_LIMIT, receiver.next()).await {
                Err(_) => bail!("only {got} notifications of a step arrived within {STEP_LIMIT:?}"),
                Ok(Some(Ok(Message::Text(_)))) => got += 1,
                Ok(Some(Ok(_))) => {}
                Ok(Some(Err(error))) => bail!("the receiver failed: {error}"),
                Ok(None) => bail!("the receiver was disconnected"),
            }
        }
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    let _ = sender.close(None).await;
    let _ = receiver.close(None).await;
    Ok(())
}

fn stop(server: &mut ServerProcess) -> anyhow::Result<()> {
    // Give the server a moment to handle the disconnects before SIGTERM.
    std::thread::sleep(Duration::from_millis(300));
    let status = server.stop(STARTUP)?;
    if !status.success() {
        bail!("the server under callgrind exited with {status}");
    }
    Ok(())
}

/// The total instruction count (`summary:` or `totals:`) of a callgrind file.
pub fn read_total(path: &Path) -> anyhow::Result<u64> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("cannot read callgrind output {}", path.display()))?;
    parse_total(&text).with_context(|| format!("no instruction total in {}", path.display()))
}

fn parse_total(text: &str) -> Option<u64> {
    let line = text
        .lines()
        .find(|l| l.starts_with("summary:"))
        .or_else(|| text.lines().find(|l| l.starts_with("totals:")))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_summary_line() {
        let text = "version: 1\ncreator: callgrind\nevents: Ir\nsummary: 123456\ntotals: 123456\n";
        assert_eq!(parse_total(text), Some(123456));
        assert_eq!(parse_total("events: Ir\ntotals: 7\n"), Some(7));
        assert_eq!(parse_total("events: Ir\n"), None);
    }

    #[test]
    fn per_notification_is_the_difference_over_n() {
        let outcome = CallgrindOutcome {
            notifications: 1000,
            with: 5_000_000,
            without: 1_000_000,
        };
        assert_eq!(outcome.per_notification(), 4000.0);
    }
}
