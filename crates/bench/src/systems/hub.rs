//! The hub as a process (`switchboard serve`) and a lean client for it that
//! speaks the real protocol: initialize with the token from `hub.json`,
//! register, notify, request, answer `handleRequest`.

use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{bail, Context};
use futures_util::{SinkExt, StreamExt};
use serde_json::{json, Value};
use switchboard_protocol::discovery::{HubInfo, INFO_FILE};
use tempfile::TempDir;
use tokio::io::AsyncWriteExt;
use tokio::net::unix::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{TcpStream, UnixStream};
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::WebSocketStream;

use crate::lines::{self, After, LineBuf};
use crate::messages;
use crate::process::{self, ServerProcess};
use crate::systems::bounded;

pub type WsStream = WebSocketStream<TcpStream>;

/// The config every benchmark hub runs with: enough connections for the
/// 10,000-connection scale test plus the clients that drive it.
pub const CONFIG: &str = "[limits]\nmaxConnections = 20000\n";

/// How to start a hub.
pub struct HubLaunch<'a> {
    pub bin: &'a Path,
    pub cpu: Option<usize>,
    pub ws: bool,
    /// A program to run the hub under (valgrind), with its arguments.
    pub wrapper: Vec<OsString>,
    pub startup: Duration,
    /// More `switchboard serve` arguments (`--nats`, `--hub-name`).
    pub args: Vec<OsString>,
    /// More config text after [`CONFIG`] (grants).
    pub config: &'a str,
}

/// A running `switchboard serve`, stopped (and its directory removed) on drop.
pub struct HubProcess {
    pub process: ServerProcess,
    pub info: HubInfo,
    dir: TempDir,
}

impl HubProcess {
    pub async fn start(launch: HubLaunch<'_>) -> anyhow::Result<Self> {
        let dir = tempfile::Builder::new().prefix("sb-bench-hub").tempdir()?;
        let hub_dir = dir.path().join("hub");
        let config = dir.path().join("hub.toml");
        std::fs::write(&config, format!("{CONFIG}{}", launch.config))?;
        let mut args: Vec<OsString> = launch.wrapper.iter().skip(1).cloned().collect();
        if !launch.wrapper.is_empty() {
            args.push(launch.bin.into());
        }
        args.extend(["serve".into(), "--dir".into(), hub_dir.clone().into()]);
        args.extend(["--config".into(), config.into()]);
        if launch.ws {
            args.extend(["--ws".into(), "127.0.0.1:0".into()]);
        } else {
            args.push("--no-ws".into());
        }
        args.extend(launch.args.iter().cloned());
        let program: PathBuf = match launch.wrapper.first() {
            Some(wrapper) => wrapper.into(),
            None => launch.bin.to_owned(),
        };
        let arg_refs: Vec<&OsStr> = args.iter().map(OsString::as_os_str).collect();
        let mut process = ServerProcess::spawn(
            "switchboard serve",
            &program,
            &arg_refs,
            launch.cpu,
            &dir.path().join("hub.log"),
        )?;
        let pid = process.pid();
        let info_path = hub_dir.join(INFO_FILE);
        let mut info = None;
        process::wait_until(&mut process, launch.startup, "ready", || {
            info = std::fs::read_to_string(&info_path)
                .ok()
                .and_then(|text| serde_json::from_str::<HubInfo>(&text).ok())
                .filter(|info| info.pid == pid);
            info.is_some()
        })
        .await?;
        let info = info.context("hub.json vanished")?;
        Ok(HubProcess { process, info, dir })
    }

    pub fn pid(&self) -> u32 {
        self.process.pid()
    }

    pub fn dir(&self) -> &Path {
        self.dir.path()
    }
}

/// Which of the hub's transports a client uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transport {
    Unix,
    Ws,
}

enum Link {
    Unix {
        read: OwnedReadHalf,
        write: OwnedWriteHalf,
        buf: LineBuf,
    },
    Ws(Box<WsStream>),
}

/// An initialized hub connection, for setup calls; its halves then go to a
/// workload's hot loop.
pub struct HubConn {
    link: Link,
    next_id: u64,
}

/// The hub's message framing for a transport: Unix lines end with `\n`.
pub fn newline(transport: Transport) -> bool {
    transport == Transport::Unix
}

