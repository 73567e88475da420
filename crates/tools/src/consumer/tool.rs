//! One tool as a consumer knows it: the entry its source listed
//! ([`ListedTool`]), the name it is exposed under and the backend that runs
//! it ([`ExposedTool`]).

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use serde_json::value::RawValue;
use serde_json::{Map, Value};
use switchboard_protocol::tool_call::{ClientRef, ToolCallRequest};
use switchboard_protocol::Principal;

use super::error::CallError;
use super::naming::exposed_name;
use crate::tool::BoxFuture;

/// Who a tool provider is on the hub: what callbacks from it are checked
/// against (`docs/reference/tool-calls.md` section 9.3) and which version
/// of the contract it speaks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProviderIdentity {
    pub service_id: String,
    /// The hub client that registered the service.
    pub client_id: String,
    /// The principal the hub stamps on what that client sends.
    pub principal: Principal,
    /// 1 (tools) or 2 (the whole MCP server surface).
    pub version: u64,
}

/// One entry of a `tools/list` answer (`docs/reference/tool-calls.md`): a
/// non-empty `name`, an object `inputSchema`, an optional `schemaPin`, and
/// whatever else the source listed (`title`, `description`,
/// `outputSchema`, `annotations`, …).
#[derive(Debug, Clone, PartialEq)]
pub struct ListedTool {
    /// The source's bare tool name.
    pub name: String,
    pub schema_pin: Option<String>,
    /// The entry without `name` and `schemaPin`; `inputSchema` is an object.
    pub definition: Map<String, Value>,
}

impl ListedTool {
    /// Reads one entry; `Err` says why it cannot be offered.
    pub fn from_entry(entry: Value) -> Result<ListedTool, String> {
        let Value::Object(mut definition) = entry else {
            return Err("the entry is not an object".into());
        };
        let name = match definition.remove("name") {
            Some(Value::String(name)) if !name.is_empty() => name,
            Some(Value::String(_)) => return Err("the name is empty".into()),
            _ => return Err("there is no name".into()),
        };
        if !definition.get("inputSchema").is_some_and(Value::is_object) {
            return Err(format!("{name:?} has no inputSchema object"));
        }
        let schema_pin = match definition.remove("schemaPin") {
            None | Some(Value::Null) => None,
            Some(Value::String(pin)) => Some(pin),
            Some(_) => return Err(format!("the schemaPin of {name:?} is not a string")),
        };
        Ok(ListedTool {
            name,
            schema_pin,
            definition,
        })
    }

    /// Reads a whole `tools/list` answer (`{"tools": [...]}`). Entries that
    /// cannot be offered are skipped, each with a warning naming `source`;
    /// an answer of another shape is an error.
    pub fn from_answer(answer: &RawValue, source: &str) -> Result<Vec<ListedTool>, String> {
        #[derive(serde::Deserialize)]
        struct Answer {
            tools: Vec<Value>,
        }
        let answer: Answer = serde_json::from_str(answer.get())
            .map_err(|error| format!("malformed tools/list answer: {error}"))?;
        let mut tools = Vec::with_capacity(answer.tools.len());
        for (index, entry) in answer.tools.into_iter().enumerate() {
            match ListedTool::from_entry(entry) {
                Ok(tool) => tools.push(tool),
                Err(reason) => {
                    tracing::warn!(source, index, reason, "skipping a tools/list entry")
                }
            }
        }
        Ok(tools)
    }
}

/// What runs the tools of one source. The hub's tool providers are one
/// backend each (`tools/call` through the hub); another source (say an MCP
/// server of one ACP session) implements this to be offered and called
/// through the same table and the same [`ExposedTool::call`].
pub trait ToolBackend: Send + Sync + 'static {
    /// Who this is, for logs and for telling two tables apart: the hub
    /// service id of a provider.
    fn id(&self) -> &str;

    /// The hub client whose `notifications/progress` belong to this
    /// backend's calls; `None` for a backend off the hub.
    fn progress_client_id(&self) -> Option<&str> {
        None
    }

    /// The hub provider behind this backend (its version says whether it
    /// takes `client` and `task`); `None` for a backend off the hub.
    fn provider(&self) -> Option<&ProviderIdentity> {
        None
    }

    /// Runs `request` (its `name` is the bare tool name). The wait is
    /// [`call_timeout`](super::call_timeout) of `timeout` and the backend's
    /// own ceiling. Dropping the future cancels the call.
    fn call(
        &self,
        request: ToolCallRequest,
        timeout: Option<Duration>,
    ) -> BoxFuture<Result<Box<RawValue>, CallError>>;
}

/// One call of an exposed tool, as the consumer asks for it.
#[derive(Debug)]
pub struct Invocation {
    /// Exactly what the caller supplied; never translated.
    pub arguments: Box<RawValue>,
    /// The consumer's own id for the call (an MCP request id, a model's
    /// tool-call id).
    pub tool_call_id: Option<String>,
    pub progress_token: Option<Box<RawValue>>,
    /// See [`fresh_call_key`](super::fresh_call_key).
    pub call_key: Option<String>,
    /// How long the caller will wait; `None`: as long as the backend allows.
    pub timeout: Option<Duration>,
    /// Version 2: the consumer's callback service and what its MCP client
    /// declared; see [`Callbacks::begin`](super::Callbacks::begin).
    pub client: Option<ClientRef>,
    /// Version 2: MCP's `task` member (`{ttl?}`), passed on untouched.
    pub task: Option<Box<RawValue>>,
}

