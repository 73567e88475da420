//! The soak: many clients, mixed traffic, for a long time, against a hub
//! sampled every second; then a drain, and a check that the hub returned to
//! where it started.
//!
//! Phases: `baseline` (no client), `traffic` (the mix), `drain` (no new
//! traffic; every request still waiting must get its answer), `closed` (all
//! clients gone; the hub must settle back to its baseline).

pub mod catalog;
pub mod directory;
pub mod fabric;
pub mod gateway;
pub mod session;
pub mod stats;

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;
use tokio::time::Instant;

use crate::growth::{self, Tolerance, Verdict};
use crate::sampler::{self, DriverCounts, HubSample, Recorder};
use crate::target::HubTarget;
use directory::Directory;
use session::{End, Session};
use stats::Stats;

/// How long the hub may take to settle back to its baseline after the last
/// client closed.
const SETTLE_WAIT: Duration = Duration::from_secs(15);
/// Past the longest request timeout, how long the drain waits for answers.
const DRAIN_MARGIN: Duration = Duration::from_secs(5);

#[derive(Debug, Clone)]
pub struct Options {
    pub clients: usize,
    pub duration: Duration,
    /// Actions per second across all clients.
    pub rate: f64,
}

/// What every client shares.
pub struct Shared {
    pub socket: PathBuf,
    pub token: String,
    pub stats: Stats,
    pub directory: Directory,
    pub traffic_until: Instant,
    pub drain_until: Instant,
    /// Clients that still wait for answers after the traffic phase.
    pub draining: AtomicUsize,
    /// Request tokens, unique across the run, so an answer that reaches the
    /// wrong request is recognised.
    pub next_token: AtomicU64,
    pub ops_per_client: f64,
    /// Sessions open right now.
    pub live_sessions: AtomicUsize,
}

/// The limits of the growth rule, per series (see `growth.rs`).
pub const RSS_TOLERANCE: Tolerance = Tolerance {
    relative: 0.10,
    absolute: 16.0 * 1024.0, // KiB
};
pub const FDS_TOLERANCE: Tolerance = Tolerance {
    relative: 0.10,
    absolute: 32.0,
};
pub const IN_FLIGHT_TOLERANCE: Tolerance = Tolerance {
    relative: 0.10,
    absolute: 256.0,
};
pub const QUEUED_TOLERANCE: Tolerance = Tolerance {
    relative: 0.10,
    absolute: 1024.0 * 1024.0,
};

/// The outcome of a soak run.
pub struct Report {
    pub options: Options,
    pub baseline: HubSample,
    pub settled: Option<HubSample>,
    pub last_seen: HubSample,
    pub peak: HubSample,
    pub verdicts: Vec<Verdict>,
    pub traffic_samples: usize,
    pub stats: Arc<Shared>,
    pub failures: Vec<String>,
}

pub async fn run(
    target: &HubTarget,
    options: Options,
    recorder: Arc<Recorder>,
) -> anyhow::Result<Report> {
    let baseline = sampler::idle_baseline(target, &recorder).await?;

    let start = Instant::now();
    let traffic_until = start + options.duration;
    let shared = Arc::new(Shared {
        socket: target.info.socket.clone(),
        token: target.info.token.clone(),
        stats: Stats::default(),
        directory: Directory::default(),
        traffic_until,
        drain_until: traffic_until + session::LONGEST_TIMEOUT + DRAIN_MARGIN,
        draining: AtomicUsize::new(options.clients),
        next_token: AtomicU64::new(1),
        ops_per_client: options.rate / options.clients.max(1) as f64,
        live_sessions: AtomicUsize::new(0),
    });

    let (stop_tx, stop_rx) = watch::channel(false);
    let sampler = {
        let counts_of = shared.clone();
        tokio::spawn(sampler::run(
            target.clone(),
            recorder.clone(),
            move || DriverCounts {
                requests_sent: load(&counts_of.stats.requests_sent),
                requests_answered: counts_of.stats.requests_answered(),
                notifications_sent: load(&counts_of.stats.notifications_sent),
                client_connections: counts_of.live_sessions.load(Ordering::Relaxed) as u64,
            },
            stop_rx,
        ))
    };
    recorder.set_phase("traffic");
    let phases = {
        let recorder = recorder.clone();
        tokio::spawn(async move {
            tokio::time::sleep_until(traffic_until).await;
            recorder.set_phase("drain");
        })
    };

    let mut clients = tokio::task::JoinSet::new();
    for index in 0..options.clients {
        clients.spawn(run_client(index, shared.clone()));
    }
    let all_done = shared.drain_until + Duration::from_secs(30);
    let mut failures = Vec::new();
    while !clients.is_empty() {
        match tokio::time::timeout_at(all_done, clients.join_next()).await {
            Ok(Some(Ok(()))) | Ok(None) => {}
            Ok(Some(Err(error))) => failures.push(format!("a client task failed: {error}")),
            Err(_) => {
                failures.push(format!(
                    "{} clients still running past the drain",
                    clients.len()
                ));
                clients.abort_all();
                break;
            }
        }
    }
    phases.abort();
    recorder.set_phase("closed");
    let _ = stop_tx.send(true);
    let _ = sampler.await;
    let settled = sampler::settle(target, &baseline, SETTLE_WAIT).await;
    let final_counts = DriverCounts {
        requests_sent: load(&shared.stats.requests_sent),
        requests_answered: shared.stats.requests_answered(),
        notifications_sent: load(&shared.stats.notifications_sent),
        client_connections: 0,
    };
    if let Some(settled) = settled {
        recorder.record(settled, final_counts);
    }

    let traffic: Vec<HubSample> = recorder
        .phase_samples("traffic")
        .into_iter()
        .map(|s| s.hub)
        .collect();
    let series =
        |f: fn(&HubSample) -> u64| -> Vec<f64> { traffic.iter().map(|s| f(s) as f64).collect() };
    let verdicts: Vec<Verdict> = [
        growth::judge("rss_kib", &series(|s| s.rss_kib), RSS_TOLERANCE),
        growth::judge("fds", &series(|s| s.fds), FDS_TOLERANCE),
        growth::judge("in_flight", &series(|s| s.in_flight), IN_FLIGHT_TOLERANCE),
        growth::judge(
            "queued_bytes",
            &series(|s| s.queued_bytes),
            QUEUED_TOLERANCE,
        ),
    ]
    .into_iter()
    .flatten()
    .collect();
    if verdicts.is_empty() {
        failures.push(format!(
            "only {} samples in the traffic phase; run for at least 3 seconds",
            traffic.len()
        ));
    }
    for verdict in verdicts.iter().filter(|v| v.grew_without_bound()) {
        failures.push(format!("grew without bound: {verdict}"));
    }
    for (name, value) in shared.stats.failures() {
        if value != 0 {
            failures.push(format!("{name} = {value}"));
        }
    }
    if load(&shared.stats.requests_sent) == 0 {
        failures.push("no request was sent".into());
    }
    let all = recorder.samples();
    let last_seen = all.last().map(|s| s.hub).unwrap_or(baseline);
    if settled.is_none() {
        failures.push(format!(
            "the hub did not settle back to its baseline within {SETTLE_WAIT:?} after the clients closed: baseline {baseline:?}, last {last_seen:?}"
        ));
    }
    let peak = all.iter().fold(HubSample::default(), |peak, s| HubSample {
        rss_kib: peak.rss_kib.max(s.hub.rss_kib),
        fds: peak.fds.max(s.hub.fds),
        in_flight: peak.in_flight.max(s.hub.in_flight),
        connections: peak.connections.max(s.hub.connections),
        services: peak.services.max(s.hub.services),
        subscribers: peak.subscribers.max(s.hub.subscribers),
        queued_bytes: peak.queued_bytes.max(s.hub.queued_bytes),
    });
    Ok(Report {
        options,
        baseline,
        settled,
        last_seen,
        peak,
        verdicts,
        traffic_samples: traffic.len(),
        stats: shared,
        failures,
    })
}

