//! One soak client of one hub: a session after another (its hub may be
//! killed under it), each owning one service and, at its share of the
//! rate, sending requests and notifications to services of every hub
//! (mostly of the other two), while answering what is sent to its own.
//!
//! Requests carry a token unique in the run, which the owner echoes (in
//! its result, or in its error's data), so an answer for another request
//! is recognised. Each session numbers its notifications; an owner keeps
//! the last number it got from each sender, so a repeat or a reordering is
//! recognised. The client reads the wire itself (`wire.rs`): the SDK drops
//! an answer it does not expect, which would hide a duplicate.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{json, Value};
use tokio::sync::mpsc;
use tokio::time::Instant;

use super::tally::inc;
use super::Shared;
use crate::wire::{self, WireReader, WireWriter};

/// A request the caller waits on.
struct Pending {
    token: u64,
    /// To a service of another hub.
    remote: bool,
}

/// How an owner answers a request: the caller chooses, in its params.
#[derive(Clone, Copy)]
enum Mode {
    Now,
    Slow,
    Never,
    Fail,
}

impl Mode {
    fn pick(rng: &mut fastrand::Rng) -> Mode {
        match rng.u32(..100) {
            0..=79 => Mode::Now,
            80..=89 => Mode::Slow,
            90..=94 => Mode::Never,
            _ => Mode::Fail,
        }
    }

    fn name(self) -> &'static str {
        match self {
            Mode::Now => "now",
            Mode::Slow => "slow",
            Mode::Never => "never",
            Mode::Fail => "fail",
        }
    }

    /// The caller's `timeoutMs`: short where no answer will come.
    fn timeout_ms(self) -> u64 {
        match self {
            Mode::Never => 300,
            _ => 2000,
        }
    }
}

/// The longest `timeoutMs` a request carries.
pub const LONGEST_TIMEOUT: Duration = Duration::from_millis(2000);

/// How a session ended.
enum End {
    /// Its hub closed it (killed): connect again once the hub is back.
    Lost,
    /// The run is over and its answers are in (or the drain ended).
    Finished,
}

/// Sessions on hub `hub` until the run ends.
pub async fn run(hub: usize, index: usize, shared: Arc<Shared>) {
    let mut rng = fastrand::Rng::with_seed((hub * 1000 + index) as u64);
    let mut session = 0;
    loop {
        if shared.traffic_over() {
            return;
        }
        let Some(opened) = open(hub, index, session, &shared).await else {
            tokio::time::sleep(Duration::from_millis(100)).await;
            continue;
        };
        session += 1;
        inc(&shared.counts.sessions);
        match serve(hub, opened, &shared, &mut rng).await {
            End::Lost => continue,
            End::Finished => return,
        }
    }
}

struct Opened {
    reader: WireReader,
    writer: WireWriter,
    service_id: String,
    /// Names this session as a sender of notifications.
    key: String,
}

/// Connects to hub `hub` (as `hub.json` says now), initializes and
/// registers a service; `None` while the hub is down.
async fn open(hub: usize, index: usize, session: u64, shared: &Shared) -> Option<Opened> {
    let slot = &shared.hubs[hub];
    if !slot.up.load(Ordering::Acquire) {
        return None;
    }
    let info = crate::read_hub_json(&slot.dir)?;
    let socket = std::path::PathBuf::from(info["socket"].as_str()?);
    let token = info["token"].as_str()?;
    let name = format!("fabric-{}-{index}", slot.name);
    let (mut reader, mut writer, _) = wire::open(&socket, token, &name).await.ok()?;
    let params = json!({"metadata": {"soak": "fabric", "hub": slot.name, "client": index}});
    writer
        .request(1, "client/registerService", params)
        .await
        .ok()?;
    let answer = tokio::time::timeout(Duration::from_secs(10), reader.response(&json!(1)))
        .await
        .ok()?
        .ok()?;
    let Some(service_id) = answer["result"]["serviceId"].as_str() else {
        inc(&shared.counts.protocol_failures);
        eprintln!("[fabric] {name}: registerService failed: {answer}");
        return None;
    };
    shared.directory.add(hub, service_id);
    Some(Opened {
        reader,
        writer,
        service_id: service_id.to_owned(),
        key: format!("{}/{index}/{session}", slot.name),
    })
}

