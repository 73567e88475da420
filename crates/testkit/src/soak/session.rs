//! One soak client on one connection: it calls, notifies, cancels,
//! registers, updates, unregisters, subscribes and unsubscribes at random,
//! serves the requests routed to its own services, and checks every message
//! the hub sends it against what it sent.
//!
//! One task owns a session and all its state; nothing here is shared but
//! the counters and the directory of live services.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{json, Value};
use tokio::sync::mpsc;
use tokio::time::{Instant, MissedTickBehavior};

use super::catalog::CatalogView;
use super::stats::{add, inc};
use super::Shared;
use crate::wire::{self, WireReader, WireWriter};

/// The application error code owners answer `fail` requests with.
const SCRIPTED_ERROR: i64 = 4242;
/// Services a client keeps registered at most.
const MAX_OWNED: usize = 3;

/// Why a session ended.
pub enum End {
    /// The client disconnected on purpose (or lost its connection during the
    /// traffic phase) and opens a new one.
    Reconnect,
    /// The run is over for this client.
    Finished,
}

/// The kinds of request a caller sends; the owner knows what to do with each
/// by the method name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// Answered at once with the request's token.
    Echo,
    /// Answered after 0–400 ms; the caller's timeout is 250 ms, so some time
    /// out and their late answers are dropped by the hub.
    Slow,
    /// Never answered: the caller's timeout or cancel ends it.
    Silent,
    /// Answered with an application error carrying the token.
    Fail,
}

impl Kind {
    fn method(self) -> &'static str {
        match self {
            Kind::Echo => "echo",
            Kind::Slow => "slow",
            Kind::Silent => "silent",
            Kind::Fail => "fail",
        }
    }

    fn timeout_ms(self, rng: &mut fastrand::Rng) -> u64 {
        match self {
            Kind::Echo | Kind::Fail => 2000,
            Kind::Slow => 250,
            Kind::Silent => rng.u64(50..500),
        }
    }
}

/// Every request carries a timeout at most this long, which bounds the drain.
pub const LONGEST_TIMEOUT: Duration = Duration::from_millis(2000);

/// What an id this connection used is waiting for.
enum Pending {
    Request {
        token: u64,
        kind: Kind,
        cancel_sent: bool,
    },
    Register,
    Unregister,
    Update,
    Subscribe,
}

enum Subscription {
    Off,
    /// `subscribe` sent; actions before its answer are older than the
    /// snapshot and are ignored.
    Waiting,
    On(CatalogView),
}

pub struct Session {
    index: usize,
    reader: WireReader,
    writer: WireWriter,
    rng: fastrand::Rng,
    next_id: u64,
    outstanding: HashMap<u64, Pending>,
    /// Services registered and not yet unregistered.
    owned: Vec<String>,
    /// Every service this connection ever owned: requests and notifications
    /// for one of them may still arrive after it was unregistered.
    ever_owned: HashSet<String>,
    subscription: Subscription,
    /// Forwarded ids (`Y`) received on this connection.
    forwarded: HashSet<u64>,
    /// Answers of `slow` requests, sent by timer tasks back to this session.
    delayed_tx: mpsc::UnboundedSender<(Value, u64)>,
    delayed_rx: mpsc::UnboundedReceiver<(Value, u64)>,
    revision: u64,
}

impl Session {
    /// Connects, initializes, and registers a first service (subscribing too
    /// for one client in four).
    pub async fn open(index: usize, shared: &Shared) -> anyhow::Result<Session> {
        let name = format!("soak-{index}");
        let (reader, writer, _init) = wire::open(&shared.socket, &shared.token, &name).await?;
        let (delayed_tx, delayed_rx) = mpsc::unbounded_channel();
        let mut session = Session {
            index,
            reader,
            writer,
            rng: fastrand::Rng::new(),
            next_id: 1,
            outstanding: HashMap::new(),
            owned: Vec::new(),
            ever_owned: HashSet::new(),
            subscription: Subscription::Off,
            forwarded: HashSet::new(),
            delayed_tx,
            delayed_rx,
            revision: 0,
        };
        session.register(shared).await?;
        if index.is_multiple_of(4) {
            session.subscribe(shared).await?;
        }
        Ok(session)
    }

