//! The fabric soak (`switchboard-soak --mode fabric`, `bench/soak.sh
//! --only fabric`): three hubs over one nats-server, all real processes
//! (`cluster.rs`), clients on each sending requests and notifications
//! across hubs (`client.rs`), a watcher of each hub's catalog
//! (`watcher.rs`), while faults repeat every `--fault-every`: hub `b` or
//! `c` (in turn) killed with SIGKILL, left dead past `serviceTtlMs`, and
//! started again; then the nats-server killed and started again after
//! `--nats-down`. Hub `a` is never killed, so its memory over the whole run
//! tells growth from restarts.
//!
//! Checks, each of which fails the run:
//! - every request answered exactly once (a result or an error), never
//!   with another request's token, and no answer for an id never used
//!   (requests pending when their caller's own hub is killed are counted
//!   apart: nothing can answer them);
//! - notifications at most once and in order, per sender and owner;
//! - after each fault, every live hub's catalog lists exactly the services
//!   of the connected clients within `serviceTtlMs`: from the kill (the
//!   dead hub's services leave), from the restart (its clients' new
//!   services arrive), from the nats-server's restart;
//! - every catalog action fits its watcher's view;
//! - hub `a`'s RSS does not grow without bound (`growth.rs`), and no hub
//!   has a request in flight once the clients are gone.

pub mod client;
pub mod cluster;
pub mod tally;
pub mod watcher;

use std::fmt;
use std::io::Write;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use tokio::time::Instant;

use crate::growth::{self, Verdict};
use crate::procfs;
use crate::target::HubTarget;
use cluster::{Cluster, HubSlot, NAMES};
use tally::{Catalogs, Counts, Directory};

#[derive(Debug, Clone)]
pub struct Options {
    pub duration: Duration,
    pub clients_per_hub: usize,
    /// Actions per second across all clients.
    pub rate: f64,
    /// Time between two faults.
    pub fault_every: Duration,
    /// `serviceTtlMs` of the fabric.
    pub ttl: Duration,
    /// How long the nats-server stays down.
    pub nats_down: Duration,
    /// Where the hubs' directories, configs and logs go.
    pub work: PathBuf,
    /// Samples, one row per hub a second.
    pub csv: PathBuf,
}

/// What the clients and watchers share.
pub struct Shared {
    pub hubs: Vec<HubSlot>,
    pub counts: Counts,
    pub directory: Directory,
    pub catalogs: Catalogs,
    pub next_token: AtomicU64,
    pub per_client_rate: f64,
    pub traffic_until: Instant,
    pub drain_until: Instant,
    finished: std::sync::atomic::AtomicBool,
    /// When the run started, and when (ms after it) a request to another
    /// hub last got its result.
    started: Instant,
    last_remote_result_ms: AtomicU64,
}

impl Shared {
    /// A request to another hub got its result just now.
    pub fn remote_result_seen(&self) {
        let ms = self.started.elapsed().as_millis() as u64;
        self.last_remote_result_ms.fetch_max(ms, Ordering::Relaxed);
    }

    pub fn traffic_over(&self) -> bool {
        Instant::now() >= self.traffic_until
    }

    /// The clients are done; watchers stop.
    pub fn finished(&self) -> bool {
        self.finished.load(Ordering::Acquire)
    }

    /// Every live hub lists exactly the connected clients' services, and
    /// every client of a live hub holds one.
    fn converged(&self, clients_per_hub: usize) -> bool {
        let expected = self.directory.ids();
        self.hubs.iter().enumerate().all(|(index, slot)| {
            if !slot.up.load(Ordering::Acquire) {
                return true;
            }
            self.directory.count_on(index) == clients_per_hub
                && self
                    .catalogs
                    .get(index)
                    .is_some_and(|view| view == expected)
        })
    }
}

/// One fault, and how long the catalogs took to agree again.
#[derive(Debug, Clone)]
pub struct Fault {
    /// Seconds into the run.
    pub at_s: f64,
    pub what: String,
    /// From the event to every catalog right; `None`: not within four
    /// times the bound.
    pub converged: Option<Duration>,
    pub bound: Duration,
    /// From the event to the next result of a request to another hub.
    pub resumed: Option<Duration>,
}

impl Fault {
    fn late(&self) -> bool {
        self.converged.is_none_or(|took| took > self.bound)
    }
}

