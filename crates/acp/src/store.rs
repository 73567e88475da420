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

use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use parking_lot::Mutex;
use rusqlite::{params, Connection, OptionalExtension};
use serde_json::Value;
use tokio::sync::oneshot;

/// The schema this code writes (`PRAGMA user_version`).
const SCHEMA_VERSION: i64 = 1;
/// How many sessions one `session/list` page holds.
pub const LIST_PAGE: usize = 50;
/// How long a writer waits for another process holding the file's lock.
const BUSY_TIMEOUT: Duration = Duration::from_secs(5);

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

/// A session's log, cut at its last complete turn.
#[derive(Debug, Clone)]
pub struct StoredSession {
    pub cwd: PathBuf,
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
}

type Reply<T> = oneshot::Sender<Result<T, StoreError>>;

enum Command {
    CreateSession {
        id: String,
        cwd: PathBuf,
        reply: Reply<()>,
    },
    SetCwd {
        id: String,
        cwd: PathBuf,
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
            .spawn(move || match open_connection(&path) {
                Ok(connection) => {
                    let _ = ready.send(Ok(()));
                    Worker {
                        connection,
                        failed_since_sync: None,
                    }
                    .run(receiver);
                }
                Err(error) => {
                    let _ = ready.send(Err(error));
                }
            })
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
    pub async fn create_session(&self, id: &str, cwd: &Path) -> Result<(), StoreError> {
        let (id, cwd) = (id.to_owned(), cwd.to_path_buf());
        self.ask(|reply| Command::CreateSession { id, cwd, reply })
            .await
    }

    /// Records the working directory a loaded session now uses.
    pub fn set_cwd(&self, id: &str, cwd: &Path) {
        let command = Command::SetCwd {
            id: id.to_owned(),
            cwd: cwd.to_path_buf(),
        };
        if self.send(command).is_err() {
            tracing::warn!(
                session = id,
                "session store closed; cwd change not recorded"
            );
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

fn open_connection(path: &Path) -> Result<Connection, StoreError> {
    let open_error = |error| StoreError::Open {
        path: path.to_path_buf(),
        error,
    };
    let connection = Connection::open(path).map_err(open_error)?;
    connection.busy_timeout(BUSY_TIMEOUT).map_err(open_error)?;
    // WAL: readers never block the writer, and a committed transaction
    // survives the process being killed (NORMAL syncs at checkpoints, which
    // is durable against process death, not against power loss).
    connection
        .pragma_update(None, "journal_mode", "WAL")
        .map_err(open_error)?;
    connection
        .pragma_update(None, "synchronous", "NORMAL")
        .map_err(open_error)?;
    let version: i64 = connection
        .pragma_query_value(None, "user_version", |row| row.get(0))
        .map_err(open_error)?;
    if version > SCHEMA_VERSION {
        return Err(StoreError::Version {
            path: path.to_path_buf(),
            found: version,
        });
    }
    connection
        .execute_batch(
            "BEGIN;
             CREATE TABLE IF NOT EXISTS sessions (
                 session_id TEXT PRIMARY KEY,
                 cwd        TEXT NOT NULL,
                 title      TEXT,
                 created_at INTEGER NOT NULL,
                 updated_at INTEGER NOT NULL
             );
             CREATE TABLE IF NOT EXISTS events (
                 seq        INTEGER PRIMARY KEY AUTOINCREMENT,
                 session_id TEXT NOT NULL REFERENCES sessions(session_id),
                 turn       INTEGER NOT NULL,
                 kind       TEXT NOT NULL,
                 body       TEXT NOT NULL,
                 at         INTEGER NOT NULL
             );
             CREATE INDEX IF NOT EXISTS events_by_session ON events(session_id, seq);
             CREATE INDEX IF NOT EXISTS sessions_by_update ON sessions(updated_at, session_id);
             PRAGMA user_version = 1;
             COMMIT;",
        )
        .map_err(open_error)?;
    Ok(connection)
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

/// The store thread: sole owner of the SQLite connection.
struct Worker {
    connection: Connection,
    /// The first write error since the last `Sync`, reported by it.
    failed_since_sync: Option<String>,
}

impl Worker {
    fn run(mut self, commands: mpsc::Receiver<Command>) {
        let mut next = commands.recv().ok();
        while let Some(command) = next.take() {
            match command {
                Command::Append(event) => {
                    // Batch every append already queued into one transaction.
                    let mut batch = vec![event];
                    loop {
                        match commands.try_recv() {
                            Ok(Command::Append(event)) => batch.push(event),
                            Ok(other) => {
                                next = Some(other);
                                break;
                            }
                            Err(_) => break,
                        }
                    }
                    if let Err(error) = self.append(&batch) {
                        tracing::error!(%error, events = batch.len(), "cannot write session events");
                        self.failed_since_sync.get_or_insert(error.to_string());
                    }
                }
                Command::CreateSession { id, cwd, reply } => {
                    let now = now_ms();
                    let result = self
                        .connection
                        .execute(
                            "INSERT INTO sessions (session_id, cwd, created_at, updated_at)
                             VALUES (?1, ?2, ?3, ?3)",
                            params![id, cwd.to_string_lossy(), now],
                        )
                        .map(|_| ())
                        .map_err(StoreError::from);
                    let _ = reply.send(result);
                }
                Command::SetCwd { id, cwd } => {
                    if let Err(error) = self.connection.execute(
                        "UPDATE sessions SET cwd = ?2 WHERE session_id = ?1",
                        params![id, cwd.to_string_lossy()],
                    ) {
                        tracing::error!(%error, "cannot record a session's cwd");
                    }
                }
                Command::Sync { reply } => {
                    let result = match self.failed_since_sync.take() {
                        None => Ok(()),
                        Some(error) => Err(StoreError::WriteFailed(error)),
                    };
                    let _ = reply.send(result);
                }
                Command::Load { id, reply } => {
                    let _ = reply.send(self.load(&id));
                }
                Command::List { cwd, cursor, reply } => {
                    let _ = reply.send(self.list(cwd, cursor));
                }
            }
            if next.is_none() {
                next = commands.recv().ok();
            }
        }
    }

    fn append(&mut self, batch: &[Event]) -> Result<(), StoreError> {
        let now = now_ms();
        let transaction = self.connection.transaction()?;
        {
            let mut insert = transaction.prepare_cached(
                "INSERT INTO events (session_id, turn, kind, body, at) VALUES (?1, ?2, ?3, ?4, ?5)",
            )?;
            let mut touch = transaction
                .prepare_cached("UPDATE sessions SET updated_at = ?2 WHERE session_id = ?1")?;
            let mut title = transaction.prepare_cached(
                "UPDATE sessions SET title = ?2 WHERE session_id = ?1 AND title IS NULL",
            )?;
            for event in batch {
                insert.execute(params![
                    event.session,
                    event.turn as i64,
                    event.kind.as_str(),
                    event.body,
                    now
                ])?;
                if matches!(event.kind, EventKind::TurnStart | EventKind::TurnEnd) {
                    touch.execute(params![event.session, now])?;
                }
                if let Some(text) = &event.title {
                    title.execute(params![event.session, text])?;
                }
            }
        }
        transaction.commit()?;
        Ok(())
    }

    fn load(&mut self, id: &str) -> Result<Option<StoredSession>, StoreError> {
        let cwd: Option<String> = self
            .connection
            .query_row(
                "SELECT cwd FROM sessions WHERE session_id = ?1",
                params![id],
                |row| row.get(0),
            )
            .optional()?;
        let Some(cwd) = cwd else {
            return Ok(None);
        };
        let mut statement = self.connection.prepare_cached(
            "SELECT turn, kind, body FROM events WHERE session_id = ?1 ORDER BY seq",
        )?;
        let rows = statement.query_map(params![id], |row| {
            Ok((
                row.get::<_, i64>(0)?,
                row.get::<_, String>(1)?,
                row.get::<_, String>(2)?,
            ))
        })?;
        let mut turns = Vec::new();
        let mut open: Option<(i64, StoredTurn)> = None;
        let mut highest_turn: i64 = -1;
        for row in rows {
            let (turn, kind, body) = row?;
            highest_turn = highest_turn.max(turn);
            let Some(kind) = EventKind::parse(&kind) else {
                tracing::warn!(session = id, kind, "skipping an event of unknown kind");
                continue;
            };
            let body: Value = serde_json::from_str(&body).map_err(StoreError::Corrupt)?;
            match kind {
                EventKind::TurnStart => {
                    // A turn that started but never ended is dropped here.
                    open = Some((
                        turn,
                        StoredTurn {
                            prompt: body,
                            ..StoredTurn::default()
                        },
                    ));
                }
                EventKind::Update | EventKind::Message => {
                    if let Some((_, current)) = open.as_mut().filter(|(n, _)| *n == turn) {
                        match kind {
                            EventKind::Update => current.updates.push(body),
                            _ => current.messages.push(body),
                        }
                    }
                }
                EventKind::TurnEnd => {
                    if let Some((number, current)) = open.take() {
                        if number == turn {
                            turns.push(current);
                        }
                    }
                }
            }
        }
        Ok(Some(StoredSession {
            cwd: PathBuf::from(cwd),
            turns,
            next_turn: (highest_turn + 1) as u64,
        }))
    }

    fn list(
        &mut self,
        cwd: Option<PathBuf>,
        cursor: Option<String>,
    ) -> Result<(Vec<SessionSummary>, Option<String>), StoreError> {
        let (before_ms, before_id) = match &cursor {
            None => (i64::MAX, String::new()),
            Some(text) => parse_cursor(text).ok_or_else(|| StoreError::BadCursor(text.clone()))?,
        };
        let cwd = cwd.map(|c| c.to_string_lossy().into_owned());
        let mut statement = self.connection.prepare_cached(
            "SELECT session_id, cwd, title, updated_at,
                    strftime('%Y-%m-%dT%H:%M:%fZ', updated_at / 1000.0, 'unixepoch')
             FROM sessions
             WHERE (?1 IS NULL OR cwd = ?1)
               AND (updated_at < ?2 OR (updated_at = ?2 AND session_id < ?3) OR ?4)
             ORDER BY updated_at DESC, session_id DESC
             LIMIT ?5",
        )?;
        let first_page = cursor.is_none();
        let rows = statement.query_map(
            params![
                cwd,
                before_ms,
                before_id,
                first_page,
                (LIST_PAGE + 1) as i64
            ],
            |row| {
                Ok((
                    SessionSummary {
                        session_id: row.get(0)?,
                        cwd: PathBuf::from(row.get::<_, String>(1)?),
                        title: row.get(2)?,
                        updated_at: row.get(4)?,
                    },
                    row.get::<_, i64>(3)?,
                ))
            },
        )?;
        let mut page = rows.collect::<Result<Vec<_>, _>>()?;
        let next = if page.len() > LIST_PAGE {
            page.truncate(LIST_PAGE);
            page.last()
                .map(|(summary, ms)| format!("{ms}:{}", summary.session_id))
        } else {
            None
        };
        Ok((page.into_iter().map(|(summary, _)| summary).collect(), next))
    }
}

fn parse_cursor(text: &str) -> Option<(i64, String)> {
    let (ms, id) = text.split_once(':')?;
    Some((ms.parse().ok()?, id.to_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[tokio::test]
    async fn an_unfinished_turn_is_cut_and_its_number_not_reused() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("acp/sessions.sqlite3"))
            .await
            .unwrap();
        store.create_session("s1", Path::new("/w")).await.unwrap();
        store.append_turn_start(
            "s1",
            0,
            &json!([{"type": "text", "text": "hi"}]),
            "hi".into(),
        );
        store.append("s1", 0, EventKind::Update, &json!({"n": 1}));
        store.append("s1", 0, EventKind::Message, &json!({"role": "user"}));
        store.append(
            "s1",
            0,
            EventKind::TurnEnd,
            &json!({"stopReason": "end_turn"}),
        );
        store.append_turn_start("s1", 1, &json!([]), "x".into());
        store.append("s1", 1, EventKind::Update, &json!({"n": 2}));
        store.sync().await.unwrap();

        let loaded = store.load("s1").await.unwrap().unwrap();
        assert_eq!(loaded.turns.len(), 1);
        assert_eq!(loaded.turns[0].updates, vec![json!({"n": 1})]);
        assert_eq!(loaded.turns[0].messages, vec![json!({"role": "user"})]);
        assert_eq!(loaded.next_turn, 2);
        assert!(store.load("nope").await.unwrap().is_none());

        let (sessions, next) = store.list(None, None).await.unwrap();
        assert_eq!(sessions.len(), 1);
        assert_eq!(sessions[0].title.as_deref(), Some("hi"));
        assert!(next.is_none());
        store.close().await;
        assert!(matches!(store.sync().await, Err(StoreError::Closed)));
    }

    #[tokio::test]
    async fn list_pages_through_every_session_once() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("s.sqlite3")).await.unwrap();
        for n in 0..(LIST_PAGE + 7) {
            store
                .create_session(&format!("s{n:03}"), Path::new("/w"))
                .await
                .unwrap();
        }
        let (first, cursor) = store.list(None, None).await.unwrap();
        assert_eq!(first.len(), LIST_PAGE);
        let (second, end) = store.list(None, cursor).await.unwrap();
        assert_eq!(second.len(), 7);
        assert!(end.is_none());
        let mut all: Vec<_> = first
            .iter()
            .chain(&second)
            .map(|s| s.session_id.clone())
            .collect();
        all.sort();
        all.dedup();
        assert_eq!(all.len(), LIST_PAGE + 7);
        assert!(matches!(
            store.list(None, Some("garbage".into())).await,
            Err(StoreError::BadCursor(_))
        ));
        let (other_dir, _) = store.list(Some("/elsewhere".into()), None).await.unwrap();
        assert!(other_dir.is_empty());
    }
}
