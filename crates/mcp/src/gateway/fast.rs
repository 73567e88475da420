//! A plain `tools/call` straight from the session's wire to the consumer
//! and its answer straight back, around rmcp.
//!
//! Through rmcp a call is decoded into its model (the arguments into a
//! map), handed through a pipe to rmcp's reader and to a task of its own,
//! encoded again for the hub, and its answer decoded, checked against
//! rmcp's `CallToolResult`, encoded again and piped back: most of the
//! gateway's time per call (`docs/performance.md`). A plain call needs
//! none of it: the hub takes the arguments as raw JSON and the provider's
//! result is already MCP's, so the wire pump reads only `id`, the tool's
//! `name` and where its `arguments` are, and splices the result into the
//! answer as it came.
//!
//! Plain means: the session began with `initialize` and its answer went
//! out (an older version than 2026-07-28, whose requests carry their own
//! `_meta`); the call has no `_meta` (no progress token, no call key, no
//! client capabilities of its own) and no `task`; its tool is on the
//! session's list (not tool search's `search_tools`/`call_tool`). Anything
//! else, and anything malformed, goes to rmcp as before, which answers it
//! (with the errors the client would get from any MCP server).
//!
//! The call is its own task, as rmcp would make it; `notifications/cancelled`
//! naming it drops that task, which sends the hub `$/cancelRequest` and
//! answers nothing (as MCP asks). A session that ends drops its calls.

use std::collections::HashMap;
use std::sync::Arc;

use parking_lot::Mutex;
use serde::Deserialize;
use serde_json::value::RawValue;
use switchboard_tools::consumer::{CallError, ExposedTool, RequestContext as CallContext};
use tokio::sync::mpsc;
use tokio::task::AbortHandle;

use super::errors::{answer_to_mcp, is_call_tool_result, without_complete_result_type};
use super::search::{CALL_TOOL, SEARCH_TOOL};
use super::session::Session;
use super::wire::CallsAround;

/// The answers of fast calls waiting for the session's writer; a full
/// queue holds the calls' tasks (the client is not reading), not memory.
pub(crate) const ANSWER_QUEUE: usize = 1024;

/// The fast calls of one session in flight, by the JSON text of their id.
pub(crate) struct FastCalls {
    session: Arc<Session>,
    answers: mpsc::Sender<String>,
    in_flight: Mutex<HashMap<Box<str>, AbortHandle>>,
}

/// The members of a `tools/call` the fast path reads; the rest is not parsed.
#[derive(Deserialize)]
struct Call<'a> {
    #[serde(borrow)]
    jsonrpc: &'a str,
    #[serde(borrow)]
    id: &'a RawValue,
    #[serde(borrow)]
    method: &'a str,
    #[serde(borrow)]
    params: Params<'a>,
}

#[derive(Deserialize)]
struct Params<'a> {
    /// A name with escapes is not borrowed: such a call goes to rmcp.
    #[serde(borrow)]
    name: &'a str,
    #[serde(default, borrow)]
    arguments: Option<&'a RawValue>,
    #[serde(default, rename = "_meta", borrow)]
    meta: Option<&'a RawValue>,
    #[serde(default, borrow)]
    task: Option<&'a RawValue>,
}

#[derive(Deserialize)]
struct Cancelled<'a> {
    #[serde(borrow)]
    params: CancelledParams<'a>,
}

#[derive(Deserialize)]
struct CancelledParams<'a> {
    #[serde(rename = "requestId", borrow)]
    request_id: &'a RawValue,
}

impl FastCalls {
    pub(crate) fn new(session: Arc<Session>, answers: mpsc::Sender<String>) -> Arc<FastCalls> {
        Arc::new(FastCalls {
            session,
            answers,
            in_flight: Mutex::new(HashMap::new()),
        })
    }

    /// The tool the session lists as `shown`, unless it is one of tool
    /// search's own.
    fn listed_tool(&self, shown: &str) -> Option<Arc<ExposedTool>> {
        let gateway = &self.session.gateway;
        if gateway.tool_search() && (shown == SEARCH_TOOL || shown == CALL_TOOL) {
            return None;
        }
        let exposed = gateway.exposed(shown)?;
        gateway.tools.tools().get(exposed).cloned()
    }
}