/// A tool under its exposed name, with the backend that runs it. Shared
/// (`Arc`) between the tables that list it.
#[derive(Clone)]
pub struct ExposedTool {
    /// `<namespace>__<tool>`.
    pub name: String,
    pub namespace: String,
    /// The source's bare name: what `tools/call` carries.
    pub tool: String,
    pub schema_pin: Option<String>,
    /// What the source listed, without `name` and `schemaPin`.
    pub definition: Map<String, Value>,
    pub backend: Arc<dyn ToolBackend>,
}

impl ExposedTool {
    pub fn new(namespace: &str, listed: ListedTool, backend: Arc<dyn ToolBackend>) -> Self {
        ExposedTool {
            name: exposed_name(namespace, &listed.name),
            namespace: namespace.to_owned(),
            tool: listed.name,
            schema_pin: listed.schema_pin,
            definition: listed.definition,
            backend,
        }
    }

    pub fn description(&self) -> Option<&str> {
        self.definition.get("description").and_then(Value::as_str)
    }

    /// The tool's `inputSchema` (an object: [`ListedTool`] refuses others).
    pub fn input_schema(&self) -> &Value {
        static EMPTY: Value = Value::Null;
        self.definition.get("inputSchema").unwrap_or(&EMPTY)
    }

    /// `annotations.readOnlyHint == true`.
    pub fn read_only(&self) -> bool {
        self.definition
            .get("annotations")
            .and_then(|annotations| annotations.get("readOnlyHint"))
            .and_then(Value::as_bool)
            == Some(true)
    }

    /// MCP's `execution.taskSupport` as listed (`"forbidden"`, `"optional"`,
    /// `"required"`); `None` when the tool says nothing (MCP: forbidden).
    pub fn task_support(&self) -> Option<&str> {
        self.definition
            .get("execution")
            .and_then(|execution| execution.get("taskSupport"))
            .and_then(Value::as_str)
    }

    /// The listed definition under the exposed name: what an MCP host gets.
    pub fn listed_definition(&self) -> Map<String, Value> {
        let mut definition = self.definition.clone();
        definition.insert("name".into(), Value::String(self.name.clone()));
        definition
    }

    /// Calls the tool. Dropping the future cancels the call (through the
    /// hub: `$/cancelRequest` to the provider).
    pub fn call(&self, invocation: Invocation) -> BoxFuture<Result<Box<RawValue>, CallError>> {
        // Built field by field on purpose: a new member of the contract must
        // be decided here, not defaulted.
        let request = ToolCallRequest {
            name: self.tool.clone(),
            arguments: invocation.arguments,
            tool_call_id: invocation.tool_call_id,
            progress_token: invocation.progress_token,
            call_key: invocation.call_key,
            schema_pin: self.schema_pin.clone(),
            origin: None,
            client: invocation.client,
            task: invocation.task,
        };
        self.backend.call(request, invocation.timeout)
    }
}

impl PartialEq for ExposedTool {
    fn eq(&self, other: &Self) -> bool {
        self.name == other.name
            && self.namespace == other.namespace
            && self.tool == other.tool
            && self.schema_pin == other.schema_pin
            && self.definition == other.definition
            && self.backend.id() == other.backend.id()
            && self.backend.progress_client_id() == other.backend.progress_client_id()
    }
}

impl fmt::Debug for ExposedTool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ExposedTool")
            .field("name", &self.name)
            .field("backend", &self.backend.id())
            .field("schema_pin", &self.schema_pin)
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn an_entry_keeps_everything_but_name_and_pin() {
        let listed = ListedTool::from_entry(json!({
            "name": "echo",
            "description": "Repeats",
            "inputSchema": {"type": "object"},
            "annotations": {"readOnlyHint": true},
            "schemaPin": "tp1:echo:ab:0",
            "x-extra": 1,
        }))
        .unwrap();
        assert_eq!(listed.name, "echo");
        assert_eq!(listed.schema_pin.as_deref(), Some("tp1:echo:ab:0"));
        assert_eq!(
            Value::Object(listed.definition),
            json!({
                "description": "Repeats",
                "inputSchema": {"type": "object"},
                "annotations": {"readOnlyHint": true},
                "x-extra": 1,
            })
        );
    }

    #[test]
    fn entries_that_cannot_be_offered_say_why() {
        for (entry, reason) in [
            (json!("echo"), "not an object"),
            (json!({"inputSchema": {}}), "no name"),
            (json!({"name": "", "inputSchema": {}}), "empty"),
            (json!({"name": "a"}), "no inputSchema"),
            (json!({"name": "a", "inputSchema": true}), "no inputSchema"),
            (
                json!({"name": "a", "inputSchema": {}, "schemaPin": 5}),
                "not a string",
            ),
        ] {
            let error = ListedTool::from_entry(entry.clone()).unwrap_err();
            assert!(error.contains(reason), "{entry}: {error}");
        }
    }

    #[test]
    fn an_answer_skips_bad_entries_and_refuses_another_shape() {
        let raw = RawValue::from_string(
            json!({"tools": [{"name": "a", "inputSchema": {}}, {"name": ""}]}).to_string(),
        )
        .unwrap();
        let tools = ListedTool::from_answer(&raw, "svc").unwrap();
        assert_eq!(tools.len(), 1);
        let raw = RawValue::from_string(r#"{"tool": []}"#.into()).unwrap();
        assert!(ListedTool::from_answer(&raw, "svc")
            .unwrap_err()
            .starts_with("malformed tools/list answer"));
    }
}
