//! The tools a session's agent can call: every tool of every tool provider
//! on the hub (named `<namespace>__<tool>`), plus the built-in job tools.

pub mod builtin;
pub mod catalog;
pub mod hub_call;

use std::collections::BTreeMap;
use std::sync::Arc;

use agent_client_protocol::v1::schema::{ContentBlock, ToolCallContent, ToolKind};
use serde_json::Value;

use crate::model::ToolDefinition;

/// One tool of a provider on the hub.
#[derive(Debug, Clone, PartialEq)]
pub struct HubTool {
    /// The name the model sees: `<namespace>__<tool>`.
    pub exposed_name: String,
    pub service_id: String,
    pub namespace: String,
    /// The provider's bare tool name.
    pub name: String,
    pub description: Option<String>,
    pub input_schema: Value,
    /// `annotations.readOnlyHint == true`: runs without asking.
    pub read_only: bool,
    pub schema_pin: Option<String>,
}

/// The hub tools known at one moment, by exposed name. Immutable; the
/// catalog watcher swaps in a new set on every change.
#[derive(Debug, Default)]
pub struct ToolSet {
    pub hub: BTreeMap<String, Arc<HubTool>>,
}

/// A tool the model asked for, resolved.
#[derive(Debug, Clone)]
pub enum ResolvedTool {
    Builtin(builtin::Builtin),
    Hub(Arc<HubTool>),
}

impl ResolvedTool {
    pub fn read_only(&self) -> bool {
        match self {
            ResolvedTool::Builtin(tool) => tool.read_only(),
            ResolvedTool::Hub(tool) => tool.read_only,
        }
    }

    pub fn kind(&self) -> ToolKind {
        match self {
            ResolvedTool::Builtin(tool) => tool.kind(),
            ResolvedTool::Hub(tool) if tool.read_only => ToolKind::Read,
            ResolvedTool::Hub(_) => ToolKind::Other,
        }
    }
}

impl ToolSet {
    pub fn resolve(&self, name: &str) -> Option<ResolvedTool> {
        builtin::Builtin::from_name(name)
            .map(ResolvedTool::Builtin)
            .or_else(|| self.hub.get(name).cloned().map(ResolvedTool::Hub))
    }

    /// What the model is offered: the built-in tools, then the hub's.
    pub fn definitions(&self) -> Vec<ToolDefinition> {
        let mut definitions = builtin::definitions();
        definitions.extend(self.hub.values().map(|tool| ToolDefinition {
            name: tool.exposed_name.clone(),
            description: tool.description.clone().unwrap_or_default(),
            parameters: tool.input_schema.clone(),
        }));
        definitions
    }
}

/// How one tool call ended.
#[derive(Debug, Clone)]
pub struct ToolOutcome {
    /// `completed` or `failed` on the tool call update.
    pub succeeded: bool,
    /// The tool message the model gets.
    pub text_for_model: String,
    /// What the editor shows.
    pub content: Vec<ToolCallContent>,
    pub raw_output: Option<Value>,
}

impl ToolOutcome {
    pub fn success(text: String, raw_output: Option<Value>) -> Self {
        ToolOutcome {
            succeeded: true,
            content: vec![ToolCallContent::from(ContentBlock::from(text.clone()))],
            text_for_model: text,
            raw_output,
        }
    }

    /// A failure the model is told about as `error: …`.
    pub fn failure(message: impl Into<String>) -> Self {
        let message = message.into();
        ToolOutcome {
            succeeded: false,
            content: vec![ToolCallContent::from(ContentBlock::from(message.clone()))],
            text_for_model: format!("error: {message}"),
            raw_output: None,
        }
    }
}