fn load(counter: &AtomicU64) -> u64 {
    counter.load(Ordering::Relaxed)
}

/// One client: sessions one after another until the run is over.
async fn run_client(index: usize, shared: Arc<Shared>) {
    let mut drained = false;
    loop {
        match Session::open(index, &shared).await {
            Ok(session) => {
                shared.live_sessions.fetch_add(1, Ordering::Relaxed);
                let end = session.run(&shared, &mut drained).await;
                shared.live_sessions.fetch_sub(1, Ordering::Relaxed);
                match end {
                    End::Reconnect => stats::inc(&shared.stats.reconnects),
                    End::Finished => break,
                }
            }
            Err(error) => {
                stats::inc(&shared.stats.protocol_failures);
                eprintln!("[soak] client {index}: cannot open a session: {error:#}");
                if Instant::now() >= shared.traffic_until {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    }
    if !drained {
        shared.draining.fetch_sub(1, Ordering::AcqRel);
    }
}

impl std::fmt::Display for Report {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mib = |kib: u64| kib as f64 / 1024.0;
        writeln!(f, "mode: traffic")?;
        writeln!(f, "clients: {}", self.options.clients)?;
        writeln!(f, "duration_s: {}", self.options.duration.as_secs())?;
        writeln!(f, "rate_target_ops_per_s: {}", self.options.rate)?;
        writeln!(f, "traffic_samples: {}", self.traffic_samples)?;
        let seconds = self.options.duration.as_secs_f64().max(1.0);
        let stats = &self.stats.stats;
        writeln!(
            f,
            "achieved_per_s: requests {:.0}, notifications {:.0}",
            load(&stats.requests_sent) as f64 / seconds,
            load(&stats.notifications_sent) as f64 / seconds
        )?;
        writeln!(
            f,
            "hub_rss_mib: baseline {:.1}, peak {:.1}, after_close {:.1}",
            mib(self.baseline.rss_kib),
            mib(self.peak.rss_kib),
            mib(self.last_seen.rss_kib)
        )?;
        writeln!(
            f,
            "hub_fds: baseline {}, peak {}, after_close {}",
            self.baseline.fds, self.peak.fds, self.last_seen.fds
        )?;
        writeln!(
            f,
            "hub_in_flight: peak {}, after_close {}",
            self.peak.in_flight, self.last_seen.in_flight
        )?;
        writeln!(
            f,
            "hub_connections: peak {}, after_close {}",
            self.peak.connections, self.last_seen.connections
        )?;
        writeln!(f, "hub_queued_bytes_peak: {}", self.peak.queued_bytes)?;
        for verdict in &self.verdicts {
            writeln!(f, "growth {verdict}")?;
        }
        for (name, value) in self.stats.stats.all() {
            writeln!(f, "{name}: {value}")?;
        }
        crate::outcome::write(f, &self.failures)
    }
}
