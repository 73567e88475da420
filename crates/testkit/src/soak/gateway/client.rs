//! One MCP client of the gateway soak on its own `switchboard mcp`: the
//! requests it sent and what it expects of each, its answers checked as
//! they come, and its mix of actions.

use std::collections::{HashMap, HashSet};
use std::path::Path;
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

use super::{Counts, MODULE};

/// How long a client may take to get one call through after the faults.
pub(super) const RECOVERY_WAIT: Duration = Duration::from_secs(30);
/// How long a `switchboard mcp` may take to exit once its stdin closed.
pub(super) const EXIT_WAIT: Duration = Duration::from_secs(10);
/// How long a slow call runs, and when its cancel is sent.
const SLOW_SECONDS: f64 = 0.2;
const CANCEL_AFTER: Duration = Duration::from_millis(50);

/// What one sent request expects.
#[derive(Debug, Clone)]
pub(super) enum Expect {
    Echo(String),
    /// Anything but an error is a pass; errors are counted.
    Any,
}

struct Pending {
    expect: Expect,
    cancelled: bool,
}

/// One MCP client on its own `switchboard mcp`.
pub(super) struct Session {
    pub(super) index: usize,
    child: Mutex<Option<Child>>,
    pub(super) pid: u32,
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

/// One client's mix until `until`, at `rate` actions a second.
pub(super) async fn drive(session: Arc<Session>, rate: f64, until: Instant) {
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

impl Session {
    /// Lists tools until the module's are there, at most `bound`.
    pub(super) async fn wait_for_tools(&self, bound: Duration) -> anyhow::Result<()> {
        let deadline = Instant::now() + bound;
        let echo = format!("{MODULE}__echo");
        loop {
            let listed = self
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

    /// Requests sent and not cancelled that are still unanswered.
    pub(super) fn owed(&self) -> usize {
        self.pending
            .lock()
            .values()
            .filter(|pending| !pending.cancelled)
            .count()
    }

    pub(super) async fn start(
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
    pub(super) async fn recovers(&self) -> bool {
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
    pub(super) async fn hang_up(&self) -> bool {
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
