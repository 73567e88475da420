//! The session store: an append-only event log per session in one SQLite
//! file (`<hubdir>/acp/sessions.sqlite3`).
//!
//! One dedicated thread owns the connection; async code talks to it through
//! a channel, so no SQLite call ever runs on a runtime thread. Commands are
//! applied in the order they were sent, and consecutive appends are batched
//! into one transaction.
//!
//! A session's log is a sequence of events, each tagged with its turn number:
//! `turn_start` (the prompt), `update` (a `session/update` as sent),
//! `message` (a chat message for the model's history) and `turn_end` (the
//! stop reason or error). A turn counts only once its `turn_end` is stored,
//! so a process killed mid-turn leaves a log that loads back to its last
//! complete turn.
//!
//! Beside its log, each session row holds the session's settings (its mode
//! and model) and its additional directories. A row written by schema 1,
//! before settings were kept, has none: it loads in the safest mode.

use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::thread;
use std::time::Duration;

use parking_lot::Mutex;
use serde_json::Value;
use tokio::sync::oneshot;

mod worker;

/// The schema this code writes (`PRAGMA user_version`): 2 added the
/// settings and additional directories to `sessions`.
const SCHEMA_VERSION: i64 = 2;
/// How many sessions one `session/list` page holds.
pub const LIST_PAGE: usize = 50;

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("session store {path}: {error}")]
    Open {
        path: PathBuf,
        error: rusqlite::Error,
    },
    #[error("cannot create {path}: {error}")]
    CreateDir {
        path: PathBuf,
        error: std::io::Error,
    },
    #[error("session store {path} has schema version {found}; this build reads version {SCHEMA_VERSION}")]
    Version { path: PathBuf, found: i64 },
    #[error("session store: {0}")]
    Sql(rusqlite::Error),
    #[error("session store: stored event is not valid JSON: {0}")]
    Corrupt(serde_json::Error),
    #[error("the session store is closed")]
    Closed,
    #[error("session store: an earlier write failed: {0}")]
    WriteFailed(String),
    #[error("cursor {0:?} is not one this agent issued")]
    BadCursor(String),
}

// By hand rather than `#[from]`, which would also make the SQLite error this
// error's `source()`: the message already names it, and a report that walks
// the chain would print it twice.
impl From<rusqlite::Error> for StoreError {
    fn from(error: rusqlite::Error) -> Self {
        StoreError::Sql(error)
    }
}

/// What an event records.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventKind {
    TurnStart,
    Update,
    Message,
    TurnEnd,
}

impl EventKind {
    fn as_str(self) -> &'static str {
        match self {
            EventKind::TurnStart => "turn_start",
            EventKind::Update => "update",
            EventKind::Message => "message",
            EventKind::TurnEnd => "turn_end",
        }
    }

    fn parse(text: &str) -> Option<Self> {
        Some(match text {
            "turn_start" => EventKind::TurnStart,
            "update" => EventKind::Update,
            "message" => EventKind::Message,
            "turn_end" => EventKind::TurnEnd,
            _ => return None,
        })
    }
}

/// One complete turn as stored.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct StoredTurn {
    /// The prompt's content blocks, as the client sent them.
    pub prompt: Value,
    /// Every `session/update` of the turn, in order.
    pub updates: Vec<Value>,
    /// The chat messages the turn added to the model's history (the user
    /// message first).
    pub messages: Vec<Value>,
}

/// A session's settings as stored: its mode's and model's ids.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredSettings {
    pub mode: String,
    pub model: String,
}

/// A session's log, cut at its last complete turn.
#[derive(Debug, Clone)]
pub struct StoredSession {
    pub cwd: PathBuf,
    /// `None` for a session stored before settings were kept (schema 1).
    pub settings: Option<StoredSettings>,
    pub turns: Vec<StoredTurn>,
    /// The number the next turn gets: above every turn in the log, complete
    /// or not, so a resumed session never reuses an abandoned turn's number.
    pub next_turn: u64,
}

/// One row of `session/list`.
#[derive(Debug, Clone)]
pub struct SessionSummary {
    pub session_id: String,
    pub cwd: PathBuf,
    pub title: Option<String>,
    /// RFC 3339, UTC.
    pub updated_at: String,
    /// The additional directories it was last opened with.
    pub additional_directories: Vec<PathBuf>,
}

type Reply<T> = oneshot::Sender<Result<T, StoreError>>;

enum Command {
    CreateSession {
        id: String,
        cwd: PathBuf,
        additional: Vec<PathBuf>,
        settings: StoredSettings,
        reply: Reply<()>,
    },
    SetRoots {
        id: String,
        cwd: PathBuf,
        additional: Vec<PathBuf>,
    },
    SetSettings {
        id: String,
        settings: StoredSettings,
        reply: Reply<()>,
    },
    Append(Event),
    Sync {
        reply: Reply<()>,
    },
    Load {
        id: String,
        reply: Reply<Option<StoredSession>>,
    },
    List {
        cwd: Option<PathBuf>,
        cursor: Option<String>,
        reply: Reply<(Vec<SessionSummary>, Option<String>)>,
    },
}

struct Event {
    session: String,
    turn: u64,
    kind: EventKind,
    body: String,
    /// With `turn_start`: the session's title if it has none yet.
    title: Option<String>,
}

/// A handle to the store thread. Cloning is cheap; the thread stops when
/// [`Store::close`] runs or every handle is dropped.
pub struct Store {
    commands: Mutex<Option<mpsc::Sender<Command>>>,
    worker: Mutex<Option<thread::JoinHandle<()>>>,
}