/// One session: sends at its share of the rate until the traffic ends,
/// answers its service's requests, checks every answer and notification.
async fn serve(hub: usize, opened: Opened, shared: &Shared, rng: &mut fastrand::Rng) -> End {
    let Opened {
        mut reader,
        mut writer,
        service_id,
        key,
    } = opened;
    let mut pending: HashMap<u64, Pending> = HashMap::new();
    let mut answered: HashSet<u64> = HashSet::new();
    // This owner's view of each sender: the last sequence number it got.
    let mut last_seq: HashMap<String, u64> = HashMap::new();
    let mut next_id: u64 = 2;
    let mut next_seq: u64 = 0;
    let (later_tx, mut later) = mpsc::unbounded_channel::<Value>();
    let period = Duration::from_secs_f64(1.0 / shared.per_client_rate);
    let mut tick = tokio::time::interval_at(Instant::now() + period.mul_f64(rng.f64()), period);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let end = loop {
        let sending = !shared.traffic_over();
        if !sending && pending.is_empty() {
            break End::Finished;
        }
        if !sending && Instant::now() >= shared.drain_until {
            shared
                .counts
                .unanswered
                .fetch_add(pending.len() as u64, Ordering::Relaxed);
            eprintln!(
                "[fabric] {key}: {} requests unanswered after the drain",
                pending.len()
            );
            pending.clear();
            break End::Finished;
        }
        tokio::select! {
            message = reader.recv() => {
                let message = match message {
                    Ok(Some(message)) => message,
                    Ok(None) | Err(_) => {
                        // The hub went away (killed): nothing pending can
                        // be answered on this connection any more.
                        shared
                            .counts
                            .abandoned
                            .fetch_add(pending.len() as u64, Ordering::Relaxed);
                        shared.directory.remove(&service_id);
                        return End::Lost;
                    }
                };
                handle(
                    &message,
                    &service_id,
                    &mut pending,
                    &mut answered,
                    &mut last_seq,
                    &later_tx,
                    &mut writer,
                    shared,
                    rng,
                )
                .await;
            }
            Some(answer) = later.recv() => {
                let _ = writer.send(&answer).await;
            }
            _ = tick.tick(), if sending => {
                let Some((target_hub, target)) = shared.directory.pick(rng, hub, 0.8) else {
                    continue;
                };
                let remote = target_hub != hub;
                if rng.bool() {
                    let mode = Mode::pick(rng);
                    let token = shared.next_token.fetch_add(1, Ordering::Relaxed);
                    let id = next_id;
                    next_id += 1;
                    let params = json!({
                        "serviceId": target,
                        "method": "echo",
                        "params": {"token": token, "mode": mode.name()},
                        "timeoutMs": mode.timeout_ms(),
                    });
                    if writer.request(id, "clientService/request", params).await.is_ok() {
                        pending.insert(id, Pending { token, remote });
                        inc(&shared.counts.requests_sent);
                        if remote {
                            inc(&shared.counts.requests_remote);
                        }
                    }
                } else {
                    next_seq += 1;
                    let params = json!({
                        "serviceId": target,
                        "method": "tick",
                        "params": {"from": key, "seq": next_seq},
                    });
                    if writer.notify("clientService/notify", params).await.is_ok() {
                        inc(&shared.counts.notifications_sent);
                        if remote {
                            inc(&shared.counts.notifications_remote);
                        }
                    }
                }
            }
            () = tokio::time::sleep(Duration::from_millis(200)), if !sending => {}
        }
    };
    shared.directory.remove(&service_id);
    writer.close().await;
    end
}

