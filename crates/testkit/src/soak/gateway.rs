//! The gateway soak (`switchboard-soak --mode gateway`): the MCP path as
//! users run it, all real processes. A hub (`switchboard serve`) hosts the
//! workspace's MCP test server as a module (`[modules.soak] mcp = [...]`,
//! no grants: the documented way); `--clients` MCP clients each start
//! their own `switchboard mcp` and, for `--duration` seconds, make a mix of
//! calls through it: plain calls (the gateway's fast path), calls with a
//! progress token, slow calls cancelled on the way, `tools/list`, `ping`.
//! Every `--fault-every` seconds, in turn, the MCP server is killed (its
//! `provide-mcp` starts another) or `provide-mcp` itself is (the hub's
//! supervisor starts another). Then a drain, a call from every client that
//! must succeed, and each client hangs up.
//!
//! Checks, each of which fails the run:
//! - every request answered at most once, and every one not cancelled
//!   answered (a result or an error) by the end of the drain;
//! - no answer to an id its session never sent;
//! - every echo answers the text its own session sent (a session's texts
//!   are its own: another session's answer would show);
//! - progress only for a token its session sent;
//! - after the last fault, every client's call succeeds (within 30 s);
//! - each `switchboard mcp` exits within 10 s of its stdin closing;
//! - the hub's RSS and descriptors and the gateways' RSS do not grow
//!   without bound (`growth.rs`).

use std::collections::{HashMap, HashSet};
use std::fmt;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context};
use parking_lot::Mutex;
use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, ChildStdin, Command};
use tokio::sync::oneshot;
use tokio::time::Instant;

use crate::growth::{self, Tolerance, Verdict};
use crate::{procfs, HubProcess};

/// The module's name, and so its tools' namespace.
const MODULE: &str = "soak";
/// How long the module may take to list its tools at the start.
const READY_WAIT: Duration = Duration::from_secs(60);
/// How long the drain waits for the answers still owed.
const DRAIN_WAIT: Duration = Duration::from_secs(40);
/// How long a client may take to get one call through after the faults.
const RECOVERY_WAIT: Duration = Duration::from_secs(30);
/// How long a `switchboard mcp` may take to exit once its stdin closed.
const EXIT_WAIT: Duration = Duration::from_secs(10);
/// How long a slow call runs, and when its cancel is sent.
const SLOW_SECONDS: f64 = 0.2;
const CANCEL_AFTER: Duration = Duration::from_millis(50);
/// The hub's RSS and the gateways' may grow by a quarter plus this much
/// between the first and last third: the module restarts in the first
/// third too, so what is left is a leak.
const RSS_TOLERANCE: Tolerance = Tolerance {
    relative: 0.25,
    absolute: 8.0 * 1024.0,
};
const FD_TOLERANCE: Tolerance = Tolerance {
    relative: 0.10,
    absolute: 16.0,
};

#[derive(Debug, Clone)]
pub struct Options {
    pub duration: Duration,
    pub clients: usize,
    /// Actions per second across all clients.
    pub rate: f64,
    /// Time between two faults.
    pub fault_every: Duration,
    /// Where the hub directory, config and logs go.
    pub work: PathBuf,
    /// Samples, one row a second.
    pub csv: PathBuf,
}

/// What the run counted, across all clients.
#[derive(Default)]
struct Counts {
    sent: AtomicU64,
    results: AtomicU64,
    errors: AtomicU64,
    cancelled: AtomicU64,
    progress: AtomicU64,
    duplicates: AtomicU64,
    unknown_ids: AtomicU64,
    wrong_echoes: AtomicU64,
    misrouted_progress: AtomicU64,
}

/// What one sent request expects.
#[derive(Debug, Clone)]
enum Expect {
    Echo(String),
    /// Anything but an error is a pass; errors are counted.
    Any,
}

struct Pending {
    expect: Expect,
    cancelled: bool,
}

/// One MCP client on its own `switchboard mcp`.
struct Session {
    index: usize,
    child: Mutex<Option<Child>>,
    pid: u32,
    stdin: tokio::sync::Mutex<Option<ChildStdin>>,
    next_id: AtomicU64,
    pending: Mutex<HashMap<u64, Pending>>,
    answered: Mutex<HashSet<u64>>,
    tokens: Mutex<HashSet<String>>,
    /// Those waiting for an answer ([`Session::call`]): its result, or
    /// `None` for an error or an echo of another text.
    waiters: Mutex<HashMap<u64, oneshot::Sender<Option<Value>>>>,
    counts: Arc<Counts>,
}