/// What a dead hub's services take beyond `serviceTtlMs` to leave the
/// other catalogs: its keys age out in the nats-server, which looks for
/// expired messages at most every 250 ms, and the limit marker then reaches
/// the watchers. A kill is judged against `serviceTtlMs` plus this.
pub const EXPIRY_ALLOWANCE: Duration = Duration::from_millis(500);

/// RSS of one hub at one moment.
#[derive(Debug, Clone, Copy)]
struct RssSample {
    hub: usize,
    rss_kib: u64,
}

pub struct Report {
    pub options: Options,
    pub faults: Vec<Fault>,
    pub counts: Arc<Shared>,
    /// Hub `a`'s RSS: at the start, peak, at the end; and the growth verdict.
    pub a_rss: (u64, u64, u64),
    pub a_growth: Option<Verdict>,
    /// Peak RSS of `b` and `c` (each life starts afresh).
    pub peaks: Vec<(&'static str, u64)>,
    pub in_flight_after: Vec<(&'static str, Option<u64>)>,
    pub failures: Vec<String>,
}

pub async fn run(options: Options) -> anyhow::Result<Report> {
    std::fs::create_dir_all(&options.work)?;
    let start = Instant::now();
    let slots = cluster::slots(&options.work);
    let work = options.work.clone();
    let ttl = options.ttl;
    eprintln!(
        "[fabric] starting nats-server and hubs a, b, c in {}",
        work.display()
    );
    let (cluster, slots) = tokio::task::spawn_blocking(move || {
        let cluster = Cluster::start(&work, ttl, &slots);
        (cluster, slots)
    })
    .await?;
    let cluster = Arc::new(Mutex::new(cluster));
    let clients = options.clients_per_hub * NAMES.len();
    let traffic_until = Instant::now() + options.duration;
    let shared = Arc::new(Shared {
        hubs: slots,
        counts: Counts::default(),
        directory: Directory::default(),
        catalogs: Catalogs::new(NAMES.len()),
        next_token: AtomicU64::new(1),
        per_client_rate: options.rate / clients.max(1) as f64,
        traffic_until,
        drain_until: traffic_until + client::LONGEST_TIMEOUT + Duration::from_secs(10),
        finished: false.into(),
        started: start,
        last_remote_result_ms: AtomicU64::new(0),
    });

    let samples = Arc::new(Mutex::new(Vec::<RssSample>::new()));
    let sampler = tokio::spawn(sample(
        shared.clone(),
        samples.clone(),
        options.csv.clone(),
        start,
    ));
    let mut watchers = tokio::task::JoinSet::new();
    for hub in 0..NAMES.len() {
        watchers.spawn(watcher::run(hub, shared.clone()));
    }
    let mut tasks = tokio::task::JoinSet::new();
    for hub in 0..NAMES.len() {
        for index in 0..options.clients_per_hub {
            tasks.spawn(client::run(hub, index, shared.clone()));
        }
    }

    let mut faults = Vec::new();
    let converge = |what: String, since: Instant, bound: Duration| {
        let shared = shared.clone();
        let clients_per_hub = options.clients_per_hub;
        async move {
            let converged = converged_after(&shared, clients_per_hub, since, bound).await;
            let resumed = resumed_after(&shared, since, bound).await;
            let fault = Fault {
                at_s: (since - start).as_secs_f64(),
                what,
                converged,
                bound,
                resumed,
            };
            eprintln!(
                "[fabric] {:>7.1} s  {}: catalogs agree after {}, requests across hubs answered after {}",
                fault.at_s,
                fault.what,
                ms(fault.converged),
                ms(fault.resumed),
            );
            fault
        }
    };
    let ttl = options.ttl;
    faults.push(converge("start".into(), start, ttl).await);

    let mut round = 0;
    loop {
        let next = Instant::now() + options.fault_every;
        // The last fault leaves time to converge before the traffic ends.
        if next + options.ttl * 2 + options.nats_down >= traffic_until {
            break;
        }
        tokio::time::sleep_until(next).await;
        if round % 2 == 0 {
            let index = 1 + (round / 2) % 2;
            let name = NAMES[index];
            let killed = Instant::now();
            {
                let cluster = cluster.clone();
                let shared = shared.clone();
                tokio::task::spawn_blocking(move || {
                    cluster.lock().kill_hub(index, &shared.hubs[index])
                })
                .await?;
            }
            let what = format!("hub {name} killed (SIGKILL)");
            faults.push(converge(what, killed, ttl + EXPIRY_ALLOWANCE).await);
            // Dead past the TTL, so the others forget it on their own.
            tokio::time::sleep_until(killed + options.ttl + Duration::from_secs(1)).await;
            {
                let cluster = cluster.clone();
                let shared = shared.clone();
                tokio::task::spawn_blocking(move || {
                    cluster.lock().start_hub(index, &shared.hubs[index])
                })
                .await?;
            }
            faults.push(converge(format!("hub {name} restarted"), Instant::now(), ttl).await);
        } else {
            let stopped = Instant::now();
            {
                let cluster = cluster.clone();
                tokio::task::spawn_blocking(move || cluster.lock().nats.stop()).await?;
            }
            tokio::time::sleep_until(stopped + options.nats_down).await;
            {
                let cluster = cluster.clone();
                tokio::task::spawn_blocking(move || cluster.lock().nats.restart()).await?;
            }
            faults.push(converge("nats-server restarted".into(), Instant::now(), ttl).await);
        }
        round += 1;
    }

    // The end: the clients drain their answers and close.
    let mut failures = Vec::new();
    let all_done = shared.drain_until + Duration::from_secs(30);
    while !tasks.is_empty() {
        match tokio::time::timeout_at(all_done, tasks.join_next()).await {
            Ok(Some(Ok(()))) | Ok(None) => {}
            Ok(Some(Err(error))) => failures.push(format!("a client task failed: {error}")),
            Err(_) => {
                failures.push(format!(
                    "{} clients still running past the drain",
                    tasks.len()
                ));
                tasks.abort_all();
                break;
            }
        }
    }
    shared.finished.store(true, Ordering::Release);
    while watchers.join_next().await.is_some() {}

    // Nothing in flight anywhere once the clients are gone.
    let mut in_flight_after = Vec::new();
    for slot in &shared.hubs {
        let mut last = None;
        let deadline = Instant::now() + Duration::from_secs(15);
        while Instant::now() < deadline {
            last = in_flight(slot).await;
            if last == Some(0) {
                break;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        if last != Some(0) {
            failures.push(format!(
                "hub {}: {last:?} requests in flight 15 s after the clients closed",
                slot.name
            ));
        }
        in_flight_after.push((slot.name, last));
    }
    sampler.abort();
    drop(cluster);

    let samples = samples.lock().clone();
    let a: Vec<f64> = samples
        .iter()
        .filter(|s| s.hub == 0)
        .map(|s| s.rss_kib as f64)
        .collect();
    let a_growth = growth::judge("hub a rss_kib", &a, crate::soak::RSS_TOLERANCE);
    if let Some(verdict) = a_growth.as_ref().filter(|v| v.grew_without_bound()) {
        failures.push(format!("grew without bound: {verdict}"));
    }
    let a_rss = (
        a.first().copied().unwrap_or(0.0) as u64,
        a.iter().copied().fold(0.0, f64::max) as u64,
        a.last().copied().unwrap_or(0.0) as u64,
    );
    let peaks = (1..NAMES.len())
        .map(|hub| {
            let peak = samples
                .iter()
                .filter(|s| s.hub == hub)
                .map(|s| s.rss_kib)
                .max();
            (NAMES[hub], peak.unwrap_or(0))
        })
        .collect();
    for fault in faults.iter().filter(|f| f.late()) {
        failures.push(format!(
            "{} at {:.1} s: the catalogs did not agree within {} ms: {}",
            fault.what,
            fault.at_s,
            fault.bound.as_millis(),
            fault
                .converged
                .map_or("not within 4 × the bound".into(), |d| format!(
                    "{} ms",
                    d.as_millis()
                ))
        ));
    }
    for (name, value) in shared.counts.failures() {
        if value != 0 {
            failures.push(format!("{name} = {value}"));
        }
    }
    if tally::get(&shared.counts.requests_remote) == 0 {
        failures.push("no request went to another hub".into());
    }
    if faults.len() < 2 {
        failures.push(
            "no fault happened: run longer than --fault-every plus twice serviceTtlMs".into(),
        );
    }
    Ok(Report {
        options,
        faults,
        counts: shared,
        a_rss,
        a_growth,
        peaks,
        in_flight_after,
        failures,
    })
}

/// Time from `since` until the catalogs agree (polled every 20 ms), if
/// within four times `bound`.
async fn converged_after(
    shared: &Shared,
    clients_per_hub: usize,
    since: Instant,
    bound: Duration,
) -> Option<Duration> {
    let give_up = since + bound * 4;
    loop {
        if shared.converged(clients_per_hub) {
            return Some(since.elapsed());
        }
        if Instant::now() >= give_up {
            return None;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Time from `since` until a request to another hub gets its result, if
/// within four times `bound`.
async fn resumed_after(shared: &Shared, since: Instant, bound: Duration) -> Option<Duration> {
    let since_ms = (since - shared.started).as_millis() as u64;
    let give_up = since + bound * 4;
    loop {
        if shared.last_remote_result_ms.load(Ordering::Relaxed) > since_ms {
            return Some(since.elapsed());
        }
        if Instant::now() >= give_up {
            return None;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn ms(duration: Option<Duration>) -> String {
    duration.map_or("(not within 4 × the bound)".into(), |d| {
        format!("{} ms", d.as_millis())
    })
}

/// `switchboard_requests_in_flight` of a hub that is up.
async fn in_flight(slot: &HubSlot) -> Option<u64> {
    if !slot.up.load(Ordering::Acquire) {
        return None;
    }
    let target = HubTarget::open(&slot.dir).ok()?;
    let metrics = target.metrics().await.ok()?;
    Some(metrics.value("switchboard_requests_in_flight"))
}

/// Every second: each live hub's RSS, to `csv` and `samples`.
async fn sample(
    shared: Arc<Shared>,
    samples: Arc<Mutex<Vec<RssSample>>>,
    csv: PathBuf,
    start: Instant,
) {
    let mut file = std::fs::File::create(&csv).ok();
    if let Some(file) = &mut file {
        let _ = writeln!(file, "t_s,hub,pid,rss_kib,fds");
    }
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    loop {
        tick.tick().await;
        let t_s = start.elapsed().as_secs_f64();
        for (hub, slot) in shared.hubs.iter().enumerate() {
            let pid = slot.pid.load(Ordering::Relaxed);
            if pid == 0 {
                continue;
            }
            let (Ok(rss_kib), Ok(fds)) = (procfs::rss_kib(pid), procfs::open_fds(pid)) else {
                continue;
            };
            samples.lock().push(RssSample { hub, rss_kib });
            if let Some(file) = &mut file {
                let _ = writeln!(file, "{t_s:.1},{},{pid},{rss_kib},{fds}", slot.name);
            }
        }
    }
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mib = |kib: u64| kib as f64 / 1024.0;
        let options = &self.options;
        writeln!(f, "mode: fabric")?;
        writeln!(f, "hubs: a, b, c over one nats-server")?;
        writeln!(f, "duration_s: {}", options.duration.as_secs())?;
        writeln!(f, "clients_per_hub: {}", options.clients_per_hub)?;
        writeln!(f, "rate_target_actions_per_s: {}", options.rate)?;
        writeln!(f, "fault_every_s: {}", options.fault_every.as_secs())?;
        writeln!(f, "service_ttl_ms: {}", options.ttl.as_millis())?;
        writeln!(f, "nats_down_ms: {}", options.nats_down.as_millis())?;
        let counts = &self.counts.counts;
        writeln!(f, "requests_answered: {}", counts.requests_answered())?;
        for (name, value) in counts.all() {
            writeln!(f, "{name}: {value}")?;
        }
        writeln!(f, "faults: {}", self.faults.len().saturating_sub(1))?;
        for fault in &self.faults {
            writeln!(
                f,
                "fault {:>7.1} s {}: catalogs agree after {} (bound {} ms; serviceTtlMs {}), requests across hubs answered after {}",
                fault.at_s,
                fault.what,
                ms(fault.converged),
                fault.bound.as_millis(),
                options.ttl.as_millis(),
                ms(fault.resumed),
            )?;
        }
        let (start, peak, end) = self.a_rss;
        writeln!(
            f,
            "hub_a_rss_mib: start {:.1}, peak {:.1}, end {:.1}",
            mib(start),
            mib(peak),
            mib(end)
        )?;
        if let Some(verdict) = &self.a_growth {
            writeln!(f, "growth {verdict}")?;
        }
        for (name, peak) in &self.peaks {
            writeln!(f, "hub_{name}_rss_peak_mib: {:.1}", mib(*peak))?;
        }
        for (name, in_flight) in &self.in_flight_after {
            writeln!(f, "hub_{name}_in_flight_after: {in_flight:?}")?;
        }
        crate::outcome::write(f, &self.failures)
    }
}
