//! Request/reply: one caller keeps `window` requests in flight (1: strictly
//! sequential) for a fixed time against one responder that answers each with
//! the same payload. Latency is from the moment a request is written to the
//! moment its answer is read, in an HDR histogram.

use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use bytes::Bytes;
use futures_util::stream::FuturesUnordered;
use futures_util::{FutureExt, SinkExt, StreamExt};
use hdrhistogram::Histogram;
use tokio::io::AsyncWriteExt;
use tokio::net::unix::{OwnedReadHalf, OwnedWriteHalf};
use tokio::task::JoinHandle;
use tokio_tungstenite::tungstenite::Message;

use crate::lines::{self, After, LineBuf};
use crate::messages::{self, RequestTemplate};
use crate::systems::hub::{excerpt, HubConn, Transport, WsStream};
use crate::systems::System;
use crate::workloads::{cpu_now, CpuSpent, Placement, Servers};

/// Longest wait for one answer before the run is declared broken.
const ANSWER_LIMIT: Duration = Duration::from_secs(10);
/// Send times are kept in a ring indexed by id; far more than any window.
const RING: usize = 1 << 16;

#[derive(Debug, Clone)]
pub struct RequestSpec {
    pub window: usize,
    pub duration: Duration,
    pub payload_size: usize,
    /// For the hub over its Unix socket: one hub, or across two.
    pub placement: Placement,
}

pub struct RequestOutcome {
    pub completed: u64,
    pub elapsed: Duration,
    /// Nanoseconds.
    pub latency: Histogram<u64>,
    pub cpu: CpuSpent,
}

impl RequestOutcome {
    pub fn per_sec(&self) -> f64 {
        self.completed as f64 / self.elapsed.as_secs_f64()
    }

    /// A quantile in microseconds.
    pub fn quantile_us(&self, q: f64) -> f64 {
        self.latency.value_at_quantile(q) as f64 / 1000.0
    }
}

fn histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 60_000_000_000, 3).expect("valid histogram bounds")
}

/// The caller's view: send times and the histogram.
struct Clock {
    sent_at: Vec<Option<Instant>>,
    latency: Histogram<u64>,
    completed: u64,
    last: Instant,
}

impl Clock {
    fn new() -> Self {
        Clock {
            sent_at: vec![None; RING],
            latency: histogram(),
            completed: 0,
            last: Instant::now(),
        }
    }

    fn sent(&mut self, id: u64, at: Instant) {
        self.sent_at[id as usize % RING] = Some(at);
    }

    fn answered(&mut self, id: u64, at: Instant) -> anyhow::Result<()> {
        let sent = self.sent_at[id as usize % RING]
            .take()
            .with_context(|| format!("an answer to id {id}, which is not in flight"))?;
        let nanos = at.saturating_duration_since(sent).as_nanos() as u64;
        self.latency.saturating_record(nanos.max(1));
        self.completed += 1;
        self.last = at;
        Ok(())
    }
}

pub async fn run(
    servers: &Servers,
    system: System,
    spec: &RequestSpec,
    tag: &str,
) -> anyhow::Result<RequestOutcome> {
    let payload = messages::payload(spec.payload_size);
    let mut responder: Option<JoinHandle<()>> = None;
    let outcome = measure(servers, system, spec, tag, &payload, &mut responder).await;
    if let Some(task) = responder {
        task.abort();
        let _ = task.await;
    }
    outcome
}