pub struct Report {
    lines: Vec<String>,
    pub failures: Vec<String>,
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for line in &self.lines {
            writeln!(f, "{line}")?;
        }
        for failure in &self.failures {
            writeln!(f, "FAILURE: {failure}")?;
        }
        let verdict = if self.failures.is_empty() {
            "PASS"
        } else {
            "FAIL"
        };
        writeln!(f, "RESULT: {verdict}")
    }
}

/// Runs the soak; `Err` only when it cannot be set up.
pub async fn run(options: Options) -> anyhow::Result<Report> {
    if options.clients == 0 || options.rate <= 0.0 || options.fault_every.is_zero() {
        bail!("--clients, --rate and --fault-every must be positive");
    }
    let server = beside_this_program("mcp-test-server")?;
    std::fs::create_dir_all(&options.work)?;
    let config = options.work.join("switchboard.toml");
    let server_text = serde_json::to_string(&server.to_string_lossy())?;
    std::fs::write(
        &config,
        format!("[modules.{MODULE}]\nmcp = [{server_text}]\n"),
    )?;
    let hub_dir = options.work.join("hub");
    let hub = {
        let (dir, config) = (hub_dir.clone(), config.clone());
        tokio::task::spawn_blocking(move || {
            HubProcess::builder()
                .dir(dir)
                .no_ws()
                .config(&config)
                .start()
        })
        .await
        .context("the hub does not start")?
    };
    let counts = Arc::new(Counts::default());
    let mut lines = vec![format!(
        "[gateway soak] hub pid {}, module {MODULE} hosting {}, {} clients, {:.0} actions/s, a fault every {:?}, {:?}",
        hub.pid(),
        server.display(),
        options.clients,
        options.rate,
        options.fault_every,
        options.duration
    )];
    let mut failures = Vec::new();

    let mut sessions = Vec::new();
    for index in 0..options.clients {
        sessions.push(Session::start(index, &hub_dir, &options.work, counts.clone()).await?);
    }
    wait_for_tools(&sessions[0]).await?;

    let started = Instant::now();
    let traffic_until = started + options.duration;
    let mut csv = std::fs::File::create(&options.csv)
        .with_context(|| format!("cannot create {}", options.csv.display()))?;
    writeln!(csv, "t_s,hub_rss_kib,hub_fds,gateways_rss_kib,owed")?;
    let samples = Arc::new(Mutex::new(Samples::default()));
    let sampler = {
        let (samples, sessions_pids) = (samples.clone(), pids(&sessions));
        let (hub_pid, sessions_ref) = (hub.pid(), sessions.clone());
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(Duration::from_secs(1));
            while Instant::now() < traffic_until {
                tick.tick().await;
                let sample = Sample::take(hub_pid, &sessions_pids, owed(&sessions_ref));
                let _ = writeln!(
                    csv,
                    "{:.1},{},{},{},{}",
                    started.elapsed().as_secs_f64(),
                    sample.hub_rss,
                    sample.hub_fds,
                    sample.gateways_rss,
                    sample.owed
                );
                samples.lock().push(sample);
            }
        })
    };
    let faults = tokio::spawn(inject_faults(hub.pid(), options.fault_every, traffic_until));
    let per_client = options.rate / options.clients as f64;
    let drivers: Vec<_> = sessions
        .iter()
        .map(|session| tokio::spawn(drive(session.clone(), per_client, traffic_until)))
        .collect();
    for driver in drivers {
        driver.await.context("a client's driver panicked")?;
    }
    let faults_made = faults.await.context("the fault injector panicked")?;
    let _ = sampler.await;
    lines.push(format!("faults: {}", faults_made.join(", ")));

    // Drain: every request not cancelled is answered.
    let drain_until = Instant::now() + DRAIN_WAIT;
    while Instant::now() < drain_until && owed(&sessions) > 0 {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let unanswered = owed(&sessions);
    // After the faults, every client gets a call through.
    for session in &sessions {
        if !session.recovers().await {
            failures.push(format!(
                "client {}: no call succeeded within {RECOVERY_WAIT:?} after the last fault",
                session.index
            ));
        }
    }
    for session in &sessions {
        if !session.hang_up().await {
            failures.push(format!(
                "client {}: switchboard mcp did not exit within {EXIT_WAIT:?} of its stdin closing",
                session.index
            ));
        }
    }

    let c = &*counts;
    let load = |counter: &AtomicU64| counter.load(Ordering::Relaxed);
    lines.push(format!(
        "sent: {}, results: {}, errors: {}, cancelled: {}, progress: {}",
        load(&c.sent),
        load(&c.results),
        load(&c.errors),
        load(&c.cancelled),
        load(&c.progress)
    ));
    for (name, value) in [
        ("duplicate_answers", load(&c.duplicates)),
        ("answers_to_unknown_ids", load(&c.unknown_ids)),
        ("wrong_echoes", load(&c.wrong_echoes)),
        ("misrouted_progress", load(&c.misrouted_progress)),
        ("unanswered", unanswered as u64),
    ] {
        lines.push(format!("{name}: {value}"));
        if value > 0 {
            failures.push(format!("{name}: {value}"));
        }
    }
    if load(&c.results) == 0 {
        failures.push("no call succeeded".into());
    }
    for verdict in samples.lock().verdicts() {
        lines.push(verdict.to_string());
        if verdict.grew_without_bound() {
            failures.push(verdict.to_string());
        }
    }
    drop(hub);
    Ok(Report { lines, failures })
}

