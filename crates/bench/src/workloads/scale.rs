//! Scale: memory per idle connection, the catalog snapshot with 10,000
//! services, and notification throughput next to 10,000 unrelated services.

use std::path::Path;
use std::time::Duration;

use anyhow::{bail, Context};
use futures_util::{StreamExt, TryStreamExt};
use serde_json::{json, Value};
use switchboard_testkit::procfs;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpStream, UnixStream};

use crate::systems::floor::FloorProcess;
use crate::systems::hub::{HubConn, HubLaunch, HubProcess, Transport};
use crate::systems::nats::NatsProcess;
use crate::systems::{bounded, System};

/// Connections opened at once while filling a server.
const CONNECT_CONCURRENCY: usize = 64;
/// Connections opened (and kept) before the baseline reading, so one-time
/// costs of a first connection are not charged to the measured ones.
const WARM_UP: usize = 16;
/// Pause before reading RSS, so the server has finished with the last ones.
const SETTLE: Duration = Duration::from_millis(300);
/// Over WebSocket the pause is longer: a hub connection gives back its read
/// buffer (whatever traffic grew it to) once it has been idle 1 to 2 s
/// (`transport/ws.rs`, `IDLE_RELEASE`), and the rows are about idle
/// connections.
const SETTLE_WS: Duration = Duration::from_millis(2500);

/// Resident bytes per idle connection at each step of `steps` (cumulative
/// connection counts, e.g. [1000, 10000]).
#[derive(Debug, Clone)]
pub struct IdleOutcome {
    pub per_connection: Vec<f64>,
}

