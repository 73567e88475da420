//! Notifications: S senders blast pre-built notifications round-robin to R
//! receivers for a fixed time; receivers count what arrives. Delivered
//! msg/s is counted from the start to the last delivery, and loss is what
//! was sent and never arrived once the system has gone quiet.

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use bytes::Bytes;
use fastwebsockets::{Frame, OpCode, Payload, Role, WebSocket, WebSocketError};
use futures_util::StreamExt;
use tokio::io::{AsyncWrite, AsyncWriteExt};
use tokio::net::unix::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{tcp, TcpStream};
use tokio::sync::Barrier;
use tokio::task::JoinHandle;

use crate::lines::{self, LineBuf};
use crate::messages;
use crate::systems::hub::{self, HubConn, Transport};
use crate::systems::System;
use crate::workloads::{cpu_now, CpuSpent, Placement, Servers, Tally};

/// Bytes a sender writes per round (at least one message per receiver).
const ROUND_BYTES: usize = 64 * 1024;
/// The run is over once nothing has arrived for this long.
const QUIET: Duration = Duration::from_millis(500);
/// Longest wait for deliveries after the senders stop.
const DRAIN_LIMIT: Duration = Duration::from_secs(30);

#[derive(Debug, Clone)]
pub struct NotifySpec {
    pub senders: usize,
    pub receivers: usize,
    pub payload_size: usize,
    pub duration: Duration,
    /// For the hub over its Unix socket: one hub, or across two.
    pub placement: Placement,
}

#[derive(Debug, Clone, Copy)]
pub struct NotifyOutcome {
    pub sent: u64,
    pub delivered: u64,
    /// From the start of sending to the last delivery.
    pub elapsed: Duration,
    pub cpu: CpuSpent,
}

impl NotifyOutcome {
    pub fn msgs_per_sec(&self) -> f64 {
        self.delivered as f64 / self.elapsed.as_secs_f64()
    }

    pub fn lost(&self) -> u64 {
        self.sent.saturating_sub(self.delivered)
    }

    /// Server CPU seconds per million delivered notifications.
    pub fn server_cpu_per_million(&self) -> f64 {
        self.cpu.server / self.delivered as f64 * 1e6
    }

    pub fn harness_cpu_per_million(&self) -> f64 {
        self.cpu.harness / self.delivered as f64 * 1e6
    }
}

/// Where a sender's messages go, as each system names it.
enum Endpoints {
    /// Hub service ids.
    Hub(Vec<String>),
    /// NATS subjects.
    Nats(Vec<String>),
    /// Floor connection names.
    Floor(Vec<String>),
}

/// Runs one measurement of `spec` against `system`. `tag` makes names unique
/// across runs on the same server.
pub async fn run(
    servers: &Servers,
    system: System,
    spec: &NotifySpec,
    tag: &str,
) -> anyhow::Result<NotifyOutcome> {
    let payload = messages::payload(spec.payload_size);
    let tally = Arc::new(Tally::new(Instant::now()));
    let mut tasks: Vec<JoinHandle<()>> = Vec::new();
    let outcome = measure(servers, system, spec, tag, &payload, &tally, &mut tasks).await;
    for task in &tasks {
        task.abort();
    }
    for task in tasks {
        let _ = task.await;
    }
    outcome
}

