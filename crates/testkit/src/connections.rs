//! Many concurrent connections held open: what each one costs the hub, that
//! `maxConnections` is enforced at its edge, that the hub keeps routing
//! while it holds them, and that it returns to its baseline when they close.

use std::io;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context};
use serde_json::{json, Value};
use tokio::net::UnixStream;
use tokio::sync::watch;
use tokio::time::Instant;

use crate::sampler::{self, DriverCounts, HubSample, Recorder};
use crate::target::HubTarget;
use crate::wire::{self, WireReader, WireWriter};

/// How long opening one connection may be retried while the listen backlog
/// is full.
const CONNECT_WAIT: Duration = Duration::from_secs(30);
const SETTLE_WAIT: Duration = Duration::from_secs(30);
/// How long one routing probe (a request and its answer) may take.
const PROBE_WAIT: Duration = Duration::from_secs(10);

#[derive(Debug, Clone)]
pub struct Options {
    pub connections: usize,
    /// How long the connections are held once all are open.
    pub hold: Duration,
    /// Connections being opened at once.
    pub concurrency: usize,
}

pub struct Report {
    pub options: Options,
    pub max_connections: u64,
    pub baseline: HubSample,
    /// The last sample while every connection was held.
    pub held: HubSample,
    pub settled: Option<HubSample>,
    /// `Some(refused)` when the run opened exactly `maxConnections` and then
    /// tried one more.
    pub limit_edge_refused: Option<bool>,
    pub probes_answered: u64,
    pub failures: Vec<String>,
}

impl Report {
    /// Hub memory per held connection, in bytes.
    pub fn rss_per_connection(&self) -> f64 {
        let grown = self.held.rss_kib.saturating_sub(self.baseline.rss_kib) as f64 * 1024.0;
        grown / self.options.connections.max(1) as f64
    }
}

