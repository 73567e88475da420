//! The at-most-once fence: a durable ledger keyed on
//! `(senderPrincipal, call_key)`.
//!
//! One worker thread owns the SQLite connection *and* the map of calls in
//! flight in this process, and handles commands one at a time. So "look the
//! key up, then claim it" is a single step no second caller can interleave
//! with, and SQLite never blocks the async runtime.
//!
//! A call's life: [`Ledger::begin`] → [`Begin::Fresh`] (the key is claimed in
//! memory; duplicates now wait) → [`Reservation::start`] (a durable `running`
//! row, written before the tool runs) → [`Reservation::record`] (`settled`
//! with the exact answer, or `unknown`) or [`Reservation::not_run`] (the row
//! is removed: nothing happened, the key may be used again). A process that
//! dies leaves `running` rows; the next open turns them into `unknown`.
//!
//! The same file keeps who created which task (`tasks.rs`).

mod store;
mod tasks;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::mpsc as std_mpsc;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use switchboard_protocol::{ErrorCode, ErrorObject};
use tokio::sync::oneshot;

use store::{State, Store};
use tasks::TaskCommand;
pub use tasks::TaskOwner;

/// How long settled calls are remembered (see `docs/tool-calls.md`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Retention {
    /// Settled calls older than this are forgotten.
    pub max_age: Duration,
    /// At most this many settled calls are kept (the newest).
    pub max_settled: u64,
}

impl Default for Retention {
    fn default() -> Self {
        Retention {
            max_age: Duration::from_secs(7 * 24 * 3600),
            max_settled: 100_000,
        }
    }
}

/// The worker prunes after this many settlements, and at least this often.
const PRUNE_EVERY_SETTLEMENTS: u64 = 256;
const PRUNE_INTERVAL: Duration = Duration::from_secs(3600);

#[derive(Debug, thiserror::Error)]
pub enum LedgerError {
    #[error(
        "the call ledger {path} is in use by another process (is another provider for this namespace running?)"
    )]
    InUse { path: PathBuf },
    #[error("cannot create the ledger directory {path}: {error}")]
    CreateDir {
        path: PathBuf,
        error: std::io::Error,
    },
    #[error("call ledger {path}: {error}")]
    Sqlite {
        path: PathBuf,
        error: rusqlite::Error,
    },
    #[error(
        "the call ledger {path} has schema version {version}, newer than this program understands"
    )]
    NewerSchema { path: PathBuf, version: i64 },
    #[error("the call ledger's worker thread has stopped")]
    Stopped,
}

/// Whose call: the hub-stamped principal (as its JSON) and the caller's key.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct FenceKey {
    pub principal: String,
    pub call_key: String,
}

/// What makes two calls with one key the same call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fingerprint {
    pub tool: String,
    /// SHA-256 hex of the arguments' RFC 8785 canonical form.
    pub arguments_digest: String,
}

/// How a call ended, as stored and replayed.
#[derive(Debug, Clone)]
pub enum Outcome {
    /// The `CallToolResult`, byte for byte.
    Result(Box<serde_json::value::RawValue>),
    /// The JSON-RPC error the call answered.
    Error(ErrorObject),
    /// It was interrupted while running; never rerun.
    Unknown,
}

/// The answer to [`Ledger::begin`].
pub enum Begin {
    /// No record: the key is now claimed by this caller.
    Fresh(Reservation),
    /// Settled before: answer this again, run nothing.
    Replay(Outcome),
    /// The same call is running in this process: wait for its outcome.
    Wait(Waiter),
    /// It was running when a provider died: `outcome_unknown`.
    Unknown,
    /// The key belongs to another call (other tool or other arguments).
    Reused { stored_tool: String },
}

/// Waits for the outcome of the first of two identical calls.
pub struct Waiter(oneshot::Receiver<Outcome>);

impl Waiter {
    /// `None` if the ledger stopped before the first call settled.
    pub async fn outcome(self) -> Option<Outcome> {
        self.0.await.ok()
    }
}

enum Command {
    Begin {
        key: FenceKey,
        fingerprint: Fingerprint,
        reply: oneshot::Sender<Result<BeginReply, LedgerError>>,
    },
    Start {
        key: FenceKey,
        tool_call_id: String,
        origin: Option<String>,
        reply: oneshot::Sender<Result<(), LedgerError>>,
    },
    Finish {
        key: FenceKey,
        end: End,
        /// Told once the outcome is on disk (or the write failed).
        written: Option<oneshot::Sender<()>>,
    },
    Prune {
        now_ms: i64,
        reply: oneshot::Sender<Result<u64, LedgerError>>,
    },
    Counts {
        reply: oneshot::Sender<Result<LedgerCounts, LedgerError>>,
    },
    Task(TaskCommand),
}

enum BeginReply {
    Fresh,
    Replay(Outcome),
    Wait(oneshot::Receiver<Outcome>),
    Unknown,
    Reused { stored_tool: String },
}

enum End {
    Record(Outcome),
    NotRun(ErrorObject),
}

/// Rows per state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct LedgerCounts {
    pub running: u64,
    pub settled: u64,
    pub unknown: u64,
}