    /// Runs until the client disconnects on purpose or the run is over.
    /// `drained` is set once this client has no request left unanswered
    /// after the traffic phase.
    pub async fn run(mut self, shared: &Arc<Shared>, drained: &mut bool) -> End {
        let period = Duration::from_secs_f64(1.0 / shared.ops_per_client.max(0.01));
        let first = Instant::now() + period.mul_f64(self.rng.f64());
        let mut tick = tokio::time::interval_at(first, period);
        tick.set_missed_tick_behavior(MissedTickBehavior::Delay);
        loop {
            let step = tokio::select! {
                message = self.reader.recv() => match message {
                    Ok(Some(message)) => self.on_message(message, shared).await,
                    Ok(None) => Err(Lost::ClosedByHub),
                    Err(error) => {
                        eprintln!("[soak] client {}: {error:#}", self.index);
                        inc(&shared.stats.protocol_failures);
                        Err(Lost::ClosedByHub)
                    }
                },
                Some((id, token)) = self.delayed_rx.recv() => self
                    .writer
                    .respond(&id, json!({"token": token}))
                    .await
                    .map_err(|_| Lost::ClosedByHub),
                _ = tick.tick() => self.on_tick(shared, drained).await,
            };
            match step {
                Ok(()) => {}
                Err(Lost::Disconnect) => {
                    self.leave(shared).await;
                    return End::Reconnect;
                }
                Err(Lost::Finished) => {
                    self.leave(shared).await;
                    return End::Finished;
                }
                Err(Lost::ClosedByHub) => {
                    inc(&shared.stats.closed_by_hub);
                    eprintln!(
                        "[soak] client {}: the hub closed the connection",
                        self.index
                    );
                    self.leave(shared).await;
                    return if Instant::now() < shared.traffic_until {
                        End::Reconnect
                    } else {
                        End::Finished
                    };
                }
            }
        }
    }

    async fn on_tick(&mut self, shared: &Shared, drained: &mut bool) -> Result<(), Lost> {
        let now = Instant::now();
        if now < shared.traffic_until {
            return self.act(shared).await;
        }
        let waiting = self
            .outstanding
            .values()
            .filter(|p| matches!(p, Pending::Request { .. }))
            .count();
        if !*drained && waiting == 0 {
            *drained = true;
            shared.draining.fetch_sub(1, Ordering::AcqRel);
        }
        // Owners keep serving until every client has its answers, so late
        // requests get real answers rather than -32052.
        if *drained && shared.draining.load(Ordering::Acquire) == 0 {
            return Err(Lost::Finished);
        }
        if now >= shared.drain_until {
            add(&shared.stats.unanswered, waiting as u64);
            if waiting > 0 {
                eprintln!(
                    "[soak] client {}: {waiting} requests unanswered after the drain",
                    self.index
                );
            }
            self.outstanding
                .retain(|_, p| !matches!(p, Pending::Request { .. }));
            if !*drained {
                *drained = true;
                shared.draining.fetch_sub(1, Ordering::AcqRel);
            }
            return Err(Lost::Finished);
        }
        Ok(())
    }

    /// One random action of the traffic mix.
    async fn act(&mut self, shared: &Shared) -> Result<(), Lost> {
        let roll = self.rng.u32(0..1000);
        let done = match roll {
            0..=379 => self.notify(shared).await,
            380..=819 => self.request(shared).await,
            820..=859 => self.cancel(shared).await,
            860..=894 => self.update(shared).await,
            895..=929 => self.churn(shared).await,
            930..=964 => self.toggle_subscription(shared).await,
            965..=994 if self.owned.len() < MAX_OWNED => self.register(shared).await,
            965..=994 => self.notify(shared).await,
            _ => return Err(Lost::Disconnect),
        };
        done.map_err(Lost::from)
    }

    fn take_id(&mut self, pending: Pending) -> u64 {
        let id = self.next_id;
        self.next_id += 1;
        self.outstanding.insert(id, pending);
        id
    }