async fn measure(
    servers: &Servers,
    system: System,
    spec: &RequestSpec,
    tag: &str,
    payload: &str,
    responder: &mut Option<JoinHandle<()>>,
) -> anyhow::Result<RequestOutcome> {
    let service = format!("rr-{tag}");
    let caller_name = format!("caller-{tag}");
    let pid = servers.pid(system);
    match system {
        System::HubUnix | System::HubWs => {
            let transport = if system == System::HubUnix {
                Transport::Unix
            } else {
                Transport::Ws
            };
            let (owners, callers) = match system {
                System::HubUnix => servers.hubs(spec.placement)?,
                _ => (&servers.hub, &servers.hub),
            };
            let mut owner = HubConn::connect(&owners.info, transport, &service).await?;
            let service_id = owner.register(&service).await?;
            if !std::ptr::eq(owners, callers) {
                // A connection of its own: the caller's must see no actions.
                let mut waiter =
                    HubConn::connect(&callers.info, transport, &format!("w-{tag}")).await?;
                waiter
                    .wait_listed(std::slice::from_ref(&service_id), Duration::from_secs(20))
                    .await?;
            }
            let caller = HubConn::connect(&callers.info, transport, &caller_name).await?;
            let newline = transport == Transport::Unix;
            let requests = RequestTemplate::hub("", &service_id, payload, newline);
            let answers = RequestTemplate::response("", payload, newline);
            if transport == Transport::Unix {
                let (read, write, buf) = owner.into_unix()?;
                *responder = Some(tokio::spawn(answer_lines(read, write, buf, answers, false)));
                let (read, write, buf) = caller.into_unix()?;
                let cpu_before = cpu_now(pid)?;
                let (clock, start) = call_lines(read, write, buf, &requests, spec, false).await?;
                finish(clock, start, cpu_now(pid)? - cpu_before)
            } else {
                *responder = Some(tokio::spawn(answer_frames(owner.into_ws()?, answers)));
                let ws = caller.into_ws()?;
                let cpu_before = cpu_now(pid)?;
                let (clock, start) = call_frames(ws, &requests, spec).await?;
                finish(clock, start, cpu_now(pid)? - cpu_before)
            }
        }
        System::Floor => {
            let (read, write, buf) = servers.floor.connect(&service).await?;
            let answers = RequestTemplate::response("", payload, true);
            *responder = Some(tokio::spawn(answer_lines(read, write, buf, answers, true)));
            let (read, write, buf) = servers.floor.connect(&caller_name).await?;
            // The hub's request line, behind the floor's routing prefix.
            let requests = RequestTemplate::hub(&format!("{service} "), &service, payload, true);
            let cpu_before = cpu_now(pid)?;
            let (clock, start) = call_lines(read, write, buf, &requests, spec, true).await?;
            finish(clock, start, cpu_now(pid)? - cpu_before)
        }
        System::Nats => {
            let owner = servers.nats.connect().await?;
            let subject = format!("bench.rr.{tag}");
            let subscriber = owner.subscribe(subject.clone()).await?;
            owner.flush().await?;
            *responder = Some(tokio::spawn(answer_nats(
                owner,
                subscriber,
                Bytes::from(payload.to_owned()),
            )));
            let caller = servers.nats.connect().await?;
            let cpu_before = cpu_now(pid)?;
            let (clock, start) =
                call_nats(caller, subject, Bytes::from(payload.to_owned()), spec).await?;
            finish(clock, start, cpu_now(pid)? - cpu_before)
        }
    }
}

fn finish(clock: Clock, start: Instant, cpu: CpuSpent) -> anyhow::Result<RequestOutcome> {
    if clock.completed == 0 {
        bail!("no request was answered");
    }
    Ok(RequestOutcome {
        completed: clock.completed,
        elapsed: clock.last.saturating_duration_since(start),
        latency: clock.latency,
        cpu,
    })
}

/// The responder over lines (the hub, or the floor when `floor`): every request read is answered in the next
/// write, all answers to one read in one write. On the floor, an answer goes
/// back to the name the request came from.
pub async fn answer_lines(
    mut read: OwnedReadHalf,
    mut write: OwnedWriteHalf,
    mut buf: LineBuf,
    answers: RequestTemplate,
    floor: bool,
) {
    let mut out = Vec::with_capacity(64 * 1024);
    loop {
        buf.drain_lines(|line| {
            let (from, json) = if floor {
                match lines::split_route(line) {
                    Some(split) => split,
                    None => return,
                }
            } else {
                (&b""[..], line)
            };
            if let Some((id, After::Method)) = lines::message_id(json) {
                if floor {
                    out.extend_from_slice(from);
                    out.push(b' ');
                }
                answers.write(&mut out, id);
            }
        });
        if !out.is_empty() {
            if write.write_all(&out).await.is_err() {
                return;
            }
            out.clear();
        }
        match buf.fill(&mut read).await {
            Ok(0) | Err(_) => return,
            Ok(_) => {}
        }
    }
}

/// The caller over lines.
async fn call_lines(
    mut read: OwnedReadHalf,
    mut write: OwnedWriteHalf,
    mut buf: LineBuf,
    requests: &RequestTemplate,
    spec: &RequestSpec,
    floor: bool,
) -> anyhow::Result<(Clock, Instant)> {
    let mut clock = Clock::new();
    let mut out = Vec::with_capacity(64 * 1024);
    let mut next_id = 1u64;
    let start = Instant::now();
    let deadline = start + spec.duration;
    for _ in 0..spec.window {
        requests.write(&mut out, next_id);
        clock.sent(next_id, start);
        next_id += 1;
    }
    let mut in_flight = spec.window;
    write.write_all(&out).await?;
    out.clear();
    while in_flight > 0 {
        let read_now = tokio::time::timeout(ANSWER_LIMIT, buf.fill(&mut read))
            .await
            .context("no answer within the time limit")??;
        if read_now == 0 {
            bail!("the connection closed with {in_flight} requests in flight");
        }
        let now = Instant::now();
        let mut failure = None;
        buf.drain_lines(|line| {
            let json = if floor {
                lines::split_route(line).map_or(line, |(_, rest)| rest)
            } else {
                line
            };
            match lines::message_id(json) {
                Some((id, After::Result)) => {
                    if let Err(error) = clock.answered(id, now) {
                        failure.get_or_insert(error);
                    }
                    in_flight -= 1;
                    if now < deadline {
                        requests.write(&mut out, next_id);
                        clock.sent(next_id, now);
                        next_id += 1;
                        in_flight += 1;
                    }
                }
                _ => {
                    failure.get_or_insert(anyhow::anyhow!("unexpected answer: {}", excerpt(json)));
                }
            }
        });
        if let Some(error) = failure {
            return Err(error);
        }
        if !out.is_empty() {
            write.write_all(&out).await?;
            out.clear();
        }
    }
    Ok((clock, start))
}