impl CallsAround for FastCalls {
    /// Starts `line` as a fast call if it is a plain `tools/call` of a
    /// listed tool; `false`: rmcp is to have it.
    fn try_start(self: &Arc<Self>, line: &str) -> bool {
        let Ok(call) = serde_json::from_str::<Call<'_>>(line) else {
            return false;
        };
        let plain = call.jsonrpc == "2.0"
            && call.method == "tools/call"
            && call.params.meta.is_none()
            && call.params.task.is_none()
            && call
                .params
                .arguments
                .is_none_or(|arguments| arguments.get().starts_with('{'));
        let Some(label) = plain.then(|| id_label(call.id)).flatten() else {
            return false;
        };
        let Some(tool) = self.listed_tool(call.params.name) else {
            return false;
        };
        let arguments = match call.params.arguments {
            Some(arguments) => arguments.to_owned(),
            None => empty_object(),
        };
        let id: Box<str> = call.id.get().into();
        let mut in_flight = self.in_flight.lock();
        if in_flight.contains_key(&id) {
            // The same id twice in flight: rmcp answers it as it would.
            return false;
        }
        let context = CallContext::new(label, self.session.link.declared());
        let calls = self.clone();
        let key = id.clone();
        let task = tokio::spawn(async move {
            let answer = calls
                .session
                .consumer
                .call_tool(&tool, arguments, None, None, &context)
                .await;
            let line = answer_line(&key, &tool, answer);
            calls.in_flight.lock().remove(&key);
            // A closed queue: the session ended; nobody to answer.
            let _ = calls.answers.send(line).await;
        });
        in_flight.insert(id, task.abort_handle());
        true
    }

    /// `notifications/cancelled` from the client: a fast call it names
    /// ends here (the notification goes on to rmcp, for its own calls).
    fn cancelled(&self, line: &str) {
        let Ok(cancelled) = serde_json::from_str::<Cancelled<'_>>(line) else {
            return;
        };
        let id = cancelled.params.request_id.get();
        if let Some(task) = self.in_flight.lock().remove(id) {
            tracing::debug!(id, "the MCP client cancelled a call");
            task.abort();
        }
    }

    /// The session ended: its calls are not wanted.
    fn end(&self) {
        for (_, task) in self.in_flight.lock().drain() {
            task.abort();
        }
    }
}

/// The label of the hub call for the MCP request `id` (as rmcp's
/// `RequestId` prints it): an integer's digits or a string's text; `None`
/// for anything else, which rmcp is to refuse.
fn id_label(id: &RawValue) -> Option<String> {
    let text = id.get();
    if text.starts_with('"') {
        return serde_json::from_str::<String>(text).ok();
    }
    text.parse::<i64>().ok().map(|n| n.to_string())
}

fn empty_object() -> Box<RawValue> {
    RawValue::from_string("{}".to_owned()).unwrap_or_default()
}

/// The JSON-RPC answer line to the call `id`: the provider's result
/// spliced in as it came when it is a `CallToolResult` an older version's
/// client reads as is; anything else as the slow path makes it.
fn answer_line(id: &str, tool: &ExposedTool, answer: Result<Box<RawValue>, CallError>) -> String {
    if let Ok(result) = &answer {
        let text = result.get();
        // `resultType` is 2026-07-28's: an older client is not shown it.
        if is_call_tool_result(text) && !text.contains("\"resultType\"") {
            return format!(r#"{{"jsonrpc":"2.0","id":{id},"result":{text}}}"#);
        }
    }
    let body = match answer_to_mcp(tool, answer) {
        Ok(mut result) => {
            without_complete_result_type(&mut result);
            format!(r#""result":{result}"#)
        }
        Err(error) => {
            let error = serde_json::to_string(&error).unwrap_or_else(|_| {
                r#"{"code":-32603,"message":"cannot encode the error"}"#.to_owned()
            });
            format!(r#""error":{error}"#)
        }
    };
    format!(r#"{{"jsonrpc":"2.0","id":{id},{body}}}"#)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn raw(text: &str) -> Box<RawValue> {
        RawValue::from_string(text.to_owned()).unwrap()
    }

    #[test]
    fn ids_are_labelled_as_rmcp_prints_them() {
        assert_eq!(id_label(&raw("7")).as_deref(), Some("7"));
        assert_eq!(id_label(&raw("-3")).as_deref(), Some("-3"));
        assert_eq!(id_label(&raw(r#""a\"b""#)).as_deref(), Some("a\"b"));
        assert_eq!(id_label(&raw("1.5")), None);
        assert_eq!(id_label(&raw("null")), None);
        assert_eq!(id_label(&raw("[1]")), None);
    }

    #[test]
    fn a_call_with_meta_task_or_odd_arguments_is_not_plain() {
        fn parsed(line: &str) -> Option<Call<'_>> {
            serde_json::from_str(line).ok()
        }
        let plain = parsed(
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a__b","arguments":{"x":1}}}"#,
        )
        .unwrap();
        assert!(plain.params.meta.is_none() && plain.params.task.is_none());
        assert_eq!(plain.params.arguments.unwrap().get(), r#"{"x":1}"#);
        let meta = parsed(
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a","_meta":{"progressToken":1}}}"#,
        )
        .unwrap();
        assert!(meta.params.meta.is_some());
        // An escaped name cannot be borrowed: not a fast call.
        assert!(parsed(
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a\u005fb"}}"#
        )
        .is_none());
    }
}
