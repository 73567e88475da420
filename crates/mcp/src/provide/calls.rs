//! The hub calls in flight on the hosted server, and the tasks they
//! created: what a request or notification of the server is attributed to
//! (`docs/reference/tool-calls.md` section 9.4). Never a guess: a request
//! that names no call while several are in flight belongs to none.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use serde_json::Value;
use switchboard_mcp_client::CallTag;
use switchboard_protocol::tool_call::ClientRef;
use tokio_util::sync::CancellationToken;

/// MCP's `_meta` key naming the task a message belongs to.
pub(crate) const RELATED_TASK: &str = "io.modelcontextprotocol/related-task";
/// Tasks remembered for attribution; the oldest are forgotten first.
const MAX_TASKS: usize = 1024;
/// How long an ended call can still be named (by its progress token): the
/// MCP client layer may hand on a notification the server sent just before
/// its answer after the answer. It no longer counts as in flight.
const ENDED_LINGER: Duration = Duration::from_secs(1);
/// Ended calls remembered for [`ENDED_LINGER`], at most.
const MAX_ENDED: usize = 1024;

/// What the relay knows of one hub call (or of the task it created).
#[derive(Debug)]
pub(crate) struct CallEntry {
    /// The caller's callback service and its MCP client's capabilities.
    pub(crate) client: Option<ClientRef>,
    /// `_meta["switchboard/call"]` of everything sent back for this call.
    pub(crate) tool_call_id: String,
    /// Cancelled when the hub call ends early (its caller cancelled or
    /// timed out); `None` for a task, which outlives its call.
    pub(crate) ended: Option<CancellationToken>,
}

/// Which call a server's request belongs to.
#[derive(Debug)]
pub(crate) enum Attribution {
    Call(Arc<CallEntry>),
    /// No call is in flight and none is named.
    NoCall,
    /// Several calls are in flight and the request names none of them.
    Ambiguous {
        in_flight: usize,
    },
}

#[derive(Default)]
pub(crate) struct Calls {
    inner: Mutex<Inner>,
}

#[derive(Default)]
struct Inner {
    next: CallTag,
    in_flight: HashMap<CallTag, Arc<CallEntry>>,
    tasks: HashMap<String, Arc<CallEntry>>,
    task_order: VecDeque<String>,
    /// Calls that ended lately, oldest first.
    ended: VecDeque<(Instant, CallTag, Arc<CallEntry>)>,
}

/// A call in flight; it leaves the registry when this is dropped.
pub(crate) struct InFlight {
    calls: Arc<Calls>,
    pub(crate) tag: CallTag,
    pub(crate) entry: Arc<CallEntry>,
}

impl Drop for InFlight {
    fn drop(&mut self) {
        let mut inner = self.calls.inner.lock();
        if let Some(entry) = inner.in_flight.remove(&self.tag) {
            if inner.ended.len() >= MAX_ENDED {
                inner.ended.pop_front();
            }
            inner.ended.push_back((Instant::now(), self.tag, entry));
        }
    }
}

impl Calls {
    /// Registers a call; its tag goes with the call to the server.
    pub(crate) fn begin(self: &Arc<Self>, entry: CallEntry) -> InFlight {
        let entry = Arc::new(entry);
        let mut inner = self.inner.lock();
        inner.next += 1;
        let tag = inner.next;
        inner.in_flight.insert(tag, entry.clone());
        InFlight {
            calls: self.clone(),
            tag,
            entry,
        }
    }

    /// `task_id` was created by the call `entry` describes: requests that
    /// name the task belong to that call's client.
    pub(crate) fn remember_task(&self, task_id: &str, entry: &CallEntry) {
        let mut inner = self.inner.lock();
        if inner.task_order.len() >= MAX_TASKS {
            if let Some(oldest) = inner.task_order.pop_front() {
                inner.tasks.remove(&oldest);
            }
        }
        inner.task_order.push_back(task_id.to_owned());
        inner.tasks.insert(
            task_id.to_owned(),
            Arc::new(CallEntry {
                client: entry.client.clone(),
                tool_call_id: entry.tool_call_id.clone(),
                ended: None,
            }),
        );
    }

    /// The call a server request belongs to: the one its related task
    /// names, else the one whose progress token it carries (`by_token`,
    /// found by the MCP client layer), else the only call in flight.
    pub(crate) fn attribute_request(
        &self,
        params: &Value,
        by_token: Option<CallTag>,
    ) -> Attribution {
        if let Some(entry) = self.named(params, by_token) {
            return Attribution::Call(entry);
        }
        let inner = self.inner.lock();
        let mut in_flight = inner.in_flight.values();
        match (in_flight.next(), in_flight.next()) {
            (None, _) => Attribution::NoCall,
            (Some(only), None) => Attribution::Call(only.clone()),
            (Some(_), Some(_)) => Attribution::Ambiguous {
                in_flight: inner.in_flight.len(),
            },
        }
    }