async fn answer_frames(mut ws: WsStream, answers: RequestTemplate) {
    let handle = |frame: Message, out: &mut Vec<Message>| {
        if let Message::Text(text) = frame {
            if let Some((id, After::Method)) = lines::message_id(text.as_bytes()) {
                let answer = answers.build(id);
                if let Ok(answer) = String::from_utf8(answer) {
                    out.push(Message::text(answer));
                }
            }
        }
    };
    let mut out = Vec::new();
    while let Some(Ok(frame)) = ws.next().await {
        handle(frame, &mut out);
        // Everything already received is answered in one flush.
        while let Some(Some(Ok(frame))) = ws.next().now_or_never() {
            handle(frame, &mut out);
        }
        for answer in out.drain(..) {
            if ws.feed(answer).await.is_err() {
                return;
            }
        }
        if ws.flush().await.is_err() {
            return;
        }
    }
}

async fn call_frames(
    mut ws: WsStream,
    requests: &RequestTemplate,
    spec: &RequestSpec,
) -> anyhow::Result<(Clock, Instant)> {
    let text = |id: u64| -> anyhow::Result<Message> {
        Ok(Message::text(String::from_utf8(requests.build(id))?))
    };
    let mut clock = Clock::new();
    let mut next_id = 1u64;
    let start = Instant::now();
    let deadline = start + spec.duration;
    for _ in 0..spec.window {
        ws.feed(text(next_id)?).await?;
        clock.sent(next_id, start);
        next_id += 1;
    }
    ws.flush().await?;
    let mut in_flight = spec.window;
    while in_flight > 0 {
        let frame = tokio::time::timeout(ANSWER_LIMIT, ws.next())
            .await
            .context("no answer within the time limit")?
            .context("the WebSocket closed")??;
        let now = Instant::now();
        let mut frames = vec![frame];
        while let Some(Some(Ok(frame))) = ws.next().now_or_never() {
            frames.push(frame);
        }
        let mut wrote = false;
        for frame in frames {
            let Message::Text(text_frame) = frame else {
                continue;
            };
            match lines::message_id(text_frame.as_bytes()) {
                Some((id, After::Result)) => {
                    clock.answered(id, now)?;
                    in_flight -= 1;
                    if now < deadline {
                        ws.feed(text(next_id)?).await?;
                        clock.sent(next_id, now);
                        next_id += 1;
                        in_flight += 1;
                        wrote = true;
                    }
                }
                _ => bail!("unexpected answer: {}", excerpt(text_frame.as_bytes())),
            }
        }
        if wrote {
            ws.flush().await?;
        }
    }
    Ok((clock, start))
}

async fn answer_nats(
    client: async_nats::Client,
    mut subscriber: async_nats::Subscriber,
    payload: Bytes,
) {
    while let Some(message) = subscriber.next().await {
        if let Some(reply) = message.reply {
            if client.publish(reply, payload.clone()).await.is_err() {
                return;
            }
        }
    }
}

async fn call_nats(
    client: async_nats::Client,
    subject: String,
    payload: Bytes,
    spec: &RequestSpec,
) -> anyhow::Result<(Clock, Instant)> {
    let subject = async_nats::Subject::from(subject.as_str());
    let mut clock = Clock::new();
    let mut next_id = 1u64;
    let start = Instant::now();
    let deadline = start + spec.duration;
    let request = |id: u64, at: Instant| {
        let client = client.clone();
        let subject = subject.clone();
        let payload = payload.clone();
        async move {
            let answer = client.request(subject, payload).await;
            (id, at, answer)
        }
    };
    let mut in_flight = FuturesUnordered::new();
    for _ in 0..spec.window {
        clock.sent(next_id, start);
        in_flight.push(request(next_id, start));
        next_id += 1;
    }
    while let Some(done) = tokio::time::timeout(ANSWER_LIMIT, in_flight.next())
        .await
        .context("no answer within the time limit")?
    {
        let (id, _, answer) = done;
        let now = Instant::now();
        let answer = answer.context("a NATS request failed")?;
        if answer.payload.len() != payload.len() {
            bail!("a NATS answer has the wrong payload");
        }
        clock.answered(id, now)?;
        if now < deadline {
            clock.sent(next_id, now);
            in_flight.push(request(next_id, now));
            next_id += 1;
        }
    }
    Ok((clock, start))
}