async fn measure(
    servers: &Servers,
    system: System,
    spec: &NotifySpec,
    tag: &str,
    payload: &str,
    tally: &Arc<Tally>,
    tasks: &mut Vec<JoinHandle<()>>,
) -> anyhow::Result<NotifyOutcome> {
    let endpoints = open_receivers(servers, system, spec, tag, payload, tally, tasks)
        .await
        .context("setting up receivers")?;
    let barrier = Arc::new(Barrier::new(spec.senders + 1));
    let mut senders = Vec::with_capacity(spec.senders);
    for index in 0..spec.senders {
        let sender = open_sender(
            servers, system, spec, &endpoints, index, tag, payload, tally, tasks,
        )
        .await
        .context("setting up senders")?;
        let barrier = barrier.clone();
        let duration = spec.duration;
        senders.push(tokio::spawn(async move {
            barrier.wait().await;
            sender.blast(Instant::now() + duration).await
        }));
    }

    let pid = servers.pid(system);
    let cpu_before = cpu_now(pid)?;
    barrier.wait().await;
    let start = Instant::now();
    let mut sent = 0;
    // Senders stay connected until the receivers are done.
    let mut connected = Vec::with_capacity(senders.len());
    for sender in senders {
        let (count, sender) = sender.await.context("a sender panicked")??;
        sent += count;
        connected.push(sender);
    }

    // Wait until everything arrived or nothing more does.
    let mut seen = tally.count();
    let mut changed = Instant::now();
    while seen < sent && changed.elapsed() < QUIET && start.elapsed() < spec.duration + DRAIN_LIMIT
    {
        tokio::time::sleep(Duration::from_millis(5)).await;
        let now = tally.count();
        if now != seen {
            seen = now;
            changed = Instant::now();
        }
    }
    let cpu = cpu_now(pid)? - cpu_before;
    drop(connected);
    if let Some(problem) = tally.take_problem() {
        bail!("{}: {problem}", system.label());
    }
    let delivered = tally.count();
    if delivered == 0 {
        bail!("{}: nothing was delivered", system.label());
    }
    if delivered > sent {
        bail!(
            "{}: {delivered} deliveries for {sent} notifications sent",
            system.label()
        );
    }
    Ok(NotifyOutcome {
        sent,
        delivered,
        elapsed: tally.last().saturating_duration_since(start),
        cpu,
    })
}

#[allow(clippy::too_many_arguments)]
async fn open_receivers(
    servers: &Servers,
    system: System,
    spec: &NotifySpec,
    tag: &str,
    payload: &str,
    tally: &Arc<Tally>,
    tasks: &mut Vec<JoinHandle<()>>,
) -> anyhow::Result<Endpoints> {
    let count = spec.receivers;
    let mut names = Vec::with_capacity(count);
    let (owners, callers) = servers.hubs(spec.placement)?;
    for index in 0..count {
        let name = format!("r-{tag}-{index}");
        match system {
            System::HubUnix => {
                let mut conn = HubConn::connect(&owners.info, Transport::Unix, &name).await?;
                names.push(conn.register(&name).await?);
                let (read, write, buf) = conn.into_unix()?;
                tasks.push(tokio::spawn(count_lines(
                    read,
                    write,
                    buf,
                    false,
                    payload.to_owned(),
                    tally.clone(),
                )));
            }
            System::HubWs => {
                let mut conn = HubConn::connect(&servers.hub.info, Transport::Ws, &name).await?;
                names.push(conn.register(&name).await?);
                let stream = conn.into_tcp()?;
                tasks.push(tokio::spawn(count_frames(
                    stream,
                    payload.to_owned(),
                    tally.clone(),
                )));
            }
            System::Floor => {
                let (read, write, buf) = servers.floor.connect(&name).await?;
                names.push(name);
                tasks.push(tokio::spawn(count_lines(
                    read,
                    write,
                    buf,
                    true,
                    payload.to_owned(),
                    tally.clone(),
                )));
            }
            System::Nats => {
                let client = servers.nats.connect().await?;
                let subject = format!("bench.{tag}.{index}");
                let subscriber = client.subscribe(subject.clone()).await?;
                client.flush().await?;
                names.push(subject);
                tasks.push(tokio::spawn(count_nats(
                    client,
                    subscriber,
                    Bytes::from(payload.to_owned()),
                    tally.clone(),
                )));
            }
        }
    }
    if system == System::HubUnix && spec.placement == Placement::AcrossHubs {
        let mut conn =
            HubConn::connect(&callers.info, Transport::Unix, &format!("w-{tag}")).await?;
        conn.wait_listed(&names, Duration::from_secs(20)).await?;
    }
    Ok(match system {
        System::HubUnix | System::HubWs => Endpoints::Hub(names),
        System::Nats => Endpoints::Nats(names),
        System::Floor => Endpoints::Floor(names),
    })
}

/// Counts newline-terminated deliveries; checks the first one in full.
async fn count_lines(
    mut read: OwnedReadHalf,
    _write: OwnedWriteHalf,
    mut buf: LineBuf,
    floor: bool,
    payload: String,
    tally: Arc<Tally>,
) {
    let mut checked = false;
    loop {
        if !checked {
            if let Some(line) = buf.first_line() {
                // The floor relays the sender's line as it is; the hub turns
                // it into a clientService/notification.
                let checked_line = if floor {
                    lines::split_route(line)
                        .context("a floor line without a routing prefix")
                        .and_then(|(_, json)| hub::check_payload(json, &payload))
                } else {
                    hub::check_notification(line, &payload)
                };
                if let Err(error) = checked_line {
                    tally.problem(format!("{error:#}"));
                }
                checked = true;
            }
        }
        tally.add(buf.count_lines() as u64);
        match buf.fill(&mut read).await {
            Ok(0) | Err(_) => return,
            Ok(_) => {}
        }
    }
}