    /// The call a server notification belongs to: only one it names (a
    /// notification of no call is for everyone who listens, so the only
    /// call in flight is no reason to give it to one caller).
    pub(crate) fn attribute_notification(
        &self,
        params: &Value,
        by_token: Option<CallTag>,
    ) -> Option<Arc<CallEntry>> {
        self.named(params, by_token)
    }

    fn named(&self, params: &Value, by_token: Option<CallTag>) -> Option<Arc<CallEntry>> {
        let inner = self.inner.lock();
        let task = params
            .get("_meta")
            .and_then(|meta| meta.get(RELATED_TASK))
            .and_then(|task| task.get("taskId"))
            .and_then(Value::as_str);
        if let Some(entry) = task.and_then(|task| inner.tasks.get(task)) {
            return Some(entry.clone());
        }
        let tag = by_token?;
        if let Some(entry) = inner.in_flight.get(&tag) {
            return Some(entry.clone());
        }
        inner
            .ended
            .iter()
            .rev()
            .take_while(|(at, _, _)| at.elapsed() < ENDED_LINGER)
            .find(|(_, ended, _)| *ended == tag)
            .map(|(_, _, entry)| entry.clone())
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn entry(id: &str) -> CallEntry {
        CallEntry {
            client: None,
            tool_call_id: id.into(),
            ended: None,
        }
    }

    fn attributed(attribution: Attribution) -> String {
        match attribution {
            Attribution::Call(entry) => entry.tool_call_id.clone(),
            Attribution::NoCall => "none".into(),
            Attribution::Ambiguous { in_flight } => format!("ambiguous {in_flight}"),
        }
    }

    #[test]
    fn the_related_task_wins_then_the_token_then_the_only_call() {
        let calls = Arc::new(Calls::default());
        assert_eq!(
            attributed(calls.attribute_request(&json!({}), None)),
            "none"
        );
        let first = calls.begin(entry("first"));
        assert_eq!(
            attributed(calls.attribute_request(&json!({}), None)),
            "first"
        );
        let second = calls.begin(entry("second"));
        assert_eq!(
            attributed(calls.attribute_request(&json!({}), None)),
            "ambiguous 2"
        );
        assert_eq!(
            attributed(calls.attribute_request(&json!({}), Some(second.tag))),
            "second"
        );
        calls.remember_task("t-1", &entry("tasked"));
        let names_task = json!({"_meta": {RELATED_TASK: {"taskId": "t-1"}}});
        assert_eq!(
            attributed(calls.attribute_request(&names_task, Some(first.tag))),
            "tasked"
        );
        // A task this relay does not know names nothing: the other rules apply.
        let other_task = json!({"_meta": {RELATED_TASK: {"taskId": "t-2"}}});
        assert_eq!(
            attributed(calls.attribute_request(&other_task, None)),
            "ambiguous 2"
        );
        drop(second);
        assert_eq!(
            attributed(calls.attribute_request(&json!({}), None)),
            "first"
        );
        drop(first);
        assert_eq!(
            attributed(calls.attribute_request(&json!({}), None)),
            "none"
        );
    }

    #[test]
    fn a_notification_belongs_only_to_a_call_it_names() {
        let calls = Arc::new(Calls::default());
        let only = calls.begin(entry("only"));
        assert!(calls.attribute_notification(&json!({}), None).is_none());
        assert_eq!(
            calls
                .attribute_notification(&json!({}), Some(only.tag))
                .unwrap()
                .tool_call_id,
            "only"
        );
        // Just ended: still named by its token, no longer in flight.
        let tag = only.tag;
        drop(only);
        assert_eq!(
            calls
                .attribute_notification(&json!({}), Some(tag))
                .unwrap()
                .tool_call_id,
            "only"
        );
        assert_eq!(
            attributed(calls.attribute_request(&json!({}), None)),
            "none"
        );
    }

    #[test]
    fn remembered_tasks_are_bounded() {
        let calls = Calls::default();
        for task in 0..(MAX_TASKS + 1) {
            calls.remember_task(&task.to_string(), &entry("x"));
        }
        let first = json!({"_meta": {RELATED_TASK: {"taskId": "0"}}});
        assert!(calls.attribute_notification(&first, None).is_none());
    }
}