pub async fn run(
    target: &HubTarget,
    options: Options,
    recorder: Arc<Recorder>,
) -> anyhow::Result<Report> {
    let baseline = sampler::idle_baseline(target, &recorder).await?;
    let opened = Arc::new(AtomicU64::new(0));
    let (stop_tx, stop_rx) = watch::channel(false);
    let sampler_task = {
        let opened = opened.clone();
        tokio::spawn(sampler::run(
            target.clone(),
            recorder.clone(),
            move || DriverCounts {
                client_connections: opened.load(Ordering::Relaxed),
                ..DriverCounts::default()
            },
            stop_rx,
        ))
    };

    let mut failures = Vec::new();
    recorder.set_phase("opening");
    // Two of the connections play owner and caller for the routing probes.
    let (mut owner_reader, mut owner_writer, init) = open_one(target, "held-owner").await?;
    let (mut caller_reader, mut caller_writer, _) = open_one(target, "held-caller").await?;
    opened.fetch_add(2, Ordering::Relaxed);
    let max_connections = init["limits"]["maxConnections"].as_u64().unwrap_or(0);
    owner_writer
        .request(
            1,
            "client/registerService",
            json!({"metadata": {"protocol": "probe"}}),
        )
        .await?;
    let registered = owner_reader.response(&json!(1)).await?;
    let service = registered["result"]["serviceId"]
        .as_str()
        .with_context(|| format!("registerService: {registered}"))?
        .to_owned();

    let mut held: Vec<UnixStream> = Vec::with_capacity(options.connections);
    let mut opening = tokio::task::JoinSet::new();
    let mut next = 2;
    while held.len() + 2 < options.connections || !opening.is_empty() {
        while next < options.connections && opening.len() < options.concurrency {
            let target = target.clone();
            let name = format!("held-{next}");
            opening.spawn(async move {
                open_one(&target, &name)
                    .await
                    .map(|(reader, writer, _)| wire::reunite(reader, writer))
            });
            next += 1;
        }
        match opening.join_next().await {
            Some(Ok(Ok(stream))) => {
                held.push(stream);
                opened.fetch_add(1, Ordering::Relaxed);
            }
            Some(Ok(Err(error))) => bail!("opening connection {}: {error:#}", held.len() + 2),
            Some(Err(error)) => bail!("an opening task failed: {error}"),
            None => break,
        }
    }

    recorder.set_phase("holding");
    let now = sampler::sample_hub(target).await?;
    if now.connections != options.connections as u64 {
        failures.push(format!(
            "the hub counts {} connections; {} are open",
            now.connections, options.connections
        ));
    }
    let limit_edge_refused = if options.connections as u64 == max_connections {
        let refused = one_past_the_limit_is_refused(target).await?;
        if !refused {
            failures.push("one connection past maxConnections was not refused".into());
        }
        Some(refused)
    } else {
        None
    };

    let hold_until = Instant::now() + options.hold;
    let mut probes_answered = 0;
    let mut probe_id = 100;
    while Instant::now() < hold_until {
        probe_id += 1;
        let probe = tokio::time::timeout(
            PROBE_WAIT,
            probe_once(
                &mut owner_reader,
                &mut owner_writer,
                &mut caller_reader,
                &mut caller_writer,
                &service,
                probe_id,
            ),
        )
        .await;
        match probe {
            Ok(Ok(())) => probes_answered += 1,
            Ok(Err(error)) => failures.push(format!("routing probe {probe_id}: {error:#}")),
            Err(_) => failures.push(format!(
                "routing probe {probe_id}: no answer within {PROBE_WAIT:?}"
            )),
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    let held_sample = recorder
        .phase_samples("holding")
        .last()
        .map(|s| s.hub)
        .unwrap_or(now);

    recorder.set_phase("closed");
    drop(held);
    drop((owner_reader, owner_writer, caller_reader, caller_writer));
    opened.store(0, Ordering::Relaxed);
    let _ = stop_tx.send(true);
    let _ = sampler_task.await;
    let settled = sampler::settle(target, &baseline, SETTLE_WAIT).await;
    match settled {
        Some(settled) => {
            recorder.record(settled, DriverCounts::default());
        }
        None => failures.push(format!(
            "the hub did not settle back to its baseline within {SETTLE_WAIT:?} after the connections closed"
        )),
    }
    if probes_answered == 0 {
        failures.push("no routing probe was answered while the connections were held".into());
    }
    Ok(Report {
        options,
        max_connections,
        baseline,
        held: held_sample,
        settled,
        limit_edge_refused,
        probes_answered,
        failures,
    })
}

/// Opens and initializes one connection, retrying while the hub's listen
/// backlog is full (a non-blocking connect then fails with `EAGAIN`).
async fn open_one(
    target: &HubTarget,
    name: &str,
) -> anyhow::Result<(WireReader, WireWriter, Value)> {
    let deadline = Instant::now() + CONNECT_WAIT;
    let (mut reader, mut writer) = loop {
        match wire::connect(&target.info.socket).await {
            Ok(halves) => break halves,
            Err(error)
                if error.kind() == io::ErrorKind::WouldBlock && Instant::now() < deadline =>
            {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            Err(error) => return Err(error).context("connect"),
        }
    };
    let init = wire::initialize(&mut reader, &mut writer, &target.info.token, name).await?;
    Ok((reader, writer, init))
}

/// At `maxConnections`, one more connection gets `-32050` naming the limit,
/// and is closed.
async fn one_past_the_limit_is_refused(target: &HubTarget) -> anyhow::Result<bool> {
    let (mut reader, _writer) = wire::connect(&target.info.socket).await?;
    let first = tokio::time::timeout(PROBE_WAIT, reader.recv())
        .await
        .context("no answer to a connection past the limit")??;
    let refused = first.as_ref().is_some_and(|m| {
        m["error"]["code"] == -32050 && m["error"]["data"]["limit"] == "maxConnections"
    });
    let closed = tokio::time::timeout(PROBE_WAIT, reader.recv())
        .await
        .context("the refused connection stayed open")??
        .is_none();
    Ok(refused && closed)
}

/// One request from the caller to the owner's service and its answer.
async fn probe_once(
    owner_reader: &mut WireReader,
    owner_writer: &mut WireWriter,
    caller_reader: &mut WireReader,
    caller_writer: &mut WireWriter,
    service: &str,
    id: u64,
) -> anyhow::Result<()> {
    caller_writer
        .request(
            id,
            "clientService/request",
            json!({"serviceId": service, "method": "probe", "params": {"n": id}}),
        )
        .await?;
    let forwarded = loop {
        match owner_reader.recv().await? {
            Some(message) if message["method"] == "clientService/handleRequest" => break message,
            Some(_) => {}
            None => bail!("the hub closed the owner's connection"),
        }
    };
    owner_writer
        .respond(&forwarded["id"], forwarded["params"]["params"].clone())
        .await?;
    let answer = caller_reader.response(&json!(id)).await?;
    if answer["result"]["n"] != id {
        bail!("probe {id} answered {answer}");
    }
    Ok(())
}

impl std::fmt::Display for Report {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mib = |kib: u64| kib as f64 / 1024.0;
        writeln!(f, "mode: connections")?;
        writeln!(f, "connections: {}", self.options.connections)?;
        writeln!(f, "max_connections: {}", self.max_connections)?;
        writeln!(f, "hold_s: {}", self.options.hold.as_secs())?;
        writeln!(
            f,
            "hub_rss_mib: baseline {:.1}, held {:.1}",
            mib(self.baseline.rss_kib),
            mib(self.held.rss_kib)
        )?;
        writeln!(
            f,
            "hub_rss_per_connection_bytes: {:.0}",
            self.rss_per_connection()
        )?;
        writeln!(
            f,
            "hub_fds: baseline {}, held {}, after close {}",
            self.baseline.fds,
            self.held.fds,
            self.settled
                .map_or("not settled".into(), |s| s.fds.to_string())
        )?;
        writeln!(f, "hub_connections_held: {}", self.held.connections)?;
        match self.limit_edge_refused {
            Some(refused) => writeln!(f, "one_past_max_connections_refused: {refused}")?,
            None => writeln!(
                f,
                "one_past_max_connections_refused: not tried (connections != maxConnections)"
            )?,
        }
        writeln!(f, "routing_probes_answered: {}", self.probes_answered)?;
        crate::outcome::write(f, &self.failures)
    }
}
