//! The tools a session's agent can call: every tool of every tool provider
//! on the hub, the tools of the session's own MCP servers (`crate::mcp`),
//! and the built-in job and file tools.
//!
//! The hub's tools, their names and the calls to them are the shared
//! consumer layer's (`switchboard_tools::consumer`, as in `switchboard
//! mcp`): a model is offered each under the model-safe form of
//! `<namespace>__<tool>`, and the name it calls is mapped back by the same
//! table. Built-in names hold no `__`, so they never meet a hub tool's.

pub mod builtin;
pub mod call;
pub mod files;
pub mod paths;

use std::sync::Arc;

use agent_client_protocol::v1::schema::{ContentBlock, ToolCallContent, ToolKind};
use serde_json::Value;
use switchboard_tools::consumer::{ExposedTool, ToolTable};

use crate::model::ToolDefinition;
use crate::modes::Effect;

/// The tools of one model call: the built-in ones and the session's table
/// (the hub's, then its MCP servers') as of then (immutable; the index publishes a new table on every change).
#[derive(Debug, Default)]
pub struct ToolSet {
    hub: Arc<ToolTable>,
}

/// A tool the model asked for, resolved.
#[derive(Debug, Clone)]
pub enum ResolvedTool {
    Builtin(builtin::Builtin),
    Hub(Arc<ExposedTool>),
}

impl ResolvedTool {
    /// What a call would do, for the session mode's gate: a tool of the hub
    /// or of a session MCP server only reads if annotated
    /// `readOnlyHint: true`.
    pub fn effect(&self, arguments: &Value, roots: &paths::Roots) -> Effect {
        match self {
            ResolvedTool::Builtin(tool) => tool.effect(arguments, roots),
            ResolvedTool::Hub(tool) if tool.read_only() => Effect::Read,
            ResolvedTool::Hub(_) => Effect::Other,
        }
    }

    pub fn kind(&self) -> ToolKind {
        match self {
            ResolvedTool::Builtin(tool) => tool.kind(),
            ResolvedTool::Hub(tool) if tool.read_only() => ToolKind::Read,
            ResolvedTool::Hub(_) => ToolKind::Other,
        }
    }
}

impl ToolSet {
    pub fn new(hub: Arc<ToolTable>) -> Self {
        ToolSet { hub }
    }

    /// The tool a model called `name`.
    pub fn resolve(&self, name: &str) -> Option<ResolvedTool> {
        builtin::Builtin::from_name(name)
            .map(ResolvedTool::Builtin)
            .or_else(|| self.hub.by_model_name(name).cloned().map(ResolvedTool::Hub))
    }

    /// What the model is offered: the built-in tools, then the hub's.
    pub fn definitions(&self) -> Vec<ToolDefinition> {
        let mut definitions = builtin::definitions();
        definitions.extend(self.hub.model_tools().map(|(name, tool)| ToolDefinition {
            name: name.to_owned(),
            description: tool.description().unwrap_or_default().to_owned(),
            parameters: tool.input_schema().clone(),
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

#[cfg(test)]
mod tests {
    use switchboard_tools::consumer::naming::SEPARATOR;

    use super::*;

    #[test]
    fn built_in_names_can_never_be_a_hub_tools_model_name() {
        // Every hub tool's model name holds the separator; no built-in does.
        for definition in builtin::definitions() {
            assert!(!definition.name.contains(SEPARATOR), "{}", definition.name);
            assert!(builtin::Builtin::from_name(&definition.name).is_some());
        }
    }
}