/// `name`, built beside this program (the soak driver and the test server
/// are both `switchboard-testkit`'s).
fn beside_this_program(name: &str) -> anyhow::Result<PathBuf> {
    let exe = std::env::current_exe()?;
    let path = exe
        .parent()
        .map(|dir| dir.join(name))
        .context("this program has no directory")?;
    if !path.exists() {
        bail!(
            "{} is missing (cargo build --release -p switchboard-testkit --bin {name})",
            path.display()
        );
    }
    Ok(path)
}

fn pids(sessions: &[Arc<Session>]) -> Vec<u32> {
    sessions.iter().map(|session| session.pid).collect()
}

fn owed(sessions: &[Arc<Session>]) -> usize {
    sessions
        .iter()
        .map(|session| {
            session
                .pending
                .lock()
                .values()
                .filter(|pending| !pending.cancelled)
                .count()
        })
        .sum()
}

async fn wait_for_tools(session: &Session) -> anyhow::Result<()> {
    let deadline = Instant::now() + READY_WAIT;
    let echo = format!("{MODULE}__echo");
    loop {
        let listed = session
            .call("tools/list", json!({}), Expect::Any, Duration::from_secs(5))
            .await;
        if listed.is_some_and(|result| {
            result["tools"]
                .as_array()
                .is_some_and(|tools| tools.iter().any(|tool| tool["name"] == echo))
        }) {
            return Ok(());
        }
        if Instant::now() > deadline {
            bail!("the gateway never listed {echo} (the module did not start?)");
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// One client's mix until `until`, at `rate` actions a second.
async fn drive(session: Arc<Session>, rate: f64, until: Instant) {
    let mut tick = tokio::time::interval(Duration::from_secs_f64(1.0 / rate));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut step: u64 = 0;
    while Instant::now() < until {
        tick.tick().await;
        step += 1;
        let tool = |name: &str| format!("{MODULE}__{name}");
        match step % 20 {
            0..=9 => {
                let text = format!("c{}-{step}", session.index);
                let params = json!({"name": tool("echo"), "arguments": {"text": text}});
                session.send("tools/call", params, Expect::Echo(text)).await;
            }
            10..=13 => {
                let token = format!("p{}-{step}", session.index);
                session.tokens.lock().insert(token.clone());
                let params = json!({"name": tool("progress"), "arguments": {"steps": 3},
                                    "_meta": {"progressToken": token}});
                session.send("tools/call", params, Expect::Any).await;
            }
            14..=16 => {
                let params = json!({"name": tool("slow"), "arguments": {"seconds": SLOW_SECONDS}});
                let id = session.send("tools/call", params, Expect::Any).await;
                let session = session.clone();
                tokio::spawn(async move {
                    tokio::time::sleep(CANCEL_AFTER).await;
                    session.cancel(id).await;
                });
            }
            17 | 18 => {
                session.send("tools/list", json!({}), Expect::Any).await;
            }
            _ => {
                session.send("ping", json!({}), Expect::Any).await;
            }
        }
    }
}

/// Kills the MCP server, then `provide-mcp`, in turn, every `every`.
async fn inject_faults(hub: u32, every: Duration, until: Instant) -> Vec<String> {
    let mut made = Vec::new();
    let mut turn = 0;
    loop {
        let next = Instant::now() + every;
        if next >= until {
            return made;
        }
        tokio::time::sleep_until(next).await;
        let modules: Vec<u32> = procfs::children(hub);
        let victims: Vec<u32> = if turn % 2 == 0 {
            modules
                .iter()
                .flat_map(|&module| procfs::children(module))
                .collect()
        } else {
            modules
        };
        let what = if turn % 2 == 0 {
            "server killed"
        } else {
            "provide-mcp killed"
        };
        for pid in &victims {
            // SAFETY: kill(2) on a pid read from /proc just now; a pid
            // reused in between would be another of this user's processes,
            // which the soak's own tree is the only one making here.
            unsafe {
                libc::kill(*pid as libc::pid_t, libc::SIGKILL);
            }
        }
        made.push(format!("{what} ({} pids)", victims.len()));
        turn += 1;
    }
}

impl Session {
    async fn start(
        index: usize,
        hub_dir: &Path,
        work: &Path,
        counts: Arc<Counts>,
    ) -> anyhow::Result<Arc<Session>> {
        let log = std::fs::File::create(work.join(format!("gateway-{index}.log")))?;
        let mut child = Command::new(crate::switchboard_binary())
            .arg("mcp")
            .arg("--dir")
            .arg(hub_dir)
            .env("RUST_LOG", "warn")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(log)
            .kill_on_drop(true)
            .spawn()
            .context("cannot start switchboard mcp")?;
        let stdin = child.stdin.take().context("no stdin")?;
        let stdout = child.stdout.take().context("no stdout")?;
        let pid = child.id().unwrap_or(0);
        let session = Arc::new(Session {
            index,
            child: Mutex::new(Some(child)),
            pid,
            stdin: tokio::sync::Mutex::new(Some(stdin)),
            next_id: AtomicU64::new(1),
            pending: Mutex::new(HashMap::new()),
            answered: Mutex::new(HashSet::new()),
            tokens: Mutex::new(HashSet::new()),
            waiters: Mutex::new(HashMap::new()),
            counts,
        });
        tokio::spawn(read_answers(session.clone(), stdout));
        let initialize = json!({"protocolVersion": "2025-06-18", "capabilities": {},
                                "clientInfo": {"name": format!("soak-{index}"), "version": "1"}});
        let answer = session
            .call(
                "initialize",
                initialize,
                Expect::Any,
                Duration::from_secs(30),
            )
            .await;
        if answer.is_none() {
            bail!("switchboard mcp {index} did not answer initialize");
        }
        session
            .write(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
            .await;
        Ok(session)
    }

    async fn write(&self, message: &Value) {
        let mut line = message.to_string();
        line.push('\n');
        if let Some(stdin) = self.stdin.lock().await.as_mut() {
            let _ = stdin.write_all(line.as_bytes()).await;
        }
    }

    /// Sends a request; returns its id.
    async fn send(&self, method: &str, params: Value, expect: Expect) -> u64 {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        self.send_as(id, method, params, expect).await;
        id
    }

    /// Sends a request and waits at most `bound` for its result (`None`:
    /// an error, an echo of another text, or no answer in time).
    async fn call(
        &self,
        method: &str,
        params: Value,
        expect: Expect,
        bound: Duration,
    ) -> Option<Value> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let (answer, answered) = oneshot::channel();
        self.waiters.lock().insert(id, answer);
        self.send_as(id, method, params, expect).await;
        let result = tokio::time::timeout(bound, answered).await;
        self.waiters.lock().remove(&id);
        result.ok().and_then(Result::ok).flatten()
    }

    async fn send_as(&self, id: u64, method: &str, params: Value, expect: Expect) {
        self.pending.lock().insert(
            id,
            Pending {
                expect,
                cancelled: false,
            },
        );
        self.counts.sent.fetch_add(1, Ordering::Relaxed);
        self.write(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))
            .await;
    }

    async fn cancel(&self, id: u64) {
        let still_pending = match self.pending.lock().get_mut(&id) {
            Some(pending) => {
                pending.cancelled = true;
                true
            }
            None => false,
        };
        if still_pending {
            self.counts.cancelled.fetch_add(1, Ordering::Relaxed);
            self.write(
                &json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
                               "params": {"requestId": id, "reason": "soak"}}),
            )
            .await;
        }
    }

    /// One echo through, retried until [`RECOVERY_WAIT`].
    async fn recovers(&self) -> bool {
        let deadline = Instant::now() + RECOVERY_WAIT;
        while Instant::now() < deadline {
            let text = format!("c{}-final", self.index);
            let params = json!({"name": format!("{MODULE}__echo"), "arguments": {"text": text}});
            let echoed = self
                .call(
                    "tools/call",
                    params,
                    Expect::Echo(text),
                    Duration::from_secs(10),
                )
                .await;
            if echoed.is_some() {
                return true;
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
        false
    }

    /// Closes stdin; whether the gateway exited in time.
    async fn hang_up(&self) -> bool {
        self.stdin.lock().await.take();
        let child = self.child.lock().take();
        let Some(mut child) = child else {
            return true;
        };
        tokio::time::timeout(EXIT_WAIT, child.wait()).await.is_ok()
    }

    /// One line from the gateway.
    fn on_line(&self, line: &str) {
        let Ok(message) = serde_json::from_str::<Value>(line) else {
            return;
        };
        if let Some(method) = message["method"].as_str() {
            if method == "notifications/progress" {
                let token = message["params"]["progressToken"]
                    .as_str()
                    .unwrap_or_default();
                if self.tokens.lock().contains(token) {
                    self.counts.progress.fetch_add(1, Ordering::Relaxed);
                } else {
                    self.counts
                        .misrouted_progress
                        .fetch_add(1, Ordering::Relaxed);
                }
            }
            return;
        }
        let Some(id) = message["id"].as_u64() else {
            self.counts.unknown_ids.fetch_add(1, Ordering::Relaxed);
            return;
        };
        let Some(pending) = self.pending.lock().remove(&id) else {
            let counter = if self.answered.lock().contains(&id) {
                &self.counts.duplicates
            } else {
                &self.counts.unknown_ids
            };
            counter.fetch_add(1, Ordering::Relaxed);
            return;
        };
        self.answered.lock().insert(id);
        let result = &message["result"];
        let mut passed = !(result.is_null() || result["isError"] == true);
        if passed {
            self.counts.results.fetch_add(1, Ordering::Relaxed);
            if let Expect::Echo(text) = &pending.expect {
                if result["content"][0]["text"] != text.as_str() {
                    self.counts.wrong_echoes.fetch_add(1, Ordering::Relaxed);
                    passed = false;
                }
            }
        } else {
            self.counts.errors.fetch_add(1, Ordering::Relaxed);
        }
        if let Some(waiter) = self.waiters.lock().remove(&id) {
            let _ = waiter.send(passed.then(|| result.clone()));
        }
    }
}

async fn read_answers(session: Arc<Session>, stdout: tokio::process::ChildStdout) {
    let mut lines = BufReader::new(stdout).lines();
    while let Ok(Some(line)) = lines.next_line().await {
        session.on_line(&line);
    }
}

#[derive(Default)]
struct Samples(Vec<Sample>);

struct Sample {
    hub_rss: u64,
    hub_fds: u64,
    gateways_rss: u64,
    /// Requests sent and not cancelled that are still unanswered.
    owed: usize,
}

impl Sample {
    fn take(hub: u32, gateways: &[u32], owed: usize) -> Sample {
        Sample {
            hub_rss: procfs::rss_kib(hub).unwrap_or(0),
            hub_fds: procfs::open_fds(hub).unwrap_or(0),
            gateways_rss: gateways
                .iter()
                .map(|&pid| procfs::rss_kib(pid).unwrap_or(0))
                .sum(),
            owed,
        }
    }
}

impl Samples {
    fn push(&mut self, sample: Sample) {
        self.0.push(sample);
    }

    fn verdicts(&self) -> Vec<Verdict> {
        let series = |value: fn(&Sample) -> u64| -> Vec<f64> {
            self.0.iter().map(|sample| value(sample) as f64).collect()
        };
        [
            growth::judge("hub_rss_kib", &series(|s| s.hub_rss), RSS_TOLERANCE),
            growth::judge("hub_fds", &series(|s| s.hub_fds), FD_TOLERANCE),
            growth::judge(
                "gateways_rss_kib",
                &series(|s| s.gateways_rss),
                RSS_TOLERANCE,
            ),
        ]
        .into_iter()
        .flatten()
        .collect()
    }
}