/// Counts WebSocket text frames; checks the first one in full. The frames
/// are read by fastwebsockets, as the hub reads them: the harness costs about
/// what the Unix one (`count_lines`) does, not a per-message allocation.
async fn count_frames(stream: TcpStream, payload: String, tally: Arc<Tally>) {
    let mut ws = WebSocket::after_handshake(stream, Role::Client);
    ws.set_max_message_size(64 << 20);
    let mut checked = false;
    loop {
        match ws.read_frame().await {
            Ok(frame) if frame.opcode == OpCode::Text && frame.fin => {
                if !checked {
                    checked = true;
                    if let Err(error) = hub::check_notification(&frame.payload, &payload) {
                        tally.problem(format!("{error:#}"));
                    }
                }
                tally.add(1);
            }
            Ok(frame) if frame.opcode == OpCode::Close => return,
            Ok(frame) if matches!(frame.opcode, OpCode::Ping | OpCode::Pong) => {}
            Ok(frame) => {
                return tally.problem(format!(
                    "the hub sent a frame other than one whole text message ({:?}, fin {})",
                    frame.opcode, frame.fin
                ));
            }
            Err(WebSocketError::ConnectionClosed | WebSocketError::UnexpectedEOF) => return,
            Err(error) => return tally.problem(format!("reading the hub's frames: {error}")),
        }
    }
}

async fn count_nats(
    _client: async_nats::Client,
    mut subscriber: async_nats::Subscriber,
    payload: Bytes,
    tally: Arc<Tally>,
) {
    let mut checked = false;
    while let Some(message) = subscriber.next().await {
        if !checked {
            checked = true;
            if message.payload != payload {
                tally.problem("NATS delivered a different payload".into());
            }
        }
        tally.add(1);
    }
}

/// One sender, connected and with its messages pre-built.
enum Sender {
    /// A round of messages, framed for the wire once: lines for a Unix
    /// socket, masked text frames for a WebSocket.
    Bytes {
        write: Box<dyn AsyncWrite + Send + Unpin>,
        round: Vec<u8>,
        per_round: u64,
    },
    Nats {
        client: async_nats::Client,
        round: Vec<async_nats::Subject>,
        payload: Bytes,
    },
}

/// How many messages of `size` bytes make a round to `targets` receivers.
fn round_len(size: usize, targets: usize) -> usize {
    let messages = ROUND_BYTES.div_ceil(size.max(1)).max(1);
    messages.div_ceil(targets) * targets
}

#[allow(clippy::too_many_arguments)]
async fn open_sender(
    servers: &Servers,
    system: System,
    spec: &NotifySpec,
    endpoints: &Endpoints,
    index: usize,
    tag: &str,
    payload: &str,
    tally: &Arc<Tally>,
    tasks: &mut Vec<JoinHandle<()>>,
) -> anyhow::Result<Sender> {
    let name = format!("s-{tag}-{index}");
    Ok(match (system, endpoints) {
        (System::HubUnix, Endpoints::Hub(ids)) => {
            let (_, callers) = servers.hubs(spec.placement)?;
            let conn = HubConn::connect(&callers.info, Transport::Unix, &name).await?;
            let (read, write, buf) = conn.into_unix()?;
            tasks.push(tokio::spawn(expect_silence(read, buf, tally.clone())));
            let lines: Vec<String> = ids
                .iter()
                .map(|id| messages::hub_notify(id, payload))
                .collect();
            line_sender(write, &lines, index)
        }
        (System::Floor, Endpoints::Floor(names)) => {
            let (read, write, buf) = servers.floor.connect(&name).await?;
            tasks.push(tokio::spawn(expect_silence(read, buf, tally.clone())));
            // The same JSON-RPC line as the hub gets, behind the routing prefix.
            let lines: Vec<String> = names
                .iter()
                .map(|target| format!("{target} {}", messages::hub_notify(target, payload)))
                .collect();
            line_sender(write, &lines, index)
        }
        (System::HubWs, Endpoints::Hub(ids)) => {
            let conn = HubConn::connect(&servers.hub.info, Transport::Ws, &name).await?;
            let (read, write) = conn.into_tcp()?.into_split();
            tasks.push(tokio::spawn(expect_no_frames(read, tally.clone())));
            let messages: Vec<String> = ids
                .iter()
                .map(|id| messages::hub_notify(id, payload))
                .collect();
            frame_sender(write, &messages, index)
        }
        (System::Nats, Endpoints::Nats(subjects)) => {
            let client = servers.nats.connect().await?;
            let len = round_len(payload.len(), subjects.len());
            let round = (0..len)
                .map(|i| async_nats::Subject::from(subjects[(i + index) % subjects.len()].as_str()))
                .collect();
            Sender::Nats {
                client,
                round,
                payload: Bytes::from(payload.to_owned()),
            }
        }
        _ => bail!("endpoints of another system"),
    })
}