    async fn notify(&mut self, shared: &Shared) -> std::io::Result<()> {
        let Some(target) = shared.directory.pick(&mut self.rng) else {
            return Ok(());
        };
        let n = self.rng.u64(..);
        self.writer
            .notify(
                "clientService/notify",
                json!({"serviceId": target, "method": "note", "params": {"n": n}}),
            )
            .await?;
        inc(&shared.stats.notifications_sent);
        Ok(())
    }

    async fn request(&mut self, shared: &Shared) -> std::io::Result<()> {
        let Some(target) = shared.directory.pick(&mut self.rng) else {
            return Ok(());
        };
        let kind = match self.rng.u32(0..100) {
            0..=69 => Kind::Echo,
            70..=81 => Kind::Slow,
            82..=89 => Kind::Silent,
            _ => Kind::Fail,
        };
        let token = shared.next_token.fetch_add(1, Ordering::Relaxed);
        let timeout_ms = kind.timeout_ms(&mut self.rng);
        let id = self.take_id(Pending::Request {
            token,
            kind,
            cancel_sent: false,
        });
        let params = json!({
            "serviceId": target,
            "method": kind.method(),
            "params": {"token": token},
            "timeoutMs": timeout_ms,
        });
        self.writer
            .request(id, "clientService/request", params)
            .await?;
        inc(&shared.stats.requests_sent);
        Ok(())
    }

    async fn cancel(&mut self, shared: &Shared) -> std::io::Result<()> {
        let candidates: Vec<u64> = self
            .outstanding
            .iter()
            .filter(|(_, p)| {
                matches!(
                    p,
                    Pending::Request {
                        cancel_sent: false,
                        ..
                    }
                )
            })
            .map(|(id, _)| *id)
            .collect();
        if candidates.is_empty() {
            return self.request(shared).await;
        }
        let id = candidates[self.rng.usize(..candidates.len())];
        if let Some(Pending::Request { cancel_sent, .. }) = self.outstanding.get_mut(&id) {
            *cancel_sent = true;
        }
        self.writer
            .notify("$/cancelRequest", json!({"id": id}))
            .await?;
        inc(&shared.stats.cancels_sent);
        Ok(())
    }

    async fn register(&mut self, shared: &Shared) -> std::io::Result<()> {
        self.revision += 1;
        let id = self.take_id(Pending::Register);
        let metadata = json!({"protocol": "soak", "client": self.index, "rev": self.revision});
        self.writer
            .request(id, "client/registerService", json!({"metadata": metadata}))
            .await?;
        inc(&shared.stats.registrations);
        Ok(())
    }

    async fn update(&mut self, shared: &Shared) -> std::io::Result<()> {
        if self.owned.is_empty() {
            return self.register(shared).await;
        }
        let service = self.owned[self.rng.usize(..self.owned.len())].clone();
        self.revision += 1;
        let metadata = json!({"protocol": "soak", "client": self.index, "rev": self.revision});
        let id = self.take_id(Pending::Update);
        self.writer
            .request(
                id,
                "client/updateService",
                json!({"serviceId": service, "metadata": metadata}),
            )
            .await?;
        inc(&shared.stats.updates);
        Ok(())
    }

    /// Unregisters one of this client's services and registers a new one.
    async fn churn(&mut self, shared: &Shared) -> std::io::Result<()> {
        if self.owned.is_empty() {
            return self.register(shared).await;
        }
        let service = self.owned.swap_remove(self.rng.usize(..self.owned.len()));
        shared.directory.remove(&service);
        let id = self.take_id(Pending::Unregister);
        self.writer
            .request(
                id,
                "client/unregisterService",
                json!({"serviceId": service}),
            )
            .await?;
        inc(&shared.stats.unregistrations);
        self.register(shared).await
    }

    async fn subscribe(&mut self, shared: &Shared) -> std::io::Result<()> {
        let id = self.take_id(Pending::Subscribe);
        self.subscription = Subscription::Waiting;
        self.writer
            .request(
                id,
                "subscribe",
                json!({"channel": "ahp-client-services://"}),
            )
            .await?;
        inc(&shared.stats.subscribes);
        Ok(())
    }

