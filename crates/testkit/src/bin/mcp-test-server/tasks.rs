//! Tasks as MCP 2025-11-25 has them: `tools/call` with `task` answers
//! `{task}` at once and works on; `tasks/get`, `tasks/result` (waits for the
//! end), `tasks/list`, `tasks/cancel`.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use parking_lot::Mutex;
use serde_json::{json, Map, Value};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use crate::wire::RpcError;
use crate::Server;

const RELATED_TASK: &str = "io.modelcontextprotocol/related-task";

#[derive(Default)]
pub struct Tasks {
    next: AtomicU64,
    tasks: Mutex<BTreeMap<String, Task>>,
}

struct Task {
    /// `{taskId, status, statusMessage?, createdAt, lastUpdatedAt, ttl, pollInterval}`.
    record: Value,
    result: Option<Result<Value, RpcError>>,
    /// `true` once the task is in a terminal status.
    done: watch::Sender<bool>,
    stop: CancellationToken,
}

impl Tasks {
    /// Starts `research` as a task; the `CreateTaskResult`.
    pub fn start_research(
        &self,
        server: &Arc<Server>,
        arguments: Map<String, Value>,
        task: &Value,
    ) -> Value {
        let id = format!(
            "task-{}-{}",
            std::process::id(),
            self.next.fetch_add(1, Ordering::Relaxed) + 1
        );
        let now = timestamp();
        let record = json!({
            "taskId": id, "status": "working", "createdAt": now, "lastUpdatedAt": now,
            "ttl": task.get("ttl").cloned().unwrap_or(Value::Null), "pollInterval": 100,
        });
        let stop = CancellationToken::new();
        self.tasks.lock().insert(
            id.clone(),
            Task {
                record: record.clone(),
                result: None,
                done: watch::channel(false).0,
                stop: stop.clone(),
            },
        );
        tokio::spawn(research(server.clone(), id, arguments, stop));
        json!({"task": record})
    }

    fn finish(&self, id: &str, status: &str, result: Result<Value, RpcError>) {
        let mut tasks = self.tasks.lock();
        let Some(task) = tasks.get_mut(id) else {
            return;
        };
        if task.result.is_some() {
            return;
        }
        task.record["status"] = json!(status);
        task.record["lastUpdatedAt"] = json!(timestamp());
        task.result = Some(result);
        task.done.send_replace(true);
    }

    pub async fn request(
        &self,
        method: &str,
        params: &Value,
        cancelled: &CancellationToken,
    ) -> Result<Value, RpcError> {
        if method == "tasks/list" {
            let tasks: Vec<Value> = self
                .tasks
                .lock()
                .values()
                .map(|t| t.record.clone())
                .collect();
            return Ok(json!({"tasks": tasks}));
        }
        let id = params["taskId"].as_str().unwrap_or_default();
        let unknown = || RpcError::invalid_params(format!("unknown task {id:?}"));
        match method {
            "tasks/get" => self
                .tasks
                .lock()
                .get(id)
                .map(|t| t.record.clone())
                .ok_or_else(unknown),
            "tasks/cancel" => {
                let mut tasks = self.tasks.lock();
                let task = tasks.get_mut(id).ok_or_else(unknown)?;
                if task.result.is_some() {
                    return Err(RpcError::invalid_params(format!(
                        "task {id:?} has ended; it cannot be cancelled"
                    )));
                }
                task.stop.cancel();
                task.record["status"] = json!("cancelled");
                task.record["lastUpdatedAt"] = json!(timestamp());
                task.result = Some(Err(RpcError::new(-32603, "the task was cancelled")));
                task.done.send_replace(true);
                Ok(task.record.clone())
            }
            "tasks/result" => {
                let mut done = self
                    .tasks
                    .lock()
                    .get(id)
                    .ok_or_else(unknown)?
                    .done
                    .subscribe();
                tokio::select! {
                    _ = done.wait_for(|done| *done) => {}
                    () = cancelled.cancelled() => return Err(RpcError::new(-32800, "cancelled")),
                }
                let tasks = self.tasks.lock();
                let task = tasks.get(id).ok_or_else(unknown)?;
                match task.result.clone() {
                    Some(Ok(mut result)) => {
                        result["_meta"] = json!({RELATED_TASK: {"taskId": id}});
                        Ok(result)
                    }
                    Some(Err(error)) => Err(error),
                    None => Err(RpcError::new(-32603, "the task has no result")),
                }
            }
            other => Err(RpcError::new(-32601, format!("Method not found: {other}"))),
        }
    }
}

async fn research(
    server: Arc<Server>,
    id: String,
    arguments: Map<String, Value>,
    stop: CancellationToken,
) {
    let topic = arguments
        .get("topic")
        .and_then(Value::as_str)
        .unwrap_or("nothing");
    let seconds = arguments
        .get("seconds")
        .and_then(Value::as_f64)
        .unwrap_or(0.3);
    tokio::select! {
        () = stop.cancelled() => return,
        () = tokio::time::sleep(Duration::from_secs_f64(seconds.clamp(0.0, 3600.0))) => {}
    }
    let mut found = format!("research on {topic}: done");
    if arguments.get("ask").and_then(Value::as_str) == Some("sampling") {
        let params = json!({
            "messages": [{"role": "user", "content": {"type": "text", "text": format!("summarize {topic}")}}],
            "maxTokens": 100,
            "_meta": {RELATED_TASK: {"taskId": id}},
        });
        let asked = tokio::select! {
            () = stop.cancelled() => return,
            asked = server.peer.request("sampling/createMessage", params) => asked,
        };
        match asked {
            Ok(sample) => {
                let said = sample["content"]["text"].as_str().unwrap_or_default();
                found = format!("{found}; the model said: {said}");
            }
            Err(error) => {
                found = format!(
                    "{found}; sampling failed: error {}: {}",
                    error.code, error.message
                )
            }
        }
    }
    let result = json!({"content": [{"type": "text", "text": found}]});
    server.tasks.finish(&id, "completed", Ok(result));
}

/// Now as RFC 3339 UTC, to the second.
fn timestamp() -> String {
    let seconds = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs()) as i64;
    let (days, rest) = (seconds.div_euclid(86_400), seconds.rem_euclid(86_400));
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z",
        rest / 3600,
        rest % 3600 / 60,
        rest % 60
    )
}