fn line_sender(write: OwnedWriteHalf, lines: &[String], offset: usize) -> Sender {
    let len = round_len(lines[0].len() + 1, lines.len());
    let mut round = Vec::with_capacity(len * (lines[0].len() + 1));
    for i in 0..len {
        round.extend_from_slice(lines[(i + offset) % lines.len()].as_bytes());
        round.push(b'\n');
    }
    Sender::Bytes {
        write: Box::new(write),
        round,
        per_round: len as u64,
    }
}

/// A round of text frames, each masked as a client must (fastwebsockets
/// draws each frame's mask and writes the frame). The round is sent again
/// and again, masks included: the hub unmasks whatever mask a frame names.
fn frame_sender(write: tcp::OwnedWriteHalf, messages: &[String], offset: usize) -> Sender {
    let len = round_len(messages[0].len(), messages.len());
    let mut round = Vec::with_capacity(len * (messages[0].len() + 14));
    let mut scratch = Vec::new();
    for i in 0..len {
        let message = messages[(i + offset) % messages.len()].as_bytes();
        let mut frame = Frame::text(Payload::Borrowed(message));
        frame.mask();
        round.extend_from_slice(frame.write(&mut scratch));
    }
    Sender::Bytes {
        write: Box::new(write),
        round,
        per_round: len as u64,
    }
}

impl Sender {
    /// Sends rounds until `deadline`; returns how many messages went out,
    /// and itself (still connected).
    async fn blast(mut self, deadline: Instant) -> anyhow::Result<(u64, Sender)> {
        let mut sent = 0u64;
        match &mut self {
            Sender::Bytes {
                write,
                round,
                per_round,
            } => {
                while Instant::now() < deadline {
                    write.write_all(round).await?;
                    sent += *per_round;
                }
            }
            Sender::Nats {
                client,
                round,
                payload,
            } => {
                while Instant::now() < deadline {
                    for subject in round.iter() {
                        client.publish(subject.clone(), payload.clone()).await?;
                    }
                    sent += round.len() as u64;
                }
                client.flush().await?;
            }
        }
        Ok((sent, self))
    }
}

/// A notification sender gets nothing back, ever; anything it does get
/// (an error, say) invalidates the run.
async fn expect_silence(mut read: OwnedReadHalf, mut buf: LineBuf, tally: Arc<Tally>) {
    loop {
        if let Some(line) = buf.take_line() {
            tally.problem(format!(
                "a sender got a message back: {}",
                hub::excerpt(&line)
            ));
        }
        match buf.fill(&mut read).await {
            Ok(0) | Err(_) => return,
            Ok(_) => {}
        }
    }
}

async fn expect_no_frames(read: tcp::OwnedReadHalf, tally: Arc<Tally>) {
    // Its write half is the sender's; a pong or close it would owe is left
    // unsent (the hub sends neither).
    let (mut frames, _) =
        fastwebsockets::after_handshake_split(read, tokio::io::sink(), Role::Client);
    let mut owed = |_| async { Ok::<_, WebSocketError>(()) };
    while let Ok(frame) = frames.read_frame(&mut owed).await {
        match frame.opcode {
            OpCode::Text | OpCode::Binary => tally.problem(format!(
                "a sender got a message back: {}",
                hub::excerpt(&frame.payload)
            )),
            OpCode::Close => return,
            _ => {}
        }
    }
}