impl HubConn {
    /// Connects and initializes with the token from `hub.json`.
    pub async fn connect(info: &HubInfo, transport: Transport, name: &str) -> anyhow::Result<Self> {
        bounded("connecting to the hub", async {
            let link = match transport {
                Transport::Unix => {
                    let stream = UnixStream::connect(&info.socket)
                        .await
                        .with_context(|| format!("cannot connect to {}", info.socket.display()))?;
                    let (read, write) = stream.into_split();
                    Link::Unix {
                        read,
                        write,
                        buf: LineBuf::new(256 * 1024),
                    }
                }
                Transport::Ws => {
                    let url = info.ws.as_deref().context("the hub serves no WebSocket")?;
                    Link::Ws(Box::new(connect_ws(url).await?))
                }
            };
            let mut conn = HubConn { link, next_id: 1 };
            conn.call(
                "initialize",
                json!({
                    "protocolVersions": ["1.0.0"],
                    "authToken": info.token,
                    "clientInfo": {"name": name, "version": env!("CARGO_PKG_VERSION")},
                }),
            )
            .await
            .context("initialize failed")?;
            Ok(conn)
        })
        .await
    }

    async fn send(&mut self, text: String) -> anyhow::Result<()> {
        match &mut self.link {
            Link::Unix { write, .. } => {
                let mut bytes = text.into_bytes();
                bytes.push(b'\n');
                write.write_all(&bytes).await?;
            }
            Link::Ws(ws) => ws.send(Message::text(text)).await?,
        }
        Ok(())
    }

    /// The next message from the hub.
    async fn recv(&mut self) -> anyhow::Result<Vec<u8>> {
        match &mut self.link {
            Link::Unix { read, buf, .. } => loop {
                if let Some(line) = buf.take_line() {
                    return Ok(line);
                }
                if buf.fill(read).await? == 0 {
                    bail!("the hub closed the connection");
                }
            },
            Link::Ws(ws) => loop {
                match ws.next().await {
                    Some(Ok(Message::Text(text))) => return Ok(text.as_bytes().to_vec()),
                    Some(Ok(Message::Binary(bytes))) => return Ok(bytes.to_vec()),
                    Some(Ok(Message::Close(_))) | None => bail!("the hub closed the WebSocket"),
                    Some(Ok(_)) => {}
                    Some(Err(error)) => return Err(error.into()),
                }
            },
        }
    }

    /// Registers a service and sends it one notification of `size` bytes,
    /// then reads it back: one message of about `size` each way.
    pub async fn notify_itself(&mut self, size: usize) -> anyhow::Result<()> {
        let service = self.register("itself").await?;
        let payload = crate::messages::payload(size);
        self.send(crate::messages::hub_notify(&service, &payload))
            .await?;
        loop {
            let message = self.recv().await?;
            if memchr::memmem::find(&message, b"clientService/notification").is_some() {
                return Ok(());
            }
        }
    }

    /// Reads until the response to `id`; returns its `result`.
    async fn response(&mut self, id: u64, method: &str) -> anyhow::Result<Value> {
        loop {
            let message = self.recv().await?;
            if lines::message_id(&message).is_none_or(|(got, _)| got != id) {
                continue; // a notification (catalog action, …)
            }
            let value: Value = serde_json::from_slice(&message)?;
            if let Some(error) = value.get("error") {
                bail!("{method} failed: {error}");
            }
            return Ok(value.get("result").cloned().unwrap_or(Value::Null));
        }
    }

    /// One request, answered (setup path: builds JSON values).
    pub async fn call(&mut self, method: &str, params: Value) -> anyhow::Result<Value> {
        let id = self.next_id;
        self.next_id += 1;
        self.send(messages::request(id, method, &params)).await?;
        self.response(id, method).await
    }

    /// One request, timed from before it is written until its whole answer
    /// has been read (nothing is parsed inside the timed part); returns the
    /// time and the raw answer.
    pub async fn call_timed(
        &mut self,
        method: &str,
        params: Value,
    ) -> anyhow::Result<(Duration, Vec<u8>)> {
        let id = self.next_id;
        self.next_id += 1;
        let text = messages::request(id, method, &params);
        let start = std::time::Instant::now();
        self.send(text).await?;
        loop {
            let message = self.recv().await?;
            if lines::message_id(&message).is_some_and(|(got, _)| got == id) {
                return Ok((start.elapsed(), message));
            }
        }
    }