    async fn toggle_subscription(&mut self, shared: &Shared) -> std::io::Result<()> {
        match self.subscription {
            Subscription::Off => self.subscribe(shared).await,
            Subscription::Waiting => Ok(()),
            Subscription::On(_) => {
                self.subscription = Subscription::Off;
                self.writer
                    .notify("unsubscribe", json!({"channel": "ahp-client-services://"}))
                    .await?;
                inc(&shared.stats.unsubscribes);
                Ok(())
            }
        }
    }

    async fn on_message(&mut self, message: Value, shared: &Shared) -> Result<(), Lost> {
        match message.get("method").and_then(Value::as_str) {
            Some("clientService/handleRequest") => self.serve(message, shared).await?,
            Some("clientService/notification") => {
                inc(&shared.stats.notifications_received);
                let service = message["params"]["serviceId"].as_str().unwrap_or_default();
                if !self.ever_owned.contains(service) {
                    inc(&shared.stats.foreign_deliveries);
                    eprintln!(
                        "[soak] client {}: notification for {service}, never owned",
                        self.index
                    );
                }
            }
            Some("$/cancelRequest") => {
                inc(&shared.stats.cancels_received);
                let forwarded = message["params"]["id"].as_u64().unwrap_or(u64::MAX);
                if !self.forwarded.contains(&forwarded) {
                    inc(&shared.stats.unknown_cancels);
                    eprintln!(
                        "[soak] client {}: $/cancelRequest for unknown id {forwarded}",
                        self.index
                    );
                }
            }
            Some("action") => {
                if let Subscription::On(view) = &mut self.subscription {
                    inc(&shared.stats.catalog_actions);
                    if let Err(problem) = view.apply(&message["params"]) {
                        inc(&shared.stats.catalog_inconsistencies);
                        eprintln!("[soak] client {}: catalog: {problem}", self.index);
                    }
                }
            }
            Some(other) => {
                inc(&shared.stats.protocol_failures);
                eprintln!("[soak] client {}: unexpected method {other}", self.index);
            }
            None => self.on_answer(message, shared),
        }
        Ok(())
    }

    /// An owner's side: a request routed to one of this client's services.
    async fn serve(&mut self, message: Value, shared: &Shared) -> std::io::Result<()> {
        inc(&shared.stats.forwarded_received);
        let id = message["id"].clone();
        let Some(forwarded) = id.as_u64() else {
            inc(&shared.stats.protocol_failures);
            eprintln!(
                "[soak] client {}: forwarded id is not an integer: {message}",
                self.index
            );
            return Ok(());
        };
        if !self.forwarded.insert(forwarded) {
            inc(&shared.stats.duplicate_deliveries);
            eprintln!(
                "[soak] client {}: forwarded id {forwarded} delivered twice",
                self.index
            );
        }
        let params = &message["params"];
        let service = params["serviceId"].as_str().unwrap_or_default();
        if !self.ever_owned.contains(service) {
            inc(&shared.stats.foreign_deliveries);
            eprintln!(
                "[soak] client {}: request for {service}, never owned",
                self.index
            );
        }
        let token = params["params"]["token"].as_u64().unwrap_or(u64::MAX);
        match params["method"].as_str() {
            Some("echo") => self.writer.respond(&id, json!({"token": token})).await?,
            Some("fail") => {
                let error = json!({"code": SCRIPTED_ERROR, "message": "scripted failure", "data": {"token": token}});
                self.writer.respond_error(&id, error).await?
            }
            Some("slow") => {
                let delay = Duration::from_millis(self.rng.u64(0..400));
                let back = self.delayed_tx.clone();
                tokio::spawn(async move {
                    tokio::time::sleep(delay).await;
                    let _ = back.send((id, token));
                });
            }
            Some("silent") => {}
            _ => {
                inc(&shared.stats.protocol_failures);
                eprintln!("[soak] client {}: unknown request {message}", self.index);
            }
        }
        Ok(())
    }