/// A handle on the ledger; clones share one worker thread, which ends when
/// the last handle is dropped.
#[derive(Clone)]
pub struct Ledger {
    commands: std_mpsc::Sender<Command>,
    path: Arc<PathBuf>,
}

impl Ledger {
    /// Opens the ledger at `path` (its directory is created 0700), recovers
    /// after a crash, prunes, and starts the worker thread.
    pub async fn open(
        path: impl Into<PathBuf>,
        retention: Retention,
    ) -> Result<Ledger, LedgerError> {
        let path: PathBuf = path.into();
        let open_path = path.clone();
        let open_retention = retention.clone();
        let (store, recovered) =
            tokio::task::spawn_blocking(move || Store::open(&open_path, &open_retention, now_ms()))
                .await
                .map_err(|_| LedgerError::Stopped)??;
        if recovered > 0 {
            tracing::warn!(
                ledger = %path.display(),
                calls = recovered,
                "calls were running when the previous provider stopped; they now answer outcome_unknown"
            );
        }
        let (commands, receiver) = std_mpsc::channel();
        let worker = Worker {
            store,
            retention,
            inflight: HashMap::new(),
            settled_since_prune: 0,
        };
        std::thread::Builder::new()
            .name("switchboard-ledger".into())
            .spawn(move || worker.run(receiver))
            .map_err(|_| LedgerError::Stopped)?;
        Ok(Ledger {
            commands,
            path: Arc::new(path),
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    async fn ask<T>(
        &self,
        command: impl FnOnce(oneshot::Sender<Result<T, LedgerError>>) -> Command,
    ) -> Result<T, LedgerError> {
        let (reply, answer) = oneshot::channel();
        self.commands
            .send(command(reply))
            .map_err(|_| LedgerError::Stopped)?;
        answer.await.map_err(|_| LedgerError::Stopped)?
    }

    /// Looks `key` up and, if it is unknown, claims it for this caller.
    pub async fn begin(
        &self,
        key: FenceKey,
        fingerprint: Fingerprint,
    ) -> Result<Begin, LedgerError> {
        let reply = self
            .ask(|reply| Command::Begin {
                key: key.clone(),
                fingerprint,
                reply,
            })
            .await?;
        Ok(match reply {
            BeginReply::Fresh => Begin::Fresh(Reservation {
                ledger: self.clone(),
                key,
                started: false,
                finished: false,
            }),
            BeginReply::Replay(outcome) => Begin::Replay(outcome),
            BeginReply::Wait(receiver) => Begin::Wait(Waiter(receiver)),
            BeginReply::Unknown => Begin::Unknown,
            BeginReply::Reused { stored_tool } => Begin::Reused { stored_tool },
        })
    }

    /// Prunes now with `now_ms` as the current time; returns how many calls
    /// were forgotten. The worker also prunes on its own.
    pub async fn prune_at(&self, now_ms: i64) -> Result<u64, LedgerError> {
        self.ask(|reply| Command::Prune { now_ms, reply }).await
    }

    pub async fn counts(&self) -> Result<LedgerCounts, LedgerError> {
        self.ask(|reply| Command::Counts { reply }).await
    }

    fn finish(&self, key: FenceKey, end: End, written: Option<oneshot::Sender<()>>) {
        // If the worker is gone there is nobody left to tell.
        let _ = self.commands.send(Command::Finish { key, end, written });
    }
}

/// A claimed key. Dropping it unfinished records the call as unknown if it
/// had started (a panicking or abandoned tool), or releases the key if not.
pub struct Reservation {
    ledger: Ledger,
    key: FenceKey,
    started: bool,
    finished: bool,
}

impl Reservation {
    pub fn key(&self) -> &FenceKey {
        &self.key
    }

    /// Writes the durable `running` row; the tool may run once this returns.
    pub async fn start(
        &mut self,
        tool_call_id: &str,
        origin: Option<String>,
    ) -> Result<(), LedgerError> {
        self.ledger
            .ask(|reply| Command::Start {
                key: self.key.clone(),
                tool_call_id: tool_call_id.to_owned(),
                origin,
                reply,
            })
            .await?;
        self.started = true;
        Ok(())
    }

    /// Records how the call ended, and returns once it is on disk, so an
    /// answer never leaves before its record; waiting duplicates get the
    /// same outcome.
    pub async fn record(mut self, outcome: Outcome) {
        self.finished = true;
        let (written, on_disk) = oneshot::channel();
        self.ledger
            .finish(self.key.clone(), End::Record(outcome), Some(written));
        let _ = on_disk.await;
    }

    /// Nothing ran: the key is released, waiting duplicates get `error`.
    pub async fn not_run(mut self, error: ErrorObject) {
        self.finished = true;
        let (written, on_disk) = oneshot::channel();
        self.ledger
            .finish(self.key.clone(), End::NotRun(error), Some(written));
        let _ = on_disk.await;
    }
}

impl Drop for Reservation {
    fn drop(&mut self) {
        if self.finished {
            return;
        }
        let end = if self.started {
            End::Record(Outcome::Unknown)
        } else {
            End::NotRun(ErrorObject::new(
                ErrorCode::InternalError,
                "the call was abandoned before it ran",
            ))
        };
        self.ledger.finish(self.key.clone(), end, None);
    }
}

struct Inflight {
    fingerprint: Fingerprint,
    started: bool,
    waiters: Vec<oneshot::Sender<Outcome>>,
}

/// Owns the store and the in-flight map (nothing else touches either).
struct Worker {
    store: Store,
    retention: Retention,
    inflight: HashMap<FenceKey, Inflight>,
    settled_since_prune: u64,
}

impl Worker {
    fn run(mut self, commands: std_mpsc::Receiver<Command>) {
        loop {
            match commands.recv_timeout(PRUNE_INTERVAL) {
                Ok(command) => self.handle(command),
                Err(std_mpsc::RecvTimeoutError::Timeout) => self.prune(now_ms()),
                Err(std_mpsc::RecvTimeoutError::Disconnected) => return,
            }
        }
    }

    fn handle(&mut self, command: Command) {
        match command {
            Command::Begin {
                key,
                fingerprint,
                reply,
            } => {
                let _ = reply.send(self.begin(key, fingerprint));
            }
            Command::Start {
                key,
                tool_call_id,
                origin,
                reply,
            } => {
                let _ = reply.send(self.start(&key, &tool_call_id, origin.as_deref()));
            }
            Command::Finish { key, end, written } => {
                self.finish(key, end);
                if let Some(written) = written {
                    let _ = written.send(());
                }
            }
            Command::Prune { now_ms, reply } => {
                let _ = reply.send(self.store.prune(&self.retention, now_ms));
            }
            Command::Counts { reply } => {
                let _ = reply.send(self.store.counts().map(|(running, settled, unknown)| {
                    LedgerCounts {
                        running,
                        settled,
                        unknown,
                    }
                }));
            }
            Command::Task(command) => command.handle(&self.store, now_ms()),
        }
    }

    fn begin(
        &mut self,
        key: FenceKey,
        fingerprint: Fingerprint,
    ) -> Result<BeginReply, LedgerError> {
        if let Some(inflight) = self.inflight.get_mut(&key) {
            if inflight.fingerprint != fingerprint {
                return Ok(BeginReply::Reused {
                    stored_tool: inflight.fingerprint.tool.clone(),
                });
            }
            let (sender, receiver) = oneshot::channel();
            inflight.waiters.push(sender);
            return Ok(BeginReply::Wait(receiver));
        }
        if let Some(row) = self.store.lookup(&key)? {
            if row.fingerprint != fingerprint {
                return Ok(BeginReply::Reused {
                    stored_tool: row.fingerprint.tool,
                });
            }
            return Ok(match (row.state, row.outcome) {
                (State::Settled, Some(outcome)) => BeginReply::Replay(outcome),
                // `running` but not in flight here: left by a failed write of
                // this process's own settlement; as unknown as after a crash.
                _ => BeginReply::Unknown,
            });
        }
        self.inflight.insert(
            key,
            Inflight {
                fingerprint,
                started: false,
                waiters: Vec::new(),
            },
        );
        Ok(BeginReply::Fresh)
    }

    fn start(
        &mut self,
        key: &FenceKey,
        tool_call_id: &str,
        origin: Option<&str>,
    ) -> Result<(), LedgerError> {
        let Some(inflight) = self.inflight.get_mut(key) else {
            return Err(LedgerError::Stopped);
        };
        self.store
            .insert_running(key, &inflight.fingerprint, tool_call_id, origin, now_ms())?;
        inflight.started = true;
        Ok(())
    }

    fn finish(&mut self, key: FenceKey, end: End) {
        let Some(inflight) = self.inflight.remove(&key) else {
            return;
        };
        let outcome = match end {
            End::Record(outcome) => {
                if inflight.started {
                    if let Err(error) = self.store.record(&key, &outcome, now_ms()) {
                        // The row stays `running`; a later lookup (or the next
                        // process) answers outcome_unknown, never a rerun.
                        tracing::error!(%error, "cannot record a call's outcome");
                    }
                    self.settled_since_prune += 1;
                }
                outcome
            }
            End::NotRun(error) => {
                if inflight.started {
                    if let Err(error) = self.store.delete(&key) {
                        tracing::error!(%error, "cannot release a call that did not run");
                    }
                }
                Outcome::Error(error)
            }
        };
        for waiter in inflight.waiters {
            let _ = waiter.send(outcome.clone());
        }
        if self.settled_since_prune >= PRUNE_EVERY_SETTLEMENTS {
            self.prune(now_ms());
        }
    }

    fn prune(&mut self, now_ms: i64) {
        self.settled_since_prune = 0;
        match self.store.prune(&self.retention, now_ms) {
            Ok(0) => {}
            Ok(forgotten) => tracing::debug!(forgotten, "pruned settled calls from the ledger"),
            Err(error) => tracing::warn!(%error, "cannot prune the ledger"),
        }
    }
}

/// Milliseconds since the Unix epoch.
pub fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

#[cfg(test)]
mod tests;