impl Store {
    /// Opens (creating if needed) the store at `path`, on the store thread.
    pub async fn open(path: &Path) -> Result<Store, StoreError> {
        if let Some(parent) = path.parent() {
            create_private_dir(parent)?;
        }
        let (commands, receiver) = mpsc::channel();
        let (ready, opened) = oneshot::channel();
        let path = path.to_path_buf();
        let worker = thread::Builder::new()
            .name("acp-store".into())
            .spawn(move || worker::run(&path, receiver, ready))
            .map_err(|error| StoreError::CreateDir {
                path: PathBuf::from("acp-store thread"),
                error,
            })?;
        opened.await.map_err(|_| StoreError::Closed)??;
        Ok(Store {
            commands: Mutex::new(Some(commands)),
            worker: Mutex::new(Some(worker)),
        })
    }

    fn send(&self, command: Command) -> Result<(), StoreError> {
        let commands = self.commands.lock();
        let sender = commands.as_ref().ok_or(StoreError::Closed)?;
        sender.send(command).map_err(|_| StoreError::Closed)
    }

    async fn ask<T>(&self, make: impl FnOnce(Reply<T>) -> Command) -> Result<T, StoreError> {
        let (reply, answer) = oneshot::channel();
        self.send(make(reply))?;
        answer.await.map_err(|_| StoreError::Closed)?
    }

    /// Records a new session (durable when this returns).
    pub async fn create_session(
        &self,
        id: &str,
        cwd: &Path,
        additional: &[PathBuf],
        settings: StoredSettings,
    ) -> Result<(), StoreError> {
        let (id, cwd, additional) = (id.to_owned(), cwd.to_path_buf(), additional.to_vec());
        self.ask(|reply| Command::CreateSession {
            id,
            cwd,
            additional,
            settings,
            reply,
        })
        .await
    }

    /// Records the directories a loaded or resumed session now uses.
    pub fn set_roots(&self, id: &str, cwd: &Path, additional: &[PathBuf]) {
        let command = Command::SetRoots {
            id: id.to_owned(),
            cwd: cwd.to_path_buf(),
            additional: additional.to_vec(),
        };
        if self.send(command).is_err() {
            tracing::warn!(
                session = id,
                "session store closed; directories not recorded"
            );
        }
    }

    /// Records a session's settings. The command is queued now (so changes
    /// are stored in the order they were made); the returned future says
    /// when it is committed.
    pub fn set_settings(
        &self,
        id: &str,
        settings: StoredSettings,
    ) -> impl std::future::Future<Output = Result<(), StoreError>> + Send + 'static {
        let (reply, answer) = oneshot::channel();
        let sent = self.send(Command::SetSettings {
            id: id.to_owned(),
            settings,
            reply,
        });
        async move {
            sent?;
            answer.await.map_err(|_| StoreError::Closed)?
        }
    }

    /// Appends one event (fire and forget; order is kept).
    pub fn append(&self, session: &str, turn: u64, kind: EventKind, body: &Value) {
        self.append_with_title(session, turn, kind, body, None)
    }

    /// Appends a `turn_start`, giving the session `title` if it has none.
    pub fn append_turn_start(&self, session: &str, turn: u64, prompt: &Value, title: String) {
        self.append_with_title(session, turn, EventKind::TurnStart, prompt, Some(title))
    }

    fn append_with_title(
        &self,
        session: &str,
        turn: u64,
        kind: EventKind,
        body: &Value,
        title: Option<String>,
    ) {
        let event = Event {
            session: session.to_owned(),
            turn,
            kind,
            body: body.to_string(),
            title,
        };
        if self.send(Command::Append(event)).is_err() {
            tracing::warn!(
                session,
                kind = kind.as_str(),
                "session store closed; event not recorded"
            );
        }
    }

    /// Resolves once everything sent before it is committed; reports a write
    /// that failed since the previous sync.
    pub async fn sync(&self) -> Result<(), StoreError> {
        self.ask(|reply| Command::Sync { reply }).await
    }

    /// A session's log up to its last complete turn; `None` if unknown.
    pub async fn load(&self, id: &str) -> Result<Option<StoredSession>, StoreError> {
        let id = id.to_owned();
        self.ask(|reply| Command::Load { id, reply }).await
    }

    /// One page of sessions, most recently updated first.
    pub async fn list(
        &self,
        cwd: Option<PathBuf>,
        cursor: Option<String>,
    ) -> Result<(Vec<SessionSummary>, Option<String>), StoreError> {
        self.ask(|reply| Command::List { cwd, cursor, reply }).await
    }

    /// Commits what is queued and stops the thread. Idempotent.
    pub async fn close(&self) {
        // Dropping the only sender ends the worker's loop after it has
        // applied every command already queued.
        self.commands.lock().take();
        let worker = self.worker.lock().take();
        if let Some(worker) = worker {
            let joined = tokio::task::spawn_blocking(move || worker.join());
            match tokio::time::timeout(Duration::from_secs(10), joined).await {
                Ok(Ok(Ok(()))) => {}
                Ok(_) => tracing::error!("the session store thread panicked"),
                Err(_) => tracing::error!("the session store thread did not stop within 10 s"),
            }
        }
    }
}

fn create_private_dir(path: &Path) -> Result<(), StoreError> {
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(path)
        .map_err(|error| StoreError::CreateDir {
            path: path.to_path_buf(),
            error,
        })
}

#[cfg(test)]
mod tests;