#[allow(clippy::too_many_arguments)]
async fn handle(
    message: &Value,
    service_id: &str,
    pending: &mut HashMap<u64, Pending>,
    answered: &mut HashSet<u64>,
    last_seq: &mut HashMap<String, u64>,
    later: &mpsc::UnboundedSender<Value>,
    writer: &mut WireWriter,
    shared: &Shared,
    rng: &mut fastrand::Rng,
) {
    let counts = &shared.counts;
    match message["method"].as_str() {
        None => {
            // An answer to one of this session's requests.
            let Some(id) = message["id"].as_u64() else {
                inc(&counts.protocol_failures);
                eprintln!("[fabric] an answer without a numeric id: {message}");
                return;
            };
            let Some(request) = pending.remove(&id) else {
                if answered.contains(&id) {
                    inc(&counts.duplicate_answers);
                    eprintln!("[fabric] answered twice: {message}");
                } else {
                    inc(&counts.unknown_answers);
                    eprintln!("[fabric] an answer to an id never used: {message}");
                }
                return;
            };
            answered.insert(id);
            if let Some(result) = message.get("result") {
                if result["token"].as_u64() == Some(request.token) {
                    inc(&counts.answered_result);
                    if request.remote {
                        shared.remote_result_seen();
                    }
                } else {
                    inc(&counts.misrouted_answers);
                    eprintln!("[fabric] a result for token {}: {message}", request.token);
                }
                return;
            }
            let error = &message["error"];
            let code = error["code"].as_i64().unwrap_or(0);
            if code == APP_ERROR {
                if error["data"]["token"].as_u64() == Some(request.token) {
                    inc(&counts.answered_app_error);
                } else {
                    inc(&counts.misrouted_answers);
                    eprintln!("[fabric] an error for token {}: {message}", request.token);
                }
            } else {
                counts.answered_error(code);
            }
        }
        Some("clientService/handleRequest") => {
            inc(&counts.forwarded_received);
            let params = &message["params"];
            if params["serviceId"] != service_id {
                inc(&counts.foreign_deliveries);
                eprintln!("[fabric] a request for another service: {message}");
            }
            let id = message["id"].clone();
            let token = params["params"]["token"].clone();
            match params["params"]["mode"].as_str() {
                Some("now") => {
                    let _ = writer.respond(&id, json!({"token": token})).await;
                }
                Some("slow") => {
                    let delay = Duration::from_millis(rng.u64(..300));
                    let later = later.clone();
                    tokio::spawn(async move {
                        tokio::time::sleep(delay).await;
                        let _ = later
                            .send(json!({"jsonrpc": "2.0", "id": id, "result": {"token": token}}));
                    });
                }
                Some("fail") => {
                    let error = json!({"code": APP_ERROR, "message": "failed on purpose", "data": {"token": token}});
                    let _ = writer.respond_error(&id, error).await;
                }
                _ => {} // never: the caller's timeout answers it
            }
        }
        Some("clientService/notification") => {
            inc(&counts.notifications_received);
            let params = &message["params"];
            if params["serviceId"] != service_id {
                inc(&counts.foreign_deliveries);
                eprintln!("[fabric] a notification for another service: {message}");
            }
            let (Some(from), Some(seq)) = (
                params["params"]["from"].as_str(),
                params["params"]["seq"].as_u64(),
            ) else {
                inc(&counts.protocol_failures);
                eprintln!("[fabric] a notification without from and seq: {message}");
                return;
            };
            let last = last_seq.entry(from.to_owned()).or_insert(0);
            if seq == *last {
                inc(&counts.notifications_repeated);
                eprintln!("[fabric] notification {seq} from {from} again");
            } else if seq < *last {
                inc(&counts.notifications_reordered);
                eprintln!("[fabric] notification {seq} from {from} after {last}");
            } else {
                *last = seq;
            }
        }
        // Cancels of requests whose caller timed out or left.
        Some(_) => {}
    }
}

/// The error code owners answer `fail` requests with.
const APP_ERROR: i64 = 1;
