//! The store thread: the sole owner of the SQLite connection, applying the
//! handle's commands in order and batching consecutive appends into one
//! transaction.

use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use rusqlite::{params, Connection, OptionalExtension};
use serde_json::Value;
use tokio::sync::oneshot;

use super::{
    Command, Event, EventKind, SessionSummary, StoreError, StoredSession, StoredSettings,
    StoredTurn, LIST_PAGE, SCHEMA_VERSION,
};

/// How long a writer waits for another process holding the file's lock.
const BUSY_TIMEOUT: Duration = Duration::from_secs(5);

/// The thread's body: opens the store at `path`, says whether that worked,
/// then applies `commands` until every handle is gone.
pub(super) fn run(
    path: &Path,
    commands: mpsc::Receiver<Command>,
    ready: oneshot::Sender<Result<(), StoreError>>,
) {
    match open_connection(path) {
        Ok(connection) => {
            let _ = ready.send(Ok(()));
            Worker {
                connection,
                failed_since_sync: None,
            }
            .run(commands);
        }
        Err(error) => {
            let _ = ready.send(Err(error));
        }
    }
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
    // One writer at a time, from the version check to the migration's
    // commit: two fronts opening an old store at once migrate it once.
    connection
        .execute_batch("BEGIN IMMEDIATE")
        .map_err(open_error)?;
    let migrated = migrate(&connection, path);
    let end = if migrated.is_ok() {
        "COMMIT"
    } else {
        "ROLLBACK"
    };
    connection.execute_batch(end).map_err(open_error)?;
    migrated?;
    Ok(connection)
}

/// Brings the schema to [`SCHEMA_VERSION`], inside the caller's
/// transaction. Version 1 rows keep `mode` and `model` NULL: they were
/// stored before settings were kept.
fn migrate(connection: &Connection, path: &Path) -> Result<(), StoreError> {
    let open_error = |error| StoreError::Open {
        path: path.to_path_buf(),
        error,
    };
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
            "CREATE TABLE IF NOT EXISTS sessions (
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
             CREATE INDEX IF NOT EXISTS sessions_by_update ON sessions(updated_at, session_id);",
        )
        .map_err(open_error)?;
    if version < 2 {
        connection
            .execute_batch(
                "ALTER TABLE sessions ADD COLUMN mode TEXT;
                 ALTER TABLE sessions ADD COLUMN model TEXT;
                 ALTER TABLE sessions ADD COLUMN additional_directories TEXT;",
            )
            .map_err(open_error)?;
    }
    connection
        .pragma_update(None, "user_version", SCHEMA_VERSION)
        .map_err(open_error)?;
    Ok(())
}

/// Directories as stored: a JSON array of strings.
fn directories_json(directories: &[PathBuf]) -> String {
    Value::from(
        directories
            .iter()
            .map(|d| Value::String(d.to_string_lossy().into_owned()))
            .collect::<Vec<_>>(),
    )
    .to_string()
}

fn directories_from(text: Option<String>) -> Vec<PathBuf> {
    text.and_then(|text| serde_json::from_str::<Vec<String>>(&text).ok())
        .unwrap_or_default()
        .into_iter()
        .map(PathBuf::from)
        .collect()
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
                Command::CreateSession {
                    id,
                    cwd,
                    additional,
                    settings,
                    reply,
                } => {
                    let now = now_ms();
                    let result = self
                        .connection
                        .execute(
                            "INSERT INTO sessions (session_id, cwd, created_at, updated_at,
                                                   mode, model, additional_directories)
                             VALUES (?1, ?2, ?3, ?3, ?4, ?5, ?6)",
                            params![
                                id,
                                cwd.to_string_lossy(),
                                now,
                                settings.mode,
                                settings.model,
                                directories_json(&additional)
                            ],
                        )
                        .map(|_| ())
                        .map_err(StoreError::from);
                    let _ = reply.send(result);
                }
                Command::SetRoots {
                    id,
                    cwd,
                    additional,
                } => {
                    if let Err(error) = self.connection.execute(
                        "UPDATE sessions SET cwd = ?2, additional_directories = ?3
                         WHERE session_id = ?1",
                        params![id, cwd.to_string_lossy(), directories_json(&additional)],
                    ) {
                        tracing::error!(%error, "cannot record a session's directories");
                    }
                }
                Command::SetSettings {
                    id,
                    settings,
                    reply,
                } => {
                    let result = self
                        .connection
                        .execute(
                            "UPDATE sessions SET mode = ?2, model = ?3 WHERE session_id = ?1",
                            params![id, settings.mode, settings.model],
                        )
                        .map(|_| ())
                        .map_err(StoreError::from);
                    let _ = reply.send(result);
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
        type Row = (String, Option<String>, Option<String>);
        let row: Option<Row> = self
            .connection
            .query_row(
                "SELECT cwd, mode, model FROM sessions WHERE session_id = ?1",
                params![id],
                |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?)),
            )
            .optional()?;
        let Some((cwd, mode, model)) = row else {
            return Ok(None);
        };
        let settings = match (mode, model) {
            (Some(mode), Some(model)) => Some(StoredSettings { mode, model }),
            _ => None,
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
            settings,
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
                    strftime('%Y-%m-%dT%H:%M:%fZ', updated_at / 1000.0, 'unixepoch'),
                    additional_directories
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
                        additional_directories: directories_from(row.get(5)?),
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