    /// A caller's side: the answer to one of this connection's ids.
    fn on_answer(&mut self, message: Value, shared: &Shared) {
        let stats = &shared.stats;
        let Some(id) = message["id"].as_u64() else {
            inc(&stats.protocol_failures);
            eprintln!(
                "[soak] client {}: answer without our id: {message}",
                self.index
            );
            return;
        };
        let Some(pending) = self.outstanding.remove(&id) else {
            if id < self.next_id {
                inc(&stats.duplicate_answers);
                eprintln!(
                    "[soak] client {}: id {id} answered twice: {message}",
                    self.index
                );
            } else {
                inc(&stats.unknown_answers);
                eprintln!("[soak] client {}: answer to unused id {id}", self.index);
            }
            return;
        };
        let error = message.get("error");
        let code = error.and_then(|e| e["code"].as_i64());
        match pending {
            Pending::Request {
                token,
                kind,
                cancel_sent,
            } => {
                // (counter, whether the answer is worth a line on stderr)
                let (counter, suspicious) = match (message.get("result"), code) {
                    (Some(result), None) if kind != Kind::Silent && kind != Kind::Fail => {
                        if result["token"].as_u64() == Some(token) {
                            (&stats.answered_result, false)
                        } else {
                            (&stats.misrouted_answers, true)
                        }
                    }
                    (None, Some(SCRIPTED_ERROR)) if kind == Kind::Fail => {
                        let data = error.map(|e| &e["data"]["token"]);
                        if data.and_then(Value::as_u64) == Some(token) {
                            (&stats.answered_app_error, false)
                        } else {
                            (&stats.misrouted_answers, true)
                        }
                    }
                    (None, Some(-32008)) => (&stats.answered_not_found, false),
                    (None, Some(-32052)) => (&stats.answered_gone, false),
                    (None, Some(-32051)) => (&stats.answered_timeout, false),
                    (None, Some(-32800)) if cancel_sent => (&stats.answered_cancelled, false),
                    (None, Some(-32050)) => (&stats.answered_limit, false),
                    _ => (&stats.unexpected_answers, true),
                };
                if suspicious {
                    eprintln!(
                        "[soak] client {}: {kind:?} request {id} (token {token}) got {message}",
                        self.index
                    );
                }
                inc(counter);
            }
            Pending::Register => match message["result"]["serviceId"].as_str() {
                Some(service) => {
                    self.owned.push(service.to_owned());
                    self.ever_owned.insert(service.to_owned());
                    shared.directory.add(service);
                }
                None => self.unexpected(stats, "registerService", &message),
            },
            Pending::Unregister | Pending::Update => {
                if message.get("result").is_none() {
                    self.unexpected(stats, "unregister/update", &message);
                }
            }
            Pending::Subscribe => {
                let view = message
                    .get("result")
                    .ok_or_else(|| format!("subscribe failed: {message}"))
                    .and_then(|result| CatalogView::from_snapshot(&result["snapshot"]));
                match view {
                    Ok(view) => self.subscription = Subscription::On(view),
                    Err(problem) => {
                        self.subscription = Subscription::Off;
                        inc(&stats.catalog_inconsistencies);
                        eprintln!("[soak] client {}: {problem}", self.index);
                    }
                }
            }
        }
    }

    fn unexpected(&self, stats: &super::stats::Stats, what: &str, message: &Value) {
        inc(&stats.unexpected_answers);
        eprintln!("[soak] client {}: {what}: {message}", self.index);
    }

    /// Leaves the connection: its services leave the directory, and requests
    /// still waiting can no longer be answered.
    async fn leave(&mut self, shared: &Shared) {
        for service in self.owned.drain(..) {
            shared.directory.remove(&service);
        }
        let waiting = self
            .outstanding
            .values()
            .filter(|p| matches!(p, Pending::Request { .. }))
            .count();
        add(&shared.stats.abandoned, waiting as u64);
        self.outstanding.clear();
        self.writer.close().await;
    }
}

/// Why the session loop stops.
enum Lost {
    /// The client decided to disconnect.
    Disconnect,
    /// The run is over.
    Finished,
    /// Reading or writing failed: the hub closed the connection.
    ClosedByHub,
}

impl From<std::io::Error> for Lost {
    fn from(_: std::io::Error) -> Lost {
        Lost::ClosedByHub
    }
}
