//! Which caller created which task (`docs/reference/tool-calls.md` section
//! 9.5): a provider answers `tasks/*` only for tasks it created for a call
//! of the same `senderPrincipal`, so the task id → principal map is written
//! before the `CreateTaskResult` leaves and kept in the ledger's file, where
//! a restarted provider finds it.
//!
//! Task ids are the server's own. A server that starts again may hand out
//! an id it used before; the newest task of that id is the live one, so a
//! new record replaces the old.

use rusqlite::{params, OptionalExtension};
use tokio::sync::oneshot;

use super::store::Store;
use super::{Command, Ledger, LedgerError, Retention};

/// Who created a task.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskOwner {
    /// The hub-stamped principal of the call, as its JSON.
    pub principal: String,
    pub call_key: Option<String>,
}

pub(super) enum TaskCommand {
    Record {
        task_id: String,
        owner: TaskOwner,
        reply: oneshot::Sender<Result<(), LedgerError>>,
    },
    Owner {
        task_id: String,
        reply: oneshot::Sender<Result<Option<TaskOwner>, LedgerError>>,
    },
    Of {
        principal: String,
        reply: oneshot::Sender<Result<Vec<String>, LedgerError>>,
    },
}

impl TaskCommand {
    /// Runs on the ledger's worker thread.
    pub(super) fn handle(self, store: &Store, now_ms: i64) {
        match self {
            TaskCommand::Record {
                task_id,
                owner,
                reply,
            } => {
                let _ = reply.send(store.record_task(&task_id, &owner, now_ms));
            }
            TaskCommand::Owner { task_id, reply } => {
                let _ = reply.send(store.task_owner(&task_id));
            }
            TaskCommand::Of { principal, reply } => {
                let _ = reply.send(store.tasks_of(&principal));
            }
        }
    }
}

impl Ledger {
    /// Records that `owner` created `task_id`; returns once it is on disk.
    pub async fn record_task(&self, task_id: &str, owner: TaskOwner) -> Result<(), LedgerError> {
        self.ask(|reply| {
            Command::Task(TaskCommand::Record {
                task_id: task_id.to_owned(),
                owner,
                reply,
            })
        })
        .await
    }

    /// Who created `task_id`, if anyone recorded here did.
    pub async fn task_owner(&self, task_id: &str) -> Result<Option<TaskOwner>, LedgerError> {
        self.ask(|reply| {
            Command::Task(TaskCommand::Owner {
                task_id: task_id.to_owned(),
                reply,
            })
        })
        .await
    }

    /// The ids of every task `principal` (as its JSON) created.
    pub async fn tasks_of(&self, principal: &str) -> Result<Vec<String>, LedgerError> {
        self.ask(|reply| {
            Command::Task(TaskCommand::Of {
                principal: principal.to_owned(),
                reply,
            })
        })
        .await
    }
}

impl Store {
    fn record_task(
        &self,
        task_id: &str,
        owner: &TaskOwner,
        now_ms: i64,
    ) -> Result<(), LedgerError> {
        self.conn()
            .execute(
                "INSERT OR REPLACE INTO tasks (task_id, principal, call_key, created_ms)
                 VALUES (?1, ?2, ?3, ?4)",
                params![task_id, owner.principal, owner.call_key, now_ms],
            )
            .map(|_| ())
            .map_err(|e| self.error(e))
    }

    fn task_owner(&self, task_id: &str) -> Result<Option<TaskOwner>, LedgerError> {
        self.conn()
            .query_row(
                "SELECT principal, call_key FROM tasks WHERE task_id = ?1",
                params![task_id],
                |row| {
                    Ok(TaskOwner {
                        principal: row.get(0)?,
                        call_key: row.get(1)?,
                    })
                },
            )
            .optional()
            .map_err(|e| self.error(e))
    }

    fn tasks_of(&self, principal: &str) -> Result<Vec<String>, LedgerError> {
        let mut statement = self
            .conn()
            .prepare("SELECT task_id FROM tasks WHERE principal = ?1 ORDER BY created_ms")
            .map_err(|e| self.error(e))?;
        let ids = statement
            .query_map(params![principal], |row| row.get::<_, String>(0))
            .map_err(|e| self.error(e))?
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| self.error(e));
        ids
    }

    /// Forgets tasks older than the retention's age (a task outlives its
    /// call by its TTL, which servers keep far below days).
    pub(super) fn prune_tasks(
        &self,
        retention: &Retention,
        now_ms: i64,
    ) -> Result<u64, LedgerError> {
        let cutoff =
            now_ms.saturating_sub(i64::try_from(retention.max_age.as_millis()).unwrap_or(i64::MAX));
        self.conn()
            .execute("DELETE FROM tasks WHERE created_ms < ?1", params![cutoff])
            .map(|forgotten| forgotten as u64)
            .map_err(|e| self.error(e))
    }
}