    /// Waits (at most `limit`) until this hub's catalog lists every service
    /// of `ids` (services of another hub of a federation arrive through the
    /// shared catalog).
    pub async fn wait_listed(&mut self, ids: &[String], limit: Duration) -> anyhow::Result<()> {
        let deadline = tokio::time::Instant::now() + limit;
        loop {
            let answer = self
                .call("subscribe", json!({"channel": "ahp-client-services://"}))
                .await?;
            let listed = answer["snapshot"]["state"]["services"]
                .as_array()
                .map(|services| {
                    ids.iter().all(|id| {
                        services
                            .iter()
                            .any(|s| s["serviceId"].as_str() == Some(id.as_str()))
                    })
                })
                .unwrap_or(false);
            if listed {
                return Ok(());
            }
            if tokio::time::Instant::now() >= deadline {
                anyhow::bail!("the caller's hub did not list the services within {limit:?}");
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Registers one service; returns its id.
    pub async fn register(&mut self, name: &str) -> anyhow::Result<String> {
        Ok(self.register_many(&[name]).await?.remove(0))
    }

    /// Registers services named `names`, all requests written before any
    /// answer is read; returns their ids in order.
    pub async fn register_many(&mut self, names: &[&str]) -> anyhow::Result<Vec<String>> {
        let first = self.next_id;
        let mut batch = String::new();
        for name in names {
            let params = json!({"metadata": {"name": name, "kind": "bench"}});
            batch.push_str(&messages::request(
                self.next_id,
                "client/registerService",
                &params,
            ));
            batch.push('\n');
            self.next_id += 1;
        }
        match &mut self.link {
            Link::Unix { write, .. } => write.write_all(batch.as_bytes()).await?,
            Link::Ws(ws) => {
                for line in batch.lines() {
                    ws.feed(Message::text(line)).await?;
                }
                ws.flush().await?;
            }
        }
        let mut ids = Vec::with_capacity(names.len());
        for offset in 0..names.len() as u64 {
            let result = self
                .response(first + offset, "client/registerService")
                .await?;
            let id = result["serviceId"]
                .as_str()
                .context("registerService answered without a serviceId")?;
            ids.push(id.to_owned());
        }
        Ok(ids)
    }

    /// The Unix halves and what is already buffered.
    pub fn into_unix(self) -> anyhow::Result<(OwnedReadHalf, OwnedWriteHalf, LineBuf)> {
        match self.link {
            Link::Unix { read, write, buf } => Ok((read, write, buf)),
            Link::Ws(_) => bail!("not a Unix socket connection"),
        }
    }

    /// The WebSocket's TCP stream, for a hot loop that frames and reads
    /// frames itself. tokio-tungstenite's read buffer is dropped with it,
    /// which loses nothing only while the hub has nothing unread on the way:
    /// so after the answers to this connection's setup calls, before it is
    /// sent anything else (a byte lost would break the next frame, and the
    /// loop reading it reports that).
    pub fn into_tcp(self) -> anyhow::Result<TcpStream> {
        Ok(self.into_ws()?.into_inner())
    }

    pub fn into_ws(self) -> anyhow::Result<WsStream> {
        match self.link {
            Link::Ws(ws) => Ok(*ws),
            Link::Unix { .. } => bail!("not a WebSocket connection"),
        }
    }
}

/// A WebSocket to `url` (`ws://host:port/`), with Nagle off as the hub has it.
pub async fn connect_ws(url: &str) -> anyhow::Result<WsStream> {
    let authority = url
        .strip_prefix("ws://")
        .and_then(|rest| rest.split('/').next())
        .with_context(|| format!("not a ws:// URL: {url}"))?;
    let stream = TcpStream::connect(authority)
        .await
        .with_context(|| format!("cannot connect to {authority}"))?;
    stream.set_nodelay(true)?;
    let (ws, _) = tokio_tungstenite::client_async(url, stream)
        .await
        .with_context(|| format!("WebSocket handshake with {url} failed"))?;
    Ok(ws)
}

/// Checks one delivered `clientService/notification` against what was sent:
/// the real protocol shape, and the payload byte for byte.
pub fn check_notification(message: &[u8], payload: &str) -> anyhow::Result<()> {
    let value: Value = serde_json::from_slice(message).context("a delivery is not JSON")?;
    if value["method"] != "clientService/notification" || value.get("id").is_some() {
        bail!(
            "expected a clientService/notification, got {}",
            excerpt(message)
        );
    }
    if value["params"]["method"] != messages::METHOD {
        bail!("a delivery carries the wrong method: {}", excerpt(message));
    }
    check_payload(message, payload)
}

/// Checks that `payload` arrived verbatim as the `params` member.
pub fn check_payload(message: &[u8], payload: &str) -> anyhow::Result<()> {
    let needle = format!("\"params\":{payload}}}");
    if memchr::memmem::find(message, needle.as_bytes()).is_none() {
        bail!(
            "the payload did not arrive byte for byte: {}",
            excerpt(message)
        );
    }
    Ok(())
}

/// The start of a message, for error text.
pub fn excerpt(message: &[u8]) -> String {
    let text = String::from_utf8_lossy(&message[..message.len().min(160)]);
    if message.len() > 160 {
        format!("{text}…")
    } else {
        text.into_owned()
    }
}

/// Whether a line the hub wrote to a caller is a response with an error.
pub fn is_error_response(line: &[u8]) -> bool {
    matches!(lines::message_id(line), Some((_, After::Error)))
}
