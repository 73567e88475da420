//! Tasks the consumer's calls created (MCP tasks, `docs/reference/tool-calls.md`
//! section 9.5): which provider a task id belongs to and which session
//! created it, so `tasks/*` go to that provider only and a session sees
//! only its own tasks. A task keeps its call registered with the callback
//! registry ([`CallGuard`]): its server's requests keep reaching the session.
//!
//! Bounded: an entry lives as long as the task's `ttl` (at most
//! [`MAX_TASK_LIFETIME`]; one without a `ttl` that long), and at most
//! [`MAX_TASKS`] are kept (the one closest to its end goes first).

use std::collections::HashMap;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use serde_json::Value;

use super::backend::ProviderIdentity;
use super::callback::CallGuard;

/// The longest a task is remembered.
pub const MAX_TASK_LIFETIME: Duration = Duration::from_secs(24 * 3600);
/// The most tasks remembered at once (per consumer).
pub const MAX_TASKS: usize = 1024;

struct TaskEntry {
    session: u64,
    provider: ProviderIdentity,
    expires: Instant,
    /// Keeps the call's callbacks routed while the task lives.
    _call: CallGuard,
}

#[derive(Default)]
pub(super) struct Tasks {
    entries: Mutex<HashMap<String, TaskEntry>>,
}

/// The task a `tools/call` answer created, if it is a `CreateTaskResult`
/// (`{task: {taskId, ttl?, ...}}`, or the flattened
/// `{resultType: "task", taskId, ttlMs?}`): its id and lifetime.
pub(super) fn created_task(answer: &Value) -> Option<(String, Duration)> {
    let (task, ttl) = match answer.get("task") {
        Some(task) => (task, task.get("ttl")),
        None if answer.get("resultType").and_then(Value::as_str) == Some("task") => {
            (answer, answer.get("ttlMs"))
        }
        None => return None,
    };
    let id = task.get("taskId")?.as_str()?.to_owned();
    let lifetime = ttl
        .and_then(Value::as_u64)
        .map_or(MAX_TASK_LIFETIME, Duration::from_millis)
        .min(MAX_TASK_LIFETIME);
    Some((id, lifetime))
}

impl Tasks {
    pub(super) fn insert(
        &self,
        id: String,
        session: u64,
        provider: ProviderIdentity,
        lifetime: Duration,
        call: CallGuard,
    ) {
        let now = Instant::now();
        let mut entries = self.entries.lock();
        entries.retain(|_, entry| entry.expires > now);
        if entries.len() >= MAX_TASKS {
            let soonest = entries
                .iter()
                .min_by_key(|(_, entry)| entry.expires)
                .map(|(id, _)| id.clone());
            if let Some(soonest) = soonest {
                entries.remove(&soonest);
            }
        }
        if let Some(previous) = entries.get(&id) {
            if previous.provider != provider {
                tracing::warn!(task = %id, "two providers created tasks with one id; the newer one is kept");
            }
        }
        entries.insert(
            id,
            TaskEntry {
                session,
                provider,
                expires: now + lifetime,
                _call: call,
            },
        );
    }

    /// The provider of `session`'s task `id`.
    pub(super) fn provider_of(&self, session: u64, id: &str) -> Option<ProviderIdentity> {
        let mut entries = self.entries.lock();
        let entry = entries.get(id)?;
        if entry.expires <= Instant::now() {
            entries.remove(id);
            return None;
        }
        (entry.session == session).then(|| entry.provider.clone())
    }

    /// The ids of `session`'s live tasks.
    pub(super) fn ids_of(&self, session: u64) -> Vec<String> {
        let now = Instant::now();
        let entries = self.entries.lock();
        entries
            .iter()
            .filter(|(_, entry)| entry.session == session && entry.expires > now)
            .map(|(id, _)| id.clone())
            .collect()
    }

    pub(super) fn forget_session(&self, session: u64) {
        self.entries
            .lock()
            .retain(|_, entry| entry.session != session);
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn both_shapes_of_a_created_task_are_read() {
        assert_eq!(
            created_task(&json!({"task": {"taskId": "t1", "status": "working", "ttl": 60000}})),
            Some(("t1".into(), Duration::from_secs(60)))
        );
        assert_eq!(
            created_task(&json!({"resultType": "task", "taskId": "t2", "ttlMs": null})),
            Some(("t2".into(), MAX_TASK_LIFETIME))
        );
        assert_eq!(created_task(&json!({"content": []})), None);
        assert_eq!(created_task(&json!({"task": {"status": "working"}})), None);
        assert_eq!(
            created_task(&json!({"task": {"taskId": "t3", "ttl": u64::MAX}})).map(|t| t.1),
            Some(MAX_TASK_LIFETIME)
        );
    }
}
