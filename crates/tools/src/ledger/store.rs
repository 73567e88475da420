//! The ledger's SQLite file: schema, recovery after a crash, queries, pruning.
//!
//! Only the ledger's worker thread touches a [`Store`], so no query here
//! ever runs on the async runtime.

use std::path::{Path, PathBuf};
use std::time::Duration;

use rusqlite::{params, Connection, OptionalExtension};
use serde_json::value::RawValue;
use switchboard_protocol::ErrorObject;

use super::{FenceKey, Fingerprint, LedgerError, Outcome, Retention};

/// Bumped when the table layout changes (2: the `tasks` table).
const SCHEMA_VERSION: i64 = 2;

const CREATE: &str = "
CREATE TABLE IF NOT EXISTS calls (
    principal        TEXT NOT NULL,
    call_key         TEXT NOT NULL,
    tool             TEXT NOT NULL,
    arguments_digest TEXT NOT NULL,
    state            TEXT NOT NULL CHECK (state IN ('running', 'settled', 'unknown')),
    outcome_kind     TEXT CHECK (outcome_kind IN ('result', 'error')),
    outcome          TEXT,
    tool_call_id     TEXT,
    origin           TEXT,
    started_ms       INTEGER NOT NULL,
    settled_ms       INTEGER,
    PRIMARY KEY (principal, call_key)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS calls_by_settlement ON calls (state, settled_ms);
";

/// The tasks a provider created (`tasks.rs` reads and writes them), in the
/// same file and schema version as the calls.
const CREATE_TASKS: &str = "
CREATE TABLE IF NOT EXISTS tasks (
    task_id    TEXT NOT NULL PRIMARY KEY,
    principal  TEXT NOT NULL,
    call_key   TEXT,
    created_ms INTEGER NOT NULL
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS tasks_by_principal ON tasks (principal);
";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum State {
    Running,
    Settled,
    Unknown,
}

/// One ledger row, as far as the fence needs it.
pub(crate) struct Row {
    pub(crate) fingerprint: Fingerprint,
    pub(crate) state: State,
    pub(crate) outcome: Option<Outcome>,
}

pub(crate) struct Store {
    conn: Connection,
    path: PathBuf,
}

impl Store {
    /// Opens (creating if needed) and locks the ledger, and turns every call
    /// left `running` by a previous process into `unknown`. Returns how many
    /// were turned.
    pub(crate) fn open(
        path: &Path,
        retention: &Retention,
        now_ms: i64,
    ) -> Result<(Store, u64), LedgerError> {
        if let Some(parent) = path.parent() {
            create_private_dir(parent).map_err(|source| LedgerError::CreateDir {
                path: parent.to_owned(),
                error: source,
            })?;
        }
        let sqlite = |source| LedgerError::Sqlite {
            path: path.to_owned(),
            error: source,
        };
        let conn = Connection::open(path).map_err(sqlite)?;
        // An exclusive lock taken by the first write below and held for the
        // connection's life: a second provider on the same ledger fails at
        // once instead of turning our running calls into `unknown`. The OS
        // drops the lock when the process dies, so a restart after SIGKILL
        // gets it. WAL with an exclusive lock needs no shared-memory file.
        conn.pragma_update(None, "locking_mode", "EXCLUSIVE")
            .map_err(sqlite)?;
        conn.busy_timeout(Duration::ZERO).map_err(sqlite)?;
        let journal: String = conn
            .query_row("PRAGMA journal_mode = WAL", [], |row| row.get(0))
            .map_err(|e| in_use_or(path, e))?;
        if !journal.eq_ignore_ascii_case("wal") {
            tracing::debug!(journal, "the ledger's file system does not support WAL");
        }
        // FULL: a settled call is on disk before its answer leaves, so a
        // power loss cannot turn a delivered result into a rerun.
        conn.pragma_update(None, "synchronous", "FULL")
            .map_err(sqlite)?;
        let mut store = Store {
            conn,
            path: path.to_owned(),
        };
        let recovered = store.initialize(retention, now_ms)?;
        Ok((store, recovered))
    }

    fn initialize(&mut self, retention: &Retention, now_ms: i64) -> Result<u64, LedgerError> {
        let path = self.path.clone();
        let tx = self
            .conn
            .transaction_with_behavior(rusqlite::TransactionBehavior::Exclusive)
            .map_err(|e| in_use_or(&path, e))?;
        let sqlite = |source| LedgerError::Sqlite {
            path: path.clone(),
            error: source,
        };
        let version: i64 = tx
            .query_row("PRAGMA user_version", [], |row| row.get(0))
            .map_err(sqlite)?;
        if version > SCHEMA_VERSION {
            return Err(LedgerError::NewerSchema {
                path: path.clone(),
                version,
            });
        }
        tx.execute_batch(CREATE).map_err(sqlite)?;
        tx.execute_batch(CREATE_TASKS).map_err(sqlite)?;
        tx.pragma_update(None, "user_version", SCHEMA_VERSION)
            .map_err(sqlite)?;
        let recovered = tx
            .execute(
                "UPDATE calls SET state = 'unknown', settled_ms = ?1 WHERE state = 'running'",
                params![now_ms],
            )
            .map_err(sqlite)?;
        tx.commit().map_err(sqlite)?;
        self.prune(retention, now_ms)?;
        Ok(recovered as u64)
    }

    pub(super) fn conn(&self) -> &Connection {
        &self.conn
    }

    pub(super) fn error(&self, source: rusqlite::Error) -> LedgerError {
        LedgerError::Sqlite {
            path: self.path.clone(),
            error: source,
        }
    }

    pub(crate) fn lookup(&self, key: &FenceKey) -> Result<Option<Row>, LedgerError> {
        self.conn
            .query_row(
                "SELECT tool, arguments_digest, state, outcome_kind, outcome
                 FROM calls WHERE principal = ?1 AND call_key = ?2",
                params![key.principal, key.call_key],
                |row| {
                    let tool: String = row.get(0)?;
                    let arguments_digest: String = row.get(1)?;
                    let state: String = row.get(2)?;
                    let kind: Option<String> = row.get(3)?;
                    let outcome: Option<String> = row.get(4)?;
                    Ok((tool, arguments_digest, state, kind, outcome))
                },
            )
            .optional()
            .map_err(|e| self.error(e))?
            .map(|(tool, arguments_digest, state, kind, outcome)| {
                let state = match state.as_str() {
                    "running" => State::Running,
                    "settled" => State::Settled,
                    _ => State::Unknown,
                };
                let outcome = match (kind.as_deref(), outcome) {
                    (Some("result"), Some(text)) => {
                        RawValue::from_string(text).ok().map(Outcome::Result)
                    }
                    (Some("error"), Some(text)) => serde_json::from_str::<ErrorObject>(&text)
                        .ok()
                        .map(Outcome::Error),
                    _ => None,
                };
                // A settled row whose outcome cannot be read back is reported
                // as unknown rather than replayed wrongly.
                let state = if state == State::Settled && outcome.is_none() {
                    State::Unknown
                } else {
                    state
                };
                Ok(Row {
                    fingerprint: Fingerprint {
                        tool,
                        arguments_digest,
                    },
                    state,
                    outcome,
                })
            })
            .transpose()
    }

    pub(crate) fn insert_running(
        &self,
        key: &FenceKey,
        fingerprint: &Fingerprint,
        tool_call_id: &str,
        origin: Option<&str>,
        now_ms: i64,
    ) -> Result<(), LedgerError> {
        self.conn
            .execute(
                "INSERT INTO calls (principal, call_key, tool, arguments_digest, state, tool_call_id, origin, started_ms)
                 VALUES (?1, ?2, ?3, ?4, 'running', ?5, ?6, ?7)",
                params![
                    key.principal,
                    key.call_key,
                    fingerprint.tool,
                    fingerprint.arguments_digest,
                    tool_call_id,
                    origin,
                    now_ms
                ],
            )
            .map(|_| ())
            .map_err(|e| self.error(e))
    }

    pub(crate) fn record(
        &self,
        key: &FenceKey,
        outcome: &Outcome,
        now_ms: i64,
    ) -> Result<(), LedgerError> {
        let (state, kind, text) = match outcome {
            Outcome::Result(raw) => ("settled", Some("result"), Some(raw.get().to_owned())),
            Outcome::Error(error) => (
                "settled",
                Some("error"),
                Some(serde_json::to_string(error).unwrap_or_default()),
            ),
            Outcome::Unknown => ("unknown", None, None),
        };
        self.conn
            .execute(
                "UPDATE calls SET state = ?3, outcome_kind = ?4, outcome = ?5, settled_ms = ?6
                 WHERE principal = ?1 AND call_key = ?2",
                params![key.principal, key.call_key, state, kind, text, now_ms],
            )
            .map(|_| ())
            .map_err(|e| self.error(e))
    }

    pub(crate) fn delete(&self, key: &FenceKey) -> Result<(), LedgerError> {
        self.conn
            .execute(
                "DELETE FROM calls WHERE principal = ?1 AND call_key = ?2",
                params![key.principal, key.call_key],
            )
            .map(|_| ())
            .map_err(|e| self.error(e))
    }

    /// Forgets settled calls older than `max_age`, then the oldest settled
    /// ones beyond `max_settled`. `running` and `unknown` rows are never
    /// pruned: forgetting them would let a call whose outcome is unknown run
    /// a second time. Tasks older than `max_age` go too. Returns how many
    /// calls were forgotten.
    pub(crate) fn prune(&self, retention: &Retention, now_ms: i64) -> Result<u64, LedgerError> {
        let cutoff =
            now_ms.saturating_sub(i64::try_from(retention.max_age.as_millis()).unwrap_or(i64::MAX));
        let by_age = self
            .conn
            .execute(
                "DELETE FROM calls WHERE state = 'settled' AND settled_ms < ?1",
                params![cutoff],
            )
            .map_err(|e| self.error(e))?;
        let by_count = self
            .conn
            .execute(
                "DELETE FROM calls WHERE state = 'settled' AND (principal, call_key) IN (
                     SELECT principal, call_key FROM calls WHERE state = 'settled'
                     ORDER BY settled_ms DESC, call_key DESC
                     LIMIT -1 OFFSET ?1)",
                params![i64::try_from(retention.max_settled).unwrap_or(i64::MAX)],
            )
            .map_err(|e| self.error(e))?;
        self.prune_tasks(retention, now_ms)?;
        Ok((by_age + by_count) as u64)
    }

    /// Rows per state (for tests and diagnostics).
    pub(crate) fn counts(&self) -> Result<(u64, u64, u64), LedgerError> {
        self.conn
            .query_row(
                "SELECT
                    COALESCE(SUM(state = 'running'), 0),
                    COALESCE(SUM(state = 'settled'), 0),
                    COALESCE(SUM(state = 'unknown'), 0)
                 FROM calls",
                [],
                |row| {
                    Ok((
                        row.get::<_, i64>(0)? as u64,
                        row.get::<_, i64>(1)? as u64,
                        row.get::<_, i64>(2)? as u64,
                    ))
                },
            )
            .map_err(|e| self.error(e))
    }
}

/// SQLITE_BUSY while taking the lock means another process holds the ledger.
fn in_use_or(path: &Path, error: rusqlite::Error) -> LedgerError {
    if let rusqlite::Error::SqliteFailure(failure, _) = &error {
        if matches!(
            failure.code,
            rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked
        ) {
            return LedgerError::InUse {
                path: path.to_owned(),
            };
        }
    }
    LedgerError::Sqlite {
        path: path.to_owned(),
        error,
    }
}

fn create_private_dir(dir: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
}