/// Something that can open idle connections to a running server.
enum IdleTarget<'a> {
    Hub(&'a HubProcess),
    /// The hub's WebSocket; with `traffic`, each connection first sends
    /// itself one message of that many bytes through its own service.
    HubWs {
        hub: &'a HubProcess,
        traffic: Option<usize>,
    },
    Nats(&'a NatsProcess),
    Floor(&'a FloorProcess),
}

/// A connection held open and idle.
#[allow(dead_code)]
enum Idle {
    Unix(UnixStream),
    Tcp(TcpStream),
    Hub(Box<HubConn>),
}

pub struct ScaleBins<'a> {
    pub hub: &'a Path,
    pub nats: &'a Path,
    pub floor: &'a Path,
    pub cpu: Option<usize>,
}

/// Starts a fresh server of `system`, fills it with idle connections and
/// reads its RSS at each step.
pub async fn idle_connections(
    bins: &ScaleBins<'_>,
    system: System,
    steps: &[usize],
) -> anyhow::Result<IdleOutcome> {
    match system {
        System::HubUnix => {
            let hub = HubProcess::start(HubLaunch {
                bin: bins.hub,
                cpu: bins.cpu,
                ws: false,
                wrapper: Vec::new(),
                startup: Duration::from_secs(10),
                args: Vec::new(),
                config: "",
            })
            .await?;
            fill(IdleTarget::Hub(&hub), hub.pid(), steps).await
        }
        System::Nats => {
            let nats = NatsProcess::start(bins.nats, bins.cpu).await?;
            fill(IdleTarget::Nats(&nats), nats.pid(), steps).await
        }
        System::Floor => {
            let floor = FloorProcess::start(bins.floor, bins.cpu).await?;
            fill(IdleTarget::Floor(&floor), floor.pid(), steps).await
        }
        System::HubWs => idle_ws_connections(bins, steps, None).await,
    }
}

/// Idle WebSocket connections to a fresh hub; with `traffic`, each one has
/// first carried one message of that many bytes each way (to the hub and
/// back from it), so buffers a codec keeps after traffic show.
pub async fn idle_ws_connections(
    bins: &ScaleBins<'_>,
    steps: &[usize],
    traffic: Option<usize>,
) -> anyhow::Result<IdleOutcome> {
    let hub = HubProcess::start(HubLaunch {
        bin: bins.hub,
        cpu: bins.cpu,
        ws: true,
        wrapper: Vec::new(),
        startup: Duration::from_secs(10),
        args: Vec::new(),
        config: "",
    })
    .await?;
    fill(IdleTarget::HubWs { hub: &hub, traffic }, hub.pid(), steps).await
}

/// Resident memory of `pid`, in bytes.
fn rss_bytes(pid: u32) -> std::io::Result<u64> {
    Ok(procfs::rss_kib(pid)? * 1024)
}

async fn fill(target: IdleTarget<'_>, pid: u32, steps: &[usize]) -> anyhow::Result<IdleOutcome> {
    let settle = match target {
        IdleTarget::HubWs { .. } => SETTLE_WS,
        _ => SETTLE,
    };
    let mut held = open_idle(&target, 0, WARM_UP).await?;
    tokio::time::sleep(settle).await;
    let before = rss_bytes(pid)?;
    let mut per_connection = Vec::with_capacity(steps.len());
    for &step in steps {
        let more = step.saturating_sub(held.len() - WARM_UP);
        let opened = open_idle(&target, held.len(), more).await?;
        held.extend(opened);
        tokio::time::sleep(settle).await;
        let after = rss_bytes(pid)?;
        per_connection.push(after.saturating_sub(before) as f64 / step as f64);
    }
    drop(held);
    Ok(IdleOutcome { per_connection })
}

async fn open_idle(
    target: &IdleTarget<'_>,
    first: usize,
    count: usize,
) -> anyhow::Result<Vec<Idle>> {
    futures_util::stream::iter(first..first + count)
        .map(|index| bounded("opening an idle connection", open_one(target, index)))
        .buffer_unordered(CONNECT_CONCURRENCY)
        .try_collect()
        .await
}

async fn open_one(target: &IdleTarget<'_>, index: usize) -> anyhow::Result<Idle> {
    match target {
        IdleTarget::Hub(hub) => {
            let mut stream = connect_unix(&hub.info.socket).await?;
            let initialize = crate::messages::request(
                1,
                "initialize",
                &json!({"authToken": hub.info.token, "clientInfo": {"name": format!("idle-{index}")}}),
            );
            stream
                .write_all(format!("{initialize}\n").as_bytes())
                .await?;
            let line = read_until(&mut stream, b"\n").await?;
            if memchr::memmem::find(&line, b"\"result\"").is_none() {
                bail!("initialize failed: {}", String::from_utf8_lossy(&line));
            }
            Ok(Idle::Unix(stream))
        }
        IdleTarget::Floor(floor) => {
            let mut stream = connect_unix(&floor.socket).await?;
            stream
                .write_all(format!("idle-{index}\n").as_bytes())
                .await?;
            let line = read_until(&mut stream, b"\n").await?;
            if line != b"ok\n" {
                bail!("the floor refused: {}", String::from_utf8_lossy(&line));
            }
            Ok(Idle::Unix(stream))
        }
        IdleTarget::Nats(nats) => {
            let stream = nats_raw(nats.port).await?;
            Ok(Idle::Tcp(stream))
        }
        IdleTarget::HubWs { hub, traffic } => {
            let mut conn =
                HubConn::connect(&hub.info, Transport::Ws, &format!("idle-{index}")).await?;
            if let Some(size) = traffic {
                conn.notify_itself(*size).await?;
            }
            Ok(Idle::Hub(Box::new(conn)))
        }
    }
}

/// Connects, retrying while the listen backlog is full (a non-blocking
/// Unix connect fails with EAGAIN then, instead of waiting).
async fn connect_unix(path: &Path) -> anyhow::Result<UnixStream> {
    loop {
        match UnixStream::connect(path).await {
            Ok(stream) => return Ok(stream),
            Err(error) if error.kind() == std::io::ErrorKind::WouldBlock => {
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
            Err(error) => {
                return Err(error).with_context(|| format!("cannot connect to {}", path.display()))
            }
        }
    }
}

/// Reads until the bytes read so far end with `end`.
async fn read_until<R: AsyncReadExt + Unpin>(
    stream: &mut R,
    end: &[u8],
) -> anyhow::Result<Vec<u8>> {
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    while !got.ends_with(end) {
        let n = stream.read(&mut buf).await?;
        if n == 0 {
            bail!("the server closed the connection");
        }
        got.extend_from_slice(&buf[..n]);
    }
    Ok(got)
}

/// A NATS connection by the plain protocol: INFO, CONNECT, PING → PONG.
pub async fn nats_raw(port: u16) -> anyhow::Result<TcpStream> {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).await?;
    stream.set_nodelay(true)?;
    let info = read_until(&mut stream, b"\r\n").await?;
    if !info.starts_with(b"INFO ") {
        bail!("nats-server did not greet with INFO");
    }
    stream
        .write_all(b"CONNECT {\"verbose\":false,\"pedantic\":false,\"name\":\"idle\"}\r\nPING\r\n")
        .await?;
    let pong = read_until(&mut stream, b"PONG\r\n").await?;
    if memchr::memmem::find(&pong, b"-ERR").is_some() {
        bail!("nats-server refused: {}", String::from_utf8_lossy(&pong));
    }
    Ok(stream)
}

/// Connections holding `count` registered services on a hub, spread over
/// connections of `per_connection` each (the default `maxServicesPerClient`
/// is 256).
pub struct Registered {
    pub conns: Vec<HubConn>,
    pub services: usize,
}

pub async fn register_services(
    hub: &HubProcess,
    count: usize,
    per_connection: usize,
) -> anyhow::Result<Registered> {
    let mut conns = Vec::new();
    let mut left = count;
    let mut index = 0;
    while left > 0 {
        let batch = left.min(per_connection);
        let mut conn =
            HubConn::connect(&hub.info, Transport::Unix, &format!("owner-{index}")).await?;
        let names: Vec<String> = (0..batch)
            .map(|i| format!("unrelated-{index}-{i}"))
            .collect();
        let refs: Vec<&str> = names.iter().map(String::as_str).collect();
        bounded("registering services", conn.register_many(&refs)).await?;
        conns.push(conn);
        left -= batch;
        index += 1;
    }
    Ok(Registered {
        conns,
        services: count,
    })
}

/// Time for a fresh connection's catalog `subscribe` to be answered in full;
/// checks the snapshot lists `expected` services.
pub async fn subscribe_time(hub: &HubProcess, expected: usize) -> anyhow::Result<Duration> {
    let mut conn = HubConn::connect(&hub.info, Transport::Unix, "subscriber").await?;
    let (took, answer) = bounded(
        "subscribe",
        conn.call_timed("subscribe", json!({"channel": "ahp-client-services://"})),
    )
    .await?;
    let value: Value = serde_json::from_slice(&answer)?;
    let listed = value["result"]["snapshot"]["state"]["services"]
        .as_array()
        .map_or(0, Vec::len);
    if listed < expected {
        bail!("the snapshot lists {listed} services; {expected} are registered");
    }
    Ok(took)
}

/// A NATS connection holding `count` subscriptions to subjects nobody
/// publishes to (the counterpart of unrelated services).
pub async fn nats_unrelated_subscriptions(port: u16, count: usize) -> anyhow::Result<TcpStream> {
    let mut stream = nats_raw(port).await?;
    let mut batch = String::with_capacity(count * 32);
    for index in 0..count {
        batch.push_str(&format!("SUB unrelated.{index} {}\r\n", index + 1));
    }
    batch.push_str("PING\r\n");
    stream.write_all(batch.as_bytes()).await?;
    let pong = bounded("subscribing", async {
        read_until(&mut stream, b"PONG\r\n").await
    })
    .await?;
    if memchr::memmem::find(&pong, b"-ERR").is_some() {
        bail!("nats-server refused: {}", String::from_utf8_lossy(&pong));
    }
    Ok(stream)
}
